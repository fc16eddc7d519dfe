//! Where the CPU went in each phase, the simulator's own beside the services', how long its
//! sends waited for a worker, and whether the simulator, not the services, set the pace: a slow
//! run must never read as a slow product.

use serde::{Deserialize, Serialize};

use fleetscope_collector::protocol::ReportKind;

use crate::agents::Ack;
use crate::procs::{ProcSample, MACHINE};
use crate::readers::quantile;

use super::sorted;

/// The simulator limits a phase when it uses at least this share of the machine's cores (a
/// core's worth on the 2-core machine).
pub const SIMULATOR_CORE_SHARE: f64 = 0.5;

/// The machine counts as saturated from this share of its cores busy; then a simulator using
/// more CPU than the services together limits them too.
pub const SATURATED_SHARE: f64 = 0.9;

/// The simulator limits a phase when its heartbeats and deltas waited this long for a worker
/// at the 99th percentile (a real agent sends at once). Not in a full resync: queueing every
/// cluster's snapshot at once is what it measures, and the heartbeats falling due meanwhile
/// share the workers with them.
pub const WAIT_P99_LIMIT_MS: f64 = 1_000.0;

/// One phase's measured window: its CPU by process and its sends' waits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseLoad {
    /// The window, seconds since the run started: the whole phase with its check, or for a
    /// full resync its delivery (the encoding before it left out).
    pub from_s: f64,
    pub to_s: f64,
    /// The window is a full resync's delivery: its sends' waits are shown but not judged.
    #[serde(default)]
    pub resync: bool,
    /// The machine's cores.
    pub cores: u64,
    /// Mean CPU over the window, in cores: the load test's own process (the simulated agents,
    /// the hub's readers, the ground truth), the services, and the whole machine (every process
    /// on it, anyone else's included).
    pub simulator_cores: f64,
    pub collector_cores: f64,
    pub hub_cores: f64,
    pub clickhouse_cores: f64,
    pub machine_cores: f64,
    /// The simulator's CPU seconds in the window.
    pub simulator_cpu_seconds: f64,
    /// Heartbeats and deltas acknowledged in the window, and their wait for a worker.
    pub sends: u64,
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
    /// Why the simulator set the pace of this phase; `None` when it did not.
    pub simulator_bound: Option<String>,
}

impl PhaseLoad {
    /// CPU used by the machine's processes other than the load test and its services.
    pub fn other_cores(&self) -> f64 {
        (self.machine_cores
            - self.simulator_cores
            - self.collector_cores
            - self.hub_cores
            - self.clickhouse_cores)
            .max(0.0)
    }
}

/// The load of the window `[from_s, to_s]` from the run's samples (one a second per process)
/// and acknowledgements, judged.
pub fn phase_load(
    (from_s, to_s): (f64, f64),
    resync: bool,
    cores: u64,
    samples: &[ProcSample],
    acks: &[Ack],
) -> PhaseLoad {
    let mean = |process: &str| {
        let window: Vec<f64> = samples
            .iter()
            .filter(|s| s.process == process && s.at_s > from_s && s.at_s <= to_s)
            .map(|s| s.cpu_cores)
            .collect();
        window.iter().sum::<f64>() / window.len().max(1) as f64
    };
    let waits = sorted(
        acks.iter()
            .filter(|a| matches!(a.kind, ReportKind::Heartbeat | ReportKind::Delta))
            .filter(|a| {
                let at = a.at_ms as f64 / 1_000.0;
                at >= from_s && at <= to_s
            })
            .map(|a| f64::from(a.wait_us) / 1_000.0)
            .collect(),
    );
    let simulator_cores = mean("loadtest");
    let mut load = PhaseLoad {
        from_s,
        to_s,
        resync,
        cores,
        simulator_cores,
        collector_cores: mean("collector"),
        hub_cores: mean("hub"),
        clickhouse_cores: mean("clickhouse"),
        machine_cores: mean(MACHINE),
        simulator_cpu_seconds: simulator_cores * (to_s - from_s).max(0.0),
        sends: waits.len() as u64,
        wait_p50_ms: quantile(&waits, 0.5),
        wait_p99_ms: quantile(&waits, 0.99),
        simulator_bound: None,
    };
    load.simulator_bound = simulator_bound(&load);
    load
}

/// Why the simulator, not the services, set the pace of a phase: its CPU was a large share of
/// the machine, or more than the services' on a saturated machine, or its sends queued for a
/// worker. `None` when none of these held.
pub fn simulator_bound(load: &PhaseLoad) -> Option<String> {
    let cores = load.cores.max(1) as f64;
    let services = load.collector_cores + load.hub_cores + load.clickhouse_cores;
    let mut why = Vec::new();
    if load.simulator_cores >= SIMULATOR_CORE_SHARE * cores {
        why.push(format!(
            "its own CPU was {:.2} of the machine's {} cores",
            load.simulator_cores, load.cores
        ));
    } else if load.machine_cores >= SATURATED_SHARE * cores && load.simulator_cores >= services {
        why.push(format!(
            "the machine was saturated ({:.2} of {} cores busy) and the simulator used more CPU ({:.2} cores) than the services ({:.2})",
            load.machine_cores, load.cores, load.simulator_cores, services
        ));
    }
    if !load.resync && load.wait_p99_ms >= WAIT_P99_LIMIT_MS {
        why.push(format!(
            "its heartbeats and deltas waited {:.0} ms for a worker at p99 (more --concurrency, or a lighter simulator, would have sent them sooner)",
            load.wait_p99_ms
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(simulator: f64, services: [f64; 3], machine: f64, wait_p99_ms: f64) -> PhaseLoad {
        let [collector, hub, clickhouse] = services;
        PhaseLoad {
            from_s: 0.0,
            to_s: 60.0,
            resync: false,
            cores: 2,
            simulator_cores: simulator,
            collector_cores: collector,
            hub_cores: hub,
            clickhouse_cores: clickhouse,
            machine_cores: machine,
            simulator_cpu_seconds: simulator * 60.0,
            sends: 1_000,
            wait_p50_ms: wait_p99_ms / 10.0,
            wait_p99_ms,
            simulator_bound: None,
        }
    }

    #[test]
    fn the_simulator_is_the_bottleneck_when_its_cpu_or_its_queue_is() {
        // The services busy, the simulator light and its sends on time: the services set the pace.
        assert_eq!(
            simulator_bound(&load(0.3, [0.6, 0.2, 0.8], 1.95, 40.0)),
            None
        );
        // A core's worth of the two, whatever the services did.
        let why = simulator_bound(&load(1.0, [0.2, 0.1, 0.3], 1.6, 40.0)).unwrap();
        assert!(
            why.starts_with("its own CPU was 1.00 of the machine's 2 cores"),
            "{why}"
        );
        // Below a core, but the machine is saturated and the simulator outspends the services.
        let why = simulator_bound(&load(0.8, [0.3, 0.1, 0.35], 1.9, 40.0)).unwrap();
        assert!(why.contains("saturated (1.90 of 2 cores busy)"), "{why}");
        assert!(
            why.contains("(0.80 cores) than the services (0.75)"),
            "{why}"
        );
        // The same shares on a machine with room to spare: not a limit.
        assert_eq!(
            simulator_bound(&load(0.8, [0.3, 0.1, 0.35], 1.5, 40.0)),
            None
        );
        // Sends queued for a worker, with the CPU light: still the simulator.
        let why = simulator_bound(&load(0.2, [0.3, 0.1, 0.3], 1.0, 4_682.0)).unwrap();
        assert!(
            why.starts_with("its heartbeats and deltas waited 4682 ms for a worker at p99"),
            "{why}"
        );
        // Both at once are both said.
        let why = simulator_bound(&load(1.2, [0.3, 0.1, 0.3], 1.9, 1_500.0)).unwrap();
        assert_eq!(why.matches("; ").count(), 1, "{why}");
        // In a full resync the queue is what is measured: only the CPU counts.
        let mut resync = load(0.2, [0.3, 0.1, 0.3], 1.0, 4_682.0);
        resync.resync = true;
        assert_eq!(simulator_bound(&resync), None);
        resync.simulator_cores = 1.1;
        assert!(simulator_bound(&resync).is_some());
    }

    #[test]
    fn a_window_averages_its_samples_and_its_heartbeat_and_delta_waits() {
        let sample = |process: &str, at_s: f64, cpu_cores: f64| ProcSample {
            process: process.to_owned(),
            at_s,
            cpu_cores,
            rss_mb: 0.0,
        };
        let samples = vec![
            sample("loadtest", 10.0, 9.0), // before the window
            sample("loadtest", 11.0, 0.4),
            sample("loadtest", 12.0, 0.6),
            sample("collector", 12.0, 0.5),
            sample(MACHINE, 11.0, 1.5),
            sample(MACHINE, 12.0, 1.7),
            sample("loadtest", 13.5, 9.0), // after it
        ];
        let ack = |at_ms: u64, kind: ReportKind, wait_ms: u32| Ack {
            at_ms,
            kind,
            rows: 0,
            bytes: 0,
            latency_us: 0,
            wait_us: wait_ms * 1_000,
        };
        let acks = vec![
            ack(10_500, ReportKind::Heartbeat, 1),
            ack(10_600, ReportKind::Delta, 3),
            ack(11_000, ReportKind::Snapshot, 90_000), // a resync's queue: left out
            ack(12_900, ReportKind::Heartbeat, 2_000),
            ack(13_100, ReportKind::Delta, 5_000), // after the window
        ];
        let load = phase_load((10.2, 13.0), false, 2, &samples, &acks);
        assert!((load.simulator_cores - 0.5).abs() < 1e-9);
        assert!((load.simulator_cpu_seconds - 0.5 * 2.8).abs() < 1e-9);
        assert!((load.collector_cores - 0.5).abs() < 1e-9);
        assert_eq!(load.hub_cores, 0.0, "no sample: nothing measured");
        assert!((load.machine_cores - 1.6).abs() < 1e-9);
        assert!((load.other_cores() - 0.6).abs() < 1e-9);
        assert_eq!(load.sends, 3);
        assert_eq!(load.wait_p99_ms, 2_000.0);
        assert!(load
            .simulator_bound
            .as_deref()
            .is_some_and(|why| why.contains("waited 2000 ms")));
    }
}
