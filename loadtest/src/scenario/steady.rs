//! The steady scenario: heartbeats and a share of app instances changing status per minute.

use std::time::{Duration, Instant};

use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_store::Store;

use super::{progress_bar, Ctx, SteadyWindow};

impl Ctx {
    /// The steady state: heartbeats (always running) and `change_rate` of app instances
    /// changing status per minute, for `steady_seconds`.
    pub async fn steady(
        &self,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<u64> {
        let clusters = self.delivering();
        let (rows_before, bytes_before) = observed_size(&self.store).await?;
        let from_ms = self.agents.elapsed_ms();
        let instances: u64 = {
            let fleet = self.agents.fleet.lock().expect("fleet lock");
            clusters
                .iter()
                .map(|&c| fleet.clusters[c].objects.len() as u64)
                .sum()
        };
        let per_second = instances as f64 * self.knobs.steady.change_rate / 60.0;
        let duration = Duration::from_secs(self.knobs.steady.seconds);
        let total = (per_second * duration.as_secs_f64()).round() as u64;
        let probe_every = (total / self.knobs.freshness_samples.max(1) as u64).max(1);
        let bar = progress_bar(duration.as_secs(), "steady", "s");
        let phase_started = Instant::now();
        let mut made = 0u64;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        while phase_started.elapsed() < duration {
            tick.tick().await;
            let due = (per_second * phase_started.elapsed().as_secs_f64()) as u64;
            let mut touched = Vec::new();
            while made < due.min(total) && !clusters.is_empty() {
                let c = clusters[rng.below(clusters.len() as u64) as usize];
                if self.touch(c, rng, made.is_multiple_of(probe_every)) {
                    touched.push(c);
                }
                made += 1;
            }
            self.deliver(touched);
            bar.set_position(phase_started.elapsed().as_secs());
        }
        bar.finish_and_clear();
        let to_ms = self.agents.elapsed_ms();
        let (rows_after, bytes_after) = observed_size(&self.store).await?;
        notes.push(format!(
            "{made} status changes ({per_second:.1}/s, {:.2}% of {instances} app instances per minute) on {} delivering clusters",
            self.knobs.steady.change_rate * 100.0,
            clusters.len()
        ));
        *self.steady.lock().expect("steady lock") = Some(SteadyWindow {
            from_ms,
            to_ms,
            delivering_clusters: clusters.len() as u64,
            rows_before,
            bytes_before,
            rows_after,
            bytes_after,
        });
        Ok(made)
    }
}

/// Rows and bytes on disk of the observed-state table.
async fn observed_size(store: &Store) -> anyhow::Result<(u64, u64)> {
    let sizes = store.table_sizes().await?;
    Ok(sizes
        .iter()
        .filter(|t| t.table == "observed_transitions")
        .fold((0, 0), |(r, b), t| (r + t.rows, b + t.bytes_on_disk)))
}
