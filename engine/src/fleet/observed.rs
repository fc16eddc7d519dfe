//! Observed state and heartbeats in the fleet: one row at a time as a refresh reads it, or
//! staged and placed in batches sorted by cluster for a whole fleet at once.

use std::collections::HashMap;
use std::sync::Arc;

use fleetscope_model::state::{Health, ObjectKind, SyncStatus};
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::{HeartbeatRow, ObservedRef, ObservedRow};

use crate::fleet::objects::observed_order;
use crate::fleet::objects::supersedes;
use crate::fleet::objects::Object;
use crate::fleet::records::ClusterRec;
use crate::fleet::Fleet;
use crate::symbols::Symbols;

impl Fleet {
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
    pub(crate) fn apply_object(&mut self, row: &ObservedRow) -> bool {
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
                    .cmp(&row.change_seq)
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
        seq: row.change_seq,
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
