//! Flux objects (Kustomization, HelmRelease, GitRepository, OCIRepository): health from
//! `spec.suspend` and the kstatus conditions, revisions from the kind's status fields.

use fleetscope_model::state::ObjectKind;
use fleetscope_model::{Health, Timestamp};

use super::fields::{Node, Reader};

/// What the Flux status says, before the common fields are added.
#[derive(Debug)]
pub(super) struct FluxStatus {
    pub(super) health: Health,
    pub(super) reason: String,
    pub(super) message: String,
    pub(super) transitioned_at: Option<Timestamp>,
    pub(super) applied_revision: String,
    pub(super) attempted_revision: String,
}

/// One entry of `status.conditions`.
#[derive(Debug)]
struct Condition {
    kind: String,
    status: String,
    reason: String,
    message: String,
    transitioned_at: Option<Timestamp>,
}

impl Condition {
    fn is_true(&self) -> bool {
        self.status == "True"
    }
}

pub(super) fn read(reader: &mut Reader, root: &Node<'_>, kind: ObjectKind) -> FluxStatus {
    let conditions = conditions(reader, root);
    let (mut health, deciding) = decide(reader, &conditions);
    let mut reason = deciding.map(|c| c.reason.clone()).unwrap_or_default();
    let mut message = deciding.map(|c| c.message.clone()).unwrap_or_default();
    let transitioned_at = deciding.and_then(|c| c.transitioned_at);

    // Ready=True speaks for the generation the controller last saw: a newer spec it has not
    // yet reconciled is still on its way.
    let generation = reader.at(root, &["metadata", "generation"]);
    let observed = reader.at(root, &["status", "observedGeneration"]);
    if let (Health::Healthy, Some(generation), Some(observed)) =
        (health, reader.i64(&generation), reader.i64(&observed))
    {
        if observed < generation {
            health = Health::Progressing;
            reason = "NewGeneration".to_owned();
            message = format!(
                "generation {generation} not reconciled yet (status is for generation {observed})"
            );
        }
    }

    let suspend = reader.at(root, &["spec", "suspend"]);
    if reader.bool(&suspend) == Some(true) {
        health = Health::Suspended;
        reason = "Suspended".to_owned();
    }

    let (applied_revision, attempted_revision) = revisions(reader, root, kind);
    FluxStatus {
        health,
        reason,
        message,
        transitioned_at,
        applied_revision,
        attempted_revision,
    }
}

fn conditions(reader: &mut Reader, root: &Node<'_>) -> Vec<Condition> {
    let list = reader.at(root, &["status", "conditions"]);
    reader
        .items(&list)
        .iter()
        .map(|item| {
            let mut text = |key: &str| {
                let node = reader.field(item, key);
                reader.string(&node)
            };
            let kind = text("type");
            let status = text("status");
            let reason = text("reason");
            let message = text("message");
            let at = reader.field(item, "lastTransitionTime");
            Condition {
                kind,
                status,
                reason,
                message,
                transitioned_at: reader.timestamp(&at),
            }
        })
        .collect()
}

/// The health the conditions give, and the condition that decided it.
fn decide<'c>(reader: &mut Reader, conditions: &'c [Condition]) -> (Health, Option<&'c Condition>) {
    let find = |kind: &str| conditions.iter().find(|c| c.kind == kind);
    let stalled = find("Stalled").filter(|c| c.is_true());
    match find("Ready") {
        Some(ready) => match ready.status.as_str() {
            "True" => (Health::Healthy, Some(ready)),
            "False" => (Health::Degraded, Some(ready)),
            // A stalled object will not become ready on its own, whatever Ready says.
            _ if stalled.is_some() => (Health::Degraded, stalled),
            "Unknown" => (Health::Progressing, Some(ready)),
            other => {
                reader.warn(format!(
                    "Ready condition status {other:?} is not True, False or Unknown; health unknown"
                ));
                (Health::Unknown, Some(ready))
            }
        },
        None => {
            if stalled.is_some() {
                (Health::Degraded, stalled)
            } else if let Some(reconciling) = find("Reconciling").filter(|c| c.is_true()) {
                (Health::Progressing, Some(reconciling))
            } else {
                (Health::Unknown, None)
            }
        }
    }
}

/// The applied and the attempted revision of each kind.
fn revisions(reader: &mut Reader, root: &Node<'_>, kind: ObjectKind) -> (String, String) {
    let mut status_string = |key: &str| {
        let node = reader.at(root, &["status", key]);
        reader.string(&node)
    };
    match kind {
        ObjectKind::Kustomization => (
            status_string("lastAppliedRevision"),
            status_string("lastAttemptedRevision"),
        ),
        ObjectKind::HelmRelease => {
            let last_applied = status_string("lastAppliedRevision");
            let attempted = status_string("lastAttemptedRevision");
            let applied = deployed_chart_version(reader, root).unwrap_or(last_applied);
            (applied, attempted)
        }
        ObjectKind::GitRepository | ObjectKind::OciRepository => {
            let node = reader.at(root, &["status", "artifact", "revision"]);
            (reader.string(&node), String::new())
        }
        // Application is read by the Argo CD module; nothing reaches here for it.
        ObjectKind::Application => (String::new(), String::new()),
    }
}

/// The chart version of the release Helm runs now: the `status.history` snapshot with status
/// `deployed` and the highest release number (`version`). Flux lists history newest first, but
/// the release number is what orders releases, so a list in the other order reads the same.
fn deployed_chart_version(reader: &mut Reader, root: &Node<'_>) -> Option<String> {
    let history = reader.at(root, &["status", "history"]);
    let mut best: Option<(Option<i64>, String)> = None;
    for entry in reader.items(&history) {
        let status = reader.field(&entry, "status");
        if reader.str(&status) != Some("deployed") {
            continue;
        }
        let chart_version = reader.field(&entry, "chartVersion");
        let Some(chart_version) = reader.str(&chart_version).filter(|v| !v.is_empty()) else {
            continue;
        };
        let number = reader.field(&entry, "version");
        let number = reader.i64(&number);
        // Earlier entries win ties: they are the newer ones.
        let newer = match &best {
            None => true,
            Some((best_number, _)) => number > *best_number,
        };
        if newer {
            best = Some((number, chart_version.to_owned()));
        }
    }
    best.map(|(_, chart_version)| chart_version)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::normalize::normalize;
    use crate::normalize::test_objects::{condition, kustomization};

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
}
