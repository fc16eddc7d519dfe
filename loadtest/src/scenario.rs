//! The scenarios: what happens to the simulated fleet in each phase, and the measurements
//! taken while it happens. Every phase ends with the ground-truth check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fleetscope_collector::protocol::{Report, ReportKind};
use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_model::{Health, Timestamp};
use fleetscope_runtime::clock;
use fleetscope_store::Store;
use serde::{Deserialize, Serialize};

use crate::agents::Agents;
use crate::hubcheck::{
    converge, first_rollup_mismatch, inventory_mismatch, CheckOutcome, HubClient,
};
use crate::sim::failure;

/// The scenarios, in the order given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// Heartbeats every interval and a share of apps changing status every minute.
    Steady,
    /// A new version of one app, rendered, then rolled out in waves across groups.
    Rollout,
    /// Some clusters' apps flip between healthy and failing.
    Flap,
    /// Some clusters go dark until stale, then come back with their spooled changes.
    Dark,
    /// Every cluster reconnects and sends its full snapshot.
    Storm,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::Rollout => "rollout",
            Scenario::Flap => "flap",
            Scenario::Dark => "dark",
            Scenario::Storm => "storm",
        }
    }
}

/// The knobs of the scenarios: what every phase shares, and each scenario's own (a caller that
/// never runs a scenario leaves its knobs at their zero defaults).
#[derive(Debug, Clone)]
pub struct Knobs {
    pub stale_after: i64,
    /// How long a check waits for the hub to agree with the ground truth.
    pub check_timeout: Duration,
    /// How long a check waits for the agents to deliver what they queued.
    pub drain_timeout: Duration,
    /// At most this many freshness samples per phase.
    pub freshness_samples: usize,
    /// Print a line per rollout wave instead of a progress bar (the demo's running commentary).
    pub live: bool,
    pub steady: SteadyKnobs,
    pub rollout: RolloutKnobs,
    pub flap: FlapKnobs,
    pub dark: DarkKnobs,
}

impl Knobs {
    /// The shared knobs with a minute for checks, ten for delivery and 20 freshness samples per
    /// phase; the scenarios' own knobs at their defaults.
    pub fn new(stale_after: i64) -> Knobs {
        Knobs {
            stale_after,
            check_timeout: Duration::from_secs(60),
            drain_timeout: Duration::from_secs(600),
            freshness_samples: 20,
            live: false,
            steady: SteadyKnobs::default(),
            rollout: RolloutKnobs::default(),
            flap: FlapKnobs::default(),
            dark: DarkKnobs::default(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct SteadyKnobs {
    pub seconds: u64,
    /// Share of app instances whose status changes per minute.
    pub change_rate: f64,
}

#[derive(Debug, Clone, Default)]
pub struct RolloutKnobs {
    /// The app rolled out (default: the first one).
    pub app: Option<String>,
    pub waves: usize,
    pub wave_seconds: u64,
    /// Share of a wave's clusters on which the new version fails.
    pub failure_rate: f64,
}

#[derive(Debug, Clone, Default)]
pub struct FlapKnobs {
    /// Share of clusters flapping.
    pub share: f64,
    pub seconds: u64,
    pub period_seconds: u64,
}

#[derive(Debug, Clone, Default)]
pub struct DarkKnobs {
    /// Share of clusters going dark.
    pub share: f64,
}

/// One acknowledged change the freshness prober waits to see in the hub.
#[derive(Debug, Clone, PartialEq)]
struct Probe {
    cluster: String,
    app: String,
    revision: String,
    health: Health,
    made: Instant,
}

/// The freshness prober: polls each sampled cluster's page until the change shows. At most
/// [`MAX_PENDING`] samples are open at once, each polled every 100 ms, so probing adds at most
/// a few dozen small requests per second to the hub's load.
#[derive(Debug)]
pub struct Prober {
    pending: Mutex<Vec<Probe>>,
    /// (seconds since the run started when seen, freshness in milliseconds)
    pub seen: Mutex<Vec<(f64, f64)>>,
    pub not_seen: AtomicU64,
    /// Samples replaced by a later change of the same app before they showed.
    pub superseded: AtomicU64,
}

/// The longest a probe waits before it counts as not seen.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_PENDING: usize = 8;

impl Prober {
    pub fn new() -> Arc<Prober> {
        Arc::new(Prober {
            pending: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
            not_seen: AtomicU64::new(0),
            superseded: AtomicU64::new(0),
        })
    }

    /// Samples a change unless enough are open already. A newer change of the same app on the
    /// same cluster replaces an open sample (the older state may never be visible).
    fn offer(&self, probe: Probe) {
        let mut pending = self.pending.lock().expect("probe lock");
        if let Some(old) = pending
            .iter_mut()
            .find(|p| p.cluster == probe.cluster && p.app == probe.app)
        {
            *old = probe;
            self.superseded.fetch_add(1, Ordering::Relaxed);
        } else if pending.len() < MAX_PENDING {
            pending.push(probe);
        }
    }

    /// Whether the hub shows the probed change now.
    async fn shows(hub: &HubClient, probe: &Probe) -> bool {
        let page = hub
            .get(&format!(
                "/api/v1/clusters/{}?history_hours=0",
                probe.cluster
            ))
            .await;
        page.ok().is_some_and(|page| {
            page["apps"].as_array().is_some_and(|apps| {
                apps.iter().any(|a| {
                    a["app"] == probe.app.as_str()
                        && a["revision"] == probe.revision.as_str()
                        && a["health"] == probe.health.as_str()
                })
            })
        })
    }

    pub fn spawn(
        self: &Arc<Self>,
        hub: HubClient,
        started: Instant,
        stop: Arc<AtomicBool>,
    ) -> tokio::task::JoinHandle<()> {
        let prober = self.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let tick = tokio::time::sleep(Duration::from_millis(100));
                let batch: Vec<Probe> = prober.pending.lock().expect("probe lock").clone();
                let mut polls = tokio::task::JoinSet::new();
                for probe in batch {
                    let hub = hub.clone();
                    polls.spawn(async move {
                        let shows = Prober::shows(&hub, &probe).await;
                        (probe, shows, Instant::now())
                    });
                }
                while let Some(Ok((probe, shows, at))) = polls.join_next().await {
                    let timed_out = probe.made.elapsed() > PROBE_TIMEOUT;
                    if !shows && !timed_out {
                        continue;
                    }
                    let mut pending = prober.pending.lock().expect("probe lock");
                    // Only if it is still the open sample (not replaced meanwhile).
                    let Some(index) = pending.iter().position(|p| {
                        p.cluster == probe.cluster
                            && p.revision == probe.revision
                            && p.health == probe.health
                    }) else {
                        continue;
                    };
                    pending.swap_remove(index);
                    drop(pending);
                    if shows {
                        prober.seen.lock().expect("seen lock").push((
                            at.duration_since(started).as_secs_f64(),
                            at.duration_since(probe.made).as_secs_f64() * 1_000.0,
                        ));
                    } else {
                        prober.not_seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tick.await;
            }
        })
    }

    pub fn pending(&self) -> usize {
        self.pending.lock().expect("probe lock").len()
    }
}

/// What a phase did and what was measured while it ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseReport {
    pub name: String,
    /// Seconds since the run started.
    pub started_s: f64,
    pub seconds: f64,
    /// Changes made by the simulator in this phase.
    pub changes: u64,
    pub notes: Vec<String>,
    pub check_passed: bool,
    pub check_seconds: f64,
    pub check_mismatch: Option<String>,
    /// The hub's refreshes that ended during this phase (its check included), from its own
    /// `fleetscope_hub_refresh_seconds` histogram read before and after; `None` when the
    /// hub's `/metrics` could not be read (and in reports from before it was measured).
    #[serde(default)]
    pub refreshes: Option<PhaseRefreshes>,
}

/// How long the hub's refreshes took in one phase, in its histogram's buckets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseRefreshes {
    pub count: u64,
    /// Refreshes that took at most 0.512 s (the bucket bound next to the 0.5 s target).
    pub within_512ms: u64,
    /// The bound of the bucket the 99th percentile falls in; `None` when it is above the
    /// largest bound, or the phase had no refresh.
    pub p99_at_most_s: Option<f64>,
}

impl PhaseRefreshes {
    /// The refreshes between two reads of the same cumulative histogram.
    pub fn between(
        before: &crate::hubcheck::Buckets,
        after: &crate::hubcheck::Buckets,
    ) -> PhaseRefreshes {
        let earlier = |bound: f64| {
            before
                .iter()
                .find(|(b, _)| *b == bound)
                .map_or(0, |(_, n)| *n)
        };
        let diff: Vec<(f64, u64)> = after
            .iter()
            .map(|&(bound, n)| (bound, n.saturating_sub(earlier(bound))))
            .collect();
        let count = diff.last().map_or(0, |&(_, n)| n);
        let within_512ms = diff
            .iter()
            .find(|(b, _)| (*b - 0.512).abs() < 1e-9)
            .map_or(0, |&(_, n)| n);
        let p99_at_most_s = if count == 0 {
            None
        } else {
            diff.iter()
                .find(|&&(_, n)| n * 100 >= count * 99)
                .map(|&(b, _)| b)
                .filter(|b| b.is_finite())
        };
        PhaseRefreshes {
            count,
            within_512ms,
            p99_at_most_s,
        }
    }
}

/// Everything the scenarios share.
#[derive(Debug)]
pub struct Ctx {
    pub agents: Arc<Agents>,
    pub hub: HubClient,
    pub store: Store,
    pub prober: Arc<Prober>,
    pub knobs: Knobs,
    pub started: Instant,
    pub platform_dir: PathBuf,
    pub gitops_dir: PathBuf,
    pub revision_counter: AtomicU64,
    pub rollout: Mutex<Option<RolloutReport>>,
    pub steady: Mutex<Option<SteadyWindow>>,
    /// What the rollout in progress is doing (its current wave), if one is.
    pub live_status: Mutex<Option<String>>,
}

/// The steady phase's window, for the per-cluster rates.
#[derive(Debug, Clone)]
pub struct SteadyWindow {
    pub from_ms: u64,
    pub to_ms: u64,
    pub delivering_clusters: u64,
    pub rows_before: u64,
    pub bytes_before: u64,
    pub rows_after: u64,
    pub bytes_after: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WaveReport {
    pub wave: usize,
    pub groups: Vec<String>,
    pub clusters: u64,
    pub failed: u64,
    /// The hub's rollout gate for the whole fleet after the wave.
    pub gate_share_in_sync: f64,
    pub gate_verdict: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RolloutReport {
    pub app: String,
    pub from_version: String,
    pub to_version: String,
    pub render_seconds: f64,
    pub publish_seconds: f64,
    pub render_summary: String,
    /// (cluster, app) pairs whose desired state changed.
    pub changed_pairs: u64,
    pub waves: Vec<WaveReport>,
}

impl Ctx {
    /// A line of running commentary, with the time, when the knobs ask for it.
    fn say(&self, text: &str) {
        if self.knobs.live {
            println!("{} {text}", clock_time(clock::now()));
        }
    }

    fn next_revision(&self, version: &str) -> String {
        let n = self.revision_counter.fetch_add(1, Ordering::Relaxed);
        format!("{version}@sha1:{n:012x}")
    }

    /// Sends what was queued for these clusters.
    pub fn deliver(&self, clusters: impl IntoIterator<Item = usize>) {
        self.agents.poke(clusters);
    }

    /// Waits for delivery, then for the hub to agree with the ground truth.
    pub async fn check(&self) -> CheckOutcome {
        if let Err(err) = self.agents.drained(self.knobs.drain_timeout).await {
            return CheckOutcome {
                passed: false,
                seconds: 0.0,
                attempts: 0,
                mismatch: Some(format!("{err:#}")),
            };
        }
        let agents = self.agents.clone();
        let hub = self.hub.clone();
        converge(self.knobs.check_timeout, || {
            let agents = agents.clone();
            let hub = hub.clone();
            async move {
                let hub_rollups = hub.rollups().await?;
                let a = agents.clone();
                let (truth, apps) = tokio::task::spawn_blocking(move || {
                    let fleet = a.fleet.lock().expect("fleet lock");
                    (fleet.rollups(clock::now()), fleet.apps.clone())
                })
                .await?;
                if let Some(m) = first_rollup_mismatch(&hub_rollups, &truth) {
                    return Ok(Some(m));
                }
                for (i, app) in apps.iter().enumerate() {
                    let got = hub.inventory(app).await?;
                    let a = agents.clone();
                    let expected = tokio::task::spawn_blocking(move || {
                        a.fleet.lock().expect("fleet lock").inventory(i as u16)
                    })
                    .await?;
                    if let Some(m) = inventory_mismatch(app, &got, &expected) {
                        return Ok(Some(m));
                    }
                }
                Ok(None)
            }
        })
        .await
    }

    /// Delivering clusters (not never-seen, not dark), in fleet order.
    pub fn delivering(&self) -> Vec<usize> {
        let fleet = self.agents.fleet.lock().expect("fleet lock");
        fleet
            .clusters
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.never_seen && !c.dark)
            .map(|(i, _)| i)
            .collect()
    }

    /// Every delivering cluster queues its full snapshot; returns (reports, rows).
    ///
    /// The snapshots' request bodies are encoded here, on every core, before the first is sent:
    /// real agents compress on their own machines, so the resync that follows measures the
    /// collector and ClickHouse, not the simulator's compression. Returns the seconds that took
    /// as well.
    pub async fn queue_snapshots(&self) -> anyhow::Result<(u64, u64, f64)> {
        let clusters = self.delivering();
        let mut rows = 0;
        let mut reports = Vec::with_capacity(clusters.len());
        {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            let now = clock::now();
            for &c in &clusters {
                let report = fleet.snapshot(c, now);
                rows += report.changes.len() as u64;
                reports.push((c, report));
            }
        }
        // Nothing else of these clusters is made meanwhile: scenarios run one at a time.
        let encoding = Instant::now();
        // On blocking threads: this takes tens of seconds at 100,000 clusters, and the
        // runtime's workers keep delivering heartbeats meanwhile.
        let (reports, bodies) = tokio::task::spawn_blocking(move || {
            let bodies = encode_all(&reports);
            (reports, bodies)
        })
        .await?;
        {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            for ((c, report), body) in reports.into_iter().zip(bodies) {
                fleet.queue_encoded(c, report, body);
            }
        }
        let encode_seconds = encoding.elapsed().as_secs_f64();
        self.deliver(clusters.iter().copied());
        Ok((clusters.len() as u64, rows, encode_seconds))
    }

    /// A status change on one cluster's healthy app (a new revision applied), sampled for
    /// freshness when `probe` is set. Returns false when the cluster has no such app.
    pub fn touch(&self, cluster: usize, rng: &mut SplitMix64, probe: bool) -> bool {
        let mut fleet = self.agents.fleet.lock().expect("fleet lock");
        let sim = &fleet.clusters[cluster];
        let healthy: Vec<u16> = sim
            .objects
            .iter()
            .filter(|o| o.health == Health::Healthy)
            .map(|o| o.app)
            .collect();
        if healthy.is_empty() {
            return false;
        }
        let app = healthy[rng.below(healthy.len() as u64) as usize];
        let version = sim
            .objects
            .iter()
            .find(|o| o.app == app)
            .map(|o| o.version.to_string())
            .unwrap_or_default();
        let revision = self.next_revision(&version);
        let now = clock::now();
        let rev: Arc<str> = Arc::from(revision.as_str());
        fleet.change(cluster, app, now, |o| {
            o.revision = rev;
            o.transitioned_at = now.seconds();
            o.reason = "ReconciliationSucceeded";
        });
        if probe {
            self.prober.offer(Probe {
                cluster: fleet.clusters[cluster].id.clone(),
                app: fleet.apps[usize::from(app)].clone(),
                revision,
                health: Health::Healthy,
                made: Instant::now(),
            });
        }
        true
    }

    /// The steady state: heartbeats (always running) and `change_rate` of app instances
    /// changing status per minute, for `steady_seconds`.
    pub async fn steady(
        &self,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<u64> {
        let clusters = self.delivering();
        let (rows_before, bytes_before) = observed_size(&self.store).await?;
        let from_ms = self.agents.elapsed_ms();
        let instances: u64 = {
            let fleet = self.agents.fleet.lock().expect("fleet lock");
            clusters
                .iter()
                .map(|&c| fleet.clusters[c].objects.len() as u64)
                .sum()
        };
        let per_second = instances as f64 * self.knobs.steady.change_rate / 60.0;
        let duration = Duration::from_secs(self.knobs.steady.seconds);
        let total = (per_second * duration.as_secs_f64()).round() as u64;
        let probe_every = (total / self.knobs.freshness_samples.max(1) as u64).max(1);
        let bar = progress_bar(duration.as_secs(), "steady", "s");
        let phase_started = Instant::now();
        let mut made = 0u64;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        while phase_started.elapsed() < duration {
            tick.tick().await;
            let due = (per_second * phase_started.elapsed().as_secs_f64()) as u64;
            let mut touched = Vec::new();
            while made < due.min(total) && !clusters.is_empty() {
                let c = clusters[rng.below(clusters.len() as u64) as usize];
                if self.touch(c, rng, made.is_multiple_of(probe_every)) {
                    touched.push(c);
                }
                made += 1;
            }
            self.deliver(touched);
            bar.set_position(phase_started.elapsed().as_secs());
        }
        bar.finish_and_clear();
        let to_ms = self.agents.elapsed_ms();
        let (rows_after, bytes_after) = observed_size(&self.store).await?;
        notes.push(format!(
            "{made} status changes ({per_second:.1}/s, {:.2}% of {instances} app instances per minute) on {} delivering clusters",
            self.knobs.steady.change_rate * 100.0,
            clusters.len()
        ));
        *self.steady.lock().expect("steady lock") = Some(SteadyWindow {
            from_ms,
            to_ms,
            delivering_clusters: clusters.len() as u64,
            rows_before,
            bytes_before,
            rows_after,
            bytes_after,
        });
        Ok(made)
    }

    /// A new version of one app: the platform repo is changed, rendered and published by the
    /// real renderer, then clusters take it in waves (by group), each wave first progressing,
    /// then healthy or (at `failure_rate`) failed.
    pub async fn rollout(
        &self,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<u64> {
        let app = {
            let fleet = self.agents.fleet.lock().expect("fleet lock");
            match &self.knobs.rollout.app {
                Some(app) => app.clone(),
                None => fleet
                    .apps
                    .iter()
                    .find(|a| *a == "app-001")
                    .or_else(|| fleet.apps.first())
                    .cloned()
                    .unwrap_or_default(),
            }
        };
        self.rollout_of(&app, rng, notes).await
    }

    /// The rollout of a new version of `app` (see [`Ctx::rollout`]).
    pub async fn rollout_of(
        &self,
        app: &str,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<u64> {
        let app = app.to_owned();
        let (from, to) = bump_version(&self.platform_dir, &app)?;
        let started = Instant::now();
        let (platform, gitops) = (self.platform_dir.clone(), self.gitops_dir.clone());
        let outcome =
            tokio::task::spawn_blocking(move || fleetscope_renderer::render(&platform, &gitops))
                .await??;
        let render_seconds = started.elapsed().as_secs_f64();
        let published_at = clock::now();
        let started = Instant::now();
        let published = fleetscope_renderer::desired::publish(
            &self.store,
            &outcome,
            published_at.seconds() as u64 * 1_000,
            published_at,
        )
        .await?;
        let publish_seconds = started.elapsed().as_secs_f64();
        let t = published.timings;
        let publish_detail = format!(
            "read {:.2} s, compare {:.2} s, write {:.2} s: {} desired, {} membership, {} inventory rows",
            t.read.as_secs_f64(),
            t.compare.as_secs_f64(),
            t.write.as_secs_f64(),
            published.desired_rows + published.removed_rows,
            published.membership_rows + published.reason_member_rows,
            published.cluster_rows
        );
        let (changed_pairs, targets, app_id) = {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            let changed = fleet.apply_render(&outcome, published_at)?;
            let app_id = fleet
                .app_index(&app)
                .ok_or_else(|| anyhow::anyhow!("no app {app} in the fleet"))?;
            let mut targets: Vec<(String, usize)> = fleet
                .clusters
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    !c.never_seen
                        && !c.dark
                        && c.wants
                            .iter()
                            .any(|w| w.app == app_id && w.since == published_at.seconds())
                        && c.objects.iter().any(|o| o.app == app_id)
                })
                .map(|(i, c)| (c.group.clone(), i))
                .collect();
            targets.sort();
            (changed, targets, app_id)
        };
        notes.push(format!(
            "{app} {from} → {to}: rendered in {render_seconds:.2} s ({}), published in {publish_seconds:.2} s ({publish_detail}); {changed_pairs} pairs changed, {} delivering clusters run it",
            outcome.summary,
            targets.len()
        ));
        self.say(&format!(
            "new version {app} {from} → {to} in the platform repo: rendered, committed ({}) and published; {}",
            &outcome.commit.head[..12.min(outcome.commit.head.len())],
            outcome.summary
        ));
        let mut report = RolloutReport {
            app: app.clone(),
            from_version: from,
            to_version: to.clone(),
            render_seconds,
            publish_seconds,
            render_summary: outcome.summary.clone(),
            changed_pairs,
            waves: Vec::new(),
        };
        // Waves follow the group hierarchy: consecutive slices of the clusters sorted by group.
        let waves = self.knobs.rollout.waves.max(1);
        let per_wave = targets.len().div_ceil(waves).max(1);
        let half = Duration::from_millis(self.knobs.rollout.wave_seconds * 500);
        let mut changes = 0;
        let chunks = targets.len().div_ceil(per_wave);
        let bar = if self.knobs.live {
            indicatif::ProgressBar::hidden()
        } else {
            progress_bar(waves as u64, "rollout", "waves")
        };
        for (wave, slice) in targets.chunks(per_wave).enumerate() {
            let mut groups: Vec<String> = slice
                .iter()
                .map(|(g, _)| g.split('/').take(2).collect::<Vec<_>>().join("/"))
                .collect();
            groups.dedup();
            let status = format!(
                "rollout of {app} {to}: wave {}/{chunks} ({} clusters in {})",
                wave + 1,
                slice.len(),
                groups.join(", ")
            );
            self.say(&format!("{status} starts applying {to}"));
            *self.live_status.lock().expect("status lock") = Some(status);
            let probe_every = (slice.len() / self.knobs.freshness_samples.max(1)).max(1);
            // Every cluster in the wave starts applying the new version.
            {
                let mut fleet = self.agents.fleet.lock().expect("fleet lock");
                let now = clock::now();
                for &(_, c) in slice {
                    let want = fleet.clusters[c]
                        .wants
                        .iter()
                        .find(|w| w.app == app_id)
                        .cloned()
                        .expect("targets desire the app");
                    fleet.change(c, app_id, now, |o| {
                        o.version = want.version.clone();
                        o.content_hash = want.content_hash.clone();
                        o.health = Health::Progressing;
                        o.reason = "Progressing";
                        o.message = "";
                        o.transitioned_at = now.seconds();
                    });
                    changes += 1;
                }
            }
            self.deliver(slice.iter().map(|(_, c)| *c));
            tokio::time::sleep(half).await;
            // Then each either becomes healthy or fails.
            let mut failed = 0;
            {
                let mut fleet = self.agents.fleet.lock().expect("fleet lock");
                let now = clock::now();
                for (n, &(_, c)) in slice.iter().enumerate() {
                    let fails = rng.chance(self.knobs.rollout.failure_rate);
                    failed += u64::from(fails);
                    let version = fleet.clusters[c]
                        .wants
                        .iter()
                        .find(|w| w.app == app_id)
                        .map(|w| w.version.to_string())
                        .unwrap_or_default();
                    let revision = self.next_revision(&version);
                    let rev: Arc<str> = Arc::from(revision.as_str());
                    fleet.change(c, app_id, now, |o| {
                        o.revision = rev;
                        o.transitioned_at = now.seconds();
                        if fails {
                            let (reason, message) = failure(o.kind);
                            o.health = Health::Degraded;
                            o.reason = reason;
                            o.message = message;
                        } else {
                            o.health = Health::Healthy;
                            o.reason = "ReconciliationSucceeded";
                            o.message = "";
                        }
                    });
                    changes += 1;
                    if n % probe_every == 0 {
                        self.prober.offer(Probe {
                            cluster: fleet.clusters[c].id.clone(),
                            app: app.clone(),
                            revision,
                            health: if fails {
                                Health::Degraded
                            } else {
                                Health::Healthy
                            },
                            made: Instant::now(),
                        });
                    }
                }
            }
            self.deliver(slice.iter().map(|(_, c)| *c));
            tokio::time::sleep(half).await;
            // The gate is read once the wave's reports were acknowledged and the hub had a
            // refresh to take them in: on a loaded machine half a wave may not be enough.
            self.agents.drained(self.knobs.drain_timeout).await?;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let gate = self
                .hub
                .get(&format!(
                    "/api/v1/gate?app={app}&version={to}&threshold=0.9"
                ))
                .await?;
            let wave_report = WaveReport {
                wave: wave + 1,
                groups,
                clusters: slice.len() as u64,
                failed,
                gate_share_in_sync: gate["share_in_sync"].as_f64().unwrap_or(0.0),
                gate_verdict: gate["verdict"].as_str().unwrap_or_default().to_owned(),
            };
            self.say(&format!(
                "rollout of {app} {to}: wave {}/{chunks} done, {} of {} clusters failed; the hub's gate at 90% in sync says {} ({:.1}% of the targeted clusters in sync)",
                wave + 1,
                failed,
                slice.len(),
                wave_report.gate_verdict,
                wave_report.gate_share_in_sync * 100.0
            ));
            report.waves.push(wave_report);
            bar.inc(1);
        }
        bar.finish_and_clear();
        *self.live_status.lock().expect("status lock") = None;
        *self.rollout.lock().expect("rollout lock") = Some(report);
        Ok(changes)
    }

    /// A share of clusters flip one app between healthy and failing every period.
    pub async fn flap(&self, rng: &mut SplitMix64, notes: &mut Vec<String>) -> anyhow::Result<u64> {
        let delivering = self.delivering();
        let count = ((delivering.len() as f64 * self.knobs.flap.share).ceil() as usize)
            .min(delivering.len());
        let mut chosen: Vec<(usize, u16)> = Vec::new();
        {
            let fleet = self.agents.fleet.lock().expect("fleet lock");
            for _ in 0..count {
                let c = delivering[rng.below(delivering.len() as u64) as usize];
                if chosen.iter().any(|(x, _)| *x == c) {
                    continue;
                }
                if let Some(o) = fleet.clusters[c]
                    .objects
                    .iter()
                    .find(|o| o.health == Health::Healthy)
                {
                    chosen.push((c, o.app));
                }
            }
        }
        let period = Duration::from_secs(self.knobs.flap.period_seconds.max(1));
        let rounds = (self.knobs.flap.seconds / self.knobs.flap.period_seconds.max(1)).max(1);
        let probe_every =
            (chosen.len() * rounds as usize / self.knobs.freshness_samples.max(1)).max(1);
        let mut changes = 0u64;
        let bar = progress_bar(rounds, "flap", "rounds");
        for round in 0..rounds {
            {
                let mut fleet = self.agents.fleet.lock().expect("fleet lock");
                let now = clock::now();
                for &(c, app) in &chosen {
                    let version = fleet.clusters[c]
                        .objects
                        .iter()
                        .find(|o| o.app == app)
                        .map(|o| o.version.to_string())
                        .unwrap_or_default();
                    let revision = self.next_revision(&version);
                    let rev: Arc<str> = Arc::from(revision.as_str());
                    let mut health = Health::Healthy;
                    fleet.change(c, app, now, |o| {
                        o.revision = rev;
                        o.transitioned_at = now.seconds();
                        if o.health == Health::Healthy {
                            let (reason, message) = failure(o.kind);
                            o.health = Health::Degraded;
                            o.reason = reason;
                            o.message = message;
                        } else {
                            o.health = Health::Healthy;
                            o.reason = "ReconciliationSucceeded";
                            o.message = "";
                        }
                        health = o.health;
                    });
                    if changes.is_multiple_of(probe_every as u64) {
                        self.prober.offer(Probe {
                            cluster: fleet.clusters[c].id.clone(),
                            app: fleet.apps[usize::from(app)].clone(),
                            revision,
                            health,
                            made: Instant::now(),
                        });
                    }
                    changes += 1;
                }
            }
            self.deliver(chosen.iter().map(|(c, _)| *c));
            tokio::time::sleep(period).await;
            bar.set_position(round + 1);
        }
        bar.finish_and_clear();
        notes.push(format!(
            "{} clusters flapped one app each, {rounds} times, every {} s",
            chosen.len(),
            period.as_secs()
        ));
        Ok(changes)
    }

    /// A share of clusters stop delivering until they are stale, making changes meanwhile
    /// (kept in their spool); the hub must show them stale with their last known state, then
    /// current again once they come back and deliver.
    pub async fn dark(
        &self,
        rng: &mut SplitMix64,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<(u64, CheckOutcome)> {
        self.agents.drained(self.knobs.drain_timeout).await?;
        let delivering = self.delivering();
        let count = ((delivering.len() as f64 * self.knobs.dark.share).ceil() as usize)
            .min(delivering.len());
        let mut dark: Vec<usize> = Vec::new();
        for _ in 0..count {
            let c = delivering[rng.below(delivering.len() as u64) as usize];
            if !dark.contains(&c) {
                dark.push(c);
            }
        }
        {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            for &c in &dark {
                fleet.go_dark(c);
            }
        }
        // Changes while dark: two per cluster, kept in the outbox.
        let mut changes = 0;
        for round in 0..2 {
            for &c in &dark {
                if self.touch(c, rng, false) {
                    changes += 1;
                }
            }
            if round == 0 {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
        let wait = Duration::from_secs(self.knobs.stale_after.max(0) as u64 + 15);
        let bar = progress_bar(wait.as_secs(), "dark", "s");
        let dark_started = Instant::now();
        while dark_started.elapsed() < wait {
            tokio::time::sleep(Duration::from_millis(500)).await;
            bar.set_position(dark_started.elapsed().as_secs());
        }
        bar.finish_and_clear();
        let while_dark = self.check().await;
        notes.push(format!(
            "{} clusters dark for {} s with {changes} spooled changes; hub {} while they were dark ({:.1} s)",
            dark.len(),
            wait.as_secs(),
            if while_dark.passed { "agreed" } else { "DISAGREED" },
            while_dark.seconds
        ));
        {
            let mut fleet = self.agents.fleet.lock().expect("fleet lock");
            for &c in &dark {
                fleet.come_back(c);
            }
        }
        let back = Instant::now();
        self.deliver(dark.iter().copied());
        self.agents.drained(self.knobs.drain_timeout).await?;
        notes.push(format!(
            "spooled reports delivered {:.1} s after they came back",
            back.elapsed().as_secs_f64()
        ));
        Ok((changes, while_dark))
    }

    /// Every delivering cluster reconnects and sends its snapshot (the collector infers
    /// deletions against what it stored).
    pub async fn storm(&self, notes: &mut Vec<String>) -> anyhow::Result<(u64, u64, f64)> {
        let before = self.agents.tally.lock().expect("tally lock").acks.len();
        let (reports, rows, encode_seconds) = self.queue_snapshots().await?;
        let started = Instant::now();
        let bar = progress_bar(reports, "snapshots", "reports");
        loop {
            self.agents.no_refusals()?;
            let left = self.agents.undelivered() as u64;
            bar.set_position(reports.saturating_sub(left));
            if left == 0 {
                break;
            }
            anyhow::ensure!(
                started.elapsed() < self.knobs.drain_timeout,
                "{left} snapshots undelivered after {:?}",
                self.knobs.drain_timeout
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bar.finish_and_clear();
        let seconds = started.elapsed().as_secs_f64();
        let acks = self.agents.tally.lock().expect("tally lock").acks.len() - before;
        notes.push(format!(
            "{reports} snapshots with {rows} rows delivered in {seconds:.1} s ({:.0} rows/s; {acks} requests acknowledged meanwhile; bodies encoded beforehand in {encode_seconds:.1} s)",
            rows as f64 / seconds.max(1e-9)
        ));
        Ok((reports, rows, seconds))
    }
}

/// Encodes reports into request bodies on every core, in the order given.
fn encode_all(reports: &[(usize, Report)]) -> Vec<Vec<u8>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = reports.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = reports
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(_, report)| report.encode())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("an encoding thread panicked"))
            .collect()
    })
}

/// Rows and bytes on disk of the observed-state table.
async fn observed_size(store: &Store) -> anyhow::Result<(u64, u64)> {
    let sizes = store.table_sizes().await?;
    Ok(sizes
        .iter()
        .filter(|t| t.table == "observed_transitions")
        .fold((0, 0), |(r, b), t| (r + t.rows, b + t.bytes_on_disk)))
}

/// Raises the version of `app` in the platform repo: the minor number goes up by one and the
/// patch number becomes 0. The app is looked for in every YAML file under `apps/` as a document
/// with `name: <app>` followed by `version: <major.minor.patch>`. Returns (old, new).
pub fn bump_version(platform_dir: &Path, app: &str) -> anyhow::Result<(String, String)> {
    let apps = platform_dir.join("apps");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&apps)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", apps.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let marker = format!("name: {app}\nversion: ");
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        let Some(found) = text.find(&marker) else {
            continue;
        };
        let at = found + marker.len();
        let end = at + text[at..].find('\n').unwrap_or(text.len() - at);
        let old = text[at..end].trim().to_owned();
        let mut parts: Vec<u64> = old
            .split('.')
            .map(|p| p.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| anyhow::anyhow!("version {old:?} of {app} is not major.minor.patch"))?;
        anyhow::ensure!(
            parts.len() == 3,
            "version {old:?} of {app} is not major.minor.patch"
        );
        parts[1] += 1;
        parts[2] = 0;
        let new = format!("{}.{}.{}", parts[0], parts[1], parts[2]);
        std::fs::write(&path, format!("{}{new}{}", &text[..at], &text[end..]))?;
        return Ok((old, new));
    }
    anyhow::bail!("app {app} is not in any YAML file of {}", apps.display())
}

/// `HH:MM:SS` (UTC) of a timestamp, for running commentary.
pub fn clock_time(at: Timestamp) -> String {
    let s = at.seconds().rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3_600, s / 60 % 60, s % 60)
}

pub fn progress_bar(len: u64, name: &str, unit: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "  {name:>9} [{{bar:40}}] {{pos}}/{{len}} {unit} {{elapsed}}"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// Requests by kind in a window of acknowledgements: (count, rows, bytes).
pub fn acks_between(
    acks: &[crate::agents::Ack],
    from_ms: u64,
    to_ms: u64,
) -> BTreeMap<&'static str, (u64, u64, u64)> {
    let mut out: BTreeMap<&'static str, (u64, u64, u64)> = BTreeMap::new();
    for a in acks
        .iter()
        .filter(|a| a.at_ms >= from_ms && a.at_ms < to_ms)
    {
        let kind = match a.kind {
            ReportKind::Delta => "delta",
            ReportKind::Snapshot => "snapshot",
            ReportKind::Heartbeat => "heartbeat",
        };
        let e = out.entry(kind).or_default();
        e.0 += 1;
        e.1 += u64::from(a.rows);
        e.2 += u64::from(a.bytes);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hubcheck::parse_buckets;

    fn metrics(counts: [u64; 4]) -> String {
        let [a, b, c, all] = counts;
        format!(
            "# TYPE fleetscope_hub_refresh_seconds histogram\n\
             fleetscope_hub_refresh_seconds_sum 1.5\n\
             fleetscope_hub_refresh_seconds_count {all}\n\
             fleetscope_hub_refresh_seconds_bucket{{le=\"+Inf\"}} {all}\n\
             fleetscope_hub_refresh_seconds_bucket{{le=\"0.256\"}} {a}\n\
             fleetscope_hub_refresh_seconds_bucket{{le=\"0.512\"}} {b}\n\
             fleetscope_hub_refresh_seconds_bucket{{le=\"1.024\"}} {c}\n\
             fleetscope_hub_request_seconds_bucket{{route=\"/x\",le=\"0.512\"}} 999\n\
             fleetscope_hub_refresh_seconds_bucket{{phase=\"x\",le=\"0.512\"}} 999\n"
        )
    }

    #[test]
    fn a_phase_counts_the_refreshes_between_two_reads_of_the_histogram() {
        let name = "fleetscope_hub_refresh_seconds";
        let before = parse_buckets(&metrics([90, 100, 100, 100]), name);
        assert_eq!(
            before,
            vec![
                (0.256, 90),
                (0.512, 100),
                (1.024, 100),
                (f64::INFINITY, 100)
            ],
            "sorted by bound; other histograms, and labelled series of this one, left out"
        );
        // 200 more refreshes: 150 within 0.256 s, 197 within 0.512 s, 199 within 1.024 s.
        let after = parse_buckets(&metrics([240, 297, 299, 300]), name);
        let phase = PhaseRefreshes::between(&before, &after);
        assert_eq!(phase.count, 200);
        assert_eq!(phase.within_512ms, 197);
        assert_eq!(
            phase.p99_at_most_s,
            Some(1.024),
            "198 of 200 needs the 1.024 bucket"
        );
        // 1 of 100 above 0.512 s: the 99th of the 100 is within 0.256 s.
        let after = parse_buckets(&metrics([189, 199, 200, 200]), name);
        assert_eq!(
            PhaseRefreshes::between(&before, &after).p99_at_most_s,
            Some(0.256)
        );
        // Past the largest bound, and no refresh at all.
        let after = parse_buckets(&metrics([90, 100, 100, 110]), name);
        assert_eq!(PhaseRefreshes::between(&before, &after).p99_at_most_s, None);
        let same = PhaseRefreshes::between(&before, &before);
        assert_eq!((same.count, same.p99_at_most_s), (0, None));
        assert!(parse_buckets("", name).is_empty());
    }

    #[test]
    fn bump_raises_the_minor_version_of_that_app_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps")).unwrap();
        std::fs::write(
            dir.path().join("apps/apps.yaml"),
            "kind: Application\nname: app-000\nversion: 1.0.0\n---\nkind: Application\nname: app-001\nversion: 1.1.1\nnamespace: x\n",
        )
        .unwrap();
        let (old, new) = bump_version(dir.path(), "app-001").unwrap();
        assert_eq!((old.as_str(), new.as_str()), ("1.1.1", "1.2.0"));
        let text = std::fs::read_to_string(dir.path().join("apps/apps.yaml")).unwrap();
        assert!(text.contains("name: app-000\nversion: 1.0.0\n"));
        assert!(text.contains("name: app-001\nversion: 1.2.0\nnamespace: x\n"));
        assert!(bump_version(dir.path(), "app-404").is_err());
    }

    #[test]
    fn bump_finds_the_app_in_any_file_under_apps() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps")).unwrap();
        std::fs::write(
            dir.path().join("apps/platform.yaml"),
            "kind: Application\nname: metrics-agent\nversion: 0.9.3\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("apps/shop.yaml"),
            "kind: Application\nname: checkout\nversion: 1.4.0\nnamespace: shop\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("apps/notes.txt"),
            "name: checkout\nversion: 9.9.9\n",
        )
        .unwrap();
        let (old, new) = bump_version(dir.path(), "checkout").unwrap();
        assert_eq!((old.as_str(), new.as_str()), ("1.4.0", "1.5.0"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("apps/shop.yaml")).unwrap(),
            "kind: Application\nname: checkout\nversion: 1.5.0\nnamespace: shop\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("apps/notes.txt")).unwrap(),
            "name: checkout\nversion: 9.9.9\n",
            "only YAML files are changed"
        );
        let err = bump_version(dir.path(), "app-404").unwrap_err().to_string();
        assert!(
            err.contains("app app-404 is not in any YAML file of"),
            "{err}"
        );
    }

    #[test]
    fn clock_time_is_utc_hours_minutes_seconds() {
        assert_eq!(clock_time(Timestamp(0)), "00:00:00");
        assert_eq!(clock_time(Timestamp(1_795_869_965)), "12:46:05");
        assert_eq!(clock_time(Timestamp(86_399)), "23:59:59");
    }
}
