//! `fleetscope hub`: the state handlers share, the router, the refresher, and the command.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_runtime::clock;
use fleetscope_store::Store;

use crate::auth::{Auth, LiveAuth};
use crate::index::{Fleet, Index};
use crate::metrics::{HubMetrics, MetricsConfig};
use crate::params::ApiError;
use fleetscope_serve::reload::{self, ReloadMetrics};
use fleetscope_serve::tls::{TlsAcceptor, TlsFiles};

/// How long cached answers live at most; new data invalidates them sooner (the index
/// generation is part of every key).
pub const CACHE_TTL: Duration = Duration::from_secs(2);

/// The deadline of every request; one still unanswered then is answered 503.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Seconds since the last successful read from ClickHouse past which `/readyz` answers 503.
pub const READY_MAX_REFRESH_AGE: i64 = 30;

#[derive(Debug, Clone, clap::Args)]
pub struct HubArgs {
    /// Address to listen on.
    #[arg(long, env = "FLEETSCOPE_HUB_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Bearer tokens with roles and scopes (YAML). Required unless --insecure.
    #[arg(long, env = "FLEETSCOPE_HUB_TOKENS")]
    pub tokens: Option<PathBuf>,
    /// Serve without authentication (every caller is an unscoped admin). Local use only.
    #[arg(long, env = "FLEETSCOPE_HUB_INSECURE")]
    pub insecure: bool,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key); reloaded when it changes.
    #[arg(long, env = "FLEETSCOPE_HUB_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert; reloaded when it changes.
    #[arg(long, env = "FLEETSCOPE_HUB_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve /metrics without a token (for Prometheus inside a trusted network).
    #[arg(long, env = "FLEETSCOPE_HUB_OPEN_METRICS")]
    pub open_metrics: bool,
    /// Seconds without a heartbeat after which a cluster is stale.
    #[arg(long, env = "FLEETSCOPE_STALE_AFTER", default_value_t = 600)]
    pub stale_after: i64,
    /// Seconds a new desired state may take to arrive before it counts as drift.
    #[arg(long, env = "FLEETSCOPE_GRACE", default_value_t = 900)]
    pub grace: i64,
    /// Seconds between reads of new data from ClickHouse.
    #[arg(long, env = "FLEETSCOPE_HUB_REFRESH", default_value_t = 1.0)]
    pub refresh_seconds: f64,
    /// Group levels exported as metric labels (1 = regions, 2 = countries, …).
    #[arg(long, env = "FLEETSCOPE_HUB_METRICS_DEPTH", default_value_t = 2)]
    pub metrics_depth: usize,
    /// At most this many groups and this many apps get series of their own; the rest are
    /// summed into `_other`.
    #[arg(long, env = "FLEETSCOPE_HUB_METRICS_MAX_GROUPS", default_value_t = 500)]
    pub metrics_max_groups: usize,
    #[arg(long, env = "FLEETSCOPE_HUB_METRICS_MAX_APPS", default_value_t = 200)]
    pub metrics_max_apps: usize,
    /// Seconds between rollup snapshots written for the dashboards' trends (0: none). Taken at
    /// multiples of the interval, so replicas write identical rows that ClickHouse collapses.
    #[arg(long, env = "FLEETSCOPE_HUB_SNAPSHOT_EVERY", default_value_t = 300)]
    pub snapshot_every: u64,
    /// Deepest group level the snapshots keep.
    #[arg(long, env = "FLEETSCOPE_HUB_SNAPSHOT_DEPTH", default_value_t = 3)]
    pub snapshot_depth: usize,
}

/// What every handler shares.
pub struct AppState {
    pub index: Arc<Index>,
    pub policy: DriftPolicy,
    pub cache: moka::future::Cache<String, Arc<dyn std::any::Any + Send + Sync>>,
    /// Fleets built at past moments (`at`), see [`crate::past`].
    pub past: crate::past::Past,
    pub metrics: HubMetrics,
    /// A fixed clock for tests; `None` reads the system clock.
    pub fixed_now: Option<Timestamp>,
    /// When the last refresh succeeded (seconds since the epoch), for readiness.
    pub last_refresh: AtomicI64,
    pub refresh_failures: AtomicU64,
    /// Metrics of the files reloaded while the hub runs (token file, TLS certificate), added
    /// to `/metrics`; empty when nothing is watched.
    pub reloads: prometheus_client::registry::Registry,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl AppState {
    pub fn new(index: Arc<Index>, policy: DriftPolicy, metrics: MetricsConfig) -> AppState {
        AppState {
            index,
            policy,
            cache: moka::future::Cache::builder()
                .max_capacity(256)
                .time_to_live(CACHE_TTL)
                .build(),
            past: crate::past::Past::default(),
            metrics: HubMetrics::new(metrics),
            fixed_now: None,
            last_refresh: AtomicI64::new(clock::now().seconds()),
            refresh_failures: AtomicU64::new(0),
            reloads: prometheus_client::registry::Registry::default(),
        }
    }

    /// Registers `fleetscope_hub_<name>_version` and `fleetscope_hub_<name>_reloads_total`.
    pub fn reload_metrics(&mut self, name: &str, what: &str) -> ReloadMetrics {
        ReloadMetrics::register(
            self.reloads.sub_registry_with_prefix("fleetscope_hub"),
            name,
            what,
        )
    }

    pub fn now(&self) -> Timestamp {
        self.fixed_now.unwrap_or_else(clock::now)
    }

    /// A snapshot of the fleet whose maintained states are right at the returned moment: now,
    /// or, while the writer is applying a refresh, the snapshot's own moment.
    pub fn view(&self) -> (Arc<Fleet>, Timestamp) {
        self.index.view(self.now(), &self.policy)
    }

    /// The fleet as it was at `at` (built, or kept from an earlier question about the same
    /// moment and reach). A moment in the future, or before the history kept, is a 400 naming
    /// `at`.
    pub async fn fleet_at(
        self: &Arc<Self>,
        at: Timestamp,
        reach: crate::past::Reach,
    ) -> Result<Arc<Fleet>, ApiError> {
        let now = self.now();
        if at > now {
            return Err(ApiError::bad(
                "at",
                format!(
                    "{} is in the future (the hub's clock says {}); leave `at` out for the fleet now",
                    at.seconds(),
                    now.seconds()
                ),
            ));
        }
        let state = self.clone();
        let fleet = self
            .past
            .fleet_at(
                self.index.store().clone(),
                at,
                reach,
                self.policy,
                move |ok, took| state.metrics.query("fleet at a past moment", ok, took),
            )
            .await
            .map_err(|err| match &*err {
                crate::past::PastError::Store(_) => ApiError::unavailable(err.to_string()),
                _ => ApiError::bad("at", err.to_string()),
            })?;
        Ok(fleet)
    }

    /// Computes `f` on the fleet, or takes the answer cached for the same question on the
    /// same data (the key gets the index generation: new data is a new key).
    pub async fn cached<T: Send + Sync + 'static>(
        self: &Arc<Self>,
        key: String,
        f: impl FnOnce(&Fleet, Timestamp, &DriftPolicy) -> T + Send + 'static,
    ) -> Result<Arc<T>, ApiError> {
        let (fleet, now) = self.view();
        let key = format!("{}|{key}", fleet.generation);
        if let Some(hit) = self.cache.get(&key).await {
            if let Ok(value) = hit.downcast::<T>() {
                self.metrics.cache_hit(true);
                return Ok(value);
            }
        }
        self.metrics.cache_hit(false);
        let state = self.clone();
        let value = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let value = f(&fleet, now, &state.policy);
            state.metrics.computed(started.elapsed());
            value
        })
        .await
        .map_err(|err| ApiError::unavailable(format!("the computation failed: {err}")))?;
        let value = Arc::new(value);
        self.cache
            .insert(key, value.clone() as Arc<dyn std::any::Any + Send + Sync>)
            .await;
        Ok(value)
    }

    /// [`AppState::cached`] for the live fleet; at a past moment, `f` on the fleet built for
    /// it (the built fleet is what is kept, not the answer).
    pub async fn cached_at<T: Send + Sync + 'static>(
        self: &Arc<Self>,
        at: Option<Timestamp>,
        reach: crate::past::Reach,
        key: String,
        f: impl FnOnce(&Fleet, Timestamp, &DriftPolicy) -> T + Send + 'static,
    ) -> Result<Arc<T>, ApiError> {
        let Some(at) = at else {
            return self.cached(key, f).await;
        };
        let fleet = self.fleet_at(at, reach).await?;
        let policy = self.policy;
        let value = tokio::task::spawn_blocking(move || f(&fleet, at, &policy))
            .await
            .map_err(|err| ApiError::unavailable(format!("the computation failed: {err}")))?;
        Ok(Arc::new(value))
    }

    /// Runs one store read, timed and counted; a failure is a 503.
    pub async fn store_call<T>(
        &self,
        name: &'static str,
        call: impl Future<Output = fleetscope_store::Result<T>>,
    ) -> Result<T, ApiError> {
        use tracing::Instrument as _;
        let started = Instant::now();
        let result = call
            .instrument(crate::telemetry::query_span(name, "SELECT"))
            .await;
        self.metrics.query(name, result.is_ok(), started.elapsed());
        result.map_err(|err| ApiError::unavailable(format!("ClickHouse: {err}")))
    }
}

/// The router: health and readiness open, and the OpenAPI document (it holds no fleet data);
/// metrics open when configured; the rest of the API behind auth (the token file in force, see
/// [`LiveAuth`]). Every route has [`REQUEST_TIMEOUT`].
pub fn router(state: Arc<AppState>, auth: impl Into<LiveAuth>, open_metrics: bool) -> Router {
    let auth: LiveAuth = auth.into();
    // The routes and the OpenAPI document come from the same handlers, so the two cannot
    // disagree on what exists, or on which routes need a token.
    let routes = crate::openapi::routes();
    let require = || axum::middleware::from_fn_with_state(auth.clone(), crate::auth::require);
    let api = routes.guarded.layer(require()).merge(routes.open);
    let metrics = Router::new().route("/metrics", get(metrics_endpoint));
    let metrics = if open_metrics {
        metrics
    } else {
        metrics.layer(require())
    };
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .merge(api)
        .merge(metrics)
        .fallback(|| async { ApiError::not_found("no such route; see /api/v1/openapi.json") })
        .layer(axum::middleware::from_fn_with_state(
            REQUEST_TIMEOUT,
            fleetscope_serve::deadline::limit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::track_request,
        ))
        .layer(axum::middleware::from_fn(crate::telemetry::trace_request))
        .with_state(state)
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let age = clock::now().seconds() - state.last_refresh.load(Ordering::Relaxed);
    if age > READY_MAX_REFRESH_AGE {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({ "error": format!("no successful read from ClickHouse for {age} s") })),
        )
            .into_response()
    } else {
        (StatusCode::OK, "ready\n").into_response()
    }
}

async fn metrics_endpoint(
    State(state): State<Arc<AppState>>,
    principal: Option<axum::Extension<crate::auth::Principal>>,
) -> Result<Response, ApiError> {
    // Fleet-wide numbers: a token scoped to a subtree may not read them.
    if let Some(axum::Extension(principal)) = &principal {
        if principal.scope.is_some() {
            return Err(ApiError {
                status: StatusCode::FORBIDDEN,
                message: format!(
                    "{} is scoped to a group; /metrics covers the whole fleet",
                    principal.name
                ),
                parameter: None,
            });
        }
    }
    let config = state.metrics.config;
    let rollup = state
        .cached("metrics".to_owned(), move |fleet, now, _| {
            crate::metrics::FleetSnapshot::take(fleet, now, &config)
        })
        .await?;
    let (generation, objects, symbols) = state
        .index
        .read(|f| (f.generation, f.objects, f.symbols.len()));
    let past_builds = crate::metrics::PastBuilds {
        waiting: state.past.waiting(),
        building: state.past.building(),
    };
    let mut text = state
        .metrics
        .render(&rollup, generation, objects, symbols, past_builds);
    // The reload metrics go before the closing `# EOF`.
    if text.ends_with("# EOF\n") {
        text.truncate(text.len() - "# EOF\n".len());
    }
    prometheus_client::encoding::text::encode_registry(&mut text, &state.reloads)
        .and_then(|()| prometheus_client::encoding::text::encode_eof(&mut text))
        .map_err(|err| ApiError::unavailable(format!("encoding metrics: {err}")))?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// Reads new data every `interval` until the process ends.
pub fn spawn_refresher(state: Arc<AppState>, interval: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let started = Instant::now();
            match state.index.refresh_at(state.now(), &state.policy).await {
                Ok(refreshed) => {
                    state
                        .last_refresh
                        .store(clock::now().seconds(), Ordering::Relaxed);
                    state.metrics.refreshed(started.elapsed(), true);
                    state.metrics.refresh_phases(&refreshed.phases);
                    tracing::debug!(?refreshed, elapsed = ?started.elapsed(), "refreshed");
                }
                Err(err) => {
                    state.refresh_failures.fetch_add(1, Ordering::Relaxed);
                    state.metrics.refreshed(started.elapsed(), false);
                    tracing::warn!(%err, "refresh from ClickHouse failed; serving the last data read");
                }
            }
        }
    })
}

/// Writes the current rollup of every group down to `max_depth` as snapshot rows taken at
/// `taken_at`, from the index (the same numbers the API serves). Returns the rows written.
pub async fn take_snapshot(
    state: &Arc<AppState>,
    taken_at: Timestamp,
    max_depth: usize,
) -> Result<usize, ApiError> {
    let rows: Vec<fleetscope_store::RollupSnapshotRow> = {
        let state = state.clone();
        tokio::task::spawn_blocking(move || {
            let (fleet, _) = state.view();
            crate::index::as_group_rollups(&fleet.summary(&Default::default()))
                .iter()
                .filter(|r| r.depth <= max_depth)
                .map(|r| r.snapshot_row(taken_at))
                .collect()
        })
        .await
        .map_err(|err| ApiError::unavailable(format!("the computation failed: {err}")))?
    };
    state
        .store_call("snapshot insert", state.index.store().insert_rows(&rows))
        .await?;
    Ok(rows.len())
}

/// Takes a snapshot at every multiple of `every` until the process ends.
pub fn spawn_snapshots(
    state: Arc<AppState>,
    every: Duration,
    max_depth: usize,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let step = every.as_secs().max(1) as i64;
        loop {
            let now = clock::now().seconds();
            let next = (now / step + 1) * step;
            tokio::time::sleep(Duration::from_secs((next - now).max(1) as u64)).await;
            match take_snapshot(&state, Timestamp(next), max_depth).await {
                Ok(rows) => tracing::debug!(rows, "rollup snapshot written"),
                Err(err) => tracing::warn!(error = %err.message, "rollup snapshot not written"),
            }
        }
    })
}

/// Runs `fleetscope hub` on `store`.
pub async fn run(args: HubArgs, store: Store) -> anyhow::Result<()> {
    anyhow::ensure!(args.stale_after > 0, "--stale-after must be positive");
    anyhow::ensure!(args.grace >= 0, "--grace must not be negative");
    anyhow::ensure!(
        args.refresh_seconds >= 0.1 && args.refresh_seconds <= 300.0,
        "--refresh-seconds must lie between 0.1 and 300"
    );
    anyhow::ensure!(
        (1..=16).contains(&args.metrics_depth),
        "--metrics-depth must lie between 1 and 16"
    );
    let (auth, tokens_version) = match (&args.tokens, args.insecure) {
        (Some(path), false) => {
            let (auth, version) = LiveAuth::load_versioned(path).map_err(anyhow::Error::msg)?;
            (auth, Some((path.clone(), version)))
        }
        (None, true) => (Auth::Insecure, None),
        (Some(_), true) => anyhow::bail!("give --tokens or --insecure, not both"),
        (None, false) => anyhow::bail!(
            "--tokens FILE is required (bearer tokens with roles and scopes); --insecure serves without authentication for local use"
        ),
    };
    let started = Instant::now();
    let database = store.database().to_owned();
    let index = Index::load(store)
        .await
        .with_context(|| format!("loading the fleet from ClickHouse database {database}"))?;
    let (clusters, objects) = index.read(|f| (f.clusters.len(), f.objects));
    tracing::info!(clusters, objects, elapsed = ?started.elapsed(), "fleet loaded");
    let policy = DriftPolicy {
        stale_after_seconds: args.stale_after,
        progress_grace_seconds: args.grace,
    };
    let tls = TlsFiles::from_flags(args.tls_cert.clone(), args.tls_key.clone())
        .map_err(anyhow::Error::msg)?
        .map(TlsAcceptor::load)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let mut state = AppState::new(
        Arc::new(index),
        policy,
        MetricsConfig {
            depth: args.metrics_depth,
            max_groups: args.metrics_max_groups,
            max_apps: args.metrics_max_apps,
        },
    );
    let insecure = auth.is_insecure();
    let auth = LiveAuth::new(auth);
    if let Some((path, version)) = tokens_version {
        let metrics = state.reload_metrics("tokens", "token file");
        auth.watch(path, version, reload::POLL_INTERVAL, metrics);
    }
    if let Some(tls) = &tls {
        tls.watch(
            reload::POLL_INTERVAL,
            state.reload_metrics("tls", "tls certificate and key"),
        );
    }
    let state = Arc::new(state);
    spawn_refresher(state.clone(), Duration::from_secs_f64(args.refresh_seconds));
    if args.snapshot_every > 0 {
        spawn_snapshots(
            state.clone(),
            Duration::from_secs(args.snapshot_every),
            args.snapshot_depth,
        );
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    println!(
        "fleetscope hub: {clusters} clusters, {objects} app objects loaded in {:.1} s; listening on {}://{}{}",
        started.elapsed().as_secs_f64(),
        if tls.is_some() { "https" } else { "http" },
        listener.local_addr()?,
        if insecure { " (insecure: no authentication)" } else { "" }
    );
    fleetscope_serve::serve(
        listener,
        router(state, auth, args.open_metrics),
        tls,
        fleetscope_runtime::shutdown_signal(),
    )
    .await?;
    Ok(())
}
