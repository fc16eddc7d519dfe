//! The faults of cluster mode, injected one at a time while a scenario runs: a ClickHouse
//! replica killed (SIGKILL) and started again on its data, ZooKeeper stopped (SIGSTOP) and
//! continued, a collector killed and started again, a hub killed and started again. What each
//! did to ingest, to the answers through the balancer, to freshness and to the store is
//! reported per fault.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use fleetscope_local_process::Suspended;
use serde::{Deserialize, Serialize};

use crate::agents::Ack;
use crate::audit::StoreAudit;
use crate::cluster::ClusterSetup;
use crate::procs::{Service, Watched};
use crate::readers::Timings;

/// How many times a killed replica is started before the fault counts as failed, and the
/// pause between two starts (ZooKeeper ends a killed server's session within its timeout).
const REPLICA_START_ATTEMPTS: u32 = 10;
const REPLICA_START_PAUSE: Duration = Duration::from_secs(5);

/// A fault, as named on the command line.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// The last replica of the last shard killed (SIGKILL), started again on its data.
    Replica,
    /// ZooKeeper stopped (SIGSTOP): replicated inserts and `ON CLUSTER` DDL are refused until
    /// it continues (SIGCONT).
    Zookeeper,
    /// The first collector killed (SIGKILL), started again on its port.
    Collector,
    /// The last hub killed (SIGKILL), started again on its port.
    Hub,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Replica => "replica",
            Fault::Zookeeper => "zookeeper",
            Fault::Collector => "collector",
            Fault::Hub => "hub",
        }
    }

    /// What the fault does, for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Fault::Replica => "a ClickHouse replica killed, then started again on its data",
            Fault::Zookeeper => "ZooKeeper stopped, then continued",
            Fault::Collector => "a collector killed, then started again",
            Fault::Hub => "a hub killed, then started again",
        }
    }
}

/// How long each fault lasts, and when in its phase it comes.
#[derive(Debug, Clone, Copy)]
pub struct FaultKnobs {
    /// From the phase's start to the fault.
    pub lead: Duration,
    pub replica_down: Duration,
    pub zookeeper_stop: Duration,
    pub service_down: Duration,
}

/// What the servers a fault acts on are: the cluster, the services' copies and the sampler's
/// list of processes (a restarted process is sampled under its new pid).
#[derive(Debug)]
pub struct Targets<'a> {
    pub setup: &'a ClusterSetup,
    pub collectors: &'a mut [Service],
    pub hubs: &'a mut [Service],
    pub watched: &'a Watched,
}

/// Waits for the lead, injects `fault`, waits for its length, and ends it. Returns when it was
/// injected and when the server was back (a restarted service or replica ready again), in
/// seconds since `started`.
pub async fn inject(
    fault: Fault,
    knobs: FaultKnobs,
    targets: Targets<'_>,
    started: Instant,
) -> anyhow::Result<(f64, f64)> {
    tokio::time::sleep(knobs.lead).await;
    let injected = started.elapsed().as_secs_f64();
    match fault {
        Fault::Replica => {
            let clickhouse = targets.setup.clickhouse.clone();
            let killed = tokio::task::spawn_blocking(move || {
                let mut cluster = clickhouse.lock().expect("cluster lock");
                let (shards, replicas) = (cluster.spec().shards, cluster.spec().replicas);
                let server = cluster.server_mut(shards - 1, replicas - 1);
                let pid = server.pid();
                server.kill_now();
                pid
            })
            .await?;
            tokio::time::sleep(knobs.replica_down).await;
            let clickhouse = targets.setup.clickhouse.clone();
            let restarted = tokio::task::spawn_blocking(move || {
                let mut cluster = clickhouse.lock().expect("cluster lock");
                let (shards, replicas) = (cluster.spec().shards, cluster.spec().replicas);
                let server = cluster.server_mut(shards - 1, replicas - 1);
                // A replica started again before ZooKeeper has ended the killed one's session
                // finds itself still marked active and exits; an operator starts it again.
                let mut attempt = 1;
                loop {
                    match server.restart() {
                        Ok(()) => break Ok(server.pid()),
                        Err(err) if attempt < REPLICA_START_ATTEMPTS => {
                            eprintln!("  the killed replica did not start (attempt {attempt}), trying again: {err}");
                            attempt += 1;
                            std::thread::sleep(REPLICA_START_PAUSE);
                        }
                        Err(err) => break Err(err),
                    }
                }
            })
            .await?
            .context("starting the killed replica again")?;
            if let (Some(old), Some(new)) = (killed, restarted) {
                repoint(targets.watched, old, new);
            }
        }
        Fault::Zookeeper => {
            let pid = {
                let cluster = targets.setup.clickhouse.lock().expect("cluster lock");
                cluster.zookeeper().and_then(|zk| zk.pid())
            }
            .context("ZooKeeper is not running")?;
            let stopped = tokio::task::spawn_blocking(move || Suspended::stop(pid))
                .await?
                .map_err(anyhow::Error::msg)?;
            tokio::time::sleep(knobs.zookeeper_stop).await;
            drop(stopped);
        }
        Fault::Collector => {
            restart_after(
                &mut targets.collectors[0],
                knobs.service_down,
                targets.watched,
            )
            .await?;
        }
        Fault::Hub => {
            let last = targets.hubs.len() - 1;
            restart_after(&mut targets.hubs[last], knobs.service_down, targets.watched).await?;
        }
    }
    Ok((injected, started.elapsed().as_secs_f64()))
}

/// Kills `service`, waits `down`, starts it again and waits until it is ready.
async fn restart_after(
    service: &mut Service,
    down: Duration,
    watched: &Watched,
) -> anyhow::Result<()> {
    let old = service.pid();
    service.kill();
    tokio::time::sleep(down).await;
    service.restart().await?;
    repoint(watched, old, service.pid());
    Ok(())
}

/// Points the sampler's entry of the process `old` at its successor `new`.
pub(crate) fn repoint(watched: &Watched, old: u32, new: u32) {
    for entry in watched.lock().expect("watched lock").iter_mut() {
        if entry.1 == old {
            entry.1 = new;
        }
    }
}

/// What the run recorded of one fault phase; [`FaultReport::from_record`] derives the report.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    pub fault: Fault,
    pub scenario: &'static str,
    pub phase: String,
    /// Seconds since the run started.
    pub phase_started_s: f64,
    pub injected_s: f64,
    pub restored_s: f64,
    /// When the scenario ended (it may outlast the fault, or the fault it).
    pub scenario_ended_s: f64,
    /// When every outbox had emptied after both.
    pub drained_s: f64,
    pub phase_ended_s: f64,
    /// Requests answered with something other than an acknowledgement during the phase (sent
    /// again later), and requests that found no collector.
    pub not_acknowledged: u64,
    pub check_passed: bool,
    pub check_seconds: f64,
    pub audit: StoreAudit,
}

/// The freshness of the changes sampled during a fault's phase (from the report's freshness
/// per phase).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseFreshnessFigures {
    pub samples: u64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// One fault's figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaultReport {
    pub fault: Fault,
    pub what: String,
    /// The scenario it was injected during, and the phase's name.
    pub scenario: String,
    pub phase: String,
    /// Seconds since the run started.
    pub injected_at_s: f64,
    /// From the fault to its server being back (ready again).
    pub down_seconds: f64,
    /// Requests acknowledged during the phase, and the changes they carried.
    pub acknowledged_requests: u64,
    pub acknowledged_changes: u64,
    /// Requests not acknowledged during the phase (each sent again later by its agent).
    pub not_acknowledged: u64,
    /// The longest stretch of the phase without any acknowledgement.
    pub longest_without_acknowledgement_s: f64,
    /// From the later of the server's return and the scenario's end to every agent's outbox
    /// empty.
    pub drained_after_s: f64,
    /// Sampled status changes made during the phase: how many, and the 99th percentile and
    /// the longest time until the hub (through the balancer) showed them.
    pub freshness_samples: u64,
    pub freshness_p99_ms: f64,
    pub freshness_max_ms: f64,
    /// Readers' requests through the hubs' balancer during the phase, those that failed, and
    /// the longest stretch from a failed request to the next answered one.
    pub answers: u64,
    pub failed_answers: u64,
    pub longest_failing_s: f64,
    /// After the outboxes emptied: how long until every hub agreed with the ground truth.
    pub check_passed: bool,
    pub check_seconds: f64,
    pub audit: StoreAudit,
}

impl FaultReport {
    /// The figures of `record` from the run's acknowledgements and the readers' answers.
    pub fn from_record(
        record: &FaultRecord,
        acks: &[Ack],
        timings: &Timings,
        freshness: Option<PhaseFreshnessFigures>,
    ) -> FaultReport {
        let (from_ms, to_ms) = (
            (record.phase_started_s * 1e3) as u64,
            (record.phase_ended_s * 1e3) as u64,
        );
        let mut at: Vec<u64> = acks
            .iter()
            .filter(|a| (from_ms..to_ms).contains(&a.at_ms))
            .map(|a| a.at_ms)
            .collect();
        let acknowledged_changes = acks
            .iter()
            .filter(|a| (from_ms..to_ms).contains(&a.at_ms))
            .map(|a| u64::from(a.rows))
            .sum();
        at.sort_unstable();
        let longest_gap_ms = std::iter::once(from_ms)
            .chain(at.iter().copied())
            .zip(at.iter().copied().chain(std::iter::once(to_ms)))
            .map(|(a, b)| b.saturating_sub(a))
            .max()
            .unwrap_or(0);
        let (answers, failed_answers, longest_failing_s) =
            timings.outages(record.phase_started_s, record.phase_ended_s);
        FaultReport {
            fault: record.fault,
            what: record.fault.describe().to_owned(),
            scenario: record.scenario.to_owned(),
            phase: record.phase.clone(),
            injected_at_s: record.injected_s,
            down_seconds: record.restored_s - record.injected_s,
            acknowledged_requests: at.len() as u64,
            acknowledged_changes,
            not_acknowledged: record.not_acknowledged,
            longest_without_acknowledgement_s: longest_gap_ms as f64 / 1e3,
            drained_after_s: (record.drained_s - record.restored_s.max(record.scenario_ended_s))
                .max(0.0),
            freshness_samples: freshness.map_or(0, |f| f.samples),
            freshness_p99_ms: freshness.map_or(0.0, |f| f.p99_ms),
            freshness_max_ms: freshness.map_or(0.0, |f| f.max_ms),
            answers,
            failed_answers,
            longest_failing_s,
            check_passed: record.check_passed,
            check_seconds: record.check_seconds,
            audit: record.audit.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetscope_collector::protocol::ReportKind;

    fn ack(at_ms: u64, rows: u32) -> Ack {
        Ack {
            at_ms,
            kind: ReportKind::Delta,
            rows,
            bytes: 100,
            latency_us: 1_000,
            wait_us: 0,
        }
    }

    #[test]
    fn a_fault_report_counts_its_phase_only() {
        let record = FaultRecord {
            fault: Fault::Zookeeper,
            scenario: "steady",
            phase: "steady, zookeeper".into(),
            phase_started_s: 10.0,
            injected_s: 15.0,
            restored_s: 75.0,
            scenario_ended_s: 70.0,
            drained_s: 79.5,
            phase_ended_s: 90.0,
            not_acknowledged: 12,
            check_passed: true,
            check_seconds: 0.4,
            audit: StoreAudit::default(),
        };
        let acks = [
            ack(9_000, 5),
            ack(11_000, 1),
            ack(14_000, 2),
            ack(77_000, 3),
            ack(89_000, 1),
            ack(95_000, 9),
        ];
        let mut timings = Timings::default();
        timings
            .by_route
            .insert("summary", (vec![(12.0, 1.0), (20.0, 1.0), (40.0, 1.0)], 2));
        timings.failed_at = vec![16.0, 17.0, 95.0];
        let freshness = PhaseFreshnessFigures {
            samples: 20,
            p99_ms: 3_100.0,
            max_ms: 3_200.0,
        };
        let report = FaultReport::from_record(&record, &acks, &timings, Some(freshness));
        assert_eq!(
            (report.freshness_samples, report.freshness_p99_ms),
            (20, 3_100.0)
        );
        assert_eq!(report.acknowledged_requests, 4);
        assert_eq!(report.acknowledged_changes, 1 + 2 + 3 + 1);
        // 14 s to 77 s without an acknowledgement.
        assert_eq!(report.longest_without_acknowledgement_s, 63.0);
        assert_eq!(report.down_seconds, 60.0);
        assert_eq!(report.drained_after_s, 4.5, "from the return, the later");
        assert_eq!(
            (report.answers, report.failed_answers),
            (5, 2),
            "the failure at 95 s is after the phase"
        );
        // Failing from 16 s until the answer sent at 20 s.
        assert_eq!(report.longest_failing_s, 4.0);
    }
}
