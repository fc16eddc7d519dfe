//! The commands against a real hub, served in-process on a generated fleet in a private
//! ClickHouse: every table agrees with the hub's JSON, `-o json` is that JSON, and the exit
//! codes are the documented ones for a gate that passes or fails, a usage error, a bad token
//! and a hub that cannot be reached; the gate's verdict reads as labelled lines, with the page
//! of clusters holding it back and how to read the next.

use std::sync::Arc;

use clap::{Parser, Subcommand};
use fleetscope_cli::table::thousands;
use fleetscope_cli::{DriftArgs, GateArgs, StatusArgs, VersionsArgs};
use fleetscope_engine::Index;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_testkit::TestStore;
use serde_json::Value;

const TOKEN: &str = "operator-token-0123456789";

/// The four commands as the binary offers them.
#[derive(Debug, Parser)]
struct TestCli {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, Subcommand)]
enum Sub {
    Status(StatusArgs),
    Versions(VersionsArgs),
    Drift(DriftArgs),
    Gate(GateArgs),
    Rollouts(fleetscope_cli::RolloutsArgs),
    Rollout(fleetscope_cli::RolloutArgs),
    Delivery(fleetscope_cli::DeliveryArgs),
    Login(fleetscope_cli::LoginArgs),
}

/// What a command run printed and how it ended.
#[derive(Debug)]
struct Run {
    code: u8,
    stdout: String,
    error: String,
}

async fn run(args: &[&str]) -> Run {
    let cli = TestCli::try_parse_from(std::iter::once("fleetscope").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?} parses: {e}"));
    let command = match cli.command {
        Sub::Status(a) => fleetscope_cli::Command::Status(a),
        Sub::Versions(a) => fleetscope_cli::Command::Versions(a),
        Sub::Drift(a) => fleetscope_cli::Command::Drift(a),
        Sub::Gate(a) => fleetscope_cli::Command::Gate(a),
        Sub::Rollouts(a) => fleetscope_cli::Command::Rollouts(a),
        Sub::Rollout(a) => fleetscope_cli::Command::Rollout(a),
        Sub::Delivery(a) => fleetscope_cli::Command::Delivery(a),
        Sub::Login(a) => fleetscope_cli::Command::Login(a),
    };
    let mut out = Vec::new();
    let (code, error) = match command.run(&mut out).await {
        Ok(outcome) => (outcome.exit_code(), String::new()),
        Err(err) => (err.exit_code(), err.to_string()),
    };
    Run {
        code,
        stdout: String::from_utf8(out).expect("utf-8 output"),
        error,
    }
}

/// The table's lines as cells (no cell of these tables holds a space but the last column).
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
}

struct Hub {
    _test: TestStore,
    base: String,
}

impl Hub {
    async fn start() -> Hub {
        Hub::start_with(&format!(
            "tokens:\n  - name: operators\n    token: {TOKEN}\n    role: read\n"
        ))
        .await
    }

    /// A hub with the token file `tokens`.
    async fn start_with(tokens: &str) -> Hub {
        let test = TestStore::start().await;
        let fleet = GeneratedFleet::new(FleetSpec {
            clusters: 300,
            apps: 5,
            ..FleetSpec::default()
        })
        .expect("a valid fleet");
        fleetscope_fixtures::write_fleet(&test.store, &fleet)
            .await
            .expect("the fleet is written");
        let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
            .await
            .expect("the index loads");
        let mut state = AppState::new(
            Arc::new(index),
            fleet.spec().policy,
            MetricsConfig::default(),
        );
        state.fixed_now = Some(fleet.spec().now);
        let auth = Auth::parse(tokens).expect("a valid token file");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("bound address"));
        let app = router(Arc::new(state), Arc::new(auth), false);
        tokio::spawn(async move { axum::serve(listener, app).await.expect("the hub serves") });
        Hub { _test: test, base }
    }

    /// The hub's JSON answer to `path_and_query`, read directly.
    async fn json(&self, path_and_query: &str) -> Value {
        let response = reqwest::Client::new()
            .get(format!("{}{path_and_query}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("the hub answers");
        assert_eq!(response.status(), 200, "{path_and_query}");
        response.json().await.expect("json")
    }

    /// `command` with the connection flags, then `args`.
    async fn run(&self, command: &str, args: &[&str]) -> Run {
        let mut all = vec![command, "--hub-url", &self.base, "--token", TOKEN];
        all.extend(args);
        run(&all).await
    }
}

/// The gate's labelled lines (`label:   value`) before its first blank line, by label.
fn labelled(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .take_while(|line| !line.is_empty())
        .map(|line| {
            let (label, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("not a labelled line: {line:?}"));
            (label.to_owned(), value.trim_start().to_owned())
        })
        .collect()
}

fn parse_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("json: {e}: {text}"))
}

#[tokio::test]
async fn the_commands_print_the_hubs_answers_with_the_documented_exit_codes() {
    let hub = Hub::start().await;

    // status: the total, then every group at depth 1, each row the hub's numbers.
    let summary = hub.json("/api/v1/summary?depth=1").await;
    let status = hub.run("status", &[]).await;
    assert_eq!((status.code, &*status.error), (0, ""), "{status:?}");
    let table = rows(&status.stdout);
    assert_eq!(
        table[0].join(" "),
        "GROUP CLUSTERS REPORTING STALE IN_SYNC PROGRESSING FAILED OUT_OF_SYNC MISSING UNEXPECTED STALE_APPS UNKNOWN IN_SYNC%"
    );
    let groups = summary["groups"].as_array().unwrap();
    assert!(!groups.is_empty());
    assert_eq!(table.len(), 2 + groups.len());
    for (row, counts) in table[1..]
        .iter()
        .zip(std::iter::once(&summary["total"]).chain(groups))
    {
        let by = &counts["app_instances_by_state"];
        let expected: Vec<String> = [
            counts["group"].as_str().unwrap_or("(total)").to_owned(),
            counts["clusters"].to_string(),
            counts["reporting_clusters"].to_string(),
            counts["stale_clusters"].to_string(),
        ]
        .into_iter()
        .chain(
            [
                "in_sync",
                "progressing",
                "failed",
                "out_of_sync",
                "missing",
                "unexpected",
                "stale",
                "unknown",
            ]
            .map(|state| by[state].to_string()),
        )
        .chain([format!(
            "{:.1}%",
            by["in_sync"].as_f64().unwrap() * 100.0 / counts["app_instances"].as_f64().unwrap()
        )])
        .collect();
        assert_eq!(row, &expected);
    }
    let json = hub.run("status", &["-o", "json"]).await;
    assert_eq!(json.code, 0);
    assert_eq!(parse_json(&json.stdout), summary);
    let group = groups[0]["group"].as_str().unwrap();
    let filtered = hub
        .run("status", &["--group", group, "--depth", "0", "-o", "json"])
        .await;
    assert_eq!(
        parse_json(&filtered.stdout),
        hub.json(&format!("/api/v1/summary?group={group}&depth=0"))
            .await
    );

    // versions: clusters per version desired and running, then per group, as the hub counts.
    let environments = hub.json("/api/v1/environments").await;
    let app = environments["apps"][0]["app"].as_str().unwrap().to_owned();
    let versions = hub
        .json(&format!("/api/v1/apps/{app}/versions?depth=1"))
        .await;
    let printed = hub.run("versions", &[&app]).await;
    assert_eq!(printed.code, 0, "{printed:?}");
    let (by_version, by_group) = printed.stdout.split_once("\n\n").expect("two tables");
    let by_version = rows(by_version);
    assert_eq!(by_version[0].join(" "), "VERSION DESIRED RUNNING");
    let count = |list: &str, version: &str, group: Option<&str>| -> u64 {
        versions[list]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["version"] == version)
            .map(|v| match group {
                None => v["clusters"].as_u64().unwrap(),
                Some(g) => v["groups"][g].as_u64().unwrap_or(0),
            })
            .sum()
    };
    let mut listed = 0;
    for row in &by_version[1..] {
        assert_eq!(
            row[1],
            count("desired", &row[0], None).to_string(),
            "{row:?}"
        );
        assert_eq!(
            row[2],
            count("running", &row[0], None).to_string(),
            "{row:?}"
        );
        listed += 1;
    }
    let distinct: std::collections::BTreeSet<&str> = ["desired", "running"]
        .iter()
        .flat_map(|list| versions[*list].as_array().unwrap())
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(listed, distinct.len());
    let by_group = rows(by_group);
    assert_eq!(by_group[0].join(" "), "GROUP VERSION DESIRED RUNNING");
    for row in &by_group[1..] {
        assert_eq!(row[2], count("desired", &row[1], Some(&row[0])).to_string());
        assert_eq!(row[3], count("running", &row[1], Some(&row[0])).to_string());
    }
    let json = hub.run("versions", &[&app, "-o", "json"]).await;
    assert_eq!(parse_json(&json.stdout), versions);

    // drift: the default page as the hub sends it, and beyond one page by following the cursor.
    let first_page = hub.json("/api/v1/drift?limit=100").await;
    let json = hub.run("drift", &["-o", "json"]).await;
    assert_eq!(json.code, 0, "{json:?}");
    assert_eq!(parse_json(&json.stdout), first_page);
    let printed = hub.run("drift", &["--limit", "7"]).await;
    let lines: Vec<&str> = printed.stdout.lines().collect();
    assert_eq!(
        rows(lines[0]).concat().join(" "),
        "CLUSTER APP STATE SINCE DESIRED OBSERVED MESSAGE"
    );
    assert_eq!(lines.len(), 8, "{}", printed.stdout);
    for (line, item) in lines[1..]
        .iter()
        .zip(first_page["items"].as_array().unwrap())
    {
        let cells = rows(line).concat();
        let text = |key: &str| item[key].as_str().unwrap_or("<none>").to_owned();
        assert_eq!(
            cells[..6],
            [
                text("cluster"),
                text("app"),
                text("state"),
                text("since"),
                text("desired_version"),
                text("observed_version")
            ]
        );
    }
    let every_state = "unknown,stale,unexpected,missing,failed,out_of_sync,progressing,in_sync";
    let page_one = hub
        .json(&format!("/api/v1/drift?state={every_state}&limit=1000"))
        .await;
    let cursor = page_one["next_cursor"]
        .as_str()
        .expect("more than one page");
    let page_two = hub
        .json(&format!(
            "/api/v1/drift?state={every_state}&limit=200&cursor={cursor}"
        ))
        .await;
    let joined = hub
        .run(
            "drift",
            &["--state", every_state, "--limit", "1200", "-o", "json"],
        )
        .await;
    let joined = parse_json(&joined.stdout);
    let expected_items: Vec<Value> = page_one["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page_two["items"].as_array().unwrap())
        .cloned()
        .collect();
    assert_eq!(joined["items"].as_array().unwrap(), &expected_items);
    assert_eq!(joined["next_cursor"], page_two["next_cursor"]);
    let table = hub
        .run("drift", &["--state", every_state, "--limit", "1200"])
        .await;
    assert_eq!(table.stdout.lines().count(), 1 + expected_items.len());

    // gate: a pass exits 0, a fail 1; extra parameters reach the hub as they are.
    let version = versions["desired"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let pass = hub
        .run(
            "gate",
            &["--app", &app, "--version", &version, "--threshold", "0"],
        )
        .await;
    assert_eq!((pass.code, &*pass.error), (0, ""), "{pass:?}");
    let gate = hub
        .json(&format!(
            "/api/v1/gate?app={app}&version={version}&threshold=0"
        ))
        .await;
    assert_eq!(gate["verdict"], "pass");
    // The verdict as labelled lines, each the hub's numbers.
    let lines = labelled(&pass.stdout);
    let share = |key: &str| format!("{:.1}%", gate[key].as_f64().unwrap() * 100.0);
    let count = |key: &str| thousands(gate[key].as_u64().unwrap());
    assert_eq!(
        lines["verdict"],
        format!("pass: {}", gate["reason"].as_str().unwrap())
    );
    assert_eq!(lines["rollout"], format!("{app} {version}"));
    assert_eq!(
        lines["in sync"],
        format!(
            "{} of {} targeted ({} clusters); threshold 0.0%",
            share("share_in_sync"),
            count("targeted_clusters"),
            count("in_sync")
        )
    );
    assert_eq!(lines["soak"], "none asked: in sync now counts");
    assert_eq!(
        lines["failed"],
        format!(
            "{} of {}; no limit asked (max_failed)",
            count("failed"),
            count("targeted_clusters")
        )
    );
    assert_eq!(
        lines["stale"],
        format!(
            "{} selected clusters; counted as not in sync",
            count("stale_clusters")
        )
    );
    let by_state: Vec<String> = gate["by_state"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(state, n)| format!("{state} {}", thousands(n.as_u64().unwrap())))
        .collect();
    assert_eq!(lines["by state"], by_state.join(", "));
    assert!(
        !pass.stdout.contains("NEXT_CURSOR") && !pass.stdout.contains("next_cursor"),
        "{}",
        pass.stdout
    );

    // What holds a gate back, a page at a time: the table lists the page's clusters, and the
    // hint names the flag that reads the next page, which reads the hub's next page.
    let held = hub
        .run(
            "gate",
            &["--app", &app, "--version", &version, "--param", "limit=3"],
        )
        .await;
    assert_eq!(held.code, 1, "{held:?}");
    let held_json = hub
        .json(&format!("/api/v1/gate?app={app}&version={version}&limit=3"))
        .await;
    let holders = held_json["holding_back"].as_array().unwrap();
    assert_eq!(holders.len(), 3, "{held_json}");
    let (_, table) = held
        .stdout
        .split_once("holding it back (3 on this page, by cluster id):\n")
        .unwrap_or_else(|| panic!("{}", held.stdout));
    let table = rows(table);
    assert_eq!(table[0][..3].join(" "), "CLUSTER GROUP STATE", "{table:?}");
    for (row, holder) in table[1..4].iter().zip(holders) {
        assert_eq!(
            row[..3],
            [&holder["cluster"], &holder["group"], &holder["state"]]
                .map(|v| v.as_str().unwrap().to_owned())
        );
    }
    let cursor = held_json["next_cursor"]
        .as_str()
        .expect("more than one page");
    let hint = format!("more clusters hold it back: add --param cursor={cursor} for the next page");
    assert_eq!(
        held.stdout.lines().last(),
        Some(hint.as_str()),
        "{}",
        held.stdout
    );
    let next = hub
        .run(
            "gate",
            &[
                "--app",
                &app,
                "--version",
                &version,
                "--param",
                "limit=3",
                "--param",
                &format!("cursor={cursor}"),
                "-o",
                "json",
            ],
        )
        .await;
    assert_eq!(
        parse_json(&next.stdout),
        hub.json(&format!(
            "/api/v1/gate?app={app}&version={version}&limit=3&cursor={cursor}"
        ))
        .await
    );
    let fail = hub
        .run(
            "gate",
            &["--app", &app, "--version", "0.0.0-nobody", "-o", "json"],
        )
        .await;
    assert_eq!(fail.code, 1, "{fail:?}");
    assert_eq!(
        parse_json(&fail.stdout),
        hub.json(&format!("/api/v1/gate?app={app}&version=0.0.0-nobody"))
            .await
    );
    let environment = environments["apps"][0]["environments"][0]["environment"]
        .as_str()
        .unwrap()
        .to_owned();
    let forwarded = hub
        .run(
            "gate",
            &[
                "--app",
                &app,
                "--version",
                &version,
                "--param",
                &format!("environment={environment}"),
                "-o",
                "json",
            ],
        )
        .await;
    assert_eq!(
        parse_json(&forwarded.stdout),
        hub.json(&format!(
            "/api/v1/gate?app={app}&version={version}&environment={environment}"
        ))
        .await
    );
    let unknown = hub
        .run(
            "gate",
            &["--app", &app, "--version", &version, "--param", "bogus=1"],
        )
        .await;
    assert_eq!(unknown.code, 3, "{unknown:?}");
    assert!(
        unknown
            .error
            .starts_with("the hub answered 400 to /api/v1/gate: ")
            && unknown.error.contains("bogus"),
        "{}",
        unknown.error
    );

    // A token the hub does not know: the hub's 401 and its message, exit 3.
    let refused = run(&[
        "status",
        "--hub-url",
        &hub.base,
        "--token",
        "not-a-known-token-000",
    ])
    .await;
    assert_eq!(refused.code, 3, "{refused:?}");
    assert!(
        refused
            .error
            .starts_with("the hub answered 401 to /api/v1/summary: "),
        "{}",
        refused.error
    );
    assert!(refused.stdout.is_empty());

    // The token read from a file, and a file that cannot be read (a usage error).
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let from_file = run(&[
        "status",
        "--hub-url",
        &hub.base,
        "--token-file",
        token_file.to_str().unwrap(),
    ])
    .await;
    assert_eq!(from_file.stdout, status.stdout);
    let missing = dir.path().join("missing");
    let unreadable = run(&[
        "status",
        "--hub-url",
        &hub.base,
        "--token-file",
        missing.to_str().unwrap(),
    ])
    .await;
    assert_eq!(unreadable.code, 2, "{unreadable:?}");
    assert!(
        unreadable
            .error
            .starts_with(&format!("token file {missing:?}: ")),
        "{}",
        unreadable.error
    );
    // `--at` reaches the hub as `at`: this hub's store has no history yet, and says so.
    for command in ["status", "drift"] {
        let past = run(&[
            command,
            "--hub-url",
            &hub.base,
            "--token-file",
            token_file.to_str().unwrap(),
            "--at",
            "2026-01-01T00:00:00Z",
        ])
        .await;
        assert_eq!(past.code, 3, "{past:?}");
        assert!(past.error.contains("no history is kept yet"), "{past:?}");
    }
}

#[tokio::test]
async fn a_hub_that_cannot_be_reached_exits_3_naming_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let unreachable = run(&["drift", "--hub-url", &base, "--timeout", "5"]).await;
    assert_eq!(unreachable.code, 3, "{unreachable:?}");
    assert!(
        unreachable
            .error
            .starts_with(&format!("cannot reach the hub at {base}/: ")),
        "{}",
        unreachable.error
    );
    assert!(unreachable.stdout.is_empty());
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["gate", "--hub-url", "http://hub", "--app", "a"][..],
        &[
            "gate",
            "--hub-url",
            "http://hub",
            "--app",
            "a",
            "--version",
            "1",
            "--commit",
            "c",
        ],
        &[
            "gate",
            "--hub-url",
            "http://hub",
            "--app",
            "a",
            "--version",
            "1",
            "--threshold",
            "1.5",
        ],
        &[
            "gate",
            "--hub-url",
            "http://hub",
            "--app",
            "a",
            "--version",
            "1",
            "--param",
            "soak",
        ],
        &[
            "status",
            "--hub-url",
            "http://hub",
            "--token",
            "t",
            "--token-file",
            "f",
        ],
        &["drift", "--hub-url", "http://hub", "--limit", "0"],
        &["status", "--hub-url", "http://hub", "-o", "yaml"],
        &["versions", "--hub-url", "http://hub"],
    ] {
        let err =
            TestCli::try_parse_from(std::iter::once("fleetscope").chain(args.iter().copied()))
                .expect_err(&format!("{args:?} is refused"));
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
    }
}

#[tokio::test]
async fn a_hub_url_that_is_not_one_is_a_usage_error() {
    let bad = run(&["status", "--hub-url", "hub:8080/x"]).await;
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.error.starts_with("hub url \"hub:8080/x\": "),
        "{}",
        bad.error
    );
}

#[tokio::test]
async fn rollouts_rollout_and_delivery_print_the_hubs_figures() {
    let hub = Hub::start().await;
    let answer = hub.json("/api/v1/rollouts?limit=5").await;
    let listed = hub.run("rollouts", &["--limit", "5"]).await;
    assert_eq!(listed.code, 0, "{listed:?}");
    let table = rows(&listed.stdout);
    assert_eq!(
        table[0],
        [
            "APP", "VERSION", "STARTED", "STATUS", "TARGETED", "IN_SYNC", "FAILED", "TO_50%",
            "TO_90%", "TO_100%", "ID"
        ]
    );
    let items = answer["items"].as_array().unwrap();
    assert_eq!(table.len(), items.len() + 1);
    for (row, item) in table[1..].iter().zip(items) {
        assert_eq!(row[0], item["app"].as_str().unwrap());
        assert_eq!(row[3], item["status"].as_str().unwrap());
        assert_eq!(row[4], item["targeted"].to_string());
        assert_eq!(row[5], item["in_sync"].to_string());
        assert_eq!(row[10], item["id"].as_str().unwrap());
    }
    let json = hub.run("rollouts", &["--limit", "5", "-o", "json"]).await;
    assert_eq!(parse_json(&json.stdout), answer);

    // One rollout: its headline, the chart (8 rows and an axis), and its stragglers.
    let id = items[0]["id"].as_str().unwrap();
    let one = hub.run("rollout", &[id]).await;
    assert_eq!(one.code, 0, "{one:?}");
    let detail = hub
        .json(&format!("/api/v1/rollouts/{id}?depth=0&limit=20"))
        .await;
    let first = one.stdout.lines().next().unwrap();
    assert!(
        first.starts_with(&format!(
            "{} {} ({})",
            detail["rollout"]["app"].as_str().unwrap(),
            detail["rollout"]["version"].as_str().unwrap(),
            detail["rollout"]["status"].as_str().unwrap()
        )),
        "{first}"
    );
    let chart: Vec<&str> = one.stdout.lines().filter(|l| l.contains(" |")).collect();
    assert_eq!(chart.len(), 8, "{}", one.stdout);
    let stragglers = detail["stragglers"].as_array().unwrap();
    if stragglers.is_empty() {
        assert!(one.stdout.contains("no stragglers"), "{}", one.stdout);
    } else {
        for s in stragglers {
            assert!(
                one.stdout.contains(s["cluster"].as_str().unwrap()),
                "{}",
                one.stdout
            );
        }
    }
    let unknown = hub.run("rollout", &["web@1@9.9.9"]).await;
    assert_eq!(unknown.code, 3, "{unknown:?}");

    let delivery = hub.run("delivery", &["--window", "7d"]).await;
    assert_eq!(delivery.code, 0, "{delivery:?}");
    let figures = hub.json("/api/v1/delivery?window=7d").await;
    let lines: Vec<&str> = delivery.stdout.lines().collect();
    assert!(lines[0].starts_with("from "), "{}", delivery.stdout);
    let table = rows(&lines[1..].join("\n"));
    assert_eq!(table.len(), figures["apps"].as_array().unwrap().len() + 1);
    for (row, app) in table[1..].iter().zip(figures["apps"].as_array().unwrap()) {
        assert_eq!(row[0], app["app"].as_str().unwrap());
        assert_eq!(row[1], app["deployments"].to_string());
        assert_eq!(row[3], app["lead_time"]["count"].to_string(), "{row:?}");
        assert_eq!(row[6], app["changes"].to_string(), "{row:?}");
        assert_eq!(row[7], app["failed_changes"].to_string(), "{row:?}");
        assert_eq!(
            row[9],
            app["time_to_restore"]["count"].to_string(),
            "{row:?}"
        );
    }
    let bad = hub.run("delivery", &["--window", "3w"]).await;
    assert_eq!(bad.code, 3, "{bad:?}");
    assert!(bad.error.contains("window"), "{bad:?}");
}

/// A writer the test reads while the command still runs.
#[derive(Clone, Default)]
struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test]
async fn login_signs_in_with_the_provider_and_the_commands_send_its_token() {
    use fleetscope_testkit::oidc::{ProviderSpec, TestProvider, CLI_CLIENT};
    let provider = TestProvider::start(&ProviderSpec {
        hub: "http://127.0.0.1:1".into(),
        people: vec![("dora".into(), vec!["team-de".into()])],
        machines: Vec::new(),
        id_token_seconds: 300,
        access_token_seconds: 300,
    });
    let hub = Hub::start_with(&format!(
        "oidc:
  issuer: {}
  clientId: fleetscope
  redirectUrl: http://127.0.0.1:1/ui/oidc/callback
  audiences: [{CLI_CLIENT}]
  groups:
    - {{group: team-de, role: read, scope: emea/de}}
",
        provider.issuer()
    ))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("config/fleetscope/token");
    let saved_text = saved.to_str().unwrap().to_owned();

    let cli = TestCli::try_parse_from([
        "fleetscope",
        "login",
        "--issuer",
        &provider.issuer(),
        "--client-id",
        CLI_CLIENT,
        "--scope",
        "groups",
        "--save",
        &saved_text,
        "--wait",
        "60",
    ])
    .unwrap();
    let Sub::Login(args) = cli.command else {
        panic!("login parses as login")
    };
    let out = Shared::default();
    let mut writer = out.clone();
    let login = fleetscope_cli::Command::Login(args);
    let signing_in = login.run(&mut writer);
    let person = async {
        // The command prints where to go; a person opens it and signs in there.
        let url = loop {
            if let Some(line) = out
                .text()
                .lines()
                .find(|l| l.starts_with("To sign in, open "))
            {
                break line.trim_start_matches("To sign in, open ").to_owned();
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        let browser = fleetscope_testkit::browser::Browser::start().await;
        browser.goto(&url).await;
        browser.click("button[autofocus]").await;
        browser
            .wait_for("input[name=login]", std::time::Duration::from_secs(10))
            .await;
        browser.fill("input[name=login]", "dora").await;
        browser.fill("input[name=password]", "any").await;
        browser.click("button[type=submit]").await;
        for _ in 0..100 {
            if browser.count("input[name=prompt][value=consent]").await > 0 {
                browser.click("button[type=submit]").await;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        browser
    };
    let (done, browser) = tokio::join!(signing_in, person);
    browser.quit().await;
    assert!(
        done.is_ok(),
        "{:?}\n{}\n{}",
        done.err(),
        out.text(),
        provider.log()
    );
    let printed = out.text();
    assert!(
        printed.contains(&format!(
            "Signed in as dora; the token is saved in {saved_text}"
        )),
        "{printed}"
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&saved).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // The saved token is dora's: the hub scopes her to emea/de by her group.
    let status = run(&[
        "status",
        "--hub-url",
        &hub.base,
        "--token-file",
        &saved_text,
        "-o",
        "json",
    ])
    .await;
    assert_eq!(status.code, 0, "{status:?}");
    assert_eq!(parse_json(&status.stdout)["scope"], "emea/de");

    // A provider without the device grant, or not there at all, is a clear failure (exit 3).
    let nowhere = run(&[
        "login",
        "--issuer",
        "http://127.0.0.1:1",
        "--client-id",
        CLI_CLIENT,
        "--save",
        &saved_text,
    ])
    .await;
    assert_eq!(nowhere.code, 3, "{nowhere:?}");
    assert!(
        nowhere
            .error
            .starts_with("login: discovering http://127.0.0.1:1: "),
        "{}",
        nowhere.error
    );
}
