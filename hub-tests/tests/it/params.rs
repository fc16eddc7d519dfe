//! The hub's parameters and listings, driven through its router in process over a small
//! simulated fleet in a private ClickHouse: malformed values (a cursor that is not ASCII, a
//! fractional depth, an unknown parameter on any route) are a 400 naming the parameter, the
//! stale listing pages completely, and the version inventory counts desired versions per group.
//! A property test sends arbitrary values to every parameter of every route in the route table.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use fleetscope_hub::router;
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::Value;
use tower::ServiceExt;

use crate::common;

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
    for route in common::documented_routes() {
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

/// A value for a parameter: text, and whether it goes into the URL as it is (only what a URL
/// cannot hold is escaped, so percent escapes of its own, even broken ones, stay escapes) or
/// fully percent-encoded.
#[derive(Debug, Clone)]
struct Fuzzed {
    text: String,
    raw: bool,
    /// Taken from values the route is known to accept.
    valid: bool,
}

/// Percent-encodes `text` for a query or path: every byte but the unreserved ones, and `%`
/// too unless `raw`.
fn escape(text: &str, raw: bool) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) || (raw && byte == b'%') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// What the hub reads from a raw value: percent escapes decoded where they are complete,
/// bytes that are not UTF-8 replaced.
fn decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Arbitrary values: any text (non-ASCII and control characters included), numbers huge,
/// negative and fractional, empty, percent escapes good and broken.
fn arbitrary_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "\\PC{0,12}",
        "[0-9]{12,40}",
        "-[0-9]{1,20}",
        any::<f64>().prop_map(|f| f.to_string()),
        "[0-9]{1,3}\\.[0-9]{1,3}",
        "[0-9]{1,2}[eE][+-]?[0-9]{1,3}",
        Just(String::new()),
        "(%[0-9a-fA-F]{2}){1,6}",
        "%[^0-9a-fA-F]?|%[0-9a-fA-F]",
        "(inf|NaN|-0|\\+1|0x1f|1_000|１２)",
        "[a-z0-9/=,-]{0,20}",
    ]
}

/// What every route is fuzzed with, as route order: which parameter (an index into the route's
/// parameters, or an unknown name), and its value one to three times.
#[derive(Debug, Clone)]
struct Case {
    per_route: Vec<(usize, Option<String>, Vec<Fuzzed>)>,
}

fn case(samples: Arc<BTreeMap<&'static str, String>>) -> impl Strategy<Value = Case> {
    let routes = common::documented_routes();
    let one = move |route: usize| {
        let samples = samples.clone();
        let count = routes[route].params.len().max(1);
        (
            0..count,
            proptest::option::weighted(0.1, "[a-z_]{1,10}|\\PC{1,4}"),
            proptest::collection::vec((arbitrary_text(), any::<bool>(), any::<bool>()), 1..=3),
        )
            .prop_map(move |(index, unknown, values)| {
                let name = routes[route].params.get(index).map(|p| p.0);
                let sample = name.and_then(|n| samples.get(n));
                let values = values
                    .into_iter()
                    .map(|(text, raw, use_sample)| match sample {
                        Some(valid) if use_sample => Fuzzed {
                            text: valid.clone(),
                            raw: false,
                            valid: true,
                        },
                        _ => Fuzzed {
                            text,
                            raw,
                            valid: false,
                        },
                    })
                    .collect::<Vec<_>>();
                (index, unknown, values)
            })
    };
    (0..routes.len())
        .map(one)
        .collect::<Vec<_>>()
        .prop_map(|per_route| Case { per_route })
}

/// Alternatives a route needs exactly one of: its base request carries the first unless the
/// fuzzed parameter is one of them.
const EITHER: &[(&str, &[&str])] = &[("/api/v1/gate", &["version", "commit"])];

/// The request for one route with `parameter` set to `values` (or an unknown parameter), and
/// what it must answer.
async fn check_route(
    app: &axum::Router,
    document: &Value,
    samples: &BTreeMap<&'static str, String>,
    route: &common::RouteDoc,
    (index, unknown, values): &(usize, Option<String>, Vec<Fuzzed>),
) -> Result<(), TestCaseError> {
    // The parameter under test: an unknown name, or one of the route's.
    let (name, place, description) = match (unknown, route.params.get(*index)) {
        (Some(_), _) | (None, None) => {
            let name = unknown.clone().unwrap_or_else(|| "x".to_owned());
            if route.params.iter().any(|p| p.0 == name) {
                return Ok(());
            }
            (name, "query", "")
        }
        (None, Some(p)) => (p.0.to_owned(), p.1, p.4),
    };
    let known = route.params.iter().any(|p| p.0 == name);
    let alternatives = EITHER
        .iter()
        .find(|(path, _)| *path == route.path)
        .map_or(&[][..], |(_, names)| *names);
    // The base: required parameters and the first alternative, with values the route accepts.
    let mut path = route.path.to_owned();
    let mut query: Vec<String> = Vec::new();
    for p in &route.params {
        let needed = p.2 || alternatives.first() == Some(&p.0);
        if p.0 == name
            || !needed
            || (alternatives.contains(&p.0) && alternatives.contains(&name.as_str()))
        {
            continue;
        }
        let value = &samples[p.0];
        match p.1 {
            "path" => path = path.replace(&format!("{{{}}}", p.0), &escape(value, false)),
            _ => query.push(format!("{}={}", p.0, escape(value, false))),
        }
    }
    if place == "path" {
        let value = &values[0];
        path = path.replace(&format!("{{{name}}}"), &escape(&value.text, value.raw));
    } else {
        for value in values {
            query.push(format!(
                "{}={}",
                escape(&name, false),
                escape(&value.text, value.raw)
            ));
        }
    }
    let uri = if query.is_empty() {
        path
    } else {
        format!("{path}?{}", query.join("&"))
    };
    let reply = get(app, &uri).await;
    prop_assert!(reply.status < 500, "{uri}: {} {}", reply.status, reply.body);
    prop_assert!(!reply.body.is_empty(), "{uri}: an empty answer");
    let documented = document["paths"][route.path]["get"]["responses"]
        .as_object()
        .expect("every route documents its responses");
    prop_assert!(
        documented.contains_key(&reply.status.to_string()),
        "{uri}: {} is not documented for {}: {}",
        reply.status,
        route.path,
        reply.body
    );
    let repeated = place == "query" && values.len() > 1 && !description.contains("repeatable");
    // What the table declares: an integer is decimal digits, a number a finite decimal number.
    let kind = route
        .params
        .iter()
        .find(|p| p.0 == name)
        .map_or("", |p| p.3);
    let malformed = values.iter().any(|v| {
        let text = if v.raw {
            decoded(&v.text)
        } else {
            v.text.clone()
        };
        match kind {
            "integer" => text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()),
            "number" => !text.parse::<f64>().is_ok_and(f64::is_finite),
            _ => false,
        }
    });
    if malformed {
        prop_assert_eq!(reply.status, 400, "{}: {}", uri, reply.body);
    }
    if !known || repeated {
        prop_assert_eq!(reply.status, 400, "{}: {}", uri, reply.body);
    }
    if values.iter().all(|v| v.valid) && known && !repeated {
        prop_assert_ne!(
            reply.status,
            400,
            "{}: a valid value refused: {}",
            uri,
            reply.body
        );
    }
    match reply.status {
        400 => {
            let error: Value = serde_json::from_str(&reply.body)
                .map_err(|err| TestCaseError::fail(format!("{uri}: {err}: {}", reply.body)))?;
            prop_assert_eq!(
                &error["parameter"],
                &Value::String(name.clone()),
                "{}: {}",
                uri,
                reply.body
            );
            let message = error["error"].as_str().unwrap_or_default();
            prop_assert!(
                message.starts_with(&format!("{name}: ")),
                "{uri}: {message}"
            );
            prop_assert!(!message.ends_with('.'), "{uri}: {message}");
        }
        200 if reply.kind.starts_with("application/json") => {
            prop_assert!(
                serde_json::from_str::<Value>(&reply.body).is_ok(),
                "{uri}: {}",
                reply.body
            );
        }
        _ => {}
    }
    Ok(())
}

/// A hub over a small simulated fleet in a private ClickHouse, and a value each route accepts
/// for every parameter a request needs (taken from the fleet's own answers).
async fn sampled_hub() -> (
    fleetscope_testkit::TestStore,
    axum::Router,
    BTreeMap<&'static str, String>,
) {
    let (test, fleet) = common::simulated_fleet(200, 4).await;
    let spec = fleet.spec().clone();
    let state = common::hub_state(&test, &fleet, MetricsConfig::default()).await;
    let app = router(Arc::new(state), Arc::new(Auth::Insecure), false);
    let drift = ok(&app, "/api/v1/drift?limit=1").await;
    let cluster = drift["items"][0]["cluster"].as_str().unwrap().to_owned();
    let app_name = drift["items"][0]["app"].as_str().unwrap().to_owned();
    let page = ok(&app, &format!("/api/v1/clusters/{cluster}")).await;
    let (key, value) = page["labels"]
        .as_object()
        .and_then(|l| l.iter().next())
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .expect("clusters have labels");
    let versions = ok(&app, &format!("/api/v1/apps/{app_name}/versions")).await;
    let version = versions["desired"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let rollouts = ok(&app, "/api/v1/rollouts?limit=1").await;
    let rollout = rollouts["items"][0]["id"]
        .as_str()
        .expect("the fleet has a rollout")
        .to_owned();
    let group = page["group"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let samples: BTreeMap<&'static str, String> = [
        ("id", cluster.clone()),
        ("cluster", cluster),
        ("app", app_name),
        ("group", group),
        (
            "environment",
            page["environment"].as_str().unwrap().to_owned(),
        ),
        ("label", format!("{key}={value}")),
        ("depth", "2".to_owned()),
        ("limit", "5".to_owned()),
        ("state", "failed,stale".to_owned()),
        ("format", "csv".to_owned()),
        ("version", version),
        ("commit", "0123abcd".to_owned()),
        ("threshold", "0.5".to_owned()),
        ("history_hours", "48".to_owned()),
        ("from", (spec.now.seconds() - 3_600).to_string()),
        ("to", "2027-01-15T09:00:00Z".to_owned()),
        ("rollout", rollout),
        ("since", (spec.now.seconds() - 86_400).to_string()),
        ("status", "complete".to_owned()),
        ("window", "7d".to_owned()),
    ]
    .into_iter()
    .collect();
    (test, app, samples)
}

/// Every parameter of every route in the route table (a new route or parameter is covered
/// without a change here), with arbitrary values, repeated or not, and unknown parameters:
/// never a 5xx, a panic or an empty answer; only statuses the document lists; a 400 always
/// names the parameter at fault; a parameter that does not repeat is refused when repeated;
/// values known to be good are not refused.
#[test]
fn no_parameter_value_breaks_any_route() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (_test, app, samples) = runtime.block_on(sampled_hub());
    let document = serde_json::to_value(fleetscope_hub::document()).unwrap();
    // Every parameter the table lists has a good value here, or the base requests break.
    for route in common::documented_routes() {
        for p in route.params.iter().filter(|p| p.2) {
            assert!(
                samples.contains_key(p.0),
                "no good value for {} of {}",
                p.0,
                route.path
            );
        }
    }
    let samples = Arc::new(samples);
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&case(samples.clone()), |case| {
        runtime.block_on(async {
            for (route, fuzzed) in common::documented_routes().iter().zip(&case.per_route) {
                check_route(&app, &document, &samples, route, fuzzed).await?;
            }
            Ok(())
        })
    });
    if let Err(err) = result {
        panic!("{err}");
    }
}

/// Every bound the OpenAPI document states for a parameter is the one the hub enforces: at
/// the documented minimum and maximum the parameter is accepted, one step beyond either it is a
/// 400 naming it (a step is 1 for an integer, 0.001 for a number).
#[tokio::test]
async fn every_documented_bound_is_the_one_enforced() {
    let (_test, app, samples) = sampled_hub().await;
    let document = serde_json::to_value(fleetscope_hub::document()).unwrap();
    let mut checked = 0;
    for route in common::documented_routes() {
        let alternatives = EITHER
            .iter()
            .find(|(path, _)| *path == route.path)
            .map_or(&[][..], |(_, names)| *names);
        let parameters = document["paths"][route.path]["get"]["parameters"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for parameter in &parameters {
            let name = parameter["name"].as_str().unwrap();
            let schema = &parameter["schema"];
            let (Some(minimum), Some(maximum)) =
                (schema["minimum"].as_f64(), schema["maximum"].as_f64())
            else {
                continue;
            };
            let integer = schema["type"] == "integer";
            let step = if integer { 1.0 } else { 0.001 };
            let text = |value: f64| {
                if integer {
                    format!("{}", value as i64)
                } else {
                    format!("{value}")
                }
            };
            // The base: the route's required parameters and first alternative.
            let mut path = route.path.to_owned();
            let mut query: Vec<String> = Vec::new();
            for p in &route.params {
                let needed = p.2 || alternatives.first() == Some(&p.0);
                if p.0 == name || !needed {
                    continue;
                }
                match p.1 {
                    "path" => path = path.replace(&format!("{{{}}}", p.0), &samples[p.0]),
                    _ => query.push(format!("{}={}", p.0, escape(&samples[p.0], false))),
                }
            }
            let uri = |value: f64| {
                let mut query = query.clone();
                query.push(format!("{name}={}", escape(&text(value), false)));
                format!("{path}?{}", query.join("&"))
            };
            for accepted in [minimum, maximum] {
                let reply = get(&app, &uri(accepted)).await;
                let refused_for_it = reply.status == 400 && reply.json()["parameter"] == name;
                assert!(
                    !refused_for_it,
                    "{}: the documented bound {} is refused: {}",
                    uri(accepted),
                    text(accepted),
                    reply.body
                );
            }
            for beyond in [minimum - step, maximum + step] {
                assert_names(&get(&app, &uri(beyond)).await, &uri(beyond), name);
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 5,
        "only {checked} bounded parameters found in the document"
    );
}
