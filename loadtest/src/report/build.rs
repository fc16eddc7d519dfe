//! The report's numbers, derived from what the run recorded.

use std::collections::BTreeMap;

use fleetscope_collector::protocol::ReportKind;

use super::plots::{plot_data, PlotData};
use super::targets::targets;
use super::{
    kind_name, phase_load, sorted, AckLatency, Freshness, IngestNumbers, Inputs, LoadtestReport,
    PhaseFreshness, ProcessNumbers, SteadyNumbers, TableNumbers,
};
use crate::agents::Ack;
use crate::audit::StoreAudit;
use crate::faults::{FaultReport, PhaseFreshnessFigures};
use crate::procs::{ProcSample, MACHINE};
use crate::readers::quantile;
use crate::scenario::{acks_between, PhaseReport, SteadyWindow};

/// The report's numbers and the plots' series from what the run recorded.
pub fn build(inputs: Inputs<'_>) -> (LoadtestReport, PlotData) {
    let Inputs {
        args,
        live_clusters,
        app_instances,
        render,
        connect,
        storm,
        mut phases,
        phase_windows,
        cores,
        tally,
        freshness,
        not_seen,
        superseded,
        timings,
        samples,
        tables,
        steady,
        rollout,
        seconds,
        cluster,
        faults,
        outages,
        store_audit,
    } = inputs;
    for (phase, &(window, resync)) in phases.iter_mut().zip(&phase_windows) {
        phase.load = Some(phase_load(window, resync, cores, &samples, &tally.acks));
    }
    let ack_latency = ack_latency(&tally.acks);
    let steady = steady.map(|w| steady_numbers(&w, &tally.acks, &samples));
    let freshness_numbers =
        freshness_numbers(&freshness, not_seen, superseded, &phases, &tally.acks);
    let processes = process_numbers(&samples);
    let clickhouse_tables: Vec<TableNumbers> = tables
        .iter()
        .map(|t| TableNumbers {
            table: t.table.clone(),
            rows: t.rows,
            bytes_on_disk: t.bytes_on_disk,
        })
        .collect();
    let total_bytes: u64 = clickhouse_tables.iter().map(|t| t.bytes_on_disk).sum();
    let hub_latency = timings.summary();
    let connect = ingest(connect);
    let storm = storm.map(ingest);
    let correctness_passed = phases.iter().all(|p| p.check_passed)
        && store_audit.as_ref().is_none_or(StoreAudit::holds)
        && faults.iter().all(|f| f.audit.holds());

    let faults = faults
        .iter()
        .map(|f| {
            let freshness = freshness_numbers
                .by_phase
                .iter()
                .find(|p| p.phase == f.phase)
                .map(|p| PhaseFreshnessFigures {
                    samples: p.samples,
                    p99_ms: p.p99_ms,
                    max_ms: p.max_ms,
                });
            FaultReport::from_record(f, &tally.acks, &timings, freshness)
        })
        .collect();
    let mut report = LoadtestReport {
        clusters: args.clusters as u64,
        apps: args.apps as u64,
        app_instances,
        delivering_clusters: live_clusters,
        concurrency: args.concurrency as u64,
        readers: args.readers as u64,
        seed: args.seed,
        seconds,
        render,
        connect,
        storm,
        ack_latency,
        retried_answers: tally.retried,
        refused: tally.refused,
        unreachable: tally.unreachable,
        steady,
        rollout,
        freshness: freshness_numbers,
        hub_latency,
        hub_errors: timings.first_errors.clone(),
        processes,
        clickhouse_tables,
        clickhouse_bytes_per_cluster: total_bytes as f64 / args.clusters.max(1) as f64,
        phases,
        targets: Vec::new(),
        correctness_passed,
        cluster,
        faults,
        outages,
        store_audit,
    };
    report.targets = targets(&report);
    let plots = plot_data(&tally.acks, freshness, &timings, &samples);
    (report, plots)
}

/// Acknowledgement latency and wait for a worker, per report kind over the whole run.
fn ack_latency(acks: &[Ack]) -> Vec<AckLatency> {
    let mut by_kind: BTreeMap<&'static str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for a in acks {
        let (latencies, waits) = by_kind.entry(kind_name(a.kind)).or_default();
        latencies.push(f64::from(a.latency_us) / 1_000.0);
        waits.push(f64::from(a.wait_us) / 1_000.0);
    }
    by_kind
        .into_iter()
        .map(|(kind, (latencies, waits))| {
            let values = sorted(latencies);
            let waits = sorted(waits);
            AckLatency {
                kind: kind.to_owned(),
                requests: values.len() as u64,
                p50_ms: quantile(&values, 0.5),
                p99_ms: quantile(&values, 0.99),
                max_ms: values.last().copied().unwrap_or(0.0),
                wait_p50_ms: quantile(&waits, 0.5),
                wait_p99_ms: quantile(&waits, 0.99),
                wait_max_ms: waits.last().copied().unwrap_or(0.0),
            }
        })
        .collect()
}

/// The steady window's rates per delivering cluster: requests, bytes, rows, disk and CPU.
fn steady_numbers(w: &SteadyWindow, acks: &[Ack], samples: &[ProcSample]) -> SteadyNumbers {
    let seconds = (w.to_ms - w.from_ms) as f64 / 1_000.0;
    let minutes = seconds / 60.0;
    let by = acks_between(acks, w.from_ms, w.to_ms);
    let count = |k: &str| by.get(k).map(|e| e.0).unwrap_or(0) as f64;
    let bytes = |k: &str| by.get(k).map(|e| e.2).unwrap_or(0) as f64;
    let clusters = w.delivering_clusters.max(1) as f64;
    let per_day = 86_400.0 / seconds.max(1e-9) / clusters;
    SteadyNumbers {
        seconds,
        delivering_clusters: w.delivering_clusters,
        requests_per_second: by.values().map(|e| e.0).sum::<u64>() as f64 / seconds.max(1e-9),
        heartbeats_per_second: count("heartbeat") / seconds.max(1e-9),
        deltas_per_second: count("delta") / seconds.max(1e-9),
        wire_bytes_per_cluster_per_minute: by.values().map(|e| e.2).sum::<u64>() as f64
            / clusters
            / minutes.max(1e-9),
        idle_wire_bytes_per_cluster_per_minute: bytes("heartbeat") / clusters / minutes.max(1e-9),
        rows_per_cluster_per_day: w.rows_after.saturating_sub(w.rows_before) as f64 * per_day,
        disk_bytes_per_cluster_per_day: w.bytes_after.saturating_sub(w.bytes_before) as f64
            * per_day,
        collector_cpu_cores: mean_cpu(
            samples,
            "collector",
            w.from_ms as f64 / 1e3,
            w.to_ms as f64 / 1e3,
        ),
        hub_cpu_cores: mean_cpu(samples, "hub", w.from_ms as f64 / 1e3, w.to_ms as f64 / 1e3),
    }
}

/// Freshness of the sampled changes, in all and by phase.
fn freshness_numbers(
    freshness: &[(f64, f64)],
    not_seen: u64,
    superseded: u64,
    phases: &[PhaseReport],
    acks: &[Ack],
) -> Freshness {
    let fresh = sorted(freshness.iter().map(|(_, ms)| *ms).collect());
    Freshness {
        samples: fresh.len() as u64,
        not_seen_within_60_s: not_seen,
        superseded,
        p50_ms: quantile(&fresh, 0.5),
        p99_ms: quantile(&fresh, 0.99),
        max_ms: fresh.last().copied().unwrap_or(0.0),
        by_phase: freshness_by_phase(freshness, phases, acks),
    }
}

/// CPU and memory per sampled process.
fn process_numbers(samples: &[ProcSample]) -> Vec<ProcessNumbers> {
    let mut processes: BTreeMap<&str, Vec<&ProcSample>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.process != MACHINE) {
        processes.entry(s.process.as_str()).or_default().push(s);
    }
    processes
        .into_iter()
        .map(|(name, list)| ProcessNumbers {
            process: name.to_owned(),
            samples: list.len() as u64,
            cpu_cores_mean: list.iter().map(|s| s.cpu_cores).sum::<f64>()
                / list.len().max(1) as f64,
            cpu_cores_max: list.iter().map(|s| s.cpu_cores).fold(0.0, f64::max),
            rss_mb_max: list.iter().map(|s| s.rss_mb).fold(0.0, f64::max),
            rss_mb_end: list.last().map(|s| s.rss_mb).unwrap_or(0.0),
        })
        .collect()
}

/// Rows per second of a full resync.
fn ingest((reports, rows, seconds): (u64, u64, f64)) -> IngestNumbers {
    IngestNumbers {
        reports,
        rows,
        seconds,
        rows_per_second: rows as f64 / seconds.max(1e-9),
    }
}

/// Mean CPU of `process` between two moments (seconds since the run started).
fn mean_cpu(samples: &[ProcSample], process: &str, from_s: f64, to_s: f64) -> f64 {
    let window: Vec<f64> = samples
        .iter()
        .filter(|s| s.process == process && s.at_s > from_s && s.at_s <= to_s)
        .map(|s| s.cpu_cores)
        .collect();
    window.iter().sum::<f64>() / window.len().max(1) as f64
}

/// Freshness samples `(seen at, ms)` grouped by the phase that was running when each change was
/// made: the last phase started at or before that moment.
fn freshness_by_phase(
    freshness: &[(f64, f64)],
    phases: &[PhaseReport],
    acks: &[Ack],
) -> Vec<PhaseFreshness> {
    let phase_at = |s: f64| phases.iter().rposition(|p| p.started_s <= s);
    let mut by: Vec<Vec<f64>> = vec![Vec::new(); phases.len()];
    for &(seen_s, ms) in freshness {
        if let Some(i) = phase_at(seen_s - ms / 1_000.0) {
            by[i].push(ms);
        }
    }
    let mut deltas: Vec<(Vec<f64>, Vec<f64>)> = vec![Default::default(); phases.len()];
    for a in acks.iter().filter(|a| a.kind == ReportKind::Delta) {
        if let Some(i) = phase_at(a.at_ms as f64 / 1_000.0) {
            deltas[i].0.push(f64::from(a.wait_us) / 1_000.0);
            deltas[i].1.push(f64::from(a.latency_us) / 1_000.0);
        }
    }
    phases
        .iter()
        .zip(by)
        .zip(deltas)
        .filter(|((_, values), _)| !values.is_empty())
        .map(|((phase, values), (waits, latencies))| {
            let values = sorted(values);
            PhaseFreshness {
                phase: phase.name.clone(),
                samples: values.len() as u64,
                p50_ms: quantile(&values, 0.5),
                p99_ms: quantile(&values, 0.99),
                max_ms: values.last().copied().unwrap_or(0.0),
                delta_wait_p99_ms: quantile(&sorted(waits), 0.99),
                delta_ack_p99_ms: quantile(&sorted(latencies), 0.99),
            }
        })
        .collect()
}
