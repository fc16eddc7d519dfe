//! Fleetscope's hub: compares desired against actual state and serves it. It keeps an index of
//! the fleet in memory (inventory, membership, desired state per render group, the latest
//! observed state of every app object, last heartbeats), loaded from the store and refreshed
//! from it incrementally, so that whole-fleet rollups and per-cluster pages need no join in
//! ClickHouse. Classification is the model's one drift definition.
//!
//! **Boundary**: the hub reads the store and writes only rollup snapshots (the dashboards'
//! trends); it never talks to a cluster.

#![forbid(unsafe_code)]

mod answers;
mod api;
mod args;
mod auth;
mod errors;
mod examples;
mod gate_params;
mod metrics;
mod openapi;
mod pages;
mod params;
mod query;
pub mod rollout_records;
mod server;
mod state;
pub mod telemetry;

pub use args::HubArgs;
pub use auth::{Auth, LiveAuth};
pub use metrics::{FleetSnapshot, MetricsConfig};
pub use openapi::{document, document_text};
pub use server::{router, run, spawn_refresher, take_snapshot};
pub use state::AppState;
