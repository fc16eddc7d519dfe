//! Against a real Kubernetes API server serving the real Flux and Argo CD CRDs: the agent's
//! watchers see objects being created, their status patched and deleted, and everything lands
//! in ClickHouse through the central collector. Argo CD's CRD is installed only after the agent
//! started, to show a kind that appears later is picked up.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use fleetscope_collector::agent::{self, AgentConfig, AgentStats};
use fleetscope_collector::central::auth::AgentAuth;
use fleetscope_collector::central::{Collector, CollectorOptions};
use fleetscope_local_apiserver::LocalApiServer;
use fleetscope_model::ClusterId;
use fleetscope_store::writer::BatchWriterConfig;
use fleetscope_store::ObservedRow;
use fleetscope_testkit::TestStore;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

const TOKEN: &str = "edge-k8s-token-0123456789";

fn crd(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/crds")
        .join(name)
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..300 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

fn summary(rows: &[ObservedRow]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            format!(
                "{} {}/{} app={} version={} health={} sync={} deleted={}",
                r.object_kind,
                r.object_namespace,
                r.object_name,
                r.app,
                r.version,
                r.health,
                r.sync,
                r.deleted
            )
        })
        .collect()
}

#[tokio::test]
async fn objects_on_a_real_api_server_reach_clickhouse() {
    let api_server = tokio::task::spawn_blocking(|| LocalApiServer::start(None))
        .await
        .unwrap()
        .unwrap_or_else(|err| panic!("this test needs a private Kubernetes API server: {err}"));
    for file in ["flux-kustomization.crd.yaml", "flux-gitrepository.crd.yaml"] {
        for name in api_server.apply_crd_file(&crd(file)).unwrap() {
            api_server.wait_for_crd(&name).unwrap();
        }
    }
    let test = TestStore::start().await;
    let store = test.store.clone();
    store
        .insert_rows(&[fleetscope_testkit::inventory_row(
            "edge-k8s",
            "factories/linz",
        )])
        .await
        .unwrap();
    let collector = Collector::new(
        store.clone(),
        CollectorOptions {
            auth: AgentAuth::parse(&format!(
                "agents:\n  - cluster: edge-k8s\n    token: {TOKEN}\n"
            ))
            .unwrap(),
            writer: BatchWriterConfig {
                max_delay: Duration::from_millis(50),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector_url = format!("http://{}", listener.local_addr().unwrap());
    let router = collector.router();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let kubeconfig = kube::config::Kubeconfig::read_from(api_server.kubeconfig_path()).unwrap();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let spool = tempfile::tempdir().unwrap();
    let (events, receiver) = mpsc::channel(1024);
    let watchers =
        fleetscope_collector::watch::watch_all(client.clone(), events, Duration::from_millis(500));
    let stats = Arc::new(AgentStats::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let config = AgentConfig {
        token: Some(TOKEN.into()),
        flush_interval: Duration::from_millis(100),
        heartbeat_interval: Duration::from_secs(1),
        min_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        ..AgentConfig::new(
            ClusterId::parse("edge-k8s").unwrap(),
            collector_url,
            spool.path(),
        )
    };
    let agent = tokio::spawn(agent::run(
        config,
        receiver,
        async {
            let _ = stopped.await;
        },
        stats.clone(),
    ));

    let kustomizations: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "flux-system",
        &resource(
            "kustomize.toolkit.fluxcd.io",
            "v1",
            "Kustomization",
            "kustomizations",
        ),
    );
    let stamped = |name: &str, version: &str| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {
                "name": name,
                "namespace": "flux-system",
                "labels": {"fleetscope.io/app": name, "app.kubernetes.io/managed-by": "fleetscope"},
                "annotations": {"fleetscope.io/version": version, "fleetscope.io/content-hash": format!("sha256:{}", "ab".repeat(32))},
            },
            "spec": {"interval": "10m", "path": format!("./render-groups/rg-1/{name}"), "prune": true, "sourceRef": {"kind": "GitRepository", "name": "platform"}},
        }))
        .unwrap()
    };
    kustomizations
        .create(&PostParams::default(), &stamped("checkout", "1.4.0"))
        .await
        .unwrap();
    kustomizations
        .create(&PostParams::default(), &stamped("payments", "2.0.1"))
        .await
        .unwrap();
    let ready = |status: &str, reason: &str, revision: &str| {
        json!({"status": {
            "observedGeneration": 1,
            "lastAppliedRevision": revision,
            "lastAttemptedRevision": revision,
            "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": format!("{reason}: {revision}"),
                            "lastTransitionTime": "2026-11-22T01:00:00Z", "observedGeneration": 1}],
        }})
    };
    kustomizations
        .patch_status(
            "checkout",
            &PatchParams::default(),
            &Patch::Merge(ready("True", "ReconciliationSucceeded", "main@sha1:1111")),
        )
        .await
        .unwrap();
    // An unmanaged object: reported, but carries no app.
    let sources: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "flux-system",
        &resource(
            "source.toolkit.fluxcd.io",
            "v1",
            "GitRepository",
            "gitrepositories",
        ),
    );
    sources
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "platform", "namespace": "flux-system"},
            "spec": {"interval": "1m", "url": "https://git.example/platform.git", "ref": {"branch": "main"}},
        })).unwrap())
        .await
        .unwrap();

    eventually("checkout healthy, payments without status, the source unmanaged", async || {
        summary(&store.observed_for_cluster("edge-k8s").await.unwrap())
            == vec![
                "GitRepository flux-system/platform app= version= health=unknown sync=unknown deleted=0",
                "Kustomization flux-system/checkout app=checkout version=1.4.0 health=healthy sync=unknown deleted=0",
                "Kustomization flux-system/payments app=payments version=2.0.1 health=unknown sync=unknown deleted=0",
            ]
    })
    .await;
    let checkout = store
        .observed_for_cluster("edge-k8s")
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.object_name == "checkout")
        .unwrap();
    assert_eq!(
        (checkout.applied_revision.as_str(), checkout.reason.as_str()),
        ("main@sha1:1111", "ReconciliationSucceeded")
    );
    assert_eq!(checkout.content_hash, format!("sha256:{}", "ab".repeat(32)));

    // Argo CD arrives later; its Application is picked up without restarting anything.
    for name in api_server
        .apply_crd_file(&crd("argocd-application.crd.yaml"))
        .unwrap()
    {
        api_server.wait_for_crd(&name).unwrap();
    }
    let applications: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "argocd",
        &resource("argoproj.io", "v1alpha1", "Application", "applications"),
    );
    applications
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "loyalty", "namespace": "argocd", "labels": {"fleetscope.io/app": "loyalty"}, "annotations": {"fleetscope.io/version": "3.1.0"}},
            "spec": {"project": "default", "destination": {"server": "https://kubernetes.default.svc", "namespace": "loyalty"},
                     "source": {"repoURL": "https://git.example/platform.git", "path": "render-groups/rg-1/loyalty", "targetRevision": "main"}},
            "status": {"sync": {"status": "OutOfSync", "revision": "abc123"}, "health": {"status": "Healthy"}},
        })).unwrap())
        .await
        .unwrap();
    // Argo CD's CRD has no status subresource: status is written with the object itself.
    applications
        .patch("loyalty", &PatchParams::default(), &Patch::Merge(json!({"status": {"sync": {"status": "OutOfSync", "revision": "abc123"}, "health": {"status": "Healthy"}, "reconciledAt": "2026-11-22T01:05:00Z"}})))
        .await
        .unwrap();

    // Status changes and a deletion.
    kustomizations
        .patch_status(
            "payments",
            &PatchParams::default(),
            &Patch::Merge(ready("False", "BuildFailed", "main@sha1:2222")),
        )
        .await
        .unwrap();
    kustomizations
        .delete("checkout", &Default::default())
        .await
        .unwrap();

    eventually("the application, the failure and the deletion", async || {
        summary(&store.observed_for_cluster("edge-k8s").await.unwrap())
            == vec![
                "Application argocd/loyalty app=loyalty version=3.1.0 health=healthy sync=out_of_sync deleted=0",
                "GitRepository flux-system/platform app= version= health=unknown sync=unknown deleted=0",
                "Kustomization flux-system/checkout app=checkout version=1.4.0 health=healthy sync=unknown deleted=1",
                "Kustomization flux-system/payments app=payments version=2.0.1 health=degraded sync=unknown deleted=0",
            ]
    })
    .await;
    let payments = store
        .observed_for_cluster("edge-k8s")
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.object_name == "payments")
        .unwrap();
    assert_eq!(payments.message, "BuildFailed: main@sha1:2222");
    // Every change once: 3 objects created, checkout healthy, loyalty twice at most, payments failed, checkout deleted.
    let history = store
        .observed_history(
            "edge-k8s",
            fleetscope_model::Timestamp(0),
            fleetscope_model::Timestamp(i64::from(u32::MAX)),
        )
        .await
        .unwrap();
    assert!(
        history.len() >= 7 && history.len() <= 9,
        "{:#?}",
        summary(&history)
    );
    assert!(
        stats.heartbeats_sent.load(Ordering::Relaxed) + stats.reports_sent.load(Ordering::Relaxed)
            >= 3
    );

    stop.send(()).unwrap();
    agent.await.unwrap().unwrap();
    for watcher in watchers {
        watcher.abort();
    }
    api_server.stop();
}
