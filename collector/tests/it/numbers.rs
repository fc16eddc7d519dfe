//! Report and change numbers at their limits, on a real collector over HTTP into a real
//! ClickHouse: numbers past the valid range are refused by name and silence nothing; an agent
//! whose counters are behind what its cluster already used (a restored spool, a clock that went
//! back) is accepted, and its changes become current, without anyone touching ClickHouse.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::{change, eventually, kustomization, now};
use fleetscope_collector::agent::{self, AgentStats, SourceEvent};
use fleetscope_collector::central::auth::AgentAuth;
use fleetscope_collector::central::Collector;
use fleetscope_collector::protocol::{Change, Report, ReportKind, MAX_SEQ};
use fleetscope_model::ObjectKind;
use fleetscope_store::Store;
use fleetscope_testkit::TestStore;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use crate::common;

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

async fn start_collector(store: &Store) -> String {
    common::serve(&Collector::new(
        store.clone(),
        common::options(AgentAuth::Insecure),
    ))
    .await
}

fn delta(seq: u64, changes: Vec<Change>) -> Report {
    Report {
        cluster: "edge-1".into(),
        agent_version: "0.1.0".into(),
        report_seq: seq,
        sent_at: now(),
        kind: ReportKind::Delta,
        reconcilers: Default::default(),
        change_seq_high: 0,
        changes,
        stamped_apps: Vec::new(),
    }
}

async fn post(url: &str, report: &Report) -> (u16, serde_json::Value) {
    let response = reqwest::Client::new()
        .post(format!("{url}/api/v1/ingest"))
        .header("content-encoding", "gzip")
        .body(report.encode())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// The current version of each object of edge-1, by name.
async fn current(store: &Store) -> Vec<(String, String)> {
    store
        .observed_for_cluster("edge-1")
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.object_name, r.version))
        .collect()
}

async fn edge_store() -> TestStore {
    let test = TestStore::start().await;
    test.store
        .insert_rows(&[fleetscope_testkit::inventory_row("edge-1", "ships/north")])
        .await
        .unwrap();
    test
}

struct RunningAgent {
    events: mpsc::Sender<SourceEvent>,
    stats: Arc<AgentStats>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

fn start_agent(url: &str, spool: &std::path::Path) -> RunningAgent {
    let config = common::agent_config(url.to_owned(), spool);
    let (events, receiver) = mpsc::channel(64);
    let stats = Arc::new(AgentStats::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(agent::run(
        config,
        receiver,
        async {
            let _ = stopped.await;
        },
        stats.clone(),
    ));
    RunningAgent {
        events,
        stats,
        stop,
        task,
    }
}

impl RunningAgent {
    async fn list(&self, objects: Vec<serde_json::Value>) {
        self.events
            .send(SourceEvent::Listed {
                kind: ObjectKind::Kustomization,
                objects,
            })
            .await
            .unwrap();
    }

    async fn drained(&self) {
        let stats = self.stats.clone();
        eventually("the spool drained", async || {
            (stats.reports_sent.load(Ordering::Relaxed) > 0
                && stats.spool_reports.load(Ordering::Relaxed) == 0)
                .then_some(())
        })
        .await;
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn numbers_past_the_range_are_refused_by_name_and_silence_nothing() {
    let test = edge_store().await;
    let url = start_collector(&test.store).await;

    let (status, body) = post(&url, &delta(u64::MAX, vec![change(5, "api", "1.0.0")])).await;
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("seq")),
        "{body}"
    );
    assert_eq!(
        body["error"],
        "18446744073709551615 is above the largest number allowed, 9007199254740991 (2^53 - 1)"
    );
    let (status, body) = post(&url, &delta(MAX_SEQ, vec![change(5, "api", "1.0.0")])).await;
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("seq")),
        "{body}"
    );
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("more than a day ahead of the collector's clock in microseconds"),
        "{body}"
    );
    let (status, body) = post(
        &url,
        &delta(
            3,
            vec![change(5, "api", "1.0.0"), change(u64::MAX, "web", "1.0.0")],
        ),
    )
    .await;
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("changes[1].change_seq")),
        "{body}"
    );
    let (status, body) = post(
        &url,
        &Report {
            kind: ReportKind::Snapshot,
            change_seq_high: u64::MAX,
            ..delta(3, vec![change(5, "api", "1.0.0")])
        },
    )
    .await;
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("change_seq_high")),
        "{body}"
    );
    assert!(
        current(&test.store).await.is_empty(),
        "nothing refused was stored"
    );

    // Ordinary numbers after them are stored, and a later change becomes current.
    let (status, body) = post(&url, &delta(1, vec![change(5, "api", "1.0.0")])).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("stored")),
        "{body}"
    );
    let (status, body) = post(&url, &delta(2, vec![change(6, "api", "1.1.0")])).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("stored")),
        "{body}"
    );
    assert_eq!(
        current(&test.store).await,
        vec![("api".to_owned(), "1.1.0".to_owned())]
    );
    // A genuine duplicate names the numbers the collector holds.
    let (status, body) = post(&url, &delta(2, vec![change(6, "api", "1.1.0")])).await;
    assert_eq!(
        (status, body),
        (
            200,
            json!({"status": "duplicate", "seq": 2, "acked_seq": 2, "highest_change_seq": 6})
        )
    );
}

#[tokio::test]
async fn an_agent_whose_counters_are_behind_renumbers_and_its_changes_become_current() {
    let test = edge_store().await;
    let url = start_collector(&test.store).await;
    // An earlier agent of the cluster numbered an hour ahead of this machine's clock (its
    // clock was ahead, or this one went back).
    let ahead = now_micros() + 3_600_000_000;
    let (status, body) = post(&url, &delta(ahead, vec![change(ahead, "api", "1.0.0")])).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("stored")),
        "{body}"
    );

    let spool = tempfile::tempdir().unwrap();
    let agent = start_agent(&url, spool.path());
    agent
        .list(vec![kustomization("api", "2.0.0", "True")])
        .await;
    agent.drained().await;
    assert_eq!(
        current(&test.store).await,
        vec![("api".to_owned(), "2.0.0".to_owned())],
        "the agent's change is current"
    );
    assert_eq!(agent.stats.renumberings.load(Ordering::Relaxed), 1);
    // What it spools next is numbered above the collector's numbers too.
    agent
        .list(vec![kustomization("api", "2.1.0", "True")])
        .await;
    let store = test.store.clone();
    eventually("the next change current", async || {
        (current(&store).await == vec![("api".to_owned(), "2.1.0".to_owned())]).then_some(())
    })
    .await;
    let rows = test.store.observed_for_cluster("edge-1").await.unwrap();
    assert!(
        rows[0].change_seq > ahead + 1,
        "{} <= {ahead}",
        rows[0].change_seq
    );
    assert_eq!(agent.stats.renumberings.load(Ordering::Relaxed), 1);
    agent.stop().await;
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[tokio::test]
async fn an_agent_restarted_on_a_restored_spool_is_accepted() {
    let test = edge_store().await;
    let url = start_collector(&test.store).await;
    let spool = tempfile::tempdir().unwrap();
    let backup = tempfile::tempdir().unwrap();

    let agent = start_agent(&url, spool.path());
    agent
        .list(vec![kustomization("api", "1.0.0", "True")])
        .await;
    agent.drained().await;
    agent.stop().await;
    copy_dir(spool.path(), backup.path());

    // The agent goes on and reports more, numbered above the backup's counters.
    let agent = start_agent(&url, spool.path());
    for version in ["1.1.0", "1.2.0", "1.3.0"] {
        agent
            .list(vec![kustomization("api", version, "True")])
            .await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    agent.drained().await;
    agent.stop().await;
    assert_eq!(
        current(&test.store).await,
        vec![("api".to_owned(), "1.3.0".to_owned())]
    );

    // The volume is restored from the backup and the agent starts on it.
    let agent = start_agent(&url, backup.path());
    agent
        .list(vec![kustomization("api", "2.0.0", "True")])
        .await;
    let store = test.store.clone();
    eventually("the restored agent's change current", async || {
        (current(&store).await == vec![("api".to_owned(), "2.0.0".to_owned())]).then_some(())
    })
    .await;
    agent.stop().await;
}
