//! The rollout gate's answer.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use super::DriftStateName;

/// `GET /api/v1/gate`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GateAnswer<'a> {
    /// The app, as asked.
    pub app: &'a str,
    /// The version, as asked; null when `commit` was given.
    pub version: Option<&'a str>,
    /// The commit, as asked; null when `version` was given.
    pub commit: Option<&'a str>,
    /// The group, as asked; null when none was (a scoped token's scope applies all the same).
    pub group: Option<&'a str>,
    /// Selected clusters whose desired state of `app` is that version (or comes from that
    /// commit); with `stale=exclude`, not counting the stale ones.
    pub targeted_clusters: u64,
    /// Of those, how many are in sync.
    pub in_sync: u64,
    /// The targeted clusters per drift state; states with none are left out.
    #[schema(example = json!({"in_sync": 95, "progressing": 4, "failed": 1}))]
    pub by_state: BTreeMap<&'static str, u64>,
    /// `in_sync / targeted_clusters`; 0 when nothing is targeted.
    pub share_in_sync: f64,
    /// The threshold applied (1 unless asked otherwise).
    pub threshold: f64,
    /// `pass` when at least one cluster is targeted, no rule before `threshold` failed the
    /// gate (see `rule`), and `share_soaked >= threshold`.
    pub verdict: GateVerdict,
    /// The verdict in words.
    pub reason: &'static str,
    /// The rule that decided the verdict, in the order they are checked: `nothing_targeted`
    /// (fail), `stale` (fail: `stale=fail` and a targeted cluster is stale), `max_failed`
    /// (fail: more targeted clusters failed than allowed), `threshold` (pass or fail on
    /// `share_soaked`).
    pub rule: GateRule,
    /// The soak applied, in seconds (0 unless asked: then in sync now is enough).
    pub soak_seconds: u64,
    /// Targeted clusters in sync for at least `soak_seconds`, as far as the data shows (in
    /// sync since the later of the render that made the version desired and the arrival of
    /// the object's latest report, up to the cluster's last heartbeat). Equals `in_sync` when
    /// `soak_seconds` is 0.
    pub soaked: u64,
    /// `soaked / targeted_clusters`; 0 when nothing is targeted. The share `threshold` applies
    /// to.
    pub share_soaked: f64,
    /// Targeted clusters in the `failed` state.
    pub failed: u64,
    /// `max_failed` as asked; null when it was not.
    pub max_failed: Option<&'a str>,
    /// The most failed targeted clusters `max_failed` allows (a share of
    /// `targeted_clusters`, rounded down); null when `max_failed` was not asked.
    pub failed_allowed: Option<u64>,
    /// How stale targeted clusters were handled: `exclude`, `count` (the default) or `fail`.
    pub stale: GateStaleHandling,
    /// Selected clusters whose desired state matches and that are stale; with
    /// `stale=exclude` they are not in `targeted_clusters` or `by_state`.
    pub stale_clusters: u64,
    /// Targeted clusters that are not soaked, by cluster id, at most `limit` (one page):
    /// not in sync (failed and stale ones included, unless excluded), or in sync for less
    /// than `soak_seconds`.
    pub holding_back: Vec<HoldingBack<'a>>,
    /// Pass as `cursor` for the next page of `holding_back`; null on the last page.
    pub next_cursor: Option<String>,
}

/// A targeted cluster that holds a gate back.
#[derive(Debug, Serialize, ToSchema)]
pub struct HoldingBack<'a> {
    /// The cluster id.
    pub cluster: &'a str,
    /// The cluster's group.
    pub group: &'a str,
    /// The pair's drift state; `in_sync` for a cluster still soaking.
    #[schema(value_type = DriftStateName)]
    pub state: &'static str,
    /// In sync: the moment it counts as in sync from (the later of the render that made the
    /// version desired and the arrival of the object's latest report). Otherwise the pair's
    /// `since` as `drift` lists it: the object's last transition (the reporter's clock), or
    /// when the version became desired if the object was never reported. Null when unknown.
    pub since: Option<String>,
    /// In sync but not yet for `soak_seconds`: `since` plus the soak, the moment it will have
    /// soaked if it stays in sync and heartbeats keep arriving (it counts once a heartbeat at
    /// or after that moment arrived). Null otherwise.
    pub soaks_at: Option<String>,
}

/// A gate's verdict.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateVerdict {
    Pass,
    Fail,
}

/// The rule that decided a gate's verdict.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GateRule {
    NothingTargeted,
    Stale,
    MaxFailed,
    Threshold,
}

/// How a gate handles stale targeted clusters.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateStaleHandling {
    Exclude,
    Count,
    Fail,
}

impl From<fleetscope_engine::gate::Rule> for GateRule {
    fn from(rule: fleetscope_engine::gate::Rule) -> GateRule {
        use fleetscope_engine::gate::Rule;
        match rule {
            Rule::NothingTargeted => GateRule::NothingTargeted,
            Rule::Stale => GateRule::Stale,
            Rule::MaxFailed => GateRule::MaxFailed,
            Rule::Threshold => GateRule::Threshold,
        }
    }
}

impl From<fleetscope_engine::gate::StaleMode> for GateStaleHandling {
    fn from(mode: fleetscope_engine::gate::StaleMode) -> GateStaleHandling {
        use fleetscope_engine::gate::StaleMode;
        match mode {
            StaleMode::Exclude => GateStaleHandling::Exclude,
            StaleMode::Count => GateStaleHandling::Count,
            StaleMode::Fail => GateStaleHandling::Fail,
        }
    }
}
