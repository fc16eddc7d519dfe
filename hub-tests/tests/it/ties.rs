//! Two different changes of one object with the same change number resolve the same way in the
//! store's queries and in the hub's index, whatever order they were written or applied in.

use fleetscope_engine::Fleet;
use fleetscope_store::ObservedRow;
use fleetscope_testkit::TestStore;

fn row(version: &str, health: &str, received_at: u32) -> ObservedRow {
    ObservedRow {
        cluster_id: "c1".into(),
        object_kind: "HelmRelease".into(),
        object_namespace: "shop".into(),
        object_name: "checkout".into(),
        app: "checkout".into(),
        version: version.into(),
        content_hash: String::new(),
        applied_revision: version.into(),
        health: health.into(),
        sync: "unknown".into(),
        reason: String::new(),
        message: String::new(),
        transitioned_at: 1_800_000_000,
        observed_at: 1_800_000_000,
        received_at,
        change_seq: 42,
        deleted: 0,
    }
}

/// The version the hub holds after applying `rows` in order.
fn hub_choice(rows: &[ObservedRow]) -> String {
    let mut fleet = Fleet::default();
    for r in rows {
        fleet.apply_observed(r);
    }
    let object = fleet.parts.unpack(&fleet.clusters["c1"].objects[0]);
    fleet.symbols.text(object.version).to_owned()
}

/// The version the store's latest-row query picks after `rows` were written, each insert
/// separately and in order.
async fn store_choice(rows: &[ObservedRow]) -> String {
    let test = TestStore::start().await;
    for r in rows {
        test.store
            .insert_rows(std::slice::from_ref(r))
            .await
            .unwrap();
    }
    let latest = test.store.observed_for_cluster("c1").await.unwrap();
    assert_eq!(latest.len(), 1);
    let live = test.store.live_objects(&["c1"]).await.unwrap();
    assert_eq!(live.len(), 1, "the object is live either way");
    latest[0].version.clone()
}

#[tokio::test]
async fn ties_resolve_the_same_in_the_store_and_the_hub() {
    // Same number, same arrival second: the content decides, "healthy" above "degraded".
    let a = row("1.1.0", "healthy", 1_800_000_100);
    let b = row("1.0.0", "degraded", 1_800_000_100);
    for order in [[a.clone(), b.clone()], [b.clone(), a.clone()]] {
        assert_eq!(hub_choice(&order), "1.1.0");
        assert_eq!(store_choice(&order).await, "1.1.0");
    }
    // Same number, a later arrival: the later one, whatever its content.
    let later = row("1.0.0", "degraded", 1_800_000_200);
    for order in [[a.clone(), later.clone()], [later.clone(), a.clone()]] {
        assert_eq!(hub_choice(&order), "1.0.0");
        assert_eq!(store_choice(&order).await, "1.0.0");
    }
}
