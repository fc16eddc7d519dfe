//! The failure insights panel lists what the hub's `/api/v1/insights/failures` finds, with the
//! same counts and rates: for every app of a generated fleet, in the whole fleet and in one
//! region, the panel's query (expanded as Grafana would for that app and group) on a private
//! ClickHouse against the hub's answer from its index loaded from the same store. The panel keeps only the findings on at
//! least two failing clusters and ranks by its own measure, so the comparison is of the sets.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Scenario, NOW, POLICY};
use fleetscope_dashboards::boards;
use fleetscope_dashboards::expand::Choice;
use fleetscope_engine::insights::{self, FailuresQuestion};
use fleetscope_engine::Filter;
use fleetscope_model::GroupPath;
use fleetscope_store::panel_sql::INSIGHT_MIN_FAILING_WITH;
use fleetscope_testkit::TestStore;

const PANEL: &str = "panel \"Failure insights for $app\" A";

/// A finding as the two sides can both state it: attribute, value, failing and in-sync
/// clusters with the value.
type Finding = (String, String, u64, u64);

#[tokio::test]
async fn the_panel_lists_the_hubs_findings_on_two_or_more_failing_clusters() {
    let data = common::dataset(300, 12);
    let test = TestStore::start().await;
    let client = clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(test.store.database())
        .with_validation(false);
    for sql in data.insert_statements() {
        client
            .query(&sql)
            .execute()
            .await
            .unwrap_or_else(|err| panic!("insert: {err}"));
    }
    let mut fleet = fleetscope_engine::load(&test.store, fleetscope_runtime::clock::now)
        .await
        .expect("the hub's index loads from the store");
    fleet.advance(NOW, &POLICY);

    let dashboard = boards::app_versions();
    let panel_sql = dashboard
        .sql
        .iter()
        .find(|q| q.location == PANEL)
        .unwrap_or_else(|| panic!("the app versions dashboard has no {PANEL}"))
        .sql
        .clone();
    let apps: BTreeSet<String> = data.desired.iter().map(|d| d.app.clone()).collect();
    assert!(apps.len() >= 10, "the fleet has apps: {apps:?}");

    let region = data.upgraded_region();
    let selections = [
        (Choice::All, Filter::default()),
        (
            Choice::Value(region.clone()),
            Filter {
                groups: vec![GroupPath::parse(&region).expect("a valid group")],
                ..Filter::default()
            },
        ),
    ];
    let mut compared = 0;
    for ((group, filter), app) in selections
        .iter()
        .flat_map(|selection| apps.iter().map(move |app| (selection, app)))
    {
        let answer = insights::failures(
            &fleet,
            &FailuresQuestion {
                filter: filter.clone(),
                app: app.clone(),
                version: None,
                group: None,
                limit: 1_000,
            },
        );
        let from_hub: BTreeMap<Finding, (f64, f64)> = answer
            .findings
            .iter()
            .filter(|f| f.failing_with >= INSIGHT_MIN_FAILING_WITH)
            .map(|f| {
                (
                    (
                        f.attribute.name().to_owned(),
                        f.value.clone(),
                        f.failing_with,
                        f.in_sync_with,
                    ),
                    (f.failure_rate_with, f.failure_rate_without),
                )
            })
            .collect();

        let scenario = Scenario::new(
            "one app",
            &[
                ("group", group.clone()),
                ("environment", Choice::All),
                ("app", Choice::Value(app.clone())),
                ("version", Choice::Value(String::new())),
                ("cluster", Choice::Value(String::new())),
            ],
            &[],
        );
        let sql = scenario.expand(&panel_sql, &dashboard.json);
        let mut cursor = client
            .query_raw(&sql)
            .fetch_bytes("TabSeparatedWithNames")
            .unwrap_or_else(|err| panic!("{app} in {group:?}: {err}\n{sql}"));
        let bytes = cursor
            .collect()
            .await
            .unwrap_or_else(|err| panic!("{app} in {group:?}: {err}\n{sql}"));
        let rows = common::records(std::str::from_utf8(&bytes).expect("utf-8"));
        let mut from_panel: BTreeMap<Finding, (f64, f64)> = BTreeMap::new();
        for row in &rows {
            let number = |column: &str| -> f64 {
                row[column]
                    .parse()
                    .unwrap_or_else(|err| panic!("{app} in {group:?}: {column} in {row:?}: {err}"))
            };
            let count = |column: &str| -> u64 {
                row[column]
                    .parse()
                    .unwrap_or_else(|err| panic!("{app} in {group:?}: {column} in {row:?}: {err}"))
            };
            let key = (
                row["attribute"].clone(),
                row["value"].clone(),
                count("failing_with"),
                count("in_sync_with"),
            );
            let rates = (number("failure_rate_with"), number("failure_rate_without"));
            assert!(
                from_panel.insert(key, rates).is_none(),
                "{app} in {group:?}: a value twice in {rows:?}"
            );
        }
        assert_eq!(
            from_panel.keys().collect::<Vec<_>>(),
            from_hub.keys().collect::<Vec<_>>(),
            "{app} in {group:?}: the panel's values and counts against the hub's ({} failing, {} in sync)",
            answer.failing,
            answer.in_sync
        );
        for (key, (with, without)) in &from_panel {
            let (hub_with, hub_without) = from_hub[key];
            assert!(
                (with - hub_with).abs() <= 0.000_05 + 1e-9
                    && (without - hub_without).abs() <= 0.000_05 + 1e-9,
                "{app} in {group:?} {key:?}: rates {with}, {without} against the hub's {hub_with}, {hub_without}"
            );
        }
        compared += from_hub.len();
    }
    assert!(
        compared >= 60,
        "only {compared} findings on two or more failing clusters over every app"
    );
}
