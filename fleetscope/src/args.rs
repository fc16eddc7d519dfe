//! Command-line arguments shared by the subcommands, and the dispatch to each component.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use fleetscope_store::{ClusterConfig, Store, StoreConfig};

#[derive(Debug, Parser)]
#[command(
    name = "fleetscope",
    version,
    about = "Deployment observability for GitOps fleets of Kubernetes clusters"
)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log filter, in tracing's EnvFilter syntax (for example `info,fleetscope_store=debug`).
    #[arg(long, env = "FLEETSCOPE_LOG", default_value = "warn", global = true)]
    pub log: String,
    /// Export traces over OTLP/HTTP to this receiver (its base URL; traces go to `/v1/traces`).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", global = true)]
    pub otlp_endpoint: Option<String>,
    /// Full URL for traces, used as it is; wins over `--otlp-endpoint`.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", global = true)]
    pub otlp_traces_endpoint: Option<String>,
    /// OTLP protocol; only `http/protobuf` is supported.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_PROTOCOL", global = true)]
    pub otlp_protocol: Option<String>,
    /// `service.name` of exported traces.
    #[arg(
        long,
        env = "OTEL_SERVICE_NAME",
        default_value = "fleetscope",
        global = true
    )]
    pub otel_service_name: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the database if needed and apply every schema migration not yet applied.
    Migrate {
        #[command(flatten)]
        clickhouse: ClickHouseArgs,
    },
    /// Run the whole pipeline locally on a simulated fleet (private ClickHouse, renderer,
    /// collector, hub, simulated agents with rollouts) until interrupted.
    #[cfg(feature = "dev-tools")]
    Demo(fleetscope_demo::DemoArgs),
    /// Drive a simulated fleet through the collector into a private ClickHouse and check the
    /// hub's rollup against the simulator's ground truth.
    #[cfg(feature = "dev-tools")]
    Loadtest(fleetscope_loadtest::run::LoadtestArgs),
    /// Render the platform repo into GitOps output per render group (and explain the result).
    Render(fleetscope_renderer::args::RenderArgs),
    /// Write a starting platform repo from what runs: the objects the agents report, Argo CD
    /// and Flux manifests, a cluster inventory as CSV.
    Import(fleetscope_renderer::import::ImportArgs),
    /// Run in an edge cluster: watch Flux and Argo CD objects and report changes to the collector.
    Agent(fleetscope_collector::args::AgentArgs),
    /// Serve drift, inventory, history and rollups over HTTP, with Prometheus metrics.
    Hub {
        #[command(flatten)]
        hub: fleetscope_hub::HubArgs,
        #[command(flatten)]
        clickhouse: ClickHouseArgs,
    },
    /// The fleet and its groups from a hub: clusters, reporting, stale, app instances per state.
    Status(fleetscope_cli::StatusArgs),
    /// An app's desired and running versions from a hub, with clusters per group.
    Versions(fleetscope_cli::VersionsArgs),
    /// (cluster, app) pairs that drift, from a hub, desired against observed.
    Drift(fleetscope_cli::DriftArgs),
    /// A rollout gate from a hub: exits 0 on pass, 1 on fail.
    Gate(fleetscope_cli::GateArgs),
    /// Rollouts from a hub, newest first: status, clusters in sync, time to 50/90/100 %.
    Rollouts(fleetscope_cli::RolloutsArgs),
    /// One rollout from a hub: its progress as a text chart, and the clusters still missing.
    Rollout(fleetscope_cli::RolloutArgs),
    /// Delivery figures per app from a hub: deployments, lead time, failure rate, restore time.
    Delivery(fleetscope_cli::DeliveryArgs),
    /// Sign in with the hub's identity provider (a code to enter in a browser) and save the
    /// token the other commands send.
    Login(fleetscope_cli::LoginArgs),
    /// Receive agents' reports (and watch reachable clusters) and write them to ClickHouse.
    Collector {
        #[command(flatten)]
        collector: fleetscope_collector::args::CollectorArgs,
        #[command(flatten)]
        clickhouse: ClickHouseArgs,
    },
}

/// Where ClickHouse is. Every component that talks to the store flattens this.
#[derive(Debug, Clone, Args)]
pub struct ClickHouseArgs {
    /// ClickHouse HTTP endpoint.
    #[arg(
        long = "clickhouse-url",
        env = "FLEETSCOPE_CLICKHOUSE_URL",
        default_value = "http://127.0.0.1:8123"
    )]
    pub url: String,
    /// Database holding Fleetscope's tables.
    #[arg(
        long = "clickhouse-database",
        env = "FLEETSCOPE_CLICKHOUSE_DATABASE",
        default_value = "fleetscope"
    )]
    pub database: String,
    #[arg(long = "clickhouse-user", env = "FLEETSCOPE_CLICKHOUSE_USER")]
    pub user: Option<String>,
    #[arg(
        long = "clickhouse-password",
        env = "FLEETSCOPE_CLICKHOUSE_PASSWORD",
        hide_env_values = true
    )]
    pub password: Option<String>,
    /// Timeout of each query and insert, in seconds.
    #[arg(
        long = "clickhouse-timeout",
        env = "FLEETSCOPE_CLICKHOUSE_TIMEOUT",
        default_value_t = 30
    )]
    pub timeout_seconds: u64,
    /// Compress traffic to ClickHouse with LZ4 (`false` saves CPU when ClickHouse is local).
    #[arg(long = "clickhouse-compression", env = "FLEETSCOPE_CLICKHOUSE_COMPRESSION", default_value_t = true, action = clap::ArgAction::Set)]
    pub compression: bool,
    /// Run on this ClickHouse cluster (its name in the servers' `remote_servers`): `migrate`
    /// creates replicated tables, sharded by cluster id behind Distributed tables, ON CLUSTER.
    /// Give every component the same value (see docs/scaling.md).
    #[arg(long = "clickhouse-cluster", env = "FLEETSCOPE_CLICKHOUSE_CLUSTER")]
    pub cluster: Option<String>,
    /// ZooKeeper path of the replicated tables in cluster mode; the database name follows it.
    #[arg(
        long = "clickhouse-zookeeper-path",
        env = "FLEETSCOPE_CLICKHOUSE_ZOOKEEPER_PATH",
        default_value = fleetscope_store::clickhouse_cluster::DEFAULT_ZOOKEEPER_PATH
    )]
    pub zookeeper_path: String,
}

impl ClickHouseArgs {
    pub fn connect(&self) -> anyhow::Result<Store> {
        Ok(Store::connect(&StoreConfig {
            url: self.url.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            database: self.database.clone(),
            timeout: Duration::from_secs(self.timeout_seconds.max(1)),
            compression: self.compression,
            cluster: self.cluster.as_ref().map(|name| ClusterConfig {
                name: name.clone(),
                zookeeper_path: self.zookeeper_path.clone(),
            }),
        })?)
    }
}

/// Logs to stderr as `--log` filters them and, when an OTLP endpoint is set, exports spans too
/// (see `fleetscope_runtime::telemetry::init`). Runs inside the runtime.
pub fn init_tracing(args: &LogArgs) {
    let otlp = fleetscope_runtime::telemetry::TelemetryConfig {
        endpoint: args.otlp_endpoint.clone(),
        traces_endpoint: args.otlp_traces_endpoint.clone(),
        protocol: args.otlp_protocol.clone(),
        service_name: args.otel_service_name.clone(),
    };
    fleetscope_runtime::telemetry::init(&args.log, &otlp);
}

/// Runs `command`; the hub's client commands choose their own exit codes (docs/cli.md).
pub async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    let client = match command {
        Command::Status(args) => fleetscope_cli::Command::Status(args),
        Command::Versions(args) => fleetscope_cli::Command::Versions(args),
        Command::Drift(args) => fleetscope_cli::Command::Drift(args),
        Command::Gate(args) => fleetscope_cli::Command::Gate(args),
        Command::Rollouts(args) => fleetscope_cli::Command::Rollouts(args),
        Command::Rollout(args) => fleetscope_cli::Command::Rollout(args),
        Command::Delivery(args) => fleetscope_cli::Command::Delivery(args),
        Command::Login(args) => fleetscope_cli::Command::Login(args),
        service => return run(service).await.map(|()| ExitCode::SUCCESS),
    };
    Ok(fleetscope_cli::main(client).await)
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Migrate { clickhouse } => {
            let store = clickhouse.connect()?;
            let report = store.migrate().await?;
            println!(
                "database {}: applied migrations {:?}, already applied {:?}",
                store.database(),
                report.applied,
                report.already_applied
            );
            Ok(())
        }
        #[cfg(feature = "dev-tools")]
        Command::Demo(args) => fleetscope_demo::run(args).await,
        #[cfg(feature = "dev-tools")]
        Command::Loadtest(args) => {
            until_interrupted("loadtest", fleetscope_loadtest::run::run(args)).await?;
            Ok(())
        }
        Command::Render(args) => fleetscope_renderer::args::run(args).await,
        Command::Import(args) => fleetscope_renderer::import::run(args).await,
        Command::Agent(args) => fleetscope_collector::args::run_agent(args).await,
        Command::Hub { hub, clickhouse } => fleetscope_hub::run(hub, clickhouse.connect()?).await,
        Command::Collector {
            collector,
            clickhouse,
        } => fleetscope_collector::args::run_collector(collector, clickhouse.connect()?).await,
        Command::Status(_)
        | Command::Versions(_)
        | Command::Drift(_)
        | Command::Gate(_)
        | Command::Rollouts(_)
        | Command::Rollout(_)
        | Command::Delivery(_)
        | Command::Login(_) => {
            unreachable!("dispatch runs the client commands")
        }
    }
}

/// Runs `work` until it ends or the process is asked to stop (Ctrl-C or SIGTERM). On a signal
/// the work is dropped, and with it the child processes it started (each stops its child when
/// dropped), so an interrupted run leaves no ClickHouse, collector or hub behind; then the
/// process exits at once. Returning instead would let the runtime wait, as it shuts down, for
/// blocking work the run left behind: a render, or a resync's bodies being encoded, which take
/// a minute at 100,000 clusters.
#[cfg(feature = "dev-tools")]
async fn until_interrupted<T>(
    what: &str,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let mut work = Box::pin(work);
    let signal = fleetscope_runtime::shutdown_signal();
    tokio::select! {
        result = &mut work => return result,
        () = signal => {}
    }
    let stopping = std::time::Instant::now();
    drop(work);
    eprintln!(
        "error: {what} interrupted; the services it started were stopped in {:.1} s",
        stopping.elapsed().as_secs_f64()
    );
    std::process::exit(130)
}
