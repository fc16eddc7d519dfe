//! Points in time as whole seconds since the Unix epoch, the resolution ClickHouse's `DateTime` stores.

use serde::{Deserialize, Serialize};

/// Seconds since 1970-01-01T00:00:00Z. The model never reads a clock: callers pass `now` in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const EPOCH: Timestamp = Timestamp(0);

    pub fn seconds(self) -> i64 {
        self.0
    }

    /// How many seconds `self` lies before `now`; negative when `self` is in the future
    /// (a reporter whose clock runs ahead).
    pub fn age_at(self, now: Timestamp) -> i64 {
        now.0.saturating_sub(self.0)
    }

    pub fn plus_seconds(self, seconds: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(seconds))
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
