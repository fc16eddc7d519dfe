//! The fleet in memory: inventory, render group membership, desired state per render group,
//! reason set membership and the reasons per reason set (why each app is desired: clusters of
//! one render group may have different reasons), the latest state of every app object, and each
//! cluster's last heartbeat. Loaded whole from the
//! store at start, then kept current: observed state and heartbeats by what arrived since the
//! last read (with an overlap, so rows that became visible late are not missed), the small
//! tables again whenever their change markers move.
//!
//! Strings that repeat across the fleet (apps, versions, hashes, messages, names) are stored
//! once and referred to by number: 2.8 million app objects take about 100 bytes each in memory
//! (measured by the `api_latency` benchmark).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_model::drift::{classify, DesiredForDrift, DriftInput, ObservedForDrift};
use fleetscope_model::state::{Health, ObjectKind, SyncStatus};
use fleetscope_model::{DriftPolicy, DriftState, GroupPath, Timestamp};
use fleetscope_store::queries::{ChangeMarkers, ObservedSource};
use fleetscope_store::{ClusterRow, DesiredRow, HeartbeatRow, ObservedRow, ReasonSetRow, Store};

/// How far back each incremental read of observed state and heartbeats reaches before the
/// newest row already seen: rows are stamped when received but become visible when their
/// batch is inserted, up to a few seconds later.
pub const OVERLAP_SECONDS: i64 = 60;

/// Stored once, referred to by number.
#[derive(Debug, Default)]
pub struct Symbols {
    ids: HashMap<Arc<str>, u32>,
    texts: Vec<Arc<str>>,
}

impl Symbols {
    pub fn intern(&mut self, text: &str) -> u32 {
        if let Some(id) = self.ids.get(text) {
            return *id;
        }
        let id = u32::try_from(self.texts.len()).expect("fewer than 4 billion distinct strings");
        let shared: Arc<str> = Arc::from(text);
        self.texts.push(shared.clone());
        self.ids.insert(shared, id);
        id
    }

    pub fn text(&self, id: u32) -> &str {
        &self.texts[id as usize]
    }

    pub fn find(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// The content part of the order in which one object's observed rows supersede each other (the
/// store's `OBSERVED_ORDER` after `seq` and `received_at`): two different changes with the same
/// number and arrival second resolve by it, the same way the store's queries resolve them.
fn observed_order<'a>(
    deleted: bool,
    health: &'a str,
    sync: &'a str,
    texts: [&'a str; 6],
    transitioned_at: u32,
    observed_at: u32,
) -> (bool, &'a str, &'a str, [&'a str; 6], u32, u32) {
    (deleted, health, sync, texts, transitioned_at, observed_at)
}

/// Whether `new` replaces `held`, two records of the same object: a higher change number, then
/// a later arrival, then [`observed_order`].
fn supersedes(symbols: &Symbols, new: &ObjectRec, held: &ObjectRec) -> bool {
    let key = |o: &ObjectRec| {
        observed_order(
            o.deleted,
            o.health.as_str(),
            o.sync.as_str(),
            [
                o.version,
                o.content_hash,
                o.revision,
                o.app,
                o.reason,
                o.message,
            ]
            .map(|id| symbols.text(id)),
            o.transitioned_at,
            o.observed_at,
        )
    };
    (new.seq, new.received_at)
        .cmp(&(held.seq, held.received_at))
        .then_with(|| key(new).cmp(&key(held)))
        == std::cmp::Ordering::Greater
}

/// The latest report of one app object (Flux Kustomization/HelmRelease, Argo CD Application).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRec {
    pub kind: ObjectKind,
    pub namespace: u32,
    pub name: u32,
    pub app: u32,
    pub version: u32,
    pub content_hash: u32,
    pub revision: u32,
    pub health: Health,
    pub sync: SyncStatus,
    pub reason: u32,
    pub message: u32,
    pub transitioned_at: u32,
    pub observed_at: u32,
    pub received_at: u32,
    pub seq: u64,
    pub deleted: bool,
}

/// What one render group wants for one app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredRec {
    pub app: u32,
    pub version: u32,
    pub content_hash: u32,
    pub since: u32,
    pub render_id: u64,
    pub commit: u32,
    pub kind: u32,
    pub namespace: u32,
    /// What the desired row says: the reasons of every cluster of the render group together.
    /// One cluster's own are in its reason set ([`Fleet::reasons_of`]).
    pub reasons: Arc<[String]>,
}

/// Why one app is desired on the clusters of one reason set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasonRec {
    pub app: u32,
    pub reasons: Arc<[String]>,
    /// The policy whose pin decided the version; `None` for the app's default.
    pub pinned_by: Option<u32>,
}

/// One cluster: its inventory entry (if registered), membership, last heartbeat and objects.
#[derive(Debug, Clone, Default)]
pub struct ClusterRec {
    /// `None` until the cluster is in the inventory; only inventory clusters have pairs.
    pub info: Option<ClusterInfo>,
    pub render_group: Option<u32>,
    /// Its reason set, when the renderer published one.
    pub reason_set: Option<u32>,
    pub last_seen: Option<u32>,
    pub agent_version: Option<u32>,
    /// Sorted by (kind, namespace, name).
    pub objects: Vec<ObjectRec>,
}

#[derive(Debug, Clone)]
pub struct ClusterInfo {
    pub group: GroupPath,
    /// The group's prefixes (shortest first) as symbols, for rollups.
    pub prefixes: Vec<u32>,
    pub environment: u32,
    pub reconciler: u32,
    pub labels: BTreeMap<String, String>,
}

/// A (cluster, app) pair, classified.
#[derive(Debug, Clone, Copy)]
pub struct Pair<'a> {
    pub app: u32,
    pub desired: Option<&'a DesiredRec>,
    pub observed: Option<&'a ObjectRec>,
    pub state: DriftState,
}

/// Counts for one group (or the whole fleet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub clusters: u64,
    pub stale_clusters: u64,
    /// App instances per drift state, in `DriftState::ALL` order.
    pub pairs: [u64; 8],
}

impl Counts {
    pub fn state(&self, state: DriftState) -> u64 {
        self.pairs[state_index(state)]
    }
}

pub fn state_index(state: DriftState) -> usize {
    DriftState::ALL
        .iter()
        .position(|s| *s == state)
        .expect("every state is listed")
}

/// Which clusters and pairs a question is about. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Filter {
    /// Only clusters within every one of these subtrees (a caller's scope and the asked group).
    pub groups: Vec<GroupPath>,
    pub environment: Option<String>,
    /// `key=value` pairs a cluster's labels must all have.
    pub labels: Vec<(String, String)>,
    pub app: Option<String>,
}

/// Everything the hub knows, at one moment.
#[derive(Debug, Default)]
pub struct Fleet {
    pub symbols: Symbols,
    pub clusters: BTreeMap<String, ClusterRec>,
    /// Render group symbol → desired apps, sorted by app symbol.
    pub desired: HashMap<u32, Vec<DesiredRec>>,
    /// Reason set symbol → why each app is desired, sorted by app symbol.
    pub reasons: HashMap<u32, Vec<ReasonRec>>,
    pub markers: Option<ChangeMarkers>,
    /// The newest `received_at` of observed rows read so far.
    pub observed_watermark: u32,
    /// The newest `seen_at` of heartbeats read so far.
    pub heartbeat_watermark: u32,
    /// Moves whenever anything changed; caches key on it.
    pub generation: u64,
    pub objects: usize,
}

impl Fleet {
    fn cluster_mut(&mut self, id: &str) -> &mut ClusterRec {
        if !self.clusters.contains_key(id) {
            self.clusters.insert(id.to_owned(), ClusterRec::default());
        }
        self.clusters.get_mut(id).expect("just inserted")
    }

    /// Replaces the inventory with `rows` (the current row per cluster).
    pub fn set_inventory(&mut self, rows: Vec<ClusterRow>) {
        for cluster in self.clusters.values_mut() {
            cluster.info = None;
        }
        for row in rows {
            if row.removed != 0 {
                continue;
            }
            let Ok(group) = GroupPath::parse(&row.group_path) else {
                tracing::warn!(cluster = %row.cluster_id, group = %row.group_path, "inventory row with an invalid group path skipped");
                continue;
            };
            let prefixes = group
                .prefixes()
                .iter()
                .map(|p| self.symbols.intern(p.as_str()))
                .collect();
            let environment = self.symbols.intern(&row.environment);
            let reconciler = self.symbols.intern(&row.reconciler);
            let labels = row.label_keys.into_iter().zip(row.label_values).collect();
            self.cluster_mut(&row.cluster_id).info = Some(ClusterInfo {
                group,
                prefixes,
                environment,
                reconciler,
                labels,
            });
        }
        self.generation += 1;
    }

    /// Replaces membership with `(cluster, render group, removed)` rows.
    pub fn set_membership(&mut self, rows: Vec<(String, String, bool)>) {
        for cluster in self.clusters.values_mut() {
            cluster.render_group = None;
        }
        for (cluster, group, removed) in rows {
            if removed {
                continue;
            }
            let group = self.symbols.intern(&group);
            self.cluster_mut(&cluster).render_group = Some(group);
        }
        self.generation += 1;
    }

    /// Replaces reason set membership with `(cluster, reason set, removed)` rows.
    pub fn set_reason_membership(&mut self, rows: Vec<(String, String, bool)>) {
        for cluster in self.clusters.values_mut() {
            cluster.reason_set = None;
        }
        for (cluster, set, removed) in rows {
            if removed {
                continue;
            }
            let set = self.symbols.intern(&set);
            self.cluster_mut(&cluster).reason_set = Some(set);
        }
        self.generation += 1;
    }

    /// Replaces the reason sets with the current row per (reason set, app).
    pub fn set_reason_sets(&mut self, rows: Vec<ReasonSetRow>) {
        let mut reasons: HashMap<u32, Vec<ReasonRec>> = HashMap::new();
        for row in rows {
            if row.removed != 0 {
                continue;
            }
            let set = self.symbols.intern(&row.reason_set);
            let rec = ReasonRec {
                app: self.symbols.intern(&row.app),
                reasons: row.reasons.into(),
                pinned_by: (!row.pinned_by.is_empty()).then(|| self.symbols.intern(&row.pinned_by)),
            };
            reasons.entry(set).or_default().push(rec);
        }
        for apps in reasons.values_mut() {
            apps.sort_by_key(|r| r.app);
        }
        self.reasons = reasons;
        self.generation += 1;
    }

    /// Why `app` (a symbol) is desired on `cluster`, from the cluster's reason set; `None` when
    /// the cluster has no reason set or its reason set does not have the app.
    pub fn reasons_of(&self, cluster: &ClusterRec, app: u32) -> Option<&ReasonRec> {
        let apps = self.reasons.get(&cluster.reason_set?)?;
        apps.binary_search_by_key(&app, |r| r.app)
            .ok()
            .map(|at| &apps[at])
    }

    /// Replaces desired state with the current row per (render group, app).
    pub fn set_desired(&mut self, rows: Vec<DesiredRow>) {
        let mut desired: HashMap<u32, Vec<DesiredRec>> = HashMap::new();
        for row in rows {
            if row.removed != 0 {
                continue;
            }
            let group = self.symbols.intern(&row.render_group);
            let rec = DesiredRec {
                app: self.symbols.intern(&row.app),
                version: self.symbols.intern(&row.version),
                content_hash: self.symbols.intern(&row.content_hash),
                since: row.desired_since,
                render_id: row.render_id,
                commit: self.symbols.intern(&row.commit),
                kind: self.symbols.intern(&row.kind),
                namespace: self.symbols.intern(&row.namespace),
                reasons: row.reasons.into(),
            };
            desired.entry(group).or_default().push(rec);
        }
        for apps in desired.values_mut() {
            apps.sort_by_key(|d| d.app);
        }
        self.desired = desired;
        self.generation += 1;
    }

    /// Takes one observed row: it replaces the object's record when its `seq` is newer.
    /// Returns whether anything changed.
    pub fn apply_observed(&mut self, row: &ObservedRow) -> bool {
        let Some(kind) = ObjectKind::parse(&row.object_kind) else {
            return false;
        };
        self.observed_watermark = self.observed_watermark.max(row.received_at);
        let s = &mut self.symbols;
        let rec = ObjectRec {
            kind,
            namespace: s.intern(&row.object_namespace),
            name: s.intern(&row.object_name),
            app: s.intern(&row.app),
            version: s.intern(&row.version),
            content_hash: s.intern(&row.content_hash),
            revision: s.intern(&row.applied_revision),
            health: Health::parse(&row.health).unwrap_or(Health::Unknown),
            sync: SyncStatus::parse(&row.sync).unwrap_or(SyncStatus::Unknown),
            reason: s.intern(&row.reason),
            message: s.intern(&row.message),
            transitioned_at: row.transitioned_at,
            observed_at: row.observed_at,
            received_at: row.received_at,
            seq: row.seq,
            deleted: row.deleted != 0,
        };
        if !self.clusters.contains_key(&row.cluster_id) {
            self.clusters
                .insert(row.cluster_id.clone(), ClusterRec::default());
        }
        let symbols = &self.symbols;
        let cluster = self
            .clusters
            .get_mut(&row.cluster_id)
            .expect("just inserted");
        let key = (rec.kind.as_str(), rec.namespace, rec.name);
        match cluster
            .objects
            .binary_search_by(|o| (o.kind.as_str(), o.namespace, o.name).cmp(&key))
        {
            Ok(at) => {
                if !supersedes(symbols, &rec, &cluster.objects[at]) {
                    return false;
                }
                cluster.objects[at] = rec;
            }
            Err(at) => {
                cluster.objects.insert(at, rec);
                self.objects += 1;
            }
        }
        self.generation += 1;
        true
    }

    /// Whether `row` would change the fleet: its object is unknown or known at an older
    /// change number. Refreshes read an overlap of rows already applied; this keeps them out
    /// of memory and away from the write lock.
    pub fn is_newer(&self, row: &ObservedRow) -> bool {
        let Some(kind) = ObjectKind::parse(&row.object_kind) else {
            return false;
        };
        let (Some(namespace), Some(name)) = (
            self.symbols.find(&row.object_namespace),
            self.symbols.find(&row.object_name),
        ) else {
            return true;
        };
        let Some(cluster) = self.clusters.get(&row.cluster_id) else {
            return true;
        };
        let key = (kind.as_str(), namespace, name);
        match cluster
            .objects
            .binary_search_by(|o| (o.kind.as_str(), o.namespace, o.name).cmp(&key))
        {
            Ok(at) => {
                let held = &cluster.objects[at];
                let text = |id: u32| self.symbols.text(id);
                match held
                    .seq
                    .cmp(&row.seq)
                    .then(held.received_at.cmp(&row.received_at))
                {
                    std::cmp::Ordering::Less => true,
                    std::cmp::Ordering::Greater => false,
                    std::cmp::Ordering::Equal => {
                        observed_order(
                            row.deleted != 0,
                            Health::parse(&row.health)
                                .unwrap_or(Health::Unknown)
                                .as_str(),
                            SyncStatus::parse(&row.sync)
                                .unwrap_or(SyncStatus::Unknown)
                                .as_str(),
                            [
                                &row.version,
                                &row.content_hash,
                                &row.applied_revision,
                                &row.app,
                                &row.reason,
                                &row.message,
                            ],
                            row.transitioned_at,
                            row.observed_at,
                        )
                        .cmp(&observed_order(
                            held.deleted,
                            held.health.as_str(),
                            held.sync.as_str(),
                            [
                                held.version,
                                held.content_hash,
                                held.revision,
                                held.app,
                                held.reason,
                                held.message,
                            ]
                            .map(text),
                            held.transitioned_at,
                            held.observed_at,
                        )) == std::cmp::Ordering::Greater
                    }
                }
            }
            Err(_) => true,
        }
    }

    /// Takes heartbeat rows, keeping the newest per cluster.
    pub fn apply_heartbeats(&mut self, rows: Vec<HeartbeatRow>) -> bool {
        let mut changed = false;
        for row in rows {
            self.heartbeat_watermark = self.heartbeat_watermark.max(row.seen_at);
            let agent = self.symbols.intern(&row.agent_version);
            let cluster = self.cluster_mut(&row.cluster_id);
            if cluster.last_seen.is_none_or(|seen| seen < row.seen_at) {
                cluster.last_seen = Some(row.seen_at);
                cluster.agent_version = Some(agent);
                changed = true;
            }
        }
        if changed {
            self.generation += 1;
        }
        changed
    }

    /// Whether a cluster counts as stale at `now`.
    pub fn is_stale(cluster: &ClusterRec, now: Timestamp, policy: &DriftPolicy) -> bool {
        match cluster.last_seen {
            None => true,
            Some(seen) => Timestamp(i64::from(seen)).age_at(now) > policy.stale_after_seconds,
        }
    }

    /// Every (cluster, app) pair of one cluster, classified, sorted by app name. Only clusters
    /// of the inventory have pairs. Of several live objects stamped with one app, the most
    /// recently reported counts.
    pub fn pairs<'a>(
        &'a self,
        cluster: &'a ClusterRec,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> Vec<Pair<'a>> {
        if cluster.info.is_none() {
            return Vec::new();
        }
        let desired: &[DesiredRec] = cluster
            .render_group
            .and_then(|g| self.desired.get(&g))
            .map_or(&[], Vec::as_slice);
        let mut observed: Vec<&ObjectRec> = Vec::new();
        for object in &cluster.objects {
            if object.deleted
                || !object.kind.is_app_object()
                || self.symbols.text(object.app).is_empty()
            {
                continue;
            }
            observed.push(object);
        }
        observed.sort_by_key(|o| (o.app, std::cmp::Reverse(o.seq)));
        observed.dedup_by_key(|o| o.app);
        let mut pairs = Vec::with_capacity(desired.len().max(observed.len()));
        let (mut d, mut o) = (0, 0);
        while d < desired.len() || o < observed.len() {
            let (app, want, have) = match (desired.get(d), observed.get(o)) {
                (Some(x), Some(y)) if x.app == y.app => {
                    d += 1;
                    o += 1;
                    (x.app, Some(x), Some(*y))
                }
                (Some(x), Some(y)) if x.app < y.app => {
                    d += 1;
                    (x.app, Some(x), None)
                }
                (Some(x), None) => {
                    d += 1;
                    (x.app, Some(x), None)
                }
                (_, Some(y)) => {
                    o += 1;
                    (y.app, None, Some(*y))
                }
                (None, None) => unreachable!("the loop condition"),
            };
            pairs.push(Pair {
                app,
                desired: want,
                observed: have,
                state: self.classify(cluster, want, have, now, policy),
            });
        }
        pairs.sort_by(|a, b| self.symbols.text(a.app).cmp(self.symbols.text(b.app)));
        pairs
    }

    /// The pair of one cluster and one app (by symbol), classified; `None` when the app is
    /// neither desired nor observed there. The same rules as [`Fleet::pairs`], for one app.
    pub fn pair<'a>(
        &'a self,
        cluster: &'a ClusterRec,
        app: u32,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> Option<Pair<'a>> {
        cluster.info.as_ref()?;
        let desired = cluster
            .render_group
            .and_then(|g| self.desired.get(&g))
            .and_then(|apps| {
                apps.binary_search_by_key(&app, |d| d.app)
                    .ok()
                    .map(|i| &apps[i])
            });
        let observed = cluster
            .objects
            .iter()
            .filter(|o| o.app == app && !o.deleted && o.kind.is_app_object())
            .max_by_key(|o| o.seq);
        if desired.is_none() && observed.is_none() {
            return None;
        }
        Some(Pair {
            app,
            desired,
            observed,
            state: self.classify(cluster, desired, observed, now, policy),
        })
    }

    /// The model's drift classification of one pair of `cluster`.
    fn classify(
        &self,
        cluster: &ClusterRec,
        desired: Option<&DesiredRec>,
        observed: Option<&ObjectRec>,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> DriftState {
        let input = DriftInput {
            now,
            last_seen: cluster.last_seen.map(|s| Timestamp(i64::from(s))),
            desired: desired.map(|w| DesiredForDrift {
                version: self.symbols.text(w.version),
                content_hash: self.symbols.text(w.content_hash),
                since: Timestamp(i64::from(w.since)),
            }),
            observed: observed.map(|h| ObservedForDrift {
                version: self.symbols.text(h.version),
                content_hash: self.symbols.text(h.content_hash),
                health: h.health,
                sync: h.sync,
                transitioned_at: Timestamp(i64::from(h.transitioned_at)),
            }),
        };
        classify(&input, policy)
    }

    /// Whether a cluster passes the cluster part of `filter` (groups, environment, labels).
    pub fn cluster_matches(&self, cluster: &ClusterRec, filter: &Filter) -> bool {
        let Some(info) = &cluster.info else {
            return false;
        };
        filter.groups.iter().all(|g| info.group.is_within(g))
            && filter
                .environment
                .as_deref()
                .is_none_or(|e| self.symbols.text(info.environment) == e)
            && filter
                .labels
                .iter()
                .all(|(k, v)| info.labels.get(k).is_some_and(|have| have == v))
    }

    /// Counts per group at every level (`""` is the whole fleet) for the clusters and pairs
    /// `filter` selects.
    pub fn rollup(
        &self,
        now: Timestamp,
        policy: &DriftPolicy,
        filter: &Filter,
    ) -> BTreeMap<String, Counts> {
        let app = filter.app.as_deref().map(|a| self.symbols.find(a));
        let clusters: Vec<&ClusterRec> = self
            .clusters
            .values()
            .filter(|c| self.cluster_matches(c, filter))
            .collect();
        // Clusters are independent: split them over the cores, then add the parts.
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 8);
        let chunk = clusters.len().div_ceil(workers).max(1);
        let parts: Vec<(HashMap<u32, Counts>, Counts)> = std::thread::scope(|scope| {
            let handles: Vec<_> = clusters
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        let mut by_prefix: HashMap<u32, Counts> = HashMap::new();
                        let mut fleet = Counts::default();
                        for cluster in part {
                            let info = cluster
                                .info
                                .as_ref()
                                .expect("matched clusters are in the inventory");
                            let stale = Fleet::is_stale(cluster, now, policy);
                            let mut counts = Counts {
                                clusters: 1,
                                stale_clusters: u64::from(stale),
                                pairs: [0; 8],
                            };
                            for pair in self.pairs(cluster, now, policy) {
                                if app.is_some_and(|a| a != Some(pair.app)) {
                                    continue;
                                }
                                counts.pairs[state_index(pair.state)] += 1;
                            }
                            add(&mut fleet, &counts);
                            for prefix in &info.prefixes {
                                add(by_prefix.entry(*prefix).or_default(), &counts);
                            }
                        }
                        (by_prefix, fleet)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("rollup workers do not panic"))
                .collect()
        });
        let mut by_prefix: HashMap<u32, Counts> = HashMap::new();
        let mut fleet = Counts::default();
        for (part, part_fleet) in parts {
            add(&mut fleet, &part_fleet);
            for (prefix, counts) in part {
                add(by_prefix.entry(prefix).or_default(), &counts);
            }
        }
        let mut out: BTreeMap<String, Counts> = by_prefix
            .into_iter()
            .map(|(p, c)| (self.symbols.text(p).to_owned(), c))
            .collect();
        out.insert(String::new(), fleet);
        out
    }
}

/// The store's shape of a rollup, for comparing the two computations.
pub fn as_group_rollups(rollup: &BTreeMap<String, Counts>) -> Vec<fleetscope_store::GroupRollup> {
    rollup
        .iter()
        .map(|(group, counts)| fleetscope_store::GroupRollup {
            group_path: group.clone(),
            depth: if group.is_empty() {
                0
            } else {
                group.split('/').count()
            },
            clusters: counts.clusters,
            stale_clusters: counts.stale_clusters,
            pairs: DriftState::ALL
                .iter()
                .filter(|s| counts.state(**s) > 0)
                .map(|s| (*s, counts.state(*s)))
                .collect(),
        })
        .collect()
}

fn add(into: &mut Counts, from: &Counts) {
    into.clusters += from.clusters;
    into.stale_clusters += from.stale_clusters;
    for (a, b) in into.pairs.iter_mut().zip(from.pairs) {
        *a += b;
    }
}

/// Reads the whole fleet from the store.
pub async fn load(store: &Store) -> fleetscope_store::Result<Fleet> {
    let mut fleet = Fleet::default();
    let markers = store.change_markers().await?;
    fleet.set_tables(Tables::read(store, markers).await?);
    let heartbeats = store.heartbeats_since(Timestamp::EPOCH).await?;
    fleet.apply_heartbeats(heartbeats);
    store
        .observed_objects(ObservedSource::Latest, Timestamp::EPOCH, |row| {
            fleet.apply_observed(&row);
        })
        .await?;
    Ok(fleet)
}

/// Inventory, membership, desired state and reasons as read at one moment, with the markers read
/// before them (so a change during the read is seen again at the next refresh).
#[derive(Debug)]
pub struct Tables {
    markers: ChangeMarkers,
    inventory: Vec<ClusterRow>,
    members: Vec<fleetscope_store::queries::CurrentMemberRow>,
    desired: Vec<DesiredRow>,
    reason_members: Vec<fleetscope_store::queries::CurrentReasonMemberRow>,
    reason_sets: Vec<ReasonSetRow>,
}

impl Tables {
    pub async fn read(store: &Store, markers: ChangeMarkers) -> fleetscope_store::Result<Tables> {
        Ok(Tables {
            markers,
            inventory: store.inventory_rows().await?,
            members: store.current_members().await?,
            desired: store.desired_rows().await?,
            reason_members: store.current_reason_members().await?,
            reason_sets: store.reason_set_rows().await?,
        })
    }
}

impl Fleet {
    /// Replaces inventory, membership, desired state and reasons.
    pub fn set_tables(&mut self, tables: Tables) {
        self.set_inventory(tables.inventory);
        self.set_membership(
            tables
                .members
                .into_iter()
                .map(|m| (m.cluster_id, m.render_group, m.removed != 0))
                .collect(),
        );
        self.set_desired(tables.desired);
        self.set_reason_membership(
            tables
                .reason_members
                .into_iter()
                .map(|m| (m.cluster_id, m.reason_set, m.removed != 0))
                .collect(),
        );
        self.set_reason_sets(tables.reason_sets);
        self.markers = Some(tables.markers);
    }
}

/// The fleet shared by the request handlers and the refresher.
#[derive(Debug)]
pub struct Index {
    store: Store,
    fleet: std::sync::RwLock<Fleet>,
    /// When the last complete read of observed state started: everything that arrived since
    /// then is in `observed_arrivals` while that is younger than the hours it keeps.
    observed_read_started: std::sync::Mutex<Option<Instant>>,
}

/// Where a refresh reads observed rows: from the arrivals when the last read is recent enough
/// that none of what came since can have been trimmed, otherwise (first read, or a hub that could
/// not reach the store for hours) the whole of `observed_latest`.
pub fn observed_source(last_read_started: Option<Instant>, now: Instant) -> ObservedSource {
    let window = Duration::from_secs(
        u64::try_from(fleetscope_store::retention::ARRIVALS_KEEP_HOURS - 1).unwrap_or(0) * 3_600,
    );
    match last_read_started {
        Some(started) if now.saturating_duration_since(started) < window => {
            ObservedSource::Arrivals
        }
        _ => ObservedSource::Latest,
    }
}

/// What one refresh read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refreshed {
    pub tables_reloaded: bool,
    /// Observed rows that changed the fleet (rows of the overlap already applied not counted).
    pub observed_rows: usize,
    pub heartbeat_rows: usize,
    pub generation: u64,
}

impl Index {
    /// Loads the whole fleet from `store`.
    pub async fn load(store: Store) -> fleetscope_store::Result<Index> {
        let started = Instant::now();
        let fleet = load(&store).await?;
        Ok(Index {
            store,
            fleet: std::sync::RwLock::new(fleet),
            observed_read_started: std::sync::Mutex::new(Some(started)),
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Runs `f` on the fleet as it is now.
    pub fn read<T>(&self, f: impl FnOnce(&Fleet) -> T) -> T {
        f(&self
            .fleet
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Reads what changed since the last refresh and applies it. Nothing is locked while the
    /// store is read.
    pub async fn refresh(&self) -> fleetscope_store::Result<Refreshed> {
        let (observed_since, heartbeats_since, known_markers) = self.read(|f| {
            (
                Timestamp(i64::from(f.observed_watermark) - OVERLAP_SECONDS),
                Timestamp(i64::from(f.heartbeat_watermark) - OVERLAP_SECONDS),
                f.markers,
            )
        });
        let markers = self.store.change_markers().await?;
        let tables = if known_markers != Some(markers) {
            Some(Tables::read(&self.store, markers).await?)
        } else {
            None
        };
        // Rows of the overlap that are already applied are dropped as they stream in: after a
        // resync storm the overlap holds millions of them.
        let mut observed = Vec::new();
        let mut newest_received = 0;
        let started = Instant::now();
        let last_read = *self
            .observed_read_started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let source = observed_source(last_read, started);
        self.store
            .observed_objects(source, observed_since, |row| {
                newest_received = newest_received.max(row.received_at);
                if self.read(|f| f.is_newer(&row)) {
                    observed.push(row);
                }
            })
            .await?;
        let heartbeats = self.store.heartbeats_since(heartbeats_since).await?;
        let mut fleet = self
            .fleet
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut refreshed = Refreshed {
            tables_reloaded: tables.is_some(),
            observed_rows: observed.len(),
            heartbeat_rows: heartbeats.len(),
            generation: 0,
        };
        if let Some(tables) = tables {
            fleet.set_tables(tables);
        }
        for row in &observed {
            fleet.apply_observed(row);
        }
        fleet.observed_watermark = fleet.observed_watermark.max(newest_received);
        *self
            .observed_read_started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(started);
        fleet.apply_heartbeats(heartbeats);
        refreshed.generation = fleet.generation;
        Ok(refreshed)
    }
}

#[cfg(test)]
mod refresh_tests {
    use super::*;

    #[test]
    fn refresh_reads_arrivals_only_after_a_recent_complete_read() {
        let now = Instant::now() + Duration::from_secs(24 * 3_600);
        assert_eq!(observed_source(None, now), ObservedSource::Latest);
        assert_eq!(
            observed_source(Some(now - Duration::from_secs(1)), now),
            ObservedSource::Arrivals
        );
        assert_eq!(
            observed_source(Some(now - Duration::from_secs(4 * 3_600)), now),
            ObservedSource::Arrivals
        );
        // Past what the arrivals keep (less an hour of margin): read everything again.
        assert_eq!(
            observed_source(Some(now - Duration::from_secs(5 * 3_600)), now),
            ObservedSource::Latest
        );
    }

    fn row(cluster: &str, name: &str, seq: u64) -> ObservedRow {
        ObservedRow {
            cluster_id: cluster.into(),
            object_kind: "HelmRelease".into(),
            object_namespace: "flux-system".into(),
            object_name: name.into(),
            app: name.into(),
            version: "1.0.0".into(),
            content_hash: String::new(),
            applied_revision: "1.0.0".into(),
            health: "healthy".into(),
            sync: "unknown".into(),
            reason: String::new(),
            message: String::new(),
            transitioned_at: 100,
            observed_at: 100,
            received_at: 100,
            seq,
            deleted: 0,
        }
    }

    #[test]
    fn ties_on_the_change_number_resolve_the_same_way_in_any_order() {
        let a = ObservedRow {
            version: "1.1.0".into(),
            ..row("c1", "checkout", 5)
        };
        let b = ObservedRow {
            version: "1.0.0".into(),
            health: "degraded".into(),
            ..row("c1", "checkout", 5)
        };
        let held = |rows: &[&ObservedRow]| {
            let mut fleet = Fleet::default();
            for r in rows {
                let expected = fleet.is_newer(r);
                assert_eq!(fleet.apply_observed(r), expected);
            }
            let object = fleet.clusters["c1"].objects[0];
            fleet.symbols.text(object.version).to_owned()
        };
        // Same number and arrival second: the content decides ("healthy" > "degraded").
        assert_eq!(held(&[&a, &b]), "1.1.0");
        assert_eq!(held(&[&b, &a]), "1.1.0");
        // Same number, later arrival: the later one.
        let later = ObservedRow {
            received_at: 101,
            ..b.clone()
        };
        assert_eq!(held(&[&a, &later]), "1.0.0");
        assert_eq!(held(&[&later, &a]), "1.0.0");
    }

    #[test]
    fn only_rows_that_would_change_the_fleet_are_newer() {
        let mut fleet = Fleet::default();
        assert!(fleet.is_newer(&row("c1", "checkout", 5)), "unknown cluster");
        assert!(fleet.apply_observed(&row("c1", "checkout", 5)));
        assert!(
            !fleet.is_newer(&row("c1", "checkout", 5)),
            "already applied"
        );
        assert!(!fleet.is_newer(&row("c1", "checkout", 4)), "older");
        assert!(fleet.is_newer(&row("c1", "checkout", 6)), "a later change");
        assert!(fleet.is_newer(&row("c1", "payments", 1)), "another object");
        assert!(fleet.is_newer(&row("c2", "checkout", 1)), "another cluster");
        assert!(!fleet.is_newer(&ObservedRow {
            object_kind: "Secret".into(),
            ..row("c1", "x", 9)
        }));
        // What is_newer says equals what apply_observed does.
        for (name, seq) in [("checkout", 5), ("checkout", 7), ("payments", 2)] {
            let r = row("c1", name, seq);
            let expected = fleet.is_newer(&r);
            assert_eq!(fleet.apply_observed(&r), expected, "{name} {seq}");
        }
    }
}
