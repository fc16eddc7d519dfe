//! Cluster mode on the current ClickHouse engine (chdb, embedded), configured with macros, a
//! cluster whose one replica is the engine itself, and a private ZooKeeper: every clustered
//! statement parses with its `ON CLUSTER` clause and, without it (embedded ClickHouse runs no
//! distributed DDL), creates its replicated, Distributed or view table; every read query of a
//! cluster-mode store then runs over those tables. The tables stay empty: embedded replicated
//! tables are read-only, so results are compared on real 18.16 servers (`tests/cluster.rs`).

use std::collections::BTreeMap;

use fleetscope_local_clickhouse::LocalZooKeeper;
use fleetscope_store::catalog;
use fleetscope_store::clickhouse_cluster::{Placement, PLACEMENTS};
use fleetscope_store::{ClusterConfig, StoreConfig};
use fleetscope_testkit::chdb::{self, Statement};
use fleetscope_testkit::grid::{NOW, POLICY};

/// A cluster name that needs quoting, to show it is quoted everywhere.
const CLUSTER: &str = "fleet-eu";

#[test]
fn clustered_schema_and_queries_run_on_the_current_engine() {
    let keeper = LocalZooKeeper::start()
        .unwrap_or_else(|err| panic!("this test needs ZooKeeper for replicated tables: {err}"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The engine's own address is the cluster's only replica, so Distributed reads stay local.
    let config = dir.path().join("cluster.xml");
    std::fs::write(
        &config,
        format!(
            r#"<clickhouse>
  <tcp_port>9000</tcp_port>
  <macros><shard>01</shard><replica>r1</replica></macros>
  <zookeeper><node><host>127.0.0.1</host><port>{}</port></node></zookeeper>
  <remote_servers>
    <{CLUSTER}><shard><internal_replication>true</internal_replication>
      <replica><host>127.0.0.1</host><port>9000</port></replica>
    </shard></{CLUSTER}>
  </remote_servers>
</clickhouse>
"#,
            keeper.port()
        ),
    )
    .expect("write the engine's configuration");

    let database = "fleet_current";
    let cluster = ClusterConfig::new(CLUSTER);
    let on_cluster = format!(" ON CLUSTER '{CLUSTER}'");
    let mut statements = Vec::new();
    let schema = catalog::cluster_schema_statements(&cluster, database);
    for entry in &schema {
        assert!(entry.sql.contains(&on_cluster), "{}", entry.sql);
        statements.push(Statement::parse(
            format!("parse {}", entry.name),
            entry.sql.clone(),
        ));
        statements.push(Statement::execute(
            entry.name.clone(),
            entry.sql.replace(&on_cluster, ""),
        ));
    }
    for entry in catalog::cluster_maintenance_statements(&cluster, database) {
        statements.push(Statement::parse(entry.name, entry.sql));
    }
    statements.push(Statement::execute(
        "use the database",
        format!("USE {database}"),
    ));
    statements.push(Statement::fetch(
        "tables",
        format!(
            "SELECT name, engine FROM system.tables WHERE database = '{database}' ORDER BY name"
        ),
    ));
    let store_config =
        StoreConfig::new("http://127.0.0.1:9", database).with_cluster(cluster.clone());
    let queries = catalog::read_queries_for(&store_config, NOW, &POLICY, "case-0017");
    for entry in &queries {
        statements.push(Statement::fetch(entry.name.clone(), entry.sql.clone()));
    }

    let run = chdb::run_configured(&config, &statements);
    assert!(
        run.version.starts_with('2'),
        "chdb reports a current ClickHouse, got {}",
        run.version
    );
    let failures: Vec<String> = run
        .results
        .iter()
        .zip(&statements)
        .filter(|(result, _)| !result.ok)
        .map(|(result, statement)| format!("{}: {}\n{}", result.name, result.error, statement.sql))
        .collect();
    assert!(
        failures.is_empty(),
        "failed on ClickHouse {}:\n{}",
        run.version,
        failures.join("\n\n")
    );
    assert_eq!(run.results.len(), statements.len());

    // The current engine built the same tables as 18.16 does.
    let tables = &run
        .results
        .iter()
        .find(|r| r.name == "tables")
        .expect("the tables")
        .output;
    let got: BTreeMap<&str, &str> = tables
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .collect();
    let mut expected = BTreeMap::new();
    for (table, placement) in PLACEMENTS {
        let replicated = if *table == "observed_arrivals" {
            "ReplicatedMergeTree"
        } else {
            "ReplicatedReplacingMergeTree"
        };
        match placement {
            Placement::Sharded => {
                expected.insert(format!("{table}_local"), replicated);
                expected.insert(table.to_string(), "Distributed");
            }
            Placement::Everywhere => {
                expected.insert(table.to_string(), replicated);
            }
        }
    }
    for view in [
        "desired_latest_mv",
        "observed_latest_mv",
        "observed_arrivals_mv",
        "cluster_history_mv",
        "member_history_mv",
        "heartbeat_history_mv",
        "member_since_history_mv",
    ] {
        expected.insert(view.to_owned(), "MaterializedView");
    }
    let expected: BTreeMap<&str, &str> = expected.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(got, expected, "tables on ClickHouse {}", run.version);
    eprintln!(
        "{} clustered statements and {} read queries ran on ClickHouse {}",
        schema.len(),
        queries.len(),
        run.version
    );
    keeper.stop();
}
