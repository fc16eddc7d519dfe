//! Observed state as the clusters reported it: the order in which an object's rows supersede
//! each other, each object's latest row, the objects still live, and the transitions of one
//! cluster or of a group in a time range.

use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::Timestamp;
use serde::{Deserialize, Serialize};

use crate::rows::ObservedRow;
use crate::{to_datetime, Context, Result, Store};

/// The order in which one object's observed rows supersede each other, highest last: the change
/// number, then the collector's arrival time, then the content, so that two different changes
/// with the same number resolve the same way on every read (the hub's index compares the same
/// columns in the same order). A tuple, for `argMax`.
pub const OBSERVED_ORDER: &str =
    "(seq, received_at, deleted, health, sync, version, content_hash, \
applied_revision, app, reason, message, transitioned_at, observed_at)";

/// [`OBSERVED_ORDER`] for `ORDER BY`, newest first.
const OBSERVED_ORDER_DESC: &str =
    "seq DESC, received_at DESC, deleted DESC, health DESC, sync DESC, \
version DESC, content_hash DESC, applied_revision DESC, app DESC, reason DESC, message DESC, \
transitioned_at DESC, observed_at DESC";

/// The latest row of every object one cluster reported (deleted ones included), selecting
/// `fields`; `cluster` is a string expression (`?` in the store's own query).
pub(crate) fn observed_for_cluster_sql(fields: &str, cluster: &str) -> String {
    format!(
        "SELECT {fields} FROM observed_latest WHERE cluster_id = {cluster} \
ORDER BY cluster_id, object_kind, object_namespace, object_name, {OBSERVED_ORDER_DESC} \
LIMIT 1 BY cluster_id, object_kind, object_namespace, object_name"
    )
}

/// [`observed_for_cluster_sql`] of every column, the cluster bound.
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

/// [`observed_history_sql`] of every column, its values bound.
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

impl Store {
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

    /// Observed transitions in `[from, to)`, newest first (see [`observed_transitions_query`]).
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
}
