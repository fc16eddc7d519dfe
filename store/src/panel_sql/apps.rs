//! App versions: the selected app's drift states, the versions desired and running, and the
//! rollout of the selected version, now and over time.

use fleetscope_model::DriftState;

use super::filters::{
    app_object_kinds, bucket, child_of_group, in_environment, in_group, state_count_columns,
    state_count_names, state_literal,
};
use super::{classified_pairs, inventory, PanelQuery, Slots};
use crate::queries::OBSERVED_ORDER;

/// Drift states of the selected app in the selected group and environment.
pub fn app_states(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT {} FROM ({}) WHERE app = {} AND {} AND {}",
        state_count_columns(),
        classified_pairs(slots),
        slots.app,
        in_group(slots, "group_prefixes"),
        in_environment(slots, "environment")
    );
    PanelQuery::new(sql, &state_count_names())
}

/// Per version of the selected app: clusters that should run it and clusters that run it.
pub fn version_distribution(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT version, countIf(side = 'desired') AS desired_clusters, countIf(side = 'running') AS running_clusters FROM (\
SELECT tupleElement(entry, 1) AS side, tupleElement(entry, 2) AS version FROM (\
SELECT arrayJoin([('desired', d_version, has_desired), ('running', o_version, has_observed)]) AS entry \
FROM ({pairs}) WHERE app = {app} AND {in_group} AND {in_env}\
) WHERE tupleElement(entry, 3) = 1\
) GROUP BY version ORDER BY version",
        pairs = classified_pairs(slots),
        app = slots.app,
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
    );
    PanelQuery::new(sql, &["version", "desired_clusters", "running_clusters"])
}

/// Running versions of the selected app per group one level below the selected one.
pub fn versions_by_group(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT group_path, o_version AS version, count() AS clusters FROM ({pairs}) \
ARRAY JOIN group_prefixes AS group_path \
WHERE app = {app} AND has_observed = 1 AND {in_env} AND {child} \
GROUP BY group_path, version ORDER BY group_path, version",
        pairs = classified_pairs(slots),
        app = slots.app,
        in_env = in_environment(slots, "environment"),
        child = child_of_group(slots, "group_path"),
    );
    PanelQuery::new(sql, &["group_path", "version", "clusters"])
}

/// The selected version of the selected app: clusters targeted, running it, and in sync at it.
pub fn rollout_status(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT targeted, running, in_sync, if(targeted = 0, 0, round(in_sync / targeted, 4)) AS in_sync_share FROM (\
SELECT countIf(has_desired = 1 AND d_version = {v}) AS targeted, countIf(has_observed = 1 AND o_version = {v}) AS running, \
countIf(has_desired = 1 AND d_version = {v} AND state = {in_sync}) AS in_sync \
FROM ({pairs}) WHERE app = {app} AND {in_group} AND {in_env})",
        v = slots.version,
        in_sync = state_literal(DriftState::InSync),
        pairs = classified_pairs(slots),
        app = slots.app,
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
    );
    PanelQuery::new(sql, &["targeted", "running", "in_sync", "in_sync_share"])
}

/// Clusters that have reported the selected version of the selected app, cumulated over the
/// time range (clusters that reached it before the range count from its start).
///
/// `GLOBAL IN`: on a ClickHouse cluster `observed_transitions` is Distributed, and a plain `IN`
/// subquery would be sent to every shard, which resolves `clusters` in its own default
/// database; `GLOBAL` computes the set once on the asking node. On one server it is a plain `IN`.
pub fn rollout_progress(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT time, clusters FROM (\
SELECT arraySort(groupArray((bucket, reached))) AS points, arrayMap(p -> tupleElement(p, 1), points) AS buckets, \
arrayCumSum(arrayMap(p -> tupleElement(p, 2), points)) AS totals FROM (\
SELECT {bucket} AS bucket, count() AS reached FROM (\
SELECT cluster_id, greatest(min(observed_at), {from}) AS first_seen FROM observed_transitions \
WHERE app = {app} AND version = {v} AND deleted = 0 AND object_kind IN ({kinds}) AND observed_at <= {to} \
AND cluster_id GLOBAL IN (SELECT cluster_id FROM ({inventory}) WHERE {in_group} AND {in_env}) \
GROUP BY cluster_id\
) GROUP BY bucket)\
) ARRAY JOIN buckets AS time, totals AS clusters ORDER BY time",
        bucket = bucket(slots, "first_seen"),
        from = slots.from,
        to = slots.to,
        app = slots.app,
        v = slots.version,
        kinds = app_object_kinds(),
        inventory = inventory(),
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
    );
    PanelQuery::new(sql, &["time", "clusters"])
}

/// The spacing of the checkpoints the version history panel reads: the first one of each such
/// period in the time range.
pub const PANEL_CHECKPOINT_SECONDS: u32 = 6 * 3_600;

/// Clusters of the selected group and environment running each version of the selected app at
/// each checkpoint in the time range (`observed_checkpoints`): `time`, `version`, `clusters`.
///
/// A checkpoint holds every app object's newest row at `taken_at`, possibly more than once
/// until merged; each object's state at a checkpoint is read through those duplicates as the
/// store reads observed rows (newest by [`OBSERVED_ORDER`]). A cluster runs a version when its
/// object for the app is not deleted; with several such objects, the one with the highest
/// change number names the version, as for the classified pairs. An object is read when any of
/// its checkpoint rows in the range names the app, so that an object whose newest row names
/// another app is left out. The group and environment are the current inventory's.
///
/// Only the first complete checkpoint of every 6 hours is read ([`PANEL_CHECKPOINT_SECONDS`]):
/// each costs a read of a whole checkpoint, and hourly ones over a week's range would be 168.
pub fn running_versions_over_time(slots: &Slots) -> PanelQuery {
    let range = (slots.time_filter)("taken_at");
    let time = format!(
        "{range} AND taken_at GLOBAL IN (SELECT min(taken_at) FROM ({complete}) WHERE {range} \
GROUP BY intDiv(toUInt32(taken_at), {PANEL_CHECKPOINT_SECONDS}))",
        complete = crate::past::COMPLETE_CHECKPOINTS
    );
    let sql = format!(
        "SELECT time, version, count() AS clusters FROM (\
SELECT taken_at AS time, cluster_id, argMax(obj_version, obj_seq) AS version FROM (\
SELECT taken_at, cluster_id, object_kind, object_namespace, object_name, \
argMax(app, {OBSERVED_ORDER}) AS obj_app, argMax(version, {OBSERVED_ORDER}) AS obj_version, \
argMax(deleted, {OBSERVED_ORDER}) AS obj_deleted, max(seq) AS obj_seq \
FROM observed_checkpoints WHERE {time} AND object_kind IN ({kinds}) \
AND (cluster_id, object_kind, object_namespace, object_name) GLOBAL IN (\
SELECT cluster_id, object_kind, object_namespace, object_name FROM observed_checkpoints WHERE {time} AND app = {app}\
) AND cluster_id GLOBAL IN (SELECT cluster_id FROM ({inventory}) WHERE {in_group} AND {in_env}) \
GROUP BY taken_at, cluster_id, object_kind, object_namespace, object_name\
) WHERE obj_app = {app} AND obj_deleted = 0 GROUP BY time, cluster_id\
) GROUP BY time, version ORDER BY time, version",
        kinds = app_object_kinds(),
        app = slots.app,
        inventory = inventory(),
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
    );
    PanelQuery::new(sql, &["time", "version", "clusters"])
}
