//! The routes under `/api/v1`. Each handler checks its parameters, narrows the question to the
//! caller's scope, and answers from the in-memory index (history also reads the store). Every
//! answer about pairs uses the model's one drift definition through the index.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fleetscope_model::{DriftState, GroupPath, Timestamp};
use serde::Serialize;
use serde_json::{json, Value};

use crate::auth::Principal;
use crate::index::{ClusterRec, Counts, Filter, Fleet, Pair};
use crate::params::{csv, encode_cursor, ApiError, Params};
use crate::server::AppState;

type Pairs = Query<Vec<(String, String)>>;

/// An answer: JSON, or CSV for tabular reports.
#[derive(Debug)]
pub enum Answer {
    Json(Value),
    Csv(String),
    /// Serialized before, and kept in the answer cache.
    Rendered(Arc<Rendered>),
}

/// An answer's body, serialized once: what the cache keeps for answers that are asked for
/// again and again, so that a hit costs no building and no serializing.
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

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        match self {
            Answer::Json(value) => Json(value).into_response(),
            Answer::Csv(text) => ([(header::CONTENT_TYPE, CSV)], text).into_response(),
            Answer::Rendered(rendered) => (
                [(header::CONTENT_TYPE, rendered.content_type)],
                rendered.body.clone(),
            )
                .into_response(),
        }
    }
}

/// A value from the path, named like a query parameter when it does not decode (percent
/// escapes that are not UTF-8).
fn path_value(name: &str, value: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    value
        .map(|Path(value)| value)
        .map_err(|_| ApiError::bad(name, "not percent-encoded UTF-8"))
}

/// The caller's scope joined with the asked group: both must hold.
fn scoped_filter(principal: &Principal, params: &Params) -> Result<Filter, ApiError> {
    let mut filter = Filter {
        groups: principal.scope.iter().cloned().collect(),
        environment: params.environment()?,
        labels: params.labels()?,
        app: params.app()?,
    };
    if let Some(group) = params.group()? {
        filter.groups.push(group);
    }
    Ok(filter)
}

fn time_text(seconds: u32) -> Value {
    time_string(seconds).map_or(Value::Null, Value::String)
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

/// `GET /api/v1/summary`: the fleet and every group at every level (down to `depth`).
///
/// The answer is serialized once per snapshot generation, caller's scope and question, and the
/// bytes are kept: under many readers the same answer is asked for
/// far more often than the data changes.
pub async fn summary(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let params = Params::new(
        pairs,
        &["group", "environment", "label", "app", "depth", "format"],
        &["label"],
    )?;
    let filter = scoped_filter(&principal, &params)?;
    let depth = params.integer("depth", 0, 16, 16)? as usize;
    let csv_wanted = params.csv()?;
    let scope = principal.scope.clone();
    // The scope is in the key on its own: the answer names it, and a scoped caller and an
    // unscoped one asking for the scope's group select the same clusters.
    let key = format!("summary|{scope:?}|{filter:?}|{depth}|{csv_wanted}");
    let rendered = state
        .cached(key, move |fleet, now, policy| {
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
                total: GroupCounts::of(None, &total),
                groups: rows
                    .iter()
                    .map(|(g, c)| GroupCounts::of(Some(g), c))
                    .collect(),
            })
        })
        .await?;
    Ok(Answer::Rendered(rendered))
}

/// A group's depth: `""` (the fleet) is 0, `emea` 1, `emea/de` 2 …
fn group_depth(group: &str) -> usize {
    if group.is_empty() {
        0
    } else {
        group.split('/').count()
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

#[derive(Serialize)]
struct SummaryAnswer<'a> {
    generated_at: Option<String>,
    scope: Option<&'a str>,
    policy: PolicyAnswer,
    total: GroupCounts<'a>,
    groups: Vec<GroupCounts<'a>>,
}

#[derive(Serialize)]
struct PolicyAnswer {
    stale_after_seconds: i64,
    progress_grace_seconds: i64,
}

/// One row of the summary: the counters of a group (or, without `group`, of the selection).
#[derive(Serialize)]
struct GroupCounts<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    depth: Option<usize>,
    clusters: u64,
    reporting_clusters: u64,
    stale_clusters: u64,
    app_instances: u64,
    app_instances_by_state: ByState,
}

impl<'a> GroupCounts<'a> {
    fn of(group: Option<&'a str>, counts: &Counts) -> GroupCounts<'a> {
        GroupCounts {
            group,
            depth: group.map(group_depth),
            clusters: counts.clusters,
            reporting_clusters: counts.clusters - counts.stale_clusters,
            stale_clusters: counts.stale_clusters,
            app_instances: counts.pairs.iter().sum(),
            app_instances_by_state: ByState(counts.pairs),
        }
    }
}

/// App instances per drift state, as an object keyed by state name.
struct ByState([u64; 8]);

impl Serialize for ByState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(DriftState::ALL.len()))?;
        // `Counts::pairs` is in `DriftState::ALL` order.
        for (state, count) in DriftState::ALL.iter().zip(self.0) {
            map.serialize_entry(state.as_str(), &count)?;
        }
        map.end()
    }
}

fn pair_json(fleet: &Fleet, cluster_id: &str, cluster: &ClusterRec, pair: &Pair<'_>) -> Value {
    let s = &fleet.symbols;
    let info = cluster.info.as_ref();
    let since = match (pair.observed, pair.desired) {
        (Some(o), _) => o.transitioned_at,
        (None, Some(d)) => d.since,
        (None, None) => 0,
    };
    json!({
        "cluster": cluster_id,
        "group": info.map(|i| i.group.as_str()),
        "environment": info.map(|i| s.text(i.environment)),
        "app": s.text(pair.app),
        "state": pair.state.as_str(),
        "since": time_text(since),
        "desired_version": pair.desired.map(|d| s.text(d.version)),
        "desired_content_hash": pair.desired.map(|d| s.text(d.content_hash)),
        "desired_since": pair.desired.map(|d| time_text(d.since)),
        "observed_version": pair.observed.map(|o| s.text(o.version)),
        "observed_content_hash": pair.observed.map(|o| s.text(o.content_hash)),
        "revision": pair.observed.map(|o| s.text(o.revision)),
        "health": pair.observed.map(|o| o.health.as_str()),
        "sync": pair.observed.map(|o| o.sync.as_str()),
        "reason": pair.observed.map(|o| s.text(o.reason)),
        "message": pair.observed.map(|o| s.text(o.message)),
        "last_seen": cluster.last_seen.map(time_text),
    })
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

fn csv_row(value: &Value, columns: &[&str]) -> Vec<String> {
    columns
        .iter()
        .map(|c| match &value[*c] {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// `GET /api/v1/drift`: (cluster, app) pairs in the given states (default: every state but
/// `in_sync`), by cluster and app, a page at a time.
pub async fn drift(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let params = Params::new(
        pairs,
        &[
            "group",
            "environment",
            "label",
            "app",
            "state",
            "limit",
            "cursor",
            "format",
        ],
        &["label", "state"],
    )?;
    let filter = scoped_filter(&principal, &params)?;
    let mut states = params.states()?;
    if states.is_empty() {
        states = DriftState::ALL
            .iter()
            .copied()
            .filter(|s| *s != DriftState::InSync)
            .collect();
    }
    let limit = params.limit()?;
    let cursor = params.cursor()?;
    let csv_wanted = params.csv()?;
    let (items, next) = on_fleet(&state, move |fleet, _| {
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
                    next = Some(encode_cursor(&last_key(&items)));
                    break 'clusters;
                }
                items.push(pair_json(fleet, id, cluster, &pair));
            }
        }
        (items, next)
    })
    .await?;
    if csv_wanted {
        return Ok(Answer::Csv(csv(
            DRIFT_COLUMNS,
            items.iter().map(|v| csv_row(v, DRIFT_COLUMNS)),
        )));
    }
    Ok(Answer::Json(json!({ "items": items, "next_cursor": next })))
}

/// `cluster/app` of the last item of a page: where the next page starts after.
fn last_key(items: &[Value]) -> String {
    let last = items.last().expect("a full page has items");
    format!(
        "{}/{}",
        last["cluster"].as_str().unwrap_or_default(),
        last["app"].as_str().unwrap_or_default()
    )
}

/// The most transitions a cluster page shows (the newest).
const PAGE_HISTORY: u64 = 200;

/// `GET /api/v1/clusters/{id}`: one cluster, every app desired and actual, last seen, and
/// its recent history.
pub async fn cluster(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    id: Result<Path<String>, PathRejection>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let id = path_value("id", id)?;
    let params = Params::new(pairs, &["history_hours"], &[])?;
    let hours = params.number("history_hours", 0.0, 744.0, 24.0)?;
    fleetscope_model::ClusterId::parse(&id).map_err(|err| ApiError::bad("id", err.to_string()))?;
    let scope = principal.scope.clone();
    let lookup = id.clone();
    let now = state.now();
    let from = now.plus_seconds(-((hours * 3_600.0) as i64));
    // The history is read from ClickHouse while the page is built from the fleet; it is shown
    // only when the cluster exists within the caller's scope.
    // `history_hours=0` asks for none: no ClickHouse read at all (a poller that only wants the
    // apps' states costs the store nothing).
    let history = async {
        if hours <= 0.0 {
            return Ok(Vec::new());
        }
        let store = state.index.store();
        state
            .store_call(
                "observed history",
                store.recent_history(&id, None, from, now.plus_seconds(1), PAGE_HISTORY),
            )
            .await
    };
    let page = on_fleet(&state, move |fleet, _| {
        let cluster = fleet.clusters.get(&lookup)?;
        let info = cluster.info.as_ref()?;
        if scope.as_ref().is_some_and(|s| !info.group.is_within(s)) {
            return None;
        }
        let s = &fleet.symbols;
        let apps: Vec<Value> = fleet
            .current_pairs(cluster)
            .iter()
            .map(|p| pair_json(fleet, &lookup, cluster, p))
            .collect();
        Some(json!({
            "cluster": lookup,
            "group": info.group.as_str(),
            "environment": s.text(info.environment),
            "reconciler": s.text(info.reconciler),
            "labels": info.labels(s),
            "render_group": cluster.render_group.map(|g| s.text(g)),
            "last_seen": cluster.last_seen.map(time_text),
            "stale": cluster.is_stale_now(),
            "agent_version": cluster.agent_version.map(|a| s.text(a)),
            "apps": apps,
        }))
    });
    let (page, history) = tokio::join!(page, history);
    let mut page = page?.ok_or_else(|| ApiError::not_found(format!("no cluster {id:?}")))?;
    let history = history?;
    page["history"] = history
        .iter()
        .map(|r| {
            json!({
                "at": time_text(r.observed_at),
                "kind": r.object_kind, "namespace": r.object_namespace, "name": r.object_name,
                "app": r.app, "version": r.version, "revision": r.applied_revision,
                "health": r.health, "sync": r.sync, "reason": r.reason, "message": r.message,
                "deleted": r.deleted != 0,
            })
        })
        .collect();
    Ok(Answer::Json(page))
}

/// `GET /api/v1/apps/{app}/versions`: which versions of an app are desired and run where, per
/// group at `depth`; with `version`, the clusters running it (a page at a time).
pub async fn versions(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    app: Result<Path<String>, PathRejection>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let app = path_value("app", app)?;
    let params = Params::new(
        pairs,
        &[
            "group",
            "environment",
            "label",
            "depth",
            "version",
            "limit",
            "cursor",
            "format",
        ],
        &["label"],
    )?;
    let app = fleetscope_model::AppName::parse(&app)
        .map_err(|err| ApiError::bad("app", err.to_string()))?
        .as_str()
        .to_owned();
    let mut filter = scoped_filter(&principal, &params)?;
    filter.app = Some(app.clone());
    let depth = params.integer("depth", 1, 16, 1)? as usize;
    let version = params.get("version").map(str::to_owned);
    let limit = params.limit()?;
    let cursor = params.cursor()?;
    let csv_wanted = params.csv()?;
    let answer = on_fleet(&state, move |fleet, _| {
        let s = &fleet.symbols;
        let Some(app_id) = s.find(&app) else {
            return json!({ "app": app, "desired": [], "running": [], "clusters": [], "next_cursor": null });
        };
        let counted = fleet.versions_by_group(&filter, app_id, depth);
        let scan_counts = counted.is_none();
        let (mut desired, mut running) = counted.unwrap_or_default();
        let mut on_version = Vec::new();
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
                    let info = cluster.info.as_ref().expect("matched clusters are in the inventory");
                    let group: String = info.group.segments().take(depth).collect::<Vec<_>>().join("/");
                    for (side, v) in [(&mut desired, pair.desired.map(|d| d.version)), (&mut running, pair.observed.map(|o| o.version))] {
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
                            next = Some(encode_cursor(on_version.last().map_or("", |v: &Value| v["cluster"].as_str().unwrap_or_default())));
                            if !scan_counts {
                                break;
                            }
                        } else if next.is_none() {
                            on_version.push(pair_json(fleet, id, cluster, &pair));
                        }
                    }
                }
            }
        }
        json!({
            "app": app,
            "desired": desired.iter().map(|(v, (n, groups))| json!({"version": v, "clusters": n, "groups": groups})).collect::<Vec<_>>(),
            "running": running.iter().map(|(v, (n, groups))| json!({"version": v, "clusters": n, "groups": groups})).collect::<Vec<_>>(),
            "clusters": on_version,
            "next_cursor": next,
        })
    })
    .await?;
    if csv_wanted {
        let rows: Vec<Vec<String>> = ["desired", "running"]
            .into_iter()
            .flat_map(|side| {
                answer[side]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(move |r| {
                        let version = r["version"].as_str().unwrap_or_default().to_owned();
                        r["groups"]
                            .as_object()
                            .into_iter()
                            .flatten()
                            .map(move |(g, n)| {
                                vec![side.to_owned(), version.clone(), g.clone(), n.to_string()]
                            })
                    })
            })
            .collect();
        return Ok(Answer::Csv(csv(
            &["side", "version", "group", "clusters"],
            rows,
        )));
    }
    Ok(Answer::Json(answer))
}

/// `GET /api/v1/stale`: clusters not heard from within the stale threshold (never seen first,
/// then oldest first).
pub async fn stale(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let params = Params::new(
        pairs,
        &["group", "environment", "label", "limit", "cursor", "format"],
        &["label"],
    )?;
    let filter = scoped_filter(&principal, &params)?;
    let limit = params.limit()?;
    let after = params.cursor()?.map(|c| stale_key(&c)).transpose()?;
    let csv_wanted = params.csv()?;
    let (items, total, next) = on_fleet(&state, move |fleet, now| {
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
        let items: Vec<Value> = rest
            .into_iter()
            .take(limit)
            .map(|(seen, id, c)| {
                let info = c.info.as_ref().expect("matched clusters are in the inventory");
                json!({
                    "cluster": id,
                    "group": info.group.as_str(),
                    "environment": fleet.symbols.text(info.environment),
                    "last_seen": time_text(seen),
                    "silent_seconds": if seen == 0 { Value::Null } else { json!(now.seconds() - i64::from(seen)) },
                })
            })
            .collect();
        (items, total, next)
    })
    .await?;
    if csv_wanted {
        let columns = [
            "cluster",
            "group",
            "environment",
            "last_seen",
            "silent_seconds",
        ];
        return Ok(Answer::Csv(csv(
            &columns,
            items.iter().map(|v| csv_row(v, &columns)),
        )));
    }
    Ok(Answer::Json(
        json!({ "total": total, "items": items, "next_cursor": next }),
    ))
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
pub async fn explain(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let params = Params::new(pairs, &["cluster", "app"], &[])?;
    let cluster_id = params
        .get("cluster")
        .ok_or_else(|| ApiError::bad("cluster", "required"))?
        .to_owned();
    fleetscope_model::ClusterId::parse(&cluster_id)
        .map_err(|err| ApiError::bad("cluster", err.to_string()))?;
    let app = params.app()?;
    let scope = principal.scope.clone();
    let lookup = cluster_id.clone();
    let answer = on_fleet(&state, move |fleet, _| {
        let cluster = fleet.clusters.get(&lookup)?;
        let info = cluster.info.as_ref()?;
        if scope.as_ref().is_some_and(|s| !info.group.is_within(s)) {
            return None;
        }
        let s = &fleet.symbols;
        let render_group = cluster.render_group.map(|g| s.text(g));
        let mut apps: Vec<Value> = fleet
            .current_pairs(cluster)
            .iter()
            .filter(|p| app.as_deref().is_none_or(|a| s.text(p.app) == a))
            .map(|p| match p.desired {
                Some(d) => {
                    // The cluster's own reasons; the render group's only for desired state
                    // published before reason sets existed.
                    let why = fleet.reasons_of(cluster, p.app);
                    json!({
                        "app": s.text(p.app),
                        "desired": true,
                        "version": s.text(d.version),
                        "reasons": why.map_or(d.reasons.as_ref(), |r| r.reasons.as_ref()),
                        "pinned_by": why.and_then(|r| r.pinned_by).map(|p| s.text(p)),
                        "render_group": render_group,
                        "commit": s.text(d.commit),
                        "render_id": d.render_id,
                        "desired_since": time_text(d.since),
                        "state": p.state.as_str(),
                    })
                }
                None => json!({
                    "app": s.text(p.app),
                    "desired": false,
                    "explanation": format!("runs on the cluster, but no policy of render group {} selects it", render_group.unwrap_or("(none)")),
                    "state": p.state.as_str(),
                }),
            })
            .collect();
        if let Some(a) = &app {
            if apps.is_empty() {
                apps.push(json!({
                    "app": a,
                    "desired": false,
                    "explanation": match render_group {
                        Some(g) => format!("no policy reaching render group {g} selects {a}, and the cluster does not run it"),
                        None => "the cluster belongs to no render group yet (not rendered, or registered by the collector only)".to_owned(),
                    },
                }));
            }
        }
        Some(json!({ "cluster": lookup, "group": info.group.as_str(), "render_group": render_group, "apps": apps }))
    })
    .await?
    .ok_or_else(|| ApiError::not_found(format!("no cluster {cluster_id:?}")))?;
    Ok(Answer::Json(answer))
}

/// `GET /api/v1/environments`: per app, desired and running versions in each environment.
pub async fn environments(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let params = Params::new(pairs, &["group", "label", "app", "format"], &["label"])?;
    let filter = scoped_filter(&principal, &params)?;
    let csv_wanted = params.csv()?;
    let key = format!("environments|{filter:?}");
    let table = state
        .cached(key, move |fleet, _, _| {
            if let Some(table) = fleet.environments(&filter) {
                return table;
            }
            let mut table = crate::index::EnvironmentTable::new();
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
                for (v, n) in desired {
                    rows.push(vec![
                        app.clone(),
                        env.clone(),
                        "desired".into(),
                        v.clone(),
                        n.to_string(),
                    ]);
                }
                for (v, n) in running {
                    rows.push(vec![
                        app.clone(),
                        env.clone(),
                        "running".into(),
                        v.clone(),
                        n.to_string(),
                    ]);
                }
            }
        }
        return Ok(Answer::Csv(csv(
            &["app", "environment", "side", "version", "clusters"],
            rows,
        )));
    }
    let apps: Vec<Value> = table
        .iter()
        .map(|(app, envs)| {
            json!({
                "app": app,
                "environments": envs.iter().map(|(env, (d, r))| json!({"environment": env, "desired": d, "running": r})).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(Answer::Json(json!({ "apps": apps })))
}

/// `GET /api/v1/gate`: for an app at a version (or a render commit) within a group, the share
/// of targeted clusters in sync, and a verdict against `threshold`.
pub async fn gate(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let params = Params::new(
        pairs,
        &[
            "app",
            "version",
            "commit",
            "group",
            "environment",
            "label",
            "threshold",
        ],
        &["label"],
    )?;
    let filter = scoped_filter(&principal, &params)?;
    let app = filter
        .app
        .clone()
        .ok_or_else(|| ApiError::bad("app", "required"))?;
    let version = params.get("version").map(str::to_owned);
    let commit = params.get("commit").map(str::to_owned);
    if version.is_none() == commit.is_none() {
        return Err(ApiError::bad(
            "version",
            "give exactly one of version or commit",
        ));
    }
    let threshold = params.number("threshold", 0.0, 1.0, 1.0)?;
    let (targeted, by_state) = on_fleet(&state, move |fleet, _| {
        let s = &fleet.symbols;
        let mut targeted = 0u64;
        let mut by_state: BTreeMap<&'static str, u64> = BTreeMap::new();
        for cluster in fleet.clusters.values() {
            if !fleet.cluster_matches(cluster, &filter) {
                continue;
            }
            let Some(app_id) = s.find(&app) else { break };
            if let Some(pair) = fleet.current_pair(cluster, app_id) {
                let Some(d) = pair.desired else { continue };
                if version.as_deref().is_some_and(|v| s.text(d.version) != v)
                    || commit.as_deref().is_some_and(|c| s.text(d.commit) != c)
                {
                    continue;
                }
                targeted += 1;
                *by_state.entry(pair.state.as_str()).or_default() += 1;
            }
        }
        (targeted, by_state)
    })
    .await?;
    let in_sync = by_state.get("in_sync").copied().unwrap_or(0);
    let share = if targeted == 0 {
        0.0
    } else {
        in_sync as f64 / targeted as f64
    };
    let pass = targeted > 0 && share >= threshold;
    Ok(Answer::Json(json!({
        "app": params.get("app"),
        "version": params.get("version"),
        "commit": params.get("commit"),
        "group": params.get("group"),
        "targeted_clusters": targeted,
        "in_sync": in_sync,
        "by_state": by_state,
        "share_in_sync": share,
        "threshold": threshold,
        "verdict": if pass { "pass" } else { "fail" },
        "reason": if targeted == 0 { "no cluster in this selection desires that version or commit" } else if pass { "the share in sync reaches the threshold" } else { "the share in sync is below the threshold" },
    })))
}

/// `GET /api/v1/history`: observed transitions of a cluster (optionally one app) and the
/// desired-state changes of its render group, over a time range.
pub async fn history(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(pairs): Pairs,
) -> Result<Answer, ApiError> {
    let params = Params::new(
        pairs,
        &["cluster", "group", "app", "from", "to", "limit", "format"],
        &[],
    )?;
    let Some(cluster_id) = params.get("cluster").map(str::to_owned) else {
        return group_history(&state, &principal, &params).await;
    };
    if params.get("group").is_some() {
        return Err(ApiError::bad("group", "give cluster or group, not both"));
    }
    fleetscope_model::ClusterId::parse(&cluster_id)
        .map_err(|err| ApiError::bad("cluster", err.to_string()))?;
    let app = params.app()?;
    let limit = params.limit()?;
    let csv_wanted = params.csv()?;
    let (from, to) = params.range(state.now(), 86_400)?;
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
    let mut events: Vec<(u32, Value)> = observed
        .iter()
        .map(|r| {
            (
                r.observed_at,
                json!({
                    "at": time_text(r.observed_at), "type": "observed", "app": r.app,
                    "kind": r.object_kind, "name": r.object_name, "version": r.version,
                    "revision": r.applied_revision, "health": r.health, "sync": r.sync,
                    "reason": r.reason, "message": r.message, "deleted": r.deleted != 0,
                }),
            )
        })
        .chain(desired.iter().map(|d| {
            (
                d.desired_since,
                json!({
                    "at": time_text(d.desired_since), "type": "desired", "app": d.app,
                    "version": d.version, "render_group": d.render_group, "commit": d.commit,
                    "render_id": d.render_id, "reasons": d.reasons, "removed": d.removed != 0,
                }),
            )
        }))
        .collect();
    events.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    let truncated = events.len() > limit;
    let events: Vec<Value> = events.into_iter().take(limit).map(|(_, v)| v).collect();
    if csv_wanted {
        let columns = [
            "at", "type", "app", "version", "revision", "health", "sync", "commit", "message",
        ];
        return Ok(Answer::Csv(csv(
            &columns,
            events.iter().map(|v| csv_row(v, &columns)),
        )));
    }
    Ok(Answer::Json(json!({
        "cluster": cluster_id,
        "render_group": render_group,
        "from": time_text(fleetscope_store::to_datetime(from)),
        "to": time_text(fleetscope_store::to_datetime(to)),
        "events": events,
        "truncated": truncated,
    })))
}

const HISTORY_COLUMNS: &[&str] = &[
    "at", "type", "cluster", "app", "version", "revision", "health", "sync", "commit", "message",
];

/// History of a group subtree (the caller's scope if none is given) and/or one app: observed
/// transitions of its clusters and, for unscoped callers, the renders of the period.
async fn group_history(
    state: &Arc<AppState>,
    principal: &Principal,
    params: &Params,
) -> Result<Answer, ApiError> {
    let app = params.app()?;
    let asked = params.group()?;
    let limit = params.limit()?;
    let csv_wanted = params.csv()?;
    let (from, to) = params.range(state.now(), 86_400)?;
    // The narrower of scope and asked group; disjoint ones select nothing.
    let group = match (&principal.scope, &asked) {
        (None, g) => g.clone(),
        (Some(scope), None) => Some(scope.clone()),
        (Some(scope), Some(g)) if g.is_within(scope) => Some(g.clone()),
        (Some(scope), Some(g)) if scope.is_within(g) => Some(scope.clone()),
        (Some(_), Some(_)) => {
            return Ok(Answer::Json(
                json!({ "group": asked.as_ref().map(GroupPath::as_str), "events": [], "truncated": false }),
            ));
        }
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
    let mut events: Vec<(u32, Value)> = observed
        .iter()
        .map(|r| {
            (r.observed_at, json!({
                "at": time_text(r.observed_at), "type": "observed", "cluster": r.cluster_id, "app": r.app,
                "kind": r.object_kind, "name": r.object_name, "version": r.version,
                "revision": r.applied_revision, "health": r.health, "sync": r.sync,
                "reason": r.reason, "message": r.message, "deleted": r.deleted != 0,
            }))
        })
        .chain(renders.iter().map(|r| {
            (r.rendered_at, json!({
                "at": time_text(r.rendered_at), "type": "render", "commit": r.commit,
                "render_id": r.render_id, "message": r.summary,
                "render_groups": r.render_groups, "clusters": r.clusters,
            }))
        }))
        .collect();
    events.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    let truncated = events.len() > limit;
    let events: Vec<Value> = events.into_iter().take(limit).map(|(_, v)| v).collect();
    if csv_wanted {
        return Ok(Answer::Csv(csv(
            HISTORY_COLUMNS,
            events.iter().map(|v| csv_row(v, HISTORY_COLUMNS)),
        )));
    }
    Ok(Answer::Json(json!({
        "group": group.as_ref().map(GroupPath::as_str),
        "app": app,
        "from": time_text(fleetscope_store::to_datetime(from)),
        "to": time_text(fleetscope_store::to_datetime(to)),
        "events": events,
        "truncated": truncated,
    })))
}
