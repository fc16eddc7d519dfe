//! What the collector's integration tests share: the clock, a collector served on a free
//! loopback port with a writer that flushes at once, a Kustomization as a change and as the
//! object an agent watches, an agent configured for quick retries, and a poll with a deadline.

#![allow(dead_code)]

use std::time::Duration;

use fleetscope_collector::agent::AgentConfig;
use fleetscope_collector::central::auth::AgentAuth;
use fleetscope_collector::central::{Collector, CollectorOptions};
use fleetscope_collector::protocol::Change;
use fleetscope_model::ClusterId;
use fleetscope_store::writer::BatchWriterConfig;
use serde_json::json;

/// The wall clock in seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Collector options with `auth` and a writer that flushes after 20 ms.
pub fn options(auth: AgentAuth) -> CollectorOptions {
    CollectorOptions {
        auth,
        writer: BatchWriterConfig {
            max_delay: Duration::from_millis(20),
            ..BatchWriterConfig::default()
        },
        ..CollectorOptions::default()
    }
}

/// Serves `collector`'s routes on a free loopback port until the test ends; its base URL.
pub async fn serve(collector: &Collector) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = collector.router();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

/// A healthy Kustomization of app `name` at `version`, numbered `change_seq`.
pub fn change(change_seq: u64, name: &str, version: &str) -> Change {
    Change {
        change_seq,
        kind: "Kustomization".into(),
        namespace: "flux-system".into(),
        name: name.into(),
        app: Some(name.into()),
        version: Some(version.into()),
        content_hash: None,
        applied_revision: format!("main@sha1:{change_seq:040}"),
        health: "healthy".into(),
        sync: "unknown".into(),
        reason: "ReconciliationSucceeded".into(),
        message: format!("Applied revision: {version}"),
        transitioned_at: Some(now() - 30),
        observed_at: now() - 1,
        deleted: false,
        labels: Default::default(),
        target_revision: String::new(),
        images: Vec::new(),
    }
}

/// A Flux Kustomization of app `name` at `version`, its Ready condition `ready`, as an agent
/// lists it.
pub fn kustomization(name: &str, version: &str, ready: &str) -> serde_json::Value {
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {
            "name": name,
            "namespace": "flux-system",
            "labels": {"fleetscope.io/app": name},
            "annotations": {"fleetscope.io/version": version},
        },
        "spec": {"interval": "10m", "path": "./apps", "prune": true, "sourceRef": {"kind": "GitRepository", "name": "platform"}},
        "status": {
            "lastAppliedRevision": format!("main@sha1:{version}"),
            "conditions": [{
                "type": "Ready", "status": ready, "reason": "ReconciliationSucceeded",
                "message": format!("Applied revision: {version}"), "lastTransitionTime": "2026-11-21T10:00:00Z",
            }],
        },
    })
}

/// An agent of cluster edge-1 that heartbeats, flushes and retries quickly.
pub fn agent_config(url: String, spool: &std::path::Path) -> AgentConfig {
    AgentConfig {
        heartbeat_interval: Duration::from_millis(300),
        flush_interval: Duration::from_millis(50),
        min_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        request_timeout: Duration::from_secs(2),
        ..AgentConfig::new(ClusterId::parse("edge-1").unwrap(), url, spool)
    }
}

/// Polls `check` every 100 ms until it gives a value; fails after 20 s naming `what`.
pub async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..200 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}
