//! The drift rollup: clusters, stale clusters and pairs per drift state counted for every group
//! at every level, and the rollup snapshots that keep its trend.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use clickhouse::query::Query;
use clickhouse::Row;
use fleetscope_model::{DriftPolicy, DriftState, Timestamp};
use serde::{Deserialize, Serialize};

use super::clusters::{INVENTORY_CURRENT, LAST_SEEN};
use super::pairs::{classified_pairs_query, classified_pairs_sql, PAIR_KEY_COLUMNS};
use crate::{to_datetime, Context, Result, Store};

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
    /// Clusters that are not stale.
    pub fn reporting_clusters(&self) -> u64 {
        self.clusters - self.stale_clusters
    }

    /// App instances in `state`.
    pub fn count(&self, state: DriftState) -> u64 {
        self.pairs.get(&state).copied().unwrap_or(0)
    }

    /// App instances in any state.
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

/// [`pair_counts_sql`] with its values bound.
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

/// [`cluster_counts_sql`] with its values bound.
pub fn cluster_counts_query(store: &Store, now: Timestamp, policy: &DriftPolicy) -> Query {
    static SQL: OnceLock<String> = OnceLock::new();
    let sql = SQL.get_or_init(|| cluster_counts_sql("?", "?"));
    store
        .client()
        .query(sql)
        .bind(now.seconds())
        .bind(policy.stale_after_seconds)
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

/// [`rollup_trend_sql`] of every column, its values bound.
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
