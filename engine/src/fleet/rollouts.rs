//! The rollouts kept current in the fleet: each render's desired version changes applied as the
//! renderer's tables are, and each cluster's pairs followed as they are worked out again, so
//! that a cluster reaches (or fails in) the rollout it belongs to when its pair first becomes
//! `in_sync` (or `failed`) there ([`crate::rollouts::progress`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetscope_model::DriftState;
use fleetscope_store::DesiredVersionChangeRow;

use crate::fleet::Fleet;
use crate::rollouts::progress::Seen;
use crate::rollouts::RenderInfo;
use crate::rollups::Counted;

impl Fleet {
    /// Applies the version changes of renders newer than those applied, and marks the clusters
    /// they moved to be worked out again (a cluster already in sync at its new version reaches
    /// its rollout at once).
    pub(crate) fn apply_version_changes(
        &mut self,
        rows: &[DesiredVersionChangeRow],
        origins: &BTreeMap<u64, RenderInfo>,
    ) {
        let after = self.rollouts.last_render;
        let newer: Vec<DesiredVersionChangeRow> = rows
            .iter()
            .filter(|r| r.render_id > after)
            .cloned()
            .collect();
        self.apply_version_change_rows(&newer, origins, true);
    }

    /// Applies change rows in the store's order (app, render, cluster), each app's renders
    /// after those of that app already applied; with `follow`, the clusters they moved are
    /// worked out again (a fleet being loaded works out every cluster anyway).
    fn apply_version_change_rows(
        &mut self,
        newer: &[DesiredVersionChangeRow],
        origins: &BTreeMap<u64, RenderInfo>,
        follow: bool,
    ) {
        if newer.is_empty() {
            return;
        }
        let clusters = &mut self.clusters;
        let mut moved = Vec::with_capacity(newer.len());
        self.rollouts
            .apply_numbered(newer, origins, &mut |cluster| {
                let slot = clusters.slot_or_add(cluster);
                if follow {
                    moved.push(slot);
                }
                slot
            });
        for slot in moved {
            self.upkeep.rollout_moved.insert(slot);
            self.touch(slot);
        }
        self.generation += 1;
    }

    /// Follows the pairs of the cluster in `slot` from what it counted as (`old`) to what it
    /// counts as now (`new`): each pair whose state changed, or whose cluster a render moved,
    /// has its state noted with its rollout, and one that became in sync or failed is shown to
    /// it.
    pub(crate) fn follow_rollouts(
        &mut self,
        slot: u32,
        old: Option<&Counted>,
        new: Option<&Counted>,
    ) {
        let Some(new) = new else {
            return;
        };
        let moved = self.upkeep.rollout_moved.remove(&slot);
        // Rollouts number clusters by their slots.
        let number = slot;
        let mut seen: Vec<(u32, Seen)> = Vec::new();
        for pair in new.pairs() {
            // The state, or the version it was observed at, changed.
            if !moved && old.and_then(|o| o.pair(pair.app())) == Some(pair) {
                continue;
            }
            let Some(app) = self.rollouts.apps.get_mut(self.symbols.text(pair.app())) else {
                continue;
            };
            if app.owner(number).is_none() {
                continue;
            }
            if app.state(number) != Some(pair.state()) {
                Arc::make_mut(app).set_state(number, pair.state());
            }
            // Failing counts only at the rollout's version: a cluster still running the version
            // before, failing there, has not failed at this one.
            let state = match pair.state() {
                DriftState::InSync => Seen::InSync,
                DriftState::Failed if pair.observed_version() == pair.desired_version() => {
                    Seen::Failed
                }
                _ => continue,
            };
            if app.reached_at(number).is_none() {
                seen.push((pair.app(), state));
            }
        }
        if seen.is_empty() {
            return;
        }
        let cluster = self.clusters.rec(slot);
        let entered: BTreeMap<u32, u32> = self
            .raw_pairs(cluster)
            .into_iter()
            .filter_map(|(app, _, observed)| Some((app, observed?.transitioned_at)))
            .collect();
        for (app, state) in seen {
            let at = entered.get(&app).copied().unwrap_or(0);
            if let Some(rollouts) = self.rollouts.apps.get_mut(self.symbols.text(app)) {
                Arc::make_mut(rollouts).observe(number, state, at);
            }
        }
    }
}

/// The desired version changes of every render, streamed from the store in its order (app,
/// render, cluster) and applied one (app, render) at a time, so that a long history is never
/// held whole.
#[derive(Debug, Default)]
pub(crate) struct ChangeStream {
    batch: Vec<DesiredVersionChangeRow>,
    /// How many rows of each render were streamed.
    pub(crate) held: BTreeMap<u64, u32>,
}

impl ChangeStream {
    pub(crate) fn push(
        &mut self,
        fleet: &mut Fleet,
        row: DesiredVersionChangeRow,
        origins: &BTreeMap<u64, RenderInfo>,
    ) {
        if self
            .batch
            .first()
            .is_some_and(|first| first.app != row.app || first.render_id != row.render_id)
        {
            self.flush(fleet, origins);
        }
        *self.held.entry(row.render_id).or_default() += 1;
        self.batch.push(row);
    }

    pub(crate) fn flush(&mut self, fleet: &mut Fleet, origins: &BTreeMap<u64, RenderInfo>) {
        fleet.apply_version_change_rows(&self.batch, origins, false);
        self.batch.clear();
    }
}
