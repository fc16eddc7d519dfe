//! What the recovery benches share: the release binary, a private ClickHouse with clusters in
//! its inventory, a collector on it, and medians.

use std::path::{Path, PathBuf};

use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_store::{Store, StoreConfig};
use fleetscope_testkit::faults::Service;

pub const DATABASE: &str = "fleetscope";

pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
        .unwrap_or(default)
}

/// The `fleetscope` binary: under `--bench` the release build, otherwise the debug one the
/// fault tests use.
pub fn binary(bench: bool) -> PathBuf {
    if bench {
        fleetscope_testkit::faults::fleetscope_release_binary().to_owned()
    } else {
        fleetscope_testkit::faults::fleetscope_binary().to_owned()
    }
}

pub fn token(cluster: &str) -> String {
    format!("recovery-bench-token-for-{cluster}")
}

/// A private ClickHouse with the schema applied and `clusters` in the inventory.
pub fn clickhouse_with(
    clusters: &[String],
    runtime: &tokio::runtime::Runtime,
) -> (LocalClickHouse, Store) {
    let server = LocalClickHouse::start()
        .unwrap_or_else(|err| panic!("this bench needs a private ClickHouse server: {err}"));
    let store = Store::connect(&StoreConfig::new(server.url(), DATABASE)).unwrap();
    runtime.block_on(store.migrate()).unwrap();
    for chunk in clusters.chunks(10_000) {
        let rows: Vec<_> = chunk
            .iter()
            .map(|id| fleetscope_testkit::inventory_row(id, "factories/linz"))
            .collect();
        runtime.block_on(store.insert_rows(&rows)).unwrap();
    }
    (server, store)
}

/// `fleetscope collector` on `port` with a token per cluster, its log in `dir`.
pub fn start_collector(
    binary: &Path,
    dir: &Path,
    clusters: &[String],
    clickhouse: &str,
    port: u16,
) -> Service {
    fleetscope_testkit::faults::start_collector(
        binary,
        dir,
        clusters,
        token,
        (clickhouse, DATABASE),
        port,
        &[],
    )
}

pub fn median(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}
