//! The dark scenario: a share of clusters silent until stale, then back with their spool.

use std::time::{Duration, Instant};

use fleetscope_fixtures::rng::SplitMix64;

use super::{progress_bar, Ctx};
use crate::hubcheck::CheckOutcome;

impl Ctx {
    /// A share of clusters stop delivering until they are stale, making changes meanwhile
    /// (kept in their spool); the hub must show them stale with their last known state, then
    /// current again once they come back and deliver.
    pub async fn dark(
        &self,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<(u64, CheckOutcome)> {
        self.agents.drained(self.knobs.drain_timeout).await?;
        let delivering = self.delivering();
        let count = ((delivering.len() as f64 * self.knobs.dark.share).ceil() as usize)
            .min(delivering.len());
        let mut dark: Vec<usize> = Vec::new();
        for _ in 0..count {
            let c = delivering[rng.below(delivering.len() as u64) as usize];
            if !dark.contains(&c) {
                dark.push(c);
            }
        }
        {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            for &c in &dark {
                fleet.go_dark(c);
            }
        }
        // Changes while dark: two per cluster, kept in the outbox.
        let mut changes = 0;
        for round in 0..2 {
            for &c in &dark {
                if self.touch(c, rng, false) {
                    changes += 1;
                }
            }
            if round == 0 {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
        let wait = Duration::from_secs(self.knobs.stale_after.max(0) as u64 + 15);
        let bar = progress_bar(wait.as_secs(), "dark", "s");
        let dark_started = Instant::now();
        while dark_started.elapsed() < wait {
            tokio::time::sleep(Duration::from_millis(500)).await;
            bar.set_position(dark_started.elapsed().as_secs());
        }
        bar.finish_and_clear();
        let while_dark = self.check().await;
        notes.push(format!(
            "{} clusters dark for {} s with {changes} spooled changes; hub {} while they were dark ({:.1} s)",
            dark.len(),
            wait.as_secs(),
            if while_dark.passed { "agreed" } else { "DISAGREED" },
            while_dark.seconds
        ));
        {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            for &c in &dark {
                fleet.come_back(c);
            }
        }
        let back = Instant::now();
        self.deliver(dark.iter().copied());
        self.agents.drained(self.knobs.drain_timeout).await?;
        notes.push(format!(
            "spooled reports delivered {:.1} s after they came back",
            back.elapsed().as_secs_f64()
        ));
        Ok((changes, while_dark))
    }
}
