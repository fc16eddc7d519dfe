//! `drift` and `stale`: the paged listings of pairs and of clusters that went quiet.

use std::sync::Arc;

use axum::extract::State;
use axum::Extension;

use crate::answers::{DriftPage, PairItem, StaleItem, StalePage};
use crate::auth::Principal;
use crate::params::{encode_cursor, ApiError};
use crate::query::{ApiQuery, DriftQuery, StaleQuery};
use crate::state::AppState;
use fleetscope_engine::ClusterRec;

use super::*;

const DRIFT_COLUMNS: &[&str] = &[
    "cluster",
    "group",
    "environment",
    "app",
    "state",
    "since",
    "desired_version",
    "observed_version",
    "revision",
    "health",
    "sync",
    "reason",
    "message",
    "last_seen",
];

/// `GET /api/v1/drift`: (cluster, app) pairs in the given states (default: every state but
/// `in_sync`), by cluster and app, a page at a time.
#[utoipa::path(
    get,
    path = "/api/v1/drift",
    summary = "(cluster, app) pairs with desired against actual version and revision, drift state, since when and the reconciler's message.",
    description = "Paged: `limit` items per page and, while more follow, `next_cursor` to pass as `cursor`. Pages are in cluster id, then app order, and each page reads the fleet anew.",
    params(DriftQuery),
    responses((status = 200, description = "With `format=csv`, the page's items as rows: `cluster,group,environment,app,state,since,desired_version,observed_version,revision,health,sync,reason,message,last_seen` (null fields empty); the cursor of the next page is only in the JSON answer.", content(
        (DriftPage = "application/json"),
        (String = "text/csv"),
    ))),
)]
pub async fn drift(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<DriftQuery>,
) -> Result<Answer, ApiError> {
    let DriftQuery {
        at,
        selection,
        states,
        limit,
        cursor,
        csv: csv_wanted,
    } = query;
    let filter = scoped_filter(&principal, selection);
    let reach = reach_of(&filter);
    let rendered = on_fleet_at(&state, at, reach, move |fleet, _| {
        let mut items = Vec::new();
        let mut next = None;
        let after = cursor
            .as_deref()
            .map(|c| c.split_once('/').unwrap_or((c, "")));
        let app_id = filter.app.as_deref().map(|a| fleet.symbols.find(a));
        'clusters: for (id, cluster) in fleet.clusters.iter_from(after.map_or("", |(c, _)| c)) {
            if !fleet.cluster_matches(cluster, &filter) {
                continue;
            }
            // The maintained states say whether the cluster has anything to list at all.
            let listed = cluster.counted.as_ref().is_some_and(|c| {
                c.pairs().any(|p| {
                    states.contains(&p.state()) && app_id.is_none_or(|a| a == Some(p.app()))
                })
            });
            if !listed {
                continue;
            }
            for pair in fleet.current_pairs(cluster) {
                let app = fleet.symbols.text(pair.app);
                if after.is_some_and(|(c, a)| id == c && app <= a) {
                    continue;
                }
                if filter.app.as_deref().is_some_and(|a| a != app) || !states.contains(&pair.state)
                {
                    continue;
                }
                if items.len() == limit {
                    let last: &PairItem<'_> = items.last().expect("a full page has items");
                    next = Some(encode_cursor(&format!("{}/{}", last.cluster, last.app)));
                    break 'clusters;
                }
                items.push(pair_item(fleet, id, cluster, &pair));
            }
        }
        if csv_wanted {
            Rendered::csv(csv_of(DRIFT_COLUMNS, &items))
        } else {
            Rendered::json(&DriftPage {
                items,
                next_cursor: next,
            })
        }
    })
    .await?;
    Ok(Answer::Fresh(rendered))
}

const STALE_COLUMNS: &[&str] = &[
    "cluster",
    "group",
    "environment",
    "last_seen",
    "silent_seconds",
];

/// `GET /api/v1/stale`: clusters not heard from within the stale threshold (never seen first,
/// then oldest first).
#[utoipa::path(
    get,
    path = "/api/v1/stale",
    summary = "Clusters not heard from within the stale threshold, never seen first, then oldest first.",
    description = "Paged like the other listings: `limit` items per page (1 to 1000, default 100), and while more follow, `next_cursor` to pass as `cursor` for the next page. Pages follow the listing's order (never seen first, then by last seen, then by cluster id) and never repeat a cluster; each page reads the fleet anew, so a cluster that reports again between two pages leaves the listing, and one that falls silent joins it at the end (it was seen last).",
    params(StaleQuery),
    responses((status = 200, description = "With `format=csv`, the page's items as rows (`cluster,group,environment,last_seen,silent_seconds`); the cursor of the next page is only in the JSON answer.", content(
        (StalePage = "application/json"),
        (String = "text/csv"),
    ))),
)]
pub async fn stale(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<StaleQuery>,
) -> Result<Answer, ApiError> {
    let StaleQuery {
        at,
        selection,
        limit,
        cursor,
        csv: csv_wanted,
    } = query;
    let filter = scoped_filter(&principal, selection);
    let after = cursor.map(|c| stale_key(&c)).transpose()?;
    let rendered = on_fleet_at(&state, at, Reach::Fleet, move |fleet, now| {
        let mut stale: Vec<(u32, &str, &ClusterRec)> = fleet
            .stale_clusters()
            .filter(|(_, c)| fleet.cluster_matches(c, &filter))
            .map(|(id, c)| (c.last_seen.unwrap_or(0), id, c))
            .collect();
        stale.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        let total = stale.len();
        let rest: Vec<(u32, &str, &ClusterRec)> = stale
            .into_iter()
            .filter(|(seen, id, _)| {
                after
                    .as_ref()
                    .is_none_or(|(s, i)| (*seen, *id) > (*s, i.as_str()))
            })
            .collect();
        let next = (rest.len() > limit).then(|| {
            let (seen, id, _) = rest[limit - 1];
            encode_cursor(&format!("{seen}/{id}"))
        });
        let items: Vec<StaleItem<'_>> = rest
            .into_iter()
            .take(limit)
            .map(|(seen, id, c)| {
                let info = c
                    .info
                    .as_ref()
                    .expect("matched clusters are in the inventory");
                StaleItem {
                    cluster: id,
                    group: info.group.as_str(),
                    environment: fleet.symbols.text(info.environment),
                    last_seen: time_string(seen),
                    silent_seconds: (seen != 0).then(|| now.seconds() - i64::from(seen)),
                }
            })
            .collect();
        if csv_wanted {
            Rendered::csv(csv_of(STALE_COLUMNS, &items))
        } else {
            Rendered::json(&StalePage {
                total,
                items,
                next_cursor: next,
            })
        }
    })
    .await?;
    Ok(Answer::Fresh(rendered))
}

/// Where a page of stale clusters starts after: `last_seen/cluster` of the previous page's
/// last item (`0` for never seen), the order the listing is sorted in.
fn stale_key(cursor: &str) -> Result<(u32, String), ApiError> {
    cursor
        .split_once('/')
        .and_then(|(seen, id)| Some((seen.parse::<u32>().ok()?, id.to_owned())))
        .ok_or_else(|| ApiError::bad("cursor", "not a cursor this listing handed out"))
}
