//! The questions answered from the maintained states and counters: which clusters a filter
//! selects, rollups and the summary per group, desired and running versions per group,
//! environments, and the check that the maintained state equals a count from scratch.

use std::collections::{BTreeMap, HashMap};

use fleetscope_model::{DriftPolicy, DriftState, GroupPath, Timestamp};

use crate::counts::state_index;
use crate::counts::Counts;
use crate::fleet::records::ClusterRec;
use crate::fleet::records::EnvironmentTable;
use crate::fleet::records::Filter;
use crate::fleet::records::VersionsByGroup;
use crate::fleet::Fleet;
use crate::rollups::{Side, ANY_ENVIRONMENT};

impl Fleet {
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
    /// cluster's counted states, every cell, the stale set and the insights' sides. Returns what
    /// differs (empty when equal).
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
        let slots = (0..u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters"))
            .map(|slot| (slot, self.clusters.rec(slot)));
        differences.extend(self.sides.differences(slots));
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
