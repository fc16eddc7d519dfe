//! The arguments of `fleetscope hub`.

use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// Seconds without a cluster reaching a rollout after which it is `stalled`.
    #[arg(long, env = "FLEETSCOPE_ROLLOUT_STALL_AFTER", default_value_t = 3600)]
    pub rollout_stall_after: u32,
    /// The share of a rollout's clusters, in percent, that may fail at its version before
    /// reaching it without the rollout counting as a failed change.
    #[arg(long, env = "FLEETSCOPE_ROLLOUT_FAILURE_BUDGET", default_value_t = 5.0)]
    pub rollout_failure_budget: f64,
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
    /// Seconds between writes of the rollouts that changed into `rollout_records` and
    /// `rollout_clusters`, for the dashboards (0: none).
    #[arg(
        long,
        env = "FLEETSCOPE_HUB_ROLLOUT_RECORDS_EVERY",
        default_value_t = 15
    )]
    pub rollout_records_every: u64,
    /// Deepest group level the snapshots keep.
    #[arg(long, env = "FLEETSCOPE_HUB_SNAPSHOT_DEPTH", default_value_t = 3)]
    pub snapshot_depth: usize,
}
