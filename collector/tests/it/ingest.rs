//! The central collector over real HTTP into a real ClickHouse: what is stored, what is refused
//! and how, idempotence, inferred deletions, backpressure and acknowledgement only after
//! ClickHouse accepted.

use std::time::Duration;

use fleetscope_collector::central::auth::AgentAuth;
use fleetscope_collector::central::{Collector, CollectorOptions};
use fleetscope_collector::protocol::{Change, Report, ReportKind};
use fleetscope_store::writer::BatchWriterConfig;
use fleetscope_store::{ClusterRow, ObservedRow, Store};
use fleetscope_testkit::TestStore;

use common::{change, now};

use crate::common;

const TOKEN_A: &str = "token-for-store-a-0123456789";
const TOKEN_B: &str = "token-for-store-b-0123456789";

async fn register(store: &Store, ids: &[&str]) {
    let rows: Vec<ClusterRow> = ids
        .iter()
        .map(|id| fleetscope_testkit::inventory_row(id, "emea/de"))
        .collect();
    store.insert_rows(&rows).await.unwrap();
}

struct Running {
    url: String,
    collector: Collector,
    http: reqwest::Client,
}

async fn start(store: Store, options: CollectorOptions) -> Running {
    let collector = Collector::new(store, options);
    let url = common::serve(&collector).await;
    Running {
        url,
        collector,
        http: reqwest::Client::new(),
    }
}

fn options() -> CollectorOptions {
    let auth = AgentAuth::parse(&format!(
        "agents:\n  - cluster: store-a\n    token: {TOKEN_A}\n  - cluster: store-b\n    token: {TOKEN_B}\n  - cluster: store-new\n    token: token-for-store-new-012345\n"
    ))
    .unwrap();
    common::options(auth)
}

fn report(cluster: &str, seq: u64, kind: ReportKind, changes: Vec<Change>) -> Report {
    Report {
        cluster: cluster.into(),
        agent_version: "0.1.0".into(),
        report_seq: seq,
        sent_at: now(),
        kind,
        reconcilers: [("flux".to_owned(), "v2.4.0".to_owned())].into(),
        change_seq_high: changes.iter().map(|c| c.change_seq).max().unwrap_or(0) + 1,
        changes,
        stamped_apps: Vec::new(),
    }
}

impl Running {
    async fn post_raw(
        &self,
        token: Option<&str>,
        body: Vec<u8>,
        gzip: bool,
    ) -> (u16, serde_json::Value, Option<String>) {
        let mut request = self
            .http
            .post(format!("{}/api/v1/ingest", self.url))
            .body(body);
        if gzip {
            request = request.header("content-encoding", "gzip");
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let json = serde_json::from_slice(&response.bytes().await.unwrap())
            .unwrap_or(serde_json::Value::Null);
        (status, json, retry_after)
    }

    async fn post(&self, token: &str, report: &Report) -> (u16, serde_json::Value, Option<String>) {
        self.post_raw(Some(token), report.encode(), true).await
    }
}

#[tokio::test]
async fn stores_reports_idempotently_and_refuses_what_it_must() {
    let test = TestStore::start().await;
    register(&test.store, &["store-a", "store-b"]).await;
    let running = start(test.store.clone(), options()).await;

    let first = report(
        "store-a",
        1,
        ReportKind::Delta,
        vec![change(1, "api", "1.0.0"), change(2, "web", "2.0.0")],
    );
    let (status, body, _) = running.post(TOKEN_A, &first).await;
    assert_eq!(
        (status, body.clone()),
        (
            200,
            serde_json::json!({"status": "stored", "seq": 1, "rows": 2, "unchanged": 0})
        )
    );
    // Acknowledged means queryable.
    let stored = test.store.observed_for_cluster("store-a").await.unwrap();
    assert_eq!(
        stored
            .iter()
            .map(|r| (r.object_name.as_str(), r.version.as_str()))
            .collect::<Vec<_>>(),
        vec![("api", "1.0.0"), ("web", "2.0.0")]
    );
    let beats = test.store.latest_heartbeats().await.unwrap();
    assert_eq!(beats.len(), 1);
    assert!(
        (beats[0].seen_at as i64 - now()).abs() <= 2,
        "seen_at is the collector's clock"
    );

    // The same report again: acknowledged, not stored twice.
    let (status, body, _) = running.post(TOKEN_A, &first).await;
    assert_eq!(
        (status, body),
        (
            200,
            serde_json::json!({"status": "duplicate", "seq": 1, "acked_seq": 1, "highest_change_seq": 3})
        )
    );
    assert_eq!(test.store.count_rows::<ObservedRow>().await.unwrap(), 2);

    // A later change to one object supersedes it.
    let (status, _, _) = running
        .post(
            TOKEN_A,
            &report(
                "store-a",
                2,
                ReportKind::Delta,
                vec![change(3, "api", "1.1.0")],
            ),
        )
        .await;
    assert_eq!(status, 200);
    let stored = test.store.observed_for_cluster("store-a").await.unwrap();
    assert_eq!(
        stored
            .iter()
            .map(|r| (r.object_name.as_str(), r.version.as_str()))
            .collect::<Vec<_>>(),
        vec![("api", "1.1.0"), ("web", "2.0.0")]
    );

    // Credentials.
    let (status, body, _) = running.post_raw(None, first.encode(), true).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (
            401,
            Some("missing bearer token (send Authorization: Bearer <token>)")
        )
    );
    let (status, body, _) = running.post("not-a-known-token-at-all", &first).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("unknown token"))
    );
    // The token is checked before the body is read: a stranger's oversized or malformed body
    // gets 401, not 413 or 400 (reading and inflating it would cost the collector).
    let oversized = vec![b'x'; fleetscope_collector::protocol::MAX_BODY_BYTES + 1];
    let (status, body, _) = running
        .post_raw(Some("not-a-known-token-at-all"), oversized, false)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("unknown token"))
    );
    let (status, _, _) = running.post_raw(None, b"not gzip".to_vec(), true).await;
    assert_eq!(status, 401);
    let (status, body, _) = running.post(TOKEN_B, &first).await;
    assert_eq!(status, 403);
    assert_eq!(
        body["error"],
        "this token may report only for cluster \"store-b\", not \"store-a\""
    );
    assert_eq!(body["field"], "cluster");

    // A cluster with a token but not in the inventory.
    let (status, body, _) = running
        .post(
            "token-for-store-new-012345",
            &report(
                "store-new",
                1,
                ReportKind::Delta,
                vec![change(1, "api", "1.0.0")],
            ),
        )
        .await;
    assert_eq!(status, 403);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown cluster \"store-new\""),
        "{body}"
    );

    // Malformed input.
    let (status, body, _) = running
        .post_raw(Some(TOKEN_A), b"garbage".to_vec(), true)
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("body is not valid gzip"),
        "{body}"
    );
    let mut truncated = first.encode();
    truncated.truncate(truncated.len() - 10);
    let (status, _, _) = running.post_raw(Some(TOKEN_A), truncated, true).await;
    assert_eq!(status, 400);
    let (status, body, _) = running
        .post_raw(Some(TOKEN_A), b"{\"cluster\": 5}".to_vec(), false)
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("body is not a valid report"),
        "{body}"
    );
    let mut bad_field = report(
        "store-a",
        3,
        ReportKind::Delta,
        vec![change(4, "api", "1.2.0")],
    );
    bad_field.changes[0].health = "Healthy".into();
    let (status, body, _) = running.post(TOKEN_A, &bad_field).await;
    assert_eq!(
        (status, body["field"].as_str()),
        (400, Some("changes[0].health"))
    );
    let (status, body, _) = running
        .post_raw(Some(TOKEN_A), vec![b'x'; 9 * 1024 * 1024], false)
        .await;
    assert_eq!(status, 413, "{body}");

    // Nothing refused reached the store, and the collector still works.
    assert_eq!(test.store.count_rows::<ObservedRow>().await.unwrap(), 3);
    let (status, _, _) = running
        .post(
            TOKEN_A,
            &report("store-a", 3, ReportKind::Heartbeat, vec![]),
        )
        .await;
    assert_eq!(status, 200);

    let metrics = running
        .http
        .get(format!("{}/metrics", running.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "fleetscope_collector_reports_total{kind=\"delta\",outcome=\"Stored\"} 2",
        "fleetscope_collector_reports_total{kind=\"delta\",outcome=\"Duplicate\"} 1",
        "fleetscope_collector_rejects_total{reason=\"Unauthorized\"} 4",
        "fleetscope_collector_rejects_total{reason=\"Forbidden\"} 1",
        "fleetscope_collector_rejects_total{reason=\"UnknownCluster\"} 1",
        "fleetscope_collector_rejects_total{reason=\"TooLarge\"} 1",
        "fleetscope_collector_rows_ingested_total 3",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in\n{metrics}");
    }
    assert!(
        metrics.contains("fleetscope_collector_rejects_total{reason=\"Malformed\"} 4"),
        "{metrics}"
    );
    assert_eq!(
        running
            .http
            .get(format!("{}/readyz", running.url))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    drop(running.collector);
}

#[tokio::test]
async fn auto_registration_and_snapshot_deletions() {
    let test = TestStore::start().await;
    let running = start(
        test.store.clone(),
        CollectorOptions {
            auto_register: true,
            auth: AgentAuth::Insecure,
            ..options()
        },
    )
    .await;
    // Made once: an agent reports the same change with the same times again.
    let (api, db) = (change(1, "api", "1.0.0"), change(3, "db", "1.0.0"));
    let (status, _, _) = running
        .post(
            "ignored",
            &report(
                "ship-7",
                1,
                ReportKind::Delta,
                vec![api.clone(), change(2, "web", "1.0.0"), db.clone()],
            ),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        test.store.known_clusters().await.unwrap(),
        vec!["ship-7".to_owned()],
        "registered on first report"
    );

    // The snapshot no longer lists `web`: it was deleted while the agent was offline.
    let snapshot = report(
        "ship-7",
        2,
        ReportKind::Snapshot,
        vec![api.clone(), db.clone()],
    );
    let physical_before = test.store.count_rows::<ObservedRow>().await.unwrap();
    let (status, body, _) = running.post("ignored", &snapshot).await;
    assert_eq!(
        (status, body["rows"].as_u64(), body["unchanged"].as_u64()),
        (200, Some(1), Some(2)),
        "one inferred deletion written; the two listed objects are stored unchanged: {body}"
    );
    assert_eq!(
        test.store.count_rows::<ObservedRow>().await.unwrap(),
        physical_before + 1,
        "only the deletion reached ClickHouse"
    );
    let stored = test.store.observed_for_cluster("ship-7").await.unwrap();
    let state: Vec<(&str, u8)> = stored
        .iter()
        .map(|r| (r.object_name.as_str(), r.deleted))
        .collect();
    assert_eq!(state, vec![("api", 0), ("db", 0), ("web", 1)]);
    // The unchanged objects' rows collapse into the originals: the history holds each change once.
    let history = test
        .store
        .observed_history(
            "ship-7",
            fleetscope_model::Timestamp(0),
            fleetscope_model::Timestamp(now() + 10),
        )
        .await
        .unwrap();
    assert_eq!(history.len(), 4);

    // The same change number with another state (an agent whose counters went back) is
    // written, and wins as it did before: only a change held exactly as it is goes unwritten.
    let snapshot = report(
        "ship-7",
        3,
        ReportKind::Snapshot,
        vec![
            Change {
                version: Some("1.0.1".into()),
                ..api.clone()
            },
            db.clone(),
        ],
    );
    let (status, body, _) = running.post("ignored", &snapshot).await;
    assert_eq!(
        (status, body["rows"].as_u64(), body["unchanged"].as_u64()),
        (200, Some(1), Some(1)),
        "{body}"
    );
    let stored = test.store.observed_for_cluster("ship-7").await.unwrap();
    let api = stored.iter().find(|r| r.object_name == "api").unwrap();
    assert_eq!((api.change_seq, api.version.as_str()), (1, "1.0.1"));
}

#[tokio::test]
async fn concurrent_snapshots_infer_deletions_per_cluster() {
    let test = TestStore::start().await;
    let ids: Vec<String> = (0..30).map(|i| format!("snap-{i:02}")).collect();
    register(
        &test.store,
        &ids.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    let running = start(
        test.store.clone(),
        CollectorOptions {
            auth: AgentAuth::Insecure,
            ..options()
        },
    )
    .await;
    // Odd clusters have objects stored; every third of those also one changed after the
    // snapshot was taken (seq 10), and every fifth already reported `b` deleted. `a` is the
    // same change everywhere (its times included), as an agent reports it again.
    let a = change(1, "a", "1.0.0");
    for (i, id) in ids.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
        let mut changes = vec![a.clone(), change(2, "b", "1.0.0"), change(3, "c", "1.0.0")];
        if i % 3 == 0 {
            changes.push(change(10, "late", "1.0.0"));
        }
        if i % 5 == 0 {
            changes.push(Change {
                deleted: true,
                ..change(4, "b", "1.0.0")
            });
        }
        let (status, body, _) = running
            .post("ignored", &report(id, 1, ReportKind::Delta, changes))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    // All snapshots at once, so their reads share queries. Each lists only `a`, taken at seq 5.
    let posts = ids.iter().map(|id| {
        let snapshot = Report {
            change_seq_high: 5,
            ..report(id, 2, ReportKind::Snapshot, vec![a.clone()])
        };
        let running = &running;
        async move { running.post("ignored", &snapshot).await }
    });
    let answers = futures::future::join_all(posts).await;
    for (i, (id, (status, body, _))) in ids.iter().zip(answers).enumerate() {
        assert_eq!(status, 200, "{id}: {body}");
        let expected_gone: &[&str] = match (i % 2 == 1, i % 5 == 0) {
            (false, _) => &[],
            (true, false) => &["b", "c"],
            (true, true) => &["c"],
        };
        // `a` is written only where the store did not hold it already (even clusters).
        let a_written = u64::from(i % 2 == 0);
        assert_eq!(
            (body["rows"].as_u64(), body["unchanged"].as_u64()),
            (
                Some(a_written + expected_gone.len() as u64),
                Some(1 - a_written)
            ),
            "{id}: {body}"
        );
        let stored = test.store.observed_for_cluster(id).await.unwrap();
        let deleted: Vec<(&str, &str, u64)> = stored
            .iter()
            .filter(|r| r.deleted == 1)
            .map(|r| (r.object_name.as_str(), r.reason.as_str(), r.change_seq))
            .collect();
        let mut expected: Vec<(&str, &str, u64)> = expected_gone
            .iter()
            .map(|name| (*name, "DeletedWhileOffline", 5))
            .collect();
        if i % 2 == 1 && i % 5 == 0 {
            // Reported deleted before, not deleted again.
            expected.insert(0, ("b", "ReconciliationSucceeded", 4));
        }
        assert_eq!(deleted, expected, "{id}");
        // The deletion carries the object's last known state.
        for row in stored.iter().filter(|r| r.reason == "DeletedWhileOffline") {
            assert_eq!(
                (row.app.as_str(), row.version.as_str()),
                (row.object_name.as_str(), "1.0.0"),
                "{id}"
            );
        }
        let live: Vec<&str> = stored
            .iter()
            .filter(|r| r.deleted == 0)
            .map(|r| r.object_name.as_str())
            .collect();
        let expected_live: &[&str] = if i % 2 == 1 && i % 3 == 0 {
            &["a", "late"]
        } else {
            &["a"]
        };
        assert_eq!(
            live, expected_live,
            "{id}: changed after the snapshot, kept"
        );
    }
    let stats = running.collector.lookup().stats();
    let (queries, clusters) = (
        stats.queries.load(std::sync::atomic::Ordering::Relaxed),
        stats.clusters.load(std::sync::atomic::Ordering::Relaxed),
    );
    assert_eq!(clusters, 30, "one stored-state lookup per snapshot");
    assert!(
        queries <= clusters,
        "{queries} queries for {clusters} clusters"
    );
}

#[tokio::test]
async fn stored_row_lookups_share_queries_and_answer_per_cluster() {
    let test = TestStore::start().await;
    let mut rows = Vec::new();
    for c in 0..40u64 {
        for o in 0..=c % 4 {
            rows.push(ObservedRow {
                cluster_id: format!("c-{c:02}"),
                object_kind: "Kustomization".into(),
                object_namespace: "flux-system".into(),
                object_name: format!("o-{o}"),
                app: format!("o-{o}"),
                version: "1.0.0".into(),
                content_hash: String::new(),
                applied_revision: String::new(),
                health: "healthy".into(),
                sync: "synced".into(),
                reason: String::new(),
                message: String::new(),
                transitioned_at: 0,
                observed_at: 1_800_000_000,
                received_at: 1_800_000_000,
                change_seq: o + 1,
                // Object 3 is deleted: its latest row is the deletion.
                deleted: u8::from(o == 3),
            });
        }
    }
    test.store.insert_rows(&rows).await.unwrap();
    let lookup = fleetscope_collector::central::lookup::LiveObjectLookup::spawn(
        test.store.clone(),
        fleetscope_collector::central::lookup::LookupConfig {
            max_clusters: 16,
            max_in_flight: 1,
        },
    );
    // 40 stored clusters, one twice, and one with nothing stored.
    let mut asked: Vec<String> = (0..40).map(|c| format!("c-{c:02}")).collect();
    asked.push("c-07".into());
    asked.push("nothing-here".into());
    let answers = futures::future::join_all(asked.iter().map(|id| lookup.observed_rows(id))).await;
    for (id, answer) in asked.iter().zip(answers) {
        let got: Vec<(String, u64, u8)> = answer
            .unwrap()
            .iter()
            .map(|r| {
                assert_eq!(&r.cluster_id, id);
                (r.object_name.clone(), r.change_seq, r.deleted)
            })
            .collect();
        let c: u64 = id
            .strip_prefix("c-")
            .map_or(u64::MAX, |n| n.parse().unwrap());
        // Each object's latest row, a deleted one included (flagged).
        let expected: Vec<(String, u64, u8)> = if c == u64::MAX {
            vec![]
        } else {
            (0..=c % 4)
                .map(|o| (format!("o-{o}"), o + 1, u8::from(o == 3)))
                .collect()
        };
        assert_eq!(got, expected, "{id}");
    }
    let queries = lookup
        .stats()
        .queries
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        (3..asked.len() as u64).contains(&queries),
        "42 lookups, at most 16 clusters per query, shared: {queries} queries"
    );
}

#[tokio::test]
async fn backpressure_and_no_ack_without_clickhouse() {
    let mut test = TestStore::start().await;
    register(&test.store, &["store-a"]).await;
    let tight = CollectorOptions {
        ack_timeout: Duration::from_millis(1500),
        writer: BatchWriterConfig {
            max_queued_rows: 3,
            max_delay: Duration::from_millis(20),
            max_attempts: 1_000,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(200),
            ..BatchWriterConfig::default()
        },
        ..options()
    };
    let running = start(test.store.clone(), tight).await;
    // Warm the inventory cache, then take ClickHouse away.
    assert_eq!(
        running
            .post(
                TOKEN_A,
                &report(
                    "store-a",
                    1,
                    ReportKind::Delta,
                    vec![change(1, "api", "1.0.0")]
                )
            )
            .await
            .0,
        200
    );
    test.server.shut_down();

    let (status, body, retry) = running
        .post(
            TOKEN_A,
            &report(
                "store-a",
                2,
                ReportKind::Delta,
                vec![change(2, "api", "1.1.0"), change(3, "web", "1.0.0")],
            ),
        )
        .await;
    assert_eq!(status, 503, "{body}");
    // A Retry-After spread between 5 and 10 s, so that refused agents come back apart.
    let seconds: u32 = retry.as_deref().unwrap().parse().unwrap();
    assert!((5..=10).contains(&seconds), "Retry-After {seconds}");
    // Those two rows still wait in the writer (it keeps retrying); the queue has room for one more.
    let (status, body, retry) = running
        .post(
            TOKEN_A,
            &report(
                "store-a",
                3,
                ReportKind::Delta,
                vec![change(4, "db", "1.0.0"), change(5, "mq", "1.0.0")],
            ),
        )
        .await;
    assert_eq!(status, 429, "{body}");
    let seconds: u32 = retry.as_deref().unwrap().parse().unwrap();
    assert!((2..=4).contains(&seconds), "Retry-After {seconds}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("writer queue is full"),
        "{body}"
    );

    test.server.restart().unwrap();
    // The agent retries seq 2 (not acknowledged) and it is stored; its first attempt's rows,
    // written late by the retrying writer, collapse with it.
    let mut stored = None;
    for _ in 0..100 {
        let (status, body, _) = running
            .post(
                TOKEN_A,
                &report(
                    "store-a",
                    2,
                    ReportKind::Delta,
                    vec![change(2, "api", "1.1.0"), change(3, "web", "1.0.0")],
                ),
            )
            .await;
        if status == 200 {
            stored = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(stored.is_some(), "accepted once ClickHouse is back");
    let rows = test.store.observed_for_cluster("store-a").await.unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| (r.object_name.as_str(), r.version.as_str()))
            .collect::<Vec<_>>(),
        vec![("api", "1.1.0"), ("web", "1.0.0")]
    );
    let history = test
        .store
        .observed_history(
            "store-a",
            fleetscope_model::Timestamp(0),
            fleetscope_model::Timestamp(now() + 10),
        )
        .await
        .unwrap();
    assert_eq!(history.len(), 3, "each change once");
}
