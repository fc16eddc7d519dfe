//! Rollout benchmark: a generated fleet (30,000 clusters × 100 apps by default) written into a
//! private ClickHouse server, then a week of releases before its `now`: every day each app goes
//! to a new version in three waves (a third of the clusters each, two hours apart), 21 renders
//! whose desired version changes ClickHouse writes itself (a million rows a render at the
//! default size). The hub loads it all (the time and the process's resident memory before and
//! after), then the latency (p50, p99, max) of the rollout routes is measured: the rollouts
//! list (a page of 100, one app's, a status within a region), one rollout of the last day with
//! its curves, and the delivery figures of one app and of every app over 30 days. These
//! routes do not use the answer cache: every request is computed. Then the hub's first write
//! of its rollout records and one with nothing changed, a hub loaded again with them, and the
//! dashboard's rollout panels on ClickHouse.
//!
//! The hub's rollout answers read no observed history (the moments are kept in memory from
//! what it loads and what arrives), so the week of observed transitions the rest of the
//! benchmarks write is left out here.
//!
//! `cargo bench -p fleetscope-hub-tests --bench rollouts`; `FLEETSCOPE_BENCH_CLUSTERS`,
//! `FLEETSCOPE_BENCH_APPS` and `FLEETSCOPE_BENCH_DAYS` change the size. Without `--bench` (as
//! under `cargo test`) it runs a small fleet over two days with few requests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_engine::Index;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::{router, AppState, Auth, MetricsConfig};
use fleetscope_store::panel_sql::{self, PanelQuery, Slots};
use fleetscope_store::synthetic_releases::{write_releases, SyntheticRelease};
use fleetscope_store::{Store, StoreConfig};
use fleetscope_testkit::TestStore;
use serde_json::Value;

const WRITE_FLEET: &str = "--write-fleet";
/// The render the generated fleet is written with.
const FIRST_RENDER: u64 = 1;
const WAVES: u32 = 3;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
        .unwrap_or(default)
}

/// A line of `/proc/self/status` in kB, as bytes.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .expect("the field");
    let kb: u64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .expect("kB");
    kb * 1024
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_048_576.0)
}

fn millis(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1_000.0)
}

/// The smallest sample that at least `share` of the samples do not exceed.
fn percentile(sorted: &[Duration], share: f64) -> Duration {
    let rank = ((share * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The clock of the hubs here: the generated fleet's `now`, so that its renders, made a day
/// and more before it, are as old to the hub as they would be in production.
fn fleet_now() -> fleetscope_model::Timestamp {
    FleetSpec::default().now
}

fn fleet_of(clusters: usize, apps: usize) -> GeneratedFleet {
    GeneratedFleet::new(FleetSpec {
        clusters,
        apps,
        ..FleetSpec::default()
    })
    .unwrap()
}

/// The child: writes the fleet (so that the memory measured is the hub's, not the writing's).
async fn write_fleet(args: &[String]) {
    let [url, database, clusters, apps] = args else {
        panic!("{WRITE_FLEET} URL DATABASE CLUSTERS APPS, got {args:?}");
    };
    let store = Store::connect(&StoreConfig::new(url.clone(), database.clone())).unwrap();
    let fleet = fleet_of(clusters.parse().unwrap(), apps.parse().unwrap());
    fleetscope_fixtures::write_fleet(&store, &fleet)
        .await
        .unwrap();
}

/// Day `day` (1 to `days`) of releases: each app from the version of the day before to the
/// day's (the last day's is the fleet's own), in waves two hours apart.
fn releases(now: u32, days: u32) -> Vec<SyntheticRelease> {
    let suffix = |day: u32| {
        if day == days || day == 0 {
            String::new()
        } else {
            format!("-r{day}")
        }
    };
    let mut all = Vec::new();
    for day in 1..=days {
        for wave in 0..WAVES {
            let rendered_at = now - (days + 1 - day) * 86_400 + wave * 7_200;
            all.push(SyntheticRelease {
                render_id: u64::from(rendered_at) * 1_000,
                rendered_at,
                platform_commit: format!("platform-{day}-{wave}"),
                committed_at: rendered_at - 600,
                wave,
                waves: WAVES,
                from: suffix(day - 1),
                to: suffix(day),
            });
        }
    }
    all
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn get(&self, path: &str) -> (Duration, String) {
        let started = Instant::now();
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|err| panic!("{path}: {err}"));
        let status = response.status();
        let body = response.text().await.unwrap();
        let took = started.elapsed();
        assert_eq!(status.as_u16(), 200, "{path}: {body}");
        (took, body)
    }

    async fn json(&self, path: &str) -> Value {
        serde_json::from_str(&self.get(path).await.1).unwrap()
    }

    /// `samples` requests of `paths` in turn (after one not counted); p50, p99 and max.
    async fn measure(&self, label: &str, paths: &[String], samples: usize) {
        self.get(&paths[0]).await;
        let mut took: Vec<Duration> = Vec::with_capacity(samples);
        for i in 0..samples {
            took.push(self.get(&paths[i % paths.len()]).await.0);
        }
        took.sort();
        println!(
            "{label:<44} {:>8} {:>8} {:>8} {:>5}",
            millis(percentile(&took, 0.5)),
            millis(percentile(&took, 0.99)),
            millis(*took.last().expect("a sample")),
            took.len()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if args.get(1).map(String::as_str) == Some(WRITE_FLEET) {
        runtime.block_on(write_fleet(&args[2..]));
        return;
    }
    let bench = args.iter().any(|a| a == "--bench");
    let (clusters, apps, days, samples) = if bench {
        (
            env_number("FLEETSCOPE_BENCH_CLUSTERS", 30_000),
            env_number("FLEETSCOPE_BENCH_APPS", 100),
            env_number("FLEETSCOPE_BENCH_DAYS", 7) as u32,
            50,
        )
    } else {
        (300, 10, 2, 3)
    };
    runtime.block_on(run(clusters, apps, days, samples));
}

async fn run(clusters: usize, apps: usize, days: u32, samples: usize) {
    let test = TestStore::start().await;
    let fleet = fleet_of(clusters, apps);
    let spec = fleet.spec().clone();
    let started = Instant::now();
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            WRITE_FLEET.to_owned(),
            test.server.url(),
            test.store.database().to_owned(),
            clusters.to_string(),
            apps.to_string(),
        ])
        .stderr(std::process::Stdio::inherit())
        .status()
        .await
        .unwrap();
    assert!(child.success(), "writing the fleet failed");
    println!(
        "fleet written: {clusters} clusters x {apps} apps in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let now = spec.now.seconds() as u32;
    let started = Instant::now();
    let written = write_releases(&test.store, FIRST_RENDER, &releases(now, days))
        .await
        .unwrap();
    println!(
        "releases written: {} renders over {days} days, {written} version changes, in {:.1} s",
        days * WAVES,
        started.elapsed().as_secs_f64()
    );

    let before = status_bytes("VmRSS:");
    let started = Instant::now();
    let index = Index::load(test.store.clone(), fleet_now).await.unwrap();
    let load = started.elapsed();
    let after = status_bytes("VmRSS:");
    let rollouts: usize = index.read(|f| f.rollouts.apps.values().map(|a| a.rollouts.len()).sum());
    println!(
        "hub loaded in {:.1} s: {rollouts} rollouts; resident memory {} before, {} after",
        load.as_secs_f64(),
        megabytes(before),
        megabytes(after)
    );

    let mut state = AppState::new(Arc::new(index), spec.policy, MetricsConfig::default());
    state.fixed_now = Some(spec.now);
    let state = Arc::new(state);
    let app = router(state.clone(), Arc::new(Auth::Insecure), false);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = Client {
        http: reqwest::Client::new(),
        base,
    };

    let page = client.json("/api/v1/rollouts?limit=100").await;
    let items = page["items"].as_array().expect("items");
    assert!(!items.is_empty(), "the hub lists rollouts");
    let newest: Vec<String> = items
        .iter()
        .take(10)
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    let app_names: Vec<String> = items
        .iter()
        .map(|i| i["app"].as_str().unwrap().to_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .take(10)
        .collect();
    let summary = client.json("/api/v1/summary?depth=1").await;
    let region = summary["groups"][0]["group"].as_str().unwrap().to_owned();
    println!(
        "{:<44} {:>8} {:>8} {:>8} {:>5}",
        "route (ms)", "p50", "p99", "max", "n"
    );
    client
        .measure(
            "rollouts, a page of 100",
            &["/api/v1/rollouts?limit=100".to_owned()],
            samples,
        )
        .await;
    let per_app: Vec<String> = app_names
        .iter()
        .map(|a| format!("/api/v1/rollouts?app={a}"))
        .collect();
    client
        .measure("rollouts of one app", &per_app, samples)
        .await;
    let status = items[0]["status"].as_str().unwrap().to_owned();
    client
        .measure(
            &format!("rollouts {status} in a region"),
            &[format!("/api/v1/rollouts?status={status}&group={region}")],
            samples,
        )
        .await;
    let one: Vec<String> = newest
        .iter()
        .map(|id| format!("/api/v1/rollouts/{id}?depth=2"))
        .collect();
    client
        .measure("one rollout with its curves", &one, samples)
        .await;
    let delivery: Vec<String> = app_names
        .iter()
        .map(|a| format!("/api/v1/delivery?app={a}&window=30d"))
        .collect();
    client
        .measure("delivery of one app, 30 days", &delivery, samples)
        .await;
    client
        .measure(
            "delivery of every app, 30 days",
            &["/api/v1/delivery?window=30d".to_owned()],
            samples.min(10),
        )
        .await;
    let first = &one[0];
    let answer = client.json(first).await;
    println!(
        "{first}: {} clusters targeted, {} curve points, step {} s",
        answer["rollout"]["targeted"],
        answer["curve"].as_array().map_or(0, Vec::len),
        answer["step_seconds"]
    );
    records(&state, &test, &newest[0], &app_names[0], now).await;
}

/// The hub's first write of its rollout records (everything), a write with nothing changed,
/// and the dashboard's rollout panels over what was written.
async fn records(state: &Arc<AppState>, test: &TestStore, rollout: &str, app: &str, now: u32) {
    let mut recorder = fleetscope_engine::rollout_records::RolloutRecorder::default();
    let mut last_ms = 0;
    for what in ["first write (everything)", "write with nothing changed"] {
        let started = Instant::now();
        let written = fleetscope_hub::rollout_records::write_rollout_records(
            state,
            &mut recorder,
            &mut last_ms,
        )
        .await
        .unwrap();
        println!(
            "rollout records, {what}: {} rollouts, {} (app, cluster) rows in {} inserts, {:.2} s; resident memory {}",
            written.records,
            written.clusters,
            written.inserts,
            started.elapsed().as_secs_f64(),
            megabytes(status_bytes("VmRSS:"))
        );
    }
    // What taking the history back reads: the records, and each app's clusters.
    let started = Instant::now();
    let records = test.store.rollout_record_rows().await.unwrap().len();
    let mut rows = 0;
    for app in state
        .index
        .read(|f| f.rollouts.apps.keys().cloned().collect::<Vec<_>>())
    {
        rows += test.store.rollout_cluster_rows(&app).await.unwrap().len();
    }
    println!(
        "reading the records back: {records} rollouts, {rows} (app, cluster) rows in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let again = Index::load(test.store.clone(), fleet_now).await.unwrap();
    let restored: usize = again.read(|f| {
        f.rollouts
            .apps
            .values()
            .map(|a| {
                a.owners()
                    .filter(|(n, _)| a.reached_at(*n).is_some())
                    .count()
            })
            .sum()
    });
    println!(
        "hub loaded again with its records in {:.1} s: {restored} clusters' reaching taken back",
        started.elapsed().as_secs_f64(),
    );
    drop(again);
    let http = reqwest::Client::new();
    let quoted = |s: &str| format!("'{s}'");
    let (rollout, app) = (quoted(rollout), quoted(app));
    let to = format!("toDateTime({now})");
    let from = format!("toDateTime({})", now - 30 * 86_400);
    fn in_range(column: &str) -> String {
        format!("{column} >= toDateTime(0)")
    }
    let base = Slots {
        group: "''",
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
        interval_seconds: "3600",
        time_filter: in_range,
        table_rows: 500,
    };
    let every_app = Slots { app: "''", ..base };
    let panels: Vec<(&str, PanelQuery)> = vec![
        ("rollouts of one app", panel_sql::rollout_list(&base)),
        (
            "stalled rollouts, every app",
            panel_sql::stalled_rollouts(&every_app),
        ),
        ("one rollout's progress", panel_sql::rollout_curve(&base)),
        ("one rollout by region", panel_sql::rollout_groups(&base)),
        ("delivery of the fleet, one app", panel_sql::delivery(&base)),
        (
            "delivery of the fleet, every app",
            panel_sql::delivery(&every_app),
        ),
        (
            "delivery per region, every app",
            panel_sql::delivery_by_group(&every_app),
        ),
    ];
    println!(
        "{:<44} {:>8} {:>8} {:>5}",
        "panel on ClickHouse (ms)", "p50", "max", "n"
    );
    for (what, panel) in panels {
        let mut times = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let response = http
                .post(test.server.url())
                .query(&[("database", test.store.database())])
                .body(format!("{} FORMAT TabSeparated", panel.sql))
                .send()
                .await
                .unwrap();
            assert!(
                response.status().is_success(),
                "{what}: {}",
                response.text().await.unwrap()
            );
            response.bytes().await.unwrap();
            times.push(started.elapsed());
        }
        times.sort();
        println!(
            "{what:<44} {:>8} {:>8} {:>5}",
            millis(percentile(&times, 0.5)),
            millis(times[times.len() - 1]),
            times.len()
        );
    }
}
