//! The drift state of a (cluster, app) pair: the one definition the API, the dashboards and the
//! metrics all use. The store carries the same rules as a SQL expression, and a test runs both on
//! the same inputs.

use serde::{Deserialize, Serialize};

use crate::state::{Health, SyncStatus};
use crate::string_enum::string_enum;
use crate::time::Timestamp;

string_enum!(
    /// Where a (cluster, app) pair stands. [`classify`] decides; the rules are tried in the order
    /// the variants are documented.
    DriftState {
        /// Neither desired nor observed: nothing is known about the pair.
        Unknown = "unknown",
        /// The cluster has not reported within the stale threshold, or never has.
        Stale = "stale",
        /// Observed on the cluster, not desired there.
        Unexpected = "unexpected",
        /// Desired, never seen on the cluster after the grace period.
        Missing = "missing",
        /// The reconciler reports an error (Flux `Ready=False`, Argo CD `Degraded`, failed operation).
        Failed = "failed",
        /// The cluster runs something other than desired: the desired version or content has not
        /// arrived within the grace period, or the reconciler reports live drift.
        OutOfSync = "out_of_sync",
        /// Desired is newer than what runs (or was just applied and is settling), within the grace period.
        Progressing = "progressing",
        /// Runs what is desired, and the reconciler reports it healthy.
        InSync = "in_sync",
    }
);

/// The thresholds drift classification uses, both in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriftPolicy {
    /// A cluster not seen for longer than this is stale.
    pub stale_after_seconds: i64,
    /// How long a new desired state may take to arrive and settle before it counts as drift.
    pub progress_grace_seconds: i64,
}

impl Default for DriftPolicy {
    fn default() -> Self {
        DriftPolicy {
            stale_after_seconds: 600,
            progress_grace_seconds: 900,
        }
    }
}

/// The desired side of a pair, as far as drift is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DesiredForDrift<'a> {
    pub version: &'a str,
    pub content_hash: &'a str,
    /// When this version and content became desired (the server's clock).
    pub since: Timestamp,
}

/// The observed side of a pair: the app's reconciler object as last reported, not deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservedForDrift<'a> {
    pub version: &'a str,
    pub content_hash: &'a str,
    pub health: Health,
    pub sync: SyncStatus,
    /// When the reconciler's status last changed (the reporter's clock, so it may be skewed).
    pub transitioned_at: Timestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriftInput<'a> {
    pub now: Timestamp,
    /// When the cluster was last heard from (the collector's clock); `None` if never.
    pub last_seen: Option<Timestamp>,
    pub desired: Option<DesiredForDrift<'a>>,
    pub observed: Option<ObservedForDrift<'a>>,
}

/// Classifies one (cluster, app) pair. Pure: same input, same answer.
///
/// Times at or before the threshold count as within it (a cluster seen exactly
/// `stale_after_seconds` ago is not stale). A reporter's timestamp from the future is not
/// trusted and is ignored; the server's own times are used as they are.
pub fn classify(input: &DriftInput<'_>, policy: &DriftPolicy) -> DriftState {
    let now = input.now;
    let within_grace = |t: Timestamp| t.age_at(now) <= policy.progress_grace_seconds;
    let stale = match input.last_seen {
        None => true,
        Some(seen) => seen.age_at(now) > policy.stale_after_seconds,
    };
    match (input.desired, input.observed) {
        (None, None) => DriftState::Unknown,
        _ if stale => DriftState::Stale,
        (None, Some(_)) => DriftState::Unexpected,
        (Some(desired), None) => {
            if within_grace(desired.since) {
                DriftState::Progressing
            } else {
                DriftState::Missing
            }
        }
        (Some(desired), Some(observed)) => {
            let differs = desired.version != observed.version
                || (!desired.content_hash.is_empty()
                    && !observed.content_hash.is_empty()
                    && desired.content_hash != observed.content_hash);
            if observed.health == Health::Degraded {
                DriftState::Failed
            } else if differs {
                if within_grace(desired.since) {
                    DriftState::Progressing
                } else {
                    DriftState::OutOfSync
                }
            } else if observed.sync == SyncStatus::OutOfSync {
                DriftState::OutOfSync
            } else if observed.health == Health::Healthy {
                DriftState::InSync
            } else {
                let transitioned = if observed.transitioned_at > now {
                    Timestamp::EPOCH
                } else {
                    observed.transitioned_at
                };
                let settling = matches!(observed.health, Health::Progressing | Health::Unknown);
                if settling && within_grace(desired.since.max(transitioned)) {
                    DriftState::Progressing
                } else {
                    DriftState::Unknown
                }
            }
        }
    }
}

/// The earliest moment after `input.now` at which [`classify`] could answer differently for the
/// same cluster and pair if nothing but the clock moved: a cluster turning stale, a grace period
/// running out, a reporter's future transition time coming due. `None` when time alone never
/// changes the answer. It may name a moment at which the answer stays the same (it is the
/// earliest of the thresholds that apply, not a promise of change); it never names one later
/// than a real change.
pub fn next_change(input: &DriftInput<'_>, policy: &DriftPolicy) -> Option<Timestamp> {
    let now = input.now;
    // `within_grace(t)` holds up to t + grace; it fails from t + grace + 1 on.
    let grace_end = |t: Timestamp| {
        t.plus_seconds(policy.progress_grace_seconds)
            .plus_seconds(1)
    };
    let mut candidates: Vec<Timestamp> = Vec::with_capacity(4);
    if let Some(seen) = input.last_seen {
        candidates.push(
            seen.plus_seconds(policy.stale_after_seconds)
                .plus_seconds(1),
        );
    }
    if let Some(desired) = input.desired {
        candidates.push(grace_end(desired.since));
        if let Some(observed) = input.observed {
            // A transition time in the future is ignored until it comes due.
            candidates.push(observed.transitioned_at);
            candidates.push(grace_end(desired.since.max(observed.transitioned_at)));
        }
    }
    candidates.into_iter().filter(|t| *t > now).min()
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    const NOW: Timestamp = Timestamp(1_800_000_000);
    const HASH_A: &str = "sha256:aaaa";
    const HASH_B: &str = "sha256:bbbb";

    fn ago(seconds: i64) -> Timestamp {
        NOW.plus_seconds(-seconds)
    }

    fn desired(version: &'static str, since: Timestamp) -> Option<DesiredForDrift<'static>> {
        Some(DesiredForDrift {
            version,
            content_hash: HASH_A,
            since,
        })
    }

    fn observed(
        version: &'static str,
        health: Health,
        sync: SyncStatus,
    ) -> ObservedForDrift<'static> {
        ObservedForDrift {
            version,
            content_hash: HASH_A,
            health,
            sync,
            transitioned_at: ago(3600),
        }
    }

    /// A reporter's transition time from the future is ignored until it comes due, and then
    /// restarts the grace period: that moment is a change `next_change` must name.
    #[test]
    fn a_future_transition_coming_due_is_the_next_change() {
        let policy = DriftPolicy::default();
        let input = |now: Timestamp| DriftInput {
            now,
            last_seen: Some(NOW),
            desired: desired("1.2.0", ago(7200)),
            observed: Some(ObservedForDrift {
                transitioned_at: NOW.plus_seconds(10),
                ..observed("1.2.0", Health::Progressing, SyncStatus::Synced)
            }),
        };
        assert_eq!(classify(&input(NOW), &policy), DriftState::Unknown);
        assert_eq!(
            next_change(&input(NOW), &policy),
            Some(NOW.plus_seconds(10))
        );
        assert_eq!(
            classify(&input(NOW.plus_seconds(10)), &policy),
            DriftState::Progressing
        );
        // Then the grace period from the transition, and staleness, whichever comes first.
        assert_eq!(
            next_change(&input(NOW.plus_seconds(10)), &policy),
            Some(NOW.plus_seconds(601))
        );
    }

    /// One line per case: `name: state`. Adding a case is one line in the table.
    #[test]
    fn every_state_and_edge() {
        use Health::*;
        use SyncStatus::{OutOfSync as Drifted, Synced, Unknown as NoSync};
        let policy = DriftPolicy {
            stale_after_seconds: 600,
            progress_grace_seconds: 900,
        };
        let seen = Some(ago(10));
        let old = ago(7200);
        let healthy = observed("1.2.0", Healthy, Synced);
        let cases: Vec<(&str, DriftInput)> = vec![
            (
                "nothing known",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: None,
                    observed: None,
                },
            ),
            (
                "in sync",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(healthy),
                },
            ),
            (
                "in sync, flux reports no sync status",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(observed("1.2.0", Healthy, NoSync)),
                },
            ),
            (
                "stale cluster beats everything",
                DriftInput {
                    now: NOW,
                    last_seen: Some(ago(601)),
                    desired: desired("1.2.0", old),
                    observed: Some(healthy),
                },
            ),
            (
                "never seen cluster is stale",
                DriftInput {
                    now: NOW,
                    last_seen: None,
                    desired: desired("1.2.0", old),
                    observed: None,
                },
            ),
            (
                "seen exactly at the threshold is not stale",
                DriftInput {
                    now: NOW,
                    last_seen: Some(ago(600)),
                    desired: desired("1.2.0", old),
                    observed: Some(healthy),
                },
            ),
            (
                "last seen in the future is not stale",
                DriftInput {
                    now: NOW,
                    last_seen: Some(NOW.plus_seconds(30)),
                    desired: desired("1.2.0", old),
                    observed: Some(healthy),
                },
            ),
            (
                "stale and unexpected is stale",
                DriftInput {
                    now: NOW,
                    last_seen: Some(ago(9999)),
                    desired: None,
                    observed: Some(healthy),
                },
            ),
            (
                "unexpected",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: None,
                    observed: Some(healthy),
                },
            ),
            (
                "desired, not yet seen, within grace",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", ago(60)),
                    observed: None,
                },
            ),
            (
                "desired, not seen, grace exactly used up",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", ago(900)),
                    observed: None,
                },
            ),
            (
                "missing",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", ago(901)),
                    observed: None,
                },
            ),
            (
                "failed",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(observed("1.2.0", Degraded, Synced)),
                },
            ),
            (
                "failed beats progressing",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.3.0", ago(5)),
                    observed: Some(observed("1.2.0", Degraded, Synced)),
                },
            ),
            (
                "new version within grace",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.3.0", ago(120)),
                    observed: Some(healthy),
                },
            ),
            (
                "new version never arrived",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.3.0", ago(901)),
                    observed: Some(healthy),
                },
            ),
            (
                "same version, new content, within grace",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: Some(DesiredForDrift {
                        version: "1.2.0",
                        content_hash: HASH_B,
                        since: ago(10),
                    }),
                    observed: Some(healthy),
                },
            ),
            (
                "same version, other content, after grace",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: Some(DesiredForDrift {
                        version: "1.2.0",
                        content_hash: HASH_B,
                        since: old,
                    }),
                    observed: Some(healthy),
                },
            ),
            (
                "no content hash reported compares versions only",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(ObservedForDrift {
                        content_hash: "",
                        ..healthy
                    }),
                },
            ),
            (
                "reconciler reports live drift",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(observed("1.2.0", Healthy, Drifted)),
                },
            ),
            (
                "applied, still rolling out after a recent transition",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(ObservedForDrift {
                        transitioned_at: ago(30),
                        ..observed("1.2.0", Progressing, Synced)
                    }),
                },
            ),
            (
                "applied, progressing for too long",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(observed("1.2.0", Progressing, Synced)),
                },
            ),
            (
                "applied, no status yet, just desired",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", ago(5)),
                    observed: Some(observed("1.2.0", Unknown, NoSync)),
                },
            ),
            (
                "transition from a clock running ahead is ignored",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(ObservedForDrift {
                        transitioned_at: NOW.plus_seconds(3600),
                        ..observed("1.2.0", Progressing, Synced)
                    }),
                },
            ),
            (
                "transition at exactly now counts",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(ObservedForDrift {
                        transitioned_at: NOW,
                        ..observed("1.2.0", Progressing, Synced)
                    }),
                },
            ),
            (
                "desired from the future is within grace",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.3.0", NOW.plus_seconds(60)),
                    observed: Some(healthy),
                },
            ),
            (
                "equal timestamps everywhere",
                DriftInput {
                    now: NOW,
                    last_seen: Some(NOW),
                    desired: desired("1.3.0", NOW),
                    observed: Some(ObservedForDrift {
                        transitioned_at: NOW,
                        ..healthy
                    }),
                },
            ),
            (
                "suspended is unknown",
                DriftInput {
                    now: NOW,
                    last_seen: seen,
                    desired: desired("1.2.0", old),
                    observed: Some(observed("1.2.0", Suspended, Synced)),
                },
            ),
        ];
        let table: String = cases
            .iter()
            .map(|(name, input)| format!("{name}: {}\n", classify(input, &policy)))
            .collect();
        expect![[r#"
            nothing known: unknown
            in sync: in_sync
            in sync, flux reports no sync status: in_sync
            stale cluster beats everything: stale
            never seen cluster is stale: stale
            seen exactly at the threshold is not stale: in_sync
            last seen in the future is not stale: in_sync
            stale and unexpected is stale: stale
            unexpected: unexpected
            desired, not yet seen, within grace: progressing
            desired, not seen, grace exactly used up: progressing
            missing: missing
            failed: failed
            failed beats progressing: failed
            new version within grace: progressing
            new version never arrived: out_of_sync
            same version, new content, within grace: progressing
            same version, other content, after grace: out_of_sync
            no content hash reported compares versions only: in_sync
            reconciler reports live drift: out_of_sync
            applied, still rolling out after a recent transition: progressing
            applied, progressing for too long: unknown
            applied, no status yet, just desired: progressing
            transition from a clock running ahead is ignored: unknown
            transition at exactly now counts: progressing
            desired from the future is within grace: progressing
            equal timestamps everywhere: progressing
            suspended is unknown: unknown
        "#]]
        .assert_eq(&table);
        let covered: std::collections::BTreeSet<DriftState> = cases
            .iter()
            .map(|(_, input)| classify(input, &policy))
            .collect();
        assert_eq!(
            covered.len(),
            DriftState::ALL.len(),
            "every drift state has a case"
        );
    }

    #[test]
    fn states_have_stable_text() {
        let texts: Vec<&str> = DriftState::ALL.iter().map(|s| s.as_str()).collect();
        expect![[r#"["unknown", "stale", "unexpected", "missing", "failed", "out_of_sync", "progressing", "in_sync"]"#]]
            .assert_eq(&format!("{texts:?}"));
    }
}
