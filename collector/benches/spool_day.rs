//! An agent's spool of a day offline, delivered: a spool directory holding one cluster's
//! reports of a whole day at the load test's steady change rate (1% of 100 app instances a
//! minute: one status change a minute, each its own report since the agent gathers changes for
//! a second; a full snapshot every 6 hours, the agent's default), the real `fleetscope agent`
//! started on it with a private Kubernetes API server serving the cluster's 100 HelmReleases,
//! and the real `fleetscope collector` on a private ClickHouse. Prints the time from the
//! agent's start to its spool empty, to its first report acknowledged, and the reports and
//! changes delivered per second; then checks that ClickHouse holds every spooled change once
//! and each object's last version.
//!
//! The spool is not made by running an agent offline for a day: it is built with the agent's
//! own code (its `Spool`, `Tracker` and `normalize`, the path a watch event takes), the
//! reports stamped through the day before the run.
//!
//! `cargo bench -p fleetscope-collector --bench spool_day`; `FLEETSCOPE_BENCH_HOURS` (24),
//! `FLEETSCOPE_BENCH_APPS` (100), `FLEETSCOPE_BENCH_CHANGES_PER_MINUTE` (1) and
//! `FLEETSCOPE_BENCH_RUNS` (2) change it. Without `--bench` (as under `cargo test`) it delivers
//! an hour of 10 apps once on the debug binary.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use fleetscope_collector::agent::spool::Spool;
use fleetscope_collector::agent::tracker::Tracker;
use fleetscope_collector::normalize::normalize;
use fleetscope_collector::protocol::{Change, Report, ReportKind};
use fleetscope_local_apiserver::LocalApiServer;
use fleetscope_model::{ClusterId, Timestamp};
use fleetscope_testkit::faults::{
    free_port, helm_release, stored_changes, unix_now, Service, HELMRELEASES,
};
use support::{clickhouse_with, env_number, median, token, DATABASE};

const CLUSTER: &str = "edge-day-01";

fn app_name(index: usize) -> String {
    format!("app-{index:03}")
}

/// What the built spool holds.
struct Built {
    reports: usize,
    changes: usize,
    bytes: u64,
    /// Every app's last version.
    versions: Vec<String>,
}

/// Writes a spool of `hours` offline into `dir` with the agent's own code: first the state of
/// every app as the agent saw it when the link went down (one delta), then one report per
/// status change (`per_minute` changes a minute, at random apps), and a snapshot every 6 hours.
fn build_spool(dir: &Path, hours: u64, apps: usize, per_minute: usize) -> Built {
    let cluster = ClusterId::parse(CLUSTER).unwrap();
    let from = unix_now() - (hours as i64) * 3_600 - 60;
    let mut spool =
        Spool::open_starting_at(dir, 64 * 1024 * 1024, (from as u64) * 1_000_000).unwrap();
    let mut tracker = Tracker::default();
    let mut versions: Vec<u64> = vec![0; apps];
    let report = |kind: ReportKind, at: i64, changes: Vec<Change>, high: u64| Report {
        cluster: CLUSTER.to_owned(),
        agent_version: "spool-day-bench".to_owned(),
        report_seq: 0,
        sent_at: at,
        kind,
        reconcilers: [("flux".to_owned(), "v2.4.0".to_owned())].into(),
        change_seq_high: high,
        changes,
        stamped_apps: Vec::new(),
    };
    let apply = |spool: &mut Spool, tracker: &mut Tracker, app: usize, version: u64, at: i64| {
        let object = normalize(&helm_release(&app_name(app), &format!("1.0.{version}")))
            .expect("a valid HelmRelease");
        tracker
            .apply(&cluster, object, Timestamp(at), &mut || {
                spool.next_change_seq()
            })
            .map(|item| Change::from_observed(&item))
    };
    let mut initial = Vec::new();
    for app in 0..apps {
        initial.extend(apply(&mut spool, &mut tracker, app, 0, from));
    }
    spool
        .push(report(ReportKind::Delta, from, initial, 0))
        .unwrap();
    // A small deterministic generator (SplitMix64) picks the apps.
    let mut state = 0x5eed_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for minute in 0..hours * 60 {
        for change in 0..per_minute {
            let at = from + 60 + (minute as i64) * 60 + (change * 60 / per_minute) as i64;
            let app = (next() % apps as u64) as usize;
            versions[app] += 1;
            let changes: Vec<Change> = apply(&mut spool, &mut tracker, app, versions[app], at)
                .into_iter()
                .collect();
            spool
                .push(report(ReportKind::Delta, at, changes, 0))
                .unwrap();
        }
        if (minute + 1) % 360 == 0 {
            let at = from + 60 + (minute as i64 + 1) * 60;
            let high = spool.next_change_seq();
            let items = tracker
                .snapshot()
                .iter()
                .map(Change::from_observed)
                .collect();
            spool
                .push(report(ReportKind::Snapshot, at, items, high))
                .unwrap();
        }
    }
    spool.save_counters().unwrap();
    std::fs::write(
        dir.join("objects.json"),
        serde_json::to_vec(&tracker).unwrap(),
    )
    .unwrap();
    Built {
        reports: spool.pending_reports(),
        changes: apps + (hours * 60) as usize * per_minute,
        bytes: spool.pending_bytes(),
        versions: versions.iter().map(|v| format!("1.0.{v}")).collect(),
    }
}

fn waiting_reports(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.starts_with("report-") && name.ends_with(".json.gz")
                })
                .count()
        })
        .unwrap_or(0)
}

struct Outcome {
    seconds: f64,
    reports_per_second: f64,
}

fn run_once(
    binary: &Path,
    crd: &Path,
    hours: u64,
    apps: usize,
    per_minute: usize,
    runtime: &tokio::runtime::Runtime,
) -> Outcome {
    let work = tempfile::tempdir().unwrap();
    let spool = work.path().join("spool");
    let built_at = Instant::now();
    let built = build_spool(&spool, hours, apps, per_minute);
    println!(
        "spool of {hours} h built in {:.1} s: {} reports, {} changes, {:.1} KB",
        built_at.elapsed().as_secs_f64(),
        built.reports,
        built.changes,
        built.bytes as f64 / 1024.0
    );
    let clusters = vec![CLUSTER.to_owned()];
    let (server, store) = clickhouse_with(&clusters, runtime);
    let api = LocalApiServer::start(None)
        .unwrap_or_else(|err| panic!("this bench needs a private Kubernetes API server: {err}"));
    for name in api.apply_crd_file(crd).unwrap() {
        api.wait_for_crd(&name).unwrap();
    }
    for (app, version) in built.versions.iter().enumerate() {
        api.post_json(HELMRELEASES, &helm_release(&app_name(app), version))
            .unwrap();
    }
    let port = free_port();
    let collector = support::start_collector(binary, work.path(), &clusters, &server.url(), port);
    let token_file = work.path().join("token");
    std::fs::write(&token_file, token(CLUSTER)).unwrap();
    let metrics_port = free_port();
    let args: Vec<String> = [
        "agent",
        "--cluster",
        CLUSTER,
        "--collector-url",
        &format!("http://127.0.0.1:{port}"),
        "--token-file",
        token_file.to_str().unwrap(),
        "--spool-dir",
        spool.to_str().unwrap(),
        "--kubeconfig",
        api.kubeconfig_path().to_str().unwrap(),
        "--metrics-listen",
        &format!("127.0.0.1:{metrics_port}"),
        "--log",
        "info",
    ]
    .map(String::from)
    .to_vec();
    let started = Instant::now();
    let agent = Service::spawn(binary, &args, &work.path().join("agent.log"));
    let mut first_ack = None;
    let limit = Duration::from_secs(1_800);
    loop {
        let waiting = waiting_reports(&spool);
        if first_ack.is_none() && waiting < built.reports {
            first_ack = Some(started.elapsed());
        }
        if waiting == 0 {
            break;
        }
        assert!(
            started.elapsed() < limit,
            "the spool was not delivered within {limit:?}: {waiting} reports waiting\nagent:\n{}\ncollector:\n{}",
            agent.log_tail(),
            collector.log_tail()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let seconds = started.elapsed().as_secs_f64();
    let first_ack = first_ack.unwrap_or_default().as_secs_f64();
    let reports_per_second = built.reports as f64 / (seconds - first_ack).max(1e-3);
    println!(
        "delivered: spool empty {seconds:.1} s after the agent started (first report acknowledged at {first_ack:.2} s): {:.1} reports/s, {:.1} changes/s after the first",
        reports_per_second,
        built.changes as f64 / (seconds - first_ack).max(1e-3)
    );

    // Every spooled change once, and every object's last version.
    let stored = runtime.block_on(stored_changes(&server.url(), DATABASE, CLUSTER));
    let doubled = stored.values().filter(|(_, copies)| *copies != 1).count();
    assert_eq!(
        (stored.len(), doubled),
        (built.changes, 0),
        "stored changes and changes stored more than once\nagent:\n{}",
        agent.log_tail()
    );
    let latest = runtime
        .block_on(store.observed_for_cluster(CLUSTER))
        .unwrap();
    for (app, version) in built.versions.iter().enumerate() {
        let name = app_name(app);
        let row = latest.iter().find(|r| r.object_name == name);
        assert_eq!(
            row.map(|r| r.version.as_str()),
            Some(version.as_str()),
            "{name}'s latest version"
        );
    }
    println!(
        "  ClickHouse holds every one of the {} changes once and each app's last version",
        built.changes
    );
    drop(agent);
    drop(collector);
    Outcome {
        seconds,
        reports_per_second,
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (hours, apps, per_minute, runs) = if bench {
        (
            env_number("FLEETSCOPE_BENCH_HOURS", 24) as u64,
            env_number("FLEETSCOPE_BENCH_APPS", 100),
            env_number("FLEETSCOPE_BENCH_CHANGES_PER_MINUTE", 1),
            env_number("FLEETSCOPE_BENCH_RUNS", 2),
        )
    } else {
        (1, 10, 1, 1)
    };
    let binary = support::binary(bench);
    let crd = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/crds/flux-helmrelease.crd.yaml");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let outcomes: Vec<Outcome> = (0..runs)
        .map(|_| run_once(&binary, &crd, hours, apps, per_minute, &runtime))
        .collect();
    println!(
        "median of {runs}: spool of {hours} h delivered in {:.1} s at {:.1} reports/s",
        median(outcomes.iter().map(|o| o.seconds).collect()),
        median(outcomes.iter().map(|o| o.reports_per_second).collect())
    );
}
