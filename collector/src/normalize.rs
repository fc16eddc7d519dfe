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

mod argo;
mod fields;
mod flux;

use fleetscope_model::stamps::{
    validate_content_hash, ANNOTATION_CONTENT_HASH, ANNOTATION_VERSION, LABEL_APP,
};
use fleetscope_model::state::{truncate_on_char_boundary, ObjectKind};
use fleetscope_model::{
    AppName, ClusterId, Health, ObjectRef, ObservedItem, SyncStatus, Timestamp, Version,
};
use serde_json::Value;

use fields::{describe, Node, Reader};

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
    /// What was ignored or is worth knowing (an invalid stamp, an object being deleted).
    pub warnings: Vec<String>,
}

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
    let stamps = read_stamps(&mut reader, &root);

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
            seq,
            deleted,
        }
    }
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

#[derive(Debug, Default)]
struct Stamps {
    app: Option<AppName>,
    version: Option<Version>,
    content_hash: Option<String>,
}

/// The renderer's stamps that validate; a warning for each one that does not.
fn read_stamps(reader: &mut Reader, root: &Node<'_>) -> Stamps {
    let mut stamp = |section: &str, key: &str| {
        let node = reader.at(root, &["metadata", section]);
        let node = reader.field(&node, key);
        reader.str(&node).map(str::to_owned)
    };
    let app = stamp("labels", LABEL_APP);
    let version = stamp("annotations", ANNOTATION_VERSION);
    let content_hash = stamp("annotations", ANNOTATION_CONTENT_HASH);

    let mut stamps = Stamps::default();
    if let Some(app) = app {
        match AppName::parse(&app) {
            Ok(app) => stamps.app = Some(app),
            Err(err) => reader.warn(format!("ignored label {LABEL_APP}: {err}")),
        }
    }
    if let Some(version) = version {
        match Version::parse(&version) {
            Ok(version) => stamps.version = Some(version),
            Err(err) => reader.warn(format!("ignored annotation {ANNOTATION_VERSION}: {err}")),
        }
    }
    if let Some(hash) = content_hash {
        match validate_content_hash(&hash) {
            Ok(()) => stamps.content_hash = Some(hash),
            Err(err) => reader.warn(format!(
                "ignored annotation {ANNOTATION_CONTENT_HASH}: {err}"
            )),
        }
    }
    stamps
}

#[cfg(test)]
mod tests {
    use expect_test::expect;
    use serde_json::json;

    use super::*;

    const HASH: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn ready_for_an_older_generation_is_still_progressing() {
        let mut object = kustomization(json!({
            "observedGeneration": 3,
            "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                            "message": "Applied revision: main@sha1:1", "lastTransitionTime": "2026-11-21T10:00:00Z"}],
        }));
        object["metadata"]["generation"] = json!(4);
        let normalized = normalize(&object).unwrap();
        assert_eq!(normalized.health, Health::Progressing);
        assert_eq!(normalized.reason, "NewGeneration");
        assert_eq!(
            normalized.message,
            "generation 4 not reconciled yet (status is for generation 3)"
        );
        object["metadata"]["generation"] = json!(3);
        assert_eq!(
            normalize(&object).unwrap().health,
            Health::Healthy,
            "caught up"
        );
    }

    fn kustomization(status: Value) -> Value {
        json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "podinfo", "namespace": "apps"},
            "spec": {"interval": "5m"},
            "status": status,
        })
    }

    fn condition(kind: &str, status: &str, reason: &str, at: &str) -> Value {
        json!({
            "type": kind,
            "status": status,
            "reason": reason,
            "message": format!("{kind} is {status}"),
            "lastTransitionTime": at,
        })
    }

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
    fn valid_stamps_are_read() {
        let mut object = kustomization(json!({}));
        object["metadata"]["labels"] = json!({"fleetscope.io/app": "payments"});
        object["metadata"]["annotations"] =
            json!({"fleetscope.io/version": "1.0+build.7", "fleetscope.io/content-hash": HASH});
        let normalized = normalize(&object).unwrap();
        assert_eq!(normalized.app, Some(AppName::parse("payments").unwrap()));
        assert_eq!(
            normalized.version,
            Some(Version::parse("1.0+build.7").unwrap())
        );
        assert_eq!(normalized.content_hash.as_deref(), Some(HASH));
        assert!(normalized.warnings.is_empty(), "{:?}", normalized.warnings);
    }

    #[test]
    fn invalid_stamps_are_warnings() {
        let mut object = kustomization(json!({}));
        object["metadata"]["labels"] = json!({"fleetscope.io/app": "Payments"});
        object["metadata"]["annotations"] = json!({"fleetscope.io/version": "1.0 beta", "fleetscope.io/content-hash": "sha256:ABC"});
        let normalized = normalize(&object).unwrap();
        assert_eq!(
            (normalized.app, normalized.version, normalized.content_hash),
            (None, None, None)
        );
        expect![[r#"
            [
                "ignored label fleetscope.io/app: app name \"Payments\" has 'P' at position 0; allowed are lowercase letters a-z, digits 0-9 and '-'",
                "ignored annotation fleetscope.io/version: version \"1.0 beta\" has ' ' at position 3; allowed are printable ASCII characters without spaces",
                "ignored annotation fleetscope.io/content-hash: content hash \"sha256:ABC\" must be \"sha256:\" and 64 lowercase hex digits",
            ]
        "#]]
        .assert_debug_eq(&normalized.warnings);

        let mut object = kustomization(json!({}));
        object["metadata"]["labels"] = json!({"fleetscope.io/app": 42});
        let normalized = normalize(&object).unwrap();
        assert_eq!(normalized.app, None);
        assert_eq!(
            normalized.warnings,
            ["metadata.labels.fleetscope.io/app must be a string, found 42; ignored"]
        );
    }

    #[test]
    fn unmanaged_objects_are_normalized() {
        let normalized = normalize(&kustomization(json!({
            "conditions": [condition("Ready", "True", "ReconciliationSucceeded", "2024-07-16T12:00:00Z")],
            "lastAppliedRevision": "main@sha1:abc",
        })))
        .unwrap();
        assert_eq!(normalized.app, None);
        assert_eq!(normalized.health, Health::Healthy);
        assert_eq!(normalized.sync, SyncStatus::Unknown);
        assert_eq!(normalized.reason, "ReconciliationSucceeded");
        assert_eq!(normalized.message, "Ready is True");
        assert_eq!(normalized.applied_revision, "main@sha1:abc");
        assert_eq!(
            normalized.transitioned_at,
            Some(fields::parse_timestamp("2024-07-16T12:00:00Z").unwrap())
        );
        assert_eq!(
            normalized.object,
            ObjectRef {
                kind: ObjectKind::Kustomization,
                namespace: "apps".to_owned(),
                name: "podinfo".to_owned(),
            }
        );
    }

    #[test]
    fn empty_or_absent_conditions_are_unknown() {
        for status in [json!({"conditions": []}), json!({}), Value::Null] {
            let normalized = normalize(&kustomization(status.clone())).unwrap();
            assert_eq!(normalized.health, Health::Unknown, "{status}");
            assert_eq!(
                (normalized.reason.as_str(), normalized.message.as_str()),
                ("", "")
            );
            assert_eq!(normalized.transitioned_at, None);
            assert!(normalized.warnings.is_empty(), "{:?}", normalized.warnings);
        }
        let mut no_status = kustomization(Value::Null);
        no_status.as_object_mut().unwrap().remove("status");
        assert_eq!(normalize(&no_status).unwrap().health, Health::Unknown);
    }

    #[test]
    fn flux_conditions_decide_health() {
        let at = "2024-07-16T12:00:00Z";
        let case = |conditions: Vec<Value>| {
            let normalized = normalize(&kustomization(json!({"conditions": conditions}))).unwrap();
            (normalized.health, normalized.reason)
        };
        let owned = |health, reason: &str| (health, reason.to_owned());
        assert_eq!(
            case(vec![condition("Ready", "False", "BuildFailed", at)]),
            owned(Health::Degraded, "BuildFailed")
        );
        assert_eq!(
            case(vec![condition("Ready", "Unknown", "Progressing", at)]),
            owned(Health::Progressing, "Progressing")
        );
        assert_eq!(
            case(vec![
                condition("Ready", "Unknown", "Progressing", at),
                condition("Stalled", "True", "InvalidPath", at),
            ]),
            owned(Health::Degraded, "InvalidPath"),
            "Stalled wins over Ready=Unknown"
        );
        assert_eq!(
            case(vec![
                condition("Stalled", "True", "InvalidPath", at),
                condition("Ready", "True", "ReconciliationSucceeded", at),
            ]),
            owned(Health::Healthy, "ReconciliationSucceeded"),
            "Ready=True is not overruled"
        );
        assert_eq!(
            case(vec![condition("Stalled", "True", "InvalidPath", at)]),
            owned(Health::Degraded, "InvalidPath")
        );
        assert_eq!(
            case(vec![condition("Reconciling", "True", "Progressing", at)]),
            owned(Health::Progressing, "Progressing")
        );
        assert_eq!(
            case(vec![condition("Reconciling", "False", "Succeeded", at)]),
            owned(Health::Unknown, "")
        );
        assert_eq!(
            case(vec![condition("Stalled", "False", "Nothing", at)]),
            owned(Health::Unknown, "")
        );
    }

    #[test]
    fn odd_ready_status_is_unknown_with_a_warning() {
        let normalized = normalize(&kustomization(json!({
            "conditions": [condition("Ready", "Maybe", "Odd", "2024-07-16T12:00:00Z")],
        })))
        .unwrap();
        assert_eq!(normalized.health, Health::Unknown);
        assert_eq!(normalized.reason, "Odd");
        assert_eq!(
            normalized.warnings,
            [r#"Ready condition status "Maybe" is not True, False or Unknown; health unknown"#]
        );
    }

    #[test]
    fn suspend_wins() {
        let mut object = kustomization(json!({
            "conditions": [condition("Ready", "False", "BuildFailed", "2024-07-16T12:00:00Z")],
        }));
        object["spec"]["suspend"] = json!(true);
        let normalized = normalize(&object).unwrap();
        assert_eq!(normalized.health, Health::Suspended);
        assert_eq!(normalized.reason, "Suspended");
        assert_eq!(normalized.message, "Ready is False");

        object["spec"]["suspend"] = json!(false);
        assert_eq!(normalize(&object).unwrap().health, Health::Degraded);

        object["spec"]["suspend"] = json!("true");
        let normalized = normalize(&object).unwrap();
        assert_eq!(normalized.health, Health::Degraded);
        assert_eq!(
            normalized.warnings,
            [r#"spec.suspend must be true or false, found "true"; ignored"#]
        );

        let mut bare = kustomization(json!({}));
        bare["spec"]["suspend"] = json!(true);
        let normalized = normalize(&bare).unwrap();
        assert_eq!(normalized.health, Health::Suspended);
        assert_eq!(normalized.transitioned_at, None);
    }

    #[test]
    fn bad_times_are_warnings() {
        let normalized = normalize(&kustomization(json!({
            "conditions": [condition("Ready", "True", "Done", "yesterday")],
        })))
        .unwrap();
        assert_eq!(normalized.health, Health::Healthy);
        assert_eq!(normalized.transitioned_at, None);
        assert_eq!(normalized.warnings.len(), 1);
        assert!(
            normalized.warnings[0].starts_with(
                r#"status.conditions[0].lastTransitionTime "yesterday" is not an RFC 3339 time ("#
            ),
            "{:?}",
            normalized.warnings
        );
    }

    #[test]
    fn helm_release_applied_revision_is_the_deployed_release() {
        let release = |version: i64, chart: &str, status: &str| json!({"version": version, "chartVersion": chart, "status": status});
        let object = |history: Vec<Value>, extra: Value| {
            let mut status = json!({"history": history, "lastAttemptedRevision": "2.1.0"});
            for (key, value) in extra.as_object().unwrap() {
                status[key] = value.clone();
            }
            json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2",
                "kind": "HelmRelease",
                "metadata": {"name": "web", "namespace": "apps"},
                "status": status,
            })
        };
        let applied = |value: Value| {
            let normalized = normalize(&value).unwrap();
            assert_eq!(normalized.attempted_revision, "2.1.0");
            normalized.applied_revision
        };
        // Newest first, a failed upgrade on top of the running release.
        assert_eq!(
            applied(object(
                vec![
                    release(4, "2.1.0", "failed"),
                    release(3, "2.0.0", "deployed")
                ],
                json!({})
            )),
            "2.0.0"
        );
        // Oldest first, as in Flux's debug test objects: the release number decides.
        assert_eq!(
            applied(object(
                vec![
                    release(1, "1.0.0", "deployed"),
                    release(2, "1.1.0", "deployed")
                ],
                json!({})
            )),
            "1.1.0"
        );
        // No deployed snapshot: the v2beta1/v2beta2 field.
        assert_eq!(
            applied(object(
                vec![release(1, "1.0.0", "failed")],
                json!({"lastAppliedRevision": "0.9.0"})
            )),
            "0.9.0"
        );
        assert_eq!(applied(object(vec![], json!({}))), "");
    }

    #[test]
    fn sources_report_the_artifact_revision() {
        let normalized = normalize(&json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1beta2",
            "kind": "OCIRepository",
            "metadata": {"name": "manifests"},
            "status": {"artifact": {"revision": "latest@sha256:abc"}},
        }))
        .unwrap();
        assert_eq!(normalized.object.kind, ObjectKind::OciRepository);
        assert_eq!(normalized.object.namespace, "");
        assert_eq!(normalized.applied_revision, "latest@sha256:abc");
        assert_eq!(normalized.attempted_revision, "");
    }

    fn application(status: Value) -> Value {
        json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "shop", "namespace": "argocd"},
            "status": status,
        })
    }

    #[test]
    fn argo_health_and_sync() {
        let case = |health: Option<&str>, sync: Option<&str>| {
            let mut status = json!({});
            if let Some(health) = health {
                status["health"] = json!({"status": health});
            }
            if let Some(sync) = sync {
                status["sync"] = json!({"status": sync});
            }
            let normalized = normalize(&application(status)).unwrap();
            (normalized.health, normalized.sync, normalized.reason)
        };
        let owned = |health, sync, reason: &str| (health, sync, reason.to_owned());
        assert_eq!(
            case(Some("Healthy"), Some("Synced")),
            owned(Health::Healthy, SyncStatus::Synced, "Healthy")
        );
        assert_eq!(
            case(Some("Missing"), Some("OutOfSync")),
            owned(Health::Progressing, SyncStatus::OutOfSync, "Missing")
        );
        assert_eq!(
            case(Some("Progressing"), Some("Unknown")),
            owned(Health::Progressing, SyncStatus::Unknown, "Progressing")
        );
        assert_eq!(
            case(Some("Suspended"), None),
            owned(Health::Suspended, SyncStatus::Unknown, "Suspended")
        );
        assert_eq!(
            case(Some("Degraded"), Some("Synced")),
            owned(Health::Degraded, SyncStatus::Synced, "Degraded")
        );
        assert_eq!(
            case(Some("Unknown"), None),
            owned(Health::Unknown, SyncStatus::Unknown, "Unknown")
        );
        assert_eq!(
            case(None, None),
            owned(Health::Unknown, SyncStatus::Unknown, "")
        );
        assert_eq!(
            case(Some("Sideways"), None),
            owned(Health::Unknown, SyncStatus::Unknown, "Sideways")
        );
    }

    #[test]
    fn failed_operation_is_degraded() {
        for phase in ["Failed", "Error"] {
            let normalized = normalize(&application(json!({
                "health": {"status": "Healthy", "lastTransitionTime": "2024-07-16T12:00:00Z"},
                "sync": {"status": "OutOfSync", "revision": "abc"},
                "conditions": [{"type": "SyncError", "message": "condition message"}],
                "operationState": {
                    "phase": phase,
                    "message": "one or more objects failed to apply",
                    "startedAt": "2024-07-16T12:01:00Z",
                    "finishedAt": "2024-07-16T12:02:00Z",
                    "syncResult": {"revision": "def"},
                },
            })))
            .unwrap();
            assert_eq!(normalized.health, Health::Degraded);
            assert_eq!(normalized.reason, phase);
            assert_eq!(normalized.message, "one or more objects failed to apply");
            assert_eq!(normalized.operation_phase.as_deref(), Some(phase));
            assert_eq!(normalized.applied_revision, "abc");
            assert_eq!(normalized.attempted_revision, "def");
            // The health block's time comes first, as the rules say.
            assert_eq!(
                normalized.transitioned_at,
                Some(fields::parse_timestamp("2024-07-16T12:00:00Z").unwrap())
            );
        }
    }

    #[test]
    fn argo_message_and_time_fall_back_in_order() {
        let normalized = normalize(&application(json!({
            "health": {"status": "Progressing", "message": "health message"},
            "operationState": {"phase": "Running", "startedAt": "2024-07-16T12:01:00Z"},
            "reconciledAt": "2024-07-16T12:05:00Z",
        })))
        .unwrap();
        assert_eq!(normalized.message, "health message");
        assert_eq!(
            normalized.transitioned_at,
            Some(fields::parse_timestamp("2024-07-16T12:01:00Z").unwrap())
        );
        assert_eq!(
            normalized.reconciled_at,
            Some(fields::parse_timestamp("2024-07-16T12:05:00Z").unwrap())
        );
        assert_eq!(
            normalized.applied_revision, "",
            "a running operation applied nothing yet"
        );

        let normalized = normalize(&application(
            json!({"reconciledAt": "2024-07-16T12:05:00Z"}),
        ))
        .unwrap();
        assert_eq!(normalized.transitioned_at, normalized.reconciled_at);
    }

    #[test]
    fn multi_source_revisions() {
        let normalized = normalize(&application(json!({
            "sync": {"status": "Synced", "revisions": ["aaa", "bbb"]},
            "summary": {"images": ["nginx:1.27", "redis:7"]},
        })))
        .unwrap();
        assert_eq!(normalized.applied_revision, "aaa, bbb");
        assert_eq!(normalized.revisions, ["aaa", "bbb"]);
        assert_eq!(normalized.images, ["nginx:1.27", "redis:7"]);
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
                seq: 7,
                deleted: false,
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
