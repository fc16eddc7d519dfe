//! Deployment history: renders, desired-state changes and observed transitions over the time
//! range, and the lists of them.

use fleetscope_model::Health;

use super::filters::{bucket, in_group, is_app_or_all, quoted};
use super::{inventory, PanelQuery, Slots};
use crate::queries::{observed_transitions_sql, renders_between_sql, CURRENT_MEMBERS};

/// Render groups with current members in the selected group.
fn render_groups_in_group(slots: &Slots) -> String {
    format!(
        "SELECT current_group FROM ({CURRENT_MEMBERS}) WHERE current_removed = 0 AND cluster_id IN \
(SELECT cluster_id FROM ({inventory}) WHERE {in_group})",
        inventory = inventory(),
        in_group = in_group(slots, "group_prefixes"),
    )
}

fn desired_changes_filter(slots: &Slots) -> String {
    format!(
        "{time} AND {app} AND ({g} = '' OR render_group IN ({groups}))",
        time = (slots.time_filter)("desired_since"),
        app = is_app_or_all(slots, "app"),
        g = slots.group,
        groups = render_groups_in_group(slots),
    )
}

/// Renders per interval of the time range.
pub fn renders_over_time(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT {bucket} AS time, count() AS renders FROM (\
SELECT render_id, any(rendered_at) AS render_time FROM renders WHERE {time} GROUP BY render_id\
) GROUP BY time ORDER BY time",
        bucket = bucket(slots, "render_time"),
        time = (slots.time_filter)("rendered_at"),
    );
    PanelQuery::new(sql, &["time", "renders"])
}

/// Desired-state changes per interval, of the selected app and group.
pub fn desired_changes_over_time(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT {bucket} AS time, count() AS desired_changes FROM (\
SELECT render_group, app, render_id, any(desired_since) AS change_time FROM desired_history \
WHERE {filter} GROUP BY render_group, app, render_id\
) GROUP BY time ORDER BY time",
        bucket = bucket(slots, "change_time"),
        filter = desired_changes_filter(slots),
    );
    PanelQuery::new(sql, &["time", "desired_changes"])
}

/// Observed transitions per interval by reported health (healthy, progressing, degraded, and
/// the rest as `other`), of the selected app and group (`GLOBAL IN` for a Distributed
/// `observed_transitions`, as in [`rollout_progress`](super::rollout_progress)).
pub fn transitions_over_time(slots: &Slots) -> PanelQuery {
    let named = [Health::Healthy, Health::Progressing, Health::Degraded];
    let mut columns = Vec::new();
    for health in named {
        columns.push(format!(
            "countIf(reported_health = {}) AS {}",
            quoted(health.as_str()),
            health.as_str()
        ));
    }
    columns.push(format!(
        "countIf(reported_health NOT IN ({})) AS other",
        named
            .iter()
            .map(|health| quoted(health.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let sql = format!(
        "SELECT {bucket} AS time, {columns} FROM (\
SELECT cluster_id, object_kind, object_namespace, object_name, seq, any(observed_at) AS change_time, any(health) AS reported_health \
FROM observed_transitions WHERE {time} AND {app} AND \
({g} = '' OR cluster_id GLOBAL IN (SELECT cluster_id FROM ({inventory}) WHERE {in_group})) \
GROUP BY cluster_id, object_kind, object_namespace, object_name, seq\
) GROUP BY time ORDER BY time",
        bucket = bucket(slots, "change_time"),
        columns = columns.join(", "),
        time = (slots.time_filter)("observed_at"),
        app = is_app_or_all(slots, "app"),
        g = slots.group,
        inventory = inventory(),
        in_group = in_group(slots, "group_prefixes"),
    );
    let mut names = vec!["time"];
    names.extend(named.iter().map(|health| health.as_str()));
    names.push("other");
    PanelQuery::new(sql, &names)
}

/// The store's renders in the time range, newest first.
pub fn renders_in_range(slots: &Slots) -> PanelQuery {
    let fields = "rendered_at AS time, render_id, commit, platform_commit, summary, \
render_groups, clusters, changed_items";
    PanelQuery::new(
        renders_between_sql(fields, slots.from, slots.to, &slots.table_rows.to_string()),
        &[
            "time",
            "render_id",
            "commit",
            "platform_commit",
            "summary",
            "render_groups",
            "clusters",
            "changed_items",
        ],
    )
}

/// Desired-state changes of the selected app and group in the time range, newest first.
pub fn desired_changes(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT desired_since AS time, app, version, render_group, render_id, commit, removed FROM desired_history \
WHERE {filter} ORDER BY render_id DESC, render_group, app LIMIT 1 BY render_group, app, render_id LIMIT {rows}",
        filter = desired_changes_filter(slots),
        rows = slots.table_rows,
    );
    PanelQuery::new(
        sql,
        &[
            "time",
            "app",
            "version",
            "render_group",
            "render_id",
            "commit",
            "removed",
        ],
    )
}

/// The store's observed transitions of the selected group and app in the time range, newest
/// first; with `GLOBAL IN`, as the store filters a Distributed table.
pub fn group_transitions(slots: &Slots) -> PanelQuery {
    let fields = "observed_at AS time, cluster_id, app, version, health, sync, \
reason, message, object_kind, object_name";
    PanelQuery::new(
        observed_transitions_sql(
            fields,
            "GLOBAL IN",
            slots.group,
            slots.app,
            slots.from,
            slots.to,
            &slots.table_rows.to_string(),
        ),
        &[
            "time",
            "cluster_id",
            "app",
            "version",
            "health",
            "sync",
            "reason",
            "message",
            "object_kind",
            "object_name",
        ],
    )
}
