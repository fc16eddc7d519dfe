//! Synthetic release history for benchmarks: renders that take every app to a new version in
//! waves, day after day, with their desired version changes written by ClickHouse itself from
//! the rows of a first render, so that a week of releases of a large fleet takes seconds.

use crate::{Context, PlatformCommitRow, RenderRow, Result, Store};

/// One synthetic render: wave `wave` of `waves` (the clusters whose id hashes to it) of every
/// app moved from the first render's version with suffix `from` to it with suffix `to` (`""`
/// for the first render's version itself).
#[derive(Debug, Clone)]
pub struct SyntheticRelease {
    pub render_id: u64,
    pub rendered_at: u32,
    pub platform_commit: String,
    pub committed_at: u32,
    pub wave: u32,
    pub waves: u32,
    pub from: String,
    pub to: String,
}

/// Writes `releases` in order: each one's desired version changes (from the rows of render
/// `first`, where every pair was desired from nothing), its `renders` row and its platform
/// commit. Returns the change rows written.
pub async fn write_releases(
    store: &Store,
    first: u64,
    releases: &[SyntheticRelease],
) -> Result<u64> {
    // No aliases: one named like a column would be what the WHERE clause reads.
    let sql = "INSERT INTO desired_version_changes SELECT app, toUInt64(?), cluster_id, \
concat(to_version, ?), concat(to_version, ?) \
FROM desired_version_changes WHERE render_id = ? AND from_version = '' \
AND cityHash64(cluster_id) % ? = ?";
    for release in releases {
        store
            .client()
            .query(sql)
            .bind(release.render_id)
            .bind(&release.from)
            .bind(&release.to)
            .bind(first)
            .bind(release.waves)
            .bind(release.wave)
            .with_setting("wait_end_of_query", "1")
            .execute()
            .await
            .context(|| format!("writing the changes of render {}", release.render_id))?;
        store
            .insert_rows(&[PlatformCommitRow {
                platform_commit: release.platform_commit.clone(),
                committed_at: release.committed_at,
            }])
            .await?;
        store
            .insert_rows(&[RenderRow {
                render_id: release.render_id,
                commit: format!("gitops-{}", release.render_id),
                platform_commit: release.platform_commit.clone(),
                rendered_at: release.rendered_at,
                summary: format!("synthetic wave {} of {}", release.wave + 1, release.waves),
                render_groups: 0,
                clusters: 0,
                changed_items: 0,
            }])
            .await?;
    }
    let written: u64 = store
        .client()
        .query("SELECT count() FROM desired_version_changes WHERE render_id > ?")
        .bind(first)
        .fetch_one()
        .await
        .context(|| "counting the synthetic changes".to_owned())?;
    Ok(written)
}
