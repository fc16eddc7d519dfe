//! Rows per second through the real HTTP ingest path: simulated agents POST gzip-compressed
//! reports to the central collector, which validates them and writes them through the batch
//! writer into a private ClickHouse server; each request is answered only after ClickHouse
//! accepted its rows.
//!
//! `cargo bench -p fleetscope-collector --bench ingest_throughput` sends a full resync of 30,000
//! clusters × 100 apps (3,000,000 rows, one report per cluster) from 64 concurrent connections.
//! `FLEETSCOPE_BENCH_CLUSTERS`, `FLEETSCOPE_BENCH_APPS`, `FLEETSCOPE_BENCH_CONCURRENCY` and
//! `FLEETSCOPE_BENCH_KIND` (`delta` or `snapshot`) change that.
//!
//! `FLEETSCOPE_BENCH_ROUNDS=n` sends every cluster's report n times, each round with new change
//! numbers, so from the second round on the store already holds the clusters' objects (a
//! snapshot then finds them live). `FLEETSCOPE_BENCH_DROP=k` leaves the last k apps out of the
//! reports of rounds after the first: a snapshot then infers k deletions per cluster.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_collector::central::auth::AgentAuth;
use fleetscope_collector::central::{Collector, CollectorOptions};
use fleetscope_collector::protocol::{Change, Report, ReportKind};
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_store::{ClusterRow, ObservedRow, Store, StoreConfig};

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

/// Round `round` (from 1) of one cluster's report, listing the first `listed` of `apps` apps.
fn report(
    cluster: usize,
    apps: usize,
    listed: usize,
    round: u64,
    kind: ReportKind,
    now: i64,
) -> Report {
    let first_seq = (round - 1) * apps as u64 + 1;
    Report {
        cluster: format!("store-{cluster:06}"),
        agent_version: "0.1.0".into(),
        report_seq: round,
        sent_at: now,
        kind,
        reconcilers: [("flux".to_owned(), "v2.4.0".to_owned())].into(),
        change_seq_high: first_seq + apps as u64,
        changes: (0..listed)
            .map(|app| Change {
                change_seq: first_seq + app as u64,
                kind: if app % 2 == 0 {
                    "Kustomization"
                } else {
                    "HelmRelease"
                }
                .into(),
                namespace: "flux-system".into(),
                name: format!("app-{app:03}"),
                app: Some(format!("app-{app:03}")),
                version: Some(format!("1.{}.{}", app % 7, app % 5)),
                content_hash: Some(format!(
                    "sha256:{:064x}",
                    (cluster as u128) << 32 | app as u128
                )),
                applied_revision: format!("1.{}.{}", app % 7, app % 5),
                health: "healthy".into(),
                sync: "synced".into(),
                reason: "ReconciliationSucceeded".into(),
                message: format!("Applied revision: 1.{}.{}", app % 7, app % 5),
                transitioned_at: Some(now - 3_600),
                observed_at: now - 1,
                deleted: false,
                labels: Default::default(),
                target_revision: String::new(),
                images: Vec::new(),
            })
            .collect(),
        stamped_apps: Vec::new(),
    }
}

struct Round {
    rows: u64,
    elapsed: Duration,
    latencies: Vec<Duration>,
    body_bytes: usize,
}

/// Sends every cluster's report of one round from `concurrency` connections, retrying on 429
/// and 503 like an agent; returns once every report was acknowledged.
async fn send_round(url: &str, bodies: Vec<Vec<u8>>, concurrency: usize) -> Round {
    let body_bytes = bodies.iter().map(Vec::len).sum();
    let bodies = Arc::new(bodies);
    let http = reqwest::Client::new();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let latencies = Arc::new(std::sync::Mutex::new(Vec::with_capacity(bodies.len())));
    let rows = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (http, url, bodies, next, latencies, rows) = (
                http.clone(),
                url.to_owned(),
                bodies.clone(),
                next.clone(),
                latencies.clone(),
                rows.clone(),
            );
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= bodies.len() {
                        return;
                    }
                    loop {
                        let sent = Instant::now();
                        let response = http
                            .post(&url)
                            .header("content-encoding", "gzip")
                            .body(bodies[i].clone())
                            .send()
                            .await
                            .unwrap();
                        match response.status().as_u16() {
                            200 => {
                                latencies.lock().unwrap().push(sent.elapsed());
                                let body: serde_json::Value = response.json().await.unwrap();
                                rows.fetch_add(
                                    body["rows"].as_u64().expect("rows stored"),
                                    std::sync::atomic::Ordering::Relaxed,
                                );
                                break;
                            }
                            429 | 503 => tokio::time::sleep(Duration::from_millis(200)).await,
                            other => panic!(
                                "unexpected status {other}: {}",
                                response.text().await.unwrap_or_default()
                            ),
                        }
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let elapsed = started.elapsed();
    let mut latencies = std::mem::take(&mut *latencies.lock().unwrap());
    latencies.sort();
    Round {
        rows: rows.load(std::sync::atomic::Ordering::Relaxed),
        elapsed,
        latencies,
        body_bytes,
    }
}

fn main() {
    let test_mode = !std::env::args().any(|a| a == "--bench");
    let clusters = if test_mode {
        50
    } else {
        env_number("FLEETSCOPE_BENCH_CLUSTERS", 30_000)
    };
    let apps = env_number("FLEETSCOPE_BENCH_APPS", 100);
    let concurrency = env_number("FLEETSCOPE_BENCH_CONCURRENCY", 64);
    let rounds = env_number("FLEETSCOPE_BENCH_ROUNDS", 1).max(1) as u64;
    let dropped = env_number("FLEETSCOPE_BENCH_DROP", 0).min(apps);
    let kind = match std::env::var("FLEETSCOPE_BENCH_KIND").as_deref() {
        Ok("snapshot") => ReportKind::Snapshot,
        _ => ReportKind::Delta,
    };
    let server = LocalClickHouse::start()
        .unwrap_or_else(|err| panic!("the benchmark needs a private ClickHouse server: {err}"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Store::connect(&StoreConfig::new(server.url(), "bench")).unwrap();
        store.migrate().await.unwrap();
        let inventory: Vec<ClusterRow> = (0..clusters)
            .map(|i| ClusterRow {
                cluster_id: format!("store-{i:06}"),
                group_path: "emea/de".into(),
                group_prefixes: vec!["emea".into(), "emea/de".into()],
                environment: "prod".into(),
                reconciler: "flux".into(),
                label_keys: vec![],
                label_values: vec![],
                updated_at: 0,
                version: 1,
                removed: 0,
            })
            .collect();
        store.insert_rows(&inventory).await.unwrap();
        let collector = Collector::new(
            store.clone(),
            CollectorOptions {
                auth: AgentAuth::Insecure,
                ..CollectorOptions::default()
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api/v1/ingest", listener.local_addr().unwrap());
        let router = collector.router();
        tokio::spawn(async move { axum::serve(listener, router).await });

        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let mut expected_rows = 0u64;
        for round in 1..=rounds {
            let listed = if round == 1 { apps } else { apps - dropped };
            // Inferred deletions: the dropped apps, once, in the first round that leaves them out.
            let deletions = if round == 2 && kind == ReportKind::Snapshot {
                dropped
            } else {
                0
            };
            expected_rows += (clusters * (listed + deletions)) as u64;
            let bodies: Vec<Vec<u8>> = (0..clusters)
                .map(|c| report(c, apps, listed, round, kind, now).encode())
                .collect();
            let queries = |collector: &Collector| {
                collector
                    .lookup()
                    .stats()
                    .queries
                    .load(std::sync::atomic::Ordering::Relaxed)
            };
            let before = queries(&collector);
            let result = send_round(&url, bodies, concurrency).await;
            let lookups = queries(&collector) - before;
            assert_eq!(
                result.rows,
                (clusters * (listed + deletions)) as u64,
                "rows acknowledged in round {round}"
            );
            let latencies = &result.latencies;
            let pct = |p: f64| {
                latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)]
            };
            println!(
                "ingest_throughput round {round}/{rounds}: {} rows ({clusters} {kind:?} reports x {listed} changes, \
{deletions} inferred deletions each, {:.1} MB gzip) over HTTP from {concurrency} connections: \
{:.2} s, {:.0} rows/s; ack latency p50 {:?} p99 {:?}; {lookups} stored-row queries",
                result.rows,
                result.body_bytes as f64 / 1e6,
                result.elapsed.as_secs_f64(),
                result.rows as f64 / result.elapsed.as_secs_f64(),
                pct(0.5),
                pct(0.99),
            );
        }
        let rows = store.count_rows::<ObservedRow>().await.unwrap();
        assert_eq!(rows, expected_rows, "every acknowledged row is in ClickHouse");
        let rss_kb = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse::<u64>().unwrap_or(0))
            })
            .unwrap_or(0);
        println!("ingest_throughput: peak RSS of collector+clients {} MB", rss_kb / 1024);
    });
    drop(runtime);
    server.stop();
}
