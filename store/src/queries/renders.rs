//! Renders: the last render, the renders in a time range, the markers that tell the hub a
//! render or the inventory changed (or that a render is still being published), what each
//! render changed per cluster, and when platform commits were made.

use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::Timestamp;
use serde::{Deserialize, Serialize};

use crate::{to_datetime, Context, Result, Store};

/// The GitOps commit of the newest render recorded (one row; empty when there is none).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct LastRenderRow {
    pub commit: String,
}

/// The GitOps commit of the newest render recorded.
pub fn last_render_query(store: &Store) -> Query {
    store
        .client()
        .query("SELECT argMax(commit, render_id) AS last_commit FROM renders")
}

/// Renders in a time range, newest first, at most `limit`, selecting `fields`. `from` and `to`
/// are `DateTime` expressions (the range includes `from`, not `to`), `limit` an integer
/// expression: `toDateTime(?)` and `?` in the store's own query.
pub(crate) fn renders_between_sql(fields: &str, from: &str, to: &str, limit: &str) -> String {
    format!(
        "SELECT {fields} FROM renders WHERE rendered_at >= {from} AND rendered_at < {to} \
ORDER BY render_id DESC LIMIT 1 BY render_id LIMIT {limit}"
    )
}

/// Renders in a time range, newest first.
pub fn renders_between_query(store: &Store, from: Timestamp, to: Timestamp, limit: u64) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql =
        SQL.get_or_init(|| renders_between_sql("?fields", "toDateTime(?)", "toDateTime(?)", "?"));
    store
        .client()
        .query(sql)
        .bind(to_datetime(from))
        .bind(to_datetime(to))
        .bind(limit)
}

/// Change markers for the tables the hub reloads whole: the newest render, and the inventory's
/// newest version and row count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ChangeMarkers {
    pub last_render: u64,
    pub inventory_version: u64,
    pub inventory_rows: u64,
}

/// What one render wrote (`render_contents`).
pub fn render_contents_query(store: &Store, render_id: u64) -> Query {
    store
        .client()
        .query("SELECT ?fields FROM render_contents WHERE render_id = ? ORDER BY render_id LIMIT 1")
        .bind(render_id)
}

/// The match rules of the newest render that published any.
pub fn latest_match_rules_query(store: &Store) -> Query {
    store
        .client()
        .query("SELECT ?fields FROM match_rules ORDER BY render_id DESC LIMIT 1")
}

/// How many version change rows each render in `(after, until]` wrote, by render.
pub fn render_change_counts_query(store: &Store, after: u64, until: u64) -> Query {
    store
        .client()
        .query(
            "SELECT ?fields FROM render_change_counts WHERE render_id > ? AND render_id <= ? \
ORDER BY render_id LIMIT 1 BY render_id",
        )
        .bind(after)
        .bind(until)
}

/// How many distinct version change rows this node holds of each render in `(after, until]`,
/// as [`RenderChangeCountRow`](crate::RenderChangeCountRow)s, by render.
pub fn stored_change_counts_query(store: &Store, after: u64, until: u64) -> Query {
    store
        .client()
        .query(
            "SELECT render_id, toUInt32(count()) AS version_changes FROM \
(SELECT DISTINCT app, render_id, cluster_id FROM desired_version_changes \
WHERE render_id > ? AND render_id <= ?) GROUP BY render_id ORDER BY render_id",
        )
        .bind(after)
        .bind(until)
}

/// The desired version changes of the renders after `after`, of one app or of all, in the
/// table's order (app, render, cluster), each once.
pub fn desired_version_changes_query(store: &Store, app: Option<&str>, after: u64) -> Query {
    match app {
        Some(app) => store
            .client()
            .query(
                "SELECT DISTINCT ?fields FROM desired_version_changes \
WHERE app = ? AND render_id > ? ORDER BY app, render_id, cluster_id",
            )
            .bind(app)
            .bind(after),
        None => store
            .client()
            .query(
                "SELECT DISTINCT ?fields FROM desired_version_changes \
WHERE render_id > ? ORDER BY app, render_id, cluster_id",
            )
            .bind(after),
    }
}

/// A render's platform commit (`renders`).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct RenderOriginRow {
    pub render_id: u64,
    pub platform_commit: String,
    pub rendered_at: u32,
}

/// The platform commits of the renders after `after` ([`RenderOriginRow`]), oldest first.
pub fn render_origins_query(store: &Store, after: u64) -> Query {
    store
        .client()
        .query(
            "SELECT render_id, any(platform_commit) AS platform_commit, \
any(rendered_at) AS rendered_at FROM renders WHERE render_id > ? GROUP BY render_id \
ORDER BY render_id",
        )
        .bind(after)
}

/// When the platform commits of the renders after `after` were made.
pub fn render_commit_times_query(store: &Store, after: u64) -> Query {
    store
        .client()
        .query(
            "SELECT platform_commit, max(committed_at) AS committed_at FROM platform_commits \
WHERE platform_commit IN (SELECT platform_commit FROM renders WHERE render_id > ?) \
GROUP BY platform_commit ORDER BY platform_commit",
        )
        .bind(after)
}

/// The apps with desired version changes after render `after`, by name.
pub fn changed_apps_query(store: &Store, after: u64) -> Query {
    store
        .client()
        .query("SELECT DISTINCT app FROM desired_version_changes WHERE render_id > ? ORDER BY app")
        .bind(after)
}

/// One app's desired version changes of the renders in `(after, until]`, by render and cluster,
/// each once (a row inserted twice is read through).
pub fn app_version_changes_query(store: &Store, app: &str, after: u64, until: u64) -> Query {
    store
        .client()
        .query(
            "SELECT DISTINCT ?fields FROM desired_version_changes \
WHERE app = ? AND render_id > ? AND render_id <= ? ORDER BY render_id, cluster_id",
        )
        .bind(app)
        .bind(after)
        .bind(until)
}

/// The newest row of every rollout the hub recorded (`rollout_records`).
pub fn rollout_records_query(store: &Store) -> Query {
    store.client().query(
        "SELECT ?fields FROM rollout_records \
ORDER BY app, render_id, version, written_ms DESC LIMIT 1 BY app, render_id, version",
    )
}

/// The newest row of every cluster of `app` the hub recorded (`rollout_clusters`).
pub fn rollout_clusters_query(store: &Store, app: &str) -> Query {
    store
        .client()
        .query(
            "SELECT ?fields FROM rollout_clusters WHERE app = ? \
ORDER BY cluster_id, written_ms DESC LIMIT 1 BY cluster_id",
        )
        .bind(app)
}

/// When `platform_commit` was made, if a render recorded it.
pub fn platform_commit_query(store: &Store, platform_commit: &str) -> Query {
    store
        .client()
        .query("SELECT ?fields FROM platform_commits WHERE platform_commit = ? LIMIT 1")
        .bind(platform_commit)
}

/// The change markers of the tables the hub reloads whole.
pub fn change_markers_query(store: &Store) -> Query {
    store.client().query(
        "SELECT (SELECT max(render_id) FROM renders) AS last_render, \
(SELECT max(version) FROM clusters) AS inventory_version, (SELECT count() FROM clusters) AS inventory_rows",
    )
}

/// The newest render any row of the renderer's tables belongs to, per table. A number above
/// the newest row of `renders` (written last) means a render is being published: some of its
/// rows are in, others may not be yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct NewestRenderRows {
    pub desired: u64,
    pub members: u64,
    pub reason_sets: u64,
    pub reason_members: u64,
    pub inventory: u64,
    pub member_since_sets: u64,
}

impl NewestRenderRows {
    /// The highest of them.
    pub fn newest(&self) -> u64 {
        [
            self.desired,
            self.members,
            self.reason_sets,
            self.reason_members,
            self.inventory,
            self.member_since_sets,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }
}

/// The newest render each of the renderer's tables holds rows of.
pub fn newest_render_rows_query(store: &Store) -> Query {
    store.client().query(
        "SELECT (SELECT max(render_id) FROM desired_latest) AS desired, \
(SELECT max(render_id) FROM render_group_members) AS members, \
(SELECT max(render_id) FROM reason_sets) AS reason_sets, \
(SELECT max(render_id) FROM reason_set_members) AS reason_members, \
(SELECT max(version) FROM clusters) AS inventory, \
(SELECT max(render_id) FROM member_since_sets) AS member_since_sets",
    )
}

impl Store {
    /// The GitOps commit of the newest render whose desired state was published, if any.
    pub async fn last_render_commit(&self) -> Result<Option<String>> {
        let row: LastRenderRow = last_render_query(self)
            .fetch_one()
            .await
            .context(|| "reading the last render".to_owned())?;
        Ok(Some(row.commit).filter(|c| !c.is_empty()))
    }

    /// Renders in `[from, to)`, newest first, at most `limit`.
    pub async fn renders_between(
        &self,
        from: Timestamp,
        to: Timestamp,
        limit: u64,
    ) -> Result<Vec<crate::RenderRow>> {
        renders_between_query(self, from, to, limit)
            .fetch_all()
            .await
            .context(|| "reading renders".to_owned())
    }

    /// The desired version changes of the renders after `after` (see
    /// [`desired_version_changes_query`]).
    pub async fn desired_version_changes(
        &self,
        app: Option<&str>,
        after: u64,
    ) -> Result<Vec<crate::DesiredVersionChangeRow>> {
        desired_version_changes_query(self, app, after)
            .fetch_all()
            .await
            .context(|| "reading desired version changes".to_owned())
    }

    /// Where each render after `after` came from, oldest first: when it was made, its platform
    /// commit and when that was made (`None` when no time was recorded for it).
    pub async fn render_origins(&self, after: u64) -> Result<Vec<(RenderOriginRow, Option<u32>)>> {
        let what = || format!("reading the platform commits of the renders after {after}");
        let origins: Vec<RenderOriginRow> = render_origins_query(self, after)
            .fetch_all()
            .await
            .context(what)?;
        let times: Vec<crate::PlatformCommitRow> = render_commit_times_query(self, after)
            .fetch_all()
            .await
            .context(what)?;
        let times: std::collections::HashMap<String, u32> = times
            .into_iter()
            .map(|t| (t.platform_commit, t.committed_at))
            .collect();
        Ok(origins
            .into_iter()
            .map(|o| {
                let at = times.get(&o.platform_commit).copied();
                (o, at)
            })
            .collect())
    }

    /// Streams the desired version changes of the renders in `(after, until]`, in the order
    /// (app, render, cluster), to `each`, one app at a time (each app's rows are one range of
    /// the table's key, made distinct and sorted by the server on their own). Returns how many
    /// rows came.
    pub async fn desired_version_changes_each(
        &self,
        after: u64,
        until: u64,
        mut each: impl FnMut(crate::DesiredVersionChangeRow),
    ) -> Result<u64> {
        let what = || format!("reading the desired version changes of the renders after {after}");
        let apps: Vec<String> = changed_apps_query(self, after)
            .fetch_all::<String>()
            .await
            .context(what)?;
        let mut rows = 0;
        for app in apps {
            let mut cursor = app_version_changes_query(self, &app, after, until)
                .fetch::<crate::DesiredVersionChangeRow>()
                .context(what)?;
            while let Some(row) = cursor.next().await.context(what)? {
                rows += 1;
                each(row);
            }
        }
        Ok(rows)
    }

    /// When `platform_commit` was made (seconds since the epoch), if a render recorded it.
    pub async fn platform_committed_at(&self, platform_commit: &str) -> Result<Option<u32>> {
        let row: Option<crate::PlatformCommitRow> = platform_commit_query(self, platform_commit)
            .fetch_optional()
            .await
            .context(|| format!("reading when platform commit {platform_commit} was made"))?;
        Ok(row.map(|r| r.committed_at))
    }

    /// How many version change rows each render in `(after, until]` wrote, for the renders
    /// whose `render_change_counts` row this store's node holds.
    pub async fn render_change_counts(
        &self,
        after: u64,
        until: u64,
    ) -> Result<Vec<crate::RenderChangeCountRow>> {
        render_change_counts_query(self, after, until)
            .fetch_all()
            .await
            .context(|| format!("reading how many version changes the renders after {after} wrote"))
    }

    /// How many distinct version change rows this store's node holds of each render in
    /// `(after, until]` (renders with none left out).
    pub async fn stored_change_counts(
        &self,
        after: u64,
        until: u64,
    ) -> Result<Vec<crate::RenderChangeCountRow>> {
        stored_change_counts_query(self, after, until)
            .fetch_all()
            .await
            .context(|| format!("counting the version changes held of the renders after {after}"))
    }

    /// The newest row of every rollout the hub recorded.
    pub async fn rollout_record_rows(&self) -> Result<Vec<crate::RolloutRecordRow>> {
        rollout_records_query(self)
            .fetch_all()
            .await
            .context(|| "reading the recorded rollouts".to_owned())
    }

    /// The newest row of every cluster of `app` the hub recorded.
    pub async fn rollout_cluster_rows(&self, app: &str) -> Result<Vec<crate::RolloutClusterRow>> {
        rollout_clusters_query(self, app)
            .fetch_all()
            .await
            .context(|| format!("reading the recorded rollout moments of {app}"))
    }

    /// The match rules of the newest render that published any (none before the first).
    pub async fn latest_match_rules(&self) -> Result<Option<crate::rows::MatchRulesRow>> {
        latest_match_rules_query(self)
            .fetch_optional()
            .await
            .context(|| "reading the match rules".to_owned())
    }

    /// What render `render_id` wrote, when this store's node holds its `render_contents` row.
    pub async fn render_contents(
        &self,
        render_id: u64,
    ) -> Result<Option<crate::rows::RenderContentsRow>> {
        render_contents_query(self, render_id)
            .fetch_optional()
            .await
            .context(|| format!("reading what render {render_id} wrote"))
    }

    /// The change markers of the tables the hub reloads whole.
    pub async fn change_markers(&self) -> Result<ChangeMarkers> {
        change_markers_query(self)
            .fetch_one()
            .await
            .context(|| "reading change markers".to_owned())
    }

    /// The newest render each of the renderer's tables holds rows of (see [`NewestRenderRows`]).
    pub async fn newest_render_rows(&self) -> Result<NewestRenderRows> {
        newest_render_rows_query(self)
            .fetch_one()
            .await
            .context(|| "reading the newest render of each desired-state table".to_owned())
    }
}
