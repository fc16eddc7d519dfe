//! `fleetscope loadtest`: a fleet rendered by the real renderer from a generated platform repo,
//! simulated agents (one token, one report sequence and one outbox each) delivering through the
//! real collector into a private ClickHouse, the real hub reading it, both as child processes;
//! scenarios run on top, and after each the hub's rollups and inventories must equal the
//! simulator's ground truth.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_model::DriftPolicy;
use fleetscope_runtime::clock;
use fleetscope_store::{Store, StoreConfig};

pub use crate::args::LoadtestArgs;
use crate::cluster::{ClusterSetup, CLUSTER_NAME, COPIES};
use crate::faults::{Fault, FaultKnobs, FaultRecord, Targets};
use crate::pipeline::{HubReader, Pipeline, PipelineConfig};
use crate::procs::{self, Sampler};
use crate::report::{self, LoadtestReport, RenderNumbers};
use crate::scenario::{
    DarkKnobs, FlapKnobs, Knobs, OutageKnobs, OutageReport, PhaseReport, RolloutKnobs, Scenario,
    SteadyKnobs,
};
use crate::sim::SimFleet;

/// The bearer token the load test's readers of the hub use.
const READ_TOKEN: &str = "loadtest-reader-token-0001";

/// How long the load test waits for one answer of the hub.
const HUB_TIMEOUT: Duration = Duration::from_secs(60);

/// Writes the hub's `/metrics` text into `path`.
async fn save_hub_metrics(
    hub: &crate::hubcheck::HubClient,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    std::fs::write(path, hub.metrics().await?)?;
    Ok(())
}

/// Writes the collector's `/metrics` text, as it stands after a phase, into `path` (its
/// ingest stages and batch timings, for breaking a phase's ingest down).
async fn save_collector_metrics(collector_url: &str, path: &std::path::Path) {
    let read = async {
        let response = reqwest::get(format!("{collector_url}/metrics")).await?;
        response.error_for_status()?.text().await
    };
    match read.await {
        Ok(text) => {
            if let Err(err) = std::fs::write(path, text) {
                println!("  {} could not be written: {err}", path.display());
            }
        }
        Err(err) => println!("  the collector's /metrics could not be read: {err}"),
    }
}

/// The hub's refresh-duration histogram as it stands; `None` (said once per phase) when
/// `/metrics` cannot be read.
async fn refresh_buckets(hub: &crate::hubcheck::HubClient) -> Option<crate::hubcheck::Buckets> {
    match hub.metrics().await {
        Ok(text) => Some(crate::hubcheck::parse_buckets(
            &text,
            "fleetscope_hub_refresh_seconds",
        )),
        Err(err) => {
            println!("  the hub's refresh durations could not be read: {err:#}");
            None
        }
    }
}

/// Runs the load test and writes the report into `args.out`. Fails (after writing the
/// report) when a ground-truth check failed or the collector refused a report.
pub async fn run(args: LoadtestArgs) -> anyhow::Result<LoadtestReport> {
    args.validate()?;
    let exe = procs::fleetscope_exe(args.fleetscope_binary.clone())?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let work = WorkDir(Some(
        tempfile::tempdir()
            .context("creating a work directory")?
            .keep(),
    ));
    println!(
        "loadtest: {} clusters × {} apps; scenarios: connect, {}",
        args.clusters,
        args.apps,
        args.scenarios
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let started = Instant::now();

    // The desired state, from the real renderer.
    let platform_dir = work.path().join("platform");
    let gitops_dir = work.path().join("gitops");
    fleetscope_renderer::generate::generate_with(
        &platform_dir,
        args.clusters,
        args.apps,
        args.unstamped,
    )?;
    let t = Instant::now();
    let (p, g) = (platform_dir.clone(), gitops_dir.clone());
    let outcome =
        tokio::task::spawn_blocking(move || fleetscope_renderer::render(&p, &g)).await??;
    let render_seconds = t.elapsed().as_secs_f64();
    println!(
        "  render: {} clusters in {} render groups, {} files, in {render_seconds:.1} s",
        outcome.assigned.members.len(),
        outcome.assigned.groups.len(),
        outcome.files.len()
    );

    let t = Instant::now();
    let servers = Servers::start(&args, work.path()).await?;
    let store = Store::connect(&servers.store_config())?;
    store.migrate().await?;
    println!(
        "  clickhouse: {}, started and migrated in {:.1} s",
        servers.describe(),
        t.elapsed().as_secs_f64()
    );

    // The desired state has been in place for a day: older versions count as drift.
    let now = clock::now();
    let published_at = now.plus_seconds(-86_400);
    let t = Instant::now();
    fleetscope_renderer::desired::publish(
        &store,
        &outcome,
        published_at.seconds() as u64 * 1_000,
        published_at,
    )
    .await?;
    let publish_seconds = t.elapsed().as_secs_f64();
    let policy = DriftPolicy {
        stale_after_seconds: args.stale_after,
        ..DriftPolicy::default()
    };
    let mut fleet = SimFleet::from_render(&outcome, args.seed, published_at, now, policy)?;
    fleet.unstamped = args.unstamped;
    let render = RenderNumbers {
        render_groups: outcome.assigned.groups.len() as u64,
        files: outcome.files.len() as u64,
        render_seconds,
        publish_seconds,
    };
    drop(outcome);

    let result = drive(
        &args,
        &exe,
        fleet,
        &store,
        &servers,
        &platform_dir,
        &gitops_dir,
        render,
        started,
    )
    .await;
    drop(store);
    tokio::task::spawn_blocking(move || servers.stop()).await?;
    let (report, plots) = result?;
    report::write(&args.out, &report, &plots)?;
    println!(
        "  report: {} (and report.md, plots) in {:.0} s",
        args.out.join("report.json").display(),
        started.elapsed().as_secs_f64()
    );
    // After the report: on a disk that discards freed blocks this takes minutes.
    tokio::task::spawn_blocking(move || work.remove()).await?;
    for audit in report
        .faults
        .iter()
        .map(|f| (f.phase.as_str(), &f.audit))
        .chain(report.store_audit.iter().map(|a| ("the run", a)))
    {
        anyhow::ensure!(
            audit.1.holds(),
            "the store does not hold exactly what the collectors acknowledged after {}: {} lost, {} not acknowledged, {} held twice; {}",
            audit.0,
            audit.1.lost,
            audit.1.unacknowledged,
            audit.1.stored_twice,
            audit.1.differences.join("; ")
        );
    }
    if let Some(failed) = report.phases.iter().find(|p| !p.check_passed) {
        anyhow::bail!(
            "the hub differs from the simulator's ground truth after {}: {}",
            failed.name,
            failed.check_mismatch.as_deref().unwrap_or("(no detail)")
        );
    }
    anyhow::ensure!(
        report.refused.is_empty(),
        "the collector refused reports: {}",
        report.refused.join("; ")
    );
    Ok(report)
}

/// The run's work directory (the platform and GitOps repositories, ClickHouse's data).
/// [`WorkDir::remove`] removes it; a run dropped before that (interrupted) hands the removal to
/// an `rm -rf` of its own, so that the run stops at once: removing the hundreds of thousands of
/// files of a 100,000-cluster run takes minutes on a disk that discards freed blocks as it goes.
struct WorkDir(Option<std::path::PathBuf>);

impl WorkDir {
    fn path(&self) -> &std::path::Path {
        self.0
            .as_deref()
            .expect("the work directory until it is removed")
    }

    /// Removes the directory and everything in it, now.
    fn remove(mut self) {
        if let Some(path) = self.0.take() {
            if let Err(err) = std::fs::remove_dir_all(&path) {
                println!("  the work directory {} stays: {err}", path.display());
            }
        }
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        use std::os::unix::process::CommandExt as _;
        let Some(path) = self.0.take() else {
            return;
        };
        // In a process group of its own: the Ctrl-C that stopped the run does not stop it.
        let removal = std::process::Command::new("rm")
            .arg("-rf")
            .arg(&path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn();
        if let Err(err) = removal {
            eprintln!("the work directory {} stays: {err}", path.display());
        }
    }
}

/// The ClickHouse the run stores into: one private server, or cluster mode's servers and
/// balancer.
enum Servers {
    Single(LocalClickHouse),
    Cluster(ClusterSetup),
}

impl Servers {
    /// Starts what `args` asks for; a single server keeps its data in `work`.
    async fn start(args: &LoadtestArgs, work: &std::path::Path) -> anyhow::Result<Servers> {
        match args.clickhouse_cluster {
            None => {
                // Its data in the work directory, removed with it.
                let data = work.join("clickhouse");
                let server =
                    tokio::task::spawn_blocking(move || LocalClickHouse::start_in_dir(data))
                        .await?
                        .context("could not start a private ClickHouse server")?;
                Ok(Servers::Single(server))
            }
            Some(shape) => Ok(Servers::Cluster(
                tokio::task::spawn_blocking(move || ClusterSetup::start(shape)).await??,
            )),
        }
    }

    fn store_config(&self) -> StoreConfig {
        match self {
            Servers::Single(server) => StoreConfig::new(server.url(), DATABASE),
            Servers::Cluster(setup) => setup.store_config(DATABASE),
        }
    }

    fn describe(&self) -> String {
        match self {
            Servers::Single(server) => format!(
                "{} (pid {})",
                server.url(),
                server.pid().unwrap_or_default()
            ),
            Servers::Cluster(setup) => {
                let cluster = setup.clickhouse.lock().expect("cluster lock");
                format!(
                    "{}x{} servers with ZooKeeper, behind {}",
                    cluster.spec().shards,
                    cluster.spec().replicas,
                    setup.url("clickhouse")
                )
            }
        }
    }

    /// Every ClickHouse process (and ZooKeeper's), for the sampler.
    fn pids(&self) -> Vec<(String, u32)> {
        match self {
            Servers::Single(server) => server
                .pid()
                .map(|pid| ("clickhouse".to_owned(), pid))
                .into_iter()
                .collect(),
            Servers::Cluster(setup) => setup.pids(),
        }
    }

    /// A store on each server directly, whose replicas an audit syncs first (none for one
    /// server).
    fn replica_stores(&self) -> anyhow::Result<Vec<Store>> {
        match self {
            Servers::Single(_) => Ok(Vec::new()),
            Servers::Cluster(setup) => setup.replica_stores(DATABASE),
        }
    }

    /// Stops the servers, gracefully.
    fn stop(self) {
        match self {
            Servers::Single(server) => server.stop(),
            Servers::Cluster(setup) => {
                let ClusterSetup {
                    clickhouse,
                    balancer,
                    ..
                } = setup;
                balancer.stop();
                match Arc::try_unwrap(clickhouse) {
                    Ok(cluster) => cluster.into_inner().expect("cluster lock").stop(),
                    Err(shared) => drop(shared),
                }
            }
        }
    }
}

/// The database the run's store lives in.
const DATABASE: &str = "fleetscope";

/// Starts the pipeline on the published fleet, runs the connection, every scenario and every
/// fault as phases, audits the store, and builds the report from what was measured.
#[allow(clippy::too_many_arguments)]
async fn drive(
    args: &LoadtestArgs,
    exe: &std::path::Path,
    fleet: SimFleet,
    store: &Store,
    servers: &Servers,
    platform_dir: &std::path::Path,
    gitops_dir: &std::path::Path,
    render: RenderNumbers,
    started: Instant,
) -> anyhow::Result<(LoadtestReport, report::PlotData)> {
    let shape = FleetShape::of(&fleet);
    let config = pipeline_config(args, exe, servers, platform_dir, gitops_dir, started);
    let mut pipeline = Pipeline::start(config, fleet, store).await?;
    pipeline.ctx.agents.set_backoff(args.agent_backoff);
    let pids = |services: &[procs::Service]| {
        services
            .iter()
            .map(|s| format!("{} (pid {})", s.url, s.pid()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "  services: collector {}, hub {}",
        pids(&pipeline.collectors),
        pids(&pipeline.hubs)
    );
    if pipeline.collectors.len() > 1 {
        println!(
            "  balanced: agents deliver to {}, readers ask {}",
            pipeline.collector_url, pipeline.hub_url
        );
    }
    let sampler = start_sampler(&pipeline, servers, started);
    let prober = pipeline.ctx.prober.clone();
    let agents = pipeline.ctx.agents.clone();
    let mut rng = SplitMix64::for_item(shape.seed, 0x5ce7_a210);
    let mut phases = Phases {
        reports: Vec::new(),
        windows: Vec::new(),
        refreshes_before: refresh_buckets(pipeline.ctx.metrics_hub()).await,
    };
    let connect = connect(args, &pipeline, &mut phases, started).await?;

    // Readers from here on: every later phase runs under concurrent readers.
    let readers_stop = Arc::new(AtomicBool::new(false));
    let (timings, readers_thread) = crate::readers::spawn(
        started,
        args.readers,
        &pipeline.ctx.hub,
        HUB_TIMEOUT,
        shape.choices,
        shape.seed,
        readers_stop.clone(),
    )?;
    let mut storm_numbers = None;
    let mut outages = Vec::new();
    for &scenario in &args.scenarios {
        pipeline.check_alive()?;
        let storm = run_phase(
            args,
            &mut pipeline,
            scenario,
            &mut rng,
            (&mut phases, &mut outages),
            started,
        )
        .await?;
        if storm.is_some() {
            storm_numbers = storm;
        }
    }
    let replicas = servers.replica_stores()?;
    let mut faults = Vec::new();
    if let Servers::Cluster(setup) = servers {
        for &fault in &args.faults {
            for &scenario in &args.fault_scenarios {
                pipeline.check_alive()?;
                let record = fault_phase(
                    args,
                    &mut pipeline,
                    setup,
                    &replicas,
                    (fault, scenario),
                    &mut rng,
                    &mut phases,
                    started,
                )
                .await?;
                faults.push(record);
            }
        }
    }
    // Every acknowledged change stored, once: the last phase's check emptied every outbox.
    let store_audit = match crate::audit::audit(store, &replicas, &agents.fleet).await {
        Ok(audit) => {
            print_audit("the run", &audit);
            Some(audit)
        }
        Err(err) => {
            println!("  store audit: could not be made: {err:#}");
            None
        }
    };
    wind_down(args, &mut pipeline, readers_stop, readers_thread).await;

    let ctx = &pipeline.ctx;
    let tables = store.table_sizes().await?;
    let samples = sampler.samples.lock().expect("samples lock").clone();
    drop(sampler);
    let tally = std::mem::take(&mut *agents.tally.lock().expect("tally lock"));
    let freshness = prober.seen.lock().expect("seen lock").clone();
    let timings = std::mem::take(&mut *timings.lock().expect("timings lock"));
    let steady = ctx.steady.lock().expect("steady lock").clone();
    let rollout = ctx.rollout.lock().expect("rollout lock").clone();
    Ok(report::build(report::Inputs {
        args,
        live_clusters: shape.live,
        app_instances: shape.instances,
        render,
        connect,
        storm: storm_numbers,
        phases: phases.reports,
        phase_windows: phases.windows,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
        tally,
        freshness,
        not_seen: prober.not_seen.load(Ordering::Relaxed),
        superseded: prober.superseded.load(Ordering::Relaxed),
        timings,
        samples,
        tables,
        steady,
        rollout,
        seconds: started.elapsed().as_secs_f64(),
        cluster: args.clickhouse_cluster.map(|shape| {
            format!(
                "ClickHouse as {shape} (shards x replicas) with ZooKeeper, {COPIES} collectors and {COPIES} hubs, each kind behind HAProxy"
            )
        }),
        faults,
        outages,
        store_audit,
    }))
}

/// What the run needs to know of the simulated fleet once the pipeline owns it.
struct FleetShape {
    /// The clusters, apps and regions the hub's readers ask about.
    choices: crate::readers::Choices,
    /// Clusters that report at all.
    live: u64,
    /// (cluster, app) pairs the fleet wants.
    instances: u64,
    seed: u64,
}

impl FleetShape {
    /// The shape of `fleet`.
    fn of(fleet: &SimFleet) -> FleetShape {
        let mut regions: Vec<String> = fleet
            .clusters
            .iter()
            .map(|c| c.group.split('/').next().unwrap_or_default().to_owned())
            .collect();
        regions.sort();
        regions.dedup();
        FleetShape {
            choices: crate::readers::Choices {
                clusters: Arc::new(fleet.clusters.iter().map(|c| c.id.clone()).collect()),
                apps: Arc::new(fleet.apps.clone()),
                regions: Arc::new(regions),
                gates: Arc::new(
                    fleet
                        .clusters
                        .iter()
                        .flat_map(|c| c.wants.iter())
                        .map(|w| (w.app, &*w.version))
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .map(|(app, version)| {
                            (fleet.apps[usize::from(app)].clone(), version.to_owned())
                        })
                        .collect(),
                ),
            },
            live: fleet.clusters.iter().filter(|c| !c.never_seen).count() as u64,
            instances: fleet.clusters.iter().map(|c| c.wants.len() as u64).sum(),
            seed: fleet.seed(),
        }
    }
}

/// The scenarios' knobs from the command line.
fn knobs(args: &LoadtestArgs) -> Knobs {
    Knobs {
        check_timeout: Duration::from_secs(args.check_seconds),
        drain_timeout: Duration::from_secs(1_800),
        freshness_samples: args.freshness_samples,
        steady: SteadyKnobs {
            seconds: args.steady_seconds,
            change_rate: args.change_rate,
        },
        rollout: RolloutKnobs {
            app: args.rollout_app.clone(),
            waves: args.waves,
            wave_seconds: args.wave_seconds,
            failure_rate: args.failure_rate,
        },
        flap: FlapKnobs {
            share: args.flap_share,
            seconds: args.flap_seconds,
            period_seconds: args.flap_period_seconds,
        },
        dark: DarkKnobs {
            share: args.dark_share,
        },
        outage: OutageKnobs {
            down_seconds: args.outage_seconds,
            after_seconds: args.outage_after_seconds,
        },
        ..Knobs::new(args.stale_after)
    }
}

/// The pipeline's configuration: services on free ports over `servers` (in cluster mode, on the
/// ports the balancer knows, in cluster mode), logs in the report's directory, the load test's
/// readers' token.
fn pipeline_config(
    args: &LoadtestArgs,
    exe: &std::path::Path,
    servers: &Servers,
    platform_dir: &std::path::Path,
    gitops_dir: &std::path::Path,
    started: Instant,
) -> PipelineConfig {
    let (collector_ports, hub_ports, service_args, collector_endpoint, hub_endpoint) = match servers
    {
        Servers::Single(_) => (vec![0], vec![0], Vec::new(), None, None),
        Servers::Cluster(setup) => (
            setup.collector_ports.clone(),
            setup.hub_ports.clone(),
            vec!["--clickhouse-cluster".to_owned(), CLUSTER_NAME.to_owned()],
            Some(setup.url("collectors")),
            Some(setup.url("hubs")),
        ),
    };
    PipelineConfig {
        exe: exe.to_path_buf(),
        clickhouse_url: servers.store_config().url,
        dir: platform_dir.parent().unwrap_or(platform_dir).to_path_buf(),
        logs: args.out.clone(),
        collector_ports,
        hub_ports,
        service_args,
        collector_endpoint,
        hub_endpoint,
        stale_after: args.stale_after,
        heartbeat: Duration::from_secs(args.heartbeat_seconds),
        concurrency: args.concurrency,
        hub_timeout: HUB_TIMEOUT,
        readers: vec![HubReader {
            name: "loadtest-readers",
            token: READ_TOKEN,
            scope: None,
        }],
        knobs: knobs(args),
        platform_dir: platform_dir.to_path_buf(),
        gitops_dir: gitops_dir.to_path_buf(),
        started,
    }
}

/// Samples the CPU and memory of the collectors, the hubs, this process and ClickHouse (and
/// ZooKeeper in cluster mode).
fn start_sampler(pipeline: &Pipeline, servers: &Servers, started: Instant) -> Sampler {
    {
        let mut watched = pipeline.watched.lock().expect("watched lock");
        watched.push(("loadtest".to_owned(), std::process::id()));
        watched.extend(servers.pids());
    }
    Sampler::start(pipeline.watched.clone(), started)
}

/// The phases run so far, each with its measured window, and the hub's refresh histogram as it
/// stood when the last one ended.
struct Phases {
    reports: Vec<PhaseReport>,
    /// Seconds since the run started: the whole phase, or a full resync's delivery (then true).
    windows: Vec<((f64, f64), bool)>,
    refreshes_before: Option<crate::hubcheck::Buckets>,
}

impl Phases {
    /// Keeps `phase` with the hub's refreshes that ended since the previous phase did, and the
    /// window its load is measured over (the whole phase when `None`).
    async fn end(
        &mut self,
        hub: &crate::hubcheck::HubClient,
        mut phase: PhaseReport,
        window: Option<(f64, f64)>,
    ) {
        let refreshes_now = refresh_buckets(hub).await;
        phase.refreshes = phase_refreshes(&self.refreshes_before, &refreshes_now);
        self.refreshes_before = refreshes_now;
        self.windows.push(match window {
            Some(delivery) => (delivery, true),
            None => ((phase.started_s, phase.started_s + phase.seconds), false),
        });
        self.reports.push(phase);
    }
}

/// The delivery window of a full resync that just ended after `seconds` of delivery, in
/// seconds since the run started.
fn delivery_window(started: Instant, seconds: f64) -> (f64, f64) {
    let now = started.elapsed().as_secs_f64();
    ((now - seconds).max(0.0), now)
}

/// The connection: every delivering cluster sends its first snapshot, all at once. Returns
/// (reports, rows, seconds).
async fn connect(
    args: &LoadtestArgs,
    pipeline: &Pipeline,
    phases: &mut Phases,
    started: Instant,
) -> anyhow::Result<(u64, u64, f64)> {
    let ctx = &pipeline.ctx;
    let phase_start = Instant::now();
    let mut notes = Vec::new();
    let (reports, rows, connect_seconds) = ctx.storm(&mut notes).await?;
    let window = delivery_window(started, connect_seconds);
    println!("  connect: {}", notes.last().cloned().unwrap_or_default());
    let check = ctx.check().await;
    let phase = phase_report("connect", started, phase_start, reports, notes, &check);
    phases.end(ctx.metrics_hub(), phase, Some(window)).await;
    save_collector_metrics(
        &pipeline.collectors[0].url,
        &args.out.join("collector-metrics-connect.txt"),
    )
    .await;
    print_check(&check);
    Ok((reports, rows, connect_seconds))
}

/// Runs one scenario as a phase, checked against the ground truth, and keeps an outage's
/// figures. Returns the storm's (reports, rows, seconds) when the scenario was the storm.
async fn run_phase(
    args: &LoadtestArgs,
    pipeline: &mut Pipeline,
    scenario: Scenario,
    rng: &mut SplitMix64,
    (phases, outages): (&mut Phases, &mut Vec<OutageReport>),
    started: Instant,
) -> anyhow::Result<Option<(u64, u64, f64)>> {
    let Pipeline {
        collectors,
        watched,
        ctx,
        ..
    } = pipeline;
    let ctx = &*ctx;
    let phase_start = Instant::now();
    let mut notes = Vec::new();
    let mut storm_numbers = None;
    let mut window = None;
    let (changes, mut check) = match scenario {
        Scenario::Steady => (ctx.steady(rng, &mut notes).await?, None),
        Scenario::Rollout => (ctx.rollout(rng, &mut notes).await?, None),
        Scenario::Flap => (ctx.flap(rng, &mut notes).await?, None),
        Scenario::Dark => {
            let (changes, while_dark) = ctx.dark(rng, &mut notes).await?;
            (changes, (!while_dark.passed).then_some(while_dark))
        }
        Scenario::Storm => {
            let numbers = ctx.storm(&mut notes).await?;
            window = Some(delivery_window(started, numbers.2));
            storm_numbers = Some(numbers);
            (numbers.1, None)
        }
        Scenario::Outage => {
            let (changes, outage) = ctx
                .outage(&mut collectors[0], watched, rng, &mut notes)
                .await?;
            outages.push(outage);
            (changes, None)
        }
    };
    let outcome = match check.take() {
        Some(failed) => failed,
        None => ctx.check().await,
    };
    for note in &notes {
        println!("  {}: {note}", scenario.name());
    }
    print_check(&outcome);
    let phase = phase_report(
        scenario.name(),
        started,
        phase_start,
        changes,
        notes,
        &outcome,
    );
    phases.end(ctx.metrics_hub(), phase, window).await;
    save_collector_metrics(
        &collectors[0].url,
        &args
            .out
            .join(format!("collector-metrics-{}.txt", scenario.name())),
    )
    .await;
    Ok(storm_numbers)
}

/// One fault phase: `scenario` runs while `fault` is injected and ended; then every outbox
/// empties, every hub must agree with the ground truth, and the store is audited. The phase's
/// steady and rollout measurements do not replace those of the fault-free phases.
#[allow(clippy::too_many_arguments)]
async fn fault_phase(
    args: &LoadtestArgs,
    pipeline: &mut Pipeline,
    setup: &ClusterSetup,
    replicas: &[Store],
    (fault, scenario): (Fault, Scenario),
    rng: &mut SplitMix64,
    phases: &mut Phases,
    started: Instant,
) -> anyhow::Result<FaultRecord> {
    let name = format!("{} fault, {}", fault.name(), scenario.name());
    println!("  {name}: {}", fault.describe());
    let knobs = FaultKnobs {
        lead: Duration::from_secs(args.fault_lead_seconds),
        replica_down: Duration::from_secs(args.replica_down_seconds),
        zookeeper_stop: Duration::from_secs(args.zookeeper_stop_seconds),
        service_down: Duration::from_secs(args.service_down_seconds),
    };
    let Pipeline {
        collectors,
        hubs,
        watched,
        ctx,
        ..
    } = pipeline;
    let kept_steady = ctx.steady.lock().expect("steady lock").take();
    let kept_rollout = ctx.rollout.lock().expect("rollout lock").take();
    let not_acknowledged = || {
        let tally = ctx.agents.tally.lock().expect("tally lock");
        tally.retried + tally.unreachable
    };
    let not_acknowledged_before = not_acknowledged();
    let phase_start = Instant::now();
    let phase_started_s = started.elapsed().as_secs_f64();
    let mut notes = Vec::new();
    let run_scenario = async {
        let changes = match scenario {
            Scenario::Rollout => ctx.rollout(rng, &mut notes).await,
            _ => ctx.steady(rng, &mut notes).await,
        };
        (changes, started.elapsed().as_secs_f64())
    };
    let targets = Targets {
        setup,
        collectors,
        hubs,
        watched,
    };
    let ((changes, scenario_ended_s), window) = tokio::join!(
        run_scenario,
        crate::faults::inject(fault, knobs, targets, started)
    );
    let (injected_s, restored_s) =
        window.with_context(|| format!("{name}: injecting the fault"))?;
    let changes = changes?;
    let drained = ctx.agents.drained(ctx.knobs.drain_timeout).await;
    let drained_s = started.elapsed().as_secs_f64();
    let check = match drained {
        Ok(()) => ctx.check().await,
        Err(err) => crate::hubcheck::CheckOutcome {
            passed: false,
            seconds: 0.0,
            attempts: 0,
            mismatch: Some(format!("{err:#}")),
        },
    };
    let audit = crate::audit::audit(&ctx.store, replicas, &ctx.agents.fleet).await?;
    let phase_ended_s = started.elapsed().as_secs_f64();
    *ctx.steady.lock().expect("steady lock") = kept_steady;
    *ctx.rollout.lock().expect("rollout lock") = kept_rollout;
    for note in &notes {
        println!("  {name}: {note}");
    }
    println!(
        "  {name}: down {:.1} s; every outbox empty {:.1} s after the server's return and the scenario's end",
        restored_s - injected_s,
        drained_s - restored_s.max(scenario_ended_s)
    );
    print_check(&check);
    print_audit(&name, &audit);
    let record = FaultRecord {
        fault,
        scenario: scenario.name(),
        phase: name.clone(),
        phase_started_s,
        injected_s,
        restored_s,
        scenario_ended_s,
        drained_s,
        phase_ended_s,
        not_acknowledged: not_acknowledged() - not_acknowledged_before,
        check_passed: check.passed,
        check_seconds: check.seconds,
        audit,
    };
    let phase = phase_report(&name, started, phase_start, changes, notes, &check);
    phases.end(ctx.metrics_hub(), phase, None).await;
    Ok(record)
}

/// Prints the store audit's outcome.
fn print_audit(after: &str, audit: &crate::audit::StoreAudit) {
    if audit.holds() {
        println!(
            "  store audit after {after}: {} acknowledged changes stored, none lost or twice ({} arrived again after a lost acknowledgement)",
            audit.acknowledged_changes, audit.arrived_again
        );
    } else {
        println!(
            "  store audit after {after}: FAILED: {} lost, {} not acknowledged, {} twice: {}",
            audit.lost,
            audit.unacknowledged,
            audit.stored_twice,
            audit.differences.join("; ")
        );
    }
}

/// Lets the freshness probes finish (or time out), stops the readers, saves the hub's metrics
/// and stops the services.
async fn wind_down(
    args: &LoadtestArgs,
    pipeline: &mut Pipeline,
    readers_stop: Arc<AtomicBool>,
    readers_thread: std::thread::JoinHandle<()>,
) {
    let prober = pipeline.ctx.prober.clone();
    let until = Instant::now() + Duration::from_secs(65);
    while prober.pending() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    readers_stop.store(true, Ordering::Relaxed);
    let _ = tokio::task::spawn_blocking(move || readers_thread.join()).await;
    // The hub's own metrics at the end (its refresh durations among them), kept with the report.
    match save_hub_metrics(
        pipeline.ctx.metrics_hub(),
        &args.out.join("hub-metrics.txt"),
    )
    .await
    {
        Ok(()) => {}
        Err(err) => println!("  the hub's /metrics could not be saved: {err:#}"),
    }
    pipeline.stop().await;
}

/// Prints a check's outcome under the phase's lines.
fn print_check(check: &crate::hubcheck::CheckOutcome) {
    if check.passed {
        println!(
            "  check: the hub agrees with the ground truth ({:.1} s, {} attempt(s))",
            check.seconds, check.attempts
        );
    } else {
        println!(
            "  check: FAILED after {:.1} s: {}",
            check.seconds,
            check.mismatch.as_deref().unwrap_or_default()
        );
    }
}

/// The hub's refreshes between two reads of its histogram, when both could be read.
fn phase_refreshes(
    before: &Option<crate::hubcheck::Buckets>,
    after: &Option<crate::hubcheck::Buckets>,
) -> Option<crate::scenario::PhaseRefreshes> {
    match (before, after) {
        (Some(before), Some(after)) if !after.is_empty() => {
            Some(crate::scenario::PhaseRefreshes::between(before, after))
        }
        _ => None,
    }
}

/// A phase's report from its start, changes, notes and check (its refreshes are added by
/// [`Phases::end`]).
fn phase_report(
    name: &str,
    run_started: Instant,
    phase_started: Instant,
    changes: u64,
    notes: Vec<String>,
    check: &crate::hubcheck::CheckOutcome,
) -> PhaseReport {
    PhaseReport {
        name: name.to_owned(),
        started_s: phase_started.duration_since(run_started).as_secs_f64(),
        seconds: phase_started.elapsed().as_secs_f64(),
        changes,
        notes,
        check_passed: check.passed,
        check_seconds: check.seconds,
        check_mismatch: check.mismatch.clone(),
        refreshes: None,
        load: None,
    }
}
