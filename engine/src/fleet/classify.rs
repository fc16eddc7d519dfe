//! Pairs and their drift states: a cluster's (cluster, app) pairs from its desired and observed
//! records, classified by the model's rules; recounting a changed cluster into the group
//! counters; and the clock, which re-classifies clusters as their next deadline comes.

use std::collections::BTreeSet;
use std::sync::Arc;

use fleetscope_model::drift::{
    classify, next_change, DesiredForDrift, DriftInput, ObservedForDrift,
};
use fleetscope_model::{DriftPolicy, DriftState, Timestamp};

use crate::fleet::objects::Object;
use crate::fleet::records::ClusterRec;
use crate::fleet::records::DesiredRec;
use crate::fleet::records::Pair;
use crate::fleet::Fleet;
use crate::rollups::{Counted, CountedPair, PairHint};

impl Fleet {
    /// Every (cluster, app) pair of one cluster, unclassified, sorted by app symbol. Only
    /// clusters of the inventory have pairs. Of several live objects stamped with one app, the
    /// most recently reported counts.
    pub(crate) fn raw_pairs<'a>(
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
        let desired = self.desired_of(cluster, app);
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

    /// What `cluster`'s render group desires of `app` (a symbol), if anything.
    fn desired_of<'a>(&'a self, cluster: &ClusterRec, app: u32) -> Option<&'a DesiredRec> {
        let apps = self.desired.get(&cluster.render_group?)?;
        apps.binary_search_by_key(&app, |d| d.app)
            .ok()
            .map(|i| &apps[i])
    }

    /// The desired side and the maintained state of one cluster's pair of the cursor's app,
    /// without looking for the object it runs: what [`Fleet::current_pair`] gives of them, for
    /// questions that need no more (a pair's maintained state is there exactly when the pair
    /// is; the rare pair without one is looked up whole).
    pub fn current_desired_and_state<'a>(
        &'a self,
        cluster: &'a ClusterRec,
        cursor: &mut AppCursor,
    ) -> Option<(Option<&'a DesiredRec>, DriftState)> {
        cluster.info.as_ref()?;
        let app = cursor.app;
        let Some(state) = cluster.state_near(app, &mut cursor.hint) else {
            return self
                .current_pair(cluster, app)
                .map(|p| (p.desired, p.state));
        };
        Some((self.desired_of(cluster, app), state))
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
    pub(crate) fn counted_of(&self, cluster: &ClusterRec) -> (Option<Counted>, Option<i64>) {
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
        if changed || self.upkeep.rollout_moved.contains(&slot) {
            let old = cluster.counted.clone();
            self.follow_rollouts(slot, old.as_deref(), counted.as_ref());
        }
        let cluster = self.clusters.rec(slot);
        self.sides.revalue(slot, cluster);
        if changed {
            self.sides
                .recount(slot, cluster.counted.as_deref(), counted.as_ref());
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
            self.follow_rollouts(*slot, None, counted.as_ref());
            self.sides.revalue(*slot, self.clusters.rec(*slot));
            self.sides.recount(*slot, None, counted.as_ref());
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
}

/// One app looked up in cluster after cluster, by a pass over the fleet
/// ([`Fleet::current_desired_and_state`]): it remembers where the last cluster held the app's
/// pair, where the next one most likely holds it too.
#[derive(Debug, Clone, Copy)]
pub struct AppCursor {
    app: u32,
    hint: PairHint,
}

impl AppCursor {
    /// A cursor for the app of symbol `app`.
    pub fn new(app: u32) -> AppCursor {
        AppCursor {
            app,
            hint: PairHint::default(),
        }
    }
}
