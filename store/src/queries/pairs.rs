//! The classified pairs: every (cluster, app) pair that is desired or observed, with the
//! inputs of its classification and its drift state by [`drift_state_expression`].

use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::state::ObjectKind;
use fleetscope_model::{DriftPolicy, Timestamp};
use serde::{Deserialize, Serialize};

use super::clusters::{INVENTORY_CURRENT, LAST_SEEN};
use super::observed::OBSERVED_ORDER;
use crate::drift_sql::drift_state_expression;
use crate::{Context, Result, Store};

/// Current membership: each cluster's render group, the render of its membership row
/// (`member_render`) and that row's since set (`''` for none), removed clusters left out.
const MEMBERSHIP: &str = "SELECT cluster_id, current_group AS render_group, member_render, since_set FROM (\
SELECT cluster_id, argMax(render_group, render_id) AS current_group, argMax(removed, render_id) AS member_removed, \
max(render_id) AS member_render FROM render_group_members GROUP BY cluster_id\
) AS members ANY LEFT JOIN (\
SELECT cluster_id, max(render_id) AS member_render, argMax(since_set, render_id) AS since_set \
FROM member_since_sets GROUP BY cluster_id\
) AS carried USING (cluster_id, member_render) WHERE member_removed = 0";

/// Current desired rows per render group and app, with the render that wrote each
/// (`d_render`), removed apps left out.
const DESIRED_CURRENT: &str = "SELECT render_group, app, argMax(version, render_id) AS d_version, \
argMax(content_hash, render_id) AS d_hash, argMax(desired_since, render_id) AS d_since, \
max(render_id) AS d_render, argMax(removed, render_id) AS d_removed \
FROM desired_latest GROUP BY render_group, app HAVING d_removed = 0";

/// Every desired (cluster, app) pair with its version, hash and `d_since`: the render group's
/// `desired_since`, or the cluster's own from its since set when the group's row is not newer
/// than the cluster's membership (the one rule of docs/data-model.md, "Desired since", that the
/// hub's index applies too).
fn desired_pairs_sql() -> String {
    format!(
        "SELECT cluster_id, app, 1 AS has_desired, d_version, d_hash, \
if(d_render <= member_render AND toUInt32(carried_since) != 0, carried_since, group_since) AS d_since \
FROM (\
SELECT cluster_id, app, d_version, d_hash, d_since AS group_since, d_render, member_render, since_set \
FROM ({MEMBERSHIP}) AS membership ALL INNER JOIN ({DESIRED_CURRENT}) AS desired USING render_group\
) AS placed ANY LEFT JOIN (\
SELECT since_set, app, desired_since AS carried_since FROM since_sets\
) AS carried USING (since_set, app)"
    )
}

/// Every (cluster, app) pair that is desired or observed, with the columns the drift
/// expression reads (except the parameters).
fn pairs_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        let primary_kinds = ObjectKind::ALL
            .iter()
            .filter(|kind| kind.is_app_object())
            .map(|kind| format!("'{}'", kind.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "SELECT cluster_id, app, has_desired, has_observed, d_version, d_hash, toInt64(toUInt32(d_since)) AS d_since_s, \
o_version, o_hash, o_health, o_sync, o_transitioned_s \
FROM (\
{desired_pairs}\
) AS desired_pairs ALL FULL OUTER JOIN (\
SELECT cluster_id, obj_app AS app, 1 AS has_observed, argMax(obj_version, obj_seq) AS o_version, \
argMax(obj_hash, obj_seq) AS o_hash, argMax(obj_health, obj_seq) AS o_health, argMax(obj_sync, obj_seq) AS o_sync, \
toInt64(toUInt32(argMax(obj_transitioned_at, obj_seq))) AS o_transitioned_s \
FROM (\
SELECT cluster_id, object_kind, object_namespace, object_name, argMax(app, {OBSERVED_ORDER}) AS obj_app, \
argMax(version, {OBSERVED_ORDER}) AS obj_version, argMax(content_hash, {OBSERVED_ORDER}) AS obj_hash, \
argMax(health, {OBSERVED_ORDER}) AS obj_health, argMax(sync, {OBSERVED_ORDER}) AS obj_sync, \
argMax(transitioned_at, {OBSERVED_ORDER}) AS obj_transitioned_at, argMax(deleted, {OBSERVED_ORDER}) AS obj_deleted, \
max(seq) AS obj_seq \
FROM observed_latest WHERE object_kind IN ({primary_kinds}) \
GROUP BY cluster_id, object_kind, object_namespace, object_name\
) AS objects WHERE obj_app != '' AND obj_deleted = 0 GROUP BY cluster_id, obj_app\
) AS observed_pairs USING (cluster_id, app)",
            desired_pairs = desired_pairs_sql(),
        )
    })
}

/// Pairs of current clusters with everything classification needs, selecting `columns` (any
/// of the pairs', the inventory's and `last_seen_s`, `now_s`, `grace_s`, `stale_s`) and the
/// drift `state` last. `now`, `grace` and `stale` are integer expressions for the moment
/// classified at (seconds) and the [`DriftPolicy`]: `?` in the store's own queries, bound in
/// that order.
pub(crate) fn classified_pairs_sql(columns: &str, now: &str, grace: &str, stale: &str) -> String {
    format!(
        "SELECT {columns}, {expression} AS state \
FROM (\
SELECT *, toInt64(toUInt32(last_seen)) AS last_seen_s, toInt64({now}) AS now_s, toInt64({grace}) AS grace_s, toInt64({stale}) AS stale_s \
FROM (\
SELECT * FROM ({pairs}) AS pairs ALL INNER JOIN ({INVENTORY_CURRENT}) AS inventory USING cluster_id\
) AS current_pairs ALL LEFT JOIN ({LAST_SEEN}) AS seen USING cluster_id\
)",
        expression = drift_state_expression(),
        pairs = pairs_sql(),
    )
}

/// The columns the store's own pair queries read from [`classified_pairs_sql`].
pub(super) const PAIR_KEY_COLUMNS: &str = "cluster_id, app, group_prefixes";

/// [`classified_pairs_sql`] with the store's columns and its parameters as `?`.
fn classified_pairs_bound_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| classified_pairs_sql(PAIR_KEY_COLUMNS, "?", "?", "?"))
}

/// A query over [`classified_pairs_bound_sql`] with its three parameters bound, in their order.
pub(super) fn classified_pairs_query(
    store: &Store,
    sql: &str,
    now: Timestamp,
    policy: &DriftPolicy,
) -> Query {
    store
        .client()
        .query(sql)
        .bind(now.seconds())
        .bind(policy.progress_grace_seconds)
        .bind(policy.stale_after_seconds)
}

/// One (cluster, app) pair and its drift state.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct PairStateRow {
    pub cluster_id: String,
    pub app: String,
    pub state: String,
}

/// One cluster's pairs with their drift state.
pub fn cluster_pair_states_query(
    store: &Store,
    cluster_id: &str,
    now: Timestamp,
    policy: &DriftPolicy,
) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "SELECT cluster_id, app, state FROM ({}) WHERE cluster_id = ? ORDER BY cluster_id, app",
            classified_pairs_bound_sql()
        )
    });
    classified_pairs_query(store, sql, now, policy).bind(cluster_id)
}

/// Every pair of current clusters with its drift state.
pub fn all_pair_states_query(store: &Store, now: Timestamp, policy: &DriftPolicy) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "SELECT cluster_id, app, state FROM ({}) ORDER BY cluster_id, app",
            classified_pairs_bound_sql()
        )
    });
    classified_pairs_query(store, sql, now, policy)
}

impl Store {
    /// Every (cluster, app) pair of current clusters with its drift state, ordered.
    pub async fn drift_pairs(
        &self,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> Result<Vec<PairStateRow>> {
        all_pair_states_query(self, now, policy)
            .fetch_all()
            .await
            .context(|| "reading drift pairs".to_owned())
    }

    /// One cluster's pairs with their drift state.
    pub async fn cluster_drift(
        &self,
        cluster_id: &str,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> Result<Vec<PairStateRow>> {
        cluster_pair_states_query(self, cluster_id, now, policy)
            .fetch_all()
            .await
            .context(|| format!("reading drift of cluster {cluster_id}"))
    }
}
