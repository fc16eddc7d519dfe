//! What the hub's integration tests share: a simulated fleet in a private ClickHouse, a hub
//! state on it with the fleet's clock, and a router served on a free loopback port.

use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::AppState;
use fleetscope_hub::MetricsConfig;
use fleetscope_testkit::TestStore;

/// A private ClickHouse holding a generated fleet of `clusters` × `apps`.
pub async fn simulated_fleet(clusters: usize, apps: usize) -> (TestStore, GeneratedFleet) {
    let test = TestStore::start().await;
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters,
        apps,
        ..FleetSpec::default()
    })
    .expect("a valid fleet");
    fleetscope_fixtures::write_fleet(&test.store, &fleet)
        .await
        .expect("the fleet is written");
    (test, fleet)
}

/// The hub's state on `test`'s data, its clock fixed at the fleet's `now`.
pub async fn hub_state(
    test: &TestStore,
    fleet: &GeneratedFleet,
    metrics: MetricsConfig,
) -> AppState {
    let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .expect("the index loads");
    let mut state = AppState::new(Arc::new(index), fleet.spec().policy, metrics);
    state.fixed_now = Some(fleet.spec().now);
    state
}

/// Serves `app` on a free loopback port; returns its base URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("bound address"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the hub serves") });
    base
}

/// A route as the served OpenAPI document lists it: its path, its parameters as (name, `path`
/// or `query`, required, schema type, description).
#[derive(Debug)]
pub struct RouteDoc {
    pub path: &'static str,
    pub params: Vec<(&'static str, &'static str, bool, &'static str, &'static str)>,
}

/// Every route of the hub's document, in its order.
pub fn documented_routes() -> &'static [RouteDoc] {
    static ROUTES: std::sync::OnceLock<Vec<RouteDoc>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| {
        let document: &'static serde_json::Value = Box::leak(Box::new(
            serde_json::to_value(fleetscope_hub::document()).expect("json"),
        ));
        document["paths"]
            .as_object()
            .expect("paths")
            .iter()
            .map(|(path, item)| {
                let operation = &item["get"];
                let params = operation["parameters"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .map(|p| {
                        (
                            p["name"].as_str().expect("a name"),
                            p["in"].as_str().expect("a place"),
                            p["required"].as_bool().unwrap_or(false),
                            p["schema"]["type"].as_str().unwrap_or("array"),
                            p["description"].as_str().unwrap_or_default(),
                        )
                    })
                    .collect();
                RouteDoc {
                    path: path.as_str(),
                    params,
                }
            })
            .collect()
    })
}

/// The text `/metrics` at `base` (`http://host:port`) serves.
pub async fn metrics_text(base: &str) -> String {
    reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The stalled rollouts metrics `text` exports: (app, version) → seconds without progress.
pub fn stalled_rollouts(text: &str) -> std::collections::BTreeMap<(String, String), String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("fleetscope_rollout_stalled_seconds{"))
        .map(|rest| {
            let (labels, seconds) = rest.split_once("} ").expect("labels, then the value");
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                    .and_then(|v| v.strip_suffix('"'))
                    .expect("the label")
                    .to_owned()
            };
            ((label("app"), label("version")), seconds.to_owned())
        })
        .collect()
}
