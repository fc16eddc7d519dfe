//! The hub's rollout records in the store (`rollout_records`, `rollout_clusters`): what changed
//! since the last write, worked out from the rollouts kept current, so that a write costs what
//! changed (a pass over the rollouts, and over the chunks of cluster numbers that changed)
//! rather than the whole fleet.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use fleetscope_store::{RolloutClusterRow, RolloutRecordRow, Store};

use crate::fleet::records::Filter;
use crate::fleet::rollout_figures::{RolloutId, RolloutPolicy, Standing};
use crate::fleet::Fleet;
use crate::rollouts::progress::RecordedProgress;
use crate::rollouts::{AppRollouts, Rollout};

/// What was last written: a hash of each rollout's row (its `written_ms` zeroed) and each
/// app's rollouts as they stood (sharing their chunks with the fleet they were taken from).
#[derive(Debug, Default, Clone)]
pub struct RolloutRecorder {
    records: HashMap<RolloutId, u64>,
    apps: BTreeMap<String, Arc<AppRollouts>>,
}

/// The rows to write to bring the store up to a fleet, and what the recorder holds once they
/// are written ([`RolloutRecorder::written`]).
#[derive(Debug)]
pub struct RecordChanges {
    pub records: Vec<RolloutRecordRow>,
    pub clusters: Vec<RolloutClusterRow>,
    /// Whether apps were left for the next write, `clusters` having reached its bound.
    pub more: bool,
    next: RolloutRecorder,
}

impl RecordChanges {
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.clusters.is_empty()
    }
}

fn hash_of(row: &RolloutRecordRow) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    row.hash(&mut hasher);
    hasher.finish()
}

fn moment(at: Option<u32>) -> u32 {
    at.unwrap_or(0)
}

/// A rollout's row: the whole fleet's figures, with its status `status`.
pub fn record_row(rollout: &Rollout, standing: &Standing, status: &str) -> RolloutRecordRow {
    let [m50, m90, m99, m100] = standing.milestones;
    RolloutRecordRow {
        app: rollout.app.clone(),
        render_id: rollout.render_id,
        version: rollout.version.clone(),
        started_at: rollout.started_at,
        platform_commit: rollout.platform_commit.clone(),
        committed_at: moment(rollout.committed_at),
        status: status.to_owned(),
        from_versions: rollout.from_versions.keys().cloned().collect(),
        from_counts: rollout.from_versions.values().copied().collect(),
        targeted_at_start: rollout.targeted_at_start,
        joined: rollout.joined,
        rolled_back: rollout.rolled_back,
        superseded: rollout.superseded,
        removed: rollout.removed,
        rolled_back_by: rollout.first_rolled_back_by.unwrap_or(0),
        superseded_by: rollout.first_superseded_by.unwrap_or(0),
        superseded_before_complete: u8::from(rollout.progress.superseded_before_complete),
        targeted: standing.targeted,
        in_sync: standing.in_sync,
        failed: standing.failed,
        stale: standing.stale,
        reached: standing.reached,
        failed_before_reaching: standing.failed_before_reaching,
        reached_50: moment(m50),
        reached_90: moment(m90),
        reached_99: moment(m99),
        reached_100: moment(m100),
        completed_at: moment(rollout.completed_at()),
        last_reached_at: moment(rollout.progress.last_reached),
        written_ms: 0,
    }
}

impl RolloutRecorder {
    /// The rows that differ between what was last written and `fleet` (judged under
    /// `policy` at the fleet's moment), stamped `written_ms`: every rollout's, and the
    /// clusters' of the apps taken in order until more than `max_cluster_rows` are gathered
    /// (the others are left for the next write, [`RecordChanges::more`]).
    pub fn changes(
        &self,
        fleet: &Fleet,
        policy: &RolloutPolicy,
        written_ms: u64,
        max_cluster_rows: usize,
    ) -> RecordChanges {
        let mut next = RolloutRecorder {
            records: HashMap::with_capacity(self.records.len()),
            apps: BTreeMap::new(),
        };
        let mut records = Vec::new();
        let all = fleet.rollouts_newest_first(None);
        let standings = fleet.standings_of_each(&all, &Filter::default());
        for (rollout, (standing, _)) in all.into_iter().zip(standings) {
            let status = fleet.rollout_status(rollout, policy).as_str();
            let row = record_row(rollout, &standing, status);
            let id = RolloutId::of(rollout);
            let hash = hash_of(&row);
            if self.records.get(&id) != Some(&hash) {
                records.push(RolloutRecordRow { written_ms, ..row });
            }
            next.records.insert(id, hash);
        }
        let mut clusters = Vec::new();
        let mut more = false;
        let none = Arc::new(AppRollouts::default());
        let names: std::collections::BTreeSet<&String> =
            fleet.rollouts.apps.keys().chain(self.apps.keys()).collect();
        for name in names {
            let now = fleet.rollouts.apps.get(name).unwrap_or(&none);
            let before = self.apps.get(name);
            if more || before.is_some_and(|b| Arc::ptr_eq(b, now)) {
                if let Some(before) = before {
                    next.apps.insert(name.clone(), before.clone());
                }
                continue;
            }
            next.apps.insert(name.clone(), now.clone());
            for number in now.changed_clusters(before.map(|b| b.as_ref())) {
                if number as usize >= fleet.clusters.len() {
                    continue;
                }
                let rollout = now.owner(number).map(|o| &now.rollouts[o]);
                clusters.push(RolloutClusterRow {
                    app: name.clone(),
                    cluster_id: fleet.clusters.id(number).to_string(),
                    render_id: rollout.map_or(0, |r| r.render_id),
                    version: rollout.map(|r| r.version.clone()).unwrap_or_default(),
                    reached_at: moment(now.reached_at(number)),
                    failed_at: moment(now.failed_at(number)),
                    written_ms,
                });
            }
            more = clusters.len() > max_cluster_rows;
        }
        RecordChanges {
            records,
            clusters,
            more,
            next,
        }
    }

    /// Takes `changes` as written.
    pub fn written(&mut self, changes: RecordChanges) {
        *self = changes.next;
    }
}

/// What `row` records of its rollout's progress beyond its clusters' moments.
fn recorded_progress(row: &RolloutRecordRow) -> RecordedProgress {
    let at = |t: u32| (t > 0).then_some(t);
    let milestones = if row.completed_at > 0 {
        [
            row.reached_50,
            row.reached_90,
            row.reached_99,
            row.reached_100,
        ]
        .map(at)
    } else {
        [None; 4]
    };
    RecordedProgress {
        milestones,
        superseded_before_complete: row.superseded_before_complete != 0,
        failed_before_reaching: row.failed_before_reaching,
        last_reached: at(row.last_reached_at),
    }
}

impl Fleet {
    /// Takes back the rollouts' progress the hub recorded (`rollout_records`,
    /// `rollout_clusters`) into rollouts rebuilt from the version changes: each cluster's
    /// moments where it still belongs to the rollout they were recorded for, in time order,
    /// then each rollout's fixed milestones and the failures of clusters that left it.
    /// Returns how many clusters' moments were taken back.
    pub(crate) async fn restore_rollouts(
        &mut self,
        store: &Store,
    ) -> fleetscope_store::Result<u64> {
        let started = std::time::Instant::now();
        let records = store.rollout_record_rows().await?;
        let (mut restored, mut reading) = (0, std::time::Duration::ZERO);
        let names: Vec<String> = self.rollouts.apps.keys().cloned().collect();
        for name in names {
            let read = std::time::Instant::now();
            let rows = store.rollout_cluster_rows(&name).await?;
            reading += read.elapsed();
            restored += self.restore_app(&name, rows, &records);
        }
        tracing::info!(
            clusters = restored,
            rollouts = records.len(),
            elapsed = ?started.elapsed(),
            reading = ?reading,
            "rollout history taken back from the records"
        );
        Ok(restored)
    }

    /// [`Fleet::restore_rollouts`] for app `name`: `rows` its newest `rollout_clusters` rows,
    /// `records` the newest `rollout_records` rows (of every app).
    pub(crate) fn restore_app(
        &mut self,
        name: &str,
        rows: Vec<RolloutClusterRow>,
        records: &[RolloutRecordRow],
    ) -> u64 {
        let Some(app) = self.rollouts.apps.get_mut(name) else {
            return 0;
        };
        let app = Arc::make_mut(app);
        // In any order: what a cluster's moments change (the counts, the last reaching) does
        // not depend on the others', and completion is worked out once they are all back.
        let mut restored = 0;
        for row in rows.iter().filter(|r| r.render_id > 0) {
            let Some(number) = self.clusters.slot(&row.cluster_id) else {
                continue;
            };
            app.restore_moments(
                number,
                row.render_id,
                &row.version,
                row.reached_at,
                row.failed_at,
            );
            restored += 1;
        }
        for row in records.iter().filter(|r| r.app == name) {
            if let Some(index) = app
                .rollouts
                .iter()
                .position(|r| r.render_id == row.render_id && r.version == row.version)
            {
                app.restore_progress(index, &recorded_progress(row));
            }
        }
        restored
    }
}

#[cfg(test)]
mod tests;
