//! Questions about rollouts, answered from the rollouts kept current ([`crate::rollouts`]) and
//! the pairs' maintained states: which rollouts there are, where each one's clusters stand,
//! its progress over time, and the delivery figures of an app over a window.

use std::collections::BTreeMap;

use fleetscope_model::DriftState;

use crate::fleet::records::{ClusterRec, Filter};
use crate::fleet::Fleet;
use crate::rollouts::progress::{milestones_of, Status, COMPLETE, NINETY};
use crate::rollouts::{AppRollouts, Rollout};

/// How rollouts are judged: when one has stalled, and when one counts as a failed change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RolloutPolicy {
    /// Seconds without a cluster reaching a rollout after which it is `stalled`.
    pub stall_after: u32,
    /// The share of a rollout's clusters (in percent) that may fail at its version before
    /// reaching it without the rollout counting as a failed change.
    pub failure_budget_percent: f64,
}

impl Default for RolloutPolicy {
    fn default() -> RolloutPolicy {
        RolloutPolicy {
            stall_after: 3600,
            failure_budget_percent: 5.0,
        }
    }
}

/// A rollout's key: its app, its render and its version, written `app@render@version`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RolloutId {
    pub app: String,
    pub render_id: u64,
    pub version: String,
}

impl RolloutId {
    pub fn of(rollout: &Rollout) -> RolloutId {
        RolloutId {
            app: rollout.app.clone(),
            render_id: rollout.render_id,
            version: rollout.version.clone(),
        }
    }

    /// Reads `app@render@version` (the version may hold `@` itself).
    pub fn parse(text: &str) -> Option<RolloutId> {
        let (app, rest) = text.split_once('@')?;
        let (render, version) = rest.split_once('@')?;
        if app.is_empty() || version.is_empty() || !render.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(RolloutId {
            app: app.to_owned(),
            render_id: render.parse().ok()?,
            version: version.to_owned(),
        })
    }
}

impl std::fmt::Display for RolloutId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}@{}", self.app, self.render_id, self.version)
    }
}

/// Where one cluster of a rollout stands.
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    pub cluster: &'a str,
    pub rec: &'a ClusterRec,
    /// Its pair's maintained state now.
    pub state: DriftState,
    pub reached_at: Option<u32>,
    pub failed_at: Option<u32>,
}

/// Where a rollout's clusters (those of a selection) stand now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Standing {
    pub targeted: u32,
    pub in_sync: u32,
    pub failed: u32,
    pub stale: u32,
    /// Those that reached it, and those that failed at its version before they did.
    pub reached: u32,
    pub failed_before_reaching: u32,
    /// When each of [`MILESTONES`] was passed.
    pub milestones: [Option<u32>; 4],
}

/// Nearest-rank percentile of sorted `values`: the value at rank ⌈p/100 · n⌉.
pub fn percentile(sorted: &[u32], p: u32) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (u64::from(p) * sorted.len() as u64).div_ceil(100).max(1) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// Whether `filter` selects every cluster (then a rollout's own milestones answer).
fn selects_all(filter: &Filter) -> bool {
    filter.groups.is_empty() && filter.environment.is_none() && filter.labels.is_empty()
}

impl Fleet {
    /// Every rollout of `app` (every app when `None`), newest first: by start, then render,
    /// app and version.
    pub fn rollouts_newest_first(&self, app: Option<&str>) -> Vec<&Rollout> {
        let mut all: Vec<&Rollout> = self
            .rollouts
            .apps
            .iter()
            .filter(|(name, _)| app.is_none_or(|a| a == name.as_str()))
            .flat_map(|(_, a)| a.rollouts.iter())
            .collect();
        all.sort_by(|a, b| {
            (b.started_at, b.render_id)
                .cmp(&(a.started_at, a.render_id))
                .then_with(|| (&a.app, &a.version).cmp(&(&b.app, &b.version)))
        });
        all
    }

    /// The rollout `id` and its app's rollouts.
    pub fn find_rollout(&self, id: &RolloutId) -> Option<(&AppRollouts, &Rollout)> {
        let app = self.rollouts.apps.get(&id.app)?;
        let rollout = app
            .rollouts
            .iter()
            .find(|r| r.render_id == id.render_id && r.version == id.version)?;
        Some((app, rollout))
    }

    /// The clusters that belong to `rollout` now and that `filter` selects, by cluster id.
    pub fn rollout_members<'a>(&'a self, rollout: &Rollout, filter: &Filter) -> Vec<Member<'a>> {
        let mut members = self
            .members_of_each(&[rollout], filter)
            .pop()
            .unwrap_or_default();
        members.sort_by(|a, b| a.cluster.cmp(b.cluster));
        members
    }

    /// For each app with rollouts in `listed`: by the index of each of its rollouts, that
    /// rollout's place in `listed` (`usize::MAX` for one not listed).
    fn places_by_app<'a>(&self, listed: &[&'a Rollout]) -> BTreeMap<&'a str, Vec<usize>> {
        let mut by_app: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (place, rollout) in listed.iter().enumerate() {
            let Some(app) = self.rollouts.apps.get(&rollout.app) else {
                continue;
            };
            if let Some(index) = app
                .rollouts
                .iter()
                .position(|r| r.render_id == rollout.render_id && r.version == rollout.version)
            {
                by_app
                    .entry(rollout.app.as_str())
                    .or_insert_with(|| vec![usize::MAX; app.rollouts.len()])[index] = place;
            }
        }
        by_app
    }

    /// The clusters of each of `listed` that `filter` selects, in no order: one pass over each
    /// app's clusters, whichever of its rollouts are listed.
    pub fn members_of_each<'a>(
        &'a self,
        listed: &[&Rollout],
        filter: &Filter,
    ) -> Vec<Vec<Member<'a>>> {
        let mut members: Vec<Vec<Member<'a>>> = vec![Vec::new(); listed.len()];
        let whole_fleet = selects_all(filter);
        for (name, places) in self.places_by_app(listed) {
            let app = &self.rollouts.apps[name];
            for (slot, owner) in app.owners() {
                let place = &places[owner];
                if *place == usize::MAX {
                    continue;
                }
                if slot as usize >= self.clusters.len() {
                    continue;
                }
                let rec = self.clusters.rec(slot);
                if !whole_fleet && !self.cluster_matches(rec, filter) {
                    continue;
                }
                members[*place].push(Member {
                    cluster: self.clusters.id(slot),
                    rec,
                    state: app.state(slot).unwrap_or(DriftState::Unknown),
                    reached_at: app.reached_at(slot),
                    failed_at: app.failed_at(slot),
                });
            }
        }
        members
    }

    /// Where the clusters of each of `listed` that `filter` selects stand, with the times from
    /// failing first to reaching of those that did both: one pass over each app's numbers (its
    /// clusters' records are read only to select them, when `filter` narrows).
    pub fn standings_of_each(
        &self,
        listed: &[&Rollout],
        filter: &Filter,
    ) -> Vec<(Standing, Vec<u32>)> {
        let whole_fleet = selects_all(filter);
        // A completed rollout's milestones for the whole fleet are fixed: its clusters'
        // moments are counted, not kept.
        let mut tallies: Vec<Tally> = listed
            .iter()
            .map(|r| Tally {
                keep_moments: !(whole_fleet && r.completed_at().is_some()),
                ..Tally::default()
            })
            .collect();
        for (name, places) in self.places_by_app(listed) {
            let app = &self.rollouts.apps[name];
            for (slot, owner) in app.owners() {
                let place = places[owner];
                if place == usize::MAX {
                    continue;
                }
                if !whole_fleet
                    && (slot as usize >= self.clusters.len()
                        || !self.cluster_matches(self.clusters.rec(slot), filter))
                {
                    continue;
                }
                tallies[place].add(app, slot);
            }
        }
        listed
            .iter()
            .zip(tallies)
            .map(|(rollout, tally)| tally.standing(rollout, whole_fleet))
            .collect()
    }
}

/// What one pass over an app's clusters gathers for one rollout.
#[derive(Debug, Default)]
struct Tally {
    targeted: u32,
    in_sync: u32,
    failed: u32,
    stale: u32,
    /// Whether `reached` keeps the moments, or only `reached_count` counts them.
    keep_moments: bool,
    reached: Vec<u32>,
    reached_count: u32,
    failed_first: u32,
    restores: Vec<u32>,
}

impl Tally {
    fn add(&mut self, app: &AppRollouts, slot: u32) {
        self.targeted += 1;
        match app.state(slot) {
            Some(DriftState::InSync) => self.in_sync += 1,
            Some(DriftState::Failed) => self.failed += 1,
            Some(DriftState::Stale) => self.stale += 1,
            _ => {}
        }
        let reached = app.reached_at(slot);
        if let Some(t) = reached {
            self.reached_count += 1;
            if self.keep_moments {
                self.reached.push(t);
            }
        }
        if let Some(failed) = app.failed_at(slot) {
            self.failed_first += 1;
            if let Some(reached) = reached {
                self.restores.push(reached.saturating_sub(failed));
            }
        }
    }

    fn standing(mut self, rollout: &Rollout, whole_fleet: bool) -> (Standing, Vec<u32>) {
        self.reached.sort_unstable();
        let milestones = match rollout.completed_at() {
            Some(_) if whole_fleet => rollout.progress.milestones,
            _ => milestones_of(&self.reached, self.targeted),
        };
        let standing = Standing {
            targeted: self.targeted,
            in_sync: self.in_sync,
            failed: self.failed,
            stale: self.stale,
            reached: self.reached_count,
            failed_before_reaching: if whole_fleet {
                rollout.progress.failed_before_reaching
            } else {
                self.failed_first
            },
            milestones,
        };
        (standing, self.restores)
    }
}

/// Where the clusters `members` of `rollout` stand (see [`Fleet::standings_of_each`]).
pub fn standing_of(rollout: &Rollout, members: &[Member<'_>], whole_fleet: bool) -> Standing {
    let mut standing = Standing {
        targeted: members.len() as u32,
        ..Standing::default()
    };
    let mut reached: Vec<u32> = Vec::new();
    for m in members {
        match m.state {
            DriftState::InSync => standing.in_sync += 1,
            DriftState::Failed => standing.failed += 1,
            DriftState::Stale => standing.stale += 1,
            _ => {}
        }
        if let Some(t) = m.reached_at {
            reached.push(t);
        }
        if m.failed_at.is_some() {
            standing.failed_before_reaching += 1;
        }
    }
    standing.reached = reached.len() as u32;
    if whole_fleet {
        standing.failed_before_reaching = rollout.progress.failed_before_reaching;
    }
    standing.milestones = match rollout.completed_at() {
        Some(_) if whole_fleet => rollout.progress.milestones,
        _ => {
            reached.sort_unstable();
            milestones_of(&reached, standing.targeted)
        }
    };
    standing
}

/// One point of a rollout's curve: its clusters (of a selection) at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CurvePoint {
    pub at: u32,
    /// Reached it by then.
    pub in_sync: u32,
    /// Had failed at its version by then and not reached it yet.
    pub failed: u32,
    /// Neither yet.
    pub waiting: u32,
}

/// The step of a curve from `start` to `end`: the smallest of 1, 5, 15 and 30 minutes, 1, 3,
/// 6 and 12 hours and 1 day that keeps it within 120 points.
pub fn curve_step(start: u32, end: u32) -> u32 {
    const STEPS: [u32; 9] = [60, 300, 900, 1800, 3600, 10_800, 21_600, 43_200, 86_400];
    let span = end.saturating_sub(start);
    STEPS
        .into_iter()
        .find(|s| span / s < 120)
        .unwrap_or_else(|| span.div_ceil(119).max(86_400))
}

/// The curve of `members` from `start` to `end`, every `step` seconds and at `end`.
pub fn curve(members: &[Member<'_>], start: u32, end: u32, step: u32) -> Vec<CurvePoint> {
    let mut times: Vec<u32> = (0..)
        .map(|i: u32| start.saturating_add(i.saturating_mul(step)))
        .take_while(|t| *t < end)
        .collect();
    times.push(end.max(start));
    times
        .into_iter()
        .map(|at| {
            let mut point = CurvePoint {
                at,
                ..CurvePoint::default()
            };
            for m in members {
                if m.reached_at.is_some_and(|t| t <= at) {
                    point.in_sync += 1;
                } else if m.failed_at.is_some_and(|t| t <= at) {
                    point.failed += 1;
                } else {
                    point.waiting += 1;
                }
            }
            point
        })
        .collect()
}

/// The delivery figures of a set of rollouts over a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Rollouts that completed in the window.
    pub deployments: u32,
    /// Seconds from platform commit to 90 % reached, of the rollouts that passed 90 % in the
    /// window and whose commit time is known; sorted.
    pub lead_times: Vec<u32>,
    /// Rollouts started in the window, and those of them that count as failed changes.
    pub changes: u32,
    pub failed_changes: u32,
    /// Seconds from first failing to reaching, of clusters of rollouts started in the window
    /// that did both; sorted.
    pub restore_times: Vec<u32>,
}

/// Whether a rollout, whose selected clusters stand as `standing`, counts as a failed change:
/// rolled back, or more of its clusters failed before reaching it than the budget allows.
pub fn failed_change(
    rollout: &Rollout,
    standing: &Standing,
    whole_fleet: bool,
    policy: &RolloutPolicy,
) -> bool {
    let targeted = if whole_fleet {
        rollout.targeted_at_start + rollout.joined
    } else {
        standing.targeted
    };
    rollout.first_rolled_back_by.is_some()
        || f64::from(standing.failed_before_reaching) * 100.0
            > policy.failure_budget_percent * f64::from(targeted)
}

impl Fleet {
    /// Whether any rollout of `app` targeted a selected cluster: what decides, for a
    /// selection less than the whole fleet (a scoped token, a group), whether the app is
    /// listed in the delivery figures at all, as `rollouts` lists only such rollouts.
    pub fn app_reaches(&self, app: &str, filter: &Filter) -> bool {
        if selects_all(filter) {
            return self.rollouts.apps.contains_key(app);
        }
        let Some(rollouts) = self.rollouts.apps.get(app) else {
            return false;
        };
        let all: Vec<&Rollout> = rollouts.rollouts.iter().collect();
        self.standings_of_each(&all, filter)
            .iter()
            .any(|(standing, _)| standing.targeted > 0)
    }

    /// The delivery figures of `app`'s rollouts (of the clusters `filter` selects) over the
    /// window `[from, to)`.
    pub fn delivery(
        &self,
        app: &str,
        filter: &Filter,
        from: u32,
        to: u32,
        policy: &RolloutPolicy,
    ) -> Delivery {
        let whole_fleet = selects_all(filter);
        let mut delivery = Delivery::default();
        let within = |t: Option<u32>| t.is_some_and(|t| t >= from && t < to);
        let Some(rollouts) = self.rollouts.apps.get(app) else {
            return delivery;
        };
        // One that completed before the window has nothing in it.
        let listed: Vec<&Rollout> = rollouts
            .rollouts
            .iter()
            .filter(|r| within(Some(r.started_at)) || r.completed_at().is_none_or(|c| c >= from))
            .collect();
        let standings = self.standings_of_each(&listed, filter);
        for (rollout, (standing, restores)) in listed.into_iter().zip(standings) {
            let started_within = within(Some(rollout.started_at));
            if !whole_fleet && standing.targeted == 0 {
                continue;
            }
            if within(standing.milestones[COMPLETE]) {
                delivery.deployments += 1;
            }
            if let (true, Some(ninety), Some(committed)) = (
                within(standing.milestones[NINETY]),
                standing.milestones[NINETY],
                rollout.committed_at,
            ) {
                delivery.lead_times.push(ninety.saturating_sub(committed));
            }
            if started_within {
                delivery.changes += 1;
                if failed_change(rollout, &standing, whole_fleet, policy) {
                    delivery.failed_changes += 1;
                }
                delivery.restore_times.extend(restores);
            }
        }
        delivery.lead_times.sort_unstable();
        delivery.restore_times.sort_unstable();
        delivery
    }

    /// The status of `rollout` at the fleet's moment under `policy`.
    pub fn rollout_status(&self, rollout: &Rollout, policy: &RolloutPolicy) -> Status {
        let now = u32::try_from(self.as_of.seconds()).unwrap_or(u32::MAX);
        rollout.status(now, policy.stall_after)
    }
}

/// The groups of `members` at `depth` levels, each with its members' indexes.
pub fn members_by_group(members: &[Member<'_>], depth: usize) -> BTreeMap<String, Vec<usize>> {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        let Some(info) = &m.rec.info else { continue };
        let group = info
            .group
            .segments()
            .take(depth)
            .collect::<Vec<_>>()
            .join("/");
        groups.entry(group).or_default().push(i);
    }
    groups
}
