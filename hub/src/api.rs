//! The routes under `/api/v1`. Each handler takes its route's typed query (checked against the
//! parameters the route documents), narrows the question to the caller's scope, and answers
//! from the in-memory index (history also reads the store) with one of the typed answers of
//! [`crate::answers`]. Every answer about pairs uses the model's one drift definition through
//! the index. The `#[utoipa::path]` of each handler is its part of the OpenAPI document, and the
//! router is built from the same list ([`crate::openapi::routes`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use fleetscope_model::{DriftState, GroupPath, Timestamp};
use serde::Serialize;

use crate::answers::{
    AppEnvironments, ByState, ClusterHistory, ClusterPage, DesiredApp, DriftPage,
    EnvironmentVersions, EnvironmentsAnswer, ExplainAnswer, Explained, GateAnswer, GroupCounts,
    GroupHistory, HistoryEvent, HoldingBack, NotDesiredApp, ObjectTransition, PairItem,
    PolicyAnswer, StaleItem, StalePage, SummaryAnswer, VersionCount, VersionsAnswer,
};
use crate::answers::{GateVerdict, InsightsAnswer};
use crate::auth::Principal;
use crate::params::{csv, encode_cursor, ApiError};
use crate::query::InsightsQuery;
use crate::query::{
    ApiQuery, ClusterQuery, DriftQuery, EnvironmentsQuery, ExplainQuery, GateQuery, HistoryQuery,
    Selection, StaleQuery, SummaryQuery, VersionsQuery,
};
use crate::state::AppState;
use fleetscope_engine::counts::Counts;
use fleetscope_engine::fleet::{ClusterRec, Filter, Fleet, Pair};
use fleetscope_engine::past::Reach;

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
        selection,
        limit,
        cursor,
        csv: csv_wanted,
    } = query;
    let filter = scoped_filter(&principal, selection);
    let after = cursor.map(|c| stale_key(&c)).transpose()?;
    let rendered = on_fleet(&state, move |fleet, now| {
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
            let mut table = fleetscope_engine::fleet::EnvironmentTable::new();
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
        selection,
        rules,
        max_failed,
        limit,
        cursor,
    } = query;
    let group = selection.group.as_ref().map(|g| g.as_str().to_owned());
    let filter = scoped_filter(&principal, selection);
    let rendered = on_fleet(&state, move |fleet, _| {
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
    let rendered = on_fleet(&state, move |fleet, _| {
        Rendered::json(&InsightsAnswer::from(
            fleetscope_engine::insights::failures(fleet, &question),
        ))
    })
    .await?;
    Ok(Answer::Fresh(rendered))
}
