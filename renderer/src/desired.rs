//! Desired state into ClickHouse: after each render, the cluster inventory, which render group
//! and which reason set each cluster belongs to, per render group and app the version, content
//! hash and commit, and per reason set and app why it is desired. Only what changed since the
//! last render is written (each render a row in `renders`, so the history of desired state is
//! complete). A cluster that joins a render group also gets a since set where its own
//! `desired_since` differs from the group's (docs/data-model.md, "Desired since"). Nothing here
//! is per cluster and app: rows grow with clusters plus apps × distinct configurations.

use std::collections::{BTreeMap, BTreeSet};

use fleetscope_model::Timestamp;
use fleetscope_store::queries::{CurrentDesiredRow, CurrentMemberRow};
use fleetscope_store::{
    ClusterRow, DesiredRow, MemberSinceRow, MembershipRow, ReasonMemberRow, ReasonSetRow,
    RenderRow, SinceSetRow, Store,
};
use sha2::{Digest, Sha256};

use crate::assign::Assigned;
use crate::RenderOutcome;

/// What one publication wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub render_id: u64,
    pub desired_rows: usize,
    pub removed_rows: usize,
    pub membership_rows: usize,
    pub cluster_rows: usize,
    /// Rows of `reason_sets` written (new reason sets, and those no cluster has any more).
    pub reason_set_rows: usize,
    /// Rows of `reason_set_members` written (clusters whose reason set changed or that left).
    pub reason_member_rows: usize,
    /// Rows of `since_sets` written (since sets not stored before).
    pub since_set_rows: usize,
    /// Rows of `member_since_sets` written (clusters that joined a render group with a
    /// `desired_since` of their own for some app).
    pub member_since_rows: usize,
    /// Rows of `desired_version_changes` written (one per (cluster, app) whose desired
    /// version changed).
    pub version_change_rows: usize,
    /// Reading what the store holds, comparing it with the render, and writing the difference.
    pub timings: PublishTimings,
}

/// Where one publication's time went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishTimings {
    pub read: std::time::Duration,
    pub compare: std::time::Duration,
    pub write: std::time::Duration,
}

/// Whether two inventory rows of one cluster say the same (the render and time that wrote
/// them aside).
fn same_inventory(a: &ClusterRow, b: &ClusterRow) -> bool {
    a.group_path == b.group_path
        && a.group_prefixes == b.group_prefixes
        && a.environment == b.environment
        && a.reconciler == b.reconciler
        && a.label_keys == b.label_keys
        && a.label_values == b.label_values
        && a.removed == b.removed
}

/// Per render group and app, the reasons of every reason set among the group's clusters, each
/// reason once, in the order first met (reason sets by name). What a desired row says for a
/// render group; one cluster's own reasons are its reason set's.
pub fn render_group_reasons(assigned: &Assigned) -> BTreeMap<(&str, &str), Vec<&str>> {
    let pairs: BTreeSet<(&str, &str)> = assigned
        .members
        .iter()
        .filter_map(|(cluster, group)| {
            let set = assigned.reason_set_of.get(cluster)?;
            Some((group.as_str(), set.as_str()))
        })
        .collect();
    let mut out: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for (group, set) in pairs {
        for app in &assigned.reason_sets[set] {
            let reasons = out.entry((group, app.app.as_str())).or_default();
            for reason in &app.reasons {
                if !reasons.contains(&reason.as_str()) {
                    reasons.push(reason);
                }
            }
        }
    }
    out
}

/// The membership rows a render writes, as `(cluster, what it belongs to, removed)`: each
/// cluster whose render group (or reason set) in `wanted` is not its current one in `now`, and
/// each current member that left the platform repo, marked removed.
fn membership_changes<'a>(
    now: &BTreeMap<String, (String, u8)>,
    wanted: impl Iterator<Item = (&'a str, &'a str)>,
    in_platform: &BTreeSet<&str>,
) -> Vec<(String, String, u8)> {
    let mut changes: Vec<(String, String, u8)> = wanted
        .filter(|(cluster, target)| {
            !now.get(*cluster)
                .is_some_and(|(current, removed)| current == target && *removed == 0)
        })
        .map(|(cluster, target)| (cluster.to_owned(), target.to_owned(), 0))
        .collect();
    for (cluster, (target, removed)) in now {
        if *removed == 0 && !in_platform.contains(cluster.as_str()) {
            changes.push((cluster.clone(), target.clone(), 1));
        }
    }
    changes
}

/// What the store holds before a publication, as [`rows`] compares against it.
#[derive(Debug, Clone, Default)]
pub struct Current {
    /// (render group, app) → its current row (removed ones included, flagged).
    pub desired: BTreeMap<(String, String), CurrentDesiredRow>,
    /// Cluster → (render group, removed).
    pub members: BTreeMap<String, (String, u8)>,
    /// Cluster → (render of its membership row, that row's since set or `""`).
    pub member_since: BTreeMap<String, (u64, String)>,
    /// Since set → app → desired since.
    pub since_sets: BTreeMap<String, BTreeMap<String, u32>>,
    /// (reason set, app) → its latest row.
    pub reason_sets: BTreeMap<(String, String), ReasonSetRow>,
    /// Cluster → (reason set, removed).
    pub reason_members: BTreeMap<String, (String, u8)>,
    /// Cluster → its current inventory row (removed ones included, flagged).
    pub inventory: BTreeMap<String, ClusterRow>,
}

impl Current {
    /// Reads what the store holds: the six reads run concurrently.
    pub async fn read(store: &Store) -> Result<Current, fleetscope_store::StoreError> {
        let (desired, members, since_sets, reason_sets, reason_members, inventory) = tokio::try_join!(
            store.current_desired(),
            store.current_members(),
            store.since_set_rows(),
            store.reason_set_rows(),
            store.current_reason_members(),
            store.inventory_rows(),
        )?;
        let mut current = Current::from_desired_and_members(desired, members, since_sets);
        current.reason_sets = reason_sets
            .into_iter()
            .map(|r| ((r.reason_set.clone(), r.app.clone()), r))
            .collect();
        current.reason_members = reason_members
            .into_iter()
            .map(|m| (m.cluster_id, (m.reason_set, m.removed)))
            .collect();
        current.inventory = inventory
            .into_iter()
            .map(|row| (row.cluster_id.clone(), row))
            .collect();
        Ok(current)
    }

    /// The desired state and membership part of what the store holds, from its rows.
    pub fn from_desired_and_members(
        desired: Vec<CurrentDesiredRow>,
        members: Vec<CurrentMemberRow>,
        since_sets: Vec<SinceSetRow>,
    ) -> Current {
        let mut sets: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
        for row in since_sets {
            sets.entry(row.since_set)
                .or_default()
                .insert(row.app, row.desired_since);
        }
        Current {
            desired: desired
                .into_iter()
                .map(|r| ((r.render_group.clone(), r.app.clone()), r))
                .collect(),
            member_since: members
                .iter()
                .map(|m| (m.cluster_id.clone(), (m.render_id, m.since_set.clone())))
                .collect(),
            members: members
                .into_iter()
                .map(|m| (m.cluster_id, (m.render_group, m.removed)))
                .collect(),
            since_sets: sets,
            ..Current::default()
        }
    }

    /// When the app's current row in a render group became desired for a member of it whose
    /// membership has the render and since set `member`: the since set's time when the row is
    /// not newer than the membership, else the row's.
    fn desired_since_of(&self, member: Option<&(u64, String)>, row: &CurrentDesiredRow) -> u32 {
        if let Some((joined, set)) = member {
            if row.render_id <= *joined {
                if let Some(since) = self.since_sets.get(set).and_then(|s| s.get(&row.app)) {
                    return *since;
                }
            }
        }
        row.desired_since
    }
}

/// The name of a since set: `ss-` and 12 hex digits of a hash of its (app, since) entries, so
/// equal sets share a name and a name never changes its meaning.
pub fn since_set_name(entries: &BTreeMap<String, u32>) -> String {
    let mut hasher = Sha256::new();
    for (app, since) in entries {
        hasher.update([0]);
        hasher.update(app.as_bytes());
        hasher.update([1]);
        hasher.update(since.to_le_bytes());
    }
    let digest = hasher.finalize();
    format!(
        "ss-{}",
        digest
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// A since set as a render writes it: its name and its (app, desired since) entries.
type SinceSet = (String, BTreeMap<String, u32>);

/// For each cluster that joins a render group in this render (`joining`: cluster → group), the
/// since set of the apps whose `desired_since` for it differs from what the group's row will
/// say after the render: an app it already had at the same version and content keeps its
/// time, any other app is desired from `now`. Clusters with no such app are left out.
///
/// The answer depends only on the group left, the group joined and the since set and render of
/// the membership left, so it is worked out once for each distinct combination: a policy
/// change that moves 30,000 clusters moves them in a few such batches.
fn carried_since<'a>(
    joining: &[(&'a str, &'a str)],
    outcome: &RenderOutcome,
    current: &'a Current,
    now: u32,
) -> Vec<(&'a str, std::rc::Rc<SinceSet>)> {
    type Key<'k> = (Option<&'k str>, &'k str, Option<&'k (u64, String)>);
    let mut worked_out: BTreeMap<Key<'a>, Option<std::rc::Rc<SinceSet>>> = BTreeMap::new();
    let mut out = Vec::new();
    for &(cluster, group) in joining {
        let before = current
            .members
            .get(cluster)
            .filter(|(_, removed)| *removed == 0)
            .map(|(g, _)| g.as_str());
        let own_since = before.and(current.member_since.get(cluster));
        let set = worked_out
            .entry((before, group, own_since))
            .or_insert_with(|| {
                let entries = carried_entries(before, group, own_since, outcome, current, now);
                (!entries.is_empty()).then(|| std::rc::Rc::new((since_set_name(&entries), entries)))
            });
        if let Some(set) = set {
            out.push((cluster, set.clone()));
        }
    }
    out
}

/// The entries of [`carried_since`] for a cluster that leaves `before` (with the membership
/// render and since set `own_since`) for `group`.
fn carried_entries(
    before: Option<&str>,
    group: &str,
    own_since: Option<&(u64, String)>,
    outcome: &RenderOutcome,
    current: &Current,
    now: u32,
) -> BTreeMap<String, u32> {
    let mut entries = BTreeMap::new();
    let Some(content) = outcome.assigned.groups.get(group) else {
        return entries;
    };
    for a in &content.assignments {
        let app = a.app.as_str();
        let hash = &outcome.hashes[&(group.to_owned(), app.to_owned())];
        let live = |g: &str| {
            current
                .desired
                .get(&(g.to_owned(), app.to_owned()))
                .filter(|row| row.removed == 0)
                .filter(|row| &row.content_hash == hash && row.version == a.version.as_str())
        };
        // What the group's row says after this render: unchanged, or written now.
        let group_since = live(group).map_or(now, |row| row.desired_since);
        let own = before
            .and_then(live)
            .map_or(now, |row| current.desired_since_of(own_since, row));
        if own != group_since {
            entries.insert(app.to_owned(), own);
        }
    }
    entries
}

/// The rows one publication writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    pub desired: Vec<DesiredRow>,
    pub members: Vec<MembershipRow>,
    pub reason_sets: Vec<ReasonSetRow>,
    pub reason_members: Vec<ReasonMemberRow>,
    /// Since sets not stored before, and the membership rows' since sets.
    pub since_sets: Vec<SinceSetRow>,
    pub member_since: Vec<MemberSinceRow>,
    pub clusters: Vec<ClusterRow>,
    /// Every (cluster, app) whose desired version the render changes
    /// ([`crate::changes::version_change_rows`]).
    pub version_changes: Vec<fleetscope_store::DesiredVersionChangeRow>,
    /// When the platform commit the render read was made, if it read one.
    pub platform_commit: Option<fleetscope_store::PlatformCommitRow>,
    pub render: RenderRow,
    /// Desired rows for apps present, and for apps marked removed.
    pub changed: usize,
    pub removed: usize,
}

/// The rows that bring the store from `current` to the desired state of one render: a pure
/// function of the render and what the store held.
pub fn rows(outcome: &RenderOutcome, current: &Current, render_id: u64, now: Timestamp) -> Rows {
    let platform = &outcome.platform;
    let in_platform: BTreeSet<&str> = platform.clusters.keys().map(|c| c.as_str()).collect();
    let (desired, changed, removed) = desired_rows(outcome, current, render_id, now);
    let members = membership_rows(outcome, current, &in_platform, render_id);
    let (since_sets, member_since) = since_rows(&members, outcome, current, render_id, now);
    let reason_sets = reason_set_rows(outcome, current, render_id);
    let reason_members = reason_member_rows(outcome, current, &in_platform, render_id);
    let clusters = inventory_rows(outcome, current, &in_platform, render_id, now);
    let version_changes =
        crate::changes::version_change_rows(outcome, &current.desired, &current.members, render_id);
    let platform_commit =
        outcome
            .platform_commit
            .as_ref()
            .map(|c| fleetscope_store::PlatformCommitRow {
                platform_commit: c.id.clone(),
                committed_at: u32::try_from(c.committed_at.max(0)).unwrap_or(u32::MAX),
            });
    let render = render_row(outcome, render_id, now, changed + removed);
    Rows {
        desired,
        members,
        reason_sets,
        reason_members,
        since_sets,
        member_since,
        clusters,
        version_changes,
        platform_commit,
        render,
        changed,
        removed,
    }
}

/// The desired rows of a render: one for each (render group, app) whose version or content
/// changed or that is new, then a removal for each that is no longer desired; with how many of
/// each.
fn desired_rows(
    outcome: &RenderOutcome,
    current: &Current,
    render_id: u64,
    now: Timestamp,
) -> (Vec<DesiredRow>, usize, usize) {
    let (platform, assigned, hashes) = (&outcome.platform, &outcome.assigned, &outcome.hashes);
    let commit = outcome.commit.head.as_str();
    let current_desired = &current.desired;
    let group_reasons = render_group_reasons(assigned);
    let mut desired = Vec::new();
    let mut present = BTreeSet::new();
    for (group, content) in &assigned.groups {
        for a in &content.assignments {
            let key = (group.clone(), a.app.to_string());
            let hash = &hashes[&key];
            present.insert(key.clone());
            if current_desired.get(&key).is_some_and(|row| {
                &row.content_hash == hash && row.version == a.version.as_str() && row.removed == 0
            }) {
                continue;
            }
            let app = &platform.apps[&a.app];
            desired.push(DesiredRow {
                render_group: group.clone(),
                app: a.app.to_string(),
                render_id,
                version: a.version.to_string(),
                content_hash: hash.clone(),
                kind: if content.reconciler == fleetscope_model::Reconciler::ArgoCd {
                    "argocd-application".into()
                } else {
                    app.kind.as_str().into()
                },
                namespace: app.namespace.clone(),
                reasons: group_reasons
                    .get(&(group.as_str(), a.app.as_str()))
                    .map(|r| r.iter().map(|&r| r.to_owned()).collect())
                    .unwrap_or_else(|| a.reasons.clone()),
                commit: commit.to_owned(),
                desired_since: fleetscope_store::to_datetime(now),
                removed: 0,
            });
        }
    }
    let changed = desired.len();
    let mut removed = 0;
    for ((group, app), held) in current_desired {
        if held.removed == 0 && !present.contains(&(group.clone(), app.clone())) {
            removed += 1;
            desired.push(DesiredRow {
                render_group: group.clone(),
                app: app.clone(),
                render_id,
                version: String::new(),
                content_hash: held.content_hash.clone(),
                kind: String::new(),
                namespace: String::new(),
                reasons: vec![],
                commit: commit.to_owned(),
                desired_since: fleetscope_store::to_datetime(now),
                removed: 1,
            });
        }
    }
    (desired, changed, removed)
}

/// The render group membership rows of a render (see [`membership_changes`]).
fn membership_rows(
    outcome: &RenderOutcome,
    current: &Current,
    in_platform: &BTreeSet<&str>,
    render_id: u64,
) -> Vec<MembershipRow> {
    membership_changes(
        &current.members,
        outcome
            .assigned
            .members
            .iter()
            .map(|(c, g)| (c.as_str(), g.as_str())),
        in_platform,
    )
    .into_iter()
    .map(|(cluster_id, render_group, removed)| MembershipRow {
        cluster_id,
        render_group,
        render_id,
        removed,
    })
    .collect()
}

/// The since sets not stored before and the membership since rows of the clusters that join a
/// render group with `members` (see [`carried_since`]).
fn since_rows(
    members: &[MembershipRow],
    outcome: &RenderOutcome,
    current: &Current,
    render_id: u64,
    now: Timestamp,
) -> (Vec<SinceSetRow>, Vec<MemberSinceRow>) {
    let joining: Vec<(&str, &str)> = members
        .iter()
        .filter(|m| m.removed == 0)
        .map(|m| (m.cluster_id.as_str(), m.render_group.as_str()))
        .collect();
    let now_seconds = fleetscope_store::to_datetime(now);
    let mut since_sets = Vec::new();
    let mut member_since = Vec::new();
    let mut named: BTreeSet<String> = BTreeSet::new();
    for (cluster, set) in carried_since(&joining, outcome, current, now_seconds) {
        let (name, entries) = &*set;
        if !current.since_sets.contains_key(name) && named.insert(name.clone()) {
            since_sets.extend(entries.iter().map(|(app, desired_since)| SinceSetRow {
                since_set: name.clone(),
                app: app.clone(),
                desired_since: *desired_since,
            }));
        }
        member_since.push(MemberSinceRow {
            cluster_id: cluster.to_owned(),
            render_id,
            since_set: name.clone(),
        });
    }
    (since_sets, member_since)
}

/// The reason set rows of a render. Reason sets are named by their content: a row is written
/// when a reason set appears (or comes back) and when no cluster has it any more.
fn reason_set_rows(
    outcome: &RenderOutcome,
    current: &Current,
    render_id: u64,
) -> Vec<ReasonSetRow> {
    let assigned = &outcome.assigned;
    let sets_now = &current.reason_sets;
    let mut reason_sets = Vec::new();
    for (name, apps) in &assigned.reason_sets {
        for a in apps {
            let key = (name.clone(), a.app.to_string());
            if sets_now.get(&key).is_some_and(|r| r.removed == 0) {
                continue;
            }
            reason_sets.push(ReasonSetRow {
                reason_set: name.clone(),
                app: a.app.to_string(),
                render_id,
                reasons: a.reasons.clone(),
                pinned_by: a.pinned_by.clone().unwrap_or_default(),
                removed: 0,
            });
        }
    }
    for ((name, _), row) in sets_now {
        if row.removed == 0 && !assigned.reason_sets.contains_key(name) {
            reason_sets.push(ReasonSetRow {
                render_id,
                removed: 1,
                ..row.clone()
            });
        }
    }
    reason_sets
}

/// The reason set membership rows of a render (see [`membership_changes`]).
fn reason_member_rows(
    outcome: &RenderOutcome,
    current: &Current,
    in_platform: &BTreeSet<&str>,
    render_id: u64,
) -> Vec<ReasonMemberRow> {
    membership_changes(
        &current.reason_members,
        outcome
            .assigned
            .reason_set_of
            .iter()
            .map(|(c, set)| (c.as_str(), set.as_str())),
        in_platform,
    )
    .into_iter()
    .map(|(cluster_id, reason_set, removed)| ReasonMemberRow {
        cluster_id,
        reason_set,
        render_id,
        removed,
    })
    .collect()
}

/// The inventory rows of a render: a row for each cluster whose row would say something else
/// than the stored one (new clusters, moved, relabelled), and a removal for each cluster taken
/// out of the platform repo (otherwise it would count as quiet forever).
fn inventory_rows(
    outcome: &RenderOutcome,
    current: &Current,
    in_platform: &BTreeSet<&str>,
    render_id: u64,
    now: Timestamp,
) -> Vec<ClusterRow> {
    let platform = &outcome.platform;
    let mut clusters = Vec::new();
    for entry in platform.clusters.values() {
        let cluster = fleetscope_model::Cluster {
            id: entry.id.clone(),
            group: entry.group.clone(),
            environment: entry.environment.clone(),
            reconciler: entry.reconciler,
            labels: entry.labels.clone(),
        };
        let row = ClusterRow::new(&cluster, &platform.effective_labels(entry), now, render_id);
        if !current
            .inventory
            .get(&row.cluster_id)
            .is_some_and(|held| same_inventory(held, &row))
        {
            clusters.push(row);
        }
    }
    for (cluster, held) in &current.inventory {
        if held.removed == 0 && !in_platform.contains(cluster.as_str()) {
            clusters.push(ClusterRow {
                cluster_id: cluster.clone(),
                group_path: String::new(),
                group_prefixes: Vec::new(),
                environment: String::new(),
                reconciler: String::new(),
                label_keys: Vec::new(),
                label_values: Vec::new(),
                updated_at: fleetscope_store::to_datetime(now),
                version: render_id,
                removed: 1,
            });
        }
    }
    clusters
}

/// The `renders` row of a render that wrote `changed_items` desired rows.
fn render_row(
    outcome: &RenderOutcome,
    render_id: u64,
    now: Timestamp,
    changed_items: usize,
) -> RenderRow {
    let assigned = &outcome.assigned;
    RenderRow {
        render_id,
        commit: outcome.commit.head.clone(),
        platform_commit: outcome
            .platform_commit
            .as_ref()
            .map(|c| c.id.clone())
            .unwrap_or_default(),
        rendered_at: fleetscope_store::to_datetime(now),
        summary: outcome.summary.clone(),
        render_groups: assigned.groups.len() as u32,
        clusters: assigned.members.len() as u32,
        changed_items: changed_items as u32,
    }
}

/// Writes the desired state of one render: what differs from what the store holds, so a
/// one-app change writes a few rows per render group holding the app, whatever the size of the
/// fleet. `render_id` must grow from render to render (the caller uses the time in
/// milliseconds). The `renders` row is written last, once every other insert was accepted:
/// readers show a render only from then on (docs/data-model.md).
/// The render's match rules as the collector reads them, with the SHA-256 of their JSON
/// (16 hex digits) as their digest.
pub fn match_rules_row(outcome: &RenderOutcome, render_id: u64) -> fleetscope_store::MatchRulesRow {
    use sha2::{Digest as _, Sha256};
    let rules = serde_json::to_string(&outcome.platform.match_rules())
        .expect("match rules always serialize");
    let digest = Sha256::digest(rules.as_bytes());
    let digest: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    fleetscope_store::MatchRulesRow {
        render_id,
        digest,
        rules,
    }
}

pub async fn publish(
    store: &Store,
    outcome: &RenderOutcome,
    render_id: u64,
    now: Timestamp,
) -> Result<Published, fleetscope_store::StoreError> {
    let mut timings = PublishTimings::default();
    let reading = std::time::Instant::now();
    let current = Current::read(store).await?;
    timings.read = reading.elapsed();
    let comparing = std::time::Instant::now();
    let rows = rows(outcome, &current, render_id, now);
    timings.compare = comparing.elapsed();
    let writing = std::time::Instant::now();
    // A membership row's since set is stored before the row that names it.
    if !rows.since_sets.is_empty() {
        store.insert_rows(&rows.since_sets).await?;
    }
    if !rows.member_since.is_empty() {
        store.insert_rows(&rows.member_since).await?;
    }
    if !rows.desired.is_empty() {
        store.insert_rows(&rows.desired).await?;
    }
    if !rows.members.is_empty() {
        store.insert_rows(&rows.members).await?;
    }
    if !rows.reason_sets.is_empty() {
        store.insert_rows(&rows.reason_sets).await?;
    }
    if !rows.reason_members.is_empty() {
        store.insert_rows(&rows.reason_members).await?;
    }
    if !rows.clusters.is_empty() {
        store.insert_rows(&rows.clusters).await?;
    }
    if !rows.version_changes.is_empty() {
        store.insert_rows(&rows.version_changes).await?;
    }
    if let Some(commit) = &rows.platform_commit {
        store.insert_rows(std::slice::from_ref(commit)).await?;
    }
    store
        .insert_rows(&[match_rules_row(outcome, render_id)])
        .await?;
    // What it wrote, for readers of a ClickHouse cluster, whose nodes may hold the `renders`
    // row before the rest (each table replicates on its own).
    store
        .insert_rows(&[fleetscope_store::RenderChangeCountRow {
            render_id,
            version_changes: rows.version_changes.len() as u32,
        }])
        .await?;
    store
        .insert_rows(&[fleetscope_store::RenderContentsRow {
            render_id,
            desired: rows.desired.len() as u32,
            members: rows.members.len() as u32,
        }])
        .await?;
    store
        .insert_rows(std::slice::from_ref(&rows.render))
        .await?;
    timings.write = writing.elapsed();
    Ok(Published {
        render_id,
        desired_rows: rows.changed,
        removed_rows: rows.removed,
        membership_rows: rows.members.len(),
        cluster_rows: rows.clusters.len(),
        reason_set_rows: rows.reason_sets.len(),
        reason_member_rows: rows.reason_members.len(),
        since_set_rows: rows.since_sets.len(),
        member_since_rows: rows.member_since.len(),
        version_change_rows: rows.version_changes.len(),
        timings,
    })
}
