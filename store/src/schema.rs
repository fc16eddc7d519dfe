//! The schema as an ordered list of migrations, and the code that applies them.
//!
//! Every statement is idempotent (`IF NOT EXISTS`), so two services migrating at the same time,
//! or a migration interrupted half-way, are harmless: the next run finishes the job. An applied
//! migration is recorded with a checksum of its statements; editing it afterwards is an error,
//! so the schema only ever moves forward through new migrations.

use clickhouse::Row;
use serde::{Deserialize, Serialize};

use crate::clickhouse_cluster::{self, ClusterConfig};
use crate::{Context, Result, Store, StoreError};

/// One step of the schema.
#[derive(Debug)]
pub struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub statements: &'static [&'static str],
}

impl Migration {
    /// FNV-1a over the statements: stable across builds and platforms.
    pub fn checksum(&self) -> String {
        fnv(self.statements.iter().copied())
    }

    /// The statements cluster mode runs for this migration, for `database` on `cluster`.
    pub fn cluster_statements(&self, cluster: &ClusterConfig, database: &str) -> Vec<String> {
        self.statements
            .iter()
            .flat_map(|statement| {
                clickhouse_cluster::clustered_statements(statement, cluster, database)
            })
            .collect()
    }

    /// The checksum cluster mode records: FNV-1a over the clustered statements with the cluster,
    /// the ZooKeeper path and the database left as placeholders, so it changes when the
    /// translation changes but not with the names a deployment chose.
    pub fn cluster_checksum(&self) -> String {
        let template = ClusterConfig {
            name: "{cluster}".to_owned(),
            zookeeper_path: "{zookeeper_path}".to_owned(),
        };
        let statements = self.cluster_statements(&template, "{database}");
        fnv(statements.iter().map(String::as_str))
    }

    /// The checksum recorded for this migration in the given mode.
    fn checksum_for(&self, cluster: Option<&ClusterConfig>) -> String {
        match cluster {
            None => self.checksum(),
            Some(_) => self.cluster_checksum(),
        }
    }
}

fn fnv<'a>(statements: impl Iterator<Item = &'a str>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for statement in statements {
        for byte in statement.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// The table that records applied migrations.
pub const MIGRATIONS_TABLE_DDL: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version UInt32,
    name String,
    checksum String,
    applied_at DateTime
) ENGINE = ReplacingMergeTree ORDER BY version";

/// Columns shared by `desired_history` and `desired_latest` (the view copies one into the other).
macro_rules! desired_columns {
    () => {
        "render_group String, app String, render_id UInt64, version String, content_hash String, \
         kind String, namespace String, reasons Array(String), commit String, desired_since DateTime, \
         removed UInt8"
    };
}

/// Columns shared by `observed_transitions` and `observed_latest`.
macro_rules! observed_columns {
    () => {
        "cluster_id String, object_kind String, object_namespace String, object_name String, app String, \
         version String, content_hash String, applied_revision String, health String, sync String, \
         reason String, message String, transitioned_at DateTime, observed_at DateTime, \
         received_at DateTime, seq UInt64, deleted UInt8"
    };
}

/// The whole schema. Append new migrations; never edit an applied one.
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "initial schema",
    statements: &[
        // Cluster inventory, one row per cluster and version; the highest version wins.
        "CREATE TABLE IF NOT EXISTS clusters (
            cluster_id String,
            group_path String,
            group_prefixes Array(String),
            environment String,
            reconciler String,
            label_keys Array(String),
            label_values Array(String),
            updated_at DateTime,
            version UInt64,
            removed UInt8
        ) ENGINE = ReplacingMergeTree(version) ORDER BY cluster_id",
        // The latest heartbeat per cluster: a newer one replaces an older one.
        "CREATE TABLE IF NOT EXISTS heartbeats (
            cluster_id String,
            seen_at DateTime,
            agent_version String,
            reconciler_names Array(String),
            reconciler_versions Array(String)
        ) ENGINE = ReplacingMergeTree(seen_at) ORDER BY cluster_id",
        // Every render, kept as history.
        "CREATE TABLE IF NOT EXISTS renders (
            render_id UInt64,
            commit String,
            platform_commit String,
            rendered_at DateTime,
            summary String,
            render_groups UInt32,
            clusters UInt32,
            changed_items UInt32
        ) ENGINE = ReplacingMergeTree ORDER BY render_id",
        // Desired state per render group and app, one row per render that changed it (removed = 1
        // when the render took the app away). The full history stays here.
        concat!(
            "CREATE TABLE IF NOT EXISTS desired_history (",
            desired_columns!(),
            ") ENGINE = ReplacingMergeTree ORDER BY (render_group, app, render_id)"
        ),
        // The latest desired row per render group and app, fed from the history.
        concat!(
            "CREATE TABLE IF NOT EXISTS desired_latest (",
            desired_columns!(),
            ") ENGINE = ReplacingMergeTree(render_id) ORDER BY (render_group, app)"
        ),
        "CREATE MATERIALIZED VIEW IF NOT EXISTS desired_latest_mv TO desired_latest AS
        SELECT render_group, app, render_id, version, content_hash, kind, namespace, reasons, commit,
               desired_since, removed
        FROM desired_history",
        // Which render group each cluster belongs to; the highest render id wins.
        "CREATE TABLE IF NOT EXISTS render_group_members (
            cluster_id String,
            render_group String,
            render_id UInt64,
            removed UInt8
        ) ENGINE = ReplacingMergeTree(render_id) ORDER BY cluster_id",
        // Every observed change, partitioned by day for retention. The sort key ends in the
        // per-cluster sequence number, so a redelivered change collapses into the original.
        concat!(
            "CREATE TABLE IF NOT EXISTS observed_transitions (",
            observed_columns!(),
            ") ENGINE = ReplacingMergeTree PARTITION BY toYYYYMMDD(observed_at) \
             ORDER BY (cluster_id, object_kind, object_namespace, object_name, seq)"
        ),
        // The latest observed state per cluster and object; the highest sequence number wins.
        concat!(
            "CREATE TABLE IF NOT EXISTS observed_latest (",
            observed_columns!(),
            ") ENGINE = ReplacingMergeTree(seq) ORDER BY (cluster_id, object_kind, object_namespace, object_name)"
        ),
        "CREATE MATERIALIZED VIEW IF NOT EXISTS observed_latest_mv TO observed_latest AS
        SELECT cluster_id, object_kind, object_namespace, object_name, app, version, content_hash,
               applied_revision, health, sync, reason, message, transitioned_at, observed_at,
               received_at, seq, deleted
        FROM observed_transitions",
        // Periodic rollup snapshots per group for trend panels, partitioned by day for retention.
        "CREATE TABLE IF NOT EXISTS rollup_snapshots (
            taken_at DateTime,
            group_path String,
            depth UInt8,
            clusters UInt64,
            stale_clusters UInt64,
            in_sync UInt64,
            progressing UInt64,
            failed UInt64,
            out_of_sync UInt64,
            missing UInt64,
            unexpected UInt64,
            stale UInt64,
            unknown UInt64
        ) ENGINE = ReplacingMergeTree
        PARTITION BY toYYYYMMDD(taken_at)
        ORDER BY (group_path, taken_at)",
    ],
}, Migration {
    version: 2,
    name: "observed arrivals in arrival order",
    statements: &[
        // The app objects' rows again, in the order they arrived, partitioned by the hour of
        // arrival (hours since the epoch, independent of the server's time zone). The hub's
        // refresh reads the last minute from here as a range of the sort key; asked of
        // `observed_latest` (sorted by cluster) the same question reads the whole table, every
        // second. Only the last few hours are kept (see `Store::trim_arrivals`).
        concat!(
            "CREATE TABLE IF NOT EXISTS observed_arrivals (",
            observed_columns!(),
            ") ENGINE = MergeTree PARTITION BY intDiv(toUInt32(received_at), 3600) \
             ORDER BY received_at"
        ),
        "CREATE MATERIALIZED VIEW IF NOT EXISTS observed_arrivals_mv TO observed_arrivals AS
        SELECT cluster_id, object_kind, object_namespace, object_name, app, version, content_hash,
               applied_revision, health, sync, reason, message, transitioned_at, observed_at,
               received_at, seq, deleted
        FROM observed_transitions
        WHERE object_kind IN ('Kustomization', 'HelmRelease', 'Application')",
    ],
}, Migration {
    version: 3,
    name: "reason sets",
    statements: &[
        // Why each app is desired, per reason set (the clusters matched by the same policies
        // share one); a reason set's name is a hash of its content, so its rows never change
        // except to be marked removed (removed = 1) when no cluster has it any more.
        "CREATE TABLE IF NOT EXISTS reason_sets (
            reason_set String,
            app String,
            render_id UInt64,
            reasons Array(String),
            pinned_by String,
            removed UInt8
        ) ENGINE = ReplacingMergeTree(render_id) ORDER BY (reason_set, app)",
        // Which reason set each cluster has; the highest render id wins.
        "CREATE TABLE IF NOT EXISTS reason_set_members (
            cluster_id String,
            reason_set String,
            render_id UInt64,
            removed UInt8
        ) ENGINE = ReplacingMergeTree(render_id) ORDER BY cluster_id",
    ],
}, Migration {
    version: 4,
    name: "arrival horizons",
    statements: &[
        // Every process that writes observed rows says here, about once a second, up to when
        // its rows are visible: every row it stamped with `received_at` before `visible_before`
        // has been inserted. `first_stamp` is the oldest stamp it can ever have given. The hub
        // reads `observed_arrivals` from one horizon to the next, without an overlap (see
        // docs/data-model.md). `updated_at` is the server's clock, so silence is measured
        // without trusting the writers' clocks.
        "CREATE TABLE IF NOT EXISTS arrival_writers (
            writer String,
            first_stamp DateTime,
            visible_before DateTime,
            updated_at DateTime DEFAULT now()
        ) ENGINE = ReplacingMergeTree(updated_at) ORDER BY writer",
    ],
}, Migration {
    version: 5,
    name: "history for answers at a past moment",
    statements: &[
        // Every inventory row ever written. `clusters` keeps only a cluster's newest row once
        // merged; the answers at a past moment need the row in force then.
        "CREATE TABLE IF NOT EXISTS cluster_history (
            cluster_id String,
            group_path String,
            group_prefixes Array(String),
            environment String,
            reconciler String,
            label_keys Array(String),
            label_values Array(String),
            updated_at DateTime,
            version UInt64,
            removed UInt8
        ) ENGINE = ReplacingMergeTree ORDER BY (cluster_id, version, updated_at)",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS cluster_history_mv TO cluster_history AS
        SELECT cluster_id, group_path, group_prefixes, environment, reconciler, label_keys,
               label_values, updated_at, version, removed
        FROM clusters",
        // Every membership row ever written, for the same reason.
        "CREATE TABLE IF NOT EXISTS member_history (
            cluster_id String,
            render_group String,
            render_id UInt64,
            removed UInt8
        ) ENGINE = ReplacingMergeTree ORDER BY (cluster_id, render_id)",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS member_history_mv TO member_history AS
        SELECT cluster_id, render_group, render_id, removed
        FROM render_group_members",
        // Every heartbeat, by the hour it was stamped in, kept for the retention period.
        "CREATE TABLE IF NOT EXISTS heartbeat_history (
            cluster_id String,
            seen_at DateTime,
            agent_version String,
            reconciler_names Array(String),
            reconciler_versions Array(String)
        ) ENGINE = ReplacingMergeTree PARTITION BY intDiv(toUInt32(seen_at), 3600)
        ORDER BY (cluster_id, seen_at)",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS heartbeat_history_mv TO heartbeat_history AS
        SELECT cluster_id, seen_at, agent_version, reconciler_names, reconciler_versions
        FROM heartbeats",
        // Each cluster's last heartbeat among the hours retention dropped, so that a cluster
        // silent for longer than the retention period still has a last heartbeat at every
        // moment kept.
        "CREATE TABLE IF NOT EXISTS heartbeat_floor (
            cluster_id String,
            seen_at DateTime,
            agent_version String,
            reconciler_names Array(String),
            reconciler_versions Array(String)
        ) ENGINE = ReplacingMergeTree(seen_at) ORDER BY cluster_id",
        // Every app object's state at fixed moments (`taken_at`): the object's newest row
        // received at or before it. The state at a moment between two is a checkpoint plus
        // the arrivals after it (see docs/data-model.md).
        concat!(
            "CREATE TABLE IF NOT EXISTS observed_checkpoints (taken_at DateTime, ",
            observed_columns!(),
            ") ENGINE = ReplacingMergeTree PARTITION BY toYYYYMMDD(taken_at) \
             ORDER BY (taken_at, cluster_id, object_kind, object_namespace, object_name)"
        ),
        // One row per complete checkpoint, written after every row of it was accepted: a
        // reader uses only checkpoints listed here, never one still being written. Retention
        // writes `dropped = 1` for a checkpoint before it drops its rows.
        "CREATE TABLE IF NOT EXISTS checkpoint_log (
            taken_at DateTime,
            objects UInt64,
            finished_at DateTime,
            dropped UInt8
        ) ENGINE = ReplacingMergeTree(finished_at) ORDER BY taken_at",
    ],
}, Migration {
    version: 6,
    name: "desired since carried by clusters that change render group",
    statements: &[
        // When an app's version and content became desired for the clusters that carry a
        // since set, where that differs from their render group's `desired_since` (a cluster
        // that moved keeps the age of what did not change for it; one that joined a render
        // group later than the group's row gets the time it joined). Named by a hash of the
        // content, so a set's rows never change.
        "CREATE TABLE IF NOT EXISTS since_sets (
            since_set String,
            app String,
            desired_since DateTime
        ) ENGINE = ReplacingMergeTree ORDER BY (since_set, app)",
        // The since set of a cluster's membership row of the same render (`render_id`), the
        // newest row per cluster: a membership row of another render has none.
        "CREATE TABLE IF NOT EXISTS member_since_sets (
            cluster_id String,
            render_id UInt64,
            since_set String
        ) ENGINE = ReplacingMergeTree(render_id) ORDER BY cluster_id",
        // Every such row, for answers at a past moment.
        "CREATE TABLE IF NOT EXISTS member_since_history (
            cluster_id String,
            render_id UInt64,
            since_set String
        ) ENGINE = ReplacingMergeTree ORDER BY (cluster_id, render_id)",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS member_since_history_mv TO member_since_history AS
        SELECT cluster_id, render_id, since_set
        FROM member_since_sets",
    ],
}, Migration {
    version: 7,
    name: "what each render wrote",
    statements: &[
        // How many rows a render wrote into the tables the hub checks it has read whole:
        // desired state (also `renders.changed_items`) and membership. Written before the
        // render's `renders` row. On a ClickHouse cluster each table replicates on its own, so
        // a node can hold a render's `renders` row and not yet all its other rows; the hub
        // counts the render's rows it read against these and waits until they agree.
        "CREATE TABLE IF NOT EXISTS render_contents (
            render_id UInt64,
            desired UInt32,
            members UInt32
        ) ENGINE = ReplacingMergeTree ORDER BY render_id",
    ],
}, Migration {
    version: 8,
    name: "what each render changed per cluster",
    statements: &[
        // One row for each (cluster, app) whose desired version a render changed: from the
        // version desired before it ("" when the app was not desired there: a new cluster, a
        // cluster newly selected, a new app) to the one desired after ("" when the render
        // took the app or the cluster away). Rollouts are read from these. A render written
        // again writes the same rows, which collapse.
        "CREATE TABLE IF NOT EXISTS desired_version_changes (
            app String,
            render_id UInt64,
            cluster_id String,
            from_version String,
            to_version String
        ) ENGINE = ReplacingMergeTree ORDER BY (app, render_id, cluster_id)",
        // When each platform commit a render read was made (its committer time), for lead
        // times; a render of a platform directory outside Git has no row.
        "CREATE TABLE IF NOT EXISTS platform_commits (
            platform_commit String,
            committed_at DateTime
        ) ENGINE = ReplacingMergeTree ORDER BY platform_commit",
        // How many version change rows each render wrote, written with `render_contents`
        // (before the `renders` row): on a ClickHouse cluster the hub applies a render's
        // changes to its rollouts only once it has read them all.
        "CREATE TABLE IF NOT EXISTS render_change_counts (
            render_id UInt64,
            version_changes UInt32
        ) ENGINE = ReplacingMergeTree ORDER BY render_id",
    ],
}, Migration {
    version: 9,
    name: "the hub's rollout records",
    statements: &[
        // Every rollout as the hub last saw it, written by the hub when it changes, for the
        // dashboards and for a hub starting again. Moments are seconds since the epoch, 0 for
        // none; `written_ms` (the writing hub's clock in milliseconds) orders the versions of
        // a rollout's row.
        "CREATE TABLE IF NOT EXISTS rollout_records (
            app String,
            render_id UInt64,
            version String,
            started_at DateTime,
            platform_commit String,
            committed_at UInt32,
            status String,
            from_versions Array(String),
            from_counts Array(UInt32),
            targeted_at_start UInt32,
            joined UInt32,
            rolled_back UInt32,
            superseded UInt32,
            removed UInt32,
            rolled_back_by UInt64,
            superseded_by UInt64,
            superseded_before_complete UInt8,
            targeted UInt32,
            in_sync UInt32,
            failed UInt32,
            stale UInt32,
            reached UInt32,
            failed_before_reaching UInt32,
            reached_50 UInt32,
            reached_90 UInt32,
            reached_99 UInt32,
            reached_100 UInt32,
            completed_at UInt32,
            last_reached_at UInt32,
            written_ms UInt64
        ) ENGINE = ReplacingMergeTree(written_ms) ORDER BY (app, render_id, version)",
        // Each (app, cluster)'s rollout as the hub last saw it: the rollout it belongs to
        // (render 0 and version '' for none) and when it reached it and first failed at its
        // version before reaching it.
        "CREATE TABLE IF NOT EXISTS rollout_clusters (
            app String,
            cluster_id String,
            render_id UInt64,
            version String,
            reached_at UInt32,
            failed_at UInt32,
            written_ms UInt64
        ) ENGINE = ReplacingMergeTree(written_ms) ORDER BY (app, cluster_id)",
    ],
}, Migration {
    version: 10,
    name: "match rules of objects without stamps",
    statements: &[
        // The platform repo's match rules as each render published them (JSON), with their
        // digest: the collector resolves the app objects it receives without stamps by the
        // rules of the newest render, and tells agents the digest so that they report those
        // objects again when it changes.
        "CREATE TABLE IF NOT EXISTS match_rules (
            render_id UInt64,
            digest String,
            rules String
        ) ENGINE = ReplacingMergeTree ORDER BY render_id",
    ],
}];

/// The columns of an observed row, as `observed_transitions`, `observed_arrivals` and
/// `observed_checkpoints` all have them: `(column, type)`.
const OBSERVED_ROW_COLUMNS: &[(&str, &str)] = &[
    ("cluster_id", "String"),
    ("object_kind", "String"),
    ("object_namespace", "String"),
    ("object_name", "String"),
    ("app", "String"),
    ("version", "String"),
    ("content_hash", "String"),
    ("applied_revision", "String"),
    ("health", "String"),
    ("sync", "String"),
    ("reason", "String"),
    ("message", "String"),
    ("transitioned_at", "DateTime"),
    ("observed_at", "DateTime"),
    ("received_at", "DateTime"),
    ("seq", "UInt64"),
    ("deleted", "UInt8"),
];

/// A column, its type and its codec.
type ColumnCodec = (&'static str, &'static str, &'static str);

/// The tables of observed rows: their own columns before the row's (`(column, type, codec)`),
/// and the codecs of `transitioned_at`, `observed_at` and `received_at`. A time that rises
/// along the table's sort key, or nearly, takes Delta or DoubleDelta.
const OBSERVED_ROW_TABLES: &[(&str, &[ColumnCodec], [&str; 3])] = &[
    (
        "observed_transitions",
        &[],
        ["Delta, ZSTD(1)", "Delta, ZSTD(1)", "Delta, ZSTD(1)"],
    ),
    (
        "observed_arrivals",
        &[],
        ["Delta, ZSTD(1)", "Delta, ZSTD(1)", "DoubleDelta, ZSTD(1)"],
    ),
    (
        "observed_checkpoints",
        &[("taken_at", "DateTime", "DoubleDelta, ZSTD(1)")],
        ["ZSTD(1)", "ZSTD(1)", "ZSTD(1)"],
    ),
];

/// Heartbeats repeat the same few values for hours: ZSTD(3) finds the long repeats that levels
/// 1 and 2 miss (docs/operations.md, "Disk for history").
const HEARTBEAT_HISTORY_CODECS: &[ColumnCodec] = &[
    ("cluster_id", "String", "ZSTD(3)"),
    ("seen_at", "DateTime", "Delta, ZSTD(3)"),
    ("agent_version", "String", "ZSTD(3)"),
    ("reconciler_names", "Array(String)", "ZSTD(3)"),
    ("reconciler_versions", "Array(String)", "ZSTD(3)"),
];

/// Column codecs for the tables that grow with history, on servers that have them (CODEC,
/// Delta, DoubleDelta, T64; ClickHouse 20.3 and newer; 18.16 has none): `(table, column, type,
/// codec)`. Times that rise along the sort key take Delta or DoubleDelta, change numbers T64,
/// and every column ZSTD after that.
pub fn column_codecs() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    let mut codecs = Vec::new();
    for (table, own, [transitioned, observed, received]) in OBSERVED_ROW_TABLES {
        codecs.extend(
            own.iter()
                .map(|(column, kind, codec)| (*table, *column, *kind, *codec)),
        );
        codecs.extend(OBSERVED_ROW_COLUMNS.iter().map(|(column, kind)| {
            let codec = match *column {
                "transitioned_at" => *transitioned,
                "observed_at" => *observed,
                "received_at" => *received,
                "seq" => "T64, ZSTD(1)",
                _ => "ZSTD(1)",
            };
            (*table, *column, *kind, codec)
        }));
    }
    codecs.extend(
        HEARTBEAT_HISTORY_CODECS
            .iter()
            .map(|(column, kind, codec)| ("heartbeat_history", *column, *kind, *codec)),
    );
    codecs
}

/// The statement giving `table` (as written, with `suffix`: `ON CLUSTER …`) `column`'s codec.
fn codec_statement(table: &str, suffix: &str, column: &str, kind: &str, codec: &str) -> String {
    format!("ALTER TABLE {table}{suffix} MODIFY COLUMN {column} {kind} CODEC({codec})")
}

/// [`column_codecs`] as `ALTER TABLE` statements on `table_name(table)` (the table itself on
/// one server, its local table in cluster mode), with `suffix` after the table name
/// (`ON CLUSTER …` in cluster mode).
pub fn codec_statements(table_name: impl Fn(&str) -> String, suffix: &str) -> Vec<String> {
    column_codecs()
        .into_iter()
        .map(|(table, column, kind, codec)| {
            codec_statement(&table_name(table), suffix, column, kind, codec)
        })
        .collect()
}

/// Whether a column's codec as `system.columns` shows it (`CODEC(Delta(4), ZSTD(3))`) is
/// `wanted` as [`column_codecs`] writes it (`Delta, ZSTD(3)`): the server adds the parameters
/// a codec was given by default.
pub fn codec_is(shown: &str, wanted: &str) -> bool {
    let Some(shown) = shown
        .strip_prefix("CODEC(")
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        return false;
    };
    let shown: Vec<&str> = shown.split(", ").collect();
    let wanted: Vec<&str> = wanted.split(", ").collect();
    shown.len() == wanted.len()
        && shown.iter().zip(&wanted).all(|(shown, wanted)| {
            shown == wanted
                || (!wanted.contains('(')
                    && shown
                        .strip_prefix(wanted)
                        .is_some_and(|rest| rest.starts_with('(')))
        })
}

/// Whether a server of this `version()` has the codecs of [`column_codecs`] (20.3 or newer).
pub fn has_codecs(version: &str) -> bool {
    let mut numbers = version.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
    let major = numbers.next().unwrap_or(0);
    let minor = numbers.next().unwrap_or(0);
    (major, minor) >= (20, 3)
}

/// The newest migration this build knows.
pub fn latest_version() -> u32 {
    MIGRATIONS.iter().map(|m| m.version).max().unwrap_or(0)
}

#[derive(Debug, Clone, Row, Serialize, Deserialize)]
struct AppliedMigration {
    version: u32,
    name: String,
    checksum: String,
    applied_at: u32,
}

/// What the database says about one applied migration; more than one checksum means the
/// migration was recorded again after an edit.
#[derive(Debug, Clone, Row, Serialize, Deserialize)]
struct AppliedVersion {
    version: u32,
    checksums: Vec<String>,
}

/// What a migration run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    pub applied: Vec<u32>,
    pub already_applied: Vec<u32>,
}

/// Whether the error came from making the connection (nothing listening, a name that does not
/// resolve, a connect timeout): the statement was never sent, and sending it again would only
/// put off the error.
fn never_sent(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(err) = cause {
        if err
            .downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            return true;
        }
        cause = err.source();
    }
    false
}

/// How many times a schema statement is sent when the connection closes before its answer.
const DDL_ATTEMPTS: u32 = 4;

/// The wait before the second sending; the third waits twice as long, and so on.
const DDL_RETRY_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

impl Store {
    /// Creates the database if needed and applies every migration not yet applied, in order.
    ///
    /// In cluster mode every statement is the clustered variant (see [`crate::clickhouse_cluster`]), run
    /// `ON CLUSTER` so that each reaches every node, and the cluster checksum is recorded. A
    /// database migrated in the other mode is refused.
    pub async fn migrate(&self) -> Result<MigrationReport> {
        let cluster = self.cluster.as_ref();
        match cluster {
            // The name is checked at connect: lowercase letters, digits and underscores.
            None => self
                .run_ddl(
                    &format!("CREATE DATABASE IF NOT EXISTS {}", self.database),
                    true,
                )
                .await
                .context(|| format!("creating database {}", self.database))?,
            Some(cluster) => self
                .run_ddl(
                    &clickhouse_cluster::create_database(cluster, &self.database),
                    true,
                )
                .await
                .context(|| {
                    format!(
                        "creating database {} on cluster {}",
                        self.database, cluster.name
                    )
                })?,
        }
        for statement in self.migrations_table_statements() {
            self.run_ddl(&statement, false)
                .await
                .context(|| "creating the schema_migrations table".to_owned())?;
        }
        let applied = self.applied_migrations().await?;
        let latest = latest_version();
        if let Some(newer) = applied.iter().find(|m| m.version > latest) {
            return Err(StoreError::SchemaTooNew {
                version: newer.version,
                latest,
            });
        }
        let mut report = MigrationReport {
            applied: vec![],
            already_applied: vec![],
        };
        for migration in MIGRATIONS {
            let checksum = migration.checksum_for(cluster);
            if let Some(done) = applied.iter().find(|m| m.version == migration.version) {
                if let Some(other) = done.checksums.iter().find(|c| **c != checksum) {
                    // Recorded by the other mode: say so rather than call it an edit.
                    let other_mode = match cluster {
                        None => migration.cluster_checksum(),
                        Some(_) => migration.checksum(),
                    };
                    if *other == other_mode {
                        let mode = |c: Option<&ClusterConfig>| match c {
                            None => "for a single server".to_owned(),
                            Some(c) => format!("for cluster {}", c.name),
                        };
                        return Err(StoreError::SchemaModeMismatch {
                            database: self.database.clone(),
                            migrated: match cluster {
                                None => "for a cluster".to_owned(),
                                Some(_) => mode(None),
                            },
                            configured: mode(cluster),
                        });
                    }
                    return Err(StoreError::MigrationChanged {
                        version: migration.version,
                        name: migration.name.to_owned(),
                        applied: other.clone(),
                        current: checksum,
                    });
                }
                report.already_applied.push(migration.version);
                continue;
            }
            let statements: Vec<String> = match cluster {
                None => migration
                    .statements
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect(),
                Some(cluster) => migration.cluster_statements(cluster, &self.database),
            };
            for (index, statement) in statements.iter().enumerate() {
                self.run_ddl(statement, false).await.context(|| {
                    format!(
                        "migration {} ({}), statement {}",
                        migration.version,
                        migration.name,
                        index + 1
                    )
                })?;
            }
            let mut insert = self
                .client
                .insert::<AppliedMigration>("schema_migrations")
                .await
                .context(|| "recording a migration".to_owned())?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as u32)
                .unwrap_or(0);
            insert
                .write(&AppliedMigration {
                    version: migration.version,
                    name: migration.name.to_owned(),
                    checksum,
                    applied_at: now,
                })
                .await
                .context(|| "recording a migration".to_owned())?;
            insert
                .end()
                .await
                .context(|| "recording a migration".to_owned())?;
            tracing::info!(
                version = migration.version,
                name = migration.name,
                cluster = cluster.map(|c| c.name.as_str()),
                "applied migration"
            );
            report.applied.push(migration.version);
        }
        self.apply_codecs().await?;
        Ok(report)
    }

    /// Whether the server has column codecs (ClickHouse 20.3 or newer).
    pub async fn server_has_codecs(&self) -> Result<bool> {
        let version: String = self
            .client
            .query("SELECT version()")
            .fetch_one()
            .await
            .context(|| "reading the server's version".to_owned())?;
        Ok(has_codecs(&version))
    }

    /// Gives every column of [`column_codecs`] whose codec is not the one listed (none yet, or
    /// one an earlier version listed) its codec, on a server that has them (nothing on 18.16).
    /// Run by every `migrate`, so a server upgraded later gets them too; existing parts take
    /// the codec when they are next merged. Returns how many columns changed.
    pub async fn apply_codecs(&self) -> Result<usize> {
        if !self.server_has_codecs().await? {
            return Ok(0);
        }
        let cluster = self.cluster.as_ref();
        let shown: Vec<(String, String, String)> = self
            .client
            .query("SELECT table, name, compression_codec FROM system.columns WHERE database = ?")
            .bind(&self.database)
            .fetch_all::<(String, String, String)>()
            .await
            .context(|| "reading the columns' codecs".to_owned())?;
        let suffix = match cluster {
            Some(cluster) => format!(" ON CLUSTER '{}'", cluster.name),
            None => String::new(),
        };
        let mut changed = 0;
        for (table, column, kind, codec) in column_codecs() {
            let physical = clickhouse_cluster::local_table(table, cluster);
            if !shown
                .iter()
                .any(|(t, c, shown)| *t == physical && c == column && !codec_is(shown, codec))
            {
                continue;
            }
            let statement = codec_statement(
                &format!("{}.{physical}", self.database),
                &suffix,
                column,
                kind,
                codec,
            );
            self.run_ddl(&statement, false)
                .await
                .context(|| format!("giving {table}.{column} its codec"))?;
            changed += 1;
        }
        if changed > 0 {
            tracing::info!(columns = changed, "applied column codecs");
        }
        Ok(changed)
    }

    /// The `schema_migrations` table's DDL in this store's mode.
    fn migrations_table_statements(&self) -> Vec<String> {
        match &self.cluster {
            None => vec![MIGRATIONS_TABLE_DDL.to_owned()],
            Some(cluster) => clickhouse_cluster::clustered_statements(
                MIGRATIONS_TABLE_DDL,
                cluster,
                &self.database,
            ),
        }
    }

    /// Runs one DDL statement. In cluster mode the answer (one line per node) is held back until
    /// every node finished, so that a node's failure arrives as an error status.
    async fn run_ddl(
        &self,
        statement: &str,
        without_database: bool,
    ) -> std::result::Result<(), clickhouse::error::Error> {
        let client = if without_database {
            &self.server
        } else {
            &self.client
        };
        let mut attempt = 1;
        loop {
            let mut query = client.query(statement);
            if self.cluster.is_some() {
                query = query.with_setting("wait_end_of_query", "1");
            }
            match query.execute().await {
                // The statement went out and the connection closed before an answer came:
                // sent again, since every statement here is written to be run twice (`IF NOT
                // EXISTS`, `IF EXISTS`, a codec set again). An answer that came, error or not,
                // is final, and so is a connection that could not be made.
                Err(clickhouse::error::Error::Network(err))
                    if attempt < DDL_ATTEMPTS && !never_sent(&*err) =>
                {
                    let wait = DDL_RETRY_WAIT * attempt;
                    tracing::warn!(%err, attempt, retry_in = ?wait, "a schema statement got no answer; sending it again");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn applied_migrations(&self) -> Result<Vec<AppliedVersion>> {
        self.client
            .query(SELECT_APPLIED_MIGRATIONS)
            .fetch_all::<AppliedVersion>()
            .await
            .context(|| "reading applied migrations".to_owned())
    }
}

pub(crate) const SELECT_APPLIED_MIGRATIONS: &str =
    "SELECT version, arraySort(groupUniqArray(checksum)) AS checksums
FROM schema_migrations GROUP BY version ORDER BY version";

#[cfg(test)]
mod arrivals_tests {
    use fleetscope_model::state::ObjectKind;

    /// The arrivals view copies exactly the kinds the hub treats as app objects.
    #[test]
    fn arrivals_view_keeps_the_app_object_kinds() {
        let view = super::MIGRATIONS
            .iter()
            .flat_map(|m| m.statements.iter())
            .find(|s| s.contains("observed_arrivals_mv"))
            .expect("the arrivals view");
        for kind in ObjectKind::ALL {
            let quoted = format!("'{}'", kind.as_str());
            assert_eq!(
                view.contains(&quoted),
                kind.is_app_object(),
                "{quoted} in the arrivals view"
            );
        }
    }
}

#[cfg(test)]
mod codec_tests {
    #[test]
    fn codecs_from_20_3_on() {
        for (version, has) in [
            ("18.16.1", false),
            ("19.17.4.11", false),
            ("20.3.1.1", true),
            ("23.8.2.7", true),
            ("26.9.2.1", true),
        ] {
            assert_eq!(super::has_codecs(version), has, "{version}");
        }
    }

    #[test]
    fn a_codec_as_the_server_shows_it() {
        use super::codec_is;
        assert!(codec_is("CODEC(ZSTD(3))", "ZSTD(3)"));
        assert!(codec_is("CODEC(Delta(4), ZSTD(3))", "Delta, ZSTD(3)"));
        assert!(codec_is(
            "CODEC(DoubleDelta, ZSTD(1))",
            "DoubleDelta, ZSTD(1)"
        ));
        assert!(codec_is("CODEC(T64, ZSTD(1))", "T64, ZSTD(1)"));
        assert!(!codec_is("", "ZSTD(3)"));
        assert!(!codec_is("CODEC(ZSTD(1))", "ZSTD(3)"));
        assert!(!codec_is("CODEC(DoubleDelta, ZSTD(1))", "Delta, ZSTD(3)"));
        assert!(!codec_is("CODEC(Delta(4), ZSTD(3))", "ZSTD(3)"));
        assert!(!codec_is("CODEC(DoubleDelta, ZSTD(3))", "Delta, ZSTD(3)"));
    }
}

#[cfg(test)]
mod checksum_tests {
    use super::MIGRATIONS;

    /// What existing databases recorded: a change to an applied migration (or to its
    /// clustered translation) makes every such install refuse to start. Append, never edit.
    const RECORDED: &[(u32, &str, &str)] = &[
        (1, "68a8e73020bac217", "f11a0f57dbd4953d"),
        (2, "cd4a1d1683aa52f3", "a277b1ec08d87c47"),
        (3, "b5693ec7c4d501c3", "12ede3b997c1ce16"),
    ];

    #[test]
    fn recorded_checksums_never_change() {
        for (version, single, cluster) in RECORDED {
            let migration = MIGRATIONS
                .iter()
                .find(|m| m.version == *version)
                .expect("a recorded migration still exists");
            assert_eq!(
                migration.checksum(),
                *single,
                "migration {version}, single server"
            );
            assert_eq!(
                migration.cluster_checksum(),
                *cluster,
                "migration {version}, cluster mode"
            );
        }
        assert_ne!(
            RECORDED[0].1, RECORDED[0].2,
            "the two modes record different checksums"
        );
    }
}

#[cfg(test)]
mod ddl_retry_tests {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};

    use crate::{Store, StoreConfig};

    /// A server on a thread of its own that closes the connections of the first `drops`
    /// requests without an answer and answers 200 to each next one; gives its URL and a count
    /// of the requests it saw.
    fn flaky_server(drops: usize) -> (String, Arc<Mutex<usize>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(0));
        let count = seen.clone();
        std::thread::spawn(move || {
            for socket in listener.incoming() {
                let Ok(mut socket) = socket else { return };
                let mut head = Vec::new();
                let mut buffer = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                let number = {
                    let mut count = count.lock().unwrap();
                    *count += 1;
                    *count
                };
                if number > drops {
                    let _ = socket.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        });
        (url, seen)
    }

    /// A statement whose connection closed before an answer came is sent again, and succeeds
    /// when an answer comes.
    #[tokio::test]
    async fn a_schema_statement_without_an_answer_is_sent_again() {
        let (url, seen) = flaky_server(2);
        let store = Store::connect(&StoreConfig::new(url, "fs")).unwrap();
        store
            .run_ddl("CREATE DATABASE IF NOT EXISTS fs", true)
            .await
            .expect("answered at the third sending");
        assert_eq!(*seen.lock().unwrap(), 3, "two dropped, one answered");
    }

    /// Where nothing listens, nothing was sent: the error comes at once, not after retries
    /// (a retry would wait [`super::DDL_RETRY_WAIT`] first).
    #[tokio::test]
    async fn a_refused_connection_is_not_retried() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store =
            Store::connect(&StoreConfig::new(format!("http://127.0.0.1:{port}"), "fs")).unwrap();
        let started = std::time::Instant::now();
        let err = store
            .run_ddl("CREATE DATABASE IF NOT EXISTS fs", true)
            .await
            .expect_err("nothing listens");
        assert!(matches!(err, clickhouse::error::Error::Network(_)), "{err}");
        assert!(
            started.elapsed() < super::DDL_RETRY_WAIT,
            "answered in {:?}, after a retry",
            started.elapsed()
        );
    }

    /// It is sent at most [`super::DDL_ATTEMPTS`] times: a server that never answers is an
    /// error, not a hang.
    #[tokio::test]
    async fn a_schema_statement_is_sent_a_bounded_number_of_times() {
        let (url, seen) = flaky_server(usize::MAX);
        let store = Store::connect(&StoreConfig::new(url, "fs")).unwrap();
        let err = store
            .run_ddl("CREATE DATABASE IF NOT EXISTS fs", true)
            .await
            .expect_err("never answered");
        assert!(matches!(err, clickhouse::error::Error::Network(_)), "{err}");
        assert_eq!(*seen.lock().unwrap(), super::DDL_ATTEMPTS as usize);
    }
}
