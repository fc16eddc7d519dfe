//! The context every scenario runs in, and the steps they share: delivering, checking against
//! the ground truth, and making one status change.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_model::Health;
use fleetscope_runtime::clock;
use fleetscope_store::Store;

use super::prober::Probe;
use super::{clock_time, Knobs, Prober, RolloutReport, SteadyWindow};
use crate::agents::Agents;
use crate::hubcheck::{
    converge, first_rollup_mismatch, inventory_mismatch, rollout_mismatch, CheckOutcome, HubClient,
};

/// Everything the scenarios share.
#[derive(Debug)]
pub struct Ctx {
    pub agents: Arc<Agents>,
    /// The hub the scenarios, checks and probes ask (the only one, or the hubs' balancer).
    pub hub: HubClient,
    /// Each hub directly when several run behind a balancer (empty otherwise): a check passes
    /// only when every one agrees with the ground truth.
    pub hub_copies: Vec<HubClient>,
    pub store: Store,
    pub prober: Arc<Prober>,
    pub knobs: Knobs,
    pub started: Instant,
    pub platform_dir: PathBuf,
    pub gitops_dir: PathBuf,
    pub revision_counter: AtomicU64,
    pub rollout: Mutex<Option<RolloutReport>>,
    pub steady: Mutex<Option<SteadyWindow>>,
    /// What the rollout in progress is doing (its current wave), if one is.
    pub live_status: Mutex<Option<String>>,
}

impl Ctx {
    /// A line of running commentary, with the time, when the knobs ask for it.
    pub(super) fn say(&self, text: &str) {
        if self.knobs.live {
            println!("{} {text}", clock_time(clock::now()));
        }
    }

    pub(super) fn next_revision(&self, version: &str) -> String {
        let n = self.revision_counter.fetch_add(1, Ordering::Relaxed);
        format!("{version}@sha1:{n:012x}")
    }

    /// The hub whose `/metrics` the run reads: the only one, or the first copy asked directly
    /// (through a balancer, successive reads would come from different hubs).
    pub fn metrics_hub(&self) -> &HubClient {
        self.hub_copies.first().unwrap_or(&self.hub)
    }

    /// Sends what was queued for these clusters.
    pub fn deliver(&self, clusters: impl IntoIterator<Item = usize>) {
        self.agents.poke(clusters);
    }

    /// Waits for delivery, then for the hub (every copy, when several run) to agree with the
    /// ground truth.
    pub async fn check(&self) -> CheckOutcome {
        if let Err(err) = self.agents.drained(self.knobs.drain_timeout).await {
            return CheckOutcome {
                passed: false,
                seconds: 0.0,
                attempts: 0,
                mismatch: Some(format!("{err:#}")),
            };
        }
        let hubs = if self.hub_copies.is_empty() {
            std::slice::from_ref(&self.hub)
        } else {
            &self.hub_copies[..]
        };
        let started = Instant::now();
        let mut attempts = 0;
        let mut last = None;
        for hub in hubs {
            let mut outcome = self.check_one(hub).await;
            attempts += outcome.attempts;
            outcome.seconds = started.elapsed().as_secs_f64();
            outcome.attempts = attempts;
            if !outcome.passed {
                if hubs.len() > 1 {
                    outcome.mismatch = outcome.mismatch.map(|m| format!("{}: {m}", hub.url));
                }
                return outcome;
            }
            last = Some(outcome);
        }
        last.expect("at least one hub")
    }

    /// Waits for one hub to agree with the ground truth.
    async fn check_one(&self, hub: &HubClient) -> CheckOutcome {
        let agents = self.agents.clone();
        let hub = hub.clone();
        let rollout = self.rollout.lock().expect("rollout lock").clone();
        converge(self.knobs.check_timeout, || {
            let agents = agents.clone();
            let hub = hub.clone();
            let rollout = rollout.clone();
            async move {
                let hub_rollups = hub.rollups().await?;
                let a = agents.clone();
                let (truth, apps) = tokio::task::spawn_blocking(move || {
                    let fleet = a.fleet.lock().expect("fleet lock");
                    (fleet.rollups(clock::now()), fleet.apps.clone())
                })
                .await?;
                if let Some(m) = first_rollup_mismatch(&hub_rollups, &truth) {
                    return Ok(Some(m));
                }
                for (i, app) in apps.iter().enumerate() {
                    let got = hub.inventory(app).await?;
                    let a = agents.clone();
                    let expected = tokio::task::spawn_blocking(move || {
                        a.fleet.lock().expect("fleet lock").inventory(i as u16)
                    })
                    .await?;
                    if let Some(m) = inventory_mismatch(app, &got, &expected) {
                        return Ok(Some(m));
                    }
                }
                if let Some(report) = rollout {
                    let (app, version) = (report.app.clone(), report.to_version.clone());
                    let a = agents.clone();
                    let truth = tokio::task::spawn_blocking(move || {
                        a.fleet.lock().expect("fleet lock").rollout_truth(
                            &app,
                            &version,
                            clock::now(),
                        )
                    })
                    .await?;
                    let failed_first = report.waves.iter().map(|w| w.failed).sum();
                    let m = rollout_mismatch(
                        &hub,
                        &report.app,
                        &report.to_version,
                        truth,
                        failed_first,
                    )
                    .await?;
                    if m.is_some() {
                        return Ok(m);
                    }
                }
                Ok(None)
            }
        })
        .await
    }

    /// Delivering clusters (not never-seen, not dark), in fleet order.
    pub fn delivering(&self) -> Vec<usize> {
        let fleet = self.agents.fleet.lock().expect("fleet lock");
        fleet
            .clusters
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.never_seen && !c.dark)
            .map(|(i, _)| i)
            .collect()
    }

    /// A status change on one cluster's healthy app (a new revision applied), sampled for
    /// freshness when `probe` is set. Returns false when the cluster has no such app.
    pub fn touch(&self, cluster: usize, rng: &mut SplitMix64, probe: bool) -> bool {
        let mut fleet = self.agents.fleet.lock().expect("fleet lock");
        let sim = &fleet.clusters[cluster];
        let healthy: Vec<u16> = sim
            .objects
            .iter()
            .filter(|o| o.health == Health::Healthy)
            .map(|o| o.app)
            .collect();
        if healthy.is_empty() {
            return false;
        }
        let app = healthy[rng.below(healthy.len() as u64) as usize];
        let version = sim
            .objects
            .iter()
            .find(|o| o.app == app)
            .map(|o| o.version.to_string())
            .unwrap_or_default();
        let revision = self.next_revision(&version);
        let now = clock::now();
        let rev: Arc<str> = Arc::from(revision.as_str());
        fleet.change(cluster, app, now, |o| {
            o.revision = rev;
            o.transitioned_at = now.seconds();
            o.reason = "ReconciliationSucceeded";
        });
        if probe {
            self.prober.offer(Probe {
                cluster: fleet.clusters[cluster].id.clone(),
                app: fleet.apps[usize::from(app)].clone(),
                revision,
                health: Health::Healthy,
                made: Instant::now(),
            });
        }
        true
    }
}
