//! A deadline on every request: a request still unanswered after its limit is answered
//! `503 Service Unavailable` with `{"error": "..."}` and `Retry-After`, and its work is dropped.
//!
//! ```ignore
//! router.layer(axum::middleware::from_fn_with_state(Duration::from_secs(10), deadline::limit))
//! ```

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// The middleware: runs the rest of the request under `limit`.
pub async fn limit(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(%method, path, limit = ?limit, "request abandoned at its deadline");
            let mut response = (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({
                    "error": format!("no answer within {}; the request was abandoned", describe(limit)),
                })),
            )
                .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            response
        }
    }
}

/// `10 s`, `1.5 s`, `250 ms`.
pub fn describe(limit: Duration) -> String {
    if limit.subsec_millis() == 0 {
        format!("{} s", limit.as_secs())
    } else if limit < Duration::from_secs(1) {
        format!("{} ms", limit.as_millis())
    } else {
        format!("{} s", limit.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_described_in_seconds_or_milliseconds() {
        assert_eq!(describe(Duration::from_secs(10)), "10 s");
        assert_eq!(describe(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(describe(Duration::from_millis(250)), "250 ms");
    }
}
