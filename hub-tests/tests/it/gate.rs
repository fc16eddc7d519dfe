//! The rollout gate on a small fleet written into a private ClickHouse, every state chosen: the
//! soak at its boundary (reached to the second, one second short, decided by the render rather
//! than the report), `max_failed` at the failed count and one below it (as a count and as a
//! share), each `stale` mode, paging of the clusters holding the gate back, and the answer to a
//! request without the new parameters field for field as before them.

use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::{
    ClusterRow, DesiredRow, HeartbeatRow, MembershipRow, ObservedRow, RenderRow,
};
use fleetscope_testkit::TestStore;
use serde_json::{json, Value};

use crate::common;

const NOW: i64 = 1_800_000_000;
/// The render that made `checkout` 2.0.0 desired: three hours ago.
const DESIRED_SINCE: i64 = NOW - 10_800;
const RENDER_ID: u64 = (DESIRED_SINCE as u64) * 1_000;

/// One targeted cluster: its id, group, running version, health, when its report arrived and
/// its last heartbeat, in seconds before `NOW`.
struct Member {
    id: &'static str,
    group: &'static str,
    render_group: &'static str,
    version: &'static str,
    health: &'static str,
    received_ago: i64,
    seen_ago: i64,
}

/// The fleet. `checkout` 2.0.0 is desired on render group `rg-new` (seven clusters), 1.0.0 on
/// `rg-old` (one):
///
/// - `a01` in sync, report arrived 7,205 s ago, heartbeat 5 s ago: in sync for exactly 7,200 s;
/// - `a02` the same but the report arrived a second later: 7,199 s;
/// - `a03` in sync, report ten days old: in sync since the render, 10,795 s;
/// - `a04`, `a05` failed; `a06` stale (emea/fr, silent for 601 s); `a07` out of sync;
/// - `b01` on `rg-old`, not targeted.
///
/// Every report carries a transition time a month old: the reporter's clock is not what the
/// soak counts from.
const MEMBERS: &[Member] = &[
    Member {
        id: "a01",
        group: "emea/de/berlin",
        render_group: "rg-new",
        version: "2.0.0",
        health: "healthy",
        received_ago: 7_205,
        seen_ago: 5,
    },
    Member {
        id: "a02",
        group: "emea/de/berlin",
        render_group: "rg-new",
        version: "2.0.0",
        health: "healthy",
        received_ago: 7_204,
        seen_ago: 5,
    },
    Member {
        id: "a03",
        group: "emea/de/munich",
        render_group: "rg-new",
        version: "2.0.0",
        health: "healthy",
        received_ago: 864_000,
        seen_ago: 5,
    },
    Member {
        id: "a04",
        group: "emea/de/munich",
        render_group: "rg-new",
        version: "2.0.0",
        health: "degraded",
        received_ago: 600,
        seen_ago: 5,
    },
    Member {
        id: "a05",
        group: "emea/de/munich",
        render_group: "rg-new",
        version: "2.0.0",
        health: "degraded",
        received_ago: 500,
        seen_ago: 5,
    },
    Member {
        id: "a06",
        group: "emea/fr",
        render_group: "rg-new",
        version: "2.0.0",
        health: "healthy",
        received_ago: 90_000,
        seen_ago: 601,
    },
    Member {
        id: "a07",
        group: "emea/de/berlin",
        render_group: "rg-new",
        version: "1.0.0",
        health: "healthy",
        received_ago: 20_000,
        seen_ago: 5,
    },
    Member {
        id: "b01",
        group: "emea/de/berlin",
        render_group: "rg-old",
        version: "1.0.0",
        health: "healthy",
        received_ago: 20_000,
        seen_ago: 5,
    },
];

fn time(ago: i64) -> String {
    jiff::Timestamp::from_second(NOW - ago).unwrap().to_string()
}

async fn write_fleet(test: &TestStore) {
    let store = &test.store;
    let at = |ago: i64| (NOW - ago) as u32;
    let clusters: Vec<ClusterRow> = MEMBERS
        .iter()
        .map(|m| {
            let parts: Vec<&str> = m.group.split('/').collect();
            ClusterRow {
                cluster_id: m.id.into(),
                group_path: m.group.into(),
                group_prefixes: (1..=parts.len()).map(|n| parts[..n].join("/")).collect(),
                environment: "prod".into(),
                reconciler: "flux".into(),
                label_keys: vec![],
                label_values: vec![],
                updated_at: at(86_400),
                version: 1,
                removed: 0,
            }
        })
        .collect();
    store.insert_rows(&clusters).await.unwrap();
    let members: Vec<MembershipRow> = MEMBERS
        .iter()
        .map(|m| MembershipRow {
            cluster_id: m.id.into(),
            render_group: m.render_group.into(),
            render_id: RENDER_ID,
            removed: 0,
        })
        .collect();
    store.insert_rows(&members).await.unwrap();
    let desired = |render_group: &str, version: &str, commit: &str| DesiredRow {
        render_group: render_group.into(),
        app: "checkout".into(),
        render_id: RENDER_ID,
        version: version.into(),
        content_hash: String::new(),
        kind: "HelmRelease".into(),
        namespace: "shop".into(),
        reasons: vec!["policy/all".into()],
        commit: commit.into(),
        desired_since: DESIRED_SINCE as u32,
        removed: 0,
    };
    store
        .insert_rows(&[
            desired("rg-new", "2.0.0", "c0ffee"),
            desired("rg-old", "1.0.0", "c0ffee"),
        ])
        .await
        .unwrap();
    store
        .insert_rows(&[RenderRow {
            render_id: RENDER_ID,
            commit: "c0ffee".into(),
            platform_commit: "p1".into(),
            rendered_at: DESIRED_SINCE as u32,
            summary: String::new(),
            render_groups: 2,
            clusters: MEMBERS.len() as u32,
            changed_items: 2,
        }])
        .await
        .unwrap();
    let observed: Vec<ObservedRow> = MEMBERS
        .iter()
        .map(|m| ObservedRow {
            cluster_id: m.id.into(),
            object_kind: "HelmRelease".into(),
            object_namespace: "shop".into(),
            object_name: "checkout".into(),
            app: "checkout".into(),
            version: m.version.into(),
            content_hash: String::new(),
            applied_revision: m.version.into(),
            health: m.health.into(),
            sync: "synced".into(),
            reason: String::new(),
            message: String::new(),
            transitioned_at: at(30 * 86_400),
            observed_at: at(m.received_ago),
            received_at: at(m.received_ago),
            change_seq: 1,
            deleted: 0,
        })
        .collect();
    store.insert_rows(&observed).await.unwrap();
    let heartbeats: Vec<HeartbeatRow> = MEMBERS
        .iter()
        .map(|m| HeartbeatRow {
            cluster_id: m.id.into(),
            seen_at: at(m.seen_ago),
            agent_version: "1.0.0".into(),
            reconciler_names: vec![],
            reconciler_versions: vec![],
        })
        .collect();
    store.insert_rows(&heartbeats).await.unwrap();
}

struct Hub {
    base: String,
    client: reqwest::Client,
}

impl Hub {
    async fn start(test: &TestStore) -> Hub {
        write_fleet(test).await;
        let index = Arc::new(
            Index::load(test.store.clone(), fleetscope_runtime::clock::now)
                .await
                .unwrap(),
        );
        let mut state = AppState::new(index, DriftPolicy::default(), MetricsConfig::default());
        state.fixed_now = Some(Timestamp(NOW));
        let base = common::serve(router(Arc::new(state), Arc::new(Auth::Insecure), false)).await;
        Hub {
            base,
            client: reqwest::Client::new(),
        }
    }

    async fn get(&self, query: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}/api/v1/gate?app=checkout&{query}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    async fn gate(&self, query: &str) -> Value {
        let (status, body) = self.get(query).await;
        assert_eq!(status, 200, "{query}: {body}");
        body
    }
}

/// The clusters of `holding_back`, in order.
fn holding(answer: &Value) -> Vec<&str> {
    answer["holding_back"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["cluster"].as_str().unwrap())
        .collect()
}

/// The verdict and the rule that decided it.
fn decided(answer: &Value) -> (&str, &str) {
    (
        answer["verdict"].as_str().unwrap(),
        answer["rule"].as_str().unwrap(),
    )
}

#[tokio::test]
async fn the_gate_applies_soak_max_failed_and_stale_at_their_boundaries() {
    let test = TestStore::start().await;
    let hub = Hub::start(&test).await;

    // Without the new parameters: the fields the gate had before, as before, and the new ones
    // at their defaults.
    let plain = hub.gate("version=2.0.0").await;
    let before = json!({
        "app": "checkout", "version": "2.0.0", "commit": null, "group": null,
        "targeted_clusters": 7, "in_sync": 3,
        "by_state": { "failed": 2, "in_sync": 3, "out_of_sync": 1, "stale": 1 },
        "share_in_sync": 3.0 / 7.0, "threshold": 1.0, "verdict": "fail",
        "reason": "the share in sync is below the threshold",
    });
    for (field, value) in before.as_object().unwrap() {
        assert_eq!(&plain[field], value, "{field}: {plain}");
    }
    assert_eq!(plain["rule"], "threshold");
    assert_eq!(plain["soak_seconds"], 0);
    assert_eq!(plain["soaked"], 3, "without a soak, in sync now is enough");
    assert_eq!(plain["failed"], 2);
    assert_eq!(plain["max_failed"], Value::Null);
    assert_eq!(plain["failed_allowed"], Value::Null);
    assert_eq!(plain["stale"], "count");
    assert_eq!(plain["stale_clusters"], 1);
    assert_eq!(holding(&plain), ["a04", "a05", "a06", "a07"]);
    assert_eq!(plain["next_cursor"], Value::Null);
    let a06 = &plain["holding_back"][2];
    assert_eq!(
        a06,
        &json!({ "cluster": "a06", "group": "emea/fr", "state": "stale",
                 "since": time(30 * 86_400), "soaks_at": null })
    );
    // The old threshold rule, on both sides of the share (3/7 = 0.43).
    let passing = hub.gate("version=2.0.0&threshold=0.42").await;
    assert_eq!(decided(&passing), ("pass", "threshold"));
    assert_eq!(passing["reason"], "the share in sync reaches the threshold");
    assert_eq!(
        decided(&hub.gate("version=2.0.0&threshold=0.43").await),
        ("fail", "threshold")
    );
    // By commit, the same clusters (rg-old's commit is the same, its version is not asked).
    let by_commit = hub.gate("commit=c0ffee&threshold=0").await;
    assert_eq!(by_commit["targeted_clusters"], 8);
    assert_eq!(
        hub.gate("version=9.9.9").await["reason"],
        "no cluster in this selection desires that version or commit"
    );

    // Soak: a01 is in sync for exactly 7,200 s, a02 one second less; a03 since the render.
    for soak in ["7200", "7200s", "120m", "2h"] {
        let soaked = hub.gate(&format!("version=2.0.0&soak={soak}")).await;
        assert_eq!(soaked["soak_seconds"], 7_200, "{soak}");
        assert_eq!(soaked["soaked"], 2, "{soak}: a01 and a03: {soaked}");
        assert_eq!(soaked["in_sync"], 3);
        assert_eq!(holding(&soaked), ["a02", "a04", "a05", "a06", "a07"]);
        assert_eq!(
            soaked["holding_back"][0],
            json!({ "cluster": "a02", "group": "emea/de/berlin", "state": "in_sync",
                    "since": time(7_204), "soaks_at": time(4) }),
            "since the report arrived, not the reporter's transition a month ago"
        );
    }
    let one_short = hub.gate("version=2.0.0&soak=7201").await;
    assert_eq!(one_short["soaked"], 1, "{one_short}");
    assert_eq!(holding(&one_short)[..2], ["a01", "a02"]);
    assert_eq!(one_short["holding_back"][0]["soaks_at"], time(4));
    // a03's report is ten days old, but the version is desired since the render 10,800 s ago,
    // and heard of until its heartbeat 5 s ago.
    assert_eq!(hub.gate("version=2.0.0&soak=10795").await["soaked"], 1);
    let render_bound = hub.gate("version=2.0.0&soak=10796").await;
    assert_eq!(render_bound["soaked"], 0);
    let a03 = render_bound["holding_back"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["cluster"] == "a03")
        .unwrap();
    assert_eq!(a03["since"], time(10_800));
    assert_eq!(a03["soaks_at"], time(10_800 - 10_796));
    // The threshold applies to the share soaked: 2/7 = 0.286.
    let soak_pass = hub.gate("version=2.0.0&soak=2h&threshold=0.28").await;
    assert_eq!(decided(&soak_pass), ("pass", "threshold"));
    assert_eq!(
        soak_pass["reason"],
        "the share in sync for the soak reaches the threshold"
    );
    assert!((soak_pass["share_soaked"].as_f64().unwrap() - 2.0 / 7.0).abs() < 1e-12);
    assert_eq!(
        decided(&hub.gate("version=2.0.0&soak=2h&threshold=0.29").await),
        ("fail", "threshold")
    );

    // The worked example of docs/hub.md.
    let example = hub
        .gate("version=2.0.0&soak=2h&threshold=0.25&max_failed=2")
        .await;
    assert_eq!(decided(&example), ("pass", "threshold"));
    for (field, value) in [
        ("targeted_clusters", 7),
        ("in_sync", 3),
        ("soaked", 2),
        ("failed", 2),
        ("failed_allowed", 2),
        ("stale_clusters", 1),
    ] {
        assert_eq!(example[field], value, "{field}");
    }
    assert_eq!(holding(&example), ["a02", "a04", "a05", "a06", "a07"]);

    // max_failed: two clusters are failed; the gate fails on it whatever the share.
    let at_count = hub.gate("version=2.0.0&threshold=0&max_failed=2").await;
    assert_eq!(decided(&at_count), ("pass", "threshold"));
    assert_eq!(at_count["max_failed"], "2");
    assert_eq!(at_count["failed_allowed"], 2);
    let over = hub.gate("version=2.0.0&threshold=0&max_failed=1").await;
    assert_eq!(decided(&over), ("fail", "max_failed"));
    assert_eq!(
        over["reason"],
        "more targeted clusters are failed than max_failed allows"
    );
    // As a share of the seven targeted: 29% allows 2 (2.03), 28% allows 1 (1.96).
    for (max_failed, allowed, outcome) in [
        ("29%25", 2, ("pass", "threshold")),
        ("0.29", 2, ("pass", "threshold")),
        ("28%25", 1, ("fail", "max_failed")),
        ("0.28", 1, ("fail", "max_failed")),
    ] {
        let answer = hub
            .gate(&format!(
                "version=2.0.0&threshold=0&max_failed={max_failed}"
            ))
            .await;
        assert_eq!(answer["failed_allowed"], allowed, "{max_failed}");
        assert_eq!(decided(&answer), outcome, "{max_failed}");
    }

    // stale=exclude: a06 leaves the targeted clusters and the listing.
    let excluded = hub.gate("version=2.0.0&stale=exclude").await;
    assert_eq!(excluded["targeted_clusters"], 6);
    assert_eq!(excluded["stale_clusters"], 1);
    assert_eq!(excluded["stale"], "exclude");
    assert_eq!(excluded["by_state"].get("stale"), None);
    assert_eq!(holding(&excluded), ["a04", "a05", "a07"]);
    assert!((excluded["share_in_sync"].as_f64().unwrap() - 0.5).abs() < 1e-12);
    assert_eq!(
        decided(&hub.gate("version=2.0.0&stale=exclude&threshold=0.5").await),
        ("pass", "threshold")
    );
    assert_eq!(
        decided(&hub.gate("version=2.0.0&stale=count&threshold=0.5").await),
        ("fail", "threshold"),
        "counted, a06 is one more cluster not in sync: 3/7"
    );
    let failing = hub.gate("version=2.0.0&stale=fail&threshold=0").await;
    assert_eq!(decided(&failing), ("fail", "stale"));
    assert_eq!(failing["targeted_clusters"], 7);
    assert_eq!(
        decided(
            &hub.gate("version=2.0.0&stale=fail&threshold=0&group=emea/de")
                .await
        ),
        ("pass", "threshold"),
        "no stale cluster in emea/de"
    );
    // Only stale clusters selected, and excluded: nothing is targeted.
    let none_left = hub
        .gate("version=2.0.0&stale=exclude&group=emea/fr&threshold=0")
        .await;
    assert_eq!(decided(&none_left), ("fail", "nothing_targeted"));
    assert_eq!(none_left["stale_clusters"], 1);
    // The stale rule comes before max_failed.
    assert_eq!(
        decided(&hub.gate("version=2.0.0&stale=fail&max_failed=0").await),
        ("fail", "stale")
    );

    // Bad values are 400s naming the parameter and the value.
    for (query, parameter, value) in [
        ("soak=721h", "soak", "721h"),
        ("soak=2592001", "soak", "2592001"),
        ("soak=2d", "soak", "2d"),
        ("max_failed=-1", "max_failed", "-1"),
        ("max_failed=101%25", "max_failed", "101%"),
        ("stale=ignore", "stale", "ignore"),
    ] {
        let (status, body) = hub.get(&format!("version=2.0.0&{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["parameter"], parameter, "{query}");
        assert!(
            body["error"].as_str().unwrap().contains(value),
            "{query}: {body}"
        );
    }
    assert_eq!(
        hub.gate("version=2.0.0&soak=720h").await["soak_seconds"],
        2_592_000
    );
}

#[tokio::test]
async fn holding_back_pages_without_repeats() {
    let test = TestStore::start().await;
    let hub = Hub::start(&test).await;
    let everything = hub.gate("version=2.0.0&soak=2h").await;
    let all = holding(&everything);
    assert_eq!(all, ["a02", "a04", "a05", "a06", "a07"]);
    for limit in 1..=6 {
        let mut seen: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let query = match &cursor {
                Some(c) => format!("version=2.0.0&soak=2h&limit={limit}&cursor={c}"),
                None => format!("version=2.0.0&soak=2h&limit={limit}"),
            };
            let page = hub.gate(&query).await;
            pages += 1;
            // Every page counts every targeted cluster.
            for field in ["targeted_clusters", "soaked", "failed", "verdict", "rule"] {
                assert_eq!(page[field], everything[field], "{field} on page {pages}");
            }
            let items = holding(&page);
            assert!(items.len() <= limit);
            seen.extend(items.iter().map(|c| (*c).to_owned()));
            match page["next_cursor"].as_str() {
                Some(next) => {
                    assert_eq!(items.len(), limit, "only a full page has a next page");
                    cursor = Some(next.to_owned());
                }
                None => break,
            }
        }
        assert_eq!(seen, all, "limit {limit}: every cluster once, in order");
        assert_eq!(pages, all.len().div_ceil(limit).max(1), "limit {limit}");
    }
    let (status, body) = hub.get("version=2.0.0&cursor=zz").await;
    assert_eq!((status, body["parameter"].as_str()), (400, Some("cursor")));
}
