//! A realistic data set for the panel queries: a generated fleet of a few hundred clusters with
//! a rollout underway, given a history (a second render that moved the rollout app to its new
//! version in stage, the transitions of the clusters that followed) and hourly rollup
//! snapshots and 6-hourly checkpoints of observed state, as rows and as `INSERT` statements
//! for engines the Rust client cannot reach.

use std::collections::BTreeMap;

use fleetscope_dashboards::expand::{self, Choice, Context, MacroStyle};
use fleetscope_fixtures::fleet::{GroundTruth, SimCluster};
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_model::{DriftPolicy, GroupPath, Health, SyncStatus, Timestamp};
use fleetscope_store::{
    ClusterRow, DesiredRow, HeartbeatRow, MembershipRow, ObservedRow, RenderRow, RolloutClusterRow,
    RolloutRecordRow, RollupSnapshotRow,
};
use fleetscope_testkit::sql_literal::{insert_statement, table_inserts, Literal, SqlRow};
use serde_json::Value;

pub const NOW: Timestamp = Timestamp(1_800_000_000);
pub const DAY: i64 = 86_400;
/// The dashboards' default drift policy constants are the model's defaults.
pub const POLICY: DriftPolicy = DriftPolicy {
    stale_after_seconds: 600,
    progress_grace_seconds: 900,
};

#[derive(Debug)]
pub struct Dataset {
    pub clusters: Vec<ClusterRow>,
    pub heartbeats: Vec<HeartbeatRow>,
    pub members: Vec<MembershipRow>,
    pub renders: Vec<RenderRow>,
    pub desired: Vec<DesiredRow>,
    pub observed: Vec<ObservedRow>,
    pub snapshots: Vec<RollupSnapshotRow>,
    /// Checkpoints of every app object's state: (`taken_at`, the object's newest row received
    /// at or before it), every 6 hours back from [`NOW`] over three days.
    pub checkpoints: Vec<(u32, ObservedRow)>,
    pub truth: GroundTruth,
    /// The rollouts as a hub would have written them: the rollout below, the previous
    /// version's three days before (complete), and a stalled one two days before.
    pub rollout_records: Vec<RolloutRecordRow>,
    pub rollout_clusters: Vec<RolloutClusterRow>,
    /// The rollout below, `app@render@version`.
    pub rollout_id: String,
    /// The app being rolled out, its new version and the one before.
    pub rollout_app: String,
    pub rollout_version: String,
    pub previous_version: String,
    /// A stage cluster that reports the new version, not stale.
    pub upgraded_cluster: String,
    pub upgraded_cluster_group: String,
}

/// A fleet of `clusters` clusters with `apps` apps, at [`NOW`] with [`POLICY`].
pub fn dataset(clusters: usize, apps: usize) -> Dataset {
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters,
        apps,
        seed: 7,
        now: NOW,
        policy: POLICY,
        ..FleetSpec::default()
    })
    .expect("a valid fleet");
    let sims: Vec<SimCluster> = (0..clusters).map(|i| fleet.cluster(i)).collect();
    let mut truth = GroundTruth::default();
    for sim in &sims {
        truth.add(sim);
    }

    // The rollout: desired moments ago in stage, one version ahead of what dev runs.
    let mut desired = fleet.desired();
    let rollout_since = fleetscope_store::to_datetime(NOW.plus_seconds(-180));
    let rollout = desired
        .iter()
        .find(|d| d.desired_since == rollout_since)
        .expect("the generated fleet has a rollout in stage")
        .clone();
    let previous_version = desired
        .iter()
        .find(|d| d.app == rollout.app && d.render_group.starts_with("rg-dev-"))
        .expect("dev renders the rollout app")
        .version
        .clone();
    assert_ne!(previous_version, rollout.version);
    let first = fleet.render();
    let second = RenderRow {
        render_id: first.render_id + 1,
        commit: "4b1d2c3e5f60718293a4b5c6d7e8f90112233445".into(),
        platform_commit: "9a8b7c6d5e4f30211203f4e5d6c7b8a990817263".into(),
        rendered_at: rollout_since,
        summary: format!("{} {} in stage", rollout.app, rollout.version),
        render_groups: 6,
        clusters: clusters as u32,
        changed_items: 6,
    };
    let mut earlier = Vec::new();
    for row in desired
        .iter_mut()
        .filter(|d| d.app == rollout.app && d.desired_since == rollout_since)
    {
        let mut before = row.clone();
        before.version = previous_version.clone();
        before.content_hash = format!("sha256:before-{}", row.render_group);
        before.desired_since = first.rendered_at;
        earlier.push(before);
        row.render_id = second.render_id;
        row.commit = second.commit.clone();
    }
    desired.extend(earlier);

    // Observed rows move up in sequence to make room for the transitions before them.
    let mut observed = Vec::new();
    let mut upgraded = None;
    for sim in &sims {
        for row in &sim.observed {
            let mut row = row.clone();
            row.change_seq += 100;
            if row.app == rollout.app && row.version == rollout.version {
                let mut before = row.clone();
                before.change_seq = 50;
                before.version = previous_version.clone();
                before.content_hash = format!("sha256:before-{}", row.cluster_id);
                before.health = Health::Healthy.as_str().into();
                before.sync = SyncStatus::Synced.as_str().into();
                before.reason = "ReconciliationSucceeded".into();
                before.message = format!("Applied revision: {previous_version}");
                let at = fleetscope_store::to_datetime(NOW.plus_seconds(-3 * DAY + 900));
                before.transitioned_at = at;
                before.observed_at = at;
                before.received_at = at;
                observed.push(before);
                if !sim.stale && upgraded.is_none() {
                    upgraded = Some((
                        sim.cluster.cluster_id.clone(),
                        sim.cluster.group_path.clone(),
                    ));
                }
            }
            observed.push(row);
        }
    }
    let (upgraded_cluster, upgraded_cluster_group) =
        upgraded.expect("some cluster reports the new version");

    let snapshots = (0..24)
        .flat_map(|hour| {
            let taken_at = NOW.plus_seconds(-hour * 3600);
            truth
                .rollups()
                .into_iter()
                .filter(|r| r.depth <= 2)
                .map(move |r| r.snapshot_row(taken_at))
        })
        .collect();

    let checkpoints = checkpoints(&observed);
    let rollouts = rollouts(&sims, &rollout, &previous_version, [&first, &second]);

    Dataset {
        clusters: sims.iter().map(|s| s.cluster.clone()).collect(),
        heartbeats: sims.iter().filter_map(|s| s.heartbeat.clone()).collect(),
        members: sims.iter().map(|s| s.membership.clone()).collect(),
        renders: vec![first, second],
        desired,
        observed,
        snapshots,
        checkpoints,
        truth,
        rollout_records: rollouts.records,
        rollout_clusters: rollouts.clusters,
        rollout_id: rollouts.id,
        rollout_app: rollout.app,
        rollout_version: rollout.version,
        previous_version,
        upgraded_cluster,
        upgraded_cluster_group,
    }
}

impl Dataset {
    pub fn insert_statements(&self) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(table_inserts("renders", &self.renders));
        out.extend(table_inserts("clusters", &self.clusters));
        out.extend(table_inserts("heartbeats", &self.heartbeats));
        out.extend(table_inserts("render_group_members", &self.members));
        out.extend(table_inserts("desired_history", &self.desired));
        out.extend(table_inserts("observed_transitions", &self.observed));
        out.extend(table_inserts("rollup_snapshots", &self.snapshots));
        out.extend(checkpoint_inserts(&self.checkpoints));
        out.extend(table_inserts("rollout_records", &self.rollout_records));
        out.extend(table_inserts("rollout_clusters", &self.rollout_clusters));
        out
    }

    /// The first level-1 group of the upgraded cluster (its region).
    pub fn upgraded_region(&self) -> String {
        GroupPath::parse(&self.upgraded_cluster_group)
            .expect("a valid group")
            .prefixes()
            .into_iter()
            .next()
            .expect("a group has prefixes")
            .to_string()
    }
}

/// Every 6 hours back from [`NOW`] over three days, each app object's newest row (by change
/// number) received at or before the moment, as the hub's checkpoints hold them.
fn checkpoints(observed: &[ObservedRow]) -> Vec<(u32, ObservedRow)> {
    let app_kinds: Vec<&str> = fleetscope_model::state::ObjectKind::ALL
        .iter()
        .filter(|kind| kind.is_app_object())
        .map(|kind| kind.as_str())
        .collect();
    let mut out = Vec::new();
    for step in 0..12 {
        let taken_at = fleetscope_store::to_datetime(NOW.plus_seconds(-step * 6 * 3600));
        let mut newest: BTreeMap<(&str, &str, &str, &str), &ObservedRow> = BTreeMap::new();
        for row in observed
            .iter()
            .filter(|r| r.received_at <= taken_at && app_kinds.contains(&r.object_kind.as_str()))
        {
            let key = (
                row.cluster_id.as_str(),
                row.object_kind.as_str(),
                row.object_namespace.as_str(),
                row.object_name.as_str(),
            );
            let held = newest.entry(key).or_insert(row);
            if row.change_seq > held.change_seq {
                *held = row;
            }
        }
        out.extend(newest.into_values().map(|row| (taken_at, row.clone())));
    }
    out
}

/// `INSERT` statements for checkpoint rows (`taken_at`, then the observed columns), and the
/// `checkpoint_log` rows that list each checkpoint as complete.
pub fn checkpoint_inserts(rows: &[(u32, ObservedRow)]) -> Vec<String> {
    let mut columns = vec!["taken_at"];
    columns.extend(<ObservedRow as clickhouse::Row>::COLUMN_NAMES);
    let mut objects: BTreeMap<u32, u64> = BTreeMap::new();
    for (taken_at, _) in rows {
        *objects.entry(*taken_at).or_default() += 1;
    }
    let log: Vec<Vec<String>> = objects
        .iter()
        .map(|(taken_at, objects)| {
            vec![
                taken_at.literal(),
                objects.literal(),
                taken_at.literal(),
                0u8.literal(),
            ]
        })
        .collect();
    let log = insert_statement(
        "checkpoint_log",
        &["taken_at", "objects", "finished_at", "dropped"],
        &log,
    );
    rows.chunks(2_000)
        .map(|chunk| {
            let values: Vec<Vec<String>> = chunk
                .iter()
                .map(|(taken_at, row)| {
                    let mut values = vec![taken_at.literal()];
                    values.extend(row.values());
                    values
                })
                .collect();
            insert_statement("observed_checkpoints", &columns, &values)
        })
        .chain(std::iter::once(log))
        .collect()
}

/// The rollout rows of [`Dataset`].
struct Rollouts {
    records: Vec<RolloutRecordRow>,
    clusters: Vec<RolloutClusterRow>,
    id: String,
}

/// One rollout's record, its figures counted from `members` (cluster, reached, failed).
fn rollout_record(
    app: &str,
    render: &RenderRow,
    version: &str,
    status: &str,
    members: &[(String, u32, u32)],
) -> RolloutRecordRow {
    let mut reached: Vec<u32> = members.iter().map(|m| m.1).filter(|t| *t > 0).collect();
    reached.sort_unstable();
    let targeted = members.len() as u32;
    let milestone = |share: u32| {
        let needed = ((share * targeted).div_ceil(100)).max(1) as usize;
        reached.get(needed - 1).copied().unwrap_or(0)
    };
    RolloutRecordRow {
        app: app.into(),
        render_id: render.render_id,
        version: version.into(),
        started_at: render.rendered_at,
        platform_commit: render.platform_commit.clone(),
        committed_at: render.rendered_at.saturating_sub(600),
        status: status.into(),
        from_versions: vec![String::new()],
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
        in_sync: reached.len() as u32,
        failed: members.iter().filter(|m| m.2 > 0 && m.1 == 0).count() as u32,
        stale: 0,
        reached: reached.len() as u32,
        failed_before_reaching: members.iter().filter(|m| m.2 > 0).count() as u32,
        reached_50: milestone(50),
        reached_90: milestone(90),
        reached_99: milestone(99),
        reached_100: milestone(100),
        completed_at: milestone(100),
        last_reached_at: reached.last().copied().unwrap_or(0),
        written_ms: u64::from(NOW.seconds() as u32) * 1000,
    }
}

/// The rollout underway (clusters reporting its version reached it when they did, or at its
/// start), the previous version's rollout three days before, complete, and a stalled rollout
/// of the same app two days ago on a few clusters (some reached it, two failed first).
fn rollouts(
    sims: &[SimCluster],
    rollout: &DesiredRow,
    previous_version: &str,
    [first, second]: [&RenderRow; 2],
) -> Rollouts {
    let mut records = Vec::new();
    let mut clusters = Vec::new();
    let mut add = |app: &str,
                   render: &RenderRow,
                   version: &str,
                   status: &str,
                   members: Vec<(String, u32, u32)>| {
        records.push(rollout_record(app, render, version, status, &members));
        for (cluster_id, reached_at, failed_at) in members {
            clusters.push(RolloutClusterRow {
                app: app.into(),
                cluster_id,
                render_id: render.render_id,
                version: version.into(),
                reached_at,
                failed_at,
                written_ms: u64::from(NOW.seconds() as u32) * 1000,
            });
        }
    };
    let started = second.rendered_at;
    let underway: Vec<(String, u32, u32)> = sims
        .iter()
        .filter_map(|sim| {
            let row = sim
                .observed
                .iter()
                .find(|o| o.app == rollout.app && o.version == rollout.version)?;
            Some((
                sim.cluster.cluster_id.clone(),
                row.transitioned_at.max(started),
                0,
            ))
        })
        .collect();
    assert!(!underway.is_empty(), "clusters report the new version");
    add(
        &rollout.app,
        second,
        &rollout.version,
        "in_progress",
        underway,
    );

    let before = RenderRow {
        rendered_at: (NOW.seconds() - 3 * DAY) as u32,
        ..first.clone()
    };
    let complete: Vec<(String, u32, u32)> = sims
        .iter()
        .filter(|sim| {
            sim.observed
                .iter()
                .any(|o| o.app == rollout.app && o.version == previous_version)
        })
        .map(|sim| (sim.cluster.cluster_id.clone(), before.rendered_at + 900, 0))
        .collect();
    add(
        &rollout.app,
        &before,
        previous_version,
        "complete",
        complete,
    );

    let stalled_render = RenderRow {
        render_id: first.render_id + 7,
        rendered_at: (NOW.seconds() - 2 * DAY) as u32,
        ..first.clone()
    };
    let stalled: Vec<(String, u32, u32)> = sims
        .iter()
        .take(6)
        .enumerate()
        .map(|(i, sim)| {
            let at = stalled_render.rendered_at;
            let reached = if i < 3 { at + 600 + i as u32 * 60 } else { 0 };
            let failed = if i == 1 || i == 4 { at + 300 } else { 0 };
            (sim.cluster.cluster_id.clone(), reached, failed)
        })
        .collect();
    add(&rollout.app, &stalled_render, "9.9.9", "stalled", stalled);
    Rollouts {
        records,
        clusters,
        id: format!("{}@{}@{}", rollout.app, second.render_id, rollout.version),
    }
}

/// A dashboard state to expand queries for.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub context: Context,
}

impl Scenario {
    /// `choices` for query variables; `All` is taken only where the variable offers it,
    /// otherwise `fallback` gives the value.
    pub fn new(
        name: &'static str,
        choices: &[(&str, Choice)],
        fallback: &[(&str, &str)],
    ) -> Scenario {
        let mut map = BTreeMap::new();
        for (variable, choice) in choices {
            map.insert((*variable).to_owned(), choice.clone());
        }
        for (variable, value) in fallback {
            map.insert(
                format!("{variable}#fallback"),
                Choice::Value((*value).to_owned()),
            );
        }
        Scenario {
            name,
            context: Context {
                from: NOW.plus_seconds(-7 * DAY).seconds(),
                to: NOW.seconds(),
                interval_seconds: 3_600,
                choices: map,
                macros: MacroStyle::Seconds,
            },
        }
    }

    /// The same choices with the time macros as plugin versions 4.0.0 to 4.0.2 wrote them.
    pub fn with_early_macros(mut self, name: &'static str) -> Scenario {
        self.name = name;
        self.context.macros = MacroStyle::Milliseconds;
        self
    }

    /// The context for one dashboard: an `All` choice on a variable without an All option
    /// falls back to its fallback value.
    pub fn context_for(&self, dashboard: &Value) -> Context {
        let mut context = self.context.clone();
        let variables = dashboard["templating"]["list"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for variable in variables {
            let name = variable["name"].as_str().unwrap_or_default().to_owned();
            let all = variable["includeAll"] == true;
            if context.choices.get(&name) == Some(&Choice::All) && !all {
                if let Some(fallback) = context.choices.get(&format!("{name}#fallback")).cloned() {
                    context.choices.insert(name, fallback);
                }
            }
        }
        context
    }

    pub fn expand(&self, sql: &str, dashboard: &Value) -> String {
        expand::expand(sql, dashboard, &self.context_for(dashboard))
            .unwrap_or_else(|err| panic!("{}: {err}", self.name))
    }
}

/// Rows of a `TabSeparatedWithNames` text as column → value maps.
pub fn records(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines();
    let names: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
    lines
        .map(|line| {
            names
                .iter()
                .zip(line.split('\t'))
                .map(|(n, v)| ((*n).to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}
