//! The edge agent (`fleetscope agent`): runs in a cluster, turns reconciler objects into
//! changes, spools every report to disk, and delivers reports to the central collector in order,
//! retrying with backoff while the link is down. It also sends a small heartbeat when idle and a
//! full snapshot now and then, so the collector can correct anything that went astray.

pub mod metrics;
pub mod sender;
pub mod spool;
pub mod tracker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_model::{ClusterId, ObjectKind, ObservedItem};
use fleetscope_runtime::clock::now;
use tokio::sync::{mpsc, Notify};

use crate::jitter;
use crate::normalize::normalize;
use crate::protocol::{Change, Report, ReportKind};
use sender::{SendOutcome, Sender, REQUEST_OVERHEAD_BYTES};
use spool::{write_atomically, Spool};
use tracker::Tracker;

/// What a source of objects (a watcher, or a test) tells the agent.
#[derive(Debug, Clone)]
pub enum SourceEvent {
    /// An object was created or changed.
    Applied(serde_json::Value),
    /// An object was deleted.
    Deleted(serde_json::Value),
    /// The complete current list of one kind, after a watch (re)started: objects of that kind
    /// that are not in it are gone.
    Listed {
        kind: ObjectKind,
        objects: Vec<serde_json::Value>,
    },
    /// The reconciler's version became known (for heartbeats), for example `flux` → `v2.4.0`.
    Reconciler { name: String, version: String },
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub cluster: ClusterId,
    /// The central collector's base URL, for example `https://collector.example:8443`.
    pub collector_url: String,
    pub token: Option<String>,
    /// PEM CA certificates trusted for an `https://` collector URL besides the Web PKI roots.
    pub ca_file: Option<PathBuf>,
    pub spool_dir: PathBuf,
    /// Past this many bytes of waiting reports, the spool compacts them.
    pub spool_max_bytes: u64,
    /// A heartbeat goes out when nothing else was sent for this long.
    pub heartbeat_interval: Duration,
    /// How often a full snapshot is sent.
    pub snapshot_interval: Duration,
    /// Changes are gathered this long before they become a report.
    pub flush_interval: Duration,
    pub max_changes_per_report: usize,
    pub request_timeout: Duration,
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// When the collector's match rules change, the objects without stamps are reported again
    /// at a moment picked at random within this window.
    pub match_rules_spread: Duration,
}

impl AgentConfig {
    pub fn new(
        cluster: ClusterId,
        collector_url: impl Into<String>,
        spool_dir: impl Into<PathBuf>,
    ) -> AgentConfig {
        AgentConfig {
            cluster,
            collector_url: collector_url.into(),
            token: None,
            ca_file: None,
            spool_dir: spool_dir.into(),
            spool_max_bytes: 64 * 1024 * 1024,
            heartbeat_interval: Duration::from_secs(30),
            snapshot_interval: Duration::from_secs(6 * 3600),
            flush_interval: Duration::from_secs(1),
            max_changes_per_report: 5_000,
            request_timeout: Duration::from_secs(30),
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            match_rules_spread: MATCH_RULES_SPREAD,
        }
    }
}

/// Counters of what the agent did, readable while it runs.
#[derive(Debug, Default)]
pub struct AgentStats {
    pub changes: AtomicU64,
    pub reports_spooled: AtomicU64,
    pub reports_sent: AtomicU64,
    pub heartbeats_sent: AtomicU64,
    pub send_failures: AtomicU64,
    /// Request bodies plus [`REQUEST_OVERHEAD_BYTES`] per request.
    pub bytes_sent: AtomicU64,
    pub spool_reports: AtomicU64,
    pub spool_bytes: AtomicU64,
    /// Times the collector's answer showed the agent's counters behind the numbers its cluster
    /// already used, and the waiting reports were renumbered.
    pub renumberings: AtomicU64,
}

pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

struct Shared {
    config: AgentConfig,
    spool: Mutex<Spool>,
    reconcilers: Mutex<BTreeMap<String, String>>,
    /// The apps with a stamped object on the cluster ([`Tracker::stamped_apps`]).
    stamped_apps: Mutex<Vec<String>>,
    /// The digest of the collector's match rules last seen, kept in the spool directory.
    match_rules: Mutex<Option<String>>,
    /// Set when the objects without stamps are to be reported again (the stamped apps or the
    /// collector's match rules changed); the next flush does it.
    report_unstamped_again: AtomicBool,
    wake: Notify,
    stats: Arc<AgentStats>,
}

/// The file in the spool directory holding the digest of the match rules last seen.
const MATCH_RULES_FILE: &str = "match-rules";

/// The longest an agent waits by default, after it saw the collector's match rules change,
/// before it reports its objects without stamps again: each agent picks a moment in this
/// window, so a fleet does not send them all at once.
pub const MATCH_RULES_SPREAD: Duration = Duration::from_secs(60);

impl Shared {
    fn report(&self, kind: ReportKind, items: &[ObservedItem], change_seq_high: u64) -> Report {
        Report {
            cluster: self.config.cluster.to_string(),
            agent_version: AGENT_VERSION.to_owned(),
            report_seq: 0,
            sent_at: now().seconds(),
            kind,
            reconcilers: self.reconcilers.lock().expect("reconcilers lock").clone(),
            change_seq_high,
            changes: items.iter().map(Change::from_observed).collect(),
            stamped_apps: if items.iter().any(ObservedItem::is_unstamped_app_object) {
                self.stamped_apps.lock().expect("stamped apps lock").clone()
            } else {
                Vec::new()
            },
        }
    }

    /// Takes note of the match rules' digest in an acknowledgement (`none` when no rules were
    /// in force). When it differs from the one seen before, the objects without stamps are
    /// reported again, at a moment picked at random within [`MATCH_RULES_SPREAD`]; the first
    /// answer an agent sees changes nothing (what it reported was resolved with those rules),
    /// but rules published after answers without any are a change.
    fn match_rules_seen(self: &Arc<Self>, digest: String) {
        let mut seen = self.match_rules.lock().expect("match rules lock");
        if seen.as_deref() == Some(digest.as_str()) {
            return;
        }
        let changed = seen.is_some();
        let path = self.config.spool_dir.join(MATCH_RULES_FILE);
        if let Err(err) = write_atomically(&path, digest.as_bytes()) {
            tracing::warn!(error = %err, path = %path.display(), "keeping the match rules' digest");
        }
        *seen = Some(digest);
        if changed {
            let shared = self.clone();
            let wait = self
                .config
                .match_rules_spread
                .mul_f64(jitter::random_fraction());
            tracing::info!(in_seconds = wait.as_secs(), "the collector's match rules changed; the objects without stamps will be reported again");
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                shared.report_unstamped_again.store(true, Ordering::Relaxed);
            });
        }
    }

    fn spool_items(&self, kind: ReportKind, items: &[ObservedItem]) -> std::io::Result<()> {
        let chunk_size = self.config.max_changes_per_report.max(1);
        let mut spool = self.spool.lock().expect("spool lock");
        // A snapshot's `change_seq_high` is taken like a change number, so no later change
        // shares it with the deletions the collector infers from this snapshot.
        let high = if kind == ReportKind::Snapshot {
            spool.next_change_seq()
        } else {
            0
        };
        let chunks: Vec<&[ObservedItem]> = if items.is_empty() {
            vec![&[]]
        } else {
            items.chunks(chunk_size).collect()
        };
        let last = chunks.len() - 1;
        for (index, chunk) in chunks.into_iter().enumerate() {
            // A snapshot split in parts: only the last part may infer deletions, and it must
            // know every object, so earlier parts go as deltas.
            let part_kind = if kind == ReportKind::Snapshot && index != last {
                ReportKind::Delta
            } else {
                kind
            };
            let report = if part_kind == ReportKind::Snapshot {
                self.report(part_kind, items, high)
            } else {
                self.report(part_kind, chunk, 0)
            };
            spool.push(report)?;
            self.stats.reports_spooled.fetch_add(1, Ordering::Relaxed);
        }
        self.stats
            .spool_reports
            .store(spool.pending_reports() as u64, Ordering::Relaxed);
        self.stats
            .spool_bytes
            .store(spool.pending_bytes(), Ordering::Relaxed);
        drop(spool);
        self.wake.notify_one();
        Ok(())
    }
}

/// Runs the agent until `events` closes or `shutdown` resolves. Everything gathered is in the
/// spool before this returns.
pub async fn run(
    config: AgentConfig,
    mut events: mpsc::Receiver<SourceEvent>,
    shutdown: impl std::future::Future<Output = ()>,
    stats: Arc<AgentStats>,
) -> anyhow::Result<()> {
    let spool = Spool::open(&config.spool_dir, config.spool_max_bytes).map_err(|err| {
        anyhow::anyhow!("opening the spool in {}: {err}", config.spool_dir.display())
    })?;
    let tracker_path = config.spool_dir.join("objects.json");
    let mut tracker: Tracker = match std::fs::read(&tracker_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
            tracing::warn!(error = %err, path = %tracker_path.display(), "ignoring unreadable object state; a full resend follows");
            Tracker::default()
        }),
        Err(_) => Tracker::default(),
    };
    let sender = Sender::new(
        &config.collector_url,
        config.token.clone(),
        config.request_timeout,
        config.ca_file.as_deref(),
    )
    .map_err(anyhow::Error::msg)?;
    let match_rules = std::fs::read_to_string(config.spool_dir.join(MATCH_RULES_FILE))
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty());
    let shared = Arc::new(Shared {
        config: config.clone(),
        spool: Mutex::new(spool),
        reconcilers: Mutex::new(BTreeMap::new()),
        stamped_apps: Mutex::new(tracker.stamped_apps()),
        match_rules: Mutex::new(match_rules),
        report_unstamped_again: AtomicBool::new(false),
        wake: Notify::new(),
        stats: stats.clone(),
    });
    let delivery = tokio::spawn(deliver(shared.clone(), sender));

    let mut pending: Vec<ObservedItem> = Vec::new();
    let mut flush = tokio::time::interval(config.flush_interval);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut snapshot = tokio::time::interval_at(
        tokio::time::Instant::now() + config.snapshot_interval,
        config.snapshot_interval,
    );
    tokio::pin!(shutdown);
    let cluster = config.cluster.clone();
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                let now = now();
                let mut spool = shared.spool.lock().expect("spool lock");
                let mut next_seq = || spool.next_change_seq();
                match event {
                    SourceEvent::Applied(object) => match normalize(&object) {
                        Ok(normalized) => pending.extend(tracker.apply(&cluster, normalized, now, &mut next_seq)),
                        Err(err) => tracing::debug!(error = %err, "ignoring object"),
                    },
                    SourceEvent::Deleted(object) => match normalize(&object) {
                        Ok(normalized) => pending.extend(tracker.delete(&normalized.object, now, &mut next_seq)),
                        Err(err) => tracing::debug!(error = %err, "ignoring deleted object"),
                    },
                    SourceEvent::Listed { kind, objects } => {
                        let listed = objects.iter().filter_map(|o| normalize(o).ok()).filter(|o| o.object.kind == kind).collect();
                        pending.extend(tracker.relist(&cluster, kind, listed, now, &mut next_seq));
                    }
                    SourceEvent::Reconciler { name, version } => {
                        shared.reconcilers.lock().expect("reconcilers lock").insert(name, version);
                    }
                }
                if tracker.take_stamped_changed() {
                    *shared.stamped_apps.lock().expect("stamped apps lock") = tracker.stamped_apps();
                    shared.report_unstamped_again.store(true, Ordering::Relaxed);
                }
            }
            _ = flush.tick() => {
                if shared.report_unstamped_again.swap(false, Ordering::Relaxed) {
                    let mut spool = shared.spool.lock().expect("spool lock");
                    let mut next_seq = || spool.next_change_seq();
                    // The objects' earlier changes in this window are sent again anyway.
                    pending.retain(|item| !item.is_unstamped_app_object());
                    pending.extend(tracker.report_unstamped_again(now(), &mut next_seq));
                }
                if !pending.is_empty() {
                    flush_pending(&shared, &tracker, &tracker_path, &mut pending)?;
                }
            }
            _ = snapshot.tick() => {
                flush_pending(&shared, &tracker, &tracker_path, &mut pending)?;
                shared.spool_items(ReportKind::Snapshot, &tracker.snapshot())?;
            }
            _ = &mut shutdown => break,
        }
    }
    flush_pending(&shared, &tracker, &tracker_path, &mut pending)?;
    shared.spool.lock().expect("spool lock").save_counters()?;
    delivery.abort();
    Ok(())
}

fn flush_pending(
    shared: &Shared,
    tracker: &Tracker,
    tracker_path: &std::path::Path,
    pending: &mut Vec<ObservedItem>,
) -> anyhow::Result<()> {
    if pending.is_empty() {
        return Ok(());
    }
    shared
        .stats
        .changes
        .fetch_add(pending.len() as u64, Ordering::Relaxed);
    shared.spool_items(ReportKind::Delta, pending)?;
    pending.clear();
    write_atomically(tracker_path, &serde_json::to_vec(tracker)?)?;
    Ok(())
}

/// Sends spooled reports oldest first, one at a time, until each is acknowledged; sends a
/// heartbeat when nothing else went out for a heartbeat interval.
async fn deliver(shared: Arc<Shared>, sender: Sender) {
    let config = &shared.config;
    let mut backoff = config.min_backoff;
    let mut last_contact = Instant::now() - config.heartbeat_interval;
    loop {
        let next = shared.spool.lock().expect("spool lock").oldest();
        let next = match next {
            Ok(next) => next,
            Err(err) => {
                tracing::error!(error = %err, "reading the spool");
                tokio::time::sleep(config.max_backoff).await;
                continue;
            }
        };
        let (seq, body, heartbeat) = match next {
            Some((seq, body)) => (seq, body, false),
            None => {
                let due = last_contact + config.heartbeat_interval;
                if Instant::now() < due {
                    tokio::select! {
                        _ = shared.wake.notified() => {}
                        _ = tokio::time::sleep_until(due.into()) => {}
                    }
                    continue;
                }
                (
                    0,
                    shared.report(ReportKind::Heartbeat, &[], 0).encode(),
                    true,
                )
            }
        };
        let bytes = body.len() as u64 + REQUEST_OVERHEAD_BYTES;
        let (outcome, answer) = sender.send_for_answer(body).await;
        if let Some(digest) = answer.match_rules {
            shared.match_rules_seen(digest);
        }
        let duplicate = answer.duplicate;
        if let Some(duplicate) = duplicate.filter(|d| !heartbeat && d.counters_behind()) {
            shared.stats.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
            let renumbered = {
                let mut spool = shared.spool.lock().expect("spool lock");
                let result =
                    spool.renumber_above(duplicate.acked_seq, duplicate.highest_change_seq);
                shared
                    .stats
                    .spool_bytes
                    .store(spool.pending_bytes(), Ordering::Relaxed);
                result
            };
            match renumbered {
                Ok(reports) => {
                    shared.stats.renumberings.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        seq,
                        acked_seq = duplicate.acked_seq,
                        highest_change_seq = duplicate.highest_change_seq,
                        reports,
                        "the collector acknowledged higher numbers than this agent's (a clock that went back, a restored spool); renumbered the waiting reports and sending them again"
                    );
                }
                Err(err) => {
                    tracing::error!(seq, error = %err, "renumbering the waiting reports failed; they stay spooled and are retried");
                    tokio::time::sleep(config.max_backoff).await;
                }
            }
            continue;
        }
        shared.stats.bytes_sent.fetch_add(bytes, Ordering::Relaxed);
        let wait = match outcome {
            SendOutcome::Acknowledged => {
                last_contact = Instant::now();
                backoff = config.min_backoff;
                if heartbeat {
                    shared.stats.heartbeats_sent.fetch_add(1, Ordering::Relaxed);
                } else {
                    shared.stats.reports_sent.fetch_add(1, Ordering::Relaxed);
                    let mut spool = shared.spool.lock().expect("spool lock");
                    if let Err(err) = spool.ack(seq) {
                        tracing::error!(seq, error = %err, "removing an acknowledged report from the spool");
                    }
                    shared
                        .stats
                        .spool_reports
                        .store(spool.pending_reports() as u64, Ordering::Relaxed);
                    shared
                        .stats
                        .spool_bytes
                        .store(spool.pending_bytes(), Ordering::Relaxed);
                }
                continue;
            }
            SendOutcome::RetryAfter(delay) => {
                let wait = jitter::after(delay.max(config.min_backoff), jitter::random_fraction());
                tracing::info!(seq, retry_in = ?wait, "collector busy");
                wait
            }
            SendOutcome::Refused { status, message } => {
                tracing::error!(seq, status, error = %message, "collector refused the report; it stays spooled and is retried");
                jitter::within(config.max_backoff, jitter::random_fraction())
            }
            SendOutcome::Unreachable(error) => {
                let wait = jitter::within(backoff, jitter::random_fraction());
                tracing::warn!(seq, error = %error, retry_in = ?wait, "collector unreachable; reports stay spooled");
                wait
            }
        };
        shared.stats.send_failures.fetch_add(1, Ordering::Relaxed);
        backoff = (backoff * 2).min(config.max_backoff);
        if heartbeat {
            // A missed heartbeat is not retried: the next one, or any report, says the same.
            last_contact = Instant::now();
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            // New reports do not cut a backoff short; only time does.
        }
    }
}
