//! Every ClickHouse panel and variable query, with Grafana's variables and the plugin's macros
//! expanded to concrete values, runs on current ClickHouse (chdb) against a generated fleet
//! with history, returns the columns its panel expects and, for the whole fleet, rows. The same
//! statements run on a private ClickHouse 18.16 server and must return the same text. The fleet
//! overview's rollup equals `Store::drift_rollup` and the simulator's ground truth: the
//! dashboards and the store share one drift definition.

use crate::common;

use std::collections::BTreeMap;

use common::{Dataset, Scenario, NOW, POLICY};
use fleetscope_dashboards::expand::Choice;
use fleetscope_dashboards::{boards, Dashboard};
use fleetscope_model::DriftState;
use fleetscope_store::catalog;
use fleetscope_store::GroupRollup;
use fleetscope_testkit::chdb::{self, Statement};
use fleetscope_testkit::TestStore;

/// Queries that use what ClickHouse 18.16 lacks, with the reason. Each must fail there, so the
/// list cannot go stale.
const CURRENT_ONLY: &[(&str, &str)] = &[];

const WITH_NAMES: &str = "TabSeparatedWithNames";

/// The tests of this file run one at a time: each starts its own servers (the cluster test two
/// nodes and ZooKeeper), and a ClickHouse 18.16 node starting under that much load was seen to
/// drop, and then die on, the first distributed DDL.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One query of one dashboard expanded for one scenario.
#[derive(Debug)]
struct Case {
    name: String,
    dashboard: String,
    location: String,
    scenario: &'static str,
    sql: String,
    columns: Vec<String>,
    /// The value a variable query must offer.
    offers: Option<String>,
}

const FLEET: &str = "fleet";
/// The fleet again, with the time macros of plugin versions 4.0.0 to 4.0.2 (`DateTime64`,
/// which ClickHouse 18.16 lacks): current ClickHouse only, same answers.
const FLEET_EARLY_MACROS: &str = "fleet, plugin 4.0.0 macros";

fn scenarios(data: &Dataset) -> Vec<Scenario> {
    let fleet = Scenario::new(
        FLEET,
        &[
            ("group", Choice::All),
            ("environment", Choice::All),
            ("app", Choice::Value(data.rollout_app.clone())),
            ("version", Choice::Value(data.rollout_version.clone())),
            ("cluster", Choice::Value(data.upgraded_cluster.clone())),
            ("rollout", Choice::Value(data.rollout_id.clone())),
        ],
        &[],
    );
    vec![
        fleet.clone(),
        fleet.with_early_macros(FLEET_EARLY_MACROS),
        Scenario::new(
            "one region in stage",
            &[
                ("group", Choice::Value(data.upgraded_region())),
                ("environment", Choice::Value("stage".into())),
                ("app", Choice::All),
                ("version", Choice::Value(data.previous_version.clone())),
                ("cluster", Choice::Value(data.upgraded_cluster.clone())),
                ("rollout", Choice::Value(data.rollout_id.clone())),
            ],
            &[("app", &data.rollout_app)],
        ),
    ]
}

fn cases(dashboards: &[Dashboard], scenarios: &[Scenario]) -> Vec<Case> {
    let mut cases = Vec::new();
    for dashboard in dashboards {
        for query in &dashboard.sql {
            for scenario in scenarios {
                let context = scenario.context_for(&dashboard.json);
                let offers =
                    query.location.strip_prefix("variable ").and_then(|name| {
                        match context.choices.get(name) {
                            Some(Choice::Value(value)) => Some(value.clone()),
                            _ => None,
                        }
                    });
                cases.push(Case {
                    name: format!(
                        "{} {} ({})",
                        dashboard.file_name, query.location, scenario.name
                    ),
                    dashboard: dashboard.file_name.clone(),
                    location: query.location.clone(),
                    scenario: scenario.name,
                    sql: scenario.expand(&query.sql, &dashboard.json),
                    columns: query.columns.clone(),
                    offers,
                });
            }
        }
    }
    cases
}

async fn run_on_server(client: &clickhouse::Client, sql: &str) -> Result<String, String> {
    let mut cursor = client
        .query_raw(sql)
        .fetch_bytes(WITH_NAMES)
        .map_err(|err| err.to_string())?;
    let bytes = cursor.collect().await.map_err(|err| err.to_string())?;
    Ok(String::from_utf8(bytes.to_vec()).expect("utf-8"))
}

fn server_client(test: &TestStore) -> clickhouse::Client {
    clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(test.store.database())
        .with_validation(false)
}

/// Checks one rollup row of the overview against the store's rollup of the same group.
fn assert_rollup_row(row: &BTreeMap<String, String>, expected: &GroupRollup, what: &str) {
    let number = |column: &str| -> u64 {
        row.get(column)
            .unwrap_or_else(|| panic!("{what}: no column {column} in {row:?}"))
            .parse()
            .unwrap_or_else(|err| panic!("{what}: {column} = {:?}: {err}", row[column]))
    };
    let group = &expected.group_path;
    assert_eq!(row["group_path"], *group, "{what}");
    assert_eq!(
        number("clusters"),
        expected.clusters,
        "{what}: clusters of {group:?}"
    );
    assert_eq!(
        number("stale_clusters"),
        expected.stale_clusters,
        "{what}: stale clusters of {group:?}"
    );
    assert_eq!(
        number("reporting"),
        expected.reporting_clusters(),
        "{what}: reporting clusters of {group:?}"
    );
    assert_eq!(
        number("instances"),
        expected.total_pairs(),
        "{what}: instances of {group:?}"
    );
    for state in DriftState::ALL {
        assert_eq!(
            number(state.as_str()),
            expected.count(*state),
            "{what}: {state} in {group:?}"
        );
    }
    let share: f64 = row["in_sync_share"].parse().expect("a number");
    let expected_share = if expected.total_pairs() == 0 {
        0.0
    } else {
        expected.count(DriftState::InSync) as f64 / expected.total_pairs() as f64
    };
    assert!(
        (share - expected_share).abs() < 0.0001,
        "{what}: in-sync share of {group:?} is {share}, expected {expected_share}"
    );
}

fn overview_sql(location: &str) -> String {
    boards::fleet_overview()
        .sql
        .into_iter()
        .find(|q| q.location == location)
        .unwrap_or_else(|| panic!("the overview has no {location}"))
        .sql
}

const SELECTED_ROLLUP: &str = "panel \"Clusters and app instances\" A";
const CHILD_ROLLUPS: &str = "panel \"Rollup per group\" A";

#[tokio::test]
async fn every_panel_and_variable_query_runs_on_both_clickhouse_versions() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let data = common::dataset(300, 12);
    let inserts = data.insert_statements();
    let dashboards = fleetscope_dashboards::all();
    let scenarios = scenarios(&data);
    let cases = cases(&dashboards, &scenarios);
    assert!(
        cases.len() > 60,
        "expected every dashboard's queries, got {}",
        cases.len()
    );

    // Current ClickHouse: schema, data, then every case.
    let database = "dashboards";
    let mut statements: Vec<Statement> = catalog::schema_statements()
        .into_iter()
        .map(|entry| Statement::execute(entry.name, entry.sql))
        .collect();
    statements.extend(
        inserts
            .iter()
            .enumerate()
            .map(|(i, sql)| Statement::execute(format!("insert {}", i + 1), sql.clone())),
    );
    let first_case = statements.len();
    statements.extend(cases.iter().map(|case| {
        Statement::fetch(
            case.name.clone(),
            format!("{} FORMAT {WITH_NAMES}", case.sql),
        )
    }));
    let run = chdb::run(database, &statements);
    assert!(
        run.version.starts_with('2'),
        "chdb reports a current ClickHouse, got {}",
        run.version
    );
    let setup_failures: Vec<String> = run.results[..first_case]
        .iter()
        .filter(|r| !r.ok)
        .map(|r| format!("{}: {}", r.name, r.error))
        .collect();
    assert!(setup_failures.is_empty(), "{}", setup_failures.join("\n"));
    let current = &run.results[first_case..];

    let mut failures = Vec::new();
    for (case, result) in cases.iter().zip(current) {
        if !result.ok {
            failures.push(format!(
                "{} failed on ClickHouse {}: {}\n{}",
                case.name, run.version, result.error, case.sql
            ));
            continue;
        }
        let header: Vec<&str> = result
            .output
            .lines()
            .next()
            .unwrap_or_default()
            .split('\t')
            .collect();
        let rows = result.output.lines().count().saturating_sub(1);
        if case.columns.is_empty() {
            if header.len() != 1 {
                failures.push(format!(
                    "{}: a variable query returns one column, got {header:?}",
                    case.name
                ));
            }
        } else if header != case.columns {
            failures.push(format!(
                "{}: columns {header:?}, the panel expects {:?}",
                case.name, case.columns
            ));
        }
        if case.scenario != "one region in stage" && rows == 0 {
            failures.push(format!(
                "{}: no rows for the whole fleet\n{}",
                case.name, case.sql
            ));
        }
        if let Some(value) = &case.offers {
            if !result.output.lines().skip(1).any(|line| line == value) {
                failures.push(format!("{}: does not offer {value:?}", case.name));
            }
        }
    }
    // Both forms of the plugin's time macros give the same answers.
    for (case, result) in cases.iter().zip(current) {
        if case.scenario != FLEET_EARLY_MACROS {
            continue;
        }
        let (_, seconds) = cases
            .iter()
            .zip(current)
            .find(|(c, _)| {
                c.scenario == FLEET && c.dashboard == case.dashboard && c.location == case.location
            })
            .expect("the same query for the fleet");
        if result.output != seconds.output {
            failures.push(format!(
                "{} differs from the same query with whole-second macros:\n{}\n---\n{}",
                case.name, result.output, seconds.output
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // The overview's rollup on this engine is the simulator's ground truth.
    let fleet_case = cases
        .iter()
        .position(|c| c.location == SELECTED_ROLLUP && c.scenario == FLEET)
        .expect("the overview's rollup of the fleet");
    let fleet_rows = common::records(&current[fleet_case].output);
    assert_eq!(fleet_rows.len(), 1, "one row for the fleet");
    assert_rollup_row(&fleet_rows[0], &data.truth.rollups()[0], "chdb, the fleet");

    // ClickHouse 18.16: the same data and statements, the same answers.
    let test = TestStore::start().await;
    let client = server_client(&test);
    for sql in &inserts {
        client
            .query(sql)
            .execute()
            .await
            .unwrap_or_else(|err| panic!("insert on 18.16: {err}"));
    }
    let version = test.store.server_version().await.expect("a version");
    let mut compared = 0;
    let mut failures = Vec::new();
    for (case, result) in cases.iter().zip(current) {
        if case.scenario == FLEET_EARLY_MACROS {
            continue;
        }
        let current_only = CURRENT_ONLY
            .iter()
            .find(|(location, _)| *location == case.location);
        match (run_on_server(&client, &case.sql).await, current_only) {
            (Ok(old), None) => {
                compared += 1;
                if old != result.output {
                    failures.push(format!(
                        "{} differs between {version} and {}:\n--- {version}\n{old}\n--- {}\n{}",
                        case.name, run.version, run.version, result.output
                    ));
                }
            }
            (Err(err), None) => failures.push(format!(
                "{} failed on ClickHouse {version}: {err}\n{}",
                case.name, case.sql
            )),
            (Ok(_), Some((_, reason))) => failures.push(format!(
                "{} is listed as current-only ({reason}) but runs on {version}",
                case.name
            )),
            (Err(_), Some(_)) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(compared > 60, "only {compared} statements compared");
    eprintln!(
        "{} statements ({} queries in {} scenarios) ran on ClickHouse {}; {compared} also on {version} with equal results",
        cases.len(),
        cases.len() / scenarios.len(),
        scenarios.len(),
        run.version
    );
}

#[tokio::test]
async fn the_overview_rollup_is_the_store_rollup() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    let test = TestStore::start().await;
    let fleet = fleetscope_fixtures::GeneratedFleet::new(fleetscope_fixtures::FleetSpec {
        clusters: 1_500,
        apps: 30,
        seed: 11,
        now: NOW,
        policy: POLICY,
        ..fleetscope_fixtures::FleetSpec::default()
    })
    .expect("a valid fleet");
    // Written the way the demo writes a fleet: through the store's batch writer.
    let written = fleetscope_fixtures::write_fleet(&test.store, &fleet)
        .await
        .expect("the fleet is written");
    let rollups = test
        .store
        .drift_rollup(NOW, &POLICY)
        .await
        .expect("the store's rollup");
    assert_eq!(
        rollups,
        written.truth.rollups(),
        "the store agrees with the simulator"
    );
    let by_group: BTreeMap<&str, &GroupRollup> =
        rollups.iter().map(|r| (r.group_path.as_str(), r)).collect();

    let overview = boards::fleet_overview();
    let client = server_client(&test);
    let context = |group: Choice| {
        Scenario::new(
            "rollup",
            &[("group", group), ("environment", Choice::All)],
            &[],
        )
    };

    // The selected group's row: the fleet, and a few groups at every level.
    let selected = overview_sql(SELECTED_ROLLUP);
    let mut checked = std::collections::BTreeSet::new();
    let mut samples: Vec<(Choice, &str)> = vec![(Choice::All, "")];
    for depth in 1..=3 {
        for rollup in rollups.iter().filter(|r| r.depth == depth).take(2) {
            samples.push((Choice::Value(rollup.group_path.clone()), &rollup.group_path));
        }
    }
    for (choice, path) in samples {
        let sql = context(choice).expand(&selected, &overview.json);
        let text = run_on_server(&client, &sql)
            .await
            .unwrap_or_else(|err| panic!("{err}\n{sql}"));
        let rows = common::records(&text);
        assert_eq!(rows.len(), 1, "one row for {path:?}: {text}");
        assert_rollup_row(&rows[0], by_group[path], "selected group");
        checked.insert(path.to_owned());
    }

    // The groups below every group that has any: together, every group of the fleet.
    let children_sql = overview_sql(CHILD_ROLLUPS);
    let parents: Vec<&GroupRollup> = rollups
        .iter()
        .filter(|r| {
            rollups
                .iter()
                .any(|c| c.depth == r.depth + 1 && is_child(&c.group_path, &r.group_path))
        })
        .collect();
    for parent in parents {
        let choice = if parent.group_path.is_empty() {
            Choice::All
        } else {
            Choice::Value(parent.group_path.clone())
        };
        let sql = context(choice).expand(&children_sql, &overview.json);
        let text = run_on_server(&client, &sql)
            .await
            .unwrap_or_else(|err| panic!("{err}\n{sql}"));
        let rows = common::records(&text);
        let expected: Vec<&GroupRollup> = rollups
            .iter()
            .filter(|c| is_child(&c.group_path, &parent.group_path))
            .collect();
        assert_eq!(
            rows.len(),
            expected.len(),
            "groups below {:?}: {text}",
            parent.group_path
        );
        for (row, rollup) in rows.iter().zip(expected) {
            assert_rollup_row(row, rollup, "groups below");
            checked.insert(rollup.group_path.clone());
        }
    }
    assert_eq!(
        checked.len(),
        rollups.len(),
        "every group of the fleet was compared"
    );
}

fn is_child(path: &str, parent: &str) -> bool {
    if path.is_empty() {
        return false;
    }
    match path.rsplit_once('/') {
        Some((head, _)) => head == parent,
        None => parent.is_empty(),
    }
}

/// Every panel and variable query on a ClickHouse cluster (two shards with ZooKeeper, the store
/// migrated in cluster mode, so the sharded tables are Distributed) answers exactly as on one
/// server with the same rows. A plain `IN` over a Distributed table, for example, fails there:
/// each shard resolves the subquery's tables in its own default database.
#[tokio::test]
async fn every_panel_query_answers_on_a_clickhouse_cluster_as_on_one_server() {
    let _one_at_a_time = ONE_AT_A_TIME.lock().await;
    use fleetscope_store::{ClusterConfig, Store, StoreConfig};

    let data = common::dataset(300, 12);
    let inserts = data.insert_statements();
    let dashboards = fleetscope_dashboards::all();
    let scenarios = scenarios(&data);
    let cases: Vec<Case> = cases(&dashboards, &scenarios)
        .into_iter()
        .filter(|c| c.scenario != FLEET_EARLY_MACROS)
        .collect();

    let single = TestStore::start().await;
    let cluster = fleetscope_testkit::clickhouse_cluster::start("fleet", 2, 1);
    let database = single.store.database().to_owned();
    let first = &cluster.servers()[0];
    let store = Store::connect(
        &StoreConfig::new(first.url(), database.clone()).with_cluster(ClusterConfig::new("fleet")),
    )
    .expect("a valid cluster store config");
    store
        .migrate()
        .await
        .expect("cluster-mode migrations apply");

    let on_single = server_client(&single);
    // Inserts wait for every shard (as the store's own inserts do in cluster mode).
    let on_cluster = clickhouse::Client::default()
        .with_url(first.url())
        .with_database(&database)
        .with_validation(false)
        .with_setting("insert_distributed_sync", "1");
    for sql in &inserts {
        on_single.query(sql).execute().await.expect("insert");
        on_cluster
            .query(sql)
            .execute()
            .await
            .unwrap_or_else(|err| panic!("insert on the cluster: {err}"));
    }
    // The replicated tables copy to the other node in the background: wait until it has them.
    fleetscope_testkit::clickhouse_cluster::sync_replicas(&cluster, &database).await;

    let mut failures = Vec::new();
    let mut with_rows = 0;
    for case in &cases {
        let expected = run_on_server(&on_single, &case.sql)
            .await
            .unwrap_or_else(|err| panic!("{} on one server: {err}", case.name));
        match run_on_server(&on_cluster, &case.sql).await {
            Ok(answer) if answer == expected => {
                with_rows += usize::from(answer.lines().count() > 1);
            }
            Ok(answer) => failures.push(format!(
                "{} differs on the cluster:\n--- cluster\n{answer}\n--- one server\n{expected}",
                case.name
            )),
            Err(err) => failures.push(format!(
                "{} failed on the cluster: {err}\n{}",
                case.name, case.sql
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        with_rows > 40,
        "only {with_rows} of {} answers had rows",
        cases.len()
    );
}
