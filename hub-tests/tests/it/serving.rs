//! The hub as a service: its token file reloaded while it runs (a token added, one removed, a
//! broken file refused), credentials given twice, the reload metrics on `/metrics`, and the
//! OpenAPI document served without a token while every other route needs one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_engine::Index;
use fleetscope_hub::LiveAuth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_model::DriftPolicy;
use fleetscope_testkit::reloads::{file_version as version_of, reload_state};
use fleetscope_testkit::TestStore;

use crate::common;

const ADMIN: &str = "admin-token-0123456789";
const READER: &str = "reader-token-0123456789";

fn tokens_file(entries: &[(&str, &str)]) -> String {
    let mut text = "tokens:\n".to_owned();
    for (name, token) in entries {
        text.push_str(&format!(
            "  - name: {name}\n    token: {token}\n    role: admin\n"
        ));
    }
    text
}

struct Hub {
    base: String,
    http: reqwest::Client,
}

impl Hub {
    async fn get(&self, path: &str, authorization: &[String]) -> (u16, String) {
        let mut request = self.http.get(format!("{}{path}", self.base));
        for value in authorization {
            request = request.header("authorization", value);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// The version in force and the applied and refused reload counts.
    async fn token_metrics(&self) -> (String, u64, u64) {
        let (status, text) = self.get("/metrics", &[bearer(ADMIN)]).await;
        assert_eq!(status, 200, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        reload_state(&text, "fleetscope_hub_tokens")
    }

    async fn until_in_force(&self, version: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (in_force, ..) = self.token_metrics().await;
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
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn the_token_file_is_reloaded_while_the_hub_runs() {
    let test = TestStore::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.yaml");
    // The admin token stays in every valid version, for reading /metrics.
    let first = tokens_file(&[("admins", ADMIN)]);
    std::fs::write(&path, &first).unwrap();
    let (auth, version) = LiveAuth::load_versioned(&path).unwrap();
    assert_eq!(version, version_of(&first));

    let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();
    let mut state = AppState::new(
        Arc::new(index),
        DriftPolicy::default(),
        MetricsConfig::default(),
    );
    let metrics = state.reload_metrics("tokens", "token file");
    let live = LiveAuth::new(auth);
    live.watch(
        path.clone(),
        version.clone(),
        Duration::from_millis(100),
        metrics,
    );
    let hub = Hub {
        base: common::serve(router(Arc::new(state), live, false)).await,
        http: reqwest::Client::new(),
    };
    assert_eq!(hub.token_metrics().await, (version.clone(), 0, 0));
    assert_eq!(hub.get("/api/v1/summary", &[bearer(READER)]).await.0, 401);

    // The OpenAPI document holds no fleet data: anyone reads it, without a token or with one
    // the hub does not know; every other route still refuses both.
    for headers in [vec![], vec![bearer(READER)]] {
        let (status, body) = hub.get("/api/v1/openapi.json", &headers).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body, fleetscope_hub::document_text());
    }
    let (status, body) = hub.get("/api/v1/summary", &[]).await;
    assert_eq!(
        (status, body.as_str()),
        (
            401,
            r#"{"error":"missing bearer token (send Authorization: Bearer <token>)"}"#
        )
    );
    // The document says which routes are open (an empty `security`), and the router agrees.
    let document = serde_json::to_value(fleetscope_hub::document()).unwrap();
    let mut open = Vec::new();
    for route in common::documented_routes() {
        let operation = &document["paths"][route.path]["get"];
        let path = route
            .path
            .replace("{id}", "c-1")
            .replace("{app}", "checkout");
        let (status, body) = hub.get(&path, &[]).await;
        if operation["security"] == serde_json::json!([]) {
            assert!(operation["responses"]["401"].is_null(), "{path}");
            assert_eq!(status, 200, "{path}: {body}");
            open.push(route.path);
        } else {
            assert!(operation["security"].is_null(), "{path}: {operation}");
            assert_eq!(status, 401, "{path}: {body}");
        }
    }
    assert_eq!(open, ["/api/v1/openapi.json"]);
    assert_eq!(hub.get("/metrics", &[]).await.0, 401);

    // Both orders of a valid and a bogus header are refused alike.
    for headers in [
        [bearer(ADMIN), bearer("bogus-token-0123456789")],
        [bearer("bogus-token-0123456789"), bearer(ADMIN)],
    ] {
        let (status, body) = hub.get("/api/v1/summary", &headers).await;
        assert_eq!(status, 401);
        assert_eq!(body, r#"{"error":"more than one Authorization header"}"#);
    }

    // Added.
    let second = tokens_file(&[("admins", ADMIN), ("readers", READER)]);
    std::fs::write(&path, &second).unwrap();
    hub.until_in_force(&version_of(&second)).await;
    assert_eq!(hub.get("/api/v1/summary", &[bearer(READER)]).await.0, 200);

    // Removed: refused as soon as the new version is in force.
    let third = tokens_file(&[("admins", ADMIN)]) + "# readers removed\n";
    std::fs::write(&path, &third).unwrap();
    hub.until_in_force(&version_of(&third)).await;
    let (status, body) = hub.get("/api/v1/summary", &[bearer(READER)]).await;
    assert_eq!(
        (status, body.as_str()),
        (401, r#"{"error":"unknown token"}"#)
    );
    assert_eq!(hub.token_metrics().await, (version_of(&third), 2, 0));

    // Broken: refused once, the version in force stays.
    std::fs::write(
        &path,
        "tokens:\n  - name: x\n    token: short\n    role: boss\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while hub.token_metrics().await.2 == 0 {
        assert!(Instant::now() < deadline, "the broken file was not refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(hub.token_metrics().await, (version_of(&third), 2, 1));
    assert_eq!(hub.get("/api/v1/summary", &[bearer(ADMIN)]).await.0, 200);
}
