//! Cluster mode: the same schema spread over a ClickHouse cluster.
//!
//! The clustered DDL is derived from the single-server migrations statement by statement
//! ([`clustered_statements`]), so there is one source of truth for columns, engines and sort
//! keys:
//!
//! - every statement runs `ON CLUSTER`, so one `migrate` creates the tables on every node;
//! - tables that grow with the fleet's reports and are keyed by cluster
//!   ([`Placement::Sharded`]) become a replicated local table `<table>_local` on every node,
//!   holding one shard's rows, plus a `Distributed` table under the original name that spreads
//!   inserts by `cityHash64(cluster_id)` and reads from every shard. All rows of one cluster land
//!   on one shard, so the ReplacingMergeTree merges that collapse its duplicates still see them
//!   all;
//! - tables that describe the fleet and are small (inventory, desired state, membership,
//!   renders, snapshots, applied migrations; [`Placement::Everywhere`]) become a replicated
//!   table under the original name with a full copy on every node, so every join and `IN`
//!   the queries make against them is answered locally on whichever node runs it, and no query
//!   needs `GLOBAL`;
//! - materialized views are created on the local tables they read and write, so each node's
//!   views see the rows that land on that node.
//!
//! Queries and inserts use the original names and run unchanged.

use crate::{Result, StoreError};

/// The ZooKeeper path the replicated tables live under unless configured otherwise; the database
/// name follows it.
pub const DEFAULT_ZOOKEEPER_PATH: &str = "/clickhouse/fleetscope";

/// The suffix of a sharded table's local part.
pub const LOCAL_SUFFIX: &str = "_local";

/// How a sharded table's rows are spread over the shards.
pub const SHARDING_KEY: &str = "cityHash64(cluster_id)";

/// Where the store's tables live on a ClickHouse cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The cluster's name in the servers' `remote_servers`.
    pub name: String,
    /// The ZooKeeper (or ClickHouse Keeper) path under which replicated tables keep their
    /// metadata, followed by the database name. May use the servers' macros, for example
    /// `/clickhouse/{cluster}/fleetscope`.
    pub zookeeper_path: String,
}

impl ClusterConfig {
    pub fn new(name: impl Into<String>) -> ClusterConfig {
        ClusterConfig {
            name: name.into(),
            zookeeper_path: DEFAULT_ZOOKEEPER_PATH.to_owned(),
        }
    }

    /// Checks the name and the path before either is written into DDL.
    pub fn validate(&self) -> Result<()> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 128
            && self.name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !name_ok {
            return Err(StoreError::BadClusterName(self.name.clone()));
        }
        let path = &self.zookeeper_path;
        let path_ok = path.len() >= 2
            && path.len() <= 256
            && path.starts_with('/')
            && !path.ends_with('/')
            && !path.contains("//")
            && path.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '{' | '}')
            });
        if !path_ok {
            return Err(StoreError::BadZooKeeperPath(path.clone()));
        }
        Ok(())
    }
}

/// Where a table's rows live in cluster mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Spread over the shards by [`SHARDING_KEY`]: a replicated `<table>_local` on every node
    /// and a Distributed `<table>` in front of them.
    Sharded,
    /// One replicated table with a full copy on every node of the cluster.
    Everywhere,
}

/// Every table of the schema and where it lives. A table missing here cannot be clustered (a
/// unit test renders every migration, so a new table without a placement fails it).
pub const PLACEMENTS: &[(&str, Placement)] = &[
    ("schema_migrations", Placement::Everywhere),
    ("clusters", Placement::Everywhere),
    ("heartbeats", Placement::Sharded),
    ("renders", Placement::Everywhere),
    ("desired_history", Placement::Everywhere),
    ("desired_latest", Placement::Everywhere),
    ("render_group_members", Placement::Everywhere),
    ("observed_transitions", Placement::Sharded),
    ("observed_latest", Placement::Sharded),
    ("rollup_snapshots", Placement::Everywhere),
    ("observed_arrivals", Placement::Sharded),
    ("reason_sets", Placement::Everywhere),
    ("reason_set_members", Placement::Everywhere),
    ("arrival_writers", Placement::Everywhere),
    ("cluster_history", Placement::Everywhere),
    ("member_history", Placement::Everywhere),
    ("heartbeat_history", Placement::Sharded),
    ("heartbeat_floor", Placement::Sharded),
    ("observed_checkpoints", Placement::Sharded),
    ("checkpoint_log", Placement::Everywhere),
    ("since_sets", Placement::Everywhere),
    ("member_since_sets", Placement::Everywhere),
    ("member_since_history", Placement::Everywhere),
    ("render_contents", Placement::Everywhere),
    ("desired_version_changes", Placement::Everywhere),
    ("platform_commits", Placement::Everywhere),
    ("render_change_counts", Placement::Everywhere),
    ("rollout_records", Placement::Everywhere),
    ("rollout_clusters", Placement::Everywhere),
    ("match_rules", Placement::Everywhere),
];

/// Where `table` lives in cluster mode, if it is one of the schema's tables.
pub fn placement(table: &str) -> Option<Placement> {
    PLACEMENTS
        .iter()
        .find(|(name, _)| *name == table)
        .map(|(_, placement)| *placement)
}

/// The table that physically holds `table`'s rows on a node: `<table>_local` for a sharded
/// table in cluster mode, else the table itself.
pub fn local_table(table: &str, cluster: Option<&ClusterConfig>) -> String {
    match (cluster, placement(table)) {
        (Some(_), Some(Placement::Sharded)) => format!("{table}{LOCAL_SUFFIX}"),
        _ => table.to_owned(),
    }
}

fn placement_of(table: &str) -> Placement {
    placement(table).unwrap_or_else(|| {
        panic!("table {table} has no placement for cluster mode; add it to cluster::PLACEMENTS")
    })
}

/// A single-server statement taken apart.
enum Parsed<'a> {
    Table {
        name: &'a str,
        columns: &'a str,
        engine: &'a str,
        engine_args: Option<&'a str>,
        /// Everything after the engine: `PARTITION BY …`, `ORDER BY …`.
        rest: &'a str,
    },
    View {
        name: &'a str,
        target: &'a str,
        /// The `SELECT` up to its source table, the source, and what follows it.
        before_source: &'a str,
        source: &'a str,
        after_source: &'a str,
    },
}

fn identifier(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (&text[..end], &text[end..])
}

/// The text inside the parenthesis that `text` starts with, and what follows it.
fn parenthesized(text: &str) -> Option<(&str, &str)> {
    let mut depth = 0usize;
    for (index, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some((&text[1..index], &text[index + 1..]));
                }
            }
            _ => {}
        }
        if depth == 0 {
            return None;
        }
    }
    None
}

fn parse(statement: &str) -> Parsed<'_> {
    let unexpected = || -> ! {
        panic!("cluster mode cannot translate this statement; extend cluster::parse:\n{statement}")
    };
    let text = statement.trim();
    if let Some(after) = text.strip_prefix("CREATE TABLE IF NOT EXISTS ") {
        let (name, after) = identifier(after);
        let (columns, after) = parenthesized(after.trim_start()).unwrap_or_else(|| unexpected());
        let after = after
            .trim_start()
            .strip_prefix("ENGINE = ")
            .unwrap_or_else(|| unexpected());
        let (engine, after) = identifier(after);
        let (engine_args, rest) = if after.starts_with('(') {
            let (args, rest) = parenthesized(after).unwrap_or_else(|| unexpected());
            (Some(args), rest)
        } else {
            (None, after)
        };
        if name.is_empty() || !engine.ends_with("MergeTree") {
            unexpected();
        }
        return Parsed::Table {
            name,
            columns,
            engine,
            engine_args,
            rest: rest.trim(),
        };
    }
    if let Some(after) = text.strip_prefix("CREATE MATERIALIZED VIEW IF NOT EXISTS ") {
        let (name, after) = identifier(after);
        let after = after.strip_prefix(" TO ").unwrap_or_else(|| unexpected());
        let (target, select) = identifier(after);
        let select = select.trim_start();
        if !select.starts_with("AS") {
            unexpected();
        }
        // Exactly one source table, named after the only FROM.
        let froms: Vec<usize> = select
            .match_indices("FROM")
            .map(|(index, _)| index)
            .filter(|&index| {
                let before = select[..index].chars().next_back();
                let after = select[index + 4..].chars().next();
                before.is_some_and(char::is_whitespace) && after.is_some_and(char::is_whitespace)
            })
            .collect();
        let [from] = froms[..] else { unexpected() };
        let source_at = from + 4 + select[from + 4..].len() - select[from + 4..].trim_start().len();
        let (source, after_source) = identifier(&select[source_at..]);
        if source.is_empty() {
            unexpected();
        }
        return Parsed::View {
            name,
            target,
            before_source: &select[..source_at],
            source,
            after_source,
        };
    }
    unexpected()
}

/// The clustered statements for one single-server statement, for `database` on `cluster`.
///
/// Panics on a statement of a form it does not know; the unit tests render every migration.
pub fn clustered_statements(
    statement: &str,
    cluster: &ClusterConfig,
    database: &str,
) -> Vec<String> {
    let on_cluster = format!("ON CLUSTER '{}'", cluster.name);
    let zookeeper = &cluster.zookeeper_path;
    match parse(statement) {
        Parsed::Table {
            name,
            columns,
            engine,
            engine_args,
            rest,
        } => {
            let extra_args = engine_args.map(|a| format!(", {a}")).unwrap_or_default();
            let replicated = |table: &str, path: &str, replica: &str| {
                format!(
                    "CREATE TABLE IF NOT EXISTS {database}.{table} {on_cluster} ({columns}) \
ENGINE = Replicated{engine}('{zookeeper}/{database}/{path}', '{replica}'{extra_args}) {rest}"
                )
            };
            match placement_of(name) {
                Placement::Everywhere => {
                    // One replica per node: the path has no shard, the replica name has both.
                    vec![replicated(
                        name,
                        &format!("tables/all/{name}"),
                        "{shard}-{replica}",
                    )]
                }
                Placement::Sharded => {
                    assert!(
                        columns.contains("cluster_id String"),
                        "sharded table {name} has no cluster_id column to shard by"
                    );
                    let local = format!("{name}{LOCAL_SUFFIX}");
                    vec![
                        replicated(&local, &format!("tables/{{shard}}/{local}"), "{replica}"),
                        format!(
                            "CREATE TABLE IF NOT EXISTS {database}.{name} {on_cluster} ({columns}) \
ENGINE = Distributed('{cluster}', '{database}', '{local}', {SHARDING_KEY})",
                            cluster = cluster.name
                        ),
                    ]
                }
            }
        }
        Parsed::View {
            name,
            target,
            before_source,
            source,
            after_source,
        } => {
            assert_eq!(
                placement_of(source),
                placement_of(target),
                "view {name} must read and write tables placed alike, so that its rows stay on the node it runs on"
            );
            let cluster = Some(cluster);
            vec![format!(
                "CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.{name} {on_cluster} TO {database}.{target_local} \
{before_source}{database}.{source_local}{after_source}",
                target_local = local_table(target, cluster),
                source_local = local_table(source, cluster),
            )]
        }
    }
}

/// `CREATE DATABASE` on every node.
pub fn create_database(cluster: &ClusterConfig, database: &str) -> String {
    format!(
        "CREATE DATABASE IF NOT EXISTS {database} ON CLUSTER '{}'",
        cluster.name
    )
}

/// `DROP DATABASE` on every node (replicated tables leave ZooKeeper too).
pub fn drop_database(cluster: &ClusterConfig, database: &str) -> String {
    format!(
        "DROP DATABASE IF EXISTS {database} ON CLUSTER '{}'",
        cluster.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{MIGRATIONS, MIGRATIONS_TABLE_DDL};

    fn sample() -> ClusterConfig {
        ClusterConfig::new("fleet")
    }

    fn all_clustered() -> Vec<String> {
        std::iter::once(MIGRATIONS_TABLE_DDL)
            .chain(MIGRATIONS.iter().flat_map(|m| m.statements.iter().copied()))
            .flat_map(|s| clustered_statements(s, &sample(), "fs"))
            .collect()
    }

    #[test]
    fn every_table_has_a_placement_and_every_statement_translates() {
        let statements = all_clustered();
        for statement in &statements {
            assert!(statement.contains(" ON CLUSTER 'fleet' "), "{statement}");
        }
        for (table, placement) in PLACEMENTS {
            let creates: Vec<&String> = statements
                .iter()
                .filter(|s| {
                    s.starts_with(&format!("CREATE TABLE IF NOT EXISTS fs.{table} "))
                        || s.starts_with(&format!("CREATE TABLE IF NOT EXISTS fs.{table}_local "))
                })
                .collect();
            match placement {
                Placement::Everywhere => {
                    assert_eq!(creates.len(), 1, "{table}");
                    assert!(
                        creates[0].contains(&format!(
                            "('/clickhouse/fleetscope/fs/tables/all/{table}', '{{shard}}-{{replica}}'"
                        )),
                        "{}",
                        creates[0]
                    );
                }
                Placement::Sharded => {
                    assert_eq!(creates.len(), 2, "{table}");
                    assert!(
                        creates[0].contains(&format!(
                            "ENGINE = Replicated{}",
                            if *table == "observed_arrivals" {
                                "MergeTree("
                            } else {
                                "ReplacingMergeTree("
                            }
                        )),
                        "{}",
                        creates[0]
                    );
                    assert!(
                        creates[0].contains(&format!(
                            "('/clickhouse/fleetscope/fs/tables/{{shard}}/{table}_local', '{{replica}}'"
                        )),
                        "{}",
                        creates[0]
                    );
                    assert!(
                        creates[1].ends_with(&format!(
                            "ENGINE = Distributed('fleet', 'fs', '{table}_local', cityHash64(cluster_id))"
                        )),
                        "{}",
                        creates[1]
                    );
                }
            }
        }
    }

    #[test]
    fn engines_keep_their_version_column_sort_key_and_partitions() {
        let statements = all_clustered();
        let find = |prefix: &str| {
            statements
                .iter()
                .find(|s| s.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix}"))
                .clone()
        };
        let latest = find("CREATE TABLE IF NOT EXISTS fs.observed_latest_local ");
        assert!(latest.ends_with(
            "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/fleetscope/fs/tables/{shard}/observed_latest_local', '{replica}', seq) \
ORDER BY (cluster_id, object_kind, object_namespace, object_name)"
        ), "{latest}");
        let transitions = find("CREATE TABLE IF NOT EXISTS fs.observed_transitions_local ");
        assert!(
            transitions.contains("', '{replica}') PARTITION BY toYYYYMMDD(observed_at) ORDER BY"),
            "{transitions}"
        );
        let heartbeats = find("CREATE TABLE IF NOT EXISTS fs.heartbeats_local ");
        assert!(
            heartbeats.contains("'{replica}', seen_at) ORDER BY cluster_id"),
            "{heartbeats}"
        );
    }

    #[test]
    fn views_sit_on_local_tables() {
        let views: Vec<String> = all_clustered()
            .into_iter()
            .filter(|s| s.starts_with("CREATE MATERIALIZED VIEW"))
            .collect();
        assert_eq!(views.len(), 7);
        assert!(views[0].starts_with(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS fs.desired_latest_mv ON CLUSTER 'fleet' TO fs.desired_latest AS"
        ));
        assert!(views[0].contains("FROM fs.desired_history"), "{}", views[0]);
        assert!(views[1]
            .contains("fs.observed_latest_mv ON CLUSTER 'fleet' TO fs.observed_latest_local AS"));
        assert!(
            views[1].ends_with("FROM fs.observed_transitions_local"),
            "{}",
            views[1]
        );
        assert!(views[2].contains("TO fs.observed_arrivals_local AS"));
        assert!(
            views[2].contains("FROM fs.observed_transitions_local\n        WHERE object_kind IN ("),
            "{}",
            views[2]
        );
        // Migration 5: the inventory and membership (copied everywhere) into their history
        // tables, and each shard's heartbeats into its own part of the heartbeat history.
        assert!(
            views[3].contains("TO fs.cluster_history AS"),
            "{}",
            views[3]
        );
        assert!(views[3].ends_with("FROM fs.clusters"), "{}", views[3]);
        assert!(views[4].contains("TO fs.member_history AS"), "{}", views[4]);
        assert!(
            views[5].contains("TO fs.heartbeat_history_local AS"),
            "{}",
            views[5]
        );
        assert!(
            views[5].ends_with("FROM fs.heartbeats_local"),
            "{}",
            views[5]
        );
        // Migration 6: the membership since sets (copied everywhere) into their history.
        assert!(
            views[6].contains("TO fs.member_since_history AS"),
            "{}",
            views[6]
        );
        assert!(
            views[6].ends_with("FROM fs.member_since_sets"),
            "{}",
            views[6]
        );
    }

    #[test]
    fn names_and_paths_are_checked() {
        for good in ["fleet", "prod-eu.1", "c_2"] {
            assert!(ClusterConfig::new(good).validate().is_ok(), "{good}");
        }
        for bad in ["", "-x", "a b", "x'y", "a;b", &"c".repeat(129)] {
            let err = ClusterConfig::new(bad).validate().unwrap_err();
            assert!(matches!(err, StoreError::BadClusterName(_)), "{bad}");
        }
        for good in ["/clickhouse/fleetscope", "/ch/{cluster}/fs", "/a"] {
            let config = ClusterConfig {
                zookeeper_path: good.into(),
                ..sample()
            };
            assert!(config.validate().is_ok(), "{good}");
        }
        for bad in ["", "/", "relative", "/a/", "/a//b", "/a'b", "/a b"] {
            let config = ClusterConfig {
                zookeeper_path: bad.into(),
                ..sample()
            };
            let err = config.validate().unwrap_err();
            assert!(
                matches!(err, StoreError::BadZooKeeperPath(_)),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn local_tables() {
        let cluster = sample();
        assert_eq!(
            local_table("observed_latest", Some(&cluster)),
            "observed_latest_local"
        );
        assert_eq!(local_table("clusters", Some(&cluster)), "clusters");
        assert_eq!(local_table("observed_latest", None), "observed_latest");
    }
}
