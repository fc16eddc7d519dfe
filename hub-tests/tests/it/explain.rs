//! The hub's `explain` and drift states on desired state published by the real renderer into a
//! real ClickHouse, for a platform repo built so that render groups are mixed: clusters whose
//! rendered content is identical although different policies (or a pin, or a dependency) put
//! their apps there. The hub must say what `fleetscope render explain` says for every cluster
//! and app, before and after a restart; and clusters that move to other render groups keep the
//! content hashes (and so the `in_sync` state) of the apps whose content did not change, and
//! the time those apps became desired (`desired_since`, so their state and the gate's soak).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_model::{ClusterId, DriftPolicy, Timestamp};
use fleetscope_renderer::{assign, desired, explain, render, RenderOutcome};
use fleetscope_store::{HeartbeatRow, ObservedRow, Store};
use fleetscope_testkit::TestStore;
use serde_json::Value;

use crate::common;

const NOW: Timestamp = Timestamp(1_800_000_000);

/// A platform repo of `clusters` clusters in which render groups come out mixed in three ways:
/// `kiosk` reaches some clusters through two policies and others through one; `stock-sync` is
/// chosen by a policy on some clusters and comes along as a dependency of `ml-runtime` on
/// others; `payments` is pinned to its default version on flagships only. Every fifth cluster
/// is on Argo CD.
fn write_platform(dir: &Path, clusters: usize) {
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "environments.yaml",
        "kind: Environment\nname: stage\n---\nkind: Environment\nname: prod\n",
    );
    write(
        "gitops.yaml",
        "kind: GitOpsRepository\nurl: https://git.example.com/platform/fleet-gitops.git\n",
    );
    write(
        "groups.yaml",
        "kind: Group\npath: apac\nlabels: {region: apac}\n---\nkind: Group\npath: emea\nlabels: {region: emea}\n",
    );
    write(
        "apps.yaml",
        "kind: Namespace\nname: shop\nowners: [team-shop]\napps: [checkout, payments, kiosk]\n---\n\
kind: Namespace\nname: data\nowners: [team-data]\napps: [stock-sync, ml-runtime]\n---\n\
kind: Application\nname: checkout\nversion: 1.4.0\nnamespace: shop\nreconciler: flux-helmrelease\n\
source: {type: helm, repository: \"https://charts.example.com/shop\", chart: checkout}\n\
dependsOn: [payments]\nvalues: {replicas: 2}\n---\n\
kind: Application\nname: payments\nversion: 2.0.1\nnamespace: shop\nreconciler: flux-kustomization\n\
source: {type: git, url: \"https://git.example.com/shop/payments.git\", path: ./deploy, ref: main}\n---\n\
kind: Application\nname: kiosk\nversion: 0.3.0\nnamespace: shop\nreconciler: flux-kustomization\n\
source: {type: git, url: \"https://git.example.com/shop/kiosk.git\", path: ./deploy, ref: main}\n---\n\
kind: Application\nname: stock-sync\nversion: 1.1.0\nnamespace: data\nreconciler: flux-kustomization\n\
source: {type: oci, url: \"oci://registry.example.com/data/stock-sync\"}\n---\n\
kind: Application\nname: ml-runtime\nversion: 0.9.0\nnamespace: data\nreconciler: flux-helmrelease\n\
source: {type: helm, repository: \"https://charts.example.com/data\", chart: ml-runtime}\n\
dependsOn: [stock-sync]\n",
    );
    write(
        "policies.yaml",
        "kind: Policy\nname: all-stores\napps: {names: [checkout, payments]}\n---\n\
kind: Policy\nname: kiosk-apac-jp\napps: {names: [kiosk]}\nclusters: {groups: [apac/jp]}\n---\n\
kind: Policy\nname: optional-big\napps: {names: [kiosk, ml-runtime]}\nclusters: {matchLabels: {size: big}}\n---\n\
kind: Policy\nname: stock-sync-de\napps: {names: [stock-sync]}\nclusters: {matchExpressions: [{key: country, operator: In, values: [de]}]}\n---\n\
kind: Policy\nname: payments-hold\npriority: 5\napps: {names: [payments]}\nclusters: {matchExpressions: [{key: tier, operator: Exists}]}\nversion: 2.0.1\n---\n\
kind: Policy\nname: stage-checkout\npriority: 10\napps: {names: [checkout]}\nclusters: {matchExpressions: [{key: fleetscope.io/environment, operator: In, values: [stage]}]}\nvalues: {replicas: 1}\n",
    );
    let mut text = String::new();
    for i in 0..clusters {
        let (region, country) = [
            ("apac", "jp"),
            ("emea", "de"),
            ("emea", "it"),
            ("apac", "nz"),
        ][i % 4];
        let environment = if i % 9 == 4 { "stage" } else { "prod" };
        let reconciler = if i % 5 == 3 { "argocd" } else { "flux" };
        let mut labels = vec![format!("country: {country}")];
        if (i / 4) % 2 == 0 {
            labels.push("size: big".into());
        }
        if i % 7 == 0 {
            labels.push("tier: flagship".into());
        }
        let _ = write!(
            text,
            "kind: Cluster\nid: {country}-s{:02}-{i:04}\ngroup: {region}/{country}/s{:02}\nenvironment: {environment}\nreconciler: {reconciler}\nlabels: {{{}}}\n---\n",
            i % 3,
            i % 3,
            labels.join(", ")
        );
    }
    write("clusters.yaml", &text);
}

/// The render groups whose clusters do not all have the same explanation.
fn mixed_render_groups(outcome: &RenderOutcome) -> BTreeSet<String> {
    let mut explanations: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (cluster, group) in &outcome.assigned.members {
        let assignments = assign::assign_cluster(&outcome.platform, cluster).unwrap();
        let why: Vec<_> = assignments
            .iter()
            .map(|a| (a.app.to_string(), a.reasons.clone(), a.pinned_by.clone()))
            .collect();
        explanations
            .entry(group)
            .or_default()
            .insert(format!("{why:?}"));
    }
    explanations
        .into_iter()
        .filter(|(_, why)| why.len() > 1)
        .map(|(group, _)| group.to_owned())
        .collect()
}

struct Hub {
    base: String,
    client: reqwest::Client,
    index: Arc<Index>,
}

impl Hub {
    async fn start(store: &Store) -> Hub {
        let index = Arc::new(
            Index::load(store.clone(), fleetscope_runtime::clock::now)
                .await
                .unwrap(),
        );
        let mut state = AppState::new(
            index.clone(),
            DriftPolicy::default(),
            MetricsConfig::default(),
        );
        state.fixed_now = Some(NOW);
        let base = common::serve(router(Arc::new(state), Arc::new(Auth::Insecure), false)).await;
        Hub {
            base,
            client: reqwest::Client::new(),
            index,
        }
    }

    async fn json(&self, path: &str) -> Value {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

/// One app of the hub's explain answer as the line `fleetscope render explain` prints for it.
fn as_renderer_line(app: &Value) -> String {
    let name = app["app"].as_str().unwrap();
    if app["desired"] != Value::Bool(true) {
        return format!("  {name}: not desired");
    }
    let version = match app["pinned_by"].as_str() {
        Some(policy) => format!(
            "{} (pinned by policy/{policy})",
            app["version"].as_str().unwrap()
        ),
        None => format!("{} (the app's default)", app["version"].as_str().unwrap()),
    };
    let reasons: Vec<&str> = app["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    format!(
        "  {name}: desired, version {version}; because {}",
        reasons.join(", then ")
    )
}

/// The per-app lines of the renderer's explain, with the reasons for "not desired" cut off
/// (the hub does not know the policies a cluster does not match).
fn renderer_lines(outcome: &RenderOutcome, cluster: &ClusterId, app: Option<&str>) -> Vec<String> {
    let app = app.map(|a| fleetscope_model::AppName::parse(a).unwrap());
    let text =
        explain::explain(&outcome.platform, &outcome.assigned, cluster, app.as_ref()).unwrap();
    text.lines()
        .filter(|line| line.starts_with("  "))
        .map(|line| match line.split_once(": not desired") {
            Some((name, _)) => format!("{name}: not desired"),
            None => line.to_owned(),
        })
        .collect()
}

/// Compares the hub's explain with the renderer's for every cluster, whole and app by app;
/// returns the hub's answers.
async fn check_explain_everywhere(hub: &Hub, outcome: &RenderOutcome) -> Vec<Value> {
    let apps: Vec<String> = outcome
        .platform
        .apps
        .keys()
        .map(ToString::to_string)
        .collect();
    let mut answers = Vec::new();
    let mut differences = Vec::new();
    for cluster in outcome.assigned.members.keys() {
        let whole = hub
            .json(&format!("/api/v1/explain?cluster={cluster}"))
            .await;
        let said: BTreeMap<String, String> = whole["apps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["app"].as_str().unwrap().to_owned(), as_renderer_line(a)))
            .collect();
        for line in renderer_lines(outcome, cluster, None) {
            let name = line.trim_start().split(':').next().unwrap().to_owned();
            let hub_line = said
                .get(&name)
                .cloned()
                .unwrap_or_else(|| format!("  {name}: not desired"));
            if hub_line != line {
                differences.push(format!(
                    "{cluster}:\n  render: {line}\n  hub:    {hub_line}"
                ));
            }
        }
        answers.push(whole);
        for app in &apps {
            let one = hub
                .json(&format!("/api/v1/explain?cluster={cluster}&app={app}"))
                .await;
            let hub_lines: Vec<String> = one["apps"]
                .as_array()
                .unwrap()
                .iter()
                .map(as_renderer_line)
                .collect();
            let render_lines = renderer_lines(outcome, cluster, Some(app));
            if hub_lines != render_lines {
                differences.push(format!(
                    "{cluster} app {app}:\n  render: {render_lines:?}\n  hub:    {hub_lines:?}"
                ));
            }
            answers.push(one);
        }
    }
    assert!(
        differences.is_empty(),
        "{} difference(s) between the hub's explain and the renderer's, the first:\n{}",
        differences.len(),
        differences
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    answers
}

#[tokio::test]
async fn the_hubs_explain_equals_the_renderers_in_mixed_render_groups() {
    let test = TestStore::start().await;
    let platform = tempfile::tempdir().unwrap();
    let gitops = tempfile::tempdir().unwrap();
    write_platform(platform.path(), 240);
    let outcome = render(platform.path(), gitops.path()).unwrap();
    let mixed = mixed_render_groups(&outcome);
    assert!(
        mixed.len() >= 3,
        "the platform repo makes mixed render groups: {mixed:?} of {}",
        outcome.assigned.groups.len()
    );
    desired::publish(&test.store, &outcome, 1, NOW)
        .await
        .unwrap();

    let hub = Hub::start(&test.store).await;
    let before = check_explain_everywhere(&hub, &outcome).await;

    // A restarted hub loads the same explanations from the store.
    let restarted = Hub::start(&test.store).await;
    let after = check_explain_everywhere(&restarted, &outcome).await;
    assert_eq!(before, after, "a restart changes no answer");

    // A render that changes only who is big (so which policies reach which clusters) is seen
    // by the running hub at its next refresh.
    let clusters = platform.path().join("clusters.yaml");
    let text = std::fs::read_to_string(&clusters).unwrap();
    std::fs::write(&clusters, text.replacen("size: big", "size: small", 7)).unwrap();
    let changed = render(platform.path(), gitops.path()).unwrap();
    desired::publish(&test.store, &changed, 2, NOW.plus_seconds(60))
        .await
        .unwrap();
    let refreshed = hub.index.refresh().await.unwrap();
    assert!(refreshed.tables_reloaded);
    check_explain_everywhere(&hub, &changed).await;
}

/// Every cluster reports every app it should run, as rendered, healthy and synced.
async fn report_everything(store: &Store, outcome: &RenderOutcome, at: Timestamp) {
    let mut observed = Vec::new();
    let mut heartbeats = Vec::new();
    for (cluster, group) in &outcome.assigned.members {
        let content = &outcome.assigned.groups[group];
        for a in &content.assignments {
            let app = &outcome.platform.apps[&a.app];
            let kind = match (content.reconciler, app.kind) {
                (fleetscope_model::Reconciler::ArgoCd, _) => "Application",
                (_, fleetscope_model::ReconcilerKind::FluxHelmRelease) => "HelmRelease",
                _ => "Kustomization",
            };
            observed.push(ObservedRow {
                cluster_id: cluster.to_string(),
                object_kind: kind.into(),
                object_namespace: if kind == "Application" {
                    "argocd"
                } else {
                    "flux-system"
                }
                .into(),
                object_name: a.app.to_string(),
                app: a.app.to_string(),
                version: a.version.to_string(),
                content_hash: outcome.hashes[&(group.clone(), a.app.to_string())].clone(),
                applied_revision: a.version.to_string(),
                health: "healthy".into(),
                sync: "synced".into(),
                reason: String::new(),
                message: String::new(),
                transitioned_at: fleetscope_store::to_datetime(at),
                observed_at: fleetscope_store::to_datetime(at),
                received_at: fleetscope_store::to_datetime(at),
                change_seq: 1,
                deleted: 0,
            });
        }
        heartbeats.push(HeartbeatRow {
            cluster_id: cluster.to_string(),
            seen_at: fleetscope_store::to_datetime(NOW),
            agent_version: "test".into(),
            reconciler_names: vec![],
            reconciler_versions: vec![],
        });
    }
    store.insert_rows(&observed).await.unwrap();
    store.insert_rows(&heartbeats).await.unwrap();
}

#[tokio::test]
async fn clusters_moving_between_render_groups_keep_their_hashes_and_stay_in_sync() {
    let test = TestStore::start().await;
    let platform = tempfile::tempdir().unwrap();
    let gitops = tempfile::tempdir().unwrap();
    write_platform(platform.path(), 120);
    let first = render(platform.path(), gitops.path()).unwrap();
    desired::publish(&test.store, &first, 1, NOW.plus_seconds(-3_600))
        .await
        .unwrap();
    report_everything(&test.store, &first, NOW.plus_seconds(-3_000)).await;
    let hub = Hub::start(&test.store).await;
    let policy = DriftPolicy::default();
    let states = |outcome: &RenderOutcome| {
        let clusters: Vec<ClusterId> = outcome.assigned.members.keys().cloned().collect();
        hub.index.read(|fleet| {
            let mut states = BTreeMap::new();
            for cluster in &clusters {
                let rec = &fleet.clusters[cluster.as_str()];
                for pair in fleet.pairs(rec, NOW, &policy) {
                    states.insert(
                        (cluster.to_string(), fleet.symbols.text(pair.app).to_owned()),
                        pair.state.as_str().to_owned(),
                    );
                }
            }
            states
        })
    };
    assert!(
        states(&first).values().all(|s| s == "in_sync"),
        "everything reported as rendered is in sync"
    );

    // One more app for the big clusters in Germany: they move to new render groups.
    std::fs::write(
        platform.path().join("more.yaml"),
        "kind: Namespace\nname: media\nowners: [team-media]\napps: [signage]\n---\n\
kind: Application\nname: signage\nversion: 3.0.0\nnamespace: media\nreconciler: flux-kustomization\n\
source: {type: git, url: \"https://git.example.com/media/signage.git\", path: ./deploy, ref: main}\n---\n\
kind: Policy\nname: signage-de\napps: {names: [signage]}\nclusters: {matchLabels: {size: big, country: de}}\n",
    )
    .unwrap();
    let second = render(platform.path(), gitops.path()).unwrap();
    let moved: Vec<&ClusterId> = first
        .assigned
        .members
        .iter()
        .filter(|(cluster, group)| second.assigned.members[*cluster] != **group)
        .map(|(cluster, _)| cluster)
        .collect();
    assert!(moved.len() >= 10, "clusters moved: {}", moved.len());
    // The entry file of each moved cluster changed; the hash of every app it had did not.
    let mut kept = 0;
    for cluster in &moved {
        let (old, new) = (
            &first.assigned.members[*cluster],
            &second.assigned.members[*cluster],
        );
        for a in &first.assigned.groups[old].assignments {
            let app = a.app.to_string();
            assert_eq!(
                first.hashes[&(old.clone(), app.clone())],
                second.hashes[&(new.clone(), app.clone())],
                "{cluster} {app}: {old} -> {new}"
            );
            kept += 1;
        }
    }
    assert!(kept > 0);
    desired::publish(&test.store, &second, 2, NOW.plus_seconds(-60))
        .await
        .unwrap();
    assert!(hub.index.refresh().await.unwrap().tables_reloaded);

    // In the hub and in the store's SQL (the dashboards' view): the apps that were there are
    // in sync, the new one is on its way.
    let after = states(&second);
    for cluster in &moved {
        let sql: BTreeMap<String, String> = test
            .store
            .cluster_drift(cluster.as_str(), NOW, &policy)
            .await
            .unwrap()
            .into_iter()
            .map(|row| (row.app, row.state))
            .collect();
        for a in &second.assigned.groups[&second.assigned.members[*cluster]].assignments {
            let app = a.app.to_string();
            let want = if app == "signage" {
                "progressing"
            } else {
                "in_sync"
            };
            assert_eq!(
                after[&(cluster.to_string(), app.clone())],
                want,
                "hub: {cluster} {app}"
            );
            assert_eq!(sql[&app], want, "sql: {cluster} {app}");
        }
        let page = hub.json(&format!("/api/v1/clusters/{cluster}")).await;
        for app in page["apps"].as_array().unwrap() {
            let want = if app["app"] == "signage" {
                "progressing"
            } else {
                "in_sync"
            };
            assert_eq!(app["state"], want, "api: {cluster} {}", app["app"]);
        }
    }
    assert!(
        after
            .iter()
            .filter(|((_, app), _)| app != "signage")
            .all(|(_, s)| s == "in_sync"),
        "no cluster's unchanged app left in sync"
    );
}

/// RFC 3339 as the API writes times.
fn rfc3339(at: Timestamp) -> String {
    jiff::Timestamp::from_second(at.seconds())
        .unwrap()
        .to_string()
}

/// The reproduction of a render that moves one cluster to another render group: with
/// `examples/platform`, a new app and a policy that gives it to `berlin-02` only. Its apps
/// that did not change keep the time they became desired (and so their state: a missing app
/// stays missing, an out-of-sync one stays out of sync, instead of "progressing" for the
/// grace period), and the gate's soak keeps counting, in the live hub and after a restart.
#[tokio::test]
async fn a_render_that_moves_a_cluster_keeps_the_age_of_its_unchanged_apps() {
    let test = TestStore::start().await;
    let store = &test.store;
    let platform = tempfile::tempdir().unwrap();
    fleetscope_testkit::copy_dir(
        &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/platform"),
        platform.path(),
    );
    let gitops = tempfile::tempdir().unwrap();
    let (first_at, second_at) = (NOW.plus_seconds(-3_600), NOW.plus_seconds(-60));
    let first = render(platform.path(), gitops.path()).unwrap();
    desired::publish(store, &first, 1, first_at).await.unwrap();
    // berlin-02 runs payments as rendered (in sync since a minute after the first render),
    // an older metrics-agent, and has not reported checkout.
    let group = &first.assigned.members[&ClusterId::parse("berlin-02").unwrap()];
    let object = |app: &str, kind: &str, version: &str, hash: &str| ObservedRow {
        cluster_id: "berlin-02".into(),
        object_kind: kind.into(),
        object_namespace: "flux-system".into(),
        object_name: app.into(),
        app: app.into(),
        version: version.into(),
        content_hash: hash.into(),
        applied_revision: version.into(),
        health: "healthy".into(),
        sync: "synced".into(),
        reason: String::new(),
        message: String::new(),
        transitioned_at: fleetscope_store::to_datetime(first_at.plus_seconds(60)),
        observed_at: fleetscope_store::to_datetime(first_at.plus_seconds(60)),
        received_at: fleetscope_store::to_datetime(first_at.plus_seconds(60)),
        change_seq: 1,
        deleted: 0,
    };
    let payments_hash = first.hashes[&(group.clone(), "payments".to_owned())].clone();
    store
        .insert_rows(&[
            object("payments", "Kustomization", "2.0.1", &payments_hash),
            object("metrics-agent", "Kustomization", "0.9.2", "sha256:older"),
        ])
        .await
        .unwrap();
    store
        .insert_rows(&[HeartbeatRow {
            cluster_id: "berlin-02".into(),
            seen_at: fleetscope_store::to_datetime(NOW.plus_seconds(-10)),
            agent_version: "test".into(),
            reconciler_names: vec![],
            reconciler_versions: vec![],
        }])
        .await
        .unwrap();
    let hub = Hub::start(store).await;
    let before = hub.json("/api/v1/clusters/berlin-02").await;

    std::fs::write(
        platform.path().join("apps/coupons.yaml"),
        "kind: Namespace\nname: promo\nowners: [team-shop]\napps: [coupons]\n---\n\
kind: Application\nname: coupons\nversion: 0.1.0\nnamespace: promo\nreconciler: flux-kustomization\n\
source: {type: git, url: \"https://git.example.com/shop/coupons.git\", path: ./deploy, ref: main}\n---\n\
kind: Policy\nname: coupons-pilot\napps: {names: [coupons]}\n\
clusters: {matchLabels: {fleetscope.io/cluster: berlin-02}}\n",
    )
    .unwrap();
    let second = render(platform.path(), gitops.path()).unwrap();
    let cluster = ClusterId::parse("berlin-02").unwrap();
    assert_ne!(
        first.assigned.members[&cluster], second.assigned.members[&cluster],
        "berlin-02 moves to another render group"
    );
    let published = desired::publish(store, &second, 2, second_at)
        .await
        .unwrap();
    assert_eq!(published.member_since_rows, 1, "berlin-02 gets a since set");
    assert!(hub.index.refresh().await.unwrap().tables_reloaded);

    let check = |page: &Value, when: &str| {
        let apps: BTreeMap<&str, &Value> = page["apps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["app"].as_str().unwrap(), a))
            .collect();
        let old: BTreeMap<&str, &Value> = before["apps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["app"].as_str().unwrap(), a))
            .collect();
        for (app, state) in [
            ("checkout", "missing"),
            ("payments", "in_sync"),
            ("metrics-agent", "out_of_sync"),
        ] {
            let (now, was) = (apps[app], old[app]);
            assert_eq!(
                now["desired_version"], was["desired_version"],
                "{when}: {app}"
            );
            assert_eq!(
                now["desired_content_hash"], was["desired_content_hash"],
                "{when}: {app}"
            );
            assert_eq!(
                now["desired_since"].as_str(),
                Some(rfc3339(first_at).as_str()),
                "{when}: {app} keeps the time of the first render"
            );
            assert_eq!(now["state"], state, "{when}: {app}");
        }
        assert_eq!(
            apps["coupons"]["desired_since"].as_str(),
            Some(rfc3339(second_at).as_str()),
            "{when}: the new app is desired from the second render"
        );
        assert_eq!(apps["coupons"]["state"], "progressing", "{when}: coupons");
    };
    assert_eq!(
        before["apps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["app"] == "checkout")
            .unwrap()["desired_since"]
            .as_str(),
        Some(rfc3339(first_at).as_str())
    );
    check(&hub.json("/api/v1/clusters/berlin-02").await, "live");
    // The soak of payments on berlin-02 counts from its report a minute after the first
    // render, not from the second render an hour later.
    let gate = hub
        .json("/api/v1/gate?app=payments&version=2.0.1&soak=30m&group=emea/de/berlin")
        .await;
    let holding: Vec<&str> = gate["holding_back"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["cluster"].as_str().unwrap())
        .collect();
    assert!(
        !holding.contains(&"berlin-02"),
        "berlin-02 has soaked payments for almost an hour: {gate}"
    );
    // The store's SQL (the dashboards') agrees on the states.
    let sql: BTreeMap<String, String> = store
        .cluster_drift("berlin-02", NOW, &DriftPolicy::default())
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.app, row.state))
        .collect();
    assert_eq!(sql["checkout"], "missing");
    assert_eq!(sql["metrics-agent"], "out_of_sync");
    assert_eq!(sql["coupons"], "progressing");

    let restarted = Hub::start(store).await;
    check(
        &restarted.json("/api/v1/clusters/berlin-02").await,
        "after a restart",
    );
}
