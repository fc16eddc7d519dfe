//! Every JSON answer of `/api/v1`, as a type. The handlers build these, serde writes them, and
//! the OpenAPI document's schemas are derived from the same definitions (field documentation
//! included), so the document cannot describe a field the hub does not send, or miss one.
//!
//! Times are RFC 3339 text in UTC (`2026-11-22T10:00:00Z`); a time the hub does not know (a
//! cluster never seen) is `null`. Strings that name things (clusters, groups, apps) are as the
//! platform repo and the agents spell them.

use std::collections::BTreeMap;

use fleetscope_model::state::{Health, SyncStatus};
use fleetscope_model::DriftState;
use serde::Serialize;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

mod gate;
mod insights;
mod rollouts;

pub use gate::{GateAnswer, GateVerdict, HoldingBack};
pub use insights::InsightsAnswer;
pub use rollouts::{
    AppDelivery, CurvePointItem, DeliveryAnswer, FromVersion, GroupCurve, RolloutAnswer,
    RolloutItem, RolloutStatusName, RolloutsPage, Spread,
};

/// A string schema listing the wire names of one of the model's enums; the names come from the
/// model itself, so the document lists exactly what the hub can send.
fn names_schema(description: &str, names: impl Iterator<Item = &'static str>) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::Type(Type::String))
        .enum_values(Some(names))
        .description(Some(description))
        .into()
}

/// The schema of a (cluster, app) pair's drift state (`model::drift::classify` decides it).
#[derive(Debug)]
pub struct DriftStateName;

impl PartialSchema for DriftStateName {
    fn schema() -> RefOr<Schema> {
        names_schema(
            "Where a (cluster, app) pair stands; the rules are tried in this order (docs/drift.md): `unknown` neither desired nor observed; `stale` the cluster has not reported within the stale threshold, or never has; `unexpected` observed, not desired; `missing` desired, not seen after the grace period; `failed` the reconciler reports an error; `out_of_sync` the cluster runs something other than desired after the grace period, or the reconciler reports live drift; `progressing` desired is newer than what runs, within the grace period; `in_sync` runs what is desired, healthy.",
            DriftState::ALL.iter().map(|s| s.as_str()),
        )
    }
}

impl ToSchema for DriftStateName {
    fn name() -> std::borrow::Cow<'static, str> {
        "DriftState".into()
    }
}

/// The schema of the reconciler's health, normalized across Flux and Argo CD.
#[derive(Debug)]
pub struct HealthName;

impl PartialSchema for HealthName {
    fn schema() -> RefOr<Schema> {
        names_schema(
            "The reconciler's verdict on what it applied: `healthy` (Flux `Ready=True`, Argo CD `Healthy`), `progressing` (reconciling), `degraded` (an error), `suspended` (reconciliation switched off), `unknown` (no usable status yet).",
            Health::ALL.iter().map(|s| s.as_str()),
        )
    }
}

impl ToSchema for HealthName {
    fn name() -> std::borrow::Cow<'static, str> {
        "Health".into()
    }
}

/// The schema of the reconciler's sync status.
#[derive(Debug)]
pub struct SyncName;

impl PartialSchema for SyncName {
    fn schema() -> RefOr<Schema> {
        names_schema(
            "Whether the live state matches what the reconciler was told to apply: `synced`, `out_of_sync` (live drift reported), `unknown` (the reconciler does not say; most Flux objects).",
            SyncStatus::ALL.iter().map(|s| s.as_str()),
        )
    }
}

impl ToSchema for SyncName {
    fn name() -> std::borrow::Cow<'static, str> {
        "SyncStatus".into()
    }
}

/// An error: every status other than 200 has this body.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"error": "limit: \"0\" is not a number from 1 to 1000", "parameter": "limit"}))]
pub struct ErrorBody {
    /// What went wrong, naming the bad value.
    pub error: String,
    /// On a 400: the parameter at fault (a path value is named like a parameter: `id`, `app`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
}

/// `GET /api/v1/summary`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SummaryAnswer<'a> {
    /// The moment the counts hold for: the hub's clock when the snapshot answering was taken.
    #[schema(example = "2026-11-22T10:00:00Z")]
    pub generated_at: Option<String>,
    /// The caller's group scope (from a scoped token); null for a fleet-wide token.
    #[schema(example = "emea/de")]
    pub scope: Option<&'a str>,
    /// The drift thresholds the hub classifies with.
    pub policy: PolicyAnswer,
    /// The whole selection: the caller's scope and `group`, `environment`, `label` and `app`.
    pub total: GroupCounts<'a>,
    /// Every group at every level down to `depth`, within the scope and `group`, by path.
    /// A group's counts are of its selected clusters, its subgroups' included.
    pub groups: Vec<GroupCounts<'a>>,
}

/// The thresholds of the drift rules, as the hub was started with them.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyAnswer {
    /// A cluster without a heartbeat for longer than this is stale (`--stale-after`).
    #[schema(example = 600)]
    pub stale_after_seconds: i64,
    /// How long a new desired state may take to arrive and settle before it counts as drift
    /// (`--grace`).
    #[schema(example = 900)]
    pub progress_grace_seconds: i64,
}

/// The counters of a group, or of the whole selection.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupCounts<'a> {
    /// The group's path; absent on `total`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "emea/de")]
    pub group: Option<&'a str>,
    /// The group's level: `emea` is 1, `emea/de` 2; absent on `total`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = 2)]
    pub depth: Option<usize>,
    /// Clusters in the inventory (registered by a render or by the collector).
    pub clusters: u64,
    /// Clusters that are not stale: the hub has had a heartbeat or report from them within the
    /// stale threshold (`policy.stale_after_seconds`). Always `clusters - stale_clusters`.
    pub reporting_clusters: u64,
    /// Clusters not heard from within the stale threshold, or never heard from.
    pub stale_clusters: u64,
    /// (cluster, app) pairs: every app desired on or observed on a selected cluster, once
    /// (with `app`, only that app's). The sum of `app_instances_by_state`.
    pub app_instances: u64,
    /// `app_instances` per drift state; every state is present, zero included.
    pub app_instances_by_state: ByState,
}

/// App instances per drift state: one property per state, in the order the rules try them.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct ByState {
    /// Neither desired nor observed.
    pub unknown: u64,
    /// On clusters not heard from within the stale threshold.
    pub stale: u64,
    /// Observed, not desired.
    pub unexpected: u64,
    /// Desired, not seen after the grace period.
    pub missing: u64,
    /// The reconciler reports an error.
    pub failed: u64,
    /// Running something other than desired after the grace period, or live drift.
    pub out_of_sync: u64,
    /// Desired is newer than what runs, within the grace period.
    pub progressing: u64,
    /// Running what is desired, healthy.
    pub in_sync: u64,
}

impl From<[u64; 8]> for ByState {
    /// From counts in `DriftState::ALL` order (a test holds the two orders equal).
    fn from(c: [u64; 8]) -> ByState {
        ByState {
            unknown: c[0],
            stale: c[1],
            unexpected: c[2],
            missing: c[3],
            failed: c[4],
            out_of_sync: c[5],
            progressing: c[6],
            in_sync: c[7],
        }
    }
}

/// One (cluster, app) pair: what should run against what runs, and the verdict.
#[derive(Debug, Serialize, ToSchema)]
pub struct PairItem<'a> {
    /// The cluster id.
    #[schema(example = "berlin-01")]
    pub cluster: &'a str,
    /// The cluster's group path; null only for a cluster missing from the inventory.
    #[schema(example = "emea/de/berlin")]
    pub group: Option<&'a str>,
    /// The cluster's environment; null only for a cluster missing from the inventory.
    #[schema(example = "prod")]
    pub environment: Option<&'a str>,
    /// The app.
    #[schema(example = "checkout")]
    pub app: &'a str,
    /// The pair's drift state.
    #[schema(value_type = DriftStateName)]
    pub state: &'static str,
    /// Since when the pair has been as it is: the reconciler's last status change when
    /// observed, else when the desired state arrived; null when neither is known.
    pub since: Option<String>,
    /// Null when the app is not desired on the cluster.
    #[schema(example = "1.4.2")]
    pub desired_version: Option<&'a str>,
    /// The renderer's hash of everything rendered for the app in the cluster's render group.
    pub desired_content_hash: Option<&'a str>,
    /// When the desired version and content became desired on this cluster: the time of the
    /// render that last changed them for it, in whichever render group (moving to another
    /// render group with the same version and content keeps the time); null when not desired.
    pub desired_since: Option<String>,
    /// The version the renderer's stamp on the running object names; null when the app is not
    /// observed on the cluster.
    #[schema(example = "1.4.1")]
    pub observed_version: Option<&'a str>,
    /// The content hash stamped on the running object.
    pub observed_content_hash: Option<&'a str>,
    /// The source revision the reconciler last applied (Git commit, chart version, OCI digest).
    pub revision: Option<&'a str>,
    /// The reconciler's health of the running object; null when not observed.
    #[schema(value_type = Option<HealthName>)]
    pub health: Option<&'static str>,
    /// The reconciler's sync status of the running object; null when not observed.
    #[schema(value_type = Option<SyncName>)]
    pub sync: Option<&'static str>,
    /// The reconciler's reason for its last status (`ReconciliationSucceeded`, …).
    pub reason: Option<&'a str>,
    /// The reconciler's message.
    pub message: Option<&'a str>,
    /// The cluster's last heartbeat or report; null when never seen.
    pub last_seen: Option<String>,
}

/// `GET /api/v1/drift`: one page.
#[derive(Debug, Serialize, ToSchema)]
pub struct DriftPage<'a> {
    /// At most `limit` pairs, by cluster id, then app.
    pub items: Vec<PairItem<'a>>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// `GET /api/v1/clusters/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterPage<'a> {
    /// The cluster id.
    pub cluster: &'a str,
    /// The cluster's group path.
    pub group: &'a str,
    /// The cluster's environment.
    pub environment: &'a str,
    /// `flux` or `argocd`, as the cluster is registered.
    #[schema(example = "flux")]
    pub reconciler: &'a str,
    /// The cluster's labels, key to value.
    pub labels: BTreeMap<String, String>,
    /// The render group the cluster's desired state comes from; null when it has none (not
    /// rendered, or registered by the collector only).
    pub render_group: Option<&'a str>,
    /// The last heartbeat or report; null when never seen.
    pub last_seen: Option<String>,
    /// Not heard from within the stale threshold (or never).
    pub stale: bool,
    /// The agent's version from its last heartbeat; null when unknown.
    pub agent_version: Option<&'a str>,
    /// Every app desired on or observed on the cluster, by app name.
    pub apps: Vec<PairItem<'a>>,
    /// The newest 200 transitions of the cluster's reconciler objects within `history_hours`,
    /// newest first; empty with `history_hours=0`.
    pub history: Vec<ObjectTransition>,
}

/// One stored transition of a reconciler object on a cluster.
#[derive(Debug, Serialize, ToSchema)]
pub struct ObjectTransition {
    /// When the reporter saw this state.
    pub at: Option<String>,
    /// `Kustomization`, `HelmRelease`, `GitRepository`, `OCIRepository` or `Application`.
    pub kind: String,
    /// The object's namespace on the cluster.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The app from the renderer's stamp; empty for objects Fleetscope did not render.
    pub app: String,
    /// The version from the renderer's stamp; empty when unstamped.
    pub version: String,
    /// The source revision the reconciler had applied.
    pub revision: String,
    /// The reconciler's health at that moment.
    #[schema(value_type = HealthName)]
    pub health: String,
    /// The reconciler's sync status at that moment.
    #[schema(value_type = SyncName)]
    pub sync: String,
    /// The reconciler's reason.
    pub reason: String,
    /// The reconciler's message.
    pub message: String,
    /// The object was gone from the cluster from this moment.
    pub deleted: bool,
}

/// `GET /api/v1/apps/{app}/versions`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionsAnswer<'a> {
    /// The app, as in the path.
    pub app: String,
    /// One entry per desired version, by version.
    pub desired: Vec<VersionCount>,
    /// One entry per running version, by version.
    pub running: Vec<VersionCount>,
    /// With `version`: at most `limit` clusters running it, by cluster id; otherwise empty.
    pub clusters: Vec<PairItem<'a>>,
    /// With `version`, while more clusters follow: pass as `cursor` for the next page;
    /// otherwise null.
    pub next_cursor: Option<String>,
}

/// How many selected clusters have one version (desired or running, by the list it is in).
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionCount {
    /// The version.
    #[schema(example = "1.4.2")]
    pub version: String,
    /// Clusters the version is desired on (in `desired`) or runs on (in `running`).
    pub clusters: u64,
    /// Those clusters per group at `depth` (the group path cut to its first `depth` levels):
    /// group path to count; the counts add up to `clusters`.
    #[schema(example = json!({"emea": 120, "amer": 80}))]
    pub groups: BTreeMap<String, u64>,
}

/// `GET /api/v1/stale`: one page.
#[derive(Debug, Serialize, ToSchema)]
pub struct StalePage<'a> {
    /// Stale clusters in the selection, the same on every page.
    pub total: usize,
    /// At most `limit` clusters: never seen first, then by last seen (oldest first), then by id.
    pub items: Vec<StaleItem<'a>>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A cluster not heard from within the stale threshold.
#[derive(Debug, Serialize, ToSchema)]
pub struct StaleItem<'a> {
    /// The cluster id.
    pub cluster: &'a str,
    /// The cluster's group path.
    pub group: &'a str,
    /// The cluster's environment.
    pub environment: &'a str,
    /// The last heartbeat or report; null when never seen.
    pub last_seen: Option<String>,
    /// Seconds since `last_seen`; null when never seen.
    pub silent_seconds: Option<i64>,
}

/// `GET /api/v1/explain`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExplainAnswer<'a> {
    /// The cluster id, as asked.
    pub cluster: String,
    /// The cluster's group path.
    pub group: &'a str,
    /// Null when the cluster belongs to no render group (not rendered, or registered by the
    /// collector only).
    pub render_group: Option<&'a str>,
    /// Every app the cluster has, desired or running, by app name; with `app`, only that app
    /// (an entry with `desired: false` and an `explanation` when the cluster neither should nor
    /// does run it).
    pub apps: Vec<Explained<'a>>,
}

/// Why one app is, or is not, on a cluster: told apart by `desired`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Explained<'a> {
    Desired(DesiredApp<'a>),
    NotDesired(NotDesiredApp),
}

/// An app desired on the cluster, and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct DesiredApp<'a> {
    /// The app.
    pub app: &'a str,
    /// Always true here.
    #[schema(value_type = bool, example = true)]
    pub desired: bool,
    /// The desired version.
    pub version: &'a str,
    /// Why, as `fleetscope render explain` says it (`policy/<name>` or `dependency of <app>`),
    /// in its order.
    #[schema(example = json!(["policy/emea-prod"]))]
    pub reasons: &'a [String],
    /// The policy (name without `policy/`) whose pin decided the version; null for the app's
    /// default version.
    pub pinned_by: Option<&'a str>,
    /// The cluster's render group.
    pub render_group: Option<&'a str>,
    /// The GitOps commit that last changed this app's desired state.
    pub commit: &'a str,
    /// The render that published it.
    pub render_id: u64,
    /// When this version and content became desired on this cluster: the time of the render
    /// that last changed them for it, in whichever render group (moving to another render
    /// group with the same version and content keeps the time).
    pub desired_since: Option<String>,
    /// The pair's drift state.
    #[schema(value_type = DriftStateName)]
    pub state: &'static str,
}

/// An app the cluster runs without it being desired there, or (asked with `app`) neither runs
/// nor should run.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotDesiredApp {
    /// The app.
    pub app: String,
    /// Always false here.
    #[schema(value_type = bool, example = false)]
    pub desired: bool,
    /// Why not, in words.
    pub explanation: String,
    /// The pair's drift state; absent when the cluster does not run the app either.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DriftStateName>)]
    pub state: Option<&'static str>,
}

/// `GET /api/v1/environments`.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentsAnswer<'a> {
    /// One entry per app, by app name.
    pub apps: Vec<AppEnvironments<'a>>,
}

/// One app across environments.
#[derive(Debug, Serialize, ToSchema)]
pub struct AppEnvironments<'a> {
    /// The app.
    pub app: &'a str,
    /// One entry per environment the app is desired or runs in, by name.
    pub environments: Vec<EnvironmentVersions<'a>>,
}

/// An app's versions in one environment.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentVersions<'a> {
    /// The environment.
    pub environment: &'a str,
    /// Desired version to the number of selected clusters it is desired on.
    #[schema(example = json!({"1.4.2": 310}))]
    pub desired: &'a BTreeMap<String, u64>,
    /// Running version to the number of selected clusters it runs on.
    #[schema(example = json!({"1.4.1": 12, "1.4.2": 298}))]
    pub running: &'a BTreeMap<String, u64>,
}

/// `GET /api/v1/history?cluster=`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterHistory {
    /// The cluster id, as asked.
    pub cluster: String,
    /// The cluster's render group, whose desired-state changes are listed; null when it has none.
    pub render_group: Option<String>,
    /// The start of the range read.
    pub from: Option<String>,
    /// The end of the range read (exclusive).
    pub to: Option<String>,
    /// At most `limit` events, newest first: `observed` and `desired`.
    pub events: Vec<HistoryEvent>,
    /// More events lie in the range than were listed.
    pub truncated: bool,
}

/// `GET /api/v1/history` without `cluster`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupHistory {
    /// The group read: the narrower of the caller's scope and `group` (`group` itself when the
    /// two do not overlap, and then nothing is read); null for the fleet.
    pub group: Option<String>,
    /// Only this app's objects; null for every app.
    pub app: Option<String>,
    /// The start of the range read.
    pub from: Option<String>,
    /// The end of the range read (exclusive).
    pub to: Option<String>,
    /// At most `limit` events, newest first: `observed` and (for unscoped tokens) `render`.
    pub events: Vec<HistoryEvent>,
    /// More events lie in the range than were listed.
    pub truncated: bool,
}

/// One event of a history, told apart by `type`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum HistoryEvent {
    /// A reconciler object's state as a cluster reported it.
    Observed {
        /// When the reporter saw this state.
        at: Option<String>,
        /// The cluster; present in the group history only.
        #[serde(skip_serializing_if = "Option::is_none")]
        cluster: Option<String>,
        /// The app from the renderer's stamp; empty for objects Fleetscope did not render.
        app: String,
        /// The reconciler object's kind.
        kind: String,
        /// The object's name.
        name: String,
        /// The version from the renderer's stamp.
        version: String,
        /// The source revision the reconciler had applied.
        revision: String,
        /// The reconciler's health at that moment.
        #[schema(value_type = HealthName)]
        health: String,
        /// The reconciler's sync status at that moment.
        #[schema(value_type = SyncName)]
        sync: String,
        /// The reconciler's reason.
        reason: String,
        /// The reconciler's message.
        message: String,
        /// The object was gone from the cluster from this moment.
        deleted: bool,
    },
    /// A change of the render group's desired state for an app.
    Desired {
        /// When the change became desired (the render's time).
        at: Option<String>,
        /// The app.
        app: String,
        /// The desired version from then on.
        version: String,
        /// The render group.
        render_group: String,
        /// The GitOps commit of the change.
        commit: String,
        /// The render that published it.
        render_id: u64,
        /// Why the app is desired in the render group (every cluster's reasons together).
        reasons: Vec<String>,
        /// The app stopped being desired in the render group.
        removed: bool,
    },
    /// A render that was published.
    Render {
        /// When the render was published.
        at: Option<String>,
        /// The GitOps commit.
        commit: String,
        /// The render's number (renders are numbered in order).
        render_id: u64,
        /// The render's summary.
        message: String,
        /// Render groups in the render.
        render_groups: u32,
        /// Clusters in the render.
        clusters: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_state_names_every_state_in_the_order_of_the_rules() {
        let value = serde_json::to_value(ByState::from([0, 1, 2, 3, 4, 5, 6, 7])).unwrap();
        let names: Vec<&str> = value
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        let expected: Vec<&str> = DriftState::ALL.iter().map(|s| s.as_str()).collect();
        let mut sorted = expected.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "every state, nothing else");
        for (i, state) in DriftState::ALL.iter().enumerate() {
            assert_eq!(value[state.as_str()], i as u64, "{state:?}");
        }
    }
}
