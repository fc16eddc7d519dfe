//! Observed-row insert throughput through the store's batch writer into a real ClickHouse.
//!
//! `cargo bench -p fleetscope-store --bench insert_throughput` writes 3,000,000 rows (30,000
//! clusters × 100 apps, one submission of 100 rows per cluster, as the collector submits them)
//! into a private ClickHouse server started for the run, and prints rows per second.
//! `FLEETSCOPE_BENCH_ROWS` changes the number of rows, `FLEETSCOPE_BENCH_BATCH` the writer's
//! batch size.

use std::time::Instant;

use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_store::writer::{BatchWriter, BatchWriterConfig};
use fleetscope_store::{ObservedRow, Store, StoreConfig};

const APPS_PER_CLUSTER: usize = 100;

fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => value
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, got {value:?}")),
        Err(_) => default,
    }
}

fn row(cluster: usize, app: usize, seq: u64) -> ObservedRow {
    let name = format!("app-{app:03}");
    ObservedRow {
        cluster_id: format!("store-{cluster:06}"),
        object_kind: if app.is_multiple_of(2) {
            "Kustomization"
        } else {
            "HelmRelease"
        }
        .to_owned(),
        object_namespace: "flux-system".to_owned(),
        object_name: name.clone(),
        app: name,
        version: format!("1.{}.{}", app % 7, app % 5),
        content_hash: format!("sha256:{:064x}", (cluster as u128) << 32 | app as u128),
        applied_revision: format!("1.{}.{}@sha256:{:016x}", app % 7, app % 5, app * 7919),
        health: "healthy".to_owned(),
        sync: "synced".to_owned(),
        reason: "ReconciliationSucceeded".to_owned(),
        message: format!("Applied revision: 1.{}.{}", app % 7, app % 5),
        transitioned_at: 1_800_000_000 - (app as u32 * 3_600),
        observed_at: 1_800_000_000,
        received_at: 1_800_000_001,
        change_seq: seq,
        deleted: 0,
    }
}

fn main() {
    // `cargo test --benches` runs benchmarks in test mode; a short pass is enough there.
    let test_mode =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let rows = if test_mode {
        2_000
    } else {
        env_number("FLEETSCOPE_BENCH_ROWS", 3_000_000)
    };
    let batch = env_number(
        "FLEETSCOPE_BENCH_BATCH",
        BatchWriterConfig::default().max_rows,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let server = LocalClickHouse::start()
        .unwrap_or_else(|err| panic!("the benchmark needs a private ClickHouse server: {err}"));
    runtime.block_on(async {
        let compression = std::env::var("FLEETSCOPE_BENCH_COMPRESSION").map(|v| v != "none").unwrap_or(true);
        let store = Store::connect(&StoreConfig { compression, ..StoreConfig::new(server.url(), "bench") }).expect("store config");
        store.migrate().await.expect("migrate");
        let version = store.server_version().await.expect("version");
        let config = BatchWriterConfig { max_rows: batch, ..BatchWriterConfig::default() };
        let writer = BatchWriter::<ObservedRow>::spawn(store.clone(), config, None);
        let clusters = rows.div_ceil(APPS_PER_CLUSTER);

        // Rows are made before the clock starts: the benchmark measures the writer and
        // ClickHouse, not string formatting.
        let mut produced = 0;
        let submissions: Vec<Vec<ObservedRow>> = (0..clusters)
            .map(|cluster| {
                let count = APPS_PER_CLUSTER.min(rows - produced);
                produced += count;
                (0..count).map(|app| row(cluster, app, 1)).collect()
            })
            .collect();
        let started = Instant::now();
        let producer = {
            let writer = writer.clone();
            tokio::spawn(async move {
                let mut pending = Vec::with_capacity(submissions.len());
                for submission in submissions {
                    pending.push(writer.submit(submission).await.expect("writer open"));
                }
                pending
            })
        };
        let pending = producer.await.expect("producer");
        let mut batches = std::collections::BTreeSet::new();
        for p in pending {
            batches.insert(p.accepted().await.expect("accepted").batch_id);
        }
        let elapsed = started.elapsed();
        writer.close().await;
        let stored = store.count_rows::<ObservedRow>().await.expect("count");
        assert_eq!(stored, rows as u64, "every acknowledged row is in ClickHouse");
        let per_second = rows as f64 / elapsed.as_secs_f64();
        println!(
            "insert_throughput: {rows} observed rows ({clusters} clusters x {APPS_PER_CLUSTER} apps) in {} batches of up to {batch} rows \
into ClickHouse {version} (lz4 {compression}): {:.2} s, {:.0} rows/s; 3,000,000 rows at this rate take {:.1} s",
            batches.len(),
            elapsed.as_secs_f64(),
            per_second,
            3_000_000.0 / per_second
        );
        drop(store);
    });
    server.stop();
}
