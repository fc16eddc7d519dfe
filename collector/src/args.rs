//! Command-line arguments and start-up of `fleetscope agent` and `fleetscope collector`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use fleetscope_model::ClusterId;
use fleetscope_store::thinning::CheckpointTiers;
use fleetscope_store::writer::BatchWriterConfig;
use fleetscope_store::Store;
use tokio::sync::mpsc;

use crate::agent::{self, AgentConfig, AgentStats};
use crate::central::auth::AgentAuth;
use crate::central::metrics::{StoreMetrics, StoreTableLabels};
use crate::central::{Collector, CollectorOptions};
use fleetscope_serve::reload;
use fleetscope_serve::tls::{TlsAcceptor, TlsFiles};

#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// This cluster's id, as the inventory knows it.
    #[arg(long, env = "FLEETSCOPE_CLUSTER")]
    pub cluster: String,
    /// The central collector's base URL.
    #[arg(long, env = "FLEETSCOPE_COLLECTOR_URL")]
    pub collector_url: String,
    /// File holding this agent's bearer token (the token itself is never a flag).
    #[arg(long, env = "FLEETSCOPE_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Where reports wait until the collector acknowledged them.
    #[arg(
        long,
        env = "FLEETSCOPE_SPOOL_DIR",
        default_value = "/var/lib/fleetscope/spool"
    )]
    pub spool_dir: PathBuf,
    /// Bytes of waiting reports before they are compacted to the latest state per object.
    #[arg(long, env = "FLEETSCOPE_SPOOL_MAX_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub spool_max_bytes: u64,
    /// Kubeconfig to read objects through; in-cluster configuration when not given.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    #[arg(long, env = "FLEETSCOPE_HEARTBEAT_SECONDS", default_value_t = 30)]
    pub heartbeat_seconds: u64,
    #[arg(long, env = "FLEETSCOPE_SNAPSHOT_SECONDS", default_value_t = 6 * 3600)]
    pub snapshot_seconds: u64,
    /// Seconds to wait before looking again for a kind that is not installed.
    #[arg(long, env = "FLEETSCOPE_CRD_RETRY_SECONDS", default_value_t = 60)]
    pub crd_retry_seconds: u64,
    /// Serve Prometheus metrics (`/metrics`) and `/healthz` on this address.
    #[arg(long, env = "FLEETSCOPE_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// PEM file of CA certificates to trust for an `https://` collector URL, in addition to
    /// the Web PKI roots built in (for a collector whose certificate a private CA signed).
    #[arg(long, env = "FLEETSCOPE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// When the collector's match rules change, report the objects without stamps again at a
    /// moment picked at random within this many seconds (so a fleet does not send them all at
    /// once); 0 reports them at once.
    #[arg(
        long,
        env = "FLEETSCOPE_MATCH_RULES_SPREAD_SECONDS",
        default_value_t = 60
    )]
    pub match_rules_spread_seconds: u64,
}

#[derive(Debug, Clone, clap::Args)]
pub struct CollectorArgs {
    #[arg(long, env = "FLEETSCOPE_LISTEN", default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// YAML file binding each agent's token to its cluster.
    #[arg(
        long,
        env = "FLEETSCOPE_AGENT_TOKENS",
        required_unless_present = "insecure"
    )]
    pub agent_tokens: Option<PathBuf>,
    /// Accept reports without credentials. Local use only.
    #[arg(long, conflicts_with = "agent_tokens")]
    pub insecure: bool,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key); reloaded when it changes.
    #[arg(long, env = "FLEETSCOPE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert; reloaded when it changes.
    #[arg(long, env = "FLEETSCOPE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Accept clusters not in the inventory and add them to it (in group `unassigned`).
    #[arg(long, env = "FLEETSCOPE_AUTO_REGISTER")]
    pub auto_register: bool,
    /// Watch a reachable cluster directly: `CLUSTER_ID=KUBECONFIG_PATH` (repeatable).
    #[arg(long = "watch", value_name = "CLUSTER=KUBECONFIG")]
    pub watch: Vec<String>,
    /// Rows per insert batch.
    #[arg(long, env = "FLEETSCOPE_BATCH_ROWS", default_value_t = 100_000)]
    pub batch_rows: usize,
    /// Rows that may wait for ClickHouse before requests get 429.
    #[arg(long, env = "FLEETSCOPE_MAX_QUEUED_ROWS", default_value_t = 1_000_000)]
    pub max_queued_rows: usize,
    /// Days of history kept: older days of observed transitions and rollup snapshots are
    /// dropped, checked at start and every hour (0 keeps everything). The current state of
    /// every object is kept regardless.
    #[arg(long, env = "FLEETSCOPE_RETENTION_DAYS", default_value_t = 30)]
    pub retention_days: u32,
    /// Hours between checkpoints of every app object's state, from which the hub answers
    /// questions about a past moment (`at`); 0 takes none, and then no moment is answerable.
    #[arg(
        long,
        env = "FLEETSCOPE_CHECKPOINT_HOURS",
        default_value_t = fleetscope_store::past::DEFAULT_CHECKPOINT_HOURS
    )]
    pub checkpoint_hours: u32,
    /// Checkpoints thinned by age, as AGE=EVERY tiers: from the day after AGE, only the
    /// checkpoints on an EVERY grid are kept (default: every 6 hours after 48 hours, one a day
    /// after 7 days; `none` keeps every checkpoint until retention). Each spacing is a multiple
    /// of `--checkpoint-hours` and of the tier before.
    #[arg(
        long,
        env = "FLEETSCOPE_CHECKPOINT_THINNING",
        default_value = fleetscope_store::thinning::DEFAULT_CHECKPOINT_THINNING
    )]
    pub checkpoint_thinning: CheckpointTiers,
}

async fn kube_client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig given and no in-cluster configuration found")?,
    };
    kube::Client::try_from(config).context("creating the kubernetes client")
}

/// Runs the agent until SIGTERM or Ctrl-C.
pub async fn run_agent(args: AgentArgs) -> anyhow::Result<()> {
    let cluster = ClusterId::parse(&args.cluster).context("--cluster")?;
    anyhow::ensure!(
        args.heartbeat_seconds > 0,
        "--heartbeat-seconds must be positive"
    );
    anyhow::ensure!(
        args.snapshot_seconds > 0,
        "--snapshot-seconds must be positive"
    );
    let token = match &args.token_file {
        Some(path) => {
            let token = std::fs::read_to_string(path)
                .with_context(|| format!("reading token file {}", path.display()))?;
            let token = token.trim().to_owned();
            anyhow::ensure!(!token.is_empty(), "token file {} is empty", path.display());
            Some(token)
        }
        None => None,
    };
    let stats = Arc::new(AgentStats::default());
    if let Some(addr) = args.metrics_listen {
        // Bound here, so that a taken address stops the agent with a clear error.
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--metrics-listen {addr}"))?;
        tracing::info!(%addr, "serving the agent's metrics");
        let router =
            agent::metrics::router(stats.clone()).layer(axum::middleware::from_fn_with_state(
                crate::central::REQUEST_TIMEOUT,
                fleetscope_serve::deadline::limit,
            ));
        tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, router).await {
                tracing::warn!(%err, "the agent's metrics listener stopped");
            }
        });
    }
    let client = kube_client(args.kubeconfig.as_ref()).await?;
    let config = AgentConfig {
        token,
        ca_file: args.ca_file.clone(),
        spool_max_bytes: args.spool_max_bytes,
        heartbeat_interval: Duration::from_secs(args.heartbeat_seconds),
        snapshot_interval: Duration::from_secs(args.snapshot_seconds),
        match_rules_spread: Duration::from_secs(args.match_rules_spread_seconds),
        ..AgentConfig::new(cluster, args.collector_url, args.spool_dir)
    };
    let (events, receiver) = mpsc::channel(4096);
    let _watchers = crate::watch::watch_all(
        client,
        events,
        Duration::from_secs(args.crd_retry_seconds.max(1)),
    );
    tracing::info!(cluster = %config.cluster, collector = %config.collector_url, "agent started");
    agent::run(
        config,
        receiver,
        fleetscope_runtime::shutdown_signal(),
        stats,
    )
    .await
}

/// Runs the central collector until SIGTERM or Ctrl-C.
pub async fn run_collector(args: CollectorArgs, store: Store) -> anyhow::Result<()> {
    let (auth, tokens_version) = match (&args.agent_tokens, args.insecure) {
        (Some(path), false) => {
            let (auth, version) = AgentAuth::load_versioned(path).map_err(anyhow::Error::msg)?;
            (auth, Some((path.clone(), version)))
        }
        (None, true) => {
            tracing::warn!("running without agent credentials (--insecure): any client can report for any cluster");
            (AgentAuth::Insecure, None)
        }
        _ => anyhow::bail!("give either --agent-tokens FILE or --insecure"),
    };
    let tls = TlsFiles::from_flags(args.tls_cert.clone(), args.tls_key.clone())
        .map_err(anyhow::Error::msg)?
        .map(TlsAcceptor::load)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let mut direct = Vec::new();
    for entry in &args.watch {
        let (cluster, path) = entry
            .split_once('=')
            .with_context(|| format!("--watch {entry:?}: expected CLUSTER=KUBECONFIG"))?;
        let cluster = ClusterId::parse(cluster).with_context(|| format!("--watch {entry:?}"))?;
        direct.push((cluster, PathBuf::from(path)));
    }
    store.migrate().await.context("applying the schema")?;
    let options = CollectorOptions {
        auth,
        auto_register: args.auto_register,
        writer: BatchWriterConfig {
            max_rows: args.batch_rows.max(1),
            max_queued_rows: args.max_queued_rows.max(1),
            ..BatchWriterConfig::default()
        },
        ..CollectorOptions::default()
    };
    spawn_arrivals_trim(store.clone(), args.checkpoint_thinning.clone());
    if args.checkpoint_hours > 0 {
        let every = i64::from(args.checkpoint_hours) * 3_600;
        if let Some(tier) = args
            .checkpoint_thinning
            .tiers()
            .iter()
            .find(|tier| tier.every % every != 0)
        {
            anyhow::bail!(
                "--checkpoint-thinning {}: a spacing of {} hours is not a multiple of --checkpoint-hours {}",
                args.checkpoint_thinning,
                tier.every / 3_600,
                args.checkpoint_hours
            );
        }
        spawn_checkpoints(store.clone(), every, args.checkpoint_thinning.clone());
    } else {
        tracing::info!("--checkpoint-hours 0: no checkpoints, so no past moment is answerable");
    }
    if args.retention_days > 0 {
        spawn_retention(store.clone(), args.retention_days);
    } else {
        tracing::info!("--retention-days 0: history is kept forever");
    }
    let collector = Collector::new(store.clone(), options);
    spawn_store_sizes(
        store,
        collector.store_metrics().clone(),
        StoreUpkeep {
            checkpoint_every: i64::from(args.checkpoint_hours.max(1)) * 3_600,
            tiers: args.checkpoint_thinning.clone(),
            retention_days: args.retention_days,
        },
    );
    if let Some((path, version)) = tokens_version {
        collector.watch_agent_tokens(path, version, reload::POLL_INTERVAL);
    }
    if let Some(tls) = &tls {
        tls.watch(reload::POLL_INTERVAL, collector.tls_reload_metrics());
    }
    for (cluster, path) in direct {
        let client = kube_client(Some(&path)).await?;
        tracing::info!(cluster = %cluster, kubeconfig = %path.display(), "watching directly");
        tokio::spawn(crate::central::direct::run(
            collector.clone(),
            cluster,
            client,
            Duration::from_secs(30),
        ));
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    tracing::info!(listen = %args.listen, tls = tls.is_some(), "collector started");
    eprintln!(
        "fleetscope collector listening on {}://{}",
        if tls.is_some() { "https" } else { "http" },
        listener.local_addr()?
    );
    fleetscope_serve::serve(
        listener,
        collector.router(),
        tls,
        fleetscope_runtime::shutdown_signal(),
    )
    .await?;
    Ok(())
}

/// At start and every hour, drops the days of history older than `keep_days` (several
/// collectors doing the same is harmless: a partition already dropped is not listed again).
fn spawn_retention(store: Store, keep_days: u32) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(3_600));
        loop {
            ticker.tick().await;
            match store
                .apply_retention(fleetscope_runtime::clock::now(), keep_days)
                .await
            {
                Ok(dropped) if !dropped.is_empty() => {
                    let days: Vec<String> = dropped
                        .iter()
                        .map(|d| format!("{}/{}", d.table, d.day))
                        .collect();
                    tracing::info!(keep_days, ?days, "dropped days past retention")
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "applying retention failed"),
            }
        }
    });
}

/// The settings the store's sizes are planned by.
struct StoreUpkeep {
    checkpoint_every: i64,
    tiers: CheckpointTiers,
    /// 0: kept for good (the planned figure is then what the store holds).
    retention_days: u32,
}

/// Every five minutes, reads what the store holds into the `fleetscope_store_*` gauges: table
/// sizes, the oldest moment kept, what the retention setting will need and the free disk.
fn spawn_store_sizes(store: Store, metrics: StoreMetrics, upkeep: StoreUpkeep) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(300));
        loop {
            ticker.tick().await;
            if let Err(err) = read_store_sizes(&store, &metrics, &upkeep).await {
                tracing::warn!(%err, "reading the store's sizes failed");
            }
        }
    });
}

async fn read_store_sizes(
    store: &Store,
    metrics: &StoreMetrics,
    upkeep: &StoreUpkeep,
) -> anyhow::Result<()> {
    let now = fleetscope_runtime::clock::now();
    let sizes = store.table_sizes().await?;
    let checkpoints = store.checkpoints().await?;
    let held: u64 = sizes.iter().map(|s| s.bytes_on_disk).sum();
    for size in &sizes {
        let labels = StoreTableLabels {
            table: size.table.clone(),
        };
        metrics
            .table_bytes
            .get_or_create(&labels)
            .set(size.bytes_on_disk as i64);
        metrics
            .table_rows
            .get_or_create(&labels)
            .set(size.rows as i64);
    }
    metrics.checkpoints.set(checkpoints.taken.len() as i64);
    if let Some(oldest) = checkpoints.kept_from() {
        metrics
            .oldest_moment_age_seconds
            .set(now.seconds() - oldest.seconds());
    }
    let planned = if upkeep.retention_days == 0 {
        held
    } else {
        fleetscope_store::sizes::bytes_at_retention(
            &sizes,
            &checkpoints,
            now,
            upkeep.checkpoint_every,
            &upkeep.tiers,
            upkeep.retention_days,
        )
    };
    metrics.retention_bytes.set(planned as i64);
    metrics
        .retention_more_bytes
        .set(planned.saturating_sub(held) as i64);
    if let Some(free) = store.disk_free_bytes().await? {
        metrics.disk_free_bytes.set(free as i64);
    }
    Ok(())
}

/// Seconds a checkpoint's moment must be in the past before it is taken, on top of every
/// writer's arrival horizon being past it.
const CHECKPOINT_SETTLE_SECONDS: i64 = 120;

/// Every minute, takes the observed-state checkpoints that are due, then thins the old ones by
/// `tiers` (several collectors doing the same is harmless: a checkpoint taken twice holds the
/// same rows, which collapse, and one thinned already is no longer listed).
fn spawn_checkpoints(store: Store, every: i64, tiers: CheckpointTiers) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(60));
        loop {
            ticker.tick().await;
            let now = fleetscope_runtime::clock::now();
            if let Err(err) = store
                .take_due_checkpoints(now, every, CHECKPOINT_SETTLE_SECONDS)
                .await
            {
                tracing::warn!(%err, "taking an observed-state checkpoint failed");
            }
            match store.thin_checkpoints(now, &tiers).await {
                Ok(thinned) if !thinned.is_empty() => {
                    let moments: Vec<i64> = thinned.iter().map(|t| t.seconds()).collect();
                    tracing::info!(%tiers, ?moments, "thinned old checkpoints")
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "thinning old checkpoints failed"),
            }
        }
    });
}

/// Every ten minutes, drops the hours of `observed_arrivals` past what the hub and the hourly
/// tier of checkpoints (`tiers`) read from it (several collectors doing the same is harmless).
fn spawn_arrivals_trim(store: Store, tiers: CheckpointTiers) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs(600));
        loop {
            ticker.tick().await;
            match store
                .trim_arrivals(fleetscope_runtime::clock::now(), &tiers)
                .await
            {
                Ok(hours) if !hours.is_empty() => {
                    tracing::info!(?hours, "dropped old hours of observed_arrivals")
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "trimming observed_arrivals failed"),
            }
        }
    });
}
