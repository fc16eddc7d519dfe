//! The fleet at a past moment (`at`), against the live answers recorded at that moment.
//!
//! Three simulated days are written into a private ClickHouse in the order they happen:
//! renders (a rollout, a cluster moved to another render group, one relabelled and moved to
//! another group, one taken out of the inventory), heartbeats every ten minutes (one cluster
//! falls silent on the first day for good, another on the second), reconciler status changes
//! every hour, an app object deleted, an app nobody desires. Checkpoints are taken as the
//! collector would, every six hours. At eight moments a hub is loaded from what the store held
//! then and its answers are recorded; at the end one hub answers every question again with
//! `at=` that moment, and the two must be equal, byte for byte as JSON. Then retention drops the
//! first day: moments from the oldest checkpoint kept on still answer as recorded (a cluster
//! silent since a dropped hour keeps its last heartbeat), earlier ones are a 400 that says what
//! is kept.

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::{
    ClusterRow, DesiredRow, HeartbeatRow, MembershipRow, ObservedRow, RenderRow, Store,
};
use fleetscope_testkit::TestStore;
use serde_json::Value;

use crate::common;

const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;
/// Midnight (UTC), so that the days of the simulation are the store's day partitions.
const T0: i64 = 20_834 * DAY;
const CHECKPOINT_EVERY: i64 = 6 * HOUR;
const END: i64 = T0 + 3 * DAY - HOUR;

const CLUSTERS: [&str; 6] = ["c1", "c2", "c3", "c4", "c5", "c6"];
const APPS: [&str; 3] = ["api", "billing", "cart"];

/// The moments recorded, with what each is about.
const MOMENTS: [(i64, &str); 8] = [
    (T0 + 9 * HOUR + 1_800, "before the rollout"),
    (
        T0 + 10 * HOUR + 300,
        "a rollout under way, within the grace period",
    ),
    (T0 + 13 * HOUR, "the rollout arrived"),
    // c5's last heartbeat: 02:44:00 on the second day.
    (
        T0 + DAY + 2 * HOUR + 3_240,
        "c5 silent for exactly 600 s: not stale yet",
    ),
    (T0 + DAY + 3 * HOUR + 1_200, "c5 stale"),
    (
        T0 + DAY + 8 * HOUR + 1_800,
        "cart deleted on c2, past the grace period",
    ),
    (
        T0 + DAY + 14 * HOUR + 600,
        "after the render that moved c3 and c6 and took c4 out",
    ),
    (T0 + 2 * DAY + 20 * HOUR, "c6 silent since the first day"),
];

#[derive(Debug, Clone)]
enum Event {
    Render(u8),
    Heartbeat(usize),
    Change { cluster: usize, app: usize },
    Rolled,
    Deleted,
    Checkpoint,
    Moment(usize),
}

fn render_id(at: i64) -> u64 {
    at as u64 * 1_000
}

fn prefixes(group: &str) -> Vec<String> {
    let parts: Vec<&str> = group.split('/').collect();
    (1..=parts.len()).map(|n| parts[..n].join("/")).collect()
}

fn inventory(id: &str, group: &str, environment: &str, at: i64, removed: bool) -> ClusterRow {
    ClusterRow {
        cluster_id: id.into(),
        group_path: group.into(),
        group_prefixes: prefixes(group),
        environment: environment.into(),
        reconciler: "flux".into(),
        label_keys: vec!["tier".into()],
        label_values: vec![if group.starts_with("emea") {
            "edge"
        } else {
            "core"
        }
        .into()],
        updated_at: at as u32,
        version: render_id(at),
        removed: removed as u8,
    }
}

fn member(id: &str, render_group: &str, at: i64, removed: bool) -> MembershipRow {
    MembershipRow {
        cluster_id: id.into(),
        render_group: render_group.into(),
        render_id: render_id(at),
        removed: removed as u8,
    }
}

fn desired(render_group: &str, app: &str, version: &str, at: i64) -> DesiredRow {
    DesiredRow {
        render_group: render_group.into(),
        app: app.into(),
        render_id: render_id(at),
        version: version.into(),
        content_hash: String::new(),
        kind: "HelmRelease".into(),
        namespace: app.into(),
        reasons: vec![format!("policy/{app}")],
        commit: format!("commit-{at}"),
        desired_since: at as u32,
        removed: 0,
    }
}

fn render_row(at: i64, clusters: u32) -> RenderRow {
    RenderRow {
        render_id: render_id(at),
        commit: format!("commit-{at}"),
        platform_commit: format!("platform-{at}"),
        rendered_at: at as u32,
        summary: String::new(),
        render_groups: 2,
        clusters,
        changed_items: 1,
    }
}

/// The simulated fleet's running state, to write each change's row.
struct Sim {
    seq: [u64; 6],
    version: BTreeMap<(usize, &'static str), &'static str>,
    healthy: BTreeMap<(usize, &'static str), bool>,
}

impl Sim {
    fn row(&mut self, cluster: usize, app: &'static str, at: i64, deleted: bool) -> ObservedRow {
        self.seq[cluster] += 1;
        let healthy = *self.healthy.get(&(cluster, app)).unwrap_or(&true);
        ObservedRow {
            cluster_id: CLUSTERS[cluster].into(),
            object_kind: "HelmRelease".into(),
            object_namespace: app.into(),
            object_name: app.into(),
            app: app.into(),
            version: self.version[&(cluster, app)].into(),
            content_hash: String::new(),
            applied_revision: self.version[&(cluster, app)].into(),
            health: if healthy { "healthy" } else { "degraded" }.into(),
            sync: "synced".into(),
            reason: if healthy {
                "ReconciliationSucceeded"
            } else {
                "UpgradeFailed"
            }
            .into(),
            message: format!("at {at}"),
            transitioned_at: at as u32,
            observed_at: at as u32,
            received_at: at as u32,
            change_seq: self.seq[cluster],
            deleted: deleted as u8,
        }
    }
}

fn timeline() -> Vec<(i64, Event)> {
    let mut events = vec![
        (T0 + 1_800, Event::Render(1)),
        (T0 + 10 * HOUR, Event::Render(2)),
        (T0 + 10 * HOUR + 1_200, Event::Rolled),
        (T0 + DAY + 8 * HOUR, Event::Deleted),
        (T0 + DAY + 14 * HOUR, Event::Render(3)),
    ];
    let mut t = T0;
    while t <= END {
        events.push((t, Event::Checkpoint));
        t += CHECKPOINT_EVERY;
    }
    for (c, _) in CLUSTERS.iter().enumerate() {
        let mut t = T0 + 1_800 + 60 * c as i64;
        while t <= END {
            // c6 falls silent on the first day, c5 on the second.
            let silent =
                (c == 5 && t > T0 + 22 * HOUR) || (c == 4 && t > T0 + DAY + 2 * HOUR + 3_000);
            if !silent {
                events.push((t, Event::Heartbeat(c)));
            }
            t += 600;
        }
    }
    let mut hour = 1;
    while T0 + hour * HOUR + 1_020 <= END {
        events.push((
            T0 + hour * HOUR + 1_020,
            Event::Change {
                cluster: (hour % 6) as usize,
                app: (hour % 3) as usize,
            },
        ));
        hour += 1;
    }
    for (i, (at, _)) in MOMENTS.iter().enumerate() {
        events.push((*at, Event::Moment(i)));
    }
    // At equal times, the moment last: it sees what happened at its second.
    events.sort_by_key(|(at, event)| (*at, matches!(event, Event::Moment(_))));
    events
}

/// The questions asked at every moment: each route that takes `at`, with its main variants.
fn questions() -> Vec<String> {
    let mut paths = vec![
        "/api/v1/summary".to_owned(),
        "/api/v1/summary?app=billing".to_owned(),
        "/api/v1/summary?label=tier=edge&depth=1".to_owned(),
        "/api/v1/drift?state=unknown,stale,unexpected,missing,failed,out_of_sync,progressing,in_sync&limit=1000".to_owned(),
        "/api/v1/drift".to_owned(),
        "/api/v1/drift?app=api&limit=2".to_owned(),
        "/api/v1/environments".to_owned(),
        "/api/v1/environments?app=cart".to_owned(),
        "/api/v1/stale".to_owned(),
        "/api/v1/stale?limit=1".to_owned(),
        "/api/v1/gate?app=api&version=2.0.0&soak=1h&threshold=0.5".to_owned(),
        "/api/v1/gate?app=cart&version=1.0.0&limit=1".to_owned(),
        "/api/v1/insights/failures?app=api".to_owned(),
    ];
    for cluster in CLUSTERS {
        paths.push(format!("/api/v1/clusters/{cluster}?history_hours=30"));
    }
    for app in APPS.iter().chain(&["dashboard"]) {
        paths.push(format!("/api/v1/apps/{app}/versions"));
    }
    paths.push("/api/v1/apps/api/versions?version=2.0.0&depth=2".to_owned());
    paths
}

struct Client {
    client: reqwest::Client,
}

impl Client {
    async fn get(&self, base: &str, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }
}

async fn hub(store: &Store, now: i64) -> String {
    let index = Arc::new(
        Index::load(store.clone(), fleetscope_runtime::clock::now)
            .await
            .unwrap(),
    );
    let mut state = AppState::new(index, DriftPolicy::default(), MetricsConfig::default());
    state.fixed_now = Some(Timestamp(now));
    common::serve(router(Arc::new(state), Arc::new(Auth::Insecure), false)).await
}

fn with_at(path: &str, at: i64) -> String {
    let sep = if path.contains('?') { '&' } else { '?' };
    format!("{path}{sep}at={at}")
}

#[tokio::test]
async fn answers_at_past_moments_equal_the_live_answers_recorded_then() {
    let test = TestStore::start().await;
    let store = &test.store;
    let client = Client {
        client: reqwest::Client::new(),
    };

    // Before any checkpoint nothing is answerable, and says why.
    let empty = hub(store, T0).await;
    let (status, body) = client
        .get(&empty, &with_at("/api/v1/summary", T0 - HOUR))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no history is kept yet"),
        "{body}"
    );

    let mut sim = Sim {
        seq: [0; 6],
        version: BTreeMap::new(),
        healthy: BTreeMap::new(),
    };
    let mut recorded: Vec<Vec<(String, u16, Value)>> = Vec::new();
    // Heartbeats are written together, before whatever comes next.
    let mut heartbeats: Vec<HeartbeatRow> = Vec::new();
    for (at, event) in timeline() {
        if !matches!(event, Event::Heartbeat(_)) && !heartbeats.is_empty() {
            store.insert_rows(&heartbeats).await.unwrap();
            heartbeats.clear();
        }
        match event {
            Event::Render(1) => {
                let rows: Vec<ClusterRow> = CLUSTERS
                    .iter()
                    .enumerate()
                    .map(|(c, id)| {
                        let group = [
                            "emea/de", "emea/de", "emea/fr", "amer/us", "amer/us", "emea/fr",
                        ][c];
                        inventory(id, group, if c < 4 { "prod" } else { "staging" }, at, false)
                    })
                    .collect();
                store.insert_rows(&rows).await.unwrap();
                let members: Vec<MembershipRow> = CLUSTERS
                    .iter()
                    .enumerate()
                    .map(|(c, id)| member(id, if c < 3 { "rg-1" } else { "rg-2" }, at, false))
                    .collect();
                store.insert_rows(&members).await.unwrap();
                let mut rows = Vec::new();
                for rg in ["rg-1", "rg-2"] {
                    for app in APPS {
                        rows.push(desired(rg, app, "1.0.0", at));
                    }
                }
                store.insert_rows(&rows).await.unwrap();
                store.insert_rows(&[render_row(at, 6)]).await.unwrap();
                // Every app arrives on every cluster a minute later, healthy; and an app
                // nobody desires on c1.
                let mut observed = Vec::new();
                for c in 0..6 {
                    for app in APPS {
                        sim.version.insert((c, app), "1.0.0");
                        observed.push(sim.row(c, app, at + 60, false));
                    }
                }
                sim.version.insert((0, "dashboard"), "0.9.0");
                observed.push(sim.row(0, "dashboard", at + 60, false));
                store.insert_rows(&observed).await.unwrap();
            }
            Event::Render(2) => {
                // api 2.0.0 on rg-1.
                store
                    .insert_rows(&[desired("rg-1", "api", "2.0.0", at)])
                    .await
                    .unwrap();
                store.insert_rows(&[render_row(at, 6)]).await.unwrap();
            }
            Event::Rolled => {
                let mut rows = Vec::new();
                for c in 0..3 {
                    sim.version.insert((c, "api"), "2.0.0");
                    rows.push(sim.row(c, "api", at, false));
                }
                store.insert_rows(&rows).await.unwrap();
            }
            Event::Deleted => {
                let row = sim.row(1, "cart", at, true);
                store.insert_rows(&[row]).await.unwrap();
            }
            Event::Render(_) => {
                // c3 moves to rg-2, c6 moves to amer/ca and is relabelled, c4 leaves; billing
                // 3.0.0 on rg-2.
                store
                    .insert_rows(&[
                        inventory("c6", "amer/ca", "prod", at, false),
                        inventory("c4", "amer/us", "prod", at, true),
                    ])
                    .await
                    .unwrap();
                store
                    .insert_rows(&[
                        member("c3", "rg-2", at, false),
                        member("c4", "rg-2", at, true),
                    ])
                    .await
                    .unwrap();
                store
                    .insert_rows(&[desired("rg-2", "billing", "3.0.0", at)])
                    .await
                    .unwrap();
                store.insert_rows(&[render_row(at, 5)]).await.unwrap();
            }
            Event::Heartbeat(c) => {
                heartbeats.push(HeartbeatRow {
                    cluster_id: CLUSTERS[c].into(),
                    seen_at: at as u32,
                    agent_version: if at < T0 + DAY { "1.0.0" } else { "1.1.0" }.into(),
                    reconciler_names: vec!["flux".into()],
                    reconciler_versions: vec!["2.4.0".into()],
                });
            }
            Event::Change { cluster, app } => {
                let app = APPS[app];
                if cluster == 1 && app == "cart" && at > T0 + DAY + 8 * HOUR {
                    continue;
                }
                if sim.version.contains_key(&(cluster, app)) {
                    let healthy = sim.healthy.entry((cluster, app)).or_insert(true);
                    *healthy = !*healthy;
                    let row = sim.row(cluster, app, at, false);
                    store.insert_rows(&[row]).await.unwrap();
                }
            }
            Event::Checkpoint => {
                store.take_checkpoint(Timestamp(at)).await.unwrap();
            }
            Event::Moment(i) => {
                let base = hub(store, at).await;
                let mut answers = Vec::new();
                for path in questions() {
                    let (status, body) = client.get(&base, &path).await;
                    answers.push((path, status, body));
                }
                assert_eq!(recorded.len(), i);
                recorded.push(answers);
            }
        }
    }
    // The recording holds what the moments are about (so the comparison below compares
    // something): the rollout under way, c5 stale, cart missing on c2, c4 gone.
    let state_of = |moment: usize, cluster: &str, app: &str| -> String {
        let (_, _, body) = recorded[moment]
            .iter()
            .find(|(p, _, _)| p.starts_with(&format!("/api/v1/clusters/{cluster}?")))
            .unwrap();
        body["apps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["app"] == app)
            .map(|p| p["state"].as_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    assert_eq!(state_of(1, "c2", "api"), "progressing");
    assert_eq!(state_of(2, "c2", "api"), "in_sync");
    assert_eq!(state_of(1, "c1", "api"), "failed");
    assert_eq!(state_of(3, "c5", "api"), "in_sync");
    assert_eq!(state_of(4, "c5", "api"), "stale");
    assert_eq!(state_of(5, "c2", "cart"), "missing");
    assert_eq!(state_of(6, "c3", "billing"), "progressing");
    assert_eq!(state_of(0, "c1", "dashboard"), "unexpected");
    let c4_gone = &recorded[6]
        .iter()
        .find(|(p, _, _)| p.starts_with("/api/v1/clusters/c4?"))
        .unwrap();
    assert_eq!(c4_gone.1, 404);

    // Every answer again, at its moment, from one hub at the end.
    let now = END + HOUR;
    let end = hub(store, now).await;
    let mut compared = 0;
    for (i, answers) in recorded.iter().enumerate() {
        let (at, about) = MOMENTS[i];
        for (path, status, body) in answers {
            let (past_status, past_body) = client.get(&end, &with_at(path, at)).await;
            assert_eq!(
                (past_status, &past_body),
                (*status, body),
                "{path} at {about} ({at})"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, MOMENTS.len() * questions().len());

    // A moment in the future, and a moment before the first checkpoint.
    let (status, body) = client
        .get(&end, &with_at("/api/v1/summary", now + 10))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("in the future"),
        "{body}"
    );
    let (status, body) = client.get(&end, &with_at("/api/v1/drift", T0 - 1)).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("history is kept from 2027-01-16T00:00:00Z"),
        "{body}"
    );

    // Retention keeps three days (the end's and the two before it): the first day's checkpoints, transitions and arrivals go, and
    // the hours of heartbeats before the oldest checkpoint kept (each cluster's last one among
    // them stays, as the floor: c6 has been silent since then).
    store.apply_retention(Timestamp(now), 3).await.unwrap();
    let dropped = store
        .trim_arrivals(Timestamp(now), &Default::default())
        .await
        .unwrap();
    assert!(!dropped.is_empty(), "the first day's arrivals are dropped");
    let kept = store.checkpoints().await.unwrap();
    assert_eq!(kept.kept_from(), Some(Timestamp(T0 + DAY)));
    let after = hub(store, now).await;
    for (i, answers) in recorded.iter().enumerate() {
        let (at, about) = MOMENTS[i];
        for (path, status, body) in answers {
            // A cluster page's history reaches back 30 hours: into the dropped day for
            // moments of the second day.
            let path = path.replace("history_hours=30", "history_hours=0");
            let (past_status, past_body) = client.get(&after, &with_at(&path, at)).await;
            if at < T0 + DAY {
                assert_eq!(past_status, 400, "{path} at {about}: {past_body}");
                assert!(
                    past_body["error"]
                        .as_str()
                        .unwrap()
                        .contains("history is kept from 2027-01-17T00:00:00Z"),
                    "{past_body}"
                );
                continue;
            }
            if path.contains("history_hours=0") && *status == 200 {
                let mut expected = body.clone();
                expected["history"] = Value::Array(Vec::new());
                assert_eq!(past_body, expected, "{path} at {about} after retention");
            } else {
                assert_eq!(
                    (past_status, &past_body),
                    (*status, body),
                    "{path} at {about} after retention"
                );
            }
        }
    }
    // c6's last heartbeat is kept only in the floor now.
    let (_, c6) = client
        .get(
            &after,
            &with_at("/api/v1/clusters/c6?history_hours=0", MOMENTS[7].0),
        )
        .await;
    assert_eq!(c6["stale"], true);
    assert_eq!(c6["last_seen"], "2027-01-16T21:55:00Z", "{c6}");
}

/// A request that gives up on a build of a past moment (its deadline, a client gone) leaves the
/// build to finish in its turn and be kept: asking again is answered from it, and requests
/// asked again and again cannot start more builds than the turns allow.
#[tokio::test]
async fn a_build_given_up_on_finishes_in_its_turn_and_is_kept() {
    use fleetscope_engine::past::{Past, Reach, FLEET_BUILDS_AT_ONCE};

    let test = TestStore::start().await;
    let store = &test.store;
    let mut sim = Sim {
        seq: [0; 6],
        version: BTreeMap::new(),
        healthy: BTreeMap::new(),
    };
    let rows: Vec<ClusterRow> = CLUSTERS
        .iter()
        .map(|id| inventory(id, "emea/de", "prod", T0, false))
        .collect();
    store.insert_rows(&rows).await.unwrap();
    let members: Vec<MembershipRow> = CLUSTERS
        .iter()
        .map(|id| member(id, "rg-1", T0, false))
        .collect();
    store.insert_rows(&members).await.unwrap();
    store
        .insert_rows(&[desired("rg-1", "api", "1.0.0", T0)])
        .await
        .unwrap();
    store.insert_rows(&[render_row(T0, 6)]).await.unwrap();
    let mut observed = Vec::new();
    for c in 0..6 {
        sim.version.insert((c, "api"), "1.0.0");
        observed.push(sim.row(c, "api", T0 + 60, false));
    }
    store.insert_rows(&observed).await.unwrap();
    store.take_checkpoint(Timestamp(T0 + HOUR)).await.unwrap();

    // A hub whose `/metrics` shows the builds waiting and under way.
    let index = Arc::new(
        Index::load(store.clone(), fleetscope_runtime::clock::now)
            .await
            .unwrap(),
    );
    let mut state = AppState::new(index, DriftPolicy::default(), MetricsConfig::default());
    state.fixed_now = Some(Timestamp(T0 + 2 * HOUR));
    let state = Arc::new(state);
    let base = common::serve(router(state.clone(), Arc::new(Auth::Insecure), true)).await;
    let metrics = || async {
        reqwest::get(format!("{base}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let past: &Past = &state.past;
    let at = Timestamp(T0 + HOUR + 600);
    let key = (at.seconds(), Reach::Fleet);
    // Every whole-fleet turn is taken: the request's build waits for one.
    let mut held = Vec::new();
    for _ in 0..FLEET_BUILDS_AT_ONCE {
        held.push(past.turn(&Reach::Fleet).await);
    }
    let request = {
        let (past, store) = (past.clone(), store.clone());
        tokio::spawn(async move {
            past.fleet_at(store, at, Reach::Fleet, DriftPolicy::default(), |_, _| {})
                .await
        })
    };
    let waited = tokio::time::Instant::now();
    while past.waiting() == 0 {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(30),
            "the request's build never asked for a turn"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let text = metrics().await;
    for line in [
        "fleetscope_hub_past_builds{state=\"waiting\"} 1",
        &format!("fleetscope_hub_past_builds{{state=\"building\"}} {FLEET_BUILDS_AT_ONCE}"),
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    // The request gives up; then the turns come free.
    request.abort();
    assert!(request.await.unwrap_err().is_cancelled());
    assert_eq!(
        past.waiting(),
        1,
        "the build still waits after its request is gone"
    );
    drop(held);
    let waited = tokio::time::Instant::now();
    let fleet = loop {
        if let Some(fleet) = past.fleets.get(&key).await {
            break fleet;
        }
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(60),
            "the build given up on was not kept"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(fleet.clusters.len(), CLUSTERS.len());
    assert_eq!(fleet.objects, CLUSTERS.len());
    // Asking again is answered from it: no new build.
    let again = past
        .fleet_at(
            store.clone(),
            at,
            Reach::Fleet,
            DriftPolicy::default(),
            |_, _| panic!("built again"),
        )
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&fleet, &again));
    assert_eq!((past.waiting(), past.building()), (0, 0));
    assert!(metrics()
        .await
        .contains("fleetscope_hub_past_builds{state=\"building\"} 0"));
}
