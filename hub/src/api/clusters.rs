//! `clusters/{id}` and `explain`: one cluster's page, and why one app is desired there.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::Extension;

use crate::answers::{
    ClusterPage, DesiredApp, ExplainAnswer, Explained, NotDesiredApp, ObjectTransition,
};
use crate::auth::Principal;
use crate::params::ApiError;
use crate::query::{ApiQuery, ClusterQuery, ExplainQuery};
use crate::state::AppState;
use fleetscope_engine::past::Reach;

use super::*;

/// The most transitions a cluster page shows (the newest).
const PAGE_HISTORY: u64 = 200;

/// `GET /api/v1/clusters/{id}`: one cluster, every app desired and actual, last seen, and
/// its recent history.
#[utoipa::path(
    get,
    path = "/api/v1/clusters/{id}",
    summary = "One cluster: every app desired and actual, last seen, and recent history.",
    params(("id" = String, Path, description = "The cluster id.", example = "berlin-01"), ClusterQuery),
    responses(
        (status = 200, body = ClusterPage, description = "The cluster."),
        (status = 404, response = crate::errors::NotFound),
    ),
)]
pub async fn cluster(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    id: Result<Path<String>, PathRejection>,
    ApiQuery(query): ApiQuery<ClusterQuery>,
) -> Result<Answer, ApiError> {
    let id = path_value("id", id)?;
    let hours = query.history_hours;
    fleetscope_model::ClusterId::parse(&id).map_err(|err| ApiError::bad("id", err.to_string()))?;
    // At a past moment, the history reaches back from that moment.
    let now = query.at.unwrap_or_else(|| state.now());
    let from = now.plus_seconds(-((hours * 3_600.0) as i64));
    // The page is built from one snapshot, taken first: a cluster that is not there within the
    // caller's scope is a 404 without reading ClickHouse.
    let fleet = match query.at {
        None => snapshot(&state).await?,
        Some(at) => state.fleet_at(at, Reach::Cluster(id.clone())).await?,
    };
    let in_scope = fleet
        .clusters
        .get(&id)
        .and_then(|c| c.info.as_ref())
        .is_some_and(|i| {
            principal
                .scope
                .as_ref()
                .is_none_or(|s| i.group.is_within(s))
        });
    if !in_scope {
        return Err(ApiError::not_found(format!("no cluster {id:?}")));
    }
    // `history_hours=0` asks for none: no ClickHouse read at all (a poller that only wants the
    // apps' states costs the store nothing).
    let history = if hours <= 0.0 {
        Vec::new()
    } else {
        let store = state.index.store();
        state
            .store_call(
                "observed history",
                store.recent_history(&id, None, from, now.plus_seconds(1), PAGE_HISTORY),
            )
            .await?
    };
    let history: Vec<ObjectTransition> = history
        .into_iter()
        .map(|r| ObjectTransition {
            at: time_string(r.observed_at),
            kind: r.object_kind,
            namespace: r.object_namespace,
            name: r.object_name,
            app: r.app,
            version: r.version,
            revision: r.applied_revision,
            health: r.health,
            sync: r.sync,
            reason: r.reason,
            message: r.message,
            deleted: r.deleted != 0,
        })
        .collect();
    let rendered = tokio::task::spawn_blocking(move || {
        let cluster = fleet.clusters.get(&id)?;
        let info = cluster.info.as_ref()?;
        let s = &fleet.symbols;
        let apps = fleet
            .current_pairs(cluster)
            .iter()
            .map(|p| pair_item(&fleet, &id, cluster, p))
            .collect();
        Some(Rendered::json(&ClusterPage {
            cluster: &id,
            group: info.group.as_str(),
            environment: s.text(info.environment),
            reconciler: s.text(info.reconciler),
            labels: info.labels(s),
            render_group: cluster.render_group.map(|g| s.text(g)),
            last_seen: cluster.last_seen.and_then(time_string),
            stale: cluster.is_stale_now(),
            agent_version: cluster.agent_version.map(|a| s.text(a)),
            apps,
            history,
        }))
    })
    .await
    .map_err(|err| ApiError::unavailable(format!("the computation failed: {err}")))?
    .expect("the cluster was found in this snapshot");
    Ok(Answer::Fresh(rendered))
}

/// `GET /api/v1/explain`: why an app is (or is not) desired on a cluster.
#[utoipa::path(
    get,
    path = "/api/v1/explain",
    summary = "Why an app is (or is not) desired on a cluster: policies, render group, commit.",
    description = "The reasons are the cluster's own (from its reason set), the same list in the same order as `fleetscope render explain` gives for the commit the hub last loaded, even where the cluster shares its render group with clusters that other policies brought the same apps to.",
    params(ExplainQuery),
    responses(
        (status = 200, body = ExplainAnswer, description = "The cluster's apps, explained."),
        (status = 404, response = crate::errors::NotFound),
    ),
)]
pub async fn explain(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<ExplainQuery>,
) -> Result<Answer, ApiError> {
    let ExplainQuery { cluster, app } = query;
    let scope = principal.scope.clone();
    let lookup = cluster.clone();
    let rendered = on_fleet(&state, move |fleet, _| {
        let record = fleet.clusters.get(&lookup)?;
        let info = record.info.as_ref()?;
        if scope.as_ref().is_some_and(|s| !info.group.is_within(s)) {
            return None;
        }
        let s = &fleet.symbols;
        let render_group = record.render_group.map(|g| s.text(g));
        let mut apps: Vec<Explained<'_>> = fleet
            .current_pairs(record)
            .iter()
            .filter(|p| app.as_deref().is_none_or(|a| s.text(p.app) == a))
            .map(|p| match p.desired {
                Some(d) => {
                    // The cluster's own reasons; the render group's only for desired state
                    // published before reason sets existed.
                    let why = fleet.reasons_of(record, p.app);
                    Explained::Desired(DesiredApp {
                        app: s.text(p.app),
                        desired: true,
                        version: s.text(d.version),
                        reasons: why.map_or(d.reasons.as_ref(), |r| r.reasons.as_ref()),
                        pinned_by: why.and_then(|r| r.pinned_by).map(|p| s.text(p)),
                        render_group,
                        commit: s.text(d.commit),
                        render_id: d.render_id,
                        desired_since: p.desired_since.and_then(time_string),
                        state: p.state.as_str(),
                    })
                }
                None => Explained::NotDesired(NotDesiredApp {
                    app: s.text(p.app).to_owned(),
                    desired: false,
                    explanation: format!("runs on the cluster, but no policy of render group {} selects it", render_group.unwrap_or("(none)")),
                    state: Some(p.state.as_str()),
                }),
            })
            .collect();
        if let Some(a) = &app {
            if apps.is_empty() {
                apps.push(Explained::NotDesired(NotDesiredApp {
                    app: a.clone(),
                    desired: false,
                    explanation: match render_group {
                        Some(g) => format!("no policy reaching render group {g} selects {a}, and the cluster does not run it"),
                        None => "the cluster belongs to no render group yet (not rendered, or registered by the collector only)".to_owned(),
                    },
                    state: None,
                }));
            }
        }
        Some(Rendered::json(&ExplainAnswer {
            cluster: lookup,
            group: info.group.as_str(),
            render_group,
            apps,
        }))
    })
    .await?
    .ok_or_else(|| ApiError::not_found(format!("no cluster {cluster:?}")))?;
    Ok(Answer::Fresh(rendered))
}
