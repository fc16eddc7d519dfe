//! The panels' statements against the store's own queries and their slots.

use super::*;
use crate::queries::rollup_trend_sql;

fn range(column: &str) -> String {
    format!("{column} BETWEEN 1 AND 2")
}

const SAMPLE: Slots<'static> = Slots {
    group: "'emea'",
    environment: "'prod'",
    app: "'checkout'",
    version: "'1.2.0'",
    cluster: "'emea-1'",
    rollout: "'checkout@1@1.2.0'",
    failure_budget: "5",
    stale_after_seconds: "600",
    grace_seconds: "900",
    from: "toDateTime(1)",
    to: "toDateTime(2)",
    interval_seconds: "60",
    time_filter: range,
    table_rows: 500,
};

#[test]
fn state_order_covers_every_state_once() {
    let mut ordered: Vec<_> = STATE_ORDER.to_vec();
    ordered.sort();
    let mut all = DriftState::ALL.to_vec();
    all.sort();
    assert_eq!(ordered, all);
}

/// A store handle for rendering the store's own queries; nothing is sent.
fn store() -> crate::Store {
    crate::Store::connect(&crate::StoreConfig::new("http://127.0.0.1:9", "fleetscope"))
        .expect("a valid config")
}

const NOW: fleetscope_model::Timestamp = fleetscope_model::Timestamp(1_800_000_000);
const POLICY: fleetscope_model::DriftPolicy = fleetscope_model::DriftPolicy {
    stale_after_seconds: 600,
    progress_grace_seconds: 900,
};

#[test]
fn classified_pairs_carry_the_store_expression_and_the_slots() {
    let sql = classified_pairs(&SAMPLE);
    assert!(sql.contains(crate::drift_sql::drift_state_expression()));
    let columns = PAIR_COLUMNS[..PAIR_COLUMNS.len() - 1].join(", ");
    assert!(sql.starts_with(&format!("SELECT {columns}, multiIf(")));
    assert!(sql.contains("toInt64(toUInt32(toDateTime(2))) AS now_s"));
    assert!(sql.contains("toInt64(900) AS grace_s"));
    assert!(sql.contains("toInt64(600) AS stale_s"));
    assert!(!sql.contains('?'), "a parameter left in {sql}");
}

/// The store's own queries are the same texts with their values bound where the panels
/// have their slots.
#[test]
fn the_store_binds_values_where_the_panels_put_expressions() {
    let store = store();
    let shown = |query: clickhouse::query::Query| query.sql_display().to_string();
    assert_eq!(
        shown(crate::queries::pair_counts_query(&store, NOW, &POLICY)),
        pair_counts_sql("1800000000", "900", "600")
    );
    assert_eq!(
        shown(crate::queries::cluster_counts_query(&store, NOW, &POLICY)),
        cluster_counts_sql("1800000000", "600")
    );
    assert_eq!(
        shown(crate::queries::stale_clusters_query(
            &store, NOW, &POLICY, 7
        )),
        format!("{} LIMIT 7", stale_clusters_sql("1800000000", "600"))
    );
    assert_eq!(
        shown(crate::queries::rollup_trend_query(
            &store,
            "emea",
            fleetscope_model::Timestamp(1),
            fleetscope_model::Timestamp(2)
        )),
        rollup_trend_sql("?fields", "'emea'", "toDateTime(1)", "toDateTime(2)")
    );
}

#[test]
fn rollups_are_the_store_rollup_queries() {
    let sql = selected_group_rollup(&SAMPLE).sql;
    assert!(sql.contains(&pair_counts(&SAMPLE)));
    assert!(sql.contains(&cluster_counts(&SAMPLE)));
}

#[test]
fn every_slot_reaches_the_text_and_nothing_else_does() {
    let all = [
        selected_group_rollup(&SAMPLE),
        child_group_rollups(&SAMPLE),
        drift_trend(&SAMPLE),
        cluster_trend(&SAMPLE),
        stale_cluster_list(&SAMPLE),
        problem_apps(&SAMPLE),
        problem_pairs(&SAMPLE, true),
        app_states(&SAMPLE),
        version_distribution(&SAMPLE),
        versions_by_group(&SAMPLE),
        rollout_status(&SAMPLE),
        rollout_progress(&SAMPLE),
        failure_insights(&SAMPLE),
        running_versions_over_time(&SAMPLE),
        cluster_info(&SAMPLE),
        cluster_states(&SAMPLE),
        cluster_apps(&SAMPLE),
        cluster_objects(&SAMPLE),
        cluster_history(&SAMPLE),
        cluster_desired_history(&SAMPLE),
        renders_over_time(&SAMPLE),
        desired_changes_over_time(&SAMPLE),
        transitions_over_time(&SAMPLE),
        renders_in_range(&SAMPLE),
        desired_changes(&SAMPLE),
        group_transitions(&SAMPLE),
        desired_by_environment(&SAMPLE),
        running_by_environment(&SAMPLE),
        states_by_environment(&SAMPLE),
    ]
    .map(|query| query.sql)
    .join("\n");
    for slot in [
        SAMPLE.group,
        SAMPLE.environment,
        SAMPLE.app,
        SAMPLE.version,
        SAMPLE.cluster,
        SAMPLE.stale_after_seconds,
        SAMPLE.grace_seconds,
        SAMPLE.from,
        SAMPLE.to,
        SAMPLE.interval_seconds,
        "BETWEEN 1 AND 2",
        "LIMIT 500",
    ] {
        assert!(all.contains(slot), "{slot} is in no panel query");
    }
    assert!(!all.contains('?'), "a parameter left in the panel queries");
}
