//! The committed dashboard files are the generated ones (`UPDATE_EXPECT=1 cargo test -p
//! fleetscope-dashboards --test committed` rewrites them), and the dashboards hang together:
//! data sources by variable, links relative and pointing at existing dashboards and variables,
//! every ClickHouse statement known to the SQL tests, drift only through the store's expression.

use std::collections::{BTreeMap, BTreeSet};

use fleetscope_dashboards::grafana::{
    ALL_VALUE, CLICKHOUSE_PLUGIN, CLICKHOUSE_VARIABLE, PROMETHEUS_PLUGIN, PROMETHEUS_VARIABLE,
};
use fleetscope_dashboards::Dashboard;
use serde_json::Value;

#[test]
fn the_committed_files_are_the_generated_ones() {
    let dashboards = fleetscope_dashboards::all();
    for dashboard in &dashboards {
        expect_test::expect_file![format!("../../grafana/{}", dashboard.file_name)]
            .assert_eq(&fleetscope_dashboards::to_text(&dashboard.json));
    }
    let generated: BTreeSet<String> = dashboards.iter().map(|d| d.file_name.clone()).collect();
    let committed: BTreeSet<String> = std::fs::read_dir(fleetscope_dashboards::output_dir())
        .expect("the grafana folder exists")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        committed, generated,
        "the grafana folder holds exactly the generated dashboards; run cargo run -p fleetscope-dashboards"
    );
}

fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        out.push(panel);
        if let Some(inner) = panel["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

fn variables(dashboard: &Value) -> &Vec<Value> {
    dashboard["templating"]["list"]
        .as_array()
        .expect("a variable list")
}

/// Every string under a key `url`, anywhere.
fn urls(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if key == "url" {
                    if let Some(text) = inner.as_str() {
                        out.push(text.to_owned());
                    }
                }
                urls(inner, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| urls(item, out)),
        _ => {}
    }
}

#[test]
fn identities_and_layout_are_sound() {
    let dashboards = fleetscope_dashboards::all();
    let uids: BTreeSet<&str> = dashboards.iter().map(|d| d.uid.as_str()).collect();
    assert_eq!(uids.len(), dashboards.len(), "unique uids");
    for dashboard in &dashboards {
        let json = &dashboard.json;
        assert_eq!(json["uid"], dashboard.uid.as_str());
        assert!(
            (8..=40).contains(&dashboard.uid.len()),
            "Grafana wants 8 to 40 characters in a uid: {}",
            dashboard.uid
        );
        assert!(json["tags"]
            .as_array()
            .expect("tags")
            .contains(&Value::from("fleetscope")));
        let mut ids = BTreeSet::new();
        let mut cells: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        for panel in panels(json) {
            let id = panel["id"].as_u64().expect("a panel id");
            assert!(
                ids.insert(id),
                "{}: panel id {id} twice",
                dashboard.file_name
            );
            let grid = &panel["gridPos"];
            let (x, y, w, h) = (
                grid["x"].as_u64().expect("x"),
                grid["y"].as_u64().expect("y"),
                grid["w"].as_u64().expect("w"),
                grid["h"].as_u64().expect("h"),
            );
            assert!(
                x + w <= 24,
                "{}: panel {id} leaves the grid",
                dashboard.file_name
            );
            for column in x..x + w {
                for row in y..y + h {
                    if let Some(other) = cells.insert((column, row), id) {
                        panic!(
                            "{}: panels {other} and {id} overlap at ({column}, {row})",
                            dashboard.file_name
                        );
                    }
                }
            }
            let title = panel["title"].as_str().unwrap_or_default();
            assert!(
                !title.is_empty(),
                "{}: panel {id} has a title",
                dashboard.file_name
            );
            if panel["type"] != "row" {
                assert!(
                    panel["description"].as_str().is_some_and(|d| d.len() > 20),
                    "{}: panel {title:?} says what it answers",
                    dashboard.file_name
                );
            }
        }
    }
}

#[test]
fn data_sources_come_from_variables() {
    for dashboard in fleetscope_dashboards::all() {
        let json = &dashboard.json;
        let names: BTreeSet<&str> = variables(json)
            .iter()
            .filter_map(|v| v["name"].as_str())
            .collect();
        for panel in panels(json).into_iter().filter(|p| p["type"] != "row") {
            let title = panel["title"].as_str().unwrap_or_default();
            let mut references = vec![&panel["datasource"]];
            references.extend(
                panel["targets"]
                    .as_array()
                    .expect("targets")
                    .iter()
                    .map(|t| &t["datasource"]),
            );
            for reference in references {
                let (variable, plugin) = match reference["type"].as_str() {
                    Some(CLICKHOUSE_PLUGIN) => (CLICKHOUSE_VARIABLE, CLICKHOUSE_PLUGIN),
                    Some(PROMETHEUS_PLUGIN) => (PROMETHEUS_VARIABLE, PROMETHEUS_PLUGIN),
                    other => panic!(
                        "{}: {title:?} uses data source type {other:?}",
                        dashboard.file_name
                    ),
                };
                assert_eq!(
                    reference["uid"],
                    format!("${{{variable}}}"),
                    "{}: {title:?}",
                    dashboard.file_name
                );
                assert!(
                    names.contains(variable),
                    "{}: no variable {variable}",
                    dashboard.file_name
                );
                let definition = variables(json)
                    .iter()
                    .find(|v| v["name"] == variable)
                    .expect("defined");
                assert_eq!(definition["type"], "datasource");
                assert_eq!(definition["query"], plugin);
            }
        }
        for variable in variables(json) {
            if variable["includeAll"] == true {
                assert_eq!(
                    variable["allValue"], ALL_VALUE,
                    "{}: {} reads All as no filter",
                    dashboard.file_name, variable["name"]
                );
            }
        }
    }
}

#[test]
fn links_are_relative_and_lead_to_existing_dashboards_and_variables() {
    let dashboards = fleetscope_dashboards::all();
    let by_uid: BTreeMap<&str, &Dashboard> =
        dashboards.iter().map(|d| (d.uid.as_str(), d)).collect();
    let mut data_links = 0;
    for dashboard in &dashboards {
        let mut found = Vec::new();
        urls(&dashboard.json, &mut found);
        for url in found {
            if url.is_empty() {
                // The dashboard list link (type "dashboards") finds its targets by tag.
                continue;
            }
            data_links += 1;
            assert!(
                url.starts_with("/d/") && !url.contains("://"),
                "{}: link {url:?} is not relative",
                dashboard.file_name
            );
            let (path, query) = url["/d/".len()..]
                .split_once('?')
                .unwrap_or((&url["/d/".len()..], ""));
            let target = by_uid
                .get(path)
                .unwrap_or_else(|| panic!("{}: link {url:?} to no dashboard", dashboard.file_name));
            for parameter in query.split('&') {
                if let Some(assignment) = parameter.strip_prefix("var-") {
                    let name = assignment.split('=').next().expect("a name");
                    assert!(
                        variables(&target.json).iter().any(|v| v["name"] == name),
                        "{}: link {url:?} sets {name}, which {} does not have",
                        dashboard.file_name,
                        target.file_name
                    );
                } else {
                    assert_eq!(
                        parameter, "${__url_time_range}",
                        "{}: {url:?}",
                        dashboard.file_name
                    );
                }
            }
        }
    }
    assert!(
        data_links > 15,
        "drill-down links between the dashboards: {data_links}"
    );
}

fn raw_sql(dashboard: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for panel in panels(dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if target["datasource"]["type"] == CLICKHOUSE_PLUGIN {
                out.insert(target["rawSql"].as_str().expect("rawSql").to_owned());
            }
        }
    }
    for variable in variables(dashboard) {
        if variable["type"] == "query" {
            out.insert(variable["query"].as_str().expect("a query").to_owned());
        }
    }
    out
}

#[test]
fn every_clickhouse_statement_is_known_to_the_sql_tests() {
    for dashboard in fleetscope_dashboards::all() {
        let listed: BTreeSet<String> = dashboard.sql.iter().map(|q| q.sql.clone()).collect();
        assert_eq!(raw_sql(&dashboard.json), listed, "{}", dashboard.file_name);
        for query in &dashboard.sql {
            if query.location.starts_with("panel") {
                assert!(
                    !query.columns.is_empty(),
                    "{}: {} names its columns",
                    dashboard.file_name,
                    query.location
                );
            }
        }
    }
}

#[test]
fn drift_is_classified_only_by_the_store_expression() {
    let expression = fleetscope_store::drift_sql::drift_state_expression();
    let mut classified = 0;
    for dashboard in fleetscope_dashboards::all() {
        for query in &dashboard.sql {
            let uses = query.sql.matches(expression).count();
            // The expression is a multiIf; no statement builds another one.
            assert_eq!(
                query.sql.matches("multiIf(").count(),
                uses,
                "{} {}: a drift classification other than the store's",
                dashboard.file_name,
                query.location
            );
            let mentions_state = query.sql.contains("state =") || query.sql.contains("state IN");
            if mentions_state {
                assert!(
                    uses > 0,
                    "{} {} reads drift states it did not classify with the store's expression",
                    dashboard.file_name,
                    query.location
                );
            }
            classified += usize::from(uses > 0);
        }
    }
    assert!(classified >= 12, "panels about drift: {classified}");
}
