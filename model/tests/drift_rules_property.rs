//! The drift rules against a second, literal reading of `docs/drift.md`: for arbitrary pairs,
//! thresholds and clocks (edges included), `classify` must give what the documented table,
//! read top to bottom, gives.

use fleetscope_model::{
    classify, next_change, DesiredForDrift, DriftInput, DriftPolicy, DriftState, Health,
    ObservedForDrift, SyncStatus, Timestamp,
};
use proptest::prelude::*;

const NOW: i64 = 1_800_000_000;

/// The table of docs/drift.md, one `if` per row, in its order. Written from the document, not
/// from `classify`.
fn documented(input: &DriftInput<'_>, policy: &DriftPolicy) -> DriftState {
    let now = input.now.seconds();
    // "Thresholds are inclusive": exactly `grace` seconds old is still within it.
    let within_grace = |since: i64| now - since <= policy.progress_grace_seconds;
    // Row 1.
    if input.desired.is_none() && input.observed.is_none() {
        return DriftState::Unknown;
    }
    // Row 2: never seen, or seen more than stale_after ago (exactly stale_after is not stale).
    let stale = match input.last_seen {
        None => true,
        Some(seen) => now - seen.seconds() > policy.stale_after_seconds,
    };
    if stale {
        return DriftState::Stale;
    }
    let (desired, observed) = match (input.desired, input.observed) {
        // Row 3.
        (None, Some(_)) => return DriftState::Unexpected,
        // Row 4.
        (Some(desired), None) => {
            return if within_grace(desired.since.seconds()) {
                DriftState::Progressing
            } else {
                DriftState::Missing
            };
        }
        (Some(desired), Some(observed)) => (desired, observed),
        (None, None) => unreachable!("row 1"),
    };
    // Row 5.
    if observed.health == Health::Degraded {
        return DriftState::Failed;
    }
    // Row 6: "both content hashes are known and differ".
    let hashes_differ = !desired.content_hash.is_empty()
        && !observed.content_hash.is_empty()
        && desired.content_hash != observed.content_hash;
    if desired.version != observed.version || hashes_differ {
        return if within_grace(desired.since.seconds()) {
            DriftState::Progressing
        } else {
            DriftState::OutOfSync
        };
    }
    // Row 7.
    if observed.sync == SyncStatus::OutOfSync {
        return DriftState::OutOfSync;
    }
    // Row 8.
    if observed.health == Health::Healthy {
        return DriftState::InSync;
    }
    // Row 9: the later of desired-since and the last transition; a reporter's transition time
    // from the future is ignored (as if there were none).
    let transition = observed.transitioned_at.seconds();
    let since = if transition > now {
        desired.since.seconds()
    } else {
        desired.since.seconds().max(transition)
    };
    if matches!(observed.health, Health::Progressing | Health::Unknown) && within_grace(since) {
        return DriftState::Progressing;
    }
    // Row 10.
    DriftState::Unknown
}

/// Times near the edges that matter: `now`, the thresholds, and the future.
fn time_near(policy: (i64, i64)) -> impl Strategy<Value = i64> {
    let (stale, grace) = policy;
    let edges = vec![
        NOW,
        NOW + 1,
        NOW - 1,
        NOW - stale,
        NOW - stale - 1,
        NOW - stale + 1,
        NOW - grace,
        NOW - grace - 1,
        NOW - grace + 1,
        NOW + 3600,
        0,
    ];
    prop_oneof![
        proptest::sample::select(edges),
        (NOW - 3 * grace.max(stale) - 10)..(NOW + 100),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    policy: DriftPolicy,
    last_seen: Option<i64>,
    desired: Option<(&'static str, &'static str, i64)>,
    observed: Option<(&'static str, &'static str, Health, SyncStatus, i64)>,
}

fn case() -> impl Strategy<Value = Case> {
    let versions = proptest::sample::select(vec!["1.0.0", "1.1.0", ""]);
    let hashes = proptest::sample::select(vec!["sha256:aa", "sha256:bb", ""]);
    let health = proptest::sample::select(Health::ALL.to_vec());
    let sync = proptest::sample::select(SyncStatus::ALL.to_vec());
    (0i64..1200, 0i64..1800).prop_flat_map(move |(stale, grace)| {
        let policy = DriftPolicy {
            stale_after_seconds: stale,
            progress_grace_seconds: grace,
        };
        (
            Just(policy),
            proptest::option::weighted(0.85, time_near((stale, grace))),
            proptest::option::of((versions.clone(), hashes.clone(), time_near((stale, grace)))),
            proptest::option::of((
                versions.clone(),
                hashes.clone(),
                health.clone(),
                sync.clone(),
                time_near((stale, grace)),
            )),
        )
            .prop_map(|(policy, last_seen, desired, observed)| Case {
                policy,
                last_seen,
                desired,
                observed,
            })
    })
}

fn input_of(case: &Case, now: i64) -> DriftInput<'static> {
    DriftInput {
        now: Timestamp(now),
        last_seen: case.last_seen.map(Timestamp),
        desired: case
            .desired
            .map(|(version, content_hash, since)| DesiredForDrift {
                version,
                content_hash,
                since: Timestamp(since),
            }),
        observed: case.observed.map(
            |(version, content_hash, health, sync, at)| ObservedForDrift {
                version,
                content_hash,
                health,
                sync,
                transitioned_at: Timestamp(at),
            },
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4_000))]

    /// The hub keeps every pair's state and re-classifies it only when `next_change` comes due:
    /// between `now` and that moment (and forever, when there is none) the answer must not move.
    #[test]
    fn the_answer_holds_until_next_change(case in case(), steps in proptest::collection::vec(0i64..4_000, 1..12)) {
        let start = input_of(&case, NOW);
        let held = classify(&start, &case.policy);
        let until = next_change(&start, &case.policy).map(Timestamp::seconds);
        if let Some(until) = until {
            prop_assert!(until > NOW, "next_change {until} is not after now {NOW}");
            // The moment just before it, and a sample of moments in between.
            let before = classify(&input_of(&case, until - 1), &case.policy);
            prop_assert_eq!(before, held, "changed before next_change {}: {:?}", until, case);
        }
        for step in steps {
            let at = NOW + step;
            if until.is_some_and(|u| at >= u) {
                continue;
            }
            prop_assert_eq!(classify(&input_of(&case, at), &case.policy), held, "changed at {} before next_change {:?}: {:?}", at, until, case);
        }
    }

    #[test]
    fn classify_follows_the_documented_table(case in case()) {
        let input = DriftInput {
            now: Timestamp(NOW),
            last_seen: case.last_seen.map(Timestamp),
            desired: case.desired.map(|(version, content_hash, since)| DesiredForDrift {
                version,
                content_hash,
                since: Timestamp(since),
            }),
            observed: case.observed.map(|(version, content_hash, health, sync, at)| ObservedForDrift {
                version,
                content_hash,
                health,
                sync,
                transitioned_at: Timestamp(at),
            }),
        };
        prop_assert_eq!(classify(&input, &case.policy), documented(&input, &case.policy), "{:?}", case);
    }
}
