//! Full snapshots: every delivering cluster sending all its objects at once, and the storm
//! scenario built on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_collector::protocol::Report;
use fleetscope_runtime::clock;

use super::{progress_bar, Ctx};

impl Ctx {
    /// Every delivering cluster queues its full snapshot; returns (reports, rows).
    ///
    /// The snapshots' request bodies are encoded here, on every core, before the first is sent:
    /// real agents compress on their own machines, so the resync that follows measures the
    /// collector and ClickHouse, not the simulator's compression. Returns the seconds that took
    /// as well.
    pub async fn queue_snapshots(&self) -> anyhow::Result<(u64, u64, f64)> {
        let clusters = self.delivering();
        let mut rows = 0;
        let mut reports = Vec::with_capacity(clusters.len());
        {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            let now = clock::now();
            for &c in &clusters {
                let report = fleet.snapshot(c, now);
                rows += report.changes.len() as u64;
                reports.push((c, report));
            }
        }
        // Nothing else of these clusters is made meanwhile: scenarios run one at a time.
        let encoding = Instant::now();
        // On blocking threads: this takes tens of seconds at 100,000 clusters, and the
        // runtime's workers keep delivering heartbeats meanwhile. A run interrupted meanwhile
        // drops this future, and the guard stops the threads.
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let cancelled = cancel.0.clone();
        let (reports, bodies) = tokio::task::spawn_blocking(move || {
            let bodies = encode_all(&reports, &cancelled);
            (reports, bodies)
        })
        .await?;
        drop(cancel);
        {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            for ((c, report), body) in reports.into_iter().zip(bodies) {
                fleet.queue_encoded(c, report, body);
            }
        }
        let encode_seconds = encoding.elapsed().as_secs_f64();
        self.deliver(clusters.iter().copied());
        Ok((clusters.len() as u64, rows, encode_seconds))
    }

    /// Every delivering cluster reconnects and sends its snapshot (the collector infers
    /// deletions against what it stored).
    pub async fn storm(&self, notes: &mut Vec<String>) -> anyhow::Result<(u64, u64, f64)> {
        let before = self.agents.tally.lock().expect("tally lock").acks.len();
        let (reports, rows, encode_seconds) = self.queue_snapshots().await?;
        let started = Instant::now();
        let bar = progress_bar(reports, "snapshots", "reports");
        // The last time a snapshot was acknowledged: a stall fails the phase long before the
        // drain timeout, naming the clusters left and why.
        let (mut fewest_left, mut progressed) = (u64::MAX, Instant::now());
        loop {
            self.agents.no_refusals()?;
            let left = self.agents.undelivered() as u64;
            bar.set_position(reports.saturating_sub(left));
            if left == 0 {
                break;
            }
            if left < fewest_left {
                (fewest_left, progressed) = (left, Instant::now());
            }
            anyhow::ensure!(
                progressed.elapsed() < self.knobs.stall_timeout,
                "{left} of {reports} snapshots undelivered, and none acknowledged for {:?}: {}",
                self.knobs.stall_timeout,
                self.agents.undelivered_detail(10)
            );
            anyhow::ensure!(
                started.elapsed() < self.knobs.drain_timeout,
                "{left} of {reports} snapshots undelivered after {:?}: {}",
                self.knobs.drain_timeout,
                self.agents.undelivered_detail(10)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bar.finish_and_clear();
        let seconds = started.elapsed().as_secs_f64();
        let acks = self.agents.tally.lock().expect("tally lock").acks.len() - before;
        notes.push(format!(
            "{reports} snapshots with {rows} rows delivered in {seconds:.1} s ({:.0} rows/s; {acks} requests acknowledged meanwhile; bodies encoded beforehand in {encode_seconds:.1} s)",
            rows as f64 / seconds.max(1e-9)
        ));
        Ok((reports, rows, seconds))
    }
}

/// Sets its flag when dropped.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Encodes reports into request bodies on every core, in the order given; stops early (with
/// fewer bodies) once `cancelled` is set.
fn encode_all(reports: &[(usize, Report)], cancelled: &AtomicBool) -> Vec<Vec<u8>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = reports.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = reports
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .take_while(|_| !cancelled.load(Ordering::Relaxed))
                        .map(|(_, report)| crate::agents::encode(report))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("an encoding thread panicked"))
            .collect()
    })
}
