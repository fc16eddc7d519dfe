//! The fleet at a past moment (`at`): a [`Fleet`] built from the rows the store held then
//! (see `fleetscope_store::past`) and classified at that moment with the hub's own drift
//! rules, so that every route that takes `at` answers from it with the same code it answers
//! the live fleet with.
//!
//! A build reads only what the question needs ([`Reach`]): one cluster, one app on every
//! cluster, or everything. Built fleets are kept for a while ([`Past`]), so the pages of
//! one answer and the routes asked about the same moment share one build. A build runs on two
//! threads of its own ([`build_apart`]), as a whole fleet is millions of rows.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::past::{ObservedPart, ObservedScope};
use fleetscope_store::Store;

use crate::fleet::{Fleet, Made, Staged, Tables};

/// What a build at a moment covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reach {
    /// Every cluster and every app.
    Fleet,
    /// One cluster, every app on it.
    Cluster(String),
    /// Every cluster, one app.
    App(String),
}

impl Reach {
    /// How much of the cache a build of this reach takes: a whole fleet is the size of the
    /// live one.
    fn weight(&self) -> u32 {
        match self {
            Reach::Fleet => 8,
            Reach::App(_) => 1,
            Reach::Cluster(_) => 1,
        }
    }
}

/// Why a moment cannot be answered.
#[derive(Debug, thiserror::Error)]
pub enum PastError {
    #[error("no history is kept yet: the collector takes the first checkpoint of the fleet's state within minutes of starting (--checkpoint-hours, default every hour), and moments from it on can be asked for")]
    NoHistory,
    #[error("history is kept from {kept_from} (the oldest checkpoint; the collector's --retention-days decides how long checkpoints are kept); ask for a moment from then on")]
    BeforeHistory { kept_from: String },
    #[error("ClickHouse: {0}")]
    Store(#[from] fleetscope_store::StoreError),
}

/// How long a built fleet is kept after its build.
pub const KEPT_FOR: Duration = Duration::from_secs(300);

/// How many builds of a whole fleet may run at once, and of one app on every cluster; more
/// wait their turn (one cluster's build takes none). A whole fleet is as large as the live one
/// and keeps two threads busy for seconds.
pub const FLEET_BUILDS_AT_ONCE: usize = 2;
pub const APP_BUILDS_AT_ONCE: usize = 8;

/// Built fleets by (moment, reach), weighed so that at most two whole fleets are held.
pub type PastFleets = moka::future::Cache<(i64, Reach), Arc<Fleet>>;

/// The fleets built at past moments, and the turns for building them.
///
/// A build runs as a task of its own, holding its turn until it is done: a request that gives
/// up (its deadline, a client gone) neither stops the build nor frees its turn early, so
/// requests asked again and again cannot start more builds than the turns allow, and the
/// finished build is kept for the next request about the same moment and reach.
#[derive(Clone, Debug)]
pub struct Past {
    pub fleets: PastFleets,
    fleet_turns: Arc<tokio::sync::Semaphore>,
    app_turns: Arc<tokio::sync::Semaphore>,
    /// Builds waiting for their turn, and building.
    waiting: Arc<AtomicUsize>,
    building: Arc<AtomicUsize>,
}

impl Default for Past {
    fn default() -> Past {
        Past {
            fleets: moka::future::Cache::builder()
                .weigher(|(_, reach): &(i64, Reach), _| reach.weight())
                .max_capacity(2 * u64::from(Reach::Fleet.weight()))
                .time_to_live(KEPT_FOR)
                .build(),
            fleet_turns: Arc::new(tokio::sync::Semaphore::new(FLEET_BUILDS_AT_ONCE)),
            app_turns: Arc::new(tokio::sync::Semaphore::new(APP_BUILDS_AT_ONCE)),
            waiting: Arc::default(),
            building: Arc::default(),
        }
    }
}

/// A build's turn; given back when dropped.
#[derive(Debug)]
pub struct Turn {
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    building: Arc<AtomicUsize>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.building.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a build waiting for its turn while it lives.
struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Past {
    /// Waits for a turn to build `reach`, in the order asked.
    pub async fn turn(&self, reach: &Reach) -> Turn {
        let turns = match reach {
            Reach::Fleet => Some(&self.fleet_turns),
            Reach::App(_) => Some(&self.app_turns),
            Reach::Cluster(_) => None,
        };
        let permit = match turns {
            Some(turns) => {
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let _waiting = Waiting(self.waiting.clone());
                // The semaphores are never closed.
                turns.clone().acquire_owned().await.ok()
            }
            None => None,
        };
        self.building.fetch_add(1, Ordering::Relaxed);
        Turn {
            _permit: permit,
            building: self.building.clone(),
        }
    }

    /// How many builds wait for their turn now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// How many builds are under way now.
    pub fn building(&self) -> usize {
        self.building.load(Ordering::Relaxed)
    }

    /// The fleet at `at` for `reach`: kept from an earlier build, or built in its turn.
    /// `done` is called with each build's outcome and duration (from its turn, not its wait).
    pub async fn fleet_at(
        &self,
        store: Store,
        at: Timestamp,
        reach: Reach,
        policy: DriftPolicy,
        done: impl FnOnce(bool, Duration) + Send + 'static,
    ) -> Result<Arc<Fleet>, Arc<PastError>> {
        let key = (at.seconds(), reach.clone());
        let past = self.clone();
        self.fleets
            .try_get_with(key.clone(), async move {
                let build = tokio::spawn(async move {
                    let _turn = past.turn(&reach).await;
                    // A build that ran while this one waited may have left the answer.
                    if let Some(fleet) = past.fleets.get(&key).await {
                        return Ok(fleet);
                    }
                    let started = Instant::now();
                    let result = build_apart(&store, at, reach, policy).await.map(Arc::new);
                    done(result.is_ok(), started.elapsed());
                    if let Ok(fleet) = &result {
                        past.fleets.insert(key, fleet.clone()).await;
                    }
                    result
                });
                build.await.map_err(|err| {
                    PastError::Store(fleetscope_store::StoreError::Runtime(format!(
                        "the build stopped: {err}"
                    )))
                })?
            })
            .await
    }
}

fn rfc3339(at: Timestamp) -> String {
    jiff::Timestamp::from_second(at.seconds())
        .map(|t| t.to_string())
        .unwrap_or_else(|_| at.seconds().to_string())
}

/// The checkpoint a moment is answered from (the newest at or before it).
async fn base_for(store: &Store, at: Timestamp) -> Result<Timestamp, PastError> {
    let checkpoints = store.checkpoints().await?;
    let kept_from = checkpoints.kept_from().ok_or(PastError::NoHistory)?;
    checkpoints
        .base_for(at)
        .ok_or_else(|| PastError::BeforeHistory {
            kept_from: rfc3339(kept_from),
        })
}

/// How many objects one batch from the checkpoint's thread holds.
const MADE_BATCH: usize = 1 << 14;

/// How many batches may wait for the fleet's thread before the checkpoint's thread waits.
const MADE_BATCHES_QUEUED: usize = 4;

/// Reads and classifies the fleet as it was at `at` on two threads of
/// their own with connections of their own ([`Store::read_in_bulk`]): one reads the
/// checkpoint and makes its objects ([`Fleet::make_object`]); the other reads the tables and
/// the arrivals after the checkpoint, builds the fleet and places the checkpoint's objects as
/// they come. A whole fleet is millions of rows, and the fleet's thread was the bottleneck of a
/// build on one; with hourly checkpoints the checkpoint is the larger part, so it is the one
/// read apart.
pub async fn build_apart(
    store: &Store,
    at: Timestamp,
    reach: Reach,
    policy: DriftPolicy,
) -> Result<Fleet, PastError> {
    let started = Instant::now();
    let base = base_for(store, at).await?;
    let fleet = Fleet::default();
    let symbols = fleet.symbols.clone();
    let (send, receive) = std::sync::mpsc::sync_channel::<Made>(MADE_BATCHES_QUEUED);
    let scope_reach = reach.clone();
    let checkpoint = store.read_in_bulk(move |store| async move {
        let mut memo = crate::symbols::InternMemo::default();
        let mut made = Made::default();
        let mut open = true;
        store
            .observed_at(
                base,
                at,
                scope_of(&scope_reach),
                ObservedPart::Checkpoint,
                |row| {
                    if !open {
                        return;
                    }
                    Fleet::make_object(&symbols, &mut memo, &row, &mut made);
                    if made.len() >= MADE_BATCH {
                        // The fleet's thread stopped (its read failed): read on, keep nothing.
                        open = send.send(std::mem::take(&mut made)).is_ok();
                    }
                },
            )
            .await
            .inspect(|_| {
                if open && !made.is_empty() {
                    // Unsent only when the fleet's thread stopped.
                    let _ = send.send(std::mem::take(&mut made));
                }
            })
    });
    let build = store.read_in_bulk(move |store| async move {
        build_from(
            &store,
            fleet,
            Started { at: started, base },
            at,
            &reach,
            &policy,
            receive,
        )
        .await
        .map(|(fleet, built)| (fleet, built, reach))
    });
    let (checkpoint, built) = tokio::join!(checkpoint, build);
    // A checkpoint read that failed left the fleet without its rows: its error is the answer.
    let checkpoint_rows = checkpoint??;
    let (fleet, built, reach) = built??;
    built.log(at, &reach, checkpoint_rows);
    Ok(fleet)
}

/// What a build read and how long it took, for its log line.
struct Built {
    base: Timestamp,
    rows: u64,
    tables: Duration,
    /// Until every row was read (and the checkpoint's made into objects).
    read: Duration,
    /// Until the staged objects were placed.
    placed: Duration,
    started: Instant,
}

impl Built {
    /// `apart_rows`: the rows another thread read.
    fn log(&self, at: Timestamp, reach: &Reach, apart_rows: u64) {
        tracing::info!(
            at = at.seconds(),
            ?reach,
            checkpoint = self.base.seconds(),
            observed_rows = self.rows + apart_rows,
            tables_ms = self.tables.as_millis() as u64,
            read_ms = self.read.as_millis() as u64,
            place_ms = (self.placed - self.read).as_millis() as u64,
            classify_ms = (self.started.elapsed() - self.placed).as_millis() as u64,
            total_ms = self.started.elapsed().as_millis() as u64,
            "built the fleet at a past moment"
        );
    }
}

/// When a build started, and its checkpoint.
struct Started {
    at: Instant,
    base: Timestamp,
}

fn scope_of(reach: &Reach) -> ObservedScope<'_> {
    match reach {
        Reach::Fleet => ObservedScope::All,
        Reach::Cluster(id) => ObservedScope::Cluster(id),
        Reach::App(app) => ObservedScope::App(app),
    }
}

/// Builds `fleet` at `at` from the checkpoint at `started.base`: the checkpoint's objects come
/// from another thread through `made`; the tables and the arrivals are read here.
async fn build_from(
    store: &Store,
    fleet: Fleet,
    started: Started,
    at: Timestamp,
    reach: &Reach,
    policy: &DriftPolicy,
    made: std::sync::mpsc::Receiver<Made>,
) -> Result<(Fleet, Built), PastError> {
    let Started { at: started, base } = started;
    let render = store.render_at(at).await?;
    let cluster = match reach {
        Reach::Cluster(id) => Some(id.as_str()),
        _ => None,
    };
    let app = match reach {
        Reach::App(app) => Some(app.as_str()),
        _ => None,
    };
    // Inventory, membership, desired state and heartbeats are read while the observed rows
    // stream in (ClickHouse answers them on another core); the fleet takes them after.
    let tables = async {
        let inventory = store.inventory_at(at, render, cluster).await?;
        let members = store.members_at(render, cluster).await?;
        // A set's rows never change, so the sets stored now are those of any past moment.
        let since_sets = store.since_set_rows().await?;
        let render_group = match reach {
            Reach::Cluster(_) => Some(
                members
                    .iter()
                    .find(|m| m.removed == 0)
                    .map(|m| m.render_group.clone())
                    .unwrap_or_default(),
            ),
            _ => None,
        };
        let desired = match render_group.as_deref() {
            // A cluster without a render group has no desired state.
            Some("") => Vec::new(),
            group => store.desired_at(render, group, app).await?,
        };
        let ids: Vec<&str> = inventory.iter().map(|c| c.cluster_id.as_str()).collect();
        let heartbeats = match cluster {
            Some(id) => store.heartbeats_at(at, Some(&[id]), &[]).await?,
            None => store.heartbeats_at(at, None, &ids).await?,
        };
        Ok::<_, fleetscope_store::StoreError>((
            Tables::from_rows(inventory, members, since_sets, desired),
            heartbeats,
            started.elapsed(),
        ))
    };
    let mut fleet = fleet;
    let mut staged = Staged::new();
    let observed = async {
        let mut since_drained = 0u32;
        let rows = store
            .observed_at(base, at, scope_of(reach), ObservedPart::Arrivals, |row| {
                fleet.stage_observed(&row, &mut staged);
                since_drained += 1;
                if since_drained == 4_096 {
                    since_drained = 0;
                    while let Ok(batch) = made.try_recv() {
                        fleet.stage_made(batch, &mut staged);
                    }
                }
            })
            .await?;
        // The rest of the checkpoint, until its thread is done. Waiting without blocking the
        // thread: the tables' reads beside this one go on meanwhile (a moment just after its
        // checkpoint has few arrivals, and a blocking wait held them back for the whole
        // checkpoint).
        loop {
            match made.try_recv() {
                Ok(batch) => fleet.stage_made(batch, &mut staged),
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
            }
        }
        Ok::<_, fleetscope_store::StoreError>(rows)
    };
    let (tables, rows) = tokio::join!(tables, observed);
    let (tables, heartbeats, tables_read) = tables?;
    let rows = rows?;
    let read = started.elapsed();
    fleet.place_staged(&mut staged);
    let placed = started.elapsed();
    fleet.set_tables(tables);
    fleet.apply_heartbeats(heartbeats);
    fleet.advance(at, policy);
    Ok((
        fleet.snapshot(),
        Built {
            base,
            rows,
            tables: tables_read,
            read,
            placed,
            started,
        },
    ))
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn builds_beyond_the_turns_wait_until_one_is_given_back() {
        let past = Past::default();
        let mut fleets = Vec::new();
        for _ in 0..FLEET_BUILDS_AT_ONCE {
            fleets.push(
                past.turn(&Reach::Fleet)
                    .now_or_never()
                    .expect("a free turn"),
            );
        }
        let mut apps = Vec::new();
        for i in 0..APP_BUILDS_AT_ONCE {
            let reach = Reach::App(format!("app-{i}"));
            apps.push(past.turn(&reach).now_or_never().expect("a free turn"));
        }
        assert_eq!(past.building(), FLEET_BUILDS_AT_ONCE + APP_BUILDS_AT_ONCE);

        let mut next_fleet = Box::pin(past.turn(&Reach::Fleet));
        assert!((&mut next_fleet).now_or_never().is_none());
        let app_x = Reach::App("app-x".into());
        let mut next_app = Box::pin(past.turn(&app_x));
        assert!((&mut next_app).now_or_never().is_none());
        assert_eq!(past.waiting(), 2);
        // One cluster's build takes no turn.
        let cluster = past.turn(&Reach::Cluster("c1".into())).now_or_never();
        assert!(cluster.is_some());
        drop(cluster);

        // A turn given back goes to the build that waited, of the same reach only.
        drop(apps.pop());
        assert!((&mut next_fleet).now_or_never().is_none());
        let app_turn = (&mut next_app).now_or_never().expect("the app's turn");
        drop(fleets.pop());
        let fleet_turn = (&mut next_fleet).now_or_never().expect("the fleet's turn");
        assert_eq!(past.waiting(), 0);
        assert_eq!(past.building(), FLEET_BUILDS_AT_ONCE + APP_BUILDS_AT_ONCE);
        drop((app_turn, fleet_turn, fleets, apps));
        assert_eq!(past.building(), 0);

        // A request that stops waiting takes nothing with it.
        let mut held: Vec<Turn> = Vec::new();
        for _ in 0..FLEET_BUILDS_AT_ONCE {
            held.push(past.turn(&Reach::Fleet).now_or_never().unwrap());
        }
        let mut given_up = Box::pin(past.turn(&Reach::Fleet));
        assert!((&mut given_up).now_or_never().is_none());
        drop(given_up);
        assert_eq!(past.waiting(), 0);
        drop(held.pop());
        assert!(past.turn(&Reach::Fleet).now_or_never().is_some());
    }
}
