//! The seven dashboards: what each panel asks, how it is drawn, and where its links lead.

use fleetscope_store::panel_sql;
use serde_json::json;

use crate::grafana::{drill, Builder, Dashboard, Link, Panel, Query, Variable};
use crate::slots::GRAFANA;

pub const OVERVIEW: &str = "fleetscope-overview";
pub const APP_VERSIONS: &str = "fleetscope-app-versions";
pub const CLUSTER: &str = "fleetscope-cluster";
pub const HISTORY: &str = "fleetscope-history";
pub const ENVIRONMENTS: &str = "fleetscope-environments";
pub const HEALTH: &str = "fleetscope-health";
pub const ROLLOUTS: &str = "fleetscope-rollouts";

fn group_variable() -> Variable {
    Variable::ClickHouse {
        name: "group",
        label: "Group",
        description: "A group subtree; All is the whole fleet",
        sql: panel_sql::group_values(),
        all: true,
        sort: 1,
    }
}

fn environment_variable() -> Variable {
    Variable::ClickHouse {
        name: "environment",
        label: "Environment",
        description: "Clusters of one environment; All is every environment",
        sql: panel_sql::environment_values(),
        all: true,
        sort: 1,
    }
}

fn app_variable(all: bool) -> Variable {
    Variable::ClickHouse {
        name: "app",
        label: "App",
        description: if all {
            "One app; All is every app"
        } else {
            "The app to look at"
        },
        sql: panel_sql::app_values(),
        all,
        sort: 1,
    }
}

fn to_cluster() -> Link {
    drill("Cluster detail", CLUSTER, "cluster")
}

fn to_app() -> Vec<Link> {
    vec![
        drill("Versions of this app", APP_VERSIONS, "app"),
        drill("Deployment history of this app", HISTORY, "app"),
    ]
}

fn to_group() -> Vec<Link> {
    vec![
        drill("Drill down into this group", OVERVIEW, "group"),
        drill("Environments of this group", ENVIRONMENTS, "group"),
        drill("Deployment history of this group", HISTORY, "group"),
    ]
}

/// Every dashboard, in the order the files are listed.
pub fn all() -> Vec<Dashboard> {
    vec![
        fleet_overview(),
        app_versions(),
        cluster_detail(),
        deployment_history(),
        environment_comparison(),
        rollouts_and_delivery(),
        fleetscope_health(),
    ]
}

pub fn fleet_overview() -> Dashboard {
    Builder::new(
        "fleet-overview",
        OVERVIEW,
        "Fleetscope: fleet overview",
        "Drift of the fleet or one group: rollups per group with drill-down, the trend from rollup snapshots, stale clusters and failing apps",
    )
    .variable(Variable::clickhouse_source())
    .variable(group_variable())
    .variable(environment_variable())
    .drift_policy()
    .row("Selected group (All: the fleet) now")
    .panel(
        Panel::stat(
            "Clusters and app instances",
            "How many clusters the group has, how many of them report, and how its (cluster, app) pairs divide over the drift states right now. The numbers are the store's drift rollup, the same as the hub's summary. Not filtered by environment.",
        )
        .query(Query::table(panel_sql::selected_group_rollup(&GRAFANA)))
        .state_colors()
        .size(24, 5),
    )
    .row("Groups one level below")
    .panel(
        Panel::table(
            "Rollup per group",
            "Each group directly below the selected one (the regions, for the fleet): clusters, stale clusters, app instances per drift state and the share in sync. Click a group to drill down into it. Not filtered by environment.",
        )
        .query(Query::table(panel_sql::child_group_rollups(&GRAFANA)))
        .state_colors()
        .links("group_path", &to_group())
        .size(24, 9),
    )
    .row("Trend (rollup snapshots)")
    .panel(
        Panel::timeseries(
            "App instances per drift state",
            "How the selected group's drift developed over the time range, from the rollup snapshots stored in ClickHouse (`rollup_snapshots`). Empty where no snapshots were taken, and for groups deeper than the snapshot depth.",
        )
        .query(Query::series(panel_sql::drift_trend(&GRAFANA)))
        .state_colors()
        .stacked()
        .size(16, 9),
    )
    .panel(
        Panel::timeseries(
            "Clusters and stale clusters",
            "How many clusters the selected group had, and how many of them were stale, at each snapshot.",
        )
        .query(Query::series(panel_sql::cluster_trend(&GRAFANA)))
        .field("stale_clusters", "color", json!({"fixedColor": "#8e8e8e", "mode": "fixed"}))
        .size(8, 9),
    )
    .row("Needs attention")
    .panel(
        Panel::table(
            "Stale clusters",
            "Clusters of the selected group and environment that have not sent a heartbeat within the stale threshold, never seen first, then the longest silent. What such a cluster last reported is not trusted: its apps count as stale.",
        )
        .query(Query::table(panel_sql::stale_cluster_list(&GRAFANA)))
        .field_unit("silent_seconds", "s")
        .links("cluster_id", &[to_cluster()])
        .size(12, 10),
    )
    .panel(
        Panel::table(
            "Apps with failed, drifted, missing or unexpected instances",
            "Apps in the selected group and environment with instances that need someone to act, worst first. Click an app for its versions or its deployment history.",
        )
        .query(Query::table(panel_sql::problem_apps(&GRAFANA)))
        .state_colors()
        .links("app", &to_app())
        .size(12, 10),
    )
    .panel(
        Panel::table(
            "Failed, out-of-sync and missing instances",
            "The (cluster, app) pairs behind the numbers above: desired against running version and the reconciler's health and sync. Click a cluster for its detail.",
        )
        .query(Query::table(panel_sql::problem_pairs(&GRAFANA, false)))
        .state_column("state")
        .links("cluster_id", &[to_cluster()])
        .links("app", &to_app())
        .size(24, 10),
    )
    .build()
}

pub fn app_versions() -> Dashboard {
    Builder::new(
        "app-versions",
        APP_VERSIONS,
        "Fleetscope: app versions",
        "Which versions of one app should run and do run, where, and how a rollout of one version progresses",
    )
    .variable(Variable::clickhouse_source())
    .variable(app_variable(false))
    .variable(group_variable())
    .variable(environment_variable())
    .variable(Variable::ClickHouse {
        name: "version",
        label: "Version",
        description: "The version whose rollout to follow",
        sql: panel_sql::version_values(&GRAFANA),
        all: false,
        sort: 8,
    })
    .drift_policy()
    .row("$app now")
    .panel(
        Panel::stat(
            "Drift of $app",
            "How the app's instances in the selected group and environment divide over the drift states right now.",
        )
        .query(Query::table(panel_sql::app_states(&GRAFANA)))
        .state_colors(),
    )
    .panel(
        Panel::barchart(
            "Version distribution",
            "Per version: how many clusters should run it (desired) and how many report running it. Two bars of unequal height for one version mean a rollout underway or drift.",
            "version",
        )
        .query(Query::table(panel_sql::version_distribution(&GRAFANA)))
        .size(12, 9),
    )
    .panel(
        Panel::table(
            "Running versions by group",
            "Clusters running each version, per group one level below the selected one (regions for the fleet). A group with more than one version is mid-rollout or drifting.",
        )
        .query(Query::table(panel_sql::versions_by_group(&GRAFANA)))
        .matrix("group_path", "version", "clusters")
        .size(12, 9),
    )
    .row("Rollout of $app $version")
    .panel(
        Panel::stat(
            "Rollout status",
            "Clusters whose desired version is the selected one (targeted), clusters reporting it (running), and targeted clusters in sync, with their share: the rollout gate's numbers.",
        )
        .query(Query::table(panel_sql::rollout_status(&GRAFANA)))
        .field_unit("in_sync_share", "percentunit")
        .field("in_sync", "color", json!({"fixedColor": "green", "mode": "fixed"}))
        .size(8, 9),
    )
    .panel(
        Panel::timeseries(
            "Clusters that reached $version",
            "Cumulative count of clusters that have reported running the selected version, by when they first reported it (observed transitions). Clusters that reached it before the time range count from its start; a cluster that moved away later still counts.",
        )
        .query(Query::series(panel_sql::rollout_progress(&GRAFANA)))
        .size(16, 9),
    )
    .panel(
        Panel::table(
            "Instances of $app not in sync",
            "Failed, out-of-sync and missing instances of the app in the selected group and environment, with desired and running version.",
        )
        .query(Query::table(panel_sql::problem_pairs(&GRAFANA, true)))
        .state_column("state")
        .links("cluster_id", &[to_cluster()])
        .size(24, 9),
    )
    .row("What clusters where $app fails share")
    .panel(
        Panel::table(
            "Failure insights for $app",
            "Attribute values (labels, groups at every level, environment, reconciler, agent version) over-represented among the clusters of the selection where the app is failed or out of sync, compared with the clusters where it is in sync. Only values on at least 2 failing clusters and not on every compared cluster, with a higher failure rate with them than without. Ranked by the two-proportion z-score (z_score), strongest first; the hub's /api/v1/insights/failures gives Fisher's exact test and whether a finding is significant.",
        )
        .query(Query::table(panel_sql::failure_insights(&GRAFANA)))
        .field_unit("failure_rate_with", "percentunit")
        .field_unit("failure_rate_without", "percentunit")
        .size(24, 10),
    )
    .row("$app over time")
    .panel(
        Panel::timeseries(
            "Running versions of $app over time",
            "Clusters of the selected group and environment running each version of the app, at the first checkpoint of observed state of every 6 hours in the time range: one series per version. Group and environment are the current inventory's. The hub's apps/{app}/versions?at= answers any moment in between.",
        )
        .query(Query::series(panel_sql::running_versions_over_time(&GRAFANA)))
        .display_name("${__field.labels.version}")
        .points()
        .stacked()
        .unit("short")
        .size(24, 9),
    )
    .build()
}

pub fn cluster_detail() -> Dashboard {
    Builder::new(
        "cluster-detail",
        CLUSTER,
        "Fleetscope: cluster detail",
        "One cluster: where it sits, when it was last seen, every app desired against running, and its history",
    )
    .variable(Variable::clickhouse_source())
    .variable(group_variable())
    .variable(environment_variable())
    .variable(Variable::ClickHouse {
        name: "cluster",
        label: "Cluster",
        description: "A cluster of the selected group and environment",
        sql: panel_sql::cluster_values(&GRAFANA),
        all: false,
        sort: 1,
    })
    .drift_policy()
    .time_from("now-24h")
    .row("$cluster now")
    .panel(
        Panel::table(
            "Cluster",
            "Where the cluster sits (group, environment, labels), which render group it belongs to, when it last sent a heartbeat and whether that makes it stale.",
        )
        .query(Query::table(panel_sql::cluster_info(&GRAFANA)))
        .size(24, 4),
    )
    .panel(
        Panel::stat(
            "Drift of this cluster's apps",
            "How the cluster's (cluster, app) pairs divide over the drift states right now.",
        )
        .query(Query::table(panel_sql::cluster_states(&GRAFANA)))
        .state_colors(),
    )
    .panel(
        Panel::table(
            "Apps: desired against running",
            "Every app desired on or reported by the cluster: its drift state, the desired and running version, the reconciler's health and sync, since when the desired state holds and when the reconciler last changed status.",
        )
        .query(Query::table(panel_sql::cluster_apps(&GRAFANA)))
        .state_column("state")
        .links("app", &to_app())
        .size(24, 10),
    )
    .panel(
        Panel::table(
            "Reported objects",
            "The latest report of every reconciler object on the cluster, sources and unmanaged objects included: revision applied, health, sync, and the reconciler's own reason and message.",
        )
        .query(Query::table(panel_sql::cluster_objects(&GRAFANA)))
        .size(24, 10),
    )
    .row("History in the time range")
    .panel(
        Panel::table(
            "Observed transitions",
            "Every status change the cluster reported in the time range, oldest first.",
        )
        .query(Query::table(panel_sql::cluster_history(&GRAFANA)))
        .size(12, 10),
    )
    .panel(
        Panel::table(
            "Desired-state changes of its render group",
            "What renders changed in the desired state of the cluster's current render group in the time range: version, commit and the policies that put each app there.",
        )
        .query(Query::table(panel_sql::cluster_desired_history(&GRAFANA)))
        .size(12, 10),
    )
    .build()
}

pub fn deployment_history() -> Dashboard {
    Builder::new(
        "deployment-history",
        HISTORY,
        "Fleetscope: deployment history",
        "What changed when, for one app or group: renders and their commits, desired-state changes and the status changes clusters reported",
    )
    .variable(Variable::clickhouse_source())
    .variable(group_variable())
    .variable(app_variable(true))
    .panel(
        Panel::timeseries(
            "Changes per interval",
            "Renders, desired-state changes (per render group and app) and observed status changes (by reported health) per interval, for the selected app and group. A render followed by a wave of degraded reports is a bad change.",
        )
        .query(Query::series(panel_sql::renders_over_time(&GRAFANA)))
        .query(Query::series(panel_sql::desired_changes_over_time(&GRAFANA)))
        .query(Query::series(panel_sql::transitions_over_time(&GRAFANA)))
        .field("degraded", "color", json!({"fixedColor": "red", "mode": "fixed"}))
        .field("healthy", "color", json!({"fixedColor": "green", "mode": "fixed"}))
        .bars()
        .size(24, 9),
    )
    .panel(
        Panel::table(
            "Renders",
            "Every render in the time range, newest first: the GitOps commit it wrote, the platform commit it read, and how much it changed. Not filtered by app or group.",
        )
        .query(Query::table(panel_sql::renders_in_range(&GRAFANA)))
        .size(12, 9),
    )
    .panel(
        Panel::table(
            "Desired-state changes",
            "Desired-state changes of the selected app within render groups with clusters in the selected group, newest render first; removed = 1 when a render took the app away.",
        )
        .query(Query::table(panel_sql::desired_changes(&GRAFANA)))
        .links("app", &to_app())
        .size(12, 9),
    )
    .panel(
        Panel::table(
            "Observed transitions",
            "Status changes clusters of the selected group reported for the selected app, newest first, with the reconciler's reason and message.",
        )
        .query(Query::table(panel_sql::group_transitions(&GRAFANA)))
        .links("cluster_id", &[to_cluster()])
        .links("app", &to_app())
        .size(24, 10),
    )
    .build()
}

fn to_rollout() -> Link {
    drill("This rollout's progress", ROLLOUTS, "rollout")
}

pub fn rollouts_and_delivery() -> Dashboard {
    let seconds = |panel: Panel, columns: &[&str]| {
        columns
            .iter()
            .fold(panel, |panel, column| panel.field_unit(column, "s"))
    };
    let milestones = [
        "seconds_to_50_percent",
        "seconds_to_90_percent",
        "seconds_to_99_percent",
        "seconds_to_100_percent",
    ];
    let delivery_seconds = [
        "lead_time_median_seconds",
        "lead_time_p90_seconds",
        "time_to_restore_median_seconds",
        "time_to_restore_p90_seconds",
    ];
    Builder::new(
        "rollouts-and-delivery",
        ROLLOUTS,
        "Fleetscope: rollouts and delivery",
        "How every release spreads through the fleet: the rollouts of an app, the stalled ones, one rollout's progress and groups, and delivery figures per group, from the rollout records the hub writes",
    )
    .time_from("now-30d")
    .variable(Variable::clickhouse_source())
    .variable(app_variable(true))
    .variable(group_variable())
    .variable(environment_variable())
    .variable(Variable::ClickHouse {
        name: "rollout",
        label: "Rollout",
        description: "One rollout (app@render@version) of the selected app, newest first",
        sql: panel_sql::rollout_values(&GRAFANA),
        all: false,
        sort: 0,
    })
    .variable(Variable::Constant {
        name: "failure_budget_percent",
        description: "The share of a rollout's clusters, in percent, that may fail at its version before reaching it without the rollout counting as a failed change; keep equal to the hub's --rollout-failure-budget",
        value: "5".to_owned(),
    })
    .row("Rollouts of $app")
    .panel(
        seconds(
            Panel::table(
                "Rollouts",
                "The rollouts of the selected app (every app for All) that started in the time range, newest first, as the hub last wrote them: status, clusters targeted now, reached, in sync, failed and stale now, failed before reaching, and the seconds from the render to 50, 90, 99 and 100 % of the targeted clusters reached (empty while not passed). Whole fleet, whatever the group selected; the hub's /api/v1/rollouts narrows to a group.",
            )
            .query(Query::table(panel_sql::rollout_list(&GRAFANA)))
            .links("rollout", &[to_rollout()])
            .links("app", &to_app()),
            &milestones,
        )
        .size(24, 10),
    )
    .panel(
        Panel::table(
            "Stalled rollouts",
            "Rollouts of the selected app (every app for All) that were stalled when the hub last wrote them (no cluster reached them for the hub's --rollout-stall-after), longest stalled first, with the seconds since a cluster last reached each (or since it started) at the end of the time range: the FleetscopeRolloutStalled alert's rollouts.",
        )
        .query(Query::table(panel_sql::stalled_rollouts(&GRAFANA)))
        .field_unit("stalled_seconds", "s")
        .links("rollout", &[to_rollout()])
        .size(24, 7),
    )
    .row("Rollout $rollout")
    .panel(
        Panel::timeseries(
            "Progress of $rollout",
            "The rollout's clusters in the selected group and environment, from its render to the end of the time range: reached (in sync at its version once), failed at its version and not reached yet, and waiting. Its clusters are those it targets now.",
        )
        .query(Query::series(panel_sql::rollout_curve(&GRAFANA)))
        .field("in_sync", "color", json!({"fixedColor": "green", "mode": "fixed"}))
        .field("failed", "color", json!({"fixedColor": "red", "mode": "fixed"}))
        .field("waiting", "color", json!({"fixedColor": "text", "mode": "fixed"}))
        .stacked()
        .unit("short")
        .size(14, 10),
    )
    .panel(
        seconds(
            Panel::table(
                "$rollout by group",
                "The rollout in each group one level below the selected one: its clusters there, how many reached it and failed before reaching it, and the seconds from its render until each share of them had reached it. A group far behind the others is where it is stuck.",
            )
            .query(Query::table(panel_sql::rollout_groups(&GRAFANA)))
            .links("group_path", &to_group()),
            &milestones,
        )
        .size(10, 10),
    )
    .row("Delivery")
    .panel(
        seconds(
            Panel::table(
                "Delivery of the selected group",
                "Per app over the time range: deployments (rollouts that reached 100 %) and per day, lead time from platform commit to 90 % reached (median and p90 over that many rollouts), changes started and failed changes (rolled back, or more clusters failed before reaching than the failure budget allows) with the rate, and time to restore from failing first to reaching (median and p90 over that many clusters). The rules are the hub's /api/v1/delivery.",
            )
            .query(Query::table(panel_sql::delivery(&GRAFANA)))
            .field_unit("change_failure_rate", "percentunit")
            .links("app", &to_app()),
            &delivery_seconds,
        )
        .size(24, 8),
    )
    .panel(
        seconds(
            Panel::table(
                "Delivery per group",
                "The same figures for each group one level below the selected one, per app: where releases take longest or fail most.",
            )
            .query(Query::table(panel_sql::delivery_by_group(&GRAFANA)))
            .field_unit("change_failure_rate", "percentunit")
            .links("group_path", &to_group()),
            &delivery_seconds,
        )
        .size(24, 10),
    )
    .build()
}

pub fn environment_comparison() -> Dashboard {
    Builder::new(
        "environment-comparison",
        ENVIRONMENTS,
        "Fleetscope: environment comparison",
        "Desired and running versions of each app side by side across environments",
    )
    .variable(Variable::clickhouse_source())
    .variable(group_variable())
    .variable(app_variable(true))
    .drift_policy()
    .time_from("now-24h")
    .panel(
        Panel::table(
            "Desired version per environment",
            "For each app (rows) and environment (columns): the version the renderer wants there. Several versions in one cell mean render groups of that environment differ.",
        )
        .query(Query::table(panel_sql::desired_by_environment(&GRAFANA)))
        .matrix("app", "environment", "desired")
        .size(12, 12),
    )
    .panel(
        Panel::table(
            "Running versions per environment",
            "For each app and environment: the versions clusters report, each with its number of clusters, most common first.",
        )
        .query(Query::table(panel_sql::running_by_environment(&GRAFANA)))
        .matrix("app", "environment", "running")
        .size(12, 12),
    )
    .panel(
        Panel::table(
            "Drift per app and environment",
            "App instances per drift state for each app and environment, with the share in sync.",
        )
        .query(Query::table(panel_sql::states_by_environment(&GRAFANA)))
        .state_colors()
        .links("app", &to_app())
        .size(24, 12),
    )
    .build()
}

const RATE: &str = "[$__rate_interval]";

fn quantile(q: &str, metric: &str, by: &str) -> String {
    format!("histogram_quantile({q}, sum by (le{by}) (rate({metric}_bucket{RATE})))")
}

/// Fleetscope's own health, from the collector's and the hub's Prometheus metrics.
pub fn fleetscope_health() -> Dashboard {
    Builder::new(
        "fleetscope-health",
        HEALTH,
        "Fleetscope: health",
        "Fleetscope's own metrics from Prometheus: the central collector's ingest and the hub's requests, queries and refreshes",
    )
    .variable(Variable::prometheus_source())
    .time_from("now-6h")
    .refresh("1m")
    .row("Central collector")
    .panels(collector_ingest_panels())
    .panels(collector_write_panels())
    .row("Hub")
    .panels(hub_request_panels())
    .panels(hub_index_panels())
    .panels(fleet_panels())
    .build()
}

/// The central collector's ingest: rows accepted, reports by outcome, and requests refused.
fn collector_ingest_panels() -> Vec<Panel> {
    vec![
        Panel::timeseries(
            "Rows ingested",
            "Observed rows per second that ClickHouse accepted from agents' reports.",
        )
        .query(Query::prometheus(
            format!("sum(rate(fleetscope_collector_rows_ingested_total{RATE}))"),
            "rows",
        ))
        .unit("rowsps")
        .size(8, 8),
        Panel::timeseries(
            "Reports by outcome",
            "Reports per second: stored, duplicate (a redelivery, harmless) or rejected.",
        )
        .query(Query::prometheus(
            format!("sum by (outcome) (rate(fleetscope_collector_reports_total{RATE}))"),
            "{{outcome}}",
        ))
        .unit("reqps")
        .size(8, 8),
        Panel::timeseries(
            "Rejected requests by reason",
            "Requests refused per second and why: bad or missing tokens, unknown clusters, malformed or oversized reports, backpressure, ClickHouse unavailable.",
        )
        .query(Query::prometheus(
            format!("sum by (reason) (rate(fleetscope_collector_rejects_total{RATE}))"),
            "{{reason}}",
        ))
        .unit("reqps")
        .size(8, 8),
    ]
}

/// The central collector's writes: its backlog, batch write times, and batches ClickHouse refused.
fn collector_write_panels() -> Vec<Panel> {
    vec![
        Panel::timeseries(
            "Write backlog",
            "Rows waiting in the collector to be written, per table. A backlog that keeps growing means ClickHouse does not keep up; agents then spool.",
        )
        .query(Query::prometheus(
            "sum by (table) (fleetscope_collector_backlog_rows)",
            "{{table}}",
        ))
        .unit("short")
        .size(8, 8),
        Panel::timeseries(
            "Batch write time",
            "Time from a batch's start to ClickHouse's answer, median and 99th percentile per table.",
        )
        .query(Query::prometheus(
            quantile("0.5", "fleetscope_collector_flush_seconds", ", table"),
            "p50 {{table}}",
        ))
        .query(Query::prometheus(
            quantile("0.99", "fleetscope_collector_flush_seconds", ", table"),
            "p99 {{table}}",
        ))
        .unit("s")
        .size(8, 8),
        Panel::timeseries(
            "Batches ClickHouse refused, and bytes received",
            "Insert batches per second that ClickHouse did not accept (retried by the writer), and compressed request bytes received.",
        )
        .query(Query::prometheus(
            format!(
                "sum by (table) (rate(fleetscope_collector_batches_total{{accepted=\"false\"}}{RATE}))"
            ),
            "refused {{table}}",
        ))
        .query(Query::prometheus(
            format!("sum(rate(fleetscope_collector_request_bytes_total{RATE}))"),
            "bytes received",
        ))
        .field_unit("bytes received", "Bps")
        .size(8, 8),
    ]
}

/// The hub's requests: their rate, errors and latency, and the latency of its ClickHouse reads.
fn hub_request_panels() -> Vec<Panel> {
    vec![
        Panel::timeseries(
            "Requests by route",
            "HTTP requests per second per route pattern.",
        )
        .query(Query::prometheus(
            format!("sum by (route) (rate(fleetscope_hub_requests_total{RATE}))"),
            "{{route}}",
        ))
        .unit("reqps")
        .size(8, 8),
        Panel::timeseries(
            "Error responses",
            "Responses per second with a 5xx status, per route and status. 503 on history routes means ClickHouse did not answer.",
        )
        .query(Query::prometheus(
            format!(
                "sum by (route, status) (rate(fleetscope_hub_requests_total{{status=~\"5..\"}}{RATE}))"
            ),
            "{{route}} {{status}}",
        ))
        .unit("reqps")
        .size(8, 8),
        Panel::timeseries(
            "Request latency (p99)",
            "99th percentile of request duration per route pattern.",
        )
        .query(Query::prometheus(
            quantile("0.99", "fleetscope_hub_request_seconds", ", route"),
            "{{route}}",
        ))
        .unit("s")
        .size(8, 8),
        Panel::timeseries(
            "ClickHouse query latency (p99)",
            "99th percentile of the hub's ClickHouse reads per query name.",
        )
        .query(Query::prometheus(
            quantile("0.99", "fleetscope_hub_store_query_seconds", ", query"),
            "{{query}}",
        ))
        .unit("s")
        .size(8, 8),
    ]
}

/// The hub's index: failing reads and refreshes, refresh time and cache hits, its size, and the time to compute an answer.
fn hub_index_panels() -> Vec<Panel> {
    vec![
        Panel::timeseries(
            "ClickHouse queries and refreshes failing",
            "Failed ClickHouse reads per second per query, and failed refreshes of the hub's index. While refreshes fail the hub serves the last data it read.",
        )
        .query(Query::prometheus(
            format!(
                "sum by (query) (rate(fleetscope_hub_store_queries_total{{outcome=\"error\"}}{RATE}))"
            ),
            "{{query}}",
        ))
        .query(Query::prometheus(
            format!(
                "sum(rate(fleetscope_hub_refreshes_total{{outcome=\"error\"}}{RATE}))"
            ),
            "refresh",
        ))
        .unit("reqps")
        .size(8, 8),
        Panel::timeseries(
            "Refresh time and cache hits",
            "99th percentile of one index refresh, and the share of answers served from the cache.",
        )
        .query(Query::prometheus(
            quantile("0.99", "fleetscope_hub_refresh_seconds", ""),
            "refresh p99",
        ))
        .query(Query::prometheus(
            format!(
                "sum(rate(fleetscope_hub_cache_lookups_total{{outcome=\"hit\"}}{RATE})) / sum(rate(fleetscope_hub_cache_lookups_total{RATE}))"
            ),
            "cache hit share",
        ))
        .field_unit("refresh p99", "s")
        .field_unit("cache hit share", "percentunit")
        .size(8, 8),
        Panel::timeseries(
            "Index size",
            "App objects and distinct strings the hub holds in memory, per replica.",
        )
        .query(Query::prometheus(
            "fleetscope_hub_index_objects",
            "objects {{instance}}",
        ))
        .query(Query::prometheus(
            "fleetscope_hub_index_strings",
            "strings {{instance}}",
        ))
        .unit("short")
        .size(8, 8),
        Panel::timeseries(
            "Answer computation time (p99)",
            "99th percentile of computing an answer from the index on a cache miss.",
        )
        .query(Query::prometheus(
            quantile("0.99", "fleetscope_hub_compute_seconds", ""),
            "compute p99",
        ))
        .unit("s")
        .size(8, 8),
    ]
}

/// The fleet as the hub exports it: app instances per drift state, and stale clusters.
fn fleet_panels() -> Vec<Panel> {
    vec![
        Panel::timeseries(
            "Fleet: app instances per drift state",
            "The whole fleet's app instances per drift state as the hub exports them (the highest value over hub replicas, which all count the same fleet).",
        )
        .query(Query::prometheus(
            "max by (state) (fleetscope_app_instances{group=\"\"})",
            "{{state}}",
        ))
        .state_colors()
        .unit("short")
        .size(8, 8),
        Panel::timeseries(
            "Fleet: stale clusters and oldest last seen",
            "Clusters not heard from within the stale threshold, and the age of the least recently seen cluster.",
        )
        .query(Query::prometheus(
            "max(fleetscope_stale_clusters{group=\"\"})",
            "stale clusters",
        ))
        .query(Query::prometheus(
            "max(fleetscope_oldest_last_seen_age_seconds{group=\"\"})",
            "oldest last seen",
        ))
        .field_unit("oldest last seen", "s")
        .size(8, 8),
    ]
}
