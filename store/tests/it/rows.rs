//! Every typed row survives a round trip through its table unchanged. Inserts run without
//! schema validation (ClickHouse 18.16 cannot provide it), so this is what proves that each
//! struct's field types match its table's column types.

use fleetscope_store::rows::Table;
use fleetscope_store::{
    ClusterRow, DesiredRow, HeartbeatRow, MembershipRow, ObservedRow, RenderRow, RollupSnapshotRow,
};
use fleetscope_testkit::TestStore;

async fn round_trip<T>(store: &fleetscope_store::Store, row: T)
where
    T: Table + Clone + PartialEq + clickhouse::RowRead + for<'a> clickhouse::Row<Value<'a> = T>,
{
    store
        .insert_rows(std::slice::from_ref(&row))
        .await
        .unwrap_or_else(|err| panic!("insert into {}: {err}", T::TABLE));
    let back = store
        .read_table::<T>()
        .await
        .unwrap_or_else(|err| panic!("read {}: {err}", T::TABLE));
    assert_eq!(back, vec![row], "{} round trip", T::TABLE);
}

#[tokio::test]
async fn every_row_type_round_trips() {
    let test = TestStore::start().await;
    let store = &test.store;
    let big = u64::MAX - 7;
    round_trip(
        store,
        ClusterRow {
            cluster_id: "ship-ü".into(),
            group_path: "emea/de".into(),
            group_prefixes: vec!["emea".into(), "emea/de".into()],
            environment: "prod".into(),
            reconciler: "argocd".into(),
            label_keys: vec!["a".into(), "b".into()],
            label_values: vec!["x".into(), String::new()],
            updated_at: 4_000_000_000,
            version: big,
            removed: 1,
        },
    )
    .await;
    round_trip(
        store,
        HeartbeatRow {
            cluster_id: "c".into(),
            seen_at: 1,
            agent_version: "0.1.0".into(),
            reconciler_names: vec!["flux".into()],
            reconciler_versions: vec!["v2.4.0".into()],
        },
    )
    .await;
    round_trip(
        store,
        RenderRow {
            render_id: big,
            commit: "c0ffee".into(),
            platform_commit: "beef".into(),
            rendered_at: 1_800_000_000,
            summary: "line one\nline 'two'\t\\".into(),
            render_groups: u32::MAX,
            clusters: 30_000,
            changed_items: 7,
        },
    )
    .await;
    round_trip(
        store,
        DesiredRow {
            render_group: "rg".into(),
            app: "api".into(),
            render_id: big,
            version: "1.0.0+build".into(),
            content_hash: "sha256:00".into(),
            kind: "flux-helmrelease".into(),
            namespace: "shop".into(),
            reasons: vec![],
            commit: "c".into(),
            desired_since: 3,
            removed: 1,
        },
    )
    .await;
    round_trip(
        store,
        MembershipRow {
            cluster_id: "c".into(),
            render_group: "rg".into(),
            render_id: big,
            removed: 1,
        },
    )
    .await;
    round_trip(
        store,
        ObservedRow {
            cluster_id: "c".into(),
            object_kind: "Application".into(),
            object_namespace: "argocd".into(),
            object_name: "api".into(),
            app: "api".into(),
            version: "1".into(),
            content_hash: String::new(),
            applied_revision: "abc".into(),
            health: "degraded".into(),
            sync: "out_of_sync".into(),
            reason: "r".into(),
            message: "€ – multi-byte".into(),
            transitioned_at: 5,
            observed_at: 1_800_000_000,
            received_at: 7,
            change_seq: big,
            deleted: 1,
        },
    )
    .await;
    round_trip(
        store,
        RollupSnapshotRow {
            taken_at: 1_800_000_000,
            group_path: String::new(),
            depth: 255,
            clusters: 1,
            stale_clusters: 2,
            in_sync: 3,
            progressing: 4,
            failed: 5,
            out_of_sync: 6,
            missing: 7,
            unexpected: 8,
            stale: 9,
            unknown: big,
        },
    )
    .await;
    // The views copied the history rows into their latest tables.
    assert_eq!(store.count_rows::<DesiredRow>().await.unwrap(), 1);
}
