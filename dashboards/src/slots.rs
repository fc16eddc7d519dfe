//! What Grafana puts into the store's panel queries: the dashboards' template variables and
//! constants and the ClickHouse plugin's macros, each in its slot of
//! [`fleetscope_store::panel_sql::Slots`]. The statements themselves are the store's; this crate
//! writes none.

use fleetscope_store::panel_sql::Slots;

/// Rows a table panel shows at most.
const TABLE_ROWS: u64 = 500;

/// The plugin's macro for "this `DateTime` column lies in the dashboard's time range".
fn time_filter(column: &str) -> String {
    format!("$__timeFilter({column})")
}

/// The slots as every dashboard fills them. A template variable is written with the
/// `sqlstring` format, so Grafana inserts it as a quoted string literal; a variable whose "All"
/// option is chosen expands to its custom all value, `''`, which the store's panel queries read
/// as "no filter" (and, for the group, the whole fleet). The drift policy's thresholds are
/// dashboard constants. Current state is classified at the end of the dashboard's time range.
pub const GRAFANA: Slots<'static> = Slots {
    group: "${group:sqlstring}",
    environment: "${environment:sqlstring}",
    app: "${app:sqlstring}",
    version: "${version:sqlstring}",
    cluster: "${cluster:sqlstring}",
    rollout: "${rollout:sqlstring}",
    failure_budget: "${failure_budget_percent}",
    stale_after_seconds: "${stale_after_seconds}",
    grace_seconds: "${grace_seconds}",
    from: "$__fromTime",
    to: "$__toTime",
    interval_seconds: "$__interval_s",
    time_filter,
    table_rows: TABLE_ROWS,
};
