//! The fleet in memory: inventory, render group membership, desired state per render group,
//! reason set membership and the reasons per reason set (why each app is desired: clusters of
//! one render group may have different reasons), the latest state of every app object, each
//! cluster's last heartbeat, and, kept current as all of that changes, every pair's drift state
//! and the counters per group ([`crate::rollups`]).
//!
//! Loaded whole from the store at start, then kept current: observed state and heartbeats by
//! what arrived since the last read (with an overlap, so rows that became visible late are not
//! missed), the small tables again whenever their change markers move. Time alone also changes
//! states (a cluster turns stale, a grace period runs out): every cluster has the next moment
//! at which one of its states could change ([`fleetscope_model::drift::next_change`]) in a timer
//! queue, and advancing the clock re-classifies just the clusters that came due.
//!
//! Readers never take the writer's lock: the writer publishes an immutable snapshot
//! ([`Fleet`]) after each change, sharing every unchanged cluster with the one before, and a
//! reader holds its snapshot for as long as it likes.
//!
//! Strings that repeat across the fleet are stored once ([`Symbols`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_model::drift::{
    classify, next_change, DesiredForDrift, DriftInput, ObservedForDrift,
};
use fleetscope_model::state::{Health, ObjectKind, SyncStatus};
use fleetscope_model::{DriftPolicy, DriftState, GroupPath, Timestamp};
use fleetscope_store::queries::{ArrivalHorizon, ChangeMarkers, ObservedSource};
use fleetscope_store::{
    ClusterRow, DesiredRow, HeartbeatRow, ObservedRef, ObservedRow, ReasonSetRow, SinceSetRow,
    Store,
};

use crate::rollups::{Cells, Counted, CountedPair, Side, ANY_ENVIRONMENT};
pub use crate::symbols::Symbols;

/// How far back each incremental read of observed state and heartbeats reaches before the
/// newest row already seen: rows are stamped when received but become visible when their
/// batch is inserted, up to a few seconds later.
pub const OVERLAP_SECONDS: i64 = 60;

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
fn supersedes(symbols: &Symbols, new: &Object, held: &Object) -> bool {
    let key = |o: &Object| {
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

/// The latest report of one app object (Flux Kustomization/HelmRelease, Argo CD Application),
/// as the API and the drift rules read it: [`ObjectParts::unpack`] makes it from an [`ObjectRec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object {
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

/// Which object a record is about: the same few hundred (kind, namespace, name, app) recur on
/// every cluster, so records hold the number of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub kind: ObjectKind,
    pub namespace: u32,
    pub name: u32,
    pub app: u32,
}

/// What a report says, but for its message and times: the clusters running one release in one
/// state say the same, so records hold the number of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectStatus {
    pub version: u32,
    pub content_hash: u32,
    pub revision: u32,
    pub reason: u32,
    /// The reconciler's message says the same as the rest on the clusters of one release and
    /// state ("Applied revision: …"), so it is numbered with them.
    pub message: u32,
    pub health: Health,
    pub sync: SyncStatus,
    pub deleted: bool,
}

/// One object's latest report as the fleet holds it, one per app object: 28 bytes (an assertion
/// below holds it to that), every text a number into the fleet's tables. The change number is kept as
/// two halves so that the record aligns to 4 bytes, which lets a cluster's records fit a
/// smaller allocation (docs/benchmarks.md has the memory this saves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRec {
    key: u32,
    status: u32,
    transitioned_at: u32,
    observed_at: u32,
    received_at: u32,
    seq: [u32; 2],
}

// The figure the docs give, and what the fleet's memory is planned on.
const _: () = assert!(size_of::<ObjectRec>() == 28);

/// `seq` as an [`ObjectRec`] holds it: high half first.
fn split_seq(seq: u64) -> [u32; 2] {
    [(seq >> 32) as u32, seq as u32]
}

fn join_seq([high, low]: [u32; 2]) -> u64 {
    (u64::from(high) << 32) | u64::from(low)
}

/// The tables of [`ObjectKey`]s and [`ObjectStatus`]es that records refer to; shared, like
/// [`Symbols`], by every snapshot.
#[derive(Debug, Clone, Default)]
pub struct ObjectParts {
    keys: crate::symbols::Interner<ObjectKey>,
    statuses: crate::symbols::Interner<ObjectStatus>,
}

impl ObjectParts {
    fn pack(&self, o: &Object) -> ObjectRec {
        ObjectRec {
            key: self.keys.intern(ObjectKey {
                kind: o.kind,
                namespace: o.namespace,
                name: o.name,
                app: o.app,
            }),
            status: self.statuses.intern(ObjectStatus {
                version: o.version,
                content_hash: o.content_hash,
                revision: o.revision,
                reason: o.reason,
                message: o.message,
                health: o.health,
                sync: o.sync,
                deleted: o.deleted,
            }),
            transitioned_at: o.transitioned_at,
            observed_at: o.observed_at,
            received_at: o.received_at,
            seq: split_seq(o.seq),
        }
    }

    /// Which object `rec` is about.
    pub fn key(&self, rec: &ObjectRec) -> &ObjectKey {
        self.keys.get(rec.key)
    }

    /// The whole of `rec`.
    pub fn unpack(&self, rec: &ObjectRec) -> Object {
        let key = self.keys.get(rec.key);
        let status = self.statuses.get(rec.status);
        Object {
            kind: key.kind,
            namespace: key.namespace,
            name: key.name,
            app: key.app,
            version: status.version,
            content_hash: status.content_hash,
            revision: status.revision,
            health: status.health,
            sync: status.sync,
            reason: status.reason,
            message: status.message,
            transitioned_at: rec.transitioned_at,
            observed_at: rec.observed_at,
            received_at: rec.received_at,
            seq: join_seq(rec.seq),
            deleted: status.deleted,
        }
    }

    /// The sort key of a cluster's objects.
    fn order(&self, rec: &ObjectRec) -> (&'static str, u32, u32) {
        let key = self.keys.get(rec.key);
        (key.kind.as_str(), key.namespace, key.name)
    }
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

/// One cluster: its inventory entry (if registered), membership, last heartbeat, objects, and
/// what it is counted as.
#[derive(Debug, Clone, Default)]
pub struct ClusterRec {
    /// `None` until the cluster is in the inventory; only inventory clusters have pairs.
    pub info: Option<Arc<ClusterInfo>>,
    pub render_group: Option<u32>,
    /// The render of its membership row: the render that put it in its render group.
    pub member_render: u64,
    /// The since set of that membership row, if it has one: when apps became desired for this
    /// cluster, where that differs from its render group's rows ([`Fleet::desired_since`]).
    pub since_set: Option<u32>,
    /// Its reason set, when the renderer published one.
    pub reason_set: Option<u32>,
    pub last_seen: Option<u32>,
    pub agent_version: Option<u32>,
    /// Sorted by (kind, namespace, name). Shared with the snapshots until the objects change.
    pub objects: Arc<Vec<ObjectRec>>,
    /// Its pairs' drift states and its staleness at the fleet's `as_of`, as added to the
    /// counters; `None` for clusters outside the inventory. Replaced, never changed in place.
    pub counted: Option<Arc<Counted>>,
    /// When one of its states could next change with time alone.
    deadline: Option<i64>,
}

impl ClusterRec {
    /// The maintained state of the pair of `app`, if the cluster has that pair.
    pub fn state_of(&self, app: u32) -> Option<DriftState> {
        self.counted.as_ref()?.pair(app).map(|p| p.state())
    }

    /// Whether the cluster counts as stale at the fleet's `as_of`.
    pub fn is_stale_now(&self) -> bool {
        self.counted.as_ref().is_some_and(|c| c.stale)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    pub group: GroupPath,
    /// The group's prefixes (shortest first) as symbols, for rollups.
    pub prefixes: Vec<u32>,
    pub environment: u32,
    pub reconciler: u32,
    /// The labels as (key, value) symbols sorted by key symbol: 8 bytes a label, each text
    /// held once in the symbol table however many clusters carry it, and the list shared by
    /// every cluster with the same labels. (Labels that differ per cluster, such as the id the
    /// renderer adds to every cluster, made a map per cluster cost about 600 bytes.)
    labels: Arc<[(u32, u32)]>,
}

impl ClusterInfo {
    /// The value of label `key`, if the cluster has it.
    pub fn label<'a>(&self, key: &str, symbols: &'a Symbols) -> Option<&'a str> {
        let key = symbols.find(key)?;
        self.labels
            .binary_search_by_key(&key, |(k, _)| *k)
            .ok()
            .map(|at| symbols.text(self.labels[at].1))
    }

    /// Every label of the cluster as (key, value) symbols, sorted by key symbol.
    pub fn label_symbols(&self) -> &[(u32, u32)] {
        &self.labels
    }

    /// Every label of the cluster, by key.
    pub fn labels(&self, symbols: &Symbols) -> BTreeMap<String, String> {
        self.labels
            .iter()
            .map(|(k, v)| (symbols.text(*k).to_owned(), symbols.text(*v).to_owned()))
            .collect()
    }
}

/// A (cluster, app) pair, classified.
#[derive(Debug, Clone, Copy)]
pub struct Pair<'a> {
    pub app: u32,
    pub desired: Option<&'a DesiredRec>,
    /// When the desired version and content became desired for this cluster
    /// ([`Fleet::desired_since`]); `None` when not desired.
    pub desired_since: Option<u32>,
    pub observed: Option<Object>,
    pub state: DriftState,
}

/// Version → (clusters, group → clusters).
pub type VersionsByGroup = BTreeMap<String, (u64, BTreeMap<String, u64>)>;

/// App → environment → (desired version → clusters, running version → clusters).
pub type EnvironmentTable =
    BTreeMap<String, BTreeMap<String, (BTreeMap<String, u64>, BTreeMap<String, u64>)>>;

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

impl Filter {
    /// The one subtree that every group of the filter contains, `Some(None)` when there is
    /// none to apply, and `None` when two of them are disjoint (nothing is selected).
    pub fn narrowest_group(&self) -> Option<Option<&GroupPath>> {
        let mut narrowest: Option<&GroupPath> = None;
        for g in &self.groups {
            narrowest = match narrowest {
                None => Some(g),
                Some(n) if g.is_within(n) => Some(g),
                Some(n) if n.is_within(g) => Some(n),
                Some(_) => return None,
            };
        }
        Some(narrowest)
    }
}

/// Records per chunk of [`Clusters`]: a snapshot shares whole chunks, and changing one record
/// copies the pointers of its chunk only.
const CHUNK: usize = 256;

/// The clusters by id: ids in order, each with its record. Cloning shares every record, and
/// costs a pointer per [`CHUNK`] clusters, not one per cluster.
#[derive(Debug, Clone, Default)]
pub struct Clusters {
    slots: Arc<BTreeMap<Arc<str>, u32>>,
    /// Records by slot, [`CHUNK`] to a chunk.
    chunks: Vec<Arc<Vec<Arc<ClusterRec>>>>,
    /// Ids by slot, [`CHUNK`] to a chunk.
    ids: Vec<Arc<Vec<Arc<str>>>>,
    len: usize,
}

fn chunk_of(slot: u32) -> (usize, usize) {
    (slot as usize / CHUNK, slot as usize % CHUNK)
}

impl Clusters {
    pub fn get(&self, id: &str) -> Option<&ClusterRec> {
        self.slots.get(id).map(|slot| self.rec(*slot))
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.slots.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every cluster, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ClusterRec)> + '_ {
        self.slots.iter().map(|(id, slot)| (&**id, self.rec(*slot)))
    }

    /// The clusters from `first` on (included), by id.
    pub fn iter_from<'a>(
        &'a self,
        first: &str,
    ) -> impl Iterator<Item = (&'a str, &'a ClusterRec)> + 'a {
        self.slots
            .range::<str, _>((std::ops::Bound::Included(first), std::ops::Bound::Unbounded))
            .map(|(id, slot)| (&**id, self.rec(*slot)))
    }

    pub fn values(&self) -> impl Iterator<Item = &ClusterRec> + '_ {
        self.iter().map(|(_, c)| c)
    }

    fn slot(&self, id: &str) -> Option<u32> {
        self.slots.get(id).copied()
    }

    /// The slot of `id`, added empty when it is new.
    fn slot_or_add(&mut self, id: &str) -> u32 {
        if let Some(slot) = self.slot(id) {
            return slot;
        }
        let slot = u32::try_from(self.len).expect("fewer than 4 billion clusters");
        let id: Arc<str> = Arc::from(id);
        Arc::make_mut(&mut self.slots).insert(id.clone(), slot);
        let (chunk, _) = chunk_of(slot);
        if chunk == self.chunks.len() {
            self.chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
            self.ids.push(Arc::new(Vec::with_capacity(CHUNK)));
        }
        Arc::make_mut(&mut self.chunks[chunk]).push(Arc::default());
        Arc::make_mut(&mut self.ids[chunk]).push(id);
        self.len += 1;
        slot
    }

    fn rec(&self, slot: u32) -> &ClusterRec {
        let (chunk, at) = chunk_of(slot);
        &self.chunks[chunk][at]
    }

    fn id(&self, slot: u32) -> &Arc<str> {
        let (chunk, at) = chunk_of(slot);
        &self.ids[chunk][at]
    }

    /// Gives back the spare capacity of the cluster's objects (inserting them one by one left
    /// up to half of it unused), where the writer holds the only copy.
    fn trim(&mut self, slot: u32) {
        let (chunk, at) = chunk_of(slot);
        if let Some(objects) = Arc::get_mut(&mut self.chunks[chunk])
            .and_then(|chunk| Arc::get_mut(&mut chunk[at]))
            .and_then(|rec| Arc::get_mut(&mut rec.objects))
        {
            objects.shrink_to_fit();
        }
    }

    fn rec_mut(&mut self, slot: u32) -> &mut ClusterRec {
        let (chunk, at) = chunk_of(slot);
        Arc::make_mut(&mut Arc::make_mut(&mut self.chunks[chunk])[at])
    }
}

impl std::ops::Index<&str> for Clusters {
    type Output = ClusterRec;

    fn index(&self, id: &str) -> &ClusterRec {
        self.get(id).expect("a known cluster")
    }
}

/// What only the writer needs: clusters whose states must be worked out again, and every
/// cluster's next deadline in time order.
#[derive(Debug, Default)]
struct Upkeep {
    dirty: BTreeSet<u32>,
    timers: BTreeSet<(i64, u32)>,
    /// The distinct label lists of the inventory, each held once.
    label_sets: HashSet<Arc<[(u32, u32)]>>,
}

/// Everything the hub knows, at one moment. The writer's copy changes; what readers get is a
/// [`Fleet::snapshot`], which never changes.
#[derive(Debug, Default)]
pub struct Fleet {
    pub symbols: Symbols,
    /// What the objects' records refer to.
    pub parts: ObjectParts,
    pub clusters: Clusters,
    /// Render group symbol → desired apps, sorted by app symbol.
    pub desired: Arc<HashMap<u32, Vec<DesiredRec>>>,
    /// Reason set symbol → why each app is desired, sorted by app symbol.
    pub reasons: Arc<HashMap<u32, Vec<ReasonRec>>>,
    /// Since set symbol → (app symbol, desired since), sorted by app symbol.
    pub since_sets: Arc<HashMap<u32, Vec<(u32, u32)>>>,
    pub markers: Option<ChangeMarkers>,
    /// The newest `received_at` of observed rows read so far.
    pub observed_watermark: u32,
    /// The newest `seen_at` of heartbeats read so far.
    pub heartbeat_watermark: u32,
    /// Moves whenever anything changed, the clock's effects included; caches key on it.
    pub generation: u64,
    pub objects: usize,
    /// The thresholds the maintained states use.
    pub policy: DriftPolicy,
    /// The moment every maintained state and counter is right for.
    pub as_of: Timestamp,
    /// The earliest deadline of any cluster when the snapshot was taken: the maintained states
    /// are right from `as_of` until just before it.
    pub valid_until: i64,
    /// Counters per (group prefix, environment).
    cells: Arc<Cells>,
    /// The slots of the clusters counted stale at `as_of`, kept with their counted states so
    /// that listing them passes over these only.
    stale: Arc<BTreeSet<u32>>,
    upkeep: Upkeep,
}

impl Fleet {
    /// An immutable copy for readers, sharing every cluster record with the writer's copy.
    pub fn snapshot(&self) -> Fleet {
        debug_assert!(self.upkeep.dirty.is_empty(), "settle before a snapshot");
        Fleet {
            symbols: self.symbols.clone(),
            parts: self.parts.clone(),
            clusters: self.clusters.clone(),
            desired: self.desired.clone(),
            reasons: self.reasons.clone(),
            since_sets: self.since_sets.clone(),
            markers: self.markers,
            observed_watermark: self.observed_watermark,
            heartbeat_watermark: self.heartbeat_watermark,
            generation: self.generation,
            objects: self.objects,
            policy: self.policy,
            as_of: self.as_of,
            valid_until: self.upkeep.timers.first().map_or(i64::MAX, |(t, _)| *t),
            cells: self.cells.clone(),
            stale: self.stale.clone(),
            upkeep: Upkeep::default(),
        }
    }

    /// Whether the maintained states are right at `now` under `policy`.
    pub fn valid_at(&self, now: Timestamp, policy: &DriftPolicy) -> bool {
        self.policy == *policy && now >= self.as_of && now.seconds() < self.valid_until
    }

    /// The clusters counted stale at `as_of`, in no particular order.
    pub fn stale_clusters(&self) -> impl Iterator<Item = (&str, &ClusterRec)> + '_ {
        self.stale
            .iter()
            .map(|slot| (&**self.clusters.id(*slot), self.clusters.rec(*slot)))
    }

    /// The counters of one (group prefix, environment) cell; `None` when it counts nothing.
    pub fn cell(&self, prefix: &str, environment: Option<&str>) -> Option<&crate::rollups::Cell> {
        let prefix = self.symbols.find(prefix)?;
        let environment = match environment {
            Some(e) => self.symbols.find(e)?,
            None => ANY_ENVIRONMENT,
        };
        self.cells.get(&(prefix, environment)).map(|c| &**c)
    }

    /// Every cell with the texts of its prefix and environment (`None`: all environments).
    pub fn cells(&self) -> impl Iterator<Item = (&str, Option<&str>, &crate::rollups::Cell)> + '_ {
        self.cells.iter().map(|((p, e), cell)| {
            (
                self.symbols.text(*p),
                (*e != ANY_ENVIRONMENT).then(|| self.symbols.text(*e)),
                &**cell,
            )
        })
    }

    fn touch(&mut self, slot: u32) {
        self.upkeep.dirty.insert(slot);
    }

    fn touch_all(&mut self) {
        let n = u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters");
        self.upkeep.dirty.extend(0..n);
    }

    /// Replaces the inventory with `rows` (the current row per cluster).
    pub fn set_inventory(&mut self, rows: Vec<ClusterRow>) {
        let mut wanted: HashMap<String, ClusterInfo> = HashMap::with_capacity(rows.len());
        // The label sets this inventory uses, the ones already held taken over.
        let mut label_sets: HashSet<Arc<[(u32, u32)]>> = HashSet::new();
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
            let mut labels: Vec<(u32, u32)> = row
                .label_keys
                .iter()
                .zip(&row.label_values)
                .map(|(k, v)| (self.symbols.intern(k), self.symbols.intern(v)))
                .collect();
            labels.sort_unstable();
            labels.dedup_by_key(|(k, _)| *k);
            let labels: Arc<[(u32, u32)]> = match label_sets
                .get(&labels[..])
                .or_else(|| self.upkeep.label_sets.get(&labels[..]))
            {
                Some(held) => held.clone(),
                None => labels.into(),
            };
            label_sets.insert(labels.clone());
            wanted.insert(
                row.cluster_id,
                ClusterInfo {
                    group,
                    prefixes,
                    environment,
                    reconciler,
                    labels,
                },
            );
        }
        for slot in 0..u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters") {
            let id = self.clusters.id(slot).clone();
            let info = wanted.remove(&*id);
            if self.clusters.rec(slot).info.as_deref() != info.as_ref() {
                self.clusters.rec_mut(slot).info = info.map(Arc::new);
                self.touch(slot);
            }
        }
        for (id, info) in wanted {
            let slot = self.clusters.slot_or_add(&id);
            self.clusters.rec_mut(slot).info = Some(Arc::new(info));
            self.touch(slot);
        }
        self.upkeep.label_sets = label_sets;
        self.generation += 1;
    }

    /// Sets one value of every cluster from `wanted` (cluster → value), clusters not listed
    /// getting `absent`; touches the clusters whose value changed when `drift` says the value
    /// matters to drift.
    fn assign<T: Copy + PartialEq>(
        &mut self,
        mut wanted: HashMap<String, T>,
        absent: T,
        get: fn(&ClusterRec) -> T,
        put: fn(&mut ClusterRec, T),
        drift: bool,
    ) {
        for slot in 0..u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters") {
            let id = self.clusters.id(slot).clone();
            let value = wanted.remove(&*id).unwrap_or(absent);
            if get(self.clusters.rec(slot)) != value {
                put(self.clusters.rec_mut(slot), value);
                if drift {
                    self.touch(slot);
                }
            }
        }
        for (id, value) in wanted {
            let slot = self.clusters.slot_or_add(&id);
            put(self.clusters.rec_mut(slot), value);
            if drift {
                self.touch(slot);
            }
        }
        self.generation += 1;
    }

    /// Sets one symbol field of every cluster from `rows` (`(cluster, value, removed)`), as
    /// [`Fleet::assign`] does.
    fn set_field(
        &mut self,
        rows: Vec<(String, String, bool)>,
        get: fn(&ClusterRec) -> Option<u32>,
        put: fn(&mut ClusterRec, Option<u32>),
        drift: bool,
    ) {
        let mut wanted = HashMap::with_capacity(rows.len());
        for (cluster, value, removed) in rows {
            if !removed {
                wanted.insert(cluster, Some(self.symbols.intern(&value)));
            }
        }
        self.assign(wanted, None, get, put, drift);
    }

    /// Replaces membership with `(cluster, render group, removed)` rows.
    pub fn set_membership(&mut self, rows: Vec<(String, String, bool)>) {
        self.set_field(rows, |c| c.render_group, |c, v| c.render_group = v, true);
    }

    /// Sets each cluster's membership render and since set from `(cluster, render, since set or
    /// "", removed)` rows, clusters not listed getting none; clusters whose value changed are
    /// classified again.
    pub fn set_member_since(&mut self, rows: Vec<(String, u64, String, bool)>) {
        let mut wanted = HashMap::with_capacity(rows.len());
        for (cluster, render, set, removed) in rows {
            if !removed {
                let set = (!set.is_empty()).then(|| self.symbols.intern(&set));
                wanted.insert(cluster, (render, set));
            }
        }
        self.assign(
            wanted,
            (0, None),
            |c| (c.member_render, c.since_set),
            |c, (render, set)| (c.member_render, c.since_set) = (render, set),
            true,
        );
    }

    /// Replaces the since sets; the clusters of a set whose content changed are classified
    /// again (a set's name is a hash of its content, so that happens only to a set read half).
    pub fn set_since_sets(&mut self, rows: Vec<SinceSetRow>) {
        let mut sets: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
        for row in rows {
            let set = self.symbols.intern(&row.since_set);
            let app = self.symbols.intern(&row.app);
            sets.entry(set).or_default().push((app, row.desired_since));
        }
        for entries in sets.values_mut() {
            entries.sort_unstable();
            entries.dedup_by_key(|(app, _)| *app);
        }
        let changed: HashSet<u32> = self
            .since_sets
            .iter()
            .filter(|(set, entries)| sets.get(set) != Some(entries))
            .map(|(set, _)| *set)
            .collect();
        if !changed.is_empty() {
            for slot in
                0..u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters")
            {
                if self
                    .clusters
                    .rec(slot)
                    .since_set
                    .is_some_and(|s| changed.contains(&s))
                {
                    self.touch(slot);
                }
            }
        }
        self.since_sets = Arc::new(sets);
        self.generation += 1;
    }

    /// When `desired`, a row of `cluster`'s render group, became desired for `cluster`: the
    /// time in the cluster's since set when the row is not newer than the cluster's membership
    /// and the set has the app, else the row's own. The one rule of docs/data-model.md
    /// ("Desired since"), which the store's SQL applies too.
    pub fn desired_since(&self, cluster: &ClusterRec, desired: &DesiredRec) -> u32 {
        if desired.render_id <= cluster.member_render {
            if let Some(entries) = cluster.since_set.and_then(|s| self.since_sets.get(&s)) {
                if let Ok(at) = entries.binary_search_by_key(&desired.app, |(app, _)| *app) {
                    return entries[at].1;
                }
            }
        }
        desired.since
    }

    /// Replaces reason set membership with `(cluster, reason set, removed)` rows.
    pub fn set_reason_membership(&mut self, rows: Vec<(String, String, bool)>) {
        self.set_field(rows, |c| c.reason_set, |c, v| c.reason_set = v, false);
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
        self.reasons = Arc::new(reasons);
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

    /// Replaces desired state with the current row per (render group, app). Only the clusters
    /// of render groups whose desired state changed are classified again.
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
        let changed: HashSet<u32> = desired
            .iter()
            .filter(|(g, apps)| self.desired.get(g) != Some(apps))
            .map(|(g, _)| *g)
            .chain(
                self.desired
                    .keys()
                    .filter(|g| !desired.contains_key(g))
                    .copied(),
            )
            .collect();
        if !changed.is_empty() {
            for slot in
                0..u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters")
            {
                if self
                    .clusters
                    .rec(slot)
                    .render_group
                    .is_some_and(|g| changed.contains(&g))
                {
                    self.touch(slot);
                }
            }
        }
        self.desired = Arc::new(desired);
        self.generation += 1;
    }

    /// Takes one observed row: it replaces the object's record when its `seq` is newer.
    /// Returns whether anything changed.
    pub fn apply_observed(&mut self, row: &ObservedRow) -> bool {
        self.observed_watermark = self.observed_watermark.max(row.received_at);
        self.apply_object(row)
    }

    /// [`Fleet::apply_observed`] without moving the watermark: for a refresh, which applies
    /// rows while it reads and moves the watermark only once the whole read succeeded (a reader
    /// may publish the writer's fleet between two rows, and a read that fails half way must
    /// leave the overlap where it was).
    fn apply_object(&mut self, row: &ObservedRow) -> bool {
        match self.prepare_object(&row.borrowed()) {
            Some((slot, new)) => self.place_object(slot, new),
            None => false,
        }
    }

    /// Takes one of many observed rows, in any order, through `staged`: the row is interned
    /// into its cluster slot and object at once, and the staged objects are placed, sorted by
    /// cluster, when `staged` is full (and by [`Fleet::place_staged`] after the last row).
    /// Rows read in the order they arrived touch a random cluster each; sorted, a cluster's
    /// objects are found in memory the row before brought in. The outcome equals
    /// [`Fleet::apply_observed`] of each row, as a row replaces an object only when it is
    /// newer, in whatever order it comes.
    pub fn stage_observed(&mut self, row: &ObservedRef<'_>, staged: &mut Staged) {
        self.observed_watermark = self.observed_watermark.max(row.received_at);
        if let Some(kind) = ObjectKind::parse(row.object_kind) {
            let memo = &mut staged.memo;
            let object = object_of(&self.symbols, kind, row, &mut |symbols, text| {
                memo.intern(symbols, text)
            });
            // Rows of one cluster come together from a checkpoint.
            let slot = match &staged.last_cluster {
                Some((id, slot)) if **id == *row.cluster_id => *slot,
                _ => {
                    let slot = self.clusters.slot_or_add(row.cluster_id);
                    staged.last_cluster = Some((self.clusters.id(slot).clone(), slot));
                    slot
                }
            };
            staged.objects.push((slot, object));
        }
        if staged.objects.len() >= staged.limit {
            self.place_staged(staged);
        }
    }

    /// Places the objects [`Fleet::stage_observed`] left in `staged`, sorted by cluster, and
    /// empties it.
    pub fn place_staged(&mut self, staged: &mut Staged) {
        staged
            .objects
            .sort_unstable_by_key(|(slot, object)| (*slot, object.namespace, object.name));
        for (slot, object) in staged.objects.drain(..) {
            self.place_object(slot, object);
        }
    }

    /// The cluster slot and the interned object of an observed row (`None` for a kind this
    /// build does not know).
    fn prepare_object(&mut self, row: &ObservedRef<'_>) -> Option<(u32, Object)> {
        let kind = ObjectKind::parse(row.object_kind)?;
        let new = object_of(&self.symbols, kind, row, &mut |symbols, text| {
            symbols.intern(text)
        });
        Some((self.clusters.slot_or_add(row.cluster_id), new))
    }

    /// Makes the object of an observed row on any thread, its texts (the cluster id too)
    /// numbered in `symbols`, the fleet's table (shared by its clones), into `made`; the fleet
    /// takes it with [`Fleet::stage_made`].
    pub fn make_object(
        symbols: &Symbols,
        memo: &mut crate::symbols::InternMemo,
        row: &ObservedRef<'_>,
        made: &mut Made,
    ) {
        made.received = made.received.max(row.received_at);
        if let Some(kind) = ObjectKind::parse(row.object_kind) {
            let object = object_of(symbols, kind, row, &mut |s, text| memo.intern(s, text));
            made.objects
                .push((memo.intern(symbols, row.cluster_id), object));
        }
    }

    /// Stages the objects [`Fleet::make_object`] made with this fleet's symbols, as
    /// [`Fleet::stage_observed`] stages rows.
    pub fn stage_made(&mut self, made: Made, staged: &mut Staged) {
        self.observed_watermark = self.observed_watermark.max(made.received);
        for (cluster, object) in made.objects {
            let slot = match staged.slots_by_symbol.get(&cluster) {
                Some(slot) => *slot,
                None => {
                    let slot = self.clusters.slot_or_add(self.symbols.text(cluster));
                    staged.slots_by_symbol.insert(cluster, slot);
                    slot
                }
            };
            staged.objects.push((slot, object));
            if staged.objects.len() >= staged.limit {
                self.place_staged(staged);
            }
        }
    }

    /// Puts `new` in its cluster's objects when it is newer than the record held.
    fn place_object(&mut self, slot: u32, new: Object) -> bool {
        let key = (new.kind.as_str(), new.namespace, new.name);
        let parts = &self.parts;
        let found = self
            .clusters
            .rec(slot)
            .objects
            .binary_search_by(|o| parts.order(o).cmp(&key));
        match found {
            Ok(at) => {
                let held = parts.unpack(&self.clusters.rec(slot).objects[at]);
                if !supersedes(&self.symbols, &new, &held) {
                    return false;
                }
                let rec = parts.pack(&new);
                Arc::make_mut(&mut self.clusters.rec_mut(slot).objects)[at] = rec;
            }
            Err(at) => {
                let rec = parts.pack(&new);
                Arc::make_mut(&mut self.clusters.rec_mut(slot).objects).insert(at, rec);
                self.objects += 1;
            }
        }
        self.touch(slot);
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
            .binary_search_by(|o| self.parts.order(o).cmp(&key))
        {
            Ok(at) => {
                let held = self.parts.unpack(&cluster.objects[at]);
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
            let slot = self.clusters.slot_or_add(&row.cluster_id);
            if self
                .clusters
                .rec(slot)
                .last_seen
                .is_none_or(|seen| seen < row.seen_at)
            {
                let cluster = self.clusters.rec_mut(slot);
                cluster.last_seen = Some(row.seen_at);
                cluster.agent_version = Some(agent);
                self.touch(slot);
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

    /// Every (cluster, app) pair of one cluster, unclassified, sorted by app symbol. Only
    /// clusters of the inventory have pairs. Of several live objects stamped with one app, the
    /// most recently reported counts.
    fn raw_pairs<'a>(
        &'a self,
        cluster: &'a ClusterRec,
    ) -> Vec<(u32, Option<&'a DesiredRec>, Option<Object>)> {
        if cluster.info.is_none() {
            return Vec::new();
        }
        let desired: &[DesiredRec] = cluster
            .render_group
            .and_then(|g| self.desired.get(&g))
            .map_or(&[], Vec::as_slice);
        let mut observed: Vec<Object> = Vec::new();
        for object in cluster.objects.iter() {
            let object = self.parts.unpack(object);
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
            pairs.push(match (desired.get(d), observed.get(o)) {
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
            });
        }
        pairs
    }

    /// Every pair of one cluster classified from scratch at `now`, sorted by app name: the
    /// reference the maintained states are held equal to.
    pub fn pairs<'a>(
        &'a self,
        cluster: &'a ClusterRec,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> Vec<Pair<'a>> {
        let mut pairs: Vec<Pair<'a>> = self
            .raw_pairs(cluster)
            .into_iter()
            .map(|(app, desired, observed)| Pair {
                app,
                desired,
                desired_since: desired.map(|d| self.desired_since(cluster, d)),
                observed,
                state: self.classify(cluster, desired, observed.as_ref(), now, policy),
            })
            .collect();
        pairs.sort_by(|a, b| self.symbols.text(a.app).cmp(self.symbols.text(b.app)));
        pairs
    }

    /// Every pair of one cluster with its maintained state (right at `as_of`), sorted by app
    /// name.
    pub fn current_pairs<'a>(&'a self, cluster: &'a ClusterRec) -> Vec<Pair<'a>> {
        let mut pairs: Vec<Pair<'a>> = self
            .raw_pairs(cluster)
            .into_iter()
            .map(|(app, desired, observed)| Pair {
                app,
                desired,
                desired_since: desired.map(|d| self.desired_since(cluster, d)),
                observed,
                state: cluster.state_of(app).unwrap_or(DriftState::Unknown),
            })
            .collect();
        pairs.sort_by(|a, b| self.symbols.text(a.app).cmp(self.symbols.text(b.app)));
        pairs
    }

    /// The desired and observed side of one cluster's pair of `app` (a symbol); `None` when the
    /// app is neither desired nor observed there. The same rules as [`Fleet::pairs`], for one app.
    fn raw_pair<'a>(
        &'a self,
        cluster: &'a ClusterRec,
        app: u32,
    ) -> Option<(Option<&'a DesiredRec>, Option<Object>)> {
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
            .filter(|o| {
                let key = self.parts.key(o);
                key.app == app && key.kind.is_app_object()
            })
            .map(|o| self.parts.unpack(o))
            .filter(|o| !o.deleted)
            .max_by_key(|o| o.seq);
        if desired.is_none() && observed.is_none() {
            return None;
        }
        Some((desired, observed))
    }

    /// The pair of one cluster and one app (by symbol) classified from scratch at `now`.
    pub fn pair<'a>(
        &'a self,
        cluster: &'a ClusterRec,
        app: u32,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> Option<Pair<'a>> {
        let (desired, observed) = self.raw_pair(cluster, app)?;
        Some(Pair {
            app,
            desired,
            desired_since: desired.map(|d| self.desired_since(cluster, d)),
            observed,
            state: self.classify(cluster, desired, observed.as_ref(), now, policy),
        })
    }

    /// The pair of one cluster and one app (by symbol) with its maintained state.
    pub fn current_pair<'a>(&'a self, cluster: &'a ClusterRec, app: u32) -> Option<Pair<'a>> {
        let (desired, observed) = self.raw_pair(cluster, app)?;
        Some(Pair {
            app,
            desired,
            desired_since: desired.map(|d| self.desired_since(cluster, d)),
            observed,
            state: cluster.state_of(app).unwrap_or(DriftState::Unknown),
        })
    }

    fn drift_input<'a>(
        &'a self,
        cluster: &ClusterRec,
        desired: Option<&DesiredRec>,
        observed: Option<&Object>,
        now: Timestamp,
    ) -> DriftInput<'a> {
        DriftInput {
            now,
            last_seen: cluster.last_seen.map(|s| Timestamp(i64::from(s))),
            desired: desired.map(|w| DesiredForDrift {
                version: self.symbols.text(w.version),
                content_hash: self.symbols.text(w.content_hash),
                since: Timestamp(i64::from(self.desired_since(cluster, w))),
            }),
            observed: observed.map(|h| ObservedForDrift {
                version: self.symbols.text(h.version),
                content_hash: self.symbols.text(h.content_hash),
                health: h.health,
                sync: h.sync,
                transitioned_at: Timestamp(i64::from(h.transitioned_at)),
            }),
        }
    }

    /// The model's drift classification of one pair of `cluster`.
    fn classify(
        &self,
        cluster: &ClusterRec,
        desired: Option<&DesiredRec>,
        observed: Option<&Object>,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> DriftState {
        classify(&self.drift_input(cluster, desired, observed, now), policy)
    }

    /// What `cluster` is counted as at `as_of`, and when that could next change with time.
    fn counted_of(&self, cluster: &ClusterRec) -> (Option<Counted>, Option<i64>) {
        let Some(info) = &cluster.info else {
            return (None, None);
        };
        let now = self.as_of;
        let policy = &self.policy;
        let fleet = self
            .symbols
            .find("")
            .expect("the fleet's symbol is interned at the start");
        let mut deadline = cluster.last_seen.map(|seen| {
            Timestamp(i64::from(seen))
                .plus_seconds(policy.stale_after_seconds)
                .plus_seconds(1)
        });
        let mut pairs = Vec::new();
        for (app, desired, observed) in self.raw_pairs(cluster) {
            let input = self.drift_input(cluster, desired, observed.as_ref(), now);
            if let Some(t) = next_change(&input, policy) {
                deadline = Some(deadline.map_or(t, |d| d.min(t)));
            }
            pairs.push(CountedPair::new(
                app,
                classify(&input, policy),
                desired.map(|d| d.version),
                observed.map(|o| o.version),
            ));
        }
        let counted = Counted::new(
            std::iter::once(fleet)
                .chain(info.prefixes.iter().copied())
                .collect(),
            info.environment,
            Fleet::is_stale(cluster, now, policy),
            pairs,
            cluster.counted.as_deref(),
        );
        (
            Some(counted),
            deadline
                .map(Timestamp::seconds)
                .filter(|t| *t > now.seconds()),
        )
    }

    /// Works out the states of `slot` again at `as_of`, moves the counters by the difference
    /// and sets its timer.
    fn recount(&mut self, slot: u32) {
        let (counted, deadline) = self.counted_of(self.clusters.rec(slot));
        let cluster = self.clusters.rec(slot);
        if let Some(old) = cluster.deadline {
            self.upkeep.timers.remove(&(old, slot));
        }
        if let Some(new) = deadline {
            self.upkeep.timers.insert((new, slot));
        }
        let changed = cluster.counted.as_deref() != counted.as_ref();
        if changed {
            crate::rollups::replace(
                Arc::make_mut(&mut self.cells),
                cluster.counted.as_deref(),
                counted.as_ref(),
            );
            let was_stale = cluster.counted.as_ref().is_some_and(|c| c.stale);
            let is_stale = counted.as_ref().is_some_and(|c| c.stale);
            if was_stale != is_stale {
                let stale = Arc::make_mut(&mut self.stale);
                if is_stale {
                    stale.insert(slot);
                } else {
                    stale.remove(&slot);
                }
            }
            self.generation += 1;
        }
        if changed || cluster.deadline != deadline {
            let cluster = self.clusters.rec_mut(slot);
            cluster.deadline = deadline;
            if changed {
                cluster.counted = counted.map(Arc::new);
            }
        }
    }

    /// Works out every touched cluster again. Returns how many there were.
    pub fn settle(&mut self) -> usize {
        self.symbols.intern("");
        let dirty = std::mem::take(&mut self.upkeep.dirty);
        if self.cells.is_empty() {
            self.count_from_nothing(&dirty);
            return dirty.len();
        }
        for slot in &dirty {
            self.clusters.trim(*slot);
            self.recount(*slot);
        }
        dirty.len()
    }

    /// [`Fleet::settle`] when nothing is counted yet (no cell counts a cluster, so no cluster
    /// is counted): each touched cluster is worked out, and the cells are built at once from
    /// what they count as ([`crate::rollups::build`]) rather than counted into one by one. A
    /// fleet loaded or built at a past moment starts here, with every cluster touched.
    fn count_from_nothing(&mut self, dirty: &BTreeSet<u32>) {
        for slot in dirty {
            self.clusters.trim(*slot);
            let (counted, deadline) = self.counted_of(self.clusters.rec(*slot));
            debug_assert!(self.clusters.rec(*slot).counted.is_none());
            if let Some(old) = self.clusters.rec(*slot).deadline {
                self.upkeep.timers.remove(&(old, *slot));
            }
            if let Some(new) = deadline {
                self.upkeep.timers.insert((new, *slot));
            }
            if counted.as_ref().is_some_and(|c| c.stale) {
                Arc::make_mut(&mut self.stale).insert(*slot);
            }
            if counted.is_none() && self.clusters.rec(*slot).deadline == deadline {
                continue;
            }
            if counted.is_some() {
                self.generation += 1;
            }
            let cluster = self.clusters.rec_mut(*slot);
            cluster.deadline = deadline;
            cluster.counted = counted.map(Arc::new);
        }
        let cells =
            crate::rollups::build(self.clusters.values().filter_map(|c| c.counted.as_deref()));
        self.cells = Arc::new(cells);
    }

    /// Moves the clock to `now` (re-classifying the clusters whose deadlines came) and settles
    /// what was touched. A clock that went back, or another policy, re-classifies everything.
    /// Returns how many clusters were worked out again.
    pub fn advance(&mut self, now: Timestamp, policy: &DriftPolicy) -> usize {
        if now < self.as_of || *policy != self.policy {
            self.policy = *policy;
            self.touch_all();
        } else {
            while let Some(&(t, slot)) = self.upkeep.timers.first() {
                if t > now.seconds() {
                    break;
                }
                self.upkeep.timers.pop_first();
                // The timer is gone: forget it so that recount does not look for it.
                self.clusters.rec_mut(slot).deadline = None;
                self.touch(slot);
            }
        }
        // The generation moves only when a state or counter changed (in `recount`): time passing
        // without consequence keeps cached answers.
        self.as_of = now;
        self.settle()
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
                .all(|(k, v)| info.label(k, &self.symbols) == Some(v.as_str()))
    }

    /// Counts per group at every level (`""` is the whole fleet) for the clusters and pairs
    /// `filter` selects, every pair classified from scratch at `now`: the reference the
    /// maintained counters are held equal to.
    pub fn rollup(
        &self,
        now: Timestamp,
        policy: &DriftPolicy,
        filter: &Filter,
    ) -> BTreeMap<String, Counts> {
        self.scan_rollup(filter, |cluster| {
            (
                Fleet::is_stale(cluster, now, policy),
                self.pairs(cluster, now, policy)
                    .into_iter()
                    .map(|p| (p.app, p.state))
                    .collect(),
            )
        })
    }

    /// [`Fleet::rollup`] from the maintained states, cluster by cluster: for filters the
    /// counters do not cover (labels).
    fn current_rollup(&self, filter: &Filter) -> BTreeMap<String, Counts> {
        self.scan_rollup(filter, |cluster| {
            (
                cluster.is_stale_now(),
                cluster
                    .counted
                    .as_ref()
                    .map(|c| c.pairs().map(|p| (p.app(), p.state())).collect())
                    .unwrap_or_default(),
            )
        })
    }

    fn scan_rollup(
        &self,
        filter: &Filter,
        states: impl Fn(&ClusterRec) -> (bool, Vec<(u32, DriftState)>) + Sync,
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
        let states = &states;
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
                            let (stale, pairs) = states(cluster);
                            let mut counts = Counts {
                                clusters: 1,
                                stale_clusters: u64::from(stale),
                                pairs: [0; 8],
                            };
                            for (pair_app, state) in pairs {
                                if app.is_some_and(|a| a != Some(pair_app)) {
                                    continue;
                                }
                                counts.pairs[state_index(state)] += 1;
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

    /// The rollup the API serves, at `as_of`: `""` for every cluster `filter` selects and every
    /// group within the filter's groups. From the maintained counters (no scan) unless the
    /// filter has labels. Groups outside the filter's groups are left out (a full rollup would
    /// hold only the selected part of their clusters under their names).
    pub fn summary(&self, filter: &Filter) -> BTreeMap<String, Counts> {
        let Some(narrowest) = filter.narrowest_group() else {
            return BTreeMap::from([(String::new(), Counts::default())]);
        };
        if !filter.labels.is_empty() {
            let mut rollup = self.current_rollup(filter);
            rollup.retain(|g, _| {
                g.is_empty()
                    || GroupPath::parse(g)
                        .is_ok_and(|g| filter.groups.iter().all(|w| g.is_within(w)))
            });
            return rollup;
        }
        let environment = match filter.environment.as_deref() {
            None => Some(ANY_ENVIRONMENT),
            Some(e) => self.symbols.find(e),
        };
        let app = filter.app.as_deref().map(|a| self.symbols.find(a));
        let counts_of = |cell: &crate::rollups::Cell| {
            let mut counts = cell.counts;
            if let Some(app) = app {
                counts.pairs = app.and_then(|a| cell.app(a)).map_or([0; 8], |a| a.pairs());
            }
            counts
        };
        let mut out = BTreeMap::new();
        let total_prefix = narrowest.map_or("", GroupPath::as_str);
        let total = environment
            .and_then(|e| Some((self.symbols.find(total_prefix)?, e)))
            .and_then(|key| self.cells.get(&key))
            .map_or(Counts::default(), |cell| counts_of(cell));
        out.insert(String::new(), total);
        let Some(environment) = environment else {
            return out;
        };
        for ((prefix, env), cell) in self.cells.iter() {
            if *env != environment {
                continue;
            }
            let text = self.symbols.text(*prefix);
            if text.is_empty() {
                continue;
            }
            if let Some(within) = narrowest {
                if !GroupPath::parse(text).is_ok_and(|g| g.is_within(within)) {
                    continue;
                }
            }
            out.insert(text.to_owned(), counts_of(cell));
        }
        out
    }

    /// Clusters per desired and per running version of `app` (a symbol): in all, and per group
    /// cut at `depth` segments (a cluster in a shallower group counts under its own group), for
    /// the clusters of `filter`'s groups and environment. From the maintained counters; `None`
    /// when the filter has labels, which the counters do not cover.
    pub fn versions_by_group(
        &self,
        filter: &Filter,
        app: u32,
        depth: usize,
    ) -> Option<(VersionsByGroup, VersionsByGroup)> {
        if !filter.labels.is_empty() {
            return None;
        }
        let mut desired = VersionsByGroup::new();
        let mut running = VersionsByGroup::new();
        let Some(narrowest) = filter.narrowest_group() else {
            return Some((desired, running));
        };
        let Some(environment) = (match filter.environment.as_deref() {
            None => Some(ANY_ENVIRONMENT),
            Some(e) => self.symbols.find(e),
        }) else {
            return Some((desired, running));
        };
        let base_depth = narrowest.map_or(0, |g| g.segments().count());
        // Signed counts per (group row, side, version), so that children can be taken out of
        // their parent to leave the clusters of the parent group itself.
        let mut rows: BTreeMap<(String, bool, u32), i64> = BTreeMap::new();
        let mut add_cell = |group: &str, cell: &crate::rollups::Cell, sign: i64| {
            if let Some(a) = cell.app(app) {
                for (side, which) in [(true, Side::Desired), (false, Side::Running)] {
                    for (v, n) in a.versions(which) {
                        *rows.entry((group.to_owned(), side, v)).or_default() +=
                            sign * i64::try_from(n).unwrap_or(i64::MAX);
                    }
                }
            }
        };
        for ((prefix, env), cell) in self.cells.iter() {
            if *env != environment {
                continue;
            }
            let text = self.symbols.text(*prefix);
            let Ok(group) = GroupPath::parse(text) else {
                continue;
            };
            if narrowest.is_some_and(|g| !group.is_within(g)) {
                continue;
            }
            let level = group.segments().count();
            if base_depth >= depth {
                // One row: the asked group cut at `depth`, holding all of it.
                if level == base_depth {
                    let cut: Vec<&str> = group.segments().take(depth).collect();
                    add_cell(&cut.join("/"), cell, 1);
                }
                continue;
            }
            if level > depth {
                continue;
            }
            add_cell(text, cell, 1);
            if level > base_depth.max(1) {
                let parent: Vec<&str> = group.segments().take(level - 1).collect();
                add_cell(&parent.join("/"), cell, -1);
            }
        }
        for ((group, side, version), n) in rows {
            if n <= 0 {
                continue;
            }
            let n = n as u64;
            let into = if side { &mut desired } else { &mut running };
            let entry = into
                .entry(self.symbols.text(version).to_owned())
                .or_default();
            entry.0 += n;
            entry.1.insert(group, n);
        }
        Some((desired, running))
    }

    /// Per app (name) and environment, clusters per desired and per running version, for the
    /// clusters within `filter`'s groups (and its app). From the maintained counters; `None` when
    /// the filter has labels.
    pub fn environments(&self, filter: &Filter) -> Option<EnvironmentTable> {
        if !filter.labels.is_empty() {
            return None;
        }
        let mut table = EnvironmentTable::new();
        let Some(narrowest) = filter.narrowest_group() else {
            return Some(table);
        };
        let Some(prefix) = self.symbols.find(narrowest.map_or("", GroupPath::as_str)) else {
            return Some(table);
        };
        let app = filter.app.as_deref().map(|a| self.symbols.find(a));
        for ((p, env), cell) in self.cells.iter() {
            if *p != prefix || *env == ANY_ENVIRONMENT {
                continue;
            }
            if filter
                .environment
                .as_deref()
                .is_some_and(|e| e != self.symbols.text(*env))
            {
                continue;
            }
            for (a, counts) in cell.apps() {
                if app.is_some_and(|want| want != Some(a)) {
                    continue;
                }
                let text = |versions: &mut dyn Iterator<Item = (u32, u64)>| {
                    versions
                        .map(|(v, n)| (self.symbols.text(v).to_owned(), n))
                        .collect::<BTreeMap<String, u64>>()
                };
                table
                    .entry(self.symbols.text(a).to_owned())
                    .or_default()
                    .insert(
                        self.symbols.text(*env).to_owned(),
                        (
                            text(&mut counts.versions(Side::Desired)),
                            text(&mut counts.versions(Side::Running)),
                        ),
                    );
            }
        }
        Some(table)
    }

    /// The maintained counters and states against a full classification at `as_of`: every
    /// cluster's counted states, and every cell. Returns what differs (empty when equal).
    pub fn check_maintained(&self) -> Vec<String> {
        let mut differences = Vec::new();
        for (id, cluster) in self.clusters.iter() {
            let (expected, _) = self.counted_of(cluster);
            if cluster.counted.as_deref() != expected.as_ref() {
                differences.push(format!(
                    "cluster {id}: maintained {:?}, classified {:?}",
                    cluster.counted, expected
                ));
            }
        }
        let expected = crate::rollups::from_scratch(
            self.clusters.values().filter_map(|c| c.counted.as_deref()),
        );
        if *self.cells != expected {
            differences.push(format!(
                "counters: {} cells maintained, {} from scratch, or their contents differ",
                self.cells.len(),
                expected.len()
            ));
        }
        let mut listed: Vec<&str> = self.stale_clusters().map(|(id, _)| id).collect();
        listed.sort_unstable();
        let mut counted_stale: Vec<&str> = self
            .clusters
            .iter()
            .filter(|(_, c)| c.is_stale_now())
            .map(|(id, _)| id)
            .collect();
        counted_stale.sort_unstable();
        if listed != counted_stale {
            differences.push(format!(
                "stale set: maintained {listed:?}, counted stale {counted_stale:?}"
            ));
        }
        differences
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

/// The renderer's tables with no part of a render in them: read again, once a second, while a
/// render is being published (see [`Tables::render_in_progress`]).
async fn complete_tables(store: &Store) -> fleetscope_store::Result<Tables> {
    loop {
        let markers = store.change_markers().await?;
        let tables = Tables::read(store, markers).await?;
        match tables.render_in_progress(fleetscope_runtime::clock::now()) {
            Some(render) => {
                tracing::info!(
                    render,
                    "a render is being published; reading its desired state once it is complete"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            None => return Ok(tables),
        }
    }
}

/// Reads the whole fleet from the store.
pub async fn load(store: &Store) -> fleetscope_store::Result<Fleet> {
    let mut fleet = Fleet::default();
    fleet.set_tables(complete_tables(store).await?);
    let heartbeats = store.heartbeats_since(Timestamp::EPOCH).await?;
    fleet.apply_heartbeats(heartbeats);
    store
        .observed_objects(ObservedSource::Latest, Timestamp::EPOCH, |row| {
            fleet.apply_observed(&row);
        })
        .await?;
    Ok(fleet)
}

/// Observed rows taken by [`Fleet::stage_observed`] and not yet placed.
#[derive(Debug)]
pub struct Staged {
    objects: Vec<(u32, Object)>,
    limit: usize,
    /// Texts numbered recently (use one `Staged` with one fleet).
    memo: crate::symbols::InternMemo,
    /// The cluster of the row before, and its slot.
    last_cluster: Option<(Arc<str>, u32)>,
    /// The slot of each cluster id [`Fleet::stage_made`] met, by its number in the symbols.
    slots_by_symbol: HashMap<u32, u32>,
}

impl Staged {
    /// Holds up to [`STAGED_OBJECTS`] objects (about 16 MiB) before they are placed.
    pub fn new() -> Staged {
        Staged::with_limit(STAGED_OBJECTS)
    }

    /// Holds up to `limit` objects (at least 1) before they are placed.
    pub fn with_limit(limit: usize) -> Staged {
        Staged {
            objects: Vec::new(),
            limit: limit.max(1),
            memo: crate::symbols::InternMemo::default(),
            last_cluster: None,
            slots_by_symbol: HashMap::new(),
        }
    }
}

impl Default for Staged {
    fn default() -> Staged {
        Staged::new()
    }
}

/// How many objects [`Staged::new`] holds before they are placed (64 bytes each).
pub const STAGED_OBJECTS: usize = 1 << 18;

const _: () = assert!(size_of::<(u32, Object)>() == 64);

/// The object an observed row of `kind` reports, its texts numbered by `intern` in `s`.
fn object_of(
    s: &Symbols,
    kind: ObjectKind,
    row: &ObservedRef<'_>,
    intern: &mut impl FnMut(&Symbols, &str) -> u32,
) -> Object {
    Object {
        kind,
        namespace: intern(s, row.object_namespace),
        name: intern(s, row.object_name),
        app: intern(s, row.app),
        version: intern(s, row.version),
        content_hash: intern(s, row.content_hash),
        revision: intern(s, row.applied_revision),
        health: Health::parse(row.health).unwrap_or(Health::Unknown),
        sync: SyncStatus::parse(row.sync).unwrap_or(SyncStatus::Unknown),
        reason: intern(s, row.reason),
        message: intern(s, row.message),
        transitioned_at: row.transitioned_at,
        observed_at: row.observed_at,
        received_at: row.received_at,
        seq: row.seq,
        deleted: row.deleted != 0,
    }
}

/// Objects made off the fleet's thread by [`Fleet::make_object`], for [`Fleet::stage_made`].
#[derive(Debug, Default)]
pub struct Made {
    /// The number of each object's cluster id in the fleet's symbols, and the object.
    objects: Vec<(u32, Object)>,
    /// The newest `received_at` of the rows made.
    received: u32,
}

impl Made {
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

/// How long the rows of a render may stand without its `renders` row before the hub takes
/// them as they are. A render is published in seconds, its `renders` row last; rows older than
/// this belong to a render whose publisher stopped half-way (the next render supersedes them).
pub const UNFINISHED_RENDER_GRACE: Duration = Duration::from_secs(60);

/// Inventory, membership, desired state and reasons as read at one moment, with the markers read
/// before them (so a change during the read is seen again at the next refresh).
#[derive(Debug)]
pub struct Tables {
    markers: ChangeMarkers,
    /// After the read: the newest render whose rows the tables hold, when it is newer than the
    /// newest render published (`markers.last_render`): its publication was under way, so the
    /// read may hold part of it.
    unfinished_render: Option<u64>,
    inventory: Vec<ClusterRow>,
    members: Vec<fleetscope_store::queries::CurrentMemberRow>,
    since_sets: Vec<SinceSetRow>,
    desired: Vec<DesiredRow>,
    reason_members: Vec<fleetscope_store::queries::CurrentReasonMemberRow>,
    reason_sets: Vec<ReasonSetRow>,
}

impl Tables {
    /// Reads the tables, then the newest render any of them holds rows of: a row read above
    /// was in before that second read, so a render whose rows were read is never missed.
    pub async fn read(store: &Store, markers: ChangeMarkers) -> fleetscope_store::Result<Tables> {
        let mut tables = Tables {
            markers,
            unfinished_render: None,
            inventory: store.inventory_rows().await?,
            members: store.current_members().await?,
            since_sets: store.since_set_rows().await?,
            desired: store.desired_rows().await?,
            reason_members: store.current_reason_members().await?,
            reason_sets: store.reason_set_rows().await?,
        };
        let newest = store.newest_render_rows().await?.newest();
        tables.unfinished_render = (newest > markers.last_render).then_some(newest);
        Ok(tables)
    }

    /// Tables from rows read elsewhere (the answers at a past moment): no change markers, no
    /// render under way, no reasons.
    pub fn from_rows(
        inventory: Vec<ClusterRow>,
        members: Vec<fleetscope_store::queries::CurrentMemberRow>,
        since_sets: Vec<SinceSetRow>,
        desired: Vec<DesiredRow>,
    ) -> Tables {
        Tables {
            markers: ChangeMarkers {
                last_render: 0,
                inventory_version: 0,
                inventory_rows: 0,
            },
            unfinished_render: None,
            inventory,
            members,
            since_sets,
            desired,
            reason_members: Vec::new(),
            reason_sets: Vec::new(),
        }
    }

    /// The render being published when the tables were read, if its rows are younger than
    /// [`UNFINISHED_RENDER_GRACE`] at `now`: these tables may hold part of it and must not be
    /// applied (the hub keeps what it has and reads again at the next refresh). Render ids are
    /// the renderer's clock in milliseconds.
    pub fn render_in_progress(&self, now: Timestamp) -> Option<u64> {
        let render = self.unfinished_render?;
        let age_ms = now.seconds().saturating_mul(1000) - render as i64;
        (age_ms < UNFINISHED_RENDER_GRACE.as_millis() as i64).then_some(render)
    }
}

impl Fleet {
    /// Replaces inventory, membership, desired state and reasons.
    pub fn set_tables(&mut self, tables: Tables) {
        self.set_inventory(tables.inventory);
        self.set_member_since(
            tables
                .members
                .iter()
                .map(|m| {
                    (
                        m.cluster_id.clone(),
                        m.render_id,
                        m.since_set.clone(),
                        m.removed != 0,
                    )
                })
                .collect(),
        );
        self.set_membership(
            tables
                .members
                .into_iter()
                .map(|m| (m.cluster_id, m.render_group, m.removed != 0))
                .collect(),
        );
        self.set_since_sets(tables.since_sets);
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
///
/// Concurrency: one writer (the refresher, or a reader moving the clock) holds `writer` while it
/// applies changes to its own copy of the fleet, then publishes an immutable [`Fleet::snapshot`]
/// into `current` (a pointer swap under a lock held for nothing else). Readers take the pointer
/// and work on their snapshot without any lock, however long they take; they never wait for
/// the writer and the writer never waits for them.
#[derive(Debug)]
pub struct Index {
    store: Store,
    current: std::sync::RwLock<Arc<Fleet>>,
    writer: std::sync::Mutex<Fleet>,
    /// When the last complete read of observed state started: everything that arrived since
    /// then is in `observed_arrivals` while that is younger than the hours it keeps.
    observed_read_started: std::sync::Mutex<Option<Instant>>,
    /// Where the reads of `observed_arrivals` stand between writers' horizons.
    arrivals: std::sync::Mutex<ArrivalCursor>,
    /// Where the reads of `heartbeats` stand between the heartbeat writers' horizons.
    heartbeat_cursor: std::sync::Mutex<ArrivalCursor>,
    /// The most observed arrivals one refresh reads ([`ARRIVAL_READ_ROWS`] unless set).
    arrival_read_rows: std::sync::atomic::AtomicU64,
}

/// A read of arrivals spanning more seconds than this is first counted per second, and bounded
/// to [`Index::set_arrival_read_rows`] rows; a refresh every second spans one or two.
const BOUNDED_READ_AFTER_SECONDS: u32 = 3;

/// A writer that has published no horizon for longer than this (by ClickHouse's clock) is not
/// waited for; when it publishes again, what it stamped since its last horizon is read.
pub const WRITER_SILENT_AFTER: i64 = 30;

/// Where the reads of observed arrivals stand (see docs/data-model.md, "Reading arrivals
/// without an overlap"): per writer, the second before which all its rows have been read.
#[derive(Debug, Default, Clone)]
pub struct ArrivalCursor {
    /// Writer → (all its rows stamped before this have been read, whether it was live then).
    pub writers: HashMap<String, (u32, bool)>,
    /// Whether a read with horizons has happened (a complete read counts).
    started: bool,
}

/// What to read next from `observed_arrivals` (or `heartbeats`), given the writers' horizons
/// now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalRead {
    /// Rows stamped in `[from, until)`; afterwards every live writer's rows before `until` are
    /// read.
    Between { from: u32, until: u32 },
    /// No writer publishes horizons: read back `OVERLAP_SECONDS` from the newest row seen.
    Overlap,
}

fn is_live(h: &ArrivalHorizon) -> bool {
    h.silent_seconds <= WRITER_SILENT_AFTER
}

impl ArrivalCursor {
    /// The cursor right after a complete read of observed state that started after `horizons`
    /// were read: every writer's rows before its horizon then were visible, so they were read.
    pub fn after_complete_read(horizons: &[ArrivalHorizon]) -> ArrivalCursor {
        ArrivalCursor {
            writers: horizons
                .iter()
                .map(|h| (h.writer.clone(), (h.visible_before, is_live(h))))
                .collect(),
            started: true,
        }
    }

    /// Where writer `h`'s rows have been read up to: a writer never seen before has read none
    /// of its rows (it stamps none before `first_stamp`).
    fn read_before(&self, h: &ArrivalHorizon) -> u32 {
        self.writers
            .get(&h.writer)
            .map_or(h.first_stamp, |(read, _)| *read)
    }

    /// What the next read covers, given the horizons read just before it: from the oldest
    /// unread second of any live writer to the earliest horizon of them.
    pub fn next_read(&self, horizons: &[ArrivalHorizon]) -> ArrivalRead {
        let live: Vec<_> = horizons.iter().filter(|h| is_live(h)).collect();
        let (Some(from), Some(until), true) = (
            live.iter().map(|h| self.read_before(h)).min(),
            live.iter().map(|h| h.visible_before).min(),
            self.started,
        ) else {
            return ArrivalRead::Overlap;
        };
        ArrivalRead::Between {
            from,
            until: until.max(from),
        }
    }

    /// Records that the read [`ArrivalCursor::next_read`] chose for `horizons` is done.
    pub fn advance(&mut self, horizons: &[ArrivalHorizon]) {
        self.advance_to(horizons, u32::MAX);
    }

    /// Records that the read [`ArrivalCursor::next_read`] chose for `horizons` is done up to
    /// `stop` only (a read bounded in rows stops before the horizon): every live writer's rows
    /// before the earlier of the two have been read.
    pub fn advance_to(&mut self, horizons: &[ArrivalHorizon], stop: u32) {
        let read = self.next_read(horizons);
        for h in horizons {
            let before = self.read_before(h);
            let now_read = match read {
                ArrivalRead::Between { until, .. } if is_live(h) => before.max(until.min(stop)),
                _ => before,
            };
            self.writers
                .insert(h.writer.clone(), (now_read, is_live(h)));
        }
        if matches!(read, ArrivalRead::Between { .. }) {
            self.started = true;
        }
    }
}

/// The most observed arrivals one refresh reads by default: a fleet connecting (or a hub that
/// fell behind) is caught up over several refreshes, each of them short enough to finish within
/// the store's query timeout however much is waiting.
pub const ARRIVAL_READ_ROWS: u64 = 250_000;

/// Where a read of arrivals that may take at most `limit` rows stops, given how many rows each
/// second from `from` on holds (sorted by second, all before `until`): after the last second
/// that keeps the total within `limit`, or after the first second when that one alone holds
/// more (a second is never split, and every read makes progress); `until` when everything fits.
pub fn bounded_until(per_second: &[(u32, u64)], from: u32, until: u32, limit: u64) -> u32 {
    let mut total = 0u64;
    for (i, (second, rows)) in per_second.iter().enumerate() {
        total = total.saturating_add(*rows);
        if total > limit {
            return if i == 0 {
                second.saturating_add(1).clamp(from, until)
            } else {
                (*second).clamp(from, until)
            };
        }
    }
    until
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refreshed {
    pub tables_reloaded: bool,
    /// Observed rows that changed the fleet (rows of the overlap already applied not counted).
    pub observed_rows: usize,
    pub heartbeat_rows: usize,
    /// Clusters whose states were worked out again (changed, or a deadline came).
    pub clusters_reclassified: usize,
    /// Observed rows the store returned, applied or not (re-read ones included).
    pub observed_rows_read: u64,
    /// What was read from the arrivals: `None` for a complete read of `observed_latest`.
    pub arrival_read: Option<ArrivalRead>,
    /// Which heartbeats were read: between the heartbeat writers' horizons, or with the overlap.
    pub heartbeat_read: ArrivalRead,
    pub generation: u64,
    pub phases: RefreshPhases,
}

/// Where one refresh spent its time.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RefreshPhases {
    /// The change markers, and the renderer's tables and the inventory when they changed,
    /// read and applied to the writer's fleet.
    pub read_tables: Duration,
    /// The writers' horizons and the observed rows, each new row applied as it arrives.
    pub read_observed: Duration,
    pub read_heartbeats: Duration,
    /// Waiting for a reader that was moving the clock forward.
    pub wait_for_writer: Duration,
    /// Heartbeats applied to the writer's fleet.
    pub apply: Duration,
    /// Every cluster that changed or came due worked out again, counters updated.
    pub advance: Duration,
    pub publish: Duration,
}

impl RefreshPhases {
    /// Each phase by the name the metrics give it.
    pub fn named(&self) -> [(&'static str, Duration); 7] {
        [
            ("read_tables", self.read_tables),
            ("read_observed", self.read_observed),
            ("read_heartbeats", self.read_heartbeats),
            ("wait_for_writer", self.wait_for_writer),
            ("apply", self.apply),
            ("advance", self.advance),
            ("publish", self.publish),
        ]
    }
}

/// Every writer's arrival horizon, the observed-row writers' and the heartbeat writers' apart;
/// none when they cannot be read (a store not yet migrated to them, or ClickHouse failing: the
/// reads fall back to the overlap), and none in cluster mode:
/// there a replica may show a horizon before it shows the rows behind it (replication is
/// asynchronous), so the hub reads with the overlap, which outlasts the replica delay the
/// store accepts.
async fn arrival_horizons(store: &Store) -> (Vec<ArrivalHorizon>, Vec<ArrivalHorizon>) {
    if store.cluster().is_some() {
        return (Vec::new(), Vec::new());
    }
    match store.arrival_horizons().await {
        Ok(horizons) => {
            let (heartbeats, observed) = horizons
                .into_iter()
                .partition(ArrivalHorizon::is_heartbeat_writer);
            (observed, heartbeats)
        }
        Err(err) => {
            tracing::debug!(%err, "no arrival horizons; reading arrivals with an overlap");
            (Vec::new(), Vec::new())
        }
    }
}

/// Runs `f`, which works without awaiting, off the runtime's worker threads when the runtime
/// has several (the others take over its tasks meanwhile), in place otherwise.
fn cpu_bound<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Index {
    /// Loads the whole fleet from `store` and classifies it at the system clock's now with the
    /// default policy (see [`Index::view`] for another clock or policy).
    pub async fn load(store: Store) -> fleetscope_store::Result<Index> {
        let started = Instant::now();
        let (horizons, heartbeat_horizons) = arrival_horizons(&store).await;
        // Millions of rows: read on a thread of its own (see `Store::read_in_bulk`).
        let mut fleet = store
            .read_in_bulk(|store| async move { load(&store).await })
            .await??;
        fleet.advance(fleetscope_runtime::clock::now(), &DriftPolicy::default());
        Ok(Index {
            store,
            current: std::sync::RwLock::new(Arc::new(fleet.snapshot())),
            writer: std::sync::Mutex::new(fleet),
            observed_read_started: std::sync::Mutex::new(Some(started)),
            arrivals: std::sync::Mutex::new(ArrivalCursor::after_complete_read(&horizons)),
            heartbeat_cursor: std::sync::Mutex::new(ArrivalCursor::after_complete_read(
                &heartbeat_horizons,
            )),
            arrival_read_rows: std::sync::atomic::AtomicU64::new(ARRIVAL_READ_ROWS),
        })
    }

    /// Sets the most observed arrivals one refresh reads (at least 1).
    pub fn set_arrival_read_rows(&self, rows: u64) {
        self.arrival_read_rows
            .store(rows.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The latest published snapshot.
    pub fn current(&self) -> Arc<Fleet> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn publish(&self, fleet: &Fleet) -> Arc<Fleet> {
        let snapshot = Arc::new(fleet.snapshot());
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = snapshot.clone();
        snapshot
    }

    /// A snapshot whose states are right at `now` under `policy`, and the moment they are right
    /// for: `now` itself, unless the writer is busy applying a refresh, in which case the latest
    /// snapshot and its own moment (at most one refresh old) are given rather than waiting.
    pub fn view(&self, now: Timestamp, policy: &DriftPolicy) -> (Arc<Fleet>, Timestamp) {
        let snapshot = self.current();
        if snapshot.valid_at(now, policy) {
            return (snapshot, now);
        }
        match self.writer.try_lock() {
            Ok(mut fleet) => {
                fleet.advance(now, policy);
                (self.publish(&fleet), now)
            }
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                let mut fleet = poisoned.into_inner();
                fleet.advance(now, policy);
                (self.publish(&fleet), now)
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                let at = snapshot.as_of;
                (snapshot, at)
            }
        }
    }

    /// Runs `f` on the latest snapshot.
    pub fn read<T>(&self, f: impl FnOnce(&Fleet) -> T) -> T {
        f(&self.current())
    }

    /// Runs `f` on the writer's copy and publishes the result (for tests and tools that change
    /// the fleet by hand). What `f` touched is settled at the fleet's `as_of` before publishing
    /// (call [`Fleet::advance`] to move the clock), as are rows a failed refresh left applied.
    pub fn write<T>(&self, f: impl FnOnce(&mut Fleet) -> T) -> T {
        let mut fleet = self.writer_guard();
        let out = f(&mut fleet);
        fleet.settle();
        self.publish(&fleet);
        out
    }

    /// The writer's fleet. Held by a refresh for one observed row at a time while it reads,
    /// then for the heartbeats, the clock and the publication.
    fn writer_guard(&self) -> std::sync::MutexGuard<'_, Fleet> {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads what changed since the last refresh, applies it, moves the clock to `now` under
    /// `policy` and publishes. While the store is read the writer's fleet is locked for one
    /// row at a time; readers only ever take the published snapshot.
    pub async fn refresh_at(
        &self,
        now: Timestamp,
        policy: &DriftPolicy,
    ) -> fleetscope_store::Result<Refreshed> {
        let mut phases = RefreshPhases::default();
        let phase = Instant::now();
        let current = self.current();
        let observed_since = Timestamp(i64::from(current.observed_watermark) - OVERLAP_SECONDS);
        let heartbeats_since = Timestamp(i64::from(current.heartbeat_watermark) - OVERLAP_SECONDS);
        let known_markers = current.markers;
        let markers = self.store.change_markers().await?;
        let tables = if known_markers != Some(markers) {
            let tables = Tables::read(&self.store, markers).await?;
            match (tables.render_in_progress(now), tables.unfinished_render) {
                (Some(render), _) => {
                    // Applied at a later refresh, whole, once its `renders` row is in.
                    tracing::debug!(render, "a render is being published; keeping the last one");
                    None
                }
                (None, Some(render)) => {
                    tracing::warn!(
                        render,
                        grace = ?UNFINISHED_RENDER_GRACE,
                        "rows of a render that was never completed are older than the grace: applying them as they are"
                    );
                    Some(tables)
                }
                (None, None) => Some(tables),
            }
        } else {
            None
        };
        // The renderer's tables go in first: the rows read next are applied as they arrive.
        let tables_reloaded = tables.is_some();
        if let Some(tables) = tables {
            cpu_bound(|| self.writer_guard().set_tables(tables));
        }
        phases.read_tables = phase.elapsed();
        // Each observed row is applied to the writer's fleet as it streams in, under the
        // writer's lock for that row only, so a large read (a fleet connecting) never sits in
        // memory as rows. Rows already applied (a writer back from silence, the overlap without
        // horizons) are recognised before anything is interned, and dropped.
        let mut observed_rows = 0;
        let mut newest_received = 0;
        let started = Instant::now();
        let last_read = *self
            .observed_read_started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let source = observed_source(last_read, started);
        let (horizons, heartbeat_horizons) = arrival_horizons(&self.store).await;
        let cursor = self
            .arrivals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut read = match source {
            ObservedSource::Latest => None,
            ObservedSource::Arrivals => Some(cursor.next_read(&horizons)),
        };
        // A read spanning more than a few seconds (a fleet connecting, a hub that fell behind)
        // is bounded in rows: one that outlasted the store's query timeout would fail every
        // time, and each retry would cover more.
        if let Some(ArrivalRead::Between { from, until }) = &mut read {
            if until.saturating_sub(*from) > BOUNDED_READ_AFTER_SECONDS {
                let per_second = self
                    .store
                    .observed_arrivals_per_second(
                        Timestamp(i64::from(*from)),
                        Timestamp(i64::from(*until)),
                    )
                    .await?;
                let per_second: Vec<(u32, u64)> =
                    per_second.iter().map(|r| (r.second, r.rows)).collect();
                *until = bounded_until(
                    &per_second,
                    *from,
                    *until,
                    self.arrival_read_rows
                        .load(std::sync::atomic::Ordering::Relaxed),
                );
            }
        }
        let mut keep = |row: ObservedRow| {
            newest_received = newest_received.max(row.received_at);
            let mut fleet = self.writer_guard();
            if fleet.is_newer(&row) {
                fleet.apply_object(&row);
                observed_rows += 1;
            }
        };
        let rows_read = match read {
            None => {
                self.store
                    .observed_objects(source, observed_since, &mut keep)
                    .await?
            }
            Some(ArrivalRead::Overlap) => {
                self.store
                    .observed_objects(ObservedSource::Arrivals, observed_since, &mut keep)
                    .await?
            }
            Some(ArrivalRead::Between { from, until }) if from < until => {
                self.store
                    .observed_arrivals_between(
                        Timestamp(i64::from(from)),
                        Timestamp(i64::from(until)),
                        &mut keep,
                    )
                    .await?
            }
            Some(ArrivalRead::Between { .. }) => 0,
        };
        {
            let mut cursor = self
                .arrivals
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match read {
                None => *cursor = ArrivalCursor::after_complete_read(&horizons),
                Some(ArrivalRead::Between { until, .. }) => cursor.advance_to(&horizons, until),
                Some(ArrivalRead::Overlap) => cursor.advance(&horizons),
            }
        }
        phases.read_observed = started.elapsed();
        let phase = Instant::now();
        // `heartbeats` keeps every cluster's latest heartbeat for good, so a read between
        // horizons is right after any gap: no complete read is ever needed again.
        let heartbeat_read = self
            .heartbeat_cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .next_read(&heartbeat_horizons);
        let heartbeats = match heartbeat_read {
            ArrivalRead::Overlap => self.store.heartbeats_since(heartbeats_since).await?,
            ArrivalRead::Between { from, until } if from < until => {
                self.store
                    .heartbeats_between(Timestamp(i64::from(from)), Timestamp(i64::from(until)))
                    .await?
            }
            ArrivalRead::Between { .. } => Vec::new(),
        };
        self.heartbeat_cursor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .advance(&heartbeat_horizons);
        phases.read_heartbeats = phase.elapsed();
        // The rest works without awaiting, for up to a few hundred milliseconds when much
        // changed: off the runtime's worker threads, so requests keep being answered.
        let refreshed = cpu_bound(|| {
            let phase = Instant::now();
            let mut fleet = self.writer_guard();
            phases.wait_for_writer = phase.elapsed();
            let phase = Instant::now();
            let mut refreshed = Refreshed {
                tables_reloaded,
                observed_rows,
                heartbeat_rows: heartbeats.len(),
                clusters_reclassified: 0,
                observed_rows_read: rows_read,
                arrival_read: read,
                heartbeat_read,
                generation: 0,
                phases,
            };
            fleet.observed_watermark = fleet.observed_watermark.max(newest_received);
            *self
                .observed_read_started
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(started);
            fleet.apply_heartbeats(heartbeats);
            refreshed.phases.apply = phase.elapsed();
            let phase = Instant::now();
            // A reader may have moved the clock past `now` meanwhile; never move it back for that.
            let now = now.max(fleet.as_of);
            refreshed.clusters_reclassified = fleet.advance(now, policy);
            refreshed.generation = fleet.generation;
            refreshed.phases.advance = phase.elapsed();
            let phase = Instant::now();
            self.publish(&fleet);
            refreshed.phases.publish = phase.elapsed();
            refreshed
        });
        Ok(refreshed)
    }

    /// [`Index::refresh_at`] at the system clock, under the policy in force.
    pub async fn refresh(&self) -> fleetscope_store::Result<Refreshed> {
        let policy = self.current().policy;
        self.refresh_at(fleetscope_runtime::clock::now(), &policy)
            .await
    }
}

#[cfg(test)]
mod refresh_tests {
    use super::*;

    fn inventory_row(id: &str, env: &str, labels: &[(&str, &str)]) -> ClusterRow {
        ClusterRow {
            cluster_id: id.into(),
            group_path: "emea/de".into(),
            group_prefixes: vec!["emea".into(), "emea/de".into()],
            environment: env.into(),
            reconciler: "flux".into(),
            label_keys: labels.iter().map(|(k, _)| (*k).into()).collect(),
            label_values: labels.iter().map(|(_, v)| (*v).into()).collect(),
            updated_at: 0,
            version: 1,
            removed: 0,
        }
    }

    #[test]
    fn clusters_with_the_same_labels_share_one_copy_across_inventory_reads() {
        let mut fleet = Fleet::default();
        // As the renderer writes them: each cluster's own id among its labels.
        let row = |id: &str, env: &str, tier: &str| {
            inventory_row(
                id,
                env,
                &[("fleetscope.io/cluster", id), ("tier", tier), ("zone", "a")],
            )
        };
        fleet.set_inventory(vec![
            row("a", "prod", "standard"),
            row("b", "stage", "standard"),
            inventory_row("c", "prod", &[("tier", "standard"), ("zone", "a")]),
            inventory_row("d", "prod", &[("zone", "a"), ("tier", "standard")]),
        ]);
        let info = |fleet: &Fleet, id: &str| fleet.clusters[id].info.clone().unwrap();
        // The same labels, in any order, are one list.
        assert!(Arc::ptr_eq(
            &info(&fleet, "c").labels,
            &info(&fleet, "d").labels
        ));
        assert!(!Arc::ptr_eq(
            &info(&fleet, "a").labels,
            &info(&fleet, "b").labels
        ));
        // Every label reads back as given.
        let b = info(&fleet, "b");
        assert_eq!(
            b.labels(&fleet.symbols),
            BTreeMap::from(
                [
                    ("fleetscope.io/cluster", "b"),
                    ("tier", "standard"),
                    ("zone", "a")
                ]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
            )
        );
        assert_eq!(b.label("fleetscope.io/cluster", &fleet.symbols), Some("b"));
        assert_eq!(b.label("tier", &fleet.symbols), Some("standard"));
        assert_eq!(b.label("region", &fleet.symbols), None);
        assert_eq!(
            info(&fleet, "c").label("fleetscope.io/cluster", &fleet.symbols),
            None
        );
        // Read again: the list already held is taken over, and one no cluster uses is let go.
        let held = info(&fleet, "c").labels.clone();
        fleet.set_inventory(vec![inventory_row(
            "e",
            "prod",
            &[("tier", "standard"), ("zone", "a")],
        )]);
        assert!(Arc::ptr_eq(&held, &info(&fleet, "e").labels));
        assert_eq!(fleet.upkeep.label_sets.len(), 1);
    }

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

    fn horizon(writer: &str, first: u32, visible: u32, silent: i64) -> ArrivalHorizon {
        ArrivalHorizon {
            writer: writer.into(),
            first_stamp: first,
            visible_before: visible,
            silent_seconds: silent,
        }
    }

    /// Reads the cursor chooses over a sequence of horizons, each then marked done.
    fn reads(cursor: &mut ArrivalCursor, steps: &[Vec<ArrivalHorizon>]) -> Vec<ArrivalRead> {
        steps
            .iter()
            .map(|h| {
                let read = cursor.next_read(h);
                cursor.advance(h);
                read
            })
            .collect()
    }

    #[test]
    fn arrivals_are_read_from_horizon_to_horizon_without_overlap() {
        let mut cursor = ArrivalCursor::after_complete_read(&[horizon("a", 10, 100, 0)]);
        let between = |from, until| ArrivalRead::Between { from, until };
        assert_eq!(
            reads(
                &mut cursor,
                &[
                    vec![horizon("a", 10, 103, 0)],
                    vec![horizon("a", 10, 103, 1)],
                    vec![horizon("a", 10, 104, 0)],
                ]
            ),
            [between(100, 103), between(103, 103), between(103, 104)]
        );
    }

    #[test]
    fn a_read_bounded_in_rows_stops_between_seconds_and_always_progresses() {
        let per_second = [(100, 4), (101, 3), (103, 5), (107, 1)];
        // Everything fits: up to the horizon.
        assert_eq!(bounded_until(&per_second, 100, 110, 13), 110);
        // After the last whole second within the limit, before the one that would pass it.
        assert_eq!(bounded_until(&per_second, 100, 110, 12), 107);
        assert_eq!(bounded_until(&per_second, 100, 110, 7), 103);
        assert_eq!(bounded_until(&per_second, 100, 110, 6), 101);
        // A first second larger than the limit is read whole: the read still moves on.
        assert_eq!(bounded_until(&per_second, 100, 110, 2), 101);
        assert_eq!(bounded_until(&per_second[2..], 102, 110, 2), 104);
        // Nothing stamped: the horizon.
        assert_eq!(bounded_until(&[], 100, 110, 1), 110);
    }

    #[test]
    fn a_bounded_read_moves_the_writers_to_where_it_stopped() {
        let mut cursor = ArrivalCursor::after_complete_read(&[
            horizon("a", 10, 100, 0),
            horizon("b", 10, 120, 0),
        ]);
        let now = [horizon("a", 10, 200, 0), horizon("b", 10, 200, 0)];
        let between = |from, until| ArrivalRead::Between { from, until };
        assert_eq!(cursor.next_read(&now), between(100, 200));
        cursor.advance_to(&now, 110);
        // a is read up to the stop; b was further already and stays where it was.
        assert_eq!(cursor.writers["a"], (110, true));
        assert_eq!(cursor.writers["b"], (120, true));
        assert_eq!(cursor.next_read(&now), between(110, 200));
        cursor.advance_to(&now, 150);
        assert_eq!(cursor.writers["b"], (150, true));
        cursor.advance(&now);
        assert_eq!(cursor.writers["a"], (200, true));
        assert_eq!(cursor.writers["b"], (200, true));
    }

    #[test]
    fn a_new_writer_is_read_from_its_first_stamp_and_holds_the_others_back() {
        let mut cursor = ArrivalCursor::after_complete_read(&[horizon("a", 10, 100, 0)]);
        let between = |from, until| ArrivalRead::Between { from, until };
        assert_eq!(
            reads(
                &mut cursor,
                &[
                    // b started at 95 (its clock is behind) and has nothing visible yet.
                    vec![horizon("a", 10, 110, 0), horizon("b", 95, 95, 0)],
                    // b's rows up to 111 are visible now: read from 95 again.
                    vec![horizon("a", 10, 112, 0), horizon("b", 95, 111, 0)],
                    vec![horizon("a", 10, 113, 0), horizon("b", 95, 113, 0)],
                ]
            ),
            [between(95, 95), between(95, 111), between(111, 113)]
        );
    }

    #[test]
    fn a_silent_writer_is_not_waited_for_and_is_caught_up_when_back() {
        let mut cursor = ArrivalCursor::after_complete_read(&[
            horizon("a", 10, 100, 0),
            horizon("b", 10, 100, 0),
        ]);
        let between = |from, until| ArrivalRead::Between { from, until };
        let silent = WRITER_SILENT_AFTER + 1;
        assert_eq!(
            reads(
                &mut cursor,
                &[
                    vec![horizon("a", 10, 101, 0), horizon("b", 10, 101, 0)],
                    // b stops publishing at 101 (stalled): a goes on alone.
                    vec![horizon("a", 10, 140, 0), horizon("b", 10, 101, silent)],
                    vec![horizon("a", 10, 150, 0), horizon("b", 10, 101, silent)],
                    // b is back: its rows since 101 are read again.
                    vec![horizon("a", 10, 160, 0), horizon("b", 10, 155, 0)],
                    vec![horizon("a", 10, 170, 0), horizon("b", 10, 170, 0)],
                ]
            ),
            [
                between(100, 101),
                between(101, 140),
                between(140, 150),
                between(101, 155),
                between(155, 170),
            ]
        );
    }

    #[test]
    fn without_horizons_arrivals_are_read_with_the_overlap() {
        let mut cursor = ArrivalCursor::default();
        assert_eq!(cursor.next_read(&[]), ArrivalRead::Overlap);
        // Writers all silent: the overlap too.
        let silent = WRITER_SILENT_AFTER + 1;
        cursor = ArrivalCursor::after_complete_read(&[horizon("a", 10, 100, silent)]);
        assert_eq!(
            cursor.next_read(&[horizon("a", 10, 100, silent)]),
            ArrivalRead::Overlap
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
            let object = fleet.parts.unpack(&fleet.clusters["c1"].objects[0]);
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
    fn a_record_gives_back_every_change_number_and_message_it_was_given() {
        let numbers = [
            0,
            1,
            u64::from(u32::MAX),
            1 << 32,
            (1 << 32) + 1,
            u64::MAX - 1,
        ];
        let mut fleet = Fleet::default();
        for (i, seq) in numbers.into_iter().enumerate() {
            let message = format!("message {i}");
            let r = ObservedRow {
                message: message.clone(),
                ..row("c1", "checkout", seq)
            };
            assert!(
                fleet.apply_observed(&r),
                "{seq} is newer than the one before"
            );
            let object = fleet.parts.unpack(&fleet.clusters["c1"].objects[0]);
            assert_eq!(object.seq, seq);
            assert_eq!(fleet.symbols.text(object.message), message);
        }
        // Numbers that differ only in their high half compare as numbers.
        assert!(!fleet.is_newer(&row("c1", "checkout", 1 << 32)));
        assert!(fleet.is_newer(&row("c1", "checkout", u64::MAX)));
    }

    /// Every object of a fleet, as text.
    fn objects_of(fleet: &Fleet) -> Vec<(String, String)> {
        let mut all = Vec::new();
        for (id, cluster) in fleet.clusters.iter() {
            for rec in cluster.objects.iter() {
                let o = fleet.parts.unpack(rec);
                let t = |n: u32| fleet.symbols.text(n).to_owned();
                all.push((
                    format!("{id}/{}/{}/{}", o.kind.as_str(), t(o.namespace), t(o.name)),
                    format!(
                        "{} {} {} {} {:?} {:?} {} {} {} {} {} {} {}",
                        t(o.app),
                        t(o.version),
                        t(o.content_hash),
                        t(o.revision),
                        o.health,
                        o.sync,
                        t(o.reason),
                        t(o.message),
                        o.transitioned_at,
                        o.observed_at,
                        o.received_at,
                        o.seq,
                        o.deleted
                    ),
                ));
            }
        }
        all.sort();
        all
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Staged rows, placed in batches sorted by cluster, make the fleet that applying each
        /// row in the order read makes (duplicates, ties on the change number, deletions and
        /// kinds that are not app objects included).
        #[test]
        fn staged_rows_make_the_fleet_applied_rows_make(
            rows in proptest::collection::vec(
                (0..5usize, 0..4usize, 0..3u64, 0..3u32, 0..3usize, 0..2u8, 0..4usize),
                0..120,
            ),
            limit in 1..40usize,
        ) {
            let kinds = ["HelmRelease", "Kustomization", "Application", "GitRepository"];
            let healths = ["healthy", "progressing", "failed"];
            let rows: Vec<ObservedRow> = rows
                .into_iter()
                .map(|(cluster, name, seq, received, health, deleted, kind)| ObservedRow {
                    object_kind: kinds[kind].into(),
                    health: healths[health].into(),
                    version: format!("1.{health}.0"),
                    received_at: 100 + received,
                    deleted,
                    ..row(&format!("c{cluster}"), &format!("app-{name}"), seq)
                })
                .collect();
            let mut applied = Fleet::default();
            for r in &rows {
                applied.apply_observed(r);
            }
            let mut staged_fleet = Fleet::default();
            let mut staged = Staged::with_limit(limit);
            for r in &rows {
                staged_fleet.stage_observed(&r.borrowed(), &mut staged);
            }
            staged_fleet.place_staged(&mut staged);
            proptest::prop_assert_eq!(objects_of(&staged_fleet), objects_of(&applied));
            proptest::prop_assert_eq!(staged_fleet.objects, applied.objects);
            proptest::prop_assert_eq!(staged_fleet.observed_watermark, applied.observed_watermark);

            // Half the rows made apart (as on the thread reading arrivals) in batches of
            // `limit`, taken between the others.
            let mut mixed = Fleet::default();
            let symbols = mixed.symbols.clone();
            let mut memo = crate::symbols::InternMemo::default();
            let mut made = Made::default();
            let mut staged = Staged::with_limit(limit);
            for (i, r) in rows.iter().enumerate() {
                if i % 2 == 0 {
                    mixed.stage_observed(&r.borrowed(), &mut staged);
                } else {
                    Fleet::make_object(&symbols, &mut memo, &r.borrowed(), &mut made);
                    if made.len() >= limit {
                        mixed.stage_made(std::mem::take(&mut made), &mut staged);
                    }
                }
            }
            mixed.stage_made(made, &mut staged);
            mixed.place_staged(&mut staged);
            proptest::prop_assert_eq!(objects_of(&mixed), objects_of(&applied));
            proptest::prop_assert_eq!(mixed.objects, applied.objects);
            proptest::prop_assert_eq!(mixed.observed_watermark, applied.observed_watermark);
        }
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
