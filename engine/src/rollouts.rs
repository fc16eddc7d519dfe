//! Rollouts as records, from what each render changed per cluster
//! (`desired_version_changes`, one row per (cluster, app) whose desired version a render
//! changed). This part needs no observed state: which clusters each rollout targeted at its
//! start, which joined or left it since and how, and what it moved them from.
//!
//! The rules, per app, render by render in order:
//! - **A rollout** is the move of the app to one version by one render: the clusters the render
//!   moved to that version from another version (a wave), or from not desiring the app when no
//!   cluster desired that version before the render (a first release of it).
//! - **A cluster that joins**: one the render made desire the app at a version some cluster
//!   already desired (a new cluster, one newly selected) joins the newest rollout of that version
//!   instead of starting one. Without any rollout of it (history from before the rows were
//!   kept), it starts one.
//! - **A cluster that leaves** its rollout (the one that last set its version): to a version among
//!   the rollout's from-versions, the rollout is rolled back; to another version, superseded; to
//!   nothing (app or cluster taken away), it just leaves. Each is recorded with its render, so
//!   whether it came before the rollout completed is decided with the observed state.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chunked::Chunked;

use fleetscope_store::DesiredVersionChangeRow;

/// Cluster ids as small numbers, shared by every app's records: each id's text is held once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterIds {
    numbers: HashMap<String, u32>,
    names: Vec<String>,
}

impl ClusterIds {
    /// The number of `cluster`, given one if it has none.
    pub fn number(&mut self, cluster: &str) -> u32 {
        if let Some(n) = self.numbers.get(cluster) {
            return *n;
        }
        let n = self.names.len() as u32;
        self.names.push(cluster.to_owned());
        self.numbers.insert(cluster.to_owned(), n);
        n
    }

    /// The number of `cluster`, if it has one.
    pub fn find(&self, cluster: &str) -> Option<u32> {
        self.numbers.get(cluster).copied()
    }

    pub fn name(&self, number: u32) -> &str {
        &self.names[number as usize]
    }
}

/// One rollout: an app's move to `version` by render `render_id`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rollout {
    pub app: String,
    pub render_id: u64,
    pub version: String,
    /// The versions its clusters were moved from, with how many each (`""`: not desired).
    pub from_versions: BTreeMap<String, u32>,
    /// The clusters the render moved (its targets at the start).
    pub targeted_at_start: u32,
    /// Clusters that joined it since (see the module's rules).
    pub joined: u32,
    /// Clusters that left it since, and the first render that moved any of them: back to a
    /// from-version, on to another version, or away.
    pub rolled_back: u32,
    pub first_rolled_back_by: Option<u64>,
    pub superseded: u32,
    pub first_superseded_by: Option<u64>,
    pub removed: u32,
    /// When it started (its render's time), its platform commit and when that was made,
    /// where the render recorded them.
    pub started_at: u32,
    pub platform_commit: String,
    pub committed_at: Option<u32>,
    /// Progress as the hub sees it ([`progress`]).
    pub progress: progress::Progress,
}

impl Rollout {
    /// Its clusters now: those it targeted or that joined, less those that left.
    pub fn targeted_now(&self) -> u32 {
        (self.targeted_at_start + self.joined)
            .saturating_sub(self.rolled_back + self.superseded + self.removed)
    }
}

/// The rollouts of one app and, for each cluster, the one it belongs to now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppRollouts {
    /// In render order (then version).
    pub rollouts: Vec<Rollout>,
    /// By cluster number ([`ClusterIds`]): one more than the index in `rollouts` of the rollout
    /// that last set its version, 0 where the app is not desired. Four bytes a cluster.
    owners: Chunked<u32>,
    /// Version → how many clusters desire it.
    desiring: BTreeMap<String, u32>,
    /// By cluster number: when it reached its rollout, 0 while not; and, for the few that
    /// failed at its version before reaching it, when they first did ([`progress`]).
    reached_at: Chunked<u32>,
    failed_at: BTreeMap<u32, u32>,
    /// By cluster number: its pair's state as last noted (one more than its `DriftState`
    /// index, 0 for none), one byte a cluster.
    states: Chunked<u8>,
}

impl AppRollouts {
    /// The index in `rollouts` of the rollout cluster `number` belongs to now, if any.
    pub fn owner(&self, number: u32) -> Option<usize> {
        match self.owners.get(number as usize) {
            0 => None,
            o => Some(o as usize - 1),
        }
    }

    /// Every cluster that belongs to a rollout now, with that rollout's index.
    pub fn owners(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        self.owners.iter().map(|(n, o)| (n as u32, o as usize - 1))
    }

    /// The cluster numbers whose rollout, reaching or first failure differ from `before`'s
    /// (every cluster with one when there is no `before`), in order, each once.
    pub fn changed_clusters(&self, before: Option<&AppRollouts>) -> Vec<u32> {
        let empty = AppRollouts::default();
        let before = before.unwrap_or(&empty);
        let mut numbers: std::collections::BTreeSet<u32> = self
            .owners
            .changed_since(&before.owners)
            .chain(self.reached_at.changed_since(&before.reached_at))
            .map(|n| n as u32)
            .collect();
        for (number, at) in &self.failed_at {
            if before.failed_at.get(number) != Some(at) {
                numbers.insert(*number);
            }
        }
        for number in before.failed_at.keys() {
            if !self.failed_at.contains_key(number) {
                numbers.insert(*number);
            }
        }
        numbers.into_iter().collect()
    }

    /// Cluster `number` belongs to rollout `owner` now (`None`: to none).
    fn set_owner(&mut self, number: u32, owner: Option<usize>) {
        let value = owner.map_or(0, |o| {
            u32::try_from(o + 1).expect("fewer than 4 billion rollouts")
        });
        self.owners.set(number as usize, value);
    }

    /// Applies one render's rows (all of one app and one render, any order), with `number`
    /// giving each cluster's number. Renders must come in order.
    pub fn apply_render(
        &mut self,
        rows: &[&DesiredVersionChangeRow],
        number: &mut impl FnMut(&str) -> u32,
        render: &RenderInfo,
    ) {
        let Some(first) = rows.first() else {
            return;
        };
        let (app, render_id) = (first.app.as_str(), first.render_id);
        let started_at = render
            .rendered_at
            .unwrap_or_else(|| u32::try_from(render_id / 1000).unwrap_or(u32::MAX));
        let mut left = std::collections::BTreeSet::new();
        // Versions desired before this render decide which clusters join.
        let desired_before: std::collections::BTreeSet<String> = self
            .desiring
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(v, _)| v.clone())
            .collect();
        let numbers: Vec<u32> = rows.iter().map(|row| number(&row.cluster_id)).collect();
        for (row, number) in rows.iter().zip(&numbers) {
            left.extend(self.leave(row, *number, render_id));
            if !row.from_version.is_empty() {
                if let Some(n) = self.desiring.get_mut(&row.from_version) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        // This render's rollouts, by version.
        let mut made: BTreeMap<&str, usize> = BTreeMap::new();
        for (row, number) in rows.iter().zip(&numbers) {
            if row.to_version.is_empty() {
                continue;
            }
            match self.desiring.get_mut(&row.to_version) {
                Some(n) => *n += 1,
                None => {
                    self.desiring.insert(row.to_version.clone(), 1);
                }
            }
            let joins = row.from_version.is_empty() && desired_before.contains(&row.to_version);
            let joined = joins
                .then(|| {
                    self.rollouts
                        .iter()
                        .rposition(|r| r.version == row.to_version && r.render_id < render_id)
                })
                .flatten();
            let index = match joined {
                Some(index) => {
                    self.rollouts[index].joined += 1;
                    index
                }
                None => {
                    let index = *made.entry(row.to_version.as_str()).or_insert_with(|| {
                        self.rollouts.push(Rollout {
                            app: app.to_owned(),
                            render_id,
                            version: row.to_version.clone(),
                            started_at,
                            platform_commit: render.platform_commit.clone(),
                            committed_at: render.committed_at,
                            ..Rollout::default()
                        });
                        self.rollouts.len() - 1
                    });
                    let rollout = &mut self.rollouts[index];
                    rollout.targeted_at_start += 1;
                    match rollout.from_versions.get_mut(&row.from_version) {
                        Some(n) => *n += 1,
                        None => {
                            rollout.from_versions.insert(row.from_version.clone(), 1);
                        }
                    }
                    index
                }
            };
            self.set_owner(*number, Some(index));
        }
        // Fewer clusters to reach can complete a rollout.
        for index in left {
            self.complete_if_done(index);
        }
    }

    /// The cluster of `row` (numbered `number`) leaves the rollout that owns it, if any; returns
    /// that rollout's index.
    fn leave(
        &mut self,
        row: &DesiredVersionChangeRow,
        number: u32,
        render_id: u64,
    ) -> Option<usize> {
        let index = self.owner(number)?;
        self.set_owner(number, None);
        self.forget_progress(number, index);
        let rollout = &mut self.rollouts[index];
        if row.to_version.is_empty() {
            rollout.removed += 1;
        } else if rollout.from_versions.contains_key(&row.to_version) {
            rollout.rolled_back += 1;
            rollout.first_rolled_back_by.get_or_insert(render_id);
        } else {
            rollout.superseded += 1;
            rollout.first_superseded_by.get_or_insert(render_id);
            if rollout.progress.milestones[progress::COMPLETE].is_none() {
                rollout.progress.superseded_before_complete = true;
            }
        }
        Some(index)
    }
}

/// What a render recorded about where it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderInfo {
    /// When the render was made; without it, its id is taken as its clock in milliseconds.
    pub rendered_at: Option<u32>,
    pub platform_commit: String,
    pub committed_at: Option<u32>,
}

/// Every app's rollouts, with the numbers of the clusters they name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollouts {
    /// The numbers of the clusters, when [`Rollouts::apply`] gave them (the fleet numbers them
    /// by its own slots instead).
    pub clusters: Arc<ClusterIds>,
    /// Each app's behind a pointer of its own: a snapshot shares them, and a change copies
    /// the app it changes only.
    pub apps: BTreeMap<String, Arc<AppRollouts>>,
    /// The newest render whose rows were applied.
    pub last_render: u64,
}

impl Rollouts {
    /// Adds change rows in the store's order (app, render, cluster), each app's renders after
    /// those already applied.
    pub fn apply(&mut self, rows: &[DesiredVersionChangeRow], renders: &BTreeMap<u64, RenderInfo>) {
        let mut ids = std::mem::take(Arc::make_mut(&mut self.clusters));
        self.apply_numbered(rows, renders, &mut |cluster| ids.number(cluster));
        self.clusters = Arc::new(ids);
    }

    /// [`Rollouts::apply`] with `number` giving each cluster's number.
    pub fn apply_numbered(
        &mut self,
        rows: &[DesiredVersionChangeRow],
        renders: &BTreeMap<u64, RenderInfo>,
        number: &mut impl FnMut(&str) -> u32,
    ) {
        let none = RenderInfo::default();
        let mut start = 0;
        while start < rows.len() {
            let (app, render) = (&rows[start].app, rows[start].render_id);
            let end = rows[start..]
                .iter()
                .position(|r| &r.app != app || r.render_id != render)
                .map_or(rows.len(), |n| start + n);
            let batch: Vec<&DesiredVersionChangeRow> = rows[start..end].iter().collect();
            Arc::make_mut(self.apps.entry(app.clone()).or_default()).apply_render(
                &batch,
                number,
                renders.get(&render).unwrap_or(&none),
            );
            self.last_render = self.last_render.max(render);
            start = end;
        }
    }

    /// The rollout `cluster` belongs to now for `app`, if any.
    pub fn owner_of(&self, app: &str, cluster: &str) -> Option<&Rollout> {
        let app = self.apps.get(app)?;
        let index = app.owner(self.clusters.find(cluster)?)?;
        Some(&app.rollouts[index])
    }
}

/// Every app's rollouts from change rows in the store's order (app, render, cluster).
pub fn from_rows(rows: &[DesiredVersionChangeRow]) -> Rollouts {
    let mut rollouts = Rollouts::default();
    rollouts.apply(rows, &BTreeMap::new());
    rollouts
}

pub mod chunked;
pub mod progress;
#[cfg(test)]
mod tests;
