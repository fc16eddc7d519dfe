//! The outage scenario: the collector killed (SIGKILL) while the fleet keeps changing, started
//! again on its port after a while, and what its return looked like: the requests it received
//! per second as the agents came back, the share it answered busy (429 or 5xx), and how long
//! until every agent's backlog (the reports spooled while it was down) was delivered.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fleetscope_fixtures::rng::SplitMix64;
use serde::{Deserialize, Serialize};

use super::Ctx;
use crate::agents::{Answered, Attempt, Backoff};
use crate::procs::{Service, Watched};

/// Changes and heartbeats before the collector is killed: the request rate before the outage.
const LEAD: Duration = Duration::from_secs(10);

/// How often the backlog is looked at after the return.
const POLL: Duration = Duration::from_millis(50);

/// What the run recorded of one outage; [`OutageReport::from_record`] derives its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct OutageRecord {
    pub backoff: Backoff,
    /// Seconds since the run started: the phase's start, the kill, the start of the new
    /// process, its `/readyz` answering 200, and the moment every backlog was delivered.
    pub started_s: f64,
    pub killed_s: f64,
    pub restarted_s: f64,
    pub ready_s: f64,
    pub drained_s: f64,
    /// Clusters with reports in their outbox when the collector was ready again, and those
    /// reports.
    pub backlog_clusters: u64,
    pub backlog_reports: u64,
    /// Status changes made during the phase (before, during and after the outage).
    pub changes: u64,
    /// Seconds after the return whose requests are counted, one by one.
    pub window_seconds: u64,
}

/// The requests sent in one second, by how they ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecondCounts {
    /// Requests the collector answered, whatever the answer: those it received.
    pub answered: u64,
    pub acknowledged: u64,
    /// Answered 429 or 5xx (sent again after the Retry-After).
    pub busy: u64,
    /// Sent and not answered: no collector listening, a connection reset, a timeout.
    pub unreachable: u64,
}

/// One outage's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutageReport {
    /// How the simulated agents waited before sending again (`spread` or `plain`).
    pub backoff: String,
    /// From the kill to the collector's return: the first request it answered after it was
    /// started again.
    pub down_seconds: f64,
    /// From starting the collector again to its `/readyz` answering 200.
    pub start_seconds: f64,
    /// Requests the collector answered per second before the kill.
    pub before_requests_per_second: f64,
    /// Requests that found no collector between the kill and its return.
    pub unreachable_while_down: u64,
    /// Clusters with reports spooled at the return, and those reports.
    pub backlog_clusters: u64,
    pub backlog_reports: u64,
    /// Each second from the return on, for `window_seconds`: the requests sent in it.
    pub window_seconds: u64,
    pub per_second: Vec<SecondCounts>,
    /// The most requests the collector answered in one of those seconds, and which (0: the
    /// first second after the return).
    pub peak_requests_per_second: u64,
    pub peak_second: u64,
    /// Requests answered in the window; those answered busy, and their share of all answered.
    pub requests: u64,
    pub busy: u64,
    pub busy_share: f64,
    /// Requests in the window that found no collector.
    pub unreachable_after_return: u64,
    /// From the return until every report spooled at the return was acknowledged.
    pub drained_after_s: f64,
    pub changes: u64,
}

/// The requests sent in each of `seconds` seconds from `from_ms` (milliseconds since the run
/// started), by how they ended; requests outside those seconds are left out.
pub fn per_second(attempts: &[Attempt], from_ms: u64, seconds: usize) -> Vec<SecondCounts> {
    let mut counts = vec![SecondCounts::default(); seconds];
    for attempt in attempts {
        let Some(offset) = attempt.sent_ms.checked_sub(from_ms) else {
            continue;
        };
        let Some(second) = counts.get_mut((offset / 1_000) as usize) else {
            continue;
        };
        match attempt.answered {
            Answered::Acknowledged => {
                second.answered += 1;
                second.acknowledged += 1;
            }
            Answered::Busy => {
                second.answered += 1;
                second.busy += 1;
            }
            Answered::Refused => second.answered += 1,
            Answered::Unreachable => second.unreachable += 1,
        }
    }
    counts
}

/// The second with the most requests answered and how many (the first such second on a tie);
/// `(0, 0)` for no seconds.
pub fn peak(seconds: &[SecondCounts]) -> (u64, u64) {
    seconds
        .iter()
        .enumerate()
        .fold((0, 0), |(best, at), (i, s)| {
            if s.answered > best {
                (s.answered, i as u64)
            } else {
                (best, at)
            }
        })
}

/// When the collector came back as the agents saw it: the earliest request sent at or after
/// `from_ms` that it answered.
pub fn first_answered_ms(attempts: &[Attempt], from_ms: u64) -> Option<u64> {
    attempts
        .iter()
        .filter(|a| a.sent_ms >= from_ms && a.answered != Answered::Unreachable)
        .map(|a| a.sent_ms)
        .min()
}

impl OutageReport {
    /// The figures of `record` from the requests recorded during its phase.
    pub fn from_record(record: &OutageRecord, attempts: &[Attempt]) -> OutageReport {
        let ms = |s: f64| (s * 1e3).round() as u64;
        let return_ms = first_answered_ms(attempts, ms(record.restarted_s))
            .unwrap_or_else(|| ms(record.ready_s));
        let seconds = per_second(attempts, return_ms, record.window_seconds as usize);
        let (peak_requests_per_second, peak_second) = peak(&seconds);
        let requests: u64 = seconds.iter().map(|s| s.answered).sum();
        let busy: u64 = seconds.iter().map(|s| s.busy).sum();
        let lead_ms = ms(record.killed_s).saturating_sub(ms(record.started_s));
        let before: u64 = attempts
            .iter()
            .filter(|a| (ms(record.started_s)..ms(record.killed_s)).contains(&a.sent_ms))
            .filter(|a| a.answered != Answered::Unreachable)
            .count() as u64;
        let unreachable_while_down = attempts
            .iter()
            .filter(|a| (ms(record.killed_s)..return_ms).contains(&a.sent_ms))
            .filter(|a| a.answered == Answered::Unreachable)
            .count() as u64;
        let return_s = return_ms as f64 / 1e3;
        OutageReport {
            backoff: record.backoff.name().to_owned(),
            down_seconds: return_s - record.killed_s,
            start_seconds: record.ready_s - record.restarted_s,
            before_requests_per_second: before as f64 * 1e3 / lead_ms.max(1) as f64,
            unreachable_while_down,
            backlog_clusters: record.backlog_clusters,
            backlog_reports: record.backlog_reports,
            window_seconds: record.window_seconds,
            per_second: seconds.clone(),
            peak_requests_per_second,
            peak_second,
            requests,
            busy,
            busy_share: busy as f64 / requests.max(1) as f64,
            unreachable_after_return: seconds.iter().map(|s| s.unreachable).sum(),
            drained_after_s: (record.drained_s - return_s).max(0.0),
            changes: record.changes,
        }
    }

    /// The figures in a sentence, for the phase's notes.
    pub fn summary(&self) -> String {
        format!(
            "agents' backoff {}; collector down {:.1} s (ready {:.1} s after it was started again); at its return {} clusters had {} reports spooled; peak {} requests/s (second {} after the return; {:.0}/s before the outage); {} requests in the {} s after it, {} answered 429/503 ({:.1} %); every backlog delivered {:.1} s after the return",
            self.backoff,
            self.down_seconds,
            self.start_seconds,
            self.backlog_clusters,
            self.backlog_reports,
            self.peak_requests_per_second,
            self.peak_second,
            self.before_requests_per_second,
            self.requests,
            self.window_seconds,
            self.busy,
            self.busy_share * 100.0,
            self.drained_after_s
        )
    }
}

impl Ctx {
    /// The outage: `change_rate` of app instances change per minute throughout; after
    /// [`LEAD`], `collector` is killed (SIGKILL), started again on its port after the knobs'
    /// `down_seconds`, and the changes go on for `after_seconds` after it is ready. Returns the
    /// changes made and the outage's figures, once every outbox is empty.
    pub async fn outage(
        &self,
        collector: &mut Service,
        watched: &Watched,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<(u64, OutageReport)> {
        self.agents.drained(self.knobs.drain_timeout).await?;
        let backoff = self.agents.backoff();
        let now_s = || self.started.elapsed().as_secs_f64();
        let stop = AtomicBool::new(false);
        self.agents.record_attempts();
        let started_s = now_s();
        let control = async {
            let result = self.take_down_and_back(collector, watched).await;
            stop.store(true, Ordering::Relaxed);
            result
        };
        let (changes, control) = tokio::join!(self.keep_changing(rng, &stop), control);
        let (killed_s, restarted_s, ready_s, drained_s, backlog) = match control {
            Ok(times) => times,
            Err(err) => {
                self.agents.take_attempts();
                return Err(err);
            }
        };
        self.agents.drained(self.knobs.drain_timeout).await?;
        let attempts = self.agents.take_attempts();
        let record = OutageRecord {
            backoff,
            started_s,
            killed_s,
            restarted_s,
            ready_s,
            drained_s,
            backlog_clusters: backlog.0,
            backlog_reports: backlog.1,
            changes,
            window_seconds: self.knobs.outage.after_seconds,
        };
        let report = OutageReport::from_record(&record, &attempts);
        notes.push(format!(
            "{changes} status changes ({:.2}% of app instances per minute) before, during and after the outage",
            self.knobs.steady.change_rate * 100.0
        ));
        notes.push(report.summary());
        Ok((changes, report))
    }

    /// The collector killed after [`LEAD`], started again after the outage, and the backlog
    /// at its return watched until delivered, while the changes go on for the knobs'
    /// `after_seconds`. Returns when it was killed, started again and ready, when the backlog
    /// was delivered (seconds since the run started), and the backlog (clusters, reports).
    async fn take_down_and_back(
        &self,
        collector: &mut Service,
        watched: &Watched,
    ) -> anyhow::Result<(f64, f64, f64, f64, (u64, u64))> {
        let now_s = || self.started.elapsed().as_secs_f64();
        let knobs = &self.knobs.outage;
        tokio::time::sleep(LEAD).await;
        let old = collector.pid();
        let killed_s = now_s();
        collector.kill();
        println!(
            "  outage: the collector killed (pid {old}), down for {} s",
            knobs.down_seconds
        );
        tokio::time::sleep(Duration::from_secs(knobs.down_seconds)).await;
        let restarted_s = now_s();
        collector.restart().await?;
        let ready = Instant::now();
        let ready_s = now_s();
        crate::faults::repoint(watched, old, collector.pid());
        let marks = self.agents.backlog_marks();
        let backlog = {
            let fleet = self.agents.fleet.lock().expect("fleet lock");
            marks
                .iter()
                .zip(&fleet.clusters)
                .filter(|(mark, _)| mark.is_some())
                .fold((0, 0), |(clusters, reports), (_, c)| {
                    (clusters + 1, reports + c.outbox.len() as u64)
                })
        };
        println!(
            "  outage: the collector ready again (pid {}) {:.1} s after it was started; {} clusters with {} reports spooled",
            collector.pid(),
            ready_s - restarted_s,
            backlog.0,
            backlog.1
        );
        let changes_until = ready + Duration::from_secs(knobs.after_seconds);
        let mut drained_s = None;
        loop {
            self.agents.no_refusals()?;
            let left = self.agents.backlog_left(&marks);
            if left == 0 && drained_s.is_none() {
                drained_s = Some(now_s());
            }
            if drained_s.is_some() && Instant::now() >= changes_until {
                break;
            }
            anyhow::ensure!(
                ready.elapsed() < self.knobs.drain_timeout,
                "{left} clusters' backlog undelivered {:?} after the collector's return: {}",
                self.knobs.drain_timeout,
                self.agents.undelivered_detail(10)
            );
            tokio::time::sleep(POLL).await;
        }
        let drained_s = drained_s.expect("the loop ends once the backlog is delivered");
        Ok((killed_s, restarted_s, ready_s, drained_s, backlog))
    }

    /// Status changes at the steady scenario's `change_rate` on the delivering clusters, each
    /// queued for delivery, until `stop` is set. Returns how many were made.
    async fn keep_changing(&self, rng: &mut SplitMix64, stop: &AtomicBool) -> u64 {
        let clusters = self.delivering();
        let instances: u64 = {
            let fleet = self.agents.fleet.lock().expect("fleet lock");
            clusters
                .iter()
                .map(|&c| fleet.clusters[c].objects.len() as u64)
                .sum()
        };
        let per_second = instances as f64 * self.knobs.steady.change_rate / 60.0;
        let started = Instant::now();
        let mut made = 0u64;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        while !stop.load(Ordering::Relaxed) {
            tick.tick().await;
            let due = (per_second * started.elapsed().as_secs_f64()) as u64;
            let mut touched = Vec::new();
            while made < due && !clusters.is_empty() {
                let c = clusters[rng.below(clusters.len() as u64) as usize];
                if self.touch(c, rng, false) {
                    touched.push(c);
                }
                made += 1;
            }
            self.deliver(touched);
        }
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(sent_ms: u64, answered: Answered) -> Attempt {
        Attempt { sent_ms, answered }
    }

    #[test]
    fn requests_are_counted_in_the_second_they_were_sent() {
        use Answered::*;
        let attempts = [
            at(9_999, Acknowledged),
            at(10_000, Unreachable),
            at(10_400, Acknowledged),
            at(10_999, Busy),
            at(11_000, Acknowledged),
            at(11_500, Refused),
            at(11_999, Acknowledged),
            at(12_000, Busy),
            at(13_000, Acknowledged),
        ];
        let counts = per_second(&attempts, 10_000, 3);
        let second = |answered, acknowledged, busy, unreachable| SecondCounts {
            answered,
            acknowledged,
            busy,
            unreachable,
        };
        assert_eq!(
            counts,
            [second(2, 1, 1, 1), second(3, 2, 0, 0), second(1, 0, 1, 0)],
            "9,999 ms is before the window and 13,000 ms after its three seconds"
        );
        assert_eq!(peak(&counts), (3, 1));
        // On a tie, the first such second; no seconds, no peak.
        let tied = [second(4, 4, 0, 0), second(2, 2, 0, 0), second(4, 4, 0, 0)];
        assert_eq!(peak(&tied), (4, 0));
        assert_eq!(peak(&[]), (0, 0));
    }

    #[test]
    fn the_return_is_the_first_request_answered_after_the_restart() {
        use Answered::*;
        let attempts = [
            at(70_100, Unreachable),
            at(69_000, Acknowledged),
            at(70_900, Busy),
            at(70_500, Unreachable),
            at(71_000, Acknowledged),
        ];
        assert_eq!(first_answered_ms(&attempts, 70_000), Some(70_900));
        assert_eq!(first_answered_ms(&attempts, 71_001), None);
    }

    #[test]
    fn an_outage_report_counts_from_the_return() {
        use Answered::*;
        let record = OutageRecord {
            backoff: Backoff::Plain,
            started_s: 100.0,
            killed_s: 110.0,
            restarted_s: 170.0,
            ready_s: 170.6,
            drained_s: 180.25,
            backlog_clusters: 3,
            backlog_reports: 5,
            changes: 40,
            window_seconds: 4,
        };
        let mut attempts = Vec::new();
        // Before the kill: 20 answered in 10 s, and one that found nothing.
        attempts.extend((0..20).map(|i| at(100_000 + i * 500, Acknowledged)));
        attempts.push(at(105_000, Unreachable));
        // While down: 7 unreachable, and 2 more after the restart before it listened.
        attempts.extend((0..7).map(|i| at(111_000 + i * 1_000, Unreachable)));
        attempts.extend([at(170_100, Unreachable), at(170_200, Unreachable)]);
        // Back at 170.5 s: 3 in the first second (one busy), 6 in the second (two busy), 1 in
        // the fourth, and one more after the window.
        attempts.extend([
            at(170_500, Acknowledged),
            at(170_700, Busy),
            at(171_499, Acknowledged),
        ]);
        attempts.extend((0..4).map(|i| at(171_500 + i * 100, Acknowledged)));
        attempts.extend([at(172_000, Busy), at(172_100, Busy)]);
        attempts.push(at(173_600, Acknowledged));
        attempts.push(at(174_500, Acknowledged));
        let report = OutageReport::from_record(&record, &attempts);
        assert_eq!(report.backoff, "plain");
        assert!((report.down_seconds - 60.5).abs() < 1e-9, "{report:?}");
        assert!((report.start_seconds - 0.6).abs() < 1e-9);
        assert_eq!(report.before_requests_per_second, 2.0);
        assert_eq!(report.unreachable_while_down, 9);
        assert_eq!(report.per_second.len(), 4);
        assert_eq!(
            report
                .per_second
                .iter()
                .map(|s| s.answered)
                .collect::<Vec<_>>(),
            [3, 6, 0, 1]
        );
        assert_eq!(
            (report.peak_requests_per_second, report.peak_second),
            (6, 1)
        );
        assert_eq!((report.requests, report.busy), (10, 3));
        assert!((report.busy_share - 0.3).abs() < 1e-9);
        assert_eq!(report.unreachable_after_return, 0);
        assert!((report.drained_after_s - 9.75).abs() < 1e-9, "{report:?}");
        assert!(report.summary().contains("peak 6 requests/s (second 1"));
    }
}
