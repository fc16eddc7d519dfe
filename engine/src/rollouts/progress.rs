//! How far each rollout got, from what its clusters' pairs became while they belonged to it.
//!
//! - A cluster **reaches** a rollout when its pair of the app is first in sync while it belongs
//!   to the rollout, at the later of the rollout's start and the moment the app object entered
//!   that state. A cluster that **failed** first (the pair `failed` at the rollout's version
//!   before ever being in sync) keeps when it did.
//! - A rollout **completes** when every cluster it targets has reached it (the last one reaching
//!   it, or the others leaving it). Its **milestones** (50, 90, 99 and 100 %) are the moments by
//!   which that share of the clusters it targets had reached it: worked out from its clusters'
//!   times while it runs, and fixed when it completes (clusters that join or leave it later do
//!   not move them).
//! - Its **status**: `rolled_back` once a later render moved any of its clusters back to a
//!   version they were moved from; else `superseded` when, before it completed, a later render
//!   moved some of its clusters on to another version or took the app from all that were left;
//!   else `complete`; else `stalled` when no cluster reached it for the stall time (counted from
//!   its start while none has); else `in_progress`.

use fleetscope_model::DriftState;

use super::{AppRollouts, Rollout};

/// The milestones, in percent of the clusters targeted.
pub const MILESTONES: [u32; 4] = [50, 90, 99, 100];
/// The index of completion (100 %) in [`MILESTONES`].
pub const COMPLETE: usize = 3;
/// The index of 90 % in [`MILESTONES`] (the end of a change's lead time).
pub const NINETY: usize = 1;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Its clusters now that reached it.
    pub reached: u32,
    /// Clusters that failed at its version before they reached it, those that left since
    /// included.
    pub failed_before_reaching: u32,
    /// The last moment a cluster reached it.
    pub last_reached: Option<u32>,
    /// When each of [`MILESTONES`] was passed, fixed when it completed; all `None` before.
    pub milestones: [Option<u32>; 4],
    pub superseded_before_complete: bool,
}

/// What a hub recorded of a rollout's progress ([`AppRollouts::restore_progress`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedProgress {
    /// Its milestones when it had completed, all `None` otherwise.
    pub milestones: [Option<u32>; 4],
    pub superseded_before_complete: bool,
    pub failed_before_reaching: u32,
    pub last_reached: Option<u32>,
}

/// A rollout's status (see the module's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    InProgress,
    Complete,
    Stalled,
    Superseded,
    RolledBack,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::InProgress,
        Status::Complete,
        Status::Stalled,
        Status::Superseded,
        Status::RolledBack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Complete => "complete",
            Status::Stalled => "stalled",
            Status::Superseded => "superseded",
            Status::RolledBack => "rolled_back",
        }
    }

    pub fn parse(text: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// What a cluster's pair became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    InSync,
    Failed,
}

/// The moments by which 50, 90, 99 and 100 % of clusters that reached a rollout at `reached`
/// (sorted) had reached it, out of `targeted`; `None` for a share not reached yet.
pub fn milestones_of(reached: &[u32], targeted: u32) -> [Option<u32>; 4] {
    let mut milestones = [None; 4];
    if targeted == 0 {
        return milestones;
    }
    for (at, percent) in milestones.iter_mut().zip(MILESTONES) {
        let needed = (u64::from(percent) * u64::from(targeted)).div_ceil(100) as usize;
        *at = reached.get(needed.max(1) - 1).copied();
    }
    milestones
}

impl Rollout {
    /// When it completed, if it has.
    pub fn completed_at(&self) -> Option<u32> {
        self.progress.milestones[COMPLETE]
    }

    /// Its status at `now`, stalled after `stall_after` seconds without a cluster reaching it.
    pub fn status(&self, now: u32, stall_after: u32) -> Status {
        if self.first_rolled_back_by.is_some() {
            Status::RolledBack
        } else if self.progress.superseded_before_complete {
            Status::Superseded
        } else if self.completed_at().is_some() {
            Status::Complete
        } else if now.saturating_sub(self.progress.last_reached.unwrap_or(self.started_at))
            >= stall_after
        {
            Status::Stalled
        } else {
            Status::InProgress
        }
    }
}

impl AppRollouts {
    /// Cluster `number`'s pair became `seen` at `at` (when the app object entered that state).
    /// Returns whether that moved its rollout.
    pub fn observe(&mut self, number: u32, seen: Seen, at: u32) -> bool {
        let observed = self.observe_member(number, seen, at);
        if let Some(index) = observed {
            self.complete_if_done(index);
        }
        observed.is_some()
    }

    fn observe_member(&mut self, number: u32, seen: Seen, at: u32) -> Option<usize> {
        let index = self.owner(number)?;
        let at_index = number as usize;
        if self.reached_at.get(at_index) != 0 {
            return None;
        }
        let rollout = &mut self.rollouts[index];
        let at = at.max(rollout.started_at).max(1);
        match seen {
            Seen::InSync => {
                self.reached_at.set(at_index, at);
                rollout.progress.reached += 1;
                let last = rollout.progress.last_reached.get_or_insert(at);
                *last = (*last).max(at);
                Some(index)
            }
            Seen::Failed if !self.failed_at.contains_key(&number) => {
                self.failed_at.insert(number, at);
                rollout.progress.failed_before_reaching += 1;
                Some(index)
            }
            Seen::Failed => None,
        }
    }

    /// Takes back cluster `number`'s moments as the hub recorded them for the rollout
    /// `render_id`/`version` (0: none): when it failed first, then when it reached it. Nothing
    /// is taken when the cluster belongs to another rollout now. Completion is left to
    /// [`AppRollouts::restore_progress`].
    pub fn restore_moments(
        &mut self,
        number: u32,
        render_id: u64,
        version: &str,
        reached_at: u32,
        failed_at: u32,
    ) {
        let Some(index) = self.owner(number) else {
            return;
        };
        let rollout = &self.rollouts[index];
        if rollout.render_id != render_id || rollout.version != version {
            return;
        }
        if failed_at > 0 {
            self.observe_member(number, Seen::Failed, failed_at);
        }
        if reached_at > 0 {
            self.observe_member(number, Seen::InSync, reached_at);
        }
    }

    /// Takes back what the hub recorded of rollout `index` beyond its clusters' moments: the
    /// milestones fixed when it completed (and that it was not superseded before), the
    /// failures and the last reaching of clusters that left it since. Then completes it if
    /// every cluster it targets has reached it.
    pub fn restore_progress(&mut self, index: usize, recorded: &RecordedProgress) {
        let progress = &mut self.rollouts[index].progress;
        if recorded.milestones[COMPLETE].is_some() {
            progress.milestones = recorded.milestones;
            progress.superseded_before_complete = recorded.superseded_before_complete;
        }
        progress.failed_before_reaching = progress
            .failed_before_reaching
            .max(recorded.failed_before_reaching);
        progress.last_reached = progress.last_reached.max(recorded.last_reached);
        self.complete_if_done(index);
    }

    /// Fixes the milestones of rollout `index` when every cluster it targets has reached it;
    /// one whose clusters all left before that was superseded.
    pub(super) fn complete_if_done(&mut self, index: usize) {
        let rollout = &self.rollouts[index];
        if rollout.completed_at().is_some() {
            return;
        }
        let targeted = rollout.targeted_now();
        if targeted == 0 {
            self.rollouts[index].progress.superseded_before_complete = true;
            return;
        }
        if rollout.progress.reached < targeted {
            return;
        }
        let mut reached: Vec<u32> = self
            .owners()
            .filter(|(_, owner)| *owner == index)
            .filter_map(|(number, _)| self.reached_at(number))
            .collect();
        reached.sort_unstable();
        self.rollouts[index].progress.milestones = milestones_of(&reached, targeted);
    }

    /// Cluster `number` leaves rollout `index`: what it reached, and its pair's state, go
    /// with it.
    pub(super) fn forget_progress(&mut self, number: u32, index: usize) {
        let at = number as usize;
        if self.reached_at.get(at) != 0 {
            self.rollouts[index].progress.reached -= 1;
        }
        self.reached_at.set(at, 0);
        self.failed_at.remove(&number);
        self.states.set(at, 0);
    }

    /// The state of cluster `number`'s pair as last noted for the rollout it belongs to.
    pub fn state(&self, number: u32) -> Option<DriftState> {
        match self.states.get(number as usize) {
            0 => None,
            s => Some(DriftState::ALL[usize::from(s) - 1]),
        }
    }

    /// Notes the state of cluster `number`'s pair.
    pub fn set_state(&mut self, number: u32, state: DriftState) {
        self.states
            .set(number as usize, crate::state_index(state) as u8 + 1);
    }

    /// When cluster `number` reached the rollout it belongs to, if it has.
    pub fn reached_at(&self, number: u32) -> Option<u32> {
        Some(self.reached_at.get(number as usize)).filter(|t| *t != 0)
    }

    /// When cluster `number` first failed at its rollout's version before reaching it, if it did.
    pub fn failed_at(&self, number: u32) -> Option<u32> {
        self.failed_at.get(&number).copied()
    }
}

#[cfg(test)]
mod tests;
