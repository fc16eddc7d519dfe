//! Direct mode: the central collector watches a reachable cluster itself (no agent, no HTTP
//! hop) and stores what it sees.

use std::time::Duration;

use fleetscope_collector::central::{direct, Collector, CollectorOptions};
use fleetscope_local_apiserver::LocalApiServer;
use fleetscope_model::ClusterId;
use fleetscope_store::writer::BatchWriterConfig;
use fleetscope_store::ClusterRow;
use fleetscope_testkit::TestStore;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::Api;
use serde_json::json;

#[tokio::test]
async fn the_collector_watches_a_cluster_directly() {
    let crds = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/crds");
    let api_server = tokio::task::spawn_blocking(move || LocalApiServer::start(Some(&crds)))
        .await
        .unwrap()
        .unwrap_or_else(|err| panic!("this test needs a private Kubernetes API server: {err}"));
    let test = TestStore::start().await;
    test.store
        .insert_rows(&[ClusterRow {
            cluster_id: "hq-1".into(),
            group_path: "hq".into(),
            group_prefixes: vec!["hq".into()],
            environment: "prod".into(),
            reconciler: "argocd".into(),
            label_keys: vec![],
            label_values: vec![],
            updated_at: 0,
            version: 1,
            removed: 0,
        }])
        .await
        .unwrap();
    let collector = Collector::new(
        test.store.clone(),
        CollectorOptions {
            writer: BatchWriterConfig {
                max_delay: Duration::from_millis(50),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let kubeconfig = kube::config::Kubeconfig::read_from(api_server.kubeconfig_path()).unwrap();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let watching = tokio::spawn(direct::run(
        collector,
        ClusterId::parse("hq-1").unwrap(),
        client.clone(),
        Duration::from_secs(1),
    ));

    let resource = ApiResource {
        group: "argoproj.io".into(),
        version: "v1alpha1".into(),
        api_version: "argoproj.io/v1alpha1".into(),
        kind: "Application".into(),
        plural: "applications".into(),
    };
    let applications: Api<DynamicObject> = Api::namespaced_with(client, "argocd", &resource);
    applications
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "erp", "namespace": "argocd", "labels": {"fleetscope.io/app": "erp"}, "annotations": {"fleetscope.io/version": "9.1.0"}},
            "spec": {"project": "default", "destination": {"server": "https://kubernetes.default.svc", "namespace": "erp"},
                     "source": {"repoURL": "https://git.example/platform.git", "path": "erp", "targetRevision": "main"}},
            "status": {"sync": {"status": "Synced", "revision": "f00d"}, "health": {"status": "Degraded", "message": "Deployment erp has 0/3 ready replicas"}},
        })).unwrap())
        .await
        .unwrap();

    let mut stored = Vec::new();
    for _ in 0..200 {
        stored = test.store.observed_for_cluster("hq-1").await.unwrap();
        if !stored.is_empty() && !test.store.latest_heartbeats().await.unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let summary: Vec<(&str, &str, &str, &str, &str)> = stored
        .iter()
        .map(|r| {
            (
                r.object_name.as_str(),
                r.version.as_str(),
                r.health.as_str(),
                r.sync.as_str(),
                r.applied_revision.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![("erp", "9.1.0", "degraded", "synced", "f00d")]
    );
    assert_eq!(stored[0].message, "Deployment erp has 0/3 ready replicas");
    assert!(
        test.store.latest_heartbeats().await.unwrap()[0]
            .agent_version
            .starts_with("direct/"),
        "direct mode sends heartbeats too"
    );
    watching.abort();
    api_server.stop();
}
