//! Argo CD Applications: health and sync from `status.health` and `status.sync`, overridden by
//! a failed sync operation; revisions from `status.sync` and the last operation's result.

use fleetscope_model::{Health, SyncStatus, Timestamp};

use super::fields::{Node, Reader};

/// What the Application's status says, before the common fields are added.
#[derive(Debug)]
pub(super) struct ArgoStatus {
    pub(super) health: Health,
    pub(super) sync: SyncStatus,
    pub(super) reason: String,
    pub(super) message: String,
    pub(super) transitioned_at: Option<Timestamp>,
    pub(super) reconciled_at: Option<Timestamp>,
    pub(super) operation_phase: Option<String>,
    pub(super) applied_revision: String,
    pub(super) attempted_revision: String,
    pub(super) revisions: Vec<String>,
    pub(super) images: Vec<String>,
}

/// Separates the revisions of a multi-source Application in one revision text.
const REVISION_SEPARATOR: &str = ", ";

pub(super) fn read(reader: &mut Reader, root: &Node<'_>) -> ArgoStatus {
    let status = reader.field(root, "status");
    let health_node = reader.field(&status, "health");
    let sync_node = reader.field(&status, "sync");
    let operation = reader.field(&status, "operationState");

    let mut text = |node: &Node<'_>, key: &str| {
        let field = reader.field(node, key);
        reader
            .str(&field)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    };
    let health_text = text(&health_node, "status");
    let health_message = text(&health_node, "message");
    let sync_text = text(&sync_node, "status");
    let operation_phase = text(&operation, "phase");
    let operation_message = text(&operation, "message");

    let mut health = match health_text.as_deref() {
        None | Some("Unknown") => Health::Unknown,
        Some("Healthy") => Health::Healthy,
        Some("Progressing" | "Missing") => Health::Progressing,
        Some("Degraded") => Health::Degraded,
        Some("Suspended") => Health::Suspended,
        Some(other) => {
            reader.warn(format!(
                "status.health.status {other:?} is not an Argo CD health status; health unknown"
            ));
            Health::Unknown
        }
    };
    let sync = match sync_text.as_deref() {
        Some("Synced") => SyncStatus::Synced,
        Some("OutOfSync") => SyncStatus::OutOfSync,
        _ => SyncStatus::Unknown,
    };

    let condition_message = first_condition_message(reader, &status);
    let mut reason = health_text.unwrap_or_default();
    let mut message = condition_message
        .or_else(|| operation_message.clone())
        .or(health_message)
        .unwrap_or_default();
    if let Some(phase @ ("Failed" | "Error")) = operation_phase.as_deref() {
        health = Health::Degraded;
        reason = phase.to_owned();
        if let Some(operation_message) = operation_message {
            message = operation_message;
        }
    }

    let transitioned_at = [
        reader.at(&health_node, &["lastTransitionTime"]),
        reader.at(&operation, &["finishedAt"]),
        reader.at(&operation, &["startedAt"]),
        reader.at(&status, &["reconciledAt"]),
    ]
    .iter()
    .find_map(|node| reader.timestamp(node));
    let reconciled_node = reader.field(&status, "reconciledAt");
    let reconciled_at = reader.timestamp(&reconciled_node);

    // The revision the live state was last compared with; a succeeded operation's result
    // stands in when the status has no sync block (the objects Argo CD's own tests use).
    let sync_result = reader.field(&operation, "syncResult");
    let (mut applied_revision, mut revisions) = revision_pair(reader, &sync_node);
    let (attempted_revision, attempted_revisions) = revision_pair(reader, &sync_result);
    if applied_revision.is_empty() && operation_phase.as_deref() == Some("Succeeded") {
        applied_revision = attempted_revision.clone();
        revisions = attempted_revisions;
    }

    let images_node = reader.at(&status, &["summary", "images"]);
    let images = reader.strings(&images_node);

    ArgoStatus {
        health,
        sync,
        reason,
        message,
        transitioned_at,
        reconciled_at,
        operation_phase,
        applied_revision,
        attempted_revision,
        revisions,
        images,
    }
}

/// `spec.source.targetRevision`, or that of the first of `spec.sources`; empty when neither
/// says (Argo CD then follows `HEAD`, but that is not a version).
pub(super) fn target_revision(reader: &mut Reader, root: &Node<'_>) -> String {
    let single = reader.at(root, &["spec", "source", "targetRevision"]);
    if let Some(text) = reader.str(&single).filter(|t| !t.is_empty()) {
        return text.to_owned();
    }
    let sources = reader.at(root, &["spec", "sources"]);
    let first = reader.items(&sources).into_iter().next();
    match first {
        Some(source) => {
            let node = reader.field(&source, "targetRevision");
            reader.string(&node)
        }
        None => String::new(),
    }
}

/// The first non-empty `status.conditions[].message`.
fn first_condition_message(reader: &mut Reader, status: &Node<'_>) -> Option<String> {
    let conditions = reader.field(status, "conditions");
    for condition in reader.items(&conditions) {
        let message = reader.field(&condition, "message");
        if let Some(message) = reader.str(&message).filter(|m| !m.is_empty()) {
            return Some(message.to_owned());
        }
    }
    None
}

/// The revision text of a block that carries either `revision` (one source) or `revisions`
/// (several sources, in `spec.sources` order), and the list for the latter.
fn revision_pair(reader: &mut Reader, block: &Node<'_>) -> (String, Vec<String>) {
    let list = reader.field(block, "revisions");
    let revisions = reader.strings(&list);
    if !revisions.is_empty() {
        return (revisions.join(REVISION_SEPARATOR), revisions);
    }
    let single = reader.field(block, "revision");
    (reader.string(&single), Vec::new())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::normalize::test_objects::application;
    use crate::normalize::{fields, normalize};

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
}
