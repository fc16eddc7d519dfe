//! Rollouts and delivery: the rollouts of an app, the stalled ones, one rollout's curve and
//! groups, and the delivery figures of the selected group and of the groups below it.
//!
//! They read the rollouts as the hub writes them (`rollout_records`, `rollout_clusters`, the
//! newest row of each key), and work the figures out by the hub's rules (docs/hub.md,
//! "Rollouts" and "Delivery figures"): a selection's counts and milestones come from its
//! clusters' moments, the whole fleet's from the records, whose milestones are fixed when a
//! rollout completes. Moments are seconds since the epoch, 0 for none.

use super::filters::{child_of_group, in_environment, in_group, is_app_or_all};
use super::{inventory, PanelQuery, Slots};

/// The milestone shares, in percent, with their column names.
const MILESTONES: [(u32, &str); 4] = [
    (50, "seconds_to_50_percent"),
    (90, "seconds_to_90_percent"),
    (99, "seconds_to_99_percent"),
    (100, "seconds_to_100_percent"),
];

/// The newest record of every rollout whose app `app_condition` selects (on `app`).
fn records(app_condition: &str) -> String {
    format!(
        "SELECT app, render_id, version, concat(app, '@', toString(render_id), '@', version) AS rollout, \
toUInt32(started_at) AS started, platform_commit, committed_at, status, targeted_at_start, joined, \
rolled_back_by, targeted, in_sync, failed, stale, reached, failed_before_reaching, \
reached_50, reached_90, reached_99, reached_100, completed_at, last_reached_at \
FROM rollout_records WHERE {app_condition} ORDER BY written_ms DESC LIMIT 1 BY app, render_id, version"
    )
}

/// The newest row of every (app, cluster) whose app `app_condition` selects that belongs to
/// a rollout: `app`, `cluster_id`, `render_id`, `version`, `reached_at`, `failed_at`.
fn members(app_condition: &str) -> String {
    format!(
        "SELECT app, cluster_id, render_id, version, reached_at, failed_at FROM (\
SELECT app, cluster_id, render_id, version, reached_at, failed_at FROM rollout_clusters \
WHERE {app_condition} ORDER BY written_ms DESC LIMIT 1 BY app, cluster_id) WHERE render_id > 0"
    )
}

/// Whether the selection is the whole fleet (no group, no environment).
fn whole_fleet(slots: &Slots) -> String {
    format!("({} = '' AND {} = '')", slots.group, slots.environment)
}

/// The clusters of the selected group and environment (every cluster a rollout holds when the
/// selection is the whole fleet, inventoried or not).
fn selected(slots: &Slots) -> String {
    format!(
        "({whole} OR cluster_id IN (SELECT cluster_id FROM ({inventory}) WHERE {in_group} AND {in_env}))",
        whole = whole_fleet(slots),
        inventory = inventory(),
        in_group = in_group(slots, "group_prefixes"),
        in_env = in_environment(slots, "environment"),
    )
}

/// [`members`] with the group each belongs to: the selected group (`by_child` false) or each
/// group one level below it that holds the cluster (`by_child` true), as `group_path`.
fn members_by_group(slots: &Slots, app_condition: &str, by_child: bool) -> String {
    if !by_child {
        return format!(
            "SELECT {g} AS group_path, * FROM ({members}) WHERE {selected}",
            g = slots.group,
            members = members(app_condition),
            selected = selected(slots),
        );
    }
    format!(
        "SELECT group_path, app, cluster_id, render_id, version, reached_at, failed_at FROM (\
SELECT * FROM ({members}) AS members ALL INNER JOIN (\
SELECT cluster_id, group_prefixes FROM ({inventory}) WHERE {in_env}) AS inventory USING cluster_id\
) ARRAY JOIN group_prefixes AS group_path WHERE {child}",
        members = members(app_condition),
        inventory = inventory(),
        in_env = in_environment(slots, "environment"),
        child = child_of_group(slots, "group_path"),
    )
}

/// The moment the ⌈share × targeted⌉-th of the sorted moments `reached` (of `targeted`
/// clusters) reached it, 0 while fewer have.
fn milestone(share: u32, reached: &str, targeted: &str) -> String {
    let needed = format!("greatest(1, intDiv({share} * {targeted} + 99, 100))");
    format!(
        "if({targeted} > 0 AND length({reached}) >= {needed}, arrayElement({reached}, toUInt64({needed})), toUInt32(0))"
    )
}

/// Seconds from `start` to moment `at`, null for none.
fn seconds_since(at: &str, start: &str) -> String {
    format!("if({at} = 0, NULL, toUInt32({at} - {start}))")
}

/// Per rollout (and group) of the clusters `members_sql` gives: `targeted`, `reached` (their
/// sorted moments), `failed_first` and `restores` (seconds from failing first to reaching),
/// joined with the rollout's record.
fn tallies(members_sql: &str, app_condition: &str) -> String {
    format!(
        "SELECT * FROM (\
SELECT group_path, app, render_id, version, count() AS targeted_now, \
arraySort(groupArrayIf(reached_at, reached_at > 0)) AS reached_moments, \
countIf(failed_at > 0) AS failed_first, \
groupArrayIf(toUInt32(if(reached_at > failed_at, reached_at - failed_at, 0)), failed_at > 0 AND reached_at > 0) AS restores \
FROM ({members_sql}) GROUP BY group_path, app, render_id, version\
) AS tallies ALL INNER JOIN ({records}) AS records USING (app, render_id, version)",
        records = records(app_condition),
    )
}

/// The selected app's rollouts (every app's when none is selected) that started in the time
/// range, newest first, with the whole fleet's figures as the hub last wrote them.
pub fn rollout_list(slots: &Slots) -> PanelQuery {
    let mut columns = vec![
        "toDateTime(started) AS time".to_owned(),
        "rollout".to_owned(),
        "app".to_owned(),
        "version".to_owned(),
        "status".to_owned(),
        "targeted".to_owned(),
        "reached".to_owned(),
        "in_sync".to_owned(),
        "failed".to_owned(),
        "stale".to_owned(),
        "failed_before_reaching".to_owned(),
    ];
    for (share, name) in MILESTONES {
        columns.push(format!(
            "{} AS {name}",
            seconds_since(&format!("reached_{share}"), "started")
        ));
    }
    columns.push("platform_commit".to_owned());
    let sql = format!(
        "SELECT {names} FROM (SELECT {columns}, started, render_id FROM ({records})) WHERE {time} \
ORDER BY started DESC, render_id DESC, app, version LIMIT {rows}",
        names = columns
            .iter()
            .map(|c| c.rsplit(" AS ").next().unwrap_or(c))
            .collect::<Vec<_>>()
            .join(", "),
        columns = columns.join(", "),
        records = records(&is_app_or_all(slots, "app")),
        time = (slots.time_filter)("time"),
        rows = slots.table_rows,
    );
    let mut names = vec![
        "time",
        "rollout",
        "app",
        "version",
        "status",
        "targeted",
        "reached",
        "in_sync",
        "failed",
        "stale",
        "failed_before_reaching",
    ];
    names.extend(MILESTONES.iter().map(|(_, name)| *name));
    names.push("platform_commit");
    PanelQuery::new(sql, &names)
}

/// The rollouts of the selected app (every app's when none is) stalled when the hub last
/// wrote them, longest stalled first: seconds since a cluster last reached each (or since it
/// started) at the end of the time range.
pub fn stalled_rollouts(slots: &Slots) -> PanelQuery {
    let sql = format!(
        "SELECT rollout, app, version, toDateTime(started) AS started_at, targeted, reached, failed, \
toUInt32(greatest(toInt64(toUInt32({to})) - if(last_reached_at = 0, started, last_reached_at), 0)) AS stalled_seconds \
FROM ({records}) WHERE status = 'stalled' ORDER BY stalled_seconds DESC, rollout LIMIT {rows}",
        to = slots.to,
        records = records(&is_app_or_all(slots, "app")),
        rows = slots.table_rows,
    );
    PanelQuery::new(
        sql,
        &[
            "rollout",
            "app",
            "version",
            "started_at",
            "targeted",
            "reached",
            "failed",
            "stalled_seconds",
        ],
    )
}

/// The app of the selected rollout (`app@render@version`).
fn rollout_app(slots: &Slots) -> String {
    format!("app = arrayElement(splitByChar('@', {}), 1)", slots.rollout)
}

/// The selected rollout's clusters of the selected group and environment over time, from its
/// start to the end of the time range every interval and at that end: `in_sync` those that
/// had reached it, `failed` those that had failed at its version and not reached it yet,
/// `waiting` the rest.
pub fn rollout_curve(slots: &Slots) -> PanelQuery {
    let end = format!("greatest(toUInt32({to}), started)", to = slots.to);
    let step = format!("toUInt32({})", slots.interval_seconds);
    let points = format!(
        "arrayPushBack(arrayMap(i -> started + i * {step}, range(toUInt32(intDiv({end} - started + {step} - 1, {step})))), {end})"
    );
    let sql = format!(
        "SELECT toDateTime(point) AS time, countIf(reached_at > 0 AND reached_at <= point) AS in_sync, \
countIf(NOT (reached_at > 0 AND reached_at <= point) AND failed_at > 0 AND failed_at <= point) AS failed, \
count() - in_sync - failed AS waiting FROM (\
SELECT reached_at, failed_at, {points} AS points FROM (\
SELECT * FROM ({members}) WHERE concat(app, '@', toString(render_id), '@', version) = {r} AND {selected}\
) AS members ALL INNER JOIN (\
SELECT app, render_id, version, started FROM ({records}) WHERE rollout = {r}\
) AS records USING (app, render_id, version)\
) ARRAY JOIN points AS point GROUP BY point ORDER BY point",
        members = members(&rollout_app(slots)),
        records = records(&rollout_app(slots)),
        r = slots.rollout,
        selected = selected(slots),
    );
    PanelQuery::new(sql, &["time", "in_sync", "failed", "waiting"])
}

/// The selected rollout in each group one level below the selected one (within the selected
/// environment): its clusters there, how many reached it and failed before reaching it, and
/// the seconds from its start until each share of them had reached it.
pub fn rollout_groups(slots: &Slots) -> PanelQuery {
    let mut columns = vec![
        "group_path".to_owned(),
        "targeted_now AS targeted".to_owned(),
        "length(reached_moments) AS reached".to_owned(),
        "failed_first AS failed_before_reaching".to_owned(),
    ];
    for (share, name) in MILESTONES {
        columns.push(format!(
            "{} AS {name}",
            seconds_since(
                &milestone(share, "reached_moments", "targeted_now"),
                "started"
            )
        ));
    }
    let sql = format!(
        "SELECT {columns} FROM ({tallies}) WHERE rollout = {r} ORDER BY group_path",
        columns = columns.join(", "),
        tallies = tallies(
            &members_by_group(slots, &rollout_app(slots), true),
            &rollout_app(slots)
        ),
        r = slots.rollout,
    );
    let mut names = vec![
        "group_path",
        "targeted",
        "reached",
        "failed_before_reaching",
    ];
    names.extend(MILESTONES.iter().map(|(_, name)| *name));
    PanelQuery::new(sql, &names)
}

/// Per rollout that can count in the window `[from, to)`, what it counts for: `deploy`ed
/// (100 % in the window), `lead` (commit to 90 %, when 90 % was in the window and the commit's
/// time is known), `change` (started in the window), `failed_change` and its `restores`.
/// Selected clusters' milestones and failures, except for the whole fleet (`fleet` true),
/// where the record's are.
fn countable(slots: &Slots, tallies_sql: &str, fleet: bool) -> String {
    let from = format!("toUInt32({})", slots.from);
    let to = format!("toUInt32({})", slots.to);
    let within = |t: &str| format!("({t} > 0 AND {t} >= {from} AND {t} < {to})");
    let (ninety, complete, failed, targeted) = if fleet {
        (
            "reached_90".to_owned(),
            "reached_100".to_owned(),
            "failed_before_reaching",
            "(targeted_at_start + joined)",
        )
    } else {
        (
            milestone(90, "reached_moments", "targeted_now"),
            milestone(100, "reached_moments", "targeted_now"),
            "failed_first",
            "targeted_now",
        )
    };
    format!(
        "SELECT group_path, app, {complete_in} AS deploy, \
({ninety_in} AND committed_at > 0) AS has_lead, toUInt32(if({ninety} > committed_at, {ninety} - committed_at, 0)) AS lead, \
{started_in} AS change, \
(change AND (rolled_back_by > 0 OR {failed} * 100 > {budget} * {targeted})) AS failed_change, \
if(change, restores, emptyArrayUInt32()) AS change_restores \
FROM ({tallies_sql}) WHERE {started_in} OR completed_at = 0 OR completed_at >= {from}",
        complete_in = within(&complete),
        ninety_in = within(&ninety),
        started_in = within("started"),
        budget = slots.failure_budget,
    )
}

/// Nearest-rank percentile `p` of the sorted array `sorted`, null when it is empty.
fn percentile(sorted: &str, p: u32) -> String {
    format!(
        "if(length({sorted}) = 0, NULL, arrayElement({sorted}, toUInt64(greatest(1, intDiv({p} * length({sorted}) + 99, 100)))))"
    )
}

/// The delivery figures per group and app of the rows `countable_sql` gives.
fn delivery_figures(slots: &Slots, countable_sql: &str) -> String {
    format!(
        "SELECT group_path, app, countIf(deploy) AS deployments, \
deployments * 86400 / (toUInt32({to}) - toUInt32({from})) AS deployments_per_day, \
arraySort(groupArrayIf(lead, has_lead)) AS leads, length(leads) AS lead_time_count, \
{lead_median} AS lead_time_median_seconds, {lead_p90} AS lead_time_p90_seconds, \
countIf(change) AS changes, countIf(failed_change) AS failed_changes, \
if(changes = 0, NULL, failed_changes / changes) AS change_failure_rate, \
arraySort(groupArrayArray(change_restores)) AS restore_times, length(restore_times) AS time_to_restore_count, \
{restore_median} AS time_to_restore_median_seconds, {restore_p90} AS time_to_restore_p90_seconds \
FROM ({countable_sql}) GROUP BY group_path, app",
        from = slots.from,
        to = slots.to,
        lead_median = percentile("leads", 50),
        lead_p90 = percentile("leads", 90),
        restore_median = percentile("restore_times", 50),
        restore_p90 = percentile("restore_times", 90),
    )
}

/// The columns of the delivery panels, after `group_path` and `app`.
const DELIVERY_COLUMNS: [&str; 11] = [
    "deployments",
    "deployments_per_day",
    "lead_time_count",
    "lead_time_median_seconds",
    "lead_time_p90_seconds",
    "changes",
    "failed_changes",
    "change_failure_rate",
    "time_to_restore_count",
    "time_to_restore_median_seconds",
    "time_to_restore_p90_seconds",
];

fn delivery_query(slots: &Slots, countable_sql: &str) -> PanelQuery {
    let sql = format!(
        "SELECT group_path, app, {columns} FROM ({figures}) ORDER BY group_path, app",
        columns = DELIVERY_COLUMNS.join(", "),
        figures = delivery_figures(slots, countable_sql),
    );
    let mut names = vec!["group_path", "app"];
    names.extend(DELIVERY_COLUMNS);
    PanelQuery::new(sql, &names)
}

/// The delivery figures of the selected group and environment over the time range (`from`
/// included, `to` not), per app (the selected one, or every app with a rollout that counts
/// in it).
pub fn delivery(slots: &Slots) -> PanelQuery {
    let app = is_app_or_all(slots, "app");
    let whole = whole_fleet(slots);
    // The whole fleet: the records' milestones and failures, every rollout, whatever clusters
    // it holds now; a selection: its clusters' moments, rollouts holding some of them.
    let fleet_rows = format!(
        "SELECT {g} AS group_path, * FROM ({records}) AS records ALL LEFT JOIN (\
SELECT app, render_id, version, groupArrayIf(toUInt32(if(reached_at > failed_at, reached_at - failed_at, 0)), failed_at > 0 AND reached_at > 0) AS restores \
FROM ({members}) GROUP BY app, render_id, version\
) AS restored USING (app, render_id, version) WHERE {whole}",
        g = slots.group,
        records = records(&app),
        members = members(&app),
    );
    let selection_rows = format!(
        "SELECT * FROM ({tallies}) WHERE NOT {whole}",
        tallies = tallies(&members_by_group(slots, &app, false), &app),
    );
    let countable_sql = format!(
        "{} UNION ALL {}",
        countable(slots, &fleet_rows, true),
        countable(slots, &selection_rows, false)
    );
    delivery_query(slots, &countable_sql)
}

/// The delivery figures of each group one level below the selected one (within the selected
/// environment), per app, as [`delivery`] gives them for a selected group.
pub fn delivery_by_group(slots: &Slots) -> PanelQuery {
    let app = is_app_or_all(slots, "app");
    let tallies_sql = tallies(&members_by_group(slots, &app, true), &app);
    delivery_query(slots, &countable(slots, &tallies_sql, false))
}

/// The selected app's rollouts (every app's when none is), newest first: the values of the
/// dashboard's rollout variable.
pub fn rollout_values(slots: &Slots) -> String {
    format!(
        "SELECT rollout FROM ({records}) ORDER BY started DESC, render_id DESC, app, version",
        records = records(&is_app_or_all(slots, "app")),
    )
}
