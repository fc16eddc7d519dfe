//! The load test's report: numbers derived from what was recorded during the run, each design
//! target with its measured value, and the files (`report.json`, `report.md`, PNG plots).
//!
//! `build` derives the numbers, `targets` sets them against the design's targets, `markdown`
//! writes `report.md` and `plots` gathers the plots' series.

mod build;
mod load;
mod markdown;
mod plots;
mod targets;

use std::path::Path;

use fleetscope_collector::protocol::ReportKind;
use fleetscope_store::TableSize;
use serde::{Deserialize, Serialize};

pub use build::build;
pub use load::{phase_load, simulator_bound, PhaseLoad};
pub use markdown::markdown;
pub use plots::PlotData;
pub use targets::targets;

use crate::agents::Tally;
use crate::args::LoadtestArgs;
use crate::audit::StoreAudit;
use crate::faults::{FaultRecord, FaultReport};
use crate::plot;
use crate::procs::ProcSample;
use crate::readers::{RouteLatency, Timings};
use crate::scenario::{OutageReport, PhaseReport, RolloutReport, SteadyWindow};

/// The initial render and its publication.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RenderNumbers {
    pub render_groups: u64,
    pub files: u64,
    pub render_seconds: f64,
    pub publish_seconds: f64,
}

/// Full-resync ingest: every delivering cluster's snapshot.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IngestNumbers {
    pub reports: u64,
    pub rows: u64,
    pub seconds: f64,
    pub rows_per_second: f64,
}

/// Acknowledgement latency of one report kind over the whole run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AckLatency {
    pub kind: String,
    pub requests: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// How long requests of this kind waited for a simulator worker before they were sent
    /// (not part of the acknowledgement latency above; absent from reports of older runs).
    #[serde(default)]
    pub wait_p50_ms: f64,
    #[serde(default)]
    pub wait_p99_ms: f64,
    #[serde(default)]
    pub wait_max_ms: f64,
}

/// The steady phase, per delivering cluster.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SteadyNumbers {
    pub seconds: f64,
    pub delivering_clusters: u64,
    pub requests_per_second: f64,
    pub heartbeats_per_second: f64,
    pub deltas_per_second: f64,
    /// Request bytes (bodies and request overhead) per cluster per minute.
    pub wire_bytes_per_cluster_per_minute: f64,
    /// The same, heartbeats only (an idle agent).
    pub idle_wire_bytes_per_cluster_per_minute: f64,
    /// Observed-state rows and bytes on disk added per cluster per day at this rate.
    pub rows_per_cluster_per_day: f64,
    pub disk_bytes_per_cluster_per_day: f64,
    pub collector_cpu_cores: f64,
    pub hub_cpu_cores: f64,
}

/// Freshness of sampled status changes: from the change to its showing in the hub's API.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Freshness {
    pub samples: u64,
    pub not_seen_within_60_s: u64,
    /// Samples replaced by a later change of the same app before they showed.
    pub superseded: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The same per phase, by the phase during which the change was made (absent from reports
    /// of older runs).
    #[serde(default)]
    pub by_phase: Vec<PhaseFreshness>,
}

/// Freshness of the changes made during one phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseFreshness {
    pub phase: String,
    pub samples: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The deltas acknowledged during the phase: p99 of their wait for a simulator worker and of
    /// their acknowledgement latency, the two parts of freshness before the hub's.
    pub delta_wait_p99_ms: f64,
    pub delta_ack_p99_ms: f64,
}

/// CPU and memory of one sampled process over the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProcessNumbers {
    pub process: String,
    pub samples: u64,
    pub cpu_cores_mean: f64,
    pub cpu_cores_max: f64,
    pub rss_mb_max: f64,
    pub rss_mb_end: f64,
}

/// Size of one ClickHouse table at the end of the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableNumbers {
    pub table: String,
    pub rows: u64,
    pub bytes_on_disk: u64,
}

/// One design target and what this run measured for it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Target {
    pub what: String,
    pub target: String,
    pub measured: String,
    /// None when this run does not measure it.
    pub met: Option<bool>,
}

/// The numbers of one load test run, as written to `report.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoadtestReport {
    pub clusters: u64,
    pub apps: u64,
    pub app_instances: u64,
    pub delivering_clusters: u64,
    pub concurrency: u64,
    pub readers: u64,
    pub seed: u64,
    pub seconds: f64,
    pub render: RenderNumbers,
    pub connect: IngestNumbers,
    pub storm: Option<IngestNumbers>,
    pub ack_latency: Vec<AckLatency>,
    pub retried_answers: u64,
    pub refused: Vec<String>,
    pub unreachable: u64,
    pub steady: Option<SteadyNumbers>,
    pub rollout: Option<RolloutReport>,
    pub freshness: Freshness,
    pub hub_latency: Vec<RouteLatency>,
    pub hub_errors: Vec<String>,
    pub processes: Vec<ProcessNumbers>,
    pub clickhouse_tables: Vec<TableNumbers>,
    pub clickhouse_bytes_per_cluster: f64,
    pub phases: Vec<PhaseReport>,
    pub targets: Vec<Target>,
    pub correctness_passed: bool,
    /// Cluster mode's set-up (`2x2 ClickHouse with ZooKeeper, 2 collectors, 2 hubs behind
    /// HAProxy`); absent for one server of each kind (and from reports of older runs).
    #[serde(default)]
    pub cluster: Option<String>,
    /// The faults injected, one per fault phase, in order.
    #[serde(default)]
    pub faults: Vec<FaultReport>,
    /// The collector's outages of the outage scenario, in order (none without it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outages: Vec<OutageReport>,
    /// Every acknowledged change stored, once, at the end of the run (absent from reports of
    /// older runs).
    #[serde(default)]
    pub store_audit: Option<StoreAudit>,
}

/// What the run recorded.
#[derive(Debug)]
pub struct Inputs<'a> {
    pub args: &'a LoadtestArgs,
    pub live_clusters: u64,
    pub app_instances: u64,
    pub render: RenderNumbers,
    pub connect: (u64, u64, f64),
    pub storm: Option<(u64, u64, f64)>,
    pub phases: Vec<PhaseReport>,
    /// Each phase's measured window (seconds since the run started) and whether it is a full
    /// resync's delivery, in the order of `phases`.
    pub phase_windows: Vec<((f64, f64), bool)>,
    /// The machine's cores.
    pub cores: u64,
    pub tally: Tally,
    pub freshness: Vec<(f64, f64)>,
    pub not_seen: u64,
    pub superseded: u64,
    pub timings: Timings,
    pub samples: Vec<ProcSample>,
    pub tables: Vec<TableSize>,
    pub steady: Option<SteadyWindow>,
    pub rollout: Option<RolloutReport>,
    pub seconds: f64,
    pub cluster: Option<String>,
    pub faults: Vec<FaultRecord>,
    pub outages: Vec<OutageReport>,
    pub store_audit: Option<StoreAudit>,
}

/// The report kind's name in the report.
fn kind_name(kind: ReportKind) -> &'static str {
    match kind {
        ReportKind::Delta => "delta",
        ReportKind::Snapshot => "snapshot",
        ReportKind::Heartbeat => "heartbeat",
    }
}

/// The values in ascending order.
fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// Milliseconds with one decimal below 100, none above.
fn ms(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// Writes `report.json`, `report.md` and the plots into `dir`.
pub fn write(dir: &Path, report: &LoadtestReport, plots: &PlotData) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    std::fs::write(dir.join("report.md"), markdown(report))?;
    plot::line_chart(
        &dir.join("throughput.png"),
        "Ingest through the collector",
        "seconds since start",
        "per second",
        &plots.throughput,
    )?;
    plot::samples_over_time(
        &dir.join("freshness.png"),
        "Freshness of sampled status changes (status change → visible in the hub API)",
        "seconds since start",
        "seconds until visible",
        &plots.freshness,
        plot::YScale::Linear,
    )?;
    plot::latency_cdf(
        &dir.join("ack_latency.png"),
        "Collector acknowledgement latency by report kind",
        &plots.ack_latency,
    )?;
    plot::samples_over_time(
        &dir.join("ack_latency_over_time.png"),
        "Collector acknowledgement latency over time (every report kind)",
        "seconds since start",
        "ms (log scale)",
        &plots.ack_latency_over_time,
        plot::YScale::Log,
    )?;
    plot::latency_cdf(
        &dir.join("hub_latency.png"),
        "Hub API latency under concurrent readers",
        &plots.hub_latency,
    )?;
    plot::samples_over_time(
        &dir.join("hub_latency_over_time.png"),
        "Hub API latency over time (every route)",
        "seconds since start",
        "ms (log scale)",
        &plots.hub_latency_over_time,
        plot::YScale::Log,
    )?;
    plot::line_chart(
        &dir.join("cpu.png"),
        "CPU by process",
        "seconds since start",
        "cores",
        &plots.cpu,
    )?;
    plot::line_chart(
        &dir.join("memory.png"),
        "Resident memory by process",
        "seconds since start",
        "MB",
        &plots.memory,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests;
