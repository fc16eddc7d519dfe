//! `summary` and `environments`: counts per group and per environment, from the counters.

use std::sync::Arc;

use axum::extract::State;
use axum::Extension;
use fleetscope_model::{DriftState, GroupPath};

use crate::answers::{
    AppEnvironments, ByState, EnvironmentVersions, EnvironmentsAnswer, GroupCounts, PolicyAnswer,
    SummaryAnswer,
};
use crate::auth::Principal;
use crate::params::{csv, ApiError};
use crate::query::{ApiQuery, EnvironmentsQuery, SummaryQuery};
use crate::state::AppState;
use fleetscope_engine::Counts;

use super::*;

/// The description of the answer's CSV form, for the routes that have one.
const SUMMARY_CSV: &str = "With `format=csv`: one row for the selection (empty `group`, depth 0), then one per group: `group,depth,clusters,reporting_clusters,stale_clusters` and one column per drift state.";

/// `GET /api/v1/summary`: the fleet and every group at every level (down to `depth`).
///
/// The answer is serialized once per snapshot generation, caller's scope and question, and the
/// bytes are kept: under many readers the same answer is asked for
/// far more often than the data changes.
#[utoipa::path(
    get,
    path = "/api/v1/summary",
    summary = "The fleet and every group at every level: clusters total, reporting and stale; app instances per drift state.",
    description = "With `group` (or a scoped token), `total` is that subtree and the rows are that group and the groups below it. A group's counts are of its selected clusters only.",
    params(SummaryQuery),
    responses((status = 200, description = SUMMARY_CSV, content(
        (SummaryAnswer = "application/json"),
        (String = "text/csv"),
    ))),
)]
pub async fn summary(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<SummaryQuery>,
) -> Result<Answer, ApiError> {
    let depth = query.depth;
    let csv_wanted = query.csv;
    let filter = scoped_filter(&principal, query.selection);
    let scope = principal.scope.clone();
    // The scope is in the key on its own: the answer names it, and a scoped caller and an
    // unscoped one asking for the scope's group select the same clusters.
    let key = format!("summary|{scope:?}|{filter:?}|{depth}|{csv_wanted}");
    let reach = reach_of(&filter);
    let rendered = state
        .cached_at(query.at, reach, key, move |fleet, now, policy| {
            let rollup = fleet.summary(&filter);
            // Rows are the caller's scope and the asked group and what lies below them; an
            // ancestor would hold only the selected part of its clusters under its own name.
            let visible = |group: &str| {
                GroupPath::parse(group).is_ok_and(|g| filter.groups.iter().all(|w| g.is_within(w)))
            };
            let total = rollup.get("").copied().unwrap_or_default();
            let rows: Vec<(&str, &Counts)> = rollup
                .iter()
                .filter(|(g, _)| !g.is_empty() && visible(g) && group_depth(g) <= depth)
                .map(|(g, c)| (g.as_str(), c))
                .collect();
            if csv_wanted {
                return Rendered::csv(summary_csv(&total, &rows));
            }
            Rendered::json(&SummaryAnswer {
                generated_at: time_string(fleetscope_store::to_datetime(now)),
                scope: scope.as_ref().map(GroupPath::as_str),
                policy: PolicyAnswer {
                    stale_after_seconds: policy.stale_after_seconds,
                    progress_grace_seconds: policy.progress_grace_seconds,
                },
                total: group_counts(None, &total),
                groups: rows.iter().map(|(g, c)| group_counts(Some(g), c)).collect(),
            })
        })
        .await?;
    Ok(Answer::Cached(rendered))
}

/// A group's depth: `""` (the fleet) is 0, `emea` 1, `emea/de` 2 …
fn group_depth(group: &str) -> usize {
    if group.is_empty() {
        0
    } else {
        group.split('/').count()
    }
}

fn group_counts<'a>(group: Option<&'a str>, counts: &Counts) -> GroupCounts<'a> {
    GroupCounts {
        group,
        depth: group.map(group_depth),
        clusters: counts.clusters,
        reporting_clusters: counts.clusters - counts.stale_clusters,
        stale_clusters: counts.stale_clusters,
        app_instances: counts.pairs.iter().sum(),
        // `Counts::pairs` is in `DriftState::ALL` order.
        app_instances_by_state: ByState::from(counts.pairs),
    }
}

fn summary_csv(total: &Counts, rows: &[(&str, &Counts)]) -> String {
    let mut header = vec![
        "group",
        "depth",
        "clusters",
        "reporting_clusters",
        "stale_clusters",
    ];
    header.extend(DriftState::ALL.iter().map(|s| s.as_str()));
    csv(
        &header,
        std::iter::once(("", total))
            .chain(rows.iter().copied())
            .map(|(g, c)| {
                let mut row = vec![
                    g.to_owned(),
                    group_depth(g).to_string(),
                    c.clusters.to_string(),
                    (c.clusters - c.stale_clusters).to_string(),
                    c.stale_clusters.to_string(),
                ];
                row.extend(DriftState::ALL.iter().map(|s| c.state(*s).to_string()));
                row
            }),
    )
}

/// `GET /api/v1/environments`: per app, desired and running versions in each environment.
#[utoipa::path(
    get,
    path = "/api/v1/environments",
    summary = "Per app and environment, the desired and the running versions with cluster counts.",
    params(EnvironmentsQuery),
    responses((status = 200, description = "With `format=csv`, one row per app, environment, side and version: `app,environment,side,version,clusters`, `side` being `desired` or `running`.", content(
        (EnvironmentsAnswer = "application/json"),
        (String = "text/csv"),
    ))),
)]
pub async fn environments(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    ApiQuery(query): ApiQuery<EnvironmentsQuery>,
) -> Result<Answer, ApiError> {
    let csv_wanted = query.csv;
    let filter = scoped_filter(&principal, query.selection);
    let key = format!("environments|{filter:?}");
    let reach = reach_of(&filter);
    let table = state
        .cached_at(query.at, reach, key, move |fleet, _, _| {
            if let Some(table) = fleet.environments(&filter) {
                return table;
            }
            let mut table = fleetscope_engine::EnvironmentTable::new();
            let s = &fleet.symbols;
            for cluster in fleet.clusters.values() {
                if !fleet.cluster_matches(cluster, &filter) {
                    continue;
                }
                let env = s.text(cluster.info.as_ref().expect("in the inventory").environment);
                for pair in fleet.current_pairs(cluster) {
                    let app = s.text(pair.app);
                    if filter.app.as_deref().is_some_and(|a| a != app) {
                        continue;
                    }
                    let cell = table
                        .entry(app.to_owned())
                        .or_default()
                        .entry(env.to_owned())
                        .or_default();
                    if let Some(d) = pair.desired {
                        *cell.0.entry(s.text(d.version).to_owned()).or_default() += 1;
                    }
                    if let Some(o) = pair.observed {
                        *cell.1.entry(s.text(o.version).to_owned()).or_default() += 1;
                    }
                }
            }
            table
        })
        .await?;
    if csv_wanted {
        let mut rows = Vec::new();
        for (app, envs) in table.iter() {
            for (env, (desired, running)) in envs {
                for (side, versions) in [("desired", desired), ("running", running)] {
                    for (v, n) in versions {
                        rows.push(vec![
                            app.clone(),
                            env.clone(),
                            side.to_owned(),
                            v.clone(),
                            n.to_string(),
                        ]);
                    }
                }
            }
        }
        return Ok(Answer::Fresh(Rendered::csv(csv(
            &["app", "environment", "side", "version", "clusters"],
            rows,
        ))));
    }
    let apps = table
        .iter()
        .map(|(app, envs)| AppEnvironments {
            app,
            environments: envs
                .iter()
                .map(|(env, (desired, running))| EnvironmentVersions {
                    environment: env,
                    desired,
                    running,
                })
                .collect(),
        })
        .collect();
    Ok(Answer::Fresh(Rendered::json(&EnvironmentsAnswer { apps })))
}
