//! Typed rows, one struct per table, in column order. `DateTime` columns are whole seconds
//! (`u32`), booleans are `UInt8`. Conversions from the domain model live here too, so callers
//! never build rows field by field.

use clickhouse::Row;
use fleetscope_model::{Cluster, DesiredItem, GroupPath, Heartbeat, ObservedItem};
use serde::{Deserialize, Serialize};

use crate::to_datetime;

#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ClusterRow {
    pub cluster_id: String,
    pub group_path: String,
    /// Every prefix of the group path, shortest first (`emea`, `emea/de`, `emea/de/berlin`),
    /// so rollups at every level are one `arrayJoin` away.
    pub group_prefixes: Vec<String>,
    pub environment: String,
    pub reconciler: String,
    pub label_keys: Vec<String>,
    pub label_values: Vec<String>,
    pub updated_at: u32,
    pub version: u64,
    pub removed: u8,
}

impl ClusterRow {
    /// `labels` are the cluster's effective labels; `version` orders updates (a render id).
    pub fn new(
        cluster: &Cluster,
        labels: &fleetscope_model::Labels,
        updated_at: fleetscope_model::Timestamp,
        version: u64,
    ) -> ClusterRow {
        ClusterRow {
            cluster_id: cluster.id.to_string(),
            group_path: cluster.group.to_string(),
            group_prefixes: prefixes(&cluster.group),
            environment: cluster.environment.to_string(),
            reconciler: cluster.reconciler.as_str().to_owned(),
            label_keys: labels.keys().cloned().collect(),
            label_values: labels.values().cloned().collect(),
            updated_at: to_datetime(updated_at),
            version,
            removed: 0,
        }
    }
}

pub(crate) fn prefixes(group: &GroupPath) -> Vec<String> {
    group.prefixes().into_iter().map(String::from).collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct HeartbeatRow {
    pub cluster_id: String,
    pub seen_at: u32,
    pub agent_version: String,
    pub reconciler_names: Vec<String>,
    pub reconciler_versions: Vec<String>,
}

impl From<&Heartbeat> for HeartbeatRow {
    fn from(heartbeat: &Heartbeat) -> HeartbeatRow {
        HeartbeatRow {
            cluster_id: heartbeat.cluster.to_string(),
            seen_at: to_datetime(heartbeat.seen_at),
            agent_version: heartbeat.agent_version.clone(),
            reconciler_names: heartbeat.reconciler_versions.keys().cloned().collect(),
            reconciler_versions: heartbeat.reconciler_versions.values().cloned().collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct RenderRow {
    pub render_id: u64,
    pub commit: String,
    pub platform_commit: String,
    pub rendered_at: u32,
    pub summary: String,
    pub render_groups: u32,
    pub clusters: u32,
    pub changed_items: u32,
}

/// How many rows of each checked table a render wrote (`render_contents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct RenderContentsRow {
    pub render_id: u64,
    pub desired: u32,
    pub members: u32,
}

/// The match rules a render published (`match_rules`): JSON of the model's `MatchRules`.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct MatchRulesRow {
    pub render_id: u64,
    pub digest: String,
    pub rules: String,
}

/// How many desired version change rows a render wrote (`render_change_counts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct RenderChangeCountRow {
    pub render_id: u64,
    pub version_changes: u32,
}

/// One (cluster, app) whose desired version a render changed (`desired_version_changes`):
/// `""` for "not desired" on either side.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Row, Serialize, Deserialize)]
pub struct DesiredVersionChangeRow {
    pub app: String,
    pub render_id: u64,
    pub cluster_id: String,
    pub from_version: String,
    pub to_version: String,
}

/// When a platform commit was made (`platform_commits`).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct PlatformCommitRow {
    pub platform_commit: String,
    /// Its committer time, seconds since the epoch.
    pub committed_at: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct DesiredRow {
    pub render_group: String,
    pub app: String,
    pub render_id: u64,
    pub version: String,
    pub content_hash: String,
    pub kind: String,
    pub namespace: String,
    pub reasons: Vec<String>,
    pub commit: String,
    pub desired_since: u32,
    pub removed: u8,
}

impl From<&DesiredItem> for DesiredRow {
    fn from(item: &DesiredItem) -> DesiredRow {
        DesiredRow {
            render_group: item.render_group.clone(),
            app: item.app.to_string(),
            render_id: item.render_id,
            version: item.version.to_string(),
            content_hash: item.content_hash.clone(),
            kind: item.kind.as_str().to_owned(),
            namespace: item.namespace.clone(),
            reasons: item.reasons.clone(),
            commit: item.commit.clone(),
            desired_since: to_datetime(item.desired_since),
            removed: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct MembershipRow {
    pub cluster_id: String,
    pub render_group: String,
    pub render_id: u64,
    pub removed: u8,
}

/// Why one app is desired on the clusters of one reason set.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ReasonSetRow {
    pub reason_set: String,
    pub app: String,
    pub render_id: u64,
    /// The policies that selected the app (lowest precedence first), or `dependency of <app>`.
    pub reasons: Vec<String>,
    /// The policy whose pin decided the version; empty when the version is the app's default.
    pub pinned_by: String,
    pub removed: u8,
}

/// When one app became desired for the clusters of one since set (see migration 6).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Row, Serialize, Deserialize)]
pub struct SinceSetRow {
    pub since_set: String,
    pub app: String,
    pub desired_since: u32,
}

/// The since set of a cluster's membership row of render `render_id`.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct MemberSinceRow {
    pub cluster_id: String,
    pub render_id: u64,
    pub since_set: String,
}

/// Which reason set a cluster has, by render.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ReasonMemberRow {
    pub cluster_id: String,
    pub reason_set: String,
    pub render_id: u64,
    pub removed: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ObservedRow {
    pub cluster_id: String,
    pub object_kind: String,
    pub object_namespace: String,
    pub object_name: String,
    pub app: String,
    pub version: String,
    pub content_hash: String,
    pub applied_revision: String,
    pub health: String,
    pub sync: String,
    pub reason: String,
    pub message: String,
    pub transitioned_at: u32,
    pub observed_at: u32,
    pub received_at: u32,
    /// The change number (column `seq`): per cluster, a later change has a larger one.
    #[serde(rename = "seq")]
    pub change_seq: u64,
    pub deleted: u8,
}

/// An [`ObservedRow`] whose text borrows from the buffer it was read from: a read of millions
/// of rows allocates nothing per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Row, Deserialize)]
pub struct ObservedRef<'a> {
    pub cluster_id: &'a str,
    pub object_kind: &'a str,
    pub object_namespace: &'a str,
    pub object_name: &'a str,
    pub app: &'a str,
    pub version: &'a str,
    pub content_hash: &'a str,
    pub applied_revision: &'a str,
    pub health: &'a str,
    pub sync: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    pub transitioned_at: u32,
    pub observed_at: u32,
    pub received_at: u32,
    /// The change number (column `seq`).
    #[serde(rename = "seq")]
    pub change_seq: u64,
    pub deleted: u8,
}

impl ObservedRow {
    /// The same row, borrowed.
    pub fn borrowed(&self) -> ObservedRef<'_> {
        ObservedRef {
            cluster_id: &self.cluster_id,
            object_kind: &self.object_kind,
            object_namespace: &self.object_namespace,
            object_name: &self.object_name,
            app: &self.app,
            version: &self.version,
            content_hash: &self.content_hash,
            applied_revision: &self.applied_revision,
            health: &self.health,
            sync: &self.sync,
            reason: &self.reason,
            message: &self.message,
            transitioned_at: self.transitioned_at,
            observed_at: self.observed_at,
            received_at: self.received_at,
            change_seq: self.change_seq,
            deleted: self.deleted,
        }
    }

    /// `received_at` is the collector's clock when the change arrived.
    pub fn new(item: &ObservedItem, received_at: fleetscope_model::Timestamp) -> ObservedRow {
        ObservedRow {
            cluster_id: item.cluster.to_string(),
            object_kind: item.object.kind.as_str().to_owned(),
            object_namespace: item.object.namespace.clone(),
            object_name: item.object.name.clone(),
            app: item
                .app
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            version: item
                .version
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            content_hash: item.content_hash.clone().unwrap_or_default(),
            applied_revision: item.applied_revision.clone(),
            health: item.health.as_str().to_owned(),
            sync: item.sync.as_str().to_owned(),
            reason: item.reason.clone(),
            message: fleetscope_model::state::truncate_on_char_boundary(
                &item.message,
                ObservedItem::MAX_MESSAGE_BYTES,
            )
            .to_owned(),
            transitioned_at: to_datetime(item.transitioned_at),
            observed_at: to_datetime(item.observed_at),
            received_at: to_datetime(received_at),
            change_seq: item.change_seq,
            deleted: u8::from(item.deleted),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct RollupSnapshotRow {
    pub taken_at: u32,
    /// `""` for the whole fleet.
    pub group_path: String,
    pub depth: u8,
    pub clusters: u64,
    pub stale_clusters: u64,
    pub in_sync: u64,
    pub progressing: u64,
    pub failed: u64,
    pub out_of_sync: u64,
    pub missing: u64,
    pub unexpected: u64,
    pub stale: u64,
    pub unknown: u64,
}

/// A rollout as the hub last saw it (`rollout_records`): moments in seconds since the epoch,
/// 0 for none; counts and milestones of the whole fleet.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Row, Serialize, Deserialize)]
pub struct RolloutRecordRow {
    pub app: String,
    pub render_id: u64,
    pub version: String,
    pub started_at: u32,
    pub platform_commit: String,
    pub committed_at: u32,
    pub status: String,
    /// The versions its clusters were moved from (`""`: not desired), with how many each.
    pub from_versions: Vec<String>,
    pub from_counts: Vec<u32>,
    pub targeted_at_start: u32,
    pub joined: u32,
    pub rolled_back: u32,
    pub superseded: u32,
    pub removed: u32,
    /// The first render that moved some of its clusters back, or on; 0 for none.
    pub rolled_back_by: u64,
    pub superseded_by: u64,
    pub superseded_before_complete: u8,
    pub targeted: u32,
    pub in_sync: u32,
    pub failed: u32,
    pub stale: u32,
    pub reached: u32,
    pub failed_before_reaching: u32,
    /// When 50, 90, 99 and 100 % of the clusters it targets had reached it.
    pub reached_50: u32,
    pub reached_90: u32,
    pub reached_99: u32,
    pub reached_100: u32,
    /// When it completed (its milestones fixed then).
    pub completed_at: u32,
    pub last_reached_at: u32,
    pub written_ms: u64,
}

/// An (app, cluster)'s rollout as the hub last saw it (`rollout_clusters`): render 0 and
/// version `""` when it belongs to none; moments 0 for none.
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct RolloutClusterRow {
    pub app: String,
    pub cluster_id: String,
    pub render_id: u64,
    pub version: String,
    pub reached_at: u32,
    pub failed_at: u32,
    pub written_ms: u64,
}

/// The tables rows are written to, by row type.
pub trait Table:
    clickhouse::RowOwned + clickhouse::RowWrite + Send + Sync + std::fmt::Debug + 'static
{
    const TABLE: &'static str;

    /// Stamps the row with its arrival time (seconds since the epoch), for writers that
    /// publish arrival horizons (migration 4, `arrival_writers`). Rows without an arrival time
    /// ignore it.
    fn stamp_arrival(&mut self, _at: u32) {}
}

/// One publication of a writer's arrival horizon (see migration 4, `arrival_writers`).
#[derive(Debug, Clone, PartialEq, Eq, Row, Serialize, Deserialize)]
pub struct ArrivalWriterRow {
    pub writer: String,
    pub first_stamp: u32,
    pub visible_before: u32,
}

impl Table for ClusterRow {
    const TABLE: &'static str = "clusters";
}
impl Table for HeartbeatRow {
    const TABLE: &'static str = "heartbeats";

    /// A heartbeat's `seen_at` is the collector's clock already; an arrival writer moves it to
    /// the stamp of the batch carrying it (within the writer's `max_delay` of its receipt).
    fn stamp_arrival(&mut self, at: u32) {
        self.seen_at = at;
    }
}
impl Table for RenderRow {
    const TABLE: &'static str = "renders";
}
impl Table for DesiredRow {
    const TABLE: &'static str = "desired_history";
}
impl Table for RenderContentsRow {
    const TABLE: &'static str = "render_contents";
}
impl Table for MatchRulesRow {
    const TABLE: &'static str = "match_rules";
}
impl Table for RolloutRecordRow {
    const TABLE: &'static str = "rollout_records";
}
impl Table for RolloutClusterRow {
    const TABLE: &'static str = "rollout_clusters";
}
impl Table for RenderChangeCountRow {
    const TABLE: &'static str = "render_change_counts";
}
impl Table for DesiredVersionChangeRow {
    const TABLE: &'static str = "desired_version_changes";
}
impl Table for PlatformCommitRow {
    const TABLE: &'static str = "platform_commits";
}
impl Table for MembershipRow {
    const TABLE: &'static str = "render_group_members";
}
impl Table for ReasonSetRow {
    const TABLE: &'static str = "reason_sets";
}
impl Table for SinceSetRow {
    const TABLE: &'static str = "since_sets";
}
impl Table for MemberSinceRow {
    const TABLE: &'static str = "member_since_sets";
}
impl Table for ReasonMemberRow {
    const TABLE: &'static str = "reason_set_members";
}
impl Table for ObservedRow {
    const TABLE: &'static str = "observed_transitions";

    fn stamp_arrival(&mut self, at: u32) {
        self.received_at = at;
    }
}
impl Table for ArrivalWriterRow {
    const TABLE: &'static str = "arrival_writers";
}
impl Table for RollupSnapshotRow {
    const TABLE: &'static str = "rollup_snapshots";
}
