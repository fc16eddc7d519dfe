//! Counts of clusters and pairs per drift state, for one group or the whole fleet.

use fleetscope_model::DriftState;

/// Counts for one group (or the whole fleet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub clusters: u64,
    pub stale_clusters: u64,
    /// App instances per drift state, in `DriftState::ALL` order.
    pub pairs: [u64; 8],
}

impl Counts {
    pub fn state(&self, state: DriftState) -> u64 {
        self.pairs[state_index(state)]
    }
}

pub fn state_index(state: DriftState) -> usize {
    DriftState::ALL
        .iter()
        .position(|s| *s == state)
        .expect("every state is listed")
}
