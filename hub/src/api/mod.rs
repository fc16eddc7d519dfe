//! The routes under `/api/v1`. Each handler takes its route's typed query (checked against the
//! parameters the route documents), narrows the question to the caller's scope, and answers
//! from the in-memory index (history also reads the store) with one of the typed answers of
//! [`crate::answers`]. Every answer about pairs uses the model's one drift definition through
//! the index. The `#[utoipa::path]` of each handler is its part of the OpenAPI document, and the
//! router is built from the same list (`routes` in the `openapi` module).

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use fleetscope_model::Timestamp;
use serde::Serialize;

use crate::answers::PairItem;
use crate::auth::Principal;
use crate::params::{csv, ApiError};
use crate::query::Selection;
use crate::state::AppState;
use fleetscope_engine::past::Reach;
use fleetscope_engine::{ClusterRec, Filter, Fleet, Pair};

mod clusters;
mod counts;
mod gate;
mod history;
mod insights;
mod listings;
mod rollouts;
mod versions;

pub use clusters::{__path_cluster, __path_explain, cluster, explain};
pub use counts::{__path_environments, __path_summary, environments, summary};
pub use gate::{__path_gate, gate};
pub use history::{__path_history, history};
pub use insights::{__path_insights_failures, insights_failures};
pub use listings::{__path_drift, __path_stale, drift, stale};
pub use rollouts::{__path_delivery, __path_rollout, __path_rollouts, delivery, rollout, rollouts};
pub use versions::{__path_versions, versions};

/// An answer's body, serialized once: built off the async workers where the answer borrows the
/// fleet, and kept whole by the answer cache for answers that are asked for again and again,
/// so that a hit costs no building and no serializing.
#[derive(Debug)]
pub struct Rendered {
    content_type: &'static str,
    body: axum::body::Bytes,
}

impl Rendered {
    fn json(value: &impl Serialize) -> Rendered {
        Rendered {
            content_type: "application/json",
            body: serde_json::to_vec(value)
                .expect("answers serialize: string keys, no failing impls")
                .into(),
        }
    }

    fn csv(text: String) -> Rendered {
        Rendered {
            content_type: CSV,
            body: text.into(),
        }
    }
}

const CSV: &str = "text/csv; charset=utf-8";

/// An answer: serialized for this request, or taken from the answer cache.
#[derive(Debug)]
pub enum Answer {
    Fresh(Rendered),
    Cached(Arc<Rendered>),
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let (content_type, body) = match self {
            Answer::Fresh(r) => (r.content_type, r.body),
            Answer::Cached(r) => (r.content_type, r.body.clone()),
        };
        ([(header::CONTENT_TYPE, content_type)], body).into_response()
    }
}

/// A value from the path, named like a query parameter when it does not decode (percent
/// escapes that are not UTF-8).
fn path_value(name: &str, value: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    value
        .map(|Path(value)| value)
        .map_err(|_| ApiError::bad(name, "not percent-encoded UTF-8"))
}

/// The caller's scope joined with the asked selection: both must hold.
fn scoped_filter(principal: &Principal, selection: Selection) -> Filter {
    let mut filter = Filter {
        groups: principal.scope.iter().cloned().collect(),
        environment: selection.environment,
        labels: selection.labels,
        app: selection.app,
    };
    filter.groups.extend(selection.group);
    filter
}

/// RFC 3339 text of a time in seconds; `None` for 0 (never).
fn time_string(seconds: u32) -> Option<String> {
    if seconds == 0 {
        return None;
    }
    jiff::Timestamp::from_second(i64::from(seconds))
        .ok()
        .map(|t| t.to_string())
}

/// Rows of `columns` from serialized items: a field that is null is empty, a string is itself,
/// anything else its JSON text. The CSV of a listing is its JSON items, column by column.
fn csv_of<T: Serialize>(columns: &[&str], items: &[T]) -> String {
    csv(
        columns,
        items.iter().map(|item| {
            let value = serde_json::to_value(item).expect("answers serialize");
            columns
                .iter()
                .map(|c| match &value[*c] {
                    serde_json::Value::Null => String::new(),
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        }),
    )
}

/// Runs CPU-heavy work on the fleet off the async workers.
async fn on_fleet<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&Fleet, Timestamp) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        let (fleet, now) = state.view();
        f(&fleet, now)
    })
    .await
    .map_err(|err| ApiError::unavailable(format!("the computation failed: {err}")))
}

/// [`on_fleet`] on the live fleet, or on the fleet as it was at `at`.
async fn on_fleet_at<T: Send + 'static>(
    state: &Arc<AppState>,
    at: Option<Timestamp>,
    reach: Reach,
    f: impl FnOnce(&Fleet, Timestamp) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let Some(at) = at else {
        return on_fleet(state, f).await;
    };
    let fleet = state.fleet_at(at, reach).await?;
    tokio::task::spawn_blocking(move || f(&fleet, at))
        .await
        .map_err(|err| ApiError::unavailable(format!("the computation failed: {err}")))
}

/// What a question about a past moment needs built: one app's pairs when it asks about one
/// app, else the whole fleet.
fn reach_of(filter: &Filter) -> Reach {
    match &filter.app {
        Some(app) => Reach::App(app.clone()),
        None => Reach::Fleet,
    }
}

/// The fleet as a reader sees it now, taken off the async workers (moving the clock may apply
/// what the writer has ready).
async fn snapshot(state: &Arc<AppState>) -> Result<Arc<Fleet>, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || state.view().0)
        .await
        .map_err(|err| ApiError::unavailable(format!("the computation failed: {err}")))
}

/// One pair as the API shows it: the one mapping from the index to the answers.
fn pair_item<'a>(
    fleet: &'a Fleet,
    cluster_id: &'a str,
    cluster: &'a ClusterRec,
    pair: &Pair<'_>,
) -> PairItem<'a> {
    let s = &fleet.symbols;
    let info = cluster.info.as_ref();
    let since = match (pair.observed, pair.desired) {
        (Some(o), _) => o.transitioned_at,
        (None, Some(_)) => pair.desired_since.unwrap_or(0),
        (None, None) => 0,
    };
    PairItem {
        cluster: cluster_id,
        group: info.map(|i| i.group.as_str()),
        environment: info.map(|i| s.text(i.environment)),
        app: s.text(pair.app),
        state: pair.state.as_str(),
        since: time_string(since),
        desired_version: pair.desired.map(|d| s.text(d.version)),
        desired_content_hash: pair.desired.map(|d| s.text(d.content_hash)),
        desired_since: pair.desired_since.and_then(time_string),
        observed_version: pair.observed.map(|o| s.text(o.version)),
        observed_content_hash: pair.observed.map(|o| s.text(o.content_hash)),
        revision: pair.observed.map(|o| s.text(o.revision)),
        health: pair.observed.map(|o| o.health.as_str()),
        sync: pair.observed.map(|o| o.sync.as_str()),
        reason: pair.observed.map(|o| s.text(o.reason)),
        message: pair.observed.map(|o| s.text(o.message)),
        last_seen: cluster.last_seen.and_then(time_string),
    }
}
