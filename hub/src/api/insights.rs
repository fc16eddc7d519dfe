//! `insights/failures`: what the clusters where an app fails share.

use std::sync::Arc;

use axum::extract::State;
use axum::Extension;

use crate::answers::InsightsAnswer;
use crate::auth::Principal;
use crate::params::ApiError;
use crate::query::ApiQuery;
use crate::query::InsightsQuery;
use crate::state::AppState;

use super::*;

/// `GET /api/v1/insights/failures`: which attribute values the clusters where an app fails
/// share, compared with the clusters where it is in sync.
#[utoipa::path(
    get,
    path = "/api/v1/insights/failures",
    summary = "What failing clusters share: the attribute values over-represented among the selected clusters where `app` is failed or out of sync, compared with those where it is in sync, with a one-sided Fisher exact test each.",
    description = "Failing is `failed` or `out_of_sync`; the other side is `in_sync`; clusters in any other state are on neither side (`other_states`). Attribute values are every label `key=value`, every level of the group, the environment, the reconciler and the agent version. A value on every considered cluster, or on a single one, is not tested. Findings are the values with a higher failure rate with them than without, strongest first, with Bonferroni-adjusted p-values over every tested value; `headline` puts the first in words when it is significant.",
    params(InsightsQuery),
    responses((status = 200, body = InsightsAnswer, description = "The comparison.")),
)]
pub async fn insights_failures(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<InsightsQuery>,
) -> Result<Answer, ApiError> {
    let InsightsQuery {
        at,
        selection,
        app,
        version,
        limit,
    } = query;
    let question = fleetscope_engine::insights::FailuresQuestion {
        group: selection.group.as_ref().map(|g| g.as_str().to_owned()),
        filter: scoped_filter(&principal, selection),
        app,
        version,
        limit,
    };
    let reach = Reach::App(question.app.clone());
    let rendered = on_fleet_at(&state, at, reach, move |fleet, _| {
        Rendered::json(&InsightsAnswer::from(
            fleetscope_engine::insights::failures(fleet, &question),
        ))
    })
    .await?;
    Ok(Answer::Fresh(rendered))
}
