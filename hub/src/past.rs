//! The fleet at a past moment (`at`): a [`Fleet`] built from the rows the store held then
//! (see `fleetscope_store::history`) and classified at that moment with the hub's own drift
//! rules, so that every route that takes `at` answers from it with the same code it answers
//! the live fleet with.
//!
//! A build reads only what the question needs ([`Reach`]): one cluster, one app on every
//! cluster, or everything. Built fleets are kept for a while ([`PastFleets`]), so the pages of
//! one answer and the routes asked about the same moment share one build. A build runs on two
//! threads of its own ([`build_apart`]), as a whole fleet is millions of rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::history::{ObservedPart, ObservedScope};
use fleetscope_store::Store;

use crate::index::{Fleet, Made, Staged, Tables};

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

/// Built fleets by (moment, reach), weighed so that at most two whole fleets are held.
pub type PastFleets = moka::future::Cache<(i64, Reach), Arc<Fleet>>;

pub fn cache() -> PastFleets {
    moka::future::Cache::builder()
        .weigher(|(_, reach): &(i64, Reach), _| reach.weight())
        .max_capacity(2 * u64::from(Reach::Fleet.weight()))
        .time_to_live(KEPT_FOR)
        .build()
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
            Tables::from_rows(inventory, members, desired),
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
        // The rest of the checkpoint, until its thread is done.
        for batch in made.iter() {
            fleet.stage_made(batch, &mut staged);
        }
        Ok::<_, fleetscope_store::StoreError>(rows)
    };
    let (tables, rows) = tokio::join!(tables, observed);
    let (tables, heartbeats, tables_read) = tables?;
    let rows = rows?;
    fleet.place_staged(&mut staged);
    fleet.set_tables(tables);
    fleet.apply_heartbeats(heartbeats);
    fleet.advance(at, policy);
    Ok((
        fleet.snapshot(),
        Built {
            base,
            rows,
            tables: tables_read,
            started,
        },
    ))
}
