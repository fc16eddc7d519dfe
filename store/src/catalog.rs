//! Every SQL text the store sends, rendered with sample parameters, so the conformance test
//! can run each one on other ClickHouse versions. A new query belongs here the day it is added.

use clickhouse::Row;
use fleetscope_model::{DriftPolicy, Timestamp};

use crate::clickhouse_cluster::ClusterConfig;
use crate::past;
use crate::queries::{
    self, ClusterCountsRow, LastSeenRow, LiveObjectRow, PairCountRow, PairStateRow,
};
use crate::retention::{DROP_PARTITION_ON_CLUSTER, SELECT_CLUSTER_PARTITIONS, SELECT_PARTITIONS};
use crate::rows::{DesiredRow, HeartbeatRow, ObservedRow};
use crate::schema::{MIGRATIONS, MIGRATIONS_TABLE_DDL, SELECT_APPLIED_MIGRATIONS};
use crate::Store;

/// The app the samples ask about (the one the test grid uses).
pub const SAMPLE_APP: &str = "checkout";

/// One statement: what it is and its full text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    pub name: String,
    pub sql: String,
}

/// Schema statements in the order `migrate` runs them.
pub fn schema_statements() -> Vec<CatalogEntry> {
    let mut entries = vec![CatalogEntry {
        name: "schema_migrations".into(),
        sql: MIGRATIONS_TABLE_DDL.into(),
    }];
    for migration in MIGRATIONS {
        for (index, statement) in migration.statements.iter().enumerate() {
            entries.push(CatalogEntry {
                name: format!("migration {} statement {}", migration.version, index + 1),
                sql: (*statement).to_owned(),
            });
        }
    }
    entries
}

fn render<R: Row>(name: &str, query: clickhouse::query::Query) -> CatalogEntry {
    let sql = query
        .sql_display()
        .to_string()
        .replace("?fields", &R::COLUMN_NAMES.join(", "));
    CatalogEntry {
        name: name.to_owned(),
        sql,
    }
}

/// Cluster mode's schema statements for `database` on `cluster`, in the order `migrate` runs
/// them on a new database.
pub fn cluster_schema_statements(cluster: &ClusterConfig, database: &str) -> Vec<CatalogEntry> {
    let mut entries = vec![CatalogEntry {
        name: "database".into(),
        sql: crate::clickhouse_cluster::create_database(cluster, database),
    }];
    for (index, sql) in
        crate::clickhouse_cluster::clustered_statements(MIGRATIONS_TABLE_DDL, cluster, database)
            .into_iter()
            .enumerate()
    {
        entries.push(CatalogEntry {
            name: format!("schema_migrations statement {}", index + 1),
            sql,
        });
    }
    for migration in MIGRATIONS {
        for (index, sql) in migration
            .cluster_statements(cluster, database)
            .into_iter()
            .enumerate()
        {
            entries.push(CatalogEntry {
                name: format!("migration {} statement {}", migration.version, index + 1),
                sql,
            });
        }
    }
    entries
}

/// Every read query, rendered with the given sample parameters for `database`.
pub fn read_queries(
    database: &str,
    now: Timestamp,
    policy: &DriftPolicy,
    cluster_id: &str,
) -> Vec<CatalogEntry> {
    read_queries_for(
        &crate::StoreConfig::new("http://127.0.0.1:9", database),
        now,
        policy,
        cluster_id,
    )
}

/// [`read_queries`] as a store with `config` sends them (cluster mode reads some system tables
/// of every shard), plus, in cluster mode, the queries only cluster mode sends.
pub fn read_queries_for(
    config: &crate::StoreConfig,
    now: Timestamp,
    policy: &DriftPolicy,
    cluster_id: &str,
) -> Vec<CatalogEntry> {
    let store = Store::connect(&crate::StoreConfig {
        url: "http://127.0.0.1:9".into(),
        ..config.clone()
    })
    .expect("valid sample config");
    let samples = Samples {
        store: &store,
        database: config.database.as_str(),
        now,
        policy,
        cluster_id,
        week_ago: now.plus_seconds(-7 * 86_400),
    };
    let mut entries = vec![CatalogEntry {
        name: "applied migrations".into(),
        sql: SELECT_APPLIED_MIGRATIONS.into(),
    }];
    entries.extend(drift_reads(&samples));
    entries.extend(observed_reads(&samples));
    entries.extend(current_state_reads(&samples));
    entries.extend(index_reads(&samples));
    entries.extend(route_reads(&samples));
    entries.extend(table_reads(&samples));
    entries.extend(past_state_reads(&samples));
    entries.extend(past_observed_reads(&samples));
    entries.extend(cluster_mode_reads(&samples));
    entries
}

/// The store the read queries are rendered for and the sample parameters they are rendered
/// with.
#[derive(Clone, Copy)]
struct Samples<'a> {
    store: &'a Store,
    database: &'a str,
    now: Timestamp,
    policy: &'a DriftPolicy,
    cluster_id: &'a str,
    /// The start of the time ranges the samples ask about.
    week_ago: Timestamp,
}

/// The drift counts per group and the drift of one cluster and of every pair.
fn drift_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store,
        now,
        policy,
        cluster_id,
        ..
    } = *samples;
    vec![
        render::<PairCountRow>(
            "drift pair counts per group",
            queries::pair_counts_query(store, now, policy),
        ),
        render::<ClusterCountsRow>(
            "cluster counts per group",
            queries::cluster_counts_query(store, now, policy),
        ),
        render::<PairStateRow>(
            "drift of one cluster",
            queries::cluster_pair_states_query(store, cluster_id, now, policy),
        ),
        render::<PairStateRow>(
            "drift of every pair",
            queries::all_pair_states_query(store, now, policy),
        ),
    ]
}

/// The observed state of one cluster and of several, their live objects, and one
/// cluster's history.
fn observed_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store,
        now,
        cluster_id,
        week_ago,
        ..
    } = *samples;
    vec![
        render::<ObservedRow>(
            "observed state of one cluster",
            queries::observed_for_cluster_query(store, cluster_id),
        ),
        render::<ObservedRow>(
            "observed state of clusters",
            queries::observed_for_clusters_query(store, &[cluster_id, "no-such-cluster"]),
        ),
        render::<LiveObjectRow>(
            "live objects of clusters",
            queries::live_objects_query(store, &[cluster_id, "no-such-cluster"]),
        ),
        render::<ObservedRow>(
            "observed history of one cluster",
            queries::observed_history_query(store, cluster_id, week_ago, now.plus_seconds(1)),
        ),
        render::<ObservedRow>(
            "recent history of one cluster",
            queries::recent_history_query(
                store,
                cluster_id,
                Some(SAMPLE_APP),
                week_ago,
                now.plus_seconds(1),
                200,
            ),
        ),
    ]
}

/// One cluster's desired state, the latest heartbeats, and the current desired state,
/// membership, since sets, reason sets and last render.
fn current_state_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store, cluster_id, ..
    } = *samples;
    vec![
        render::<DesiredRow>(
            "desired state of one cluster",
            queries::desired_for_cluster_query(store, cluster_id),
        ),
        render::<HeartbeatRow>("latest heartbeats", queries::latest_heartbeats_query(store)),
        render::<queries::CurrentDesiredRow>(
            "current desired state",
            queries::current_desired_query(store),
        ),
        render::<queries::CurrentMemberRow>(
            "current membership",
            queries::current_members_query(store),
        ),
        render::<crate::MemberSinceRow>(
            "current membership since sets",
            queries::current_member_since_query(store),
        ),
        render::<queries::CurrentReasonMemberRow>(
            "current reason set membership",
            queries::current_reason_members_query(store),
        ),
        render::<crate::ReasonSetRow>("reason set rows", queries::reason_set_rows_query(store)),
        render::<crate::SinceSetRow>("since set rows", queries::since_set_rows_query(store)),
        render::<queries::LastRenderRow>("last render", queries::last_render_query(store)),
    ]
}

/// What the hub's index reads: whole current tables, and what arrived since a moment or
/// between two horizons.
fn index_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store,
        now,
        week_ago,
        ..
    } = *samples;
    vec![
        render::<crate::ClusterRow>("inventory rows", queries::inventory_rows_query(store)),
        render::<DesiredRow>("desired rows", queries::desired_rows_query(store)),
        render::<ObservedRow>(
            "observed objects received since",
            queries::observed_objects_query(store, week_ago),
        ),
        render::<ObservedRow>(
            "observed arrivals since",
            queries::observed_arrivals_query(store, week_ago),
        ),
        render::<ObservedRow>(
            "observed arrivals between two horizons",
            queries::observed_arrivals_between_query(
                store,
                now.plus_seconds(-3_600),
                now.plus_seconds(1),
            ),
        ),
        render::<queries::ArrivalSecondRow>(
            "observed arrivals per second",
            queries::observed_arrivals_per_second_query(
                store,
                now.plus_seconds(-3_600),
                now.plus_seconds(1),
            ),
        ),
        render::<queries::ArrivalHorizon>(
            "arrival horizons",
            queries::arrival_horizons_query(store),
        ),
        render::<queries::ChangeMarkers>("change markers", queries::change_markers_query(store)),
        render::<queries::NewestRenderRows>(
            "newest render rows",
            queries::newest_render_rows_query(store),
        ),
        render::<crate::RenderContentsRow>(
            "what a render wrote",
            queries::render_contents_query(store, 1),
        ),
        render::<crate::MatchRulesRow>(
            "the newest match rules",
            queries::latest_match_rules_query(store),
        ),
        render::<crate::RenderChangeCountRow>(
            "how many version changes renders wrote",
            queries::render_change_counts_query(store, 0, 2),
        ),
        render::<crate::RenderChangeCountRow>(
            "how many version changes of renders a node holds",
            queries::stored_change_counts_query(store, 0, 2),
        ),
        render::<crate::RolloutRecordRow>(
            "the recorded rollouts",
            queries::rollout_records_query(store),
        ),
        render::<crate::RolloutClusterRow>(
            "the recorded rollout moments of an app",
            queries::rollout_clusters_query(store, SAMPLE_APP),
        ),
        render::<HeartbeatRow>(
            "heartbeats since",
            queries::heartbeats_since_query(store, week_ago),
        ),
        render::<HeartbeatRow>(
            "heartbeats between two horizons",
            // Up to a year ahead: a range that ends before a cluster's newest heartbeat holds
            // its older one only where the engine has not collapsed them yet, so the versions
            // would differ there (as the hub expects, reading the newer one in a later range).
            queries::heartbeats_between_query(store, week_ago, now.plus_seconds(365 * 86_400)),
        ),
    ]
}

/// The reads of the hub's other routes and metrics: table sizes, transitions, renders and
/// desired history in a range, known and stale clusters, and the rollup trend.
fn route_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store,
        now,
        policy,
        cluster_id,
        week_ago,
        ..
    } = *samples;
    vec![
        render::<crate::sizes::TableSize>("table sizes", crate::sizes::table_sizes_query(store)),
        render::<ObservedRow>(
            "observed transitions of a group and app",
            queries::observed_transitions_query(
                store,
                Some("grid"),
                Some(SAMPLE_APP),
                week_ago,
                now,
                100,
            ),
        ),
        render::<crate::RenderRow>(
            "renders in a range",
            queries::renders_between_query(store, week_ago, now, 100),
        ),
        render::<crate::DesiredVersionChangeRow>(
            "desired version changes of an app",
            queries::desired_version_changes_query(store, Some(SAMPLE_APP), 0),
        ),
        render::<crate::DesiredVersionChangeRow>(
            "desired version changes after a render",
            queries::desired_version_changes_query(store, None, 1),
        ),
        render::<queries::RenderOriginRow>(
            "the platform commits of the renders after one",
            queries::render_origins_query(store, 1),
        ),
        render::<crate::DesiredVersionChangeRow>(
            "one app's desired version changes between two renders",
            queries::app_version_changes_query(store, SAMPLE_APP, 0, 2),
        ),
        render::<String>(
            "the apps with desired version changes after a render",
            queries::changed_apps_query(store, 0),
        ),
        render::<crate::PlatformCommitRow>(
            "when the platform commits of the renders after one were made",
            queries::render_commit_times_query(store, 1),
        ),
        render::<crate::PlatformCommitRow>(
            "when a platform commit was made",
            queries::platform_commit_query(store, "platform-2"),
        ),
        render::<DesiredRow>(
            "desired history of a render group",
            queries::desired_history_query(store, &format!("rg-{cluster_id}"), None, week_ago, now),
        ),
        render::<ClusterIdRow>("known clusters", queries::known_clusters_query(store)),
        render::<LastSeenRow>(
            "stale clusters",
            queries::stale_clusters_query(store, now, policy, 100),
        ),
        render::<crate::RollupSnapshotRow>(
            "rollup trend of a group",
            queries::rollup_trend_query(store, "grid", week_ago, now.plus_seconds(1)),
        ),
    ]
}

/// Whole tables, their row counts and their partitions.
fn table_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store, database, ..
    } = *samples;
    vec![
        render::<crate::RollupSnapshotRow>(
            "whole table",
            store
                .client()
                .query(crate::writer::SELECT_WHOLE_TABLE)
                .bind(clickhouse::sql::Identifier("rollup_snapshots")),
        ),
        render::<CountRow>(
            "rows of a table",
            store
                .client()
                .query(crate::writer::COUNT_ROWS)
                .bind(clickhouse::sql::Identifier("observed_transitions")),
        ),
        render::<PartitionRow>(
            "partitions of a table",
            store.client().query(SELECT_PARTITIONS).bind(database).bind(
                crate::clickhouse_cluster::local_table("observed_transitions", store.cluster())
                    .as_str(),
            ),
        ),
    ]
}

/// The render, inventory, membership and desired state in force at a moment.
fn past_state_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store,
        now,
        cluster_id,
        ..
    } = *samples;
    vec![
        render::<past::RenderIdRow>(
            "render in force at a moment",
            past::render_at_query(store, now),
        ),
        render::<crate::ClusterRow>(
            "inventory at a moment",
            past::inventory_at_query(store, now, u64::MAX >> 1, None),
        ),
        render::<crate::ClusterRow>(
            "one cluster's inventory row at a moment",
            past::inventory_at_query(store, now, u64::MAX >> 1, Some(cluster_id)),
        ),
        render::<queries::CurrentMemberRow>(
            "membership at a moment",
            past::members_at_query(store, u64::MAX >> 1, None),
        ),
        render::<queries::CurrentMemberRow>(
            "one cluster's membership at a moment",
            past::members_at_query(store, u64::MAX >> 1, Some(cluster_id)),
        ),
        render::<crate::MemberSinceRow>(
            "membership since sets at a moment",
            past::member_since_at_query(store, u64::MAX >> 1, None),
        ),
        render::<crate::MemberSinceRow>(
            "one cluster's membership since set at a moment",
            past::member_since_at_query(store, u64::MAX >> 1, Some(cluster_id)),
        ),
        render::<DesiredRow>(
            "desired state at a moment",
            past::desired_at_query(store, u64::MAX >> 1, None, None),
        ),
        render::<DesiredRow>(
            "one render group's desired state of one app at a moment",
            past::desired_at_query(
                store,
                2,
                Some(&format!("rg-{cluster_id}")),
                Some(SAMPLE_APP),
            ),
        ),
    ]
}

/// The heartbeats, checkpoints and observed state at a moment.
fn past_observed_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store,
        now,
        cluster_id,
        week_ago,
        ..
    } = *samples;
    let many_clusters: Vec<String> = (0..200)
        .map(|n| format!("case-{n:04}"))
        .chain([cluster_id.to_owned(), "no-such-cluster".to_owned()])
        .collect();
    // Observed state at a moment a week back, as the hub reads it.
    let observed_at = |name: &str, scope, part, source| {
        render::<ObservedRow>(
            name,
            past::observed_at_query(store, week_ago, now, scope, part, source),
        )
    };
    vec![
        render::<HeartbeatRow>(
            "heartbeats in the hour before a moment",
            past::heartbeats_in_window_query(store, now),
        ),
        render::<HeartbeatRow>(
            "heartbeats of clusters at a moment",
            // Many clusters at once, as the hub asks for those without a heartbeat in the hour
            // before the moment: the test grid's ids, and one that does not exist.
            past::heartbeats_of_clusters_at_query(
                store,
                now,
                &many_clusters.iter().map(String::as_str).collect::<Vec<_>>(),
            ),
        ),
        render::<HeartbeatRow>(
            "latest heartbeats of clusters",
            past::latest_heartbeats_of_clusters_query(
                store,
                &many_clusters.iter().map(String::as_str).collect::<Vec<_>>(),
            ),
        ),
        render::<past::CheckpointRow>("complete checkpoints", past::checkpoints_query(store)),
        observed_at(
            "observed state at a moment",
            past::ObservedScope::All,
            past::ObservedPart::Both,
            past::WindowSource::Arrivals,
        ),
        // The arrivals' part on its own; the checkpoint's part alone is the first half of the
        // query above.
        observed_at(
            "observed state that arrived after a checkpoint",
            past::ObservedScope::All,
            past::ObservedPart::Arrivals,
            past::WindowSource::Arrivals,
        ),
        observed_at(
            "one cluster's observed state at a moment",
            past::ObservedScope::Cluster(cluster_id),
            past::ObservedPart::Both,
            past::WindowSource::Transitions,
        ),
        observed_at(
            "one app's observed state at a moment",
            past::ObservedScope::App(SAMPLE_APP),
            past::ObservedPart::Both,
            past::WindowSource::Arrivals,
        ),
        // The same, the window read from `observed_transitions` (a checkpoint older than the
        // arrivals kept).
        observed_at(
            "observed state at a moment, from the transitions",
            past::ObservedScope::All,
            past::ObservedPart::Both,
            past::WindowSource::Transitions,
        ),
        observed_at(
            "one app's observed state at a moment, from the transitions",
            past::ObservedScope::App(SAMPLE_APP),
            past::ObservedPart::Both,
            past::WindowSource::Transitions,
        ),
    ]
}

/// The reads only cluster mode sends: the partitions of a sharded table on every shard.
fn cluster_mode_reads(samples: &Samples) -> Vec<CatalogEntry> {
    let Samples {
        store, database, ..
    } = *samples;
    let Some(cluster) = store.cluster() else {
        return Vec::new();
    };
    vec![render::<PartitionRow>(
        "partitions of a sharded table on every shard",
        store
            .client()
            .query(SELECT_CLUSTER_PARTITIONS)
            .bind(cluster.name.as_str())
            .bind(database)
            .bind("observed_transitions_local"),
    )]
}

/// Cluster mode's statements that change data: the day partition dropped on every shard.
pub fn cluster_maintenance_statements(
    cluster: &ClusterConfig,
    database: &str,
) -> Vec<CatalogEntry> {
    let store = Store::connect(
        &crate::StoreConfig::new("http://127.0.0.1:9", database).with_cluster(cluster.clone()),
    )
    .expect("valid sample config");
    let drop = store
        .client()
        .query(DROP_PARTITION_ON_CLUSTER)
        .bind(clickhouse::sql::Identifier(database))
        .bind(clickhouse::sql::Identifier("observed_transitions_local"))
        .bind(cluster.name.as_str())
        .bind("20270115");
    let thin = store
        .client()
        .query(crate::thinning::DELETE_CHECKPOINTS_ON_CLUSTER)
        .bind(clickhouse::sql::Identifier(database))
        .bind(clickhouse::sql::Identifier("observed_checkpoints_local"))
        .bind(cluster.name.as_str())
        .bind(vec![1_800_000_000u32, 1_800_003_600]);
    vec![
        CatalogEntry {
            name: "drop a day partition on every shard".into(),
            sql: drop.sql_display().to_string(),
        },
        CatalogEntry {
            name: "delete thinned checkpoints on every shard".into(),
            sql: thin.sql_display().to_string(),
        },
    ]
}

/// Statements that change data, rendered with samples; run last, since they remove rows.
pub fn maintenance_statements(database: &str) -> Vec<CatalogEntry> {
    let store = Store::connect(&crate::StoreConfig::new("http://127.0.0.1:9", database))
        .expect("valid sample config");
    let drop = store
        .client()
        .query(crate::retention::DROP_PARTITION)
        .bind(clickhouse::sql::Identifier("observed_transitions"))
        .bind("20270115");
    let thinned = vec![1_800_000_000u32, 1_800_003_600];
    let mark = store
        .client()
        .query(crate::thinning::MARK_CHECKPOINTS_DROPPED)
        .bind(&thinned);
    let delete = store
        .client()
        .query(crate::thinning::DELETE_CHECKPOINTS)
        .bind(clickhouse::sql::Identifier("observed_checkpoints"))
        .bind(&thinned);
    vec![
        CatalogEntry {
            name: "drop a day partition".into(),
            sql: drop.sql_display().to_string(),
        },
        CatalogEntry {
            name: "mark thinned checkpoints dropped".into(),
            sql: mark.sql_display().to_string(),
        },
        CatalogEntry {
            name: "delete thinned checkpoints".into(),
            sql: delete.sql_display().to_string(),
        },
    ]
}

/// The collector's upkeep that adds rows, rendered with samples around `now`: two
/// checkpoints (the first from everything stored, the next from it and the arrivals after it)
/// and their log rows. Run after the data and before the read queries, so that the reads of
/// checkpoints have rows to read.
pub fn upkeep_statements(database: &str, now: Timestamp) -> Vec<CatalogEntry> {
    let store = Store::connect(&crate::StoreConfig::new("http://127.0.0.1:9", database))
        .expect("valid sample config");
    let first = now.plus_seconds(-3_600);
    let next = now.plus_seconds(3_600);
    let log = |at: Timestamp| {
        store
            .client()
            .query(past::LOG_CHECKPOINT)
            .bind(crate::to_datetime(at))
            .bind(0u64)
            .sql_display()
            .to_string()
    };
    vec![
        CatalogEntry {
            name: "the first checkpoint".into(),
            sql: past::first_checkpoint_query(&store, first)
                .sql_display()
                .to_string(),
        },
        CatalogEntry {
            name: "the first checkpoint's log row".into(),
            sql: log(first),
        },
        CatalogEntry {
            name: "a checkpoint from the one before".into(),
            sql: past::checkpoint_from_previous_query(&store, first, next)
                .sql_display()
                .to_string(),
        },
        CatalogEntry {
            name: "the next checkpoint's log row".into(),
            sql: log(next),
        },
    ]
}

#[derive(clickhouse::Row, serde::Deserialize)]
#[allow(dead_code)]
struct ClusterIdRow {
    cluster_id: String,
}

#[derive(clickhouse::Row, serde::Deserialize)]
#[allow(dead_code)]
struct CountRow {
    count: u64,
}

#[derive(clickhouse::Row, serde::Deserialize)]
#[allow(dead_code)]
struct PartitionRow {
    partition_id: String,
}
