//! The store reports its tables' rows and bytes on disk.

use fleetscope_store::ObservedRow;
use fleetscope_testkit::TestStore;

#[tokio::test]
async fn sizes_count_what_was_inserted() {
    let test = TestStore::start().await;
    let store = &test.store;
    let before = store.table_sizes().await.unwrap();
    assert!(
        before
            .iter()
            .all(|t| t.table != "observed_transitions" || t.rows == 0),
        "{before:?}"
    );
    let rows: Vec<ObservedRow> = (0..500)
        .map(|i| ObservedRow {
            cluster_id: format!("c-{i:04}"),
            object_kind: "HelmRelease".into(),
            object_namespace: "flux-system".into(),
            object_name: "checkout".into(),
            app: "checkout".into(),
            version: "1.0.0".into(),
            content_hash: String::new(),
            applied_revision: "1.0.0".into(),
            health: "healthy".into(),
            sync: "unknown".into(),
            reason: String::new(),
            message: String::new(),
            transitioned_at: 1_700_000_000,
            observed_at: 1_700_000_000,
            received_at: 1_700_000_000,
            change_seq: 1,
            deleted: 0,
        })
        .collect();
    store.insert_rows(&rows).await.unwrap();
    let after = store.table_sizes().await.unwrap();
    let observed = after
        .iter()
        .find(|t| t.table == "observed_transitions")
        .expect("the observed table has parts now");
    assert_eq!(observed.rows, 500);
    assert!(observed.bytes_on_disk > 0);
    let mut names: Vec<&str> = after.iter().map(|t| t.table.as_str()).collect();
    let sorted = {
        let mut s = names.clone();
        s.sort();
        s
    };
    assert_eq!(names, sorted, "sorted by table");
    names.dedup();
    assert_eq!(names.len(), after.len(), "one entry per table");
}
