//! The agent end to end, without Kubernetes: objects fed to it travel through its spool and the
//! central collector into a real ClickHouse; with the collector down nothing is lost and
//! everything arrives in order once it is back; a restarted agent resends nothing it already sent.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, kustomization};
use fleetscope_collector::agent::{self, AgentStats, SourceEvent};
use fleetscope_collector::central::auth::AgentAuth;
use fleetscope_collector::central::Collector;
use fleetscope_model::{ObjectKind, Timestamp};
use fleetscope_store::Store;
use fleetscope_testkit::TestStore;
use tokio::sync::{mpsc, oneshot};

use crate::common;

struct CollectorServer {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl CollectorServer {
    async fn start(store: &Store, addr: Option<std::net::SocketAddr>) -> CollectorServer {
        let collector = Collector::new(store.clone(), common::options(AgentAuth::Insecure));
        let listener =
            tokio::net::TcpListener::bind(addr.unwrap_or_else(|| "127.0.0.1:0".parse().unwrap()))
                .await
                .unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let router = collector.router();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        CollectorServer {
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take() {
            // Open keep-alive connections hold a graceful shutdown; after a moment, cut them.
            if tokio::time::timeout(Duration::from_millis(200), &mut task)
                .await
                .is_err()
            {
                task.abort();
                let _ = task.await;
            }
        }
    }
}

#[tokio::test]
async fn nothing_is_lost_while_the_collector_is_down() {
    let test = TestStore::start().await;
    let store = test.store.clone();
    store
        .insert_rows(&[fleetscope_testkit::inventory_row(
            "edge-1",
            "ships/north-sea",
        )])
        .await
        .unwrap();
    let mut server = CollectorServer::start(&store, None).await;
    let url = format!("http://{}", server.addr);
    let spool_dir = tempfile::tempdir().unwrap();

    let (events, receiver) = mpsc::channel(1024);
    let stats = Arc::new(AgentStats::default());
    let (stop_agent, agent_stopped) = oneshot::channel::<()>();
    let agent = tokio::spawn(agent::run(
        common::agent_config(url.clone(), spool_dir.path()),
        receiver,
        async {
            let _ = agent_stopped.await;
        },
        stats.clone(),
    ));

    if events
        .send(SourceEvent::Reconciler {
            name: "flux".into(),
            version: "v2.4.0".into(),
        })
        .await
        .is_err()
    {
        panic!("agent stopped: {:?}", agent.await);
    }
    events
        .send(SourceEvent::Listed {
            kind: ObjectKind::Kustomization,
            objects: vec![
                kustomization("api", "1.0.0", "True"),
                kustomization("web", "1.0.0", "True"),
                kustomization("db", "1.0.0", "True"),
            ],
        })
        .await
        .unwrap();
    eventually("three objects stored", async || {
        let rows = store.observed_for_cluster("edge-1").await.unwrap();
        (rows.len() == 3).then_some(())
    })
    .await;
    let beats = store.latest_heartbeats().await.unwrap();
    assert_eq!(beats[0].reconciler_names, vec!["flux".to_owned()]);

    // The collector goes away while objects keep changing.
    server.stop().await;
    for version in 1..=20 {
        if events
            .send(SourceEvent::Applied(kustomization(
                "api",
                &format!("2.0.{version}"),
                "True",
            )))
            .await
            .is_err()
        {
            panic!("agent stopped: {:?}", agent.await);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    events
        .send(SourceEvent::Deleted(kustomization("web", "1.0.0", "True")))
        .await
        .unwrap();
    events
        .send(SourceEvent::Applied(kustomization("mq", "3.0.0", "False")))
        .await
        .unwrap();
    eventually("reports waiting in the spool", async || {
        (stats.spool_reports.load(Ordering::Relaxed) > 0
            && stats.send_failures.load(Ordering::Relaxed) > 0)
            .then_some(())
    })
    .await;
    // The agent's own metrics show the backlog.
    let metrics_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_url = format!("http://{}/metrics", metrics_listener.local_addr().unwrap());
    let metrics_router = agent::metrics::router(stats.clone());
    tokio::spawn(async move { axum::serve(metrics_listener, metrics_router).await.unwrap() });
    let text = reqwest::get(&metrics_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let waiting: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("fleetscope_agent_spool_reports "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no spool gauge in\n{text}"));
    assert!(waiting > 0, "{text}");
    tokio::time::sleep(Duration::from_millis(500)).await;

    // It comes back on the same address.
    let mut server = CollectorServer::start(&store, Some(server.addr)).await;
    eventually("the spool drained", async || {
        (stats.spool_reports.load(Ordering::Relaxed) == 0).then_some(())
    })
    .await;
    let rows = store.observed_for_cluster("edge-1").await.unwrap();
    let state: Vec<(&str, &str, u8, &str)> = rows
        .iter()
        .map(|r| {
            (
                r.object_name.as_str(),
                r.version.as_str(),
                r.deleted,
                r.health.as_str(),
            )
        })
        .collect();
    assert_eq!(
        state,
        vec![
            ("api", "2.0.20", 0, "healthy"),
            ("db", "1.0.0", 0, "healthy"),
            ("mq", "3.0.0", 0, "degraded"),
            ("web", "1.0.0", 1, "healthy")
        ]
    );
    // Every change arrived, in order of change number.
    let history = store
        .observed_history("edge-1", Timestamp(0), Timestamp(i64::from(u32::MAX)))
        .await
        .unwrap();
    let api: Vec<(u64, String)> = history
        .iter()
        .filter(|r| r.object_name == "api")
        .map(|r| (r.change_seq, r.version.clone()))
        .collect();
    let mut by_seq = api.clone();
    by_seq.sort();
    let versions: Vec<&str> = by_seq.iter().map(|(_, v)| v.as_str()).collect();
    let expected: Vec<String> = std::iter::once("1.0.0".to_owned())
        .chain((1..=20).map(|v| format!("2.0.{v}")))
        .collect();
    assert_eq!(
        versions,
        expected.iter().map(String::as_str).collect::<Vec<_>>()
    );

    // A restarted agent remembers what it sent: the same list produces no change.
    stop_agent.send(()).unwrap();
    agent.await.unwrap().unwrap();
    let (events, receiver) = mpsc::channel(1024);
    let stats = Arc::new(AgentStats::default());
    let (stop_agent, agent_stopped) = oneshot::channel::<()>();
    let agent = tokio::spawn(agent::run(
        common::agent_config(url, spool_dir.path()),
        receiver,
        async {
            let _ = agent_stopped.await;
        },
        stats.clone(),
    ));
    events
        .send(SourceEvent::Listed {
            kind: ObjectKind::Kustomization,
            objects: vec![
                kustomization("api", "2.0.20", "True"),
                kustomization("db", "1.0.0", "True"),
                kustomization("mq", "3.0.0", "False"),
            ],
        })
        .await
        .unwrap();
    eventually("a heartbeat from the restarted agent", async || {
        (stats.heartbeats_sent.load(Ordering::Relaxed) > 0).then_some(())
    })
    .await;
    assert_eq!(stats.changes.load(Ordering::Relaxed), 0, "nothing resent");
    // A deletion while the agent was down shows up in the next full list.
    events
        .send(SourceEvent::Listed {
            kind: ObjectKind::Kustomization,
            objects: vec![kustomization("api", "2.0.20", "True")],
        })
        .await
        .unwrap();
    eventually("db and mq deleted", async || {
        let rows = store.observed_for_cluster("edge-1").await.unwrap();
        (rows.iter().filter(|r| r.deleted == 1).count() == 3).then_some(())
    })
    .await;
    stop_agent.send(()).unwrap();
    agent.await.unwrap().unwrap();
    server.stop().await;
}
