//! Hub benchmark: a generated fleet (30,000 clusters × 100 apps by default) written into a
//! private ClickHouse server, loaded into the hub's index, and served over HTTP on loopback.
//! Prints the time to write the fleet, the time to load the index, the process's resident memory
//! before and after the load and after the requests, and for each main route the latency
//! (p50, p99, max) of requests the answer cache cannot serve and of repeated identical requests.
//!
//! The fleet is written by a child process (this program started again with `--write-fleet`),
//! so that the memory measured here is the hub's and not what the writing left behind.
//!
//! "Uncached": the answer cache is emptied before each request. "Cached": the answer was put in
//! the cache by one request just before, and the same request is repeated; requests that found
//! the answer gone (its time to live ended) are counted as misses. Routes that never use the
//! cache are computed per request and measured once. Requests are sent one at a time over one
//! connection, after one request per route that is not counted. A percentile is the smallest
//! sample that at least that share of samples do not exceed, so with 50 samples p99 is the max.
//!
//! `cargo bench -p fleetscope-hub-tests --bench api_latency`; `FLEETSCOPE_BENCH_CLUSTERS` and
//! `FLEETSCOPE_BENCH_APPS` change the size, `FLEETSCOPE_BENCH_REQUESTS` the uncached requests
//! per route (50), and `FLEETSCOPE_BENCH_ROUTES` (comma-separated parts of a route's label)
//! measures only the routes it names, for a profile of one route. Without `--bench` (as under
//! `cargo test`) it runs a small fleet with fewer requests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_engine::Index;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_store::{Store, StoreConfig};
use fleetscope_testkit::TestStore;
use serde_json::Value;

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

/// A line of `/proc/self/status` in kB, as bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn resident() -> u64 {
    status_bytes("VmRSS:").expect("the resident set is readable")
}

/// Resets the peak resident set to the current one; false where the kernel does not allow it.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_048_576.0)
}

fn millis(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1_000.0)
}

/// The smallest sample that at least `share` of the samples do not exceed.
fn percentile(sorted: &[Duration], share: f64) -> Duration {
    let rank = ((share * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[derive(Debug)]
struct Latencies {
    p50: Duration,
    p99: Duration,
    max: Duration,
    n: usize,
}

impl Latencies {
    fn of(mut samples: Vec<Duration>) -> Latencies {
        samples.sort();
        Latencies {
            p50: percentile(&samples, 0.50),
            p99: percentile(&samples, 0.99),
            max: *samples.last().expect("at least one sample"),
            n: samples.len(),
        }
    }
}

/// One route under test: a label and the paths requested in turn.
#[derive(Debug)]
struct Endpoint {
    label: String,
    paths: Vec<String>,
}

#[derive(Debug)]
struct Measured {
    label: String,
    uncached: Latencies,
    /// `None` for routes that never use the answer cache.
    cached: Option<(Latencies, usize)>,
}

#[derive(Debug)]
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    /// Sends one request and reads the whole body; any status but 200 fails the benchmark.
    async fn get(&self, path: &str) -> (Duration, String) {
        let started = Instant::now();
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap_or_else(|err| panic!("{path}: {err}"));
        let status = response.status();
        let body = response.text().await.unwrap();
        let took = started.elapsed();
        assert_eq!(status.as_u16(), 200, "{path}: {body}");
        (took, body)
    }

    async fn json(&self, path: &str) -> Value {
        serde_json::from_str(&self.get(path).await.1).unwrap()
    }
}

/// Answers the cache holds now (entries that expired or were invalidated are not counted).
fn live_answers(state: &AppState) -> usize {
    state.cache.iter().count()
}

async fn empty_cache(state: &AppState) {
    state.cache.invalidate_all();
    state.cache.run_pending_tasks().await;
}

async fn measure(
    client: &Client,
    state: &AppState,
    endpoint: &Endpoint,
    uncached_requests: usize,
    cached_requests: usize,
) -> Measured {
    let first = &endpoint.paths[0];
    client.get(first).await;

    // Whether the route keeps its answer: ask once on an empty cache and look.
    empty_cache(state).await;
    client.get(first).await;
    state.cache.run_pending_tasks().await;
    let uses_cache = live_answers(state) > 0;

    let mut samples = Vec::with_capacity(uncached_requests);
    for i in 0..uncached_requests {
        empty_cache(state).await;
        let path = &endpoint.paths[i % endpoint.paths.len()];
        samples.push(client.get(path).await.0);
    }
    let uncached = Latencies::of(samples);

    let cached = if uses_cache {
        empty_cache(state).await;
        client.get(first).await;
        let mut samples = Vec::with_capacity(cached_requests);
        let mut misses = 0;
        for _ in 0..cached_requests {
            if live_answers(state) == 0 {
                misses += 1;
            }
            samples.push(client.get(first).await.0);
        }
        Some((Latencies::of(samples), misses))
    } else {
        None
    };
    Measured {
        label: endpoint.label.clone(),
        uncached,
        cached,
    }
}

fn print_table(rows: &[Measured]) {
    let width = rows.iter().map(|r| r.label.len()).max().unwrap_or(8).max(8);
    println!(
        "{:<width$}  {:-<31}  {:-<38}",
        "", "-- uncached ", "-- cached "
    );
    println!(
        "{:<width$}  {:>8} {:>8} {:>8} {:>4}  {:>8} {:>8} {:>8} {:>4} {:>6}",
        "endpoint", "p50 ms", "p99 ms", "max ms", "n", "p50 ms", "p99 ms", "max ms", "n", "misses"
    );
    for row in rows {
        let u = &row.uncached;
        let cached = match &row.cached {
            Some((c, misses)) => format!(
                "{:>8} {:>8} {:>8} {:>4} {:>6}",
                millis(c.p50),
                millis(c.p99),
                millis(c.max),
                c.n,
                misses
            ),
            None => "computed per request".to_owned(),
        };
        println!(
            "{:<width$}  {:>8} {:>8} {:>8} {:>4}  {cached}",
            row.label,
            millis(u.p50),
            millis(u.p99),
            millis(u.max),
            u.n
        );
    }
}

/// Makes this program the child that writes the fleet; followed by the ClickHouse URL, the
/// database, the number of clusters and the number of apps.
const WRITE_FLEET: &str = "--write-fleet";

fn fleet_of(clusters: usize, apps: usize) -> GeneratedFleet {
    GeneratedFleet::new(FleetSpec {
        clusters,
        apps,
        ..FleetSpec::default()
    })
    .unwrap()
}

/// The child: writes the fleet and prints the clusters, observed rows and desired rows written.
async fn write_fleet(args: &[String]) {
    let [url, database, clusters, apps] = args else {
        panic!("{WRITE_FLEET} URL DATABASE CLUSTERS APPS, got {args:?}");
    };
    let store = Store::connect(&StoreConfig::new(url.clone(), database.clone())).unwrap();
    let fleet = fleet_of(clusters.parse().unwrap(), apps.parse().unwrap());
    let written = fleetscope_fixtures::write_fleet(&store, &fleet)
        .await
        .unwrap();
    println!(
        "{} {} {}",
        written.clusters, written.observed, written.desired
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if args.get(1).map(String::as_str) == Some(WRITE_FLEET) {
        runtime.block_on(write_fleet(&args[2..]));
        return;
    }
    let test_mode = !args.iter().any(|a| a == "--bench");
    let (clusters, apps, uncached_requests, cached_requests) = if test_mode {
        (300, 20, 10, 20)
    } else {
        (
            env_number("FLEETSCOPE_BENCH_CLUSTERS", 30_000),
            env_number("FLEETSCOPE_BENCH_APPS", 100),
            env_number("FLEETSCOPE_BENCH_REQUESTS", 50),
            200,
        )
    };
    runtime.block_on(run(clusters, apps, uncached_requests, cached_requests));
}

async fn run(clusters: usize, apps: usize, uncached_requests: usize, cached_requests: usize) {
    let started = Instant::now();
    let test = TestStore::start().await;
    let server_time = started.elapsed();

    let fleet = fleet_of(clusters, apps);
    let spec = fleet.spec().clone();
    let started = Instant::now();
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            WRITE_FLEET.to_owned(),
            test.server.url(),
            test.store.database().to_owned(),
            clusters.to_string(),
            apps.to_string(),
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .unwrap();
    let write_time = started.elapsed();
    assert!(child.status.success(), "writing the fleet failed");
    let counts: Vec<u64> = String::from_utf8(child.stdout)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let [written_clusters, written_observed, written_desired] = counts[..] else {
        panic!("the writer printed {counts:?}");
    };

    let before_load = resident();
    let peak_reset = reset_peak();
    let started = Instant::now();
    let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();
    let load_time = started.elapsed();
    let after_load = resident();
    let peak_load = status_bytes("VmHWM:").unwrap_or(0);
    let (loaded_clusters, objects, symbols) =
        index.read(|f| (f.clusters.len(), f.objects, f.symbols.len()));

    let mut state = AppState::new(Arc::new(index), spec.policy, MetricsConfig::default());
    state.fixed_now = Some(spec.now);
    let state = Arc::new(state);
    let app = router(state.clone(), Arc::new(Auth::Insecure), false);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = Client {
        http: reqwest::Client::new(),
        base,
    };

    // Parameters taken from the fleet as served: a region, apps, clusters, a prod version.
    let summary = client.json("/api/v1/summary").await;
    assert_eq!(
        summary["total"]["clusters"].as_u64(),
        Some(written_clusters),
        "the hub counts every cluster written"
    );
    let region = summary["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["depth"] == 1)
        .and_then(|g| g["group"].as_str())
        .expect("a region")
        .to_owned();
    let environments = client.json("/api/v1/environments").await;
    let app_names: Vec<String> = environments["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["app"].as_str().unwrap().to_owned())
        .collect();
    let gate_app = &app_names[0];
    let prod_version = environments["apps"][0]["environments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["environment"] == "prod")
        .and_then(|e| e["desired"].as_object())
        .and_then(|d| d.keys().next().cloned())
        .expect("a version desired in prod");
    let spread = uncached_requests.min(clusters);
    let cluster_ids: Vec<String> = (0..spread)
        .map(|i| fleet.cluster(i * clusters / spread).cluster.cluster_id)
        .collect();
    let version_apps: Vec<&String> = app_names
        .iter()
        .step_by((app_names.len() / uncached_requests).max(1))
        .take(uncached_requests)
        .collect();
    // The newest rollout of each of those apps, as an app's page draws it.
    let mut newest_rollouts: Vec<String> = Vec::new();
    for app in &version_apps {
        let listed = client
            .json(&format!("/api/v1/rollouts?app={app}&limit=1"))
            .await;
        if let Some(id) = listed["items"][0]["id"].as_str() {
            newest_rollouts.push(id.to_owned());
        }
    }

    let endpoint = |label: String, paths: Vec<String>| Endpoint { label, paths };
    // One route asked of app after app, labelled with how many.
    let per_app = |apps: &[&String], route: &str, path: fn(&str) -> String| Endpoint {
        label: format!("{route} ({} apps)", apps.len()),
        paths: apps.iter().map(|a| path(a)).collect(),
    };
    let endpoints = [
        endpoint("/api/v1/summary".into(), vec!["/api/v1/summary".into()]),
        endpoint(
            format!("/api/v1/summary?group={region}"),
            vec![format!("/api/v1/summary?group={region}")],
        ),
        endpoint(
            "/api/v1/drift?limit=100".into(),
            vec!["/api/v1/drift?limit=100".into()],
        ),
        endpoint(
            format!("/api/v1/clusters/{{id}} ({} ids)", cluster_ids.len()),
            cluster_ids
                .iter()
                .map(|id| format!("/api/v1/clusters/{id}"))
                .collect(),
        ),
        endpoint(
            format!(
                "/api/v1/apps/{{app}}/versions ({} apps)",
                version_apps.len()
            ),
            version_apps
                .iter()
                .map(|a| format!("/api/v1/apps/{a}/versions"))
                .collect(),
        ),
        endpoint(
            "/api/v1/environments".into(),
            vec!["/api/v1/environments".into()],
        ),
        endpoint("/api/v1/stale".into(), vec!["/api/v1/stale".into()]),
        endpoint(
            format!("/api/v1/gate?app={gate_app}&version={prod_version}&environment=prod"),
            vec![format!(
                "/api/v1/gate?app={gate_app}&version={prod_version}&environment=prod&threshold=0.95"
            )],
        ),
        endpoint(
            format!("/api/v1/gate?app={gate_app}&version={prod_version}&environment=prod&soak=2h&max_failed=2%&stale=exclude"),
            vec![format!(
                "/api/v1/gate?app={gate_app}&version={prod_version}&environment=prod&soak=2h&max_failed=2%25&stale=exclude"
            )],
        ),
        endpoint(
            format!("/api/v1/insights/failures?app={gate_app}"),
            vec![format!("/api/v1/insights/failures?app={gate_app}")],
        ),
        // The other questions an app's page asks, one app after another.
        per_app(&version_apps, "/api/v1/summary?app={app}&depth=0", |a| {
            format!("/api/v1/summary?app={a}&depth=0")
        }),
        per_app(&version_apps, "/api/v1/drift?app={app}&limit=20", |a| {
            format!("/api/v1/drift?app={a}&limit=20")
        }),
        per_app(&version_apps, "/api/v1/insights/failures?app={app}", |a| {
            format!("/api/v1/insights/failures?app={a}")
        }),
        per_app(&version_apps, "/api/v1/rollouts?app={app}&limit=5", |a| {
            format!("/api/v1/rollouts?app={a}&limit=5")
        }),
        endpoint(
            format!(
                "/api/v1/rollouts/{{rollout}}?depth=0&limit=10 ({} rollouts)",
                newest_rollouts.len()
            ),
            newest_rollouts
                .iter()
                .map(|id| format!("/api/v1/rollouts/{id}?depth=0&limit=10"))
                .collect(),
        ),
        endpoint("/metrics".into(), vec!["/metrics".into()]),
        // The hub's pages (the bench's hub has no token file: no sign-in).
        endpoint("/ui/fleet".into(), vec!["/ui/fleet".into()]),
        endpoint(
            format!("/ui/fleet?group={region}"),
            vec![format!("/ui/fleet?group={region}")],
        ),
        endpoint(
            format!("/ui/apps/{{app}} ({} apps)", version_apps.len()),
            version_apps
                .iter()
                .map(|a| format!("/ui/apps/{a}"))
                .collect(),
        ),
        endpoint(
            format!("/ui/clusters/{{id}} ({} ids)", cluster_ids.len()),
            cluster_ids
                .iter()
                .map(|id| format!("/ui/clusters/{id}"))
                .collect(),
        ),
        endpoint("/ui/stale".into(), vec!["/ui/stale".into()]),
        endpoint(
            format!("/ui/gate?app={gate_app}&version={prod_version}"),
            vec![format!("/ui/gate?app={gate_app}&version={prod_version}")],
        ),
    ];
    let routes = std::env::var("FLEETSCOPE_BENCH_ROUTES").unwrap_or_default();
    let named: Vec<&str> = routes.split(',').filter(|r| !r.is_empty()).collect();
    let mut rows = Vec::new();
    for endpoint in &endpoints {
        if !named.is_empty() && !named.iter().any(|r| endpoint.label.contains(r)) {
            continue;
        }
        rows.push(
            measure(
                &client,
                &state,
                endpoint,
                uncached_requests,
                cached_requests,
            )
            .await,
        );
    }
    let after_requests = resident();
    let peak_all = status_bytes("VmHWM:").unwrap_or(0);

    println!(
        "api_latency: {clusters} clusters x {apps} apps; ClickHouse started in {:.1} s",
        server_time.as_secs_f64()
    );
    println!(
        "write fleet: {} observed rows, {} clusters, {} desired rows in {:.1} s ({:.0} observed rows/s)",
        written_observed,
        written_clusters,
        written_desired,
        write_time.as_secs_f64(),
        written_observed as f64 / write_time.as_secs_f64()
    );
    println!(
        "index load: {loaded_clusters} clusters, {objects} app objects, {symbols} distinct strings in {:.2} s",
        load_time.as_secs_f64()
    );
    println!(
        "resident memory: {} before load, {} after load (+{}, {:.0} bytes per app object), peak {} {}; {} after the requests (peak {})",
        megabytes(before_load),
        megabytes(after_load),
        megabytes(after_load.saturating_sub(before_load)),
        after_load.saturating_sub(before_load) as f64 / objects.max(1) as f64,
        megabytes(peak_load),
        if peak_reset { "during load" } else { "since start" },
        megabytes(after_requests),
        megabytes(peak_all)
    );
    print_table(&rows);
}
