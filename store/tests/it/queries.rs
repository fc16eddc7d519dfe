//! The read queries on a real server: desired state per cluster through membership changes and
//! removals, latest heartbeats, stale clusters, history ranges, and retention by day.

use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::{
    ClusterRow, DesiredRow, HeartbeatRow, MembershipRow, ObservedRow, RollupSnapshotRow,
};
use fleetscope_testkit::TestStore;

const NOW: Timestamp = Timestamp(1_800_000_000);

fn desired(group: &str, app: &str, version: &str, render_id: u64, removed: u8) -> DesiredRow {
    DesiredRow {
        render_group: group.into(),
        app: app.into(),
        render_id,
        version: version.into(),
        content_hash: format!("sha256:{render_id}"),
        kind: "flux-helmrelease".into(),
        namespace: "shop".into(),
        reasons: vec![format!("policy/{app}-everywhere"), "policy/pin-prod".into()],
        commit: format!("c{render_id}"),
        desired_since: 1_700_000_000 + render_id as u32,
        removed,
    }
}

fn member(cluster: &str, group: &str, render_id: u64, removed: u8) -> MembershipRow {
    MembershipRow {
        cluster_id: cluster.into(),
        render_group: group.into(),
        render_id,
        removed,
    }
}

#[tokio::test]
async fn desired_state_follows_membership_and_removals() {
    let test = TestStore::start().await;
    let store = &test.store;
    store
        .insert_rows(&[
            desired("rg-a", "api", "1.0.0", 1, 0),
            desired("rg-a", "web", "2.0.0", 1, 0),
            desired("rg-b", "api", "1.1.0", 1, 0),
            // Render 2 upgrades api in rg-a and removes web from it.
            desired("rg-a", "api", "1.2.0", 2, 0),
            desired("rg-a", "web", "2.0.0", 2, 1),
        ])
        .await
        .unwrap();
    store
        .insert_rows(&[
            member("store-1", "rg-b", 1, 0),
            member("store-1", "rg-a", 2, 0),
            member("store-2", "rg-b", 1, 0),
            member("store-3", "rg-a", 1, 0),
            member("store-3", "rg-a", 2, 1),
        ])
        .await
        .unwrap();

    let one = store.desired_for_cluster("store-1").await.unwrap();
    assert_eq!(
        one.iter()
            .map(|r| (r.app.as_str(), r.version.as_str(), r.render_id))
            .collect::<Vec<_>>(),
        vec![("api", "1.2.0", 2)]
    );
    assert_eq!(
        one[0].reasons,
        vec![
            "policy/api-everywhere".to_owned(),
            "policy/pin-prod".to_owned()
        ]
    );
    let two = store.desired_for_cluster("store-2").await.unwrap();
    assert_eq!(
        two.iter()
            .map(|r| (r.app.as_str(), r.version.as_str()))
            .collect::<Vec<_>>(),
        vec![("api", "1.1.0")]
    );
    assert!(
        store
            .desired_for_cluster("store-3")
            .await
            .unwrap()
            .is_empty(),
        "a removed cluster desires nothing"
    );
    assert!(store
        .desired_for_cluster("nobody")
        .await
        .unwrap()
        .is_empty());
    assert!(
        store
            .desired_for_cluster("x' OR 1=1 --")
            .await
            .unwrap()
            .is_empty(),
        "parameters are bound, not spliced"
    );
}

#[tokio::test]
async fn heartbeats_and_stale_clusters() {
    let test = TestStore::start().await;
    let store = &test.store;
    let cluster = |id: &str, version: u64, removed: u8| ClusterRow {
        cluster_id: id.into(),
        group_path: "emea/de".into(),
        group_prefixes: vec!["emea".into(), "emea/de".into()],
        environment: "prod".into(),
        reconciler: "flux".into(),
        label_keys: vec![],
        label_values: vec![],
        updated_at: 0,
        version,
        removed,
    };
    store
        .insert_rows(&[
            cluster("fresh", 1, 0),
            cluster("quiet", 1, 0),
            cluster("silent", 1, 0),
            cluster("gone", 1, 0),
            cluster("gone", 2, 1),
        ])
        .await
        .unwrap();
    let beat = |id: &str, ago: i64, agent: &str| HeartbeatRow {
        cluster_id: id.into(),
        seen_at: fleetscope_store::to_datetime(NOW.plus_seconds(-ago)),
        agent_version: agent.into(),
        reconciler_names: vec!["flux".into()],
        reconciler_versions: vec!["v2.4.0".into()],
    };
    store
        .insert_rows(&[
            beat("fresh", 5000, "0.1.0"),
            beat("fresh", 5, "0.2.0"),
            beat("quiet", 3600, "0.1.0"),
            beat("gone", 99_999, "0.1.0"),
        ])
        .await
        .unwrap();

    let beats = store.latest_heartbeats().await.unwrap();
    let summary: Vec<(&str, &str)> = beats
        .iter()
        .map(|b| (b.cluster_id.as_str(), b.agent_version.as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![("fresh", "0.2.0"), ("gone", "0.1.0"), ("quiet", "0.1.0")]
    );

    let policy = DriftPolicy {
        stale_after_seconds: 600,
        progress_grace_seconds: 900,
    };
    let stale = store.stale_clusters(NOW, &policy, 10).await.unwrap();
    let stale: Vec<(&str, u32)> = stale
        .iter()
        .map(|s| (s.cluster_id.as_str(), s.last_seen))
        .collect();
    assert_eq!(
        stale,
        vec![
            ("silent", 0),
            (
                "quiet",
                fleetscope_store::to_datetime(NOW.plus_seconds(-3600))
            )
        ],
        "never-seen first, removed clusters left out"
    );
    assert_eq!(
        store.stale_clusters(NOW, &policy, 1).await.unwrap().len(),
        1,
        "limit applies"
    );
}

/// Tiers that thin no checkpoint: where there is no checkpoint either, `trim_arrivals` keeps
/// the hours the hub reads alone.
pub(crate) fn keep_all_checkpoints() -> fleetscope_store::thinning::CheckpointTiers {
    "none".parse().unwrap()
}

fn observed_at(cluster: &str, seq: u64, at: Timestamp) -> ObservedRow {
    ObservedRow {
        cluster_id: cluster.into(),
        object_kind: "HelmRelease".into(),
        object_namespace: "shop".into(),
        object_name: "api".into(),
        app: "api".into(),
        version: format!("1.{seq}.0"),
        content_hash: String::new(),
        applied_revision: format!("1.{seq}.0"),
        health: "healthy".into(),
        sync: "unknown".into(),
        reason: "UpgradeSucceeded".into(),
        message: "Helm upgrade succeeded".into(),
        transitioned_at: fleetscope_store::to_datetime(at),
        observed_at: fleetscope_store::to_datetime(at),
        received_at: fleetscope_store::to_datetime(at),
        change_seq: seq,
        deleted: 0,
    }
}

/// A cluster page reads only the newest transitions it shows: newest first, at most `limit`,
/// redelivered rows once, other clusters and (when asked) other apps left out.
#[tokio::test]
async fn recent_history_is_the_newest_rows_newest_first() {
    let test = TestStore::start().await;
    let store = &test.store;
    let mut rows: Vec<ObservedRow> = (1..=6)
        .map(|seq| observed_at("store-1", seq, NOW.plus_seconds(-600 + seq as i64 * 60)))
        .collect();
    // Seq 6 delivered twice, another app in between, another cluster at the same times.
    rows.push(rows[5].clone());
    rows.push(ObservedRow {
        app: "web".into(),
        object_name: "web".into(),
        ..observed_at("store-1", 7, NOW.plus_seconds(-270))
    });
    rows.extend((1..=6).map(|seq| observed_at("store-2", seq, NOW.plus_seconds(-60))));
    store.insert_rows(&rows).await.unwrap();
    let seqs = |rows: Vec<ObservedRow>| rows.iter().map(|r| r.change_seq).collect::<Vec<_>>();
    let from = NOW.plus_seconds(-3_600);
    let to = NOW.plus_seconds(1);
    assert_eq!(
        seqs(
            store
                .recent_history("store-1", None, from, to, 100)
                .await
                .unwrap()
        ),
        vec![6, 7, 5, 4, 3, 2, 1],
        "every row of the cluster once, newest first"
    );
    assert_eq!(
        seqs(
            store
                .recent_history("store-1", None, from, to, 3)
                .await
                .unwrap()
        ),
        vec![6, 7, 5],
        "the newest `limit`"
    );
    assert_eq!(
        seqs(
            store
                .recent_history("store-1", Some("api"), from, to, 3)
                .await
                .unwrap()
        ),
        vec![6, 5, 4],
        "the app filter applies before the limit"
    );
    assert_eq!(
        seqs(
            store
                .recent_history("store-1", None, NOW.plus_seconds(-300), to, 100)
                .await
                .unwrap()
        ),
        vec![6, 7, 5],
        "the range starts at `from`"
    );
}

#[tokio::test]
async fn history_ranges_and_retention_by_day() {
    let test = TestStore::start().await;
    let store = &test.store;
    let day = 86_400;
    let rows: Vec<ObservedRow> = (0..10)
        .map(|d| observed_at("store-1", d as u64 + 1, NOW.plus_seconds(-d * day)))
        .collect();
    store.insert_rows(&rows).await.unwrap();
    store
        .insert_rows(
            &(0..10)
                .map(|d| RollupSnapshotRow {
                    taken_at: fleetscope_store::to_datetime(NOW.plus_seconds(-d * day)),
                    group_path: String::new(),
                    depth: 0,
                    clusters: 1,
                    stale_clusters: 0,
                    in_sync: 1,
                    progressing: 0,
                    failed: 0,
                    out_of_sync: 0,
                    missing: 0,
                    unexpected: 0,
                    stale: 0,
                    unknown: 0,
                })
                .collect::<Vec<_>>(),
        )
        .await
        .unwrap();

    let last_three_days = store
        .observed_history("store-1", NOW.plus_seconds(-3 * day), NOW.plus_seconds(1))
        .await
        .unwrap();
    assert_eq!(
        last_three_days
            .iter()
            .map(|r| r.change_seq)
            .collect::<Vec<_>>(),
        vec![4, 3, 2, 1],
        "range is inclusive at the start, oldest first"
    );

    let dropped = store.apply_retention(NOW, 4).await.unwrap();
    // Kept: the day of NOW and the three before it, and for transitions one day more (a row
    // stamped the day before the oldest kept and received after it stays readable); dropped:
    // six older days of snapshots, five of transitions.
    assert_eq!(
        dropped
            .iter()
            .filter(|d| d.table == "observed_transitions")
            .count(),
        5,
        "{dropped:?}"
    );
    assert_eq!(
        dropped
            .iter()
            .filter(|d| d.table == "rollup_snapshots")
            .count(),
        6,
        "{dropped:?}"
    );
    let all = store
        .observed_history("store-1", Timestamp(0), NOW.plus_seconds(1))
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|r| r.change_seq).collect::<Vec<_>>(),
        vec![5, 4, 3, 2, 1]
    );
    assert_eq!(
        store.observed_for_cluster("store-1").await.unwrap().len(),
        1,
        "the latest state is not history and stays"
    );
    assert!(
        store.apply_retention(NOW, 4).await.unwrap().is_empty(),
        "a second run has nothing left to drop"
    );
}

/// `observed_arrivals` gets every app object's row as it lands (source objects not), the hub's
/// incremental read takes a range of arrival times from it, and trimming drops whole hours
/// older than `ARRIVALS_KEEP_HOURS` while `observed_latest` keeps everything current.
#[tokio::test]
async fn arrivals_in_arrival_order_and_trimmed_by_hour() {
    use fleetscope_store::queries::ObservedSource;
    use fleetscope_store::retention::ARRIVALS_KEEP_HOURS;

    let test = TestStore::start().await;
    let store = &test.store;
    let hour = 3_600;
    // One row per hour for ten hours, each on its own cluster; plus a source object.
    let mut rows: Vec<ObservedRow> = (0..10)
        .map(|h| observed_at(&format!("store-{h}"), 1, NOW.plus_seconds(-h * hour)))
        .collect();
    let mut source = observed_at("store-0", 2, NOW);
    source.object_kind = "GitRepository".into();
    source.object_name = "platform".into();
    rows.push(source);
    store.insert_rows(&rows).await.unwrap();

    let read = |source: ObservedSource, since: Timestamp| async move {
        let mut clusters = Vec::new();
        store
            .observed_objects(source, since, |row| clusters.push(row.cluster_id))
            .await
            .unwrap();
        clusters.sort();
        clusters
    };
    assert_eq!(
        read(ObservedSource::Arrivals, NOW.plus_seconds(-2 * hour)).await,
        vec!["store-0", "store-1", "store-2"],
        "arrivals at or after the given time, app objects only"
    );
    assert_eq!(
        read(ObservedSource::Latest, NOW.plus_seconds(-2 * hour)).await,
        vec!["store-0", "store-1", "store-2"],
        "the same answer from the whole table"
    );

    let dropped = store
        .trim_arrivals(NOW, &keep_all_checkpoints())
        .await
        .unwrap();
    assert_eq!(
        dropped.len(),
        10 - ARRIVALS_KEEP_HOURS as usize,
        "hours before the kept ones: {dropped:?}"
    );
    assert_eq!(
        read(ObservedSource::Arrivals, Timestamp(0)).await.len(),
        ARRIVALS_KEEP_HOURS as usize,
        "the kept hours stay"
    );
    assert_eq!(
        read(ObservedSource::Latest, Timestamp(0)).await.len(),
        10,
        "trimming arrivals leaves the current state alone"
    );
    assert!(store
        .trim_arrivals(NOW, &keep_all_checkpoints())
        .await
        .unwrap()
        .is_empty());
}

/// Heartbeats between two horizons: a range of `seen_at`, from inclusive, until exclusive, of
/// the latest heartbeat of each cluster.
#[tokio::test]
async fn heartbeats_between_two_horizons() {
    let test = TestStore::start().await;
    let store = &test.store;
    let beat = |cluster: &str, at: Timestamp| HeartbeatRow {
        cluster_id: cluster.into(),
        seen_at: at.seconds() as u32,
        agent_version: "1.4.0".into(),
        reconciler_names: Vec::new(),
        reconciler_versions: Vec::new(),
    };
    store
        .insert_rows(&[
            beat("store-a", NOW.plus_seconds(-20)),
            beat("store-b", NOW.plus_seconds(-10)),
            beat("store-c", NOW),
        ])
        .await
        .unwrap();
    let between = |from: i64, until: i64| async move {
        let mut seen: Vec<String> = store
            .heartbeats_between(NOW.plus_seconds(from), NOW.plus_seconds(until))
            .await
            .unwrap()
            .into_iter()
            .map(|row| row.cluster_id)
            .collect();
        seen.sort();
        seen
    };
    assert_eq!(between(-20, 0).await, ["store-a", "store-b"]);
    assert_eq!(between(-10, 1).await, ["store-b", "store-c"]);
    assert_eq!(between(-9, 0).await, Vec::<String>::new());
    // A newer heartbeat of store-a is in the range it was stamped in.
    store
        .insert_rows(&[beat("store-a", NOW.plus_seconds(5))])
        .await
        .unwrap();
    assert_eq!(between(1, 6).await, ["store-a"]);
}
