//! Many simulated agents multiplexed over a few workers. Each cluster delivers its reports in
//! order, one at a time, with its own token, through the agent's own [`Sender`] (same request,
//! same answer handling); it sends a heartbeat when nothing went out for the heartbeat interval;
//! a dark cluster sends nothing and keeps its reports until it comes back. A report that was not
//! acknowledged is sent again after the agent's own backoff ([`Backoff::Spread`]), or after
//! the same waits without their spread ([`Backoff::Plain`]). While both heartbeats and reports
//! wait, the workers take them in turns, so neither can starve the other.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_collector::agent::sender::{SendOutcome, Sender, REQUEST_OVERHEAD_BYTES};
use fleetscope_collector::agent::AgentConfig;
use fleetscope_collector::jitter;
use fleetscope_collector::protocol::{Report, ReportEncoder, ReportKind};
use fleetscope_runtime::clock;
use serde::{Deserialize, Serialize};
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

thread_local! {
    /// One compressor per thread of the simulator, kept between reports: thousands of
    /// heartbeats a second would otherwise each pay for a fresh one.
    static ENCODER: RefCell<ReportEncoder> = RefCell::new(ReportEncoder::new());
}

/// The request body of `report`, as [`Report::encode`] gives it, with this thread's compressor.
pub fn encode(report: &Report) -> Vec<u8> {
    ENCODER.with_borrow_mut(|encoder| encoder.encode(report))
}

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    Acknowledged,
    /// Answered 429 or 5xx: busy or unable to store now, with a Retry-After (or its default).
    Busy,
    /// Answered with another status (a refusal a retry alone will not fix).
    Refused,
    /// No answer: no collector listening, the connection reset, a timeout.
    Unreachable,
}

impl Answered {
    /// Of an outcome of the agent's sender.
    pub fn of(outcome: &SendOutcome) -> Answered {
        match outcome {
            SendOutcome::Acknowledged => Answered::Acknowledged,
            SendOutcome::RetryAfter(_) => Answered::Busy,
            SendOutcome::Refused { .. } => Answered::Refused,
            SendOutcome::Unreachable(_) => Answered::Unreachable,
        }
    }
}

/// One request of any kind, acknowledged or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// Milliseconds since the run started, when it was sent.
    pub sent_ms: u64,
    pub answered: Answered,
}

#[derive(Debug, Default)]
pub struct Tally {
    pub acks: Vec<Ack>,
    /// Answers 429/5xx that were retried later.
    pub retried: u64,
    /// Answers the collector refused (4xx other than 429): a bug or a misconfiguration.
    pub refused: Vec<String>,
    pub unreachable: u64,
    /// Every request sent while [`Agents::record_attempts`] is on, in the order they ended.
    pub attempts: Option<Vec<Attempt>>,
}

/// How the simulated agents wait before sending a report again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    /// As the agent does: after no answer, a wait between half the backoff and all of it; after
    /// a Retry-After, that wait and up to half as long again.
    #[default]
    Spread,
    /// The same waits without the spread: all of the backoff, and the Retry-After exactly.
    /// Agents cut off at the same moment come back at the same moments.
    Plain,
}

impl Backoff {
    pub fn name(self) -> &'static str {
        match self {
            Backoff::Spread => "spread",
            Backoff::Plain => "plain",
        }
    }
}

/// The wait before an agent whose backoff stands at `backoff` sends again after `outcome`,
/// and its backoff after that, by the agent's rules: the collector's Retry-After (at least
/// `min`), the longest backoff `max` after a refusal, the backoff itself when the collector did
/// not answer; the backoff doubles after every request not acknowledged, up to `max`, and an
/// acknowledgement (no wait: `None`) resets it to `min`. [`Backoff::Spread`] places each wait
/// by `fraction` (0 to 1) as the agent does; [`Backoff::Plain`] ignores it.
pub fn retry_wait(
    style: Backoff,
    outcome: &SendOutcome,
    backoff: Duration,
    (min, max): (Duration, Duration),
    fraction: f64,
) -> (Option<Duration>, Duration) {
    let doubled = (backoff * 2).min(max);
    let wait = match (outcome, style) {
        (SendOutcome::Acknowledged, _) => return (None, min),
        (SendOutcome::RetryAfter(asked), Backoff::Spread) => {
            jitter::after((*asked).max(min), fraction)
        }
        (SendOutcome::RetryAfter(asked), Backoff::Plain) => (*asked).max(min),
        (SendOutcome::Refused { .. }, Backoff::Spread) => jitter::within(max, fraction),
        (SendOutcome::Refused { .. }, Backoff::Plain) => max,
        (SendOutcome::Unreachable(_), Backoff::Spread) => jitter::within(backoff, fraction),
        (SendOutcome::Unreachable(_), Backoff::Plain) => backoff,
    };
    (Some(wait), doubled)
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
    /// (due, cluster): reports to send again after an answer that was not an acknowledgement;
    /// an entry is valid when `due` equals the cluster's.
    retries: BinaryHeap<Reverse<(Instant, usize)>>,
    retry_due: Vec<Option<Instant>>,
    /// Whose turn it is when a heartbeat and a report both wait: a heartbeat's when true.
    heartbeat_turn: bool,
    /// Each cluster's next backoff after its collector was unreachable, as the agent's.
    backoff: Vec<Duration>,
    /// How the waits before sending again are placed.
    style: Backoff,
    /// Why each cluster's last request was not acknowledged, and how many in a row were not;
    /// cleared by an acknowledgement.
    failures: Vec<Option<(u32, String)>>,
}

impl Schedule {
    fn new(clusters: usize, min_backoff: Duration) -> Schedule {
        Schedule {
            ready: VecDeque::new(),
            queued_at: vec![None; clusters],
            in_flight: vec![false; clusters],
            heartbeats: BinaryHeap::new(),
            heartbeat_due: vec![None; clusters],
            retries: BinaryHeap::new(),
            retry_due: vec![None; clusters],
            heartbeat_turn: true,
            backoff: vec![min_backoff; clusters],
            style: Backoff::Spread,
            failures: vec![None; clusters],
        }
    }

    /// Queues a cluster for a worker, counting its wait from `since`.
    fn queue(&mut self, c: usize, since: Instant) {
        self.queued_at[c] = Some(since);
        self.ready.push_back(c);
    }

    fn schedule_heartbeat(&mut self, c: usize, due: Instant) {
        self.heartbeat_due[c] = Some(due);
        self.heartbeats.push(Reverse((due, c)));
    }

    /// The earliest heartbeat still valid and due at `now`; stale entries are dropped.
    fn due_heartbeat(&mut self, now: Instant) -> Option<(Instant, usize)> {
        while let Some(Reverse((due, c))) = self.heartbeats.peek().copied() {
            if self.heartbeat_due[c] == Some(due) {
                return (due <= now).then_some((due, c));
            }
            self.heartbeats.pop();
        }
        None
    }

    /// Moves the retries due at `now` to the queue, their wait counted from when they fell due.
    fn release_retries(&mut self, now: Instant, fleet: &SimFleet) {
        while let Some(Reverse((due, c))) = self.retries.peek().copied() {
            if due > now {
                break;
            }
            self.retries.pop();
            if self.retry_due[c] != Some(due) {
                continue;
            }
            self.retry_due[c] = None;
            let sim = &fleet.clusters[c];
            if !sim.dark && !sim.outbox.is_empty() && !self.in_flight[c] {
                self.queue(c, due);
            }
        }
    }
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
    /// The agent's backoff after an unreachable collector, doubling from the first to the last.
    min_backoff: Duration,
    max_backoff: Duration,
    stopping: AtomicBool,
}

#[derive(Debug)]
enum Job {
    Report(usize, Box<Report>),
    /// A report whose body was encoded ahead: cluster, report number, kind, rows, body.
    Encoded(usize, u64, ReportKind, u32, Vec<u8>),
    Heartbeat(usize, Box<Report>),
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
        // The real agent's backoff, from its defaults.
        let agent = AgentConfig::new(
            fleetscope_model::ClusterId::parse("loadtest").map_err(anyhow::Error::msg)?,
            collector_url,
            "",
        );
        let n = fleet.clusters.len();
        Ok(Arc::new(Agents {
            fleet: Mutex::new(fleet),
            schedule: Mutex::new(Schedule::new(n, agent.min_backoff)),
            senders,
            tally: Mutex::new(Tally::default()),
            wake: Notify::new(),
            started,
            heartbeat_every,
            min_backoff: agent.min_backoff,
            max_backoff: agent.max_backoff,
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
            // A cluster waiting to retry keeps its backoff: new reports do not cut it short.
            if !sim.dark
                && !sim.never_seen
                && !sim.outbox.is_empty()
                && schedule.queued_at[c].is_none()
                && schedule.retry_due[c].is_none()
                && !schedule.in_flight[c]
            {
                schedule.queue(c, Instant::now());
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

    /// The clusters with reports not yet acknowledged (dark ones left out), at most `limit` of
    /// them named, each with where its next report is: sent and not answered yet, waiting to
    /// be sent again after an answer that was not an acknowledgement (which), or queued for a
    /// worker.
    pub fn undelivered_detail(&self, limit: usize) -> String {
        let fleet = self.fleet.lock().expect("fleet lock");
        let schedule = self.schedule.lock().expect("schedule lock");
        let now = Instant::now();
        let (mut in_flight, mut retrying, mut queued, mut lost) = (0, 0, 0, 0);
        let mut named = Vec::new();
        for (c, sim) in fleet.clusters.iter().enumerate() {
            if sim.dark || sim.never_seen || sim.outbox.is_empty() {
                continue;
            }
            let report = sim.outbox.front().map_or(0, |r| r.report_seq);
            let failed = schedule.failures[c]
                .as_ref()
                .map(|(n, why)| format!("; {n} attempt(s) not acknowledged, the last {why}"))
                .unwrap_or_default();
            let state = if schedule.in_flight[c] {
                in_flight += 1;
                "sent, no answer yet".to_owned()
            } else if let Some(due) = schedule.retry_due[c] {
                retrying += 1;
                format!(
                    "to be sent again in {:.1} s",
                    due.saturating_duration_since(now).as_secs_f64()
                )
            } else if let Some(at) = schedule.queued_at[c] {
                queued += 1;
                format!(
                    "queued for a worker for {:.1} s",
                    now.saturating_duration_since(at).as_secs_f64()
                )
            } else {
                lost += 1;
                "neither queued nor scheduled (a simulator bug)".to_owned()
            };
            if named.len() < limit {
                named.push(format!("{} report {report}: {state}{failed}", sim.id));
            }
        }
        format!(
            "{} in flight, {retrying} waiting to retry, {queued} queued for a worker, {lost} neither; {}",
            in_flight,
            named.join("; ")
        )
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
                "{left} clusters still had reports undelivered after {timeout:?}: {}",
                self.undelivered_detail(10)
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

    /// The next request to send: the earliest due heartbeat or the first queued report, in
    /// turns while both wait. A real agent's heartbeat does not wait for other clusters'
    /// reports, nor its reports for other clusters' heartbeats: neither queue may hold the
    /// other back, whether the heartbeats of 100,000 clusters keep every worker busy or a
    /// resync queues every cluster's snapshot at once (heartbeats behind it would leave the
    /// clusters stale).
    fn next_job(&self) -> Option<Taken> {
        let mut fleet = self.fleet.lock().expect("fleet lock");
        let mut schedule = self.schedule.lock().expect("schedule lock");
        let now = Instant::now();
        schedule.release_retries(now, &fleet);
        loop {
            let heartbeat = schedule.due_heartbeat(now);
            let report_waits = !schedule.ready.is_empty();
            match heartbeat {
                None if !report_waits => return None,
                Some((due, c)) if !report_waits || schedule.heartbeat_turn => {
                    schedule.heartbeat_turn = false;
                    schedule.heartbeats.pop();
                    let sim = &fleet.clusters[c];
                    if sim.dark || schedule.in_flight[c] || !sim.outbox.is_empty() {
                        // Reports go first (a report is a sign of life too); looked at again
                        // later.
                        schedule.schedule_heartbeat(c, now + self.heartbeat_every);
                        continue;
                    }
                    schedule.in_flight[c] = true;
                    schedule.heartbeat_due[c] = None;
                    let report = fleet.heartbeat(c, clock::now());
                    return Some(Taken {
                        job: Job::Heartbeat(c, Box::new(report)),
                        waited: now.saturating_duration_since(due),
                    });
                }
                _ => {
                    schedule.heartbeat_turn = true;
                    let c = schedule.ready.pop_front().expect("a queued report");
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
                        waited: queued_at
                            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at)),
                    });
                }
            }
        }
    }

    fn next_wait(&self) -> Duration {
        let schedule = self.schedule.lock().expect("schedule lock");
        let now = Instant::now();
        [schedule.heartbeats.peek(), schedule.retries.peek()]
            .into_iter()
            .flatten()
            .map(|Reverse((due, _))| due.saturating_duration_since(now))
            .fold(Duration::from_millis(200), Duration::min)
    }

    /// After a request ended: the outbox moves on, the next heartbeat is scheduled, and the
    /// cluster is queued again if it has more, at once after an acknowledgement, after
    /// `retry_in` otherwise (`failure` says why it was not acknowledged).
    fn finish(
        &self,
        c: usize,
        acked_report: Option<u64>,
        retry_in: Option<Duration>,
        failure: Option<String>,
    ) {
        let mut fleet = self.fleet.lock().expect("fleet lock");
        let mut schedule = self.schedule.lock().expect("schedule lock");
        schedule.in_flight[c] = false;
        let sim = &mut fleet.clusters[c];
        if retry_in.is_none() {
            sim.last_ack = Some(clock::now().seconds());
            schedule.failures[c] = None;
            if let Some(seq) = acked_report {
                if sim.outbox.front().is_some_and(|r| r.report_seq == seq) {
                    if let Some(report) = sim.outbox.pop_front() {
                        sim.acknowledged(&report);
                    }
                }
                if sim.outbox.is_empty() && !sim.dark {
                    sim.frozen = None;
                }
            }
        } else if let Some(why) = failure {
            let in_a_row = schedule.failures[c].as_ref().map_or(0, |(n, _)| *n) + 1;
            schedule.failures[c] = Some((in_a_row, why));
        }
        let now = Instant::now();
        schedule.schedule_heartbeat(c, now + self.heartbeat_every);
        let more = !sim.outbox.is_empty() && !sim.dark;
        drop(fleet);
        match retry_in {
            None if more => schedule.queue(c, now),
            Some(delay) if more => {
                let due = now + delay;
                schedule.retry_due[c] = Some(due);
                schedule.retries.push(Reverse((due, c)));
            }
            _ => {}
        }
    }

    /// When to send again after `outcome` ([`retry_wait`] with this cluster's backoff, which
    /// it moves on); `None` after an acknowledgement.
    fn retry_in(&self, c: usize, outcome: &SendOutcome) -> Option<Duration> {
        let mut schedule = self.schedule.lock().expect("schedule lock");
        let (retry_in, next_backoff) = retry_wait(
            schedule.style,
            outcome,
            schedule.backoff[c],
            (self.min_backoff, self.max_backoff),
            jitter::random_fraction(),
        );
        schedule.backoff[c] = next_backoff;
        retry_in
    }

    /// How the agents wait before sending again from now on (default [`Backoff::Spread`]).
    pub fn set_backoff(&self, style: Backoff) {
        self.schedule.lock().expect("schedule lock").style = style;
    }

    /// How the agents wait before sending again.
    pub fn backoff(&self) -> Backoff {
        self.schedule.lock().expect("schedule lock").style
    }

    /// Keeps every request sent from now on in [`Tally::attempts`], until
    /// [`Agents::take_attempts`].
    pub fn record_attempts(&self) {
        self.tally
            .lock()
            .expect("tally lock")
            .attempts
            .get_or_insert_with(Vec::new);
    }

    /// The requests recorded since [`Agents::record_attempts`]; recording stops.
    pub fn take_attempts(&self) -> Vec<Attempt> {
        self.tally
            .lock()
            .expect("tally lock")
            .attempts
            .take()
            .unwrap_or_default()
    }

    /// Each cluster's backlog as it stands: the number of the last report in its outbox, for
    /// every delivering cluster with one (`None` for the others).
    pub fn backlog_marks(&self) -> Vec<Option<u64>> {
        let fleet = self.fleet.lock().expect("fleet lock");
        fleet
            .clusters
            .iter()
            .map(|c| {
                (!c.dark && !c.never_seen)
                    .then(|| c.outbox.back().map(|r| r.report_seq))
                    .flatten()
            })
            .collect()
    }

    /// The clusters whose backlog of `marks` is not all acknowledged yet: reports go out in
    /// order and their numbers only grow, so a backlog is delivered once the outbox is empty or
    /// its first report is numbered above the mark.
    pub fn backlog_left(&self, marks: &[Option<u64>]) -> usize {
        let fleet = self.fleet.lock().expect("fleet lock");
        fleet
            .clusters
            .iter()
            .zip(marks)
            .filter(|(c, mark)| {
                mark.is_some_and(|mark| c.outbox.front().is_some_and(|r| r.report_seq <= mark))
            })
            .count()
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
                    encode(&report),
                ),
                Job::Encoded(c, seq, kind, rows, body) => (c, Some(seq), kind, rows, body),
                Job::Heartbeat(c, report) => (c, None, ReportKind::Heartbeat, 0, encode(&report)),
            };
            let bytes = body.len() as u64 + REQUEST_OVERHEAD_BYTES;
            let first = Instant::now();
            let outcome = self.senders[c].send(body).await;
            let failure = match &outcome {
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
                    Some(format!("busy, retry after {delay:?}"))
                }
                SendOutcome::Refused { status, message } => {
                    let mut tally = self.tally.lock().expect("tally lock");
                    let text = format!("{status}: {message}");
                    if tally.refused.len() < 20 && !tally.refused.contains(&text) {
                        tally.refused.push(text.clone());
                    }
                    Some(format!("refused {text}"))
                }
                SendOutcome::Unreachable(error) => {
                    self.tally.lock().expect("tally lock").unreachable += 1;
                    Some(format!("unreachable: {error}"))
                }
            };
            if let Some(attempts) = &mut self.tally.lock().expect("tally lock").attempts {
                attempts.push(Attempt {
                    sent_ms: first.duration_since(self.started).as_millis() as u64,
                    answered: Answered::of(&outcome),
                });
            }
            let retry_in = self.retry_in(c, &outcome);
            self.finish(c, seq, retry_in, failure);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEARTBEAT_EVERY: Duration = Duration::from_secs(30);

    /// The agents of a test fleet, pointed at a port nothing answers on (no test sends).
    fn agents(clusters: usize) -> Arc<Agents> {
        let fleet = SimFleet::for_tests(clusters);
        Agents::new(fleet, "http://127.0.0.1:9", HEARTBEAT_EVERY, Instant::now()).unwrap()
    }

    /// Queues cluster `c`'s snapshot and returns its report number.
    fn queue_snapshot(agents: &Agents, c: usize) -> u64 {
        let seq = {
            let mut fleet = agents.fleet.lock().unwrap();
            let report = fleet.snapshot(c, clock::now());
            let seq = report.report_seq;
            fleet.clusters[c].outbox.push_back(report);
            seq
        };
        agents.poke([c]);
        seq
    }

    /// The cluster and report number of a job (0 for a heartbeat).
    fn what(job: &Job) -> (usize, u64) {
        match job {
            Job::Report(c, report) => (*c, report.report_seq),
            Job::Encoded(c, seq, ..) => (*c, *seq),
            Job::Heartbeat(c, _) => (*c, 0),
        }
    }

    #[test]
    fn a_snapshot_not_acknowledged_is_sent_again_after_the_backoff_until_it_is() {
        let agents = agents(2);
        let seq = queue_snapshot(&agents, 0);
        let taken = agents.next_job().expect("the snapshot");
        assert_eq!(what(&taken.job), (0, seq));
        assert!(
            agents.next_job().is_none(),
            "one request in flight per cluster"
        );

        // The collector was busy: the report stays in the outbox and comes back after the
        // delay it asked for (at least the agent's first backoff of 0.5 s, up to half as long
        // again), not before.
        let busy = SendOutcome::RetryAfter(Duration::from_millis(10));
        let retry_in = agents.retry_in(0, &busy);
        let waited = retry_in.expect("a wait");
        assert!(
            waited >= agents.min_backoff && waited <= agents.min_backoff * 3 / 2,
            "{waited:?}"
        );
        agents.finish(0, Some(seq), retry_in, Some("busy".to_owned()));
        assert_eq!(agents.undelivered(), 1);
        assert!(agents.next_job().is_none(), "not before its backoff");
        agents.poke([0]);
        assert!(
            agents.next_job().is_none(),
            "a poke does not cut the backoff short"
        );
        assert!(
            agents
                .undelivered_detail(5)
                .contains("store-0 report 1: to be sent again in"),
            "{}",
            agents.undelivered_detail(5)
        );
        std::thread::sleep(waited);
        let again = agents.next_job().expect("the snapshot again");
        assert_eq!(what(&again.job), (0, seq), "the same report");
        assert!(
            again.waited < Duration::from_millis(200),
            "its wait counts from when the retry fell due: {:?}",
            again.waited
        );

        // Unreachable twice: the backoff doubles, as the agent's does, each wait between half
        // the backoff and all of it; an acknowledgement ends it.
        let down = SendOutcome::Unreachable("connection refused".to_owned());
        let within = |wait: Option<Duration>, backoff: Duration| {
            let wait = wait.expect("a wait");
            assert!(
                wait >= backoff / 2 && wait <= backoff,
                "{wait:?} for a backoff of {backoff:?}"
            );
        };
        within(agents.retry_in(0, &down), agents.min_backoff * 2);
        within(agents.retry_in(0, &down), agents.min_backoff * 4);
        agents.finish(0, Some(seq), None, None);
        assert_eq!(agents.undelivered(), 0);
        assert_eq!(agents.retry_in(0, &SendOutcome::Acknowledged), None);
        within(agents.retry_in(0, &down), agents.min_backoff);
    }

    #[test]
    fn plain_waits_are_the_whole_backoff_and_the_retry_after_exactly() {
        let bounds = (Duration::from_millis(500), Duration::from_secs(60));
        let down = SendOutcome::Unreachable("connection refused".to_owned());
        // A fraction that would move a spread wait: plain waits ignore it.
        let fraction = 0.37;
        let mut backoff = bounds.0;
        let mut waits = Vec::new();
        for _ in 0..9 {
            let (wait, next) = retry_wait(Backoff::Plain, &down, backoff, bounds, fraction);
            waits.push(wait.expect("a wait").as_secs_f64());
            backoff = next;
        }
        assert_eq!(waits, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]);
        let busy = |seconds: u64| SendOutcome::RetryAfter(Duration::from_secs(seconds));
        assert_eq!(
            retry_wait(Backoff::Plain, &busy(2), bounds.0, bounds, fraction),
            (Some(Duration::from_secs(2)), Duration::from_secs(1)),
            "the Retry-After exactly, and the backoff doubles"
        );
        let quick = SendOutcome::RetryAfter(Duration::from_millis(10));
        assert_eq!(
            retry_wait(Backoff::Plain, &quick, bounds.0, bounds, fraction).0,
            Some(bounds.0),
            "at least the first backoff"
        );
        let refused = SendOutcome::Refused {
            status: 403,
            message: "no".to_owned(),
        };
        assert_eq!(
            retry_wait(
                Backoff::Plain,
                &refused,
                Duration::from_secs(4),
                bounds,
                fraction
            ),
            (Some(bounds.1), Duration::from_secs(8))
        );
        assert_eq!(
            retry_wait(
                Backoff::Plain,
                &SendOutcome::Acknowledged,
                Duration::from_secs(16),
                bounds,
                fraction
            ),
            (None, bounds.0),
            "an acknowledgement resets the backoff"
        );
    }

    #[test]
    fn spread_waits_are_placed_by_the_fraction_within_their_span() {
        let bounds = (Duration::from_millis(500), Duration::from_secs(60));
        let down = SendOutcome::Unreachable("connection refused".to_owned());
        let backoff = Duration::from_secs(8);
        let at = |outcome: &SendOutcome, fraction: f64| {
            retry_wait(Backoff::Spread, outcome, backoff, bounds, fraction)
        };
        assert_eq!(at(&down, 0.0), (Some(Duration::from_secs(4)), backoff * 2));
        assert_eq!(at(&down, 1.0), (Some(backoff), backoff * 2));
        assert_eq!(at(&down, 0.5).0, Some(Duration::from_secs(6)));
        let busy = SendOutcome::RetryAfter(Duration::from_secs(2));
        assert_eq!(at(&busy, 0.0).0, Some(Duration::from_secs(2)));
        assert_eq!(at(&busy, 1.0).0, Some(Duration::from_secs(3)));
        // The agents' own choice: the default, until set otherwise.
        let agents = agents(1);
        let first = agents.retry_in(0, &down).expect("a wait");
        assert!(first >= bounds.0 / 2 && first <= bounds.0, "{first:?}");
        agents.set_backoff(Backoff::Plain);
        assert_eq!(agents.retry_in(0, &down), Some(bounds.0 * 2));
        assert_eq!(agents.retry_in(0, &down), Some(bounds.0 * 4));
    }

    #[test]
    fn a_backlog_is_delivered_once_its_last_report_is_acknowledged() {
        let agents = agents(4);
        // Cluster 0 has two reports waiting, cluster 1 one, cluster 2 none; cluster 3 is dark.
        let first = queue_snapshot(&agents, 0);
        let second = queue_snapshot(&agents, 0);
        let other = queue_snapshot(&agents, 1);
        agents.fleet.lock().unwrap().go_dark(3);
        queue_snapshot(&agents, 3);
        let marks = agents.backlog_marks();
        assert_eq!(marks, [Some(second), Some(other), None, None]);
        assert_eq!(agents.backlog_left(&marks), 2);

        // Cluster 1's report acknowledged; a report made after the marks does not count.
        let taken: Vec<(usize, u64)> = std::iter::from_fn(|| agents.next_job())
            .map(|t| what(&t.job))
            .collect();
        assert!(
            taken.contains(&(1, other)) && taken.contains(&(0, first)),
            "{taken:?}"
        );
        agents.finish(1, Some(other), None, None);
        queue_snapshot(&agents, 1);
        assert_eq!(agents.backlog_left(&marks), 1);
        // Cluster 0: its first report is not the whole backlog.
        agents.finish(0, Some(first), None, None);
        assert_eq!(agents.backlog_left(&marks), 1);
        let taken: Vec<(usize, u64)> = std::iter::from_fn(|| agents.next_job())
            .map(|t| what(&t.job))
            .collect();
        assert!(taken.contains(&(0, second)), "{taken:?}");
        agents.finish(0, Some(second), None, None);
        assert_eq!(agents.backlog_left(&marks), 0);
    }

    #[test]
    fn heartbeats_and_reports_take_turns_while_both_wait() {
        let agents = agents(60);
        let start = Instant::now();
        // Every cluster's snapshot queued at once, as in a resync, and heartbeats falling due
        // before and after it, as they do at thousands a second.
        {
            let mut schedule = agents.schedule.lock().unwrap();
            for c in 40..60 {
                schedule.schedule_heartbeat(c, start - Duration::from_secs(1));
            }
        }
        let seqs: Vec<u64> = (0..20).map(|c| queue_snapshot(&agents, c)).collect();
        std::thread::sleep(Duration::from_millis(5));
        {
            let mut schedule = agents.schedule.lock().unwrap();
            for c in 20..40 {
                schedule.schedule_heartbeat(c, Instant::now());
            }
        }
        let order: Vec<(usize, u64)> = std::iter::from_fn(|| agents.next_job())
            .map(|taken| what(&taken.job))
            .collect();
        assert_eq!(order.len(), 60, "every request once: {order:?}");
        // Turns while both wait: neither the heartbeats due earlier hold the snapshots back,
        // nor the snapshots the heartbeats.
        for pair in order[..40].chunks(2) {
            let heartbeats = pair.iter().filter(|&&(_, seq)| seq == 0).count();
            assert_eq!(heartbeats, 1, "one heartbeat and one snapshot: {order:?}");
        }
        let snapshots: Vec<(usize, u64)> = order.iter().copied().filter(|&(_, s)| s > 0).collect();
        assert_eq!(
            snapshots,
            (0..20).zip(seqs).collect::<Vec<_>>(),
            "snapshots in the order queued"
        );
        let heartbeats: Vec<usize> = order
            .iter()
            .filter(|&&(_, seq)| seq == 0)
            .map(|&(c, _)| c)
            .collect();
        assert!(
            heartbeats[..20].iter().all(|c| (40..60).contains(c)),
            "the heartbeats due earlier first: {heartbeats:?}"
        );
    }
}
