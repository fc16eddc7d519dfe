//! Cluster detail: the selected cluster's place, heartbeat, drift, objects and histories.

use super::filters::{state_count_columns, state_count_names};
use super::{classified_pairs, stale_clusters, PanelQuery, Slots};
use crate::queries::{desired_history_sql, observed_for_cluster_sql, observed_history_sql};

/// The selected cluster's current render group (a scalar subquery).
fn render_group_of(cluster: &str) -> String {
    format!(
        "(SELECT argMax(render_group, render_id) FROM render_group_members WHERE cluster_id = {cluster})"
    )
}

/// The selected cluster: place, labels, render group, last heartbeat and whether it is stale
/// by the store's stale query.
pub fn cluster_info(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT cluster_id, group_path, environment, reconciler, labels, render_group, \
if(cluster_id IN (SELECT cluster_id FROM ({stale})), 'stale', 'reporting') AS status, \
if(toUInt32(seen) = 0, NULL, seen) AS last_seen, agent_version FROM (\
SELECT * FROM (\
SELECT cluster_id, argMax(group_path, version) AS group_path, argMax(environment, version) AS environment, \
argMax(reconciler, version) AS reconciler, \
arrayStringConcat(arrayMap((k, v) -> concat(k, '=', v), argMax(label_keys, version), argMax(label_values, version)), ', ') AS labels \
FROM clusters WHERE cluster_id = {c} GROUP BY cluster_id\
) AS inventory ALL LEFT JOIN (\
SELECT cluster_id, argMax(render_group, render_id) AS render_group FROM render_group_members WHERE cluster_id = {c} GROUP BY cluster_id\
) AS membership USING cluster_id\
) AS placed ALL LEFT JOIN (\
SELECT cluster_id, max(seen_at) AS seen, argMax(agent_version, seen_at) AS agent_version FROM heartbeats WHERE cluster_id = {c} GROUP BY cluster_id\
) AS heartbeat USING cluster_id",
        c = slots.cluster,
        stale = stale_clusters(slots),
    );
    PanelQuery::new(
        sql,
        &[
            "cluster_id",
            "group_path",
            "environment",
            "reconciler",
            "labels",
            "render_group",
            "status",
            "last_seen",
            "agent_version",
        ],
    )
}

/// Drift states of the selected cluster's pairs.
pub fn cluster_states(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT {} FROM ({}) WHERE cluster_id = {}",
        state_count_columns(),
        classified_pairs(slots),
        slots.cluster
    );
    PanelQuery::new(sql, &state_count_names())
}

/// Every app of the selected cluster: desired against running, and its drift state.
pub fn cluster_apps(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT app, state, d_version AS desired_version, o_version AS running_version, o_health AS health, \
o_sync AS sync, if(d_since_s = 0, NULL, toDateTime(d_since_s)) AS desired_since, \
if(o_transitioned_s = 0, NULL, toDateTime(o_transitioned_s)) AS last_transition \
FROM ({}) WHERE cluster_id = {} ORDER BY app",
        classified_pairs(slots),
        slots.cluster
    );
    PanelQuery::new(
        sql,
        &[
            "app",
            "state",
            "desired_version",
            "running_version",
            "health",
            "sync",
            "desired_since",
            "last_transition",
        ],
    )
}

/// The store's latest state of every object the selected cluster reported.
pub fn cluster_objects(slots: &Slots) -> PanelQuery {
    const COLUMNS: [&str; 13] = [
        "object_kind",
        "object_namespace",
        "object_name",
        "app",
        "version",
        "applied_revision",
        "health",
        "sync",
        "reason",
        "message",
        "transitioned_at",
        "observed_at",
        "deleted",
    ];
    PanelQuery::new(
        observed_for_cluster_sql(&COLUMNS.join(", "), slots.cluster),
        &COLUMNS,
    )
}

/// The store's observed history of the selected cluster in the time range.
pub fn cluster_history(slots: &Slots) -> PanelQuery {
    let fields = "observed_at AS time, object_kind, object_name, app, version, health, \
sync, reason, message";
    PanelQuery::new(
        observed_history_sql(fields, slots.cluster, slots.from, slots.to),
        &[
            "time",
            "object_kind",
            "object_name",
            "app",
            "version",
            "health",
            "sync",
            "reason",
            "message",
        ],
    )
}

/// The store's desired history of the selected cluster's current render group in the time
/// range, every app.
pub fn cluster_desired_history(slots: &Slots) -> PanelQuery {
    let fields = "desired_since AS time, app, version, render_id, commit, removed, \
arrayStringConcat(reasons, ', ') AS policies";
    PanelQuery::new(
        desired_history_sql(
            fields,
            &render_group_of(slots.cluster),
            "''",
            slots.from,
            slots.to,
        ),
        &[
            "time",
            "app",
            "version",
            "render_id",
            "commit",
            "removed",
            "policies",
        ],
    )
}
