//! The agent's memory of what it last reported for every object, so it sends only changes:
//! an object whose normalized state did not change produces nothing, however often the
//! reconciler touches it.

use std::collections::BTreeMap;

use fleetscope_model::{ClusterId, ObjectKind, ObjectRef, ObservedItem, Timestamp};
use serde::{Deserialize, Serialize};

use crate::normalize::NormalizedObject;
use crate::protocol::ObservedState;

/// The last reported state of every object, keyed by object. Saved as a plain list.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(into = "SavedTracker", from = "SavedTracker")]
pub struct Tracker {
    objects: BTreeMap<ObjectRef, ObservedItem>,
}

#[derive(Serialize, Deserialize)]
struct SavedTracker {
    objects: Vec<ObservedItem>,
}

impl From<Tracker> for SavedTracker {
    fn from(tracker: Tracker) -> SavedTracker {
        SavedTracker {
            objects: tracker.objects.into_values().collect(),
        }
    }
}

impl From<SavedTracker> for Tracker {
    fn from(saved: SavedTracker) -> Tracker {
        Tracker {
            objects: saved
                .objects
                .into_iter()
                .map(|item| (item.object.clone(), item))
                .collect(),
        }
    }
}

impl Tracker {
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Records an object's current state; returns the change to report, if any.
    pub fn apply(
        &mut self,
        cluster: &ClusterId,
        object: NormalizedObject,
        now: Timestamp,
        next_seq: &mut dyn FnMut() -> u64,
    ) -> Option<ObservedItem> {
        let key = object.object.clone();
        let candidate = object.into_observed(cluster.clone(), 0, now, false);
        if self.objects.get(&key).is_some_and(|known| {
            ObservedState::of_item(known) == ObservedState::of_item(&candidate)
        }) {
            return None;
        }
        let item = ObservedItem {
            change_seq: next_seq(),
            ..candidate
        };
        self.objects.insert(key, item.clone());
        Some(item)
    }

    /// Records a deletion; returns the change to report unless the object was unknown.
    pub fn delete(
        &mut self,
        object: &ObjectRef,
        now: Timestamp,
        next_seq: &mut dyn FnMut() -> u64,
    ) -> Option<ObservedItem> {
        let known = self.objects.remove(object)?;
        Some(ObservedItem {
            change_seq: next_seq(),
            observed_at: now,
            deleted: true,
            ..known
        })
    }

    /// A full list of one kind: applies every object and deletes those of that kind that are
    /// no longer there. Returns the changes to report.
    pub fn relist(
        &mut self,
        cluster: &ClusterId,
        kind: ObjectKind,
        listed: Vec<NormalizedObject>,
        now: Timestamp,
        next_seq: &mut dyn FnMut() -> u64,
    ) -> Vec<ObservedItem> {
        let present: std::collections::BTreeSet<ObjectRef> =
            listed.iter().map(|o| o.object.clone()).collect();
        let gone: Vec<ObjectRef> = self
            .objects
            .keys()
            .filter(|key| key.kind == kind && !present.contains(key))
            .cloned()
            .collect();
        let mut changes: Vec<ObservedItem> = listed
            .into_iter()
            .filter_map(|o| self.apply(cluster, o, now, next_seq))
            .collect();
        changes.extend(
            gone.iter()
                .filter_map(|key| self.delete(key, now, next_seq)),
        );
        changes
    }

    /// Every object's last reported state, for a snapshot.
    pub fn snapshot(&self) -> Vec<ObservedItem> {
        self.objects.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::normalize::normalize;

    fn git_repository(name: &str, revision: &str) -> NormalizedObject {
        normalize(&json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": name, "namespace": "flux-system"},
            "status": {
                "artifact": {"revision": revision},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "stored", "lastTransitionTime": "2026-11-21T10:00:00Z"}],
            },
        }))
        .unwrap()
    }

    #[test]
    fn only_changes_are_reported() {
        let cluster = ClusterId::parse("edge-1").unwrap();
        let mut tracker = Tracker::default();
        let mut counter = 0;
        let mut next = || {
            counter += 1;
            counter
        };
        let first = tracker
            .apply(
                &cluster,
                git_repository("platform", "main@sha1:aaa"),
                Timestamp(100),
                &mut next,
            )
            .unwrap();
        assert_eq!(
            (first.change_seq, first.applied_revision.as_str()),
            (1, "main@sha1:aaa")
        );
        assert!(
            tracker
                .apply(
                    &cluster,
                    git_repository("platform", "main@sha1:aaa"),
                    Timestamp(200),
                    &mut next
                )
                .is_none(),
            "same state, later time: nothing"
        );
        let second = tracker
            .apply(
                &cluster,
                git_repository("platform", "main@sha1:bbb"),
                Timestamp(300),
                &mut next,
            )
            .unwrap();
        assert_eq!(second.change_seq, 2);
        let changes = tracker.relist(
            &cluster,
            ObjectKind::GitRepository,
            vec![git_repository("other", "v1")],
            Timestamp(400),
            &mut next,
        );
        let summary: Vec<(&str, bool, u64)> = changes
            .iter()
            .map(|c| (c.object.name.as_str(), c.deleted, c.change_seq))
            .collect();
        assert_eq!(summary, vec![("other", false, 3), ("platform", true, 4)]);
        assert!(
            tracker
                .relist(
                    &cluster,
                    ObjectKind::Kustomization,
                    vec![],
                    Timestamp(500),
                    &mut next
                )
                .is_empty(),
            "another kind's list deletes nothing here"
        );
        let saved = serde_json::to_vec(&tracker).unwrap();
        let restored: Tracker = serde_json::from_slice(&saved).unwrap();
        assert_eq!(restored.snapshot(), tracker.snapshot());
    }
}
