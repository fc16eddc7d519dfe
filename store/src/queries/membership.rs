//! Membership: each cluster's current render group with the since set of its membership row,
//! the since sets themselves, and each cluster's reason set.

use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use serde::{Deserialize, Serialize};

use crate::{Context, Result, Store};

/// Each cluster's current render group, removed memberships included, with the render of its
/// membership row and that row's since set (`""` for none).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct CurrentMemberRow {
    pub cluster_id: String,
    pub render_group: String,
    pub removed: u8,
    pub render_id: u64,
    pub since_set: String,
}

/// Each cluster's current render group, removed memberships included: `cluster_id`,
/// `current_group`, `current_removed`.
pub(crate) const CURRENT_MEMBERS: &str = "SELECT cluster_id, argMax(render_group, render_id) AS current_group, argMax(removed, render_id) AS current_removed \
FROM render_group_members GROUP BY cluster_id";

/// Each cluster's render group among the membership rows of `rows` (a table or a subquery
/// with `cluster_id`, `render_group`, `render_id`, `removed`), removed memberships included,
/// with the render of that row and its since set, the newest of `since_rows` (a table or a
/// subquery with `cluster_id`, `render_id`, `since_set`) when it is of the same render: the
/// columns of [`CurrentMemberRow`].
pub(super) fn members_with_since_sets_sql(rows: &str, since_rows: &str) -> String {
    format!(
        "SELECT cluster_id, current_group, current_removed, current_render, since_set FROM (\
SELECT cluster_id, argMax(render_group, render_id) AS current_group, argMax(removed, render_id) AS current_removed, \
max(render_id) AS current_render FROM {rows} GROUP BY cluster_id\
) AS members ANY LEFT JOIN (\
SELECT cluster_id, max(render_id) AS current_render, argMax(since_set, render_id) AS since_set \
FROM {since_rows} GROUP BY cluster_id\
) AS carried USING (cluster_id, current_render)"
    )
}

/// Each cluster's newest membership row among `rows` (a table or a subquery with
/// `cluster_id`, `render_group`, `render_id`, `removed`): the columns of [`CurrentMemberRow`],
/// its since set left empty for [`with_since_sets`] to fill.
pub(crate) fn members_sql(rows: &str) -> String {
    format!(
        "SELECT cluster_id, argMax(render_group, render_id) AS current_group, argMax(removed, render_id) AS current_removed, \
max(render_id) AS current_render, '' AS no_since_set FROM {rows} GROUP BY cluster_id ORDER BY cluster_id"
    )
}

/// Each cluster's newest row among `since_rows` (a table or a subquery with `cluster_id`,
/// `render_id`, `since_set`): the columns of [`crate::MemberSinceRow`].
pub(crate) fn newest_since_rows_sql(since_rows: &str) -> String {
    format!(
        "SELECT cluster_id, max(render_id) AS newest_render, argMax(since_set, render_id) AS newest_set \
FROM {since_rows} GROUP BY cluster_id ORDER BY cluster_id"
    )
}

/// Gives each membership the since set of `since`, each cluster's newest since row, where that
/// row is of the membership's render. The two reads run side by side and are matched here,
/// which costs less than ClickHouse 18.16's join of the two.
pub(crate) fn with_since_sets(
    mut members: Vec<CurrentMemberRow>,
    since: Vec<crate::MemberSinceRow>,
) -> Vec<CurrentMemberRow> {
    let since: std::collections::HashMap<String, (u64, String)> = since
        .into_iter()
        .map(|row| (row.cluster_id, (row.render_id, row.since_set)))
        .collect();
    for member in &mut members {
        if let Some((render, set)) = since.get(&member.cluster_id) {
            if *render == member.render_id {
                member.since_set.clone_from(set);
            }
        }
    }
    members
}

/// Each cluster's newest row of `render_group_members`, its since set left empty.
pub fn current_members_query(store: &Store) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| members_sql("render_group_members"));
    store.client().query(sql)
}

/// Each cluster's newest row of `member_since_sets`.
pub fn current_member_since_query(store: &Store) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| newest_since_rows_sql("member_since_sets"));
    store.client().query(sql)
}

/// Every since set's rows (a set's rows never change; duplicates read once).
pub fn since_set_rows_query(store: &Store) -> Query {
    store
        .client()
        .query("SELECT ?fields FROM since_sets ORDER BY since_set, app LIMIT 1 BY since_set, app")
}

/// Each cluster's current reason set, removed memberships included.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct CurrentReasonMemberRow {
    pub cluster_id: String,
    pub reason_set: String,
    pub removed: u8,
}

/// Each cluster's current reason set, removed memberships included.
pub fn current_reason_members_query(store: &Store) -> Query {
    store.client().query(
        "SELECT cluster_id, argMax(reason_set, render_id) AS current_reason_set, argMax(removed, render_id) AS current_removed \
FROM reason_set_members GROUP BY cluster_id ORDER BY cluster_id",
    )
}

/// The current row of every (reason set, app), removed ones included.
pub fn reason_set_rows_query(store: &Store) -> Query {
    store.client().query(
        "SELECT ?fields FROM reason_sets ORDER BY reason_set, app, render_id DESC LIMIT 1 BY reason_set, app",
    )
}

impl Store {
    /// Each cluster's current render group (removed memberships included, flagged), with the
    /// render of its membership row and that row's since set.
    pub async fn current_members(&self) -> Result<Vec<CurrentMemberRow>> {
        let (members, since) = tokio::try_join!(
            async {
                current_members_query(self)
                    .fetch_all()
                    .await
                    .context(|| "reading render group membership".to_owned())
            },
            async {
                current_member_since_query(self)
                    .fetch_all()
                    .await
                    .context(|| "reading the membership since sets".to_owned())
            },
        )?;
        Ok(with_since_sets(members, since))
    }

    /// Every since set's rows, by set and app.
    pub async fn since_set_rows(&self) -> Result<Vec<crate::SinceSetRow>> {
        since_set_rows_query(self)
            .fetch_all()
            .await
            .context(|| "reading since sets".to_owned())
    }

    /// Each cluster's current reason set (removed ones included, flagged), by cluster.
    pub async fn current_reason_members(&self) -> Result<Vec<CurrentReasonMemberRow>> {
        current_reason_members_query(self)
            .fetch_all()
            .await
            .context(|| "reading reason set membership".to_owned())
    }

    /// The current row of every (reason set, app) (removed ones included, flagged).
    pub async fn reason_set_rows(&self) -> Result<Vec<crate::ReasonSetRow>> {
        reason_set_rows_query(self)
            .fetch_all()
            .await
            .context(|| "reading reason sets".to_owned())
    }
}
