//! The fleet overview: the rollup of the selected group and of the groups below it, their
//! trends, the stale clusters, and the apps and pairs that need someone to act.

use fleetscope_model::DriftState;

use super::filters::{child_of_group, group_path_of, in_environment, in_group, state_literal};
use super::{
    classified_pairs, cluster_counts, inventory, pair_counts, stale_clusters, PanelQuery, Slots,
    PROBLEM_STATES, STATE_ORDER,
};
use crate::queries::rollup_trend_sql;

/// Columns of the group rollups.
fn group_rollup_names() -> Vec<&'static str> {
    let mut names = vec![
        "group_path",
        "clusters",
        "reporting",
        "stale_clusters",
        "instances",
        "in_sync_share",
    ];
    names.extend(STATE_ORDER.iter().map(|state| state.as_str()));
    names
}

/// The store's rollup (clusters, stale clusters, pairs per state) of the groups `filter`
/// selects by `group_path`, one row per group.
fn group_rollup(slots: &Slots, filter: &str) -> PanelQuery {
    let mut sums = vec!["sum(pairs) AS instances".to_owned()];
    for state in STATE_ORDER {
        sums.push(format!(
            "sumIf(pairs, state = {}) AS {}",
            state_literal(state),
            state.as_str()
        ));
    }
    let states = STATE_ORDER
        .iter()
        .map(|state| state.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "SELECT group_path, clusters, clusters - stale_clusters AS reporting, stale_clusters, instances, \
if(instances = 0, 0, round(in_sync / instances, 4)) AS in_sync_share, {states} FROM (\
SELECT group_path, clusters, stale_clusters FROM ({counts}) WHERE {filter}\
) AS counts ALL LEFT JOIN (\
SELECT group_path, {sums} FROM ({pairs}) WHERE {filter} GROUP BY group_path\
) AS states USING group_path ORDER BY group_path",
        counts = cluster_counts(slots),
        pairs = pair_counts(slots),
        sums = sums.join(", "),
    );
    PanelQuery::new(sql, &group_rollup_names())
}

/// The selected group (the fleet when `''`) as one row: clusters, reporting and stale
/// clusters, app instances, the in-sync share and instances per state.
pub fn selected_group_rollup(slots: &Slots) -> PanelQuery {
    group_rollup(slots, &format!("group_path = {}", slots.group))
}

/// The groups one level below the selected one, one row each, as [`selected_group_rollup`].
pub fn child_group_rollups(slots: &Slots) -> PanelQuery {
    group_rollup(slots, &child_of_group(slots, "group_path"))
}

/// The store's rollup trend of the selected group: app instances per state over time.
pub fn drift_trend(slots: &Slots) -> PanelQuery {
    let mut names = vec!["time"];
    names.extend(STATE_ORDER.iter().map(|state| state.as_str()));
    // Snapshot rows have one column per drift state, named after it.
    let fields = format!("taken_at AS time, {}", names[1..].join(", "));
    PanelQuery::new(
        rollup_trend_sql(&fields, slots.group, slots.from, slots.to),
        &names,
    )
}

/// The store's rollup trend of the selected group: clusters and stale clusters over time.
pub fn cluster_trend(slots: &Slots) -> PanelQuery {
    PanelQuery::new(
        rollup_trend_sql(
            "taken_at AS time, clusters, stale_clusters",
            slots.group,
            slots.from,
            slots.to,
        ),
        &["time", "clusters", "stale_clusters"],
    )
}

/// Stale clusters of the selected group and environment, never seen first, then oldest.
pub fn stale_cluster_list(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT cluster_id, {group} AS group_path, environment, \
if(last_seen_seconds = 0, 'never seen', 'silent') AS status, \
if(last_seen_seconds = 0, NULL, toDateTime(last_seen_seconds)) AS last_seen, \
if(last_seen_seconds = 0, NULL, toInt64({now}) - toInt64(last_seen_seconds)) AS silent_seconds \
FROM ({stale}) AS stale ALL INNER JOIN ({inventory}) AS inventory USING cluster_id \
WHERE {in_group} AND {in_env} ORDER BY last_seen_seconds, cluster_id LIMIT {rows}",
        group = group_path_of("group_prefixes"),
        now = slots.now(),
        stale = stale_clusters(slots),
        inventory = inventory(),
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
        rows = slots.table_rows,
    );
    PanelQuery::new(
        sql,
        &[
            "cluster_id",
            "group_path",
            "environment",
            "status",
            "last_seen",
            "silent_seconds",
        ],
    )
}

/// Apps with instances that need someone to act, in the selected group and environment, most
/// failed first.
pub fn problem_apps(slots: &Slots) -> PanelQuery {
    let counted: Vec<DriftState> = PROBLEM_STATES
        .iter()
        .copied()
        .chain([DriftState::Progressing])
        .collect();
    let counts = counted
        .iter()
        .map(|state| {
            format!(
                "countIf(state = {}) AS {}",
                state_literal(*state),
                state.as_str()
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let problems = PROBLEM_STATES
        .iter()
        .map(|state| state.as_str())
        .collect::<Vec<_>>();
    let sql = format!(
        "SELECT app, count() AS instances, {counts} FROM ({pairs}) WHERE {in_group} AND {in_env} \
GROUP BY app HAVING {any} > 0 ORDER BY {order}, app LIMIT {rows}",
        pairs = classified_pairs(slots),
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
        any = problems.join(" + "),
        order = problems
            .iter()
            .map(|name| format!("{name} DESC"))
            .collect::<Vec<_>>()
            .join(", "),
        rows = slots.table_rows,
    );
    let mut names = vec!["app", "instances"];
    names.extend(counted.iter().map(|state| state.as_str()));
    PanelQuery::new(sql, &names)
}

/// (cluster, app) pairs that failed, drifted or never arrived, in the selected group and
/// environment, and of the selected app only when `one_app`.
pub fn problem_pairs(slots: &Slots, one_app: bool) -> PanelQuery {
    let states = [
        DriftState::Failed,
        DriftState::OutOfSync,
        DriftState::Missing,
    ]
    .iter()
    .map(|state| state_literal(*state))
    .collect::<Vec<_>>()
    .join(", ");
    let app = if one_app {
        format!(" AND app = {}", slots.app)
    } else {
        String::new()
    };
    let sql = format!(
        "SELECT cluster_id, {group} AS group_path, environment, app, state, d_version AS desired_version, \
o_version AS running_version, o_health AS health, o_sync AS sync FROM ({pairs}) \
WHERE {in_group} AND {in_env}{app} AND state IN ({states}) ORDER BY state, app, cluster_id LIMIT {rows}",
        group = group_path_of("group_prefixes"),
        pairs = classified_pairs(slots),
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
        rows = slots.table_rows,
    );
    PanelQuery::new(
        sql,
        &[
            "cluster_id",
            "group_path",
            "environment",
            "app",
            "state",
            "desired_version",
            "running_version",
            "health",
            "sync",
        ],
    )
}
