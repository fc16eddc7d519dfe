//! Cluster mode losing one server at a time, as `fleetscope loadtest --clickhouse-cluster 2x2
//! --faults …` runs it, short: ClickHouse as 2 shards × 2 replicas with ZooKeeper, two
//! collectors and two hubs, each kind behind HAProxy (health-checked on `/ping` and `/readyz`),
//! all on loopback. During steady ingest and during a rollout, one at a time, a replica is
//! killed and started again on its data, ZooKeeper is stopped and continued, a collector and a
//! hub are killed and started again. After each: every acknowledged change is stored exactly
//! once, both hubs (asked directly) agree with the simulator's ground truth, and the answers
//! through the hubs' balancer never failed for more than a few seconds in a row.
//! docs/scaling.md gives the figures of a full-length run.

use fleetscope_loadtest::faults::Fault;

/// The longest the hubs' balancer may fail to answer in a row during a fault.
const ANSWER_GAP_LIMIT_S: f64 = 5.0;

#[test]
fn a_cluster_that_loses_one_server_at_a_time_loses_no_acknowledged_change() {
    let _turn = super::one_run_at_a_time();
    let out = tempfile::tempdir().unwrap();
    let report = super::run_loadtest(
        &[
            "--clickhouse-cluster",
            "2x2",
            "--faults",
            "replica,zookeeper,collector,hub",
            "--fault-scenarios",
            "steady,rollout",
            "--clusters",
            "200",
            "--apps",
            "8",
            "--scenarios",
            "steady",
            "--concurrency",
            "16",
            "--readers",
            "2",
            "--heartbeat-seconds",
            "5",
            "--stale-after",
            "120",
            "--steady-seconds",
            "6",
            "--change-rate",
            "0.05",
            "--wave-seconds",
            "2",
            "--fault-lead-seconds",
            "2",
            "--replica-down-seconds",
            "5",
            "--zookeeper-stop-seconds",
            "15",
            "--service-down-seconds",
            "2",
        ],
        out.path(),
    );
    assert!(report.correctness_passed);
    assert!(report.cluster.as_deref().unwrap().contains("2x2"));
    let phases: Vec<&str> = report.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        phases,
        [
            "connect",
            "steady",
            "replica fault, steady",
            "replica fault, rollout",
            "zookeeper fault, steady",
            "zookeeper fault, rollout",
            "collector fault, steady",
            "collector fault, rollout",
            "hub fault, steady",
            "hub fault, rollout",
        ]
    );
    let faults: Vec<(Fault, &str)> = report
        .faults
        .iter()
        .map(|f| (f.fault, f.scenario.as_str()))
        .collect();
    assert_eq!(faults.len(), 8, "{faults:?}");
    for f in &report.faults {
        let what = format!("{}: {f:?}", f.phase);
        assert!(
            f.check_passed,
            "both hubs agree with the ground truth: {what}"
        );
        assert!(f.audit.holds(), "nothing lost or stored twice: {what}");
        assert!(
            f.audit.stored_changes > 0 && f.audit.stored_changes == f.audit.acknowledged_changes,
            "{what}"
        );
        assert!(
            f.acknowledged_changes > 0,
            "changes were acknowledged during the phase: {what}"
        );
        assert!(
            f.longest_failing_s <= ANSWER_GAP_LIMIT_S,
            "answers kept coming through the balancer: {what}"
        );
        assert!(f.answers > 0, "{what}");
        assert!(
            f.down_seconds >= 2.0,
            "the fault lasted as long as asked: {what}"
        );
    }
    // ZooKeeper's stop refuses replicated inserts: the agents are told to come back later
    // (the collector's queue fills), and nothing gets through while it lasts.
    let zookeeper = report
        .faults
        .iter()
        .find(|f| f.fault == Fault::Zookeeper && f.scenario == "steady")
        .unwrap();
    assert!(
        zookeeper.longest_without_acknowledgement_s >= 10.0,
        "{zookeeper:?}"
    );
    let audit = report.store_audit.as_ref().unwrap();
    assert!(audit.holds(), "{audit:?}");
    assert_eq!(audit.stored_changes, audit.acknowledged_changes);
    let markdown = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(markdown.contains("## Faults"), "{markdown}");
    for name in [
        "collector-1.log",
        "collector-2.log",
        "hub-1.log",
        "hub-2.log",
    ] {
        assert!(out.path().join(name).is_file(), "{name} is kept");
    }
}
