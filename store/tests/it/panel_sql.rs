//! The dashboards' panel queries on a real server: every one runs on the drift grid with
//! literal values in its slots and returns the columns it declares, and the ones about drift
//! answer what the store's own queries answer with the same values bound: the pairs
//! `Store::drift_pairs` classifies, the rollups of `Store::drift_rollup`. Two small fleets of
//! their own check what the grid cannot: the failure insights put a planted cause first, and
//! the running versions over time count the checkpoints' clusters per version.

use std::collections::BTreeMap;

use fleetscope_model::{DriftState, Health, SyncStatus, Timestamp};
use fleetscope_store::panel_sql::{self, PanelQuery, Slots};
use fleetscope_store::{
    ClusterRow, DesiredRow, GroupRollup, HeartbeatRow, MembershipRow, ObservedRow,
};
use fleetscope_testkit::grid::{self, GridRows, NOW, POLICY};
use fleetscope_testkit::sql_literal::{insert_statement, Literal, SqlRow};
use fleetscope_testkit::TestStore;

/// The grid's `NOW` and a day before it, as the slots' `DateTime` expressions.
const FROM: &str = "toDateTime(1799913600)";
const TO: &str = "toDateTime(1800000000)";

fn in_range(column: &str) -> String {
    format!("{column} >= {FROM} AND {column} <= {TO}")
}

/// The slots with the values the store's own queries bind below.
fn slots() -> Slots<'static> {
    Slots {
        group: "''",
        environment: "''",
        app: "'checkout'",
        version: "'1.2.0'",
        cluster: "'case-0017'",
        rollout: "'checkout@2@1.2.0'",
        failure_budget: "5",
        stale_after_seconds: "600",
        grace_seconds: "900",
        from: FROM,
        to: TO,
        interval_seconds: "3600",
        time_filter: in_range,
        table_rows: 500,
    }
}

fn every_panel_query(slots: &Slots) -> Vec<(&'static str, PanelQuery)> {
    vec![
        (
            "selected group rollup",
            panel_sql::selected_group_rollup(slots),
        ),
        ("child group rollups", panel_sql::child_group_rollups(slots)),
        ("drift trend", panel_sql::drift_trend(slots)),
        ("cluster trend", panel_sql::cluster_trend(slots)),
        ("stale cluster list", panel_sql::stale_cluster_list(slots)),
        ("problem apps", panel_sql::problem_apps(slots)),
        ("problem pairs", panel_sql::problem_pairs(slots, false)),
        (
            "problem pairs of one app",
            panel_sql::problem_pairs(slots, true),
        ),
        ("app states", panel_sql::app_states(slots)),
        (
            "version distribution",
            panel_sql::version_distribution(slots),
        ),
        ("versions by group", panel_sql::versions_by_group(slots)),
        ("rollout status", panel_sql::rollout_status(slots)),
        ("rollout progress", panel_sql::rollout_progress(slots)),
        ("failure insights", panel_sql::failure_insights(slots)),
        (
            "running versions over time",
            panel_sql::running_versions_over_time(slots),
        ),
        ("cluster info", panel_sql::cluster_info(slots)),
        ("cluster states", panel_sql::cluster_states(slots)),
        ("cluster apps", panel_sql::cluster_apps(slots)),
        ("cluster objects", panel_sql::cluster_objects(slots)),
        ("cluster history", panel_sql::cluster_history(slots)),
        (
            "cluster desired history",
            panel_sql::cluster_desired_history(slots),
        ),
        ("renders over time", panel_sql::renders_over_time(slots)),
        (
            "desired changes over time",
            panel_sql::desired_changes_over_time(slots),
        ),
        (
            "transitions over time",
            panel_sql::transitions_over_time(slots),
        ),
        ("renders in range", panel_sql::renders_in_range(slots)),
        ("desired changes", panel_sql::desired_changes(slots)),
        ("group transitions", panel_sql::group_transitions(slots)),
        (
            "desired by environment",
            panel_sql::desired_by_environment(slots),
        ),
        (
            "running by environment",
            panel_sql::running_by_environment(slots),
        ),
        (
            "states by environment",
            panel_sql::states_by_environment(slots),
        ),
        ("rollout list", panel_sql::rollout_list(slots)),
        ("stalled rollouts", panel_sql::stalled_rollouts(slots)),
        ("rollout curve", panel_sql::rollout_curve(slots)),
        ("rollout groups", panel_sql::rollout_groups(slots)),
        ("delivery", panel_sql::delivery(slots)),
        ("delivery by group", panel_sql::delivery_by_group(slots)),
    ]
}

/// A result as its header and rows of column → value.
fn table(text: &str) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    let mut lines = text.lines();
    let names: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split('\t')
        .map(str::to_owned)
        .collect();
    let rows = lines
        .map(|line| {
            names
                .iter()
                .cloned()
                .zip(line.split('\t').map(str::to_owned))
                .collect()
        })
        .collect();
    (names, rows)
}

async fn run(client: &clickhouse::Client, what: &str, sql: &str) -> String {
    let mut cursor = client
        .query_raw(sql)
        .fetch_bytes("TabSeparatedWithNames")
        .unwrap_or_else(|err| panic!("{what}: {err}\n{sql}"));
    let bytes = cursor
        .collect()
        .await
        .unwrap_or_else(|err| panic!("{what}: {err}\n{sql}"));
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

fn assert_rollup(row: &BTreeMap<String, String>, expected: &GroupRollup) {
    let number = |column: &str| -> u64 { row[column].parse().expect("a count") };
    let group = &expected.group_path;
    assert_eq!(row["group_path"], *group);
    assert_eq!(
        number("clusters"),
        expected.clusters,
        "clusters of {group:?}"
    );
    assert_eq!(
        number("stale_clusters"),
        expected.stale_clusters,
        "stale clusters of {group:?}"
    );
    assert_eq!(
        number("instances"),
        expected.total_pairs(),
        "pairs of {group:?}"
    );
    for state in DriftState::ALL {
        assert_eq!(
            number(state.as_str()),
            expected.count(*state),
            "{state} in {group:?}"
        );
    }
}

#[tokio::test]
async fn panel_queries_run_and_agree_with_the_store_queries() {
    let test = TestStore::start().await;
    let store = &test.store;
    let client = clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(store.database())
        .with_validation(false);
    for sql in grid::rows(&grid::cases()).insert_statements() {
        client
            .query(&sql)
            .execute()
            .await
            .unwrap_or_else(|err| panic!("grid insert: {err}"));
    }
    let slots = slots();

    // Every panel query runs and returns the columns it declares.
    let mut with_rows = 0;
    for (what, query) in every_panel_query(&slots) {
        let (header, rows) = table(&run(&client, what, &query.sql).await);
        assert_eq!(header, query.columns, "{what}");
        with_rows += usize::from(!rows.is_empty());
    }
    assert!(
        with_rows >= 20,
        "only {with_rows} panel queries had rows on the grid"
    );

    // The classified pairs are the store's, with their inputs.
    let pairs = panel_sql::classified_pairs(&slots);
    let (header, rows) = table(&run(&client, "classified pairs", &pairs).await);
    assert_eq!(header, panel_sql::PAIR_COLUMNS);
    let mut from_panels: Vec<(String, String, String)> = rows
        .into_iter()
        .map(|row| {
            (
                row["cluster_id"].clone(),
                row["app"].clone(),
                row["state"].clone(),
            )
        })
        .collect();
    from_panels.sort();
    let from_store: Vec<(String, String, String)> = store
        .drift_pairs(NOW, &POLICY)
        .await
        .expect("the store's pairs")
        .into_iter()
        .map(|row| (row.cluster_id, row.app, row.state))
        .collect();
    assert!(from_store.len() > 20, "the grid has pairs");
    assert_eq!(from_panels, from_store);

    // The rollups are the store's: the fleet, and every group below it.
    let rollups = store.drift_rollup(NOW, &POLICY).await.expect("the rollup");
    let (_, fleet) = table(
        &run(
            &client,
            "fleet",
            &panel_sql::selected_group_rollup(&slots).sql,
        )
        .await,
    );
    assert_eq!(fleet.len(), 1, "one row for the fleet");
    assert_rollup(&fleet[0], &rollups[0]);
    let (_, children) = table(
        &run(
            &client,
            "regions",
            &panel_sql::child_group_rollups(&slots).sql,
        )
        .await,
    );
    let expected: Vec<&GroupRollup> = rollups.iter().filter(|r| r.depth == 1).collect();
    assert_eq!(children.len(), expected.len(), "groups below the fleet");
    for (row, rollup) in children.iter().zip(expected) {
        assert_rollup(row, rollup);
    }

    // The stale list holds the store's stale clusters.
    let stale = store
        .stale_clusters(NOW, &POLICY, 500)
        .await
        .expect("the store's stale clusters");
    let (_, listed) =
        table(&run(&client, "stale", &panel_sql::stale_cluster_list(&slots).sql).await);
    assert!(!stale.is_empty(), "the grid has stale clusters");
    assert_eq!(
        listed
            .iter()
            .map(|row| row["cluster_id"].clone())
            .collect::<Vec<_>>(),
        stale
            .into_iter()
            .map(|row| row.cluster_id)
            .collect::<Vec<_>>()
    );
}

fn client_of(test: &TestStore) -> clickhouse::Client {
    clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(test.store.database())
        .with_validation(false)
}

async fn execute(client: &clickhouse::Client, statements: &[String]) {
    for sql in statements {
        client
            .query(sql)
            .execute()
            .await
            .unwrap_or_else(|err| panic!("insert: {err}\n{sql}"));
    }
}

fn datetime(at: Timestamp) -> u32 {
    fleetscope_store::to_datetime(at)
}

/// An observed row of `cluster`'s Kustomization `name` for `app`.
fn kustomization(cluster: &str, name: &str, app: &str, version: &str, seq: u64) -> ObservedRow {
    ObservedRow {
        cluster_id: cluster.into(),
        object_kind: "Kustomization".into(),
        object_namespace: "flux-system".into(),
        object_name: name.into(),
        app: app.into(),
        version: version.into(),
        content_hash: String::new(),
        applied_revision: "main@sha1:abc".into(),
        health: Health::Healthy.as_str().into(),
        sync: SyncStatus::Synced.as_str().into(),
        reason: "ReconciliationSucceeded".into(),
        message: String::new(),
        transitioned_at: datetime(NOW.plus_seconds(-50_000)),
        observed_at: datetime(NOW.plus_seconds(-60)),
        received_at: datetime(NOW.plus_seconds(-59)),
        change_seq: seq,
        deleted: 0,
    }
}

/// Where `checkout` stands on one cluster of the insights fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Reported degraded: failed.
    Degraded,
    /// Running another version than desired, long past the grace period: out of sync.
    Behind,
    InSync,
    /// Desired long ago and never reported: missing, on neither side.
    Unreported,
}

/// One cluster of the insights fleet: id, group, labels, agent version and what `checkout`
/// does there.
struct Planted {
    cluster: String,
    group: &'static str,
    labels: Vec<(&'static str, String)>,
    agent: &'static str,
    outcome: Outcome,
}

/// Twenty-one clusters: `hw=gen2` on seven of the eight failing clusters and on one in-sync
/// cluster; `zone` splits the fleet without regard to failing; `tier=gold` is on every
/// cluster and `fleetscope.io/cluster` names each one; one cluster with `hw=gen2` never
/// reported the app (missing) and must count nowhere.
fn insights_fleet() -> Vec<Planted> {
    (0..21)
        .map(|i| {
            let outcome = match i {
                0..=3 => Outcome::Degraded,
                4..=6 | 8 => Outcome::Behind,
                20 => Outcome::Unreported,
                _ => Outcome::InSync,
            };
            let hw = if i <= 7 || i == 20 { "gen2" } else { "gen1" };
            Planted {
                cluster: format!("ins-{i:02}"),
                group: ["eu/north", "eu/south", "us/east"][i % 3],
                labels: vec![
                    ("fleetscope.io/cluster", format!("ins-{i:02}")),
                    ("hw", hw.to_owned()),
                    ("tier", "gold".to_owned()),
                    ("zone", ["a", "b"][i % 2].to_owned()),
                ],
                agent: if i % 4 == 0 { "0.2.0" } else { "0.1.0" },
                outcome,
            }
        })
        .collect()
}

fn insights_rows(fleet: &[Planted]) -> GridRows {
    let mut rows = GridRows::default();
    for planted in fleet {
        let group = fleetscope_model::GroupPath::parse(planted.group).expect("a valid group");
        rows.clusters.push(ClusterRow {
            cluster_id: planted.cluster.clone(),
            group_path: planted.group.into(),
            group_prefixes: group.prefixes().into_iter().map(String::from).collect(),
            environment: "prod".into(),
            reconciler: "flux".into(),
            label_keys: planted
                .labels
                .iter()
                .map(|(k, _)| (*k).to_owned())
                .collect(),
            label_values: planted.labels.iter().map(|(_, v)| v.clone()).collect(),
            updated_at: datetime(NOW.plus_seconds(-86_400)),
            version: 1,
            removed: 0,
        });
        // Seen a minute ago: not stale.
        rows.heartbeats.push(HeartbeatRow {
            cluster_id: planted.cluster.clone(),
            seen_at: datetime(NOW.plus_seconds(-60)),
            agent_version: planted.agent.into(),
            reconciler_names: vec!["flux".into()],
            reconciler_versions: vec!["v2.4.0".into()],
        });
        rows.members.push(MembershipRow {
            cluster_id: planted.cluster.clone(),
            render_group: "rg-prod".into(),
            render_id: 1,
            removed: 0,
        });
        let mut observed = kustomization(&planted.cluster, "checkout", "checkout", "1.4.0", 1);
        match planted.outcome {
            Outcome::Degraded => observed.health = Health::Degraded.as_str().into(),
            Outcome::Behind => observed.version = "1.3.0".into(),
            Outcome::InSync => {}
            Outcome::Unreported => continue,
        }
        rows.observed.push(observed.clone());
        // A duplicate, as an unmerged redelivery leaves it.
        rows.observed.push(observed);
    }
    rows.desired.push(DesiredRow {
        render_group: "rg-prod".into(),
        app: "checkout".into(),
        render_id: 1,
        version: "1.4.0".into(),
        content_hash: String::new(),
        kind: "flux-kustomization".into(),
        namespace: "shop".into(),
        reasons: vec!["policy/all-stores".into()],
        commit: "commit-1".into(),
        desired_since: datetime(NOW.plus_seconds(-86_400)),
        removed: 0,
    });
    rows
}

/// The failure insights of a small fleet with a planted cause: `hw=gen2` comes first, with the
/// counts and rates of its 2×2 table and the z-score worked out here; values on a single
/// cluster or on every compared cluster, on fewer than two failing clusters, or not
/// over-represented are left out; a cluster where the app is missing counts nowhere.
#[tokio::test]
async fn failure_insights_put_the_planted_label_first() {
    let test = TestStore::start().await;
    let client = client_of(&test);
    let fleet = insights_fleet();
    execute(&client, &insights_rows(&fleet).insert_statements()).await;
    let slots = Slots {
        app: "'checkout'",
        ..slots()
    };
    let query = panel_sql::failure_insights(&slots);
    let (header, rows) = table(&run(&client, "failure insights", &query.sql).await);
    assert_eq!(header, query.columns);
    assert!(!rows.is_empty(), "no findings");

    let first = &rows[0];
    assert_eq!(
        (first["attribute"].as_str(), first["value"].as_str()),
        ("label", "hw=gen2"),
        "{rows:?}"
    );
    assert_eq!(first["failing_with"], "7");
    assert_eq!(first["in_sync_with"], "1");
    // 8 failing and 12 in sync compared; 1 failing and 11 in sync without the value.
    let rate = |column: &str| -> f64 { first[column].parse().expect("a number") };
    assert!((rate("failure_rate_with") - 0.875).abs() < 1e-9);
    assert!((rate("failure_rate_without") - 0.0833).abs() < 1e-9);
    let (a, n, f, total) = (7.0_f64, 8.0_f64, 8.0_f64, 20.0_f64);
    let z = (a * total - f * n) * (total / (n * (total - n) * f * (total - f))).sqrt();
    assert!(
        (rate("z_score") - z).abs() < 0.001,
        "z {} against {z}",
        first["z_score"]
    );

    let mut previous = f64::INFINITY;
    for row in &rows {
        let number = |column: &str| -> f64 { row[column].parse().expect("a number") };
        let value = row["value"].as_str();
        assert!(number("failing_with") >= 2.0, "{row:?}");
        assert!(
            number("failure_rate_with") > number("failure_rate_without"),
            "{row:?}"
        );
        assert!(
            number("z_score") <= previous,
            "not strongest first: {rows:?}"
        );
        previous = number("z_score");
        assert!(
            !value.starts_with("fleetscope.io/cluster="),
            "a value on one cluster: {row:?}"
        );
        assert_ne!(value, "tier=gold", "a value on every compared cluster");
        assert_ne!(value, "prod", "the environment of every compared cluster");
        assert_ne!(value, "hw=gen1", "under-represented");
    }
    // Every value is in the table at most once.
    let mut seen: Vec<(&str, &str)> = rows
        .iter()
        .map(|row| (row["attribute"].as_str(), row["value"].as_str()))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), rows.len());

    // Narrowed to one region, the counts are that region's.
    let slots = Slots {
        group: "'eu'",
        ..slots
    };
    let (_, rows) = table(
        &run(
            &client,
            "failure insights in eu",
            &panel_sql::failure_insights(&slots).sql,
        )
        .await,
    );
    let gen2 = rows
        .iter()
        .find(|row| row["value"] == "hw=gen2")
        .unwrap_or_else(|| panic!("hw=gen2 in eu: {rows:?}"));
    // In eu (i % 3 != 2): failing 0, 1, 3, 4, 6 with gen2, 8 without; in sync 7 with gen2.
    assert_eq!(gen2["failing_with"], "5");
    assert_eq!(gen2["in_sync_with"], "1");
    assert!(
        rows.iter().all(|row| row["value"] != "eu"),
        "the selected group is on every compared cluster"
    );
}

/// The `checkpoint_log` row that lists the checkpoint at `taken_at` as complete.
fn logged(taken_at: u32) -> String {
    log_row(taken_at, taken_at, 0)
}

/// A `checkpoint_log` row about the checkpoint at `taken_at`, written at `finished_at`.
fn log_row(taken_at: u32, finished_at: u32, dropped: u8) -> String {
    insert_statement(
        "checkpoint_log",
        &["taken_at", "objects", "finished_at", "dropped"],
        &[vec![
            taken_at.literal(),
            1u64.literal(),
            finished_at.literal(),
            dropped.literal(),
        ]],
    )
}

/// The checkpoint rows of `rows` at `taken_at` as an `INSERT`.
fn checkpoint_insert(taken_at: u32, rows: &[ObservedRow]) -> String {
    let mut columns = vec!["taken_at"];
    columns.extend(<ObservedRow as clickhouse::Row>::COLUMN_NAMES);
    let values: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let mut values = vec![taken_at.literal()];
            values.extend(row.values());
            values
        })
        .collect();
    insert_statement("observed_checkpoints", &columns, &values)
}

/// Clusters per version of the chosen app at each checkpoint, read through duplicates and
/// superseded rows, deleted objects left out, other apps and clusters outside the selected
/// group left out, checkpoints outside the time range not shown.
#[tokio::test]
async fn running_versions_over_time_count_clusters_per_version_per_checkpoint() {
    let test = TestStore::start().await;
    let client = client_of(&test);
    let mut inventory = GridRows::default();
    for (cluster, group) in [
        ("cp-1", "eu/north"),
        ("cp-2", "eu/north"),
        ("cp-3", "eu/south"),
        ("cp-4", "eu/south"),
        ("cp-5", "us/east"),
    ] {
        inventory
            .clusters
            .push(fleetscope_testkit::inventory_row(cluster, group));
    }
    execute(&client, &inventory.insert_statements()).await;

    let six_hours = 6 * 3600;
    let t = |k: i64| datetime(NOW.plus_seconds(-k * six_hours));
    let ck = |cluster: &str, version: &str, seq: u64| {
        kustomization(cluster, "checkout", "checkout", version, seq)
    };
    let mut statements = Vec::new();
    // Before the time range: must not show.
    statements.push(checkpoint_insert(
        t(8),
        &[ck("cp-1", "1.0.0", 1), ck("cp-2", "1.0.0", 1)],
    ));
    // t(2): everyone on 1.1.0, cp-3 twice (an unmerged duplicate).
    statements.push(checkpoint_insert(
        t(2),
        &[
            ck("cp-1", "1.1.0", 2),
            ck("cp-2", "1.1.0", 2),
            ck("cp-3", "1.1.0", 2),
            ck("cp-3", "1.1.0", 2),
            ck("cp-4", "1.1.0", 2),
            ck("cp-5", "1.1.0", 2),
            // Another app: not counted.
            kustomization("cp-1", "payments", "payments", "7.0.0", 3),
        ],
    ));
    // t(1): cp-1 moved to 1.2.0, written once with the older row and once with the newer (the
    // newer wins); cp-2's object was deleted; cp-4 wrote its checkpoint twice with rows of the
    // same change number, the later arrival wins.
    let mut deleted = ck("cp-2", "1.1.0", 4);
    deleted.deleted = 1;
    let mut late = ck("cp-4", "1.2.0", 3);
    late.received_at += 10;
    statements.push(checkpoint_insert(
        t(1),
        &[
            ck("cp-1", "1.1.0", 2),
            ck("cp-1", "1.2.0", 3),
            deleted,
            ck("cp-3", "1.1.0", 2),
            ck("cp-4", "1.1.0", 3),
            late,
            ck("cp-5", "1.2.0", 3),
        ],
    ));
    // t(0): cp-4's object now names another app (its newest row; an older one naming
    // checkout is still there unmerged): not checkout's any more.
    statements.push(checkpoint_insert(
        t(0),
        &[
            ck("cp-1", "1.2.0", 3),
            ck("cp-3", "1.2.0", 5),
            ck("cp-4", "1.2.0", 3),
            kustomization("cp-4", "checkout", "checkout-legacy", "1.2.0", 6),
            ck("cp-5", "1.2.0", 3),
        ],
    ));
    // Complete checkpoints are listed in the log; the panel reads the first of each 6 hours.
    for k in [8, 2, 1, 0] {
        statements.push(logged(t(k)));
    }
    // An hour after t(1), in the same 6 hours: listed, but not the first, so not read.
    statements.push(checkpoint_insert(
        t(1) + 3_600,
        &[ck("cp-1", "9.9.9", 7), ck("cp-2", "9.9.9", 7)],
    ));
    statements.push(logged(t(1) + 3_600));
    // An hour before t(1), in the same 6 hours, still being written (not listed): not read,
    // and t(1) stays the first.
    statements.push(checkpoint_insert(t(1) - 3_600, &[ck("cp-1", "8.8.8", 1)]));
    // An hour before t(2), in the same 6 hours, listed and then marked dropped (retention under
    // way, its rows not gone yet): not read, and t(2) is the first.
    statements.push(checkpoint_insert(t(2) - 3_600, &[ck("cp-1", "7.7.7", 1)]));
    statements.push(logged(t(2) - 3_600));
    statements.push(log_row(t(2) - 3_600, t(0) + 60, 1));
    execute(&client, &statements).await;

    let mut times = Vec::new();
    for k in 0..=2 {
        let sql = format!("SELECT toDateTime({}) AS time", t(k));
        let (_, rows) = table(&run(&client, "a checkpoint's time", &sql).await);
        times.push(rows[0]["time"].clone());
    }
    // (checkpoint, version, clusters of the fleet, clusters of eu)
    let expected = [
        (2, "1.1.0", 5, 4),
        (1, "1.1.0", 1, 1),
        (1, "1.2.0", 3, 2),
        (0, "1.2.0", 3, 2),
    ];
    for group in ["", "eu"] {
        let quoted = format!("'{group}'");
        let query = panel_sql::running_versions_over_time(&Slots {
            group: &quoted,
            app: "'checkout'",
            ..slots()
        });
        let (header, rows) = table(&run(&client, "running versions over time", &query.sql).await);
        assert_eq!(header, query.columns);
        let got: Vec<(String, String, String)> = rows
            .iter()
            .map(|row| {
                (
                    row["time"].clone(),
                    row["version"].clone(),
                    row["clusters"].clone(),
                )
            })
            .collect();
        let want: Vec<(String, String, String)> = expected
            .iter()
            .map(|(k, version, fleet, eu)| {
                let clusters = if group.is_empty() { fleet } else { eu };
                (
                    times[*k].clone(),
                    (*version).to_owned(),
                    clusters.to_string(),
                )
            })
            .collect();
        assert_eq!(got, want, "group {group:?}");
    }
}
