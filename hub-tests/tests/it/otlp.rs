//! Traces reach a real OTLP receiver: a request through the tracing middleware and the query
//! span inside its handler arrive as one trace, with the attributes the hub promises.

use axum::extract::Path;
use axum::routing::get;
use axum::Router;
use fleetscope_hub::telemetry::{self, TelemetryConfig};
use fleetscope_testkit::otlp::OtlpReceiver;
use serde_json::Value;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

/// OTLP span kinds as numbers.
const KIND_SERVER: u64 = 2;
const KIND_CLIENT: u64 = 3;

async fn ping(Path(id): Path<String>) -> String {
    async move {
        tokio::task::yield_now().await;
        format!("pong {id}")
    }
    .instrument(telemetry::query_span("ping", "SELECT"))
    .await
}

fn attribute<'a>(span: &'a Value, key: &str) -> &'a str {
    span["attributes"][key]
        .as_str()
        .unwrap_or_else(|| panic!("span has no attribute {key}: {span:#}"))
}

#[tokio::test]
async fn request_and_query_spans_arrive_as_one_trace() {
    let receiver = OtlpReceiver::start();
    let config = TelemetryConfig::new("hub-under-test").with_endpoint(receiver.endpoint());
    let (layer, guard) = telemetry::init_layer(&config)
        .expect("valid telemetry config")
        .expect("an endpoint is set");
    // The runtime of this test has one thread, so the server's tasks see this subscriber too.
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let app = Router::new()
        .route("/api/v1/ping/{id}", get(ping))
        .layer(axum::middleware::from_fn(telemetry::trace_request));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let address = listener.local_addr().expect("bound address");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let response = reqwest::get(format!("http://{address}/api/v1/ping/42"))
        .await
        .expect("the server answers");
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("a body"), "pong 42");
    server.abort();

    guard
        .flush()
        .unwrap_or_else(|err| panic!("export failed: {err}\n{}", receiver.log()));
    let spans = receiver.spans();
    assert_eq!(spans.len(), 2, "{spans:#?}");

    let request = spans
        .iter()
        .find(|span| span["name"] == "http.request")
        .unwrap_or_else(|| panic!("no http.request span: {spans:#?}"));
    assert_eq!(request["kind"], KIND_SERVER);
    assert_eq!(request["parent_span_id"], "");
    assert_eq!(attribute(request, "http.request.method"), "GET");
    assert_eq!(attribute(request, "http.route"), "/api/v1/ping/{id}");
    assert_eq!(attribute(request, "url.path"), "/api/v1/ping/42");
    assert_eq!(attribute(request, "http.response.status_code"), "200");
    assert_eq!(request["resource"]["service.name"], "hub-under-test");

    let query = spans
        .iter()
        .find(|span| span["name"] == "SELECT ping")
        .unwrap_or_else(|| panic!("no query span: {spans:#?}"));
    assert_eq!(query["kind"], KIND_CLIENT);
    assert_eq!(attribute(query, "db.system"), "clickhouse");
    assert_eq!(attribute(query, "db.operation.name"), "SELECT");
    assert_eq!(query["trace_id"], request["trace_id"]);
    assert_eq!(query["parent_span_id"], request["span_id"]);
    assert_eq!(query["resource"]["service.name"], "hub-under-test");
    assert_eq!(request["trace_id"].as_str().map(str::len), Some(32));

    guard.shutdown().expect("the exporter stops cleanly");
}

#[test]
fn a_failed_export_is_reported() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    let config =
        TelemetryConfig::new("hub-under-test").with_endpoint(format!("http://127.0.0.1:{port}"));
    let (layer, guard) = telemetry::init_layer(&config)
        .expect("valid telemetry config")
        .expect("an endpoint is set");
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _entered = telemetry::query_span("lost", "SELECT").entered();
    });
    assert!(guard.flush().is_err(), "nothing listens on port {port}");
}

/// The hub's own router: a cluster page is one trace, the request span with its route
/// pattern and status, and a ClickHouse query span inside it.
#[tokio::test]
async fn the_hub_router_exports_request_and_clickhouse_spans() {
    use std::sync::Arc;

    let receiver = OtlpReceiver::start();
    let test = fleetscope_testkit::TestStore::start().await;
    let fleet = fleetscope_fixtures::GeneratedFleet::new(fleetscope_fixtures::FleetSpec {
        clusters: 50,
        apps: 3,
        ..fleetscope_fixtures::FleetSpec::default()
    })
    .expect("a valid fleet");
    fleetscope_fixtures::write_fleet(&test.store, &fleet)
        .await
        .expect("the fleet is written");
    let cluster = fleet.cluster(0).cluster.cluster_id;
    let index = fleetscope_engine::Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .expect("the index loads");
    let state = fleetscope_hub::AppState::new(
        Arc::new(index),
        fleet.spec().policy,
        fleetscope_hub::MetricsConfig::default(),
    );
    let app = fleetscope_hub::router(
        Arc::new(state),
        Arc::new(fleetscope_hub::Auth::Insecure),
        false,
    );

    let config = TelemetryConfig::new("fleetscope-hub").with_endpoint(receiver.endpoint());
    let (layer, guard) = telemetry::init_layer(&config)
        .expect("valid telemetry config")
        .expect("an endpoint is set");
    let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let address = listener.local_addr().expect("bound address");
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let response = reqwest::get(format!("http://{address}/api/v1/clusters/{cluster}"))
        .await
        .expect("the hub answers");
    assert_eq!(response.status(), 200);
    server.abort();
    guard
        .flush()
        .unwrap_or_else(|err| panic!("export failed: {err}\n{}", receiver.log()));

    let spans = receiver.spans();
    let request = spans
        .iter()
        .find(|span| span["name"] == "http.request")
        .unwrap_or_else(|| panic!("no http.request span: {spans:#?}"));
    assert_eq!(attribute(request, "http.route"), "/api/v1/clusters/{id}");
    assert_eq!(
        attribute(request, "url.path"),
        format!("/api/v1/clusters/{cluster}")
    );
    assert_eq!(attribute(request, "http.response.status_code"), "200");
    assert_eq!(request["resource"]["service.name"], "fleetscope-hub");
    let query = spans
        .iter()
        .find(|span| span["name"] == "SELECT observed history")
        .unwrap_or_else(|| panic!("no ClickHouse span: {spans:#?}"));
    assert_eq!(attribute(query, "db.system"), "clickhouse");
    assert_eq!(query["trace_id"], request["trace_id"]);
    assert_eq!(query["parent_span_id"], request["span_id"]);
}
