//! Each route's query parameters as one type. A route's type lists its parameters once, from
//! documented parts (the selection, paging, the format, what is the route's own); the OpenAPI
//! document takes the parameters from that list, and so does the check that refuses every
//! parameter a route does not take and every repeated one that cannot repeat (a parameter whose
//! schema is an array repeats). The document and the routes cannot disagree on what a route
//! takes.

use std::sync::OnceLock;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use fleetscope_model::{DriftState, GroupPath, Timestamp};
use serde::Deserialize;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, ToSchema};

use crate::answers::DriftStateName;
use crate::params::{ApiError, Params};

/// A route's query: parsed from the request's parameters, documented by [`IntoParams`].
pub trait RouteQuery: IntoParams + Sized {
    /// The parameters the route takes and which of them repeat, from its documentation.
    fn names() -> &'static Names;
    fn parse(params: &Params) -> Result<Self, ApiError>;
}

/// The names of a route's query parameters, and the ones that may repeat.
#[derive(Debug)]
pub struct Names {
    pub all: Vec<String>,
    pub repeatable: Vec<String>,
}

impl Names {
    pub fn of<T: IntoParams>() -> Names {
        let params: Vec<Parameter> = T::into_params(|| Some(ParameterIn::Query));
        Names {
            all: params.iter().map(|p| p.name.clone()).collect(),
            repeatable: params
                .iter()
                .filter(|p| matches!(p.schema, Some(RefOr::T(Schema::Array(_)))))
                .map(|p| p.name.clone())
                .collect(),
        }
    }
}

/// The extractor: the query string checked against the route's documented parameters, then
/// parsed into the route's type. Every failure is a 400 naming the parameter.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: RouteQuery> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let Query(pairs) = Query::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let names = T::names();
        let all: Vec<&str> = names.all.iter().map(String::as_str).collect();
        let repeatable: Vec<&str> = names.repeatable.iter().map(String::as_str).collect();
        let params = Params::new(pairs, &all, &repeatable).map_err(IntoResponse::into_response)?;
        T::parse(&params)
            .map(ApiQuery)
            .map_err(IntoResponse::into_response)
    }
}

/// A route's parameters: the parts' parameters in order.
macro_rules! route_query {
    ($route:ty: $($part:ty),* $(,)?) => {
        impl IntoParams for $route {
            fn into_params(parameter_in: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
                #[allow(unused_mut)]
                let mut all = Vec::new();
                let _ = &parameter_in;
                $( all.extend(<$part as IntoParams>::into_params(&parameter_in)); )*
                all
            }
        }

        impl RouteQuery for $route {
            fn names() -> &'static Names {
                static NAMES: OnceLock<Names> = OnceLock::new();
                NAMES.get_or_init(Names::of::<$route>)
            }

            fn parse(params: &Params) -> Result<Self, ApiError> {
                <$route>::from_params(params)
            }
        }
    };
}

/// The bounds and default of one numeric parameter as its route part documents them
/// (`#[param(minimum = …, maximum = …, default = …)]`): declared there once, read back here by
/// the parser, so the document and the check cannot disagree.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bounds {
    minimum: f64,
    maximum: f64,
    default: f64,
}

impl Bounds {
    /// The bounds `T` documents for `name`; a part without all three is a programming error
    /// the route's first request (and the tests) find.
    fn of<T: IntoParams>(name: &str) -> Bounds {
        let parameter = T::into_params(|| Some(ParameterIn::Query))
            .into_iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("the part documents no parameter {name}"));
        let Some(RefOr::T(Schema::Object(schema))) = parameter.schema else {
            panic!("{name} has no inline schema");
        };
        let number = |value: Option<serde_json::Value>, what: &str| {
            value
                .and_then(|v| v.as_f64())
                .unwrap_or_else(|| panic!("{name} documents no {what}"))
        };
        let as_json = |n: Option<utoipa::Number>| n.and_then(|n| serde_json::to_value(n).ok());
        Bounds {
            minimum: number(as_json(schema.minimum), "minimum"),
            maximum: number(as_json(schema.maximum), "maximum"),
            default: number(schema.default, "default"),
        }
    }

    /// `name` as a whole number within the bounds.
    fn integer(self, params: &Params, name: &str) -> Result<u64, ApiError> {
        params.integer(
            name,
            self.minimum as u64,
            self.maximum as u64,
            self.default as u64,
        )
    }

    /// `name` as a number within the bounds.
    fn number(self, params: &Params, name: &str) -> Result<f64, ApiError> {
        params.number(name, self.minimum, self.maximum, self.default)
    }

    /// `limit` within the bounds.
    fn limit(self, params: &Params) -> Result<usize, ApiError> {
        params.limit(
            self.minimum as u64,
            self.maximum as u64,
            self.default as u64,
        )
    }
}

/// The documented bounds of parameter `$name` of part `$part`, read once.
macro_rules! documented {
    ($part:ty, $name:literal) => {{
        static BOUNDS: OnceLock<Bounds> = OnceLock::new();
        *BOUNDS.get_or_init(|| Bounds::of::<$part>($name))
    }};
}

// The documented parts. Each declares its parameters once: name, description, example, and for
// a number its bounds and default, which the parser reads back (`documented!`). The parts are
// never built: the values are parsed by `Params`, which gives every parameter the same errors
// on every route.

/// `group`.
#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct GroupPart {
    /// Only clusters within this group subtree (`emea/de`): the group and every group below it.
    #[param(example = "emea/de")]
    group: Option<String>,
}

/// `environment`.
#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct EnvironmentPart {
    /// Only clusters of this environment (a DNS label).
    #[param(example = "prod")]
    environment: Option<String>,
}

/// `label`.
#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct LabelPart {
    /// `key=value` a cluster's labels must have; repeatable (`label=a=1&label=b=2`), all must
    /// match.
    #[param(required = false, example = json!(["tier=edge"]))]
    label: Vec<String>,
}

/// `app`, optional.
#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct AppPart {
    /// Only this app.
    #[param(example = "checkout")]
    app: Option<String>,
}

/// `limit`.
#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct LimitPart {
    /// Items per page, a whole number from 1 to 1000 written in digits only (default 100).
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<u32>,
}

/// `cursor`.
#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct CursorPart {
    /// The `next_cursor` of the previous page, as it was handed out; anything else is a 400.
    cursor: Option<String>,
}

/// How an answer is written.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum Format {
    Json,
    Csv,
}

/// `format`.
#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct FormatPart {
    /// `json` (default) or `csv`.
    #[param(inline)]
    format: Option<Format>,
}

/// `at`.
#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct AtPart {
    /// A past moment, RFC 3339 (`2026-11-20T14:00:00Z`) or seconds since 1970: the answer as
    /// the hub would have given it then, from the history kept (from the oldest checkpoint on;
    /// a moment before it, or in the future, is a 400 that says what is kept). Without it, the
    /// fleet now. See docs/hub.md, "The fleet at a past moment".
    #[param(value_type = Option<String>, example = "2026-11-20T14:00:00Z")]
    at: Option<String>,
}

/// What every listing of clusters can be narrowed to: the caller's scope is added by the
/// handler.
#[derive(Debug, Default)]
pub struct Selection {
    pub group: Option<GroupPath>,
    pub environment: Option<String>,
    pub labels: Vec<(String, String)>,
    pub app: Option<String>,
}

impl Selection {
    fn from_params(params: &Params) -> Result<Selection, ApiError> {
        Ok(Selection {
            group: params.group()?,
            environment: params.environment()?,
            labels: params.labels()?,
            app: params.app()?,
        })
    }
}

/// `GET /api/v1/summary`.
#[derive(Debug)]
pub struct SummaryQuery {
    /// `at`: the fleet at that past moment; `None` for now.
    pub at: Option<Timestamp>,
    pub selection: Selection,
    pub depth: usize,
    pub csv: bool,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct SummaryPart {
    /// Deepest group level listed, a whole number from 0 to 16 (default 16: every level);
    /// 0 lists only `total`.
    #[param(minimum = 0, maximum = 16, default = 16)]
    depth: Option<u32>,
}

route_query!(SummaryQuery: GroupPart, EnvironmentPart, LabelPart, AppPart, SummaryPart, AtPart, FormatPart);

impl SummaryQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        Ok(SummaryQuery {
            at: params.time("at")?,
            selection: Selection::from_params(params)?,
            depth: documented!(SummaryPart, "depth").integer(params, "depth")? as usize,
            csv: params.csv()?,
        })
    }
}

/// `GET /api/v1/drift`.
#[derive(Debug)]
pub struct DriftQuery {
    /// `at`: the fleet at that past moment; `None` for now.
    pub at: Option<Timestamp>,
    pub selection: Selection,
    /// Never empty: every state but `in_sync` when none is asked for.
    pub states: Vec<DriftState>,
    pub limit: usize,
    pub cursor: Option<String>,
    pub csv: bool,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct DriftPart {
    /// Drift states to list, repeatable or comma-separated (`state=failed,missing`); default
    /// every state but `in_sync`.
    #[param(required = false)]
    state: Vec<DriftStateName>,
}

route_query!(DriftQuery: GroupPart, EnvironmentPart, LabelPart, AppPart, DriftPart, AtPart, LimitPart, CursorPart, FormatPart);

impl DriftQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        let mut states = params.states()?;
        if states.is_empty() {
            states = DriftState::ALL
                .iter()
                .copied()
                .filter(|s| *s != DriftState::InSync)
                .collect();
        }
        Ok(DriftQuery {
            at: params.time("at")?,
            selection: Selection::from_params(params)?,
            states,
            limit: documented!(LimitPart, "limit").limit(params)?,
            cursor: params.cursor()?,
            csv: params.csv()?,
        })
    }
}

/// `GET /api/v1/clusters/{id}`.
#[derive(Debug)]
pub struct ClusterQuery {
    /// `at`: the fleet at that past moment; `None` for now.
    pub at: Option<Timestamp>,
    pub history_hours: f64,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct ClusterPart {
    /// How far back the page's `history` reaches, in hours, up to 744 (default 24); 0 for
    /// none (then ClickHouse is not read). The history holds the newest 200 transitions of the
    /// cluster's objects within that time, newest first; `/api/v1/history?cluster=` reaches
    /// further back, with the render group's desired-state changes beside them.
    #[param(minimum = 0, maximum = 744, default = 24)]
    history_hours: Option<f64>,
}

route_query!(ClusterQuery: ClusterPart, AtPart);

impl ClusterQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        Ok(ClusterQuery {
            at: params.time("at")?,
            history_hours: documented!(ClusterPart, "history_hours")
                .number(params, "history_hours")?,
        })
    }
}

/// `GET /api/v1/apps/{app}/versions`.
#[derive(Debug)]
pub struct VersionsQuery {
    /// `at`: the fleet at that past moment; `None` for now.
    pub at: Option<Timestamp>,
    /// Without `app`: the app is in the path.
    pub selection: Selection,
    pub depth: usize,
    pub version: Option<String>,
    pub limit: usize,
    pub cursor: Option<String>,
    pub csv: bool,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct VersionsPart {
    /// Group level of the per-group counts, a whole number from 1 to 16 (default 1).
    #[param(minimum = 1, maximum = 16, default = 1)]
    depth: Option<u32>,
    /// List the clusters running this version, a page at a time (`limit`, `cursor`).
    #[param(example = "1.4.2")]
    version: Option<String>,
}

route_query!(VersionsQuery: GroupPart, EnvironmentPart, LabelPart, VersionsPart, AtPart, LimitPart, CursorPart, FormatPart);

impl VersionsQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        Ok(VersionsQuery {
            at: params.time("at")?,
            selection: Selection::from_params(params)?,
            depth: documented!(VersionsPart, "depth").integer(params, "depth")? as usize,
            version: params.get("version").map(str::to_owned),
            limit: documented!(LimitPart, "limit").limit(params)?,
            cursor: params.cursor()?,
            csv: params.csv()?,
        })
    }
}

/// `GET /api/v1/stale`.
#[derive(Debug)]
pub struct StaleQuery {
    /// `at`: the fleet at that past moment; `None` for now.
    pub at: Option<Timestamp>,
    pub selection: Selection,
    pub limit: usize,
    pub cursor: Option<String>,
    pub csv: bool,
}

route_query!(StaleQuery: GroupPart, EnvironmentPart, LabelPart, LimitPart, CursorPart, AtPart, FormatPart);

impl StaleQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        Ok(StaleQuery {
            at: params.time("at")?,
            selection: Selection::from_params(params)?,
            limit: documented!(LimitPart, "limit").limit(params)?,
            cursor: params.cursor()?,
            csv: params.csv()?,
        })
    }
}

/// `GET /api/v1/explain`.
#[derive(Debug)]
pub struct ExplainQuery {
    pub cluster: String,
    pub app: Option<String>,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct ExplainPart {
    /// The cluster id.
    #[param(example = "berlin-01")]
    cluster: String,
}

route_query!(ExplainQuery: ExplainPart, AppPart);

impl ExplainQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        let cluster = params
            .get("cluster")
            .ok_or_else(|| ApiError::bad("cluster", "required"))?
            .to_owned();
        fleetscope_model::ClusterId::parse(&cluster)
            .map_err(|err| ApiError::bad("cluster", err.to_string()))?;
        Ok(ExplainQuery {
            cluster,
            app: params.app()?,
        })
    }
}

/// `GET /api/v1/environments`.
#[derive(Debug)]
pub struct EnvironmentsQuery {
    /// `at`: the fleet at that past moment; `None` for now.
    pub at: Option<Timestamp>,
    /// Without `environment`: every environment is a column of the answer.
    pub selection: Selection,
    pub csv: bool,
}

route_query!(EnvironmentsQuery: GroupPart, LabelPart, AppPart, AtPart, FormatPart);

impl EnvironmentsQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        Ok(EnvironmentsQuery {
            at: params.time("at")?,
            selection: Selection::from_params(params)?,
            csv: params.csv()?,
        })
    }
}

/// `GET /api/v1/gate`.
#[derive(Debug)]
pub struct GateQuery {
    /// `at`: the fleet at that past moment; `None` for now.
    pub at: Option<Timestamp>,
    /// `app` is required here.
    pub selection: Selection,
    pub rules: fleetscope_engine::gate::Rules,
    /// `max_failed` as asked, to say it back.
    pub max_failed: Option<String>,
    pub limit: usize,
    pub cursor: Option<String>,
}

/// `stale` of the gate.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
enum GateStale {
    Exclude,
    Count,
    Fail,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct GatePart {
    /// The app rolled out.
    #[param(example = "checkout")]
    app: String,
    /// The version rolled out (give this or `commit`).
    #[param(example = "1.4.2")]
    version: Option<String>,
    /// The GitOps commit rolled out (give this or `version`).
    commit: Option<String>,
    /// Share of the targeted clusters that must be soaked (in sync, for at least `soak`) to
    /// pass, from 0 to 1 (default 1).
    #[param(minimum = 0, maximum = 1, default = 1)]
    threshold: Option<f64>,
    /// How long a targeted cluster must have been in sync to count towards `threshold`:
    /// whole seconds (`7200`) or a whole number with unit `s`, `m` or `h` (`2h`), at most 30
    /// days (default 0: in sync now is enough). In sync since the later of the render that
    /// made the version desired and the arrival of the object's latest report, confirmed up
    /// to the cluster's last heartbeat (docs/hub.md, "Rollout gates").
    #[param(example = "2h")]
    soak: Option<String>,
    /// The most targeted clusters that may be `failed`: a count (`3`, digits only), a share
    /// of the targeted clusters from 0 to 1 (`0.02`) or a percentage (`2%`), rounded down to
    /// whole clusters. More failed clusters than that fail the gate, whatever the share in
    /// sync (default: no limit).
    #[param(example = "2%")]
    max_failed: Option<String>,
    /// Stale targeted clusters: `exclude` leaves them out of the targeted clusters, `count`
    /// (the default) counts them as not in sync, `fail` fails the gate
    /// while any is stale.
    #[param(inline)]
    stale: Option<GateStale>,
}

route_query!(GateQuery: GatePart, GroupPart, EnvironmentPart, LabelPart, LimitPart, CursorPart, AtPart);

impl GateQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        let selection = Selection::from_params(params)?;
        let app = selection
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
        let max_failed = params.get("max_failed").map(str::to_owned);
        Ok(GateQuery {
            at: params.time("at")?,
            selection,
            rules: fleetscope_engine::gate::Rules {
                app,
                version,
                commit,
                threshold: documented!(GatePart, "threshold").number(params, "threshold")?,
                soak: params
                    .get("soak")
                    .map(crate::gate_params::parse_soak)
                    .transpose()?
                    .unwrap_or(0),
                max_failed: max_failed
                    .as_deref()
                    .map(crate::gate_params::parse_max_failed)
                    .transpose()?,
                stale: crate::gate_params::parse_stale(params)?,
            },
            max_failed,
            limit: documented!(LimitPart, "limit").limit(params)?,
            cursor: params.cursor()?,
        })
    }
}

/// `GET /api/v1/history`.
#[derive(Debug)]
pub struct HistoryQuery {
    pub cluster: Option<String>,
    pub group: Option<GroupPath>,
    pub app: Option<String>,
    pub limit: usize,
    pub csv: bool,
    from: Option<Timestamp>,
    to: Option<Timestamp>,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct HistoryPart {
    /// One cluster (or give `group` and/or `app`; not both `cluster` and `group`).
    cluster: Option<String>,
    /// Start: seconds since 1970 or RFC 3339 (default a day before `to`).
    #[param(example = "2026-11-22T00:00:00Z")]
    from: Option<String>,
    /// End, exclusive (default now); the range spans at most 31 days.
    to: Option<String>,
}

route_query!(HistoryQuery: HistoryPart, GroupPart, AppPart, LimitPart, FormatPart);

impl HistoryQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        let cluster = params.get("cluster").map(str::to_owned);
        if cluster.is_some() && params.get("group").is_some() {
            return Err(ApiError::bad("group", "give cluster or group, not both"));
        }
        if let Some(id) = &cluster {
            fleetscope_model::ClusterId::parse(id)
                .map_err(|err| ApiError::bad("cluster", err.to_string()))?;
        }
        Ok(HistoryQuery {
            cluster,
            group: params.group()?,
            app: params.app()?,
            limit: documented!(LimitPart, "limit").limit(params)?,
            csv: params.csv()?,
            from: params.time("from")?,
            to: params.time("to")?,
        })
    }

    /// `from`/`to`, defaulting to the day before `now`; bounded.
    pub fn range(&self, now: Timestamp) -> Result<(Timestamp, Timestamp), ApiError> {
        crate::params::range(self.from, self.to, now, 86_400)
    }
}

/// `GET /api/v1/insights/failures`.
#[derive(Debug)]
pub struct InsightsQuery {
    /// `at`: the fleet at that past moment; `None` for now.
    pub at: Option<Timestamp>,
    /// `app` is required here.
    pub selection: Selection,
    pub app: String,
    pub version: Option<String>,
    pub limit: usize,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct InsightsPart {
    /// The app whose failing clusters are compared with its in-sync ones.
    #[param(example = "checkout")]
    app: String,
    /// Only clusters whose desired version of `app` is this one (what runs may differ: a
    /// cluster failing to roll out the version still runs the one before).
    #[param(example = "1.5.0")]
    version: Option<String>,
    /// Findings listed at most, a whole number from 1 to 1000 written in digits only (default
    /// 20).
    #[param(minimum = 1, maximum = 1000, default = 20)]
    limit: Option<u32>,
}

route_query!(InsightsQuery: InsightsPart, GroupPart, EnvironmentPart, LabelPart, AtPart);

impl InsightsQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        let selection = Selection::from_params(params)?;
        let app = selection
            .app
            .clone()
            .ok_or_else(|| ApiError::bad("app", "required"))?;
        Ok(InsightsQuery {
            at: params.time("at")?,
            selection,
            app,
            version: params.get("version").map(str::to_owned),
            limit: documented!(InsightsPart, "limit").integer(params, "limit")? as usize,
        })
    }
}

/// `GET /api/v1/openapi.json` takes no parameters.
#[derive(Debug)]
pub struct NoQuery;

route_query!(NoQuery:);

impl NoQuery {
    fn from_params(_: &Params) -> Result<Self, ApiError> {
        Ok(NoQuery)
    }
}

/// `GET /api/v1/rollouts`.
#[derive(Debug)]
pub struct RolloutsQuery {
    pub selection: Selection,
    pub since: Option<Timestamp>,
    pub status: Option<fleetscope_engine::rollouts::progress::Status>,
    pub limit: usize,
    pub cursor: Option<String>,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct RolloutsPart {
    /// Only rollouts that started at or after this moment: RFC 3339 or seconds since 1970.
    #[param(value_type = Option<String>, example = "2026-11-20T00:00:00Z")]
    since: Option<String>,
    /// Only rollouts with this status.
    #[param(value_type = Option<crate::answers::RolloutStatusName>)]
    status: Option<String>,
}

route_query!(RolloutsQuery: AppPart, RolloutsPart, GroupPart, EnvironmentPart, LabelPart, LimitPart, CursorPart);

impl RolloutsQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        let status = params
            .get("status")
            .map(|s| {
                fleetscope_engine::rollouts::progress::Status::parse(s).ok_or_else(|| {
                    ApiError::bad(
                        "status",
                        format!("{s:?} is not one of in_progress, complete, stalled, superseded, rolled_back"),
                    )
                })
            })
            .transpose()?;
        Ok(RolloutsQuery {
            selection: Selection::from_params(params)?,
            since: params.time("since")?,
            status,
            limit: documented!(LimitPart, "limit").limit(params)?,
            cursor: params.cursor()?,
        })
    }
}

/// `GET /api/v1/rollouts/{rollout}`.
#[derive(Debug)]
pub struct RolloutQuery {
    pub selection: Selection,
    pub depth: usize,
    pub limit: usize,
    pub cursor: Option<String>,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct RolloutPart {
    /// Group levels of the per-group curves, a whole number from 0 to 16 (default 1: the
    /// top-level groups); 0 gives none.
    #[param(minimum = 0, maximum = 16, default = 1)]
    depth: Option<u32>,
}

route_query!(RolloutQuery: RolloutPart, GroupPart, EnvironmentPart, LabelPart, LimitPart, CursorPart);

impl RolloutQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        Ok(RolloutQuery {
            selection: Selection::from_params(params)?,
            depth: documented!(RolloutPart, "depth").integer(params, "depth")? as usize,
            limit: documented!(LimitPart, "limit").limit(params)?,
            cursor: params.cursor()?,
        })
    }
}

/// `GET /api/v1/delivery`.
#[derive(Debug)]
pub struct DeliveryQuery {
    pub selection: Selection,
    /// The window in seconds.
    pub window: u32,
}

#[allow(dead_code)]
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
struct DeliveryPart {
    /// How far back from now: a whole number of days (`30d`) or hours (`12h`), from 1 hour to
    /// 90 days (default `30d`).
    #[param(example = "30d")]
    window: Option<String>,
}

route_query!(DeliveryQuery: AppPart, DeliveryPart, GroupPart, EnvironmentPart, LabelPart);

impl DeliveryQuery {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        let window = match params.get("window") {
            None => 30 * 86_400,
            Some(text) => parse_window(text).ok_or_else(|| {
                ApiError::bad(
                    "window",
                    format!("{text:?} is not a number of days (30d) or hours (12h) from 1h to 90d"),
                )
            })?,
        };
        Ok(DeliveryQuery {
            selection: Selection::from_params(params)?,
            window,
        })
    }
}

/// `30d` or `12h` in seconds, from 1 hour to 90 days.
fn parse_window(text: &str) -> Option<u32> {
    let (number, unit) = match (text.strip_suffix('d'), text.strip_suffix('h')) {
        (Some(days), _) => (days, 86_400),
        (None, Some(hours)) => (hours, 3600),
        (None, None) => return None,
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) || number.len() > 4 {
        return None;
    }
    let seconds = number.parse::<u32>().ok()?.checked_mul(unit)?;
    (3600..=90 * 86_400).contains(&seconds).then_some(seconds)
}
