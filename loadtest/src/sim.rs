//! The load test's simulated fleet, built from what the real renderer decided: every cluster of
//! a rendered platform repo with its desired apps (version, content hash, since when), the state
//! its reconciler objects are in, its agent's counters and outbox, and the ground truth the
//! model's drift rules give for every pair at a given moment.
//!
//! The initial state is drawn per pair from the seed: most apps run what is desired and are
//! healthy, some fail, some run an older version, some are still settling, some are missing,
//! a few clusters carry an app nobody desires, and a few clusters never report.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use fleetscope_collector::protocol::{Change, Report, ReportKind};
use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_model::state::ObjectKind;
use fleetscope_model::{
    classify, DesiredForDrift, DriftInput, DriftPolicy, DriftState, Health, ObservedForDrift,
    Reconciler, ReconcilerKind, SyncStatus, Timestamp,
};
use fleetscope_renderer::RenderOutcome;
use sha2::{Digest, Sha256};

/// Shares of the initial state, per ten thousand pairs (or clusters).
const FAILED: u64 = 150;
const OLDER: u64 = 350;
const SETTLING: u64 = 450;
const MISSING: u64 = 520;
const NEVER_SEEN_CLUSTERS: u64 = 100;
const UNEXPECTED_CLUSTERS: u64 = 50;

/// An app no policy desires, found on a few clusters.
pub const UNEXPECTED_APP: &str = "legacy-agent";

pub const AGENT_VERSION: &str = concat!("loadtest-", env!("CARGO_PKG_VERSION"));

/// What should run: one app on one cluster.
#[derive(Debug, Clone)]
pub struct Want {
    pub app: u16,
    pub version: Arc<str>,
    pub content_hash: Arc<str>,
    /// When this version and content became desired (the renderer's publication time).
    pub since: i64,
}

/// What runs: one app's reconciler object as the agent last reported it.
#[derive(Debug, Clone)]
pub struct Object {
    pub app: u16,
    pub kind: ObjectKind,
    pub version: Arc<str>,
    pub content_hash: Arc<str>,
    pub revision: Arc<str>,
    pub health: Health,
    pub sync: SyncStatus,
    pub reason: &'static str,
    pub message: &'static str,
    pub transitioned_at: i64,
    pub change_seq: u64,
}

/// One simulated cluster and its agent.
#[derive(Debug)]
pub struct SimCluster {
    pub id: String,
    pub group: String,
    pub reconciler: Reconciler,
    pub token: String,
    pub wants: Vec<Want>,
    pub objects: Vec<Object>,
    /// Never reports (its agent was never installed).
    pub never_seen: bool,
    /// Not delivering: its reports wait in the outbox (the agent's spool).
    pub dark: bool,
    /// Wall-clock second of the last acknowledged report or heartbeat.
    pub last_ack: Option<i64>,
    pub report_seq: u64,
    pub change_seq: u64,
    /// Reports made and not yet acknowledged, oldest first.
    pub outbox: VecDeque<Report>,
    /// The request body of the outbox's report with this number, encoded before its phase
    /// began (full resyncs), so that sending it costs the simulator no compression.
    pub encoded: Option<(u64, Vec<u8>)>,
    /// While dark: the objects as the collector last heard of them.
    pub frozen: Option<Vec<Object>>,
    /// Distinct changes (object, change number) in the reports the collector acknowledged, and
    /// the highest change number among them: what the store must hold of this cluster.
    pub acked_changes: u64,
    pub acked_high: u64,
}

impl SimCluster {
    /// Counts the changes of an acknowledged report not acknowledged before. Reports are
    /// acknowledged in order and change numbers only grow, so a change is new exactly when its
    /// number is above every number acknowledged before the report (a snapshot resends each
    /// object's last change, already counted).
    pub fn acknowledged(&mut self, report: &Report) {
        let before = self.acked_high;
        for change in &report.changes {
            if change.change_seq > before {
                self.acked_changes += 1;
            }
            self.acked_high = self.acked_high.max(change.change_seq);
        }
    }

    /// The objects as the collector knows them (the truth is computed from these).
    pub fn delivered(&self) -> &[Object] {
        self.frozen.as_deref().unwrap_or(&self.objects)
    }
}

/// Drift states in the order of [`DriftState::ALL`], counted.
pub type StateCounts = BTreeMap<DriftState, u64>;

/// A group's numbers as the hub's summary gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupTruth {
    pub clusters: u64,
    pub stale_clusters: u64,
    pub pairs: StateCounts,
}

/// One app's inventory: desired version → clusters; running version → (clusters, region →
/// clusters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppTruth {
    pub desired: BTreeMap<String, u64>,
    pub running: BTreeMap<String, (u64, BTreeMap<String, u64>)>,
}

/// The fleet the load test drives.
#[derive(Debug)]
pub struct SimFleet {
    pub apps: Vec<String>,
    pub clusters: Vec<SimCluster>,
    pub policy: DriftPolicy,
    /// The agents report the platform's apps' objects without stamps (`--unstamped`): no
    /// app, version or content hash, but the labels `app.kubernetes.io/name` and
    /// `app.kubernetes.io/version` the generated match rules read. The unexpected app, which
    /// the platform repo does not know, stays stamped.
    pub unstamped: bool,
    seed: u64,
}

fn token_for(seed: u64, cluster: &str) -> String {
    let digest = Sha256::digest(format!("fleetscope-loadtest/{seed}/{cluster}").as_bytes());
    digest.iter().take(20).map(|b| format!("{b:02x}")).collect()
}

pub fn object_kind(reconciler: Reconciler, kind: ReconcilerKind) -> ObjectKind {
    match (reconciler, kind) {
        (Reconciler::ArgoCd, _) | (_, ReconcilerKind::ArgoApplication) => ObjectKind::Application,
        (_, ReconcilerKind::FluxHelmRelease) => ObjectKind::HelmRelease,
        (_, ReconcilerKind::FluxKustomization) => ObjectKind::Kustomization,
    }
}

fn settled_sync(kind: ObjectKind) -> SyncStatus {
    if kind == ObjectKind::Application {
        SyncStatus::Synced
    } else {
        SyncStatus::Unknown
    }
}

/// The change an agent reports for `object` of `app` when the object carries no stamps: the
/// labels the generated match rules read instead.
fn unstamped_change(object: &Object, app: &str, now: Timestamp) -> Change {
    Change {
        change_seq: object.change_seq,
        kind: object.kind.as_str().to_owned(),
        namespace: match object.kind {
            ObjectKind::Application => "argocd".to_owned(),
            _ => "flux-system".to_owned(),
        },
        name: app.to_owned(),
        app: None,
        version: None,
        content_hash: None,
        applied_revision: object.revision.to_string(),
        health: object.health.as_str().to_owned(),
        sync: object.sync.as_str().to_owned(),
        reason: object.reason.to_owned(),
        message: object.message.to_owned(),
        transitioned_at: Some(object.transitioned_at),
        observed_at: now.seconds(),
        deleted: false,
        labels: [
            ("app.kubernetes.io/name".to_owned(), app.to_owned()),
            (
                "app.kubernetes.io/version".to_owned(),
                object.version.to_string(),
            ),
        ]
        .into(),
        target_revision: String::new(),
        images: Vec::new(),
    }
}

/// A message a failing reconciler of this kind would give.
pub fn failure(kind: ObjectKind) -> (&'static str, &'static str) {
    match kind {
        ObjectKind::HelmRelease => (
            "UpgradeFailed",
            "Helm upgrade failed: timed out waiting for the condition",
        ),
        ObjectKind::Application => (
            "SyncFailed",
            "one or more objects failed to apply: Deployment is invalid",
        ),
        _ => (
            "ReconciliationFailed",
            "Deployment/default/app dry-run failed: field is immutable",
        ),
    }
}

impl SimFleet {
    /// The fleet of a render: every cluster the renderer placed, its desired apps from its
    /// render group (content hashes as published), desired since `published_at`.
    pub fn from_render(
        outcome: &RenderOutcome,
        seed: u64,
        published_at: Timestamp,
        now: Timestamp,
        policy: DriftPolicy,
    ) -> anyhow::Result<SimFleet> {
        let mut apps: Vec<String> = outcome
            .platform
            .apps
            .keys()
            .map(|a| a.as_str().to_owned())
            .collect();
        apps.push(UNEXPECTED_APP.to_owned());
        let app_index: BTreeMap<&str, u16> = apps
            .iter()
            .enumerate()
            .map(|(i, a)| (a.as_str(), i as u16))
            .collect();
        let mut interned: BTreeMap<String, Arc<str>> = BTreeMap::new();
        let mut intern = |text: &str| -> Arc<str> {
            interned
                .entry(text.to_owned())
                .or_insert_with(|| Arc::from(text))
                .clone()
        };
        let unexpected = app_index[UNEXPECTED_APP];
        let mut clusters = Vec::with_capacity(outcome.platform.clusters.len());
        for (index, (id, entry)) in outcome.platform.clusters.iter().enumerate() {
            let group_name = outcome
                .assigned
                .members
                .get(id)
                .ok_or_else(|| anyhow::anyhow!("cluster {id} has no render group"))?;
            let content = &outcome.assigned.groups[group_name];
            let mut rng = SplitMix64::for_item(seed, index as u64);
            let never_seen = rng.below(10_000) < NEVER_SEEN_CLUSTERS;
            let mut wants = Vec::with_capacity(content.assignments.len());
            let mut objects = Vec::with_capacity(content.assignments.len() + 1);
            for a in &content.assignments {
                let app = app_index[a.app.as_str()];
                let hash = outcome
                    .hashes
                    .get(&(group_name.clone(), a.app.to_string()))
                    .ok_or_else(|| anyhow::anyhow!("no content hash for {group_name}/{}", a.app))?;
                let want = Want {
                    app,
                    version: intern(a.version.as_str()),
                    content_hash: intern(hash),
                    since: published_at.seconds(),
                };
                let kind = object_kind(entry.reconciler, outcome.platform.apps[&a.app].kind);
                let roll = rng.below(10_000);
                let mut object = Object {
                    app,
                    kind,
                    version: want.version.clone(),
                    content_hash: want.content_hash.clone(),
                    // A Flux-style revision: the version and a short digest (the content
                    // hash's hex, without its `sha256:` prefix).
                    revision: intern(&format!("{}@sha1:{}", a.version, {
                        let hex = hash.strip_prefix("sha256:").unwrap_or(hash);
                        &hex[..12.min(hex.len())]
                    })),
                    health: Health::Healthy,
                    sync: settled_sync(kind),
                    reason: "ReconciliationSucceeded",
                    message: "",
                    transitioned_at: published_at.seconds() + rng.below(3_600) as i64,
                    change_seq: 0,
                };
                if roll < FAILED {
                    let (reason, message) = failure(kind);
                    object.health = Health::Degraded;
                    object.reason = reason;
                    object.message = message;
                } else if roll < OLDER {
                    object.version = intern("0.9.0");
                    object.content_hash = intern(&format!(
                        "sha256:{}",
                        Sha256::digest(format!("{}/0.9.0", a.app).as_bytes())
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect::<String>()
                    ));
                    object.revision = intern("0.9.0@sha1:000000000000");
                } else if roll < SETTLING {
                    object.health = Health::Progressing;
                    object.reason = "Progressing";
                    object.transitioned_at = now.seconds() - 60;
                } else if roll < MISSING {
                    wants.push(want);
                    continue;
                }
                wants.push(want);
                objects.push(object);
            }
            if rng.below(10_000) < UNEXPECTED_CLUSTERS {
                let kind = object_kind(entry.reconciler, ReconcilerKind::FluxHelmRelease);
                objects.push(Object {
                    app: unexpected,
                    kind,
                    version: intern("0.3.1"),
                    content_hash: intern(""),
                    revision: intern("0.3.1"),
                    health: Health::Healthy,
                    sync: settled_sync(kind),
                    reason: "InstallSucceeded",
                    message: "",
                    transitioned_at: published_at.seconds(),
                    change_seq: 0,
                });
            }
            for (n, object) in objects.iter_mut().enumerate() {
                object.change_seq = n as u64 + 1;
            }
            let change_seq = objects.len() as u64;
            clusters.push(SimCluster {
                id: id.to_string(),
                group: entry.group.to_string(),
                reconciler: entry.reconciler,
                token: token_for(seed, id.as_str()),
                wants,
                objects,
                never_seen,
                dark: false,
                last_ack: None,
                report_seq: 0,
                change_seq,
                outbox: VecDeque::new(),
                encoded: None,
                // The collector never hears of a cluster that never reports.
                frozen: never_seen.then(Vec::new),
                acked_changes: 0,
                acked_high: 0,
            });
        }
        Ok(SimFleet {
            apps,
            clusters,
            policy,
            unstamped: false,
            seed,
        })
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn app_index(&self, name: &str) -> Option<u16> {
        self.apps.iter().position(|a| a == name).map(|i| i as u16)
    }

    /// The clusters that desire `version` of `app`, and how many of their pairs of it are
    /// `in_sync`, `failed` and `stale` at `now`: `[targeted, in_sync, failed, stale]`.
    pub fn rollout_truth(&self, app: &str, version: &str, now: Timestamp) -> [u64; 4] {
        let mut truth = [0; 4];
        let Some(app_id) = self.app_index(app) else {
            return truth;
        };
        for cluster in &self.clusters {
            if !cluster
                .wants
                .iter()
                .any(|w| w.app == app_id && &*w.version == version)
            {
                continue;
            }
            truth[0] += 1;
            let state = self
                .pair_states(cluster, now)
                .into_iter()
                .find(|(a, _)| *a == app_id)
                .map(|(_, s)| s);
            match state {
                Some(DriftState::InSync) => truth[1] += 1,
                Some(DriftState::Failed) => truth[2] += 1,
                Some(DriftState::Stale) => truth[3] += 1,
                _ => {}
            }
        }
        truth
    }

    /// Takes a new render: clusters whose (app) content hash changed desire the new version
    /// since `published_at`. Render groups must not have moved clusters.
    pub fn apply_render(
        &mut self,
        outcome: &RenderOutcome,
        published_at: Timestamp,
    ) -> anyhow::Result<u64> {
        let mut changed_pairs = 0;
        for cluster in &mut self.clusters {
            let id = fleetscope_model::ClusterId::parse(&cluster.id)?;
            let group = outcome
                .assigned
                .members
                .get(&id)
                .ok_or_else(|| anyhow::anyhow!("cluster {} left the render", cluster.id))?;
            let content = &outcome.assigned.groups[group];
            anyhow::ensure!(
                content.assignments.len() == cluster.wants.len(),
                "cluster {}: the new render changed which apps it runs; the load test's rollout changes versions only",
                cluster.id
            );
            for (want, a) in cluster.wants.iter_mut().zip(&content.assignments) {
                anyhow::ensure!(
                    self.apps[usize::from(want.app)] == a.app.as_str(),
                    "cluster {}: apps reordered by the new render",
                    cluster.id
                );
                let hash = &outcome.hashes[&(group.clone(), a.app.to_string())];
                if **hash != *want.content_hash {
                    want.content_hash = Arc::from(hash.as_str());
                    want.version = Arc::from(a.version.as_str());
                    want.since = published_at.seconds();
                    changed_pairs += 1;
                }
            }
        }
        Ok(changed_pairs)
    }

    /// The next report of a cluster, numbered; its changes are the given objects.
    fn report(
        apps: &[String],
        unstamped: bool,
        cluster: &mut SimCluster,
        kind: ReportKind,
        changed: &[usize],
        now: Timestamp,
    ) -> Report {
        cluster.report_seq += 1;
        let reconciler = match cluster.reconciler {
            Reconciler::Flux => ("flux", "v2.4.0"),
            Reconciler::ArgoCd => ("argocd", "v2.13.1"),
        };
        let changes = changed
            .iter()
            .map(|&i| {
                let o = &cluster.objects[i];
                let app = &apps[usize::from(o.app)];
                if unstamped && usize::from(o.app) + 1 != apps.len() {
                    return unstamped_change(o, app, now);
                }
                Change {
                    change_seq: o.change_seq,
                    kind: o.kind.as_str().to_owned(),
                    namespace: match o.kind {
                        ObjectKind::Application => "argocd".to_owned(),
                        _ => "flux-system".to_owned(),
                    },
                    name: app.clone(),
                    app: Some(app.clone()),
                    version: Some(o.version.to_string()),
                    content_hash: (!o.content_hash.is_empty()).then(|| o.content_hash.to_string()),
                    applied_revision: o.revision.to_string(),
                    health: o.health.as_str().to_owned(),
                    sync: o.sync.as_str().to_owned(),
                    reason: o.reason.to_owned(),
                    message: o.message.to_owned(),
                    transitioned_at: Some(o.transitioned_at),
                    observed_at: now.seconds(),
                    deleted: false,
                    labels: Default::default(),
                    target_revision: String::new(),
                    images: Vec::new(),
                }
            })
            .collect();
        Report {
            cluster: cluster.id.clone(),
            agent_version: AGENT_VERSION.to_owned(),
            report_seq: cluster.report_seq,
            sent_at: now.seconds(),
            kind,
            reconcilers: [(reconciler.0.to_owned(), reconciler.1.to_owned())].into(),
            change_seq_high: if kind == ReportKind::Snapshot {
                cluster.change_seq + 1
            } else {
                0
            },
            changes,
            stamped_apps: Vec::new(),
        }
    }

    /// Whether the agents send the platform's apps' objects without stamps.
    fn reads_hash(&self, object: &Object) -> bool {
        !self.unstamped || usize::from(object.app) + 1 == self.apps.len()
    }

    /// Makes the cluster's next report a full snapshot (what an agent sends when it
    /// reconnects), numbered but not yet queued: the caller queues it (with
    /// [`SimFleet::queue_encoded`]) before anything else of the cluster.
    pub fn snapshot(&mut self, cluster: usize, now: Timestamp) -> Report {
        let all: Vec<usize> = (0..self.clusters[cluster].objects.len()).collect();
        Self::report(
            &self.apps,
            self.unstamped,
            &mut self.clusters[cluster],
            ReportKind::Snapshot,
            &all,
            now,
        )
    }

    /// Queues a report made by [`SimFleet::snapshot`] with its request body already encoded.
    pub fn queue_encoded(&mut self, cluster: usize, report: Report, body: Vec<u8>) {
        let sim = &mut self.clusters[cluster];
        sim.encoded = Some((report.report_seq, body));
        sim.outbox.push_back(report);
    }

    /// Changes one app's object on a cluster and queues the delta report. Returns false when
    /// the cluster has no object for that app.
    pub fn change(
        &mut self,
        cluster: usize,
        app: u16,
        now: Timestamp,
        edit: impl FnOnce(&mut Object),
    ) -> bool {
        let sim = &mut self.clusters[cluster];
        let Some(index) = sim.objects.iter().position(|o| o.app == app) else {
            return false;
        };
        sim.change_seq += 1;
        let seq = sim.change_seq;
        let object = &mut sim.objects[index];
        edit(object);
        object.change_seq = seq;
        let report = Self::report(
            &self.apps,
            self.unstamped,
            sim,
            ReportKind::Delta,
            &[index],
            now,
        );
        sim.outbox.push_back(report);
        true
    }

    /// The next heartbeat of a cluster (not numbered: heartbeats are not replayed).
    pub fn heartbeat(&self, cluster: usize, now: Timestamp) -> Report {
        let sim = &self.clusters[cluster];
        let reconciler = match sim.reconciler {
            Reconciler::Flux => ("flux", "v2.4.0"),
            Reconciler::ArgoCd => ("argocd", "v2.13.1"),
        };
        Report {
            cluster: sim.id.clone(),
            agent_version: AGENT_VERSION.to_owned(),
            report_seq: 0,
            sent_at: now.seconds(),
            kind: ReportKind::Heartbeat,
            reconcilers: [(reconciler.0.to_owned(), reconciler.1.to_owned())].into(),
            change_seq_high: 0,
            changes: Vec::new(),
            stamped_apps: Vec::new(),
        }
    }

    fn is_stale(&self, cluster: &SimCluster, now: Timestamp) -> bool {
        match cluster.last_ack {
            None => true,
            Some(seen) => Timestamp(seen).age_at(now) > self.policy.stale_after_seconds,
        }
    }

    /// Every pair of a cluster with its state at `now`, as the model classifies it from what
    /// the cluster's agent had acknowledged.
    pub fn pair_states(&self, cluster: &SimCluster, now: Timestamp) -> Vec<(u16, DriftState)> {
        let mut out = Vec::with_capacity(cluster.wants.len() + 1);
        let last_seen = cluster.last_ack.map(Timestamp);
        fn observed(o: &Object, reads_hash: bool) -> ObservedForDrift<'_> {
            ObservedForDrift {
                version: &o.version,
                // An object reported without stamps carries no content hash.
                content_hash: if reads_hash { &o.content_hash } else { "" },
                health: o.health,
                sync: o.sync,
                transitioned_at: Timestamp(o.transitioned_at),
            }
        }
        for want in &cluster.wants {
            let object = cluster.delivered().iter().find(|o| o.app == want.app);
            let input = DriftInput {
                now,
                last_seen,
                desired: Some(DesiredForDrift {
                    version: &want.version,
                    content_hash: &want.content_hash,
                    since: Timestamp(want.since),
                }),
                observed: object.map(|o| observed(o, self.reads_hash(o))),
            };
            out.push((want.app, classify(&input, &self.policy)));
        }
        for object in cluster.delivered() {
            if !cluster.wants.iter().any(|w| w.app == object.app) {
                let input = DriftInput {
                    now,
                    last_seen,
                    desired: None,
                    observed: Some(observed(object, self.reads_hash(object))),
                };
                out.push((object.app, classify(&input, &self.policy)));
            }
        }
        out
    }

    /// Group path ("" for the fleet) → the numbers the hub should show at `now`. Holds once
    /// every delivering cluster's outbox is empty (the caller waits for that).
    pub fn rollups(&self, now: Timestamp) -> BTreeMap<String, GroupTruth> {
        let mut out: BTreeMap<String, GroupTruth> = BTreeMap::new();
        for cluster in &self.clusters {
            let stale = self.is_stale(cluster, now);
            let states = self.pair_states(cluster, now);
            let mut keys = vec![String::new()];
            let mut prefix = String::new();
            for segment in cluster.group.split('/') {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(segment);
                keys.push(prefix.clone());
            }
            for key in keys {
                let g = out.entry(key).or_default();
                g.clusters += 1;
                g.stale_clusters += u64::from(stale);
                for (_, state) in &states {
                    *g.pairs.entry(*state).or_default() += 1;
                }
            }
        }
        out
    }

    /// One app's inventory as the hub's versions route gives it (running versions by region).
    pub fn inventory(&self, app: u16) -> AppTruth {
        let mut truth = AppTruth::default();
        for cluster in &self.clusters {
            if let Some(want) = cluster.wants.iter().find(|w| w.app == app) {
                *truth.desired.entry(want.version.to_string()).or_default() += 1;
            }
            if let Some(object) = cluster.delivered().iter().find(|o| o.app == app) {
                let region = cluster
                    .group
                    .split('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                let entry = truth.running.entry(object.version.to_string()).or_default();
                entry.0 += 1;
                *entry.1.entry(region).or_default() += 1;
            }
        }
        truth
    }
}

impl SimFleet {
    /// Stops a cluster's deliveries; what the collector knows of it stays as it is.
    pub fn go_dark(&mut self, cluster: usize) {
        let sim = &mut self.clusters[cluster];
        debug_assert!(
            sim.outbox.is_empty(),
            "a cluster goes dark with nothing in flight"
        );
        sim.frozen = Some(sim.objects.clone());
        sim.dark = true;
    }

    /// Resumes a dark cluster: its outbox (the spooled reports) goes out in order.
    pub fn come_back(&mut self, cluster: usize) {
        self.clusters[cluster].dark = false;
    }
}

#[cfg(test)]
impl SimFleet {
    /// A fleet of `clusters` Flux clusters with one healthy app each, none dark or unseen, for
    /// the simulator's own unit tests.
    pub(crate) fn for_tests(clusters: usize) -> SimFleet {
        let version: Arc<str> = Arc::from("1.0.0");
        let hash: Arc<str> = Arc::from(format!("sha256:{}", "0".repeat(64)).as_str());
        let clusters = (0..clusters)
            .map(|n| SimCluster {
                id: format!("store-{n}"),
                group: "emea/de".to_owned(),
                reconciler: Reconciler::Flux,
                token: format!("token-{n}"),
                wants: Vec::new(),
                objects: vec![Object {
                    app: 0,
                    kind: ObjectKind::HelmRelease,
                    version: version.clone(),
                    content_hash: hash.clone(),
                    revision: Arc::from("1.0.0@sha1:000000000000"),
                    health: Health::Healthy,
                    sync: SyncStatus::Unknown,
                    reason: "InstallSucceeded",
                    message: "",
                    transitioned_at: 1_800_000_000,
                    change_seq: 1,
                }],
                never_seen: false,
                dark: false,
                last_ack: None,
                report_seq: 0,
                change_seq: 1,
                outbox: VecDeque::new(),
                encoded: None,
                frozen: None,
                acked_changes: 0,
                acked_high: 0,
            })
            .collect();
        SimFleet {
            apps: vec!["api".to_owned()],
            clusters,
            policy: DriftPolicy::default(),
            unstamped: false,
            seed: 1,
        }
    }
}
