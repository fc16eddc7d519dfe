//! The fleet at a past moment (`at`): a [`Fleet`] built from the rows the store held then
//! (see `fleetscope_store::history`) and classified at that moment with the hub's own drift
//! rules, so that every route that takes `at` answers from it with the same code it answers
//! the live fleet with.
//!
//! A build reads only what the question needs ([`Reach`]): one cluster, one app on every
//! cluster, or everything. Built fleets are kept for a while ([`PastFleets`]), so the pages of
//! one answer and the routes asked about the same moment share one build.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::history::ObservedScope;
use fleetscope_store::Store;

use crate::index::{Fleet, Tables};

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

/// [`build`] on a thread of its own with connections of its own
/// ([`Store::read_in_bulk`]): a whole fleet is millions of rows.
pub async fn build_apart(
    store: &Store,
    at: Timestamp,
    reach: Reach,
    policy: DriftPolicy,
) -> Result<Fleet, PastError> {
    store
        .read_in_bulk(move |store| async move { build(&store, at, &reach, &policy).await })
        .await?
}

/// Reads and classifies the fleet as it was at `at`.
pub async fn build(
    store: &Store,
    at: Timestamp,
    reach: &Reach,
    policy: &DriftPolicy,
) -> Result<Fleet, PastError> {
    let started = Instant::now();
    let checkpoints = store.checkpoints().await?;
    let kept_from = checkpoints.kept_from().ok_or(PastError::NoHistory)?;
    let base = checkpoints
        .base_for(at)
        .ok_or_else(|| PastError::BeforeHistory {
            kept_from: rfc3339(kept_from),
        })?;
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
    // stream in (ClickHouse answers them on the other core); the fleet takes them after.
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
    let scope = match reach {
        Reach::Fleet => ObservedScope::All,
        Reach::Cluster(id) => ObservedScope::Cluster(id),
        Reach::App(app) => ObservedScope::App(app),
    };
    let mut fleet = Fleet::default();
    let mut staged = crate::index::Staged::new();
    let observed = store.observed_at(base, at, scope, |row| {
        fleet.stage_observed(&row, &mut staged);
    });
    let (tables, rows) = tokio::join!(tables, observed);
    let (tables, heartbeats, tables_read) = tables?;
    let rows = rows?;
    fleet.place_staged(&mut staged);
    fleet.set_tables(tables);
    fleet.apply_heartbeats(heartbeats);
    fleet.advance(at, policy);
    let fleet = fleet.snapshot();
    tracing::info!(
        at = at.seconds(),
        ?reach,
        checkpoint = base.seconds(),
        observed_rows = rows,
        tables_ms = tables_read.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "built the fleet at a past moment"
    );
    Ok(fleet)
}
