//! `apps/{app}/versions`: desired and running versions of one app, per group.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::Extension;

use crate::answers::{PairItem, VersionCount, VersionsAnswer};
use crate::auth::Principal;
use crate::params::{csv, encode_cursor, ApiError};
use crate::query::{ApiQuery, VersionsQuery};
use crate::state::AppState;
use fleetscope_engine::past::Reach;

use super::*;

/// `GET /api/v1/apps/{app}/versions`: which versions of an app are desired and run where, per
/// group at `depth`; with `version`, the clusters running it (a page at a time).
#[utoipa::path(
    get,
    path = "/api/v1/apps/{app}/versions",
    summary = "An app's version inventory: desired and running versions with counts per group; with `version`, the clusters running it.",
    description = "Counts are of the selected clusters (scope, `group`, `environment`, `label`): a cluster counts under the version desired for it and, separately, under the version it runs. An app no cluster has answers empty lists.",
    params(("app" = String, Path, description = "The app.", example = "checkout"), VersionsQuery),
    responses((status = 200, description = "With `format=csv`, one row per side, version and group: `side,version,group,clusters`, `side` being `desired` or `running`.", content(
        (VersionsAnswer = "application/json"),
        (String = "text/csv"),
    ))),
)]
pub async fn versions(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    app: Result<Path<String>, PathRejection>,
    ApiQuery(query): ApiQuery<VersionsQuery>,
) -> Result<Answer, ApiError> {
    let app = path_value("app", app)?;
    let app = fleetscope_model::AppName::parse(&app)
        .map_err(|err| ApiError::bad("app", err.to_string()))?
        .as_str()
        .to_owned();
    let VersionsQuery {
        at,
        selection,
        depth,
        version,
        limit,
        cursor,
        csv: csv_wanted,
    } = query;
    let mut filter = scoped_filter(&principal, selection);
    filter.app = Some(app.clone());
    let reach = Reach::App(app.clone());
    let rendered = on_fleet_at(&state, at, reach, move |fleet, _| {
        let s = &fleet.symbols;
        let Some(app_id) = s.find(&app) else {
            let empty = VersionsAnswer {
                app,
                desired: Vec::new(),
                running: Vec::new(),
                clusters: Vec::new(),
                next_cursor: None,
            };
            return versions_rendered(&empty, csv_wanted);
        };
        let counted = fleet.versions_by_group(&filter, app_id, depth);
        let scan_counts = counted.is_none();
        let (mut desired, mut running) = counted.unwrap_or_default();
        let mut on_version: Vec<PairItem<'_>> = Vec::new();
        let mut next = None;
        // The counters answer the counts; the clusters are scanned only for label filters and
        // for the listing of the clusters running `version` (one app's pair per cluster).
        if scan_counts || version.is_some() {
            for (id, cluster) in fleet.clusters.iter() {
                if !fleet.cluster_matches(cluster, &filter) {
                    continue;
                }
                let Some(pair) = fleet.current_pair(cluster, app_id) else {
                    continue;
                };
                if scan_counts {
                    let info = cluster
                        .info
                        .as_ref()
                        .expect("matched clusters are in the inventory");
                    let group: String = info
                        .group
                        .segments()
                        .take(depth)
                        .collect::<Vec<_>>()
                        .join("/");
                    for (side, v) in [
                        (&mut desired, pair.desired.map(|d| d.version)),
                        (&mut running, pair.observed.map(|o| o.version)),
                    ] {
                        if let Some(v) = v {
                            let entry = side.entry(s.text(v).to_owned()).or_default();
                            entry.0 += 1;
                            *entry.1.entry(group.clone()).or_default() += 1;
                        }
                    }
                }
                if let Some(o) = pair.observed {
                    if version.as_deref() == Some(s.text(o.version))
                        && cursor.as_deref().is_none_or(|c| id > c)
                    {
                        if on_version.len() == limit {
                            next = Some(encode_cursor(on_version.last().map_or("", |v| v.cluster)));
                            if !scan_counts {
                                break;
                            }
                        } else if next.is_none() {
                            on_version.push(pair_item(fleet, id, cluster, &pair));
                        }
                    }
                }
            }
        }
        let counts = |side: BTreeMap<String, (u64, BTreeMap<String, u64>)>| {
            side.into_iter()
                .map(|(version, (clusters, groups))| VersionCount {
                    version,
                    clusters,
                    groups,
                })
                .collect()
        };
        let answer = VersionsAnswer {
            app,
            desired: counts(desired),
            running: counts(running),
            clusters: on_version,
            next_cursor: next,
        };
        versions_rendered(&answer, csv_wanted)
    })
    .await?;
    Ok(Answer::Fresh(rendered))
}

fn versions_rendered(answer: &VersionsAnswer<'_>, csv_wanted: bool) -> Rendered {
    if !csv_wanted {
        return Rendered::json(answer);
    }
    let rows = [("desired", &answer.desired), ("running", &answer.running)]
        .into_iter()
        .flat_map(|(side, counts)| {
            counts.iter().flat_map(move |count| {
                count.groups.iter().map(move |(group, n)| {
                    vec![
                        side.to_owned(),
                        count.version.clone(),
                        group.clone(),
                        n.to_string(),
                    ]
                })
            })
        });
    Rendered::csv(csv(&["side", "version", "group", "clusters"], rows))
}
