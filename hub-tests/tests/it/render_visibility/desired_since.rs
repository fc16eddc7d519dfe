//! A cluster's `desired_since` for an app is when its desired version and content last changed
//! for that cluster, whatever render group it comes from. Random sequences of renders of a
//! small platform repo (clusters moving between render groups as their labels change, apps
//! added, changed, pinned and removed, a cluster taken out and put back) go through the real
//! renderer into a private ClickHouse; after every render the hub (refreshed, and sometimes
//! restarted), the dashboards' SQL and the fleet built at each past moment must all give every
//! pair the time a from-scratch reading of the render history gives.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use fleetscope_engine::past::{build_apart, Reach};
use fleetscope_engine::{Fleet, Index};
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_renderer::{desired, render, RenderOutcome};
use fleetscope_store::panel_sql::{self, Slots};
use fleetscope_store::{Store, StoreConfig};
use fleetscope_testkit::TestStore;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const CLUSTERS: usize = 6;
const APPS: &[(&str, &str)] = &[
    ("a0", "core"),
    ("a1", "core"),
    ("a2", "extra"),
    ("a3", "extra"),
];
const VERSIONS: &[&str] = &["1.0.0", "1.1.0", "2.0.0"];
const LANES: &[&str] = &["x", "y", "z"];
/// Seconds between two renders.
const STEP_SECONDS: i64 = 600;

/// One render's platform repo.
#[derive(Debug, Clone)]
struct Platform {
    /// Each app's version, `None` when the app is not in the repo (`a0` always is).
    versions: [Option<usize>; 4],
    /// Each cluster's `lane` label: which policies reach it.
    lanes: [usize; CLUSTERS],
    /// Whether the last cluster is in the repo.
    last_cluster: bool,
    /// Whether the hub restarts before this render is checked.
    restart: bool,
}

fn platform() -> impl Strategy<Value = Platform> {
    (
        0..VERSIONS.len(),
        proptest::array::uniform3(proptest::option::weighted(0.75, 0..VERSIONS.len())),
        proptest::array::uniform6(0..LANES.len()),
        proptest::bool::weighted(0.8),
        proptest::bool::weighted(0.3),
    )
        .prop_map(
            |(first, [b, c, d], lanes, last_cluster, restart)| Platform {
                versions: [Some(first), b, c, d],
                lanes,
                last_cluster,
                restart,
            },
        )
}

/// Writes the platform repo: policies by team and lane, a pin and an overlay by lane, so that
/// a change of lane moves a cluster to another render group and sometimes changes its content.
fn write_platform(dir: &Path, p: &Platform) {
    let write = |name: &str, text: String| std::fs::write(dir.join(name), text).unwrap();
    write(
        "groups.yaml",
        "kind: Group\npath: emea\n---\nkind: Group\npath: emea/de\n".into(),
    );
    write(
        "environments.yaml",
        "kind: Environment\nname: prod\n".into(),
    );
    write(
        "gitops.yaml",
        "kind: GitOpsRepository\nurl: https://git.example.com/fleet.git\n".into(),
    );
    let mut clusters = String::new();
    let present = if p.last_cluster {
        CLUSTERS
    } else {
        CLUSTERS - 1
    };
    for (i, lane) in p.lanes.iter().enumerate().take(present) {
        let _ = write!(
            clusters,
            "---\nkind: Cluster\nid: c{i}\ngroup: emea/de/s{}\nenvironment: prod\nreconciler: flux\nlabels: {{lane: {}}}\n",
            i % 2,
            LANES[*lane]
        );
    }
    write("clusters.yaml", clusters);
    let present_apps: Vec<&str> = APPS
        .iter()
        .zip(p.versions)
        .filter(|(_, v)| v.is_some())
        .map(|((name, _), _)| *name)
        .collect();
    let mut apps = format!(
        "kind: Namespace\nname: shop\nowners: [team-shop]\napps: [{}]\n",
        present_apps.join(", ")
    );
    for ((name, team), version) in APPS.iter().zip(p.versions) {
        if let Some(v) = version {
            let _ = write!(
                apps,
                "---\nkind: Application\nname: {name}\nversion: {}\nnamespace: shop\nreconciler: flux-kustomization\n\
                 source: {{type: git, url: \"https://git.example.com/{name}.git\", path: ./deploy, ref: main}}\n\
                 labels: {{team: {team}, name: {name}}}\nvalues: {{replicas: 1}}\n",
                VERSIONS[v]
            );
        }
    }
    write("apps.yaml", apps);
    write(
        "policies.yaml",
        "kind: Policy\nname: core\napps: {matchExpressions: [{key: team, operator: In, values: [core]}]}\nclusters: {}\n\
         ---\nkind: Policy\nname: extra-x\napps: {matchExpressions: [{key: team, operator: In, values: [extra]}]}\nclusters: {matchLabels: {lane: x}}\n\
         ---\nkind: Policy\nname: extra-y\napps: {matchExpressions: [{key: team, operator: In, values: [extra]}]}\nclusters: {matchLabels: {lane: y}}\n\
         ---\nkind: Policy\nname: big-y\npriority: 10\napps: {names: [a0]}\nclusters: {matchLabels: {lane: y}}\nvalues: {replicas: 3}\n\
         ---\nkind: Policy\nname: pin-z\npriority: 20\napps: {matchExpressions: [{key: name, operator: In, values: [a1]}]}\nclusters: {matchLabels: {lane: z}}\nversion: 0.9.0\n"
            .into(),
    );
}

/// (cluster, app) → (version, content hash) as one render decided it.
type Desired = BTreeMap<(String, String), (String, String)>;

fn desired_of(outcome: &RenderOutcome) -> Desired {
    let mut out = Desired::new();
    for (cluster, group) in &outcome.assigned.members {
        for a in &outcome.assigned.groups[group].assignments {
            let hash = &outcome.hashes[&(group.clone(), a.app.to_string())];
            out.insert(
                (cluster.to_string(), a.app.to_string()),
                (a.version.to_string(), hash.clone()),
            );
        }
    }
    out
}

/// From scratch: each pair of the last render with the time of the first render of the run of
/// renders, ending at the last, that all desired the same version and content for it.
fn expected(history: &[(i64, Desired)]) -> BTreeMap<(String, String), u32> {
    let (_, last) = history.last().expect("a render");
    last.iter()
        .map(|(pair, held)| {
            let since = history
                .iter()
                .rev()
                .take_while(|(_, desired)| desired.get(pair) == Some(held))
                .last()
                .map(|(at, _)| *at)
                .expect("the last render holds it");
            (pair.clone(), since as u32)
        })
        .collect()
}

/// Every desired pair of the fleet with its `desired_since`, as the hub's pairs give it.
fn hub_since(fleet: &Fleet) -> BTreeMap<(String, String), u32> {
    let mut out = BTreeMap::new();
    for (id, cluster) in fleet.clusters.iter() {
        for pair in fleet.current_pairs(cluster) {
            if let Some(since) = pair.desired_since {
                out.insert(
                    (id.to_owned(), fleet.symbols.text(pair.app).to_owned()),
                    since,
                );
            }
        }
    }
    out
}

fn in_range(column: &str) -> String {
    format!("{column} >= toDateTime(0)")
}

/// Every desired pair with its `desired_since`, as the cluster dashboard's apps panel shows it
/// (its SQL run over ClickHouse's HTTP interface, as Grafana's plugin would).
async fn dashboard_since(
    server_url: &str,
    store: &Store,
    at: i64,
) -> BTreeMap<(String, String), u32> {
    let to = format!("toDateTime({at})");
    let http = reqwest::Client::new();
    let mut out = BTreeMap::new();
    for i in 0..CLUSTERS {
        let cluster = format!("'c{i}'");
        let slots = Slots {
            group: "''",
            environment: "''",
            app: "''",
            version: "''",
            cluster: &cluster,
            rollout: "''",
            failure_budget: "5",
            stale_after_seconds: "600",
            grace_seconds: "900",
            from: "toDateTime(0)",
            to: &to,
            interval_seconds: "3600",
            time_filter: in_range,
            table_rows: 500,
        };
        let panel = panel_sql::cluster_apps(&slots);
        let sql = format!(
            "SELECT app, toUInt32(desired_since) FROM ({}) WHERE desired_since IS NOT NULL FORMAT TabSeparated",
            panel.sql
        );
        let response = http
            .post(server_url)
            .query(&[("database", store.database())])
            .body(sql)
            .send()
            .await
            .expect("ClickHouse answers");
        let status = response.status();
        let text = response.text().await.expect("a body");
        assert!(status.is_success(), "the apps panel runs: {text}");
        for line in text.lines() {
            let (app, since) = line.split_once('\t').expect("two columns");
            out.insert(
                (format!("c{i}"), app.to_owned()),
                since.parse().expect("seconds"),
            );
        }
    }
    out
}

/// Pairs whose `desired_since` is not their render group's row's: the ones a since set decides.
fn carried(fleet: &Fleet) -> usize {
    fleet
        .clusters
        .iter()
        .flat_map(|(_, cluster)| fleet.current_pairs(cluster))
        .filter(|pair| pair.desired.map(|d| d.since) != pair.desired_since)
        .count()
}

/// Renders and publishes each platform in turn and checks every answer after each. Returns how
/// many pairs, over all renders, had a `desired_since` other than their render group's.
async fn check_sequence(server_url: &str, platforms: &[Platform]) -> Result<usize, TestCaseError> {
    let store = Store::connect(&StoreConfig::new(
        server_url.to_owned(),
        fleetscope_testkit::fresh_database_name(),
    ))
    .expect("valid store config");
    store.migrate().await.expect("migrations apply");
    let policy = DriftPolicy::default();
    let repo = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // Renders a day back, ten minutes apart, so every moment checked is in the past.
    let start = fleetscope_runtime::clock::now().seconds() - 86_400;
    store
        .take_checkpoint(Timestamp(start - 1))
        .await
        .expect("an empty first checkpoint");
    let mut history: Vec<(i64, Desired)> = Vec::new();
    let mut index: Option<Index> = None;
    let mut seen_carried = 0;
    for (step, p) in platforms.iter().enumerate() {
        let at = start + step as i64 * STEP_SECONDS;
        write_platform(repo.path(), p);
        let outcome = render(repo.path(), out.path()).expect("the platform repo renders");
        desired::publish(&store, &outcome, at as u64 * 1000, Timestamp(at))
            .await
            .expect("the render publishes");
        history.push((at, desired_of(&outcome)));
        let want = expected(&history);

        let live = match index.take() {
            Some(live) if !p.restart => {
                live.refresh_at(Timestamp(at + 1), &policy).await.unwrap();
                live
            }
            _ => Index::load(store.clone(), fleetscope_runtime::clock::now)
                .await
                .expect("the hub loads"),
        };
        let hub = live.read(hub_since);
        seen_carried += live.read(carried);
        prop_assert_eq!(&hub, &want, "the hub after render {} ({:?})", step, p);
        index = Some(live);

        let dashboard = dashboard_since(server_url, &store, at + 1).await;
        prop_assert_eq!(
            &dashboard,
            &want,
            "the dashboards' SQL after render {}",
            step
        );

        for id in ["c0", "c5"] {
            let from_store: BTreeMap<(String, String), u32> = store
                .desired_for_cluster(id)
                .await
                .unwrap()
                .into_iter()
                .map(|r| ((id.to_owned(), r.app), r.desired_since))
                .collect();
            let of_cluster: BTreeMap<(String, String), u32> = want
                .iter()
                .filter(|((c, _), _)| c == id)
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            prop_assert_eq!(
                from_store,
                of_cluster,
                "the store's desired state of {} after render {}",
                id,
                step
            );
        }
    }
    // Every past moment: the fleet built from history gives each render's answer.
    for (step, (at, _)) in history.iter().enumerate() {
        let past = build_apart(&store, Timestamp(at + 1), Reach::Fleet, policy)
            .await
            .expect("the fleet at a past moment builds");
        let want = expected(&history[..=step]);
        prop_assert_eq!(
            hub_since(&past),
            want,
            "the fleet at the moment of render {}",
            step
        );
    }
    Ok(seen_carried)
}

#[test]
fn desired_since_follows_each_cluster_through_render_groups() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let test = runtime.block_on(TestStore::start());
    let url = test.server.url();
    let mut runner = TestRunner::new(Config {
        cases: 10,
        failure_persistence: None,
        ..Config::default()
    });
    let carried_pairs = std::cell::Cell::new(0);
    runner
        .run(&proptest::collection::vec(platform(), 2..7), |platforms| {
            let seen = runtime.block_on(check_sequence(&url, &platforms))?;
            carried_pairs.set(carried_pairs.get() + seen);
            Ok(())
        })
        .unwrap();
    assert!(
        carried_pairs.get() > 0,
        "no render gave a pair a time other than its render group's: the cases test nothing"
    );
}
