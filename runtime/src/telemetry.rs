//! Logs and traces, set up the same way for every subcommand: log lines on stderr as the log
//! filter lets them through and, when an OTLP endpoint is configured, spans exported over
//! OTLP/HTTP (protobuf) through a `tracing` layer that turns them into OpenTelemetry spans.
//!
//! Export runs on a thread of its own in batches; [`TelemetryGuard`] flushes what is left and
//! stops it. Spans at INFO and above are exported, whatever the log filter says.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer};

/// The filter used when the one given does not parse.
pub const FALLBACK_LOG_FILTER: &str = "warn";

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

/// Installs the process's subscriber: log lines on stderr as `log_filter` (tracing's
/// `EnvFilter` syntax) lets them through and, when `otlp` has an endpoint, spans exported over
/// OTLP. Neither a bad filter nor a bad OTLP setting stops the process: a warning on stderr
/// says what is ignored (an invalid filter falls back to [`FALLBACK_LOG_FILTER`]), since a
/// service that refuses to start over its logging is worse than one that logs less.
///
/// Call it once, inside the Tokio runtime: the exporter's guard is held by a task that never
/// finishes, so it is dropped, and the last spans exported, when the runtime shuts down.
pub fn init(log_filter: &str, otlp: &TelemetryConfig) {
    let filter = EnvFilter::try_new(log_filter).unwrap_or_else(|err| {
        eprintln!("warning: ignoring invalid log filter {log_filter:?}: {err}");
        EnvFilter::new(FALLBACK_LOG_FILTER)
    });
    let (otlp, guard) = init_layer(otlp)
        .unwrap_or_else(|err| {
            eprintln!("warning: not exporting traces: {err}");
            None
        })
        .unzip();
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .with(otlp)
        .init();
    if let Some(guard) = guard {
        tokio::spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await
        });
    }
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
