//! Every answer of every route, in each format and each error, validated against the schema
//! the OpenAPI document gives for that route, status and content type, with a JSON Schema
//! validator. The document's object schemas are made closed for the test (no property they do
//! not list), so an answer that sends an undocumented field fails as surely as one that misses
//! a documented one or sends the wrong type. The hub runs over HTTP on a simulated fleet in a
//! private ClickHouse, which is stopped at the end to see the 503.

use std::collections::BTreeSet;
use std::sync::Arc;

use fleetscope_hub::router;
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_testkit::oidc::{IssuerKey, LocalIssuer};
use serde_json::{json, Value};

use crate::common;

const READER: &str = "schema-reader-token-0123456789";
const SCOPED: &str = "schema-scoped-token-0123456789";

/// The document with every object schema that lists properties closed.
fn closed(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                    map.insert("additionalProperties".to_owned(), Value::Bool(false));
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value["components"]);
    walk(&mut value["paths"]);
    value
}

/// The documented response of `template` for `status`: `$ref`s to shared responses followed.
fn documented<'a>(document: &'a Value, template: &str, status: u16) -> &'a Value {
    let response = &document["paths"][template]["get"]["responses"][status.to_string()];
    assert!(
        !response.is_null(),
        "{template} does not document status {status}"
    );
    match response["$ref"].as_str() {
        Some(reference) => document
            .pointer(reference.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("{template}: {reference} does not resolve")),
        None => response,
    }
}

struct Checker {
    document: Value,
    base: String,
    client: reqwest::Client,
    /// (route template, status, content type) seen and valid.
    seen: BTreeSet<(String, u16, String)>,
}

impl Checker {
    /// Sends `uri` (answered by `template`) and validates the answer; returns it as JSON
    /// (`Null` for CSV).
    async fn check(&mut self, token: Option<&str>, template: &str, uri: &str) -> (u16, Value) {
        let mut request = self.client.get(format!("{}{uri}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = response.text().await.unwrap();
        let media = content_type.split(';').next().unwrap().trim().to_owned();
        let response_doc = documented(&self.document, template, status);
        let schema = &response_doc["content"][&media]["schema"];
        assert!(
            !schema.is_null(),
            "{uri}: {status} answered {media}, which is not documented for it: {body}"
        );
        let instance = if media == "application/json" {
            serde_json::from_str(&body).unwrap_or_else(|err| panic!("{uri}: {err}: {body}"))
        } else {
            // CSV: a header row whose columns the response's description names.
            let header = body.lines().next().unwrap_or_default();
            let description = response_doc["description"].as_str().unwrap_or_default();
            for column in header.split(',') {
                let state = self.document["components"]["schemas"]["DriftState"]["enum"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(column));
                assert!(
                    description.contains(column) || state,
                    "{uri}: column {column:?} is not described: {description}"
                );
            }
            Value::String(body.clone())
        };
        let mut root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.document["components"].clone(),
        });
        for (key, value) in schema.as_object().unwrap() {
            root[key] = value.clone();
        }
        let validator = jsonschema::validator_for(&root)
            .unwrap_or_else(|err| panic!("{template}: the schema does not compile: {err}"));
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "{uri}: the {status} answer does not fit its schema:\n{}\n{body}",
            errors.join("\n")
        );
        self.seen.insert((template.to_owned(), status, media));
        (
            status,
            if instance.is_string() {
                Value::Null
            } else {
                instance
            },
        )
    }
}

#[tokio::test]
async fn every_answer_fits_the_documented_schema() {
    let (test, fleet) = common::simulated_fleet(120, 6).await;
    let state = common::hub_state(&test, &fleet, MetricsConfig::default()).await;
    // An identity provider too, whose token for a person without a mapped group is a 403.
    let key = IssuerKey::new("k1");
    let issuer = LocalIssuer::start(&[&key]).await;
    let auth = Auth::parse(&format!(
        "tokens:\n  - name: reader\n    token: {READER}\n    role: read\n  - name: team\n    token: {SCOPED}\n    role: read\n    scope: emea\noidc:\n  issuer: {}\n  clientId: fleetscope\n  redirectUrl: http://127.0.0.1:1/ui/oidc/callback\n  groups:\n    - {{group: fleet-admins, role: admin}}\n",
        issuer.issuer
    ))
    .unwrap();
    let now = jsonwebtoken::get_current_timestamp();
    let no_role = key.sign(&json!({
        "iss": issuer.issuer, "sub": "eve", "aud": "fleetscope", "exp": now + 600, "groups": ["staff"],
    }));
    let base = common::serve(router(Arc::new(state), Arc::new(auth), false)).await;
    let document = closed(serde_json::to_value(fleetscope_hub::document()).unwrap());
    let templates: Vec<String> = document["paths"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut c = Checker {
        document,
        base,
        client: reqwest::Client::new(),
        seen: BTreeSet::new(),
    };
    let r = Some(READER);

    // Names from the fleet itself: a cluster with a failing or drifting app, and its version.
    let (_, page) = c.check(r, "/api/v1/drift", "/api/v1/drift?limit=2").await;
    let item = &page["items"][0];
    let cluster = item["cluster"].as_str().unwrap().to_owned();
    let app = item["app"].as_str().unwrap().to_owned();
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let (_, versions) = c
        .check(
            r,
            "/api/v1/apps/{app}/versions",
            &format!("/api/v1/apps/{app}/versions"),
        )
        .await;
    let running = versions["running"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let desired = versions["desired"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let group = item["group"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let (_, rollouts) = c
        .check(
            r,
            "/api/v1/rollouts",
            &format!("/api/v1/rollouts?app={app}"),
        )
        .await;
    let rollout = rollouts["items"][0]["id"].as_str().unwrap().to_owned();

    let ok: Vec<(&str, String)> = vec![
        ("/api/v1/summary", "/api/v1/summary".to_owned()),
        ("/api/v1/summary", "/api/v1/summary?depth=0".to_owned()),
        (
            "/api/v1/summary",
            format!("/api/v1/summary?group={group}&app={app}"),
        ),
        ("/api/v1/summary", "/api/v1/summary?format=csv".to_owned()),
        (
            "/api/v1/drift",
            format!("/api/v1/drift?limit=2&cursor={cursor}"),
        ),
        (
            "/api/v1/drift",
            "/api/v1/drift?state=in_sync,stale&limit=50".to_owned(),
        ),
        (
            "/api/v1/drift",
            "/api/v1/drift?format=csv&limit=20".to_owned(),
        ),
        (
            "/api/v1/clusters/{id}",
            format!("/api/v1/clusters/{cluster}"),
        ),
        (
            "/api/v1/clusters/{id}",
            format!("/api/v1/clusters/{cluster}?history_hours=0"),
        ),
        (
            "/api/v1/apps/{app}/versions",
            format!("/api/v1/apps/{app}/versions?version={running}&limit=1&depth=2"),
        ),
        (
            "/api/v1/apps/{app}/versions",
            format!("/api/v1/apps/{app}/versions?format=csv"),
        ),
        (
            "/api/v1/apps/{app}/versions",
            "/api/v1/apps/no-such-app/versions".to_owned(),
        ),
        (
            "/api/v1/apps/{app}/versions",
            format!("/api/v1/apps/{app}/versions?label=tier=edge"),
        ),
        ("/api/v1/stale", "/api/v1/stale?limit=1".to_owned()),
        ("/api/v1/stale", "/api/v1/stale?format=csv".to_owned()),
        (
            "/api/v1/explain",
            format!("/api/v1/explain?cluster={cluster}"),
        ),
        (
            "/api/v1/explain",
            format!("/api/v1/explain?cluster={cluster}&app=no-such-app"),
        ),
        ("/api/v1/environments", "/api/v1/environments".to_owned()),
        (
            "/api/v1/environments",
            format!("/api/v1/environments?app={app}&format=csv"),
        ),
        (
            "/api/v1/gate",
            format!("/api/v1/gate?app={app}&version={desired}&threshold=0.5"),
        ),
        (
            "/api/v1/gate",
            "/api/v1/gate?app=no-such-app&version=1.0.0".to_owned(),
        ),
        (
            "/api/v1/gate",
            format!(
                "/api/v1/gate?app={app}&version={desired}&soak=2h&max_failed=2%25&stale=exclude&limit=1"
            ),
        ),
        (
            "/api/v1/gate",
            format!("/api/v1/gate?app={app}&version={desired}&stale=fail&max_failed=0"),
        ),
        (
            "/api/v1/history",
            format!("/api/v1/history?cluster={cluster}"),
        ),
        (
            "/api/v1/history",
            format!("/api/v1/history?cluster={cluster}&format=csv"),
        ),
        (
            "/api/v1/history",
            format!("/api/v1/history?app={app}&limit=50"),
        ),
        ("/api/v1/history", "/api/v1/history?format=csv".to_owned()),
        ("/api/v1/openapi.json", "/api/v1/openapi.json".to_owned()),
        (
            "/api/v1/insights/failures",
            format!("/api/v1/insights/failures?app={app}"),
        ),
        (
            "/api/v1/insights/failures",
            format!("/api/v1/insights/failures?app={app}&version={desired}&group={group}&limit=2"),
        ),
        (
            "/api/v1/insights/failures",
            "/api/v1/insights/failures?app=no-such-app".to_owned(),
        ),
        (
            "/api/v1/rollouts",
            format!("/api/v1/rollouts?status=complete&group={group}&limit=1"),
        ),
        (
            "/api/v1/rollouts/{rollout}",
            format!("/api/v1/rollouts/{rollout}?depth=2&limit=3"),
        ),
        ("/api/v1/delivery", "/api/v1/delivery".to_owned()),
        (
            "/api/v1/delivery",
            format!("/api/v1/delivery?app={app}&group={group}&window=12h"),
        ),
    ];
    for (template, uri) in &ok {
        let (status, _) = c.check(r, template, uri).await;
        assert_eq!(status, 200, "{uri}");
    }
    // A scoped token: its own subtree's answers, and a history of a group outside it.
    for (template, uri) in [
        ("/api/v1/summary", "/api/v1/summary".to_owned()),
        ("/api/v1/history", "/api/v1/history?group=amer".to_owned()),
        ("/api/v1/history", "/api/v1/history".to_owned()),
        (
            "/api/v1/insights/failures",
            format!("/api/v1/insights/failures?app={app}"),
        ),
        ("/api/v1/rollouts", "/api/v1/rollouts".to_owned()),
        ("/api/v1/delivery", format!("/api/v1/delivery?app={app}")),
    ] {
        let (status, _) = c.check(Some(SCOPED), template, &uri).await;
        assert_eq!(status, 200, "{uri}");
    }
    // The document itself needs no token.
    let (status, _) = c
        .check(None, "/api/v1/openapi.json", "/api/v1/openapi.json")
        .await;
    assert_eq!(status, 200);
    // Errors: a bad value, a missing token, an unknown cluster, on every route that has them.
    let mut errors: Vec<(Option<&str>, &str, String, u16)> = Vec::new();
    for template in &templates {
        let concrete = template.replace("{id}", &cluster).replace("{app}", &app);
        errors.push((r, template, format!("{concrete}?no_such_parameter=1"), 400));
        // Every route but those the document marks open (an empty `security`) needs a token.
        if c.document["paths"][template]["get"]["security"] != json!([]) {
            errors.push((None, template, concrete.clone(), 401));
            errors.push((Some(no_role.as_str()), template, concrete, 403));
        }
    }
    for (template, uri) in [
        ("/api/v1/clusters/{id}", "/api/v1/clusters/no-such-cluster"),
        ("/api/v1/explain", "/api/v1/explain?cluster=no-such-cluster"),
        ("/api/v1/history", "/api/v1/history?cluster=no-such-cluster"),
        ("/api/v1/rollouts/{rollout}", "/api/v1/rollouts/web@1@9.9.9"),
    ] {
        errors.push((r, template, uri.to_owned(), 404));
    }
    errors.push((
        r,
        "/api/v1/clusters/{id}",
        "/api/v1/clusters/%ff".to_owned(),
        400,
    ));
    for (token, template, uri, expected) in errors {
        let (status, body) = c.check(token, template, &uri).await;
        assert_eq!(status, expected, "{uri}: {body}");
    }

    // ClickHouse gone: the routes that read it answer 503.
    let fleetscope_testkit::TestStore { server, .. } = test;
    server.stop();
    let (status, body) = c
        .check(
            r,
            "/api/v1/history",
            &format!("/api/v1/history?cluster={cluster}"),
        )
        .await;
    assert_eq!(status, 503, "{body}");

    // Every route was seen in every content type and status it documents.
    for template in &templates {
        let responses = c.document["paths"][template]["get"]["responses"]
            .as_object()
            .unwrap()
            .clone();
        for (status, _) in responses {
            let status: u16 = status.parse().unwrap();
            let response = documented(&c.document, template, status);
            for media in response["content"].as_object().unwrap().keys() {
                // 503 is seen on one route; its other routes share the same response object.
                if status == 503 {
                    continue;
                }
                assert!(
                    c.seen.contains(&(template.clone(), status, media.clone())),
                    "{template}: {status} {media} was never checked"
                );
            }
        }
    }
}

/// Every route's JSON answer has an example in the document, and every example fits the
/// schema it illustrates (closed, as above): an example cannot drift from the answer.
#[test]
fn every_example_fits_its_schema() {
    let document = closed(serde_json::to_value(fleetscope_hub::document()).unwrap());
    let mut checked = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        let ok = &item["get"]["responses"]["200"]["content"]["application/json"];
        if path == "/api/v1/openapi.json" {
            continue;
        }
        let example = &ok["example"];
        assert!(!example.is_null(), "{path}: no example answer");
        let mut root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": document["components"].clone(),
        });
        for (key, value) in ok["schema"].as_object().unwrap() {
            root[key] = value.clone();
        }
        let validator = jsonschema::validator_for(&root).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(example)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(errors.is_empty(), "{path}: {}", errors.join("\n"));
        checked += 1;
    }
    assert_eq!(checked, document["paths"].as_object().unwrap().len() - 1);
}
