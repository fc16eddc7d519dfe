//! The API's answers as the pages read them: only the fields a page shows, typed. The API's
//! own answer types borrow from the fleet and only serialize; these own their values and only
//! deserialize, and a field renamed in the API fails the page tests.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Counts of app instances (pairs) by drift state name.
pub type ByState = BTreeMap<String, u64>;

/// `GET /api/v1/summary`.
#[derive(Debug, Deserialize)]
pub struct Summary {
    pub generated_at: Option<String>,
    pub total: Rollup,
    pub groups: Vec<GroupRollup>,
}

/// A selection's counts.
#[derive(Debug, Deserialize)]
pub struct Rollup {
    pub clusters: u64,
    pub reporting_clusters: u64,
    pub stale_clusters: u64,
    pub app_instances: u64,
    pub app_instances_by_state: ByState,
}

/// One group's counts.
#[derive(Debug, Deserialize)]
pub struct GroupRollup {
    pub group: String,
    pub depth: u32,
    #[serde(flatten)]
    pub rollup: Rollup,
}

/// `GET /api/v1/environments`: every app's versions per environment.
#[derive(Debug, Deserialize)]
pub struct Environments {
    pub apps: Vec<AppEnvironments>,
}

#[derive(Debug, Deserialize)]
pub struct AppEnvironments {
    pub app: String,
    pub environments: Vec<EnvironmentVersions>,
}

#[derive(Debug, Deserialize)]
pub struct EnvironmentVersions {
    pub environment: String,
    pub desired: BTreeMap<String, u64>,
    pub running: BTreeMap<String, u64>,
}

/// `GET /api/v1/drift`: a page of pairs.
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
    pub reason: Option<String>,
    pub message: Option<String>,
}

/// `GET /api/v1/apps/{app}/versions`.
#[derive(Debug, Deserialize)]
pub struct Versions {
    pub desired: Vec<VersionCount>,
    pub running: Vec<VersionCount>,
}

/// Clusters at one version, in all and per group.
#[derive(Debug, Deserialize)]
pub struct VersionCount {
    pub version: String,
    pub clusters: u64,
    pub groups: BTreeMap<String, u64>,
}

/// `GET /api/v1/gate`.
#[derive(Debug, Deserialize)]
pub struct Gate {
    pub app: String,
    pub version: Option<String>,
    pub targeted_clusters: u64,
    pub in_sync: u64,
    pub by_state: ByState,
    pub share_in_sync: f64,
    pub threshold: f64,
    pub verdict: String,
    pub reason: String,
    pub soak_seconds: u64,
    pub soaked: u64,
    pub share_soaked: f64,
    pub failed: u64,
    pub stale_clusters: u64,
    pub holding_back: Vec<HoldingBack>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct HoldingBack {
    pub cluster: String,
    pub group: String,
    pub state: String,
    pub since: Option<String>,
    pub soaks_at: Option<String>,
}

/// `GET /api/v1/insights/failures`.
#[derive(Debug, Deserialize)]
pub struct Insights {
    pub failing: u64,
    pub in_sync: u64,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Deserialize)]
pub struct Finding {
    pub attribute: String,
    pub value: String,
    pub failing_with: u64,
    pub in_sync_with: u64,
    pub failure_rate_with: f64,
    pub failure_rate_without: f64,
    pub p_adjusted: f64,
    pub significant: bool,
}

/// `GET /api/v1/rollouts`.
#[derive(Debug, Deserialize)]
pub struct RolloutPage {
    pub items: Vec<Rollout>,
}

#[derive(Debug, Deserialize)]
pub struct Rollout {
    pub id: String,
    pub version: String,
    pub started_at: Option<String>,
    pub status: String,
    pub targeted: u64,
    pub in_sync: u64,
    pub failed: u64,
    pub stale: u64,
}

/// `GET /api/v1/rollouts/{rollout}`.
#[derive(Debug, Deserialize)]
pub struct RolloutDetail {
    pub rollout: Rollout,
    pub step_seconds: u64,
    pub curve: Vec<CurvePoint>,
    pub stragglers: Vec<Pair>,
}

#[derive(Debug, Deserialize)]
pub struct CurvePoint {
    pub at: Option<String>,
    pub in_sync: u64,
    pub failed: u64,
    pub waiting: u64,
}

/// `GET /api/v1/clusters/{id}`.
#[derive(Debug, Deserialize)]
pub struct Cluster {
    pub group: Option<String>,
    pub environment: Option<String>,
    pub reconciler: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub render_group: Option<String>,
    pub last_seen: Option<String>,
    pub stale: bool,
    pub agent_version: Option<String>,
    pub apps: Vec<Pair>,
    pub history: Vec<Transition>,
}

/// One change of an object a cluster reported.
#[derive(Debug, Deserialize)]
pub struct Transition {
    pub at: Option<String>,
    pub app: String,
    pub version: String,
    pub health: String,
    pub reason: String,
    pub message: String,
    pub deleted: bool,
}

/// `GET /api/v1/explain`. An app not desired on the cluster has only `app`, `desired`,
/// `explanation` and `state`.
#[derive(Debug, Deserialize)]
pub struct Explain {
    pub apps: Vec<ExplainedApp>,
}

#[derive(Debug, Deserialize)]
pub struct ExplainedApp {
    pub app: String,
    pub desired: bool,
    pub explanation: Option<String>,
    pub version: Option<String>,
    /// Absent for an app that is not desired there.
    #[serde(default)]
    pub reasons: Vec<String>,
    pub pinned_by: Option<String>,
    pub commit: Option<String>,
    pub desired_since: Option<String>,
}

/// `GET /api/v1/stale`.
#[derive(Debug, Deserialize)]
pub struct StalePage {
    pub total: u64,
    pub items: Vec<StaleCluster>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct StaleCluster {
    pub cluster: String,
    pub group: String,
    pub environment: String,
    pub last_seen: Option<String>,
    pub silent_seconds: Option<i64>,
}
