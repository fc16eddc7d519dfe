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

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::queries::{ArrivalHorizon, ObservedSource};
use fleetscope_store::Store;

use crate::fleet::tables::complete_tables;
use crate::fleet::Fleet;
use crate::index::arrivals::ArrivalCursor;
use crate::index::arrivals::ArrivalRead;
use crate::index::arrivals::ARRIVAL_READ_ROWS;

#[cfg(test)]
mod arrival_model;
pub mod arrivals;
mod refresh;
#[cfg(test)]
mod tests;

/// How far back each incremental read of observed state and heartbeats reaches before the
/// newest row already seen: rows are stamped when received but become visible when their
/// batch is inserted, up to a few seconds later.
pub const OVERLAP_SECONDS: i64 = 60;

/// Reads the whole fleet from the store; `clock` tells whether a render being published has
/// had time to finish.
pub async fn load(store: &Store, clock: fn() -> Timestamp) -> fleetscope_store::Result<Fleet> {
    let mut fleet = Fleet::default();
    fleet.set_tables(complete_tables(store, clock).await?);
    let last_render = fleet.markers.map_or(0, |m| m.last_render);
    let origins = crate::fleet::tables::render_origins(store, 0).await?;
    loop {
        crate::fleet::tables::await_version_changes(store, last_render, clock).await?;
        let mut changes = crate::fleet::ChangeStream::default();
        store
            .desired_version_changes_each(0, last_render, |row| {
                changes.push(&mut fleet, row, &origins);
            })
            .await?;
        changes.flush(&mut fleet, &origins);
        // On a ClickHouse cluster the stream may have been answered by another node than the
        // wait: a render young enough to wait for whose changes were not all read is read
        // again, whole.
        let short =
            crate::fleet::tables::young_and_short(store, last_render, &changes.held, clock())
                .await?;
        if short.is_none() {
            break;
        }
        fleet.rollouts = Default::default();
    }
    fleet.rollouts.last_render = fleet.rollouts.last_render.max(last_render);
    fleet.restore_rollouts(store).await?;
    let heartbeats = store.heartbeats_since(Timestamp::EPOCH).await?;
    fleet.apply_heartbeats(heartbeats);
    store
        .observed_objects(ObservedSource::Latest, Timestamp::EPOCH, |row| {
            fleet.apply_observed(&row);
        })
        .await?;
    Ok(fleet)
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
    /// The wall clock, read by refreshes.
    clock: fn() -> Timestamp,
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
pub(crate) async fn arrival_horizons(store: &Store) -> (Vec<ArrivalHorizon>, Vec<ArrivalHorizon>) {
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
pub(crate) fn cpu_bound<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Index {
    /// [`Index::load_under`] the default policy.
    pub async fn load(store: Store, clock: fn() -> Timestamp) -> fleetscope_store::Result<Index> {
        Index::load_under(store, clock, &DriftPolicy::default()).await
    }

    /// Loads the whole fleet from `store` and classifies it at `clock`'s now under `policy`
    /// (see [`Index::view`] for another moment or policy). `clock` is the wall clock the
    /// refreshes read (the engine reads none itself).
    ///
    /// That first classification is the start the rollouts are taken up from: a cluster whose
    /// pair is in sync then reaches its rollout, and nothing asked later under another policy
    /// takes that back. So `policy` must be the one the index will be asked with: under a
    /// longer stale threshold, a cluster stale by the hub's would count as in sync and reach
    /// its rollout at the start.
    pub async fn load_under(
        store: Store,
        clock: fn() -> Timestamp,
        policy: &DriftPolicy,
    ) -> fleetscope_store::Result<Index> {
        let started = Instant::now();
        let (horizons, heartbeat_horizons) = arrival_horizons(&store).await;
        // Millions of rows: read on a thread of its own (see `Store::read_in_bulk`).
        let mut fleet = store
            .read_in_bulk(move |store| async move { load(&store, clock).await })
            .await??;
        fleet.advance(clock(), policy);
        Ok(Index {
            store,
            clock,
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

    /// [`Index::refresh_at`] at the index's clock, under the policy in force.
    pub async fn refresh(&self) -> fleetscope_store::Result<Refreshed> {
        let policy = self.current().policy;
        self.refresh_at((self.clock)(), &policy).await
    }
}
