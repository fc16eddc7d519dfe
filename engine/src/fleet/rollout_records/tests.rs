//! Rows written change by change add up to the rows of the whole fleet written at once.

use std::collections::BTreeMap;

use fleetscope_model::{DriftState, Timestamp};
use fleetscope_store::DesiredVersionChangeRow;
use proptest::prelude::*;

use super::*;
use crate::rollouts::progress::Seen;
use crate::rollouts::RenderInfo;

const CLUSTERS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
const VERSIONS: [&str; 4] = ["", "1.0", "2.0", "3.0"];
const APPS: [&str; 2] = ["api", "web"];

/// One step of a fleet's life.
#[derive(Debug, Clone)]
enum Step {
    /// A render setting each listed cluster's version of an app (`""`: not desired).
    Render(usize, Vec<(usize, usize)>),
    /// A cluster seen in sync (or failed) in an app's rollout at a moment.
    Seen(usize, usize, bool, u32),
    /// A cluster's pair state noted (changes nothing written).
    State(usize, usize, bool),
    /// The hub writes what changed, up to a bound of cluster rows.
    Write(usize),
    /// The clock moves (a rollout may stall).
    Clock(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            0..APPS.len(),
            proptest::collection::vec((0..CLUSTERS.len(), 0..VERSIONS.len()), 1..5)
        )
            .prop_map(|(a, set)| Step::Render(a, set)),
        (
            0..APPS.len(),
            0..CLUSTERS.len(),
            any::<bool>(),
            0u32..50_000
        )
            .prop_map(|(a, c, s, at)| Step::Seen(a, c, s, at)),
        (0..APPS.len(), 0..CLUSTERS.len(), any::<bool>())
            .prop_map(|(a, c, s)| Step::State(a, c, s)),
        (0usize..8).prop_map(Step::Write),
        (0u32..20_000).prop_map(Step::Clock),
    ]
}

/// Rows by key as the store keeps them (the newest written of each), clusters that belong to
/// no rollout and have no moments left out (a whole write has no row for them).
#[derive(Debug, Default, PartialEq)]
struct Stored {
    records: BTreeMap<(String, u64, String), RolloutRecordRow>,
    clusters: BTreeMap<(String, String), RolloutClusterRow>,
}

impl Stored {
    fn take(&mut self, changes: &RecordChanges) {
        for row in &changes.records {
            let row = RolloutRecordRow {
                written_ms: 0,
                ..row.clone()
            };
            self.records
                .insert((row.app.clone(), row.render_id, row.version.clone()), row);
        }
        for row in &changes.clusters {
            let row = RolloutClusterRow {
                written_ms: 0,
                ..row.clone()
            };
            let key = (row.app.clone(), row.cluster_id.clone());
            if row.render_id == 0 && row.reached_at == 0 && row.failed_at == 0 {
                self.clusters.remove(&key);
            } else {
                self.clusters.insert(key, row);
            }
        }
    }
}

/// Each render's change rows and where it came from, as applied.
type Renders = Vec<(Vec<DesiredVersionChangeRow>, BTreeMap<u64, RenderInfo>)>;

fn run(steps: &[Step]) -> (Stored, Stored) {
    let (stored, whole, _, _) = life(steps);
    (stored, whole)
}

/// The fleet after `steps`, the rows written change by change and at once at the end, and the
/// renders applied.
fn life(steps: &[Step]) -> (Stored, Stored, Fleet, Renders) {
    let mut renders: Renders = Vec::new();
    let mut fleet = Fleet {
        as_of: Timestamp(1_000),
        ..Fleet::default()
    };
    let mut desired: BTreeMap<(usize, String), String> = BTreeMap::new();
    let mut render_id = 0u64;
    let mut recorder = RolloutRecorder::default();
    let mut stored = Stored::default();
    let policy = RolloutPolicy::default();
    for step in steps {
        match step {
            Step::Render(app, set) => {
                render_id += 1;
                let mut rows = Vec::new();
                for &(c, v) in set {
                    let cluster = CLUSTERS[c];
                    let from = desired
                        .get(&(*app, cluster.to_owned()))
                        .cloned()
                        .unwrap_or_default();
                    let to = VERSIONS[v].to_owned();
                    if from == to
                        || rows
                            .iter()
                            .any(|r: &DesiredVersionChangeRow| r.cluster_id == cluster)
                    {
                        continue;
                    }
                    rows.push(DesiredVersionChangeRow {
                        app: APPS[*app].into(),
                        render_id,
                        cluster_id: cluster.into(),
                        from_version: from,
                        to_version: to.clone(),
                    });
                    desired.insert((*app, cluster.to_owned()), to);
                }
                rows.sort();
                let origins = BTreeMap::from([(
                    render_id,
                    RenderInfo {
                        rendered_at: Some(render_id as u32 * 100),
                        platform_commit: format!("p{render_id}"),
                        committed_at: Some(render_id as u32 * 100 - 10),
                    },
                )]);
                fleet.apply_version_changes(&rows, &origins);
                renders.push((rows, origins));
            }
            Step::Seen(app, c, in_sync, at) => {
                let slot = fleet.clusters.slot_or_add(CLUSTERS[*c]);
                let seen = if *in_sync { Seen::InSync } else { Seen::Failed };
                if let Some(app) = fleet.rollouts.apps.get_mut(APPS[*app]) {
                    Arc::make_mut(app).observe(slot, seen, *at);
                }
            }
            Step::State(app, c, in_sync) => {
                let slot = fleet.clusters.slot_or_add(CLUSTERS[*c]);
                let state = if *in_sync {
                    DriftState::InSync
                } else {
                    DriftState::Failed
                };
                if let Some(app) = fleet.rollouts.apps.get_mut(APPS[*app]) {
                    Arc::make_mut(app).set_state(slot, state);
                }
            }
            Step::Write(bound) => {
                let changes = recorder.changes(&fleet, &policy, 7, *bound);
                stored.take(&changes);
                recorder.written(changes);
            }
            Step::Clock(by) => fleet.as_of = Timestamp(fleet.as_of.seconds() + i64::from(*by)),
        }
    }
    // Writes bounded to one row go on until nothing is left.
    loop {
        let changes = recorder.changes(&fleet, &policy, 8, 1);
        stored.take(&changes);
        let more = changes.more;
        recorder.written(changes);
        if !more {
            break;
        }
    }
    let mut whole = Stored::default();
    whole.take(&RolloutRecorder::default().changes(&fleet, &policy, 9, usize::MAX));
    (stored, whole, fleet, renders)
}

/// Each app's rollouts, and each (app, cluster id)'s rollout and moments.
type Progress = (
    BTreeMap<String, Vec<Rollout>>,
    BTreeMap<(String, String), (u64, String, Option<u32>, Option<u32>)>,
);

fn progress_of(fleet: &Fleet) -> Progress {
    let mut rollouts = BTreeMap::new();
    let mut clusters = BTreeMap::new();
    for (name, app) in &fleet.rollouts.apps {
        rollouts.insert(name.clone(), app.rollouts.clone());
        for (number, owner) in app.owners() {
            let rollout = &app.rollouts[owner];
            clusters.insert(
                (name.clone(), fleet.clusters.id(number).to_string()),
                (
                    rollout.render_id,
                    rollout.version.clone(),
                    app.reached_at(number),
                    app.failed_at(number),
                ),
            );
        }
    }
    (rollouts, clusters)
}

/// A fleet that starts again: the renders applied afresh, then the rows written taken back.
fn started_again(renders: &Renders, stored: &Stored) -> Fleet {
    let mut fleet = Fleet::default();
    for (rows, origins) in renders {
        fleet.apply_version_changes(rows, origins);
    }
    let records: Vec<RolloutRecordRow> = stored.records.values().cloned().collect();
    for app in APPS {
        let rows: Vec<RolloutClusterRow> = stored
            .clusters
            .values()
            .filter(|r| r.app == app)
            .cloned()
            .collect();
        fleet.restore_app(app, rows, &records);
    }
    fleet
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rows_written_change_by_change_equal_the_whole_fleet_written_at_once(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        let (stored, whole) = run(&steps);
        prop_assert_eq!(stored, whole);
    }

    #[test]
    fn a_fleet_started_again_from_the_rows_written_has_the_progress_it_had(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        let (stored, _, fleet, renders) = life(&steps);
        let again = started_again(&renders, &stored);
        prop_assert_eq!(progress_of(&again), progress_of(&fleet));
    }
}

#[test]
fn a_write_with_nothing_changed_writes_nothing_and_a_move_writes_its_cluster() {
    let steps = [
        Step::Render(1, vec![(0, 1), (1, 1)]),
        Step::Write(usize::MAX),
    ];
    let (stored, whole) = run(&steps);
    assert_eq!(stored, whole);
    assert_eq!(stored.records.len(), 1);
    assert_eq!(stored.clusters.len(), 2);

    let mut fleet = Fleet::default();
    let rows: Vec<DesiredVersionChangeRow> = ["a", "b"]
        .iter()
        .map(|c| DesiredVersionChangeRow {
            app: "web".into(),
            render_id: 1,
            cluster_id: (*c).into(),
            from_version: String::new(),
            to_version: "1.0".into(),
        })
        .collect();
    fleet.apply_version_changes(&rows, &BTreeMap::new());
    let policy = RolloutPolicy::default();
    let mut recorder = RolloutRecorder::default();
    let first = recorder.changes(&fleet, &policy, 1, usize::MAX);
    assert_eq!((first.records.len(), first.clusters.len()), (1, 2));
    recorder.written(first);
    assert!(recorder.changes(&fleet, &policy, 2, usize::MAX).is_empty());
    let slot = fleet.clusters.slot_or_add("b");
    Arc::make_mut(fleet.rollouts.apps.get_mut("web").unwrap()).observe(slot, Seen::InSync, 50);
    let next = recorder.changes(&fleet, &policy, 3, usize::MAX);
    assert_eq!(next.clusters.len(), 1, "only the cluster that reached it");
    assert_eq!(
        (
            next.clusters[0].cluster_id.as_str(),
            next.clusters[0].reached_at
        ),
        ("b", 50)
    );
    assert_eq!(next.records.len(), 1, "its rollout's counts moved");
    assert_eq!(next.records[0].reached, 1);
}
