//! OTLP traces: a `tracing` layer that turns spans into OpenTelemetry spans and exports them
//! over OTLP/HTTP (protobuf), the request span for the HTTP API, and the span around a
//! ClickHouse query.
//!
//! Export runs on a thread of its own in batches; [`TelemetryGuard`] flushes what is left and
//! stops it. Spans at INFO and above are exported, whatever the log filter says.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing::field::Empty;
use tracing::{Instrument, Span, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The one OTLP protocol this exporter speaks, as `OTEL_EXPORTER_OTLP_PROTOCOL` names it.
pub const HTTP_PROTOBUF: &str = "http/protobuf";

/// The path an OTLP/HTTP receiver takes traces on, below its base endpoint.
pub const TRACES_PATH: &str = "/v1/traces";

/// Where and as what to export traces. Empty strings count as unset, as an empty environment
/// variable does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// Base URL of an OTLP/HTTP receiver (`OTEL_EXPORTER_OTLP_ENDPOINT`); traces go to
    /// `{endpoint}/v1/traces`.
    pub endpoint: Option<String>,
    /// Full URL for traces (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), used as it is; wins over
    /// `endpoint`.
    pub traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`: only `http/protobuf` is supported; unset means that.
    pub protocol: Option<String>,
    /// The `service.name` resource attribute (`OTEL_SERVICE_NAME`).
    pub service_name: String,
}

impl TelemetryConfig {
    /// No endpoint: nothing is exported until one is set.
    pub fn new(service_name: impl Into<String>) -> TelemetryConfig {
        TelemetryConfig {
            endpoint: None,
            traces_endpoint: None,
            protocol: None,
            service_name: service_name.into(),
        }
    }

    /// With `endpoint` as the receiver's base URL.
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> TelemetryConfig {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// The URL traces are posted to, or `None` when no endpoint is set.
    pub fn traces_url(&self) -> Result<Option<String>, TelemetryError> {
        let (configured, url) = match (set(&self.traces_endpoint), set(&self.endpoint)) {
            (Some(traces), _) => (traces, traces.to_owned()),
            (None, Some(base)) => (base, format!("{}{TRACES_PATH}", base.trim_end_matches('/'))),
            (None, None) => return Ok(None),
        };
        if !(configured.starts_with("http://") || configured.starts_with("https://")) {
            return Err(TelemetryError::InvalidEndpoint(configured.to_owned()));
        }
        Ok(Some(url))
    }
}

fn set(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("OTLP protocol {0:?} is not supported (only {HTTP_PROTOBUF})")]
    UnsupportedProtocol(String),
    #[error("OTLP endpoint {0:?} is not an http:// or https:// URL")]
    InvalidEndpoint(String),
    #[error("OTLP exporter for {url:?}: {message}")]
    Exporter { url: String, message: String },
    #[error("OTLP export: {0}")]
    Export(String),
}

/// Keeps the exporter running. [`TelemetryGuard::flush`] exports every finished span now;
/// dropping the guard (or [`TelemetryGuard::shutdown`]) exports what is left and stops.
#[derive(Debug)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Exports every span ended so far and waits for the receiver to accept them.
    pub fn flush(&self) -> Result<(), TelemetryError> {
        match &self.provider {
            Some(provider) => provider
                .force_flush()
                .map_err(|err| TelemetryError::Export(err.to_string())),
            None => Ok(()),
        }
    }

    /// Exports what is left and stops the exporter.
    pub fn shutdown(mut self) -> Result<(), TelemetryError> {
        match self.provider.take() {
            Some(provider) => provider
                .shutdown()
                .map_err(|err| TelemetryError::Export(err.to_string())),
            None => Ok(()),
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(err) = provider.shutdown() {
                tracing::warn!(error = %err, "OTLP exporter did not shut down cleanly");
            }
        }
    }
}

/// The layer that exports spans as configured, with its guard, or `None` when `config` has no
/// endpoint. Add the layer to the subscriber next to the others and keep the guard until exit.
pub fn init_layer<S>(
    config: &TelemetryConfig,
) -> Result<Option<(impl Layer<S>, TelemetryGuard)>, TelemetryError>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    if let Some(protocol) = set(&config.protocol) {
        if protocol != HTTP_PROTOBUF {
            return Err(TelemetryError::UnsupportedProtocol(protocol.to_owned()));
        }
    }
    let Some(url) = config.traces_url()? else {
        return Ok(None);
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.as_str())
        .build()
        .map_err(|err| TelemetryError::Exporter {
            url: url.clone(),
            message: err.to_string(),
        })?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("fleetscope");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(LevelFilter::INFO);
    Ok(Some((
        layer,
        TelemetryGuard {
            provider: Some(provider),
        },
    )))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_url_follows_the_environment_variable_rules() {
        let config = TelemetryConfig::new("svc");
        assert_eq!(config.traces_url().unwrap(), None);
        let base = config.clone().with_endpoint("http://collector:4318/");
        assert_eq!(
            base.traces_url().unwrap().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        let prefixed = config.clone().with_endpoint("https://otlp.example/ingest");
        assert_eq!(
            prefixed.traces_url().unwrap().as_deref(),
            Some("https://otlp.example/ingest/v1/traces")
        );
        let specific = TelemetryConfig {
            traces_endpoint: Some("http://other:9999/traces".into()),
            ..base.clone()
        };
        assert_eq!(
            specific.traces_url().unwrap().as_deref(),
            Some("http://other:9999/traces")
        );
        let empty = TelemetryConfig {
            endpoint: Some(" ".into()),
            ..config.clone()
        };
        assert_eq!(empty.traces_url().unwrap(), None);
        let bad = config.with_endpoint("collector:4318");
        let err = bad.traces_url().unwrap_err();
        assert_eq!(
            err.to_string(),
            "OTLP endpoint \"collector:4318\" is not an http:// or https:// URL"
        );
    }

    #[test]
    fn only_http_protobuf_is_accepted() {
        let config = TelemetryConfig {
            protocol: Some("grpc".into()),
            ..TelemetryConfig::new("svc").with_endpoint("http://127.0.0.1:4317")
        };
        let err = init_layer::<tracing_subscriber::Registry>(&config)
            .err()
            .expect("grpc is refused");
        assert_eq!(
            err.to_string(),
            "OTLP protocol \"grpc\" is not supported (only http/protobuf)"
        );
        let none = init_layer::<tracing_subscriber::Registry>(&TelemetryConfig::new("svc"))
            .expect("no endpoint is no error");
        assert!(none.is_none());
    }
}
