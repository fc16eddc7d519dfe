//! Environment comparison: desired and running versions and drift per app and environment.

use super::filters::{in_group, is_app_or_all, state_count_columns, state_count_names};
use super::{classified_pairs, PanelQuery, Slots};

fn environment_filter(slots: &Slots) -> String {
    format!(
        "{} AND {}",
        in_group(slots, "group_prefixes"),
        is_app_or_all(slots, "app")
    )
}

/// Desired versions per app and environment.
pub fn desired_by_environment(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT app, environment, arrayStringConcat(arraySort(groupUniqArray(d_version)), ', ') AS desired \
FROM ({pairs}) WHERE has_desired = 1 AND {filter} GROUP BY app, environment ORDER BY app, environment",
        pairs = classified_pairs(slots),
        filter = environment_filter(slots),
    );
    PanelQuery::new(sql, &["app", "environment", "desired"])
}

/// Running versions per app and environment, each with its cluster count, most common first.
pub fn running_by_environment(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT app, environment, arrayStringConcat(arrayMap(x -> concat(tupleElement(x, 2), ' (', toString(tupleElement(x, 1)), ')'), \
arrayReverseSort(groupArray((clusters, version)))), ', ') AS running FROM (\
SELECT app, environment, o_version AS version, count() AS clusters FROM ({pairs}) \
WHERE has_observed = 1 AND {filter} GROUP BY app, environment, version\
) GROUP BY app, environment ORDER BY app, environment",
        pairs = classified_pairs(slots),
        filter = environment_filter(slots),
    );
    PanelQuery::new(sql, &["app", "environment", "running"])
}

/// Drift per app and environment.
pub fn states_by_environment(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT app, environment, {counts} FROM ({pairs}) WHERE {filter} \
GROUP BY app, environment ORDER BY app, environment",
        counts = state_count_columns(),
        pairs = classified_pairs(slots),
        filter = environment_filter(slots),
    );
    let mut names = vec!["app", "environment"];
    names.extend(state_count_names());
    PanelQuery::new(sql, &names)
}
