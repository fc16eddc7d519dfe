//! ClickHouse stopped and restarted while agents keep reporting: every change any agent made
//! ends up stored exactly once, and the latest state of every object is exact.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fleetscope_collector::agent::{self, AgentConfig, AgentStats, SourceEvent};
use fleetscope_collector::central::{Collector, CollectorOptions};
use fleetscope_model::{ClusterId, Timestamp};
use fleetscope_store::writer::BatchWriterConfig;
use fleetscope_store::ClusterRow;
use fleetscope_testkit::TestStore;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

const AGENTS: usize = 4;
const OBJECTS: usize = 5;
const ROUNDS: usize = 40;

fn helm_release(name: &str, version: usize) -> serde_json::Value {
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": "apps", "labels": {"fleetscope.io/app": name}, "annotations": {"fleetscope.io/version": format!("1.0.{version}")}},
        "status": {
            "lastAttemptedRevision": format!("1.0.{version}"),
            "conditions": [{"type": "Ready", "status": "True", "reason": "UpgradeSucceeded", "message": format!("upgraded to 1.0.{version}"), "lastTransitionTime": "2026-11-22T01:00:00Z"}],
        },
    })
}

#[tokio::test]
async fn nothing_acknowledged_is_lost_and_nothing_counts_twice() {
    let mut test = TestStore::start().await;
    let store = test.store.clone();
    let clusters: Vec<String> = (0..AGENTS).map(|i| format!("plant-{i}")).collect();
    store
        .insert_rows(
            &clusters
                .iter()
                .map(|id| ClusterRow {
                    cluster_id: id.clone(),
                    group_path: "factories".into(),
                    group_prefixes: vec!["factories".into()],
                    environment: "prod".into(),
                    reconciler: "flux".into(),
                    label_keys: vec![],
                    label_values: vec![],
                    updated_at: 0,
                    version: 1,
                    removed: 0,
                })
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();
    let collector = Collector::new(
        store.clone(),
        CollectorOptions {
            ack_timeout: Duration::from_secs(2),
            writer: BatchWriterConfig {
                max_delay: Duration::from_millis(30),
                initial_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_millis(300),
                max_attempts: 3,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = collector.router();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let spools: Vec<tempfile::TempDir> =
        (0..AGENTS).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut agents = Vec::new();
    for (cluster, spool) in clusters.iter().zip(&spools) {
        let (events, receiver) = mpsc::channel(4096);
        let stats = Arc::new(AgentStats::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let config = AgentConfig {
            flush_interval: Duration::from_millis(30),
            heartbeat_interval: Duration::from_secs(5),
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
            request_timeout: Duration::from_secs(5),
            ..AgentConfig::new(
                ClusterId::parse(cluster).unwrap(),
                url.clone(),
                spool.path(),
            )
        };
        let task = tokio::spawn(agent::run(
            config,
            receiver,
            async {
                let _ = stopped.await;
            },
            stats.clone(),
        ));
        agents.push((events, stats, stop, task));
    }

    for round in 1..=ROUNDS {
        for (events, ..) in &agents {
            for object in 0..OBJECTS {
                events
                    .send(SourceEvent::Applied(helm_release(
                        &format!("svc-{object}"),
                        round,
                    )))
                    .await
                    .unwrap();
            }
        }
        if round == ROUNDS / 3 {
            test.server.shut_down();
        }
        if round == 2 * ROUNDS / 3 {
            test.server.restart().expect("clickhouse comes back");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for _ in 0..300 {
        if agents.iter().all(|(_, stats, ..)| {
            stats.spool_reports.load(Ordering::Relaxed) == 0
                && stats.changes.load(Ordering::Relaxed) == (OBJECTS * ROUNDS) as u64
        }) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (_, stats, ..) in &agents {
        assert_eq!(
            stats.spool_reports.load(Ordering::Relaxed),
            0,
            "every spooled report was acknowledged"
        );
        assert!(
            stats.send_failures.load(Ordering::Relaxed) > 0,
            "the outage was felt"
        );
    }
    for cluster in &clusters {
        let latest = store.observed_for_cluster(cluster).await.unwrap();
        assert_eq!(latest.len(), OBJECTS);
        assert!(
            latest.iter().all(|r| r.version == format!("1.0.{ROUNDS}")),
            "{cluster}: {:?}",
            latest.iter().map(|r| &r.version).collect::<Vec<_>>()
        );
        let history = store
            .observed_history(cluster, Timestamp(0), Timestamp(i64::from(u32::MAX)))
            .await
            .unwrap();
        let distinct: std::collections::BTreeSet<(String, u64)> = history
            .iter()
            .map(|r| (r.object_name.clone(), r.change_seq))
            .collect();
        assert_eq!(
            history.len(),
            distinct.len(),
            "{cluster}: no change counted twice"
        );
        assert_eq!(
            history.len(),
            OBJECTS * ROUNDS,
            "{cluster}: every change stored"
        );
    }
    for (events, _, stop, task) in agents {
        drop(events);
        let _ = stop.send(());
        task.await.unwrap().unwrap();
    }
}
