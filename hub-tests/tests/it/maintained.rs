//! The hub keeps every pair's drift state and every group's counters current as rows,
//! heartbeats, renders, inventory changes and the clock arrive. This drives random sequences
//! of all of them through the index and, after every step, requires the maintained states and
//! counters to equal a classification of the whole fleet from scratch with the model's
//! `classify`, and every answer built on them (rollups with each kind of filter, the version
//! inventory, the environment table) to equal the same answer computed by scanning.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use fleetscope_engine::insights::{self, FailuresQuestion};
use fleetscope_engine::{Counts, Filter, Fleet, VersionsByGroup};
use fleetscope_model::{DriftPolicy, DriftState, GroupPath, Timestamp};
use fleetscope_store::{ClusterRow, DesiredRow, HeartbeatRow, ObservedRow};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const NOW: i64 = 1_800_000_000;
const CLUSTERS: &[&str] = &["c0", "c1", "c2", "c3", "c4", "c5"];
const GROUPS: &[&str] = &[
    "emea/de/berlin",
    "emea/de/munich",
    "emea/fr",
    "amer/us/ny",
    "amer",
];
const ENVIRONMENTS: &[&str] = &["prod", "staging"];
// Forty apps, so that a cluster's counted pairs (kept in chunks of 36) and a cell's app
// entries (in chunks of at most 14) span several chunks, split and shrink.
const APPS: &[&str] = &[
    "checkout", "payments", "search", "app-03", "app-04", "app-05", "app-06", "app-07", "app-08",
    "app-09", "app-10", "app-11", "app-12", "app-13", "app-14", "app-15", "app-16", "app-17",
    "app-18", "app-19", "app-20", "app-21", "app-22", "app-23", "app-24", "app-25", "app-26",
    "app-27", "app-28", "app-29", "app-30", "app-31", "app-32", "app-33", "app-34", "app-35",
    "app-36", "app-37", "app-38", "app-39",
];
const VERSIONS: &[&str] = &["1.0.0", "1.1.0"];
const HASHES: &[&str] = &["sha256:aa", "sha256:bb", ""];
const RENDER_GROUPS: &[&str] = &["rg-a", "rg-b"];
const HEALTH: &[&str] = &["healthy", "progressing", "degraded", "unknown"];
const SYNC: &[&str] = &["synced", "out_of_sync", "unknown"];

#[derive(Debug, Clone)]
enum Step {
    /// The whole inventory: which clusters are registered, in which group and environment.
    Inventory(Vec<(usize, usize, usize, bool)>),
    /// Render group membership of every cluster (`None`: no membership row).
    Membership(Vec<Option<usize>>),
    /// Desired state of one render group: per app, `None` or (version, hash, seconds ago).
    Desired(usize, Vec<Option<(usize, usize, i64)>>),
    Observed {
        cluster: usize,
        object: usize,
        app: usize,
        version: usize,
        hash: usize,
        health: usize,
        sync: usize,
        transitioned: i64,
        deleted: bool,
    },
    Heartbeat(usize, i64),
    /// Move the clock by this many seconds (negative: a clock stepped back).
    Clock(i64),
    Policy(i64, i64),
}

fn step() -> impl Strategy<Value = Step> {
    let c = 0..CLUSTERS.len();
    prop_oneof![
        1 => proptest::collection::vec(
            (0..CLUSTERS.len(), 0..GROUPS.len(), 0..ENVIRONMENTS.len(), proptest::bool::weighted(0.85)),
            0..CLUSTERS.len() + 1
        )
        .prop_map(Step::Inventory),
        1 => proptest::collection::vec(proptest::option::weighted(0.85, 0..RENDER_GROUPS.len()), CLUSTERS.len())
            .prop_map(Step::Membership),
        2 => (
            0..RENDER_GROUPS.len(),
            proptest::collection::vec(
                proptest::option::weighted(0.7, (0..VERSIONS.len(), 0..HASHES.len(), -30i64..300)),
                APPS.len()
            )
        )
            .prop_map(|(g, apps)| Step::Desired(g, apps)),
        6 => (
            c.clone(),
            0..4usize,
            // Half the objects run one of three apps, so that their pairs are on many clusters
            // at once and the insights have clusters to compare.
            prop_oneof![0..3usize, 0..APPS.len()],
            0..VERSIONS.len(),
            0..HASHES.len(),
            0..HEALTH.len(),
            0..SYNC.len(),
            -200i64..60,
            proptest::bool::weighted(0.1)
        )
            .prop_map(|(cluster, object, app, version, hash, health, sync, transitioned, deleted)| Step::Observed {
                cluster,
                object,
                app,
                version,
                hash,
                health,
                sync,
                transitioned,
                deleted,
            }),
        3 => (c, -20i64..5).prop_map(|(cluster, ago)| Step::Heartbeat(cluster, ago)),
        4 => prop_oneof![8 => 0i64..120, 1 => 120i64..1_000, 1 => -100i64..0].prop_map(Step::Clock),
        1 => (30i64..200, 0i64..200).prop_map(|(s, g)| Step::Policy(s, g)),
    ]
}

/// What the run saw, to show that the steps reach every state and the clock's transitions.
#[derive(Debug, Default)]
struct Seen {
    states: BTreeSet<&'static str>,
    /// What the failure insights counted: clusters on each side and on neither, and values
    /// counted on each side.
    sides: BTreeSet<&'static str>,
    /// Cases in which some value was counted on clusters in sync.
    cases_with_values: usize,
    /// Clock steps that changed some state with nothing else changing.
    timed_changes: usize,
    steps: usize,
}

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

struct Driver {
    fleet: Fleet,
    now: i64,
    policy: DriftPolicy,
    seq: u64,
}

impl Driver {
    fn apply(&mut self, step: &Step) {
        match step {
            Step::Inventory(entries) => {
                let mut rows = BTreeMap::new();
                for (cluster, group, env, present) in entries {
                    // A label shared by some clusters, which moves with their group.
                    let site = format!("site-{}", (cluster + group) % 3);
                    let group = GroupPath::parse(GROUPS[*group]).unwrap();
                    rows.insert(
                        *cluster,
                        ClusterRow {
                            cluster_id: CLUSTERS[*cluster].into(),
                            group_path: group.as_str().into(),
                            group_prefixes: group
                                .prefixes()
                                .iter()
                                .map(|p| p.as_str().to_owned())
                                .collect(),
                            environment: ENVIRONMENTS[*env].into(),
                            reconciler: if cluster % 3 == 0 { "argocd" } else { "flux" }.into(),
                            label_keys: vec![
                                "tier".into(),
                                "fleetscope.io/cluster".into(),
                                "site".into(),
                            ],
                            label_values: vec![
                                if cluster % 2 == 0 { "edge" } else { "core" }.into(),
                                CLUSTERS[*cluster].into(),
                                site,
                            ],
                            updated_at: 1,
                            version: 1,
                            removed: u8::from(!present),
                        },
                    );
                }
                self.fleet.set_inventory(rows.into_values().collect());
            }
            Step::Membership(groups) => {
                let rows = groups
                    .iter()
                    .enumerate()
                    .filter_map(|(c, g)| {
                        g.map(|g| (CLUSTERS[c].to_owned(), RENDER_GROUPS[g].to_owned(), false))
                    })
                    .collect();
                self.fleet.set_membership(rows);
            }
            Step::Desired(group, apps) => {
                // The other render group keeps what it has: rebuild it from the fleet.
                let mut rows = Vec::new();
                for (g, recs) in self.fleet.desired.iter() {
                    let name = self.fleet.symbols.text(*g).to_owned();
                    if name == RENDER_GROUPS[*group] {
                        continue;
                    }
                    for d in recs {
                        rows.push(DesiredRow {
                            render_group: name.clone(),
                            app: self.fleet.symbols.text(d.app).into(),
                            render_id: d.render_id,
                            version: self.fleet.symbols.text(d.version).into(),
                            content_hash: self.fleet.symbols.text(d.content_hash).into(),
                            kind: "HelmRelease".into(),
                            namespace: "apps".into(),
                            reasons: vec![],
                            commit: "c".into(),
                            desired_since: d.since,
                            removed: 0,
                        });
                    }
                }
                for (app, want) in apps.iter().enumerate() {
                    if let Some((version, hash, ago)) = want {
                        rows.push(DesiredRow {
                            render_group: RENDER_GROUPS[*group].into(),
                            app: APPS[app].into(),
                            render_id: 1,
                            version: VERSIONS[*version].into(),
                            content_hash: HASHES[*hash].into(),
                            kind: "HelmRelease".into(),
                            namespace: "apps".into(),
                            reasons: vec![],
                            commit: "c".into(),
                            desired_since: (self.now - ago) as u32,
                            removed: 0,
                        });
                    }
                }
                self.fleet.set_desired(rows);
            }
            Step::Observed {
                cluster,
                object,
                app,
                version,
                hash,
                health,
                sync,
                transitioned,
                deleted,
            } => {
                self.seq += 1;
                self.fleet.apply_observed(&ObservedRow {
                    cluster_id: CLUSTERS[*cluster].into(),
                    object_kind: if *object == 3 {
                        "Application"
                    } else {
                        "HelmRelease"
                    }
                    .into(),
                    object_namespace: "apps".into(),
                    object_name: format!("object-{object}"),
                    app: APPS[*app].into(),
                    version: VERSIONS[*version].into(),
                    content_hash: HASHES[*hash].into(),
                    applied_revision: VERSIONS[*version].into(),
                    health: HEALTH[*health].into(),
                    sync: SYNC[*sync].into(),
                    reason: String::new(),
                    message: String::new(),
                    transitioned_at: (self.now + transitioned) as u32,
                    observed_at: self.now as u32,
                    received_at: self.now as u32,
                    change_seq: self.seq,
                    deleted: u8::from(*deleted),
                });
            }
            Step::Heartbeat(cluster, ago) => {
                self.fleet.apply_heartbeats(vec![HeartbeatRow {
                    cluster_id: CLUSTERS[*cluster].into(),
                    seen_at: (self.now + ago) as u32,
                    agent_version: if ago % 2 == 0 { "0.1.0" } else { "0.2.0" }.into(),
                    reconciler_names: vec![],
                    reconciler_versions: vec![],
                }]);
            }
            Step::Clock(by) => self.now += by,
            Step::Policy(stale, grace) => {
                self.policy = DriftPolicy {
                    stale_after_seconds: *stale,
                    progress_grace_seconds: *grace,
                }
            }
        }
        self.fleet.advance(Timestamp(self.now), &self.policy);
    }
}

fn filters() -> Vec<Filter> {
    let group = |g: &str| GroupPath::parse(g).unwrap();
    vec![
        Filter::default(),
        Filter {
            groups: vec![group("emea")],
            ..Filter::default()
        },
        Filter {
            groups: vec![group("emea"), group("emea/de")],
            ..Filter::default()
        },
        Filter {
            groups: vec![group("emea"), group("amer")],
            ..Filter::default()
        },
        Filter {
            environment: Some("prod".into()),
            ..Filter::default()
        },
        Filter {
            app: Some("checkout".into()),
            groups: vec![group("amer")],
            ..Filter::default()
        },
        Filter {
            labels: vec![("tier".into(), "edge".into())],
            app: Some("search".into()),
            ..Filter::default()
        },
    ]
}

/// The summary rows the API serves, computed by classifying everything at `now`.
fn reference_summary(
    fleet: &Fleet,
    now: Timestamp,
    policy: &DriftPolicy,
    filter: &Filter,
) -> BTreeMap<String, Counts> {
    let mut rollup = fleet.rollup(now, policy, filter);
    rollup.retain(|g, _| {
        g.is_empty()
            || GroupPath::parse(g).is_ok_and(|g| filter.groups.iter().all(|w| g.is_within(w)))
    });
    // Groups whose every count is zero are not rows.
    rollup.retain(|g, c| g.is_empty() || c.clusters > 0);
    rollup
}

/// The version inventory of one app, by scanning every cluster's pair.
fn reference_versions(
    fleet: &Fleet,
    now: Timestamp,
    policy: &DriftPolicy,
    filter: &Filter,
    app: &str,
    depth: usize,
) -> (VersionsByGroup, VersionsByGroup) {
    let mut desired = VersionsByGroup::new();
    let mut running = VersionsByGroup::new();
    let Some(app) = fleet.symbols.find(app) else {
        return (desired, running);
    };
    for cluster in fleet.clusters.values() {
        if !fleet.cluster_matches(cluster, filter) {
            continue;
        }
        let Some(pair) = fleet.pair(cluster, app, now, policy) else {
            continue;
        };
        let info = cluster.info.as_ref().unwrap();
        let group: String = info
            .group
            .segments()
            .take(depth)
            .collect::<Vec<_>>()
            .join("/");
        for (side, v) in [
            (&mut desired, pair.desired.map(|d| d.version)),
            (&mut running, pair.observed.map(|o| o.version)),
        ] {
            if let Some(v) = v {
                let entry = side.entry(fleet.symbols.text(v).to_owned()).or_default();
                entry.0 += 1;
                *entry.1.entry(group.clone()).or_default() += 1;
            }
        }
    }
    (desired, running)
}

fn check(driver: &Driver, seen: &mut Seen) -> Result<(), TestCaseError> {
    let fleet = &driver.fleet;
    let now = Timestamp(driver.now);
    let policy = &driver.policy;
    let differences = fleet.check_maintained();
    prop_assert!(differences.is_empty(), "{differences:#?}");
    let snapshot = fleet.snapshot();
    prop_assert!(snapshot.valid_at(now, policy));
    for (_, cluster) in snapshot.clusters.iter() {
        let maintained: Vec<(u32, DriftState)> = snapshot
            .current_pairs(cluster)
            .iter()
            .map(|p| (p.app, p.state))
            .collect();
        let classified: Vec<(u32, DriftState)> = snapshot
            .pairs(cluster, now, policy)
            .iter()
            .map(|p| (p.app, p.state))
            .collect();
        prop_assert_eq!(&maintained, &classified);
        for (_, state) in classified {
            seen.states.insert(state.as_str());
        }
        prop_assert_eq!(
            cluster.is_stale_now(),
            cluster.info.is_some() && Fleet::is_stale(cluster, now, policy)
        );
    }
    for filter in filters() {
        for app in ["checkout", "payments", "search", "app-20", "not-an-app"] {
            let question = FailuresQuestion {
                filter: filter.clone(),
                app: app.into(),
                version: None,
                group: None,
                limit: 100,
            };
            let sorted = |mut counts: insights::SideCounts| {
                counts.values.sort_by_key(|(key, _, _)| *key);
                counts
            };
            let kept = sorted(insights::counts(&snapshot, &question));
            prop_assert_eq!(
                &kept,
                &sorted(insights::counts_scanned(&snapshot, &question)),
                "{:?} {}",
                filter,
                app
            );
            if kept.values.iter().any(|(_, f, _)| *f > 0) {
                seen.sides.insert("values of failing clusters");
            }
            if kept.values.iter().any(|(_, _, s)| *s > 0) {
                seen.sides.insert("values of clusters in sync");
            }
            let scanned = insights::failures_scanned(&snapshot, &question);
            for (state, n) in [
                ("failing", scanned.failing),
                ("in_sync", scanned.in_sync),
                ("other", scanned.other_states),
            ] {
                if n > 0 {
                    seen.sides.insert(state);
                }
            }
            prop_assert_eq!(
                insights::failures(&snapshot, &question),
                scanned,
                "{:?} {}",
                filter,
                app
            );
        }
        prop_assert_eq!(
            snapshot.summary(&filter),
            reference_summary(&snapshot, now, policy, &filter),
            "{:?}",
            filter
        );
        for depth in [1, 2, 3] {
            if let Some(counted) = snapshot.versions_by_group(
                &filter,
                snapshot.symbols.find("checkout").unwrap_or(u32::MAX),
                depth,
            ) {
                prop_assert_eq!(
                    counted,
                    reference_versions(&snapshot, now, policy, &filter, "checkout", depth),
                    "{:?} depth {}",
                    filter,
                    depth
                );
            }
        }
    }
    Ok(())
}

/// Six clusters in one group running `checkout` as desired, three failing and three in
/// sync: values shared by clusters on each side, which random sequences reach only now and
/// then.
fn both_sides_with_values() -> Vec<Step> {
    let mut steps = vec![
        Step::Inventory((0..CLUSTERS.len()).map(|c| (c, 0, 0, true)).collect()),
        Step::Membership(vec![Some(0); CLUSTERS.len()]),
        Step::Desired(
            0,
            (0..APPS.len())
                .map(|a| (a == 0).then_some((0, 0, 10)))
                .collect(),
        ),
    ];
    for cluster in 0..CLUSTERS.len() {
        steps.push(Step::Heartbeat(cluster, 0));
        steps.push(Step::Observed {
            cluster,
            object: 0,
            app: 0,
            version: 0,
            hash: 0,
            // Degraded on the first half, healthy on the rest; synced on all.
            health: if cluster < CLUSTERS.len() / 2 { 2 } else { 0 },
            sync: 0,
            transitioned: -100,
            deleted: false,
        });
    }
    steps
}

#[test]
fn maintained_states_equal_a_full_classification_after_every_step() {
    *SEEN.lock().unwrap() = Some(Seen::default());
    // A fixed sequence first, so that the values counted on both sides are compared in every
    // run, whatever the random sequences reach.
    {
        let mut driver = Driver {
            fleet: Fleet::default(),
            now: NOW,
            policy: DriftPolicy {
                stale_after_seconds: 60,
                progress_grace_seconds: 90,
            },
            seq: 0,
        };
        let mut seen = Seen::default();
        for step in &both_sides_with_values() {
            driver.apply(step);
            check(&driver, &mut seen).unwrap();
        }
        assert!(
            seen.sides.contains("values of failing clusters")
                && seen.sides.contains("values of clusters in sync"),
            "the fixed sequence counted {:?}",
            seen.sides
        );
        let mut all = SEEN.lock().unwrap();
        all.as_mut().unwrap().sides.extend(seen.sides);
    }
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&proptest::collection::vec(step(), 1..60), |steps| {
            let mut driver = Driver {
                fleet: Fleet::default(),
                now: NOW,
                policy: DriftPolicy {
                    stale_after_seconds: 60,
                    progress_grace_seconds: 90,
                },
                seq: 0,
            };
            let mut seen = Seen::default();
            for step in &steps {
                let before = driver.fleet.generation;
                driver.apply(step);
                if matches!(step, Step::Clock(by) if *by > 0) && driver.fleet.generation != before {
                    seen.timed_changes += 1;
                }
                seen.steps += 1;
                check(&driver, &mut seen)?;
            }
            let mut all = SEEN.lock().unwrap();
            let all = all.as_mut().unwrap();
            all.states.extend(seen.states);
            if seen.sides.contains("values of clusters in sync") {
                all.cases_with_values += 1;
            }
            all.sides.extend(seen.sides);
            all.timed_changes += seen.timed_changes;
            all.steps += seen.steps;
            Ok(())
        })
        .unwrap();
    let seen = SEEN.lock().unwrap().take().unwrap();
    // The sequences reach every state, and the clock alone changes states many times.
    let every: BTreeSet<&str> = DriftState::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(seen.states, every, "states reached in {} steps", seen.steps);
    // The insights compared clusters on both sides and on neither, and counted values on
    // each side (the fixed sequence makes sure of the values).
    assert_eq!(
        seen.sides,
        BTreeSet::from([
            "failing",
            "in_sync",
            "other",
            "values of failing clusters",
            "values of clusters in sync"
        ]),
        "what the insights saw"
    );
    assert!(
        seen.timed_changes >= 100,
        "only {} clock steps changed a state",
        seen.timed_changes
    );
    println!(
        "{} steps, {} clock steps that changed states, states reached: {:?}, insights: {:?} ({} cases with values counted in sync)",
        seen.steps, seen.timed_changes, seen.states, seen.sides, seen.cases_with_values
    );
}
