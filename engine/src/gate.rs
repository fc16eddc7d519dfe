//! The rollout gate's rules: which clusters a gate targets, how long a targeted cluster has
//! been in sync as far as the fleet's data shows (the soak), how failed and stale clusters
//! count, which rule decides the verdict, and which clusters hold the gate back. The handler
//! (`api::gate`) turns a [`Tally`] into the answer.

use std::collections::BTreeMap;

use fleetscope_model::DriftState;

use crate::fleet::classify::AppCursor;
use crate::fleet::{ClusterRec, Filter, Fleet, Pair};

/// The longest soak a gate may ask for: 30 days.
pub const MAX_SOAK_SECONDS: u64 = 30 * 86_400;

/// `max_failed`: at most this many targeted clusters may be failed, as a count or as a share
/// of the targeted clusters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxFailed {
    Count(u64),
    Share(f64),
}

impl MaxFailed {
    /// The most failed clusters allowed among `targeted`: a count as it is, a share of the
    /// targeted clusters rounded down (a billionth of a cluster of slack absorbs the rounding
    /// of the share's decimal form: 2% of 150 allows 3).
    pub fn allowed(&self, targeted: u64) -> u64 {
        match *self {
            MaxFailed::Count(count) => count,
            MaxFailed::Share(share) => (share * targeted as f64 + 1e-9).floor() as u64,
        }
    }
}

/// `stale`: what a targeted cluster that is stale does to the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StaleMode {
    /// Left out of the targeted clusters.
    Exclude,
    /// Targeted, and not in sync (its pair is in the `stale` state).
    #[default]
    Count,
    /// Targeted, and the gate fails while any is stale.
    Fail,
}

/// What a gate asks, after parsing.
#[derive(Debug, Clone)]
pub struct Rules {
    pub app: String,
    pub version: Option<String>,
    pub commit: Option<String>,
    pub threshold: f64,
    pub soak: u64,
    pub max_failed: Option<MaxFailed>,
    pub stale: StaleMode,
}

/// The rule that decided a verdict, checked in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// No selected cluster desires the version or commit (after `stale=exclude`): fail.
    NothingTargeted,
    /// `stale=fail` and a targeted cluster is stale: fail.
    Stale,
    /// More targeted clusters are failed than `max_failed` allows: fail.
    MaxFailed,
    /// The share soaked against `threshold`: pass or fail.
    Threshold,
}

/// A targeted cluster that holds the gate back.
#[derive(Debug, Clone)]
pub struct Holding<'a> {
    pub cluster: &'a str,
    pub group: &'a str,
    pub state: DriftState,
    /// In sync: when it counts as in sync from ([`in_sync_since`]); otherwise the pair's
    /// `since` as `drift` lists it. 0 when unknown.
    pub since: u32,
    /// In sync but not soaked yet: `since` + soak.
    pub soaks_at: Option<u32>,
}

/// A gate's counts, its verdict and a page of the clusters holding it back.
#[derive(Debug, Clone)]
pub struct Tally<'a> {
    pub targeted: u64,
    pub in_sync: u64,
    pub soaked: u64,
    pub failed: u64,
    /// Selected clusters that desire the version or commit and are stale, excluded or not.
    pub stale: u64,
    pub by_state: BTreeMap<&'static str, u64>,
    pub failed_allowed: Option<u64>,
    pub pass: bool,
    pub rule: Rule,
    pub holding_back: Vec<Holding<'a>>,
    /// The last cluster of a full page, when more clusters hold the gate back after it.
    pub next_after: Option<&'a str>,
}

impl Tally<'_> {
    pub fn share(&self, count: u64) -> f64 {
        if self.targeted == 0 {
            0.0
        } else {
            count as f64 / self.targeted as f64
        }
    }
}

/// Since when an in-sync pair counts as in sync, and until when the data confirms it, both in
/// the collector's and the renderer's clocks (never the reporter's):
///
/// - since: the later of the desired state's `since` (the render that made it desired) and
///   the time the collector received the object's latest report (`received_at`). The
///   reporter's own transition time is not used: it is on the cluster's clock, and a report
///   received later than it says would otherwise claim time the hub cannot vouch for. Any new
///   report of the object starts the count again, whatever it changed.
/// - until: the later of the cluster's last heartbeat and that report's arrival; what holds
///   after the last word from the cluster is not counted.
///
/// `None` for a pair that is not in sync.
pub fn in_sync_span(pair: &Pair<'_>, cluster: &ClusterRec) -> Option<(u32, u32)> {
    if pair.state != DriftState::InSync {
        return None;
    }
    let desired_since = pair.desired_since?;
    let observed = pair.observed?;
    let since = desired_since.max(observed.received_at);
    let until = cluster.last_seen.unwrap_or(0).max(observed.received_at);
    Some((since, until))
}

/// Whether an in-sync span covers `soak` seconds.
fn soaked(span: (u32, u32), soak: u64) -> bool {
    u64::from(span.1.saturating_sub(span.0)) >= soak
}

/// Counts the gate over every selected cluster, decides the verdict, and lists up to `limit`
/// clusters holding it back after the cluster `after` (by cluster id).
pub fn tally<'a>(
    fleet: &'a Fleet,
    filter: &Filter,
    rules: &Rules,
    limit: usize,
    after: Option<&str>,
) -> Tally<'a> {
    let s = &fleet.symbols;
    let mut tally = Tally {
        targeted: 0,
        in_sync: 0,
        soaked: 0,
        failed: 0,
        stale: 0,
        by_state: BTreeMap::new(),
        failed_allowed: None,
        pass: false,
        rule: Rule::NothingTargeted,
        holding_back: Vec::new(),
        next_after: None,
    };
    // The version and commit asked for as symbols: one a fleet never saw targets nothing.
    let wanted = |text: &Option<String>| text.as_deref().map(|t| s.find(t));
    let (version, commit) = (wanted(&rules.version), wanted(&rules.commit));
    let unknown = matches!(version, Some(None)) || matches!(commit, Some(None));
    if let Some(app_id) = s.find(&rules.app).filter(|_| !unknown) {
        let mut cursor = AppCursor::new(app_id);
        for (id, cluster) in fleet.clusters.iter() {
            if !fleet.cluster_matches(cluster, filter) {
                continue;
            }
            let Some((Some(d), state)) = fleet.current_desired_and_state(cluster, &mut cursor)
            else {
                continue;
            };
            if version.is_some_and(|v| v != Some(d.version))
                || commit.is_some_and(|c| c != Some(d.commit))
            {
                continue;
            }
            if state == DriftState::Stale {
                tally.stale += 1;
                if rules.stale == StaleMode::Exclude {
                    continue;
                }
            }
            tally.targeted += 1;
            *tally.by_state.entry(state.as_str()).or_default() += 1;
            match state {
                DriftState::InSync => tally.in_sync += 1,
                DriftState::Failed => tally.failed += 1,
                _ => {}
            }
            // Without a soak an in-sync pair is soaked (in sync, it runs the desired version,
            // so its span exists) and one that is not never is: what runs is read only for a
            // soak, or for a pair that is listed.
            let mut pair = None;
            let span = if rules.soak == 0 {
                if state == DriftState::InSync {
                    tally.soaked += 1;
                    continue;
                }
                None
            } else {
                pair = fleet.current_pair(cluster, app_id);
                pair.as_ref().and_then(|p| in_sync_span(p, cluster))
            };
            if span.is_some_and(|span| soaked(span, rules.soak)) {
                tally.soaked += 1;
                continue;
            }
            if after.is_some_and(|a| id <= a) {
                continue;
            }
            if tally.holding_back.len() == limit {
                if tally.next_after.is_none() {
                    tally.next_after = tally.holding_back.last().map(|h| h.cluster);
                }
                continue;
            }
            let Some(pair) = pair.or_else(|| fleet.current_pair(cluster, app_id)) else {
                continue;
            };
            let since = match (span, pair.observed) {
                (Some((since, _)), _) => since,
                (None, Some(o)) => o.transitioned_at,
                (None, None) => pair.desired_since.unwrap_or(d.since),
            };
            tally.holding_back.push(Holding {
                cluster: id,
                group: cluster.info.as_ref().map_or("", |i| i.group.as_str()),
                state: pair.state,
                since,
                soaks_at: span.map(|(since, _)| {
                    u32::try_from(u64::from(since) + rules.soak).unwrap_or(u32::MAX)
                }),
            });
        }
    }
    tally.failed_allowed = rules.max_failed.map(|m| m.allowed(tally.targeted));
    let stale_targeted = rules.stale == StaleMode::Fail && tally.stale > 0;
    (tally.pass, tally.rule) = if tally.targeted == 0 {
        (false, Rule::NothingTargeted)
    } else if stale_targeted {
        (false, Rule::Stale)
    } else if tally.failed_allowed.is_some_and(|a| tally.failed > a) {
        (false, Rule::MaxFailed)
    } else {
        (
            tally.share(tally.soaked) >= rules.threshold,
            Rule::Threshold,
        )
    };
    tally
}

/// The verdict in words, one text per rule and outcome (a soak of 0 keeps the plain in-sync
/// wording).
pub fn reason(tally: &Tally<'_>, rules: &Rules) -> &'static str {
    match (tally.rule, tally.pass, rules.soak > 0) {
        (Rule::NothingTargeted, _, _) => {
            "no cluster in this selection desires that version or commit"
        }
        (Rule::Stale, _, _) => "a targeted cluster is stale and stale=fail",
        (Rule::MaxFailed, _, _) => "more targeted clusters are failed than max_failed allows",
        (Rule::Threshold, true, false) => "the share in sync reaches the threshold",
        (Rule::Threshold, false, false) => "the share in sync is below the threshold",
        (Rule::Threshold, true, true) => "the share in sync for the soak reaches the threshold",
        (Rule::Threshold, false, true) => "the share in sync for the soak is below the threshold",
    }
}
