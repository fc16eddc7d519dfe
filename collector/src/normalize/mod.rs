//! Normalization of reconciler objects: a Flux or Argo CD object, as JSON (the way kube-rs's
//! `DynamicObject` hands it over), becomes one [`NormalizedObject`] with the same fields for every
//! kind, and then the [`ObservedItem`] the store keeps.
//!
//! [`normalize`] fails only when the object cannot be named: it is not a JSON object, it lacks
//! `apiVersion`, `kind` or `metadata.name`, or it is a kind the collector does not read (its
//! [`NormalizeError`] names the kind and apiVersion). Anything else that is odd (a stamp that does
//! not validate, a field of the wrong type, a time that does not parse, an object being deleted)
//! is kept out of the result and reported in [`NormalizedObject::warnings`].
//!
//! # Kinds
//!
//! The kind comes from `kind` and the group of `apiVersion`; every version of a group is read
//! with the same rules, and a field a version does not have is simply absent.
//!
//! | apiVersion group | kind | [`ObjectKind`] |
//! |---|---|---|
//! | `kustomize.toolkit.fluxcd.io` | `Kustomization` | `Kustomization` |
//! | `helm.toolkit.fluxcd.io` | `HelmRelease` | `HelmRelease` |
//! | `source.toolkit.fluxcd.io` | `GitRepository` | `GitRepository` |
//! | `source.toolkit.fluxcd.io` | `OCIRepository` | `OciRepository` |
//! | `argoproj.io` | `Application` | `Application` |
//!
//! Anything else, `ApplicationSet` included, is [`NormalizeError::Unsupported`]. The object is
//! named by `metadata.namespace` (empty when absent, as for the cluster-scoped case) and
//! `metadata.name`.
//!
//! # Stamps
//!
//! The renderer's stamps ([`fleetscope_model::stamps`]) tie an object to its app: the label
//! `fleetscope.io/app` gives [`NormalizedObject::app`], the annotations `fleetscope.io/version`
//! and `fleetscope.io/content-hash` give `version` and `content_hash`. An object without them is
//! unmanaged (`app` is `None`) and is normalized all the same. Each stamp is validated on its own
//! ([`AppName::parse`], [`Version::parse`], [`validate_content_hash`]); one that fails is left
//! out with a warning quoting it, never an error.
//!
//! # Flux: Kustomization, HelmRelease, GitRepository, OCIRepository
//!
//! Health, in order:
//!
//! | status | health | reason, message and time from |
//! |---|---|---|
//! | `spec.suspend: true` | `Suspended` | reason `Suspended`; message and time as the conditions below give them |
//! | `Ready=True` | `Healthy` (`Progressing`, reason `NewGeneration`, while `status.observedGeneration` is below `metadata.generation`) | `Ready` |
//! | `Ready=False` | `Degraded` | `Ready` |
//! | `Ready` neither `True` nor `False` (`Unknown`), and `Stalled=True` | `Degraded` | `Stalled` |
//! | `Ready=Unknown` | `Progressing` | `Ready` |
//! | `Ready` with another status | `Unknown` (and a warning) | `Ready` |
//! | no `Ready`, `Stalled=True` | `Degraded` | `Stalled` |
//! | no `Ready`, `Reconciling=True` | `Progressing` | `Reconciling` |
//! | no `Ready`, otherwise (also `conditions: []`, no status) | `Unknown` | nothing: empty, no time |
//!
//! The time is the deciding condition's `lastTransitionTime`. Sync is always `Unknown`: no field
//! in the status schemas of the Flux CRDs (current and legacy versions) states live drift, so
//! Fleetscope's drift rules decide from versions and health alone.
//!
//! Revisions, kept exactly as the object writes them (legacy `main/<sha>` included):
//!
//! | kind | applied | attempted |
//! |---|---|---|
//! | Kustomization | `status.lastAppliedRevision` | `status.lastAttemptedRevision` |
//! | HelmRelease | `chartVersion` of the `status.history` snapshot with status `deployed`; else `status.lastAppliedRevision` | `status.lastAttemptedRevision` |
//! | GitRepository, OCIRepository | `status.artifact.revision` | empty (sources record none) |
//!
//! HelmRelease details, where the objects led:
//!
//! - History is documented as newest first, but Flux's own test objects (`flux debug hr`) list it
//!   oldest first, so the deployed snapshot with the highest release number (`version`) wins and
//!   position only breaks ties.
//! - `status.lastAppliedRevision` is the v2beta1/v2beta2 field, but v2 objects still carrying it
//!   exist (stale test data in Flux's `trace` tests): it is used for any version without a
//!   deployed history snapshot.
//! - The digests are not appended: for an OCI chart `chartVersion` already ends in `+` and the
//!   first 12 digits of the OCI digest, the same form `status.lastAttemptedRevision` has, so
//!   applied and attempted compare as they are. A snapshot's `digest` is the checksum of Helm's
//!   storage object and `configDigest` that of the values: neither is a source revision.
//!
//! # Argo CD: Application
//!
//! | `status.health.status` | health |
//! |---|---|
//! | `Healthy` | `Healthy` |
//! | `Progressing`, `Missing` | `Progressing` |
//! | `Degraded` | `Degraded` |
//! | `Suspended` | `Suspended` |
//! | `Unknown`, absent | `Unknown` (another text: `Unknown` and a warning) |
//!
//! An `operationState.phase` of `Failed` or `Error` makes the health `Degraded` whatever the health
//! block says, with the phase as reason and the operation's message. Otherwise the reason is the
//! health status text and the message the first non-empty of `status.conditions[].message`,
//! `operationState.message` and `status.health.message`.
//!
//! Sync is `status.sync.status`: `Synced`, `OutOfSync`, anything else `Unknown`.
//!
//! The applied revision is `status.sync.revision`, or for a multi-source Application its
//! `status.sync.revisions` joined with `", "` (the list also goes to `revisions`). When the status
//! has neither but the last operation `Succeeded`, its `syncResult.revision(s)` stand in: Argo CD's
//! own test objects have an operation result and no sync block. The attempted revision is the last
//! operation's `syncResult.revision(s)` (resolved commits; the requested `operation.sync.revision`
//! may be a symbolic `HEAD` and is not used).
//!
//! The transition time is the first that parses of `status.health.lastTransitionTime`,
//! `operationState.finishedAt`, `operationState.startedAt` and `status.reconciledAt`;
//! `reconciled_at`, `operation_phase` and `images` come from `status.reconciledAt`,
//! `operationState.phase` and `status.summary.images`.
//!
//! # Every kind
//!
//! - Times are RFC 3339 with an offset, stored as whole seconds (a fraction is dropped).
//! - Messages are cut to [`ObservedItem::MAX_MESSAGE_BYTES`] on a character boundary.
//! - `metadata.deletionTimestamp` does not change health (the reconciler's status is still what it
//!   is while finalizers run); it adds a warning.
//!
//! [`AppName::parse`]: fleetscope_model::AppName::parse
//! [`Version::parse`]: fleetscope_model::Version::parse
//! [`validate_content_hash`]: fleetscope_model::stamps::validate_content_hash

mod argo;
mod fields;
mod flux;
mod object;
mod stamps;
#[cfg(test)]
mod test_objects;

pub use object::{NormalizeError, NormalizedObject, MAX_IMAGES, MAX_LABELS};

use std::collections::BTreeMap;

use fleetscope_model::state::{truncate_on_char_boundary, ObjectKind};
use fleetscope_model::{Health, ObjectRef, ObservedItem, SyncStatus};
use serde_json::Value;

use fields::{describe, Node, Reader};

/// Normalizes one Flux or Argo CD object. See the module documentation for the rules.
pub fn normalize(object: &Value) -> Result<NormalizedObject, NormalizeError> {
    let Value::Object(map) = object else {
        return Err(NormalizeError::NotAnObject {
            found: describe(object),
        });
    };
    let api_version = required_string(map.get("apiVersion"), "apiVersion")?;
    let kind_text = required_string(map.get("kind"), "kind")?;
    let kind = object_kind(api_version, kind_text).ok_or_else(|| NormalizeError::Unsupported {
        api_version: api_version.to_owned(),
        kind: kind_text.to_owned(),
    })?;
    let metadata = match map.get("metadata") {
        None | Some(Value::Null) => {
            return Err(NormalizeError::Missing {
                field: "metadata.name",
            })
        }
        Some(Value::Object(metadata)) => metadata,
        Some(other) => {
            return Err(NormalizeError::Invalid {
                field: "metadata",
                expected: "an object",
                found: describe(other),
            })
        }
    };
    let name = required_string(metadata.get("name"), "metadata.name")?;

    let mut reader = Reader::default();
    let root = Node::root(object);
    let namespace = reader.at(&root, &["metadata", "namespace"]);
    let namespace = reader.string(&namespace);
    let stamps = stamps::read(&mut reader, &root);

    let deletion = reader.at(&root, &["metadata", "deletionTimestamp"]);
    if let Some(at) = reader.str(&deletion) {
        reader.warn(format!(
            "metadata.deletionTimestamp is set ({at}): the object is being deleted; health is as \
             the status reports it"
        ));
    }

    let mut normalized = NormalizedObject {
        object: ObjectRef {
            kind,
            namespace,
            name: name.to_owned(),
        },
        api_version: api_version.to_owned(),
        app: stamps.app,
        version: stamps.version,
        content_hash: stamps.content_hash,
        applied_revision: String::new(),
        attempted_revision: String::new(),
        health: Health::Unknown,
        sync: SyncStatus::Unknown,
        reason: String::new(),
        message: String::new(),
        transitioned_at: None,
        reconciled_at: None,
        operation_phase: None,
        images: Vec::new(),
        revisions: Vec::new(),
        labels: labels(&mut reader, metadata),
        target_revision: String::new(),
        warnings: Vec::new(),
    };
    if kind == ObjectKind::Application {
        let status = argo::read(&mut reader, &root);
        normalized.health = status.health;
        normalized.sync = status.sync;
        normalized.reason = status.reason;
        normalized.message = status.message;
        normalized.transitioned_at = status.transitioned_at;
        normalized.reconciled_at = status.reconciled_at;
        normalized.operation_phase = status.operation_phase;
        normalized.applied_revision = status.applied_revision;
        normalized.attempted_revision = status.attempted_revision;
        normalized.revisions = status.revisions;
        normalized.images = status.images;
        normalized.target_revision = argo::target_revision(&mut reader, &root);
    } else {
        let status = flux::read(&mut reader, &root, kind);
        normalized.health = status.health;
        normalized.reason = status.reason;
        normalized.message = status.message;
        normalized.transitioned_at = status.transitioned_at;
        normalized.applied_revision = status.applied_revision;
        normalized.attempted_revision = status.attempted_revision;
    }
    normalized.message =
        truncate_on_char_boundary(&normalized.message, ObservedItem::MAX_MESSAGE_BYTES).to_owned();
    normalized.warnings = reader.into_warnings();
    Ok(normalized)
}

/// The object's labels that fit the protocol's limits, at most [`MAX_LABELS`] of them.
fn labels(
    reader: &mut Reader,
    metadata: &serde_json::Map<String, Value>,
) -> BTreeMap<String, String> {
    let Some(Value::Object(labels)) = metadata.get("labels") else {
        return BTreeMap::new();
    };
    let mut kept = BTreeMap::new();
    let mut left_out = 0;
    for (key, value) in labels {
        let Value::String(value) = value else {
            continue;
        };
        if kept.len() < MAX_LABELS && key.len() <= 317 && value.len() <= 63 {
            kept.insert(key.clone(), value.clone());
        } else {
            left_out += 1;
        }
    }
    if left_out > 0 {
        reader.warn(format!(
            "{left_out} label(s) left out: at most {} are reported, keys of at most 317 and values of at most 63 characters",
            MAX_LABELS
        ));
    }
    kept
}

/// The kind for an apiVersion (its group) and kind, if the collector reads it.
fn object_kind(api_version: &str, kind: &str) -> Option<ObjectKind> {
    let group = api_version.split_once('/').map(|(group, _)| group)?;
    match (group, kind) {
        ("kustomize.toolkit.fluxcd.io", "Kustomization") => Some(ObjectKind::Kustomization),
        ("helm.toolkit.fluxcd.io", "HelmRelease") => Some(ObjectKind::HelmRelease),
        ("source.toolkit.fluxcd.io", "GitRepository") => Some(ObjectKind::GitRepository),
        ("source.toolkit.fluxcd.io", "OCIRepository") => Some(ObjectKind::OciRepository),
        ("argoproj.io", "Application") => Some(ObjectKind::Application),
        _ => None,
    }
}

fn required_string<'a>(
    value: Option<&'a Value>,
    field: &'static str,
) -> Result<&'a str, NormalizeError> {
    match value {
        None | Some(Value::Null) => Err(NormalizeError::Missing { field }),
        Some(Value::String(text)) if !text.is_empty() => Ok(text),
        Some(other) => Err(NormalizeError::Invalid {
            field,
            expected: "a non-empty string",
            found: describe(other),
        }),
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;
    use serde_json::json;

    use super::test_objects::{application, kustomization};
    use super::*;

    fn error(object: Value) -> String {
        normalize(&object).unwrap_err().to_string()
    }

    #[test]
    fn objects_that_cannot_be_named_are_errors() {
        expect![[
            r#"expected a kubernetes object (a json object), found [{"kind":"Kustomization"}]"#
        ]]
        .assert_eq(&error(json!([{"kind": "Kustomization"}])));
        expect!["object has no apiVersion"].assert_eq(&error(json!({"kind": "Kustomization"})));
        expect![[r#"kind must be a non-empty string, found 7"#]].assert_eq(&error(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": 7}),
        ));
        expect!["object has no metadata.name"].assert_eq(&error(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "status": {"health": {"status": "Healthy"}},
        })));
        expect!["object has no metadata.name"].assert_eq(&error(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"namespace": "argocd"},
        })));
        expect![[r#"metadata.name must be a non-empty string, found """#]].assert_eq(&error(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": ""}}),
        ));
        expect![[r#"metadata must be an object, found "podinfo""#]].assert_eq(&error(
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": "podinfo"}),
        ));
    }

    #[test]
    fn unknown_kinds_are_named() {
        expect![[r#"unsupported kind "ApplicationSet" (apiVersion "argoproj.io/v1alpha1"): the collector reads Flux Kustomization, HelmRelease, GitRepository and OCIRepository and Argo CD Application"#]]
            .assert_eq(&error(json!({
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "ApplicationSet",
                "metadata": {"name": "fleet"},
            })));
        // The kind alone is not enough: kustomize's own Kustomization is another object.
        let err = normalize(&json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "metadata": {"name": "base"},
        }))
        .unwrap_err();
        assert_eq!(
            err,
            NormalizeError::Unsupported {
                api_version: "kustomize.config.k8s.io/v1beta1".to_owned(),
                kind: "Kustomization".to_owned(),
            }
        );
        let err = normalize(
            &json!({"apiVersion": "v1", "kind": "Application", "metadata": {"name": "x"}}),
        )
        .unwrap_err();
        assert!(matches!(err, NormalizeError::Unsupported { .. }));
    }

    #[test]
    fn deletion_is_a_warning() {
        let mut object = application(json!({"health": {"status": "Degraded"}}));
        object["metadata"]["deletionTimestamp"] = json!("2020-03-16T09:17:45Z");
        let normalized = normalize(&object).unwrap();
        assert_eq!(normalized.health, Health::Degraded);
        assert_eq!(
            normalized.warnings,
            [
                "metadata.deletionTimestamp is set (2020-03-16T09:17:45Z): the object is being \
              deleted; health is as the status reports it"
            ]
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let message = "é".repeat(ObservedItem::MAX_MESSAGE_BYTES);
        let normalized = normalize(&kustomization(json!({
            "conditions": [{"type": "Ready", "status": "False", "message": message}],
        })))
        .unwrap();
        assert_eq!(normalized.message.len(), ObservedItem::MAX_MESSAGE_BYTES);
        assert!(normalized.message.chars().all(|c| c == 'é'));
    }
}
