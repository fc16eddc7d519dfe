//! The SQL of the dashboards' panels and variables, as complete `SELECT` texts.
//!
//! The dashboards ask the store what they show, as everyone else does; the difference is that a
//! dashboard's query is run by Grafana, not by the store, so its inputs (the selected group,
//! app or cluster, the time range, the drift policy's constants) are not values to bind but
//! expressions Grafana replaces at query time. Every builder here therefore takes a [`Slots`]
//! of SQL expressions and writes them into the text as they are.
//!
//! **Trusted input only.** The slots are template expressions written by the dashboard
//! generator (`${group:sqlstring}`, `$__toTime`, …), never values from a request: nothing here
//! is escaped. The store's own queries keep taking values as bound parameters; they are built
//! by the same text functions of [`crate::queries`] with `?` in the slots, so a panel counts,
//! classifies and reads through unmerged rows exactly as the store does, and the drift rules
//! come from [`crate::drift_sql::drift_state_expression`] in both.
//!
//! Every statement here runs on ClickHouse 18.16 as on current ClickHouse (the dashboards'
//! tests run them on both), so at most one `JOIN` per `SELECT` level and no newer functions;
//! and on a ClickHouse cluster, where `observed_transitions` is Distributed and is filtered by
//! a subquery only with `GLOBAL IN`.
//!
//! One file per dashboard area: `variables`, `fleet` (the overview), `apps` (app versions),
//! `insights` (failure insights), `cluster_detail`, `deployments` (deployment history),
//! `environments` (environment comparison) and `rollouts` (rollouts and delivery); `filters` holds the conditions and columns they
//! share, and this module the relations they select from.

use fleetscope_model::DriftState;

use crate::queries::{
    classified_pairs_sql, cluster_counts_sql, pair_counts_sql, stale_clusters_sql,
    INVENTORY_CURRENT,
};

mod apps;
mod cluster_detail;
mod deployments;
mod environments;
mod filters;
mod fleet;
mod insights;
mod rollouts;
mod variables;

pub use apps::{
    app_states, rollout_progress, rollout_status, running_versions_over_time, version_distribution,
    versions_by_group, PANEL_CHECKPOINT_SECONDS,
};
pub use cluster_detail::{
    cluster_apps, cluster_desired_history, cluster_history, cluster_info, cluster_objects,
    cluster_states,
};
pub use deployments::{
    desired_changes, desired_changes_over_time, group_transitions, renders_in_range,
    renders_over_time, transitions_over_time,
};
pub use environments::{desired_by_environment, running_by_environment, states_by_environment};
pub use fleet::{
    child_group_rollups, cluster_trend, drift_trend, problem_apps, problem_pairs,
    selected_group_rollup, stale_cluster_list,
};
pub use insights::{failure_insights, INSIGHT_COLUMNS, INSIGHT_MIN_FAILING_WITH};
pub use rollouts::{
    delivery, delivery_by_group, rollout_curve, rollout_groups, rollout_list, rollout_values,
    stalled_rollouts,
};
pub use variables::{app_values, cluster_values, environment_values, group_values, version_values};

/// The expressions a dashboard puts into its queries. String slots are SQL string
/// expressions, where `''` means "every" (every group, that is the whole fleet, every
/// environment or every app) for the slots that say so.
#[derive(Debug, Clone, Copy)]
pub struct Slots<'a> {
    /// The selected group path; `''` is the whole fleet.
    pub group: &'a str,
    /// The selected environment; `''` is every environment.
    pub environment: &'a str,
    /// The selected app; `''` is every app where a panel allows that.
    pub app: &'a str,
    /// The selected version of the selected app.
    pub version: &'a str,
    /// The selected cluster.
    pub cluster: &'a str,
    /// The selected rollout, `app@render@version`.
    pub rollout: &'a str,
    /// The share of a rollout's clusters, in percent, that may fail at its version before
    /// reaching it without the rollout counting as a failed change (a number expression).
    pub failure_budget: &'a str,
    /// Seconds without a heartbeat after which a cluster is stale (an integer expression).
    pub stale_after_seconds: &'a str,
    /// Seconds a new desired state may take to arrive (an integer expression).
    pub grace_seconds: &'a str,
    /// The start of the time range, a `DateTime` expression.
    pub from: &'a str,
    /// The end of the time range, a `DateTime` expression; also the moment current state is
    /// classified at, so that a dashboard looking at the past shows the past's drift.
    pub to: &'a str,
    /// The width of a time series' bucket in seconds (an integer expression).
    pub interval_seconds: &'a str,
    /// A condition that a `DateTime` column lies in the time range (Grafana's own macro, so
    /// that both ends are included as the data source plugin includes them).
    pub time_filter: fn(column: &str) -> String,
    /// Rows a table shows at most.
    pub table_rows: u64,
}

impl Slots<'_> {
    /// The moment classified at, in seconds.
    fn now(&self) -> String {
        format!("toUInt32({})", self.to)
    }
}

/// A panel's statement and the columns it returns, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanelQuery {
    pub sql: String,
    pub columns: Vec<&'static str>,
}

impl PanelQuery {
    fn new(sql: String, columns: &[&'static str]) -> PanelQuery {
        PanelQuery {
            sql,
            columns: columns.to_vec(),
        }
    }
}

/// The order drift states appear in as columns, most wanted first.
pub const STATE_ORDER: [DriftState; 8] = [
    DriftState::InSync,
    DriftState::Progressing,
    DriftState::Failed,
    DriftState::OutOfSync,
    DriftState::Missing,
    DriftState::Unexpected,
    DriftState::Stale,
    DriftState::Unknown,
];

/// States that need someone to act.
pub const PROBLEM_STATES: [DriftState; 4] = [
    DriftState::Failed,
    DriftState::OutOfSync,
    DriftState::Missing,
    DriftState::Unexpected,
];

/// Columns of [`classified_pairs`], in order.
pub const PAIR_COLUMNS: [&str; 14] = [
    "cluster_id",
    "app",
    "group_prefixes",
    "environment",
    "has_desired",
    "has_observed",
    "d_version",
    "o_version",
    "o_health",
    "o_sync",
    "d_since_s",
    "o_transitioned_s",
    "last_seen_s",
    "state",
];

/// Every (cluster, app) pair of current clusters with its drift state and the inputs of that
/// classification ([`PAIR_COLUMNS`]): the relation the store's pair and rollup queries count,
/// with more of its columns selected.
pub fn classified_pairs(slots: &Slots) -> String {
    classified_pairs_sql(
        &PAIR_COLUMNS[..PAIR_COLUMNS.len() - 1].join(", "),
        &slots.now(),
        slots.grace_seconds,
        slots.stale_after_seconds,
    )
}

/// The store's drift counts per group (every level, `''` for the fleet) and state:
/// `group_path`, `state`, `pairs`.
pub fn pair_counts(slots: &Slots) -> String {
    pair_counts_sql(&slots.now(), slots.grace_seconds, slots.stale_after_seconds)
}

/// The store's cluster counts per group: `group_path`, `clusters`, `stale_clusters`.
pub fn cluster_counts(slots: &Slots) -> String {
    cluster_counts_sql(&slots.now(), slots.stale_after_seconds)
}

/// The store's stale clusters (never seen first, then oldest), all of them: `cluster_id`,
/// `last_seen_seconds`.
pub fn stale_clusters(slots: &Slots) -> String {
    stale_clusters_sql(&slots.now(), slots.stale_after_seconds)
}

/// The store's current inventory: `cluster_id`, `group_prefixes`, `environment` of every
/// cluster not removed.
fn inventory() -> &'static str {
    INVENTORY_CURRENT
}

#[cfg(test)]
mod tests;
