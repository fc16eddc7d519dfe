//! Concurrent readers of the hub's API, as dashboards and CD pipelines would be, each request
//! timed by route.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_fixtures::rng::SplitMix64;
use serde::{Deserialize, Serialize};

use crate::hubcheck::HubClient;

/// What the readers ask for; the `{cluster}`, `{app}` and `{region}` holes are filled at random,
/// `{gate_app}` and `{gate_version}` with an app and a version desired somewhere.
const ROUTES: &[(&str, &str)] = &[
    ("summary", "/api/v1/summary"),
    ("summary of a region", "/api/v1/summary?group={region}"),
    ("drift page", "/api/v1/drift?limit=100"),
    ("cluster page", "/api/v1/clusters/{cluster}"),
    // The same page without its history: one cluster's apps, answered from the hub's memory.
    ("cluster apps", "/api/v1/clusters/{cluster}?history_hours=0"),
    ("app versions", "/api/v1/apps/{app}/versions"),
    ("stale clusters", "/api/v1/stale?limit=100"),
    ("environments", "/api/v1/environments"),
    // The hub's own pages, as a browser asks for them (signed in with the same token).
    ("fleet page", "/ui/fleet"),
    ("group page", "/ui/fleet?group={region}"),
    ("app page", "/ui/apps/{app}"),
    ("cluster page (ui)", "/ui/clusters/{cluster}"),
    ("stale page", "/ui/stale"),
    (
        "gate page",
        "/ui/gate?app={gate_app}&version={gate_version}",
    ),
];

/// The routes' names that are pages, for the report's targets.
pub const PAGES: &[&str] = &[
    "fleet page",
    "group page",
    "app page",
    "cluster page (ui)",
    "stale page",
    "gate page",
];

/// One answer: seconds since the run started, latency in milliseconds.
pub type Answer = (f64, f64);

#[derive(Debug, Default)]
pub struct Timings {
    /// route → (every answer, errors)
    pub by_route: BTreeMap<&'static str, (Vec<Answer>, u64)>,
    /// When each failed request was sent, seconds since the run started.
    pub failed_at: Vec<f64>,
    pub first_errors: Vec<String>,
}

impl Timings {
    /// Requests sent in `[from_s, to_s)`, those that failed, and the longest stretch from a
    /// failed request to the next answered one (to `to_s` when none was answered after it).
    pub fn outages(&self, from_s: f64, to_s: f64) -> (u64, u64, f64) {
        let mut sent: Vec<(f64, bool)> = self
            .by_route
            .values()
            .flat_map(|(answers, _)| answers.iter().map(|(at, _)| (*at, true)))
            .chain(self.failed_at.iter().map(|at| (*at, false)))
            .filter(|(at, _)| (from_s..to_s).contains(at))
            .collect();
        sent.sort_by(|a, b| a.0.total_cmp(&b.0));
        let failed = sent.iter().filter(|(_, ok)| !ok).count() as u64;
        let mut longest: f64 = 0.0;
        let mut failing_since: Option<f64> = None;
        for &(at, ok) in &sent {
            match (ok, failing_since) {
                (false, None) => failing_since = Some(at),
                (true, Some(since)) => {
                    longest = longest.max(at - since);
                    failing_since = None;
                }
                _ => {}
            }
        }
        if let Some(since) = failing_since {
            longest = longest.max(to_s - since);
        }
        (sent.len() as u64, failed, longest)
    }
}

/// Latency percentiles of one route.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RouteLatency {
    pub route: String,
    pub requests: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The value at quantile `q` of sorted values (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

impl Timings {
    pub fn summary(&self) -> Vec<RouteLatency> {
        self.by_route
            .iter()
            .map(|(route, (latencies, errors))| {
                let mut sorted: Vec<f64> = latencies.iter().map(|(_, ms)| *ms).collect();
                sorted.sort_by(f64::total_cmp);
                RouteLatency {
                    route: (*route).to_owned(),
                    requests: latencies.len() as u64 + errors,
                    errors: *errors,
                    p50_ms: quantile(&sorted, 0.50),
                    p95_ms: quantile(&sorted, 0.95),
                    p99_ms: quantile(&sorted, 0.99),
                    max_ms: sorted.last().copied().unwrap_or(0.0),
                }
            })
            .collect()
    }
}

/// What the readers fill the routes' holes with.
#[derive(Debug, Clone)]
pub struct Choices {
    pub clusters: Arc<Vec<String>>,
    pub apps: Arc<Vec<String>>,
    pub regions: Arc<Vec<String>>,
    /// (app, version) pairs desired on some cluster.
    pub gates: Arc<Vec<(String, String)>>,
}

/// Starts `readers` loops over the routes until `stop` is set; answers are timed from
/// `run_started`. The readers run on a thread and an async runtime of their own, with their
/// own HTTP client: on the load test's runtime an answer that had arrived waited for a turn
/// behind the simulated agents' tasks, and that wait was counted as the hub's latency. The
/// thread ends once `stop` is set and each reader's request in flight is answered.
pub fn spawn(
    run_started: Instant,
    readers: usize,
    hub: &HubClient,
    timeout: Duration,
    choices: Choices,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(Arc<Mutex<Timings>>, std::thread::JoinHandle<()>)> {
    let timings = Arc::new(Mutex::new(Timings::default()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Built here, its connections are made (and driven) on the runtime its requests run on.
    let hub = HubClient {
        http: reqwest::Client::builder().timeout(timeout).build()?,
        ..hub.clone()
    };
    let all_timings = timings.clone();
    let thread = std::thread::Builder::new()
        .name("hub-readers".into())
        .spawn(move || {
            runtime.block_on(async move {
                let tasks: Vec<_> = (0..readers)
                    .map(|reader| {
                        tokio::spawn(reader_loop(
                            reader,
                            run_started,
                            hub.clone(),
                            choices.clone(),
                            seed,
                            stop.clone(),
                            all_timings.clone(),
                        ))
                    })
                    .collect();
                for task in tasks {
                    let _ = task.await;
                }
            });
        })?;
    Ok((timings, thread))
}

/// One reader: the routes in turn, each with a random cluster, app or region.
async fn reader_loop(
    reader: usize,
    run_started: Instant,
    hub: HubClient,
    choices: Choices,
    seed: u64,
    stop: Arc<AtomicBool>,
    timings: Arc<Mutex<Timings>>,
) {
    let mut rng = SplitMix64::for_item(seed ^ 0x7265_6164, reader as u64);
    let mut next = reader;
    while !stop.load(Ordering::Relaxed) {
        let (name, template) = ROUTES[next % ROUTES.len()];
        next += 1;
        let pick = |list: &[String], rng: &mut SplitMix64| {
            list.get(rng.below(list.len().max(1) as u64) as usize)
                .cloned()
                .unwrap_or_default()
        };
        let path = template
            .replace("{cluster}", &pick(&choices.clusters, &mut rng))
            .replace("{app}", &pick(&choices.apps, &mut rng))
            .replace("{region}", &pick(&choices.regions, &mut rng));
        let path = match choices
            .gates
            .get(rng.below(choices.gates.len().max(1) as u64) as usize)
        {
            Some((app, version)) => path
                .replace("{gate_app}", app)
                .replace("{gate_version}", version),
            None => path,
        };
        let started = Instant::now();
        let request = hub.http.get(format!("{}{path}", hub.url));
        // The pages take the token from their session cookie, as after signing in.
        let request = if path.starts_with("/ui/") {
            request.header("cookie", format!("fleetscope_session={}", hub.token))
        } else {
            request.bearer_auth(&hub.token)
        };
        let result = request.send().await;
        let ok = match result {
            Ok(response) => {
                let status = response.status();
                let body = response.bytes().await;
                if status.is_success() && body.is_ok() {
                    Ok(())
                } else {
                    Err(format!("{path}: {status}"))
                }
            }
            Err(err) => Err(format!("{path}: {err}")),
        };
        let ms = started.elapsed().as_secs_f64() * 1_000.0;
        {
            let mut t = timings.lock().expect("timings lock");
            let entry = t.by_route.entry(name).or_default();
            match ok {
                Ok(()) => entry
                    .0
                    .push((started.duration_since(run_started).as_secs_f64(), ms)),
                Err(err) => {
                    entry.1 += 1;
                    t.failed_at
                        .push(started.duration_since(run_started).as_secs_f64());
                    if t.first_errors.len() < 10 {
                        t.first_errors.push(err);
                    }
                }
            }
        }
        // A reader looks at the answer before asking again.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
