//! The drift grid: one cluster per combination of heartbeat age, desired state and observed
//! state, written as real rows (with superseded and duplicated rows, unmanaged objects and
//! sources mixed in), and the state the model's `classify` gives each. Comparing the store's
//! answer with it proves the SQL and the Rust rules are one definition.

use fleetscope_model::state::ObjectKind;
use fleetscope_model::{
    classify, DesiredForDrift, DriftInput, DriftPolicy, DriftState, Health, ObservedForDrift,
    SyncStatus, Timestamp,
};
use fleetscope_store::{
    ClusterRow, DesiredRow, HeartbeatRow, MemberSinceRow, MembershipRow, ObservedRow,
    ReasonMemberRow, ReasonSetRow, RollupSnapshotRow, SinceSetRow,
};

use crate::sql_literal::table_inserts;

/// The moment every grid case is classified at.
pub const NOW: Timestamp = Timestamp(1_800_000_000);
pub const POLICY: DriftPolicy = DriftPolicy {
    stale_after_seconds: 600,
    progress_grace_seconds: 900,
};
pub const APP: &str = "checkout";
const HASH_A: &str = "sha256:aaaa";
const HASH_B: &str = "sha256:bbbb";

#[derive(Debug, Clone)]
pub struct DesiredSpec {
    pub version: &'static str,
    pub hash: &'static str,
    pub since: Timestamp,
}

#[derive(Debug, Clone)]
pub struct ObservedSpec {
    pub version: &'static str,
    pub hash: &'static str,
    pub health: Health,
    pub sync: SyncStatus,
    pub transitioned_at: Timestamp,
    pub deleted: bool,
}

#[derive(Debug, Clone)]
pub struct GridCase {
    pub cluster_id: String,
    pub group_path: String,
    pub last_seen: Option<Timestamp>,
    pub desired: Option<DesiredSpec>,
    pub observed: Option<ObservedSpec>,
}

impl GridCase {
    /// What the model says about this case.
    pub fn expected(&self) -> DriftState {
        let desired = self.desired.as_ref().map(|d| DesiredForDrift {
            version: d.version,
            content_hash: d.hash,
            since: d.since,
        });
        let observed = self
            .observed
            .as_ref()
            .filter(|o| !o.deleted)
            .map(|o| ObservedForDrift {
                version: o.version,
                content_hash: o.hash,
                health: o.health,
                sync: o.sync,
                transitioned_at: o.transitioned_at,
            });
        classify(
            &DriftInput {
                now: NOW,
                last_seen: self.last_seen,
                desired,
                observed,
            },
            &POLICY,
        )
    }

    /// Whether the pair exists at all (a pair with neither side is not listed by the store).
    pub fn has_pair(&self) -> bool {
        self.desired.is_some() || self.observed.as_ref().is_some_and(|o| !o.deleted)
    }

    fn render_group(&self) -> String {
        format!("rg-{}", self.cluster_id)
    }
}

fn ago(seconds: i64) -> Timestamp {
    NOW.plus_seconds(-seconds)
}

/// Every case of the grid, in cluster id order.
pub fn cases() -> Vec<GridCase> {
    let last_seen = [
        None,
        Some(ago(10)),
        Some(ago(600)),
        Some(ago(601)),
        Some(NOW.plus_seconds(45)),
    ];
    let desired = [
        None,
        Some(DesiredSpec {
            version: "1.0.0",
            hash: HASH_A,
            since: ago(7200),
        }),
        Some(DesiredSpec {
            version: "1.0.0",
            hash: HASH_A,
            since: ago(60),
        }),
        Some(DesiredSpec {
            version: "1.0.0",
            hash: HASH_A,
            since: ago(900),
        }),
        Some(DesiredSpec {
            version: "1.0.0",
            hash: HASH_B,
            since: ago(7200),
        }),
        Some(DesiredSpec {
            version: "1.1.0",
            hash: HASH_A,
            since: NOW.plus_seconds(30),
        }),
    ];
    let observed_spec = |version, hash, health, sync, transitioned_at| {
        Some(ObservedSpec {
            version,
            hash,
            health,
            sync,
            transitioned_at,
            deleted: false,
        })
    };
    let observed = [
        None,
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Healthy,
            SyncStatus::Synced,
            ago(3600),
        ),
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Healthy,
            SyncStatus::Unknown,
            ago(3600),
        ),
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Healthy,
            SyncStatus::OutOfSync,
            ago(3600),
        ),
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Degraded,
            SyncStatus::Synced,
            ago(30),
        ),
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Progressing,
            SyncStatus::Synced,
            ago(3600),
        ),
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Progressing,
            SyncStatus::Synced,
            ago(30),
        ),
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Progressing,
            SyncStatus::Synced,
            NOW.plus_seconds(600),
        ),
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Unknown,
            SyncStatus::Unknown,
            ago(900),
        ),
        observed_spec(
            "1.0.0",
            HASH_A,
            Health::Suspended,
            SyncStatus::Synced,
            ago(3600),
        ),
        observed_spec("1.0.0", "", Health::Healthy, SyncStatus::Synced, ago(3600)),
        observed_spec(
            "0.9.0",
            HASH_A,
            Health::Healthy,
            SyncStatus::Synced,
            ago(3600),
        ),
        Some(ObservedSpec {
            version: "1.0.0",
            hash: HASH_A,
            health: Health::Healthy,
            sync: SyncStatus::Synced,
            transitioned_at: ago(3600),
            deleted: true,
        }),
    ];
    let mut cases = Vec::new();
    for seen in &last_seen {
        for want in &desired {
            for got in &observed {
                let n = cases.len();
                cases.push(GridCase {
                    cluster_id: format!("case-{n:04}"),
                    group_path: format!("grid/g{}/s{}", n % 3, n % 2),
                    last_seen: *seen,
                    desired: want.clone(),
                    observed: got.clone(),
                });
            }
        }
    }
    cases
}

/// All rows of the grid, with history: superseded desired rows and memberships, older and
/// duplicated observed rows, unmanaged objects and source objects, which must all be ignored.
#[derive(Debug, Default)]
pub struct GridRows {
    pub clusters: Vec<ClusterRow>,
    pub heartbeats: Vec<HeartbeatRow>,
    pub members: Vec<MembershipRow>,
    pub desired: Vec<DesiredRow>,
    /// Every cluster's reason set: an older one (render 1) superseded by render 2's.
    pub reason_members: Vec<ReasonMemberRow>,
    /// The two reason sets: the older one, removed by render 2, and the current one.
    pub reason_sets: Vec<ReasonSetRow>,
    pub observed: Vec<ObservedRow>,
    /// Since sets: every third desired case takes its `since` from one (its render group's row
    /// says a later time that must be ignored); the one after it has a since set on its older,
    /// superseded membership only (a decoy that must be ignored); the one after that has a
    /// since set without its app (its render group's time holds).
    pub since_sets: Vec<SinceSetRow>,
    pub member_since: Vec<MemberSinceRow>,
    /// A few trend snapshots (not derived from the cases; they only feed the trend query).
    pub snapshots: Vec<RollupSnapshotRow>,
    /// The two renders the desired rows and memberships name (render 2 recorded twice, as an
    /// unmerged duplicate would be).
    pub renders: Vec<fleetscope_store::RenderRow>,
    /// What each of the two renders wrote.
    pub render_contents: Vec<fleetscope_store::RenderContentsRow>,
    /// The match rules each of the two renders published (the second's is the newest).
    pub match_rules: Vec<fleetscope_store::MatchRulesRow>,
    /// How many distinct version change rows each of the two renders wrote.
    pub change_counts: Vec<fleetscope_store::RenderChangeCountRow>,
    /// The hub's records of the rollout render 2 started: the rollout written twice (the later
    /// write newer), and each of its clusters, the first five written twice.
    pub rollout_records: Vec<fleetscope_store::RolloutRecordRow>,
    pub rollout_clusters: Vec<fleetscope_store::RolloutClusterRow>,
    /// Each case's desired version changes: from none to 0.1.0 in render 1, then to its own
    /// version (or away) in render 2 where that differs; the first written twice.
    pub version_changes: Vec<fleetscope_store::DesiredVersionChangeRow>,
    /// When the two renders' platform commits were made (the second recorded twice).
    pub platform_commits: Vec<fleetscope_store::PlatformCommitRow>,
    /// Two collectors' arrival horizons, the first published twice (the newer publication
    /// carries the later horizon).
    pub arrival_writers: Vec<fleetscope_store::ArrivalWriterRow>,
}

/// Every row of the grid for `cases`, with the history and noise [`GridRows`] describes.
pub fn rows(cases: &[GridCase]) -> GridRows {
    let mut rows = GridRows::default();
    rows.add_renders(cases.len());
    rows.add_platform_commits();
    rows.add_snapshots();
    rows.add_reason_sets();
    for (index, case) in cases.iter().enumerate() {
        rows.add_inventory(case);
        rows.add_desired(index, case);
        rows.add_observed(case);
    }
    rows.add_arrival_writers();
    rows.add_render_contents();
    rows.add_rollout_records();
    rows.add_match_rules();
    rows
}

/// A time that would change a case's state if it were read instead of the case's own
/// desired `since`.
fn decoy(since: Timestamp) -> Timestamp {
    if since.seconds() < NOW.seconds() - 900 {
        NOW.plus_seconds(-30)
    } else {
        ago(86_400)
    }
}

/// A desired row of the grid's app in `case`'s render group.
fn desired_row(
    case: &GridCase,
    version: &str,
    hash: &str,
    since: Timestamp,
    render_id: u64,
    removed: u8,
) -> DesiredRow {
    DesiredRow {
        render_group: case.render_group(),
        app: APP.into(),
        render_id,
        version: version.into(),
        content_hash: hash.into(),
        kind: "flux-kustomization".into(),
        namespace: "shop".into(),
        reasons: vec!["policy/all-stores".into()],
        commit: format!("commit-{render_id}"),
        desired_since: fleetscope_store::to_datetime(since),
        removed,
    }
}

/// An observed row of object `name` of `kind` on `case`'s cluster, stamped with `app`.
fn observed_row(
    case: &GridCase,
    kind: ObjectKind,
    name: &str,
    app: &str,
    o: &ObservedSpec,
    seq: u64,
) -> ObservedRow {
    ObservedRow {
        cluster_id: case.cluster_id.clone(),
        object_kind: kind.as_str().into(),
        object_namespace: "flux-system".into(),
        object_name: name.into(),
        app: app.into(),
        version: o.version.into(),
        content_hash: o.hash.into(),
        applied_revision: "main@sha1:abc".into(),
        health: o.health.as_str().into(),
        sync: o.sync.as_str().into(),
        reason: "ReconciliationSucceeded".into(),
        message: "it's applied".into(),
        transitioned_at: fleetscope_store::to_datetime(o.transitioned_at),
        observed_at: fleetscope_store::to_datetime(ago(5)),
        received_at: fleetscope_store::to_datetime(ago(4)),
        change_seq: seq,
        deleted: u8::from(o.deleted),
    }
}

impl GridRows {
    /// The two renders, render 2 recorded twice.
    fn add_renders(&mut self, cases: usize) {
        for (render_id, hours_ago) in [(1, 30), (2, 2), (2, 2)] {
            self.renders.push(fleetscope_store::RenderRow {
                render_id,
                commit: format!("commit-{render_id}"),
                platform_commit: format!("platform-{render_id}"),
                rendered_at: fleetscope_store::to_datetime(ago(hours_ago * 3_600)),
                summary: format!("render {render_id}"),
                render_groups: cases as u32,
                clusters: cases as u32,
                changed_items: 1,
            });
        }
    }

    /// When the renders' platform commits were made: 20 minutes before each render.
    fn add_platform_commits(&mut self) {
        for (render_id, hours_ago) in [(1, 30), (2, 2), (2, 2)] {
            self.platform_commits
                .push(fleetscope_store::PlatformCommitRow {
                    platform_commit: format!("platform-{render_id}"),
                    committed_at: fleetscope_store::to_datetime(ago(hours_ago * 3_600 + 1_200)),
                });
        }
    }

    /// The rollout records of the version changes of render 2 (once they are all added).
    fn add_rollout_records(&mut self) {
        let moved: Vec<&fleetscope_store::DesiredVersionChangeRow> = self
            .version_changes
            .iter()
            .filter(|c| c.render_id == 2 && !c.to_version.is_empty())
            .collect();
        let Some(version) = moved.first().map(|c| c.to_version.clone()) else {
            return;
        };
        let started = fleetscope_store::to_datetime(ago(2 * 3_600));
        for (i, change) in moved.iter().filter(|c| c.to_version == version).enumerate() {
            let row = fleetscope_store::RolloutClusterRow {
                app: APP.into(),
                cluster_id: change.cluster_id.clone(),
                render_id: 2,
                version: version.clone(),
                reached_at: if i % 2 == 0 {
                    started + 60 * i as u32
                } else {
                    0
                },
                failed_at: if i % 3 == 1 { started + 30 } else { 0 },
                written_ms: 1_000,
            };
            if i < 5 {
                self.rollout_clusters
                    .push(fleetscope_store::RolloutClusterRow {
                        render_id: 0,
                        version: String::new(),
                        written_ms: 500,
                        ..row.clone()
                    });
            }
            self.rollout_clusters.push(row);
        }
        let targeted = self
            .rollout_clusters
            .iter()
            .filter(|r| r.render_id == 2)
            .count() as u32;
        let record = fleetscope_store::RolloutRecordRow {
            app: APP.into(),
            render_id: 2,
            version,
            started_at: started,
            platform_commit: "platform-2".into(),
            committed_at: started - 1_200,
            status: "in_progress".into(),
            from_versions: vec!["0.1.0".into()],
            from_counts: vec![targeted],
            targeted_at_start: targeted,
            joined: 0,
            rolled_back: 0,
            superseded: 0,
            removed: 0,
            rolled_back_by: 0,
            superseded_by: 0,
            superseded_before_complete: 0,
            targeted,
            in_sync: targeted / 2,
            failed: 1,
            stale: 0,
            reached: targeted.div_ceil(2),
            failed_before_reaching: 1,
            reached_50: started + 60,
            reached_90: 0,
            reached_99: 0,
            reached_100: 0,
            completed_at: 0,
            last_reached_at: started + 60,
            written_ms: 2_000,
        };
        self.rollout_records
            .push(fleetscope_store::RolloutRecordRow {
                status: "stalled".into(),
                written_ms: 1_000,
                ..record.clone()
            });
        self.rollout_records.push(record);
    }

    /// The match rules of both renders: none at first, then one app's.
    fn add_match_rules(&mut self) {
        self.match_rules.push(fleetscope_store::MatchRulesRow {
            render_id: 1,
            digest: "44136fa355b3678a".into(),
            rules: r#"{"apps":[]}"#.into(),
        });
        self.match_rules.push(fleetscope_store::MatchRulesRow {
            render_id: 2,
            digest: "5c0f3e1a9b7d2c48".into(),
            rules:
                r#"{"apps":[{"app":"app-a","rules":[{"kind":"HelmRelease","name":"app-a-*"}]}]}"#
                    .into(),
        });
    }

    /// What each render wrote, counted from the rows (once they are all added).
    fn add_render_contents(&mut self) {
        for render_id in [1, 2] {
            let count = |ids: &mut dyn Iterator<Item = u64>| {
                ids.filter(|&id| id == render_id).count() as u32
            };
            self.render_contents
                .push(fleetscope_store::RenderContentsRow {
                    render_id,
                    desired: count(&mut self.desired.iter().map(|d| d.render_id)),
                    members: count(&mut self.members.iter().map(|m| m.render_id)),
                });
            let changes: std::collections::BTreeSet<_> = self
                .version_changes
                .iter()
                .filter(|c| c.render_id == render_id)
                .map(|c| (&c.app, &c.cluster_id))
                .collect();
            self.change_counts
                .push(fleetscope_store::RenderChangeCountRow {
                    render_id,
                    version_changes: changes.len() as u32,
                });
        }
    }

    /// The trend snapshots of the fleet and of the `grid` group.
    fn add_snapshots(&mut self) {
        for (hours_ago, group) in [(2, ""), (1, ""), (2, "grid"), (1, "grid"), (0, "grid")] {
            self.snapshots.push(RollupSnapshotRow {
                taken_at: fleetscope_store::to_datetime(ago(hours_ago * 3600)),
                group_path: group.into(),
                depth: u8::from(!group.is_empty()),
                clusters: 390,
                stale_clusters: 100 + hours_ago as u64,
                in_sync: 40,
                progressing: 30,
                failed: 20 + hours_ago as u64,
                out_of_sync: 10,
                missing: 5,
                unexpected: 4,
                stale: 3,
                unknown: 2,
            });
        }
    }

    /// The older reason set, its removal by render 2, and the current one.
    fn add_reason_sets(&mut self) {
        let reason_set =
            |name: &str, reasons: &[&str], pinned_by: &str, render_id, removed| ReasonSetRow {
                reason_set: name.into(),
                app: APP.into(),
                render_id,
                reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
                pinned_by: pinned_by.into(),
                removed,
            };
        self.reason_sets.extend([
            reason_set("rs-old", &["policy/all-stores"], "", 1, 0),
            reason_set("rs-old", &["policy/all-stores"], "", 2, 1),
            reason_set(
                "rs-grid",
                &["policy/all-stores", "policy/pin-prod"],
                "pin-prod",
                2,
                0,
            ),
        ]);
    }

    /// A case's cluster: its reason sets, its inventory row, its heartbeats (an older one and
    /// the last) and its memberships (an older one in another render group, superseded by
    /// render 2).
    fn add_inventory(&mut self, case: &GridCase) {
        for (reason_set, render_id) in [("rs-old", 1), ("rs-grid", 2)] {
            self.reason_members.push(ReasonMemberRow {
                cluster_id: case.cluster_id.clone(),
                reason_set: reason_set.into(),
                render_id,
                removed: 0,
            });
        }
        let group = fleetscope_model::GroupPath::parse(&case.group_path)
            .expect("grid group paths are valid");
        self.clusters.push(ClusterRow {
            cluster_id: case.cluster_id.clone(),
            group_path: case.group_path.clone(),
            group_prefixes: group.prefixes().into_iter().map(String::from).collect(),
            environment: "prod".into(),
            reconciler: "flux".into(),
            label_keys: vec!["tier".into()],
            label_values: vec!["gold".into()],
            updated_at: fleetscope_store::to_datetime(ago(86_400)),
            version: 2,
            removed: 0,
        });
        if let Some(seen) = case.last_seen {
            for seen_at in [seen.plus_seconds(-3000), seen] {
                self.heartbeats.push(HeartbeatRow {
                    cluster_id: case.cluster_id.clone(),
                    seen_at: fleetscope_store::to_datetime(seen_at),
                    agent_version: "0.1.0".into(),
                    reconciler_names: vec!["flux".into()],
                    reconciler_versions: vec!["v2.4.0".into()],
                });
            }
        }
        self.members.push(MembershipRow {
            cluster_id: case.cluster_id.clone(),
            render_group: "rg-old".into(),
            render_id: 1,
            removed: 0,
        });
        self.members.push(MembershipRow {
            cluster_id: case.cluster_id.clone(),
            render_group: case.render_group(),
            render_id: 2,
            removed: 0,
        });
    }

    /// A case's desired rows: render 1's, then render 2's (with the case's since set or its
    /// decoys), or render 2's removal when the case desires nothing.
    fn add_desired(&mut self, index: usize, case: &GridCase) {
        self.desired
            .push(desired_row(case, "0.1.0", HASH_B, ago(100_000), 1, 0));
        let change = |render_id, from: &str, to: &str| fleetscope_store::DesiredVersionChangeRow {
            app: APP.into(),
            render_id,
            cluster_id: case.cluster_id.clone(),
            from_version: from.into(),
            to_version: to.into(),
        };
        let copies = if index == 0 { 2 } else { 1 };
        for _ in 0..copies {
            self.version_changes.push(change(1, "", "0.1.0"));
        }
        let to = case.desired.as_ref().map_or("", |d| d.version);
        if to != "0.1.0" {
            self.version_changes.push(change(2, "0.1.0", to));
        }
        match &case.desired {
            Some(d) if index.is_multiple_of(3) => {
                self.add_own_since(index, case, d);
                self.desired
                    .push(desired_row(case, d.version, d.hash, decoy(d.since), 2, 0));
            }
            Some(d) => {
                self.add_since_decoys(index, case, d);
                self.desired
                    .push(desired_row(case, d.version, d.hash, d.since, 2, 0))
            }
            // Render 2 took the app away from this render group.
            None => self
                .desired
                .push(desired_row(case, "0.1.0", HASH_B, ago(50_000), 2, 1)),
        }
    }

    /// A since set that gives the case its `since` (its render group's row says a decoy), named
    /// by its membership twice, as an unmerged retried insert would leave it.
    fn add_own_since(&mut self, index: usize, case: &GridCase, d: &DesiredSpec) {
        let set = format!("ss-grid-{index}");
        self.since_sets.push(SinceSetRow {
            since_set: set.clone(),
            app: APP.into(),
            desired_since: fleetscope_store::to_datetime(d.since),
        });
        self.member_since.extend([1, 2].map(|_| MemberSinceRow {
            cluster_id: case.cluster_id.clone(),
            render_id: 2,
            since_set: set.clone(),
        }));
    }

    /// Since sets that must be ignored: one without the case's app (for every third case after
    /// the own ones), and one with a decoy on the older, superseded membership only (for the
    /// cases right after the own ones).
    fn add_since_decoys(&mut self, index: usize, case: &GridCase, d: &DesiredSpec) {
        if index % 3 == 2 {
            if !self
                .since_sets
                .iter()
                .any(|r| r.since_set == "ss-other-app")
            {
                self.since_sets.push(SinceSetRow {
                    since_set: "ss-other-app".into(),
                    app: "payments".into(),
                    desired_since: fleetscope_store::to_datetime(ago(86_400)),
                });
            }
            self.member_since.push(MemberSinceRow {
                cluster_id: case.cluster_id.clone(),
                render_id: 2,
                since_set: "ss-other-app".into(),
            });
        }
        if index % 3 == 1 {
            let set = format!("ss-old-{index}");
            self.since_sets.push(SinceSetRow {
                since_set: set.clone(),
                app: APP.into(),
                desired_since: fleetscope_store::to_datetime(decoy(d.since)),
            });
            self.member_since.push(MemberSinceRow {
                cluster_id: case.cluster_id.clone(),
                render_id: 1,
                since_set: set,
            });
        }
    }

    /// A case's observed rows: an older row and the case's own (twice, unmerged), then noise
    /// drift must ignore: a source object stamped with the app, and an unmanaged object.
    fn add_observed(&mut self, case: &GridCase) {
        let older = ObservedSpec {
            version: "0.5.0",
            hash: HASH_B,
            health: Health::Degraded,
            sync: SyncStatus::OutOfSync,
            transitioned_at: ago(90_000),
            deleted: false,
        };
        if let Some(o) = &case.observed {
            self.observed.push(observed_row(
                case,
                ObjectKind::Kustomization,
                APP,
                APP,
                &older,
                10,
            ));
            for _ in 0..2 {
                self.observed.push(observed_row(
                    case,
                    ObjectKind::Kustomization,
                    APP,
                    APP,
                    o,
                    11,
                ));
            }
        }
        let noise = ObservedSpec {
            version: "9.9.9",
            hash: HASH_B,
            health: Health::Degraded,
            sync: SyncStatus::OutOfSync,
            transitioned_at: ago(1),
            deleted: false,
        };
        self.observed.push(observed_row(
            case,
            ObjectKind::GitRepository,
            "platform",
            APP,
            &noise,
            12,
        ));
        self.observed.push(observed_row(
            case,
            ObjectKind::Kustomization,
            "flux-system",
            "",
            &noise,
            13,
        ));
    }

    /// Two collectors' arrival horizons, the first published twice.
    fn add_arrival_writers(&mut self) {
        let stamp =
            |seconds_ago: i64| u32::try_from(ago(seconds_ago).seconds()).expect("a 32-bit time");
        for (writer, first, visible) in [
            ("collector/grid-a/1/0", 7_200, 60),
            ("collector/grid-a/1/0", 7_200, 5),
            ("collector/grid-b/2/0", 600, 3),
        ] {
            self.arrival_writers
                .push(fleetscope_store::ArrivalWriterRow {
                    writer: writer.to_owned(),
                    first_stamp: stamp(first),
                    visible_before: stamp(visible),
                });
        }
    }

    /// The same rows as `INSERT … VALUES` statements, for engines reached without the Rust client.
    pub fn insert_statements(&self) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(table_inserts("renders", &self.renders));
        out.extend(table_inserts("render_contents", &self.render_contents));
        out.extend(table_inserts("match_rules", &self.match_rules));
        out.extend(table_inserts("render_change_counts", &self.change_counts));
        out.extend(table_inserts("rollout_records", &self.rollout_records));
        out.extend(table_inserts("rollout_clusters", &self.rollout_clusters));
        out.extend(table_inserts(
            "desired_version_changes",
            &self.version_changes,
        ));
        out.extend(table_inserts("platform_commits", &self.platform_commits));
        out.extend(table_inserts("clusters", &self.clusters));
        out.extend(table_inserts("heartbeats", &self.heartbeats));
        out.extend(table_inserts("render_group_members", &self.members));
        out.extend(table_inserts("desired_history", &self.desired));
        out.extend(table_inserts("reason_set_members", &self.reason_members));
        out.extend(table_inserts("reason_sets", &self.reason_sets));
        out.extend(table_inserts("since_sets", &self.since_sets));
        out.extend(table_inserts("member_since_sets", &self.member_since));
        out.extend(table_inserts("observed_transitions", &self.observed));
        out.extend(table_inserts("rollup_snapshots", &self.snapshots));
        out.extend(table_inserts("arrival_writers", &self.arrival_writers));
        out
    }
}
