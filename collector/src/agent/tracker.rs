//! The agent's memory of what it last reported for every object, so it sends only changes:
//! an object whose normalized state did not change produces nothing, however often the
//! reconciler touches it.

use std::collections::BTreeMap;

use fleetscope_model::{AppName, ClusterId, ObjectKind, ObjectRef, ObservedItem, Timestamp};
use serde::{Deserialize, Serialize};

use crate::normalize::NormalizedObject;
use crate::protocol::ObservedState;

/// The last reported state of every object, keyed by object. Saved as a plain list.
///
/// It also counts, per app, the stamped app objects the cluster holds: a stamped object wins
/// over one the match rules would give the same app, so the collector needs the list with
/// every object without stamps it resolves ([`Tracker::stamped_apps`]), and when the list
/// changes the objects without stamps are reported again ([`Tracker::report_unstamped_again`]).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(into = "SavedTracker", from = "SavedTracker")]
pub struct Tracker {
    objects: BTreeMap<ObjectRef, ObservedItem>,
    stamped: BTreeMap<AppName, usize>,
    /// Set when an app gained its first stamped object or lost its last one.
    stamped_changed: bool,
}

/// The app an item counts a stamped object for.
fn stamped_app(item: &ObservedItem) -> Option<&AppName> {
    item.app
        .as_ref()
        .filter(|_| item.object.kind.is_app_object() && !item.deleted)
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
        let mut tracker = Tracker::default();
        for item in saved.objects {
            tracker.count(&item, true);
            tracker.objects.insert(item.object.clone(), item);
        }
        tracker.stamped_changed = false;
        tracker
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
                && known.facts == candidate.facts
        }) {
            return None;
        }
        let item = ObservedItem {
            change_seq: next_seq(),
            ..candidate
        };
        self.count(&item, true);
        if let Some(old) = self.objects.insert(key, item.clone()) {
            self.count(&old, false);
        }
        Some(item)
    }

    fn count(&mut self, item: &ObservedItem, add: bool) {
        let Some(app) = stamped_app(item) else {
            return;
        };
        if add {
            let count = self.stamped.entry(app.clone()).or_default();
            *count += 1;
            self.stamped_changed |= *count == 1;
        } else if let Some(count) = self.stamped.get_mut(app) {
            *count -= 1;
            if *count == 0 {
                self.stamped.remove(app);
                self.stamped_changed = true;
            }
        }
    }

    /// The apps with at least one stamped app object on the cluster, in name order.
    pub fn stamped_apps(&self) -> Vec<String> {
        self.stamped.keys().map(ToString::to_string).collect()
    }

    /// Whether [`Tracker::stamped_apps`] changed since the last call.
    pub fn take_stamped_changed(&mut self) -> bool {
        std::mem::take(&mut self.stamped_changed)
    }

    /// Every app object without stamps, reported again with new change numbers: the collector
    /// resolves each anew, against the stamped apps of now.
    pub fn report_unstamped_again(
        &mut self,
        now: Timestamp,
        next_seq: &mut dyn FnMut() -> u64,
    ) -> Vec<ObservedItem> {
        let mut changes = Vec::new();
        for item in self.objects.values_mut() {
            if item.is_unstamped_app_object() && !item.deleted {
                item.change_seq = next_seq();
                item.observed_at = now;
                changes.push(item.clone());
            }
        }
        changes
    }

    /// Records a deletion; returns the change to report unless the object was unknown.
    pub fn delete(
        &mut self,
        object: &ObjectRef,
        now: Timestamp,
        next_seq: &mut dyn FnMut() -> u64,
    ) -> Option<ObservedItem> {
        let known = self.objects.remove(object)?;
        self.count(&known, false);
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
