//! The "Rollouts and delivery" dashboard's panel SQL on the same fleet, over the rollout records
//! the hub wrote (once mid-way, once at the end): every figure a panel shows equals the hub's
//! answer for the same selection, on ClickHouse 18.16, on a ClickHouse cluster, and (the same
//! statements on the same rows) on current ClickHouse.

use std::collections::BTreeMap;

use fleetscope_store::panel_sql::{self, PanelQuery, Slots};
use fleetscope_testkit::chdb::{self, Statement};
use serde_json::Value;

use super::{built, id, ok, Recording, Servers, T};
use crate::common;

const NOW: u32 = T + 7300;
const DAY: u32 = 86_400;

fn in_range(column: &str) -> String {
    format!("{column} >= {FROM_ALL} AND {column} <= toDateTime({NOW})")
}
const FROM_ALL: &str = "toDateTime(0)";

/// A selection as the dashboard's variables give it.
#[derive(Clone)]
struct Choice {
    group: String,
    app: String,
    rollout: String,
    from: u32,
    to: u32,
    interval: u32,
}

impl Choice {
    fn new() -> Choice {
        Choice {
            group: String::new(),
            app: String::new(),
            rollout: String::new(),
            from: NOW - 30 * DAY,
            to: NOW,
            interval: 3600,
        }
    }

    fn query(&self, panel: fn(&Slots) -> PanelQuery) -> PanelQuery {
        let quoted = |s: &str| format!("'{s}'");
        let (group, app, rollout) = (
            quoted(&self.group),
            quoted(&self.app),
            quoted(&self.rollout),
        );
        let from = format!("toDateTime({})", self.from);
        let to = format!("toDateTime({})", self.to);
        let interval = self.interval.to_string();
        panel(&Slots {
            group: &group,
            environment: "''",
            app: &app,
            version: "''",
            cluster: "''",
            rollout: &rollout,
            failure_budget: "5",
            stale_after_seconds: "600",
            grace_seconds: "900",
            from: &from,
            to: &to,
            interval_seconds: &interval,
            time_filter: in_range,
            table_rows: 500,
        })
    }
}

/// One ClickHouse server's HTTP interface, on one database.
#[derive(Clone)]
struct Node {
    url: String,
    database: String,
}

impl Node {
    /// The result of `sql` in `format`.
    async fn text(&self, what: &str, sql: &str, format: &str) -> String {
        let response = reqwest::Client::new()
            .post(&self.url)
            .query(&[("database", self.database.as_str())])
            .body(format!("{sql} FORMAT {format}"))
            .send()
            .await
            .unwrap_or_else(|err| panic!("{what}: {err}"));
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_success(), "{what}: {text}\n{sql}");
        text
    }
}

/// Runs panel queries on one server, keeping every statement for current ClickHouse.
struct Panels {
    node: Node,
    ran: Vec<(String, String)>,
}

impl Panels {
    async fn rows(&mut self, what: &str, sql: &str) -> Vec<BTreeMap<String, String>> {
        let text = self.node.text(what, sql, "TabSeparatedWithNames").await;
        self.ran.push((what.to_owned(), sql.to_owned()));
        let mut lines = text.lines();
        let names: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
        lines
            .map(|line| {
                names
                    .iter()
                    .map(|n| (*n).to_owned())
                    .zip(line.split('\t').map(str::to_owned))
                    .collect()
            })
            .collect()
    }

    /// A panel's rows, its header checked against the columns it declares.
    async fn panel(&mut self, what: &str, query: &PanelQuery) -> Vec<BTreeMap<String, String>> {
        let header = self
            .node
            .text(
                what,
                &format!("SELECT * FROM ({}) LIMIT 0", query.sql),
                "TabSeparatedWithNames",
            )
            .await;
        let header: Vec<&str> = header
            .lines()
            .next()
            .unwrap_or_default()
            .split('\t')
            .collect();
        assert_eq!(header, query.columns, "{what}: columns");
        self.rows(what, &query.sql).await
    }
}

/// A panel's value as JSON: `\N` is null, a number a number.
fn value(text: &str) -> Value {
    if text == "\\N" {
        return Value::Null;
    }
    let number: f64 = text
        .parse()
        .unwrap_or_else(|_| panic!("{text:?} is not a number"));
    serde_json::json!(number)
}

/// A JSON number as f64 (null stays null), for comparing with [`value`].
fn number(v: &Value) -> Value {
    match v.as_f64() {
        Some(n) => serde_json::json!(n),
        None => Value::Null,
    }
}

const MILESTONES: [&str; 4] = [
    "seconds_to_50_percent",
    "seconds_to_90_percent",
    "seconds_to_99_percent",
    "seconds_to_100_percent",
];

/// The list, the stalled ones and the metric that names them.
async fn list_and_stalled(panels: &mut Panels, base: &str) {
    let listed = ok(base, "rollouts?limit=1000").await;
    let items = listed["items"].as_array().unwrap();
    let rows = panels
        .panel(
            "rollout list",
            &Choice::new().query(panel_sql::rollout_list),
        )
        .await;
    let ids: Vec<&str> = rows.iter().map(|r| r["rollout"].as_str()).collect();
    let hub_ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, hub_ids, "the list, newest first");
    for (row, item) in rows.iter().zip(items) {
        assert_eq!(row["status"], item["status"].as_str().unwrap(), "{row:?}");
        for field in [
            "targeted",
            "reached",
            "in_sync",
            "failed",
            "stale",
            "failed_before_reaching",
        ]
        .into_iter()
        .chain(MILESTONES)
        {
            assert_eq!(
                value(&row[field]),
                number(&item[field]),
                "{field} of {row:?}"
            );
        }
    }
    assert!(
        items.iter().any(|i| i["status"] == "stalled"),
        "the fleet has a stalled rollout"
    );

    let exported: Vec<(String, String, String)> =
        common::stalled_rollouts(&common::metrics_text(base).await)
            .into_iter()
            .map(|((app, version), seconds)| (app, version, seconds))
            .collect();
    let mut shown: Vec<(String, String, String)> = panels
        .panel(
            "stalled rollouts",
            &Choice::new().query(panel_sql::stalled_rollouts),
        )
        .await
        .into_iter()
        .map(|r| {
            (
                r["app"].clone(),
                r["version"].clone(),
                r["stalled_seconds"].clone(),
            )
        })
        .collect();
    shown.sort();
    assert!(!shown.is_empty());
    assert_eq!(shown, exported, "the stalled panel and the metric");
}

/// One rollout's curve, as the hub gives it for `group` (`""`: the whole fleet).
async fn curve(panels: &mut Panels, base: &str, rollout: &str, start: u32, group: &str) {
    let path = if group.is_empty() {
        format!("rollouts/{rollout}")
    } else {
        format!("rollouts/{rollout}?group={group}")
    };
    let detail = ok(base, &path).await;
    let points = detail["curve"].as_array().unwrap();
    let seconds: Vec<u32> = points
        .iter()
        .map(|p| p["seconds"].as_u64().unwrap() as u32)
        .collect();
    let step = seconds[1] - seconds[0];
    let choice = Choice {
        group: group.to_owned(),
        rollout: rollout.to_owned(),
        to: start + seconds[seconds.len() - 1],
        interval: step,
        ..Choice::new()
    };
    let query = choice.query(panel_sql::rollout_curve);
    let sql = format!(
        "SELECT toUInt32(time) AS at, in_sync, failed, waiting FROM ({})",
        query.sql
    );
    let rows = panels.rows(&format!("curve of {path}"), &sql).await;
    let shown: Vec<[u64; 4]> = rows
        .iter()
        .map(|r| ["at", "in_sync", "failed", "waiting"].map(|c| r[c].parse::<u64>().unwrap()))
        .collect();
    let expected: Vec<[u64; 4]> = points
        .iter()
        .map(|p| {
            [
                u64::from(start) + p["seconds"].as_u64().unwrap(),
                p["in_sync"].as_u64().unwrap(),
                p["failed"].as_u64().unwrap(),
                p["waiting"].as_u64().unwrap(),
            ]
        })
        .collect();
    assert_eq!(shown, expected, "{path}");
}

/// A rollout in each group below `group`, as the hub lists it for that group.
async fn groups(panels: &mut Panels, base: &str, rollout: &str, group: &str) {
    let choice = Choice {
        group: group.to_owned(),
        rollout: rollout.to_owned(),
        ..Choice::new()
    };
    let rows = panels
        .panel(
            &format!("groups of {rollout} below {group:?}"),
            &choice.query(panel_sql::rollout_groups),
        )
        .await;
    assert!(!rows.is_empty());
    let app = rollout.split('@').next().unwrap();
    for row in rows {
        let child = &row["group_path"];
        let listed = ok(
            base,
            &format!("rollouts?app={app}&group={child}&limit=1000"),
        )
        .await;
        let item = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == rollout)
            .unwrap_or_else(|| panic!("{rollout} listed for {child}"));
        for field in ["targeted", "reached", "failed_before_reaching"]
            .into_iter()
            .chain(MILESTONES)
        {
            assert_eq!(
                value(&row[field]),
                number(&item[field]),
                "{field} of {rollout} in {child}"
            );
        }
    }
}

/// The delivery rows of a panel against the hub's answer for the same selection: every app
/// the panel shows, with the hub's figures; every app it leaves out, with nothing to show.
fn same_delivery(rows: &[&BTreeMap<String, String>], answer: &Value, what: &str) {
    let apps = answer["apps"].as_array().unwrap();
    for app in apps {
        let name = app["app"].as_str().unwrap();
        let expected = [
            ("deployments", number(&app["deployments"])),
            ("deployments_per_day", number(&app["deployments_per_day"])),
            ("lead_time_count", number(&app["lead_time"]["count"])),
            (
                "lead_time_median_seconds",
                number(&app["lead_time"]["median_seconds"]),
            ),
            (
                "lead_time_p90_seconds",
                number(&app["lead_time"]["p90_seconds"]),
            ),
            ("changes", number(&app["changes"])),
            ("failed_changes", number(&app["failed_changes"])),
            ("change_failure_rate", number(&app["change_failure_rate"])),
            (
                "time_to_restore_count",
                number(&app["time_to_restore"]["count"]),
            ),
            (
                "time_to_restore_median_seconds",
                number(&app["time_to_restore"]["median_seconds"]),
            ),
            (
                "time_to_restore_p90_seconds",
                number(&app["time_to_restore"]["p90_seconds"]),
            ),
        ];
        match rows.iter().find(|r| r["app"] == name) {
            Some(row) => {
                for (column, figure) in expected {
                    assert_eq!(value(&row[column]), figure, "{what}: {column} of {name}");
                }
            }
            None => {
                for (column, figure) in expected {
                    let nothing = figure.is_null() || figure.as_f64() == Some(0.0);
                    assert!(nothing, "{what}: {name} left out with {column} {figure}");
                }
            }
        }
    }
    for row in rows {
        assert!(
            apps.iter().any(|a| a["app"] == row["app"].as_str()),
            "{what}: the panel shows {} which the hub does not",
            row["app"]
        );
    }
}

async fn delivery(panels: &mut Panels, base: &str) {
    for (group, window) in [
        ("", 30 * DAY),
        ("amer", 30 * DAY),
        ("emea/de", 30 * DAY),
        ("", 3600),
    ] {
        let choice = Choice {
            group: group.to_owned(),
            from: NOW - window,
            ..Choice::new()
        };
        let rows = panels
            .panel(
                &format!("delivery of {group:?} over {window} s"),
                &choice.query(panel_sql::delivery),
            )
            .await;
        let window_text = if window >= DAY {
            format!("{}d", window / DAY)
        } else {
            format!("{}h", window / 3600)
        };
        let selection = if group.is_empty() {
            String::new()
        } else {
            format!("group={group}&")
        };
        let answer = ok(base, &format!("delivery?{selection}window={window_text}")).await;
        let rows: Vec<&BTreeMap<String, String>> = rows.iter().collect();
        same_delivery(
            &rows,
            &answer,
            &format!("delivery of {group:?} over {window_text}"),
        );
    }
    for group in ["", "amer"] {
        let choice = Choice {
            group: group.to_owned(),
            ..Choice::new()
        };
        let rows = panels
            .panel(
                &format!("delivery below {group:?}"),
                &choice.query(panel_sql::delivery_by_group),
            )
            .await;
        let children: std::collections::BTreeSet<&str> =
            rows.iter().map(|r| r["group_path"].as_str()).collect();
        assert!(!children.is_empty());
        for child in children {
            let answer = ok(base, &format!("delivery?group={child}")).await;
            let of_child: Vec<&BTreeMap<String, String>> =
                rows.iter().filter(|r| r["group_path"] == child).collect();
            same_delivery(
                &of_child,
                &answer,
                &format!("delivery of {child} below {group:?}"),
            );
        }
    }
}

/// Every panel against the hub, on the server `node`.
async fn check(node: Node, base: &str) -> Panels {
    let mut panels = Panels {
        node,
        ran: Vec::new(),
    };
    list_and_stalled(&mut panels, base).await;
    let first_wave = id("web", T + 1000, "2.0");
    let second_wave = id("web", T + 2000, "2.0");
    let third_wave = id("web", T + 3000, "2.0");
    // A completed rollout (its curve ends a step after it completed), a stalled one that a
    // cluster joined, and one within a group.
    curve(&mut panels, base, &first_wave, T + 1000, "").await;
    curve(&mut panels, base, &third_wave, T + 3000, "").await;
    curve(&mut panels, base, &third_wave, T + 3000, "amer").await;
    curve(&mut panels, base, &second_wave, T + 2000, "amer/us").await;
    groups(&mut panels, base, &second_wave, "").await;
    groups(&mut panels, base, &third_wave, "amer").await;
    delivery(&mut panels, base).await;
    panels
}

#[tokio::test]
async fn the_dashboard_panels_give_the_hubs_figures_on_both_versions() {
    let mut recording = Recording::default();
    let (fleet, _state, base) = built(false, Some(&mut recording)).await;
    let Servers::One(test) = &fleet.servers else {
        unreachable!("one server")
    };
    let node = Node {
        url: test.server.url(),
        database: fleet.store.database().to_owned(),
    };
    let panels = check(node.clone(), &base).await;
    let written = node
        .text(
            "records written",
            "SELECT count(), uniqExact(app, render_id, version) FROM rollout_records",
            "TabSeparated",
        )
        .await;
    let (rows, rollouts) = written.trim().split_once('\t').unwrap();
    assert!(
        rows.parse::<u64>().unwrap() > rollouts.parse::<u64>().unwrap(),
        "the write at the end wrote some rollouts again: {written}"
    );

    // The same statements on the same rows on current ClickHouse give the same text.
    let mut statements: Vec<Statement> = fleetscope_store::catalog::schema_statements()
        .into_iter()
        .map(|entry| Statement::execute(entry.name, entry.sql))
        .collect();
    for table in ["rollout_records", "rollout_clusters", "clusters"] {
        let values = node
            .text(table, &format!("SELECT * FROM {table}"), "Values")
            .await;
        statements.push(Statement::execute(
            format!("insert into {table}"),
            format!("INSERT INTO {table} VALUES {values}"),
        ));
    }
    let mut texts = Vec::new();
    for (what, sql) in &panels.ran {
        statements.push(Statement::fetch(what.clone(), sql.clone()));
        texts.push((what, node.text(what, sql, "TabSeparated").await));
    }
    let run = chdb::run(&node.database, &statements);
    run.assert_all_ran();
    for (what, text) in texts {
        assert_eq!(
            run.result(what).output,
            text,
            "{what} on {} and 18.16",
            run.version
        );
    }
}

#[tokio::test]
async fn the_dashboard_panels_give_the_hubs_figures_on_a_clickhouse_cluster() {
    let mut recording = Recording::default();
    let (fleet, _state, base) = built(true, Some(&mut recording)).await;
    let Servers::Cluster(cluster, database) = &fleet.servers else {
        unreachable!("a cluster")
    };
    fleetscope_testkit::clickhouse_cluster::sync_replicas(cluster, database).await;
    // Another node than the one the hub wrote through.
    let node = Node {
        url: cluster.servers()[3].url(),
        database: database.clone(),
    };
    check(node, &base).await;
}
