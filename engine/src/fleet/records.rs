//! The records of a cluster and of what it wants: desired and reason records, the cluster
//! record and its inventory part, a classified pair, and the filter a question selects by.

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetscope_model::{DriftState, GroupPath};

use crate::fleet::objects::Object;
use crate::fleet::objects::ObjectRec;
use crate::rollups::{Counted, PairHint};
use crate::symbols::Symbols;

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
    pub(crate) deadline: Option<i64>,
}

impl ClusterRec {
    /// The maintained state of the pair of `app`, if the cluster has that pair.
    pub fn state_of(&self, app: u32) -> Option<DriftState> {
        self.counted.as_ref()?.pair(app).map(|p| p.state())
    }

    /// [`ClusterRec::state_of`], looked for first where `hint` says ([`Counted::pair_near`]).
    pub fn state_near(&self, app: u32, hint: &mut PairHint) -> Option<DriftState> {
        self.counted
            .as_ref()?
            .pair_near(app, hint)
            .map(|p| p.state())
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
    pub(crate) labels: Arc<[(u32, u32)]>,
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
