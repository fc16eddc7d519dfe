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
