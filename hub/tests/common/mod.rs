//! What the hub's integration tests share: a simulated fleet in a private ClickHouse, a hub
//! state on it with the fleet's clock, and a router served on a free loopback port.

#![allow(dead_code)]

use std::sync::Arc;

use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::index::Index;
use fleetscope_hub::metrics::MetricsConfig;
use fleetscope_hub::server::AppState;
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
    let index = Index::load(test.store.clone())
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
