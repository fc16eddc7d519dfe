//! The central collector's Prometheus metrics. Labels take a handful of fixed values (report
//! kind, outcome, reject reason, table), never a cluster id, so cardinality stays bounded.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Outcome {
    Stored,
    Duplicate,
    Rejected,
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Reason {
    Unauthorized,
    Forbidden,
    UnknownCluster,
    Malformed,
    TooLarge,
    Backpressure,
    StoreUnavailable,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReportLabels {
    pub kind: &'static str,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectLabels {
    pub reason: Reason,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabels {
    pub table: &'static str,
}

/// A step of one report's way through the collector, timed by `ingest_stage_seconds`.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Stage {
    /// Decompressing, parsing and validating the body.
    Decode,
    /// A snapshot's wait for the latest stored row of each of its cluster's objects.
    Lookup,
    /// From handing the rows to the batch writer until ClickHouse accepted them.
    Write,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    pub stage: Stage,
    pub kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BatchLabels {
    pub table: &'static str,
    pub accepted: &'static str,
}

#[derive(Debug, Clone)]
pub struct CollectorMetrics {
    pub reports: Family<ReportLabels, Counter>,
    pub rejects: Family<RejectLabels, Counter>,
    pub rows: Counter,
    pub unchanged_rows: Counter,
    pub request_bytes: Counter,
    pub batches: Family<BatchLabels, Counter>,
    pub flush_seconds: Family<TableLabels, Histogram>,
    pub backlog_rows: Family<TableLabels, Gauge>,
    pub stage_seconds: Family<StageLabels, Histogram>,
    /// App objects without stamps, by what the match rules made of them.
    pub unstamped: Family<UnstampedLabels, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnstampedLabels {
    /// `matched` (a rule gave it an app), `unmatched` (no rule took it: stored, no app's
    /// object) or `stamped_wins` (a rule gave it an app whose stamped object the cluster
    /// holds, which counts instead).
    pub resolution: &'static str,
}

impl CollectorMetrics {
    pub fn register(registry: &mut Registry) -> CollectorMetrics {
        let metrics = CollectorMetrics {
            reports: Family::default(),
            rejects: Family::default(),
            rows: Counter::default(),
            unchanged_rows: Counter::default(),
            request_bytes: Counter::default(),
            batches: Family::default(),
            flush_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.005, 2.0, 14))
            }),
            backlog_rows: Family::default(),
            stage_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
            }),
            unstamped: Family::default(),
        };
        let registry = registry.sub_registry_with_prefix("fleetscope_collector");
        registry.register(
            "reports",
            "Reports received, by kind and outcome",
            metrics.reports.clone(),
        );
        registry.register(
            "rejects",
            "Requests refused, by reason",
            metrics.rejects.clone(),
        );
        registry.register(
            "rows_ingested",
            "Observed rows ClickHouse accepted",
            metrics.rows.clone(),
        );
        registry.register(
            "rows_unchanged",
            "Snapshot rows not written because the store held the same change unchanged",
            metrics.unchanged_rows.clone(),
        );
        registry.register(
            "request_bytes",
            "Compressed request bytes received",
            metrics.request_bytes.clone(),
        );
        registry.register(
            "batches",
            "Insert batches, by table and whether ClickHouse accepted them",
            metrics.batches.clone(),
        );
        registry.register(
            "flush_seconds",
            "Time from a batch's start to ClickHouse's answer",
            metrics.flush_seconds.clone(),
        );
        registry.register(
            "backlog_rows",
            "Rows waiting to be written, by table",
            metrics.backlog_rows.clone(),
        );
        registry.register(
            "ingest_stage_seconds",
            "Time one report spent in a stage of ingest, by stage and report kind",
            metrics.stage_seconds.clone(),
        );
        registry.register(
            "unstamped_objects",
            "App objects received without stamps, by what the match rules made of them",
            metrics.unstamped.clone(),
        );
        metrics
    }

    /// Counts what resolving one report's objects without stamps did.
    pub fn count_resolved(&self, resolved: super::matching::Resolved) {
        for (resolution, count) in [
            ("matched", resolved.matched),
            ("unmatched", resolved.unmatched),
            ("stamped_wins", resolved.stamped_won),
        ] {
            if count > 0 {
                self.unstamped
                    .get_or_create(&UnstampedLabels { resolution })
                    .inc_by(count);
            }
        }
    }

    /// Records `elapsed` for one report of `kind` in `stage`.
    pub fn stage(&self, stage: Stage, kind: &'static str, elapsed: std::time::Duration) {
        self.stage_seconds
            .get_or_create(&StageLabels { stage, kind })
            .observe(elapsed.as_secs_f64());
    }

    pub fn reject(&self, reason: Reason) {
        self.rejects.get_or_create(&RejectLabels { reason }).inc();
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreTableLabels {
    /// One of the store's tables (a fixed set).
    pub table: String,
}

/// What the store holds, read every few minutes by the collector that runs retention:
/// `fleetscope_store_*`.
#[derive(Debug, Clone, Default)]
pub struct StoreMetrics {
    pub table_bytes: Family<StoreTableLabels, Gauge>,
    pub table_rows: Family<StoreTableLabels, Gauge>,
    pub oldest_moment_age_seconds: Gauge,
    pub checkpoints: Gauge,
    pub retention_bytes: Gauge,
    pub retention_more_bytes: Gauge,
    pub disk_free_bytes: Gauge,
}

impl StoreMetrics {
    pub fn register(registry: &mut Registry) -> StoreMetrics {
        let metrics = StoreMetrics::default();
        let registry = registry.sub_registry_with_prefix("fleetscope_store");
        registry.register(
            "table_bytes",
            "Bytes on disk of each table's active parts",
            metrics.table_bytes.clone(),
        );
        registry.register(
            "table_rows",
            "Rows in each table's active parts (unmerged duplicates included)",
            metrics.table_rows.clone(),
        );
        registry.register(
            "oldest_moment_age_seconds",
            "Age of the oldest moment answerable (the oldest checkpoint kept)",
            metrics.oldest_moment_age_seconds.clone(),
        );
        registry.register(
            "checkpoints",
            "Complete checkpoints kept",
            metrics.checkpoints.clone(),
        );
        registry.register(
            "retention_bytes",
            "Bytes the store will hold once the retention setting's days are kept, from what it holds now",
            metrics.retention_bytes.clone(),
        );
        registry.register(
            "retention_more_bytes",
            "Bytes the store will still add before it holds the retention setting's days (retention_bytes less what it holds)",
            metrics.retention_more_bytes.clone(),
        );
        registry.register(
            "disk_free_bytes",
            "Free bytes on ClickHouse's data disk (system.disks; absent on servers without it, such as 18.16)",
            metrics.disk_free_bytes.clone(),
        );
        metrics
    }
}
