//! The answers of `rollouts`, `rollouts/{rollout}` and `delivery`.

use serde::Serialize;
use utoipa::openapi::RefOr;
use utoipa::openapi::Schema;
use utoipa::{PartialSchema, ToSchema};

use fleetscope_engine::rollouts::progress::Status;

use super::{names_schema, PairItem};

/// The schema of a rollout's status.
#[derive(Debug)]
pub struct RolloutStatusName;

impl PartialSchema for RolloutStatusName {
    fn schema() -> RefOr<Schema> {
        names_schema(
            "Where a rollout stands; the rules are tried in this order (docs/hub.md, \"Rollouts\"): `rolled_back` a later render moved some of its clusters back to a version they were moved from; `superseded` before it completed, a later render moved some of its clusters on to another version, or took the app from all that were left; `complete` every cluster it targets has reached it (100 % passed); `stalled` no cluster has reached it for the hub's stall time (`--rollout-stall-after`, counted from its start while none has); `in_progress` otherwise.",
            Status::ALL.iter().map(|s| s.as_str()),
        )
    }
}

impl ToSchema for RolloutStatusName {
    fn name() -> std::borrow::Cow<'static, str> {
        "RolloutStatus".into()
    }
}

/// How many clusters a rollout moved from one version.
#[derive(Debug, Serialize, ToSchema)]
pub struct FromVersion {
    /// The version they desired before; null for clusters that did not desire the app.
    #[schema(example = "1.4.1")]
    pub version: Option<String>,
    /// How many clusters it moved from that version.
    pub clusters: u32,
}

/// One rollout: an app's move to one version by one render.
#[derive(Debug, Serialize, ToSchema)]
pub struct RolloutItem {
    /// `app@render@version`: the key of `GET /api/v1/rollouts/{rollout}`.
    #[schema(example = "checkout@1795338000000@1.5.0")]
    pub id: String,
    /// The app.
    #[schema(example = "checkout")]
    pub app: String,
    /// The version it moves clusters to.
    #[schema(example = "1.5.0")]
    pub version: String,
    /// The render that started it (its id is the renderer's clock in milliseconds).
    pub render_id: u64,
    /// When it started: the render's time.
    pub started_at: Option<String>,
    /// The platform repo commit the render was made from; null when the render did not
    /// record it.
    pub platform_commit: Option<String>,
    /// When that commit was made (its committer time); null when not recorded.
    pub committed_at: Option<String>,
    /// Its status now.
    #[schema(value_type = RolloutStatusName)]
    pub status: &'static str,
    /// The versions its clusters were moved from, with how many clusters each, at its start.
    pub from_versions: Vec<FromVersion>,
    /// Clusters the render moved (whole fleet).
    pub targeted_at_start: u32,
    /// Clusters that joined it since (whole fleet): newly desiring the app at its version.
    pub joined: u32,
    /// Clusters a later render moved back to a version they were moved from (whole fleet).
    pub rolled_back: u32,
    /// Clusters a later render moved on to another version (whole fleet).
    pub superseded: u32,
    /// Clusters that no longer desire the app (whole fleet).
    pub removed: u32,
    /// The first render that moved some of its clusters back; null when none did.
    pub rolled_back_by: Option<u64>,
    /// The first render that moved some of its clusters on; null when none did.
    pub superseded_by: Option<u64>,
    /// Its clusters now that the selection holds.
    pub targeted: u32,
    /// Of `targeted`, those whose pair is `in_sync` now.
    pub in_sync: u32,
    /// Of `targeted`, those whose pair is `failed` now.
    pub failed: u32,
    /// Of `targeted`, those whose pair is `stale` now (the cluster is not reporting).
    pub stale: u32,
    /// Of `targeted`, those that reached it (were in sync at its version once since it
    /// started).
    pub reached: u32,
    /// Clusters that failed at its version before reaching it: of `targeted` within a
    /// selection; for the whole fleet, those that left it since included.
    pub failed_before_reaching: u32,
    /// Seconds from its start until 50 % of the clusters it targets had reached it; null while
    /// not passed.
    pub seconds_to_50_percent: Option<u32>,
    /// The same for 90 %.
    pub seconds_to_90_percent: Option<u32>,
    /// The same for 99 %.
    pub seconds_to_99_percent: Option<u32>,
    /// The same for 100 %: when it completed.
    pub seconds_to_100_percent: Option<u32>,
    /// The last time a cluster reached it (whole fleet); null while none has.
    pub last_reached_at: Option<String>,
}

/// `GET /api/v1/rollouts`: one page.
#[derive(Debug, Serialize, ToSchema)]
pub struct RolloutsPage {
    /// At most `limit` rollouts, newest first (by start, then app and version).
    pub items: Vec<RolloutItem>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A rollout's clusters at one moment.
#[derive(Debug, Serialize, ToSchema)]
pub struct CurvePointItem {
    /// The moment.
    pub at: Option<String>,
    /// Seconds since the rollout's start.
    pub seconds: u32,
    /// Clusters that had reached it by then.
    pub in_sync: u32,
    /// Clusters that had failed at its version by then and not reached it yet.
    pub failed: u32,
    /// Clusters that had done neither yet.
    pub waiting: u32,
}

/// The curve of one group's clusters.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupCurve {
    /// The group path, cut at `depth` levels.
    #[schema(example = "emea")]
    pub group: String,
    /// The selected clusters of the group the rollout targets now.
    pub targeted: u32,
    /// Their curve, at the same moments as the whole curve.
    pub curve: Vec<CurvePointItem>,
}

/// `GET /api/v1/rollouts/{rollout}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RolloutAnswer<'a> {
    /// The rollout, as `rollouts` lists it.
    pub rollout: RolloutItem,
    /// Seconds between points of the curves.
    pub step_seconds: u32,
    /// The selected clusters it targets now, from its start to now (or to a little after it
    /// completed), every `step_seconds`, with a last point at the end.
    pub curve: Vec<CurvePointItem>,
    /// The same per group at `depth` levels, by group path.
    pub groups: Vec<GroupCurve>,
    /// Clusters it targets that are not in sync now, by cluster id, a page at a time.
    pub stragglers: Vec<PairItem<'a>>,
    /// Pass as `cursor` for the next page of stragglers; null on the last page.
    pub next_cursor: Option<String>,
}

/// A spread of durations in seconds, nearest-rank percentiles.
#[derive(Debug, Serialize, ToSchema)]
pub struct Spread {
    /// How many durations it is built on.
    pub count: u32,
    /// The median; null without durations.
    pub median_seconds: Option<u32>,
    /// The 90th percentile; null without durations.
    pub p90_seconds: Option<u32>,
}

/// One app's delivery figures over the window.
#[derive(Debug, Serialize, ToSchema)]
pub struct AppDelivery {
    /// The app.
    #[schema(example = "checkout")]
    pub app: String,
    /// Rollouts that completed in the window (deployment frequency).
    pub deployments: u32,
    /// `deployments` per day of the window.
    pub deployments_per_day: f64,
    /// From platform commit to 90 % of the targeted clusters reached, of the rollouts that
    /// passed 90 % in the window with a known commit time.
    pub lead_time: Spread,
    /// Rollouts started in the window.
    pub changes: u32,
    /// Of `changes`, those that count as failed changes: rolled back, or more of their
    /// clusters failed at the version before reaching it than the failure budget allows.
    pub failed_changes: u32,
    /// `failed_changes / changes`; null without changes.
    pub change_failure_rate: Option<f64>,
    /// From a cluster first failing at a rollout's version to reaching it, over the clusters of
    /// rollouts started in the window that did both.
    pub time_to_restore: Spread,
}

/// `GET /api/v1/delivery`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryAnswer {
    /// The start of the window.
    pub from: Option<String>,
    /// The end of the window: now.
    pub to: Option<String>,
    /// The hub's failure budget (`--rollout-failure-budget`), in percent of a rollout's
    /// clusters.
    pub failure_budget_percent: f64,
    /// Per app, by name: `app` alone, or every app with a rollout.
    pub apps: Vec<AppDelivery>,
}
