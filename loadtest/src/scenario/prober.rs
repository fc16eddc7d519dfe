//! The freshness prober: how long an acknowledged change takes to show in the hub.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_model::Health;

use crate::hubcheck::HubClient;

/// One acknowledged change the freshness prober waits to see in the hub.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Probe {
    pub(super) cluster: String,
    pub(super) app: String,
    pub(super) revision: String,
    pub(super) health: Health,
    pub(super) made: Instant,
}

/// The freshness prober: polls each sampled cluster's page until the change shows. At most
/// [`MAX_PENDING`] samples are open at once, each polled every 100 ms, so probing adds at most
/// a few dozen small requests per second to the hub's load.
#[derive(Debug)]
pub struct Prober {
    pending: Mutex<Vec<Probe>>,
    /// (seconds since the run started when seen, freshness in milliseconds)
    pub seen: Mutex<Vec<(f64, f64)>>,
    pub not_seen: AtomicU64,
    /// Samples replaced by a later change of the same app before they showed.
    pub superseded: AtomicU64,
}

/// The longest a probe waits before it counts as not seen.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// The most samples open at once.
const MAX_PENDING: usize = 8;

impl Prober {
    /// A prober with nothing sampled yet.
    pub fn new() -> Arc<Prober> {
        Arc::new(Prober {
            pending: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
            not_seen: AtomicU64::new(0),
            superseded: AtomicU64::new(0),
        })
    }

    /// Samples a change unless enough are open already. A newer change of the same app on the
    /// same cluster replaces an open sample (the older state may never be visible).
    pub(super) fn offer(&self, probe: Probe) {
        let mut pending = self.pending.lock().expect("probe lock");
        if let Some(old) = pending
            .iter_mut()
            .find(|p| p.cluster == probe.cluster && p.app == probe.app)
        {
            *old = probe;
            self.superseded.fetch_add(1, Ordering::Relaxed);
        } else if pending.len() < MAX_PENDING {
            pending.push(probe);
        }
    }

    /// Whether the hub shows the probed change now.
    async fn shows(hub: &HubClient, probe: &Probe) -> bool {
        let page = hub
            .get(&format!(
                "/api/v1/clusters/{}?history_hours=0",
                probe.cluster
            ))
            .await;
        page.ok().is_some_and(|page| {
            page["apps"].as_array().is_some_and(|apps| {
                apps.iter().any(|a| {
                    a["app"] == probe.app.as_str()
                        && a["revision"] == probe.revision.as_str()
                        && a["health"] == probe.health.as_str()
                })
            })
        })
    }

    /// Polls the open samples every 100 ms until `stop` is set.
    pub fn spawn(
        self: &Arc<Self>,
        hub: HubClient,
        started: Instant,
        stop: Arc<AtomicBool>,
    ) -> tokio::task::JoinHandle<()> {
        let prober = self.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let tick = tokio::time::sleep(Duration::from_millis(100));
                let batch: Vec<Probe> = prober.pending.lock().expect("probe lock").clone();
                let mut polls = tokio::task::JoinSet::new();
                for probe in batch {
                    let hub = hub.clone();
                    polls.spawn(async move {
                        let shows = Prober::shows(&hub, &probe).await;
                        (probe, shows, Instant::now())
                    });
                }
                while let Some(Ok((probe, shows, at))) = polls.join_next().await {
                    let timed_out = probe.made.elapsed() > PROBE_TIMEOUT;
                    if !shows && !timed_out {
                        continue;
                    }
                    let mut pending = prober.pending.lock().expect("probe lock");
                    // Only if it is still the open sample (not replaced meanwhile).
                    let Some(index) = pending.iter().position(|p| {
                        p.cluster == probe.cluster
                            && p.revision == probe.revision
                            && p.health == probe.health
                    }) else {
                        continue;
                    };
                    pending.swap_remove(index);
                    drop(pending);
                    if shows {
                        prober.seen.lock().expect("seen lock").push((
                            at.duration_since(started).as_secs_f64(),
                            at.duration_since(probe.made).as_secs_f64() * 1_000.0,
                        ));
                    } else {
                        prober.not_seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tick.await;
            }
        })
    }

    /// Samples still open.
    pub fn pending(&self) -> usize {
        self.pending.lock().expect("probe lock").len()
    }
}
