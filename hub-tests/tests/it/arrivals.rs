//! The hub reads observed arrivals and heartbeats from one writers' horizon to the next: each
//! row once, none missed, also a row whose batch becomes visible after rows stamped later by
//! another writer.
//! Against a private ClickHouse, with the store's batch writer publishing horizons as the
//! collector's does.

use std::time::{Duration, Instant};

use fleetscope_engine::{ArrivalRead, Fleet, Index, Refreshed};
use fleetscope_store::queries::HEARTBEAT_WRITER_PREFIX;
use fleetscope_store::{
    ArrivalWriterRow, BatchWriter, BatchWriterConfig, HeartbeatRow, ObservedRow,
};
use fleetscope_testkit::TestStore;

fn now_seconds() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32
}

fn row(cluster: &str, name: &str, seq: u64, received_at: u32) -> ObservedRow {
    ObservedRow {
        cluster_id: cluster.into(),
        object_kind: "HelmRelease".into(),
        object_namespace: "shop".into(),
        object_name: name.into(),
        app: name.into(),
        version: "1.0.0".into(),
        content_hash: String::new(),
        applied_revision: "1.0.0".into(),
        health: "healthy".into(),
        sync: "unknown".into(),
        reason: String::new(),
        message: String::new(),
        transitioned_at: received_at,
        observed_at: received_at,
        received_at,
        change_seq: seq,
        deleted: 0,
    }
}

/// Refreshes until `seen` holds of the hub's fleet, or fails after 10 s naming `what`; returns
/// what `count` says each refresh read.
async fn refresh_until(
    index: &Index,
    what: &str,
    count: impl Fn(&Refreshed) -> u64,
    seen: impl Fn(&Fleet) -> bool,
) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut read = Vec::new();
    loop {
        let refreshed = index.refresh().await.unwrap();
        read.push(count(&refreshed));
        if index.read(&seen) {
            return read;
        }
        assert!(
            Instant::now() < deadline,
            "{what} never reached the hub; rows read per refresh: {read:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Refreshes until `cluster` holds an object named `name`; returns the observed rows each
/// refresh read.
async fn refresh_until_seen(index: &Index, cluster: &str, name: &str) -> Vec<u64> {
    refresh_until(
        index,
        &format!("{cluster}/{name}"),
        |r| r.observed_rows_read,
        |f| {
            f.clusters.get(cluster).is_some_and(|c| {
                c.objects
                    .iter()
                    .any(|o| f.symbols.text(f.parts.key(o).name) == name)
            })
        },
    )
    .await
}

#[tokio::test]
async fn each_arrival_is_read_once_and_a_late_batch_is_not_missed() {
    let test = TestStore::start().await;
    let store = test.store.clone();
    let writer = BatchWriter::spawn(
        store.clone(),
        BatchWriterConfig {
            arrival_writer: Some("writer-a".into()),
            ..BatchWriterConfig::default()
        },
        None,
    );
    let index = Index::load(store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();

    // Rows through the writer are stamped by it and read once the horizon passes them.
    writer
        .write(vec![row("c1", "checkout", 1, 0), row("c1", "search", 1, 0)])
        .await
        .unwrap();
    let read = refresh_until_seen(&index, "c1", "checkout").await;
    assert_eq!(read.iter().sum::<u64>(), 2, "each row read once: {read:?}");
    // Nothing new: nothing read, however often the hub looks.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let refreshed = index.refresh().await.unwrap();
        assert_eq!(refreshed.observed_rows_read, 0, "{refreshed:?}");
        assert!(
            matches!(refreshed.arrival_read, Some(ArrivalRead::Between { .. })),
            "{refreshed:?}"
        );
    }

    // A second writer (another collector) starts and stalls with a batch in flight: it keeps
    // saying that its rows are visible before `stalled_at`, and the row it is inserting is
    // stamped then. Meanwhile the first writer's rows, stamped later, land: the hub holds them
    // back rather than move past the stalled batch.
    let stalled_at = now_seconds();
    let b_says = |visible_before| ArrivalWriterRow {
        writer: "writer-b".into(),
        first_stamp: stalled_at,
        visible_before,
    };
    store.insert_rows(&[b_says(stalled_at)]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    writer
        .write(vec![row("c2", "checkout", 1, 0)])
        .await
        .unwrap();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        store.insert_rows(&[b_says(stalled_at)]).await.unwrap();
        let refreshed = index.refresh().await.unwrap();
        assert!(
            matches!(refreshed.arrival_read, Some(ArrivalRead::Between { until, .. }) if until == stalled_at),
            "{refreshed:?}"
        );
    }
    assert!(
        index.read(|f| f.clusters.get("c2").is_none()),
        "read past the stalled writer's horizon"
    );
    // The late batch becomes visible, stamped before the rows the first writer added since,
    // and its writer says so: both are read.
    store
        .insert_rows(&[row("c3", "checkout", 1, stalled_at)])
        .await
        .unwrap();
    store
        .insert_rows(&[b_says(now_seconds() + 1)])
        .await
        .unwrap();
    refresh_until_seen(&index, "c3", "checkout").await;
    refresh_until_seen(&index, "c2", "checkout").await;

    // The overlap the hub used to read every second is gone: rows stamped a minute back are
    // not read again.
    let before = index.refresh().await.unwrap();
    assert!(
        before.observed_rows_read <= 1,
        "a refresh with nothing new read {} rows",
        before.observed_rows_read
    );
}

fn heartbeat(cluster: &str, seen_at: u32) -> HeartbeatRow {
    HeartbeatRow {
        cluster_id: cluster.into(),
        seen_at,
        agent_version: "1.4.0".into(),
        reconciler_names: vec!["flux".into()],
        reconciler_versions: vec!["2.3.0".into()],
    }
}

/// Refreshes until `cluster` was last seen at or after `at`; returns the heartbeats each
/// refresh read.
async fn refresh_until_heartbeat(index: &Index, cluster: &str, at: u32) -> Vec<u64> {
    refresh_until(
        index,
        &format!("{cluster}'s heartbeat of {at}"),
        |r| u64::try_from(r.heartbeat_rows).unwrap(),
        |f| {
            f.clusters
                .get(cluster)
                .and_then(|c| c.last_seen)
                .is_some_and(|seen| seen >= at)
        },
    )
    .await
}

/// Heartbeats go the same way as observed rows: stamped by the collector's heartbeat writer,
/// read between its horizons from `heartbeats`, each once, a late batch not missed,
/// and a refresh with nothing new reads nothing (it used to read a minute of heartbeats back).
#[tokio::test]
async fn each_heartbeat_is_read_once_and_a_late_batch_is_not_missed() {
    let test = TestStore::start().await;
    let store = test.store.clone();
    let writer = BatchWriter::spawn(
        store.clone(),
        BatchWriterConfig {
            arrival_writer: Some(format!("{HEARTBEAT_WRITER_PREFIX}writer-a")),
            ..BatchWriterConfig::default()
        },
        None,
    );
    let index = Index::load(store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();

    // The writer stamps the heartbeat with its arrival (the row says 0).
    let before = now_seconds();
    writer.write(vec![heartbeat("c1", 0)]).await.unwrap();
    let read = refresh_until_heartbeat(&index, "c1", before).await;
    assert_eq!(read.iter().sum::<u64>(), 1, "read once: {read:?}");
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let refreshed = index.refresh().await.unwrap();
        assert_eq!(refreshed.heartbeat_rows, 0, "{refreshed:?}");
        assert!(
            matches!(refreshed.heartbeat_read, ArrivalRead::Between { .. }),
            "{refreshed:?}"
        );
    }

    // Another collector's heartbeat writer stalls with a batch in flight: the first writer's
    // later heartbeat is held back until the stalled one lands.
    let stalled_at = now_seconds();
    let b_says = |visible_before| ArrivalWriterRow {
        writer: format!("{HEARTBEAT_WRITER_PREFIX}writer-b"),
        first_stamp: stalled_at,
        visible_before,
    };
    store.insert_rows(&[b_says(stalled_at)]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    writer.write(vec![heartbeat("c2", 0)]).await.unwrap();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        store.insert_rows(&[b_says(stalled_at)]).await.unwrap();
        let refreshed = index.refresh().await.unwrap();
        assert!(
            matches!(refreshed.heartbeat_read, ArrivalRead::Between { until, .. } if until == stalled_at),
            "{refreshed:?}"
        );
        // The observed rows have no stalled writer: a heartbeat writer does not hold them.
        assert_ne!(
            refreshed.arrival_read,
            Some(ArrivalRead::Between {
                from: stalled_at,
                until: stalled_at
            }),
            "{refreshed:?}"
        );
    }
    assert!(
        index.read(|f| f.clusters.get("c2").is_none()),
        "read past the stalled heartbeat writer's horizon"
    );
    store
        .insert_rows(&[heartbeat("c3", stalled_at)])
        .await
        .unwrap();
    store
        .insert_rows(&[b_says(now_seconds() + 1)])
        .await
        .unwrap();
    refresh_until_heartbeat(&index, "c3", stalled_at).await;
    refresh_until_heartbeat(&index, "c2", stalled_at).await;
    let idle = index.refresh().await.unwrap();
    assert_eq!(
        idle.heartbeat_rows, 0,
        "nothing new, nothing read: {idle:?}"
    );
}

/// A backlog of arrivals (a fleet connecting, a hub that fell behind) is read over several
/// refreshes, each bounded in rows, so that no read outlasts the store's query timeout; every
/// row is still read once, and a second holding more rows than the bound is read whole.
#[tokio::test]
async fn a_backlog_is_read_in_bounded_refreshes_each_row_once() {
    let test = TestStore::start().await;
    let store = test.store.clone();
    let index = Index::load(store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();
    index.set_arrival_read_rows(7);

    let t0 = now_seconds() - 30;
    let says = |visible_before| ArrivalWriterRow {
        writer: "writer-c".into(),
        first_stamp: t0,
        visible_before,
    };
    store.insert_rows(&[says(t0)]).await.unwrap();
    // Ten seconds of three rows each, then one second of ten rows.
    let mut rows = Vec::new();
    for second in 0..10u32 {
        for n in 0..3u32 {
            rows.push(row(
                &format!("c{second}"),
                &format!("app{n}"),
                1,
                t0 + second,
            ));
        }
    }
    for n in 0..10u32 {
        rows.push(row("busy", &format!("app{n}"), 1, t0 + 12));
    }
    store.insert_rows(&rows).await.unwrap();
    store.insert_rows(&[says(t0 + 20)]).await.unwrap();

    let mut read = Vec::new();
    let mut stops = Vec::new();
    for _ in 0..20 {
        let refreshed = index.refresh().await.unwrap();
        read.push(refreshed.observed_rows_read);
        if let Some(ArrivalRead::Between { until, .. }) = refreshed.arrival_read {
            stops.push(until);
        }
        if stops.last() == Some(&(t0 + 20)) {
            break;
        }
    }
    assert_eq!(read.iter().sum::<u64>(), 40, "each row read once: {read:?}");
    // Two seconds (six rows) fit the bound of seven: five refreshes for the first ten seconds
    // (the fifth stops before the ten-row second, the empty ones between taken along), then
    // the ten-row second alone, then the rest up to the horizon.
    assert_eq!(read, [6, 6, 6, 6, 6, 10, 0], "rows per refresh");
    assert_eq!(
        stops,
        [t0 + 2, t0 + 4, t0 + 6, t0 + 8, t0 + 12, t0 + 13, t0 + 20],
        "where each read stopped"
    );
    assert!(index.read(|f| {
        (0..10).all(|s| {
            f.clusters
                .get(&format!("c{s}"))
                .is_some_and(|c| c.objects.len() == 3)
        }) && f
            .clusters
            .get("busy")
            .is_some_and(|c| c.objects.len() == 10)
    }));
}
