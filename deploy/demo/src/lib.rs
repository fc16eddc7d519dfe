//! The local demo (`fleetscope demo`): starts a private ClickHouse, applies the schema, writes a
//! simulated fleet through the store's batch writer, and prints the drift rollup of every group,
//! checked against the simulator's ground truth.

#![forbid(unsafe_code)]

pub mod table;

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use fleetscope_loadtest::fleet::GroundTruth;
use fleetscope_loadtest::{FleetSpec, GeneratedFleet};
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::writer::{BatchWriter, BatchWriterConfig};
use fleetscope_store::{ObservedRow, Store, StoreConfig};
use table::thousands;

#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Simulated clusters.
    #[arg(long, default_value_t = 2_000)]
    pub clusters: usize,
    /// Applications per cluster.
    #[arg(long, default_value_t = 50)]
    pub apps: usize,
    /// Seed of the simulated fleet; the same seed gives the same fleet.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Show groups down to this depth (0 = the fleet only, 1 = regions, 3 = sites).
    #[arg(long, default_value_t = 2)]
    pub depth: usize,
    /// Seconds without a heartbeat after which a cluster is stale.
    #[arg(long, default_value_t = 600)]
    pub stale_after: i64,
    /// Seconds a new desired state may take to arrive before it counts as drift.
    #[arg(long, default_value_t = 900)]
    pub grace: i64,
    /// Keep ClickHouse running after the demo, to query it yourself.
    #[arg(long)]
    pub keep: bool,
    /// Keep ClickHouse's data in this directory instead of a temporary one.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

fn now() -> Timestamp {
    Timestamp(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
    )
}

/// Runs the demo and prints its report to stdout.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let policy = DriftPolicy {
        stale_after_seconds: args.stale_after,
        progress_grace_seconds: args.grace,
    };
    anyhow::ensure!(
        policy.stale_after_seconds > 0,
        "--stale-after must be positive, got {}",
        policy.stale_after_seconds
    );
    anyhow::ensure!(
        policy.progress_grace_seconds >= 0,
        "--grace must not be negative, got {}",
        policy.progress_grace_seconds
    );
    let spec = FleetSpec {
        clusters: args.clusters,
        apps: args.apps,
        seed: args.seed,
        now: now(),
        policy,
        ..FleetSpec::default()
    };
    let fleet = GeneratedFleet::new(spec).context("invalid demo fleet")?;

    println!(
        "Fleetscope demo: {} simulated clusters × {} apps",
        thousands(args.clusters as u64),
        args.apps
    );
    let started = Instant::now();
    let server = tokio::task::spawn_blocking({
        let data_dir = args.data_dir.clone();
        move || match data_dir {
            Some(dir) => LocalClickHouse::start_in_dir(dir),
            None => LocalClickHouse::start(),
        }
    })
    .await?
    .context("could not start a private ClickHouse server")?;
    let store = Store::connect(&StoreConfig::new(server.url(), "fleetscope"))?;
    let version = store.server_version().await?;
    println!(
        "  ClickHouse {version} started at {} in {:.1} s (data in {})",
        server.url(),
        started.elapsed().as_secs_f64(),
        server.data_dir().display()
    );
    let report = store.migrate().await?;
    println!(
        "  schema: {} migration(s) applied, {} already there",
        report.applied.len(),
        report.already_applied.len()
    );

    let started = Instant::now();
    let written = write_fleet(&store, &fleet).await?;
    println!(
        "  wrote {} clusters, {} heartbeats, {} desired rows for {} render groups, {} observed rows in {} batch(es), in {:.1} s",
        thousands(written.clusters),
        thousands(written.heartbeats),
        thousands(written.desired),
        written.render_groups,
        thousands(written.observed),
        written.batches,
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let rollups = store.drift_rollup(fleet.spec().now, &policy).await?;
    let query_time = started.elapsed();
    println!();
    println!(
        "Drift rollup per group (stale after {} s, grace {} s; computed in ClickHouse in {} ms)",
        policy.stale_after_seconds,
        policy.progress_grace_seconds,
        query_time.as_millis()
    );
    print!("{}", table::rollup_table(&rollups, Some(args.depth)));
    let hidden = rollups.iter().filter(|r| r.depth > args.depth).count();
    if hidden > 0 {
        println!(
            "({hidden} deeper groups not shown; --depth {} shows them)",
            rollups.iter().map(|r| r.depth).max().unwrap_or(0)
        );
    }
    println!(
        "QUIET: clusters not seen for over {} s. STALE: app instances on quiet clusters.",
        policy.stale_after_seconds
    );

    if rollups == written.truth.rollups() {
        println!("\nThe rollup matches the simulator's ground truth (classified by the model in Rust) for all {} groups.", rollups.len());
    } else {
        anyhow::bail!("the rollup from ClickHouse differs from the simulator's ground truth; this is a bug in the drift definition");
    }

    let stale = store.stale_clusters(fleet.spec().now, &policy, 5).await?;
    let stale_total = rollups.first().map(|r| r.stale_clusters).unwrap_or(0);
    if !stale.is_empty() {
        println!(
            "\nStale clusters, oldest first ({} of {}):",
            stale.len(),
            thousands(stale_total)
        );
        for row in &stale {
            let age = if row.last_seen == 0 {
                "never seen".to_owned()
            } else {
                format!(
                    "last seen {} ago",
                    table::duration(Duration::from_secs(
                        fleet
                            .spec()
                            .now
                            .seconds()
                            .saturating_sub(i64::from(row.last_seen))
                            .max(0) as u64
                    ))
                )
            };
            println!("  {:<24} {age}", row.cluster_id);
        }
    }

    // Close pooled connections first: ClickHouse waits for open connections when it stops.
    drop(store);
    if args.keep {
        let url = server.url();
        let (pid, dir) = server.keep_running();
        println!(
            "\nClickHouse keeps running: {url} (database fleetscope, data in {})",
            dir.display()
        );
        println!("  query it:  curl '{url}/?database=fleetscope' --data-binary 'SELECT count() FROM observed_latest'");
        if let Some(pid) = pid {
            println!("  stop it:   kill {pid}");
        }
    } else {
        tokio::task::spawn_blocking(move || server.stop()).await?;
        println!(
            "\nClickHouse stopped. Run with --keep to leave it running and query it yourself."
        );
    }
    Ok(())
}

/// What [`write_fleet`] wrote, and the simulator's ground truth for it.
#[derive(Debug)]
pub struct Written {
    pub clusters: u64,
    pub heartbeats: u64,
    pub desired: u64,
    pub render_groups: usize,
    pub observed: u64,
    pub batches: u64,
    pub truth: GroundTruth,
}

/// Streams the fleet into the store: inventory, membership and heartbeats in chunks, observed
/// state through the batch writer (the path the collector uses).
pub async fn write_fleet(store: &Store, fleet: &GeneratedFleet) -> anyhow::Result<Written> {
    let desired = fleet.desired();
    let render_groups = desired
        .iter()
        .map(|d| d.render_group.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    store.insert_rows(&[fleet.render()]).await?;
    store.insert_rows(&desired).await?;

    let writer =
        BatchWriter::<ObservedRow>::spawn(store.clone(), BatchWriterConfig::default(), None);
    let mut truth = GroundTruth::default();
    let mut written = Written {
        clusters: 0,
        heartbeats: 0,
        desired: desired.len() as u64,
        render_groups,
        observed: 0,
        batches: 0,
        truth: GroundTruth::default(),
    };
    let mut pending = Vec::new();
    const CHUNK: usize = 1_000;
    for start in (0..fleet.spec().clusters).step_by(CHUNK) {
        let sims: Vec<_> = (start..(start + CHUNK).min(fleet.spec().clusters))
            .map(|i| fleet.cluster(i))
            .collect();
        let clusters: Vec<_> = sims.iter().map(|s| s.cluster.clone()).collect();
        let members: Vec<_> = sims.iter().map(|s| s.membership.clone()).collect();
        let heartbeats: Vec<_> = sims.iter().filter_map(|s| s.heartbeat.clone()).collect();
        store.insert_rows(&clusters).await?;
        store.insert_rows(&members).await?;
        store.insert_rows(&heartbeats).await?;
        written.clusters += clusters.len() as u64;
        written.heartbeats += heartbeats.len() as u64;
        for sim in sims {
            truth.add(&sim);
            written.observed += sim.observed.len() as u64;
            pending.push(writer.submit(sim.observed).await?);
        }
    }
    let mut batches = std::collections::BTreeSet::new();
    for p in pending {
        batches.insert(p.accepted().await?.batch_id);
    }
    writer.close().await;
    written.batches = batches.len() as u64;
    written.truth = truth;
    Ok(written)
}
