//! The store's integration tests, one binary so that a change links one test program: a module
//! per area, each starting with what it proves. Every test starts its own private ClickHouse
//! (or a cluster of them, or the current engine in-process) and stops it.

mod checkpoints;
mod clickhouse_cluster;
mod cluster_current_clickhouse;
mod current_clickhouse;
mod drift_definition;
mod history_tiers;
mod panel_sql;
mod queries;
mod rows;
mod schema;
mod table_sizes;
mod writer;
