//! Fleetscope's Grafana dashboards, generated from Rust so that their SQL is the store's SQL.
//!
//! The statements come from the store's panel queries (`fleetscope_store::panel_sql`), one
//! drift definition with the store's own; [`slots`] is what Grafana puts into them (template
//! variables, dashboard constants, the plugin's macros); [`grafana`] builds dashboard JSON;
//! [`boards`] lays out the seven dashboards; [`expand`] replaces Grafana's variables and the
//! ClickHouse plugin's macros the way they are replaced at query time, for tests and for trying
//! a panel's query by hand. `cargo run -p fleetscope-dashboards` writes the files into
//! `dashboards/grafana/`.

#![forbid(unsafe_code)]

pub mod boards;
pub mod expand;
pub mod grafana;
pub mod slots;

pub use grafana::{to_text, Dashboard, SqlQuery};

/// Every dashboard.
pub fn all() -> Vec<Dashboard> {
    boards::all()
}

/// The folder the committed dashboard files live in.
pub fn output_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grafana")
}
