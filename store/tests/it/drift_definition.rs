//! One definition of drift: the store's SQL classifies every case of the drift grid exactly as
//! the model's `classify` does, on a real ClickHouse server, and its rollups add up to the
//! same counts at every level of the hierarchy.

use std::collections::BTreeMap;

use fleetscope_model::DriftState;
use fleetscope_testkit::grid::{self, APP, NOW, POLICY};
use fleetscope_testkit::TestStore;

#[tokio::test]
async fn sql_and_model_agree_on_every_grid_case() {
    let test = TestStore::start().await;
    let store = &test.store;
    let cases = grid::cases();
    let rows = grid::rows(&cases);
    store.insert_rows(&rows.clusters).await.unwrap();
    store.insert_rows(&rows.heartbeats).await.unwrap();
    store.insert_rows(&rows.members).await.unwrap();
    store.insert_rows(&rows.desired).await.unwrap();
    store.insert_rows(&rows.since_sets).await.unwrap();
    store.insert_rows(&rows.member_since).await.unwrap();
    store.insert_rows(&rows.observed).await.unwrap();

    let from_sql: BTreeMap<(String, String), String> = store
        .drift_pairs(NOW, &POLICY)
        .await
        .unwrap()
        .into_iter()
        .map(|row| ((row.cluster_id, row.app), row.state))
        .collect();
    let expected: BTreeMap<(String, String), String> = cases
        .iter()
        .filter(|case| case.has_pair())
        .map(|case| {
            (
                (case.cluster_id.clone(), APP.to_owned()),
                case.expected().as_str().to_owned(),
            )
        })
        .collect();
    let mismatches: Vec<String> = cases
        .iter()
        .filter(|case| {
            from_sql.get(&(case.cluster_id.clone(), APP.to_owned()))
                != expected.get(&(case.cluster_id.clone(), APP.to_owned()))
        })
        .map(|case| {
            format!(
                "{}: sql {:?}, model {:?} ({case:?})",
                case.cluster_id,
                from_sql.get(&(case.cluster_id.clone(), APP.to_owned())),
                expected.get(&(case.cluster_id.clone(), APP.to_owned()))
            )
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} cases differ:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
    assert_eq!(
        from_sql.len(),
        expected.len(),
        "no extra pairs (sources and unmanaged objects are ignored)"
    );
    let states: std::collections::BTreeSet<&str> = expected.values().map(String::as_str).collect();
    assert_eq!(
        states.len(),
        DriftState::ALL.len(),
        "the grid reaches every drift state: {states:?}"
    );

    // The rollup at every level is the sum of the model's verdicts for the clusters below it.
    let rollups = store.drift_rollup(NOW, &POLICY).await.unwrap();
    let mut want: BTreeMap<String, BTreeMap<DriftState, u64>> = BTreeMap::new();
    let mut want_clusters: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for case in &cases {
        let group = fleetscope_model::GroupPath::parse(&case.group_path).unwrap();
        let keys: Vec<String> = std::iter::once(String::new())
            .chain(group.prefixes().into_iter().map(String::from))
            .collect();
        let stale = case
            .last_seen
            .is_none_or(|seen| seen.age_at(NOW) > POLICY.stale_after_seconds);
        for key in keys {
            let counts = want_clusters.entry(key.clone()).or_default();
            counts.0 += 1;
            counts.1 += u64::from(stale);
            if case.has_pair() {
                *want
                    .entry(key)
                    .or_default()
                    .entry(case.expected())
                    .or_default() += 1;
            }
        }
    }
    assert_eq!(
        rollups.len(),
        want_clusters.len(),
        "one rollup per group and one for the fleet"
    );
    for rollup in &rollups {
        assert_eq!(
            rollup.pairs, want[&rollup.group_path],
            "pair counts of {:?}",
            rollup.group_path
        );
        assert_eq!(
            (rollup.clusters, rollup.stale_clusters),
            want_clusters[&rollup.group_path],
            "cluster counts of {:?}",
            rollup.group_path
        );
    }
    assert_eq!(rollups[0].group_path, "", "the fleet comes first");
    assert_eq!(rollups[0].clusters, cases.len() as u64);

    // Snapshots store the same numbers for trend panels, down to the requested depth.
    let written = store.take_rollup_snapshot(NOW, &POLICY, 1).await.unwrap();
    assert_eq!(written, 2, "the fleet and the one top-level group");
    let trend = store
        .rollup_trend("grid", NOW.plus_seconds(-60), NOW.plus_seconds(60))
        .await
        .unwrap();
    let grid_rollup = rollups.iter().find(|r| r.group_path == "grid").unwrap();
    assert_eq!(trend, vec![grid_rollup.snapshot_row(NOW)]);
    assert_eq!(trend[0].failed, grid_rollup.count(DriftState::Failed));
}
