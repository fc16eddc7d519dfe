//! The local demo (`fleetscope demo`): the whole pipeline on one machine. The example platform
//! repo, grown to a simulated fleet, is rendered by the real renderer into a local GitOps repo
//! and its desired state published to a private ClickHouse; the real collector and hub run as
//! child processes; simulated agents report through the collector. Then it keeps going until
//! interrupted: rollouts of new versions through the renderer in waves (some clusters fail
//! them), clusters going dark and coming back with their spooled changes, status changes in the
//! background, and a status line from the hub. The hour before the start is simulated
//! (`history`), so that the hub's answers at a past moment show the fleet from the start on.
//! Ctrl-C stops everything it started and removes what it wrote (unless `--work-dir` was
//! given).

#![forbid(unsafe_code)]

pub mod past_hour;
pub mod platform;
pub mod table;
pub mod where_to_look;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_loadtest::pipeline::{HubReader, Pipeline, PipelineConfig};
use fleetscope_loadtest::procs::{self, Service};
use fleetscope_loadtest::scenario::{clock_time, Ctx, Knobs, RolloutKnobs};
use fleetscope_loadtest::sim::{SimFleet, UNEXPECTED_APP};
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_model::{DriftPolicy, DriftState};
use fleetscope_runtime::clock;
use fleetscope_store::{Store, StoreConfig};

use table::thousands;

/// The hub token the demo prints in its example requests: reads the whole fleet.
pub const READ_TOKEN: &str = "demo-read-token-fleet";
/// A second hub token, limited to the `emea` subtree, to show scopes.
pub const EMEA_TOKEN: &str = "demo-read-token-emea";

#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Simulated clusters (the example platform repo's own, and more made after them).
    #[arg(long, default_value_t = 2_000)]
    pub clusters: usize,
    /// Use this platform repo instead of the bundled example (it is copied, not changed).
    #[arg(long)]
    pub platform: Option<PathBuf>,
    /// Seed of the simulated fleet and its events; the same seed gives the same fleet.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Port of the hub (another free port when this one is taken; 0 = any free port).
    #[arg(long, default_value_t = 8080)]
    pub hub_port: u16,
    /// Port of the collector (another free port when this one is taken; 0 = any free port).
    #[arg(long, default_value_t = 8081)]
    pub collector_port: u16,
    /// Seconds without a heartbeat after which the hub calls a cluster stale.
    #[arg(long, default_value_t = 120)]
    pub stale_after: i64,
    /// Seconds between an idle agent's heartbeats.
    #[arg(long, default_value_t = 20)]
    pub heartbeat_seconds: u64,
    /// Waves per rollout (consecutive slices of the fleet in group order).
    #[arg(long, default_value_t = 5)]
    pub waves: usize,
    /// Seconds per rollout wave (half applying, half settled).
    #[arg(long, default_value_t = 60)]
    pub wave_seconds: u64,
    /// Seconds between the end of one rollout and the start of the next.
    #[arg(long, default_value_t = 60)]
    pub pause_seconds: u64,
    /// Share of a wave's clusters on which the new version fails.
    #[arg(long, default_value_t = 0.05)]
    pub failure_rate: f64,
    /// Every this many rollouts, the last one is rolled back (the platform repo takes the app
    /// back to the version before, rendered and taken again by the same clusters); 0: never.
    #[arg(long, default_value_t = 3)]
    pub rollback_every: u64,
    /// Share of clusters dark at a time (they come back, and others go dark, between rollouts).
    #[arg(long, default_value_t = 0.02)]
    pub dark_share: f64,
    /// Share of app instances changing status (a new revision) per minute.
    #[arg(long, default_value_t = 0.01)]
    pub change_rate: f64,
    /// Seconds between status lines.
    #[arg(long, default_value_t = 30)]
    pub status_every: u64,
    /// Stop by itself after this many seconds (default: run until interrupted).
    #[arg(long)]
    pub duration: Option<u64>,
    /// Keep the platform repo, GitOps repo, logs and ClickHouse's data in this directory (kept
    /// afterwards) instead of a temporary one (removed).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// The fleetscope binary the collector and hub are started from (default: this one).
    #[arg(long, hide = true)]
    pub fleetscope_binary: Option<PathBuf>,
}

impl DemoArgs {
    fn validate(&self) -> anyhow::Result<()> {
        let share = |name: &str, v: f64| {
            anyhow::ensure!(
                (0.0..=1.0).contains(&v),
                "--{name} must be between 0 and 1, got {v}"
            );
            Ok(())
        };
        anyhow::ensure!(
            (1..=200_000).contains(&self.clusters),
            "--clusters must be between 1 and 200,000, got {}",
            self.clusters
        );
        anyhow::ensure!(
            self.heartbeat_seconds > 0,
            "--heartbeat-seconds must be positive"
        );
        anyhow::ensure!(
            self.stale_after > 2 * self.heartbeat_seconds as i64,
            "--stale-after ({}) must exceed two heartbeat intervals ({} s), or reporting clusters would look stale",
            self.stale_after,
            2 * self.heartbeat_seconds
        );
        anyhow::ensure!(self.waves > 0, "--waves must be positive");
        anyhow::ensure!(self.wave_seconds > 0, "--wave-seconds must be positive");
        anyhow::ensure!(self.status_every > 0, "--status-every must be positive");
        share("failure-rate", self.failure_rate)?;
        share("dark-share", self.dark_share)?;
        share("change-rate", self.change_rate)?;
        Ok(())
    }
}

/// Where the demo keeps its files: a temporary directory (removed at the end) or `--work-dir`.
enum WorkDir {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl WorkDir {
    fn path(&self) -> &Path {
        match self {
            WorkDir::Temporary(dir) => dir.path(),
            WorkDir::Kept(dir) => dir,
        }
    }
}

fn step(started: Instant, text: &str) {
    println!("  {text} ({:.1} s)", started.elapsed().as_secs_f64());
}

/// Runs the demo until interrupted (or for `--duration`), then stops what it started.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    args.validate()?;
    // Absolute: the command-line examples name it, to be run from any directory.
    let exe = std::path::absolute(procs::fleetscope_exe(args.fleetscope_binary.clone())?)?;
    let work = match &args.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            anyhow::ensure!(
                std::fs::read_dir(dir)?.next().is_none(),
                "--work-dir {} is not empty; give a new or empty directory",
                dir.display()
            );
            WorkDir::Kept(dir.clone())
        }
        None => WorkDir::Temporary(
            tempfile::Builder::new()
                .prefix("fleetscope-demo-")
                .tempdir()
                .context("creating a temporary directory")?,
        ),
    };
    println!(
        "Fleetscope demo: {} simulated clusters, files in {}",
        thousands(args.clusters as u64),
        work.path().display()
    );
    let result = run_in(&args, &exe, work.path()).await;
    match &work {
        WorkDir::Temporary(dir) => println!("Removed {}.", dir.path().display()),
        WorkDir::Kept(dir) => println!("Kept {}.", dir.display()),
    }
    result
}

async fn run_in(args: &DemoArgs, exe: &Path, work: &Path) -> anyhow::Result<()> {
    let platform_dir = work.join("platform");
    let gitops_dir = work.join("gitops");
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs)?;

    // The platform repo, grown to the fleet's size, rendered by the real renderer.
    let t = Instant::now();
    match &args.platform {
        Some(dir) => {
            platform::copy_platform(dir, &platform_dir)?;
        }
        None => platform::write_example(&platform_dir)?,
    }
    let added = platform::grow(&platform_dir, args.clusters)?;
    let (p, g) = (platform_dir.clone(), gitops_dir.clone());
    let outcome =
        tokio::task::spawn_blocking(move || fleetscope_renderer::render(&p, &g)).await??;
    step(
        t,
        &format!(
            "platform repo: {} ({} apps, {} clusters of which {} simulated); rendered into {} render groups, {} files, commit {} in {}",
            match &args.platform {
                Some(dir) => dir.display().to_string(),
                None => "the bundled example".to_owned(),
            },
            outcome.platform.apps.len(),
            thousands(outcome.platform.clusters.len() as u64),
            thousands(added as u64),
            outcome.assigned.groups.len(),
            thousands(outcome.files.len() as u64),
            &outcome.commit.head[..12.min(outcome.commit.head.len())],
            gitops_dir.display()
        ),
    );

    let t = Instant::now();
    let clickhouse_dir = work.join("clickhouse");
    let server = tokio::task::spawn_blocking(move || LocalClickHouse::start_in_dir(clickhouse_dir))
        .await?
        .context("could not start a private ClickHouse server")?;
    let store = Store::connect(&StoreConfig::new(server.url(), "fleetscope"))?;
    let version = store.server_version().await?;
    let migrated = store.migrate().await?;
    step(
        t,
        &format!(
            "clickhouse: {version} at {} (pid {}), {} migrations applied",
            server.url(),
            server.pid().unwrap_or_default(),
            migrated.applied.len()
        ),
    );

    // The desired state has been in place for a day, so older versions count as drift.
    let now = clock::now();
    let published_at = now.plus_seconds(-86_400);
    let t = Instant::now();
    let published = fleetscope_renderer::desired::publish(
        &store,
        &outcome,
        published_at.seconds() as u64 * 1_000,
        published_at,
    )
    .await?;
    step(
        t,
        &format!(
            "desired state published: {} rows, {} clusters",
            thousands(published.desired_rows as u64),
            thousands(published.cluster_rows as u64)
        ),
    );
    let policy = DriftPolicy {
        stale_after_seconds: args.stale_after,
        ..DriftPolicy::default()
    };
    let mut fleet = SimFleet::from_render(&outcome, args.seed, published_at, now, policy)?;
    // The first rollout takes the first app to its next version (as `bump_version` makes it).
    let first_rollout = outcome
        .platform
        .apps
        .iter()
        .next()
        .and_then(|(app, entry)| {
            next_version(entry.version.as_str()).map(|version| (app.to_string(), version))
        });
    drop(outcome);

    let t = Instant::now();
    let written = past_hour::write(&store, &mut fleet, clock::now(), args.stale_after).await?;
    step(
        t,
        &format!(
            "history: the hour before the start simulated from {} UTC on, {} app objects and {} heartbeats, with its checkpoint",
            clock_time(written.from),
            thousands(written.objects),
            thousands(written.heartbeats)
        ),
    );

    let started = Started {
        history_from: written.from,
        first_rollout,
    };
    let result = live(args, exe, fleet, &store, &server, work, &started).await;
    drop(store);
    let pid = server.pid();
    tokio::task::spawn_blocking(move || server.stop()).await?;
    println!(
        "Stopped ClickHouse (pid {}).",
        pid.map(|p| p.to_string()).unwrap_or_default()
    );
    result
}

/// The version after `version` as a rollout of the demo makes it: the minor number up by
/// one, the patch number 0 (`1.4.2` → `1.5.0`); none unless `major.minor.patch`.
pub fn next_version(version: &str) -> Option<String> {
    let parts: Vec<u64> = version
        .split('.')
        .map(|p| p.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    match parts[..] {
        [major, minor, _] => Some(format!("{major}.{}.0", minor + 1)),
        _ => None,
    }
}

/// What the start-up decided that the printed examples name.
#[derive(Debug, Clone)]
struct Started {
    /// The start of the simulated history.
    history_from: fleetscope_model::Timestamp,
    /// The app the first rollout takes, and to which version.
    first_rollout: Option<(String, String)>,
}

/// The running pipeline: services, agents, and the scenario loop until interrupted.
async fn live(
    args: &DemoArgs,
    exe: &Path,
    fleet: SimFleet,
    store: &Store,
    server: &LocalClickHouse,
    work: &Path,
    started: &Started,
) -> anyhow::Result<()> {
    let logs = &work.join("logs");
    let seed = fleet.seed();
    let apps: Vec<String> = fleet
        .apps
        .iter()
        .filter(|a| *a != UNEXPECTED_APP)
        .cloned()
        .collect();
    let t = Instant::now();
    let knobs = Knobs {
        live: true,
        rollout: RolloutKnobs {
            app: None,
            waves: args.waves,
            wave_seconds: args.wave_seconds,
            failure_rate: args.failure_rate,
        },
        ..Knobs::new(args.stale_after)
    };
    let mut pipeline = Pipeline::start(
        PipelineConfig {
            exe: exe.to_path_buf(),
            clickhouse_url: server.url(),
            dir: work.to_path_buf(),
            logs: logs.to_path_buf(),
            collector_ports: vec![args.collector_port],
            hub_ports: vec![args.hub_port],
            service_args: Vec::new(),
            collector_endpoint: None,
            hub_endpoint: None,
            stale_after: args.stale_after,
            heartbeat: Duration::from_secs(args.heartbeat_seconds),
            concurrency: agent_workers(args.clusters, args.heartbeat_seconds),
            hub_timeout: Duration::from_secs(30),
            readers: vec![
                HubReader {
                    name: "demo-reader",
                    token: READ_TOKEN,
                    scope: None,
                },
                HubReader {
                    name: "demo-emea-reader",
                    token: EMEA_TOKEN,
                    scope: Some("emea"),
                },
            ],
            knobs,
            platform_dir: work.join("platform"),
            gitops_dir: work.join("gitops"),
            started: Instant::now(),
        },
        fleet,
        store,
    )
    .await?;
    step(
        t,
        &format!(
            "services: collector {} (pid {}), hub {} (pid {}), logs in {}",
            pipeline.collectors[0].url,
            pipeline.collectors[0].pid(),
            pipeline.hubs[0].url,
            pipeline.hubs[0].pid(),
            logs.display()
        ),
    );

    let result = async {
        let ctx = &pipeline.ctx;
        // Every agent connects and sends its snapshot.
        let mut notes = Vec::new();
        ctx.storm(&mut notes).await?;
        println!(
            "  agents connected: {}",
            notes.last().cloned().unwrap_or_default()
        );
        let check = ctx.check().await;
        anyhow::ensure!(
            check.passed,
            "the hub differs from the simulator's ground truth: {}",
            check.mismatch.unwrap_or_default()
        );
        println!(
            "  the hub's rollups and version inventories equal the simulator's ground truth ({:.1} s)",
            check.seconds
        );
        print_sql_rollup(store, &policy_of(args)).await?;
        where_to_look::print(&where_to_look::Endpoints {
            hub: pipeline.hub_url.clone(),
            collector: pipeline.collector_url.clone(),
            clickhouse: server.url(),
            clickhouse_version: store.server_version().await?,
            work: work.to_path_buf(),
            logs: logs.to_path_buf(),
            example_cluster: first_cluster(ctx),
            rollout_app: apps.first().cloned().unwrap_or_default(),
            rollout_version: started
                .first_rollout
                .as_ref()
                .filter(|(app, _)| apps.first() == Some(app))
                .map(|(_, version)| version.clone()),
            stale_after: args.stale_after,
            fleetscope: exe.to_path_buf(),
            history_from: started.history_from,
        })?;
        drive(
            args,
            &pipeline.ctx,
            &apps,
            seed,
            &mut pipeline.collectors[0],
            &mut pipeline.hubs[0],
        )
        .await
    }
    .await;

    pipeline.stop().await;
    let pids = (pipeline.collectors[0].pid(), pipeline.hubs[0].pid());
    drop(pipeline);
    println!(
        "Stopped the agents, the collector (pid {}) and the hub (pid {}).",
        pids.0, pids.1
    );
    result
}

fn policy_of(args: &DemoArgs) -> DriftPolicy {
    DriftPolicy {
        stale_after_seconds: args.stale_after,
        ..DriftPolicy::default()
    }
}

fn first_cluster(ctx: &Ctx) -> String {
    let fleet = ctx.agents.fleet.lock().expect("fleet lock");
    fleet
        .clusters
        .iter()
        .find(|c| !c.never_seen)
        .map(|c| c.id.clone())
        .unwrap_or_default()
}

/// The drift rollup as ClickHouse computes it (the SQL twin of the hub's rules), by region.
async fn print_sql_rollup(store: &Store, policy: &DriftPolicy) -> anyhow::Result<()> {
    let started = Instant::now();
    let rollups = store.drift_rollup(clock::now(), policy).await?;
    println!(
        "\nDrift per group, computed in ClickHouse by the same rules in SQL ({} ms):",
        started.elapsed().as_millis()
    );
    print!("{}", table::rollup_table(&rollups, Some(1)));
    Ok(())
}

/// The scenario loop: rollouts one app after the other, dark clusters rotating between them,
/// status changes in the background, and a status line; until interrupted, `--duration` is
/// up, or a service dies.
async fn drive(
    args: &DemoArgs,
    ctx: &Ctx,
    apps: &[String],
    seed: u64,
    collector: &mut Service,
    hub: &mut Service,
) -> anyhow::Result<()> {
    let dark: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    let mut rng = SplitMix64::for_item(seed, 0xde30);
    go_dark(ctx, args, &dark, &mut rng);

    let rollouts = async {
        let mut rng = SplitMix64::for_item(seed, 0x2011);
        if apps.is_empty() {
            println!("The platform repo has no apps: nothing to roll out.");
            std::future::pending::<()>().await;
        }
        for (n, app) in apps.iter().cycle().enumerate() {
            let mut notes = Vec::new();
            ctx.rollout_of(app, &mut rng, &mut notes).await?;
            let report = ctx.rollout.lock().expect("rollout lock").clone();
            let report = match report {
                Some(report)
                    if args.rollback_every > 0
                        && (n as u64 + 1).is_multiple_of(args.rollback_every) =>
                {
                    println!(
                        "{} rolling {} back from {} to {}",
                        now_clock(),
                        report.app,
                        report.to_version,
                        report.from_version
                    );
                    ctx.roll_back(app, &report.from_version, &mut rng, &mut notes)
                        .await?;
                    ctx.rollout.lock().expect("rollout lock").clone()
                }
                other => other,
            };
            if let Some(report) = report {
                let failed: u64 = report.waves.iter().map(|w| w.failed).sum();
                let clusters: u64 = report.waves.iter().map(|w| w.clusters).sum();
                println!(
                    "{} rollout of {} {} finished: {} of {} clusters failed it; next rollout in {} s",
                    now_clock(),
                    report.app,
                    report.to_version,
                    failed,
                    clusters,
                    args.pause_seconds
                );
            }
            tokio::time::sleep(Duration::from_secs(args.pause_seconds)).await;
            let mut rng = SplitMix64::for_item(seed, ctx.agents.elapsed_ms());
            come_back(ctx, &dark);
            go_dark(ctx, args, &dark, &mut rng);
        }
        Ok::<(), anyhow::Error>(())
    };
    let background = async {
        let mut rng = SplitMix64::for_item(seed, 0xbac6);
        let instances: u64 = {
            let fleet = ctx.agents.fleet.lock().expect("fleet lock");
            fleet.clusters.iter().map(|c| c.objects.len() as u64).sum()
        };
        let per_second = instances as f64 * args.change_rate / 60.0;
        let mut owed = 0.0;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            owed += per_second;
            // Dark clusters change too: their agents keep the reports until they are back.
            let clusters: Vec<usize> = {
                let fleet = ctx.agents.fleet.lock().expect("fleet lock");
                (0..fleet.clusters.len())
                    .filter(|&c| !fleet.clusters[c].never_seen)
                    .collect()
            };
            let mut touched = Vec::new();
            while owed >= 1.0 && !clusters.is_empty() {
                owed -= 1.0;
                let c = clusters[rng.below(clusters.len() as u64) as usize];
                // Only changes that can show are sampled for freshness.
                let dark = ctx.agents.fleet.lock().expect("fleet lock").clusters[c].dark;
                if ctx.touch(c, &mut rng, !dark) {
                    touched.push(c);
                }
            }
            ctx.deliver(touched);
        }
    };
    let work = async {
        tokio::select! {
            result = rollouts => result,
            () = background => Ok(()),
        }
    };
    tokio::pin!(work);
    let interrupted = fleetscope_runtime::shutdown_signal();
    tokio::pin!(interrupted);
    let deadline = async {
        match args.duration {
            Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let mut status = tokio::time::interval(Duration::from_secs(args.status_every));
    status.tick().await;
    loop {
        tokio::select! {
            result = &mut work => return result,
            () = &mut interrupted => {
                println!("\n{} interrupted; stopping.", now_clock());
                return Ok(());
            }
            () = &mut deadline => {
                println!("{} --duration is up; stopping.", now_clock());
                return Ok(());
            }
            _ = status.tick() => {
                collector.check_alive()?;
                hub.check_alive()?;
                match status_line(ctx).await {
                    Ok(line) => println!("{} {line}", now_clock()),
                    Err(err) => println!("{} the hub did not answer: {err:#}", now_clock()),
                }
            }
        }
    }
}

fn now_clock() -> String {
    clock_time(clock::now())
}

/// Sends a share of the delivering clusters dark: they stop reporting and keep their changes in
/// their spool until they come back.
fn go_dark(ctx: &Ctx, args: &DemoArgs, dark: &Mutex<Vec<usize>>, rng: &mut SplitMix64) {
    let delivering = ctx.delivering();
    let count =
        ((delivering.len() as f64 * args.dark_share).round() as usize).min(delivering.len());
    let mut chosen = Vec::new();
    {
        let mut fleet = ctx.agents.fleet.lock().expect("fleet lock");
        let mut tries = 0;
        while chosen.len() < count && tries < 20 * count {
            tries += 1;
            let c = delivering[rng.below(delivering.len() as u64) as usize];
            // Only a cluster whose reports are all delivered: what it reports from here on
            // waits in its spool.
            if !chosen.contains(&c) && fleet.clusters[c].outbox.is_empty() {
                fleet.go_dark(c);
                chosen.push(c);
            }
        }
    }
    if chosen.is_empty() {
        return;
    }
    println!(
        "{} {} clusters went dark (they keep reporting into their spools); the hub calls them stale after {} s",
        now_clock(),
        chosen.len(),
        args.stale_after
    );
    *dark.lock().expect("dark lock") = chosen;
}

/// Brings the dark clusters back: they deliver what they spooled.
fn come_back(ctx: &Ctx, dark: &Mutex<Vec<usize>>) {
    let back = std::mem::take(&mut *dark.lock().expect("dark lock"));
    if back.is_empty() {
        return;
    }
    let spooled: usize = {
        let mut fleet = ctx.agents.fleet.lock().expect("fleet lock");
        for &c in &back {
            fleet.come_back(c);
        }
        back.iter().map(|&c| fleet.clusters[c].outbox.len()).sum()
    };
    ctx.deliver(back.iter().copied());
    println!(
        "{} {} dark clusters came back and deliver {} spooled reports",
        now_clock(),
        back.len(),
        spooled
    );
}

/// One line from the hub's summary: clusters, stale, app instances per drift state, and the
/// rollout in progress.
async fn status_line(ctx: &Ctx) -> anyhow::Result<String> {
    let rollups = ctx.hub.rollups().await?;
    let fleet = rollups.get("").context("the summary has no total")?;
    let instances: u64 = fleet.pairs.values().sum();
    let mut parts = Vec::new();
    for state in [
        DriftState::InSync,
        DriftState::Progressing,
        DriftState::Failed,
        DriftState::OutOfSync,
        DriftState::Missing,
        DriftState::Stale,
        DriftState::Unexpected,
        DriftState::Unknown,
    ] {
        let n = fleet.pairs.get(&state).copied().unwrap_or(0);
        if n > 0 {
            parts.push(format!("{} {}", thousands(n), state.as_str()));
        }
    }
    let seen = ctx.prober.seen.lock().expect("seen lock").clone();
    let freshness = if seen.is_empty() {
        String::new()
    } else {
        let mut ms: Vec<f64> = seen.iter().rev().take(20).map(|(_, ms)| *ms).collect();
        ms.sort_by(f64::total_cmp);
        format!(
            " · changes visible in the hub after {:.1} s (median of the last {})",
            ms[ms.len() / 2] / 1_000.0,
            ms.len()
        )
    };
    let rollout = ctx
        .live_status
        .lock()
        .expect("status lock")
        .clone()
        .map(|s| format!(" · {s}"))
        .unwrap_or_default();
    Ok(format!(
        "hub: {} clusters, {} stale · {} app instances: {}{rollout}{freshness}",
        thousands(fleet.clusters),
        thousands(fleet.stale_clusters),
        thousands(instances),
        parts.join(", ")
    ))
}

/// How many requests the simulated agents keep in flight: a fifth of the heartbeats due each
/// second, from 16 for a small fleet up to the load test's 256, so that the heartbeats of a
/// large fleet do not take every worker and leave the agents' first snapshots waiting.
fn agent_workers(clusters: usize, heartbeat_seconds: u64) -> usize {
    let per_second = clusters as u64 / heartbeat_seconds.max(1);
    usize::try_from(per_second / 5)
        .unwrap_or(usize::MAX)
        .clamp(16, 256)
}

#[cfg(test)]
mod tests {
    #[test]
    fn agent_workers_grow_with_the_heartbeats_to_send() {
        assert_eq!(agent_workers(300, 20), 16);
        assert_eq!(agent_workers(2_000, 20), 20);
        assert_eq!(agent_workers(30_000, 20), 256);
        assert_eq!(agent_workers(30_000, 60), 100);
        assert_eq!(agent_workers(10, 0), 16);
    }

    use super::*;

    #[test]
    fn the_next_version_is_the_one_a_rollout_makes() {
        assert_eq!(next_version("1.4.2").as_deref(), Some("1.5.0"));
        assert_eq!(next_version("0.9.0").as_deref(), Some("0.10.0"));
        assert_eq!(next_version("1.4"), None);
        assert_eq!(next_version("1.4.2-rc1"), None);
    }
}
