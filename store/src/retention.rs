//! Retention: history tables are partitioned by day, and days older than the configured
//! number are dropped whole (cheap in ClickHouse, no row-by-row delete).

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use crate::clickhouse_cluster::{local_table, placement, Placement};
use crate::past::Checkpoints;
use crate::thinning::CheckpointTiers;
use crate::{Context, Result, Store};

/// Tables partitioned by `toYYYYMMDD(…)` whose old days retention drops.
pub const DAY_PARTITIONED_TABLES: &[&str] = &[
    "observed_transitions",
    "rollup_snapshots",
    "observed_checkpoints",
];

#[derive(Debug, Row, Deserialize, Serialize)]
struct PartitionRow {
    partition_id: String,
}

/// Days `observed_transitions` is kept beyond the others: it is partitioned by the agent's
/// `observed_at`, and a cluster's rows at a past moment are read from it by `received_at`, so
/// a row stamped before the oldest day kept and received after it stays readable (an agent's
/// stamp up to a day before its arrival).
pub const TRANSITIONS_EXTRA_DAYS: i64 = 1;

/// A partition that was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedPartition {
    pub table: &'static str,
    /// The day as `YYYYMMDD`.
    pub day: u32,
}

pub(crate) const SELECT_PARTITIONS: &str =
    "SELECT DISTINCT partition_id FROM system.parts WHERE database = ? AND table = ? AND active ORDER BY partition_id";

pub(crate) const DROP_PARTITION: &str = "ALTER TABLE ? DROP PARTITION ID ?";

/// Cluster mode: the partitions of a sharded table's local parts on every shard (one replica
/// each), and the drop that reaches every shard (replication takes it to the other replicas).
pub(crate) const SELECT_CLUSTER_PARTITIONS: &str =
    "SELECT DISTINCT partition_id FROM cluster(?, system.parts) WHERE database = ? AND table = ? AND active ORDER BY partition_id";

pub(crate) const DROP_PARTITION_ON_CLUSTER: &str =
    "ALTER TABLE ?.? ON CLUSTER ? DROP PARTITION ID ?";

impl Store {
    /// Active partition ids of `table` (a table's logical name); in cluster mode those of every
    /// shard.
    async fn partitions(&self, table: &str) -> Result<Vec<String>> {
        let physical = local_table(table, self.cluster());
        let query = match (self.cluster(), placement(table)) {
            (Some(cluster), Some(Placement::Sharded)) => self
                .client()
                .query(SELECT_CLUSTER_PARTITIONS)
                .bind(cluster.name.as_str()),
            _ => self.client().query(SELECT_PARTITIONS),
        };
        let rows = query
            .bind(self.database())
            .bind(physical.as_str())
            .fetch_all::<PartitionRow>()
            .await
            .context(|| format!("listing partitions of {table}"))?;
        Ok(rows.into_iter().map(|row| row.partition_id).collect())
    }

    /// Drops one partition of `table` (a logical name) wherever it is stored.
    async fn drop_partition(&self, table: &str, partition_id: &str) -> Result<()> {
        let physical = local_table(table, self.cluster());
        let query = match (self.cluster(), placement(table)) {
            (Some(cluster), Some(Placement::Sharded)) => self
                .client()
                .query(DROP_PARTITION_ON_CLUSTER)
                .bind(clickhouse::sql::Identifier(self.database()))
                .bind(clickhouse::sql::Identifier(&physical))
                .bind(cluster.name.as_str())
                .with_setting("wait_end_of_query", "1"),
            // A table copied to every node is one replicated table: dropping the partition on
            // this node drops it on every replica.
            _ => self
                .client()
                .query(DROP_PARTITION)
                .bind(clickhouse::sql::Identifier(&physical)),
        };
        query
            .bind(partition_id)
            .execute()
            .await
            .context(|| format!("dropping partition {partition_id} of {table}"))
    }
}

/// `YYYYMMDD` of a day number since the epoch (proleptic Gregorian, UTC).
pub fn yyyymmdd(days_since_epoch: i64) -> u32 {
    // Howard Hinnant's civil-from-days algorithm.
    let z = days_since_epoch + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year * 10_000 + month * 100 + day) as u32
}

impl Store {
    /// Drops every day partition older than `keep_days` days before `now` (the day of `now`
    /// and the `keep_days - 1` days before it are kept). Returns what was dropped.
    pub async fn apply_retention(
        &self,
        now: fleetscope_model::Timestamp,
        keep_days: u32,
    ) -> Result<Vec<DroppedPartition>> {
        let today = now.seconds().div_euclid(86_400);
        let first_kept_day = today - i64::from(keep_days.max(1)) + 1;
        let oldest_kept = yyyymmdd(first_kept_day);
        // Checkpoints leave the log before their rows go, so no reader picks one half dropped.
        self.client()
            .query(crate::past::DROP_CHECKPOINTS_BEFORE)
            .bind(crate::to_datetime(fleetscope_model::Timestamp(
                first_kept_day * 86_400,
            )))
            .execute()
            .await
            .context(|| "marking checkpoints past retention".to_owned())?;
        let mut dropped = Vec::new();
        for table in DAY_PARTITIONED_TABLES {
            for partition_id in self.partitions(table).await? {
                // Only ids that are exactly a day; anything else is not ours to drop.
                let Some(day) = (partition_id.len() == 8)
                    .then(|| partition_id.parse::<u32>().ok())
                    .flatten()
                else {
                    continue;
                };
                let oldest_kept = if *table == "observed_transitions" {
                    yyyymmdd(first_kept_day - TRANSITIONS_EXTRA_DAYS)
                } else {
                    oldest_kept
                };
                if day >= oldest_kept {
                    continue;
                }
                self.drop_partition(table, &day.to_string()).await?;
                tracing::info!(table, day, "dropped partition past retention");
                dropped.push(DroppedPartition { table, day });
            }
        }
        Ok(dropped)
    }
}

/// Hours of `observed_arrivals` that `trim_arrivals` keeps at least (the current hour and the
/// ones before it). Readers of arrivals fall back to `observed_latest` when they last read more
/// than `ARRIVALS_KEEP_HOURS - 1` hours ago.
pub const ARRIVALS_KEEP_HOURS: i64 = 6;

/// The oldest hour (since the epoch) of `observed_arrivals` that `trim_arrivals` keeps at `now`:
/// the hours the hub's refresh reads ([`ARRIVALS_KEEP_HOURS`]), those from the newest
/// checkpoint on (the next one is taken from it and the arrivals since), and those from an
/// hour before the oldest checkpoint of the hourly tier on (`tiers` keep every checkpoint from
/// [`CheckpointTiers::hourly_from`]; an answer at a moment there reads at most one interval of
/// arrivals, the hour before is a margin for a read under way while the hours go). Without
/// tiers every checkpoint is kept, and so are the arrivals from the oldest on. An answer whose
/// checkpoint is older reads `observed_transitions` instead ([`crate::past::WindowSource`]).
pub fn arrivals_kept_from_hour(
    now: fleetscope_model::Timestamp,
    tiers: &CheckpointTiers,
    checkpoints: &Checkpoints,
) -> i64 {
    let hour = |t: fleetscope_model::Timestamp| t.seconds().div_euclid(3_600);
    let mut oldest_kept = hour(now) - ARRIVALS_KEEP_HOURS + 1;
    if let Some(newest) = checkpoints.taken.last() {
        oldest_kept = oldest_kept.min(hour(*newest));
    }
    let hourly_from = match tiers.hourly_from(now) {
        Some(from) => Some(hour(from) - 1),
        None => checkpoints.kept_from().map(hour),
    };
    if let Some(hourly_from) = hourly_from {
        oldest_kept = oldest_kept.min(hourly_from);
    }
    oldest_kept
}

impl Store {
    /// The moment from which `observed_arrivals` holds every row: an hour after the start of
    /// its oldest hour kept (a margin for a trim under way), `None` when it holds none.
    pub async fn arrivals_kept_from(&self) -> Result<Option<fleetscope_model::Timestamp>> {
        let oldest = self
            .partitions("observed_arrivals")
            .await?
            .iter()
            .filter_map(|id| id.parse::<i64>().ok())
            .min();
        Ok(oldest.map(|hour| fleetscope_model::Timestamp((hour + 1) * 3_600)))
    }

    /// Drops the hours of `observed_arrivals` before [`arrivals_kept_from_hour`], and those of
    /// `heartbeat_history` that neither the readers of heartbeats (`ARRIVALS_KEEP_HOURS` before
    /// `now`) nor the answers at a past moment (from the oldest complete checkpoint on) need.
    /// Before heartbeat hours go, each cluster's newest heartbeat among them is kept in
    /// `heartbeat_floor`. Partitions are hours since the epoch; an id that is not a number is
    /// left alone. Returns the hours dropped from `observed_arrivals`.
    pub async fn trim_arrivals(
        &self,
        now: fleetscope_model::Timestamp,
        tiers: &CheckpointTiers,
    ) -> Result<Vec<i64>> {
        let checkpoints = self.checkpoints().await?;
        let mut heartbeats_kept = now.seconds().div_euclid(3_600) - ARRIVALS_KEEP_HOURS + 1;
        if let Some(kept_from) = checkpoints.kept_from() {
            heartbeats_kept = heartbeats_kept.min(kept_from.seconds().div_euclid(3_600));
        }
        let arrivals_kept = arrivals_kept_from_hour(now, tiers, &checkpoints);
        let hours_before = |table: &'static str, partitions: Vec<String>, oldest_kept: i64| {
            partitions
                .into_iter()
                .filter_map(move |id| {
                    let hour = id.parse::<i64>().ok()?;
                    (hour < oldest_kept).then_some((table, id, hour))
                })
                .collect::<Vec<_>>()
        };
        let heartbeat_hours = hours_before(
            "heartbeat_history",
            self.partitions("heartbeat_history").await?,
            heartbeats_kept,
        );
        if !heartbeat_hours.is_empty() {
            self.client()
                .query(crate::past::HEARTBEAT_FLOOR_BEFORE)
                .bind(crate::to_datetime(fleetscope_model::Timestamp(
                    heartbeats_kept * 3_600,
                )))
                .execute()
                .await
                .context(|| "keeping the last heartbeats of the hours dropped".to_owned())?;
        }
        let mut dropped = Vec::new();
        for (table, partition_id, hour) in hours_before(
            "observed_arrivals",
            self.partitions("observed_arrivals").await?,
            arrivals_kept,
        )
        .into_iter()
        .chain(heartbeat_hours)
        {
            self.drop_partition(table, &partition_id).await?;
            if table == "observed_arrivals" {
                dropped.push(hour);
            }
        }
        Ok(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::yyyymmdd;

    #[test]
    fn civil_dates() {
        assert_eq!(yyyymmdd(0), 19_700_101);
        assert_eq!(yyyymmdd(-1), 19_691_231);
        assert_eq!(yyyymmdd(19_782), 20_240_229);
        assert_eq!(yyyymmdd(20_414), 20_251_122);
    }
}
