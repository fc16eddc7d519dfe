//! The fleet at one moment: what every cluster is, wants and runs, with every pair's drift
//! state and the counters per group kept current as those change ([`Fleet`]). The writer changes
//! its copy; readers get an immutable [`Fleet::snapshot`].
//!
//! Submodules, one concern each: the object records ([`objects`]), the cluster and desired records
//! ([`records`]), the chunked cluster map ([`clusters`]), the small tables from the renderer and the
//! inventory ([`tables`]), observed state and heartbeats ([`observed`]), classification and the
//! clock ([`classify`]), and the questions answered from the maintained state ([`questions`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::queries::ChangeMarkers;

use crate::rollups::{Cells, ANY_ENVIRONMENT};
use crate::symbols::Symbols;

pub mod classify;
pub mod clusters;
pub mod objects;
pub mod observed;
pub mod questions;
pub mod records;
pub mod rollout_figures;
pub mod rollout_records;
mod rollouts;
pub mod sides;
pub mod tables;

pub use clusters::Clusters;
pub use objects::ObjectParts;
pub use observed::{Made, Staged};
pub use questions::as_group_rollups;
pub use records::{
    ClusterRec, DesiredRec, EnvironmentTable, Filter, Pair, ReasonRec, VersionsByGroup,
};
pub(crate) use rollouts::ChangeStream;
pub use tables::{Tables, UNFINISHED_RENDER_GRACE, UNREPLICATED_RENDER_GRACE};

/// What only the writer needs: clusters whose states must be worked out again, and every
/// cluster's next deadline in time order.
#[derive(Debug, Default)]
pub(crate) struct Upkeep {
    pub(crate) dirty: BTreeSet<u32>,
    pub(crate) timers: BTreeSet<(i64, u32)>,
    /// The distinct label lists of the inventory, each held once.
    pub(crate) label_sets: HashSet<Arc<[(u32, u32)]>>,
    /// Clusters a render's version changes moved since they were last worked out.
    pub(crate) rollout_moved: BTreeSet<u32>,
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
    /// Every app's rollouts and how far each got ([`crate::rollouts`]).
    pub rollouts: crate::rollouts::Rollouts,
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
    /// Every app's clusters by side and every cluster's attribute values, for the insights.
    pub sides: sides::Sides,
    pub(crate) upkeep: Upkeep,
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
            rollouts: self.rollouts.clone(),
            observed_watermark: self.observed_watermark,
            heartbeat_watermark: self.heartbeat_watermark,
            generation: self.generation,
            objects: self.objects,
            policy: self.policy,
            as_of: self.as_of,
            valid_until: self.upkeep.timers.first().map_or(i64::MAX, |(t, _)| *t),
            cells: self.cells.clone(),
            stale: self.stale.clone(),
            sides: self.sides.clone(),
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

    /// Marks for recounting every cluster whose `key` (a render group, a since set) is in
    /// `changed`.
    fn touch_where(&mut self, changed: &HashSet<u32>, key: impl Fn(&ClusterRec) -> Option<u32>) {
        if changed.is_empty() {
            return;
        }
        let n = u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters");
        for slot in 0..n {
            if key(self.clusters.rec(slot)).is_some_and(|k| changed.contains(&k)) {
                self.touch(slot);
            }
        }
    }
}
