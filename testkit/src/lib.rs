//! Helpers for tests that need real components: a private ClickHouse server with a fresh
//! database per test, a runner for the current ClickHouse engine (chdb), and the drift grid, a
//! set of cases covering every branch of the drift rules as real rows.
//!
//! Nothing here skips: a missing server or tool fails the test with what to install.

#![forbid(unsafe_code)]

pub mod chdb;
pub mod grid;
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
