//! Answers at a past moment (`at=`) on a week of history: a generated fleet (30,000 clusters ×
//! 100 apps by default) written into a private ClickHouse, then seven days of steady-state
//! history before its `now`, written by ClickHouse itself (every app object changing status 10
//! times a day, which is the load test's default rate: 1,000 observed rows per cluster per
//! day; every cluster heartbeating every 30 s), the observed-state checkpoints as the collector
//! takes them (every hour by default), thinned by the default tiers with the arrivals trimmed
//! as the collector does, and a hub on it. Prints how long each stage took and, for `summary`,
//! `apps/{app}/versions` and `clusters/{id}` at moments in each tier (the hourly one of the
//! last two days, the 6-hourly one 3 and 4 days back, the daily one 8 days back when the
//! history is long enough; each a moment no earlier request asked about, so nothing is
//! answered from the hub's cache), the latency of each request.
//!
//! `cargo bench -p fleetscope-hub-tests --bench past_moments`; `FLEETSCOPE_BENCH_CLUSTERS`,
//! `FLEETSCOPE_BENCH_APPS` and `FLEETSCOPE_BENCH_DAYS` change the size;
//! `FLEETSCOPE_BENCH_DENSE_DAYS` takes the hourly checkpoints over only that many last days and
//! one every 6 hours before them (a shorter run; the moments asked about lie in the last two
//! days). Without `--bench` (as under `cargo test`) it runs a small fleet over two days.

use std::sync::Arc;
use std::time::Instant;

use fleetscope_engine::Index;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_model::Timestamp;
use fleetscope_store::past::{synthetic, DEFAULT_CHECKPOINT_SECONDS};
use fleetscope_store::thinning::CheckpointTiers;
use fleetscope_testkit::TestStore;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
        .unwrap_or(default)
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (clusters, apps, days, samples) = if bench {
        (
            env_number("FLEETSCOPE_BENCH_CLUSTERS", 30_000),
            env_number("FLEETSCOPE_BENCH_APPS", 100),
            env_number("FLEETSCOPE_BENCH_DAYS", 7) as u32,
            5,
        )
    } else {
        (200, 10, 2, 2)
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(clusters, apps, days, samples));
}

fn seconds(started: Instant) -> String {
    format!("{:.1} s", started.elapsed().as_secs_f64())
}

async fn run(clusters: usize, apps: usize, days: u32, samples: usize) {
    let test = TestStore::start().await;
    let store = &test.store;
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters,
        apps,
        ..FleetSpec::default()
    })
    .expect("a valid fleet");
    let now = fleet.spec().now;
    let started = Instant::now();
    fleetscope_fixtures::write_fleet(store, &fleet)
        .await
        .expect("the fleet is written");
    println!(
        "fleet of {clusters} clusters × {apps} apps written: {}",
        seconds(started)
    );

    let from = Timestamp(now.seconds() - i64::from(days) * 86_400);
    let started = Instant::now();
    synthetic::steady_changes(store, from, days, 10)
        .await
        .unwrap();
    println!(
        "{days} days of status changes written: {}",
        seconds(started)
    );
    let started = Instant::now();
    synthetic::heartbeats(store, from, days, 30).await.unwrap();
    println!("{days} days of heartbeats written: {}", seconds(started));

    let every = DEFAULT_CHECKPOINT_SECONDS;
    let dense_from =
        now.seconds() - env_number("FLEETSCOPE_BENCH_DENSE_DAYS", days as usize) as i64 * 86_400;
    let mut at = from.seconds().div_euclid(every) * every;
    let mut times = Vec::new();
    let started = Instant::now();
    while at <= now.seconds() {
        if at < dense_from && at % (6 * 3_600) != 0 {
            at += every;
            continue;
        }
        let one = Instant::now();
        store.take_checkpoint(Timestamp(at)).await.unwrap();
        times.push(one.elapsed().as_secs_f64());
        at += every;
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{} checkpoints taken: {} (each: median {:.1} s, max {:.1} s)",
        times.len(),
        seconds(started),
        times[times.len() / 2],
        times[times.len() - 1]
    );
    // The collector's upkeep: the default tiers thin the checkpoints, and arrivals are kept
    // only while the hourly tier needs them.
    let tiers = CheckpointTiers::default();
    let thinned = store.thin_checkpoints(now, &tiers).await.unwrap();
    let trimmed = store.trim_arrivals(now, &tiers).await.unwrap();
    let kept = store.checkpoints().await.unwrap();
    println!(
        "default tiers: {} checkpoints thinned, {} kept; {} hours of arrivals dropped, kept from {} s before now",
        thinned.len(),
        kept.taken.len(),
        trimmed.len(),
        store
            .arrivals_kept_from()
            .await
            .unwrap()
            .map_or(0, |from| now.seconds() - from.seconds())
    );
    for table in store.table_sizes().await.unwrap() {
        if table.rows > 0 {
            println!(
                "  {}: {} rows, {} bytes on disk",
                table.table, table.rows, table.bytes_on_disk
            );
        }
    }

    let started = Instant::now();
    let index = Arc::new(
        Index::load(store.clone(), fleetscope_runtime::clock::now)
            .await
            .unwrap(),
    );
    println!("hub index loaded: {}", seconds(started));
    let mut state = AppState::new(index, fleet.spec().policy, MetricsConfig::default());
    state.fixed_now = Some(now);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = router(Arc::new(state), Arc::new(Auth::Insecure), false);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::new();

    let app_name = "checkout".to_owned();
    let cluster_id = fleet.cluster(clusters / 2).cluster.cluster_id;
    // Moments after the fleet's render (three days before `now`), each just before the next
    // checkpoint (the most arrivals after its base), and one mid-way.
    let moments: Vec<i64> = (0..samples as i64)
        .map(|i| {
            let day = (i % 2) + 1;
            let base = (now.seconds() - day * 86_400).div_euclid(every) * every;
            base + every
                - 60
                - i * 7
                - if i == samples as i64 - 1 {
                    every / 2
                } else {
                    0
                }
        })
        .collect();
    // Moments in the older tiers: just before the next kept checkpoint, 3 and 4 days back
    // (one every 6 hours kept) and 8 days back (one a day kept; with at least 9 days of
    // history), read from `observed_transitions` once arrivals are trimmed.
    let six_hourly: Vec<i64> = (0..samples as i64)
        .map(|i| {
            let base = (now.seconds() - (3 + i % 2) * 86_400).div_euclid(6 * 3_600) * 6 * 3_600;
            base + 6 * 3_600 - 60 - i * 7
        })
        // Only moments the history reaches (with its first checkpoint before them).
        .filter(|moment| moment - 1_000 > from.seconds() + 3_600)
        .collect();
    if six_hourly.is_empty() {
        println!("no moment in the 6-hourly tier: FLEETSCOPE_BENCH_DAYS below 5");
    }
    let daily_base = (now.seconds() - 8 * 86_400).div_euclid(86_400) * 86_400;
    let daily: Vec<i64> = if daily_base >= from.seconds() {
        (0..samples as i64)
            .map(|i| daily_base + 86_400 - 60 - i * 7)
            .collect()
    } else {
        println!("no moment in the daily tier: FLEETSCOPE_BENCH_DAYS below 9");
        Vec::new()
    };
    let tiers_moments = [
        ("hourly tier", moments),
        ("6-hourly tier", six_hourly),
        ("daily tier", daily),
    ];
    // Tiers the history does not reach, left out of the requests too.
    let mut unreached = Vec::new();
    for (tier, moments) in &tiers_moments {
        let Some(first) = moments.first() else {
            continue;
        };
        // Where a whole-fleet build's time goes, read by read (the same reads `past::build_apart` makes),
        // at the first moment.
        let at = Timestamp(first - 1_000);
        let phase = Instant::now();
        let checkpoints = store.checkpoints().await.unwrap();
        let Some(checkpoint) = checkpoints.base_for(at) else {
            println!("no checkpoint before the {tier}'s moments: FLEETSCOPE_BENCH_DAYS too small");
            unreached.push(*tier);
            continue;
        };
        let render = store.render_at(at).await.unwrap();
        let tables_started = Instant::now();
        let inventory = store.inventory_at(at, render, None).await.unwrap();
        let members = store.members_at(render, None).await.unwrap();
        let desired = store.desired_at(render, None, None).await.unwrap();
        let tables = tables_started.elapsed();
        let ids: Vec<&str> = inventory.iter().map(|c| c.cluster_id.as_str()).collect();
        let heartbeats_started = Instant::now();
        let heartbeats = store.heartbeats_at(at, None, &ids).await.unwrap();
        let heartbeats_took = heartbeats_started.elapsed();
        let source = store
            .window_source(checkpoint, fleetscope_store::past::ObservedScope::All)
            .await
            .unwrap();
        let observed_started = Instant::now();
        // On a thread of its own, as the hub's build reads them.
        let rows = store
            .read_in_bulk(move |store| async move {
                let mut rows = 0u64;
                store
                    .observed_at(
                        checkpoint,
                        at,
                        fleetscope_store::past::ObservedScope::All,
                        fleetscope_store::past::ObservedPart::Both,
                        |_| rows += 1,
                    )
                    .await
                    .map(|_| rows)
            })
            .await
            .unwrap()
            .unwrap();
        let observed_took = observed_started.elapsed();
        let build_started = Instant::now();
        let built = fleetscope_engine::past::build_apart(
            store,
            at,
            fleetscope_engine::past::Reach::Fleet,
            fleet.spec().policy,
        )
        .await
        .unwrap();
        println!(
            "{tier}: one whole-fleet build at {} ({} s after its checkpoint, the window from {source:?}): checkpoint list and render {:.0} ms, \
inventory+membership+desired {:.0} ms ({} + {} + {} rows), heartbeats {:.0} ms ({} rows), \
observed rows read and dropped {:.0} ms ({rows} rows); the whole build {:.0} ms ({} clusters)",
            at.seconds(),
            at.seconds() - checkpoint.seconds(),
            (tables_started - phase).as_secs_f64() * 1e3,
            tables.as_secs_f64() * 1e3,
            inventory.len(),
            members.len(),
            desired.len(),
            heartbeats_took.as_secs_f64() * 1e3,
            heartbeats.len(),
            observed_took.as_secs_f64() * 1e3,
            build_started.elapsed().as_secs_f64() * 1e3,
            built.clusters.len(),
        );
        drop(built);
    }
    for (route, path) in [
        ("summary", "/api/v1/summary".to_owned()),
        (
            "apps/{app}/versions",
            format!("/api/v1/apps/{app_name}/versions"),
        ),
        (
            "clusters/{id}",
            format!("/api/v1/clusters/{cluster_id}?history_hours=0"),
        ),
    ] {
        for (tier, moments) in &tiers_moments {
            if unreached.contains(tier) {
                continue;
            }
            let mut latencies = Vec::new();
            for at in moments {
                // A moment of its own per route, so no route finds another's build in the cache.
                let at = at - i64::from(route.len() as u32);
                let started = Instant::now();
                let response = client
                    .get(format!(
                        "{base}{path}{}at={at}",
                        if path.contains('?') { '&' } else { '?' }
                    ))
                    .send()
                    .await
                    .unwrap();
                let status = response.status();
                let body = response.text().await.unwrap();
                if !status.is_success() {
                    println!(
                        "{route} at {at}: {status} after {:.0} ms: {}",
                        started.elapsed().as_secs_f64() * 1_000.0,
                        &body[..body.len().min(200)]
                    );
                    continue;
                }
                latencies.push(started.elapsed().as_secs_f64() * 1_000.0);
            }
            if latencies.is_empty() {
                continue;
            }
            let mut sorted = latencies.clone();
            sorted.sort_by(f64::total_cmp);
            println!(
                "{route}?at= ({tier}): median {:.0} ms, max {:.0} ms ({} moments: {})",
                sorted[sorted.len() / 2],
                sorted[sorted.len() - 1],
                latencies.len(),
                latencies
                    .iter()
                    .map(|l| format!("{l:.0}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
}
