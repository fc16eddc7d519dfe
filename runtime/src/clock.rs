//! The wall clock as the model counts time. The model takes `now` as a parameter and never
//! reads a clock itself; this is where services read it.

use std::time::{SystemTime, UNIX_EPOCH};

use fleetscope_model::Timestamp;

/// The system clock in whole seconds since the Unix epoch; 0 for a clock set before 1970,
/// which no deadline or staleness rule could make sense of anyway.
pub fn now() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs() as i64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_whole_seconds_of_the_system_clock() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let now = now().seconds();
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!(
            before <= now && now <= after,
            "{before} <= {now} <= {after}"
        );
    }
}
