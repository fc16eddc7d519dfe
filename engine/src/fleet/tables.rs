//! The renderer's tables and the inventory in the fleet: render group and reason set membership,
//! desired rows, since sets, reasons, and the read of all of them from the store.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use fleetscope_model::{GroupPath, Timestamp};
use fleetscope_store::queries::ChangeMarkers;
use fleetscope_store::{
    ClusterRow, DesiredRow, DesiredVersionChangeRow, ReasonSetRow, RenderContentsRow, SinceSetRow,
    Store,
};

use crate::fleet::records::ClusterInfo;
use crate::fleet::records::ClusterRec;
use crate::fleet::records::DesiredRec;
use crate::fleet::records::ReasonRec;
use crate::fleet::Fleet;
use crate::rollouts::RenderInfo;

impl Fleet {
    /// Replaces the inventory with `rows` (the current row per cluster).
    pub fn set_inventory(&mut self, rows: Vec<ClusterRow>) {
        let mut wanted: HashMap<String, ClusterInfo> = HashMap::with_capacity(rows.len());
        // The label sets this inventory uses, the ones already held taken over.
        let mut label_sets: HashSet<Arc<[(u32, u32)]>> = HashSet::new();
        for row in rows {
            if row.removed != 0 {
                continue;
            }
            let Ok(group) = GroupPath::parse(&row.group_path) else {
                tracing::warn!(cluster = %row.cluster_id, group = %row.group_path, "inventory row with an invalid group path skipped");
                continue;
            };
            let prefixes = group
                .prefixes()
                .iter()
                .map(|p| self.symbols.intern(p.as_str()))
                .collect();
            let environment = self.symbols.intern(&row.environment);
            let reconciler = self.symbols.intern(&row.reconciler);
            let mut labels: Vec<(u32, u32)> = row
                .label_keys
                .iter()
                .zip(&row.label_values)
                .map(|(k, v)| (self.symbols.intern(k), self.symbols.intern(v)))
                .collect();
            labels.sort_unstable();
            labels.dedup_by_key(|(k, _)| *k);
            let labels: Arc<[(u32, u32)]> = match label_sets
                .get(&labels[..])
                .or_else(|| self.upkeep.label_sets.get(&labels[..]))
            {
                Some(held) => held.clone(),
                None => labels.into(),
            };
            label_sets.insert(labels.clone());
            wanted.insert(
                row.cluster_id,
                ClusterInfo {
                    group,
                    prefixes,
                    environment,
                    reconciler,
                    labels,
                },
            );
        }
        for slot in 0..u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters") {
            let id = self.clusters.id(slot).clone();
            let info = wanted.remove(&*id);
            if self.clusters.rec(slot).info.as_deref() != info.as_ref() {
                self.clusters.rec_mut(slot).info = info.map(Arc::new);
                self.touch(slot);
            }
        }
        for (id, info) in wanted {
            let slot = self.clusters.slot_or_add(&id);
            self.clusters.rec_mut(slot).info = Some(Arc::new(info));
            self.touch(slot);
        }
        self.upkeep.label_sets = label_sets;
        self.generation += 1;
    }

    /// Sets one value of every cluster from `wanted` (cluster → value), clusters not listed
    /// getting `absent`; touches the clusters whose value changed when `drift` says the value
    /// matters to drift.
    fn assign<T: Copy + PartialEq>(
        &mut self,
        mut wanted: HashMap<String, T>,
        absent: T,
        get: fn(&ClusterRec) -> T,
        put: fn(&mut ClusterRec, T),
        drift: bool,
    ) {
        for slot in 0..u32::try_from(self.clusters.len()).expect("fewer than 4 billion clusters") {
            let id = self.clusters.id(slot).clone();
            let value = wanted.remove(&*id).unwrap_or(absent);
            if get(self.clusters.rec(slot)) != value {
                put(self.clusters.rec_mut(slot), value);
                if drift {
                    self.touch(slot);
                }
            }
        }
        for (id, value) in wanted {
            let slot = self.clusters.slot_or_add(&id);
            put(self.clusters.rec_mut(slot), value);
            if drift {
                self.touch(slot);
            }
        }
        self.generation += 1;
    }

    /// Sets one symbol field of every cluster from `rows` (`(cluster, value, removed)`), as
    /// [`Fleet::assign`] does.
    fn set_field(
        &mut self,
        rows: Vec<(String, String, bool)>,
        get: fn(&ClusterRec) -> Option<u32>,
        put: fn(&mut ClusterRec, Option<u32>),
        drift: bool,
    ) {
        let mut wanted = HashMap::with_capacity(rows.len());
        for (cluster, value, removed) in rows {
            if !removed {
                wanted.insert(cluster, Some(self.symbols.intern(&value)));
            }
        }
        self.assign(wanted, None, get, put, drift);
    }

    /// Replaces membership with `(cluster, render group, removed)` rows.
    pub fn set_membership(&mut self, rows: Vec<(String, String, bool)>) {
        self.set_field(rows, |c| c.render_group, |c, v| c.render_group = v, true);
    }

    /// Sets each cluster's membership render and since set from `(cluster, render, since set or
    /// "", removed)` rows, clusters not listed getting none; clusters whose value changed are
    /// classified again.
    pub fn set_member_since(&mut self, rows: Vec<(String, u64, String, bool)>) {
        let mut wanted = HashMap::with_capacity(rows.len());
        for (cluster, render, set, removed) in rows {
            if !removed {
                let set = (!set.is_empty()).then(|| self.symbols.intern(&set));
                wanted.insert(cluster, (render, set));
            }
        }
        self.assign(
            wanted,
            (0, None),
            |c| (c.member_render, c.since_set),
            |c, (render, set)| (c.member_render, c.since_set) = (render, set),
            true,
        );
    }

    /// Replaces the since sets; the clusters of a set whose content changed are classified
    /// again (a set's name is a hash of its content, so that happens only to a set read half).
    pub fn set_since_sets(&mut self, rows: Vec<SinceSetRow>) {
        let mut sets: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
        for row in rows {
            let set = self.symbols.intern(&row.since_set);
            let app = self.symbols.intern(&row.app);
            sets.entry(set).or_default().push((app, row.desired_since));
        }
        for entries in sets.values_mut() {
            entries.sort_unstable();
            entries.dedup_by_key(|(app, _)| *app);
        }
        let changed: HashSet<u32> = self
            .since_sets
            .iter()
            .filter(|(set, entries)| sets.get(set) != Some(entries))
            .map(|(set, _)| *set)
            .collect();
        self.touch_where(&changed, |c| c.since_set);
        self.since_sets = Arc::new(sets);
        self.generation += 1;
    }

    /// When `desired`, a row of `cluster`'s render group, became desired for `cluster`: the
    /// time in the cluster's since set when the row is not newer than the cluster's membership
    /// and the set has the app, else the row's own. The one rule of docs/data-model.md
    /// ("Desired since"), which the store's SQL applies too.
    pub fn desired_since(&self, cluster: &ClusterRec, desired: &DesiredRec) -> u32 {
        if desired.render_id <= cluster.member_render {
            if let Some(entries) = cluster.since_set.and_then(|s| self.since_sets.get(&s)) {
                if let Ok(at) = entries.binary_search_by_key(&desired.app, |(app, _)| *app) {
                    return entries[at].1;
                }
            }
        }
        desired.since
    }

    /// Replaces reason set membership with `(cluster, reason set, removed)` rows.
    pub fn set_reason_membership(&mut self, rows: Vec<(String, String, bool)>) {
        self.set_field(rows, |c| c.reason_set, |c, v| c.reason_set = v, false);
    }

    /// Replaces the reason sets with the current row per (reason set, app).
    pub fn set_reason_sets(&mut self, rows: Vec<ReasonSetRow>) {
        let mut reasons: HashMap<u32, Vec<ReasonRec>> = HashMap::new();
        for row in rows {
            if row.removed != 0 {
                continue;
            }
            let set = self.symbols.intern(&row.reason_set);
            let rec = ReasonRec {
                app: self.symbols.intern(&row.app),
                reasons: row.reasons.into(),
                pinned_by: (!row.pinned_by.is_empty()).then(|| self.symbols.intern(&row.pinned_by)),
            };
            reasons.entry(set).or_default().push(rec);
        }
        for apps in reasons.values_mut() {
            apps.sort_by_key(|r| r.app);
        }
        self.reasons = Arc::new(reasons);
        self.generation += 1;
    }

    /// Why `app` (a symbol) is desired on `cluster`, from the cluster's reason set; `None` when
    /// the cluster has no reason set or its reason set does not have the app.
    pub fn reasons_of(&self, cluster: &ClusterRec, app: u32) -> Option<&ReasonRec> {
        let apps = self.reasons.get(&cluster.reason_set?)?;
        apps.binary_search_by_key(&app, |r| r.app)
            .ok()
            .map(|at| &apps[at])
    }

    /// Replaces desired state with the current row per (render group, app). Only the clusters
    /// of render groups whose desired state changed are classified again.
    pub fn set_desired(&mut self, rows: Vec<DesiredRow>) {
        let mut desired: HashMap<u32, Vec<DesiredRec>> = HashMap::new();
        for row in rows {
            if row.removed != 0 {
                continue;
            }
            let group = self.symbols.intern(&row.render_group);
            let rec = DesiredRec {
                app: self.symbols.intern(&row.app),
                version: self.symbols.intern(&row.version),
                content_hash: self.symbols.intern(&row.content_hash),
                since: row.desired_since,
                render_id: row.render_id,
                commit: self.symbols.intern(&row.commit),
                kind: self.symbols.intern(&row.kind),
                namespace: self.symbols.intern(&row.namespace),
                reasons: row.reasons.into(),
            };
            desired.entry(group).or_default().push(rec);
        }
        for apps in desired.values_mut() {
            apps.sort_by_key(|d| d.app);
        }
        let changed: HashSet<u32> = desired
            .iter()
            .filter(|(g, apps)| self.desired.get(g) != Some(apps))
            .map(|(g, _)| *g)
            .chain(
                self.desired
                    .keys()
                    .filter(|g| !desired.contains_key(g))
                    .copied(),
            )
            .collect();
        self.touch_where(&changed, |c| c.render_group);
        self.desired = Arc::new(desired);
        self.generation += 1;
    }
}

/// How long the rows of a render may stand without its `renders` row before the hub takes
/// them as they are. A render is published in seconds, its `renders` row last; rows older than
/// this belong to a render whose publisher stopped half-way (the next render supersedes them).
pub const UNFINISHED_RENDER_GRACE: Duration = Duration::from_secs(60);

/// How long the hub waits for the rows a render wrote (as `render_contents` counts them) to
/// reach the ClickHouse node it reads, before it takes the tables as they are. A node killed
/// right after taking a render's rows holds them until it is back; this is longer than a
/// restart.
pub const UNREPLICATED_RENDER_GRACE: Duration = Duration::from_secs(600);

/// Inventory, membership, desired state and reasons as read at one moment, with the markers read
/// before them (so a change during the read is seen again at the next refresh).
#[derive(Debug)]
pub struct Tables {
    markers: ChangeMarkers,
    /// After the read: the newest render whose rows the tables hold, when it is newer than the
    /// newest render published (`markers.last_render`): its publication was under way, so the
    /// read may hold part of it.
    pub(crate) unfinished_render: Option<u64>,
    /// A render published (up to `markers.last_render`) whose rows the tables read hold fewer
    /// of than it wrote (`render_contents` for the newest render's desired and membership rows,
    /// `render_change_counts` for every render's version changes), or whose counts could not
    /// be read yet: on a ClickHouse cluster each table replicates on its own, so the node that
    /// answered may hold a `renders` row and not yet the rest. Of several, the one held back
    /// the longest; with whether what it wrote was read (then rows are missing) or not.
    pub(crate) unreplicated_render: Option<(u64, bool)>,
    inventory: Vec<ClusterRow>,
    members: Vec<fleetscope_store::queries::CurrentMemberRow>,
    since_sets: Vec<SinceSetRow>,
    desired: Vec<DesiredRow>,
    reason_members: Vec<fleetscope_store::queries::CurrentReasonMemberRow>,
    reason_sets: Vec<ReasonSetRow>,
    /// The desired version changes of the renders after the one the fleet applied last, up to
    /// the newest published, with where those renders came from.
    version_changes: Vec<DesiredVersionChangeRow>,
    origins: BTreeMap<u64, RenderInfo>,
}

impl Tables {
    /// Reads the tables, then the newest render any of them holds rows of: a row read above
    /// was in before that second read, so a render whose rows were read is never missed.
    /// The version changes read are those of the renders after `changes_after`.
    pub async fn read(
        store: &Store,
        markers: ChangeMarkers,
        changes_after: u64,
    ) -> fleetscope_store::Result<Tables> {
        let mut version_changes = Vec::new();
        let mut change_counts = Vec::new();
        if changes_after < markers.last_render {
            store
                .desired_version_changes_each(changes_after, markers.last_render, |row| {
                    version_changes.push(row)
                })
                .await?;
            change_counts = store
                .render_change_counts(changes_after, markers.last_render)
                .await?;
        }
        let origins = render_origins(store, changes_after).await?;
        let mut tables = Tables {
            markers,
            unfinished_render: None,
            unreplicated_render: None,
            inventory: store.inventory_rows().await?,
            members: store.current_members().await?,
            since_sets: store.since_set_rows().await?,
            desired: store.desired_rows().await?,
            reason_members: store.current_reason_members().await?,
            reason_sets: store.reason_set_rows().await?,
            version_changes,
            origins,
        };
        let newest = store.newest_render_rows().await?.newest();
        tables.unfinished_render = (newest > markers.last_render).then_some(newest);
        let render = markers.last_render;
        if render > 0 {
            let contents = store.render_contents(render).await?;
            tables.unreplicated_render = match tables.hold_all_of(render, contents) {
                Ok(()) => None,
                // On one server the renderer wrote it before the `renders` row: a render
                // without it was published by a renderer that did not record it.
                Err(false) if store.cluster().is_none() => None,
                Err(known) => Some((render, known)),
            };
        }
        let mut held: BTreeMap<u64, u32> = BTreeMap::new();
        for change in &tables.version_changes {
            *held.entry(change.render_id).or_default() += 1;
        }
        let renders = renders_to_check(
            tables.origins.keys().copied(),
            &change_counts,
            changes_after,
            markers.last_render,
        );
        let short = short_of_changes(renders, &change_counts, &held, store.cluster().is_some());
        tables.unreplicated_render = held_longer(tables.unreplicated_render, short);
        Ok(tables)
    }

    /// `Ok(())` when these tables hold every desired and membership row `render` wrote, as
    /// `contents` counts them; else whether what it wrote was known (`Err(true)`: rows are
    /// missing; `Err(false)`: `contents` could not be read, from a render published before the
    /// renderer recorded it or from a node that has not received that row yet).
    fn hold_all_of(&self, render: u64, contents: Option<RenderContentsRow>) -> Result<(), bool> {
        let Some(contents) = contents else {
            return Err(false);
        };
        let desired = self
            .desired
            .iter()
            .filter(|d| d.render_id == render)
            .count();
        let members = self
            .members
            .iter()
            .filter(|m| m.render_id == render)
            .count();
        if desired >= contents.desired as usize && members >= contents.members as usize {
            Ok(())
        } else {
            Err(true)
        }
    }

    /// Tables from rows read elsewhere (the answers at a past moment): no change markers, no
    /// render under way, no reasons.
    pub fn from_rows(
        inventory: Vec<ClusterRow>,
        members: Vec<fleetscope_store::queries::CurrentMemberRow>,
        since_sets: Vec<SinceSetRow>,
        desired: Vec<DesiredRow>,
    ) -> Tables {
        Tables {
            markers: ChangeMarkers {
                last_render: 0,
                inventory_version: 0,
                inventory_rows: 0,
            },
            unfinished_render: None,
            unreplicated_render: None,
            inventory,
            members,
            since_sets,
            desired,
            reason_members: Vec::new(),
            reason_sets: Vec::new(),
            version_changes: Vec::new(),
            origins: BTreeMap::new(),
        }
    }

    /// The render being published when the tables were read, if its rows are younger than
    /// [`UNFINISHED_RENDER_GRACE`] at `now`, or the newest render published when the tables
    /// read lack some of its rows (younger than [`UNREPLICATED_RENDER_GRACE`]) or what it wrote
    /// could not be read (younger than [`UNFINISHED_RENDER_GRACE`]): these tables may hold part
    /// of it and must not be applied (the hub keeps what it has and reads again at the next
    /// refresh). Render ids are the renderer's clock in milliseconds.
    pub fn render_in_progress(&self, now: Timestamp) -> Option<u64> {
        let now_ms = now.seconds().saturating_mul(1000);
        let younger =
            |render: u64, grace: Duration| (now_ms - render as i64) < grace.as_millis() as i64;
        if let Some(render) = self
            .unfinished_render
            .filter(|&r| younger(r, UNFINISHED_RENDER_GRACE))
        {
            return Some(render);
        }
        self.unreplicated_render
            .filter(|&(render, known)| younger(render, grace(known)))
            .map(|(render, _)| render)
    }
}

impl Fleet {
    /// Replaces inventory, membership, desired state and reasons.
    pub fn set_tables(&mut self, tables: Tables) {
        self.set_inventory(tables.inventory);
        self.set_member_since(
            tables
                .members
                .iter()
                .map(|m| {
                    (
                        m.cluster_id.clone(),
                        m.render_id,
                        m.since_set.clone(),
                        m.removed != 0,
                    )
                })
                .collect(),
        );
        self.set_membership(
            tables
                .members
                .into_iter()
                .map(|m| (m.cluster_id, m.render_group, m.removed != 0))
                .collect(),
        );
        self.set_since_sets(tables.since_sets);
        self.set_desired(tables.desired);
        self.set_reason_membership(
            tables
                .reason_members
                .into_iter()
                .map(|m| (m.cluster_id, m.reason_set, m.removed != 0))
                .collect(),
        );
        self.set_reason_sets(tables.reason_sets);
        self.apply_version_changes(&tables.version_changes, &tables.origins);
        self.markers = Some(tables.markers);
    }
}

/// Where each render after `after` came from, by render.
pub(crate) async fn render_origins(
    store: &Store,
    after: u64,
) -> fleetscope_store::Result<BTreeMap<u64, RenderInfo>> {
    Ok(store
        .render_origins(after)
        .await?
        .into_iter()
        .map(|(origin, committed_at)| {
            let info = RenderInfo {
                rendered_at: Some(origin.rendered_at),
                platform_commit: origin.platform_commit,
                committed_at,
            };
            (origin.render_id, info)
        })
        .collect())
}

/// The grace a render is held back for: [`UNREPLICATED_RENDER_GRACE`] when some of the rows it
/// wrote are known to be missing, [`UNFINISHED_RENDER_GRACE`] when what it wrote is unknown.
fn grace(known: bool) -> Duration {
    if known {
        UNREPLICATED_RENDER_GRACE
    } else {
        UNFINISHED_RENDER_GRACE
    }
}

/// Of two renders held back (`(render, whether rows are known to be missing)`), the one held
/// the longer.
fn held_longer(a: Option<(u64, bool)>, b: Option<(u64, bool)>) -> Option<(u64, bool)> {
    let until = |(render, known): (u64, bool)| render + grace(known).as_millis() as u64;
    match (a, b) {
        (Some(a), Some(b)) => Some(if until(b) > until(a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// The renders in `(after, last_render]` whose version changes must all be read before a read
/// is applied: those `origins` (the `renders` rows read) and `written` (their counts) name, and
/// `last_render` itself. On a ClickHouse cluster each query may be answered by another node, and
/// a node that answered the change markers may hold a `renders` row that the node answering
/// the origins does not have yet: a render is checked whichever read saw it.
fn renders_to_check(
    origins: impl IntoIterator<Item = u64>,
    written: &[fleetscope_store::RenderChangeCountRow],
    after: u64,
    last_render: u64,
) -> std::collections::BTreeSet<u64> {
    origins
        .into_iter()
        .chain(written.iter().map(|c| c.render_id))
        .chain(std::iter::once(last_render))
        .filter(|&r| r > after && r <= last_render)
        .collect()
}

/// Of `renders`, the one held back the longest because fewer of its version change rows were
/// read (`held`, by render) than it wrote (`written`), or because what it wrote was not read on
/// a ClickHouse cluster (`clustered`), where each table replicates on its own. On one server the
/// renderer writes its count before the `renders` row, so a render without one was published by
/// a renderer that did not count.
pub(crate) fn short_of_changes(
    renders: impl IntoIterator<Item = u64>,
    written: &[fleetscope_store::RenderChangeCountRow],
    held: &BTreeMap<u64, u32>,
    clustered: bool,
) -> Option<(u64, bool)> {
    let written: BTreeMap<u64, u32> = written
        .iter()
        .map(|c| (c.render_id, c.version_changes))
        .collect();
    renders
        .into_iter()
        .filter_map(|render| match written.get(&render) {
            Some(&count) => {
                (held.get(&render).copied().unwrap_or(0) < count).then_some((render, true))
            }
            None => clustered.then_some((render, false)),
        })
        .fold(None, |longest, short| held_longer(longest, Some(short)))
}

/// Of the renders up to `last_render` young enough at `now` to be held back for (see
/// [`Tables::render_in_progress`]), one that wrote more version change rows than `held` (by
/// render) counts.
pub(crate) async fn young_and_short(
    store: &Store,
    last_render: u64,
    held: &BTreeMap<u64, u32>,
    now: Timestamp,
) -> fleetscope_store::Result<Option<u64>> {
    let now_ms = now.seconds().max(0) as u64 * 1000;
    let after = now_ms.saturating_sub(UNREPLICATED_RENDER_GRACE.as_millis() as u64);
    if after >= last_render {
        return Ok(None);
    }
    let written = store.render_change_counts(after, last_render).await?;
    let origins = render_origins(store, after).await?;
    let renders = renders_to_check(origins.keys().copied(), &written, after, last_render);
    Ok(
        match short_of_changes(renders, &written, held, store.cluster().is_some()) {
            Some((render, known)) if now_ms < render + grace(known).as_millis() as u64 => {
                Some(render)
            }
            _ => None,
        },
    )
}

/// Waits, a second at a time, until the store's node holds every version change row of the
/// renders up to `last_render` that are young enough to be held back for, so that a load
/// reads each render's changes whole.
pub(crate) async fn await_version_changes(
    store: &Store,
    last_render: u64,
    clock: fn() -> Timestamp,
) -> fleetscope_store::Result<()> {
    loop {
        let now = clock();
        let after = (now.seconds().max(0) as u64 * 1000)
            .saturating_sub(UNREPLICATED_RENDER_GRACE.as_millis() as u64);
        let held: BTreeMap<u64, u32> = store
            .stored_change_counts(after, last_render)
            .await?
            .into_iter()
            .map(|c| (c.render_id, c.version_changes))
            .collect();
        match young_and_short(store, last_render, &held, now).await? {
            Some(render) => {
                tracing::info!(
                    render,
                    "some version changes of a render have not reached the ClickHouse node read; reading them once they have"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            None => return Ok(()),
        }
    }
}

/// The renderer's tables with no part of a render in them: read again, once a second, while a
/// render is being published (see [`Tables::render_in_progress`]).
pub(crate) async fn complete_tables(
    store: &Store,
    clock: fn() -> Timestamp,
) -> fleetscope_store::Result<Tables> {
    loop {
        let markers = store.change_markers().await?;
        // The version changes are streamed by the load itself (`crate::index::load`).
        let tables = Tables::read(store, markers, u64::MAX).await?;
        match tables.render_in_progress(clock()) {
            Some(render) => {
                tracing::info!(
                    render,
                    "a render is being published; reading its desired state once it is complete"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            None => return Ok(tables),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetscope_store::queries::CurrentMemberRow;

    const RENDER: u64 = 1_800_000_000_000;

    fn desired(render_id: u64, app: &str) -> DesiredRow {
        DesiredRow {
            render_group: "emea".into(),
            app: app.into(),
            render_id,
            version: "1.0.0".into(),
            content_hash: "h".into(),
            kind: "HelmRelease".into(),
            namespace: "apps".into(),
            reasons: Vec::new(),
            commit: "c".into(),
            desired_since: 0,
            removed: 0,
        }
    }

    fn member(render_id: u64, cluster: &str) -> CurrentMemberRow {
        CurrentMemberRow {
            cluster_id: cluster.into(),
            render_group: "emea".into(),
            removed: 0,
            render_id,
            since_set: String::new(),
        }
    }

    /// Tables holding two desired rows and one membership row of `RENDER`, and older rows.
    fn tables() -> Tables {
        Tables::from_rows(
            Vec::new(),
            vec![member(RENDER, "a"), member(RENDER - 1, "b")],
            Vec::new(),
            vec![
                desired(RENDER, "api"),
                desired(RENDER, "web"),
                desired(RENDER - 1, "db"),
            ],
        )
    }

    fn contents(desired: u32, members: u32) -> Option<RenderContentsRow> {
        Some(RenderContentsRow {
            render_id: RENDER,
            desired,
            members,
        })
    }

    #[test]
    fn tables_hold_a_render_when_they_hold_as_many_of_its_rows_as_it_wrote() {
        let t = tables();
        assert_eq!(t.hold_all_of(RENDER, contents(2, 1)), Ok(()));
        assert_eq!(
            t.hold_all_of(RENDER, contents(3, 1)),
            Err(true),
            "a desired row missing"
        );
        assert_eq!(
            t.hold_all_of(RENDER, contents(2, 2)),
            Err(true),
            "a member row missing"
        );
        assert_eq!(
            t.hold_all_of(RENDER, None),
            Err(false),
            "what it wrote not read"
        );
    }

    #[test]
    fn a_render_whose_rows_are_not_all_read_is_kept_back_until_its_grace_passes() {
        let at = |seconds: i64| Timestamp(RENDER as i64 / 1000 + seconds);
        let mut t = tables();
        t.unreplicated_render = Some((RENDER, true));
        assert_eq!(t.render_in_progress(at(5)), Some(RENDER));
        assert_eq!(t.render_in_progress(at(590)), Some(RENDER));
        assert_eq!(t.render_in_progress(at(601)), None);
        t.unreplicated_render = Some((RENDER, false));
        assert_eq!(t.render_in_progress(at(59)), Some(RENDER));
        assert_eq!(t.render_in_progress(at(61)), None);
        t.unreplicated_render = None;
        assert_eq!(t.render_in_progress(at(5)), None);
    }

    fn written(counts: &[(u64, u32)]) -> Vec<fleetscope_store::RenderChangeCountRow> {
        counts
            .iter()
            .map(
                |&(render_id, version_changes)| fleetscope_store::RenderChangeCountRow {
                    render_id,
                    version_changes,
                },
            )
            .collect()
    }

    #[test]
    fn a_render_is_short_of_changes_when_fewer_were_read_than_it_wrote() {
        let renders = [RENDER - 2, RENDER - 1, RENDER];
        let written = written(&[(RENDER - 2, 3), (RENDER - 1, 0), (RENDER, 2)]);
        let all: BTreeMap<u64, u32> = [(RENDER - 2, 3), (RENDER, 2)].into();
        for clustered in [false, true] {
            assert_eq!(short_of_changes(renders, &written, &all, clustered), None);
        }
        let older_short: BTreeMap<u64, u32> = [(RENDER - 2, 2), (RENDER, 2)].into();
        assert_eq!(
            short_of_changes(renders, &written, &older_short, false),
            Some((RENDER - 2, true)),
            "an older render's changes count as much as the newest's"
        );
        let newest_missing: BTreeMap<u64, u32> = [(RENDER - 2, 3)].into();
        assert_eq!(
            short_of_changes(renders, &written, &newest_missing, false),
            Some((RENDER, true))
        );
        let uncounted = [RENDER - 2, RENDER - 1, RENDER, RENDER + 1];
        assert_eq!(
            short_of_changes(uncounted, &written, &all, false),
            None,
            "on one server a render without a count was published by a renderer that did not count"
        );
        assert_eq!(
            short_of_changes(uncounted, &written, &all, true),
            Some((RENDER + 1, false)),
            "on a cluster its count may not have arrived"
        );
    }

    #[test]
    fn a_render_is_checked_when_any_read_names_it() {
        let counts = written(&[(RENDER - 1, 4)]);
        let origins = [RENDER - 3, RENDER - 2];
        let checked = |after| -> Vec<u64> {
            renders_to_check(origins, &counts, after, RENDER)
                .into_iter()
                .collect()
        };
        assert_eq!(
            checked(RENDER - 3),
            vec![RENDER - 2, RENDER - 1, RENDER],
            "the newest render published, though the origins read lack it, and one only counted"
        );
        assert_eq!(checked(RENDER), Vec::<u64>::new(), "nothing after the last");
        assert_eq!(checked(u64::MAX), Vec::<u64>::new(), "nothing to check");
        // The node that answered the markers held render RENDER, the one that answered the
        // origins and the counts did not: its changes are not in, and it is held back.
        let held: BTreeMap<u64, u32> = [(RENDER - 1, 4)].into();
        let renders = renders_to_check(origins, &counts, RENDER - 3, RENDER);
        assert_eq!(
            short_of_changes(renders, &counts, &held, true),
            Some((RENDER, false))
        );
    }

    #[test]
    fn of_two_renders_held_back_the_one_held_longer_is_kept() {
        // Missing rows hold a render for ten minutes, an unknown count for one.
        let missing = Some((RENDER, true));
        let unknown_newer = Some((RENDER + 120_000, false));
        let unknown_much_newer = Some((RENDER + 600_000, false));
        assert_eq!(held_longer(missing, unknown_newer), missing);
        assert_eq!(held_longer(unknown_newer, missing), missing);
        assert_eq!(held_longer(missing, unknown_much_newer), unknown_much_newer);
        assert_eq!(held_longer(None, missing), missing);
        assert_eq!(held_longer(missing, None), missing);
        assert_eq!(held_longer(None, None), None);
    }
}
