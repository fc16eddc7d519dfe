//! The parts of the hub's answers this client prints, read from their JSON. Only what a table
//! shows is here; fields the hub adds later are ignored, and `-o json` prints the answer itself.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `GET /api/v1/summary`.
#[derive(Debug, Deserialize)]
pub struct Summary {
    pub total: GroupCounts,
    pub groups: Vec<GroupCounts>,
}

/// The counters of a group, or of the whole selection (`group` absent).
#[derive(Debug, Deserialize)]
pub struct GroupCounts {
    pub group: Option<String>,
    pub clusters: u64,
    pub reporting_clusters: u64,
    pub stale_clusters: u64,
    pub app_instances: u64,
    pub app_instances_by_state: ByState,
}

/// App instances per drift state.
#[derive(Debug, Deserialize)]
pub struct ByState {
    pub unknown: u64,
    pub stale: u64,
    pub unexpected: u64,
    pub missing: u64,
    pub failed: u64,
    pub out_of_sync: u64,
    pub progressing: u64,
    pub in_sync: u64,
}

/// `GET /api/v1/apps/{app}/versions`.
#[derive(Debug, Deserialize)]
pub struct Versions {
    pub desired: Vec<VersionCount>,
    pub running: Vec<VersionCount>,
}

/// One version with its clusters, in all and per group.
#[derive(Debug, Deserialize)]
pub struct VersionCount {
    pub version: String,
    pub clusters: u64,
    pub groups: BTreeMap<String, u64>,
}

/// `GET /api/v1/drift`: one page.
#[derive(Debug, Deserialize)]
pub struct DriftPage {
    pub items: Vec<Pair>,
    pub next_cursor: Option<String>,
}

/// One (cluster, app) pair.
#[derive(Debug, Deserialize)]
pub struct Pair {
    pub cluster: String,
    pub app: String,
    pub state: String,
    pub since: Option<String>,
    pub desired_version: Option<String>,
    pub observed_version: Option<String>,
    pub message: Option<String>,
}

/// `GET /api/v1/gate`. The fields a hub without them leaves out are options; what the gate
/// answers beyond the fields named here (parameters newer than this client, and their
/// results) is kept in `more`.
#[derive(Debug, Deserialize)]
pub struct Gate {
    pub app: String,
    pub version: Option<String>,
    pub commit: Option<String>,
    pub group: Option<String>,
    pub targeted_clusters: u64,
    pub in_sync: u64,
    pub by_state: BTreeMap<String, u64>,
    pub share_in_sync: f64,
    pub threshold: f64,
    pub verdict: String,
    pub reason: String,
    /// The rule that decided the verdict.
    pub rule: Option<String>,
    pub soak_seconds: Option<u64>,
    pub soaked: Option<u64>,
    pub share_soaked: Option<f64>,
    pub failed: Option<u64>,
    /// `max_failed` as asked.
    pub max_failed: Option<String>,
    /// The most failed clusters `max_failed` allows.
    pub failed_allowed: Option<u64>,
    /// How stale targeted clusters were handled: `exclude`, `count` or `fail`.
    pub stale: Option<String>,
    pub stale_clusters: Option<u64>,
    /// One page of the clusters holding the gate back, each an object (`cluster`, `group`,
    /// `state`, `since`, `soaks_at`, and whatever a newer hub adds).
    #[serde(default)]
    pub holding_back: Vec<serde_json::Value>,
    /// The cursor of the next page of `holding_back`; none on the last page.
    pub next_cursor: Option<String>,
    #[serde(flatten)]
    pub more: serde_json::Map<String, serde_json::Value>,
}

/// The body of every answer but a 200.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}
