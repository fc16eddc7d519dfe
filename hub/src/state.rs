//! The state every handler shares: the index, the clock, the policy, the answer cache, the
//! fleets built at past moments and the metrics.

use std::future::Future;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_runtime::clock;

use crate::metrics::{HubMetrics, MetricsConfig};
use crate::params::ApiError;
use fleetscope_engine::Fleet;
use fleetscope_engine::Index;
use fleetscope_serve::reload::ReloadMetrics;

/// How long cached answers live at most; new data invalidates them sooner (the index
/// generation is part of every key).
pub const CACHE_TTL: Duration = Duration::from_secs(2);

/// The deadline of every request; one still unanswered then is answered 503.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Seconds since the last successful read from ClickHouse past which `/readyz` answers 503.
pub const READY_MAX_REFRESH_AGE: i64 = 30;

/// What every handler shares.
pub struct AppState {
    pub index: Arc<Index>,
    pub policy: DriftPolicy,
    /// When a rollout has stalled, and when one is a failed change.
    pub rollout_policy: fleetscope_engine::rollout_figures::RolloutPolicy,
    pub cache: moka::future::Cache<String, Arc<dyn std::any::Any + Send + Sync>>,
    /// Fleets built at past moments (`at`), see [`fleetscope_engine::past`].
    pub past: fleetscope_engine::past::Past,
    pub metrics: HubMetrics,
    /// A fixed clock for tests; `None` reads the system clock.
    pub fixed_now: Option<Timestamp>,
    /// When the last refresh succeeded (seconds since the epoch), for readiness.
    pub last_refresh: AtomicI64,
    pub refresh_failures: AtomicU64,
    /// Metrics of the files reloaded while the hub runs (token file, TLS certificate), added
    /// to `/metrics`; empty when nothing is watched.
    pub reloads: prometheus_client::registry::Registry,
    /// Whether the pages' session cookie is `Secure`: the hub serves TLS.
    pub secure_cookies: bool,
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
            rollout_policy: Default::default(),
            cache: moka::future::Cache::builder()
                .max_capacity(256)
                .time_to_live(CACHE_TTL)
                .build(),
            past: fleetscope_engine::past::Past::default(),
            metrics: HubMetrics::new(metrics),
            fixed_now: None,
            last_refresh: AtomicI64::new(clock::now().seconds()),
            refresh_failures: AtomicU64::new(0),
            reloads: prometheus_client::registry::Registry::default(),
            secure_cookies: false,
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
        reach: fleetscope_engine::past::Reach,
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
                fleetscope_engine::past::PastError::Store(_) => {
                    ApiError::unavailable(err.to_string())
                }
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
        reach: fleetscope_engine::past::Reach,
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
