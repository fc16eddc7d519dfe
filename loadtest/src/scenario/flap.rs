//! The flap scenario: a share of clusters flipping one app between healthy and failing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_model::Health;
use fleetscope_runtime::clock;

use super::prober::Probe;
use super::{progress_bar, Ctx};
use crate::sim::failure;

impl Ctx {
    /// A share of clusters flip one app between healthy and failing every period.
    pub async fn flap(&self, rng: &mut SplitMix64, notes: &mut Vec<String>) -> anyhow::Result<u64> {
        let delivering = self.delivering();
        let count = ((delivering.len() as f64 * self.knobs.flap.share).ceil() as usize)
            .min(delivering.len());
        let mut chosen: Vec<(usize, u16)> = Vec::new();
        {
            let fleet = self.agents.fleet.lock().expect("fleet lock");
            for _ in 0..count {
                let c = delivering[rng.below(delivering.len() as u64) as usize];
                if chosen.iter().any(|(x, _)| *x == c) {
                    continue;
                }
                if let Some(o) = fleet.clusters[c]
                    .objects
                    .iter()
                    .find(|o| o.health == Health::Healthy)
                {
                    chosen.push((c, o.app));
                }
            }
        }
        let period = Duration::from_secs(self.knobs.flap.period_seconds.max(1));
        let rounds = (self.knobs.flap.seconds / self.knobs.flap.period_seconds.max(1)).max(1);
        let probe_every =
            (chosen.len() * rounds as usize / self.knobs.freshness_samples.max(1)).max(1);
        let mut changes = 0u64;
        let bar = progress_bar(rounds, "flap", "rounds");
        for round in 0..rounds {
            {
                let mut fleet = self.agents.fleet.lock().expect("fleet lock");
                let now = clock::now();
                for &(c, app) in &chosen {
                    let version = fleet.clusters[c]
                        .objects
                        .iter()
                        .find(|o| o.app == app)
                        .map(|o| o.version.to_string())
                        .unwrap_or_default();
                    let revision = self.next_revision(&version);
                    let rev: Arc<str> = Arc::from(revision.as_str());
                    let mut health = Health::Healthy;
                    fleet.change(c, app, now, |o| {
                        o.revision = rev;
                        o.transitioned_at = now.seconds();
                        if o.health == Health::Healthy {
                            let (reason, message) = failure(o.kind);
                            o.health = Health::Degraded;
                            o.reason = reason;
                            o.message = message;
                        } else {
                            o.health = Health::Healthy;
                            o.reason = "ReconciliationSucceeded";
                            o.message = "";
                        }
                        health = o.health;
                    });
                    if changes.is_multiple_of(probe_every as u64) {
                        self.prober.offer(Probe {
                            cluster: fleet.clusters[c].id.clone(),
                            app: fleet.apps[usize::from(app)].clone(),
                            revision,
                            health,
                            made: Instant::now(),
                        });
                    }
                    changes += 1;
                }
            }
            self.deliver(chosen.iter().map(|(c, _)| *c));
            tokio::time::sleep(period).await;
            bar.set_position(round + 1);
        }
        bar.finish_and_clear();
        notes.push(format!(
            "{} clusters flapped one app each, {rounds} times, every {} s",
            chosen.len(),
            period.as_secs()
        ));
        Ok(changes)
    }
}
