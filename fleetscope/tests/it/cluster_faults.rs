//! Cluster mode losing one server at a time, under ingest: ClickHouse as 2 shards × 2 replicas
//! with ZooKeeper, two collectors and two hubs, each kind behind HAProxy (health-checked on
//! `/ping` for ClickHouse and `/readyz` for the services), all on loopback. Agent-like clients
//! report through the collectors' balancer while, one at a time, a ClickHouse replica is
//! killed and brought back, ZooKeeper is stopped for 60 s, a collector is killed and restarted,
//! and a hub is killed and restarted. After each: every acknowledged change is stored exactly
//! once, both hubs show every cluster's last acknowledged version (the ground truth), and the
//! hubs' balancer kept answering; the figures (failed answers, how long freshness took to
//! recover) are printed. docs/runbooks.md and docs/scaling.md give the figures of a run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_local_clickhouse::LocalClickHouseCluster;
use fleetscope_store::{ClusterConfig, Store, StoreConfig};
use fleetscope_testkit::faults::{
    free_port, http_request, observed_versions, stored_changes, Change, ReportingAgent, Service,
    Suspended,
};
use fleetscope_testkit::haproxy::{Balanced, LocalHaproxy};

use super::faults::{binary, one_at_a_time, start_collector, token, DATABASE, REQUEST_LIMIT};

const CLUSTER: &str = "fleet";
const CLIENTS: usize = 6;
const OBJECTS: usize = 3;

/// How long the hubs may take to show every acknowledged change after the last of them: the
/// freshness target (5 s at p99) with room for a loaded test machine.
const RECOVERY_LIMIT: Duration = Duration::from_secs(10);

/// The longest the hubs' balancer may fail to answer in a row during a fault.
const ANSWER_GAP_LIMIT: Duration = Duration::from_secs(5);

struct Set {
    dir: tempfile::TempDir,
    clickhouse: LocalClickHouseCluster,
    balancer: LocalHaproxy,
    clusters: Vec<String>,
    collector_ports: [u16; 2],
    collectors: [Option<Service>; 2],
    hub_ports: [u16; 2],
    hubs: [Option<Service>; 2],
    /// One agent-like client per cluster, reporting through the collectors' balancer; each
    /// numbers its reports on from where it left off, as an agent does.
    agents: Vec<ReportingAgent>,
    runtime: tokio::runtime::Runtime,
    starts: usize,
}

impl Set {
    fn clickhouse_url(&self) -> String {
        format!("http://{}", self.balancer.addr("clickhouse"))
    }

    fn cluster_args(&self) -> Vec<String> {
        vec![
            "--clickhouse-url".into(),
            self.clickhouse_url(),
            "--clickhouse-database".into(),
            DATABASE.into(),
            "--clickhouse-cluster".into(),
            CLUSTER.into(),
        ]
    }

    fn start_collector(&mut self, i: usize) {
        self.starts += 1;
        let extra = ["--clickhouse-cluster", CLUSTER];
        let dir = self.dir.path().join(format!("collector-{}", self.starts));
        std::fs::create_dir_all(&dir).unwrap();
        self.collectors[i] = Some(start_collector(
            &dir,
            &self.clusters,
            &self.clickhouse_url(),
            self.collector_ports[i],
            &extra,
        ));
    }

    fn start_hub(&mut self, i: usize) {
        self.starts += 1;
        let mut args: Vec<String> = vec![
            "hub".into(),
            "--insecure".into(),
            "--listen".into(),
            format!("127.0.0.1:{}", self.hub_ports[i]),
            "--log".into(),
            "info".into(),
        ];
        args.extend(self.cluster_args());
        let log = self.dir.path().join(format!("hub-{}.log", self.starts));
        self.hubs[i] = Some(Service::start(&binary(), &args, &log, self.hub_ports[i]));
    }

    fn start() -> Set {
        let clickhouse = fleetscope_testkit::clickhouse_cluster::start(CLUSTER, 2, 2);
        let collector_ports = [free_port(), free_port()];
        let hub_ports = [free_port(), free_port()];
        let balancer = LocalHaproxy::start(&[
            Balanced {
                name: "clickhouse".into(),
                health: "/ping".into(),
                backends: clickhouse.servers().iter().map(|s| s.http_port()).collect(),
            },
            Balanced {
                name: "collectors".into(),
                health: "/readyz".into(),
                backends: collector_ports.to_vec(),
            },
            Balanced {
                name: "hubs".into(),
                health: "/readyz".into(),
                backends: hub_ports.to_vec(),
            },
        ]);
        let clusters: Vec<String> = (0..CLIENTS).map(|i| format!("store-{i:02}")).collect();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let collectors = balancer.addr("collectors");
        let agents = clusters
            .iter()
            .map(|cluster| {
                ReportingAgent::new(cluster, &collectors, Some(&token(cluster)), OBJECTS)
            })
            .collect();
        let mut set = Set {
            agents,
            dir: tempfile::tempdir().unwrap(),
            clickhouse,
            balancer,
            clusters,
            collector_ports,
            collectors: [None, None],
            hub_ports,
            hubs: [None, None],
            runtime,
            starts: 0,
        };
        let store = set.store();
        set.runtime.block_on(store.migrate()).unwrap();
        let rows: Vec<_> = set
            .clusters
            .iter()
            .map(|id| fleetscope_testkit::inventory_row(id, "factories/linz"))
            .collect();
        set.runtime.block_on(store.insert_rows(&rows)).unwrap();
        for i in 0..2 {
            set.start_collector(i);
            set.start_hub(i);
        }
        set
    }

    fn store(&self) -> Store {
        Store::connect(
            &StoreConfig::new(self.clickhouse.url(), DATABASE)
                .with_cluster(ClusterConfig::new(CLUSTER)),
        )
        .unwrap()
    }
}

/// What the clients and the reader saw during one fault.
struct Phase {
    name: &'static str,
    /// Per cluster: every change acknowledged, in order.
    acknowledged: BTreeMap<String, Vec<Change>>,
    /// Requests the collectors' balancer did not acknowledge (each was sent again).
    refused: usize,
    answers: usize,
    failed_answers: usize,
    longest_answer_gap: Duration,
    /// From the end of the fault to every client's next acknowledged report.
    ingest_resumed_in: Duration,
    /// From the last acknowledgement to both hubs showing every acknowledged change.
    recovered_in: Duration,
}

/// Runs the clients through the collectors' balancer and a reader through the hubs' balancer
/// for a few seconds, then `fault`, then a few seconds more; returns what they saw.
fn under_ingest(set: &mut Set, name: &'static str, fault: impl FnOnce(&mut Set)) -> Phase {
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(240);
    let clients: Vec<_> = std::mem::take(&mut set.agents)
        .into_iter()
        .enumerate()
        .map(|(i, mut agent)| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                let mut acked_at = Vec::new();
                let mut attempts = Vec::new();
                let mut round = 0;
                while !stop.load(Ordering::SeqCst) {
                    round += 1;
                    let report = agent.next_report(&format!("{name}.{i}.{round}"));
                    agent
                        .deliver(&report, REQUEST_LIMIT, deadline, &mut attempts)
                        .unwrap_or_else(|err| panic!("{name}: {err}"));
                    acknowledged.extend(report.changes);
                    acked_at.push(Instant::now());
                    std::thread::sleep(Duration::from_millis(100));
                }
                let refused = attempts.iter().filter(|a| !a.acknowledged()).count();
                (agent, acknowledged, acked_at, refused)
            })
        })
        .collect();
    let reads = Arc::new(Mutex::new((0usize, 0usize, Duration::ZERO)));
    let reader = {
        let (stop, reads, hubs) = (stop.clone(), reads.clone(), set.balancer.addr("hubs"));
        std::thread::spawn(move || {
            let mut failing_since: Option<Instant> = None;
            while !stop.load(Ordering::SeqCst) {
                let ok = http_request(
                    &hubs,
                    "GET",
                    "/api/v1/summary",
                    &[],
                    b"",
                    Duration::from_secs(10),
                )
                .is_ok_and(|answer| answer.status == 200);
                let mut reads = reads.lock().unwrap();
                reads.0 += 1;
                if ok {
                    failing_since = None;
                } else {
                    reads.1 += 1;
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    reads.2 = reads.2.max(since.elapsed());
                }
                drop(reads);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    fault(set);
    let ended = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::SeqCst);
    let mut acknowledged = BTreeMap::new();
    let mut refused = 0;
    let mut ingest_resumed_in = Duration::ZERO;
    let mut last_ack: Option<Instant> = None;
    for client in clients {
        let (agent, changes, acked_at, client_refused) = client.join().unwrap();
        refused += client_refused;
        // The first acknowledgement after the fault ended, for this client.
        let resumed = acked_at
            .iter()
            .find(|at| **at >= ended)
            .map_or(Duration::MAX, |at| at.duration_since(ended));
        ingest_resumed_in = ingest_resumed_in.max(resumed);
        last_ack = acked_at.last().copied().into_iter().chain(last_ack).max();
        acknowledged.insert(agent.cluster.clone(), changes);
        set.agents.push(agent);
    }
    reader.join().unwrap();
    let recovered_in = both_hubs_show(set, &acknowledged, last_ack.unwrap_or(ended));
    let (answers, failed_answers, longest_answer_gap) = *reads.lock().unwrap();
    Phase {
        name,
        acknowledged,
        refused,
        answers,
        failed_answers,
        longest_answer_gap,
        ingest_resumed_in,
        recovered_in,
    }
}

/// Waits until both hubs (asked directly) show every cluster's last acknowledged version;
/// returns how long after `since` that was.
fn both_hubs_show(
    set: &Set,
    acknowledged: &BTreeMap<String, Vec<Change>>,
    since: Instant,
) -> Duration {
    let truth: BTreeMap<&String, BTreeMap<String, String>> = acknowledged
        .iter()
        .map(|(cluster, changes)| {
            let newest = changes
                .iter()
                .map(|c| (c.name.clone(), c.version.clone()))
                .collect();
            (cluster, newest)
        })
        .collect();
    loop {
        let mut differ = Vec::new();
        for port in set.hub_ports {
            let hub = format!("127.0.0.1:{port}");
            for (cluster, versions) in &truth {
                let seen = observed_versions(&hub, cluster);
                if &seen != versions {
                    differ.push(format!(
                        "hub {port}, {cluster}: shows {seen:?}, acknowledged {versions:?}"
                    ));
                }
            }
        }
        if differ.is_empty() {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < RECOVERY_LIMIT,
            "the hubs did not show every acknowledged change within {RECOVERY_LIMIT:?}: {differ:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every acknowledged change is stored, exactly once, with its version.
fn stored_exactly_once(set: &Set, phase: &Phase) {
    set.runtime
        .block_on(fleetscope_testkit::clickhouse_cluster::sync_replicas(
            &set.clickhouse,
            DATABASE,
        ));
    for (cluster, changes) in &phase.acknowledged {
        let stored = set
            .runtime
            .block_on(stored_changes(&set.clickhouse.url(), DATABASE, cluster));
        for change in changes {
            match stored.get(&(change.name.clone(), change.change_seq)) {
                Some((version, 1)) if *version == change.version => {}
                other => panic!(
                    "{}: {cluster}'s acknowledged change {change:?} is stored as {other:?}",
                    phase.name
                ),
            }
        }
    }
}

fn report(phase: &Phase) -> String {
    let acknowledged: usize = phase.acknowledged.values().map(Vec::len).sum();
    format!(
        "{}: {acknowledged} changes acknowledged ({} requests refused and sent again), every \
         client acknowledged again {:.1?} after the fault ended, {} of {} answers through the \
         hubs' balancer failed (longest run {:?}), both hubs showed every acknowledged change \
         {:.1?} after the last one",
        phase.name,
        phase.refused,
        phase.ingest_resumed_in,
        phase.failed_answers,
        phase.answers,
        phase.longest_answer_gap,
        phase.recovered_in
    )
}

fn wait_for_healthy(addr: &str, path: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while !http_request(addr, "GET", path, &[], b"", Duration::from_secs(5))
        .is_ok_and(|a| a.status == 200)
    {
        assert!(Instant::now() < until, "{addr}{path} never answered 200");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_cluster_that_loses_one_server_at_a_time_loses_no_acknowledged_change() {
    let _one_at_a_time = one_at_a_time();
    let mut set = Set::start();
    let mut phases = Vec::new();

    phases.push(under_ingest(&mut set, "replica", |set| {
        set.clickhouse.server_mut(1, 1).kill_now();
        std::thread::sleep(Duration::from_secs(10));
        set.clickhouse.server_mut(1, 1).restart().unwrap();
    }));
    phases.push(under_ingest(&mut set, "zookeeper", |set| {
        let pid = set.clickhouse.zookeeper().and_then(|zk| zk.pid()).unwrap();
        let stopped = Suspended::stop(pid);
        std::thread::sleep(Duration::from_secs(60));
        drop(stopped);
    }));
    phases.push(under_ingest(&mut set, "collector", |set| {
        if let Some(mut collector) = set.collectors[0].take() {
            collector.kill();
        }
        std::thread::sleep(Duration::from_secs(5));
        set.start_collector(0);
    }));
    phases.push(under_ingest(&mut set, "hub", |set| {
        if let Some(mut hub) = set.hubs[1].take() {
            hub.kill();
        }
        std::thread::sleep(Duration::from_secs(5));
        set.start_hub(1);
        let hub = format!("127.0.0.1:{}", set.hub_ports[1]);
        wait_for_healthy(&hub, "/readyz");
    }));

    for phase in &phases {
        eprintln!("{}", report(phase));
    }
    for phase in &phases {
        stored_exactly_once(&set, phase);
        assert!(
            phase.longest_answer_gap <= ANSWER_GAP_LIMIT,
            "{}",
            report(phase)
        );
        assert!(
            phase
                .acknowledged
                .values()
                .all(|changes| !changes.is_empty()),
            "{}: a client had nothing acknowledged",
            phase.name
        );
    }
}
