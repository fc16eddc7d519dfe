//! Many simulated agents multiplexed over a few workers. Each cluster delivers its reports in
//! order, one at a time, with its own token, through the agent's own [`Sender`] (same request,
//! same answer handling); it sends a heartbeat when nothing went out for the heartbeat interval;
//! a dark cluster sends nothing and keeps its reports until it comes back.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_collector::agent::sender::{SendOutcome, Sender, REQUEST_OVERHEAD_BYTES};
use fleetscope_collector::protocol::ReportKind;
use fleetscope_runtime::clock;
use tokio::sync::Notify;

use crate::sim::SimFleet;

/// One acknowledged request.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    /// Milliseconds since the run started, at acknowledgement.
    pub at_ms: u64,
    pub kind: ReportKind,
    pub rows: u32,
    /// Body plus request overhead, as the agent accounts it.
    pub bytes: u32,
    /// From the first attempt to the acknowledgement.
    pub latency_us: u32,
    /// How long the request waited for one of the simulator's workers: a report from when its
    /// cluster was queued, a heartbeat from when it fell due. A real agent does not wait for
    /// other clusters, so this is the simulator's own delay, counted apart.
    pub wait_us: u32,
}

#[derive(Debug, Default)]
pub struct Tally {
    pub acks: Vec<Ack>,
    /// Answers 429/5xx that were retried later.
    pub retried: u64,
    /// Answers the collector refused (4xx other than 429): a bug or a misconfiguration.
    pub refused: Vec<String>,
    pub unreachable: u64,
}

#[derive(Debug)]
struct Schedule {
    /// Clusters with something in their outbox, not in flight, not dark.
    ready: VecDeque<usize>,
    /// When each cluster in `ready` entered it; `None` when it is not there.
    queued_at: Vec<Option<Instant>>,
    in_flight: Vec<bool>,
    /// (due, cluster): heartbeats; an entry is valid when `due` equals the cluster's.
    heartbeats: BinaryHeap<Reverse<(Instant, usize)>>,
    heartbeat_due: Vec<Option<Instant>>,
}

/// The simulated agents of a fleet.
#[derive(Debug)]
pub struct Agents {
    pub fleet: Mutex<SimFleet>,
    schedule: Mutex<Schedule>,
    senders: Vec<Sender>,
    pub tally: Mutex<Tally>,
    wake: Notify,
    started: Instant,
    heartbeat_every: Duration,
    stopping: AtomicBool,
}

#[derive(Debug)]
enum Job {
    Report(usize, Box<fleetscope_collector::protocol::Report>),
    /// A report whose body was encoded ahead: cluster, report number, kind, rows, body.
    Encoded(usize, u64, ReportKind, u32, Vec<u8>),
    Heartbeat(usize, Vec<u8>),
}

/// A job and how long it waited for a worker.
#[derive(Debug)]
struct Taken {
    job: Job,
    waited: Duration,
}

impl Agents {
    pub fn new(
        fleet: SimFleet,
        collector_url: &str,
        heartbeat_every: Duration,
        started: Instant,
    ) -> anyhow::Result<Arc<Agents>> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(1_024)
            .build()?;
        let senders = fleet
            .clusters
            .iter()
            .map(|c| Sender::with_client(client.clone(), collector_url, Some(c.token.clone())))
            .collect::<Result<Vec<_>, _>>()
            .map_err(anyhow::Error::msg)?;
        let n = fleet.clusters.len();
        Ok(Arc::new(Agents {
            fleet: Mutex::new(fleet),
            schedule: Mutex::new(Schedule {
                ready: VecDeque::new(),
                queued_at: vec![None; n],
                in_flight: vec![false; n],
                heartbeats: BinaryHeap::new(),
                heartbeat_due: vec![None; n],
            }),
            senders,
            tally: Mutex::new(Tally::default()),
            wake: Notify::new(),
            started,
            heartbeat_every,
            stopping: AtomicBool::new(false),
        }))
    }

    pub fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Tells the workers that these clusters may have something to send.
    pub fn poke(&self, clusters: impl IntoIterator<Item = usize>) {
        let fleet = self.fleet.lock().expect("fleet lock");
        let mut schedule = self.schedule.lock().expect("schedule lock");
        for c in clusters {
            let sim = &fleet.clusters[c];
            if !sim.dark
                && !sim.never_seen
                && !sim.outbox.is_empty()
                && schedule.queued_at[c].is_none()
                && !schedule.in_flight[c]
            {
                schedule.queued_at[c] = Some(Instant::now());
                schedule.ready.push_back(c);
            }
        }
        drop(schedule);
        drop(fleet);
        self.wake.notify_waiters();
    }

    /// Clusters with reports not yet acknowledged, dark ones left out.
    pub fn undelivered(&self) -> usize {
        let fleet = self.fleet.lock().expect("fleet lock");
        fleet
            .clusters
            .iter()
            .filter(|c| !c.dark && !c.never_seen && !c.outbox.is_empty())
            .count()
    }

    /// Waits until every delivering cluster's outbox is empty.
    pub async fn drained(&self, timeout: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + timeout;
        loop {
            self.no_refusals()?;
            let left = self.undelivered();
            if left == 0 {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < until,
                "{left} clusters still had reports undelivered after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Fails when the collector refused a report: retrying will not help, and the run would
    /// only wait.
    pub fn no_refusals(&self) -> anyhow::Result<()> {
        let tally = self.tally.lock().expect("tally lock");
        anyhow::ensure!(
            tally.refused.is_empty(),
            "the collector refused reports: {}",
            tally.refused.join("; ")
        );
        Ok(())
    }

    fn next_job(&self) -> Option<Taken> {
        let mut fleet = self.fleet.lock().expect("fleet lock");
        let mut schedule = self.schedule.lock().expect("schedule lock");
        // Due heartbeats first: each is one small request, and a real agent's heartbeat does
        // not wait for other clusters' snapshots.
        let now = Instant::now();
        while let Some(Reverse((due, c))) = schedule.heartbeats.peek().copied() {
            if due > now {
                break;
            }
            schedule.heartbeats.pop();
            if schedule.heartbeat_due[c] != Some(due) {
                continue;
            }
            let sim = &fleet.clusters[c];
            if sim.dark || schedule.in_flight[c] || !sim.outbox.is_empty() {
                // Reports go first (a report is a sign of life too); looked at again later.
                let next = now + self.heartbeat_every;
                schedule.heartbeat_due[c] = Some(next);
                schedule.heartbeats.push(Reverse((next, c)));
                continue;
            }
            schedule.in_flight[c] = true;
            schedule.heartbeat_due[c] = None;
            let body = fleet.heartbeat(c, clock::now()).encode();
            return Some(Taken {
                job: Job::Heartbeat(c, body),
                waited: now.saturating_duration_since(due),
            });
        }
        while let Some(c) = schedule.ready.pop_front() {
            let queued_at = schedule.queued_at[c].take();
            let sim = &mut fleet.clusters[c];
            if sim.dark || schedule.in_flight[c] {
                continue;
            }
            let Some(report) = sim.outbox.front() else {
                continue;
            };
            let job = match sim.encoded.take() {
                Some((seq, body)) if seq == report.report_seq => {
                    Job::Encoded(c, seq, report.kind, report.changes.len() as u32, body)
                }
                _ => Job::Report(c, Box::new(report.clone())),
            };
            schedule.in_flight[c] = true;
            return Some(Taken {
                job,
                waited: queued_at.map_or(Duration::ZERO, |at| now.saturating_duration_since(at)),
            });
        }
        None
    }

    fn next_wait(&self) -> Duration {
        let schedule = self.schedule.lock().expect("schedule lock");
        schedule
            .heartbeats
            .peek()
            .map(|Reverse((due, _))| due.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(200))
            .min(Duration::from_millis(200))
    }

    /// After a request ended: the outbox moves on, the next heartbeat is scheduled, and the
    /// cluster is queued again if it has more.
    fn finish(self: &Arc<Self>, c: usize, acked_report: Option<u64>, retry_in: Option<Duration>) {
        let mut fleet = self.fleet.lock().expect("fleet lock");
        let mut schedule = self.schedule.lock().expect("schedule lock");
        schedule.in_flight[c] = false;
        let sim = &mut fleet.clusters[c];
        if retry_in.is_none() {
            sim.last_ack = Some(clock::now().seconds());
            if let Some(seq) = acked_report {
                if sim.outbox.front().is_some_and(|r| r.report_seq == seq) {
                    sim.outbox.pop_front();
                }
                if sim.outbox.is_empty() && !sim.dark {
                    sim.frozen = None;
                }
            }
        }
        let due = Instant::now() + self.heartbeat_every;
        schedule.heartbeat_due[c] = Some(due);
        schedule.heartbeats.push(Reverse((due, c)));
        let more = !sim.outbox.is_empty() && !sim.dark;
        drop(fleet);
        match retry_in {
            None if more => {
                schedule.queued_at[c] = Some(Instant::now());
                schedule.ready.push_back(c);
            }
            None => {}
            Some(delay) if more => {
                drop(schedule);
                let agents = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    agents.poke([c]);
                });
            }
            Some(_) => {}
        }
    }

    /// Runs `workers` delivery loops until [`Agents::stop`].
    pub fn spawn_workers(self: &Arc<Self>, workers: usize) -> Vec<tokio::task::JoinHandle<()>> {
        (0..workers.max(1))
            .map(|_| {
                let agents = self.clone();
                tokio::spawn(async move { agents.work().await })
            })
            .collect()
    }

    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.wake.notify_waiters();
    }

    async fn work(self: Arc<Self>) {
        while !self.stopping.load(Ordering::Relaxed) {
            let Some(Taken { job, waited }) = self.next_job() else {
                let wait = self.next_wait();
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = tokio::time::sleep(wait) => {}
                }
                continue;
            };
            let (c, seq, kind, rows, body) = match job {
                Job::Report(c, report) => (
                    c,
                    Some(report.report_seq),
                    report.kind,
                    report.changes.len() as u32,
                    report.encode(),
                ),
                Job::Encoded(c, seq, kind, rows, body) => (c, Some(seq), kind, rows, body),
                Job::Heartbeat(c, body) => (c, None, ReportKind::Heartbeat, 0, body),
            };
            let bytes = body.len() as u64 + REQUEST_OVERHEAD_BYTES;
            let first = Instant::now();
            let outcome = self.senders[c].send(body).await;
            let retry_in = match outcome {
                SendOutcome::Acknowledged => {
                    self.tally.lock().expect("tally lock").acks.push(Ack {
                        at_ms: self.elapsed_ms(),
                        kind,
                        rows,
                        bytes: bytes as u32,
                        latency_us: first.elapsed().as_micros() as u32,
                        wait_us: waited.as_micros().min(u128::from(u32::MAX)) as u32,
                    });
                    None
                }
                SendOutcome::RetryAfter(delay) => {
                    self.tally.lock().expect("tally lock").retried += 1;
                    Some(delay.min(Duration::from_secs(2)))
                }
                SendOutcome::Refused { status, message } => {
                    let mut tally = self.tally.lock().expect("tally lock");
                    let text = format!("{status}: {message}");
                    if tally.refused.len() < 20 && !tally.refused.contains(&text) {
                        tally.refused.push(text);
                    }
                    Some(Duration::from_secs(5))
                }
                SendOutcome::Unreachable(_) => {
                    self.tally.lock().expect("tally lock").unreachable += 1;
                    Some(Duration::from_secs(1))
                }
            };
            self.finish(c, seq, retry_in);
        }
    }
}
