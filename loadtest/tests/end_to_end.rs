//! The load test end to end on a small fleet: reports through the collector, the hub's rollup
//! equal to the ground truth, and a readable report.

use fleetscope_loadtest::run::{run, LoadtestArgs, LoadtestReport};
use fleetscope_loadtest::{FleetSpec, GeneratedFleet};

#[tokio::test(flavor = "multi_thread")]
async fn small_fleet_passes_the_ground_truth_check() {
    let out = tempfile::tempdir().unwrap();
    let args = LoadtestArgs {
        clusters: 500,
        apps: 10,
        concurrency: 16,
        seed: 1,
        out: out.path().to_path_buf(),
    };
    let report = run(args).await.unwrap();
    assert!(report.correctness_passed, "{:?}", report.first_mismatch);

    let fleet = GeneratedFleet::new(FleetSpec {
        clusters: 500,
        apps: 10,
        seed: 1,
        ..FleetSpec::default()
    })
    .unwrap();
    let observed: u64 = (0..500)
        .map(|i| fleet.cluster(i).observed.len() as u64)
        .sum();
    assert_eq!(report.rows, observed);
    assert!(report.rows_via_collector > 0);

    let json = std::fs::read_to_string(out.path().join("report.json")).unwrap();
    let parsed: LoadtestReport = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed, report);
    assert!(out.path().join("report.md").exists());
}
