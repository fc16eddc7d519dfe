//! A fleet Fleetscope did not render, end to end on the real binaries: real-shaped Flux and
//! Argo CD objects without stamps in two real Kubernetes API servers (one per cluster), a
//! `fleetscope agent` for each, `fleetscope collector`, `fleetscope render --publish-only` publishing a
//! platform repo whose apps say how their objects are recognised, and `fleetscope hub`. Every
//! pair is in the state docs/drift.md gives it, in the API, the pages and the command line; a
//! stamped object wins over a matched one of the same app; and a changed match rule reaches
//! objects already reported.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use fleetscope_local_apiserver::LocalApiServer;
use fleetscope_testkit::faults::{free_port, Service};
use serde_json::{json, Value};

use crate::faults::{binary, clickhouse_with, eventually, one_at_a_time, start_collector, token};

const HELMRELEASES: &str = "/apis/helm.toolkit.fluxcd.io/v2/namespaces/shop/helmreleases";
const KUSTOMIZATIONS: &str =
    "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations";
const APPLICATIONS: &str = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications";

/// The platform repo: three clusters (two Flux, one Argo CD), apps with match rules and the
/// policies that put them on the clusters. `search_name` is the name (or pattern) the `search`
/// app's rule takes.
fn platform(search_name: &str, podinfo_version: &str) -> String {
    format!(
        r#"kind: Environment
name: prod
---
kind: GitOpsRepository
url: https://git.example.com/fleet.git
---
kind: Cluster
id: store-1
group: emea/de
environment: prod
reconciler: flux
---
kind: Cluster
id: store-2
group: emea/fr
environment: prod
reconciler: argocd
---
kind: Cluster
id: store-3
group: emea/de
environment: prod
reconciler: flux
---
kind: Namespace
name: shop
owners: [team-shop]
---
kind: Application
name: podinfo
version: {podinfo_version}
namespace: shop
reconciler: flux-helmrelease
source: {{type: helm, repository: "https://stefanprodan.github.io/podinfo", chart: podinfo}}
match: [{{kind: HelmRelease, name: podinfo}}]
---
kind: Application
name: checkout
version: v1.4.0
namespace: shop
reconciler: flux-kustomization
source: {{type: git, url: "https://git.example.com/shop/checkout.git", path: ./deploy, ref: main}}
match: [{{kind: Kustomization, labels: {{app.kubernetes.io/name: checkout}}}}]
---
kind: Application
name: payments
version: 2.0.1
namespace: shop
reconciler: flux-kustomization
source: {{type: git, url: "https://git.example.com/shop/payments.git", path: ./deploy, ref: main}}
match: [{{name: "payments-*", trimPrefix: v}}]
---
kind: Application
name: metrics
version: 0.9.3
namespace: shop
reconciler: flux-helmrelease
source: {{type: helm, repository: "https://charts.example.com/obs", chart: metrics}}
match: [{{name: "metrics*"}}]
---
kind: Application
name: legacy
version: 1.0.0
namespace: shop
reconciler: flux-helmrelease
source: {{type: helm, repository: "https://charts.example.com/shop", chart: legacy}}
match: [{{name: legacy-api}}]
---
kind: Application
name: catalog
version: 3.2.0
namespace: shop
reconciler: argocd-application
source: {{type: git, url: "https://git.example.com/shop/catalog.git", path: ./deploy, ref: main}}
match: [{{kind: Application, name: catalog}}]
---
kind: Application
name: search
version: 1.1.0
namespace: shop
reconciler: argocd-application
source: {{type: git, url: "https://git.example.com/shop/search.git", path: ./deploy, ref: main}}
match: [{{kind: Application, name: "{search_name}"}}]
---
kind: Policy
name: flux-stores
apps: {{names: [podinfo, checkout, payments, metrics]}}
clusters: {{matchLabels: {{fleetscope.io/reconciler: flux}}}}
---
kind: Policy
name: argo-stores
apps: {{names: [catalog, search]}}
clusters: {{matchLabels: {{fleetscope.io/reconciler: argocd}}}}
"#
    )
}

fn conditions(ready: &str, reason: &str, message: &str) -> Value {
    json!([{"type": "Ready", "status": ready, "reason": reason, "message": message,
            "lastTransitionTime": "2026-11-30T08:00:00Z", "observedGeneration": 1}])
}

/// A Flux HelmRelease as Flux leaves it after an install: no Fleetscope stamps, the release
/// Helm runs in `status.history`.
fn helm_release(name: &str, chart_version: &str, ready: &str, extra: Value) -> (Value, Value) {
    let mut object = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": "shop", "generation": 1,
                     "labels": {"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": name, "version": chart_version,
                  "sourceRef": {"kind": "HelmRepository", "name": "charts"}}}},
    });
    if let Value::Object(extra) = extra {
        for (key, value) in extra {
            object["metadata"][key] = value;
        }
    }
    let status = json!({
        "observedGeneration": 1,
        "lastAttemptedRevision": chart_version,
        "history": [{"chartName": name, "chartVersion": chart_version, "status": "deployed", "version": 1,
                     "name": name, "namespace": "shop", "appVersion": chart_version,
                     "digest": "sha256:e0c3a1b2d4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1",
                     "configDigest": "sha256:1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e1d2c",
                     "firstDeployed": "2026-11-30T07:59:00Z", "lastDeployed": "2026-11-30T08:00:00Z"}],
        "conditions": conditions(ready, if ready == "True" { "UpgradeSucceeded" } else { "InstallFailed" },
                                 if ready == "True" { "Helm upgrade succeeded" } else { "Helm install failed: timed out waiting for the condition" }),
    });
    (object, status)
}

/// A Flux Kustomization of a Git source at `revision`, with `labels`.
fn kustomization(name: &str, labels: Value, revision: &str, ready: &str) -> (Value, Value) {
    let object = json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system", "generation": 1, "labels": labels},
        "spec": {"interval": "10m", "path": "./deploy", "prune": true,
                 "sourceRef": {"kind": "GitRepository", "name": name}},
    });
    let status = json!({
        "observedGeneration": 1,
        "lastAppliedRevision": revision,
        "lastAttemptedRevision": revision,
        "conditions": if ready == "True" {
            conditions("True", "ReconciliationSucceeded", &format!("Applied revision: {revision}"))
        } else {
            conditions("False", "HealthCheckFailed", "health check failed after 30s: Deployment/shop/checkout: 0/3 ready")
        },
    });
    (object, status)
}

/// An Argo CD Application as its controller leaves it (the status is part of the object).
fn application(name: &str, target: &str, sync: &str, health: &str) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd", "labels": {"argocd.argoproj.io/instance": "stores"}},
        "spec": {
            "project": "default",
            "source": {"repoURL": format!("https://git.example.com/shop/{name}.git"), "path": "deploy", "targetRevision": target},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"},
        },
        "status": {
            "sync": {"status": sync, "revision": "8d4c2a1f0e9b7c6d5a4b3c2d1e0f9a8b7c6d5e4f"},
            "health": {"status": health, "lastTransitionTime": "2026-11-30T08:00:00Z"},
            "summary": {"images": [format!("registry.example.com/shop/{name}:{target}")]},
            "reconciledAt": "2026-11-30T08:00:00Z",
        },
    })
}

fn create(api: &LocalApiServer, collection: &str, (object, status): (Value, Value)) {
    let created = api.post_json(collection, &object).unwrap();
    let name = created["metadata"]["name"].as_str().unwrap().to_owned();
    let mut with_status = created;
    with_status["status"] = status;
    api.put_json(&format!("{collection}/{name}/status"), &with_status)
        .unwrap();
}

fn api_server(crds: &[&str]) -> LocalApiServer {
    let api = LocalApiServer::start(None)
        .unwrap_or_else(|err| panic!("this test needs a private Kubernetes API server: {err}"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../collector/testdata/crds");
    for file in crds {
        for name in api.apply_crd_file(&dir.join(file)).unwrap() {
            api.wait_for_crd(&name).unwrap();
        }
    }
    api
}

fn run(args: &[&str]) -> String {
    let out = std::process::Command::new(binary())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fleetscope {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "GET {path}: {head}\n{body}"
    );
    body.to_owned()
}

/// `fleetscope agent` for `cluster`, watching `api`, reporting to the collector on `collector`.
fn start_agent(dir: &Path, cluster: &str, api: &LocalApiServer, collector: u16) -> Service {
    let token_file = dir.join(format!("{cluster}.token"));
    std::fs::write(&token_file, token(cluster)).unwrap();
    let spool = dir.join(format!("{cluster}-spool"));
    let metrics_port = free_port();
    let args: Vec<String> = [
        "agent",
        "--cluster",
        cluster,
        "--collector-url",
        &format!("http://127.0.0.1:{collector}"),
        "--token-file",
        token_file.to_str().unwrap(),
        "--spool-dir",
        spool.to_str().unwrap(),
        "--kubeconfig",
        api.kubeconfig_path().to_str().unwrap(),
        "--heartbeat-seconds",
        "1",
        "--match-rules-spread-seconds",
        "0",
        "--metrics-listen",
        &format!("127.0.0.1:{metrics_port}"),
    ]
    .map(String::from)
    .to_vec();
    let mut agent = Service::spawn(&binary(), &args, &dir.join(format!("{cluster}-agent.log")));
    agent.wait_until_healthy(metrics_port);
    agent
}

const EVERY_STATE: &str = "in_sync,progressing,failed,out_of_sync,missing,unexpected,stale,unknown";

/// Every pair the hub answers, as (cluster, app, state, observed version).
fn pairs(hub: u16) -> BTreeSet<(String, String, String, String)> {
    let answer: Value = serde_json::from_str(&get(
        hub,
        &format!("/api/v1/drift?state={EVERY_STATE}&limit=1000"),
    ))
    .unwrap();
    answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            let text = |key: &str| item[key].as_str().unwrap_or("-").to_owned();
            (
                text("cluster"),
                text("app"),
                text("state"),
                text("observed_version"),
            )
        })
        .collect()
}

fn expected(rows: &[(&str, &str, &str, &str)]) -> BTreeSet<(String, String, String, String)> {
    rows.iter()
        .map(|(c, a, s, v)| (c.to_string(), a.to_string(), s.to_string(), v.to_string()))
        .collect()
}

fn start_hub(dir: &Path, clickhouse: &str, grace: &str) -> (Service, u16) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let args: Vec<String> = [
        "hub",
        "--insecure",
        "--listen",
        &listen,
        "--clickhouse-url",
        clickhouse,
        "--grace",
        grace,
        "--refresh-seconds",
        "1",
    ]
    .map(String::from)
    .to_vec();
    let mut hub = Service::spawn(&binary(), &args, &dir.join(format!("hub-{port}.log")));
    hub.wait_until_healthy(port);
    (hub, port)
}

#[test]
fn a_fleet_fleetscope_did_not_render_shows_every_drift_state() {
    let _one_at_a_time = one_at_a_time();
    let work = tempfile::tempdir().unwrap();
    let clusters: Vec<String> = ["store-1", "store-2", "store-3"].map(String::from).to_vec();
    let (server, _store, _runtime) = clickhouse_with(&[]);

    // The desired state, published with no GitOps output: the fleet's manifests come from
    // elsewhere.
    let platform_dir = work.path().join("platform");
    std::fs::create_dir_all(&platform_dir).unwrap();
    std::fs::write(platform_dir.join("fleet.yaml"), platform("search", "6.5.0")).unwrap();
    let publish = |dir: &Path| {
        run(&[
            "render",
            "--publish-only",
            "--platform",
            dir.to_str().unwrap(),
            "--clickhouse-url",
            &server.url(),
        ])
    };
    let published = publish(&platform_dir);
    assert!(published.contains("(no GitOps output)"), "{published}");
    assert!(
        published.contains("desired state in clickhouse"),
        "{published}"
    );
    let again = publish(&platform_dir);
    assert!(again.contains("publish: nothing changed"), "{again}");

    // What runs: store-1 on Flux, store-2 on Argo CD, none stamped but one HelmRelease.
    let flux = api_server(&[
        "flux-kustomization.crd.yaml",
        "flux-helmrelease.crd.yaml",
        "flux-gitrepository.crd.yaml",
    ]);
    create(
        &flux,
        HELMRELEASES,
        helm_release("podinfo", "6.5.0", "True", json!({})),
    );
    create(
        &flux,
        KUSTOMIZATIONS,
        kustomization(
            "shop-checkout",
            json!({"app.kubernetes.io/name": "checkout"}),
            "v1.4.0@sha1:3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e",
            "False",
        ),
    );
    create(
        &flux,
        KUSTOMIZATIONS,
        kustomization(
            "payments-eu",
            json!({}),
            "v1.9.0@sha1:0a1b2c3d4e5f60718293a4b5c6d7e8f901234567",
            "True",
        ),
    );
    // The stamped object of `metrics` wins over the failing one its rule also takes.
    create(
        &flux,
        HELMRELEASES,
        helm_release(
            "metrics",
            "0.9.3",
            "True",
            json!({"labels": {"fleetscope.io/app": "metrics"}, "annotations": {"fleetscope.io/version": "0.9.3"}}),
        ),
    );
    create(
        &flux,
        HELMRELEASES,
        helm_release("metrics-legacy", "0.8.0", "False", json!({})),
    );
    create(
        &flux,
        HELMRELEASES,
        helm_release("legacy-api", "1.0.0", "True", json!({})),
    );
    // Matches no rule: reported, no app's object.
    create(
        &flux,
        HELMRELEASES,
        helm_release("ingress-nginx", "4.11.3", "True", json!({})),
    );

    let argo = api_server(&["argocd-application.crd.yaml"]);
    argo.post_json(
        APPLICATIONS,
        &application("catalog", "3.2.0", "OutOfSync", "Healthy"),
    )
    .unwrap();
    argo.post_json(
        APPLICATIONS,
        &application("search-eu", "1.1.0", "Synced", "Healthy"),
    )
    .unwrap();

    let collector_port = free_port();
    let collector_log = work.path();
    let _collector = start_collector(collector_log, &clusters, &server.url(), collector_port, &[]);
    let agents: Vec<Service> = [("store-1", &flux), ("store-2", &argo)]
        .into_iter()
        .map(|(cluster, api)| start_agent(work.path(), cluster, api, collector_port))
        .collect();

    let (_hub, hub) = start_hub(work.path(), &server.url(), "600");
    let first = expected(&[
        ("store-1", "checkout", "failed", "v1.4.0"),
        ("store-1", "legacy", "unexpected", "1.0.0"),
        ("store-1", "metrics", "in_sync", "0.9.3"),
        ("store-1", "payments", "progressing", "1.9.0"),
        ("store-1", "podinfo", "in_sync", "6.5.0"),
        ("store-2", "catalog", "out_of_sync", "3.2.0"),
        ("store-2", "search", "progressing", "-"),
        ("store-3", "checkout", "stale", "-"),
        ("store-3", "metrics", "stale", "-"),
        ("store-3", "payments", "stale", "-"),
        ("store-3", "podinfo", "stale", "-"),
    ]);
    eventually("every pair in its state", Duration::from_secs(90), || {
        pairs(hub) == first
    });

    // The pages show the same states.
    let page = get(hub, "/ui/clusters/store-1");
    for (cluster, app, state, _) in &first {
        if cluster != "store-1" {
            continue;
        }
        let row = page
            .split("<tr data-app=\"")
            .find(|row| row.starts_with(&format!("{app}\"")))
            .unwrap_or_else(|| panic!("no row for {app} on the cluster page"));
        let row = row.split("</tr>").next().unwrap();
        assert!(
            row.contains(&format!("data-state=\"{state}\"")),
            "{app}: {row}"
        );
    }

    // The command line too.
    let table = run(&[
        "drift",
        "--hub-url",
        &format!("http://127.0.0.1:{hub}"),
        "--state",
        EVERY_STATE,
    ]);
    let listed: BTreeSet<(String, String, String)> = table
        .lines()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            (
                cells[0].to_owned(),
                cells[1].to_owned(),
                cells[2].to_owned(),
            )
        })
        .collect();
    let wanted: BTreeSet<(String, String, String)> = first
        .iter()
        .map(|(c, a, s, _)| (c.clone(), a.clone(), s.clone()))
        .collect();
    assert_eq!(listed, wanted, "{table}");

    // Past the grace period (a hub with a grace of one second on the same store): a version
    // that differs is out of sync, a desired app never seen is missing.
    let (_short, short) = start_hub(work.path(), &server.url(), "1");
    let mut later = first.clone();
    later.remove(&(
        "store-1".into(),
        "payments".into(),
        "progressing".into(),
        "1.9.0".into(),
    ));
    later.insert((
        "store-1".into(),
        "payments".into(),
        "out_of_sync".into(),
        "1.9.0".into(),
    ));
    later.remove(&(
        "store-2".into(),
        "search".into(),
        "progressing".into(),
        "-".into(),
    ));
    later.insert((
        "store-2".into(),
        "search".into(),
        "missing".into(),
        "-".into(),
    ));
    eventually(
        "out of sync and missing past the grace",
        Duration::from_secs(60),
        || pairs(short) == later,
    );

    // The collector counted what the rules made of the objects without stamps.
    let metrics = get(collector_port, "/metrics");
    for resolution in ["matched", "unmatched", "stamped_wins"] {
        assert!(
            metrics.lines().any(|line| line.starts_with(&format!(
                "fleetscope_collector_unstamped_objects_total{{resolution=\"{resolution}\"}}"
            ))),
            "no {resolution} count in\n{metrics}"
        );
    }

    // A rule changed: the agent reports its objects without stamps again, and `search-eu`
    // becomes the app's object.
    std::fs::write(
        platform_dir.join("fleet.yaml"),
        platform("search-*", "6.5.0"),
    )
    .unwrap();
    publish(&platform_dir);
    let mut matched = first.clone();
    matched.remove(&(
        "store-2".into(),
        "search".into(),
        "progressing".into(),
        "-".into(),
    ));
    matched.insert((
        "store-2".into(),
        "search".into(),
        "in_sync".into(),
        "1.1.0".into(),
    ));
    eventually("the changed rule applied", Duration::from_secs(90), || {
        pairs(hub) == matched
    });

    // A new version published: a rollout starts from the publication, and the matched object
    // has not reached it.
    std::fs::write(
        platform_dir.join("fleet.yaml"),
        platform("search-*", "6.6.0"),
    )
    .unwrap();
    publish(&platform_dir);
    let mut rolling = matched.clone();
    rolling.remove(&(
        "store-1".into(),
        "podinfo".into(),
        "in_sync".into(),
        "6.5.0".into(),
    ));
    rolling.insert((
        "store-1".into(),
        "podinfo".into(),
        "progressing".into(),
        "6.5.0".into(),
    ));
    eventually("the new version desired", Duration::from_secs(60), || {
        pairs(hub) == rolling
    });
    let rollouts: Value = serde_json::from_str(&get(hub, "/api/v1/rollouts?app=podinfo")).unwrap();
    let newest = &rollouts["items"][0];
    assert_eq!(newest["version"], "6.6.0", "{rollouts:#}");
    assert_eq!(newest["targeted"], 2, "store-1 and store-3: {rollouts:#}");
    assert_eq!(newest["in_sync"], 0, "{rollouts:#}");
    drop(agents);
}

/// The podinfo HelmRelease as the team's Flux repo declares it, with its HelmRepository.
const PODINFO_MANIFEST: &str = r#"apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: charts, namespace: shop}
spec: {url: "https://stefanprodan.github.io/podinfo", interval: 10m}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: podinfo, namespace: shop}
spec:
  interval: 10m
  chart: {spec: {chart: podinfo, version: "6.5.x", sourceRef: {kind: HelmRepository, name: charts}}}
"#;

/// From agents installed on clusters no inventory knows to a hub that shows the fleet, with
/// no YAML written by hand: the collector registers the clusters, `fleetscope import` writes
/// a platform repo from what they report (a CSV places them, a manifest gives podinfo its
/// source), `render --publish-only` publishes it, and every pair is in sync.
#[test]
fn import_gives_a_repo_whose_publication_shows_the_fleet_in_sync() {
    let _one_at_a_time = one_at_a_time();
    let work = tempfile::tempdir().unwrap();
    let clusters: Vec<String> = ["store-1", "store-2"].map(String::from).to_vec();
    let (server, _store, _runtime) = clickhouse_with(&[]);
    let flux = api_server(&[
        "flux-kustomization.crd.yaml",
        "flux-helmrelease.crd.yaml",
        "flux-gitrepository.crd.yaml",
    ]);
    create(
        &flux,
        HELMRELEASES,
        helm_release("podinfo", "6.5.0", "True", json!({})),
    );
    create(
        &flux,
        KUSTOMIZATIONS,
        kustomization(
            "shop-checkout",
            json!({}),
            "v1.4.0@sha1:3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e",
            "True",
        ),
    );
    create(
        &flux,
        HELMRELEASES,
        helm_release("ingress-nginx", "4.11.3", "True", json!({})),
    );
    let argo = api_server(&["argocd-application.crd.yaml"]);
    for (name, target) in [("catalog", "3.2.0"), ("search-eu", "v1.1.0")] {
        argo.post_json(
            APPLICATIONS,
            &application(name, target, "Synced", "Healthy"),
        )
        .unwrap();
    }
    let collector_port = free_port();
    let _collector = start_collector(
        work.path(),
        &clusters,
        &server.url(),
        collector_port,
        &["--auto-register"],
    );
    let _agents: Vec<Service> = [("store-1", &flux), ("store-2", &argo)]
        .into_iter()
        .map(|(cluster, api)| start_agent(work.path(), cluster, api, collector_port))
        .collect();

    let inventory = work.path().join("clusters.csv");
    std::fs::write(
        &inventory,
        "cluster,group,environment,country\nstore-1,emea/de,prod,de\nstore-2,emea/fr,prod,fr\n",
    )
    .unwrap();
    let manifests = work.path().join("flux");
    std::fs::create_dir(&manifests).unwrap();
    std::fs::write(manifests.join("podinfo.yaml"), PODINFO_MANIFEST).unwrap();
    let platform_dir = work.path().join("platform");
    let import = |target: &Path| {
        run(&[
            "import",
            "--platform",
            target.to_str().unwrap(),
            "--clickhouse-url",
            &server.url(),
            "--inventory",
            inventory.to_str().unwrap(),
            "--manifests",
            manifests.to_str().unwrap(),
        ])
    };
    // Import once every object has been stored (earlier attempts write scratch repos).
    let mut attempt = 0;
    eventually(
        "the agents' objects stored",
        Duration::from_secs(60),
        || {
            attempt += 1;
            import(&work.path().join(format!("attempt-{attempt}")))
                .contains("desired equals what runs for 5 of 5 running pairs")
        },
    );
    let said = import(&platform_dir);
    assert!(
        said.contains("import: 2 clusters in 1 environment(s), 5 apps (0 other version(s) pinned, 4 with a placeholder source), 1 from 1 manifest file(s)"),
        "{said}"
    );
    let podinfo = std::fs::read_to_string(platform_dir.join("apps/podinfo.yaml")).unwrap();
    assert!(
        podinfo.contains("repository: https://stefanprodan.github.io/podinfo"),
        "{podinfo}"
    );
    let published = run(&[
        "render",
        "--publish-only",
        "--platform",
        platform_dir.to_str().unwrap(),
        "--clickhouse-url",
        &server.url(),
    ]);
    assert!(
        published.contains("publish: 2 clusters, 5 apps"),
        "{published}"
    );

    let (_hub, hub) = start_hub(work.path(), &server.url(), "600");
    let in_sync = expected(&[
        ("store-1", "ingress-nginx", "in_sync", "4.11.3"),
        ("store-1", "podinfo", "in_sync", "6.5.0"),
        ("store-1", "shop-checkout", "in_sync", "v1.4.0"),
        ("store-2", "catalog", "in_sync", "3.2.0"),
        ("store-2", "search-eu", "in_sync", "v1.1.0"),
    ]);
    let mut last = BTreeSet::new();
    let settled = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < settled {
        last = pairs(hub);
        if last == in_sync {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(last, in_sync, "every pair in sync within 60 s");
    // The clusters sit where the CSV put them.
    let summary: Value = serde_json::from_str(&get(hub, "/api/v1/summary?depth=2")).unwrap();
    let groups: BTreeSet<&str> = summary["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["group"].as_str())
        .collect();
    assert!(
        groups.contains("emea/de") && groups.contains("emea/fr"),
        "{summary:#}"
    );
}
