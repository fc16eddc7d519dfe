//! A private ClickHouse cluster for tests, and waiting for its replicas to agree.

use fleetscope_local_clickhouse::{ClusterSpec, LocalClickHouseCluster};
use fleetscope_store::{Store, StoreConfig};

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
        let store = Store::connect(&StoreConfig::new(server.url(), database))
            .unwrap_or_else(|err| panic!("connect to {}: {err}", server.url()));
        store
            .sync_replicas()
            .await
            .unwrap_or_else(|err| panic!("sync the replicas on {}: {err}", server.url()));
    }
}
