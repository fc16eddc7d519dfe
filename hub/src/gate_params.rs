//! The rollout gate's own parameter syntaxes: `soak` (a duration), `max_failed` (a count, a
//! share or a percentage) and `stale` (what a stale targeted cluster does to the gate).

use fleetscope_engine::gate::{MaxFailed, StaleMode, MAX_SOAK_SECONDS};

use crate::params::{ApiError, Params};

/// `3` (a count: digits only), `0.02` (a share from 0 to 1) or `2%` (a percentage from 0
/// to 100).
pub fn parse_max_failed(text: &str) -> Result<MaxFailed, ApiError> {
    let bad = || {
        ApiError::bad(
            "max_failed",
            format!(
                "{text:?} is neither a count (digits), a share from 0 to 1 nor a percentage from 0% to 100%"
            ),
        )
    };
    let number = |t: &str| -> Option<f64> {
        // Digits with at most one point: no sign, exponent or `inf`.
        let plain = !t.is_empty()
            && t.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && t.bytes().filter(|b| *b == b'.').count() <= 1
            && t.bytes().any(|b| b.is_ascii_digit());
        plain.then(|| t.parse::<f64>().ok()).flatten()
    };
    if let Some(percent) = text.strip_suffix('%') {
        return match number(percent) {
            Some(p) if p <= 100.0 => Ok(MaxFailed::Share(p / 100.0)),
            _ => Err(bad()),
        };
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map(MaxFailed::Count).map_err(|_| bad());
    }
    match number(text) {
        Some(share) if share <= 1.0 => Ok(MaxFailed::Share(share)),
        _ => Err(bad()),
    }
}

/// `soak`: seconds (`7200`), or a whole number with a unit `s`, `m` or `h` (`2h`); at most
/// [`MAX_SOAK_SECONDS`].
pub fn parse_soak(text: &str) -> Result<u64, ApiError> {
    let bad = |why: &str| ApiError::bad("soak", format!("{text:?} {why}"));
    let (digits, unit) = match text.as_bytes().last() {
        Some(b's') => (&text[..text.len() - 1], 1),
        Some(b'm') => (&text[..text.len() - 1], 60),
        Some(b'h') => (&text[..text.len() - 1], 3_600),
        _ => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(
            "is not a duration: whole seconds, or a whole number with s, m or h (2h)",
        ));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|seconds| *seconds <= MAX_SOAK_SECONDS)
        .ok_or_else(|| bad("is longer than 30 days"))
}

/// `stale`: `count` (the default), `exclude` or `fail`.
pub fn parse_stale(params: &Params) -> Result<StaleMode, ApiError> {
    match params.get("stale") {
        None | Some("count") => Ok(StaleMode::Count),
        Some("exclude") => Ok(StaleMode::Exclude),
        Some("fail") => Ok(StaleMode::Fail),
        Some(other) => Err(ApiError::bad(
            "stale",
            format!("{other:?} is not exclude, count or fail"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soak_takes_seconds_and_units_up_to_30_days() {
        assert_eq!(parse_soak("0").unwrap(), 0);
        assert_eq!(parse_soak("90").unwrap(), 90);
        assert_eq!(parse_soak("90s").unwrap(), 90);
        assert_eq!(parse_soak("15m").unwrap(), 900);
        assert_eq!(parse_soak("2h").unwrap(), 7_200);
        assert_eq!(parse_soak("720h").unwrap(), MAX_SOAK_SECONDS);
        assert_eq!(parse_soak("2592000").unwrap(), MAX_SOAK_SECONDS);
        for bad in [
            "2592001",
            "721h",
            "",
            "h",
            "-1",
            "1.5h",
            "2d",
            "+3",
            "1e3",
            "99999999999999999999h",
        ] {
            let err = parse_soak(bad).unwrap_err();
            assert_eq!(err.parameter.as_deref(), Some("soak"), "{bad}");
            assert!(err.message.contains(&format!("{bad:?}")), "{}", err.message);
        }
    }

    #[test]
    fn max_failed_is_a_count_a_share_or_a_percentage() {
        assert_eq!(parse_max_failed("3").unwrap(), MaxFailed::Count(3));
        assert_eq!(parse_max_failed("0").unwrap(), MaxFailed::Count(0));
        assert_eq!(parse_max_failed("0.02").unwrap(), MaxFailed::Share(0.02));
        assert_eq!(parse_max_failed("1.0").unwrap(), MaxFailed::Share(1.0));
        assert_eq!(parse_max_failed("2%").unwrap(), MaxFailed::Share(0.02));
        assert_eq!(parse_max_failed("100%").unwrap(), MaxFailed::Share(1.0));
        for bad in [
            "", "%", "1.5", "101%", "-1", "1e-2", "inf", "NaN", "2 %", "0.0.1",
        ] {
            let err = parse_max_failed(bad).unwrap_err();
            assert_eq!(err.parameter.as_deref(), Some("max_failed"), "{bad}");
        }
        // Shares round down, and their decimal form's rounding does not cost a cluster.
        assert_eq!(MaxFailed::Share(0.02).allowed(150), 3);
        assert_eq!(MaxFailed::Share(0.02).allowed(149), 2);
        assert_eq!(parse_max_failed("7%").unwrap().allowed(100), 7);
        assert_eq!(MaxFailed::Share(0.0).allowed(1_000), 0);
        assert_eq!(MaxFailed::Count(3).allowed(1), 3);
    }
}
