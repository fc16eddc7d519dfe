//! `gate`: the rollout gate's verdict over the engine's tally.

use std::sync::Arc;

use axum::extract::State;
use axum::Extension;

use crate::answers::GateVerdict;
use crate::answers::{GateAnswer, HoldingBack};
use crate::auth::Principal;
use crate::params::{encode_cursor, ApiError};
use crate::query::{ApiQuery, GateQuery};
use crate::state::AppState;

use super::*;

/// `GET /api/v1/gate`: for an app at a version (or a render commit) within a group, the share
/// of targeted clusters in sync (for at least `soak`), the failed and stale rules, a verdict
/// against `threshold`, and a page of the clusters holding the gate back ([`fleetscope_engine::gate`]).
#[utoipa::path(
    get,
    path = "/api/v1/gate",
    summary = "Rollout gate: for an app version (or render commit) within a selection, the share of targeted clusters in sync (for at least `soak`), a pass/fail verdict with the rule that decided it, and the clusters holding the gate back.",
    description = "A targeted cluster is a selected cluster whose desired state of `app` is `version` (or was published by `commit`); stale clusters count, in the `stale` state, unless `stale=exclude` leaves them out (`stale=fail` fails the gate while any is stale). The rules are checked in order: nothing targeted fails; `stale=fail` with a stale targeted cluster fails; more `failed` clusters than `max_failed` allows fails; otherwise the verdict is `pass` when `share_soaked >= threshold`. `holding_back` is paged like the other listings (`limit`, `cursor`, `next_cursor`), by cluster id; the counts always cover every targeted cluster, and each page reads the fleet anew.",
    params(GateQuery),
    responses((status = 200, body = GateAnswer, description = "The verdict.")),
)]
pub async fn gate(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<GateQuery>,
) -> Result<Answer, ApiError> {
    let GateQuery {
        at,
        selection,
        rules,
        max_failed,
        limit,
        cursor,
    } = query;
    let group = selection.group.as_ref().map(|g| g.as_str().to_owned());
    let filter = scoped_filter(&principal, selection);
    let reach = Reach::App(rules.app.clone());
    let rendered = on_fleet_at(&state, at, reach, move |fleet, _| {
        let tally =
            fleetscope_engine::gate::tally(fleet, &filter, &rules, limit, cursor.as_deref());
        Rendered::json(&GateAnswer {
            app: &rules.app,
            version: rules.version.as_deref(),
            commit: rules.commit.as_deref(),
            group: group.as_deref(),
            targeted_clusters: tally.targeted,
            in_sync: tally.in_sync,
            by_state: tally.by_state.clone(),
            share_in_sync: tally.share(tally.in_sync),
            threshold: rules.threshold,
            verdict: if tally.pass {
                GateVerdict::Pass
            } else {
                GateVerdict::Fail
            },
            reason: fleetscope_engine::gate::reason(&tally, &rules),
            rule: tally.rule.into(),
            soak_seconds: rules.soak,
            soaked: tally.soaked,
            share_soaked: tally.share(tally.soaked),
            failed: tally.failed,
            max_failed: max_failed.as_deref(),
            failed_allowed: tally.failed_allowed,
            stale: rules.stale.into(),
            stale_clusters: tally.stale,
            holding_back: tally
                .holding_back
                .iter()
                .map(|h| HoldingBack {
                    cluster: h.cluster,
                    group: h.group,
                    state: h.state.as_str(),
                    since: time_string(h.since),
                    soaks_at: h.soaks_at.and_then(time_string),
                })
                .collect(),
            next_cursor: tally.next_after.map(encode_cursor),
        })
    })
    .await?;
    Ok(Answer::Fresh(rendered))
}
