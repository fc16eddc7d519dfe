//! The fleet the guide meets: two clusters running Flux and Argo CD objects that Fleetscope
//! did not render (no stamps), each in a real API server, and the team's GitOps repository.

use std::collections::BTreeMap;
use std::path::Path;

use fleetscope_local_apiserver::LocalApiServer;
use serde_json::{json, Value};

/// The fleet the guide meets: what runs on each cluster before Fleetscope.
pub(super) struct Cluster {
    pub(super) id: &'static str,
    pub(super) crds: &'static [&'static str],
    pub(super) objects: Vec<(&'static str, Value, Option<Value>)>,
}

fn conditions(reason: &str, message: &str) -> Value {
    json!([{"type": "Ready", "status": "True", "reason": reason, "message": message,
            "lastTransitionTime": "2026-11-30T08:00:00Z", "observedGeneration": 1}])
}

/// A Flux HelmRelease after a successful install or upgrade, without Fleetscope stamps.
fn helm_release(namespace: &str, name: &str, chart_version: &str) -> (Value, Value) {
    let object = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": namespace, "generation": 1,
                     "labels": {"kustomize.toolkit.fluxcd.io/name": "apps",
                                "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": name, "version": chart_version,
                  "sourceRef": {"kind": "HelmRepository", "name": name, "namespace": "flux-system"}}}},
    });
    let status = json!({
        "observedGeneration": 1,
        "lastAttemptedRevision": chart_version,
        "history": [{"chartName": name, "chartVersion": chart_version, "status": "deployed",
                     "version": 1, "name": name, "namespace": namespace, "appVersion": chart_version,
                     "digest": "sha256:e0c3a1b2d4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1",
                     "configDigest": "sha256:1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e1d2c",
                     "firstDeployed": "2026-11-30T07:59:00Z", "lastDeployed": "2026-11-30T08:00:00Z"}],
        "conditions": conditions("UpgradeSucceeded", "Helm upgrade succeeded"),
    });
    (object, status)
}

/// A Flux Kustomization of a Git source, applied at `revision`.
fn kustomization(name: &str, revision: &str) -> (Value, Value) {
    let object = json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system", "generation": 1,
                     "labels": {"app.kubernetes.io/name": name}},
        "spec": {"interval": "10m", "path": "./deploy", "prune": true, "targetNamespace": "shop",
                 "sourceRef": {"kind": "GitRepository", "name": name}},
    });
    let status = json!({
        "observedGeneration": 1,
        "lastAppliedRevision": revision,
        "lastAttemptedRevision": revision,
        "conditions": conditions("ReconciliationSucceeded", &format!("Applied revision: {revision}")),
    });
    (object, status)
}

/// A Flux GitRepository that fetched `revision`.
fn git_repository(name: &str, tag: &str, revision: &str) -> (Value, Value) {
    let object = json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "5m", "url": format!("https://git.example.com/shop/{name}.git"),
                 "ref": {"tag": tag}},
    });
    let status = json!({
        "observedGeneration": 1,
        "artifact": {"revision": revision, "path": format!("gitrepository/flux-system/{name}/{tag}.tar.gz"),
                     "url": format!("http://source-controller.flux-system.svc/gitrepository/flux-system/{name}/{tag}.tar.gz"),
                     "digest": "sha256:9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b",
                     "lastUpdateTime": "2026-11-30T07:58:00Z"},
        "conditions": conditions("Succeeded", &format!("stored artifact for revision '{revision}'")),
    });
    (object, status)
}

/// An Argo CD Application as its controller leaves it: synced and healthy at `target`.
fn application(name: &str, target: &str) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": format!("https://git.example.com/shop/{name}.git"),
                       "path": "deploy", "targetRevision": target},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"},
        },
        "status": {
            "sync": {"status": "Synced", "revision": "8d4c2a1f0e9b7c6d5a4b3c2d1e0f9a8b7c6d5e4f"},
            "health": {"status": "Healthy", "lastTransitionTime": "2026-11-30T08:00:00Z"},
            "summary": {"images": [format!("registry.example.com/shop/{name}:{target}")]},
            "reconciledAt": "2026-11-30T08:00:00Z",
        },
    })
}

pub(super) fn fleet() -> Vec<Cluster> {
    let checkout_revision = "v1.4.0@sha1:3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e";
    let flux = |collection: &'static str, (object, status): (Value, Value)| {
        (collection, object, Some(status))
    };
    vec![
        Cluster {
            id: "shop-de-1",
            crds: &[
                "flux-kustomization.crd.yaml",
                "flux-helmrelease.crd.yaml",
                "flux-gitrepository.crd.yaml",
            ],
            objects: vec![
                flux(
                    "/apis/helm.toolkit.fluxcd.io/v2/namespaces/shop/helmreleases",
                    helm_release("shop", "podinfo", "6.5.0"),
                ),
                flux(
                    "/apis/helm.toolkit.fluxcd.io/v2/namespaces/ingress-nginx/helmreleases",
                    helm_release("ingress-nginx", "ingress-nginx", "4.11.3"),
                ),
                flux(
                    "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations",
                    kustomization("checkout", checkout_revision),
                ),
                flux(
                    "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories",
                    git_repository("checkout", "v1.4.0", checkout_revision),
                ),
            ],
        },
        Cluster {
            id: "shop-fr-1",
            crds: &["argocd-application.crd.yaml"],
            objects: ["catalog", "search"]
                .into_iter()
                .zip(["3.2.0", "1.1.0"])
                .map(|(name, target)| {
                    (
                        "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications",
                        application(name, target),
                        None,
                    )
                })
                .collect(),
        },
    ]
}

/// The team's GitOps repository, as the guide's `--manifests ./gitops` reads it.
pub(super) const GITOPS: &[(&str, &str)] = &[
    (
        "gitops/clusters/shop-de-1/podinfo.yaml",
        r#"apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: podinfo
  namespace: flux-system
spec:
  interval: 1h
  url: https://stefanprodan.github.io/podinfo
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
  namespace: shop
spec:
  interval: 10m
  chart:
    spec:
      chart: podinfo
      version: 6.5.0
      sourceRef:
        kind: HelmRepository
        name: podinfo
        namespace: flux-system
"#,
    ),
    (
        "gitops/clusters/shop-de-1/checkout.yaml",
        r#"apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: checkout
  namespace: flux-system
spec:
  interval: 5m
  url: https://git.example.com/shop/checkout.git
  ref:
    tag: v1.4.0
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: checkout
  namespace: flux-system
spec:
  interval: 10m
  path: ./deploy
  prune: true
  targetNamespace: shop
  sourceRef:
    kind: GitRepository
    name: checkout
"#,
    ),
    (
        "gitops/argocd/shop-fr-1.yaml",
        r#"apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: catalog
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://git.example.com/shop/catalog.git
    path: deploy
    targetRevision: 3.2.0
  destination:
    server: https://kubernetes.default.svc
    namespace: shop
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: search
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://git.example.com/shop/search.git
    path: deploy
    targetRevision: 1.1.0
  destination:
    server: https://kubernetes.default.svc
    namespace: shop
"#,
    ),
];

/// Creates `object` in `collection` and, for a kind with a status subresource, its status.
fn create(api: &LocalApiServer, collection: &str, object: &Value, status: &Option<Value>) {
    let created = api
        .post_json(collection, object)
        .unwrap_or_else(|err| panic!("create in {collection}: {err}"));
    if let Some(status) = status {
        let name = created["metadata"]["name"].as_str().expect("a name");
        let mut with_status = created.clone();
        with_status["status"] = status.clone();
        api.put_json(&format!("{collection}/{name}/status"), &with_status)
            .unwrap_or_else(|err| panic!("status of {collection}/{name}: {err}"));
    }
}

pub(super) fn api_server(cluster: &Cluster) -> LocalApiServer {
    let api = LocalApiServer::start(None)
        .unwrap_or_else(|err| panic!("this test needs a private Kubernetes API server: {err}"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../collector/testdata/crds");
    for file in cluster.crds {
        for name in api.apply_crd_file(&dir.join(file)).unwrap() {
            api.wait_for_crd(&name).unwrap();
        }
    }
    for (collection, object, status) in &cluster.objects {
        create(&api, collection, object, status);
    }
    api
}

/// A kubeconfig with one context per cluster, named by its id, reaching its API server as an
/// administrator: the reader's own kubeconfig in the guide.
pub(super) fn admin_kubeconfig(apis: &BTreeMap<String, LocalApiServer>) -> String {
    let mut clusters = Vec::new();
    let mut contexts = Vec::new();
    let mut users = Vec::new();
    for (id, api) in apis {
        let text = std::fs::read_to_string(api.kubeconfig_path()).unwrap();
        let cluster_line = |key: &str| {
            text.lines()
                .find_map(|line| line.trim().strip_prefix(&format!("{key}: ")))
                .unwrap_or_else(|| panic!("{key} in {text}"))
                .to_owned()
        };
        clusters.push(json!({"name": id, "cluster": {"server": api.server_url(),
            "certificate-authority-data": cluster_line("certificate-authority-data")}}));
        users.push(json!({"name": id, "user": {
            "client-certificate-data": cluster_line("client-certificate-data"),
            "client-key-data": cluster_line("client-key-data")}}));
        contexts.push(json!({"name": id, "context": {"cluster": id, "user": id}}));
    }
    json!({"apiVersion": "v1", "kind": "Config", "clusters": clusters, "users": users,
           "contexts": contexts, "current-context": ""})
    .to_string()
}
