//! The read queries the services need. Each is built by a `*_query` function (so the SQL
//! conformance test can render it with sample parameters) and run by a method on [`Store`].
//!
//! The texts the dashboards' panels share with these queries are written once, by `*_sql`
//! functions that take each input as a SQL expression: here always `?` (or `toDateTime(?)`),
//! with the value bound; in [`crate::panel_sql`] the expression Grafana fills in.
//!
//! Tables fed by `ReplacingMergeTree` may still hold superseded or duplicate rows until a
//! merge; every query here reads through them (`argMax` by version, `LIMIT 1 BY`), so results
//! never depend on when ClickHouse merged.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::state::ObjectKind;
use fleetscope_model::{DriftPolicy, DriftState, Timestamp};
use serde::{Deserialize, Serialize};

use crate::drift_sql::drift_state_expression;
use crate::rows::{DesiredRow, HeartbeatRow, ObservedRow};
use crate::{to_datetime, Context, Result, Store};

/// The order in which one object's observed rows supersede each other, highest last: the change
/// number, then the collector's arrival time, then the content, so that two different changes
/// with the same number resolve the same way on every read (the hub's index compares the same
/// columns in the same order). A tuple, for `argMax`.
pub const OBSERVED_ORDER: &str =
    "(seq, received_at, deleted, health, sync, version, content_hash, \
applied_revision, app, reason, message, transitioned_at, observed_at)";

/// [`OBSERVED_ORDER`] for `ORDER BY`, newest first.
pub(crate) const OBSERVED_ORDER_DESC: &str =
    "seq DESC, received_at DESC, deleted DESC, health DESC, sync DESC, \
version DESC, content_hash DESC, applied_revision DESC, app DESC, reason DESC, message DESC, \
transitioned_at DESC, observed_at DESC";

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

/// Current clusters of the inventory, removed clusters left out: `cluster_id`,
/// `group_prefixes`, `environment`.
pub(crate) const INVENTORY_CURRENT: &str = "SELECT cluster_id, current_prefixes AS group_prefixes, current_environment AS environment FROM (\
SELECT cluster_id, argMax(group_prefixes, version) AS current_prefixes, \
argMax(environment, version) AS current_environment, argMax(removed, version) AS cluster_removed \
FROM clusters GROUP BY cluster_id) WHERE cluster_removed = 0";

/// Last heartbeat per cluster.
const LAST_SEEN: &str =
    "SELECT cluster_id, max(seen_at) AS last_seen FROM heartbeats GROUP BY cluster_id";

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
pub(crate) const PAIR_KEY_COLUMNS: &str = "cluster_id, app, group_prefixes";

/// [`classified_pairs_sql`] with the store's columns and its parameters as `?`.
fn classified_pairs_bound_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| classified_pairs_sql(PAIR_KEY_COLUMNS, "?", "?", "?"))
}

/// A query over [`classified_pairs_bound_sql`] with its three parameters bound, in their order.
fn classified_pairs_query(store: &Store, sql: &str, now: Timestamp, policy: &DriftPolicy) -> Query {
    store
        .client()
        .query(sql)
        .bind(now.seconds())
        .bind(policy.progress_grace_seconds)
        .bind(policy.stale_after_seconds)
}

/// App instances per group (every level, `""` for the fleet) and drift state.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct PairCountRow {
    pub group_path: String,
    pub state: String,
    pub pairs: u64,
}

/// Clusters per group (every level, `""` for the fleet), and how many of them are stale.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ClusterCountsRow {
    pub group_path: String,
    pub clusters: u64,
    pub stale_clusters: u64,
}

/// One (cluster, app) pair and its drift state.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct PairStateRow {
    pub cluster_id: String,
    pub app: String,
    pub state: String,
}

/// A cluster and when it was last seen (0 = never).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct LastSeenRow {
    pub cluster_id: String,
    pub last_seen: u32,
}

/// The rollup of one group: clusters, stale clusters, and app instances per drift state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupRollup {
    /// `""` is the whole fleet.
    pub group_path: String,
    pub depth: usize,
    pub clusters: u64,
    pub stale_clusters: u64,
    pub pairs: BTreeMap<DriftState, u64>,
}

impl GroupRollup {
    pub fn reporting_clusters(&self) -> u64 {
        self.clusters - self.stale_clusters
    }

    pub fn count(&self, state: DriftState) -> u64 {
        self.pairs.get(&state).copied().unwrap_or(0)
    }

    pub fn total_pairs(&self) -> u64 {
        self.pairs.values().sum()
    }
}

/// App instances per group (every level, `''` for the fleet) and drift state: `group_path`,
/// `state`, `pairs`. `now`, `grace` and `stale` as for [`classified_pairs_sql`].
pub(crate) fn pair_counts_sql(now: &str, grace: &str, stale: &str) -> String {
    format!(
        "SELECT group_path, state, count() AS pairs FROM (\
SELECT arrayJoin(arrayConcat([''], group_prefixes)) AS group_path, state FROM ({})\
) GROUP BY group_path, state ORDER BY group_path, state",
        classified_pairs_sql(PAIR_KEY_COLUMNS, now, grace, stale)
    )
}

pub fn pair_counts_query(store: &Store, now: Timestamp, policy: &DriftPolicy) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| pair_counts_sql("?", "?", "?"));
    classified_pairs_query(store, sql, now, policy)
}

/// Clusters per group (every level, `''` for the fleet) and how many are stale: `group_path`,
/// `clusters`, `stale_clusters`. `now` and `stale` are integer expressions (seconds): `?` in
/// the store's own query, bound in that order.
pub(crate) fn cluster_counts_sql(now: &str, stale: &str) -> String {
    format!(
        "SELECT group_path, count() AS clusters, \
countIf(last_seen_s = 0 OR now_s - last_seen_s > stale_s) AS stale_clusters FROM (\
SELECT arrayJoin(arrayConcat([''], group_prefixes)) AS group_path, toInt64(toUInt32(last_seen)) AS last_seen_s, \
toInt64({now}) AS now_s, toInt64({stale}) AS stale_s \
FROM ({INVENTORY_CURRENT}) AS inventory ALL LEFT JOIN ({LAST_SEEN}) AS seen USING cluster_id\
) GROUP BY group_path ORDER BY group_path"
    )
}

pub fn cluster_counts_query(store: &Store, now: Timestamp, policy: &DriftPolicy) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| cluster_counts_sql("?", "?"));
    store
        .client()
        .query(sql)
        .bind(now.seconds())
        .bind(policy.stale_after_seconds)
}

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

/// The latest row of every object one cluster reported (deleted ones included), selecting
/// `fields`; `cluster` is a string expression (`?` in the store's own query).
pub(crate) fn observed_for_cluster_sql(fields: &str, cluster: &str) -> String {
    format!(
        "SELECT {fields} FROM observed_latest WHERE cluster_id = {cluster} \
ORDER BY cluster_id, object_kind, object_namespace, object_name, {OBSERVED_ORDER_DESC} \
LIMIT 1 BY cluster_id, object_kind, object_namespace, object_name"
    )
}

pub fn observed_for_cluster_query(store: &Store, cluster_id: &str) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| observed_for_cluster_sql("?fields", "?"));
    store.client().query(sql).bind(cluster_id)
}

/// The latest observed row of every object of several clusters (deleted ones included).
pub fn observed_for_clusters_query(store: &Store, cluster_ids: &[&str]) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "SELECT ?fields FROM observed_latest PREWHERE cluster_id IN (SELECT arrayJoin(?)) \
ORDER BY cluster_id, object_kind, object_namespace, object_name, {OBSERVED_ORDER_DESC} \
LIMIT 1 BY cluster_id, object_kind, object_namespace, object_name"
        )
    });
    store.client().query(sql).bind(cluster_ids)
}

/// The key and `seq` of one object whose latest observed row is not a deletion.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct LiveObjectRow {
    pub cluster_id: String,
    pub object_kind: String,
    pub object_namespace: String,
    pub object_name: String,
    pub seq: u64,
}

/// Live objects of several clusters: only keys and `seq`, so a snapshot can tell cheaply
/// whether anything it does not list is still stored.
pub fn live_objects_query(store: &Store, cluster_ids: &[&str]) -> Query {
    // `IN (SELECT arrayJoin(?))`: 18.16 refuses an array literal after IN; this form uses the
    // primary key. PREWHERE: a granule (8192 rows) holds many clusters; 18.16 then reads the
    // other columns only where cluster_id matched (a quarter of the bytes, half the time).
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "SELECT cluster_id, object_kind, object_namespace, object_name, live_seq AS seq FROM (\
SELECT cluster_id, object_kind, object_namespace, object_name, max(seq) AS live_seq, \
argMax(deleted, {OBSERVED_ORDER}) AS live_deleted FROM observed_latest \
PREWHERE cluster_id IN (SELECT arrayJoin(?)) \
GROUP BY cluster_id, object_kind, object_namespace, object_name\
) WHERE live_deleted = 0 ORDER BY cluster_id, object_kind, object_namespace, object_name"
        )
    });
    store.client().query(sql).bind(cluster_ids)
}

/// One cluster's observed transitions in a time range, each change once, oldest first,
/// selecting `fields`. `cluster` is a string expression, `from` and `to` `DateTime` expressions
/// (the range includes `from`, not `to`): `?` and `toDateTime(?)` in the store's own query.
pub(crate) fn observed_history_sql(fields: &str, cluster: &str, from: &str, to: &str) -> String {
    format!(
        "SELECT {fields} FROM observed_transitions \
WHERE cluster_id = {cluster} AND observed_at >= {from} AND observed_at < {to} \
ORDER BY observed_at, seq, object_kind, object_namespace, object_name \
LIMIT 1 BY cluster_id, object_kind, object_namespace, object_name, seq"
    )
}

pub fn observed_history_query(
    store: &Store,
    cluster_id: &str,
    from: Timestamp,
    to: Timestamp,
) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql =
        SQL.get_or_init(|| observed_history_sql("?fields", "?", "toDateTime(?)", "toDateTime(?)"));
    store
        .client()
        .query(sql)
        .bind(cluster_id)
        .bind(to_datetime(from))
        .bind(to_datetime(to))
}

/// The newest `limit` observed transitions of one cluster in a time range (of one app only when
/// `app` is given), newest first: however busy the cluster was, a page reads this many rows.
pub fn recent_history_query(
    store: &Store,
    cluster_id: &str,
    app: Option<&str>,
    from: Timestamp,
    to: Timestamp,
    limit: u64,
) -> Query {
    store
        .client()
        .query(
            "SELECT ?fields FROM observed_transitions \
WHERE cluster_id = ? AND observed_at >= toDateTime(?) AND observed_at < toDateTime(?) \
AND (? = '' OR app = ?) \
ORDER BY observed_at DESC, seq DESC, object_kind DESC, object_namespace DESC, object_name DESC \
LIMIT 1 BY cluster_id, object_kind, object_namespace, object_name, seq LIMIT ?",
        )
        .bind(cluster_id)
        .bind(to_datetime(from))
        .bind(to_datetime(to))
        .bind(app.unwrap_or_default())
        .bind(app.unwrap_or_default())
        .bind(limit)
}

/// The current desired rows of one cluster's render group, each with the time it became
/// desired for that cluster as its `desired_since` (see [`MEMBERSHIP`]'s since set).
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

pub fn latest_heartbeats_query(store: &Store) -> Query {
    store.client().query(
        "SELECT ?fields FROM heartbeats ORDER BY cluster_id, seen_at DESC LIMIT 1 BY cluster_id",
    )
}

/// Current clusters not seen within the stale threshold, or never: `cluster_id`,
/// `last_seen_seconds` (0 = never), never seen first, then oldest. `now` and `stale` are
/// integer expressions (seconds): `?` in the store's own query, bound in that order.
pub(crate) fn stale_clusters_sql(now: &str, stale: &str) -> String {
    format!(
        "SELECT cluster_id, toUInt32(last_seen) AS last_seen_seconds FROM (\
SELECT cluster_id, last_seen FROM ({INVENTORY_CURRENT}) AS inventory ALL LEFT JOIN ({LAST_SEEN}) AS seen USING cluster_id\
) WHERE toUInt32(last_seen) = 0 OR toInt64({now}) - toInt64(toUInt32(last_seen)) > toInt64({stale}) \
ORDER BY last_seen_seconds, cluster_id"
    )
}

pub fn stale_clusters_query(
    store: &Store,
    now: Timestamp,
    policy: &DriftPolicy,
    limit: u64,
) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| format!("{} LIMIT ?", stale_clusters_sql("?", "?")));
    store
        .client()
        .query(sql)
        .bind(now.seconds())
        .bind(policy.stale_after_seconds)
        .bind(limit)
}

impl Store {
    /// The drift rollup of every group at every level, the fleet (`""`) first.
    pub async fn drift_rollup(
        &self,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> Result<Vec<GroupRollup>> {
        let (pairs, clusters) = tokio::try_join!(
            async {
                pair_counts_query(self, now, policy)
                    .fetch_all::<PairCountRow>()
                    .await
                    .context(|| "reading drift counts per group".to_owned())
            },
            async {
                cluster_counts_query(self, now, policy)
                    .fetch_all::<ClusterCountsRow>()
                    .await
                    .context(|| "reading cluster counts per group".to_owned())
            },
        )?;
        let mut rollups: BTreeMap<String, GroupRollup> = BTreeMap::new();
        fn entry<'a>(
            rollups: &'a mut BTreeMap<String, GroupRollup>,
            group: &str,
        ) -> &'a mut GroupRollup {
            rollups
                .entry(group.to_owned())
                .or_insert_with(|| GroupRollup {
                    group_path: group.to_owned(),
                    depth: if group.is_empty() {
                        0
                    } else {
                        group.split('/').count()
                    },
                    clusters: 0,
                    stale_clusters: 0,
                    pairs: BTreeMap::new(),
                })
        }
        for row in clusters {
            let rollup = entry(&mut rollups, &row.group_path);
            rollup.clusters = row.clusters;
            rollup.stale_clusters = row.stale_clusters;
        }
        for row in pairs {
            let state = DriftState::parse(&row.state).unwrap_or(DriftState::Unknown);
            *entry(&mut rollups, &row.group_path)
                .pairs
                .entry(state)
                .or_default() += row.pairs;
        }
        Ok(rollups.into_values().collect())
    }

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

    /// The latest observed state of every object on one cluster (deleted objects included, flagged).
    pub async fn observed_for_cluster(&self, cluster_id: &str) -> Result<Vec<ObservedRow>> {
        observed_for_cluster_query(self, cluster_id)
            .fetch_all()
            .await
            .context(|| format!("reading observed state of cluster {cluster_id}"))
    }

    /// [`Store::observed_for_cluster`] for several clusters at once, sorted by cluster.
    pub async fn observed_for_clusters(&self, cluster_ids: &[&str]) -> Result<Vec<ObservedRow>> {
        if cluster_ids.is_empty() {
            return Ok(Vec::new());
        }
        observed_for_clusters_query(self, cluster_ids)
            .fetch_all()
            .await
            .context(|| format!("reading observed state of {} clusters", cluster_ids.len()))
    }

    /// The objects of `cluster_ids` whose latest row is not a deletion, sorted by cluster and key.
    pub async fn live_objects(&self, cluster_ids: &[&str]) -> Result<Vec<LiveObjectRow>> {
        if cluster_ids.is_empty() {
            return Ok(Vec::new());
        }
        live_objects_query(self, cluster_ids)
            .fetch_all()
            .await
            .context(|| format!("reading live objects of {} clusters", cluster_ids.len()))
    }

    /// Observed transitions of one cluster in `[from, to)`, each change once, oldest first.
    pub async fn observed_history(
        &self,
        cluster_id: &str,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<ObservedRow>> {
        observed_history_query(self, cluster_id, from, to)
            .fetch_all()
            .await
            .context(|| format!("reading observed history of cluster {cluster_id}"))
    }

    /// The newest `limit` observed transitions of one cluster (of one app, if given) in a time
    /// range, newest first.
    pub async fn recent_history(
        &self,
        cluster_id: &str,
        app: Option<&str>,
        from: Timestamp,
        to: Timestamp,
        limit: u64,
    ) -> Result<Vec<ObservedRow>> {
        recent_history_query(self, cluster_id, app, from, to, limit)
            .fetch_all()
            .await
            .context(|| format!("reading recent history of cluster {cluster_id}"))
    }

    /// What one cluster should run: the current desired rows of its render group, each with
    /// the time it became desired for that cluster.
    pub async fn desired_for_cluster(&self, cluster_id: &str) -> Result<Vec<DesiredRow>> {
        desired_for_cluster_query(self, cluster_id)
            .fetch_all()
            .await
            .context(|| format!("reading desired state of cluster {cluster_id}"))
    }

    /// The latest heartbeat of every cluster that ever sent one.
    pub async fn latest_heartbeats(&self) -> Result<Vec<HeartbeatRow>> {
        latest_heartbeats_query(self)
            .fetch_all()
            .await
            .context(|| "reading heartbeats".to_owned())
    }

    /// Current clusters not seen within the stale threshold (or never), oldest first.
    pub async fn stale_clusters(
        &self,
        now: Timestamp,
        policy: &DriftPolicy,
        limit: u64,
    ) -> Result<Vec<LastSeenRow>> {
        stale_clusters_query(self, now, policy, limit)
            .fetch_all()
            .await
            .context(|| "reading stale clusters".to_owned())
    }
}

impl GroupRollup {
    /// This rollup as a snapshot row taken at `taken_at`.
    pub fn snapshot_row(&self, taken_at: Timestamp) -> crate::RollupSnapshotRow {
        crate::RollupSnapshotRow {
            taken_at: to_datetime(taken_at),
            group_path: self.group_path.clone(),
            depth: self.depth.min(usize::from(u8::MAX)) as u8,
            clusters: self.clusters,
            stale_clusters: self.stale_clusters,
            in_sync: self.count(DriftState::InSync),
            progressing: self.count(DriftState::Progressing),
            failed: self.count(DriftState::Failed),
            out_of_sync: self.count(DriftState::OutOfSync),
            missing: self.count(DriftState::Missing),
            unexpected: self.count(DriftState::Unexpected),
            stale: self.count(DriftState::Stale),
            unknown: self.count(DriftState::Unknown),
        }
    }
}

/// Rollup snapshots of one group in a time range, oldest first, selecting `fields`. `group` is
/// a string expression (`''` for the fleet), `from` and `to` `DateTime` expressions (the range
/// includes `from`, not `to`): `?` and `toDateTime(?)` in the store's own query.
pub(crate) fn rollup_trend_sql(fields: &str, group: &str, from: &str, to: &str) -> String {
    format!(
        "SELECT {fields} FROM rollup_snapshots \
WHERE group_path = {group} AND taken_at >= {from} AND taken_at < {to} \
ORDER BY taken_at LIMIT 1 BY taken_at"
    )
}

pub fn rollup_trend_query(
    store: &Store,
    group_path: &str,
    from: Timestamp,
    to: Timestamp,
) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql =
        SQL.get_or_init(|| rollup_trend_sql("?fields", "?", "toDateTime(?)", "toDateTime(?)"));
    store
        .client()
        .query(sql)
        .bind(group_path)
        .bind(to_datetime(from))
        .bind(to_datetime(to))
}

impl Store {
    /// Computes the rollup now and stores it as a snapshot of every group down to `max_depth`
    /// (0 = the fleet only). Returns how many rows were written.
    pub async fn take_rollup_snapshot(
        &self,
        now: Timestamp,
        policy: &DriftPolicy,
        max_depth: usize,
    ) -> Result<usize> {
        let rows: Vec<crate::RollupSnapshotRow> = self
            .drift_rollup(now, policy)
            .await?
            .iter()
            .filter(|rollup| rollup.depth <= max_depth)
            .map(|rollup| rollup.snapshot_row(now))
            .collect();
        self.insert_rows(&rows).await?;
        Ok(rows.len())
    }

    /// Snapshots of one group (`""` for the fleet) in `[from, to)`, oldest first.
    pub async fn rollup_trend(
        &self,
        group_path: &str,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<crate::RollupSnapshotRow>> {
        rollup_trend_query(self, group_path, from, to)
            .fetch_all()
            .await
            .context(|| format!("reading rollup trend of {group_path:?}"))
    }
}

/// Ids of every current (not removed) cluster of the inventory.
pub fn known_clusters_query(store: &Store) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!("SELECT cluster_id FROM ({INVENTORY_CURRENT}) ORDER BY cluster_id")
    });
    store.client().query(sql)
}

impl Store {
    /// Ids of every current cluster of the inventory, sorted.
    pub async fn known_clusters(&self) -> Result<Vec<String>> {
        known_clusters_query(self)
            .fetch_all::<String>()
            .await
            .context(|| "reading the cluster inventory".to_owned())
    }
}

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

pub fn current_desired_query(store: &Store) -> Query {
    store.client().query(
        "SELECT render_group, app, argMax(content_hash, render_id) AS current_hash, argMax(removed, render_id) AS current_removed, \
argMax(version, render_id) AS current_version, max(render_id) AS current_render, \
argMax(desired_since, render_id) AS current_since \
FROM desired_latest GROUP BY render_group, app ORDER BY render_group, app",
    )
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
pub(crate) fn members_with_since_sets_sql(rows: &str, since_rows: &str) -> String {
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

/// The GitOps commit of the newest render recorded (one row; empty when there is none).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct LastRenderRow {
    pub commit: String,
}

pub fn last_render_query(store: &Store) -> Query {
    store
        .client()
        .query("SELECT argMax(commit, render_id) AS last_commit FROM renders")
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

    /// What the last renders left as desired state, for writing only what changed.
    pub async fn current_desired(&self) -> Result<Vec<CurrentDesiredRow>> {
        current_desired_query(self)
            .fetch_all()
            .await
            .context(|| "reading current desired state".to_owned())
    }

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
}

// The hub's index: whole current tables, read once at start and then again when they change
// (desired state, membership and inventory), or incrementally (observed state).

/// The current row of every cluster of the inventory (removed ones included: the reader drops them).
pub fn inventory_rows_query(store: &Store) -> Query {
    store.client().query(
        "SELECT ?fields FROM clusters ORDER BY cluster_id, version DESC LIMIT 1 BY cluster_id",
    )
}

/// The current desired row of every (render group, app), removed ones included.
pub fn desired_rows_query(store: &Store) -> Query {
    store.client().query(
        "SELECT ?fields FROM desired_latest ORDER BY render_group, app, render_id DESC LIMIT 1 BY render_group, app",
    )
}

/// Every app object's rows in `observed_latest` (unmerged duplicates included: the reader keeps
/// the highest `seq` per object), received at or after `since`.
pub fn observed_objects_query(store: &Store, since: Timestamp) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let primary_kinds = ObjectKind::ALL
            .iter()
            .filter(|kind| kind.is_app_object())
            .map(|kind| format!("'{}'", kind.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "SELECT ?fields FROM observed_latest WHERE object_kind IN ({primary_kinds}) AND received_at >= toDateTime(?)"
        )
    });
    store.client().query(sql).bind(to_datetime(since))
}

/// Where observed rows are read from (see `Store::observed_objects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObservedSource {
    Latest,
    Arrivals,
}

/// App-object rows that arrived at or after `since`, from `observed_arrivals` (a range of its
/// sort key, so the cost follows what arrived, not the size of the fleet). Complete only for
/// arrivals younger than `ARRIVALS_KEEP_HOURS`.
pub fn observed_arrivals_query(store: &Store, since: Timestamp) -> Query {
    store
        .client()
        .query("SELECT ?fields FROM observed_arrivals WHERE received_at >= toDateTime(?)")
        .bind(to_datetime(since))
}

/// App-object rows stamped in `[from, until)`, from `observed_arrivals`: the reads between two
/// arrival horizons (see `arrival_horizons_query`).
pub fn observed_arrivals_between_query(store: &Store, from: Timestamp, until: Timestamp) -> Query {
    store
        .client()
        .query(
            "SELECT ?fields FROM observed_arrivals \
WHERE received_at >= toDateTime(?) AND received_at < toDateTime(?)",
        )
        .bind(to_datetime(from))
        .bind(to_datetime(until))
}

/// Observed arrivals stamped in one second: how many, to size a bounded read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ArrivalSecondRow {
    pub second: u32,
    pub rows: u64,
}

/// How many app-object rows were stamped in each second of `[from, until)` that has any, in
/// order (reads `received_at` only).
pub fn observed_arrivals_per_second_query(
    store: &Store,
    from: Timestamp,
    until: Timestamp,
) -> Query {
    store
        .client()
        .query(
            "SELECT toUInt32(received_at) AS second, count() AS rows FROM observed_arrivals \
WHERE received_at >= toDateTime(?) AND received_at < toDateTime(?) \
GROUP BY second ORDER BY second",
        )
        .bind(to_datetime(from))
        .bind(to_datetime(until))
}

/// One writer's latest arrival horizon, and for how many seconds (by the server's clock) it has
/// published none.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ArrivalHorizon {
    pub writer: String,
    pub first_stamp: u32,
    pub visible_before: u32,
    pub silent_seconds: i64,
}

/// The start of the name of every writer whose rows are heartbeats (`heartbeats`); the other
/// writers' rows are observed rows (`observed_arrivals`).
pub const HEARTBEAT_WRITER_PREFIX: &str = "heartbeats/";

impl ArrivalHorizon {
    /// Whether this writer's rows are heartbeats rather than observed rows.
    pub fn is_heartbeat_writer(&self) -> bool {
        self.writer.starts_with(HEARTBEAT_WRITER_PREFIX)
    }
}

/// Every writer's latest arrival horizon. A writer's horizons never go back, so its newest
/// publication carries the greatest one (several publications within one second of
/// `updated_at` cannot tie).
pub fn arrival_horizons_query(store: &Store) -> Query {
    store.client().query(
        "SELECT writer, min(first_stamp) AS first_stamp, \
max(visible_before) AS visible_before, \
toInt64(now()) - toInt64(max(updated_at)) AS silent_seconds \
FROM arrival_writers GROUP BY writer ORDER BY writer",
    )
}

/// Change markers for the tables the hub reloads whole: the newest render, and the inventory's
/// newest version and row count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ChangeMarkers {
    pub last_render: u64,
    pub inventory_version: u64,
    pub inventory_rows: u64,
}

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
    pub async fn inventory_rows(&self) -> Result<Vec<crate::ClusterRow>> {
        inventory_rows_query(self)
            .fetch_all()
            .await
            .context(|| "reading the cluster inventory".to_owned())
    }

    pub async fn desired_rows(&self) -> Result<Vec<DesiredRow>> {
        desired_rows_query(self)
            .fetch_all()
            .await
            .context(|| "reading the current desired state".to_owned())
    }

    /// Streams app-object rows received at or after `since` to `each`, from `observed_latest`
    /// (every object's newest rows; reads the whole table) or, with `ObservedSource::Arrivals`,
    /// from `observed_arrivals` (only what arrived; the caller makes sure `since` is recent).
    pub async fn observed_objects(
        &self,
        source: ObservedSource,
        since: Timestamp,
        mut each: impl FnMut(ObservedRow),
    ) -> Result<u64> {
        let query = match source {
            ObservedSource::Latest => observed_objects_query(self, since),
            ObservedSource::Arrivals => observed_arrivals_query(self, since),
        };
        let mut cursor = query
            .fetch::<ObservedRow>()
            .context(|| "reading observed state".to_owned())?;
        let mut rows = 0;
        while let Some(row) = cursor
            .next()
            .await
            .context(|| "reading observed state".to_owned())?
        {
            rows += 1;
            each(row);
        }
        Ok(rows)
    }

    /// Streams the app-object rows stamped in `[from, until)` to `each`; returns how many.
    pub async fn observed_arrivals_between(
        &self,
        from: Timestamp,
        until: Timestamp,
        mut each: impl FnMut(ObservedRow),
    ) -> Result<u64> {
        let mut cursor = observed_arrivals_between_query(self, from, until)
            .fetch::<ObservedRow>()
            .context(|| "reading observed arrivals".to_owned())?;
        let mut rows = 0;
        while let Some(row) = cursor
            .next()
            .await
            .context(|| "reading observed arrivals".to_owned())?
        {
            rows += 1;
            each(row);
        }
        Ok(rows)
    }

    /// How many app-object rows were stamped in each second of `[from, until)` that has any.
    pub async fn observed_arrivals_per_second(
        &self,
        from: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<ArrivalSecondRow>> {
        observed_arrivals_per_second_query(self, from, until)
            .fetch_all()
            .await
            .context(|| "counting observed arrivals per second".to_owned())
    }

    pub async fn arrival_horizons(&self) -> Result<Vec<ArrivalHorizon>> {
        arrival_horizons_query(self)
            .fetch_all()
            .await
            .context(|| "reading arrival horizons".to_owned())
    }

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

/// Heartbeat rows with `seen_at` at or after `since` (the reader keeps the newest per cluster).
pub fn heartbeats_since_query(store: &Store, since: Timestamp) -> Query {
    store
        .client()
        .query("SELECT ?fields FROM heartbeats WHERE seen_at >= toDateTime(?)")
        .bind(to_datetime(since))
}

/// The latest heartbeats stamped in `[from, until)`: the reads between two horizons of the
/// heartbeat writers (see `arrival_horizons_query` and [`HEARTBEAT_WRITER_PREFIX`]). A
/// cluster's heartbeat that a newer one replaced may be missing from the range: the newer one,
/// stamped later, is in a later range, and only the latest counts.
pub fn heartbeats_between_query(store: &Store, from: Timestamp, until: Timestamp) -> Query {
    store
        .client()
        .query(
            "SELECT ?fields FROM heartbeats \
WHERE seen_at >= toDateTime(?) AND seen_at < toDateTime(?)",
        )
        .bind(to_datetime(from))
        .bind(to_datetime(until))
}

impl Store {
    /// The latest heartbeats stamped in `[from, until)` (see [`heartbeats_between_query`]).
    pub async fn heartbeats_between(
        &self,
        from: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<HeartbeatRow>> {
        heartbeats_between_query(self, from, until)
            .fetch_all()
            .await
            .context(|| "reading heartbeats between horizons".to_owned())
    }

    pub async fn heartbeats_since(&self, since: Timestamp) -> Result<Vec<HeartbeatRow>> {
        heartbeats_since_query(self, since)
            .fetch_all()
            .await
            .context(|| "reading heartbeats".to_owned())
    }
}

/// Observed transitions in a time range, newest first, at most `limit`, of one app and of the
/// clusters within one group subtree (by the inventory's group prefixes), selecting `fields`.
/// `group` and `app` are string expressions (`''` for every group or app), `from` and `to`
/// `DateTime` expressions (the range includes `from`, not `to`), `limit` an integer expression:
/// `?` and `toDateTime(?)` in the store's own query. `in_` is `IN`, or `GLOBAL IN` where
/// `observed_transitions` is Distributed.
pub(crate) fn observed_transitions_sql(
    fields: &str,
    in_: &str,
    group: &str,
    app: &str,
    from: &str,
    to: &str,
    limit: &str,
) -> String {
    format!(
        "SELECT {fields} FROM observed_transitions \
WHERE observed_at >= {from} AND observed_at < {to} AND ({app} = '' OR app = {app}) \
AND ({group} = '' OR cluster_id {in_} (SELECT cluster_id FROM clusters WHERE has(group_prefixes, {group}))) \
ORDER BY observed_at DESC, cluster_id, seq DESC LIMIT 1 BY cluster_id, object_kind, object_namespace, object_name, seq LIMIT {limit}"
    )
}

/// Observed transitions in a time range, newest first, optionally of one app and/or of the
/// clusters within one group subtree (by the inventory's group prefixes).
pub fn observed_transitions_query(
    store: &Store,
    group: Option<&str>,
    app: Option<&str>,
    from: Timestamp,
    to: Timestamp,
    limit: u64,
) -> Query {
    // In cluster mode `observed_transitions` is Distributed: a plain `IN (SELECT … FROM
    // clusters)` would be run by each shard in the default database of the connection it gets,
    // not in this one. `GLOBAL IN` computes the set once, here, and sends it along.
    static SQL: OnceLock<[String; 2]> = OnceLock::new();
    let [single, clustered] = SQL.get_or_init(|| {
        let sql = |in_: &str| {
            observed_transitions_sql(
                "?fields",
                in_,
                "?",
                "?",
                "toDateTime(?)",
                "toDateTime(?)",
                "?",
            )
        };
        [sql("IN"), sql("GLOBAL IN")]
    });
    store
        .client()
        .query(if store.cluster().is_some() {
            clustered
        } else {
            single
        })
        .bind(to_datetime(from))
        .bind(to_datetime(to))
        .bind(app.unwrap_or_default())
        .bind(app.unwrap_or_default())
        .bind(group.unwrap_or_default())
        .bind(group.unwrap_or_default())
        .bind(limit)
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

impl Store {
    pub async fn observed_transitions(
        &self,
        group: Option<&str>,
        app: Option<&str>,
        from: Timestamp,
        to: Timestamp,
        limit: u64,
    ) -> Result<Vec<ObservedRow>> {
        observed_transitions_query(self, group, app, from, to, limit)
            .fetch_all()
            .await
            .context(|| "reading observed transitions".to_owned())
    }

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
}
