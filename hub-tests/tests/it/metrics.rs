//! `/metrics` at fleet scale: with 30,000 clusters the number of series stays under the bound
//! the configuration implies, groups beyond it are folded into `_other`, and the fleet row
//! still adds up. Also: new data in ClickHouse reaches the API through the refresher.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_engine::Index;
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, spawn_refresher, AppState};

use crate::common;

async fn serve(state: Arc<AppState>) -> String {
    common::serve(router(state, Arc::new(Auth::Insecure), true)).await
}

/// Series (sample lines) per metric name.
fn series(text: &str) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap().to_owned();
        *out.entry(name).or_default() += 1;
    }
    out
}

#[tokio::test]
async fn series_stay_bounded_at_30000_clusters() {
    let (test, fleet) = common::simulated_fleet(30_000, 3).await;
    let spec = fleet.spec().clone();
    // Depth 3 reaches the sites: 3 regions + 15 countries + ~120 sites, more than 40.
    let config = MetricsConfig {
        depth: 3,
        max_groups: 40,
        max_apps: 2,
    };
    let base = serve(Arc::new(common::hub_state(&test, &fleet, config).await)).await;
    let text = common::metrics_text(&base).await;
    let per_name = series(&text);
    let total: usize = per_name.values().sum();

    // The fleet row, 40 groups and `_other`; 8 states each; 2 apps and `_other`.
    let groups = config.max_groups + 2;
    assert_eq!(per_name["fleetscope_clusters"], groups, "{per_name:?}");
    assert_eq!(per_name["fleetscope_app_instances"], groups * 8);
    assert_eq!(
        per_name["fleetscope_app_instances_by_app"],
        (config.max_apps + 1) * 8
    );
    assert!(text.contains("fleetscope_clusters{group=\"_other\"}"));
    assert!(
        text.contains("fleetscope_clusters{group=\"\"} 30000"),
        "the fleet row counts every cluster"
    );
    // Everything else is the hub's own metrics, a handful of series per route and query.
    let fleet_series = groups * (3 + 8) + (config.max_apps + 1) * 8;
    let bound = fleet_series + 300;
    assert!(
        total <= bound,
        "{total} series, bound {bound}: {per_name:?}"
    );

    // Without the bound the same fleet would export one series set per site.
    let unbounded = MetricsConfig {
        depth: 3,
        max_groups: 10_000,
        max_apps: 100,
    };
    let snapshot = {
        let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
            .await
            .unwrap();
        let (fleet, now) = index.view(spec.now, &spec.policy);
        fleetscope_hub::FleetSnapshot::take(&fleet, now, &unbounded, &Default::default())
    };
    assert!(
        snapshot.groups.len() > groups,
        "the bound made a difference: {} groups without it",
        snapshot.groups.len()
    );
}

#[tokio::test]
async fn new_observed_state_reaches_the_api_through_the_refresher() {
    let (test, fleet) = common::simulated_fleet(200, 4).await;
    let spec = fleet.spec().clone();
    let state = Arc::new(common::hub_state(&test, &fleet, MetricsConfig::default()).await);
    spawn_refresher(state.clone(), Duration::from_millis(200));
    let base = serve(state.clone()).await;

    // Pick a pair that is in sync and make its reconciler report a failure.
    let page: serde_json::Value =
        reqwest::get(format!("{base}/api/v1/drift?state=in_sync&limit=1"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let item = &page["items"][0];
    let (cluster, app) = (
        item["cluster"].as_str().unwrap(),
        item["app"].as_str().unwrap(),
    );
    let sim = (0..spec.clusters)
        .map(|i| fleet.cluster(i))
        .find(|s| s.cluster.cluster_id == cluster)
        .unwrap();
    let mut row = sim
        .observed
        .iter()
        .find(|r| {
            r.app == app
                && fleetscope_model::state::ObjectKind::parse(&r.object_kind)
                    .is_some_and(|k| k.is_app_object())
        })
        .unwrap()
        .clone();
    row.health = "degraded".into();
    row.message = "injected failure".into();
    row.change_seq += 1_000;
    row.received_at = fleetscope_store::to_datetime(spec.now);
    let written = Instant::now();
    test.store.insert_rows(&[row]).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let page: serde_json::Value = reqwest::get(format!("{base}/api/v1/clusters/{cluster}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let pair = page["apps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["app"] == app)
            .unwrap()
            .clone();
        if pair["state"] == "failed" {
            assert_eq!(pair["message"], "injected failure");
            eprintln!("visible after {:?}", written.elapsed());
            break;
        }
        assert!(Instant::now() < deadline, "not visible within 5 s: {pair}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The dashboards' trend panels read rollup snapshots: the hub writes them from its index, so
/// they hold the numbers the API serves.
#[tokio::test]
async fn rollup_snapshots_hold_the_served_numbers() {
    let (test, fleet) = common::simulated_fleet(300, 4).await;
    let spec = fleet.spec().clone();
    let state = Arc::new(common::hub_state(&test, &fleet, MetricsConfig::default()).await);
    let taken_at = spec.now.plus_seconds(-60);
    let rows = fleetscope_hub::take_snapshot(&state, taken_at, 2)
        .await
        .unwrap();
    let rollup = state.index.read(|f| {
        f.rollup(
            spec.now,
            &spec.policy,
            &fleetscope_engine::Filter::default(),
        )
    });
    let expected = rollup
        .keys()
        .filter(|g| g.is_empty() || g.split('/').count() <= 2)
        .count();
    assert_eq!(rows, expected);
    let trend = test
        .store
        .rollup_trend("", taken_at.plus_seconds(-1), spec.now)
        .await
        .unwrap();
    assert_eq!(trend.len(), 1, "{trend:?}");
    let fleet_row = &rollup[""];
    assert_eq!(trend[0].clusters, fleet_row.clusters);
    assert_eq!(trend[0].stale_clusters, fleet_row.stale_clusters);
    assert_eq!(
        trend[0].failed,
        fleet_row.state(fleetscope_model::DriftState::Failed)
    );
    assert_eq!(
        trend[0].in_sync,
        fleet_row.state(fleetscope_model::DriftState::InSync)
    );
}
