//! The inventory and the clusters' liveness: the current clusters, their last heartbeats, and
//! those not seen within the stale threshold.

use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::{DriftPolicy, Timestamp};
use serde::{Deserialize, Serialize};

use crate::rows::HeartbeatRow;
use crate::{Context, Result, Store};

/// Current clusters of the inventory, removed clusters left out: `cluster_id`,
/// `group_prefixes`, `environment`.
pub(crate) const INVENTORY_CURRENT: &str = "SELECT cluster_id, current_prefixes AS group_prefixes, current_environment AS environment FROM (\
SELECT cluster_id, argMax(group_prefixes, version) AS current_prefixes, \
argMax(environment, version) AS current_environment, argMax(removed, version) AS cluster_removed \
FROM clusters GROUP BY cluster_id) WHERE cluster_removed = 0";

/// Last heartbeat per cluster.
pub(super) const LAST_SEEN: &str =
    "SELECT cluster_id, max(seen_at) AS last_seen FROM heartbeats GROUP BY cluster_id";

/// A cluster and when it was last seen (0 = never).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct LastSeenRow {
    pub cluster_id: String,
    pub last_seen: u32,
}

/// Ids of every current (not removed) cluster of the inventory.
pub fn known_clusters_query(store: &Store) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!("SELECT cluster_id FROM ({INVENTORY_CURRENT}) ORDER BY cluster_id")
    });
    store.client().query(sql)
}

/// The current row of every cluster of the inventory (removed ones included: the reader drops them).
pub fn inventory_rows_query(store: &Store) -> Query {
    store.client().query(
        "SELECT ?fields FROM clusters ORDER BY cluster_id, version DESC LIMIT 1 BY cluster_id",
    )
}

/// The latest heartbeat of every cluster that ever sent one.
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

/// [`stale_clusters_sql`] with its values bound, at most `limit` clusters.
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
    /// Ids of every current cluster of the inventory, sorted.
    pub async fn known_clusters(&self) -> Result<Vec<String>> {
        known_clusters_query(self)
            .fetch_all::<String>()
            .await
            .context(|| "reading the cluster inventory".to_owned())
    }

    /// The current row of every cluster of the inventory, removed ones included.
    pub async fn inventory_rows(&self) -> Result<Vec<crate::ClusterRow>> {
        inventory_rows_query(self)
            .fetch_all()
            .await
            .context(|| "reading the cluster inventory".to_owned())
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
