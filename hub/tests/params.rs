//! The hub's parameters and listings, driven through its router in process over a small
//! simulated fleet in a private ClickHouse: malformed values (a cursor that is not ASCII, a
//! fractional depth, an unknown parameter on any route) are a 400 naming the parameter, the
//! stale listing pages completely, and the version inventory counts desired versions per group.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use fleetscope_hub::auth::Auth;
use fleetscope_hub::metrics::MetricsConfig;
use fleetscope_hub::server::router;
use serde_json::Value;
use tower::ServiceExt;

mod common;

/// One answer: status, content type and body.
struct Reply {
    status: u16,
    kind: String,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {:?}", self.body))
    }
}

/// Sends `GET uri` through the router, without a listener in between.
async fn get(app: &axum::Router, uri: &str) -> Reply {
    let request = Request::get(uri)
        .body(Body::empty())
        .expect("a valid request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), 64 << 20)
        .await
        .expect("the body is read");
    Reply {
        status,
        kind,
        body: String::from_utf8(body.to_vec()).expect("UTF-8 answers"),
    }
}

async fn ok(app: &axum::Router, uri: &str) -> Value {
    let reply = get(app, uri).await;
    assert_eq!(reply.status, 200, "{uri}: {}", reply.body);
    reply.json()
}

fn assert_names(reply: &Reply, uri: &str, parameter: &str) {
    assert_eq!(reply.status, 400, "{uri}: {}", reply.body);
    let error = reply.json();
    assert_eq!(error["parameter"], parameter, "{uri}: {}", reply.body);
    let message = error["error"].as_str().unwrap();
    assert!(message.starts_with(&format!("{parameter}: ")), "{message}");
}

#[tokio::test]
async fn listings_page_and_bad_values_are_named() {
    let (test, fleet) = common::simulated_fleet(600, 6).await;
    let state = common::hub_state(&test, &fleet, MetricsConfig::default()).await;
    let app = router(Arc::new(state), Arc::new(Auth::Insecure), false);
    cursors_are_checked(&app).await;
    integers_and_unknown_parameters_are_checked(&app).await;
    stale_clusters_page(&app).await;
    versions_count_desired_per_group(&app).await;
}

async fn cursors_are_checked(app: &axum::Router) {
    let app = app.clone();
    // A cursor that is not one the hub handed out, on every listing that takes one.
    for listing in [
        "/api/v1/drift",
        "/api/v1/apps/checkout/versions",
        "/api/v1/stale",
    ] {
        for cursor in ["%E5%90%8D%E5%89%8D", "%ff%fe", "fffe", "+1", "%C3%A90"] {
            let uri = format!("{listing}?cursor={cursor}");
            assert_names(&get(&app, &uri).await, &uri, "cursor");
        }
    }
}

async fn integers_and_unknown_parameters_are_checked(app: &axum::Router) {
    let app = app.clone();
    // Integer parameters refuse fractions; unknown parameters are refused on every route.
    for uri in [
        "/api/v1/summary?depth=1.5",
        "/api/v1/apps/checkout/versions?depth=1.5",
        "/api/v1/summary?depth=1e1",
        "/api/v1/drift?limit=10.0",
    ] {
        let parameter = if uri.contains("limit") {
            "limit"
        } else {
            "depth"
        };
        assert_names(&get(&app, uri).await, uri, parameter);
    }
    assert_eq!(
        ok(&app, "/api/v1/summary?depth=2").await["groups"][0]["depth"],
        1
    );
    for route in fleetscope_hub::openapi::ROUTES {
        let path = route
            .path
            .replace("{id}", "berlin-01")
            .replace("{app}", "checkout");
        let uri = format!("{path}?no_such_parameter=1");
        assert_names(&get(&app, &uri).await, &uri, "no_such_parameter");
    }
    // A path value that is not UTF-8 is named like a query parameter.
    for (uri, parameter) in [
        ("/api/v1/apps/%ff/versions", "app"),
        ("/api/v1/clusters/%E5%90", "id"),
    ] {
        assert_names(&get(&app, uri).await, uri, parameter);
    }
}

async fn stale_clusters_page(app: &axum::Router) {
    let app = app.clone();
    // Stale clusters page like the other listings: no gaps, no repeats, in the order of the
    // one-page answer, and `total` on every page.
    let whole = ok(&app, "/api/v1/stale?limit=1000").await;
    let total = whole["total"].as_u64().unwrap();
    assert!(total > 10, "the fleet has stale clusters to page: {whole}");
    assert_eq!(whole["items"].as_array().unwrap().len() as u64, total);
    assert_eq!(whole["next_cursor"], Value::Null, "one page holds all");
    let mut paged = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = ok(&app, &format!("/api/v1/stale?limit=4{cursor}")).await;
        assert_eq!(page["total"], total);
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 4);
        paged.extend(items.iter().map(|i| i["cluster"].clone()));
        match page["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(items.len(), 4, "only a full page has a next one");
                cursor = format!("&cursor={next}");
            }
            None => break,
        }
    }
    let expected: Vec<Value> = whole["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["cluster"].clone())
        .collect();
    assert_eq!(paged, expected);
    let csv = get(&app, "/api/v1/stale?limit=4&format=csv").await;
    assert_eq!(csv.kind, "text/csv; charset=utf-8");
    assert_eq!(csv.body.lines().count(), 1 + 4, "{}", csv.body);
}

async fn versions_count_desired_per_group(app: &axum::Router) {
    let app = app.clone();
    // The version inventory: desired versions with counts per group too, adding up, and each
    // group's count equal to the inventory asked for that group alone.
    let versions = ok(&app, "/api/v1/apps/checkout/versions").await;
    let desired = versions["desired"].as_array().unwrap();
    assert!(!desired.is_empty(), "{versions}");
    let mut per_group: BTreeMap<(String, String), u64> = BTreeMap::new();
    for entry in desired {
        let groups = entry["groups"]
            .as_object()
            .unwrap_or_else(|| panic!("desired entries carry groups: {entry}"));
        let sum: u64 = groups.values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(entry["clusters"].as_u64().unwrap(), sum, "{entry}");
        for (group, n) in groups {
            per_group.insert(
                (group.clone(), entry["version"].as_str().unwrap().to_owned()),
                n.as_u64().unwrap(),
            );
        }
    }
    let groups: BTreeSet<&String> = per_group.keys().map(|(g, _)| g).collect();
    assert!(groups.len() > 1, "{per_group:?}");
    for group in groups {
        let alone = ok(
            &app,
            &format!("/api/v1/apps/checkout/versions?group={group}"),
        )
        .await;
        for entry in alone["desired"].as_array().unwrap() {
            let version = entry["version"].as_str().unwrap().to_owned();
            assert_eq!(
                entry["clusters"].as_u64().unwrap(),
                per_group[&(group.clone(), version)],
                "{group}: {entry}"
            );
        }
    }
    let csv = get(&app, "/api/v1/apps/checkout/versions?format=csv").await;
    assert!(
        csv.body.starts_with("side,version,group,clusters\n"),
        "{}",
        csv.body
    );
    assert!(csv.body.contains("\ndesired,"), "{}", csv.body);
    assert!(csv.body.contains("\nrunning,"), "{}", csv.body);
}
