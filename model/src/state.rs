//! Desired items, observed items and heartbeats: what should run, what a cluster reports, and
//! when it last reported.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::app::ReconcilerKind;
use crate::ids::{AppName, ClusterId, Version};
use crate::string_enum::string_enum;
use crate::time::Timestamp;

string_enum!(
    /// The reconciler's verdict on what it applied, normalized across Flux and Argo CD.
    Health {
        /// Flux `Ready=True`; Argo CD health `Healthy`.
        Healthy = "healthy",
        /// Flux `Ready=Unknown` while reconciling; Argo CD `Progressing` or `Missing`.
        Progressing = "progressing",
        /// Flux `Ready=False`; Argo CD `Degraded` or a failed operation: the reconciler reports an error.
        Degraded = "degraded",
        /// Reconciliation switched off on purpose (`spec.suspend`, Argo CD `Suspended`).
        Suspended = "suspended",
        /// No usable status yet.
        Unknown = "unknown",
    }
);

string_enum!(
    /// Whether the live state matches what the reconciler was told to apply.
    SyncStatus {
        Synced = "synced",
        /// The reconciler reports live drift (Argo CD `OutOfSync`, Flux drift detection).
        OutOfSync = "out_of_sync",
        /// The reconciler does not say (most Flux objects).
        Unknown = "unknown",
    }
);

string_enum!(
    /// The kinds of reconciler object the collector reads.
    ObjectKind {
        Kustomization = "Kustomization",
        HelmRelease = "HelmRelease",
        GitRepository = "GitRepository",
        OciRepository = "OCIRepository",
        Application = "Application",
    }
);

impl ObjectKind {
    /// True for the kinds an application becomes (drift is about these); false for sources.
    pub fn is_app_object(self) -> bool {
        matches!(
            self,
            ObjectKind::Kustomization | ObjectKind::HelmRelease | ObjectKind::Application
        )
    }
}

/// Which reconciler object on a cluster an observation is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

/// One app as a render group should run it: the desired state the renderer writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredItem {
    pub render_group: String,
    pub app: AppName,
    pub version: Version,
    /// Hash of everything rendered for this app in this render group (see [`crate::stamps`]).
    pub content_hash: String,
    pub kind: ReconcilerKind,
    pub namespace: String,
    /// Why the app is desired here: the assignment policies that put it there, in precedence order.
    pub reasons: Vec<String>,
    pub render_id: u64,
    pub commit: String,
    /// When this version and content became desired (the render's time).
    pub desired_since: Timestamp,
}

/// What a cluster reports about one reconciler object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservedItem {
    pub cluster: ClusterId,
    pub object: ObjectRef,
    /// From the renderer's stamps; `None` for objects Fleetscope did not render (unmanaged).
    pub app: Option<AppName>,
    pub version: Option<Version>,
    pub content_hash: Option<String>,
    /// The source revision the reconciler last applied (Git commit, chart version, OCI digest).
    pub applied_revision: String,
    pub health: Health,
    pub sync: SyncStatus,
    pub reason: String,
    pub message: String,
    /// When the reconciler's status last changed (the reporter's clock).
    pub transitioned_at: Timestamp,
    /// When the reporter saw this state (the reporter's clock).
    pub observed_at: Timestamp,
    /// The change number: per cluster, a later change always has a larger number (`seq` in
    /// serialized form).
    #[serde(rename = "seq")]
    pub change_seq: u64,
    /// The object was deleted from the cluster.
    pub deleted: bool,
    /// For an unstamped app object: what the platform repo's match rules read (labels, target
    /// revision, images). Carried from the agent to the collector, which resolves the object's
    /// app and version from it; never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Box<ObjectFacts>>,
}

/// What an unstamped app object shows beyond its status, for the match rules: sent by the agent
/// with the object, never stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectFacts {
    /// `metadata.labels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Argo CD `spec.source.targetRevision` (or the first of `spec.sources`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_revision: String,
    /// Argo CD `status.summary.images`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
}

impl ObjectFacts {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.target_revision.is_empty() && self.images.is_empty()
    }
}

impl ObservedItem {
    /// Reconciler messages are cut to this many bytes (on a character boundary) before storage.
    pub const MAX_MESSAGE_BYTES: usize = 4096;

    /// A Kustomization, HelmRelease or Application without an app stamp: what the platform
    /// repo's match rules may give an app.
    pub fn is_unstamped_app_object(&self) -> bool {
        self.app.is_none() && self.object.kind.is_app_object()
    }
}

/// Cuts `text` to at most `max` bytes without splitting a character.
pub fn truncate_on_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A cluster's sign of life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub cluster: ClusterId,
    /// When the central collector received it (the collector's clock, so clock skew on the edge
    /// cannot make a cluster look fresh or stale).
    pub seen_at: Timestamp,
    pub agent_version: String,
    /// Reconciler name to version, for example `flux` → `v2.4.0`.
    pub reconciler_versions: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_through_text() {
        for health in Health::ALL {
            assert_eq!(Health::parse(health.as_str()), Some(*health));
        }
        for sync in SyncStatus::ALL {
            assert_eq!(SyncStatus::parse(sync.as_str()), Some(*sync));
        }
        for kind in ObjectKind::ALL {
            assert_eq!(ObjectKind::parse(kind.as_str()), Some(*kind));
        }
        assert_eq!(Health::parse("Healthy"), None, "the text form is lowercase");
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(truncate_on_char_boundary("héllo", 2), "h");
        assert_eq!(truncate_on_char_boundary("héllo", 3), "hé");
        assert_eq!(truncate_on_char_boundary("abc", 10), "abc");
    }
}
