//! The latest state of one app object, as the fleet keeps it: a 28-byte record whose strings
//! and recurring parts are symbols, and the order in which an object's observed rows supersede
//! each other.

use fleetscope_model::state::{Health, ObjectKind, SyncStatus};

use crate::symbols::Symbols;

/// The content part of the order in which one object's observed rows supersede each other (the
/// store's `OBSERVED_ORDER` after `seq` and `received_at`): two different changes with the same
/// number and arrival second resolve by it, the same way the store's queries resolve them.
pub(crate) fn observed_order<'a>(
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
pub(crate) fn supersedes(symbols: &Symbols, new: &Object, held: &Object) -> bool {
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
    pub(crate) fn pack(&self, o: &Object) -> ObjectRec {
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
    pub(crate) fn order(&self, rec: &ObjectRec) -> (&'static str, u32, u32) {
        let key = self.keys.get(rec.key);
        (key.kind.as_str(), key.namespace, key.name)
    }
}
