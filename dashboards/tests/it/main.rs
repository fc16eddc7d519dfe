//! The dashboards' tests, one binary so that a change links one test program: a module per
//! area (the committed files, Grafana's schema, the panels' SQL on both ClickHouse versions,
//! Prometheus, provisioning, the SQL boundary).

mod committed;
mod common;
mod failure_insights;
mod grafana_schema;
mod panel_sql;
mod prometheus_metrics;
mod provisioning;
mod sql_boundary;
