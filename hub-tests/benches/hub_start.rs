//! How long the real `fleetscope hub` takes from start to ready: a generated fleet (30,000
//! clusters × 100 apps by default) written into a private ClickHouse, then the release binary
//! started on it several times, one after another. For each start it prints the time from spawn
//! to the first 200 from `GET /healthz` and from `GET /readyz`, the hub's own `fleet loaded`
//! figure, the reads the hub ran in ClickHouse while it started (seen in `system.processes`
//! every 20 ms: first and last seen, rows read), and the hub's peak resident memory until ready
//! and over the 10 s after (its first refreshes). The phases: from spawn to the first read
//! (process start, connecting, the arrival horizons), the reads (tables, heartbeats, the
//! observed rows streamed into the fleet as they arrive), then from the last read to listening
//! (the clock, classification, the first snapshot).
//!
//! `cargo bench -p fleetscope-hub-tests --bench hub_start`; `FLEETSCOPE_BENCH_CLUSTERS`,
//! `FLEETSCOPE_BENCH_APPS` and `FLEETSCOPE_BENCH_RUNS` (3) change the size and the number of
//! starts. The bench builds the binary with `cargo build --release -p fleetscope` first. Without
//! `--bench` (as under `cargo test`) it runs a small fleet once on the debug binary.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_testkit::faults::{fleetscope_binary, free_port, http_request, send_signal};
use fleetscope_testkit::TestStore;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("{name} must be a number"))
        })
        .unwrap_or(default)
}

/// A line of `/proc/<pid>/status` in kB, as MB.
fn status_megabytes(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: f64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// One read seen in ClickHouse while the hub started.
#[derive(Debug, Clone)]
struct Read {
    table: String,
    first_seen: Duration,
    last_seen: Duration,
    rows: u64,
}

/// The table a statement reads first (the word after its first `FROM`).
fn table_of(query: &str) -> String {
    let upper = query.to_ascii_uppercase();
    upper
        .find(" FROM ")
        .map(|at| {
            query[at + 6..]
                .split(|c: char| c.is_whitespace() || c == ')' || c == '(')
                .find(|w| !w.is_empty())
                .unwrap_or("?")
                .to_owned()
        })
        .unwrap_or_else(|| query.chars().take(40).collect())
}

/// Polls `system.processes` every 20 ms until `stop`, keeping each query's first and last
/// sighting (relative to `spawned`) and the most rows it was seen to have read.
fn watch_reads(
    clickhouse: String,
    spawned: Instant,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Read>> {
    std::thread::spawn(move || {
        let reads: Mutex<BTreeMap<String, Read>> = Mutex::new(BTreeMap::new());
        let statement = "SELECT query_id, read_rows, replaceRegexpAll(substring(query, 1, 400), '\\\\s+', ' ') \
             FROM system.processes WHERE query NOT LIKE '%system.processes%' FORMAT TabSeparated";
        while !stop.load(Ordering::SeqCst) {
            let at = spawned.elapsed();
            if let Ok(answer) = http_request(
                &clickhouse,
                "POST",
                "/",
                &[],
                statement.as_bytes(),
                Duration::from_secs(2),
            ) {
                let mut reads = reads.lock().unwrap();
                for line in answer.body.lines() {
                    let mut fields = line.splitn(3, '\t');
                    let (Some(id), Some(rows), Some(query)) =
                        (fields.next(), fields.next(), fields.next())
                    else {
                        continue;
                    };
                    let rows: u64 = rows.parse().unwrap_or(0);
                    let read = reads.entry(id.to_owned()).or_insert_with(|| Read {
                        table: table_of(query),
                        first_seen: at,
                        last_seen: at,
                        rows,
                    });
                    read.last_seen = at;
                    read.rows = read.rows.max(rows);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut reads: Vec<Read> = reads.into_inner().unwrap().into_values().collect();
        reads.sort_by_key(|r| r.first_seen);
        reads
    })
}

/// What one start of the hub showed.
#[derive(Debug)]
struct Start {
    healthz: Duration,
    readyz: Duration,
    peak_until_ready_mb: f64,
    peak_after_mb: f64,
    resident_after_mb: f64,
    loaded_line: String,
    reads: Vec<Read>,
}

fn get_ok(addr: &str, path: &str) -> bool {
    http_request(addr, "GET", path, &[], b"", Duration::from_secs(2))
        .is_ok_and(|answer| answer.status == 200)
}

fn start_once(binary: &Path, url: &str, database: &str, dir: &Path, run: usize) -> Start {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let log = dir.join(format!("hub-{run}.log"));
    let log_file = std::fs::File::create(&log).unwrap();
    let clickhouse = url.trim_start_matches("http://").to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let spawned = Instant::now();
    let mut child: Child = Command::new(binary)
        .args([
            "hub",
            "--clickhouse-url",
            url,
            "--clickhouse-database",
            database,
            "--listen",
            &addr,
            "--insecure",
            "--log",
            "info",
        ])
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .spawn()
        .expect("start fleetscope hub");
    let pid = child.id();
    let watcher = watch_reads(clickhouse, spawned, stop.clone());
    let limit = Duration::from_secs(600);
    let mut healthz = None;
    let mut readyz = None;
    while readyz.is_none() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the hub exited while starting ({status}):\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            spawned.elapsed() < limit,
            "the hub was not ready within {limit:?}:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        if healthz.is_none() && get_ok(&addr, "/healthz") {
            healthz = Some(spawned.elapsed());
        }
        if healthz.is_some() && get_ok(&addr, "/readyz") {
            readyz = Some(spawned.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let peak_until_ready_mb = status_megabytes(pid, "VmHWM:").unwrap_or(0.0);
    stop.store(true, Ordering::SeqCst);
    let reads = watcher.join().unwrap();
    std::thread::sleep(Duration::from_secs(10));
    let peak_after_mb = status_megabytes(pid, "VmHWM:").unwrap_or(0.0);
    let resident_after_mb = status_megabytes(pid, "VmRSS:").unwrap_or(0.0);
    send_signal(pid, "TERM");
    let until = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let loaded_line = strip_colours(&text)
        .lines()
        .filter(|l| l.contains("fleet loaded") || l.contains("loaded in"))
        .collect::<Vec<_>>()
        .join("\n  ");
    Start {
        healthz: healthz.unwrap(),
        readyz: readyz.unwrap(),
        peak_until_ready_mb,
        peak_after_mb,
        resident_after_mb,
        loaded_line,
        reads,
    }
}

/// `text` without terminal colour sequences (`ESC [ … m`).
fn strip_colours(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let (clusters, apps, runs) = if bench {
        (
            env_number("FLEETSCOPE_BENCH_CLUSTERS", 30_000),
            env_number("FLEETSCOPE_BENCH_APPS", 100),
            env_number("FLEETSCOPE_BENCH_RUNS", 3),
        )
    } else {
        (200, 10, 1)
    };
    let binary = if bench {
        fleetscope_testkit::faults::fleetscope_release_binary().to_owned()
    } else {
        fleetscope_binary().to_owned()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let test = runtime.block_on(TestStore::start());
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters,
        apps,
        ..FleetSpec::default()
    })
    .expect("a valid fleet");
    let started = Instant::now();
    let written = runtime
        .block_on(fleetscope_fixtures::write_fleet(&test.store, &fleet))
        .expect("the fleet is written");
    println!(
        "fleet of {clusters} clusters × {apps} apps written ({} observed rows, {} heartbeats, {} desired rows): {:.1} s",
        written.observed,
        written.heartbeats,
        written.desired,
        started.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir().unwrap();
    let url = test.server.url();
    let database = test.store.database().to_owned();
    let mut starts = Vec::new();
    for run in 1..=runs {
        let start = start_once(&binary, &url, &database, dir.path(), run);
        println!(
            "start {run}: /healthz {:.2} s, /readyz {:.2} s after spawn; peak resident {:.0} MB until ready, {:.0} MB over the 10 s after ({:.0} MB then)",
            start.healthz.as_secs_f64(),
            start.readyz.as_secs_f64(),
            start.peak_until_ready_mb,
            start.peak_after_mb,
            start.resident_after_mb,
        );
        println!("  hub log: {}", start.loaded_line);
        for read in &start.reads {
            println!(
                "  read {}: seen from {:.2} s to {:.2} s, {} rows",
                read.table,
                read.first_seen.as_secs_f64(),
                read.last_seen.as_secs_f64(),
                read.rows
            );
        }
        // The load's reads are those seen before the hub answered; later ones are its first
        // refreshes.
        let load_reads: Vec<&Read> = start
            .reads
            .iter()
            .filter(|r| r.first_seen < start.healthz)
            .collect();
        if let (Some(first), Some(last)) = (
            load_reads.first(),
            load_reads.iter().max_by_key(|r| r.last_seen),
        ) {
            println!(
                "  phases: spawn to the first read seen {:.2} s; reads {:.2} s (observed rows {:.2} s); last read seen to /healthz {:.2} s",
                first.first_seen.as_secs_f64(),
                (last.last_seen - first.first_seen).as_secs_f64(),
                load_reads
                    .iter()
                    .filter(|r| r.table == "observed_latest")
                    .map(|r| (r.last_seen - r.first_seen).as_secs_f64())
                    .sum::<f64>(),
                start.healthz.saturating_sub(last.last_seen).as_secs_f64()
            );
        }
        starts.push(start);
    }
    println!(
        "median of {runs}: /healthz {:.2} s, /readyz {:.2} s, peak resident until ready {:.0} MB, over the 10 s after {:.0} MB",
        median(starts.iter().map(|s| s.healthz.as_secs_f64()).collect()),
        median(starts.iter().map(|s| s.readyz.as_secs_f64()).collect()),
        median(starts.iter().map(|s| s.peak_until_ready_mb).collect()),
        median(starts.iter().map(|s| s.peak_after_mb).collect()),
    );
}
