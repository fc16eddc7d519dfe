//! One drift definition: on the same fleet in a real ClickHouse, the hub's in-memory rollup,
//! the store's SQL (what dashboards query) and the simulator's ground truth (the model's
//! `classify` in Rust) give the same numbers for every group at every level.

use fleetscope_engine::{as_group_rollups, Filter, Index};
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_testkit::TestStore;

#[tokio::test]
async fn hub_sql_and_ground_truth_agree() {
    let test = TestStore::start().await;
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters: 1_500,
        apps: 12,
        ..FleetSpec::default()
    })
    .unwrap();
    let spec = fleet.spec().clone();
    let written = fleetscope_fixtures::write_fleet(&test.store, &fleet)
        .await
        .unwrap();
    let truth = written.truth.rollups();

    let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();
    let hub =
        index.read(|f| as_group_rollups(&f.rollup(spec.now, &spec.policy, &Filter::default())));
    let sql = test
        .store
        .drift_rollup(spec.now, &spec.policy)
        .await
        .unwrap();

    let sort = |mut v: Vec<fleetscope_store::GroupRollup>| {
        v.sort_by(|a, b| a.group_path.cmp(&b.group_path));
        v
    };
    let (hub, sql, truth) = (sort(hub), sort(sql), sort(truth));
    assert!(
        truth.len() > 20,
        "groups at several levels: {}",
        truth.len()
    );
    assert_eq!(hub, truth, "the hub's rollup equals the ground truth");
    assert_eq!(sql, truth, "the store's SQL rollup equals the ground truth");
    // The fleet is not trivial: several states occur.
    let fleet_row = &truth[0];
    assert_eq!(fleet_row.group_path, "");
    assert!(fleet_row.pairs.len() >= 5, "{:?}", fleet_row.pairs);
}
