//! How much the store holds: rows and bytes on disk per table, from ClickHouse's own record of
//! its active data parts. The load test reports it per cluster.

use clickhouse::query::Query;
use clickhouse::Row;
use serde::{Deserialize, Serialize};

use crate::{Context as _, Result, Store};

/// One table's active parts, summed.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct TableSize {
    pub table: String,
    /// Rows in active parts: rows a ReplacingMergeTree has not collapsed yet count.
    pub rows: u64,
    pub bytes_on_disk: u64,
}

pub fn table_sizes_query(store: &Store) -> Query {
    match store.cluster() {
        None => store.client().query(
            "SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS bytes_on_disk FROM system.parts \
WHERE database = ? AND active GROUP BY table ORDER BY table",
        )
        .bind(store.database()),
        // Sharded tables: their local parts on every shard (one replica each), under the
        // table's own name; tables copied to every node: this node's copy.
        Some(cluster) => store.client().query(
            "SELECT logical_table AS table, sum(part_rows) AS rows, sum(part_bytes) AS bytes_on_disk FROM (\
SELECT replaceRegexpOne(table, '_local$', '') AS logical_table, rows AS part_rows, bytes_on_disk AS part_bytes \
FROM cluster(?, system.parts) WHERE database = ? AND active AND endsWith(table, '_local') \
UNION ALL \
SELECT table AS logical_table, rows AS part_rows, bytes_on_disk AS part_bytes \
FROM system.parts WHERE database = ? AND active AND NOT endsWith(table, '_local')\
) GROUP BY logical_table ORDER BY logical_table",
        )
        .bind(cluster.name.as_str())
        .bind(store.database())
        .bind(store.database()),
    }
}

impl Store {
    /// Rows and bytes on disk of every table of the store's database, by table name. In cluster
    /// mode a sharded table counts every shard once (not every replica), and a table copied
    /// to every node counts one copy.
    pub async fn table_sizes(&self) -> Result<Vec<TableSize>> {
        table_sizes_query(self)
            .fetch_all()
            .await
            .context(|| "reading table sizes".to_owned())
    }
}

/// Tables that grow by the day of history they hold (retention bounds them); the others hold
/// current state or one row per cluster.
pub const DAILY_TABLES: &[&str] = &[
    "observed_transitions",
    "observed_arrivals",
    "heartbeat_history",
    "rollup_snapshots",
];

/// Days of `observed_arrivals` kept at most with `tiers` (see
/// [`crate::retention::arrivals_kept_from_hour`]): from an hour before the start of the day
/// that ended the first tier's age ago; all of `days` without tiers.
pub fn arrival_days(tiers: &crate::thinning::CheckpointTiers, days: f64) -> f64 {
    match tiers.tiers().first() {
        Some(first) => days.min((first.after + 86_400 + 3_600) as f64 / 86_400.0),
        None => days,
    }
}

/// The bytes the store will hold once `retention_days` of history are kept, from what it holds
/// now: each table that grows by the day scaled from the days held (from the oldest checkpoint
/// to `now`, at least one) to the days kept (`observed_arrivals` only as long as [`arrival_days`]),
/// the checkpoints' average size times the number `tiers` keep, every other table as it is.
pub fn bytes_at_retention(
    sizes: &[TableSize],
    checkpoints: &crate::past::Checkpoints,
    now: fleetscope_model::Timestamp,
    every: i64,
    tiers: &crate::thinning::CheckpointTiers,
    retention_days: u32,
) -> u64 {
    let held_days = checkpoints
        .kept_from()
        .map(|from| (now.seconds() - from.seconds()) as f64 / 86_400.0)
        .unwrap_or(1.0)
        .max(1.0);
    sizes
        .iter()
        .map(|size| {
            let bytes = size.bytes_on_disk as f64;
            if size.table == "observed_arrivals" {
                bytes / arrival_days(tiers, held_days)
                    * arrival_days(tiers, f64::from(retention_days))
            } else if size.table == "observed_checkpoints" {
                let taken = checkpoints.taken.len().max(1) as f64;
                bytes / taken * tiers.kept_over(every, retention_days) as f64
            } else if DAILY_TABLES.contains(&size.table.as_str()) {
                let extra = if size.table == "observed_transitions" {
                    crate::retention::TRANSITIONS_EXTRA_DAYS as f64
                } else {
                    0.0
                };
                bytes / held_days * (f64::from(retention_days) + extra)
            } else {
                bytes
            }
        })
        .sum::<f64>() as u64
}

#[derive(Debug, Row, Deserialize)]
struct FreeRow {
    free: u64,
}

impl Store {
    /// Free bytes on the disk of the server's data (`system.disks`, ClickHouse 19.15 and
    /// newer); `None` on a server without it, such as 18.16.
    pub async fn disk_free_bytes(&self) -> Result<Option<u64>> {
        let version: String = self
            .client()
            .query("SELECT version()")
            .fetch_one()
            .await
            .context(|| "reading the server's version".to_owned())?;
        let mut numbers = version.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
        let at_least = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0)) >= (19, 15);
        if !at_least {
            return Ok(None);
        }
        let row: FreeRow = self
            .client()
            .query(DISK_FREE)
            .fetch_one()
            .await
            .context(|| "reading free disk from system.disks".to_owned())?;
        Ok(Some(row.free))
    }
}

/// The free space of the disk that holds the data (the default disk).
pub(crate) const DISK_FREE: &str =
    "SELECT toUInt64(min(free_space)) AS free FROM system.disks WHERE name = 'default'";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::past::Checkpoints;
    use crate::thinning::CheckpointTiers;
    use fleetscope_model::Timestamp;

    #[test]
    fn bytes_at_retention_scales_days_and_checkpoints() {
        let size = |table: &str, bytes: u64| TableSize {
            table: table.to_owned(),
            rows: 0,
            bytes_on_disk: bytes,
        };
        let day = 86_400;
        // Two days held, 48 hourly checkpoints of 10 bytes each.
        let checkpoints = Checkpoints {
            taken: (0..48)
                .map(|h| Timestamp(1_000 * day + h * 3_600))
                .collect(),
        };
        let now = Timestamp(1_002 * day);
        let sizes = [
            size("observed_arrivals", 2_000),
            size("observed_transitions", 1_000),
            size("observed_checkpoints", 480),
            size("clusters", 7),
        ];
        let tiers = CheckpointTiers::default();
        // Arrivals: two days held, at most 73 hours kept.
        let want = (1_000.0 * 73.0 / 24.0) as u64 + 500 * 31 + 10 * tiers.kept_over(3_600, 30) + 7;
        let got = bytes_at_retention(&sizes, &checkpoints, now, 3_600, &tiers, 30);
        assert!(got.abs_diff(want) <= 1, "{got} {want}");
        // Without tiers, arrivals are kept as long as the checkpoints.
        let none: CheckpointTiers = "none".parse().unwrap();
        assert_eq!(
            bytes_at_retention(&sizes, &checkpoints, now, 3_600, &none, 30),
            1_000 * 30 + 500 * 31 + 10 * 720 + 7
        );
    }
}
