//! Fleetscope's hub: compares desired against actual state and serves it. It keeps an index of
//! the fleet in memory (inventory, membership, desired state per render group, the latest
//! observed state of every app object, last heartbeats), loaded from the store and refreshed
//! from it incrementally, so that whole-fleet rollups and per-cluster pages need no join in
//! ClickHouse. Classification is the model's one drift definition.
//!
//! **Boundary**: the hub reads the store and writes only rollup snapshots (the dashboards'
//! trends); it never talks to a cluster.

#![forbid(unsafe_code)]

pub mod answers;
pub mod api;
pub mod auth;
pub mod gate;
pub mod index;
pub mod insights;
pub mod metrics;
pub mod openapi;
pub mod params;
pub mod past;
pub mod query;
pub mod rollups;
pub mod server;
pub mod symbols;
pub mod telemetry;
