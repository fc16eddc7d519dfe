//! Cluster mode's servers: ClickHouse as shards × replicas with a private ZooKeeper, and
//! HAProxy with a frontend for each kind of server (ClickHouse health-checked on `/ping`, the
//! collectors and the hubs on `/readyz`), all on loopback. The collectors and hubs themselves
//! are started by the pipeline on the ports chosen here, behind the balancer.

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use fleetscope_local_clickhouse::{ClusterSpec, LocalClickHouseCluster};
use fleetscope_local_process::haproxy::{Balanced, LocalHaproxy};
use fleetscope_store::{ClusterConfig, Store, StoreConfig};

/// A ClickHouse cluster's shape, `SHARDSxREPLICAS` on the command line (`2x2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterShape {
    pub shards: usize,
    pub replicas: usize,
}

impl std::str::FromStr for ClusterShape {
    type Err = String;

    fn from_str(text: &str) -> Result<ClusterShape, String> {
        let invalid = || format!("expected SHARDSxREPLICAS such as 2x2, got {text:?}");
        let (shards, replicas) = text.split_once(['x', 'X']).ok_or_else(invalid)?;
        let number = |v: &str| v.trim().parse::<usize>().map_err(|_| invalid());
        let shape = ClusterShape {
            shards: number(shards)?,
            replicas: number(replicas)?,
        };
        if !(1..=8).contains(&shape.shards) || !(1..=4).contains(&shape.replicas) {
            return Err(format!(
                "a local cluster has 1 to 8 shards and 1 to 4 replicas, got {text:?}"
            ));
        }
        Ok(shape)
    }
}

impl std::fmt::Display for ClusterShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.shards, self.replicas)
    }
}

/// The cluster's name in the servers' `remote_servers`.
pub const CLUSTER_NAME: &str = "fleet";

/// Copies of the collector and of the hub in cluster mode.
pub const COPIES: usize = 2;

/// The running cluster's servers and balancer.
#[derive(Debug)]
pub struct ClusterSetup {
    /// Shared with the fault injector, which kills and restarts a replica from a blocking task.
    pub clickhouse: Arc<Mutex<LocalClickHouseCluster>>,
    pub balancer: LocalHaproxy,
    pub collector_ports: Vec<u16>,
    pub hub_ports: Vec<u16>,
}

impl ClusterSetup {
    /// Starts ZooKeeper, the ClickHouse servers and HAProxy (blocking; run it off the async
    /// runtime). The collectors' and hubs' ports are chosen now, so that the balancer knows them
    /// before they listen.
    pub fn start(shape: ClusterShape) -> anyhow::Result<ClusterSetup> {
        let clickhouse = LocalClickHouseCluster::start(&ClusterSpec {
            name: CLUSTER_NAME.into(),
            shards: shape.shards,
            replicas: shape.replicas,
            zookeeper: true,
        })
        .context("could not start the ClickHouse cluster (clickhouse-server and ZooKeeper: scripts/install-prereqs --tests)")?;
        let free = || -> anyhow::Result<Vec<u16>> {
            (0..COPIES)
                .map(|_| fleetscope_local_process::free_port().context("finding a free port"))
                .collect()
        };
        let (collector_ports, hub_ports) = (free()?, free()?);
        let balancer = LocalHaproxy::start(&[
            Balanced {
                name: "clickhouse".into(),
                health: "/ping".into(),
                backends: clickhouse.servers().iter().map(|s| s.http_port()).collect(),
                tls: None,
            },
            Balanced {
                name: "collectors".into(),
                health: "/readyz".into(),
                backends: collector_ports.clone(),
                tls: None,
            },
            Balanced {
                name: "hubs".into(),
                health: "/readyz".into(),
                backends: hub_ports.clone(),
                tls: None,
            },
        ])?;
        Ok(ClusterSetup {
            clickhouse: Arc::new(Mutex::new(clickhouse)),
            balancer,
            collector_ports,
            hub_ports,
        })
    }

    /// `http://…` of the balancer's frontend for `name` (`clickhouse`, `collectors`, `hubs`).
    pub fn url(&self, name: &str) -> String {
        format!("http://{}", self.balancer.addr(name))
    }

    /// The store's configuration: through the balancer, in cluster mode.
    pub fn store_config(&self, database: &str) -> StoreConfig {
        StoreConfig::new(self.url("clickhouse"), database)
            .with_cluster(ClusterConfig::new(CLUSTER_NAME))
    }

    /// A store on each server directly, for syncing its replicas before an audit.
    pub fn replica_stores(&self, database: &str) -> anyhow::Result<Vec<Store>> {
        let clickhouse = self.clickhouse.lock().expect("cluster lock");
        clickhouse
            .servers()
            .iter()
            .map(|server| Ok(Store::connect(&StoreConfig::new(server.url(), database))?))
            .collect()
    }

    /// Every ClickHouse server's pid, and ZooKeeper's, for the sampler.
    pub fn pids(&self) -> Vec<(String, u32)> {
        let clickhouse = self.clickhouse.lock().expect("cluster lock");
        let mut pids: Vec<(String, u32)> = clickhouse
            .servers()
            .iter()
            .filter_map(|s| s.pid())
            .map(|pid| ("clickhouse".to_owned(), pid))
            .collect();
        if let Some(pid) = clickhouse.zookeeper().and_then(|zk| zk.pid()) {
            pids.push(("zookeeper".to_owned(), pid));
        }
        pids
    }
}
