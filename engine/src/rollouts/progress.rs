//! How far each rollout got, from what its clusters' pairs became while they belonged to it.
//!
//! - A cluster **reaches** a rollout when its pair of the app is first in sync while it belongs
//!   to the rollout, at the later of the rollout's start and the moment the app object entered
//!   that state. A cluster that **failed** first (the pair `failed` before ever being in sync)
//!   keeps when it did.
//! - A **milestone** (50, 90, 99 or 100 %) is passed at the first moment at least that share of
//!   the clusters the rollout targets at that moment have reached it: when a cluster reaches it,
//!   or when clusters leave it. Once passed it stays passed; 100 % is its completion.
//! - Its **status**: `rolled_back` once a later render moved any of its clusters back to a
//!   version they were moved from; else `superseded` when, before it completed, a later render
//!   moved some of its clusters on to another version or took the app from all that were left;
//!   else `complete`; else `stalled` when no cluster reached it for the stall time (counted from
//!   its start while none has); else `in_progress`.

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
    /// When each of [`MILESTONES`] was passed.
    pub milestones: [Option<u32>; 4],
    pub superseded_before_complete: bool,
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

impl Rollout {
    /// Passes every milestone the clusters that reached it now make up, at `at`.
    pub(super) fn pass_milestones(&mut self, at: u32) {
        let targeted = u64::from(self.targeted_now());
        if targeted == 0 {
            if self.progress.milestones[COMPLETE].is_none() {
                self.progress.superseded_before_complete = true;
            }
            return;
        }
        let reached = u64::from(self.progress.reached);
        for (passed, percent) in self.progress.milestones.iter_mut().zip(MILESTONES) {
            if passed.is_none() && reached * 100 >= u64::from(percent) * targeted {
                *passed = Some(at.max(self.started_at));
            }
        }
    }

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
        let Some(index) = self.owner(number) else {
            return false;
        };
        let at_index = number as usize;
        if self.reached_at.len() <= at_index {
            self.reached_at.resize(at_index + 1, 0);
            self.failed_at.resize(at_index + 1, 0);
        }
        if self.reached_at[at_index] != 0 {
            return false;
        }
        let rollout = &mut self.rollouts[index];
        let at = at.max(rollout.started_at).max(1);
        match seen {
            Seen::InSync => {
                self.reached_at[at_index] = at;
                rollout.progress.reached += 1;
                let last = rollout.progress.last_reached.get_or_insert(at);
                *last = (*last).max(at);
                rollout.pass_milestones(at);
                true
            }
            Seen::Failed if self.failed_at[at_index] == 0 => {
                self.failed_at[at_index] = at;
                rollout.progress.failed_before_reaching += 1;
                true
            }
            Seen::Failed => false,
        }
    }

    /// Cluster `number` leaves rollout `index`: what it reached goes with it.
    pub(super) fn forget_progress(&mut self, number: u32, index: usize) {
        let at = number as usize;
        if self.reached_at.get(at).is_some_and(|t| *t != 0) {
            self.rollouts[index].progress.reached -= 1;
        }
        if at < self.reached_at.len() {
            self.reached_at[at] = 0;
            self.failed_at[at] = 0;
        }
    }

    /// When cluster `number` reached the rollout it belongs to, if it has.
    pub fn reached_at(&self, number: u32) -> Option<u32> {
        self.reached_at
            .get(number as usize)
            .copied()
            .filter(|t| *t != 0)
    }

    /// When cluster `number` first failed at its rollout's version before reaching it, if it did.
    pub fn failed_at(&self, number: u32) -> Option<u32> {
        self.failed_at
            .get(number as usize)
            .copied()
            .filter(|t| *t != 0)
    }
}
