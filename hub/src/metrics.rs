//! `/metrics`: the fleet per group (down to a configured depth) and per app, and the hub's own
//! requests, queries, cache and refreshes, with a bounded number of series. Fleet numbers come
//! from the same index and drift definition as the API.
//!
//! Cardinality: at most `max_groups` groups and `max_apps` apps get series of their own (the
//! ones with the most clusters or instances); the rest are summed into `_other`. Routes are the
//! router's patterns, never raw paths.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use fleetscope_model::{DriftState, GroupPath, Timestamp};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use fleetscope_engine::rollout_figures::RolloutPolicy;
use fleetscope_engine::rollouts::progress::Status;
use fleetscope_engine::Fleet;
use fleetscope_engine::{state_index, Counts};

/// The name that stands for everything beyond the series bound.
pub const OTHER: &str = "_other";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsConfig {
    pub depth: usize,
    pub max_groups: usize,
    pub max_apps: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            depth: 2,
            max_groups: 500,
            max_apps: 200,
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: String,
    status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteOnly {
    route: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueryOnly {
    query: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueryLabels {
    query: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    group: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupStateLabels {
    group: String,
    state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppStateLabels {
    app: String,
    state: String,
}

/// The hub's own counters, kept for the life of the process.
#[derive(Debug)]
pub struct HubMetrics {
    pub config: MetricsConfig,
    requests: Family<RouteLabels, Counter>,
    request_seconds: Family<RouteOnly, Histogram>,
    queries: Family<QueryLabels, Counter>,
    query_seconds: Family<QueryOnly, Histogram>,
    cache: Family<OutcomeLabels, Counter>,
    compute_seconds: Histogram,
    refreshes: Family<OutcomeLabels, Counter>,
    refresh_seconds: Histogram,
    refresh_phase_seconds: Family<PhaseLabels, Histogram>,
}

fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl HubMetrics {
    pub fn new(config: MetricsConfig) -> HubMetrics {
        HubMetrics {
            config,
            requests: Family::default(),
            request_seconds: Family::new_with_constructor(seconds_histogram),
            queries: Family::default(),
            query_seconds: Family::new_with_constructor(seconds_histogram),
            cache: Family::default(),
            compute_seconds: seconds_histogram(),
            refreshes: Family::default(),
            refresh_seconds: seconds_histogram(),
            refresh_phase_seconds: Family::new_with_constructor(seconds_histogram),
        }
    }

    pub fn cache_hit(&self, hit: bool) {
        self.cache
            .get_or_create(&OutcomeLabels {
                outcome: if hit { "hit" } else { "miss" }.into(),
            })
            .inc();
    }

    pub fn computed(&self, took: Duration) {
        self.compute_seconds.observe(took.as_secs_f64());
    }

    /// Counts one answered request and its time, by route pattern.
    pub fn request(&self, route: String, method: String, status: u16, took: Duration) {
        self.requests
            .get_or_create(&RouteLabels {
                route: route.clone(),
                method,
                status: status.to_string(),
            })
            .inc();
        self.request_seconds
            .get_or_create(&RouteOnly { route })
            .observe(took.as_secs_f64());
    }

    pub fn query(&self, name: &str, ok: bool, took: Duration) {
        self.queries
            .get_or_create(&QueryLabels {
                query: name.to_owned(),
                outcome: if ok { "ok" } else { "error" }.into(),
            })
            .inc();
        self.query_seconds
            .get_or_create(&QueryOnly {
                query: name.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// The phases of one successful refresh.
    pub fn refresh_phases(&self, phases: &fleetscope_engine::RefreshPhases) {
        for (phase, took) in phases.named() {
            self.refresh_phase_seconds
                .get_or_create(&PhaseLabels {
                    phase: phase.to_owned(),
                })
                .observe(took.as_secs_f64());
        }
    }

    pub fn refreshed(&self, took: Duration, ok: bool) {
        self.refreshes
            .get_or_create(&OutcomeLabels {
                outcome: if ok { "ok" } else { "error" }.into(),
            })
            .inc();
        self.refresh_seconds.observe(took.as_secs_f64());
    }

    /// The exposition text for one scrape.
    pub fn render(
        &self,
        fleet: &FleetSnapshot,
        generation: u64,
        objects: usize,
        symbols: usize,
        past_builds: PastBuilds,
    ) -> String {
        let mut registry = Registry::default();
        register_fleet(&mut registry, fleet);
        register_index(&mut registry, generation, objects, symbols, past_builds);
        self.register_service(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .expect("writing to a String does not fail");
        text
    }

    /// The hub's own counters and histograms: requests, store queries, the answer cache and
    /// refreshes.
    fn register_service(&self, registry: &mut Registry) {
        registry.register(
            "fleetscope_hub_requests",
            "HTTP requests per route pattern, method and status",
            self.requests.clone(),
        );
        registry.register(
            "fleetscope_hub_request_seconds",
            "HTTP request duration per route pattern",
            self.request_seconds.clone(),
        );
        registry.register(
            "fleetscope_hub_store_queries",
            "ClickHouse queries per query and outcome",
            self.queries.clone(),
        );
        registry.register(
            "fleetscope_hub_store_query_seconds",
            "ClickHouse query duration per query",
            self.query_seconds.clone(),
        );
        registry.register(
            "fleetscope_hub_cache_lookups",
            "Cached answer lookups by outcome",
            self.cache.clone(),
        );
        registry.register(
            "fleetscope_hub_compute_seconds",
            "Time to compute an answer from the index on a cache miss",
            self.compute_seconds.clone(),
        );
        registry.register(
            "fleetscope_hub_refreshes",
            "Reads of new data from ClickHouse by outcome",
            self.refreshes.clone(),
        );
        registry.register(
            "fleetscope_hub_refresh_seconds",
            "Duration of one read of new data from ClickHouse",
            self.refresh_seconds.clone(),
        );
        registry.register(
            "fleetscope_hub_refresh_phase_seconds",
            "Duration of each phase of a successful refresh (reads from ClickHouse, waiting for the writer, applying rows, advancing the clock, publishing the snapshot)",
            self.refresh_phase_seconds.clone(),
        );
    }
}

/// The fleet's series: clusters, stale clusters, the oldest last-seen age and pairs per state,
/// per group, and pairs per app and state.
fn register_fleet(registry: &mut Registry, fleet: &FleetSnapshot) {
    let clusters = Family::<GroupLabels, Gauge>::default();
    let stale = Family::<GroupLabels, Gauge>::default();
    let oldest = Family::<GroupLabels, Gauge>::default();
    let instances = Family::<GroupStateLabels, Gauge>::default();
    let per_app = Family::<AppStateLabels, Gauge>::default();
    for (group, g) in &fleet.groups {
        let labels = GroupLabels {
            group: group.clone(),
        };
        clusters
            .get_or_create(&labels)
            .set(g.counts.clusters as i64);
        stale
            .get_or_create(&labels)
            .set(g.counts.stale_clusters as i64);
        oldest.get_or_create(&labels).set(g.oldest_last_seen_age);
        for state in DriftState::ALL {
            instances
                .get_or_create(&GroupStateLabels {
                    group: group.clone(),
                    state: state.as_str().into(),
                })
                .set(g.counts.state(*state) as i64);
        }
    }
    for (app, counts) in &fleet.apps {
        for state in DriftState::ALL {
            per_app
                .get_or_create(&AppStateLabels {
                    app: app.clone(),
                    state: state.as_str().into(),
                })
                .set(counts[state_index(*state)] as i64);
        }
    }
    registry.register(
        "fleetscope_clusters",
        "Clusters in the inventory per group (\"\" is the fleet)",
        clusters,
    );
    registry.register(
        "fleetscope_stale_clusters",
        "Clusters not heard from within the stale threshold, per group",
        stale,
    );
    registry.register(
            "fleetscope_oldest_last_seen_age_seconds",
            "Seconds since the least recently seen cluster of the group was seen (clusters never seen not counted)",
            oldest,
        );
    registry.register(
        "fleetscope_app_instances",
        "(cluster, app) pairs per group and drift state",
        instances,
    );
    registry.register(
        "fleetscope_app_instances_by_app",
        "(cluster, app) pairs per app and drift state, whole fleet",
        per_app,
    );
    let rollouts = Family::<RolloutStatusLabels, Gauge>::default();
    for (status, n) in &fleet.rollouts {
        rollouts
            .get_or_create(&RolloutStatusLabels {
                status: (*status).to_owned(),
            })
            .set(*n as i64);
    }
    registry.register(
        "fleetscope_rollouts",
        "Rollouts per status (docs/hub.md, \"Rollouts\")",
        rollouts,
    );
    let stalled = Family::<RolloutLabels, Gauge>::default();
    for ((app, version), seconds) in &fleet.stalled {
        stalled
            .get_or_create(&RolloutLabels {
                app: app.clone(),
                version: version.clone(),
            })
            .set(*seconds as i64);
    }
    registry.register(
        "fleetscope_rollout_stalled_seconds",
        "Seconds since a cluster last reached a stalled rollout (or since it started), per app and version; only stalled rollouts have a series",
        stalled,
    );
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RolloutStatusLabels {
    status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RolloutLabels {
    app: String,
    version: String,
}

/// The index's size and the builds of past moments.
fn register_index(
    registry: &mut Registry,
    generation: u64,
    objects: usize,
    symbols: usize,
    past_builds: PastBuilds,
) {
    let generation_gauge = Gauge::<i64>::default();
    generation_gauge.set(generation as i64);
    registry.register(
        "fleetscope_hub_index_generation",
        "Changes applied to the hub's index since it started",
        generation_gauge,
    );
    let objects_gauge = Gauge::<i64>::default();
    objects_gauge.set(objects as i64);
    registry.register(
        "fleetscope_hub_index_objects",
        "App objects held in the hub's index",
        objects_gauge,
    );
    let symbols_gauge = Gauge::<i64>::default();
    symbols_gauge.set(symbols as i64);
    registry.register(
        "fleetscope_hub_index_strings",
        "Distinct strings held in the hub's index",
        symbols_gauge,
    );
    let builds = Family::<BuildLabels, Gauge>::default();
    for (state, count) in [
        ("waiting", past_builds.waiting),
        ("building", past_builds.building),
    ] {
        builds
            .get_or_create(&BuildLabels {
                state: state.to_owned(),
            })
            .set(count as i64);
    }
    registry.register(
        "fleetscope_hub_past_builds",
        "Builds of the fleet at a past moment (`at`) waiting for their turn, and under way",
        builds,
    );
}

/// Builds of the fleet at past moments now (see `fleetscope_engine::past::Past`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PastBuilds {
    pub waiting: usize,
    pub building: usize,
}

/// One group's numbers for the metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupNumbers {
    pub counts: Counts,
    pub oldest_last_seen_age: i64,
}

/// The fleet numbers one scrape exports, already bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetSnapshot {
    /// Group (down to the configured depth, `""` = fleet, `_other` = the rest) → numbers.
    pub groups: BTreeMap<String, GroupNumbers>,
    /// App (or `_other`) → pairs per state.
    pub apps: BTreeMap<String, [u64; 8]>,
    /// Rollouts per status, every status present.
    pub rollouts: BTreeMap<&'static str, u64>,
    /// The stalled rollouts: (app, version) → seconds since a cluster last reached it (or
    /// since it started); the most stalled `max_apps` of them.
    pub stalled: BTreeMap<(String, String), u64>,
}

impl FleetSnapshot {
    /// The numbers of `fleet` at `now` (the moment its maintained states are right for): the
    /// counts from the maintained counters; the oldest heartbeat age per group from one pass
    /// over the clusters (not over their pairs).
    pub fn take(
        fleet: &Fleet,
        now: Timestamp,
        config: &MetricsConfig,
        rollouts: &RolloutPolicy,
    ) -> FleetSnapshot {
        let mut groups: HashMap<String, GroupNumbers> = HashMap::new();
        for (prefix, environment, cell) in fleet.cells() {
            let depth = if prefix.is_empty() {
                0
            } else {
                prefix.split('/').count()
            };
            if environment.is_some() || depth > config.depth {
                continue;
            }
            groups.entry(prefix.to_owned()).or_default().counts = cell.counts;
        }
        for cluster in fleet.clusters.values() {
            let Some(info) = &cluster.info else { continue };
            let age = cluster
                .last_seen
                .map_or(0, |seen| (now.seconds() - i64::from(seen)).max(0));
            for prefix in std::iter::once("").chain(
                info.group
                    .prefixes()
                    .iter()
                    .take(config.depth)
                    .map(GroupPath::as_str),
            ) {
                if let Some(g) = groups.get_mut(prefix) {
                    g.oldest_last_seen_age = g.oldest_last_seen_age.max(age);
                }
            }
        }
        let apps: Vec<(u32, [u64; 8])> = fleet
            .symbols
            .find("")
            .and_then(|_| fleet.cell("", None))
            .map(|cell| cell.apps().map(|(a, c)| (a, c.pairs())).collect())
            .unwrap_or_default();
        // Keep the groups with the most clusters; fold the rest into `_other` (the fleet
        // row always stays).
        let mut ranked: Vec<(String, GroupNumbers)> = groups.into_iter().collect();
        ranked.sort_by(|a, b| {
            b.1.counts
                .clusters
                .cmp(&a.1.counts.clusters)
                .then_with(|| a.0.cmp(&b.0))
        });
        let mut out_groups = BTreeMap::new();
        let mut other: Option<GroupNumbers> = None;
        for (group, numbers) in ranked {
            if group.is_empty() || out_groups.len() < config.max_groups + 1 {
                out_groups.insert(group, numbers);
            } else {
                // `_other` sums the deepest exported level's leftovers, which may overlap
                // their parents; it tells that series were folded and how much.
                let o = other.get_or_insert_with(GroupNumbers::default);
                o.counts.clusters += numbers.counts.clusters;
                o.counts.stale_clusters += numbers.counts.stale_clusters;
                for (a, b) in o.counts.pairs.iter_mut().zip(numbers.counts.pairs) {
                    *a += b;
                }
                o.oldest_last_seen_age = o.oldest_last_seen_age.max(numbers.oldest_last_seen_age);
            }
        }
        if let Some(o) = other {
            out_groups.insert(OTHER.to_owned(), o);
        }
        let mut ranked_apps = apps;
        ranked_apps.sort_by(|a, b| {
            b.1.iter()
                .sum::<u64>()
                .cmp(&a.1.iter().sum::<u64>())
                .then_with(|| fleet.symbols.text(a.0).cmp(fleet.symbols.text(b.0)))
        });
        let mut out_apps = BTreeMap::new();
        for (i, (app, counts)) in ranked_apps.into_iter().enumerate() {
            let name = if i < config.max_apps {
                fleet.symbols.text(app).to_owned()
            } else {
                OTHER.to_owned()
            };
            let entry: &mut [u64; 8] = out_apps.entry(name).or_insert([0; 8]);
            for (a, b) in entry.iter_mut().zip(counts) {
                *a += b;
            }
        }
        let (rollouts, stalled) = rollout_numbers(fleet, now, config, rollouts);
        FleetSnapshot {
            groups: out_groups,
            apps: out_apps,
            rollouts,
            stalled,
        }
    }
}

/// Rollouts per status, and the `max_apps` most stalled ones with their time without progress.
#[allow(clippy::type_complexity)]
fn rollout_numbers(
    fleet: &Fleet,
    now: Timestamp,
    config: &MetricsConfig,
    policy: &RolloutPolicy,
) -> (BTreeMap<&'static str, u64>, BTreeMap<(String, String), u64>) {
    let now = u32::try_from(now.seconds()).unwrap_or(u32::MAX);
    let mut per_status: BTreeMap<&'static str, u64> =
        Status::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    let mut stalled: Vec<(u64, &str, &str)> = Vec::new();
    for app in fleet.rollouts.apps.values() {
        for rollout in &app.rollouts {
            let status = rollout.status(now, policy.stall_after);
            *per_status.entry(status.as_str()).or_default() += 1;
            if status == Status::Stalled {
                let since = rollout.progress.last_reached.unwrap_or(rollout.started_at);
                stalled.push((
                    u64::from(now.saturating_sub(since)),
                    &rollout.app,
                    &rollout.version,
                ));
            }
        }
    }
    stalled.sort_by(|a, b| b.cmp(a));
    let stalled = stalled
        .into_iter()
        .take(config.max_apps)
        .map(|(seconds, app, version)| ((app.to_owned(), version.to_owned()), seconds))
        .collect();
    (per_status, stalled)
}
