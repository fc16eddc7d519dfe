//! Desired state: the current desired rows of every render group, what one cluster should run,
//! and a render group's desired history.

use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::Timestamp;
use serde::{Deserialize, Serialize};

use super::membership::members_with_since_sets_sql;
use crate::rows::DesiredRow;
use crate::{to_datetime, Context, Result, Store};

/// The current desired row of every (render group, app), removed ones included.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct CurrentDesiredRow {
    pub render_group: String,
    pub app: String,
    pub content_hash: String,
    pub removed: u8,
    pub version: String,
    /// The render that wrote the row.
    pub render_id: u64,
    pub desired_since: u32,
}

/// The current desired row of every (render group, app), removed ones included.
pub fn current_desired_query(store: &Store) -> Query {
    store.client().query(
        "SELECT render_group, app, argMax(content_hash, render_id) AS current_hash, argMax(removed, render_id) AS current_removed, \
argMax(version, render_id) AS current_version, max(render_id) AS current_render, \
argMax(desired_since, render_id) AS current_since \
FROM desired_latest GROUP BY render_group, app ORDER BY render_group, app",
    )
}

/// The current desired row of every (render group, app), removed ones included.
pub fn desired_rows_query(store: &Store) -> Query {
    store.client().query(
        "SELECT ?fields FROM desired_latest ORDER BY render_group, app, render_id DESC LIMIT 1 BY render_group, app",
    )
}

/// The current desired rows of one cluster's render group, each with the time it became
/// desired for that cluster as its `desired_since` (see [`MEMBERSHIP`](super::pairs)'s since set).
pub fn desired_for_cluster_query(store: &Store, cluster_id: &str) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "SELECT render_group, app, render_id, version, content_hash, kind, namespace, reasons, commit, \
if(render_id <= current_render AND toUInt32(carried_since) != 0, carried_since, desired_since) AS cluster_since, \
removed FROM (\
SELECT * FROM (\
SELECT current_group AS render_group, current_render, since_set FROM ({members}) WHERE current_removed = 0\
) AS membership ALL INNER JOIN (\
SELECT * FROM desired_latest WHERE render_group IN (\
SELECT argMax(render_group, render_id) FROM render_group_members WHERE cluster_id = ?) \
ORDER BY app, render_id DESC LIMIT 1 BY app\
) AS desired USING render_group\
) AS placed ANY LEFT JOIN (\
SELECT since_set, app, desired_since AS carried_since FROM since_sets\
) AS carried USING (since_set, app) WHERE removed = 0 ORDER BY app",
            members = members_with_since_sets_sql(
                "(SELECT * FROM render_group_members WHERE cluster_id = ?)",
                "(SELECT * FROM member_since_sets WHERE cluster_id = ?)"
            ),
        )
    });
    store
        .client()
        .query(sql)
        .bind(cluster_id)
        .bind(cluster_id)
        .bind(cluster_id)
}

/// Desired-state changes of one render group (every app, or one) in a time range, oldest
/// first, selecting `fields`. `render_group` and `app` are string expressions (`''` for every
/// app), `from` and `to` `DateTime` expressions (the range includes `from`, not `to`): `?` and
/// `toDateTime(?)` in the store's own query.
pub(crate) fn desired_history_sql(
    fields: &str,
    render_group: &str,
    app: &str,
    from: &str,
    to: &str,
) -> String {
    format!(
        "SELECT {fields} FROM desired_history WHERE render_group = {render_group} AND ({app} = '' OR app = {app}) \
AND desired_since >= {from} AND desired_since < {to} \
ORDER BY render_id, app LIMIT 1 BY render_group, app, render_id"
    )
}

/// Desired-state changes of one render group (every app, or one) in a time range, oldest first.
pub fn desired_history_query(
    store: &Store,
    render_group: &str,
    app: Option<&str>,
    from: Timestamp,
    to: Timestamp,
) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL
        .get_or_init(|| desired_history_sql("?fields", "?", "?", "toDateTime(?)", "toDateTime(?)"));
    store
        .client()
        .query(sql)
        .bind(render_group)
        .bind(app.unwrap_or_default())
        .bind(app.unwrap_or_default())
        .bind(to_datetime(from))
        .bind(to_datetime(to))
}

impl Store {
    /// What the last renders left as desired state, for writing only what changed.
    pub async fn current_desired(&self) -> Result<Vec<CurrentDesiredRow>> {
        current_desired_query(self)
            .fetch_all()
            .await
            .context(|| "reading current desired state".to_owned())
    }

    /// The current desired row of every (render group, app), removed ones included.
    pub async fn desired_rows(&self) -> Result<Vec<DesiredRow>> {
        desired_rows_query(self)
            .fetch_all()
            .await
            .context(|| "reading the current desired state".to_owned())
    }

    /// What one cluster should run: the current desired rows of its render group, each with
    /// the time it became desired for that cluster.
    pub async fn desired_for_cluster(&self, cluster_id: &str) -> Result<Vec<DesiredRow>> {
        desired_for_cluster_query(self, cluster_id)
            .fetch_all()
            .await
            .context(|| format!("reading desired state of cluster {cluster_id}"))
    }

    /// Desired-state changes of one render group (every app, or one) in `[from, to)`.
    pub async fn desired_history(
        &self,
        render_group: &str,
        app: Option<&str>,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<DesiredRow>> {
        desired_history_query(self, render_group, app, from, to)
            .fetch_all()
            .await
            .context(|| format!("reading the desired history of {render_group}"))
    }
}
