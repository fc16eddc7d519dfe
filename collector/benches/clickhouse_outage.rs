//! A collector's backlog after ClickHouse comes back: the real `fleetscope collector` on a
//! private ClickHouse, and agent-like clients (one per cluster) that each make a numbered
//! report every few seconds and deliver their waiting reports oldest first, one request at a
//! time, as an agent delivers its spool. ClickHouse is stopped (SIGSTOP) for a set time while
//! the clients keep making reports; then it is continued. Prints, per outage: the backlog when
//! ClickHouse came back (reports made before it and not yet acknowledged, and their rows), the
//! first acknowledgement after it, how long until every client had every report made before it
//! acknowledged (the drain), the rows acknowledged per second meanwhile, and the answers during
//! the outage. After each run every acknowledged change must be in ClickHouse exactly once.
//!
//! `cargo bench -p fleetscope-collector --bench clickhouse_outage`. By default 200 clients, each
//! making a report of 10 changes every 4 s (500 changes a second in all: the load test's steady
//! rate of 1% of app instances a minute on 30,000 clusters × 100 apps), outages of 60 and 300 s,
//! each run twice; `FLEETSCOPE_BENCH_CLIENTS`, `FLEETSCOPE_BENCH_CHANGES`,
//! `FLEETSCOPE_BENCH_REPORT_SECONDS`, `FLEETSCOPE_BENCH_OUTAGES` (seconds, comma-separated) and
//! `FLEETSCOPE_BENCH_RUNS` change them. Each run starts its own ClickHouse and collector. Without
//! `--bench` (as under `cargo test`) it runs 5 clients through a 5 s outage on the debug binary.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_testkit::faults::{
    free_port, stored_changes, Attempt, Change, ReportingAgent, Suspended,
};
use support::{clickhouse_with, env_number, median, token, DATABASE};

/// How long a client waits for one answer before it counts the request as unanswered.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);

/// One report a client made and when it was acknowledged.
struct Delivered {
    made: Instant,
    acknowledged: Instant,
    changes: Vec<Change>,
}

struct ClientRun {
    cluster: String,
    delivered: Vec<Delivered>,
    attempts: Vec<Attempt>,
    error: Option<String>,
}

/// Shared between the clients and the run: when ClickHouse came back, and when each client
/// had acknowledged everything it made before that.
#[derive(Default)]
struct Progress {
    back: Option<Instant>,
    drained: BTreeMap<String, Instant>,
}

struct Settings {
    clients: usize,
    changes: usize,
    every: Duration,
    warm_up: Duration,
}

fn client(
    cluster: String,
    addr: String,
    settings: Arc<Settings>,
    progress: Arc<Mutex<Progress>>,
    stop: Arc<AtomicBool>,
) -> ClientRun {
    let mut agent = ReportingAgent::new(&cluster, &addr, Some(&token(&cluster)), settings.changes);
    let mut run = ClientRun {
        cluster: cluster.clone(),
        delivered: Vec::new(),
        attempts: Vec::new(),
        error: None,
    };
    let started = Instant::now();
    let mut made = 0u64;
    let mut waiting = std::collections::VecDeque::new();
    let deadline = Instant::now() + Duration::from_secs(3 * 3600);
    while !stop.load(Ordering::SeqCst) {
        // The reports due by now, made late when a delivery kept this thread busy (as an
        // agent's watcher keeps spooling while its sender waits).
        let due = (started.elapsed().as_secs_f64() / settings.every.as_secs_f64()) as u64 + 1;
        while made < due {
            // Stamped with when it was due, not when this thread got to it.
            let due_at = started + settings.every.mul_f64(made as f64);
            made += 1;
            waiting.push_back((due_at, agent.next_report(&format!("1.0.{made}"))));
        }
        // Caught up once every report due before ClickHouse came back is acknowledged: checked
        // after the reports due by now are queued, so none made during the outage is missed.
        {
            let mut progress = progress.lock().unwrap();
            if let Some(back) = progress.back {
                let behind = waiting.front().is_some_and(|(made, _)| *made < back);
                if !behind && !progress.drained.contains_key(&cluster) {
                    let caught_up = run
                        .delivered
                        .last()
                        .map_or_else(Instant::now, |d| d.acknowledged);
                    progress
                        .drained
                        .insert(cluster.clone(), caught_up.max(back));
                }
            }
        }
        let Some((made_at, report)) = waiting.front() else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        if let Err(err) = agent.deliver(report, REQUEST_LIMIT, deadline, &mut run.attempts) {
            run.error = Some(err);
            break;
        }
        let (made_at, report) = (*made_at, report.clone());
        waiting.pop_front();
        run.delivered.push(Delivered {
            made: made_at,
            acknowledged: Instant::now(),
            changes: report.changes,
        });
    }
    run
}

/// What one outage showed.
struct Outcome {
    drain: f64,
    rows_per_second: f64,
}

fn run_outage(
    binary: &std::path::Path,
    settings: &Arc<Settings>,
    outage: Duration,
    runtime: &tokio::runtime::Runtime,
) -> Outcome {
    let work = tempfile::tempdir().unwrap();
    let clusters: Vec<String> = (0..settings.clients)
        .map(|i| format!("plant-{i:05}"))
        .collect();
    let (server, _store) = clickhouse_with(&clusters, runtime);
    let port = free_port();
    let collector = support::start_collector(binary, work.path(), &clusters, &server.url(), port);
    let addr = format!("127.0.0.1:{port}");
    let progress = Arc::new(Mutex::new(Progress::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = clusters
        .iter()
        .map(|cluster| {
            let (cluster, addr, settings, progress, stop) = (
                cluster.clone(),
                addr.clone(),
                settings.clone(),
                progress.clone(),
                stop.clone(),
            );
            std::thread::spawn(move || client(cluster, addr, settings, progress, stop))
        })
        .collect();
    std::thread::sleep(settings.warm_up);
    let pid = server.pid().expect("clickhouse runs");
    let suspended = Suspended::stop(pid).unwrap();
    let stopped = Instant::now();
    std::thread::sleep(outage);
    drop(suspended);
    let back = Instant::now();
    progress.lock().unwrap().back = Some(back);
    let limit = Duration::from_secs(1_800);
    loop {
        let drained = progress.lock().unwrap().drained.len();
        if drained == clusters.len() {
            break;
        }
        if back.elapsed() > limit {
            stop.store(true, Ordering::SeqCst);
            panic!(
                "the backlog did not drain within {limit:?}: {drained} of {} clients caught up\ncollector:\n{}",
                clusters.len(),
                collector.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // A few seconds of ingest after the drain, then every client finishes its delivery.
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::SeqCst);
    let runs: Vec<ClientRun> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    for run in &runs {
        assert_eq!(
            run.error,
            None,
            "{}\ncollector:\n{}",
            run.cluster,
            collector.log_tail()
        );
    }
    let drained_at = *progress.lock().unwrap().drained.values().max().unwrap();
    let drain = drained_at - back;

    let delivered = runs.iter().flat_map(|r| &r.delivered);
    let backlog: Vec<&Delivered> = delivered
        .clone()
        .filter(|d| d.made < back && d.acknowledged > back)
        .collect();
    let backlog_rows: usize = backlog.iter().map(|d| d.changes.len()).sum();
    let rows_in_drain: usize = delivered
        .clone()
        .filter(|d| d.acknowledged > back && d.acknowledged <= drained_at)
        .map(|d| d.changes.len())
        .sum();
    let first_ack = delivered
        .clone()
        .filter(|d| d.acknowledged > back)
        .map(|d| d.acknowledged - back)
        .min()
        .unwrap_or_default();
    let acknowledged_while_stopped = delivered
        .clone()
        .filter(|d| d.made >= stopped && d.acknowledged < back)
        .count();
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    for attempt in runs.iter().flat_map(|r| &r.attempts) {
        if attempt.sent >= stopped && attempt.sent < back {
            let key = match &attempt.outcome {
                Ok(answer) => answer.status.to_string(),
                Err(_) => "no answer".to_owned(),
            };
            *answers.entry(key).or_default() += 1;
        }
    }
    let longest = runs
        .iter()
        .flat_map(|r| &r.attempts)
        .map(Attempt::took)
        .max()
        .unwrap_or_default();
    let slowest_client = progress
        .lock()
        .unwrap()
        .drained
        .iter()
        .max_by_key(|(_, at)| **at)
        .map(|(cluster, _)| cluster.clone())
        .unwrap();
    let rows_per_second = rows_in_drain as f64 / drain.as_secs_f64().max(1e-3);
    println!(
        "outage of {:.0} s, {} clients: backlog at the return {} reports, {} rows; first acknowledgement {:.2} s after; drained in {:.1} s (last client {slowest_client}); {} rows acknowledged meanwhile = {:.0} rows/s; requests sent during the outage by answer {answers:?}; longest request {:.1} s; reports made during the outage and acknowledged before the return: {acknowledged_while_stopped}",
        outage.as_secs_f64(),
        runs.len(),
        backlog.len(),
        backlog_rows,
        first_ack.as_secs_f64(),
        drain.as_secs_f64(),
        rows_in_drain,
        rows_per_second,
        longest.as_secs_f64(),
    );

    // Nothing lost or doubled: ClickHouse holds each acknowledged change once.
    let mut acknowledged_total = 0;
    for run in &runs {
        let stored = runtime.block_on(stored_changes(&server.url(), DATABASE, &run.cluster));
        let acknowledged: BTreeMap<(String, u64), (String, u64)> = run
            .delivered
            .iter()
            .flat_map(|d| &d.changes)
            .map(|c| ((c.name.clone(), c.change_seq), (c.version.clone(), 1)))
            .collect();
        acknowledged_total += acknowledged.len();
        let missing = acknowledged
            .keys()
            .filter(|k| !stored.contains_key(*k))
            .count();
        let doubled = stored.values().filter(|(_, copies)| *copies != 1).count();
        assert!(
            missing == 0 && doubled == 0,
            "{}: {missing} acknowledged changes missing, {doubled} stored more than once",
            run.cluster
        );
    }
    println!("  every one of the {acknowledged_total} acknowledged changes is stored once");
    drop(collector);
    Outcome {
        drain: drain.as_secs_f64(),
        rows_per_second,
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (settings, outages, runs) = if bench {
        let outages: Vec<u64> = std::env::var("FLEETSCOPE_BENCH_OUTAGES")
            .unwrap_or_else(|_| "60,300".to_owned())
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .expect("FLEETSCOPE_BENCH_OUTAGES: seconds, comma-separated")
            })
            .collect();
        (
            Settings {
                clients: env_number("FLEETSCOPE_BENCH_CLIENTS", 200),
                changes: env_number("FLEETSCOPE_BENCH_CHANGES", 10),
                every: Duration::from_secs(env_number("FLEETSCOPE_BENCH_REPORT_SECONDS", 4) as u64),
                warm_up: Duration::from_secs(10),
            },
            outages,
            env_number("FLEETSCOPE_BENCH_RUNS", 2),
        )
    } else {
        (
            Settings {
                clients: 5,
                changes: 4,
                every: Duration::from_secs(1),
                warm_up: Duration::from_secs(2),
            },
            vec![5],
            1,
        )
    };
    let binary = support::binary(bench);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let settings = Arc::new(settings);
    println!(
        "{} clients, each a report of {} changes every {} s ({:.0} changes/s in all)",
        settings.clients,
        settings.changes,
        settings.every.as_secs(),
        (settings.clients * settings.changes) as f64 / settings.every.as_secs_f64()
    );
    for outage in outages {
        let outcomes: Vec<Outcome> = (0..runs)
            .map(|_| run_outage(&binary, &settings, Duration::from_secs(outage), &runtime))
            .collect();
        println!(
            "outage of {outage} s, median of {runs}: drained in {:.1} s at {:.0} rows/s",
            median(outcomes.iter().map(|o| o.drain).collect()),
            median(outcomes.iter().map(|o| o.rows_per_second).collect())
        );
    }
}
