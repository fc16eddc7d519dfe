//! The dashboards' panel queries on a real server: every one runs on the drift grid with
//! literal values in its slots and returns the columns it declares, and the ones about drift
//! answer what the store's own queries answer with the same values bound: the pairs
//! `Store::drift_pairs` classifies, the rollups of `Store::drift_rollup`.

use std::collections::BTreeMap;

use fleetscope_model::DriftState;
use fleetscope_store::panel_sql::{self, PanelQuery, Slots};
use fleetscope_store::GroupRollup;
use fleetscope_testkit::grid::{self, NOW, POLICY};
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
