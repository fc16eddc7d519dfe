//! `fleetscope loadtest`: a fleet rendered by the real renderer from a generated platform repo,
//! simulated agents (one token, one report sequence and one outbox each) delivering through the
//! real collector into a private ClickHouse, the real hub reading it, both as child processes;
//! scenarios run on top, and after each the hub's rollups and inventories must equal the
//! simulator's ground truth.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_model::DriftPolicy;
use fleetscope_runtime::clock;
use fleetscope_store::{Store, StoreConfig};

use crate::pipeline::{HubReader, Pipeline, PipelineConfig};
use crate::procs::{self, Sampler};
use crate::report::{self, LoadtestReport, RenderNumbers};
use crate::scenario::{
    DarkKnobs, FlapKnobs, Knobs, PhaseReport, RolloutKnobs, Scenario, SteadyKnobs,
};
use crate::sim::SimFleet;

/// Options of `fleetscope loadtest`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadtestArgs {
    /// Simulated clusters.
    #[arg(long, default_value_t = 30_000)]
    pub clusters: usize,
    /// Apps in the generated platform repo (most clusters run nearly all of them).
    #[arg(long, default_value_t = 100)]
    pub apps: usize,
    /// Scenarios after the initial connection, in order (repeat or comma-separate).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scenario::Steady, Scenario::Rollout, Scenario::Flap, Scenario::Dark, Scenario::Storm])]
    pub scenarios: Vec<Scenario>,
    /// Simulated agents' requests in flight at once. Real agents never wait for each other;
    /// too few workers turn any slowdown of the collector into a queue in the simulator.
    #[arg(long, default_value_t = 256)]
    pub concurrency: usize,
    /// Concurrent readers of the hub's API while the scenarios run.
    #[arg(long, default_value_t = 4)]
    pub readers: usize,
    /// Seed of the simulated fleet and its events.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Directory for the report (JSON, Markdown, PNG plots) and the services' logs.
    #[arg(long, default_value = "loadtest-report")]
    pub out: PathBuf,
    /// Seconds between an idle agent's heartbeats.
    #[arg(long, default_value_t = 30)]
    pub heartbeat_seconds: u64,
    /// Seconds without a heartbeat after which the hub calls a cluster stale (the dark
    /// scenario waits this long and 15 s more).
    #[arg(long, default_value_t = 120)]
    pub stale_after: i64,
    /// Length of the steady phase.
    #[arg(long, default_value_t = 120)]
    pub steady_seconds: u64,
    /// Share of app instances changing status per minute in the steady phase.
    #[arg(long, default_value_t = 0.01)]
    pub change_rate: f64,
    /// App whose new version the rollout scenario renders and rolls out (default app-001).
    #[arg(long)]
    pub rollout_app: Option<String>,
    #[arg(long, default_value_t = 3)]
    pub waves: usize,
    /// Seconds per rollout wave (half progressing, half settled).
    #[arg(long, default_value_t = 20)]
    pub wave_seconds: u64,
    /// Share of a wave's clusters on which the new version fails.
    #[arg(long, default_value_t = 0.05)]
    pub failure_rate: f64,
    /// Share of clusters flapping in the flap scenario.
    #[arg(long, default_value_t = 0.02)]
    pub flap_share: f64,
    #[arg(long, default_value_t = 60)]
    pub flap_seconds: u64,
    #[arg(long, default_value_t = 5)]
    pub flap_period_seconds: u64,
    /// Share of clusters going dark in the dark scenario.
    #[arg(long, default_value_t = 0.05)]
    pub dark_share: f64,
    /// How long the ground-truth check after each phase waits for the hub to agree (the time it
    /// took is reported per phase); a larger fleet needs longer for the hub to catch up.
    #[arg(long, default_value_t = 60)]
    pub check_seconds: u64,
    /// At most this many freshness samples per phase.
    #[arg(long, default_value_t = 100)]
    pub freshness_samples: usize,
    /// The fleetscope binary the collector and hub are started from (default: this one).
    #[arg(long)]
    pub fleetscope_binary: Option<PathBuf>,
}

impl LoadtestArgs {
    fn validate(&self) -> anyhow::Result<()> {
        let share = |name: &str, v: f64| {
            anyhow::ensure!(
                (0.0..=1.0).contains(&v),
                "--{name} must be between 0 and 1, got {v}"
            );
            Ok(())
        };
        anyhow::ensure!(self.clusters > 0, "--clusters must be positive");
        anyhow::ensure!(
            (1..=999).contains(&self.apps),
            "--apps must be between 1 and 999"
        );
        anyhow::ensure!(self.concurrency > 0, "--concurrency must be positive");
        anyhow::ensure!(
            self.heartbeat_seconds > 0,
            "--heartbeat-seconds must be positive"
        );
        anyhow::ensure!(
            self.stale_after > 2 * self.heartbeat_seconds as i64,
            "--stale-after ({}) must exceed two heartbeat intervals ({} s), or delivering clusters would look stale",
            self.stale_after,
            2 * self.heartbeat_seconds
        );
        anyhow::ensure!(self.waves > 0, "--waves must be positive");
        share("change-rate", self.change_rate)?;
        share("failure-rate", self.failure_rate)?;
        share("flap-share", self.flap_share)?;
        share("dark-share", self.dark_share)?;
        Ok(())
    }
}

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
    let work = tempfile::tempdir().context("creating a work directory")?;
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
    fleetscope_renderer::generate::generate(&platform_dir, args.clusters, args.apps)?;
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
    let server = tokio::task::spawn_blocking(LocalClickHouse::start)
        .await?
        .context("could not start a private ClickHouse server")?;
    let store = Store::connect(&StoreConfig::new(server.url(), "fleetscope"))?;
    store.migrate().await?;
    println!(
        "  clickhouse: {} (pid {}), started and migrated in {:.1} s",
        server.url(),
        server.pid().unwrap_or_default(),
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
    let fleet = SimFleet::from_render(&outcome, args.seed, published_at, now, policy)?;
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
        &server,
        &platform_dir,
        &gitops_dir,
        render,
        started,
    )
    .await;
    drop(store);
    tokio::task::spawn_blocking(move || server.stop()).await?;
    let (report, plots) = result?;
    report::write(&args.out, &report, &plots)?;
    println!(
        "  report: {} (and report.md, plots) in {:.0} s",
        args.out.join("report.json").display(),
        started.elapsed().as_secs_f64()
    );
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

#[allow(clippy::too_many_arguments)]
async fn drive(
    args: &LoadtestArgs,
    exe: &std::path::Path,
    fleet: SimFleet,
    store: &Store,
    server: &LocalClickHouse,
    platform_dir: &std::path::Path,
    gitops_dir: &std::path::Path,
    render: RenderNumbers,
    started: Instant,
) -> anyhow::Result<(LoadtestReport, report::PlotData)> {
    let cluster_ids: Arc<Vec<String>> =
        Arc::new(fleet.clusters.iter().map(|c| c.id.clone()).collect());
    let app_names: Arc<Vec<String>> = Arc::new(fleet.apps.clone());
    let mut regions: Vec<String> = fleet
        .clusters
        .iter()
        .map(|c| c.group.split('/').next().unwrap_or_default().to_owned())
        .collect();
    regions.sort();
    regions.dedup();
    let live = fleet.clusters.iter().filter(|c| !c.never_seen).count() as u64;
    let instances: u64 = fleet.clusters.iter().map(|c| c.wants.len() as u64).sum();
    let seed = fleet.seed();

    let knobs = Knobs {
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
        ..Knobs::new(args.stale_after)
    };
    let mut pipeline = Pipeline::start(
        PipelineConfig {
            exe: exe.to_path_buf(),
            clickhouse_url: server.url(),
            dir: platform_dir.parent().unwrap_or(platform_dir).to_path_buf(),
            logs: args.out.clone(),
            collector_port: 0,
            hub_port: 0,
            stale_after: args.stale_after,
            heartbeat: Duration::from_secs(args.heartbeat_seconds),
            concurrency: args.concurrency,
            hub_timeout: HUB_TIMEOUT,
            readers: vec![HubReader {
                name: "loadtest-readers",
                token: READ_TOKEN,
                scope: None,
            }],
            knobs,
            platform_dir: platform_dir.to_path_buf(),
            gitops_dir: gitops_dir.to_path_buf(),
            started,
        },
        fleet,
        store,
    )
    .await?;
    println!(
        "  services: collector {} (pid {}), hub {} (pid {})",
        pipeline.collector.url,
        pipeline.collector.pid(),
        pipeline.hub.url,
        pipeline.hub.pid()
    );
    let mut watched = vec![
        ("collector".to_owned(), pipeline.collector.pid()),
        ("hub".to_owned(), pipeline.hub.pid()),
        ("loadtest".to_owned(), std::process::id()),
    ];
    if let Some(pid) = server.pid() {
        watched.push(("clickhouse".to_owned(), pid));
    }
    let sampler = Sampler::start(watched, started);
    let ctx = &pipeline.ctx;
    let hub_client = ctx.hub.clone();
    let prober = ctx.prober.clone();
    let agents = ctx.agents.clone();
    let mut rng = SplitMix64::for_item(seed, 0x5ce7_a210);
    let mut phases: Vec<PhaseReport> = Vec::new();

    // Connect: every delivering cluster sends its first snapshot, all at once.
    let mut refreshes_before = refresh_buckets(&ctx.hub).await;
    let phase_start = Instant::now();
    let mut notes = Vec::new();
    let (reports, rows, connect_seconds) = ctx.storm(&mut notes).await?;
    println!("  connect: {}", notes.last().cloned().unwrap_or_default());
    let readers_stop = Arc::new(AtomicBool::new(false));
    let check = ctx.check().await;
    let mut connect_phase = phase_report("connect", started, phase_start, reports, notes, &check);
    let refreshes_now = refresh_buckets(&ctx.hub).await;
    connect_phase.refreshes = phase_refreshes(&refreshes_before, &refreshes_now);
    refreshes_before = refreshes_now;
    phases.push(connect_phase);
    save_collector_metrics(
        &pipeline.collector.url,
        &args.out.join("collector-metrics-connect.txt"),
    )
    .await;
    print_check(&check);
    let connect = (reports, rows, connect_seconds);

    // Readers from here on: every later phase runs under concurrent readers.
    let (timings, readers_thread) = crate::readers::spawn(
        started,
        args.readers,
        &hub_client,
        HUB_TIMEOUT,
        crate::readers::Choices {
            clusters: cluster_ids,
            apps: app_names,
            regions: Arc::new(regions),
        },
        seed,
        readers_stop.clone(),
    )?;

    let mut storm_numbers = None;
    for scenario in &args.scenarios {
        pipeline.check_alive()?;
        let ctx = &pipeline.ctx;
        let phase_start = Instant::now();
        let mut notes = Vec::new();
        let (changes, mut check) = match scenario {
            Scenario::Steady => (ctx.steady(&mut rng, &mut notes).await?, None),
            Scenario::Rollout => (ctx.rollout(&mut rng, &mut notes).await?, None),
            Scenario::Flap => (ctx.flap(&mut rng, &mut notes).await?, None),
            Scenario::Dark => {
                let (changes, while_dark) = ctx.dark(&mut rng, &mut notes).await?;
                (changes, (!while_dark.passed).then_some(while_dark))
            }
            Scenario::Storm => {
                let numbers = ctx.storm(&mut notes).await?;
                storm_numbers = Some(numbers);
                (numbers.1, None)
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
        let mut phase = phase_report(
            scenario.name(),
            started,
            phase_start,
            changes,
            notes,
            &outcome,
        );
        let refreshes_now = refresh_buckets(&ctx.hub).await;
        phase.refreshes = phase_refreshes(&refreshes_before, &refreshes_now);
        refreshes_before = refreshes_now;
        save_collector_metrics(
            &pipeline.collector.url,
            &args
                .out
                .join(format!("collector-metrics-{}.txt", scenario.name())),
        )
        .await;
        phases.push(phase);
    }

    // Let the freshness probes finish (or time out).
    let until = Instant::now() + Duration::from_secs(65);
    while prober.pending() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    readers_stop.store(true, Ordering::Relaxed);
    let _ = tokio::task::spawn_blocking(move || readers_thread.join()).await;
    // The hub's own metrics at the end (its refresh durations among them), kept with the report.
    match save_hub_metrics(&pipeline.ctx.hub, &args.out.join("hub-metrics.txt")).await {
        Ok(()) => {}
        Err(err) => println!("  the hub's /metrics could not be saved: {err:#}"),
    }
    pipeline.stop().await;
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
        live_clusters: live,
        app_instances: instances,
        render,
        connect,
        storm: storm_numbers,
        phases,
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
    }))
}

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
    }
}
