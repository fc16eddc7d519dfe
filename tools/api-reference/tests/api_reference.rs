//! `docs/api.md` is generated from the hub's OpenAPI document; these tests fail when the
//! committed file is not what the current document gives. `UPDATE_DOCS=1` rewrites it.

use std::collections::BTreeSet;
use std::sync::Arc;

use fleetscope_api_reference::{markdown, EXAMPLES, REFRESH_COMMAND};
use fleetscope_engine::Index;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_testkit::TestStore;
use serde_json::Value;

/// The hub's document as JSON.
fn document() -> Value {
    serde_json::to_value(fleetscope_hub::document()).expect("the document is JSON")
}

/// Serves `app` on a free loopback port; returns its base URL.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("bound address"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the hub serves") });
    base
}

const API_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md");
const OPENAPI_JSON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");

fn generated() -> String {
    markdown(&document(), EXAMPLES).expect("the hub's OpenAPI document makes a reference")
}

#[test]
fn the_committed_api_reference_is_current() {
    let generated = generated();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(API_MD, &generated).expect("docs/api.md is writable");
        return;
    }
    let committed = std::fs::read_to_string(API_MD).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "docs/api.md is out of date (first difference at line {}); refresh it with `{REFRESH_COMMAND}`\n  committed: {:?}\n  generated: {:?}",
            line + 1,
            committed.lines().nth(line).unwrap_or("(end of file)"),
            generated.lines().nth(line).unwrap_or("(end of file)"),
        );
    }
}

#[test]
fn the_committed_openapi_json_gives_the_same_reference() {
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(OPENAPI_JSON).expect("docs/openapi.json is committed"),
    )
    .expect("docs/openapi.json is JSON");
    assert!(
        markdown(&committed, EXAMPLES).expect("docs/openapi.json makes a reference") == generated(),
        "docs/openapi.json is out of date: regenerate it with `UPDATE_EXPECT=1 cargo test -p fleetscope-hub --lib openapi`"
    );
}

#[test]
fn every_operation_and_parameter_of_the_document_is_in_the_reference() {
    let document = document();
    let reference = generated();
    let mut operations = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let heading = format!("### {} `{path}`", method.to_ascii_uppercase());
            assert!(reference.contains(&heading), "{heading} is missing");
            let section = reference
                .split(&heading)
                .nth(1)
                .unwrap()
                .split("\n### ")
                .next()
                .unwrap();
            for parameter in operation["parameters"].as_array().unwrap() {
                let name = format!("| `{}` |", parameter["name"].as_str().unwrap());
                assert!(
                    section.contains(&name),
                    "{heading}: parameter {name} is missing"
                );
            }
            for status in operation["responses"].as_object().unwrap().keys() {
                assert!(
                    section.contains(&format!("\n| {status} |")),
                    "{heading}: response {status} is missing"
                );
            }
            assert!(section.contains("curl -sS"), "{heading}: no example");
            operations.insert((path.clone(), method.clone()));
        }
    }
    assert_eq!(
        operations.len(),
        document["paths"].as_object().unwrap().len()
    );
}

/// Every example request of the reference, sent the way its `curl` line sends it to a hub on
/// a simulated fleet in a real ClickHouse, is accepted: no refused parameter, no missing route.
/// The fleet's names differ from the example platform repo's, so an unknown cluster may be 404.
#[tokio::test]
async fn every_example_request_is_accepted_by_a_running_hub() {
    const TOKEN: &str = "reference-token-0123456789";
    let test = TestStore::start().await;
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters: 60,
        apps: 4,
        ..FleetSpec::default()
    })
    .expect("a valid fleet");
    fleetscope_fixtures::write_fleet(&test.store, &fleet)
        .await
        .expect("the fleet is written");
    let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .expect("the index loads");
    let mut state = AppState::new(
        Arc::new(index),
        fleet.spec().policy,
        MetricsConfig::default(),
    );
    state.fixed_now = Some(fleet.spec().now);
    let auth = Auth::parse(&format!(
        "tokens:\n  - name: reader\n    token: {TOKEN}\n    role: read\n"
    ))
    .unwrap();
    let base = serve(router(Arc::new(state), Arc::new(auth), false)).await;
    let client = reqwest::Client::new();
    let reference = generated();
    let mut sent = 0;
    for line in reference.lines().filter(|l| l.starts_with("curl ")) {
        let with_token = line.contains("-H \"Authorization: Bearer $TOKEN\"");
        let url = line
            .rsplit('"')
            .nth(1)
            .and_then(|u| u.strip_prefix("$HUB"))
            .unwrap_or_else(|| panic!("{line}: no \"$HUB…\" URL"));
        assert_eq!(
            with_token,
            url != "/api/v1/openapi.json",
            "{line}: every operation but the document needs a token"
        );
        if url.contains(['<', '$']) {
            continue; // a placeholder the reader fills in
        }
        // Sent as the example sends it: with the token only where it shows one.
        let mut request = client.get(format!("{base}{url}"));
        if with_token {
            request = request.bearer_auth(TOKEN);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert!(
            status == 200 || (status == 404 && !body.contains("no such route")),
            "{url}: {status} {body}"
        );
        sent += 1;
    }
    assert!(
        sent >= document()["paths"].as_object().unwrap().len(),
        "only {sent} examples sent"
    );
}
