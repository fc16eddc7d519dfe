//! A private ClickHouse cluster: several servers on loopback that know each other as one
//! cluster in `remote_servers`, each with `shard` and `replica` macros, and optionally a private
//! ZooKeeper they share (for replicated tables and `ON CLUSTER` DDL). Without ZooKeeper the
//! servers can still serve Distributed tables over plain local tables.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::zookeeper::LocalZooKeeper;
use crate::{LocalClickHouse, LocalClickHouseError};

/// What cluster to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    /// The cluster's name in `remote_servers`.
    pub name: String,
    pub shards: usize,
    pub replicas: usize,
    /// Start a private ZooKeeper and point every server at it.
    pub zookeeper: bool,
}

/// Running servers of one cluster (and their ZooKeeper). Dropping it kills them all.
#[derive(Debug)]
pub struct LocalClickHouseCluster {
    spec: ClusterSpec,
    /// Shard-major: shard 1's replicas, then shard 2's…
    servers: Vec<LocalClickHouse>,
    // Declared after the servers, so it outlives them when dropped.
    zookeeper: Option<LocalZooKeeper>,
    started_in: Duration,
}

/// The value of the `shard` macro of the shard at `index` (0-based): `01`, `02`…
pub fn shard_macro(index: usize) -> String {
    format!("{:02}", index + 1)
}

/// The value of the `replica` macro of the replica at `index` (0-based): `r1`, `r2`…
pub fn replica_macro(index: usize) -> String {
    format!("r{}", index + 1)
}

impl LocalClickHouseCluster {
    /// Starts ZooKeeper (when asked) and `shards × replicas` servers, all at once, and waits
    /// until every server answers.
    pub fn start(spec: &ClusterSpec) -> Result<LocalClickHouseCluster, LocalClickHouseError> {
        assert!(
            spec.shards >= 1 && spec.replicas >= 1,
            "a cluster needs at least one shard and one replica"
        );
        let started = Instant::now();
        let zookeeper = if spec.zookeeper {
            Some(LocalZooKeeper::start()?)
        } else {
            None
        };
        let mut last_error = None;
        // A port found free can be taken by someone else before a server binds it: retry.
        for _ in 0..3 {
            match Self::start_servers(spec, zookeeper.as_ref()) {
                Ok(servers) => {
                    return Ok(LocalClickHouseCluster {
                        spec: spec.clone(),
                        servers,
                        zookeeper,
                        started_in: started.elapsed(),
                    })
                }
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.expect("at least one attempt was made"))
    }

    fn start_servers(
        spec: &ClusterSpec,
        zookeeper: Option<&LocalZooKeeper>,
    ) -> Result<Vec<LocalClickHouse>, LocalClickHouseError> {
        let count = spec.shards * spec.replicas;
        // Three ports per server, all distinct: hold every listener until all are chosen.
        let ports = {
            let listeners = (0..count * 3)
                .map(|_| TcpListener::bind("127.0.0.1:0"))
                .collect::<std::io::Result<Vec<_>>>()
                .and_then(|listeners| {
                    listeners
                        .iter()
                        .map(|l| l.local_addr().map(|a| a.port()))
                        .collect::<std::io::Result<Vec<u16>>>()
                })
                .map_err(|source| LocalClickHouseError::Prepare {
                    path: std::env::temp_dir(),
                    source,
                })?;
            listeners
        };
        let (http, rest) = ports.split_at(count);
        let (tcp, interserver) = rest.split_at(count);
        let mut servers = Vec::with_capacity(count);
        for index in 0..count {
            let (shard, replica) = (index / spec.replicas, index % spec.replicas);
            let dir = tempfile::Builder::new()
                .prefix(&format!(
                    "fleetscope-clickhouse-s{}{}-",
                    shard_macro(shard),
                    replica_macro(replica)
                ))
                .tempdir()
                .map_err(|source| LocalClickHouseError::Prepare {
                    path: std::env::temp_dir(),
                    source,
                })?;
            let config = cluster_config(spec, tcp, interserver[index], shard, replica, zookeeper);
            servers.push(LocalClickHouse::prepared(
                dir,
                http[index],
                tcp[index],
                config,
            )?);
        }
        for server in &mut servers {
            server.spawn()?;
        }
        for server in &mut servers {
            server.wait_ready(Duration::from_secs(90))?;
        }
        Ok(servers)
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn spec(&self) -> &ClusterSpec {
        &self.spec
    }

    /// Every server, shard-major (shard 1's replicas first).
    pub fn servers(&self) -> &[LocalClickHouse] {
        &self.servers
    }

    /// The server of one shard and replica, both counted from 0.
    pub fn server(&self, shard: usize, replica: usize) -> &LocalClickHouse {
        assert!(shard < self.spec.shards && replica < self.spec.replicas);
        &self.servers[shard * self.spec.replicas + replica]
    }

    /// The server of one shard and replica, to stop, kill or restart it.
    pub fn server_mut(&mut self, shard: usize, replica: usize) -> &mut LocalClickHouse {
        assert!(shard < self.spec.shards && replica < self.spec.replicas);
        &mut self.servers[shard * self.spec.replicas + replica]
    }

    /// The HTTP interface of the first server (any server can be asked anything).
    pub fn url(&self) -> String {
        self.servers[0].url()
    }

    pub fn zookeeper(&self) -> Option<&LocalZooKeeper> {
        self.zookeeper.as_ref()
    }

    /// How long starting ZooKeeper and every server took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Stops every server gracefully (all at once), then ZooKeeper, and removes their
    /// directories. ClickHouse 18.16 takes 6 to 10 s to shut down a server with replicated
    /// tables; dropping the cluster instead kills everything at once.
    pub fn stop(mut self) {
        let servers = std::mem::take(&mut self.servers);
        std::thread::scope(|scope| {
            for server in servers {
                scope.spawn(move || server.stop());
            }
        });
        if let Some(keeper) = self.zookeeper.take() {
            keeper.stop();
        }
    }
}

/// The `config.d` file of one server: the cluster, its macros, interserver replication and
/// (when there is one) ZooKeeper with the queue for `ON CLUSTER` DDL.
fn cluster_config(
    spec: &ClusterSpec,
    tcp_ports: &[u16],
    interserver_port: u16,
    shard: usize,
    replica: usize,
    zookeeper: Option<&LocalZooKeeper>,
) -> String {
    let mut shards = String::new();
    for s in 0..spec.shards {
        // With ZooKeeper the tables are replicated, so a Distributed insert writes to one
        // replica and replication copies it; without, a shard has one replica and the flag is moot.
        let _ = write!(
            shards,
            "      <shard>\n        <internal_replication>{}</internal_replication>\n",
            spec.zookeeper
        );
        for r in 0..spec.replicas {
            let _ = writeln!(
                shards,
                "        <replica><host>127.0.0.1</host><port>{}</port></replica>",
                tcp_ports[s * spec.replicas + r]
            );
        }
        shards.push_str("      </shard>\n");
    }
    let keeper = match zookeeper {
        Some(keeper) => format!(
            "  <zookeeper>\n    <node><host>127.0.0.1</host><port>{}</port></node>\n    <session_timeout_ms>30000</session_timeout_ms>\n  </zookeeper>\n  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>\n",
            keeper.port()
        ),
        None => String::new(),
    };
    format!(
        r#"<?xml version="1.0"?>
<!-- Written by Fleetscope: this server's place in a private loopback cluster. -->
<yandex>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <interserver_http_port>{interserver_port}</interserver_http_port>
  <remote_servers>
    <{name}>
{shards}    </{name}>
  </remote_servers>
  <macros>
    <shard>{shard}</shard>
    <replica>{replica}</replica>
  </macros>
{keeper}</yandex>
"#,
        name = spec.name,
        shard = shard_macro(shard),
        replica = replica_macro(replica),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn query(server: &LocalClickHouse, sql: &str) -> String {
        query_at(server, "/", sql)
    }

    /// Sends one statement over HTTP to `path` (with its URL parameters) and returns the body;
    /// panics on an HTTP error.
    fn query_at(server: &LocalClickHouse, path: &str, sql: &str) -> String {
        let mut stream =
            TcpStream::connect(("127.0.0.1", server.http_port())).expect("connect to the server");
        stream
            .set_read_timeout(Some(Duration::from_secs(200)))
            .unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n{sql}",
            sql.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, body) = response
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{sql}: not an HTTP response: {response:?}"));
        assert!(head.contains(" 200 "), "{sql}\n{head}\n{body}");
        body.to_owned()
    }

    #[test]
    fn two_shards_without_zookeeper_serve_a_distributed_table() {
        let cluster = LocalClickHouseCluster::start(&ClusterSpec {
            name: "pair".into(),
            shards: 2,
            replicas: 1,
            zookeeper: false,
        })
        .expect("start two servers");
        for (index, server) in cluster.servers().iter().enumerate() {
            let macros = query(
                server,
                "SELECT groupArray(substitution) FROM (SELECT substitution FROM system.macros ORDER BY macro)",
            );
            assert_eq!(macros.trim(), format!("['r1','{}']", shard_macro(index)));
            query(
                server,
                "CREATE TABLE default.items_local (id UInt32) ENGINE = MergeTree ORDER BY id",
            );
            query(server, "CREATE TABLE default.items (id UInt32) ENGINE = Distributed('pair', 'default', 'items_local', id)");
        }
        query_at(
            cluster.server(0, 0),
            "/?insert_distributed_sync=1",
            "INSERT INTO default.items SELECT toUInt32(number) FROM system.numbers LIMIT 10",
        );
        // Sharded by id: even ids on the first shard, odd ids on the second.
        let first = query(
            cluster.server(0, 0),
            "SELECT groupArray(id) FROM (SELECT id FROM default.items_local ORDER BY id)",
        );
        let second = query(
            cluster.server(1, 0),
            "SELECT groupArray(id) FROM (SELECT id FROM default.items_local ORDER BY id)",
        );
        assert_eq!(first.trim(), "[0,2,4,6,8]");
        assert_eq!(second.trim(), "[1,3,5,7,9]");
        let all = query(
            cluster.server(1, 0),
            "SELECT count(), sum(id) FROM default.items",
        );
        assert_eq!(all.trim(), "10\t45");
        cluster.stop();
    }

    #[test]
    fn replicas_with_zookeeper_take_on_cluster_ddl_and_replicate() {
        let cluster = LocalClickHouseCluster::start(&ClusterSpec {
            name: "fleet".into(),
            shards: 2,
            replicas: 2,
            zookeeper: true,
        })
        .expect("start ZooKeeper and four servers");
        eprintln!("cluster of 4 started in {:?}", cluster.started_in());
        let keeper = cluster.zookeeper().expect("a ZooKeeper");
        assert!(keeper.is_ok());
        // DDL sent to one server reaches all four.
        query(
            cluster.server(0, 0),
            "CREATE TABLE default.items ON CLUSTER fleet (id UInt32) \
             ENGINE = ReplicatedMergeTree('/t/items/{shard}', '{replica}') ORDER BY id",
        );
        query(
            cluster.server(1, 1),
            "INSERT INTO default.items VALUES (1), (2), (3)",
        );
        // Its replica fetches the part; the other shard stays empty.
        query(cluster.server(1, 0), "SYSTEM SYNC REPLICA default.items");
        assert_eq!(
            query(cluster.server(1, 0), "SELECT count() FROM default.items").trim(),
            "3"
        );
        assert_eq!(
            query(cluster.server(0, 1), "SELECT count() FROM default.items").trim(),
            "0"
        );
        let replicas = query(
            cluster.server(1, 0),
            "SELECT total_replicas, active_replicas FROM system.replicas WHERE table = 'items'",
        );
        assert_eq!(replicas.trim(), "2\t2");
        cluster.stop();
    }
}
