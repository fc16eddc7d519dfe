//! `fleetscope hub`: the router, the refresher, the rollup snapshots and the command.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_runtime::clock;
use fleetscope_store::Store;

use crate::auth::{Auth, LiveAuth};
use crate::metrics::MetricsConfig;
use crate::params::ApiError;
use fleetscope_engine::Index;
use fleetscope_serve::reload::{self};
use fleetscope_serve::tls::{TlsAcceptor, TlsFiles};

use crate::args::HubArgs;
use crate::state::{AppState, READY_MAX_REFRESH_AGE, REQUEST_TIMEOUT};

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
    // The pages ask the API as any client would, through the same routes.
    let pages = crate::pages::router(
        api.clone().with_state(state.clone()),
        auth.clone(),
        state.secure_cookies,
    );
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
        .merge(pages)
        .fallback(|| async { ApiError::not_found("no such route; see /api/v1/openapi.json") })
        .layer(axum::middleware::from_fn_with_state(
            REQUEST_TIMEOUT,
            fleetscope_serve::deadline::limit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            track_request,
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
    let rollouts = state.rollout_policy;
    let rollup = state
        .cached("metrics".to_owned(), move |fleet, now, _| {
            crate::metrics::FleetSnapshot::take(fleet, now, &config, &rollouts)
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
            fleetscope_engine::as_group_rollups(&fleet.summary(&Default::default()))
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
    let policy = DriftPolicy {
        stale_after_seconds: args.stale_after,
        progress_grace_seconds: args.grace,
    };
    let started = Instant::now();
    let database = store.database().to_owned();
    // Loaded under the thresholds it serves: which clusters reached their rollouts at the
    // start is decided then.
    let index = Index::load_under(store, clock::now, &policy)
        .await
        .with_context(|| format!("loading the fleet from ClickHouse database {database}"))?;
    let (clusters, objects) = index.read(|f| (f.clusters.len(), f.objects));
    tracing::info!(clusters, objects, elapsed = ?started.elapsed(), "fleet loaded");
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
    if args.rollout_stall_after == 0 {
        anyhow::bail!("--rollout-stall-after must be more than 0 seconds");
    }
    if !(0.0..=100.0).contains(&args.rollout_failure_budget) {
        anyhow::bail!(
            "--rollout-failure-budget {} is not a percentage from 0 to 100",
            args.rollout_failure_budget
        );
    }
    state.rollout_policy = fleetscope_engine::rollout_figures::RolloutPolicy {
        stall_after: args.rollout_stall_after,
        failure_budget_percent: args.rollout_failure_budget,
    };
    state.secure_cookies = tls.is_some();
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
    if args.rollout_records_every > 0 {
        crate::rollout_records::spawn_rollout_records(
            state.clone(),
            Duration::from_secs(args.rollout_records_every),
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

/// Counts and times every request by route pattern.
pub async fn track_request(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    state
        .metrics
        .request(route, method, response.status().as_u16(), started.elapsed());
    response
}
