//! Desired state into ClickHouse: after each render, the cluster inventory, which render group
//! each cluster belongs to, and per render group and app the version, content hash, commit and
//! reasons. Only what changed since the last render is written (each render a row in `renders`,
//! so the history of desired state is complete).

use std::collections::{BTreeMap, BTreeSet};

use fleetscope_model::Timestamp;
use fleetscope_store::{ClusterRow, DesiredRow, MembershipRow, RenderRow, Store};

use crate::RenderOutcome;

/// What one publication wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub render_id: u64,
    pub desired_rows: usize,
    pub removed_rows: usize,
    pub membership_rows: usize,
    pub cluster_rows: usize,
}

/// Writes the desired state of one render. `render_id` must grow from render to render
/// (the caller uses the time in milliseconds).
pub async fn publish(
    store: &Store,
    outcome: &RenderOutcome,
    render_id: u64,
    now: Timestamp,
) -> Result<Published, fleetscope_store::StoreError> {
    let (platform, assigned, hashes) = (&outcome.platform, &outcome.assigned, &outcome.hashes);
    let (commit, summary) = (outcome.commit.head.as_str(), outcome.summary.as_str());
    let current: BTreeMap<(String, String), (String, u8)> = store
        .current_desired()
        .await?
        .into_iter()
        .map(|r| ((r.render_group, r.app), (r.content_hash, r.removed)))
        .collect();
    let mut desired = Vec::new();
    let mut present = BTreeSet::new();
    for (group, content) in &assigned.groups {
        for a in &content.assignments {
            let key = (group.clone(), a.app.to_string());
            let hash = &hashes[&key];
            present.insert(key.clone());
            if current
                .get(&key)
                .is_some_and(|(h, removed)| h == hash && *removed == 0)
            {
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
                reasons: a.reasons.clone(),
                commit: commit.to_owned(),
                desired_since: fleetscope_store::to_datetime(now),
                removed: 0,
            });
        }
    }
    let changed = desired.len();
    let mut removed = 0;
    for ((group, app), (hash, was_removed)) in &current {
        if *was_removed == 0 && !present.contains(&(group.clone(), app.clone())) {
            removed += 1;
            desired.push(DesiredRow {
                render_group: group.clone(),
                app: app.clone(),
                render_id,
                version: String::new(),
                content_hash: hash.clone(),
                kind: String::new(),
                namespace: String::new(),
                reasons: vec![],
                commit: commit.to_owned(),
                desired_since: fleetscope_store::to_datetime(now),
                removed: 1,
            });
        }
    }
    let members_now: BTreeMap<String, (String, u8)> = store
        .current_members()
        .await?
        .into_iter()
        .map(|m| (m.cluster_id, (m.render_group, m.removed)))
        .collect();
    let mut members = Vec::new();
    for (cluster, group) in &assigned.members {
        if members_now
            .get(cluster.as_str())
            .is_some_and(|(g, removed)| g == group && *removed == 0)
        {
            continue;
        }
        members.push(MembershipRow {
            cluster_id: cluster.to_string(),
            render_group: group.clone(),
            render_id,
            removed: 0,
        });
    }
    for (cluster, (group, removed)) in &members_now {
        if *removed == 0 && !assigned.members.keys().any(|c| c.as_str() == cluster) {
            members.push(MembershipRow {
                cluster_id: cluster.clone(),
                render_group: group.clone(),
                render_id,
                removed: 1,
            });
        }
    }
    // The inventory is small (one row per cluster) and carries labels that may have changed
    // without any desired change: write it whole with each render that changed anything.
    let mut clusters = Vec::new();
    if !desired.is_empty() || !members.is_empty() || current.is_empty() {
        for entry in platform.clusters.values() {
            let cluster = fleetscope_model::Cluster {
                id: entry.id.clone(),
                group: entry.group.clone(),
                environment: entry.environment.clone(),
                reconciler: entry.reconciler,
                labels: entry.labels.clone(),
            };
            clusters.push(ClusterRow::new(
                &cluster,
                &platform.effective_labels(entry),
                now,
                render_id,
            ));
        }
    }
    // Clusters taken out of the platform repo leave the inventory too (their membership is
    // marked removed above); otherwise they would count as quiet forever.
    let in_platform: BTreeSet<&str> = platform.clusters.keys().map(|c| c.as_str()).collect();
    for cluster in store.known_clusters().await? {
        if !in_platform.contains(cluster.as_str()) {
            clusters.push(ClusterRow {
                cluster_id: cluster,
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
    if !desired.is_empty() {
        store.insert_rows(&desired).await?;
    }
    if !members.is_empty() {
        store.insert_rows(&members).await?;
    }
    if !clusters.is_empty() {
        store.insert_rows(&clusters).await?;
    }
    store
        .insert_rows(&[RenderRow {
            render_id,
            commit: commit.to_owned(),
            platform_commit: String::new(),
            rendered_at: fleetscope_store::to_datetime(now),
            summary: summary.to_owned(),
            render_groups: assigned.groups.len() as u32,
            clusters: assigned.members.len() as u32,
            changed_items: (changed + removed) as u32,
        }])
        .await?;
    Ok(Published {
        render_id,
        desired_rows: changed,
        removed_rows: removed,
        membership_rows: members.len(),
        cluster_rows: clusters.len(),
    })
}
