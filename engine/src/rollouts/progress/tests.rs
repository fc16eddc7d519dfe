//! The progress kept as events come, held equal after every step to the module's rules worked
//! out from the whole history so far.

use proptest::prelude::*;

use super::*;
use crate::rollouts::RenderInfo;
use fleetscope_store::DesiredVersionChangeRow;

const CLUSTERS: usize = 4;

#[derive(Debug, Clone)]
enum Step {
    /// Each cluster's desired version (`None`: not desired).
    Render(Vec<Option<u8>>),
    /// A cluster runs `version`, healthy or not, from this step on.
    Report {
        cluster: usize,
        version: u8,
        healthy: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        prop::collection::vec(prop::option::weighted(0.8, 0u8..3), CLUSTERS).prop_map(Step::Render),
        (0..CLUSTERS, 0u8..3, prop::bool::weighted(0.7)).prop_map(|(cluster, version, healthy)| {
            Step::Report {
                cluster,
                version,
                healthy,
            }
        }),
        (0..CLUSTERS, 0u8..3, prop::bool::weighted(0.7)).prop_map(|(cluster, version, healthy)| {
            Step::Report {
                cluster,
                version,
                healthy,
            }
        }),
    ]
}

/// Step `i` happens at this time.
fn time(i: usize) -> u32 {
    100 * (i as u32 + 1)
}

/// What every cluster desires and runs: (version, healthy, since).
#[derive(Debug, Clone, Default)]
struct World {
    desired: Vec<Option<u8>>,
    running: Vec<Option<(u8, bool, u32)>>,
}

impl World {
    fn new() -> World {
        World {
            desired: vec![None; CLUSTERS],
            running: vec![None; CLUSTERS],
        }
    }

    /// The cluster's pair: in sync or failed at its desired version, since when; `None` for
    /// any other state.
    fn pair(&self, c: usize) -> Option<(Seen, u32)> {
        match (self.desired[c], self.running[c]) {
            (Some(d), Some((v, healthy, since))) if d == v => {
                Some((if healthy { Seen::InSync } else { Seen::Failed }, since))
            }
            _ => None,
        }
    }

    /// Applies step `i`; returns the change rows of a render.
    fn apply(&mut self, i: usize, step: &Step) -> Vec<DesiredVersionChangeRow> {
        match step {
            Step::Render(next) => {
                let rows = (0..CLUSTERS)
                    .filter(|c| self.desired[*c] != next[*c])
                    .map(|c| DesiredVersionChangeRow {
                        app: "web".into(),
                        render_id: u64::from(time(i)) * 1000,
                        cluster_id: format!("c{c}"),
                        from_version: self.desired[c].map(|v| v.to_string()).unwrap_or_default(),
                        to_version: next[c].map(|v| v.to_string()).unwrap_or_default(),
                    })
                    .collect();
                self.desired = next.clone();
                rows
            }
            Step::Report {
                cluster,
                version,
                healthy,
            } => {
                if self.running[*cluster].is_none_or(|(v, h, _)| (v, h) != (*version, *healthy)) {
                    self.running[*cluster] = Some((*version, *healthy, time(i)));
                }
                Vec::new()
            }
        }
    }
}

fn number(cluster: &str) -> u32 {
    cluster[1..].parse().expect("c<n>")
}

fn info(i: usize) -> RenderInfo {
    RenderInfo {
        rendered_at: Some(time(i)),
        ..RenderInfo::default()
    }
}

/// The progress kept as the hub keeps it: renders applied, then every pair that became in sync
/// or failed (or whose cluster a render moved) shown to its rollout.
fn live(steps: &[Step]) -> Vec<AppRollouts> {
    let mut app = AppRollouts::default();
    let mut world = World::new();
    let mut after = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let before: Vec<Option<Seen>> = (0..CLUSTERS).map(|c| world.pair(c).map(|p| p.0)).collect();
        let rows = world.apply(i, step);
        let refs: Vec<&DesiredVersionChangeRow> = rows.iter().collect();
        app.apply_render(&refs, &mut number, &info(i));
        let moved: Vec<u32> = rows.iter().map(|r| number(&r.cluster_id)).collect();
        for (c, was) in before.iter().enumerate() {
            if let Some((seen, since)) = world.pair(c) {
                if moved.contains(&(c as u32)) || *was != Some(seen) {
                    app.observe(c as u32, seen, since);
                }
            }
        }
        after.push(app.clone());
    }
    after
}

/// One cluster's stay in one rollout: the steps it belonged to it, and when it reached it and
/// first failed there (by the rules, from the pair's state at each step).
#[derive(Debug)]
struct Stay {
    rollout: usize,
    reached: Option<(usize, u32)>,
    failed: Option<u32>,
}

/// Every rollout's expected progress after the last of `steps`, from the whole history: the
/// stays of every cluster, then each rollout's completion as the first step after which every
/// cluster it then had had reached it.
fn expected(steps: &[Step]) -> (Vec<Progress>, Vec<Option<u32>>, Vec<Option<u32>>) {
    // Membership after each step, by the records' own rules (tested on their own).
    let mut members = AppRollouts::default();
    let mut world = World::new();
    let mut owners: Vec<Vec<Option<usize>>> = Vec::new();
    let mut pairs: Vec<Vec<Option<(Seen, u32)>>> = Vec::new();
    let mut superseding: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let rows = world.apply(i, step);
        let before: Vec<Option<usize>> = (0..CLUSTERS).map(|c| members.owner(c as u32)).collect();
        let refs: Vec<&DesiredVersionChangeRow> = rows.iter().collect();
        members.apply_render(&refs, &mut number, &info(i));
        // The rollouts some cluster left this step to a version neither theirs nor one they
        // were moved from.
        let on: Vec<usize> = rows
            .iter()
            .filter_map(|r| {
                let left = before[number(&r.cluster_id) as usize]?;
                let rollout = &members.rollouts[left];
                (!r.to_version.is_empty() && !rollout.from_versions.contains_key(&r.to_version))
                    .then_some(left)
            })
            .collect();
        superseding.push((i, on));
        owners.push((0..CLUSTERS).map(|c| members.owner(c as u32)).collect());
        pairs.push((0..CLUSTERS).map(|c| world.pair(c)).collect());
    }
    let n = members.rollouts.len();
    let start = |r: usize| members.rollouts[r].started_at;
    // Every stay, and the current one of each cluster.
    let mut stays: Vec<Stay> = Vec::new();
    let mut current: Vec<Option<usize>> = vec![None; CLUSTERS];
    let mut stays_at: Vec<Vec<Option<usize>>> = Vec::new();
    for i in 0..steps.len() {
        for c in 0..CLUSTERS {
            // A render that moves a cluster changes its owner or ends its stay: one render
            // cannot take it out of a rollout and back into it.
            let moved =
                matches!(steps[i], Step::Render(_)) && (i == 0 || owners[i - 1][c] != owners[i][c]);
            if owners[i][c].is_none() {
                current[c] = None;
            } else if moved || current[c].is_none() {
                stays.push(Stay {
                    rollout: owners[i][c].expect("owned"),
                    reached: None,
                    failed: None,
                });
                current[c] = Some(stays.len() - 1);
            }
            if let Some(s) = current[c] {
                let stay = &mut stays[s];
                match pairs[i][c] {
                    Some((Seen::InSync, since)) if stay.reached.is_none() => {
                        stay.reached = Some((i, since.max(start(stay.rollout)).max(1)));
                    }
                    Some((Seen::Failed, since))
                        if stay.reached.is_none() && stay.failed.is_none() =>
                    {
                        stay.failed = Some(since.max(start(stay.rollout)).max(1));
                    }
                    _ => {}
                }
            }
        }
        stays_at.push(current.clone());
    }
    let mut progress = vec![Progress::default(); n];
    for stay in &stays {
        let p = &mut progress[stay.rollout];
        p.failed_before_reaching += u32::from(stay.failed.is_some());
        if let Some((_, at)) = stay.reached {
            p.last_reached = Some(p.last_reached.map_or(at, |l| l.max(at)));
        }
    }
    for (r, p) in progress.iter_mut().enumerate() {
        for i in 0..steps.len() {
            let of_r: Vec<&Stay> = stays_at[i]
                .iter()
                .flatten()
                .map(|s| &stays[*s])
                .filter(|s| s.rollout == r)
                .collect();
            if superseding[i].1.contains(&r) && p.milestones[COMPLETE].is_none() {
                p.superseded_before_complete = true;
            }
            if members.rollouts[r].started_at > time(i) || p.milestones[COMPLETE].is_some() {
                continue;
            }
            let existed = owners[..=i].iter().any(|o| o.contains(&Some(r)));
            if of_r.is_empty() {
                if existed {
                    p.superseded_before_complete = true;
                }
                continue;
            }
            if of_r
                .iter()
                .all(|s| s.reached.is_some_and(|(at, _)| at <= i))
            {
                let mut reached: Vec<u32> =
                    of_r.iter().map(|s| s.reached.expect("all").1).collect();
                reached.sort_unstable();
                p.milestones = milestones_of(&reached, of_r.len() as u32);
            }
        }
        p.reached = stays_at
            .last()
            .into_iter()
            .flatten()
            .flatten()
            .filter(|s| stays[**s].rollout == r && stays[**s].reached.is_some())
            .count() as u32;
    }
    let last = stays_at.last().cloned().unwrap_or_default();
    let reached_at = last
        .iter()
        .map(|s| s.and_then(|s| stays[s].reached.map(|r| r.1)))
        .collect();
    let failed_at = last
        .iter()
        .map(|s| s.and_then(|s| stays[s].failed))
        .collect();
    (progress, reached_at, failed_at)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// After every step, each rollout's progress and each cluster's moments as kept equal the
    /// rules applied to the whole history.
    #[test]
    fn progress_kept_as_events_come_equals_the_rules_over_the_history(
        steps in prop::collection::vec(step(), 1..14)
    ) {
        let kept = live(&steps);
        for i in 0..steps.len() {
            let (progress, reached_at, failed_at) = expected(&steps[..=i]);
            let app = &kept[i];
            let got: Vec<Progress> = app.rollouts.iter().map(|r| r.progress.clone()).collect();
            prop_assert_eq!(&got, &progress, "after step {}: {:?}", i, &steps[..=i]);
            for c in 0..CLUSTERS {
                prop_assert_eq!(app.reached_at(c as u32), reached_at[c], "reached, c{} after step {}", c, i);
                prop_assert_eq!(app.failed_at(c as u32), failed_at[c], "failed, c{} after step {}", c, i);
            }
        }
    }
}
