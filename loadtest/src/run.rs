//! `fleetscope loadtest`: a simulated fleet driven through the real agent-to-collector protocol
//! into a private ClickHouse, then the hub's rollup checked against the simulator's ground truth.
//!
//! Desired state, inventory and membership are written through the store, as the renderer
//! would. Every cluster that reported recently (its simulated heartbeat is within the stale
//! threshold) sends one gzip snapshot report over HTTP to an in-process collector, which stores
//! its observed rows and records its heartbeat at the collector's clock. Clusters that are stale
//! or were never seen cannot be delivered that way, because the collector stamps every heartbeat
//! with its own clock and would make them fresh; their heartbeats and observed rows are written
//! through the store with the simulator's timestamps instead. The ground truth therefore holds
//! exactly: a fresh cluster's heartbeat moves from a few seconds before the fleet's `now` to a
//! moment after it, which is still fresh, and nothing else changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use fleetscope_collector::central::auth::AgentAuth;
use fleetscope_collector::central::{Collector, CollectorOptions};
use fleetscope_collector::protocol::{Change, Report, ReportKind};
use fleetscope_hub::index::{as_group_rollups, Filter, Index};
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_model::Timestamp;
use fleetscope_store::{GroupRollup, HeartbeatRow, ObservedRow, Store, StoreConfig};
use serde::{Deserialize, Serialize};

use crate::fleet::{GroundTruth, SimCluster};
use crate::{FleetSpec, GeneratedFleet};

/// Options of `fleetscope loadtest`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadtestArgs {
    /// Simulated clusters.
    #[arg(long, default_value_t = 30_000)]
    pub clusters: usize,
    /// Apps per cluster.
    #[arg(long, default_value_t = 100)]
    pub apps: usize,
    /// Simulated agents sending at the same time.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Seed of the simulated fleet.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for `report.json` and `report.md`.
    #[arg(long, default_value = "loadtest-report")]
    pub out: PathBuf,
}

/// The numbers of one load test run, as written to `report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadtestReport {
    pub clusters: usize,
    pub apps: usize,
    pub concurrency: usize,
    /// Observed rows in ClickHouse after ingest (all clusters).
    pub rows: u64,
    /// Observed rows delivered through the collector over HTTP.
    pub rows_via_collector: u64,
    /// Reports (one per fresh cluster) delivered through the collector.
    pub reports_via_collector: u64,
    /// Stale and never-seen clusters, written through the store.
    pub clusters_written_directly: u64,
    /// Wall time from the first POST to the last acknowledgement.
    pub ingest_seconds: f64,
    /// `rows_via_collector / ingest_seconds`.
    pub rows_per_second: f64,
    /// Time from the first attempt of a POST until its 2xx answer (retries after 429 or 503
    /// included).
    pub ack_p50_ms: f64,
    pub ack_p99_ms: f64,
    /// Answers of 429 or 503 that were retried.
    pub retries: u64,
    pub hub_load_seconds: f64,
    pub groups: usize,
    pub correctness_passed: bool,
    /// The first group whose rollup differs from the ground truth, if any.
    pub first_mismatch: Option<String>,
}

fn wall_clock() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
    )
}

fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

/// The wire form of one simulated observed row.
fn change(row: &ObservedRow) -> Change {
    Change {
        change_seq: row.seq,
        kind: row.object_kind.clone(),
        namespace: row.object_namespace.clone(),
        name: row.object_name.clone(),
        app: non_empty(&row.app),
        version: non_empty(&row.version),
        content_hash: non_empty(&row.content_hash),
        applied_revision: row.applied_revision.clone(),
        health: row.health.clone(),
        sync: row.sync.clone(),
        reason: row.reason.clone(),
        message: row.message.clone(),
        transitioned_at: (row.transitioned_at != 0).then_some(i64::from(row.transitioned_at)),
        observed_at: i64::from(row.observed_at),
        deleted: row.deleted != 0,
    }
}

/// One snapshot report carrying a cluster's observed rows; the collector records the heartbeat
/// from it.
fn snapshot(sim: &SimCluster, heartbeat: &HeartbeatRow, sent_at: Timestamp) -> Report {
    Report {
        cluster: sim.cluster.cluster_id.clone(),
        agent_version: heartbeat.agent_version.clone(),
        seq: 1,
        sent_at: sent_at.seconds(),
        kind: ReportKind::Snapshot,
        reconcilers: heartbeat
            .reconciler_names
            .iter()
            .cloned()
            .zip(heartbeat.reconciler_versions.iter().cloned())
            .collect(),
        change_seq_high: sim.observed.iter().map(|r| r.seq).max().unwrap_or(0),
        changes: sim.observed.iter().map(change).collect(),
    }
}

fn percentile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[at.min(sorted.len() - 1)].as_secs_f64() * 1_000.0
}

/// The first group (by group path) whose rollup differs, or a differing group count.
fn first_mismatch(hub: &[GroupRollup], truth: &[GroupRollup]) -> Option<String> {
    for (h, t) in hub.iter().zip(truth) {
        if h != t {
            return Some(if h.group_path == t.group_path {
                format!("group {}: hub {h:?}, ground truth {t:?}", h.group_path)
            } else {
                format!(
                    "group {} in the hub where the ground truth has {}",
                    h.group_path, t.group_path
                )
            });
        }
    }
    if hub.len() != truth.len() {
        let extra = hub
            .get(truth.len())
            .or_else(|| truth.get(hub.len()))
            .map(|g| g.group_path.clone())
            .unwrap_or_default();
        return Some(format!(
            "the hub has {} groups, the ground truth {} (first unmatched: {extra})",
            hub.len(),
            truth.len()
        ));
    }
    None
}

/// What the setup phase prepared: the ground truth and the report bodies to send.
struct Prepared {
    truth: GroundTruth,
    bodies: Vec<Vec<u8>>,
    rows_via_collector: u64,
    clusters_written_directly: u64,
    observed_total: u64,
}

/// Writes desired state, inventory and membership through the store, and stale and never-seen
/// clusters' heartbeats and observed rows; encodes one report per fresh cluster.
async fn prepare(store: &Store, fleet: &GeneratedFleet) -> anyhow::Result<Prepared> {
    let spec = fleet.spec();
    store.insert_rows(&[fleet.render()]).await?;
    store.insert_rows(&fleet.desired()).await?;
    let fresh_since = spec
        .now
        .plus_seconds(-spec.policy.stale_after_seconds)
        .seconds();
    let mut prepared = Prepared {
        truth: GroundTruth::default(),
        bodies: Vec::new(),
        rows_via_collector: 0,
        clusters_written_directly: 0,
        observed_total: 0,
    };
    const CHUNK: usize = 1_000;
    for start in (0..spec.clusters).step_by(CHUNK) {
        let sims: Vec<SimCluster> = (start..(start + CHUNK).min(spec.clusters))
            .map(|i| fleet.cluster(i))
            .collect();
        let clusters: Vec<_> = sims.iter().map(|s| s.cluster.clone()).collect();
        let members: Vec<_> = sims.iter().map(|s| s.membership.clone()).collect();
        store.insert_rows(&clusters).await?;
        store.insert_rows(&members).await?;
        let mut direct_heartbeats = Vec::new();
        let mut direct_observed = Vec::new();
        for sim in &sims {
            prepared.truth.add(sim);
            prepared.observed_total += sim.observed.len() as u64;
            match &sim.heartbeat {
                Some(hb) if i64::from(hb.seen_at) >= fresh_since => {
                    prepared.rows_via_collector += sim.observed.len() as u64;
                    prepared.bodies.push(snapshot(sim, hb, spec.now).encode());
                }
                heartbeat => {
                    prepared.clusters_written_directly += 1;
                    direct_heartbeats.extend(heartbeat.clone());
                    direct_observed.extend(sim.observed.iter().cloned());
                }
            }
        }
        if !direct_heartbeats.is_empty() {
            store.insert_rows(&direct_heartbeats).await?;
        }
        if !direct_observed.is_empty() {
            store.insert_rows(&direct_observed).await?;
        }
    }
    Ok(prepared)
}

/// Latencies of every acknowledged POST, and the number of retried answers.
async fn send_all(
    url: String,
    bodies: Arc<Vec<Vec<u8>>>,
    concurrency: usize,
) -> anyhow::Result<(Vec<Duration>, u64)> {
    let http = reqwest::Client::new();
    let next = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(bodies.len())));
    let retries = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (http, url, bodies, next, latencies, retries) = (
            http.clone(),
            url.clone(),
            bodies.clone(),
            next.clone(),
            latencies.clone(),
            retries.clone(),
        );
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else {
                    return anyhow::Ok(());
                };
                let first_attempt = Instant::now();
                loop {
                    let response = http
                        .post(&url)
                        .header("content-encoding", "gzip")
                        .body(body.clone())
                        .send()
                        .await
                        .context("POST to the collector failed")?;
                    let status = response.status();
                    if status.is_success() {
                        latencies
                            .lock()
                            .expect("latency list lock")
                            .push(first_attempt.elapsed());
                        break;
                    }
                    if status.as_u16() == 429 || status.as_u16() == 503 {
                        retries.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                    let text = response.text().await.unwrap_or_default();
                    anyhow::bail!("the collector answered report {i} with {status}: {text}");
                }
            }
        }));
    }
    for worker in workers {
        worker.await??;
    }
    let latencies = std::mem::take(&mut *latencies.lock().expect("latency list lock"));
    Ok((latencies, retries.load(Ordering::Relaxed) as u64))
}

/// Runs the load test and writes `report.json` and `report.md` into `args.out`. Returns an
/// error (after writing the reports) when the hub's rollup differs from the ground truth.
pub async fn run(args: LoadtestArgs) -> anyhow::Result<LoadtestReport> {
    anyhow::ensure!(
        args.concurrency > 0,
        "--concurrency must be positive, got 0"
    );
    let spec = FleetSpec {
        clusters: args.clusters,
        apps: args.apps,
        seed: args.seed,
        now: wall_clock(),
        ..FleetSpec::default()
    };
    let fleet = GeneratedFleet::new(spec).context("invalid load test fleet")?;
    println!(
        "loadtest: {} clusters × {} apps, {} concurrent agents",
        args.clusters, args.apps, args.concurrency
    );

    let started = Instant::now();
    let server = tokio::task::spawn_blocking(LocalClickHouse::start)
        .await?
        .context("could not start a private ClickHouse server")?;
    let store = Store::connect(&StoreConfig::new(server.url(), "fleetscope"))?;
    store.migrate().await?;
    println!(
        "  clickhouse: started and migrated in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let result = drive(&args, &fleet, &store).await;
    drop(store);
    tokio::task::spawn_blocking(move || server.stop()).await?;
    let report = result?;

    write_reports(&args.out, &report)?;
    println!(
        "  report: {} and {}",
        args.out.join("report.json").display(),
        args.out.join("report.md").display()
    );
    match &report.first_mismatch {
        None => Ok(report),
        Some(mismatch) => {
            anyhow::bail!("the hub's rollup differs from the simulator's ground truth: {mismatch}")
        }
    }
}

async fn drive(
    args: &LoadtestArgs,
    fleet: &GeneratedFleet,
    store: &Store,
) -> anyhow::Result<LoadtestReport> {
    let spec = fleet.spec();
    let started = Instant::now();
    let prepared = prepare(store, fleet).await?;
    println!(
        "  setup: desired state, inventory, membership and {} stale or never-seen clusters written, {} reports encoded, in {:.1} s",
        prepared.clusters_written_directly,
        prepared.bodies.len(),
        started.elapsed().as_secs_f64()
    );

    let collector = Collector::new(
        store.clone(),
        CollectorOptions {
            auth: AgentAuth::Insecure,
            ..CollectorOptions::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/api/v1/ingest", listener.local_addr()?);
    let router = collector.router();
    let serving = tokio::spawn(async move { axum::serve(listener, router).await });

    let reports = prepared.bodies.len() as u64;
    let bodies = Arc::new(prepared.bodies);
    let started = Instant::now();
    let sent = send_all(url, bodies, args.concurrency).await;
    let ingest_seconds = started.elapsed().as_secs_f64();
    serving.abort();
    let (mut latencies, retries) = sent?;
    latencies.sort();
    let rows = store.count_rows::<ObservedRow>().await?;
    let rows_per_second = prepared.rows_via_collector as f64 / ingest_seconds.max(1e-9);
    let (p50, p99) = (
        percentile_ms(&latencies, 0.50),
        percentile_ms(&latencies, 0.99),
    );
    println!(
        "  ingest: {} rows in {} reports in {ingest_seconds:.1} s, {rows_per_second:.0} rows/s, ack p50 {p50:.1} ms, p99 {p99:.1} ms, {retries} retries",
        prepared.rows_via_collector, reports
    );
    anyhow::ensure!(
        rows == prepared.observed_total,
        "ClickHouse holds {rows} observed rows, the fleet has {}",
        prepared.observed_total
    );

    let started = Instant::now();
    let index = Index::load(store.clone()).await?;
    let hub_load_seconds = started.elapsed().as_secs_f64();
    let sort = |mut v: Vec<GroupRollup>| {
        v.sort_by(|a, b| a.group_path.cmp(&b.group_path));
        v
    };
    let hub = sort(
        index.read(|f| as_group_rollups(&f.rollup(spec.now, &spec.policy, &Filter::default()))),
    );
    let truth = sort(prepared.truth.rollups());
    let mismatch = first_mismatch(&hub, &truth);
    println!(
        "  hub: loaded in {hub_load_seconds:.1} s; rollup of {} groups {}",
        hub.len(),
        if mismatch.is_none() {
            "matches the ground truth"
        } else {
            "DIFFERS from the ground truth"
        }
    );

    Ok(LoadtestReport {
        clusters: args.clusters,
        apps: args.apps,
        concurrency: args.concurrency,
        rows,
        rows_via_collector: prepared.rows_via_collector,
        reports_via_collector: reports,
        clusters_written_directly: prepared.clusters_written_directly,
        ingest_seconds,
        rows_per_second,
        ack_p50_ms: p50,
        ack_p99_ms: p99,
        retries,
        hub_load_seconds,
        groups: hub.len(),
        correctness_passed: mismatch.is_none(),
        first_mismatch: mismatch,
    })
}

fn write_reports(dir: &Path, report: &LoadtestReport) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("report.json"), json + "\n")?;
    let mut rows: BTreeMap<usize, (&str, String)> = BTreeMap::new();
    for (i, (name, value)) in [
        ("clusters", report.clusters.to_string()),
        ("apps per cluster", report.apps.to_string()),
        ("concurrent agents", report.concurrency.to_string()),
        ("observed rows in ClickHouse", report.rows.to_string()),
        (
            "rows through the collector",
            report.rows_via_collector.to_string(),
        ),
        (
            "reports through the collector",
            report.reports_via_collector.to_string(),
        ),
        (
            "stale or never-seen clusters written directly",
            report.clusters_written_directly.to_string(),
        ),
        ("ingest seconds", format!("{:.2}", report.ingest_seconds)),
        ("rows/s", format!("{:.0}", report.rows_per_second)),
        ("ack p50 ms", format!("{:.1}", report.ack_p50_ms)),
        ("ack p99 ms", format!("{:.1}", report.ack_p99_ms)),
        ("retried answers", report.retries.to_string()),
        (
            "hub load seconds",
            format!("{:.2}", report.hub_load_seconds),
        ),
        ("groups", report.groups.to_string()),
        (
            "correctness",
            if report.correctness_passed {
                "pass".to_owned()
            } else {
                format!(
                    "FAIL: {}",
                    report.first_mismatch.as_deref().unwrap_or_default()
                )
            },
        ),
    ]
    .into_iter()
    .enumerate()
    {
        rows.insert(i, (name, value));
    }
    let mut md = String::from("# Load test report\n\n| measure | value |\n|---|---|\n");
    for (name, value) in rows.values() {
        md.push_str(&format!("| {name} | {value} |\n"));
    }
    std::fs::write(dir.join("report.md"), md)?;
    Ok(())
}
