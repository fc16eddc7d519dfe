//! What normalization produces: the [`NormalizedObject`], the same for every kind, the
//! [`NormalizeError`] for an object that cannot be named, and the [`ObservedItem`] the store
//! keeps.

use std::collections::BTreeMap;

use fleetscope_model::matching::ObjectFacts;
use fleetscope_model::{
    AppName, ClusterId, Health, ObjectRef, ObservedItem, SyncStatus, Timestamp, Version,
};

/// A reconciler object reduced to the fields Fleetscope uses, the same for every kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedObject {
    pub object: ObjectRef,
    pub api_version: String,
    /// The `fleetscope.io/app` label; `None` for unmanaged objects or an invalid label.
    pub app: Option<AppName>,
    /// The `fleetscope.io/version` annotation.
    pub version: Option<Version>,
    /// The `fleetscope.io/content-hash` annotation (`sha256:` and 64 hex digits).
    pub content_hash: Option<String>,
    /// The source revision the reconciler last applied (Git commit, chart version, OCI digest).
    pub applied_revision: String,
    /// The source revision the reconciler last tried, whether or not it succeeded.
    pub attempted_revision: String,
    pub health: Health,
    pub sync: SyncStatus,
    pub reason: String,
    /// Cut to [`ObservedItem::MAX_MESSAGE_BYTES`].
    pub message: String,
    /// When the deciding status last changed (the reporter's clock).
    pub transitioned_at: Option<Timestamp>,
    /// Argo CD `status.reconciledAt`.
    pub reconciled_at: Option<Timestamp>,
    /// Argo CD `status.operationState.phase`.
    pub operation_phase: Option<String>,
    /// Argo CD `status.summary.images`.
    pub images: Vec<String>,
    /// Argo CD multi-source revisions, in `spec.sources` order.
    pub revisions: Vec<String>,
    /// `metadata.labels` (at most [`MAX_LABELS`], each within the protocol's limits), for the
    /// match rules of objects without stamps.
    pub labels: BTreeMap<String, String>,
    /// Argo CD `spec.source.targetRevision`, or that of the first of `spec.sources`.
    pub target_revision: String,
    /// What was ignored or is worth knowing (an invalid stamp, an object being deleted).
    pub warnings: Vec<String>,
}

/// The most labels an object is reported with; further ones (in key order) are left out.
pub const MAX_LABELS: usize = 64;

/// The most images an object is reported with, for the match rules.
pub const MAX_IMAGES: usize = 32;

/// Why an object could not be normalized at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormalizeError {
    #[error("expected a kubernetes object (a json object), found {found}")]
    NotAnObject { found: String },
    #[error("object has no {field}")]
    Missing { field: &'static str },
    #[error("{field} must be {expected}, found {found}")]
    Invalid {
        field: &'static str,
        expected: &'static str,
        found: String,
    },
    #[error(
        "unsupported kind {kind:?} (apiVersion {api_version:?}): the collector reads Flux \
         Kustomization, HelmRelease, GitRepository and OCIRepository and Argo CD Application"
    )]
    Unsupported { api_version: String, kind: String },
}

impl NormalizedObject {
    /// Builds the observed item the store keeps. An unknown transition time becomes the epoch,
    /// so it never stretches a progress grace period (drift takes the later of it and the time
    /// the version became desired).
    pub fn into_observed(
        self,
        cluster: ClusterId,
        seq: u64,
        observed_at: Timestamp,
        deleted: bool,
    ) -> ObservedItem {
        // Facts go with an app object only when no stamp names its app: a stamped object is
        // its app's already, and sources are never an app's object.
        let facts = (self.app.is_none() && self.object.kind.is_app_object())
            .then(|| ObjectFacts {
                labels: self.labels,
                target_revision: self.target_revision,
                images: self.images.into_iter().take(MAX_IMAGES).collect(),
            })
            .filter(|facts| !facts.is_empty())
            .map(Box::new);
        ObservedItem {
            cluster,
            object: self.object,
            app: self.app,
            version: self.version,
            content_hash: self.content_hash,
            applied_revision: self.applied_revision,
            health: self.health,
            sync: self.sync,
            reason: self.reason,
            message: self.message,
            transitioned_at: self.transitioned_at.unwrap_or(Timestamp::EPOCH),
            observed_at,
            change_seq: seq,
            deleted,
            facts,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::normalize::normalize;
    use crate::normalize::test_objects::{condition, kustomization, HASH};

    #[test]
    fn into_observed_keeps_every_field() {
        let mut object = kustomization(json!({
            "conditions": [condition("Ready", "True", "ReconciliationSucceeded", "2024-07-16T12:00:00Z")],
            "lastAppliedRevision": "main@sha1:abc",
        }));
        object["metadata"]["labels"] = json!({"fleetscope.io/app": "payments"});
        object["metadata"]["annotations"] =
            json!({"fleetscope.io/version": "1.2.3", "fleetscope.io/content-hash": HASH});
        let normalized = normalize(&object).unwrap();
        let cluster = ClusterId::parse("eu-west-1.prod").unwrap();
        let item =
            normalized
                .clone()
                .into_observed(cluster.clone(), 7, Timestamp(1_800_000_000), false);
        assert_eq!(
            item,
            ObservedItem {
                cluster,
                object: normalized.object,
                app: Some(AppName::parse("payments").unwrap()),
                version: Some(Version::parse("1.2.3").unwrap()),
                content_hash: Some(HASH.to_owned()),
                applied_revision: "main@sha1:abc".to_owned(),
                health: Health::Healthy,
                sync: SyncStatus::Unknown,
                reason: "ReconciliationSucceeded".to_owned(),
                message: "Ready is True".to_owned(),
                transitioned_at: Timestamp(1_721_131_200),
                observed_at: Timestamp(1_800_000_000),
                change_seq: 7,
                deleted: false,
                facts: None,
            }
        );

        let item = normalize(&kustomization(json!({}))).unwrap().into_observed(
            ClusterId::parse("c1").unwrap(),
            1,
            Timestamp(5),
            true,
        );
        assert_eq!(item.transitioned_at, Timestamp::EPOCH);
        assert!(item.deleted);
    }
}
