//! What the scenarios report: each phase's measurements, the steady window, the rollout's
//! waves, and the requests acknowledged in a window.

use std::collections::BTreeMap;

use fleetscope_collector::protocol::ReportKind;
use serde::{Deserialize, Serialize};

use crate::agents::Ack;
use crate::hubcheck::Buckets;

/// What a phase did and what was measured while it ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseReport {
    pub name: String,
    /// Seconds since the run started.
    pub started_s: f64,
    pub seconds: f64,
    /// Changes made by the simulator in this phase.
    pub changes: u64,
    pub notes: Vec<String>,
    pub check_passed: bool,
    pub check_seconds: f64,
    pub check_mismatch: Option<String>,
    /// The hub's refreshes that ended during this phase (its check included), from its own
    /// `fleetscope_hub_refresh_seconds` histogram read before and after; `None` when the
    /// hub's `/metrics` could not be read (and in reports from before it was measured).
    #[serde(default)]
    pub refreshes: Option<PhaseRefreshes>,
    /// Where the CPU went in the phase and whether the simulator set its pace (`None` in
    /// reports from before it was measured).
    #[serde(default)]
    pub load: Option<crate::report::PhaseLoad>,
}

/// How long the hub's refreshes took in one phase, in its histogram's buckets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseRefreshes {
    pub count: u64,
    /// Refreshes that took at most 0.512 s (the bucket bound next to the 0.5 s target).
    pub within_512ms: u64,
    /// The bound of the bucket the 99th percentile falls in; `None` when it is above the
    /// largest bound, or the phase had no refresh.
    pub p99_at_most_s: Option<f64>,
}

impl PhaseRefreshes {
    /// The refreshes between two reads of the same cumulative histogram.
    pub fn between(before: &Buckets, after: &Buckets) -> PhaseRefreshes {
        let earlier = |bound: f64| {
            before
                .iter()
                .find(|(b, _)| *b == bound)
                .map_or(0, |(_, n)| *n)
        };
        let diff: Vec<(f64, u64)> = after
            .iter()
            .map(|&(bound, n)| (bound, n.saturating_sub(earlier(bound))))
            .collect();
        let count = diff.last().map_or(0, |&(_, n)| n);
        let within_512ms = diff
            .iter()
            .find(|(b, _)| (*b - 0.512).abs() < 1e-9)
            .map_or(0, |&(_, n)| n);
        let p99_at_most_s = if count == 0 {
            None
        } else {
            diff.iter()
                .find(|&&(_, n)| n * 100 >= count * 99)
                .map(|&(b, _)| b)
                .filter(|b| b.is_finite())
        };
        PhaseRefreshes {
            count,
            within_512ms,
            p99_at_most_s,
        }
    }
}

/// The steady phase's window, for the per-cluster rates.
#[derive(Debug, Clone)]
pub struct SteadyWindow {
    pub from_ms: u64,
    pub to_ms: u64,
    pub delivering_clusters: u64,
    pub rows_before: u64,
    pub bytes_before: u64,
    pub rows_after: u64,
    pub bytes_after: u64,
}

/// One wave of a rollout: its clusters, how many failed, and the hub's gate after it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WaveReport {
    pub wave: usize,
    pub groups: Vec<String>,
    pub clusters: u64,
    pub failed: u64,
    /// The hub's rollout gate for the whole fleet after the wave.
    pub gate_share_in_sync: f64,
    pub gate_verdict: String,
}

/// A rollout: the version change, its render and publication, and its waves.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RolloutReport {
    pub app: String,
    pub from_version: String,
    pub to_version: String,
    pub render_seconds: f64,
    pub publish_seconds: f64,
    pub render_summary: String,
    /// (cluster, app) pairs whose desired state changed.
    pub changed_pairs: u64,
    pub waves: Vec<WaveReport>,
}

/// Requests by kind in a window of acknowledgements: (count, rows, bytes).
pub fn acks_between(
    acks: &[Ack],
    from_ms: u64,
    to_ms: u64,
) -> BTreeMap<&'static str, (u64, u64, u64)> {
    let mut out: BTreeMap<&'static str, (u64, u64, u64)> = BTreeMap::new();
    for a in acks
        .iter()
        .filter(|a| a.at_ms >= from_ms && a.at_ms < to_ms)
    {
        let kind = match a.kind {
            ReportKind::Delta => "delta",
            ReportKind::Snapshot => "snapshot",
            ReportKind::Heartbeat => "heartbeat",
        };
        let e = out.entry(kind).or_default();
        e.0 += 1;
        e.1 += u64::from(a.rows);
        e.2 += u64::from(a.bytes);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hubcheck::parse_buckets;

    fn metrics(counts: [u64; 4]) -> String {
        let [a, b, c, all] = counts;
        format!(
            "# TYPE fleetscope_hub_refresh_seconds histogram\n\
             fleetscope_hub_refresh_seconds_sum 1.5\n\
             fleetscope_hub_refresh_seconds_count {all}\n\
             fleetscope_hub_refresh_seconds_bucket{{le=\"+Inf\"}} {all}\n\
             fleetscope_hub_refresh_seconds_bucket{{le=\"0.256\"}} {a}\n\
             fleetscope_hub_refresh_seconds_bucket{{le=\"0.512\"}} {b}\n\
             fleetscope_hub_refresh_seconds_bucket{{le=\"1.024\"}} {c}\n\
             fleetscope_hub_request_seconds_bucket{{route=\"/x\",le=\"0.512\"}} 999\n\
             fleetscope_hub_refresh_seconds_bucket{{phase=\"x\",le=\"0.512\"}} 999\n"
        )
    }

    #[test]
    fn a_phase_counts_the_refreshes_between_two_reads_of_the_histogram() {
        let name = "fleetscope_hub_refresh_seconds";
        let before = parse_buckets(&metrics([90, 100, 100, 100]), name);
        assert_eq!(
            before,
            vec![
                (0.256, 90),
                (0.512, 100),
                (1.024, 100),
                (f64::INFINITY, 100)
            ],
            "sorted by bound; other histograms, and labelled series of this one, left out"
        );
        // 200 more refreshes: 150 within 0.256 s, 197 within 0.512 s, 199 within 1.024 s.
        let after = parse_buckets(&metrics([240, 297, 299, 300]), name);
        let phase = PhaseRefreshes::between(&before, &after);
        assert_eq!(phase.count, 200);
        assert_eq!(phase.within_512ms, 197);
        assert_eq!(
            phase.p99_at_most_s,
            Some(1.024),
            "198 of 200 needs the 1.024 bucket"
        );
        // 1 of 100 above 0.512 s: the 99th of the 100 is within 0.256 s.
        let after = parse_buckets(&metrics([189, 199, 200, 200]), name);
        assert_eq!(
            PhaseRefreshes::between(&before, &after).p99_at_most_s,
            Some(0.256)
        );
        // Past the largest bound, and no refresh at all.
        let after = parse_buckets(&metrics([90, 100, 100, 110]), name);
        assert_eq!(PhaseRefreshes::between(&before, &after).p99_at_most_s, None);
        let same = PhaseRefreshes::between(&before, &before);
        assert_eq!((same.count, same.p99_at_most_s), (0, None));
        assert!(parse_buckets("", name).is_empty());
    }
}
