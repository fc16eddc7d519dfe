//! The hub's spans: the request span of the HTTP API and the span around a ClickHouse query.
//! Their export over OTLP is set up by `fleetscope_runtime::telemetry`, as for every service.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::field::Empty;
use tracing::{Instrument, Span};

/// The exporter's set-up, under the names the hub has always given it, so that code exporting
/// the hub's spans needs one import.
pub use fleetscope_runtime::telemetry::{
    init_layer, TelemetryConfig, TelemetryError, TelemetryGuard, HTTP_PROTOBUF, TRACES_PATH,
};

/// Axum middleware (`axum::middleware::from_fn(trace_request)`): one `http.request` server span
/// per request with `http.request.method`, `url.path`, `http.route` (the route's pattern, when a
/// route matched) and, once the handler answered, `http.response.status_code`. Server errors
/// mark the span as failed.
pub async fn trace_request(request: Request, next: Next) -> Response {
    let span = tracing::info_span!(
        "http.request",
        otel.kind = "server",
        http.request.method = %request.method(),
        url.path = %request.uri().path(),
        http.route = Empty,
        http.response.status_code = Empty,
        otel.status_code = Empty,
    );
    if let Some(route) = request.extensions().get::<MatchedPath>() {
        span.record("http.route", route.as_str());
    }
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
    response
}

/// The span around one ClickHouse query: `name` is the query's name in the store's catalog,
/// `sql_kind` its statement (`SELECT`, `INSERT`, ...). The exported span is named
/// `{sql_kind} {name}`. Fields the caller can record later: `db.namespace` (the database),
/// `db.response.returned_rows`, `error.type` and `otel.status_code` (`"error"`).
pub fn query_span(name: &str, sql_kind: &str) -> Span {
    let summary = if name.is_empty() {
        sql_kind.to_owned()
    } else {
        format!("{sql_kind} {name}")
    };
    tracing::info_span!(
        "db.query",
        otel.name = %summary,
        otel.kind = "client",
        db.system = "clickhouse",
        db.system.name = "clickhouse",
        db.operation.name = %sql_kind,
        db.query.summary = %summary,
        db.namespace = Empty,
        db.response.returned_rows = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}
