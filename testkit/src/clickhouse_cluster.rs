//! A private ClickHouse cluster for tests, and waiting for its replicas to agree.

use fleetscope_local_clickhouse::{ClusterSpec, LocalClickHouseCluster};

/// Starts `shards × replicas` servers named `name` with a private ZooKeeper, or fails the test
/// saying what to install.
pub fn start(name: &str, shards: usize, replicas: usize) -> LocalClickHouseCluster {
    LocalClickHouseCluster::start(&ClusterSpec {
        name: name.into(),
        shards,
        replicas,
        zookeeper: true,
    })
    .unwrap_or_else(|err| {
        panic!("this test needs clickhouse-server and ZooKeeper (scripts/install-prereqs --tests): {err}")
    })
}

/// Waits until every replica of every replicated table of `database` has fetched what its
/// peers hold, so that reads do not depend on which replica answers.
pub async fn sync_replicas(cluster: &LocalClickHouseCluster, database: &str) {
    for server in cluster.servers() {
        let client = clickhouse::Client::default()
            .with_url(server.url())
            .with_database(database)
            .with_validation(false);
        let tables: Vec<String> = client
            .query("SELECT table FROM system.replicas WHERE database = ? ORDER BY table")
            .bind(database)
            .fetch_all()
            .await
            .expect("list replicated tables");
        for table in tables {
            client
                .query("SYSTEM SYNC REPLICA ?.?")
                .bind(clickhouse::sql::Identifier(database))
                .bind(clickhouse::sql::Identifier(&table))
                .execute()
                .await
                .unwrap_or_else(|err| panic!("sync {table} on {}: {err}", server.url()));
        }
    }
}
