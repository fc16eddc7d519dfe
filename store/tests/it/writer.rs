//! The batch writer against a real server: batching by size and time, receipts only for what
//! ClickHouse accepted, retries across a server restart, backpressure, and harmless redelivery.

use std::time::Duration;

use fleetscope_model::Timestamp;
use fleetscope_store::writer::{BatchWriter, BatchWriterConfig, WriteError};
use fleetscope_store::ObservedRow;
use fleetscope_testkit::TestStore;
use tokio::sync::mpsc;

fn observed(cluster: &str, object: usize, seq: u64) -> ObservedRow {
    ObservedRow {
        cluster_id: cluster.to_owned(),
        object_kind: "Kustomization".into(),
        object_namespace: "flux-system".into(),
        object_name: format!("app-{object:03}"),
        app: format!("app-{object:03}"),
        version: "1.0.0".into(),
        content_hash: String::new(),
        applied_revision: "main@sha1:0123".into(),
        health: "healthy".into(),
        sync: "unknown".into(),
        reason: "ReconciliationSucceeded".into(),
        message: format!("applied revision for seq {seq}"),
        transitioned_at: 1_800_000_000,
        observed_at: 1_800_000_000 + seq as u32,
        received_at: 1_800_000_001,
        change_seq: seq,
        deleted: 0,
    }
}

fn config() -> BatchWriterConfig {
    BatchWriterConfig {
        max_rows: 1_000,
        max_delay: Duration::from_millis(100),
        // As long as max_delay: these tests look at the size and time bounds alone.
        linger: Duration::from_millis(100),
        max_attempts: 40,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        max_queued_rows: 100_000,
        arrival_writer: None,
    }
}

/// A writer that publishes arrival horizons stamps each batch with its formation time (the
/// producers' stamps are replaced), says before its first insert that it exists, and ends up
/// saying that everything it stamped is visible.
#[tokio::test]
async fn an_arrival_writer_stamps_batches_and_publishes_its_horizon() {
    let test = TestStore::start().await;
    let writer = BatchWriter::spawn(
        test.store.clone(),
        BatchWriterConfig {
            arrival_writer: Some("writer-under-test".into()),
            ..config()
        },
        None,
    );
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    for batch in 0..3u64 {
        let rows: Vec<ObservedRow> = (0..10)
            .map(|i| ObservedRow {
                received_at: 7,
                ..observed(&format!("c{batch}"), i, 1)
            })
            .collect();
        writer.write(rows).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let mut written: Vec<ObservedRow> = test.store.read_table().await.unwrap();
    written.sort_by(|a, b| (&a.cluster_id, &a.object_name).cmp(&(&b.cluster_id, &b.object_name)));
    let stamps: Vec<u32> = written.iter().map(|r| r.received_at).collect();
    assert_eq!(stamps.len(), 30);
    assert!(
        stamps.iter().all(|s| *s >= started),
        "stamped by the writer, not 7: {stamps:?}"
    );
    // Batches in order get stamps in order.
    let firsts: Vec<u32> = stamps.chunks(10).map(|c| c[0]).collect();
    assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "{firsts:?}");
    let newest = *stamps.iter().max().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let horizons = test.store.arrival_horizons().await.unwrap();
        let mine = horizons
            .iter()
            .find(|h| h.writer == "writer-under-test")
            .expect("the writer published before its first insert");
        assert!(mine.first_stamp <= stamps[0], "{mine:?}");
        assert!(mine.silent_seconds <= 5, "{mine:?}");
        if mine.visible_before > newest {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the horizon never passed {newest}: {mine:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn batches_by_size_and_time_and_reports_each_batch() {
    let test = TestStore::start().await;
    let (outcomes_tx, mut outcomes) = mpsc::unbounded_channel();
    let writer = BatchWriter::<ObservedRow>::spawn(test.store.clone(), config(), Some(outcomes_tx));
    let mut pending = Vec::new();
    for cluster in 0..50 {
        let rows: Vec<ObservedRow> = (0..100)
            .map(|object| observed(&format!("edge-{cluster:02}"), object, 1))
            .collect();
        pending.push(writer.submit(rows).await.unwrap());
    }
    let mut receipts = Vec::new();
    for p in pending {
        receipts.push(
            tokio::time::timeout(Duration::from_secs(30), p.accepted())
                .await
                .expect("accepted in time")
                .unwrap(),
        );
    }
    // A small submission alone is flushed by the time bound, not left waiting for more rows.
    let lone = writer
        .submit(vec![observed("edge-lone", 0, 1)])
        .await
        .unwrap();
    let lone = tokio::time::timeout(Duration::from_secs(10), lone.accepted())
        .await
        .expect("time bound flushes")
        .unwrap();
    assert_eq!(lone.batch_rows, 1);
    writer.close().await;

    let mut seen = Vec::new();
    while let Ok(outcome) = outcomes.try_recv() {
        seen.push(outcome);
    }
    assert!(seen
        .iter()
        .all(|o| o.accepted && o.table == "observed_transitions"));
    assert_eq!(
        seen.iter().map(|o| o.rows).sum::<usize>(),
        5_001,
        "every row in exactly one batch"
    );
    let size_bound: Vec<usize> = seen.iter().map(|o| o.rows).collect();
    assert!(
        size_bound[..size_bound.len() - 2]
            .iter()
            .all(|rows| *rows >= 1_000),
        "full batches reach max_rows: {size_bound:?}"
    );
    assert!(
        seen.len() <= 8,
        "5,000 rows in 100-row submissions coalesce into few batches, got {}",
        seen.len()
    );
    for receipt in &receipts {
        let batch = seen
            .iter()
            .find(|o| o.batch_id == receipt.batch_id)
            .expect("receipt names a reported batch");
        assert_eq!(receipt.batch_rows, batch.rows);
    }
    assert_eq!(
        test.store.count_rows::<ObservedRow>().await.unwrap(),
        5_001,
        "acknowledged rows are in ClickHouse"
    );
}

#[tokio::test]
async fn a_quiet_writer_flushes_after_the_linger_time() {
    let test = TestStore::start().await;
    let cfg = BatchWriterConfig {
        max_delay: Duration::from_secs(600),
        linger: Duration::from_millis(20),
        ..config()
    };
    let writer = BatchWriter::<ObservedRow>::spawn(test.store.clone(), cfg, None);
    // Far below max_rows and max_delay: only the linger rule can flush these.
    let receipt = tokio::time::timeout(
        Duration::from_secs(30),
        writer.write(vec![observed("edge-a", 0, 1)]),
    )
    .await
    .expect("flushed by linger")
    .unwrap();
    assert_eq!(receipt.batch_rows, 1);
    // While an insert runs, a batch keeps growing instead of flushing at every gap.
    let pending: Vec<_> = futures_like_join(&writer, 20).await;
    let batches: std::collections::BTreeSet<u64> = pending.iter().map(|r| r.batch_id).collect();
    assert!(
        batches.len() < 20,
        "20 quick submissions share batches: {batches:?}"
    );
    writer.close().await;
}

async fn futures_like_join(
    writer: &BatchWriter<ObservedRow>,
    n: usize,
) -> Vec<fleetscope_store::Receipt> {
    let mut pending = Vec::new();
    for i in 0..n {
        pending.push(writer.submit(vec![observed("edge-b", i, 1)]).await.unwrap());
    }
    let mut receipts = Vec::new();
    for p in pending {
        receipts.push(p.accepted().await.unwrap());
    }
    receipts
}

#[tokio::test]
async fn retries_across_a_restart_and_refuses_when_full() {
    let mut test = TestStore::start().await;
    let cfg = BatchWriterConfig {
        max_queued_rows: 300,
        ..config()
    };
    let writer = BatchWriter::<ObservedRow>::spawn(test.store.clone(), cfg, None);
    test.server.shut_down();

    let first = writer
        .try_submit((0..200).map(|i| observed("edge-a", i, 1)).collect())
        .unwrap();
    let second = writer
        .try_submit((0..100).map(|i| observed("edge-b", i, 1)).collect())
        .unwrap();
    let refused = writer
        .try_submit(vec![observed("edge-c", 0, 1)])
        .unwrap_err();
    assert_eq!(
        refused,
        WriteError::Full {
            queued_rows: 300,
            capacity: 300
        }
    );
    assert_eq!(
        refused.to_string(),
        "the writer queue is full (300 of 300 rows waiting); retry later"
    );

    tokio::time::sleep(Duration::from_millis(400)).await;
    test.server
        .restart()
        .expect("server comes back on the same port and data");
    let first = tokio::time::timeout(Duration::from_secs(60), first.accepted())
        .await
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(60), second.accepted())
        .await
        .unwrap()
        .unwrap();
    assert!(
        first.attempts > 1,
        "the first attempts failed while the server was down: {first:?}"
    );
    assert_eq!(
        first.batch_id, second.batch_id,
        "both submissions travelled in one batch"
    );
    assert!(
        writer
            .stats()
            .retries
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    assert_eq!(
        writer.queued_rows(),
        0,
        "room is given back once a batch is done"
    );
    writer.close().await;
    assert_eq!(test.store.count_rows::<ObservedRow>().await.unwrap(), 300);
}

#[tokio::test]
async fn gives_up_after_max_attempts_and_says_so() {
    let mut test = TestStore::start().await;
    let cfg = BatchWriterConfig {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        ..config()
    };
    let writer = BatchWriter::<ObservedRow>::spawn(test.store.clone(), cfg, None);
    test.server.shut_down();
    let err = writer
        .write(vec![observed("edge-a", 0, 1)])
        .await
        .unwrap_err();
    match &err {
        WriteError::Rejected {
            attempts,
            rows,
            table,
            ..
        } => {
            assert_eq!((*attempts, *rows, *table), (3, 1, "observed_transitions"));
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with(
            "batch 1 (1 rows into observed_transitions) was not accepted after 3 attempts: "
        ),
        "{err}"
    );
    assert_eq!(
        writer
            .stats()
            .batches_failed
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[tokio::test]
async fn redelivery_never_double_counts() {
    let test = TestStore::start().await;
    let store = &test.store;
    let batch: Vec<ObservedRow> = (0..10)
        .flat_map(|i| [observed("edge-a", i, 1), observed("edge-a", i, 2)])
        .collect();
    store.insert_rows(&batch).await.unwrap();
    store.insert_rows(&batch).await.unwrap();
    store.insert_rows(&batch[..5]).await.unwrap();

    let latest = store.observed_for_cluster("edge-a").await.unwrap();
    assert_eq!(latest.len(), 10, "one latest row per object");
    assert!(
        latest.iter().all(|row| row.change_seq == 2),
        "the highest sequence number wins"
    );
    let history = store
        .observed_history("edge-a", Timestamp(0), Timestamp(2_000_000_000))
        .await
        .unwrap();
    assert_eq!(
        history.len(),
        20,
        "each change once, however often it was delivered"
    );
}
