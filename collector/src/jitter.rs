//! Spreading waits, so that many agents that failed at the same moment (a collector outage,
//! a ClickHouse restart) do not all come back at the same instants.

use std::time::Duration;

/// A number in [0, 1) that differs from call to call, agent to agent and start to start.
pub fn random_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A wait between half of `backoff` and all of it, placed by `fraction` (0 to 1): a backoff
/// that still grows, but whose retries are spread over half of its span.
pub fn within(backoff: Duration, fraction: f64) -> Duration {
    let half = backoff / 2;
    half + (backoff - half).mul_f64(fraction.clamp(0.0, 1.0))
}

/// A wait of at least `asked` (a `Retry-After`) and at most half as long again, placed by
/// `fraction`.
pub fn after(asked: Duration, fraction: f64) -> Duration {
    asked + (asked / 2).mul_f64(fraction.clamp(0.0, 1.0))
}

/// A `Retry-After` in whole seconds between `base` and twice `base`, placed by `fraction`.
pub fn retry_after_seconds(base: u32, fraction: f64) -> u32 {
    base + (f64::from(base) * fraction.clamp(0.0, 1.0)).round() as u32
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use super::*;

    #[test]
    fn waits_stay_within_their_bounds() {
        let backoff = Duration::from_secs(8);
        assert_eq!(within(backoff, 0.0), Duration::from_secs(4));
        assert_eq!(within(backoff, 1.0), backoff);
        assert_eq!(after(Duration::from_secs(2), 0.0), Duration::from_secs(2));
        assert_eq!(after(Duration::from_secs(2), 1.0), Duration::from_secs(3));
        assert_eq!(retry_after_seconds(5, 0.0), 5);
        assert_eq!(retry_after_seconds(5, 1.0), 10);
        assert_eq!(retry_after_seconds(2, 0.5), 3);
    }

    /// Many agents' waits after one shared failure spread over the span: a thousand draws of
    /// a 60 s backoff fall into at least 20 of its 30 one-second slots, none outside it.
    #[test]
    fn retries_after_one_failure_spread() {
        let backoff = Duration::from_secs(60);
        let mut slots = BTreeSet::new();
        for _ in 0..1_000 {
            let wait = within(backoff, random_fraction());
            assert!(
                wait >= Duration::from_secs(30) && wait <= backoff,
                "{wait:?}"
            );
            slots.insert(wait.as_secs());
        }
        assert!(slots.len() >= 20, "{slots:?}");
        let seconds: BTreeSet<u32> = (0..200)
            .map(|_| retry_after_seconds(5, random_fraction()))
            .collect();
        assert!(
            seconds.len() >= 4 && seconds.iter().all(|s| (5..=10).contains(s)),
            "{seconds:?}"
        );
    }
}
