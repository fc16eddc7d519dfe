//! The hub shows a render whole or not at all. A render's rows go into several tables, its
//! `renders` row last; a refresh that happens in between (here: moved by the inventory rows,
//! which change the markers the hub watches) must keep the previous render until the last row
//! is in. Rows of a render that was never completed are taken as they are after the grace.
//! Against a private ClickHouse.

use fleetscope_engine::{Fleet, Index, UNFINISHED_RENDER_GRACE, UNREPLICATED_RENDER_GRACE};
use fleetscope_model::{DriftState, Timestamp};
use fleetscope_store::{
    ClusterRow, DesiredRow, DesiredVersionChangeRow, HeartbeatRow, MembershipRow, ObservedRow,
    RenderChangeCountRow, RenderContentsRow, RenderRow, Store,
};
use fleetscope_testkit::TestStore;

mod desired_since;

const GROUP: &str = "rg-1";

fn now() -> Timestamp {
    fleetscope_runtime::clock::now()
}

fn inventory(render_id: u64, at: u32) -> Vec<ClusterRow> {
    ["store-1", "store-2"]
        .iter()
        .map(|id| ClusterRow {
            cluster_id: (*id).into(),
            group_path: "emea".into(),
            group_prefixes: vec!["emea".into()],
            environment: "prod".into(),
            reconciler: "flux".into(),
            label_keys: vec![],
            label_values: vec![],
            updated_at: at,
            version: render_id,
            removed: 0,
        })
        .collect()
}

fn desired(render_id: u64, version: &str, at: u32) -> DesiredRow {
    DesiredRow {
        render_group: GROUP.into(),
        app: "checkout".into(),
        render_id,
        version: version.into(),
        content_hash: format!("sha256:{version}"),
        kind: "HelmRelease".into(),
        namespace: "shop".into(),
        reasons: vec!["policy everywhere".into()],
        commit: format!("commit-{render_id}"),
        desired_since: at,
        removed: 0,
    }
}

fn render(render_id: u64, at: u32) -> RenderRow {
    RenderRow {
        render_id,
        commit: format!("commit-{render_id}"),
        platform_commit: String::new(),
        rendered_at: at,
        summary: "test".into(),
        render_groups: 1,
        clusters: 2,
        changed_items: 1,
    }
}

/// Clusters whose `checkout` is in sync, and those where it is not.
fn in_sync_and_not(fleet: &Fleet) -> (u64, u64) {
    let counts = fleet.summary(&Default::default());
    let all = &counts["emea"];
    let in_sync = all.state(DriftState::InSync);
    (in_sync, all.pairs.iter().sum::<u64>() - in_sync)
}

async fn publish_first_render(store: &Store, render_id: u64, at: u32) {
    store
        .insert_rows(&[desired(render_id, "1.0.0", at)])
        .await
        .unwrap();
    let members: Vec<MembershipRow> = ["store-1", "store-2"]
        .iter()
        .map(|id| MembershipRow {
            cluster_id: (*id).into(),
            render_group: GROUP.into(),
            render_id,
            removed: 0,
        })
        .collect();
    store.insert_rows(&members).await.unwrap();
    store.insert_rows(&inventory(render_id, at)).await.unwrap();
    store.insert_rows(&[render(render_id, at)]).await.unwrap();
    let mut observed = Vec::new();
    let mut heartbeats = Vec::new();
    for id in ["store-1", "store-2"] {
        observed.push(ObservedRow {
            cluster_id: id.into(),
            object_kind: "HelmRelease".into(),
            object_namespace: "shop".into(),
            object_name: "checkout".into(),
            app: "checkout".into(),
            version: "1.0.0".into(),
            content_hash: "sha256:1.0.0".into(),
            applied_revision: "1.0.0".into(),
            health: "healthy".into(),
            sync: "synced".into(),
            reason: "UpgradeSucceeded".into(),
            message: String::new(),
            transitioned_at: at,
            observed_at: at,
            received_at: at,
            change_seq: 1,
            deleted: 0,
        });
        heartbeats.push(HeartbeatRow {
            cluster_id: id.into(),
            seen_at: at,
            agent_version: "0.1.0".into(),
            reconciler_names: vec!["flux".into()],
            reconciler_versions: vec!["v2.4.0".into()],
        });
    }
    store.insert_rows(&observed).await.unwrap();
    store.insert_rows(&heartbeats).await.unwrap();
}

/// A private store with the first render published 10 s ago, and a hub index that has read it;
/// `at` is the time its rows carry.
async fn first_render_loaded() -> (TestStore, Index, u32) {
    let test = TestStore::start().await;
    let at = now().seconds() as u32;
    publish_first_render(&test.store, (u64::from(at) - 10) * 1000, at).await;
    let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();
    index.refresh().await.unwrap();
    (test, index, at)
}

#[tokio::test]
async fn a_render_is_shown_whole_or_not_at_all() {
    let (test, index, at) = first_render_loaded().await;
    let store = test.store.clone();
    assert_eq!(
        index.read(in_sync_and_not),
        (2, 0),
        "the first render, in sync"
    );

    // The next render moves checkout to 2.0.0: its desired row and its inventory rows are in
    // (the inventory moves the hub's markers), its `renders` row not yet.
    let second = now().seconds() as u64 * 1000;
    store
        .insert_rows(&[desired(second, "2.0.0", at)])
        .await
        .unwrap();
    store.insert_rows(&inventory(second, at)).await.unwrap();
    for _ in 0..3 {
        index.refresh().await.unwrap();
        assert_eq!(
            index.read(in_sync_and_not),
            (2, 0),
            "half of a render was shown: the hub must keep the last complete one"
        );
    }

    // Its last row lands: the whole render is shown at the next refresh.
    store.insert_rows(&[render(second, at)]).await.unwrap();
    index.refresh().await.unwrap();
    assert_eq!(
        index.read(in_sync_and_not),
        (0, 2),
        "the completed render asks for 2.0.0, which no cluster runs yet"
    );

    // A render that stops half-way (3.0.0 never gets its `renders` row) is held back while it
    // is young, and taken as it is once its rows are older than the grace.
    let third = second + 1;
    store
        .insert_rows(&[desired(third, "1.0.0", at)])
        .await
        .unwrap();
    store.insert_rows(&inventory(third, at)).await.unwrap();
    let policy = index.current().policy;
    index.refresh_at(now(), &policy).await.unwrap();
    assert_eq!(index.read(in_sync_and_not), (0, 2), "held back while young");
    let later = Timestamp(now().seconds() + UNFINISHED_RENDER_GRACE.as_secs() as i64 + 5);
    index.refresh_at(later, &policy).await.unwrap();
    assert_eq!(
        index.read(|f| in_sync_and_not(f).0),
        2,
        "an abandoned render's rows are applied after the grace"
    );
}

/// On a ClickHouse cluster each table replicates on its own, so the node the hub reads can hold
/// a render's `renders` row before its desired rows. The render's `render_contents` row says
/// how many it wrote: the hub keeps the last render until it reads them all, and takes the
/// tables as they are only after `UNREPLICATED_RENDER_GRACE`.
#[tokio::test]
async fn a_render_whose_rows_have_not_all_arrived_is_held_back() {
    let (test, index, at) = first_render_loaded().await;
    let store = test.store.clone();
    assert_eq!(index.read(in_sync_and_not), (2, 0), "the first render");

    // The second render's `renders` row and what it wrote have arrived, its desired row not.
    let second = now().seconds() as u64 * 1000;
    store
        .insert_rows(&[RenderContentsRow {
            render_id: second,
            desired: 1,
            members: 0,
        }])
        .await
        .unwrap();
    store.insert_rows(&[render(second, at)]).await.unwrap();
    let policy = index.current().policy;
    for _ in 0..3 {
        index.refresh_at(now(), &policy).await.unwrap();
        assert_eq!(
            index.read(in_sync_and_not),
            (2, 0),
            "a render was applied without its desired row"
        );
    }

    // The row arrives: the render is shown at the next refresh.
    store
        .insert_rows(&[desired(second, "2.0.0", at)])
        .await
        .unwrap();
    index.refresh_at(now(), &policy).await.unwrap();
    assert_eq!(
        index.read(in_sync_and_not),
        (0, 2),
        "the whole render asks for 2.0.0"
    );

    // A third render whose desired row never arrives is applied as it is after the grace.
    let third = second + 1;
    store
        .insert_rows(&[RenderContentsRow {
            render_id: third,
            desired: 1,
            members: 0,
        }])
        .await
        .unwrap();
    store.insert_rows(&inventory(third, at)).await.unwrap();
    store.insert_rows(&[render(third, at)]).await.unwrap();
    index.refresh_at(now(), &policy).await.unwrap();
    let held = index.current().markers;
    assert_ne!(
        held.map(|m| m.last_render),
        Some(third),
        "held back while its rows may still arrive"
    );
    let later = Timestamp(now().seconds() + UNREPLICATED_RENDER_GRACE.as_secs() as i64 + 5);
    index.refresh_at(later, &policy).await.unwrap();
    assert_eq!(
        index.current().markers.map(|m| m.last_render),
        Some(third),
        "taken as it is after the grace"
    );
}

fn change(render_id: u64, cluster: &str) -> DesiredVersionChangeRow {
    DesiredVersionChangeRow {
        app: "checkout".into(),
        render_id,
        cluster_id: cluster.into(),
        from_version: "1.0.0".into(),
        to_version: "2.0.0".into(),
    }
}

/// The newest rollout of `checkout`: its version and how many clusters it targets.
fn newest_rollout(fleet: &Fleet) -> Option<(String, u32)> {
    fleet
        .rollouts_newest_first(Some("checkout"))
        .first()
        .map(|r| (r.version.clone(), r.targeted_now()))
}

/// A render's version change rows replicate on their own too: the hub applies a render only
/// once it has read as many as the render's `render_change_counts` row says it wrote (else a
/// rollout would start without them and never take them in), and a hub starting meanwhile
/// waits for them.
#[tokio::test]
async fn a_render_whose_version_changes_have_not_all_arrived_is_held_back() {
    let (test, index, at) = first_render_loaded().await;
    let store = test.store.clone();
    assert_eq!(index.read(newest_rollout), None, "no version changes yet");

    // The second render moves both clusters to 2.0.0; one of its two change rows is in.
    let second = now().seconds() as u64 * 1000;
    store
        .insert_rows(&[desired(second, "2.0.0", at)])
        .await
        .unwrap();
    store
        .insert_rows(&[change(second, "store-1")])
        .await
        .unwrap();
    store
        .insert_rows(&[RenderChangeCountRow {
            render_id: second,
            version_changes: 2,
        }])
        .await
        .unwrap();
    store
        .insert_rows(&[RenderContentsRow {
            render_id: second,
            desired: 1,
            members: 0,
        }])
        .await
        .unwrap();
    store.insert_rows(&[render(second, at)]).await.unwrap();
    for _ in 0..3 {
        index.refresh().await.unwrap();
        assert_eq!(
            index.read(in_sync_and_not),
            (2, 0),
            "a render was applied without all its version changes"
        );
        assert_eq!(index.read(newest_rollout), None);
    }

    // A hub starting now waits for the missing row.
    let starting = tokio::spawn({
        let store = store.clone();
        async move {
            Index::load(store, fleetscope_runtime::clock::now)
                .await
                .unwrap()
        }
    });
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert!(
        !starting.is_finished(),
        "a hub started with a render's version changes missing"
    );

    // The row arrives: the render and its whole rollout are shown.
    store
        .insert_rows(&[change(second, "store-2")])
        .await
        .unwrap();
    index.refresh().await.unwrap();
    assert_eq!(index.read(in_sync_and_not), (0, 2));
    assert_eq!(index.read(newest_rollout), Some(("2.0.0".into(), 2)));
    let started = tokio::time::timeout(std::time::Duration::from_secs(30), starting)
        .await
        .expect("the starting hub goes on once the row is in")
        .unwrap();
    assert_eq!(started.read(newest_rollout), Some(("2.0.0".into(), 2)));
}
