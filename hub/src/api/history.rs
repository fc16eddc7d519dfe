//! `history`: one cluster's transitions, or a group's, read from the store.

use std::sync::Arc;

use axum::extract::State;
use axum::Extension;
use fleetscope_model::GroupPath;
use serde::Serialize;

use crate::answers::{ClusterHistory, GroupHistory, HistoryEvent};
use crate::auth::Principal;
use crate::params::ApiError;
use crate::query::{ApiQuery, HistoryQuery};
use crate::state::AppState;

use super::*;

const CLUSTER_HISTORY_COLUMNS: &[&str] = &[
    "at", "type", "app", "version", "revision", "health", "sync", "commit", "message",
];

const HISTORY_COLUMNS: &[&str] = &[
    "at", "type", "cluster", "app", "version", "revision", "health", "sync", "commit", "message",
];

/// `GET /api/v1/history`: observed transitions of a cluster (optionally one app) and the
/// desired-state changes of its render group, over a time range; without `cluster`, those of a
/// group subtree and/or an app.
#[utoipa::path(
    get,
    path = "/api/v1/history",
    summary = "History over a time range, newest first: for a cluster, the transitions of its app objects and the desired-state changes of its render group; otherwise the transitions within a group subtree and/or of one app, with the renders of the period (renders only for unscoped tokens).",
    params(HistoryQuery),
    responses(
        (status = 200, description = "With `cluster`, a `ClusterHistory`; without, a `GroupHistory`. With `format=csv`, the events as rows: `at,type,app,version,revision,health,sync,commit,message` for a cluster, with `cluster` after `type` otherwise (fields an event does not have are empty).", content(
            (HistoryAnswer = "application/json"),
            (String = "text/csv"),
        )),
        (status = 404, response = crate::errors::NotFound),
    ),
)]
pub async fn history(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<Answer, ApiError> {
    let Some(cluster_id) = query.cluster.clone() else {
        return group_history(&state, &principal, query).await;
    };
    let (from, to) = query.range(state.now())?;
    let HistoryQuery {
        app,
        limit,
        csv: csv_wanted,
        ..
    } = query;
    let scope = principal.scope.clone();
    let lookup = cluster_id.clone();
    let render_group = on_fleet(&state, move |fleet, _| {
        let cluster = fleet.clusters.get(&lookup)?;
        let info = cluster.info.as_ref()?;
        if scope.as_ref().is_some_and(|s| !info.group.is_within(s)) {
            return None;
        }
        Some(
            cluster
                .render_group
                .map(|g| fleet.symbols.text(g).to_owned()),
        )
    })
    .await?
    .ok_or_else(|| ApiError::not_found(format!("no cluster {cluster_id:?}")))?;
    let store = state.index.store();
    let observed = state
        .store_call(
            "observed history",
            store.recent_history(&cluster_id, app.as_deref(), from, to, limit as u64 + 1),
        )
        .await?;
    let desired = match &render_group {
        Some(group) => {
            state
                .store_call(
                    "desired history",
                    store.desired_history(group, app.as_deref(), from, to),
                )
                .await?
        }
        None => Vec::new(),
    };
    let events = newest_first(
        observed
            .into_iter()
            .map(|r| (r.observed_at, observed_event(r, false)))
            .chain(desired.into_iter().map(|d| {
                (
                    d.desired_since,
                    HistoryEvent::Desired {
                        at: time_string(d.desired_since),
                        app: d.app,
                        version: d.version,
                        render_group: d.render_group,
                        commit: d.commit,
                        render_id: d.render_id,
                        reasons: d.reasons,
                        removed: d.removed != 0,
                    },
                )
            })),
        limit,
    );
    if csv_wanted {
        return Ok(Answer::Fresh(Rendered::csv(csv_of(
            CLUSTER_HISTORY_COLUMNS,
            &events.0,
        ))));
    }
    Ok(Answer::Fresh(Rendered::json(&ClusterHistory {
        cluster: cluster_id,
        render_group,
        from: time_string(fleetscope_store::to_datetime(from)),
        to: time_string(fleetscope_store::to_datetime(to)),
        events: events.0,
        truncated: events.1,
    })))
}

/// The JSON answer of `/api/v1/history`: which one depends on `cluster`.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum HistoryAnswer {
    Cluster(ClusterHistory),
    Group(GroupHistory),
}

/// A stored transition as a history event; `with_cluster` for histories of many clusters.
fn observed_event(r: fleetscope_store::ObservedRow, with_cluster: bool) -> HistoryEvent {
    HistoryEvent::Observed {
        at: time_string(r.observed_at),
        cluster: with_cluster.then_some(r.cluster_id),
        app: r.app,
        kind: r.object_kind,
        name: r.object_name,
        version: r.version,
        revision: r.applied_revision,
        health: r.health,
        sync: r.sync,
        reason: r.reason,
        message: r.message,
        deleted: r.deleted != 0,
    }
}

/// The newest `limit` events, newest first, and whether there were more.
fn newest_first(
    events: impl Iterator<Item = (u32, HistoryEvent)>,
    limit: usize,
) -> (Vec<HistoryEvent>, bool) {
    let mut events: Vec<(u32, HistoryEvent)> = events.collect();
    events.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    let truncated = events.len() > limit;
    (
        events.into_iter().take(limit).map(|(_, e)| e).collect(),
        truncated,
    )
}

/// History of a group subtree (the caller's scope if none is given) and/or one app: observed
/// transitions of its clusters and, for unscoped callers, the renders of the period.
async fn group_history(
    state: &Arc<AppState>,
    principal: &Principal,
    query: HistoryQuery,
) -> Result<Answer, ApiError> {
    let (from, to) = query.range(state.now())?;
    let HistoryQuery {
        group: asked,
        app,
        limit,
        csv: csv_wanted,
        ..
    } = query;
    let answer = |group: Option<&GroupPath>, events: Vec<HistoryEvent>, truncated: bool| {
        if csv_wanted {
            return Answer::Fresh(Rendered::csv(csv_of(HISTORY_COLUMNS, &events)));
        }
        Answer::Fresh(Rendered::json(&GroupHistory {
            group: group.map(|g| g.as_str().to_owned()),
            app: app.clone(),
            from: time_string(fleetscope_store::to_datetime(from)),
            to: time_string(fleetscope_store::to_datetime(to)),
            events,
            truncated,
        }))
    };
    // The narrower of scope and asked group; disjoint ones select nothing.
    let group = match (&principal.scope, &asked) {
        (None, g) => g.clone(),
        (Some(scope), None) => Some(scope.clone()),
        (Some(scope), Some(g)) if g.is_within(scope) => Some(g.clone()),
        (Some(scope), Some(g)) if scope.is_within(g) => Some(scope.clone()),
        (Some(_), Some(g)) => return Ok(answer(Some(g), Vec::new(), false)),
    };
    let store = state.index.store();
    let observed = state
        .store_call(
            "observed transitions",
            store.observed_transitions(
                group.as_ref().map(GroupPath::as_str),
                app.as_deref(),
                from,
                to,
                limit as u64 + 1,
            ),
        )
        .await?;
    let renders = if principal.scope.is_none() {
        state
            .store_call("renders", store.renders_between(from, to, limit as u64 + 1))
            .await?
    } else {
        Vec::new()
    };
    let (events, truncated) = newest_first(
        observed
            .into_iter()
            .map(|r| (r.observed_at, observed_event(r, true)))
            .chain(renders.into_iter().map(|r| {
                (
                    r.rendered_at,
                    HistoryEvent::Render {
                        at: time_string(r.rendered_at),
                        commit: r.commit,
                        render_id: r.render_id,
                        message: r.summary,
                        render_groups: r.render_groups,
                        clusters: r.clusters,
                    },
                )
            })),
        limit,
    );
    Ok(answer(group.as_ref(), events, truncated))
}
