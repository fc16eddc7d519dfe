//! Helpers for tests that need real components: a private ClickHouse server with a fresh
//! database per test, a runner for the current ClickHouse engine (chdb), and the drift grid, a
//! set of cases covering every branch of the drift rules as real rows, and the pieces of the
//! fault tests on the real binaries, a private CA for TLS, and a WebDriver client that drives a
//! headless Chromium for browser tests.
//!
//! Nothing here skips: a missing server or tool fails the test with what to install.

#![forbid(unsafe_code)]

pub mod browser;
pub mod chdb;
pub mod clickhouse_cluster;
pub mod faults;
pub mod grid;
pub mod oidc;
pub mod otlp;
pub mod pki;
pub mod prometheus;
pub mod reloads;
pub mod sql_literal;

use std::sync::atomic::{AtomicU32, Ordering};

use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_store::{Store, StoreConfig};

/// A private ClickHouse server and a store on a database of its own, migrated. The server stops
/// when this is dropped.
#[derive(Debug)]
pub struct TestStore {
    pub server: LocalClickHouse,
    pub store: Store,
}

impl TestStore {
    /// Starts a server, picks a fresh database and applies the schema.
    pub async fn start() -> TestStore {
        let server = match LocalClickHouse::start() {
            Ok(server) => server,
            Err(err) => panic!("this test needs a private ClickHouse server: {err}"),
        };
        let store = Store::connect(&StoreConfig::new(server.url(), fresh_database_name()))
            .expect("valid store config");
        store
            .migrate()
            .await
            .expect("migrations apply on a fresh database");
        TestStore { server, store }
    }

    /// Another store handle on the same server with a new, unmigrated database.
    pub fn other_database(&self) -> Store {
        Store::connect(&StoreConfig::new(self.server.url(), fresh_database_name()))
            .expect("valid store config")
    }
}

/// A database name no other test in this process uses.
pub fn fresh_database_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A current inventory row for `cluster_id` in `group_path` (prod, Flux), as tests register
/// clusters before reporting for them.
pub fn inventory_row(cluster_id: &str, group_path: &str) -> fleetscope_store::ClusterRow {
    let group = fleetscope_model::GroupPath::parse(group_path).expect("test group paths are valid");
    fleetscope_store::ClusterRow {
        cluster_id: cluster_id.into(),
        group_path: group_path.into(),
        group_prefixes: group.prefixes().into_iter().map(String::from).collect(),
        environment: "prod".into(),
        reconciler: "flux".into(),
        label_keys: vec![],
        label_values: vec![],
        updated_at: 0,
        version: 1,
        removed: 0,
    }
}

/// Copies a directory tree (test fixtures into a temporary directory to modify them).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create the target directory");
    for entry in std::fs::read_dir(from).expect("read the source directory") {
        let entry = entry.expect("read a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy a file");
        }
    }
}

/// The lines of tab-separated `text` without their last column (a column that depends on the
/// moment a query ran, such as a writer's silence).
pub fn without_last_column(text: &str) -> Vec<String> {
    without_last_columns(text, 1)
}

/// Each line of `text` without its last `n` tab-separated columns (values that depend on when a
/// query ran or a row was inserted).
pub fn without_last_columns(text: &str, n: usize) -> Vec<String> {
    text.lines()
        .map(|line| {
            let mut kept = line;
            for _ in 0..n {
                kept = kept.rsplit_once('\t').map_or(kept, |(rest, _)| rest);
            }
            kept.to_owned()
        })
        .collect()
}
