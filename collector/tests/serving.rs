//! The central collector as a service, over real HTTP with a real ClickHouse: credentials given
//! twice, deadlines while ClickHouse is stalled, and the agent token file reloaded while it runs.

use std::time::{Duration, Instant};

use fleetscope_collector::central::auth::AgentAuth;
use fleetscope_collector::central::{Collector, CollectorOptions};
use fleetscope_collector::protocol::{Report, ReportKind};
use fleetscope_store::Store;
use fleetscope_testkit::faults::{send_signal, Suspended};
use fleetscope_testkit::TestStore;

use common::now;
use fleetscope_testkit::reloads::{file_version as version_of, reload_state};

#[path = "it/common/mod.rs"]
mod common;

const TOKEN_A: &str = "token-for-store-a-0123456789";
const TOKEN_B: &str = "token-for-store-b-0123456789";

fn heartbeat(cluster: &str) -> Report {
    Report {
        cluster: cluster.into(),
        agent_version: "0.1.0".into(),
        report_seq: 0,
        sent_at: now(),
        kind: ReportKind::Heartbeat,
        reconcilers: [("flux".to_owned(), "v2.4.0".to_owned())].into(),
        change_seq_high: 0,
        changes: vec![],
        stamped_apps: Vec::new(),
    }
}

async fn start(store: Store, options: CollectorOptions) -> (Collector, String) {
    let collector = Collector::new(store, options);
    let url = common::serve(&collector).await;
    (collector, url)
}

fn options(auth: AgentAuth) -> CollectorOptions {
    CollectorOptions {
        auto_register: true,
        ..common::options(auth)
    }
}

fn tokens_file(entries: &[(&str, &str)]) -> String {
    let mut text = "agents:\n".to_owned();
    for (cluster, token) in entries {
        text.push_str(&format!("  - cluster: {cluster}\n    token: {token}\n"));
    }
    text
}

/// Posts a heartbeat for `cluster` with these `Authorization` header values, in order.
async fn post(url: &str, cluster: &str, authorization: &[String]) -> (u16, serde_json::Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/api/v1/ingest"))
        .header("content-encoding", "gzip")
        .body(heartbeat(cluster).encode());
    for value in authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response.headers().get("www-authenticate").cloned();
    let json: serde_json::Value =
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap_or_default();
    if status == 401 {
        assert_eq!(challenge.unwrap(), "Bearer", "{json}");
    }
    (status, json)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn more_than_one_authorization_header_is_refused_in_either_order() {
    let test = TestStore::start().await;
    let auth = AgentAuth::parse(&tokens_file(&[("store-a", TOKEN_A)])).unwrap();
    let (_collector, url) = start(test.store.clone(), options(auth)).await;
    let valid = bearer(TOKEN_A);
    let bogus = bearer("not-a-token-anyone-was-given");
    assert_eq!(
        post(&url, "store-a", std::slice::from_ref(&valid)).await.0,
        200
    );
    for headers in [
        [valid.clone(), bogus.clone()],
        [bogus.clone(), valid.clone()],
        [valid.clone(), valid.clone()],
    ] {
        let (status, json) = post(&url, "store-a", &headers).await;
        assert_eq!(status, 401, "{headers:?}: {json}");
        assert_eq!(
            json,
            serde_json::json!({"error": "more than one Authorization header"}),
            "{headers:?}"
        );
    }
}

async fn get(url: &str) -> (u16, String, Duration) {
    let started = Instant::now();
    let response = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap_or_else(|err| panic!("GET {url}: no answer after {:?}: {err}", started.elapsed()));
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    (status, body, started.elapsed())
}

#[tokio::test]
async fn probes_answer_in_bounded_time_while_clickhouse_is_stopped() {
    let test = TestStore::start().await;
    let (_collector, url) = start(
        test.store.clone(),
        CollectorOptions {
            ack_timeout: Duration::from_secs(2),
            ..options(AgentAuth::Insecure)
        },
    )
    .await;
    // A loaded machine can make one ping miss its 2 s; ready must come, then the stop.
    until_ready(&url, "after start").await;
    // Known before the stop, so the report below waits only for its rows.
    assert_eq!(post(&url, "store-a", &[]).await.0, 200);

    let pid = test.server.pid().expect("the server runs");
    let stopped = Suspended::stop(pid).unwrap();
    let (status, body, took) = get(&format!("{url}/readyz")).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("clickhouse did not answer a ping within 2 s"),
        "{body}"
    );
    // The bound is 2 s; the margin is for a loaded machine.
    assert!(took < Duration::from_secs(8), "readyz took {took:?}");
    for probe in ["healthz", "metrics"] {
        let (status, body, _) = get(&format!("{url}/{probe}")).await;
        assert_eq!(status, 200, "{probe}: {body}");
    }
    let started = Instant::now();
    let (status, json) = post(&url, "store-a", &[]).await;
    assert_eq!(status, 503, "{json}");
    assert!(
        started.elapsed() < Duration::from_secs(2) + Duration::from_secs(15),
        "ingest took {:?}",
        started.elapsed()
    );

    drop(stopped);
    until_ready(&url, "after SIGCONT").await;
}

/// Waits up to 30 s for `/readyz` to answer 200.
async fn until_ready(url: &str, when: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body, _) = get(&format!("{url}/readyz")).await;
        if status == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "still not ready {when}: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The version the collector reports for its agent token file, and its reload counts.
async fn token_metrics(url: &str) -> (String, u64, u64) {
    let (_, text, _) = get(&format!("{url}/metrics")).await;
    reload_state(&text, "fleetscope_collector_agent_tokens")
}

/// Waits until the collector reports `version` in force.
async fn until_in_force(url: &str, version: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (in_force, ..) = token_metrics(url).await;
        if in_force == version {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "version {version} not in force; {in_force} is"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_agent_token_file_is_reloaded_while_the_collector_runs() {
    let test = TestStore::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agents.yaml");
    let first = tokens_file(&[("store-a", TOKEN_A)]);
    std::fs::write(&path, &first).unwrap();
    let (auth, version) = AgentAuth::load_versioned(&path).unwrap();
    assert_eq!(version, version_of(&first));
    let (collector, url) = start(test.store.clone(), options(auth)).await;
    collector.watch_agent_tokens(path.clone(), version.clone(), Duration::from_millis(100));
    assert_eq!(token_metrics(&url).await, (version.clone(), 0, 0));
    assert_eq!(post(&url, "store-a", &[bearer(TOKEN_A)]).await.0, 200);
    let (status, json) = post(&url, "store-b", &[bearer(TOKEN_B)]).await;
    assert_eq!(
        (status, json),
        (401, serde_json::json!({"error": "unknown token"}))
    );

    // A cluster onboarded: its token works once the file changed, without a restart.
    let second = tokens_file(&[("store-a", TOKEN_A), ("store-b", TOKEN_B)]);
    std::fs::write(&path, &second).unwrap();
    until_in_force(&url, &version_of(&second)).await;
    assert_eq!(post(&url, "store-b", &[bearer(TOKEN_B)]).await.0, 200);
    assert_eq!(post(&url, "store-a", &[bearer(TOKEN_A)]).await.0, 200);

    // A token removed: refused as soon as the new version is in force. The file is replaced
    // the way Kubernetes updates a mounted Secret: a new file renamed over the old one.
    let third = tokens_file(&[("store-b", TOKEN_B)]);
    std::fs::write(dir.path().join("agents.yaml.new"), &third).unwrap();
    std::fs::rename(dir.path().join("agents.yaml.new"), &path).unwrap();
    until_in_force(&url, &version_of(&third)).await;
    let (status, json) = post(&url, "store-a", &[bearer(TOKEN_A)]).await;
    assert_eq!(
        (status, json),
        (401, serde_json::json!({"error": "unknown token"}))
    );
    assert_eq!(post(&url, "store-b", &[bearer(TOKEN_B)]).await.0, 200);
    assert_eq!(token_metrics(&url).await, (version_of(&third), 2, 0));

    // A broken file is refused, once, and the version in force stays.
    std::fs::write(
        &path,
        "agents:\n  - cluster: Store-C\n    token: short\n  - cluster: store-d\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while token_metrics(&url).await.2 == 0 {
        assert!(Instant::now() < deadline, "the broken file was not refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(token_metrics(&url).await, (version_of(&third), 2, 1));
    assert_eq!(post(&url, "store-b", &[bearer(TOKEN_B)]).await.0, 200);
    assert_eq!(post(&url, "store-a", &[bearer(TOKEN_A)]).await.0, 401);

    // Fixed again: in force.
    let fourth = tokens_file(&[("store-a", TOKEN_A), ("store-b", TOKEN_B)]) + "\n";
    std::fs::write(&path, &fourth).unwrap();
    until_in_force(&url, &version_of(&fourth)).await;
    assert_eq!(post(&url, "store-a", &[bearer(TOKEN_A)]).await.0, 200);
    assert_eq!(token_metrics(&url).await, (version_of(&fourth), 3, 1));
}

#[tokio::test]
async fn sighup_reloads_the_agent_token_file_at_once() {
    let test = TestStore::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agents.yaml");
    std::fs::write(&path, tokens_file(&[("store-a", TOKEN_A)])).unwrap();
    let (auth, version) = AgentAuth::load_versioned(&path).unwrap();
    let (collector, url) = start(test.store.clone(), options(auth)).await;
    // Polled once an hour: only the signal can make the change take effect within the test.
    collector.watch_agent_tokens(path.clone(), version, Duration::from_secs(3600));
    let second = tokens_file(&[("store-b", TOKEN_B)]);
    std::fs::write(&path, &second).unwrap();
    send_signal(std::process::id(), "HUP");
    until_in_force(&url, &version_of(&second)).await;
    assert_eq!(post(&url, "store-b", &[bearer(TOKEN_B)]).await.0, 200);
    assert_eq!(post(&url, "store-a", &[bearer(TOKEN_A)]).await.0, 401);
}
