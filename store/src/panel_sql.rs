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

use fleetscope_model::state::ObjectKind;
use fleetscope_model::{DriftState, Health};

use crate::queries::{
    classified_pairs_sql, cluster_counts_sql, desired_history_sql, observed_for_cluster_sql,
    observed_history_sql, observed_transitions_sql, pair_counts_sql, renders_between_sql,
    rollup_trend_sql, stale_clusters_sql, CURRENT_MEMBERS, INVENTORY_CURRENT, OBSERVED_ORDER,
};

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

fn quoted(text: &str) -> String {
    format!("'{text}'")
}

// ---------------------------------------------------------------------------------------------
// Filters

fn in_group(slots: &Slots, prefixes: &str) -> String {
    format!("({g} = '' OR has({prefixes}, {g}))", g = slots.group)
}

fn in_environment(slots: &Slots, column: &str) -> String {
    format!("({e} = '' OR {column} = {e})", e = slots.environment)
}

fn is_app_or_all(slots: &Slots, column: &str) -> String {
    format!("({a} = '' OR {column} = {a})", a = slots.app)
}

/// Groups one level below the selected group (regions when the fleet is selected).
fn child_of_group(slots: &Slots, path: &str) -> String {
    format!(
        "({path} != '' AND arrayStringConcat(arrayPopBack(splitByChar('/', {path})), '/') = {})",
        slots.group
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

/// A time bucket of the panel's interval (what the plugin's `$__timeInterval` does, written so
/// that ClickHouse 18.16 runs it too).
fn bucket(slots: &Slots, column: &str) -> String {
    format!(
        "toDateTime(intDiv(toUInt32({column}), {i}) * {i})",
        i = slots.interval_seconds
    )
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
fn state_count_names() -> Vec<&'static str> {
    let mut names = vec!["instances", "in_sync_share"];
    names.extend(STATE_ORDER.iter().map(|state| state.as_str()));
    names
}

// ---------------------------------------------------------------------------------------------
// Variables: one column each, the values offered.

/// Every group path of the current inventory, at every level.
pub fn group_values() -> String {
    format!(
        "SELECT DISTINCT arrayJoin(group_prefixes) AS group_path FROM ({}) ORDER BY group_path",
        inventory()
    )
}

/// Every environment of the current inventory.
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

/// Versions of the selected app, desired or reported, newest first.
pub fn version_values(slots: &Slots) -> String {
    format!(
        "SELECT DISTINCT version FROM (SELECT version FROM desired_latest WHERE app = {a} UNION ALL \
SELECT version FROM observed_latest WHERE app = {a}) WHERE version != '' ORDER BY version DESC",
        a = slots.app
    )
}

/// Current clusters within the selected group and environment.
pub fn cluster_values(slots: &Slots) -> String {
    format!(
        "SELECT cluster_id FROM ({}) WHERE {} AND {} ORDER BY cluster_id",
        inventory(),
        in_group(slots, "group_prefixes"),
        in_environment(slots, "environment")
    )
}

// ---------------------------------------------------------------------------------------------
// Fleet overview

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

// ---------------------------------------------------------------------------------------------
// App versions

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

/// Columns of [`failure_insights`], in order.
pub const INSIGHT_COLUMNS: [&str; 7] = [
    "attribute",
    "value",
    "failing_with",
    "in_sync_with",
    "failure_rate_with",
    "failure_rate_without",
    "z_score",
];

/// The fewest failing clusters an attribute value must be on to be listed by
/// [`failure_insights`].
pub const INSIGHT_MIN_FAILING_WITH: u64 = 2;

/// What the clusters where the selected app fails share: the attribute values (each label
/// `key=value`, the group at every level, the environment, the reconciler, the agent version of
/// the last heartbeat) over-represented among the clusters of the selected group and
/// environment where the app is failed or out of sync ("failing"), against those where it is in
/// sync; clusters in any other state are on neither side. The comparison of the hub's
/// `/api/v1/insights/failures`, from the classified pairs, ranked by the two-proportion
/// z-score instead of Fisher's exact test ([`INSIGHT_COLUMNS`], strongest first).
///
/// The z-score compares the failure rate with the value, `a / (a + b)`, with the rate without
/// it, `c / (c + d)`, over the pooled rate: with `n` clusters with the value, `m` without,
/// `F = a + c` failing and `N = n + m` considered, `z = (a·N − F·n) · √(N / (n·m·F·(N − F)))`,
/// the signed square root of Pearson's χ² of the 2×2 table. Listed are the values on at least
/// [`INSIGHT_MIN_FAILING_WITH`] failing clusters, not on every considered cluster, with a
/// higher failure rate with them than without.
///
/// Every considered cluster also carries an entry with an empty attribute, so that one pass
/// over the exploded values counts the totals (`F` and `N − F`) too.
pub fn failure_insights(slots: &Slots) -> PanelQuery {
    let failing_states = [DriftState::Failed, DriftState::OutOfSync]
        .iter()
        .map(|state| state_literal(*state))
        .collect::<Vec<_>>()
        .join(", ");
    let considered = format!(
        "SELECT cluster_id, group_prefixes, environment, toUInt8(state IN ({failing_states})) AS failing \
FROM ({pairs}) WHERE app = {app} AND {in_group} AND {in_env} AND state IN ({failing_states}, {in_sync})",
        pairs = classified_pairs(slots),
        app = slots.app,
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
        in_sync = state_literal(DriftState::InSync),
    );
    let placed = format!(
        "SELECT cluster_id, failing, group_prefixes, environment, reconciler, label_keys, label_values FROM (\
{considered}) AS considered ALL INNER JOIN (\
SELECT cluster_id, argMax(reconciler, version) AS reconciler, argMax(label_keys, version) AS label_keys, \
argMax(label_values, version) AS label_values FROM clusters GROUP BY cluster_id\
) AS inventory USING cluster_id"
    );
    let attributes =
        "arrayConcat([('', ''), ('environment', environment), ('reconciler', reconciler), \
('agent_version', agent_version)], arrayMap(p -> ('group', p), group_prefixes), \
arrayMap((k, v) -> ('label', concat(k, '=', v)), label_keys, label_values))";
    let sql = format!(
        "SELECT attribute, value, failing_with, in_sync_with, \
round(failing_with / (failing_with + in_sync_with), 4) AS failure_rate_with, \
round(failing_without / (failing_without + in_sync_without), 4) AS failure_rate_without, \
round((toFloat64(failing_with) * (failing_total + in_sync_total) - toFloat64(failing_total) * (failing_with + in_sync_with)) \
* sqrt((failing_total + in_sync_total) / (toFloat64(failing_with + in_sync_with) * (failing_without + in_sync_without) \
* failing_total * in_sync_total)), 3) AS z_score \
FROM (\
SELECT tupleElement(entry, 1) AS attribute, tupleElement(entry, 2) AS value, tupleElement(entry, 3) AS failing_with, \
tupleElement(entry, 4) AS in_sync_with, failing_total, in_sync_total, \
toUInt64(failing_total - failing_with) AS failing_without, toUInt64(in_sync_total - in_sync_with) AS in_sync_without FROM (\
SELECT groupArray((attribute, value, failing_with, in_sync_with)) AS counted, sumIf(failing_with, attribute = '') AS failing_total, \
sumIf(in_sync_with, attribute = '') AS in_sync_total FROM (\
SELECT attribute, value, countIf(failing = 1) AS failing_with, countIf(failing = 0) AS in_sync_with FROM (\
SELECT failing, tupleElement(entry, 1) AS attribute, tupleElement(entry, 2) AS value FROM (\
SELECT failing, has_heartbeat, arrayJoin({attributes}) AS entry FROM (\
SELECT * FROM ({placed}) AS placed ALL LEFT JOIN (\
SELECT cluster_id, argMax(agent_version, seen_at) AS agent_version, toUInt8(1) AS has_heartbeat FROM heartbeats GROUP BY cluster_id\
) AS heartbeat USING cluster_id)\
) WHERE has_heartbeat = 1 OR tupleElement(entry, 1) != 'agent_version'\
) GROUP BY attribute, value)\
) ARRAY JOIN counted AS entry\
) WHERE attribute != '' AND failing_with >= {min_failing} AND failing_without + in_sync_without > 0 \
AND failing_with * (failing_without + in_sync_without) > failing_without * (failing_with + in_sync_with) \
ORDER BY z_score DESC, failing_with DESC, attribute, value LIMIT {rows}",
        min_failing = INSIGHT_MIN_FAILING_WITH,
        rows = slots.table_rows,
    );
    PanelQuery::new(sql, &INSIGHT_COLUMNS)
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
        complete = crate::history::COMPLETE_CHECKPOINTS
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

// ---------------------------------------------------------------------------------------------
// Cluster detail

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

// ---------------------------------------------------------------------------------------------
// Deployment history

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
/// `observed_transitions`, as in [`rollout_progress`]).
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

// ---------------------------------------------------------------------------------------------
// Environment comparison

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

#[cfg(test)]
mod tests {
    use super::*;

    fn range(column: &str) -> String {
        format!("{column} BETWEEN 1 AND 2")
    }

    const SAMPLE: Slots<'static> = Slots {
        group: "'emea'",
        environment: "'prod'",
        app: "'checkout'",
        version: "'1.2.0'",
        cluster: "'emea-1'",
        stale_after_seconds: "600",
        grace_seconds: "900",
        from: "toDateTime(1)",
        to: "toDateTime(2)",
        interval_seconds: "60",
        time_filter: range,
        table_rows: 500,
    };

    #[test]
    fn state_order_covers_every_state_once() {
        let mut ordered: Vec<_> = STATE_ORDER.to_vec();
        ordered.sort();
        let mut all = DriftState::ALL.to_vec();
        all.sort();
        assert_eq!(ordered, all);
    }

    /// A store handle for rendering the store's own queries; nothing is sent.
    fn store() -> crate::Store {
        crate::Store::connect(&crate::StoreConfig::new("http://127.0.0.1:9", "fleetscope"))
            .expect("a valid config")
    }

    const NOW: fleetscope_model::Timestamp = fleetscope_model::Timestamp(1_800_000_000);
    const POLICY: fleetscope_model::DriftPolicy = fleetscope_model::DriftPolicy {
        stale_after_seconds: 600,
        progress_grace_seconds: 900,
    };

    #[test]
    fn classified_pairs_carry_the_store_expression_and_the_slots() {
        let sql = classified_pairs(&SAMPLE);
        assert!(sql.contains(crate::drift_sql::drift_state_expression()));
        let columns = PAIR_COLUMNS[..PAIR_COLUMNS.len() - 1].join(", ");
        assert!(sql.starts_with(&format!("SELECT {columns}, multiIf(")));
        assert!(sql.contains("toInt64(toUInt32(toDateTime(2))) AS now_s"));
        assert!(sql.contains("toInt64(900) AS grace_s"));
        assert!(sql.contains("toInt64(600) AS stale_s"));
        assert!(!sql.contains('?'), "a parameter left in {sql}");
    }

    /// The store's own queries are the same texts with their values bound where the panels
    /// have their slots.
    #[test]
    fn the_store_binds_values_where_the_panels_put_expressions() {
        let store = store();
        let shown = |query: clickhouse::query::Query| query.sql_display().to_string();
        assert_eq!(
            shown(crate::queries::pair_counts_query(&store, NOW, &POLICY)),
            pair_counts_sql("1800000000", "900", "600")
        );
        assert_eq!(
            shown(crate::queries::cluster_counts_query(&store, NOW, &POLICY)),
            cluster_counts_sql("1800000000", "600")
        );
        assert_eq!(
            shown(crate::queries::stale_clusters_query(
                &store, NOW, &POLICY, 7
            )),
            format!("{} LIMIT 7", stale_clusters_sql("1800000000", "600"))
        );
        assert_eq!(
            shown(crate::queries::rollup_trend_query(
                &store,
                "emea",
                fleetscope_model::Timestamp(1),
                fleetscope_model::Timestamp(2)
            )),
            rollup_trend_sql("?fields", "'emea'", "toDateTime(1)", "toDateTime(2)")
        );
    }

    #[test]
    fn rollups_are_the_store_rollup_queries() {
        let sql = selected_group_rollup(&SAMPLE).sql;
        assert!(sql.contains(&pair_counts(&SAMPLE)));
        assert!(sql.contains(&cluster_counts(&SAMPLE)));
    }

    #[test]
    fn every_slot_reaches_the_text_and_nothing_else_does() {
        let all = [
            selected_group_rollup(&SAMPLE),
            child_group_rollups(&SAMPLE),
            drift_trend(&SAMPLE),
            cluster_trend(&SAMPLE),
            stale_cluster_list(&SAMPLE),
            problem_apps(&SAMPLE),
            problem_pairs(&SAMPLE, true),
            app_states(&SAMPLE),
            version_distribution(&SAMPLE),
            versions_by_group(&SAMPLE),
            rollout_status(&SAMPLE),
            rollout_progress(&SAMPLE),
            failure_insights(&SAMPLE),
            running_versions_over_time(&SAMPLE),
            cluster_info(&SAMPLE),
            cluster_states(&SAMPLE),
            cluster_apps(&SAMPLE),
            cluster_objects(&SAMPLE),
            cluster_history(&SAMPLE),
            cluster_desired_history(&SAMPLE),
            renders_over_time(&SAMPLE),
            desired_changes_over_time(&SAMPLE),
            transitions_over_time(&SAMPLE),
            renders_in_range(&SAMPLE),
            desired_changes(&SAMPLE),
            group_transitions(&SAMPLE),
            desired_by_environment(&SAMPLE),
            running_by_environment(&SAMPLE),
            states_by_environment(&SAMPLE),
        ]
        .map(|query| query.sql)
        .join("\n");
        for slot in [
            SAMPLE.group,
            SAMPLE.environment,
            SAMPLE.app,
            SAMPLE.version,
            SAMPLE.cluster,
            SAMPLE.stale_after_seconds,
            SAMPLE.grace_seconds,
            SAMPLE.from,
            SAMPLE.to,
            SAMPLE.interval_seconds,
            "BETWEEN 1 AND 2",
            "LIMIT 500",
        ] {
            assert!(all.contains(slot), "{slot} is in no panel query");
        }
        assert!(!all.contains('?'), "a parameter left in the panel queries");
    }
}
