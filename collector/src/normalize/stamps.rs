//! The renderer's stamps ([`fleetscope_model::stamps`]) on an object: the app label and the
//! version and content-hash annotations, each validated on its own.

use fleetscope_model::stamps::{
    validate_content_hash, ANNOTATION_CONTENT_HASH, ANNOTATION_VERSION, LABEL_APP,
};
use fleetscope_model::{AppName, Version};

use super::fields::{Node, Reader};

/// The stamps that validated; `None` for one absent or invalid.
#[derive(Debug, Default)]
pub(super) struct Stamps {
    pub(super) app: Option<AppName>,
    pub(super) version: Option<Version>,
    pub(super) content_hash: Option<String>,
}

/// The renderer's stamps that validate; a warning for each one that does not.
pub(super) fn read(reader: &mut Reader, root: &Node<'_>) -> Stamps {
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
    use fleetscope_model::state::ObjectKind;
    use fleetscope_model::{Health, ObjectRef, SyncStatus};
    use serde_json::json;

    use super::*;
    use crate::normalize::test_objects::{condition, kustomization, HASH};
    use crate::normalize::{fields, normalize};

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
}
