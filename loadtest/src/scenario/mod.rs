//! The scenarios: what happens to the simulated fleet in each phase, and the measurements
//! taken while it happens. Every phase ends with the ground-truth check.
//!
//! `ctx` is what every scenario shares, `knobs` their settings, `prober` the freshness
//! prober, `reports` what a phase measured; `steady`, `rollout`, `flap`, `dark`, `snapshots`
//! (the storm) and `outage` are the scenarios themselves.

use fleetscope_model::Timestamp;
use serde::{Deserialize, Serialize};

mod ctx;
mod dark;
mod flap;
mod knobs;
mod outage;
mod prober;
mod reports;
mod rollout;
mod snapshots;
mod steady;

pub use ctx::Ctx;
pub use knobs::{DarkKnobs, FlapKnobs, Knobs, OutageKnobs, RolloutKnobs, SteadyKnobs};
pub use outage::{OutageRecord, OutageReport, SecondCounts};
pub use prober::Prober;
pub use reports::{
    acks_between, PhaseRefreshes, PhaseReport, RolloutReport, SteadyWindow, WaveReport,
};
pub use rollout::bump_version;

/// The scenarios, in the order given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// Heartbeats every interval and a share of apps changing status every minute.
    Steady,
    /// A new version of one app, rendered, then rolled out in waves across groups.
    Rollout,
    /// Some clusters' apps flip between healthy and failing.
    Flap,
    /// Some clusters go dark until stale, then come back with their spooled changes.
    Dark,
    /// Every cluster reconnects and sends its full snapshot.
    Storm,
    /// The collector killed while the fleet keeps changing, then started again: the
    /// requests per second at its return and the time until every backlog is delivered.
    Outage,
}

impl Scenario {
    /// The scenario's name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::Rollout => "rollout",
            Scenario::Flap => "flap",
            Scenario::Dark => "dark",
            Scenario::Storm => "storm",
            Scenario::Outage => "outage",
        }
    }
}

/// `HH:MM:SS` (UTC) of a timestamp, for running commentary.
pub fn clock_time(at: Timestamp) -> String {
    let s = at.seconds().rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3_600, s / 60 % 60, s % 60)
}

/// A progress bar of `len` `unit`s labelled `name`, for a phase's progress on the terminal.
pub fn progress_bar(len: u64, name: &str, unit: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "  {name:>9} [{{bar:40}}] {{pos}}/{{len}} {unit} {{elapsed}}"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_time_is_utc_hours_minutes_seconds() {
        assert_eq!(clock_time(Timestamp(0)), "00:00:00");
        assert_eq!(clock_time(Timestamp(1_795_869_965)), "12:46:05");
        assert_eq!(clock_time(Timestamp(86_399)), "23:59:59");
    }
}
