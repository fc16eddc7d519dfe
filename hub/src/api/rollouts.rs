//! `rollouts`, `rollouts/{rollout}` and `delivery`: every release as a record, how it spread, and
//! the delivery figures of each app.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::Extension;

use crate::answers::{
    AppDelivery, CurvePointItem, DeliveryAnswer, FromVersion, GroupCurve, RolloutAnswer,
    RolloutItem, RolloutsPage, Spread,
};
use crate::auth::Principal;
use crate::params::{encode_cursor, ApiError};
use crate::query::{ApiQuery, DeliveryQuery, RolloutQuery, RolloutsQuery};
use crate::state::AppState;
use fleetscope_engine::rollout_figures::{
    curve, curve_step, members_by_group, percentile, standing_of, CurvePoint, Member, RolloutId,
    RolloutPolicy, Standing,
};
use fleetscope_engine::rollouts::progress::COMPLETE;
use fleetscope_engine::rollouts::Rollout;

use super::*;

/// A rollout as the API shows it, its selected clusters standing as `standing`.
fn rollout_item(rollout: &Rollout, standing: &Standing, status: &'static str) -> RolloutItem {
    let after_start = |t: Option<u32>| t.map(|t| t.saturating_sub(rollout.started_at));
    RolloutItem {
        id: RolloutId::of(rollout).to_string(),
        app: rollout.app.clone(),
        version: rollout.version.clone(),
        render_id: rollout.render_id,
        started_at: time_string(rollout.started_at),
        platform_commit: (!rollout.platform_commit.is_empty())
            .then(|| rollout.platform_commit.clone()),
        committed_at: rollout.committed_at.and_then(time_string),
        status,
        from_versions: rollout
            .from_versions
            .iter()
            .map(|(v, n)| FromVersion {
                version: (!v.is_empty()).then(|| v.clone()),
                clusters: *n,
            })
            .collect(),
        targeted_at_start: rollout.targeted_at_start,
        joined: rollout.joined,
        rolled_back: rollout.rolled_back,
        superseded: rollout.superseded,
        removed: rollout.removed,
        rolled_back_by: rollout.first_rolled_back_by,
        superseded_by: rollout.first_superseded_by,
        targeted: standing.targeted,
        in_sync: standing.in_sync,
        failed: standing.failed,
        stale: standing.stale,
        reached: standing.reached,
        failed_before_reaching: standing.failed_before_reaching,
        seconds_to_50_percent: after_start(standing.milestones[0]),
        seconds_to_90_percent: after_start(standing.milestones[1]),
        seconds_to_99_percent: after_start(standing.milestones[2]),
        seconds_to_100_percent: after_start(standing.milestones[COMPLETE]),
        last_reached_at: rollout.progress.last_reached.and_then(time_string),
    }
}

/// `GET /api/v1/rollouts`: the rollouts, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/api/v1/rollouts",
    summary = "Every rollout (an app's move to one version by one render), newest first, with where its clusters stand and how long it took to reach 50, 90, 99 and 100 % of them.",
    description = "A rollout in waves is one rollout per wave. With `group`, `environment` or `label` (or a scoped token), a rollout is listed when some of its clusters now are selected, and its counts and milestones are of those clusters; its status is the rollout's own. See docs/hub.md, \"Rollouts\", for every rule.",
    params(RolloutsQuery),
    responses((status = 200, body = RolloutsPage, description = "One page.")),
)]
pub async fn rollouts(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<RolloutsQuery>,
) -> Result<Answer, ApiError> {
    let RolloutsQuery {
        selection,
        since,
        status,
        limit,
        cursor,
    } = query;
    let app = selection.app.clone();
    let filter = scoped_filter(&principal, selection);
    let policy = state.rollout_policy;
    let rendered = on_fleet(&state, move |fleet, _| {
        let whole_fleet =
            filter.groups.is_empty() && filter.environment.is_none() && filter.labels.is_empty();
        let mut candidates = Vec::new();
        let mut after_cursor = cursor.is_none();
        for rollout in fleet.rollouts_newest_first(app.as_deref()) {
            if since.is_some_and(|s| i64::from(rollout.started_at) < s.seconds()) {
                // Newest first: every rollout after this one started earlier still.
                break;
            }
            if !after_cursor {
                after_cursor =
                    cursor.as_deref() == Some(RolloutId::of(rollout).to_string().as_str());
                continue;
            }
            let rollout_status = fleet.rollout_status(rollout, &policy);
            if status.is_none_or(|s| s == rollout_status) {
                candidates.push((rollout, rollout_status));
            }
        }
        let mut items = Vec::new();
        let mut next_cursor = None;
        // For the whole fleet every candidate is listed: the page and one more tell whether
        // another page follows. Within a selection a rollout without selected clusters is left
        // out, so candidates are taken in parts until the page is full.
        let part = if whole_fleet {
            limit + 1
        } else {
            limit.max(100)
        };
        'parts: for part in candidates.chunks(part) {
            let listed: Vec<&Rollout> = part.iter().map(|(r, _)| *r).collect();
            let standings = fleet.standings_of_each(&listed, &filter);
            for ((rollout, rollout_status), (standing, _)) in part.iter().zip(standings) {
                if !whole_fleet && standing.targeted == 0 {
                    continue;
                }
                if items.len() == limit {
                    next_cursor = items.last().map(|i: &RolloutItem| encode_cursor(&i.id));
                    break 'parts;
                }
                items.push(rollout_item(rollout, &standing, rollout_status.as_str()));
            }
        }
        Rendered::json(&RolloutsPage { items, next_cursor })
    })
    .await?;
    Ok(Answer::Fresh(rendered))
}

/// Curve points as the API shows them.
fn curve_items(points: Vec<CurvePoint>, start: u32) -> Vec<CurvePointItem> {
    points
        .into_iter()
        .map(|p| CurvePointItem {
            at: time_string(p.at),
            seconds: p.at.saturating_sub(start),
            in_sync: p.in_sync,
            failed: p.failed,
            waiting: p.waiting,
        })
        .collect()
}

/// `GET /api/v1/rollouts/{rollout}`: one rollout with its curves and stragglers.
#[utoipa::path(
    get,
    path = "/api/v1/rollouts/{rollout}",
    summary = "One rollout: its figures, its progress curve (clusters in sync, failed and waiting over time since its start), the same per group at `depth`, and its stragglers.",
    description = "The curves are of the selected clusters it targets now. The step suits its length: the smallest of 1, 5, 15 and 30 minutes, 1, 3, 6 and 12 hours and 1 day that keeps a curve within 120 points; a curve ends now, or one step after the rollout completed. Stragglers are its clusters whose pair is not `in_sync` now, by cluster id. An id no rollout has is a 404.",
    params(("rollout" = String, Path, description = "The rollout's `id`: `app@render@version`.", example = "checkout@1795338000000@1.5.0"), RolloutQuery),
    responses(
        (status = 200, body = RolloutAnswer, description = "The rollout."),
        (status = 404, body = crate::answers::ErrorBody, description = "No rollout has this id."),
    ),
)]
pub async fn rollout(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    id: Result<Path<String>, PathRejection>,
    ApiQuery(query): ApiQuery<RolloutQuery>,
) -> Result<Answer, ApiError> {
    let text = path_value("rollout", id)?;
    let id = RolloutId::parse(&text)
        .ok_or_else(|| ApiError::bad("rollout", format!("{text:?} is not app@render@version")))?;
    let RolloutQuery {
        selection,
        depth,
        limit,
        cursor,
    } = query;
    let filter = scoped_filter(&principal, selection);
    let policy = state.rollout_policy;
    let rendered = on_fleet(&state, move |fleet, now| {
        let Some((_, rollout)) = fleet.find_rollout(&id) else {
            return Err(ApiError::not_found(format!("no rollout {id}")));
        };
        let whole_fleet =
            filter.groups.is_empty() && filter.environment.is_none() && filter.labels.is_empty();
        let members = fleet.rollout_members(rollout, &filter);
        let standing = standing_of(rollout, &members, whole_fleet);
        let status = fleet.rollout_status(rollout, &policy);
        let start = rollout.started_at;
        let now = u32::try_from(now.seconds()).unwrap_or(u32::MAX);
        let step = curve_step(start, now);
        let end = match rollout.progress.milestones[COMPLETE] {
            Some(done) if whole_fleet => done.saturating_add(step).min(now),
            _ => now,
        };
        let step = curve_step(start, end);
        let groups = if depth == 0 {
            Vec::new()
        } else {
            members_by_group(&members, depth)
                .into_iter()
                .map(|(group, indexes)| {
                    let of_group: Vec<Member<'_>> =
                        indexes.into_iter().map(|i| members[i]).collect();
                    GroupCurve {
                        group,
                        targeted: of_group.len() as u32,
                        curve: curve_items(curve(&of_group, start, end, step), start),
                    }
                })
                .collect()
        };
        let app_symbol = fleet.symbols.find(&rollout.app);
        let mut stragglers = Vec::new();
        let mut next_cursor = None;
        for m in &members {
            if m.state == fleetscope_model::DriftState::InSync
                || cursor.as_deref().is_some_and(|c| m.cluster <= c)
            {
                continue;
            }
            if stragglers.len() == limit {
                next_cursor = Some(encode_cursor(
                    stragglers.last().map_or("", |p: &PairItem<'_>| p.cluster),
                ));
                break;
            }
            if let Some(pair) = app_symbol.and_then(|a| fleet.current_pair(m.rec, a)) {
                stragglers.push(pair_item(fleet, m.cluster, m.rec, &pair));
            }
        }
        let answer = RolloutAnswer {
            rollout: rollout_item(rollout, &standing, status.as_str()),
            step_seconds: step,
            curve: curve_items(curve(&members, start, end, step), start),
            groups,
            stragglers,
            next_cursor,
        };
        Ok(Rendered::json(&answer))
    })
    .await??;
    Ok(Answer::Fresh(rendered))
}

/// A spread of sorted durations.
fn spread(sorted: &[u32]) -> Spread {
    Spread {
        count: sorted.len() as u32,
        median_seconds: percentile(sorted, 50),
        p90_seconds: percentile(sorted, 90),
    }
}

/// `GET /api/v1/delivery`: delivery figures per app over a window.
#[utoipa::path(
    get,
    path = "/api/v1/delivery",
    summary = "Delivery figures per app over a window: deployment frequency, lead time for changes, change failure rate and time to restore, each with the count it is built on.",
    description = "Built from the rollouts (see `rollouts`) of the selected clusters: with `group`, `environment` or `label` (or a scoped token) each rollout's milestones and failures are those of its selected clusters. Durations are nearest-rank percentiles. See docs/hub.md, \"Delivery figures\", for every rule.",
    params(DeliveryQuery),
    responses((status = 200, body = DeliveryAnswer, description = "The figures.")),
)]
pub async fn delivery(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<DeliveryQuery>,
) -> Result<Answer, ApiError> {
    let DeliveryQuery { selection, window } = query;
    let app = selection.app.clone();
    let filter = scoped_filter(&principal, selection);
    let policy: RolloutPolicy = state.rollout_policy;
    let rendered = on_fleet(&state, move |fleet, now| {
        let to = u32::try_from(now.seconds()).unwrap_or(u32::MAX);
        let from = to.saturating_sub(window);
        // Without an app named, the apps whose rollouts reached the selection: a scoped token
        // learns no app name from outside its subtree.
        let apps: Vec<String> = match &app {
            Some(app) => vec![app.clone()],
            None => fleet
                .rollouts
                .apps
                .keys()
                .filter(|app| fleet.app_reaches(app, &filter))
                .cloned()
                .collect(),
        };
        let apps = apps
            .into_iter()
            .map(|app| {
                let d = fleet.delivery(&app, &filter, from, to, &policy);
                AppDelivery {
                    deployments_per_day: f64::from(d.deployments) * 86_400.0 / f64::from(window),
                    deployments: d.deployments,
                    lead_time: spread(&d.lead_times),
                    changes: d.changes,
                    failed_changes: d.failed_changes,
                    change_failure_rate: (d.changes > 0)
                        .then(|| f64::from(d.failed_changes) / f64::from(d.changes)),
                    time_to_restore: spread(&d.restore_times),
                    app,
                }
            })
            .collect();
        Rendered::json(&DeliveryAnswer {
            from: time_string(from),
            to: time_string(to),
            failure_budget_percent: policy.failure_budget_percent,
            apps,
        })
    })
    .await?;
    Ok(Answer::Fresh(rendered))
}
