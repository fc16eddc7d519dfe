//! Fleetscope's Grafana dashboards, generated from Rust so that their SQL is the store's SQL.
//!
//! [`sql`] renders the store's public query builders with Grafana expressions in place of their
//! parameters (one drift definition: the store's); [`grafana`] builds dashboard JSON;
//! [`boards`] lays out the six dashboards; [`expand`] replaces Grafana's variables and the
//! ClickHouse plugin's macros the way they are replaced at query time, for tests and for trying
//! a panel's query by hand. `cargo run -p fleetscope-dashboards` writes the files into
//! `dashboards/grafana/`.

#![forbid(unsafe_code)]

pub mod boards;
pub mod expand;
pub mod grafana;
pub mod sql;

pub use grafana::{to_text, Dashboard, SqlQuery};

/// Every dashboard.
pub fn all() -> Vec<Dashboard> {
    boards::all()
}

/// The folder the committed dashboard files live in.
pub fn output_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grafana")
}
