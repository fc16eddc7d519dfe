//! When the collector takes observed-state checkpoints, and how retention drops them: the
//! first at the last boundary, the ones after each boundary in turn, none past what a live
//! writer has made visible, a writer silent for ten minutes holding nothing back, and dropped
//! checkpoints leaving the list before their rows go.

use fleetscope_model::Timestamp;
use fleetscope_store::{ArrivalWriterRow, HeartbeatRow, ObservedRow};
use fleetscope_testkit::TestStore;

const HOUR: i64 = 3_600;
const EVERY: i64 = 6 * HOUR;
/// A boundary of the 6-hour grid, midnight UTC.
const DAY0: i64 = 20_834 * 86_400;

fn observed(cluster: &str, seq: u64, received_at: i64, health: &str) -> ObservedRow {
    ObservedRow {
        cluster_id: cluster.into(),
        object_kind: "HelmRelease".into(),
        object_namespace: "shop".into(),
        object_name: "checkout".into(),
        app: "checkout".into(),
        version: "1.0.0".into(),
        content_hash: String::new(),
        applied_revision: "1.0.0".into(),
        health: health.into(),
        sync: "synced".into(),
        reason: String::new(),
        message: String::new(),
        transitioned_at: received_at as u32,
        observed_at: received_at as u32,
        received_at: received_at as u32,
        change_seq: seq,
        deleted: 0,
    }
}

fn taken(store_checkpoints: &fleetscope_store::past::Checkpoints) -> Vec<i64> {
    store_checkpoints
        .taken
        .iter()
        .map(|t| t.seconds() - DAY0)
        .collect()
}

#[tokio::test]
async fn checkpoints_follow_the_grid_the_writers_and_retention() {
    let test = TestStore::start().await;
    let store = &test.store;
    let client = clickhouse::Client::default()
        .with_url(test.server.url())
        .with_database(store.database())
        .with_validation(false);
    store
        .insert_rows(&[
            observed("a", 1, DAY0 + HOUR, "healthy"),
            observed("a", 2, DAY0 + 7 * HOUR, "degraded"),
            observed("b", 1, DAY0 + 13 * HOUR, "healthy"),
        ])
        .await
        .unwrap();

    // No checkpoint yet: only the last boundary at least `settle` old is taken.
    let now = Timestamp(DAY0 + 6 * HOUR + 100);
    let due = store.take_due_checkpoints(now, EVERY, 120).await.unwrap();
    assert_eq!(due, vec![Timestamp(DAY0)], "06:00 is not 120 s old yet");
    let due = store
        .take_due_checkpoints(Timestamp(DAY0 + 6 * HOUR + 120), EVERY, 120)
        .await
        .unwrap();
    assert_eq!(due, vec![Timestamp(DAY0 + 6 * HOUR)]);

    // A live writer that has made visible only what it stamped before 12:00 holds 12:00 back
    // (its horizon must be past the moment); a writer silent for over ten minutes does not.
    store
        .insert_rows(&[ArrivalWriterRow {
            writer: "collector-live".into(),
            first_stamp: DAY0 as u32,
            visible_before: (DAY0 + 12 * HOUR) as u32,
        }])
        .await
        .unwrap();
    client
        .query(
            "INSERT INTO arrival_writers (writer, first_stamp, visible_before, updated_at) \
VALUES ('collector-gone', toDateTime(?), toDateTime(?), now() - 601)",
        )
        .bind(DAY0 as u32)
        .bind((DAY0 + HOUR) as u32)
        .execute()
        .await
        .unwrap();
    let late = Timestamp(DAY0 + 20 * HOUR);
    let due = store.take_due_checkpoints(late, EVERY, 120).await.unwrap();
    assert_eq!(due, Vec::<Timestamp>::new(), "12:00 is not visible yet");
    store
        .insert_rows(&[ArrivalWriterRow {
            writer: "collector-live".into(),
            first_stamp: DAY0 as u32,
            visible_before: (DAY0 + 20 * HOUR) as u32,
        }])
        .await
        .unwrap();
    let due = store.take_due_checkpoints(late, EVERY, 120).await.unwrap();
    assert_eq!(
        due,
        vec![Timestamp(DAY0 + 12 * HOUR), Timestamp(DAY0 + 18 * HOUR)],
        "each boundary in turn, from the one before"
    );
    assert_eq!(
        taken(&store.checkpoints().await.unwrap()),
        vec![0, 6 * HOUR, 12 * HOUR, 18 * HOUR]
    );

    // Each checkpoint holds every object's newest row received by then.
    let mut at_12 = Vec::new();
    store
        .observed_at(
            Timestamp(DAY0 + 12 * HOUR),
            Timestamp(DAY0 + 12 * HOUR),
            fleetscope_store::past::ObservedScope::All,
            fleetscope_store::past::ObservedPart::Both,
            |row| {
                at_12.push((
                    row.cluster_id.to_owned(),
                    row.change_seq,
                    row.health.to_owned(),
                ))
            },
        )
        .await
        .unwrap();
    at_12.sort();
    assert_eq!(at_12, vec![("a".to_owned(), 2, "degraded".to_owned())]);

    // Retention keeping one day, run on the next day: the first day's checkpoints leave the
    // list, and the moment answerable is the first checkpoint of the day kept.
    let next_day = Timestamp(DAY0 + 86_400 + 7 * HOUR);
    store
        .insert_rows(&[HeartbeatRow {
            cluster_id: "a".into(),
            seen_at: (DAY0 + 2 * HOUR) as u32,
            agent_version: "1.0.0".into(),
            reconciler_names: vec![],
            reconciler_versions: vec![],
        }])
        .await
        .unwrap();
    store
        .insert_rows(&[ArrivalWriterRow {
            writer: "collector-live".into(),
            first_stamp: DAY0 as u32,
            visible_before: next_day.seconds() as u32,
        }])
        .await
        .unwrap();
    store
        .take_due_checkpoints(next_day, EVERY, 120)
        .await
        .unwrap();
    assert_eq!(
        taken(&store.checkpoints().await.unwrap()),
        vec![0, 6 * HOUR, 12 * HOUR, 18 * HOUR, 24 * HOUR, 30 * HOUR]
    );
    store.apply_retention(next_day, 1).await.unwrap();
    let kept = store.checkpoints().await.unwrap();
    assert_eq!(taken(&kept), vec![24 * HOUR, 30 * HOUR]);
    assert_eq!(kept.kept_from(), Some(Timestamp(DAY0 + 86_400)));
    // The heartbeat hours before it go; the cluster's last heartbeat stays as the floor.
    store
        .trim_arrivals(next_day, &Default::default())
        .await
        .unwrap();
    let floor = store
        .heartbeats_at(next_day, Some(&["a"]), &[])
        .await
        .unwrap();
    assert_eq!(floor.len(), 1);
    assert_eq!(i64::from(floor[0].seen_at), DAY0 + 2 * HOUR);
    let history: u64 = client
        .query("SELECT count() FROM heartbeat_history")
        .fetch_one()
        .await
        .unwrap();
    assert_eq!(history, 0, "the first day's heartbeat hours are dropped");
}

/// Whole-fleet heartbeats at a moment when most of the fleet had been silent for longer than
/// the window read in one aggregation (a collector outage): each silent cluster's last
/// heartbeat is looked up, in parts, however many ids that binds.
#[tokio::test]
async fn heartbeats_at_a_moment_after_a_fleet_wide_silence() {
    let test = TestStore::start().await;
    let store = &test.store;
    let at = Timestamp(DAY0 + 3 * HOUR);
    // 40-character ids: 20,000 of them bound in one query would pass ClickHouse's 256 KiB.
    let ids: Vec<String> = (0..20_000)
        .map(|i| format!("store-{i:05}-{}", "x".repeat(28)))
        .collect();
    let beat = |id: &str, seen_at: i64| HeartbeatRow {
        cluster_id: id.to_owned(),
        seen_at: seen_at as u32,
        agent_version: "1.0.0".into(),
        reconciler_names: vec![],
        reconciler_versions: vec![],
    };
    let mut rows: Vec<HeartbeatRow> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| beat(id, DAY0 + HOUR + (i % 600) as i64))
        .collect();
    // Two clusters heard within the window, one of them also after the moment; one silent
    // around the moment and heard again after it (its latest heartbeat is not the answer).
    rows.push(beat(&ids[7], at.seconds() - 60));
    rows.push(beat(&ids[8], at.seconds() - 30));
    rows.push(beat(&ids[8], at.seconds() + 30));
    rows.push(beat(&ids[9], at.seconds() + 600));
    store.insert_rows(&rows).await.unwrap();

    let mut all: Vec<&str> = ids.iter().map(String::as_str).collect();
    all.push("never-heard-from");
    let found = store.heartbeats_at(at, None, &all).await.unwrap();
    assert_eq!(found.len(), ids.len(), "every cluster heard from, once");
    let by_id: std::collections::HashMap<&str, u32> = found
        .iter()
        .map(|row| (row.cluster_id.as_str(), row.seen_at))
        .collect();
    assert_eq!(by_id.len(), ids.len());
    assert_eq!(by_id[ids[7].as_str()], (at.seconds() - 60) as u32);
    assert_eq!(by_id[ids[8].as_str()], (at.seconds() - 30) as u32);
    for (i, id) in ids.iter().enumerate().filter(|(i, _)| *i != 7 && *i != 8) {
        assert_eq!(
            by_id[id.as_str()],
            (DAY0 + HOUR + (i % 600) as i64) as u32,
            "{id}"
        );
    }
    assert!(!by_id.contains_key("never-heard-from"));
}
