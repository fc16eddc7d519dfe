//! The ingest route: a report received over HTTP (authenticated, read, decoded, checked
//! against the caller's cluster, validated), stored, and answered; a refusal is counted by its
//! reason.

use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use fleetscope_runtime::clock::now;
use serde_json::json;

use super::auth::AgentAuth;
use super::metrics::{CollectorMetrics, Outcome, Reason, ReportLabels, Stage};
use super::{error_response, with_retry_after, Collector, IngestError, IngestReceipt};
use crate::protocol::{self, DecodeError, ValidReport};

/// `POST /api/v1/ingest`: a report received, validated and stored, or refused with the reason
/// counted.
pub(super) async fn ingest_handler(
    State(collector): State<Collector>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let metrics = collector.metrics().clone();
    let answer = match receive(&collector, &metrics, &headers, body).await {
        Ok(received) => store_received(&collector, &metrics, received).await,
        Err(refusal) => Err(refusal),
    };
    answer.unwrap_or_else(|refusal| {
        metrics.reject(refusal.reason);
        refusal.response
    })
}

/// A request the collector refuses: the reason its metrics count, and the answer.
struct Refusal {
    reason: Reason,
    response: Response,
}

impl Refusal {
    /// A refusal for `reason` answered with `status` and `message` (naming `field`, if any).
    fn new(reason: Reason, status: StatusCode, message: String, field: Option<&str>) -> Refusal {
        Refusal {
            reason,
            response: error_response(status, message, field),
        }
    }
}

/// A valid report, with the kind and number it came with.
struct Received {
    valid: ValidReport,
    kind: &'static str,
    report_seq: u64,
}

/// Authenticates the caller, reads and decodes the body, checks that the caller may report for
/// the report's cluster, and validates the report.
async fn receive(
    collector: &Collector,
    metrics: &CollectorMetrics,
    headers: &HeaderMap,
    body: Body,
) -> Result<Received, Refusal> {
    // The token first: an unknown caller costs no body read and no decompression.
    let allowed = collector.authenticate(headers).map_err(|err| {
        let mut response = error_response(StatusCode::UNAUTHORIZED, err.to_string(), None);
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        Refusal {
            reason: Reason::Unauthorized,
            response,
        }
    })?;
    let bytes = axum::body::to_bytes(body, protocol::MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            Refusal::new(
                Reason::TooLarge,
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "body is larger than the {} bytes allowed; send smaller reports",
                    protocol::MAX_BODY_BYTES
                ),
                None,
            )
        })?;
    metrics.request_bytes.inc_by(bytes.len() as u64);
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    let decoding = Instant::now();
    let report = protocol::decode(&bytes, gzip).map_err(|err| match err {
        DecodeError::DecompressedTooLarge | DecodeError::TooLarge(_) => Refusal::new(
            Reason::TooLarge,
            StatusCode::PAYLOAD_TOO_LARGE,
            err.to_string(),
            None,
        ),
        err => Refusal::new(
            Reason::Malformed,
            StatusCode::BAD_REQUEST,
            err.to_string(),
            None,
        ),
    })?;
    AgentAuth::allows(allowed.as_ref(), &report.cluster).map_err(|err| {
        Refusal::new(
            Reason::Forbidden,
            StatusCode::FORBIDDEN,
            err.to_string(),
            Some("cluster"),
        )
    })?;
    let kind = report.kind.as_str();
    let seq = report.report_seq;
    let validated = report.validate(now());
    metrics.stage(Stage::Decode, kind, decoding.elapsed());
    match validated {
        Ok(valid) => Ok(Received {
            valid,
            kind,
            report_seq: seq,
        }),
        Err(err) => {
            count_report(metrics, kind, Outcome::Rejected);
            Err(Refusal::new(
                Reason::Malformed,
                StatusCode::BAD_REQUEST,
                err.message.clone(),
                Some(&err.field),
            ))
        }
    }
}

/// Stores a received report and answers with what became of it: stored, a duplicate, or
/// refused (unknown cluster, writer queue full, store unavailable).
/// An acknowledgement with the digest of the match rules in force, when there are any.
fn with_match_rules(mut answer: serde_json::Value, collector: &Collector) -> serde_json::Value {
    if let Some(digest) = collector.match_rules_digest() {
        answer["match_rules"] = serde_json::Value::String(digest);
    }
    answer
}

async fn store_received(
    collector: &Collector,
    metrics: &CollectorMetrics,
    received: Received,
) -> Result<Response, Refusal> {
    let Received {
        valid,
        kind,
        report_seq: seq,
    } = received;
    let cluster = valid.cluster.to_string();
    match collector.ingest(valid).await {
        Ok(IngestReceipt::Stored { rows, unchanged }) => {
            count_report(metrics, kind, Outcome::Stored);
            tracing::debug!(cluster, seq, rows, kind, "report stored");
            Ok((
                StatusCode::OK,
                Json(with_match_rules(
                    json!({
                        "status": "stored",
                        "seq": seq,
                        "rows": rows,
                        "unchanged": unchanged,
                    }),
                    collector,
                )),
            )
                .into_response())
        }
        Ok(IngestReceipt::Duplicate {
            acked_seq,
            highest_change_seq,
        }) => {
            count_report(metrics, kind, Outcome::Duplicate);
            if acked_seq > seq {
                // In-order delivery makes a genuine duplicate the highest number acknowledged;
                // a lower one comes from an agent whose counters are behind (it renumbers).
                tracing::info!(
                    cluster,
                    seq,
                    acked_seq,
                    "report numbered below what was acknowledged"
                );
            }
            Ok((
                StatusCode::OK,
                Json(with_match_rules(
                    json!({
                        "status": "duplicate",
                        "seq": seq,
                        "acked_seq": acked_seq,
                        "highest_change_seq": highest_change_seq,
                    }),
                    collector,
                )),
            )
                .into_response())
        }
        Err(err @ IngestError::UnknownCluster(_)) => {
            count_report(metrics, kind, Outcome::Rejected);
            Err(Refusal::new(
                Reason::UnknownCluster,
                StatusCode::FORBIDDEN,
                err.to_string(),
                Some("cluster"),
            ))
        }
        Err(err @ IngestError::Busy(_)) => {
            tracing::warn!(cluster, seq, error = %err, "refusing report: writer queue full");
            Err(Refusal {
                reason: Reason::Backpressure,
                response: with_retry_after(
                    error_response(StatusCode::TOO_MANY_REQUESTS, err.to_string(), None),
                    2,
                ),
            })
        }
        Err(err @ IngestError::Store(_)) => {
            tracing::warn!(cluster, seq, error = %err, "report not stored");
            Err(Refusal {
                reason: Reason::StoreUnavailable,
                response: with_retry_after(
                    error_response(StatusCode::SERVICE_UNAVAILABLE, err.to_string(), None),
                    5,
                ),
            })
        }
    }
}

/// Counts one report of `kind` with its outcome.
fn count_report(metrics: &CollectorMetrics, kind: &'static str, outcome: Outcome) {
    metrics
        .reports
        .get_or_create(&ReportLabels { kind, outcome })
        .inc();
}
