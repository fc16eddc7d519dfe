//! The knobs of the scenarios: what every phase shares, and each scenario's own.

use std::time::Duration;

/// The knobs of the scenarios: what every phase shares, and each scenario's own (a caller that
/// never runs a scenario leaves its knobs at their zero defaults).
#[derive(Debug, Clone)]
pub struct Knobs {
    pub stale_after: i64,
    /// How long a check waits for the hub to agree with the ground truth.
    pub check_timeout: Duration,
    /// How long a check waits for the agents to deliver what they queued.
    pub drain_timeout: Duration,
    /// How long a full resync may go without a snapshot acknowledged before it fails.
    pub stall_timeout: Duration,
    /// At most this many freshness samples per phase.
    pub freshness_samples: usize,
    /// Print a line per rollout wave instead of a progress bar (the demo's running commentary).
    pub live: bool,
    pub steady: SteadyKnobs,
    pub rollout: RolloutKnobs,
    pub flap: FlapKnobs,
    pub dark: DarkKnobs,
    pub outage: OutageKnobs,
}

impl Knobs {
    /// The shared knobs with a minute for checks, ten for delivery, five without a snapshot
    /// acknowledged in a resync and 20 freshness samples per phase; the scenarios' own knobs at
    /// their defaults.
    pub fn new(stale_after: i64) -> Knobs {
        Knobs {
            stale_after,
            check_timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(600),
            stall_timeout: Duration::from_secs(300),
            freshness_samples: 20,
            live: false,
            steady: SteadyKnobs::default(),
            rollout: RolloutKnobs::default(),
            flap: FlapKnobs::default(),
            dark: DarkKnobs::default(),
            outage: OutageKnobs::default(),
        }
    }
}

/// The steady scenario's knobs.
#[derive(Debug, Clone, Default)]
pub struct SteadyKnobs {
    pub seconds: u64,
    /// Share of app instances whose status changes per minute.
    pub change_rate: f64,
}

/// The rollout scenario's knobs.
#[derive(Debug, Clone, Default)]
pub struct RolloutKnobs {
    /// The app rolled out (default: the first one).
    pub app: Option<String>,
    pub waves: usize,
    pub wave_seconds: u64,
    /// Share of a wave's clusters on which the new version fails.
    pub failure_rate: f64,
}

/// The flap scenario's knobs.
#[derive(Debug, Clone, Default)]
pub struct FlapKnobs {
    /// Share of clusters flapping.
    pub share: f64,
    pub seconds: u64,
    pub period_seconds: u64,
}

/// The dark scenario's knobs.
#[derive(Debug, Clone, Default)]
pub struct DarkKnobs {
    /// Share of clusters going dark.
    pub share: f64,
}

/// The outage scenario's knobs (its changes come at the steady scenario's `change_rate`).
#[derive(Debug, Clone, Default)]
pub struct OutageKnobs {
    /// How long the collector stays down before it is started again.
    pub down_seconds: u64,
    /// How long the changes go on, and requests are counted per second, after its return.
    pub after_seconds: u64,
}
