//! The collector's integration tests, one binary so that a change links one test program: a
//! module per area. `serving.rs` is a program of its own: it sends SIGHUP to its own process.

mod agent;
mod apiserver;
mod clickhouse_restart;
mod common;
mod direct;
mod ingest;
mod normalize_fixtures;
mod numbers;
mod protocol_props;
