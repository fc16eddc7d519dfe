//! Rollouts and delivery figures on a small fleet whose every transition is chosen, written
//! render by render into a private ClickHouse with the hub refreshing between: `web` goes out
//! to six clusters, then 2.0 in three waves (the second with a cluster that fails first and
//! mends, the third stalled on a cluster that never reports it and joined by a new cluster);
//! `api` 3.1 is rolled back. Every figure is worked out by hand in the comments. The list is
//! checked again on a ClickHouse cluster (two shards of two replicas), the hub reading one node.

use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_hub::{router, AppState, Auth, MetricsConfig};
use fleetscope_local_clickhouse::LocalClickHouseCluster;
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::{
    ClusterConfig, ClusterRow, DesiredRow, DesiredVersionChangeRow, HeartbeatRow, MembershipRow,
    ObservedRow, PlatformCommitRow, RenderContentsRow, RenderRow, Store, StoreConfig,
};
use fleetscope_testkit::TestStore;
use serde_json::{json, Value};

use crate::common;

mod panels;
mod restart;
mod stale_at_restart;

const T: u32 = 1_800_000_000;

fn render_id(at: u32) -> u64 {
    u64::from(at) * 1000
}

/// Where the rows go: one server (kept running while the fleet is), or a cluster whose
/// replicas are synced before each read.
enum Servers {
    One(#[allow(dead_code)] Box<TestStore>),
    Cluster(Box<LocalClickHouseCluster>, String),
}

pub(crate) struct Fleet {
    servers: Servers,
    store: Store,
    index: Arc<Index>,
    clusters: Vec<&'static str>,
    seq: u64,
}

impl Fleet {
    async fn start(on_a_cluster: bool) -> Fleet {
        let (servers, store) = if on_a_cluster {
            let cluster = fleetscope_testkit::clickhouse_cluster::start("rollouts", 2, 2);
            let database = fleetscope_testkit::fresh_database_name();
            let store = Store::connect(
                &StoreConfig::new(cluster.servers()[0].url(), database.clone())
                    .with_cluster(ClusterConfig::new("rollouts")),
            )
            .unwrap();
            store.migrate().await.unwrap();
            (Servers::Cluster(Box::new(cluster), database), store)
        } else {
            let test = TestStore::start().await;
            let store = test.store.clone();
            (Servers::One(Box::new(test)), store)
        };
        let index = Arc::new(
            Index::load(store.clone(), fleetscope_runtime::clock::now)
                .await
                .unwrap(),
        );
        Fleet {
            servers,
            store,
            index,
            clusters: Vec::new(),
            seq: 0,
        }
    }

    /// A render at `at` from platform commit `commit` (made at `committed_at`): the clusters
    /// in `new` join the inventory (`emea/de` for c1–c3, `amer/us` for the others), and each
    /// (cluster, app, from, to) changes a desired version. Every cluster has a render group
    /// of its own.
    async fn render(
        &mut self,
        at: u32,
        commit: &str,
        committed_at: u32,
        new: &[&'static str],
        changes: &[(&str, &str, &str, &str)],
    ) {
        let store = &self.store;
        let render = render_id(at);
        let inventory: Vec<ClusterRow> = new
            .iter()
            .map(|c| {
                let group = if ["c1", "c2", "c3"].contains(c) {
                    "emea/de"
                } else {
                    "amer/us"
                };
                let parts: Vec<&str> = group.split('/').collect();
                ClusterRow {
                    cluster_id: (*c).into(),
                    group_path: group.into(),
                    group_prefixes: (1..=parts.len()).map(|n| parts[..n].join("/")).collect(),
                    environment: "prod".into(),
                    reconciler: "flux".into(),
                    label_keys: vec![],
                    label_values: vec![],
                    updated_at: at,
                    version: render,
                    removed: 0,
                }
            })
            .collect();
        store.insert_rows(&inventory).await.unwrap();
        let members: Vec<MembershipRow> = new
            .iter()
            .map(|c| MembershipRow {
                cluster_id: (*c).into(),
                render_group: format!("rg-{c}"),
                render_id: render,
                removed: 0,
            })
            .collect();
        store.insert_rows(&members).await.unwrap();
        self.clusters.extend(new);
        let desired: Vec<DesiredRow> = changes
            .iter()
            .map(|(cluster, app, _, to)| DesiredRow {
                render_group: format!("rg-{cluster}"),
                app: (*app).into(),
                render_id: render,
                version: (*to).into(),
                content_hash: String::new(),
                kind: "HelmRelease".into(),
                namespace: "shop".into(),
                reasons: vec!["policy/all".into()],
                commit: format!("gitops-{at}"),
                desired_since: at,
                removed: u8::from(to.is_empty()),
            })
            .collect();
        store.insert_rows(&desired).await.unwrap();
        let version_changes: Vec<DesiredVersionChangeRow> = changes
            .iter()
            .map(|(cluster, app, from, to)| DesiredVersionChangeRow {
                app: (*app).into(),
                render_id: render,
                cluster_id: (*cluster).into(),
                from_version: (*from).into(),
                to_version: (*to).into(),
            })
            .collect();
        store.insert_rows(&version_changes).await.unwrap();
        store
            .insert_rows(&[PlatformCommitRow {
                platform_commit: commit.into(),
                committed_at,
            }])
            .await
            .unwrap();
        store
            .insert_rows(&[RenderContentsRow {
                render_id: render,
                desired: desired.len() as u32,
                members: new.len() as u32,
            }])
            .await
            .unwrap();
        store
            .insert_rows(&[RenderRow {
                render_id: render,
                commit: format!("gitops-{at}"),
                platform_commit: commit.into(),
                rendered_at: at,
                summary: String::new(),
                render_groups: self.clusters.len() as u32,
                clusters: self.clusters.len() as u32,
                changed_items: changes.len() as u32,
            }])
            .await
            .unwrap();
    }

    /// `app` on `cluster` reported at `version`, `healthy` or `degraded`, in that state since
    /// `at` (and received then).
    async fn report(&mut self, cluster: &str, app: &str, version: &str, health: &str, at: u32) {
        self.seq += 1;
        let row = ObservedRow {
            cluster_id: cluster.into(),
            object_kind: "HelmRelease".into(),
            object_namespace: "shop".into(),
            object_name: app.into(),
            app: app.into(),
            version: version.into(),
            content_hash: String::new(),
            applied_revision: version.into(),
            health: health.into(),
            sync: "synced".into(),
            reason: String::new(),
            message: String::new(),
            transitioned_at: at,
            observed_at: at,
            received_at: at,
            change_seq: self.seq,
            deleted: 0,
        };
        self.store.insert_rows(&[row]).await.unwrap();
    }

    /// Every cluster heard from at `at`, then the hub refreshed at `at`.
    async fn refresh(&self, at: u32) {
        let heartbeats: Vec<HeartbeatRow> = self
            .clusters
            .iter()
            .map(|c| HeartbeatRow {
                cluster_id: (*c).into(),
                seen_at: at,
                agent_version: "1.0.0".into(),
                reconciler_names: vec![],
                reconciler_versions: vec![],
            })
            .collect();
        self.store.insert_rows(&heartbeats).await.unwrap();
        if let Servers::Cluster(cluster, database) = &self.servers {
            fleetscope_testkit::clickhouse_cluster::sync_replicas(cluster, database).await;
        }
        self.index
            .refresh_at(Timestamp(i64::from(at)), &DriftPolicy::default())
            .await
            .unwrap();
    }
}

/// The fleet of the module's description, the hub refreshed after every step, served at
/// `T + 7300`.
async fn served() -> (Fleet, String) {
    served_on(false).await
}

async fn served_on(on_a_cluster: bool) -> (Fleet, String) {
    let (fleet, _, base) = built(on_a_cluster, None).await;
    (fleet, base)
}

/// The hub's state at `at` over the fleet's index.
fn state_at(fleet: &Fleet, at: u32) -> Arc<AppState> {
    let mut state = AppState::new(
        fleet.index.clone(),
        DriftPolicy::default(),
        MetricsConfig::default(),
    );
    state.fixed_now = Some(Timestamp(i64::from(at)));
    Arc::new(state)
}

/// The hub's writes of its rollout records, from one moment to the next.
#[derive(Default)]
pub(crate) struct Recording {
    recorder: fleetscope_engine::rollout_records::RolloutRecorder,
    last_ms: u64,
}

impl Recording {
    async fn write(&mut self, state: &Arc<AppState>) {
        fleetscope_hub::rollout_records::write_rollout_records(
            state,
            &mut self.recorder,
            &mut self.last_ms,
        )
        .await
        .unwrap();
    }
}

/// The fleet, the hub's state at its end and the address serving it; with `recording`, the
/// hub writes its rollout records at `T + 3200` and at the end.
pub(crate) async fn built(
    on_a_cluster: bool,
    mut recording: Option<&mut Recording>,
) -> (Fleet, Arc<AppState>, String) {
    let mut fleet = Fleet::start(on_a_cluster).await;
    let all = ["c1", "c2", "c3", "c4", "c5", "c6"];
    // T: web 1.0 on six clusters, api 3.0 on two; all in sync 60 s later.
    let mut first: Vec<(&str, &str, &str, &str)> =
        all.iter().map(|c| (*c, "web", "", "1.0")).collect();
    first.extend([("c1", "api", "", "3.0"), ("c2", "api", "", "3.0")]);
    fleet.render(T, "p1", T - 600, &all, &first).await;
    for c in all {
        fleet.report(c, "web", "1.0", "healthy", T + 60).await;
    }
    fleet.report("c1", "api", "3.0", "healthy", T + 60).await;
    fleet.report("c2", "api", "3.0", "healthy", T + 60).await;
    fleet.refresh(T + 100).await;
    // T+1000: web 2.0, first wave (c1 in sync at +1100, c2 at +1200); api 3.1 (c1 fails).
    fleet
        .render(
            T + 1000,
            "p2",
            T + 900,
            &[],
            &[
                ("c1", "web", "1.0", "2.0"),
                ("c2", "web", "1.0", "2.0"),
                ("c1", "api", "3.0", "3.1"),
                ("c2", "api", "3.0", "3.1"),
            ],
        )
        .await;
    fleet.report("c1", "api", "3.1", "degraded", T + 1050).await;
    fleet.report("c1", "web", "2.0", "healthy", T + 1100).await;
    fleet.report("c2", "web", "2.0", "healthy", T + 1200).await;
    fleet.refresh(T + 1300).await;
    // T+2000: the second wave (c3 in sync at +2050; c4 fails at +2030, mends at +2400); api
    // back to 3.0 (c2 never left it; c1 in sync at +2100).
    fleet
        .render(
            T + 2000,
            "p3",
            T + 1950,
            &[],
            &[
                ("c3", "web", "1.0", "2.0"),
                ("c4", "web", "1.0", "2.0"),
                ("c1", "api", "3.1", "3.0"),
                ("c2", "api", "3.1", "3.0"),
            ],
        )
        .await;
    fleet.report("c4", "web", "2.0", "degraded", T + 2030).await;
    fleet.report("c3", "web", "2.0", "healthy", T + 2050).await;
    fleet.report("c1", "api", "3.0", "healthy", T + 2100).await;
    fleet.refresh(T + 2110).await;
    fleet.report("c4", "web", "2.0", "healthy", T + 2400).await;
    // c5 fails at 1.0 before the third wave takes it to 2.0: not a failure at 2.0.
    fleet.report("c5", "web", "1.0", "degraded", T + 2450).await;
    fleet.refresh(T + 2500).await;
    // T+3000: the third wave (c5, failing at 1.0 until then, in sync at +3100; c6 never
    // reports 2.0).
    fleet
        .render(
            T + 3000,
            "p4",
            T + 2990,
            &[],
            &[("c5", "web", "1.0", "2.0"), ("c6", "web", "1.0", "2.0")],
        )
        .await;
    fleet.refresh(T + 3050).await;
    fleet.report("c5", "web", "2.0", "healthy", T + 3100).await;
    fleet.refresh(T + 3200).await;
    if let Some(recording) = recording.as_deref_mut() {
        recording.write(&state_at(&fleet, T + 3200)).await;
    }
    // T+3500: a new cluster c7 gets web 2.0 (in sync at +3600): it joins the third wave.
    fleet
        .render(
            T + 3500,
            "p4",
            T + 2990,
            &["c7"],
            &[("c7", "web", "", "2.0")],
        )
        .await;
    fleet.report("c7", "web", "2.0", "healthy", T + 3600).await;
    fleet.refresh(T + 3700).await;
    fleet.refresh(T + 7300).await;
    let state = state_at(&fleet, T + 7300);
    if let Some(recording) = recording {
        recording.write(&state).await;
    }
    let base = common::serve(router(state.clone(), Arc::new(Auth::Insecure), false)).await;
    (fleet, state, base)
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let response = reqwest::get(format!("{base}/api/v1/{path}")).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn ok(base: &str, path: &str) -> Value {
    let (status, body) = get(base, path).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

fn id(app: &str, at: u32, version: &str) -> String {
    format!("{app}@{}@{version}", render_id(at))
}

/// The fields of a listed rollout that the scenario decides.
fn figures(item: &Value) -> Value {
    let keys = [
        "id",
        "status",
        "from_versions",
        "platform_commit",
        "targeted_at_start",
        "joined",
        "rolled_back",
        "superseded",
        "targeted",
        "in_sync",
        "failed",
        "reached",
        "failed_before_reaching",
        "seconds_to_50_percent",
        "seconds_to_90_percent",
        "seconds_to_99_percent",
        "seconds_to_100_percent",
    ];
    keys.iter()
        .map(|k| (k.to_string(), item[k].clone()))
        .collect()
}

fn from(version: Option<&str>, clusters: u32) -> Value {
    json!([{ "version": version, "clusters": clusters }])
}

#[tokio::test]
async fn waves_a_stall_a_join_and_a_rollback_give_the_documented_figures() {
    let (_fleet, base) = served().await;
    let listed = ok(&base, "rollouts?app=web").await;
    let items: Vec<Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(figures)
        .collect();
    assert_eq!(
        items,
        vec![
            // The third wave: c5 at +100, c7 (joined at +500) at +600, c6 never; no cluster
            // reached it for 3,700 s > the stall time: stalled. 50 % of 3 is 2 clusters.
            json!({"id": id("web", T + 3000, "2.0"), "status": "stalled",
                "from_versions": from(Some("1.0"), 2), "platform_commit": "p4",
                "targeted_at_start": 2, "joined": 1, "rolled_back": 0, "superseded": 0,
                "targeted": 3, "in_sync": 2, "failed": 0, "reached": 2,
                "failed_before_reaching": 0, "seconds_to_50_percent": 600,
                "seconds_to_90_percent": null, "seconds_to_99_percent": null,
                "seconds_to_100_percent": null}),
            // The second wave: c3 at +50, c4 failed at +30 and reached at +400.
            json!({"id": id("web", T + 2000, "2.0"), "status": "complete",
                "from_versions": from(Some("1.0"), 2), "platform_commit": "p3",
                "targeted_at_start": 2, "joined": 0, "rolled_back": 0, "superseded": 0,
                "targeted": 2, "in_sync": 2, "failed": 0, "reached": 2,
                "failed_before_reaching": 1, "seconds_to_50_percent": 50,
                "seconds_to_90_percent": 400, "seconds_to_99_percent": 400,
                "seconds_to_100_percent": 400}),
            json!({"id": id("web", T + 1000, "2.0"), "status": "complete",
                "from_versions": from(Some("1.0"), 2), "platform_commit": "p2",
                "targeted_at_start": 2, "joined": 0, "rolled_back": 0, "superseded": 0,
                "targeted": 2, "in_sync": 2, "failed": 0, "reached": 2,
                "failed_before_reaching": 0, "seconds_to_50_percent": 100,
                "seconds_to_90_percent": 200, "seconds_to_99_percent": 200,
                "seconds_to_100_percent": 200}),
            // The first release: complete at +60, before the waves moved every cluster on.
            json!({"id": id("web", T, "1.0"), "status": "complete",
                "from_versions": from(None, 6), "platform_commit": "p1",
                "targeted_at_start": 6, "joined": 0, "rolled_back": 0, "superseded": 6,
                "targeted": 0, "in_sync": 0, "failed": 0, "reached": 0,
                "failed_before_reaching": 0, "seconds_to_50_percent": 60,
                "seconds_to_90_percent": 60, "seconds_to_99_percent": 60,
                "seconds_to_100_percent": 60}),
        ]
    );
    assert_eq!(listed["next_cursor"], Value::Null);

    let api = ok(&base, "rollouts?app=api").await;
    let statuses: Vec<(&str, &str)> = api["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["version"].as_str().unwrap(),
                i["status"].as_str().unwrap(),
            )
        })
        .collect();
    // 3.0 again (c2 was still running it: in sync at the render itself), 3.1 rolled back, the
    // first 3.0 complete before 3.1 moved it on.
    assert_eq!(
        statuses,
        vec![
            ("3.0", "complete"),
            ("3.1", "rolled_back"),
            ("3.0", "complete")
        ]
    );
    let back = &api["items"][0];
    assert_eq!(
        (
            back["seconds_to_50_percent"].clone(),
            back["seconds_to_100_percent"].clone()
        ),
        (json!(0), json!(100))
    );
    assert_eq!(
        api["items"][1]["rolled_back_by"],
        json!(render_id(T + 2000))
    );

    // Status and scope.
    let stalled = ok(&base, "rollouts?status=stalled").await;
    let ids: Vec<&str> = stalled["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![id("web", T + 3000, "2.0")]);
    let amer = ok(&base, "rollouts?app=web&group=amer").await;
    let scoped: Vec<(String, u64, Value)> = amer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["id"].as_str().unwrap().to_owned(),
                i["targeted"].as_u64().unwrap(),
                i["seconds_to_100_percent"].clone(),
            )
        })
        .collect();
    // c4 is the second wave's only cluster in amer: its milestones are c4's.
    assert_eq!(
        scoped,
        vec![
            (id("web", T + 3000, "2.0"), 3, Value::Null),
            (id("web", T + 2000, "2.0"), 1, json!(400)),
        ]
    );
    // Paging.
    let page = ok(&base, "rollouts?app=web&limit=3").await;
    assert_eq!(page["items"].as_array().unwrap().len(), 3);
    let cursor = page["next_cursor"].as_str().unwrap();
    let rest = ok(&base, &format!("rollouts?app=web&limit=3&cursor={cursor}")).await;
    assert_eq!(rest["items"][0]["id"], json!(id("web", T, "1.0")));
    assert_eq!(rest["next_cursor"], Value::Null);
    let since = ok(&base, &format!("rollouts?app=web&since={}", T + 2000)).await;
    assert_eq!(since["items"].as_array().unwrap().len(), 2);

    // `/metrics`: rollouts per status, and the stalled one with its time without progress
    // (3,700 s since c7 reached it).
    let metrics = common::metrics_text(&base).await;
    for line in [
        "fleetscope_rollouts{status=\"complete\"} 5",
        "fleetscope_rollouts{status=\"rolled_back\"} 1",
        "fleetscope_rollouts{status=\"stalled\"} 1",
        "fleetscope_rollouts{status=\"in_progress\"} 0",
        "fleetscope_rollouts{status=\"superseded\"} 0",
        "fleetscope_rollout_stalled_seconds{app=\"web\",version=\"2.0\"} 3700",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in:\n{metrics}"
        );
    }
}

#[tokio::test]
async fn one_rollout_has_its_curve_and_its_stragglers() {
    let (_fleet, base) = served().await;
    let wave = ok(&base, &format!("rollouts/{}", id("web", T + 3000, "2.0"))).await;
    // From +0 to now (+4300, not complete): a point a minute and one at the end.
    assert_eq!(wave["step_seconds"], json!(60));
    let curve = wave["curve"].as_array().unwrap();
    assert_eq!(curve.len(), 73);
    let at = |seconds: u64| {
        let p = curve
            .iter()
            .find(|p| p["seconds"] == json!(seconds))
            .unwrap();
        (
            p["in_sync"].as_u64().unwrap(),
            p["failed"].as_u64().unwrap(),
            p["waiting"].as_u64().unwrap(),
        )
    };
    assert_eq!(at(60), (0, 0, 3));
    assert_eq!(at(120), (1, 0, 2));
    assert_eq!(at(600), (2, 0, 1));
    assert_eq!(at(4300), (2, 0, 1));
    assert_eq!(wave["groups"][0]["group"], json!("amer"));
    assert_eq!(wave["groups"][0]["targeted"], json!(3));
    let stragglers: Vec<(&str, &str)> = wave["stragglers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["cluster"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(stragglers, vec![("c6", "out_of_sync")]);

    // The second wave completed at +400: its curve ends a step later, c4 failed in between.
    let second = ok(
        &base,
        &format!("rollouts/{}?depth=2", id("web", T + 2000, "2.0")),
    )
    .await;
    assert_eq!(second["step_seconds"], json!(60));
    let points: Vec<(u64, u64, u64, u64)> = second["curve"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["seconds"].as_u64().unwrap(),
                p["in_sync"].as_u64().unwrap(),
                p["failed"].as_u64().unwrap(),
                p["waiting"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        points,
        vec![
            (0, 0, 0, 2),
            (60, 1, 1, 0),
            (120, 1, 1, 0),
            (180, 1, 1, 0),
            (240, 1, 1, 0),
            (300, 1, 1, 0),
            (360, 1, 1, 0),
            (420, 2, 0, 0),
            (460, 2, 0, 0),
        ]
    );
    let groups: Vec<&str> = second["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, vec!["amer/us", "emea/de"]);
    assert_eq!(second["stragglers"], json!([]));

    let (status, body) = get(&base, &format!("rollouts/{}", id("web", T + 3000, "9.9"))).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = get(&base, "rollouts/web").await;
    assert_eq!((status, body["parameter"].clone()), (400, json!("rollout")));
}

#[tokio::test]
async fn delivery_figures_follow_the_documented_rules() {
    let (_fleet, base) = served().await;
    let delivery = ok(&base, "delivery").await;
    assert_eq!(delivery["failure_budget_percent"], json!(5.0));
    let apps = delivery["apps"].as_array().unwrap();
    let names: Vec<&str> = apps.iter().map(|a| a["app"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["api", "web"]);
    let per_day = |n: f64| n / 30.0;
    assert_eq!(
        apps[1],
        json!({
            "app": "web",
            // Completed: the first release and the first two waves.
            "deployments": 3,
            "deployments_per_day": per_day(3.0),
            // Commit to 90 %: 660 (p1 at -600, +60), 300 (p2 at +900, +1200), 450 (p3 at
            // +1950, +2400); the third wave has not passed 90 %.
            "lead_time": {"count": 3, "median_seconds": 450, "p90_seconds": 660},
            // Four started; the second wave had 1 of 2 clusters fail first (50 % > 5 %).
            "changes": 4, "failed_changes": 1, "change_failure_rate": 0.25,
            // c4: failed at +2030, reached at +2400.
            "time_to_restore": {"count": 1, "median_seconds": 370, "p90_seconds": 370},
        })
    );
    assert_eq!(
        apps[0],
        json!({
            "app": "api",
            "deployments": 2,
            "deployments_per_day": per_day(2.0),
            // 660 (p1), 150 (p3 at +1950, c1 at +2100).
            "lead_time": {"count": 2, "median_seconds": 150, "p90_seconds": 660},
            // 3.1 was rolled back.
            "changes": 3, "failed_changes": 1, "change_failure_rate": 1.0 / 3.0,
            // c1 failed at 3.1 but left it before reaching it.
            "time_to_restore": {"count": 0, "median_seconds": null, "p90_seconds": null},
        })
    );
    // A selection lists only the apps whose rollouts reached it: `api` never went to amer/us
    // (as `rollouts` lists none of its rollouts there), so a scoped token learns no app name
    // from outside its subtree.
    let amer = ok(&base, "delivery?group=amer/us").await;
    let listed: Vec<&str> = amer["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["app"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec!["web"], "{amer:#}");
    let api_there = ok(&base, "rollouts?app=api&group=amer/us").await;
    assert_eq!(api_there["items"], json!([]), "{api_there:#}");
    let emea = ok(&base, "delivery?group=emea/de").await;
    assert_eq!(emea["apps"].as_array().unwrap().len(), 2, "{emea:#}");
    let one = ok(&base, "delivery?app=web&window=1h").await;
    // The last hour (+3700 to +7300): nothing completed or started in it.
    assert_eq!(
        (
            one["apps"][0]["deployments"].clone(),
            one["apps"][0]["changes"].clone()
        ),
        (json!(0), json!(0))
    );
    let (status, body) = get(&base, "delivery?window=91d").await;
    assert_eq!((status, body["parameter"].clone()), (400, json!("window")));
}

#[tokio::test]
async fn a_clickhouse_cluster_gives_the_same_rollouts() {
    let (_one, single) = served().await;
    let (_cluster, clustered) = served_on(true).await;
    for path in [
        "rollouts?limit=1000",
        "rollouts?app=web&group=amer",
        "delivery",
    ] {
        let (a, b) = (ok(&single, path).await, ok(&clustered, path).await);
        assert_eq!(a, b, "{path}");
    }
    let wave = format!("rollouts/{}?depth=2", id("web", T + 3000, "2.0"));
    assert_eq!(ok(&single, &wave).await, ok(&clustered, &wave).await);
}
