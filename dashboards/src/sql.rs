//! The SQL of every ClickHouse panel and variable.
//!
//! Drift is never restated here. The store's public query builders are rendered with marker
//! values in place of their parameters, and the markers are then replaced by Grafana
//! expressions: the end of the dashboard's time range for `now`, two dashboard constants for
//! the drift policy, and template variables for a group, an app or a cluster. What remains is
//! the store's own text, so the dashboards classify with the store's drift expression
//! ([`fleetscope_store::drift_sql::drift_state_expression`]), read through unmerged rows the way
//! the store does, and count rollups the way `Store::drift_rollup` does.
//!
//! The relation of classified pairs the store builds its pair queries on is private to the
//! store; [`classified_pairs`] takes it out of the public `all_pair_states_query`, whose outer
//! shape it checks, and widens its select list with columns the inner query already computes.
//! Any change of shape in the store makes generation panic with the text it found, so it cannot
//! drift apart silently.
//!
//! Every statement here also runs on ClickHouse 18.16 (the tests run them there), so a single
//! `JOIN` per `SELECT` level and no newer functions.

use std::sync::OnceLock;

use fleetscope_model::state::ObjectKind;
use fleetscope_model::{DriftPolicy, DriftState, Health, Timestamp};
use fleetscope_store::{queries, Store, StoreConfig};

/// Template variables as SQL string literals. A variable whose "All" option is chosen expands
/// to its custom all value, `''`, which reads as "no filter" (and, for the group, the fleet).
pub mod var {
    pub const GROUP: &str = "${group:sqlstring}";
    pub const ENVIRONMENT: &str = "${environment:sqlstring}";
    pub const APP: &str = "${app:sqlstring}";
    pub const CLUSTER: &str = "${cluster:sqlstring}";
    pub const VERSION: &str = "${version:sqlstring}";
    /// Seconds without a heartbeat after which a cluster is stale (a dashboard constant).
    pub const STALE_AFTER: &str = "${stale_after_seconds}";
    /// Seconds a new desired state may take to arrive (a dashboard constant).
    pub const GRACE: &str = "${grace_seconds}";
    /// The moment current state is classified at: the end of the dashboard's time range.
    pub const NOW: &str = "toUInt32($__toTime)";
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

/// Rows a table panel shows at most.
const TABLE_ROWS: u64 = 500;

// Marker values the store's queries are rendered with. Timestamps stay below 2^32 because the
// store clamps them to ClickHouse's `DateTime` range.
const NOW_MARK: i64 = 4_000_000_001;
const GRACE_MARK: i64 = 4_000_000_002;
const STALE_MARK: i64 = 4_000_000_003;
const LIMIT_MARK: u64 = 4_000_000_004;
const FROM_MARK: i64 = 4_000_000_005;
const TO_MARK: i64 = 4_000_000_006;
const GROUP_MARK: &str = "fleetscope-mark-group";
const APP_MARK: &str = "fleetscope-mark-app";
const CLUSTER_MARK: &str = "fleetscope-mark-cluster";
const RENDER_GROUP_MARK: &str = "fleetscope-mark-render-group";

fn mark_store() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    // Rendering a query needs a handle only; nothing is ever sent to this address.
    STORE.get_or_init(|| {
        Store::connect(&StoreConfig::new("http://127.0.0.1:9", "fleetscope"))
            .expect("a valid placeholder store config")
    })
}

/// The same handle in cluster mode, for the store's queries that differ there: their clustered
/// text (`GLOBAL IN` over a Distributed table) answers the same on one server, and one dashboard
/// then serves both.
fn mark_cluster_store() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    STORE.get_or_init(|| {
        Store::connect(
            &StoreConfig::new("http://127.0.0.1:9", "fleetscope")
                .with_cluster(fleetscope_store::ClusterConfig::new("fleet")),
        )
        .expect("a valid placeholder store config")
    })
}

fn mark_policy() -> DriftPolicy {
    DriftPolicy {
        stale_after_seconds: STALE_MARK,
        progress_grace_seconds: GRACE_MARK,
    }
}

fn quoted(text: &str) -> String {
    format!("'{text}'")
}

/// Replaces `needle` by `with`, requiring exactly `count` occurrences: a different count means
/// the store's query changed shape, and the dashboards must be looked at again.
fn replace_exactly(sql: &str, needle: &str, with: &str, count: usize) -> String {
    let found = sql.matches(needle).count();
    assert_eq!(
        found, count,
        "expected {count} × {needle:?} in the store's query, found {found}: {sql}"
    );
    sql.replace(needle, with)
}

/// Checks that no marker survived.
fn finished(sql: String) -> String {
    for mark in [
        NOW_MARK,
        GRACE_MARK,
        STALE_MARK,
        FROM_MARK,
        TO_MARK,
        LIMIT_MARK as i64,
    ] {
        assert!(
            !sql.contains(&mark.to_string()),
            "marker {mark} left in {sql}"
        );
    }
    assert!(!sql.contains("fleetscope-mark-"), "marker left in {sql}");
    sql
}

fn strip<'a>(sql: &'a str, prefix: &str, suffix: &str) -> &'a str {
    sql.strip_prefix(prefix)
        .and_then(|rest| rest.strip_suffix(suffix))
        .unwrap_or_else(|| panic!("the store's query no longer reads `{prefix}…{suffix}`: {sql}"))
}

/// The drift parameters of a classified query as Grafana expressions.
fn with_policy(sql: &str) -> String {
    let sql = replace_exactly(sql, &NOW_MARK.to_string(), var::NOW, 1);
    let sql = replace_exactly(&sql, &GRACE_MARK.to_string(), var::GRACE, 1);
    replace_exactly(&sql, &STALE_MARK.to_string(), var::STALE_AFTER, 1)
}

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

/// Every (cluster, app) pair of current clusters with its drift state, as the store classifies
/// it, and the inputs of that classification.
pub fn classified_pairs() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        let text =
            queries::all_pair_states_query(mark_store(), Timestamp(NOW_MARK), &mark_policy())
                .sql_display()
                .to_string();
        let inner = strip(
            &text,
            "SELECT cluster_id, app, state FROM (",
            ") ORDER BY cluster_id, app",
        );
        let select = "SELECT cluster_id, app, group_prefixes, ";
        assert!(
            inner.starts_with(select),
            "the store's classified pairs no longer start with {select:?}: {inner}"
        );
        let widened = format!(
            "SELECT {}, {}",
            PAIR_COLUMNS[..PAIR_COLUMNS.len() - 1].join(", "),
            &inner[select.len()..]
        );
        finished(with_policy(&widened))
    })
}

/// The store's drift counts per group (every level, `''` for the fleet) and state:
/// `group_path`, `state`, `pairs`.
pub fn pair_counts() -> String {
    let text = queries::pair_counts_query(mark_store(), Timestamp(NOW_MARK), &mark_policy())
        .sql_display()
        .to_string();
    finished(with_policy(&text))
}

/// The store's cluster counts per group: `group_path`, `clusters`, `stale_clusters`.
pub fn cluster_counts() -> String {
    let text = queries::cluster_counts_query(mark_store(), Timestamp(NOW_MARK), &mark_policy())
        .sql_display()
        .to_string();
    let text = replace_exactly(&text, &NOW_MARK.to_string(), var::NOW, 1);
    finished(replace_exactly(
        &text,
        &STALE_MARK.to_string(),
        var::STALE_AFTER,
        1,
    ))
}

/// The store's current inventory: `cluster_id`, `group_prefixes`, `environment` of every
/// cluster not removed.
pub fn inventory() -> String {
    let text = queries::known_clusters_query(mark_store())
        .sql_display()
        .to_string();
    finished(strip(&text, "SELECT cluster_id FROM (", ") ORDER BY cluster_id").to_owned())
}

/// The store's current membership: `cluster_id`, `current_group`, `current_removed`.
fn current_members() -> String {
    let text = queries::current_members_query(mark_store())
        .sql_display()
        .to_string();
    finished(strip(&text, "", " ORDER BY cluster_id").to_owned())
}

/// The store's stale clusters (never seen first, then oldest), without its row limit:
/// `cluster_id`, `last_seen_seconds`.
pub fn stale_clusters() -> String {
    let text = queries::stale_clusters_query(
        mark_store(),
        Timestamp(NOW_MARK),
        &mark_policy(),
        LIMIT_MARK,
    )
    .sql_display()
    .to_string();
    let text = replace_exactly(&text, &format!(" LIMIT {LIMIT_MARK}"), "", 1);
    let text = replace_exactly(&text, &NOW_MARK.to_string(), var::NOW, 1);
    finished(replace_exactly(
        &text,
        &STALE_MARK.to_string(),
        var::STALE_AFTER,
        1,
    ))
}

/// Replaces the store's `?fields` and its time range markers.
fn with_fields_and_range(text: &str, fields: &str) -> String {
    let text = replace_exactly(text, "?fields", fields, 1);
    let text = replace_exactly(&text, &format!("toDateTime({FROM_MARK})"), "$__fromTime", 1);
    replace_exactly(&text, &format!("toDateTime({TO_MARK})"), "$__toTime", 1)
}

fn range() -> (Timestamp, Timestamp) {
    (Timestamp(FROM_MARK), Timestamp(TO_MARK))
}

// ---------------------------------------------------------------------------------------------
// Filters

fn in_group(prefixes: &str) -> String {
    format!("({g} = '' OR has({prefixes}, {g}))", g = var::GROUP)
}

fn in_environment(column: &str) -> String {
    format!("({e} = '' OR {column} = {e})", e = var::ENVIRONMENT)
}

fn is_app_or_all(column: &str) -> String {
    format!("({a} = '' OR {column} = {a})", a = var::APP)
}

/// Groups one level below the selected group (regions when the fleet is selected).
fn child_of_group(path: &str) -> String {
    format!(
        "({path} != '' AND arrayStringConcat(arrayPopBack(splitByChar('/', {path})), '/') = {})",
        var::GROUP
    )
}

/// A cluster's own group: the last of its prefixes.
fn group_path_of(prefixes: &str) -> String {
    format!("arrayElement({prefixes}, -1)")
}

fn state_literal(state: DriftState) -> String {
    quoted(state.as_str())
}

fn app_object_kinds() -> String {
    ObjectKind::ALL
        .iter()
        .filter(|kind| kind.is_app_object())
        .map(|kind| quoted(kind.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A time bucket of the panel's interval (the plugin's `$__timeInterval`, written so that
/// ClickHouse 18.16 runs it too).
fn bucket(column: &str) -> String {
    format!("toDateTime(intDiv(toUInt32({column}), $__interval_s) * $__interval_s)")
}

/// `count() AS instances`, the in-sync share and one count per drift state over classified
/// pairs.
fn state_count_columns() -> String {
    let mut columns = vec![
        "count() AS instances".to_owned(),
        format!(
            "if(instances = 0, 0, round(countIf(state = {}) / instances, 4)) AS in_sync_share",
            state_literal(DriftState::InSync)
        ),
    ];
    for state in STATE_ORDER {
        columns.push(format!(
            "countIf(state = {}) AS {}",
            state_literal(state),
            state.as_str()
        ));
    }
    columns.join(", ")
}

/// Names of the columns [`state_count_columns`] makes.
pub fn state_count_names() -> Vec<&'static str> {
    let mut names = vec!["instances", "in_sync_share"];
    names.extend(STATE_ORDER.iter().map(|state| state.as_str()));
    names
}

// ---------------------------------------------------------------------------------------------
// Variables

/// Every group path of the current inventory, at every level.
pub fn group_values() -> String {
    format!(
        "SELECT DISTINCT arrayJoin(group_prefixes) AS group_path FROM ({}) ORDER BY group_path",
        inventory()
    )
}

pub fn environment_values() -> String {
    format!(
        "SELECT DISTINCT environment FROM ({}) ORDER BY environment",
        inventory()
    )
}

/// Apps desired anywhere or reported by any cluster.
pub fn app_values() -> String {
    "SELECT DISTINCT app FROM (SELECT app FROM desired_latest UNION ALL \
SELECT app FROM observed_latest WHERE app != '') ORDER BY app"
        .to_owned()
}

/// Versions of the selected app, desired or reported.
pub fn version_values() -> String {
    format!(
        "SELECT DISTINCT version FROM (SELECT version FROM desired_latest WHERE app = {a} UNION ALL \
SELECT version FROM observed_latest WHERE app = {a}) WHERE version != '' ORDER BY version DESC",
        a = var::APP
    )
}

/// Current clusters within the selected group and environment.
pub fn cluster_values() -> String {
    format!(
        "SELECT cluster_id FROM ({}) WHERE {} AND {} ORDER BY cluster_id",
        inventory(),
        in_group("group_prefixes"),
        in_environment("environment")
    )
}

// ---------------------------------------------------------------------------------------------
// Fleet overview

/// Columns of [`group_rollup`].
pub fn group_rollup_names() -> Vec<&'static str> {
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
fn group_rollup(filter: &str) -> String {
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
    format!(
        "SELECT group_path, clusters, clusters - stale_clusters AS reporting, stale_clusters, instances, \
if(instances = 0, 0, round(in_sync / instances, 4)) AS in_sync_share, {states} FROM (\
SELECT group_path, clusters, stale_clusters FROM ({counts}) WHERE {filter}\
) AS counts ALL LEFT JOIN (\
SELECT group_path, {sums} FROM ({pairs}) WHERE {filter} GROUP BY group_path\
) AS states USING group_path ORDER BY group_path",
        counts = cluster_counts(),
        pairs = pair_counts(),
        sums = sums.join(", "),
    )
}

/// The selected group (the fleet when "All") as one row.
pub fn selected_group_rollup() -> String {
    group_rollup(&format!("group_path = {}", var::GROUP))
}

/// The groups one level below the selected one, one row each.
pub fn child_group_rollups() -> String {
    group_rollup(&child_of_group("group_path"))
}

/// The store's rollup trend of the selected group: app instances per state over time.
pub fn drift_trend() -> String {
    let (from, to) = range();
    let text = queries::rollup_trend_query(mark_store(), GROUP_MARK, from, to)
        .sql_display()
        .to_string();
    // Snapshot rows have one column per drift state, named after it.
    let fields = format!("taken_at AS time, {}", drift_trend_names()[1..].join(", "));
    let text = with_fields_and_range(&text, &fields);
    finished(replace_exactly(&text, &quoted(GROUP_MARK), var::GROUP, 1))
}

/// Columns of [`drift_trend`].
pub fn drift_trend_names() -> Vec<&'static str> {
    let mut names = vec!["time"];
    names.extend(STATE_ORDER.iter().map(|state| state.as_str()));
    names
}

/// The store's rollup trend of the selected group: clusters and stale clusters over time.
pub fn cluster_trend() -> String {
    let (from, to) = range();
    let text = queries::rollup_trend_query(mark_store(), GROUP_MARK, from, to)
        .sql_display()
        .to_string();
    let text = with_fields_and_range(&text, "taken_at AS time, clusters, stale_clusters");
    finished(replace_exactly(&text, &quoted(GROUP_MARK), var::GROUP, 1))
}

/// Stale clusters of the selected group and environment, never seen first, then oldest.
pub fn stale_cluster_list() -> String {
    format!(
        "SELECT cluster_id, {group} AS group_path, environment, \
if(last_seen_seconds = 0, 'never seen', 'silent') AS status, \
if(last_seen_seconds = 0, NULL, toDateTime(last_seen_seconds)) AS last_seen, \
if(last_seen_seconds = 0, NULL, toInt64({now}) - toInt64(last_seen_seconds)) AS silent_seconds \
FROM ({stale}) AS stale ALL INNER JOIN ({inventory}) AS inventory USING cluster_id \
WHERE {in_group} AND {in_env} ORDER BY last_seen_seconds, cluster_id LIMIT {TABLE_ROWS}",
        group = group_path_of("group_prefixes"),
        now = var::NOW,
        stale = stale_clusters(),
        inventory = inventory(),
        in_group = in_group("group_prefixes"),
        in_env = in_environment("environment"),
    )
}

pub const STALE_LIST_COLUMNS: [&str; 6] = [
    "cluster_id",
    "group_path",
    "environment",
    "status",
    "last_seen",
    "silent_seconds",
];

/// Apps with instances that need someone to act, in the selected group and environment.
pub fn problem_apps() -> String {
    let counts = PROBLEM_STATES
        .iter()
        .chain([DriftState::Progressing].iter())
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
    format!(
        "SELECT app, count() AS instances, {counts} FROM ({pairs}) WHERE {in_group} AND {in_env} \
GROUP BY app HAVING {any} > 0 ORDER BY {order}, app LIMIT {TABLE_ROWS}",
        pairs = classified_pairs(),
        in_group = in_group("group_prefixes"),
        in_env = in_environment("environment"),
        any = problems.join(" + "),
        order = problems
            .iter()
            .map(|name| format!("{name} DESC"))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

pub fn problem_app_names() -> Vec<&'static str> {
    let mut names = vec!["app", "instances"];
    names.extend(PROBLEM_STATES.iter().map(|state| state.as_str()));
    names.push(DriftState::Progressing.as_str());
    names
}

/// (cluster, app) pairs that failed, drifted or never arrived, in the selected group and
/// environment (and app, when one is selected).
pub fn problem_pairs(app_filter: bool) -> String {
    let states = [
        DriftState::Failed,
        DriftState::OutOfSync,
        DriftState::Missing,
    ]
    .iter()
    .map(|state| state_literal(*state))
    .collect::<Vec<_>>()
    .join(", ");
    let app = if app_filter {
        format!(" AND app = {}", var::APP)
    } else {
        String::new()
    };
    format!(
        "SELECT cluster_id, {group} AS group_path, environment, app, state, d_version AS desired_version, \
o_version AS running_version, o_health AS health, o_sync AS sync FROM ({pairs}) \
WHERE {in_group} AND {in_env}{app} AND state IN ({states}) ORDER BY state, app, cluster_id LIMIT {TABLE_ROWS}",
        group = group_path_of("group_prefixes"),
        pairs = classified_pairs(),
        in_group = in_group("group_prefixes"),
        in_env = in_environment("environment"),
    )
}

pub const PROBLEM_PAIR_COLUMNS: [&str; 9] = [
    "cluster_id",
    "group_path",
    "environment",
    "app",
    "state",
    "desired_version",
    "running_version",
    "health",
    "sync",
];

// ---------------------------------------------------------------------------------------------
// App versions

/// Drift states of the selected app in the selected group and environment.
pub fn app_states() -> String {
    format!(
        "SELECT {} FROM ({}) WHERE app = {} AND {} AND {}",
        state_count_columns(),
        classified_pairs(),
        var::APP,
        in_group("group_prefixes"),
        in_environment("environment")
    )
}

/// Per version of the selected app: clusters that should run it and clusters that run it.
pub fn version_distribution() -> String {
    format!(
        "SELECT version, countIf(side = 'desired') AS desired_clusters, countIf(side = 'running') AS running_clusters FROM (\
SELECT tupleElement(entry, 1) AS side, tupleElement(entry, 2) AS version FROM (\
SELECT arrayJoin([('desired', d_version, has_desired), ('running', o_version, has_observed)]) AS entry \
FROM ({pairs}) WHERE app = {app} AND {in_group} AND {in_env}\
) WHERE tupleElement(entry, 3) = 1\
) GROUP BY version ORDER BY version",
        pairs = classified_pairs(),
        app = var::APP,
        in_group = in_group("group_prefixes"),
        in_env = in_environment("environment"),
    )
}

/// Running versions of the selected app per group one level below the selected one.
pub fn versions_by_group() -> String {
    format!(
        "SELECT group_path, o_version AS version, count() AS clusters FROM ({pairs}) \
ARRAY JOIN group_prefixes AS group_path \
WHERE app = {app} AND has_observed = 1 AND {in_env} AND {child} \
GROUP BY group_path, version ORDER BY group_path, version",
        pairs = classified_pairs(),
        app = var::APP,
        in_env = in_environment("environment"),
        child = child_of_group("group_path"),
    )
}

/// The selected version of the selected app: clusters targeted, running it, and in sync at it.
pub fn rollout_status() -> String {
    format!(
        "SELECT targeted, running, in_sync, if(targeted = 0, 0, round(in_sync / targeted, 4)) AS in_sync_share FROM (\
SELECT countIf(has_desired = 1 AND d_version = {v}) AS targeted, countIf(has_observed = 1 AND o_version = {v}) AS running, \
countIf(has_desired = 1 AND d_version = {v} AND state = {in_sync}) AS in_sync \
FROM ({pairs}) WHERE app = {app} AND {in_group} AND {in_env})",
        v = var::VERSION,
        in_sync = state_literal(DriftState::InSync),
        pairs = classified_pairs(),
        app = var::APP,
        in_group = in_group("group_prefixes"),
        in_env = in_environment("environment"),
    )
}

/// Clusters that have reported the selected version of the selected app, cumulated over the
/// time range (clusters that reached it before the range count from its start).
///
/// `GLOBAL IN`: on a ClickHouse cluster `observed_transitions` is Distributed, and a plain `IN`
/// subquery would be sent to every shard, which resolves `clusters` in its own default
/// database; `GLOBAL` computes the set once on the asking node. On one server it is a plain `IN`.
pub fn rollout_progress() -> String {
    format!(
        "SELECT time, clusters FROM (\
SELECT arraySort(groupArray((bucket, reached))) AS points, arrayMap(p -> tupleElement(p, 1), points) AS buckets, \
arrayCumSum(arrayMap(p -> tupleElement(p, 2), points)) AS totals FROM (\
SELECT {bucket} AS bucket, count() AS reached FROM (\
SELECT cluster_id, greatest(min(observed_at), $__fromTime) AS first_seen FROM observed_transitions \
WHERE app = {app} AND version = {v} AND deleted = 0 AND object_kind IN ({kinds}) AND observed_at <= $__toTime \
AND cluster_id GLOBAL IN (SELECT cluster_id FROM ({inventory}) WHERE {in_group} AND {in_env}) \
GROUP BY cluster_id\
) GROUP BY bucket)\
) ARRAY JOIN buckets AS time, totals AS clusters ORDER BY time",
        bucket = bucket("first_seen"),
        app = var::APP,
        v = var::VERSION,
        kinds = app_object_kinds(),
        inventory = inventory(),
        in_group = in_group("group_prefixes"),
        in_env = in_environment("environment"),
    )
}

// ---------------------------------------------------------------------------------------------
// Cluster detail

/// The selected cluster: place, labels, render group, last heartbeat and whether it is stale
/// by the store's stale query.
pub fn cluster_info() -> String {
    let c = var::CLUSTER;
    format!(
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
        stale = stale_clusters(),
    )
}

pub const CLUSTER_INFO_COLUMNS: [&str; 9] = [
    "cluster_id",
    "group_path",
    "environment",
    "reconciler",
    "labels",
    "render_group",
    "status",
    "last_seen",
    "agent_version",
];

/// Drift states of the selected cluster's pairs.
pub fn cluster_states() -> String {
    format!(
        "SELECT {} FROM ({}) WHERE cluster_id = {}",
        state_count_columns(),
        classified_pairs(),
        var::CLUSTER
    )
}

/// Every app of the selected cluster: desired against running, and its drift state.
pub fn cluster_apps() -> String {
    format!(
        "SELECT app, state, d_version AS desired_version, o_version AS running_version, o_health AS health, \
o_sync AS sync, if(d_since_s = 0, NULL, toDateTime(d_since_s)) AS desired_since, \
if(o_transitioned_s = 0, NULL, toDateTime(o_transitioned_s)) AS last_transition \
FROM ({}) WHERE cluster_id = {} ORDER BY app",
        classified_pairs(),
        var::CLUSTER
    )
}

pub const CLUSTER_APP_COLUMNS: [&str; 8] = [
    "app",
    "state",
    "desired_version",
    "running_version",
    "health",
    "sync",
    "desired_since",
    "last_transition",
];

const OBJECT_FIELDS: &str =
    "object_kind, object_namespace, object_name, app, version, applied_revision, \
health, sync, reason, message, transitioned_at, observed_at, deleted";

pub const OBJECT_COLUMNS: [&str; 13] = [
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

/// The store's latest state of every object the selected cluster reported.
pub fn cluster_objects() -> String {
    let text = queries::observed_for_cluster_query(mark_store(), CLUSTER_MARK)
        .sql_display()
        .to_string();
    let text = replace_exactly(&text, "?fields", OBJECT_FIELDS, 1);
    finished(replace_exactly(
        &text,
        &quoted(CLUSTER_MARK),
        var::CLUSTER,
        1,
    ))
}

const TRANSITION_FIELDS: &str =
    "observed_at AS time, object_kind, object_name, app, version, health, \
sync, reason, message";

pub const TRANSITION_COLUMNS: [&str; 9] = [
    "time",
    "object_kind",
    "object_name",
    "app",
    "version",
    "health",
    "sync",
    "reason",
    "message",
];

/// The store's observed history of the selected cluster in the time range.
pub fn cluster_history() -> String {
    let (from, to) = range();
    let text = queries::observed_history_query(mark_store(), CLUSTER_MARK, from, to)
        .sql_display()
        .to_string();
    let text = with_fields_and_range(&text, TRANSITION_FIELDS);
    finished(replace_exactly(
        &text,
        &quoted(CLUSTER_MARK),
        var::CLUSTER,
        1,
    ))
}

const DESIRED_FIELDS: &str = "desired_since AS time, app, version, render_id, commit, removed, \
arrayStringConcat(reasons, ', ') AS policies";

pub const DESIRED_CHANGE_COLUMNS: [&str; 7] = [
    "time",
    "app",
    "version",
    "render_id",
    "commit",
    "removed",
    "policies",
];

/// The store's desired history of the selected cluster's current render group in the time range.
pub fn cluster_desired_history() -> String {
    let (from, to) = range();
    let text =
        queries::desired_history_query(mark_store(), RENDER_GROUP_MARK, Some(APP_MARK), from, to)
            .sql_display()
            .to_string();
    let text = with_fields_and_range(&text, DESIRED_FIELDS);
    let text = replace_exactly(&text, &quoted(APP_MARK), "''", 2);
    let render_group = format!(
        "(SELECT argMax(render_group, render_id) FROM render_group_members WHERE cluster_id = {})",
        var::CLUSTER
    );
    finished(replace_exactly(
        &text,
        &quoted(RENDER_GROUP_MARK),
        &render_group,
        1,
    ))
}

// ---------------------------------------------------------------------------------------------
// Deployment history

/// Render groups with current members in the selected group.
fn render_groups_in_group() -> String {
    format!(
        "SELECT current_group FROM ({members}) WHERE current_removed = 0 AND cluster_id IN \
(SELECT cluster_id FROM ({inventory}) WHERE {in_group})",
        members = current_members(),
        inventory = inventory(),
        in_group = in_group("group_prefixes"),
    )
}

fn desired_changes_filter() -> String {
    format!(
        "$__timeFilter(desired_since) AND {app} AND ({g} = '' OR render_group IN ({groups}))",
        app = is_app_or_all("app"),
        g = var::GROUP,
        groups = render_groups_in_group(),
    )
}

/// Renders per interval.
pub fn renders_over_time() -> String {
    format!(
        "SELECT {bucket} AS time, count() AS renders FROM (\
SELECT render_id, any(rendered_at) AS render_time FROM renders WHERE $__timeFilter(rendered_at) GROUP BY render_id\
) GROUP BY time ORDER BY time",
        bucket = bucket("render_time")
    )
}

/// Desired-state changes per interval, of the selected app and group.
pub fn desired_changes_over_time() -> String {
    format!(
        "SELECT {bucket} AS time, count() AS desired_changes FROM (\
SELECT render_group, app, render_id, any(desired_since) AS change_time FROM desired_history \
WHERE {filter} GROUP BY render_group, app, render_id\
) GROUP BY time ORDER BY time",
        bucket = bucket("change_time"),
        filter = desired_changes_filter(),
    )
}

/// Observed transitions per interval by reported health, of the selected app and group
/// (`GLOBAL IN` for a Distributed `observed_transitions`, as in [`rollout_progress`]).
pub fn transitions_over_time() -> String {
    let mut columns = Vec::new();
    for health in [Health::Healthy, Health::Progressing, Health::Degraded] {
        columns.push(format!(
            "countIf(reported_health = {}) AS {}",
            quoted(health.as_str()),
            health.as_str()
        ));
    }
    columns.push(format!(
        "countIf(reported_health NOT IN ({}, {}, {})) AS other",
        quoted(Health::Healthy.as_str()),
        quoted(Health::Progressing.as_str()),
        quoted(Health::Degraded.as_str())
    ));
    format!(
        "SELECT {bucket} AS time, {columns} FROM (\
SELECT cluster_id, object_kind, object_namespace, object_name, seq, any(observed_at) AS change_time, any(health) AS reported_health \
FROM observed_transitions WHERE $__timeFilter(observed_at) AND {app} AND \
({g} = '' OR cluster_id GLOBAL IN (SELECT cluster_id FROM ({inventory}) WHERE {in_group})) \
GROUP BY cluster_id, object_kind, object_namespace, object_name, seq\
) GROUP BY time ORDER BY time",
        bucket = bucket("change_time"),
        columns = columns.join(", "),
        app = is_app_or_all("app"),
        g = var::GROUP,
        inventory = inventory(),
        in_group = in_group("group_prefixes"),
    )
}

const RENDER_FIELDS: &str = "rendered_at AS time, render_id, commit, platform_commit, summary, \
render_groups, clusters, changed_items";

pub const RENDER_COLUMNS: [&str; 8] = [
    "time",
    "render_id",
    "commit",
    "platform_commit",
    "summary",
    "render_groups",
    "clusters",
    "changed_items",
];

/// The store's renders in the time range, newest first.
pub fn renders_in_range() -> String {
    let (from, to) = range();
    let text = queries::renders_between_query(mark_store(), from, to, LIMIT_MARK)
        .sql_display()
        .to_string();
    let text = with_fields_and_range(&text, RENDER_FIELDS);
    finished(replace_exactly(
        &text,
        &format!("LIMIT {LIMIT_MARK}"),
        &format!("LIMIT {TABLE_ROWS}"),
        1,
    ))
}

/// Desired-state changes of the selected app and group in the time range, newest first.
pub fn desired_changes() -> String {
    format!(
        "SELECT desired_since AS time, app, version, render_group, render_id, commit, removed FROM desired_history \
WHERE {filter} ORDER BY render_id DESC, render_group, app LIMIT 1 BY render_group, app, render_id LIMIT {TABLE_ROWS}",
        filter = desired_changes_filter(),
    )
}

pub const DESIRED_CHANGE_LIST_COLUMNS: [&str; 7] = [
    "time",
    "app",
    "version",
    "render_group",
    "render_id",
    "commit",
    "removed",
];

const GROUP_TRANSITION_FIELDS: &str =
    "observed_at AS time, cluster_id, app, version, health, sync, \
reason, message, object_kind, object_name";

pub const GROUP_TRANSITION_COLUMNS: [&str; 10] = [
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
];

/// The store's observed transitions of the selected group and app in the time range, newest
/// first; its cluster-mode text, which filters the Distributed table with `GLOBAL IN`.
pub fn group_transitions() -> String {
    let (from, to) = range();
    let text = queries::observed_transitions_query(
        mark_cluster_store(),
        Some(GROUP_MARK),
        Some(APP_MARK),
        from,
        to,
        LIMIT_MARK,
    )
    .sql_display()
    .to_string();
    let text = with_fields_and_range(&text, GROUP_TRANSITION_FIELDS);
    let text = replace_exactly(&text, &quoted(GROUP_MARK), var::GROUP, 2);
    let text = replace_exactly(&text, &quoted(APP_MARK), var::APP, 2);
    finished(replace_exactly(
        &text,
        &format!("LIMIT {LIMIT_MARK}"),
        &format!("LIMIT {TABLE_ROWS}"),
        1,
    ))
}

// ---------------------------------------------------------------------------------------------
// Environment comparison

fn environment_filter() -> String {
    format!(
        "{} AND {}",
        in_group("group_prefixes"),
        is_app_or_all("app")
    )
}

/// Desired versions per app and environment.
pub fn desired_by_environment() -> String {
    format!(
        "SELECT app, environment, arrayStringConcat(arraySort(groupUniqArray(d_version)), ', ') AS desired \
FROM ({pairs}) WHERE has_desired = 1 AND {filter} GROUP BY app, environment ORDER BY app, environment",
        pairs = classified_pairs(),
        filter = environment_filter(),
    )
}

/// Running versions per app and environment, each with its cluster count, most common first.
pub fn running_by_environment() -> String {
    format!(
        "SELECT app, environment, arrayStringConcat(arrayMap(x -> concat(tupleElement(x, 2), ' (', toString(tupleElement(x, 1)), ')'), \
arrayReverseSort(groupArray((clusters, version)))), ', ') AS running FROM (\
SELECT app, environment, o_version AS version, count() AS clusters FROM ({pairs}) \
WHERE has_observed = 1 AND {filter} GROUP BY app, environment, version\
) GROUP BY app, environment ORDER BY app, environment",
        pairs = classified_pairs(),
        filter = environment_filter(),
    )
}

/// Drift per app and environment.
pub fn states_by_environment() -> String {
    format!(
        "SELECT app, environment, {counts} FROM ({pairs}) WHERE {filter} \
GROUP BY app, environment ORDER BY app, environment",
        counts = state_count_columns(),
        pairs = classified_pairs(),
        filter = environment_filter(),
    )
}

pub fn states_by_environment_names() -> Vec<&'static str> {
    let mut names = vec!["app", "environment"];
    names.extend(state_count_names());
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_order_covers_every_state_once() {
        let mut ordered: Vec<_> = STATE_ORDER.to_vec();
        ordered.sort();
        let mut all = DriftState::ALL.to_vec();
        all.sort();
        assert_eq!(ordered, all);
    }

    #[test]
    fn classified_pairs_carry_the_store_expression_and_no_markers() {
        let sql = classified_pairs();
        assert!(sql.contains(fleetscope_store::drift_sql::drift_state_expression()));
        assert!(sql.starts_with("SELECT cluster_id, app, group_prefixes, environment, "));
        assert!(sql.contains("toInt64(toUInt32($__toTime)) AS now_s"));
        assert!(sql.contains("toInt64(${grace_seconds}) AS grace_s"));
        assert!(sql.contains("toInt64(${stale_after_seconds}) AS stale_s"));
    }

    #[test]
    fn rollups_are_the_store_rollup_queries() {
        let sql = selected_group_rollup();
        assert!(sql.contains(&pair_counts()));
        assert!(sql.contains(&cluster_counts()));
    }
}
