//! The hub over real HTTP on a simulated fleet in a real ClickHouse: every documented route
//! answers, errors name their parameter, a scoped token is confined on every route, the
//! committed OpenAPI document is the served one, and the API, the metrics and the store's SQL
//! give the same numbers.

use std::collections::BTreeSet;
use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_hub::{Auth, LiveAuth};
use fleetscope_model::{DriftState, GroupPath};
use fleetscope_testkit::TestStore;
use serde_json::Value;

use crate::common;

pub(crate) const ADMIN: &str = "admin-token-0123456789";
const SCOPED: &str = "emea-de-token-0123456789";
pub(crate) const SCOPE: &str = "emea/de";

pub(crate) struct Hub {
    _test: TestStore,
    pub(crate) base: String,
    client: reqwest::Client,
    store: fleetscope_store::Store,
    spec: FleetSpec,
    /// The authentication in force; a test may put another token file in force.
    pub(crate) auth: LiveAuth,
}

impl Hub {
    pub(crate) async fn start(clusters: usize, apps: usize, metrics: MetricsConfig) -> Hub {
        let test = TestStore::start().await;
        let fleet = GeneratedFleet::new(FleetSpec {
            clusters,
            apps,
            ..FleetSpec::default()
        })
        .unwrap();
        let spec = fleet.spec().clone();
        fleetscope_fixtures::write_fleet(&test.store, &fleet)
            .await
            .unwrap();
        let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
            .await
            .unwrap();
        let mut state = AppState::new(Arc::new(index), spec.policy, metrics);
        state.fixed_now = Some(spec.now);
        let auth = Auth::parse(&format!(
            "tokens:\n  - name: admins\n    token: {ADMIN}\n    role: admin\n  - name: team-de\n    token: {SCOPED}\n    role: read\n    scope: {SCOPE}\n"
        ))
        .unwrap();
        let auth = LiveAuth::new(auth);
        let base = common::serve(router(Arc::new(state), auth.clone(), false)).await;
        Hub {
            store: test.store.clone(),
            _test: test,
            base,
            client: reqwest::Client::new(),
            spec,
            auth,
        }
    }

    pub(crate) async fn get(&self, token: Option<&str>, path: &str) -> (u16, String, String) {
        let mut request = self.client.get(format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let kind = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, kind, response.text().await.unwrap())
    }

    pub(crate) async fn json(&self, token: &str, path: &str) -> Value {
        let (status, _, body) = self.get(Some(token), path).await;
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

fn within(group: &str, scope: &str) -> bool {
    GroupPath::parse(group)
        .unwrap()
        .is_within(&GroupPath::parse(scope).unwrap())
}

#[tokio::test]
async fn every_route_answers_errors_are_clear_and_numbers_agree() {
    let hub = Hub::start(600, 8, MetricsConfig::default()).await;

    // The committed document is the served one, and lists exactly the routes served.
    let served = hub.json(ADMIN, "/api/v1/openapi.json").await;
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json"))
            .expect("docs/openapi.json is committed"),
    )
    .unwrap();
    assert_eq!(served, committed, "docs/openapi.json is out of date: regenerate it with `UPDATE_EXPECT=1 cargo test -p fleetscope-hub --lib openapi`");
    let documented: BTreeSet<String> = served["paths"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(documented.len(), common::documented_routes().len());
    for path in &documented {
        let concrete = path
            .replace("{id}", "no-such-cluster")
            .replace("{app}", "checkout");
        let (status, _, body) = hub.get(Some(ADMIN), &concrete).await;
        assert!(
            !body.contains("no such route"),
            "{path} is documented but not served: {status} {body}"
        );
    }
    let (status, _, body) = hub.get(Some(ADMIN), "/api/v1/undocumented").await;
    assert_eq!(status, 404, "{body}");

    // Summary: totals equal the store's SQL rollup (what the dashboards query).
    let summary = hub.json(ADMIN, "/api/v1/summary").await;
    let sql = hub
        .store
        .drift_rollup(hub.spec.now, &hub.spec.policy)
        .await
        .unwrap();
    let fleet_sql = sql.iter().find(|r| r.group_path.is_empty()).unwrap();
    assert_eq!(summary["total"]["clusters"], fleet_sql.clusters);
    assert_eq!(summary["total"]["stale_clusters"], fleet_sql.stale_clusters);
    for state in DriftState::ALL {
        assert_eq!(
            summary["total"]["app_instances_by_state"][state.as_str()],
            fleet_sql.count(*state),
            "{state}"
        );
    }
    for row in summary["groups"].as_array().unwrap() {
        let group = row["group"].as_str().unwrap();
        let from_sql = sql.iter().find(|r| r.group_path == group).unwrap();
        assert_eq!(row["clusters"], from_sql.clusters, "{group}");
        assert_eq!(
            row["app_instances_by_state"]["failed"],
            from_sql.count(DriftState::Failed),
            "{group}"
        );
    }
    // …and the metrics say the same.
    let (status, _, metrics) = hub.get(Some(ADMIN), "/metrics").await;
    assert_eq!(status, 200);
    for state in DriftState::ALL {
        let line = format!(
            "fleetscope_app_instances{{group=\"\",state=\"{}\"}} {}",
            state.as_str(),
            fleet_sql.count(*state)
        );
        assert!(metrics.contains(&line), "missing {line}");
    }
    assert!(metrics.contains(&format!(
        "fleetscope_stale_clusters{{group=\"\"}} {}",
        fleet_sql.stale_clusters
    )));

    // CSV where tabular.
    let (status, kind, body) = hub
        .get(Some(ADMIN), "/api/v1/summary?format=csv&depth=1")
        .await;
    assert_eq!((status, kind.as_str()), (200, "text/csv; charset=utf-8"));
    assert!(
        body.starts_with("group,depth,clusters,reporting_clusters,stale_clusters,unknown,stale,"),
        "{body}"
    );
    assert_eq!(
        body.lines().count(),
        1 + 1 + 3,
        "header, fleet, three regions: {body}"
    );

    // Drift listing: pages follow each other without gaps or repeats, states as asked.
    let mut seen = BTreeSet::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let page = hub
            .json(
                ADMIN,
                &format!("/api/v1/drift?state=failed,out_of_sync&limit=7{cursor}"),
            )
            .await;
        for item in page["items"].as_array().unwrap() {
            assert!(
                ["failed", "out_of_sync"].contains(&item["state"].as_str().unwrap()),
                "{item}"
            );
            let key = format!(
                "{}/{}",
                item["cluster"].as_str().unwrap(),
                item["app"].as_str().unwrap()
            );
            assert!(seen.insert(key.clone()), "{key} twice");
        }
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert!(pages > 2, "several pages");
    assert_eq!(
        seen.len() as u64,
        fleet_sql.count(DriftState::Failed) + fleet_sql.count(DriftState::OutOfSync)
    );

    // A cluster's page, its explanation and history.
    let first = seen
        .iter()
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let page = hub.json(ADMIN, &format!("/api/v1/clusters/{first}")).await;
    assert_eq!(page["cluster"], first.as_str());
    assert!(!page["apps"].as_array().unwrap().is_empty());
    assert!(page["history"].is_array());
    // With no history asked for, the same apps and no ClickHouse read: the page is answered
    // from the fleet alone (the history reads counted in /metrics do not move).
    let history_reads = |metrics: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("fleetscope_hub_store_queries_total{query=\"observed history\"")
            })
            .map(|l| l.rsplit(' ').next().unwrap().to_owned())
    };
    let before = history_reads(&hub.get(Some(ADMIN), "/metrics").await.2);
    assert!(before.is_some(), "the default page reads its history");
    let bare = hub
        .json(ADMIN, &format!("/api/v1/clusters/{first}?history_hours=0"))
        .await;
    assert_eq!(bare["apps"], page["apps"]);
    assert_eq!(bare["history"], serde_json::json!([]));
    assert_eq!(
        history_reads(&hub.get(Some(ADMIN), "/metrics").await.2),
        before
    );
    let explain = hub
        .json(ADMIN, &format!("/api/v1/explain?cluster={first}"))
        .await;
    let desired = explain["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["desired"] == true)
        .unwrap();
    assert!(
        !desired["reasons"].as_array().unwrap().is_empty(),
        "{desired}"
    );
    assert!(!desired["commit"].as_str().unwrap().is_empty());
    let history = hub
        .json(
            ADMIN,
            &format!(
                "/api/v1/history?cluster={first}&from={}&to={}",
                hub.spec.now.seconds() - 30 * 86_400,
                hub.spec.now.seconds() + 1
            ),
        )
        .await;
    let events = history["events"].as_array().unwrap();
    assert!(!events.is_empty(), "{history}");
    assert!(events.iter().any(|e| e["type"] == "observed"), "{history}");
    let times: Vec<&str> = events.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );

    // Version inventory: the counts add up to the pairs observed for the app.
    let versions = hub.json(ADMIN, "/api/v1/apps/checkout/versions").await;
    let running: u64 = versions["running"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["clusters"].as_u64().unwrap())
        .sum();
    let per_group: u64 = versions["running"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|v| {
            v["groups"]
                .as_object()
                .unwrap()
                .values()
                .map(|n| n.as_u64().unwrap())
                .collect::<Vec<_>>()
        })
        .sum();
    assert!(running > 0);
    assert_eq!(running, per_group);
    let v = versions["running"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let on = hub
        .json(
            ADMIN,
            &format!("/api/v1/apps/checkout/versions?version={v}&limit=1000"),
        )
        .await;
    assert_eq!(
        on["clusters"].as_array().unwrap().len() as u64,
        versions["running"][0]["clusters"].as_u64().unwrap()
    );

    // Environments, gate, stale.
    let envs = hub.json(ADMIN, "/api/v1/environments?app=checkout").await;
    assert_eq!(envs["apps"].as_array().unwrap().len(), 1);
    let prod_desired = envs["apps"][0]["environments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["environment"] == "prod")
        .unwrap()["desired"]
        .clone();
    let prod_version = prod_desired
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let gate = hub
        .json(
            ADMIN,
            &format!(
                "/api/v1/gate?app=checkout&version={prod_version}&environment=prod&threshold=0.5"
            ),
        )
        .await;
    assert!(gate["targeted_clusters"].as_u64().unwrap() > 0, "{gate}");
    let share = gate["share_in_sync"].as_f64().unwrap();
    assert_eq!(gate["verdict"], if share >= 0.5 { "pass" } else { "fail" });
    let strict = hub
        .json(
            ADMIN,
            &format!(
                "/api/v1/gate?app=checkout&version={prod_version}&environment=prod&threshold=1"
            ),
        )
        .await;
    assert_eq!(
        strict["verdict"],
        if share >= 1.0 { "pass" } else { "fail" }
    );
    let stale = hub.json(ADMIN, "/api/v1/stale?limit=1000").await;
    assert_eq!(stale["total"].as_u64().unwrap(), fleet_sql.stale_clusters);
    let ages: Vec<i64> = stale["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["silent_seconds"].as_i64())
        .collect();
    assert!(ages.windows(2).all(|w| w[0] >= w[1]), "oldest first");

    // Errors: 401 without a token, 400 naming the parameter, 404 for unknown clusters.
    let (status, _, body) = hub.get(None, "/api/v1/summary").await;
    assert_eq!(status, 401, "{body}");
    for (path, parameter) in [
        ("/api/v1/summary?grup=emea", "grup"),
        ("/api/v1/drift?limit=5000", "limit"),
        ("/api/v1/drift?state=broken", "state"),
        ("/api/v1/drift?cursor=xyz", "cursor"),
        ("/api/v1/summary?group=emea//de", "group"),
        ("/api/v1/history?cluster=a&from=0&to=99999999", "from"),
        ("/api/v1/gate?app=checkout", "version"),
        ("/api/v1/explain", "cluster"),
        ("/api/v1/drift?format=xml", "format"),
        ("/api/v1/drift?label=tier", "label"),
        ("/api/v1/summary?app=Check_Out", "app"),
    ] {
        let (status, _, body) = hub.get(Some(ADMIN), path).await;
        assert_eq!(status, 400, "{path}: {body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["parameter"], parameter, "{path}: {body}");
    }
    let (status, _, _) = hub
        .get(Some(ADMIN), "/api/v1/clusters/no-such-cluster")
        .await;
    assert_eq!(status, 404);
    // Health and readiness need no token.
    assert_eq!(hub.get(None, "/healthz").await.0, 200);
    assert_eq!(hub.get(None, "/readyz").await.0, 200);
}

#[tokio::test]
async fn a_scoped_token_is_confined_on_every_route() {
    let hub = Hub::start(600, 6, MetricsConfig::default()).await;
    confined_on_every_route(&hub, SCOPED).await;
}

/// Asserts that `scoped`, a token of a caller limited to [`SCOPE`], sees nothing outside it on
/// any documented route, and within it what an admin asking for the scope sees.
pub(crate) async fn confined_on_every_route(hub: &Hub, scoped: &str) {
    let summary = hub.json(ADMIN, "/api/v1/summary").await;
    let outside: String = hub.json(ADMIN, "/api/v1/stale?limit=1000").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(
            hub.json(ADMIN, "/api/v1/drift?limit=1000").await["items"]
                .as_array()
                .unwrap(),
        )
        .find(|i| !within(i["group"].as_str().unwrap(), SCOPE))
        .map(|i| i["cluster"].as_str().unwrap().to_owned())
        .unwrap();
    let inside: String = hub
        .json(ADMIN, &format!("/api/v1/drift?group={SCOPE}&limit=1"))
        .await["items"][0]["cluster"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(summary["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| !within(g["group"].as_str().unwrap(), SCOPE)));

    let mut checked = BTreeSet::new();
    for route in common::documented_routes() {
        match route.path {
            "/api/v1/summary" => {
                let mine = hub.json(scoped, "/api/v1/summary").await;
                for g in mine["groups"].as_array().unwrap() {
                    assert!(within(g["group"].as_str().unwrap(), SCOPE), "{g}");
                }
                let admin = hub
                    .json(ADMIN, &format!("/api/v1/summary?group={SCOPE}"))
                    .await;
                assert_eq!(mine["total"], admin["total"], "totals cover the scope only");
                // The same selection asked by two callers: each answer names its own scope
                // (the answer cache must not hand one caller's answer to the other).
                assert_eq!(mine["scope"], SCOPE);
                assert_eq!(admin["scope"], Value::Null);
                // The asked group's rows start at that group: no ancestor under its own name
                // holding only the selected part of its clusters.
                let groups: Vec<&str> = admin["groups"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| g["group"].as_str().unwrap())
                    .collect();
                assert!(groups.contains(&SCOPE), "{groups:?}");
                assert!(groups.iter().all(|g| within(g, SCOPE)), "{groups:?}");
                let wider = hub.json(scoped, "/api/v1/summary?group=emea").await;
                assert_eq!(
                    wider["total"], admin["total"],
                    "asking for a wider group does not widen the scope"
                );
            }
            "/api/v1/drift" => {
                let mine = hub.json(scoped, "/api/v1/drift?state=in_sync,failed,out_of_sync,missing,stale,unexpected,progressing,unknown&limit=1000").await;
                assert!(!mine["items"].as_array().unwrap().is_empty());
                for i in mine["items"].as_array().unwrap() {
                    assert!(within(i["group"].as_str().unwrap(), SCOPE), "{i}");
                }
                let (_, _, csv) = hub
                    .get(Some(scoped), "/api/v1/drift?format=csv&limit=1000")
                    .await;
                assert!(
                    !csv.contains(",amer/") && !csv.contains(",apac/") && !csv.contains(",emea/fr"),
                    "{csv}"
                );
            }
            "/api/v1/clusters/{id}" => {
                assert_eq!(
                    hub.get(Some(scoped), &format!("/api/v1/clusters/{outside}"))
                        .await
                        .0,
                    404
                );
                assert_eq!(
                    hub.get(Some(scoped), &format!("/api/v1/clusters/{inside}"))
                        .await
                        .0,
                    200
                );
            }
            "/api/v1/apps/{app}/versions" => {
                let mine = hub
                    .json(scoped, "/api/v1/apps/checkout/versions?depth=3")
                    .await;
                for v in mine["running"].as_array().unwrap() {
                    for g in v["groups"].as_object().unwrap().keys() {
                        assert!(within(g, SCOPE), "{g}");
                    }
                }
                let admin = hub
                    .json(
                        ADMIN,
                        &format!("/api/v1/apps/checkout/versions?depth=3&group={SCOPE}"),
                    )
                    .await;
                assert_eq!(mine, admin);
            }
            "/api/v1/stale" => {
                let mine = hub.json(scoped, "/api/v1/stale?limit=1000").await;
                for i in mine["items"].as_array().unwrap() {
                    assert!(within(i["group"].as_str().unwrap(), SCOPE), "{i}");
                }
                let admin = hub
                    .json(ADMIN, &format!("/api/v1/stale?limit=1000&group={SCOPE}"))
                    .await;
                assert_eq!(mine, admin);
            }
            "/api/v1/explain" => {
                assert_eq!(
                    hub.get(Some(scoped), &format!("/api/v1/explain?cluster={outside}"))
                        .await
                        .0,
                    404
                );
                assert_eq!(
                    hub.get(Some(scoped), &format!("/api/v1/explain?cluster={inside}"))
                        .await
                        .0,
                    200
                );
            }
            "/api/v1/environments" => {
                let mine = hub.json(scoped, "/api/v1/environments").await;
                let admin = hub
                    .json(ADMIN, &format!("/api/v1/environments?group={SCOPE}"))
                    .await;
                assert_eq!(mine, admin);
                assert_ne!(
                    mine,
                    hub.json(ADMIN, "/api/v1/environments").await,
                    "the scope made a difference"
                );
            }
            "/api/v1/gate" => {
                let envs = hub.json(ADMIN, "/api/v1/environments?app=checkout").await;
                let version = envs["apps"][0]["environments"][0]["desired"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .next()
                    .unwrap()
                    .clone();
                let q = format!("/api/v1/gate?app=checkout&version={version}&threshold=0.5");
                let mine = hub.json(scoped, &q).await;
                let everywhere = hub.json(ADMIN, &q).await;
                assert!(
                    mine["targeted_clusters"].as_u64().unwrap()
                        < everywhere["targeted_clusters"].as_u64().unwrap()
                );
                let admin = hub.json(ADMIN, &format!("{q}&group={SCOPE}")).await;
                assert_eq!(mine["targeted_clusters"], admin["targeted_clusters"]);
                assert_eq!(mine["in_sync"], admin["in_sync"]);
            }
            "/api/v1/history" => {
                assert_eq!(
                    hub.get(Some(scoped), &format!("/api/v1/history?cluster={outside}"))
                        .await
                        .0,
                    404
                );
                assert_eq!(
                    hub.get(Some(scoped), &format!("/api/v1/history?cluster={inside}"))
                        .await
                        .0,
                    200
                );
                // Without a cluster: the scope's clusters only, and no fleet-wide renders.
                let range = format!(
                    "from={}&to={}&limit=1000",
                    hub.spec.now.seconds() - 30 * 86_400,
                    hub.spec.now.seconds() + 1
                );
                let in_scope: BTreeSet<String> = hub.json(ADMIN, &format!("/api/v1/drift?group={SCOPE}&state=in_sync,failed,out_of_sync,missing,stale,unexpected,progressing,unknown&limit=1000")).await["items"]
                    .as_array().unwrap().iter().map(|i| i["cluster"].as_str().unwrap().to_owned()).collect();
                let mine = hub.json(scoped, &format!("/api/v1/history?{range}")).await;
                let events = mine["events"].as_array().unwrap();
                assert!(!events.is_empty(), "{mine}");
                for e in events {
                    assert_eq!(e["type"], "observed", "{e}");
                    assert!(in_scope.contains(e["cluster"].as_str().unwrap()), "{e}");
                }
                let wider = hub.json(ADMIN, &format!("/api/v1/history?{range}")).await;
                assert!(wider["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|e| !in_scope.contains(e["cluster"].as_str().unwrap_or_default())));
                let elsewhere = hub
                    .json(scoped, &format!("/api/v1/history?group=amer&{range}"))
                    .await;
                assert_eq!(
                    elsewhere["events"].as_array().unwrap().len(),
                    0,
                    "{elsewhere}"
                );
            }
            "/api/v1/openapi.json" => {
                assert_eq!(hub.get(Some(scoped), "/api/v1/openapi.json").await.0, 200);
            }
            "/api/v1/insights/failures" => {
                let q = "/api/v1/insights/failures?app=checkout&limit=1000";
                let mut mine = hub.json(scoped, q).await;
                let everywhere = hub.json(ADMIN, q).await;
                assert!(
                    mine["considered"].as_u64().unwrap()
                        < everywhere["considered"].as_u64().unwrap()
                );
                for f in mine["findings"].as_array().unwrap() {
                    if f["attribute"] == "group" {
                        assert!(within(f["value"].as_str().unwrap(), SCOPE), "{f}");
                    }
                }
                // The same answer as the scope asked for as a group, but for naming the group.
                let admin = hub.json(ADMIN, &format!("{q}&group={SCOPE}")).await;
                assert_eq!(mine["group"], Value::Null);
                mine["group"] = admin["group"].clone();
                assert_eq!(mine, admin);
            }
            "/api/v1/rollouts" => {
                // The scope's clusters only: the answer of the scope asked for as a group,
                // and fewer clusters than the whole fleet's.
                let mine = hub.json(scoped, "/api/v1/rollouts?app=checkout").await;
                let admin = hub
                    .json(
                        ADMIN,
                        &format!("/api/v1/rollouts?app=checkout&group={SCOPE}"),
                    )
                    .await;
                assert_eq!(mine, admin);
                let everywhere = hub.json(ADMIN, "/api/v1/rollouts?app=checkout").await;
                let targeted = |answer: &Value| -> u64 {
                    answer["items"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|i| i["targeted"].as_u64().unwrap())
                        .sum()
                };
                assert!(targeted(&mine) > 0);
                assert!(targeted(&mine) < targeted(&everywhere));
            }
            "/api/v1/rollouts/{rollout}" => {
                let listed = hub.json(ADMIN, "/api/v1/rollouts?app=checkout").await;
                let id = listed["items"][0]["id"].as_str().unwrap().to_owned();
                let mine = hub
                    .json(scoped, &format!("/api/v1/rollouts/{id}?depth=2&limit=1000"))
                    .await;
                for g in mine["groups"].as_array().unwrap() {
                    assert!(within(g["group"].as_str().unwrap(), SCOPE), "{g}");
                }
                for s in mine["stragglers"].as_array().unwrap() {
                    assert!(within(s["group"].as_str().unwrap(), SCOPE), "{s}");
                }
                let admin = hub
                    .json(
                        ADMIN,
                        &format!("/api/v1/rollouts/{id}?depth=2&limit=1000&group={SCOPE}"),
                    )
                    .await;
                assert_eq!(mine, admin);
            }
            "/api/v1/delivery" => {
                let mine = hub.json(scoped, "/api/v1/delivery?app=checkout").await;
                let admin = hub
                    .json(
                        ADMIN,
                        &format!("/api/v1/delivery?app=checkout&group={SCOPE}"),
                    )
                    .await;
                assert_eq!(mine, admin);
            }
            other => panic!("route {other} has no scope check in this test"),
        }
        checked.insert(route.path);
    }
    assert_eq!(checked.len(), common::documented_routes().len());
    // Metrics cover the whole fleet: they need a token unless opened, and a scoped token
    // may not read them.
    assert_eq!(hub.get(None, "/metrics").await.0, 401);
    assert_eq!(hub.get(Some(scoped), "/metrics").await.0, 403);
    assert_eq!(hub.get(Some(ADMIN), "/metrics").await.0, 200);
}
