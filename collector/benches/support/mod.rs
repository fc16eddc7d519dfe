//! What the recovery benches share: the release binary, a private ClickHouse with clusters in
//! its inventory, a collector on it, and medians.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

/// The `fleetscope` binary: under `--bench` the release build (`cargo build --release -p
/// fleetscope`, a no-op when current), otherwise the debug one the fault tests use.
pub fn binary(bench: bool) -> PathBuf {
    if !bench {
        return fleetscope_testkit::faults::fleetscope_binary().to_owned();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-p",
            "fleetscope",
            "--message-format=json",
        ])
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build");
    assert!(
        output.status.success(),
        "cargo build --release -p fleetscope failed"
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "fleetscope")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported no fleetscope executable")
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
    let tokens = dir.join("agent-tokens.yaml");
    let mut yaml = String::from("agents:\n");
    for cluster in clusters {
        yaml.push_str(&format!(
            "  - cluster: {cluster}\n    token: {}\n",
            token(cluster)
        ));
    }
    std::fs::write(&tokens, yaml).unwrap();
    let args: Vec<String> = [
        "collector",
        "--agent-tokens",
        tokens.to_str().unwrap(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--clickhouse-url",
        clickhouse,
        "--clickhouse-database",
        DATABASE,
        "--log",
        "info",
    ]
    .map(String::from)
    .to_vec();
    let log = dir.join(format!("collector-{port}.log"));
    Service::start(binary, &args, &log, port)
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
