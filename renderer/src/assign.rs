//! Assignment: for every cluster, which apps it should run, at which version, with which values,
//! and why (the policies, in precedence order). Clusters whose assignments come out identical
//! share a render group, named by a hash of that content, so a change elsewhere never renames it.

use std::collections::{BTreeMap, BTreeSet};

use fleetscope_model::{AppName, ClusterId, Reconciler, Version};
use sha2::{Digest, Sha256};

use crate::model::Platform;
use crate::platform::{PlatformError, Values};

/// One app as one cluster should run it.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub app: AppName,
    pub version: Version,
    /// The app's defaults with every matching policy's values merged over them.
    pub values: Values,
    /// Why: the policies that selected the app (lowest precedence first), or
    /// `dependency of <app>` for apps pulled in by another's dependency.
    pub reasons: Vec<String>,
    /// The policy whose pin decided the version, if any.
    pub pinned_by: Option<String>,
}

/// Everything one render group gets. Equal content means equal render group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupContent {
    pub reconciler: Reconciler,
    pub assignments: Vec<Assignment>,
}

impl GroupContent {
    /// A text that is equal for equal content (reasons left out: they explain, they are not
    /// rendered).
    pub fn key(&self) -> String {
        let parts: Vec<serde_json::Value> = self
            .assignments
            .iter()
            .map(|a| serde_json::json!([a.app.as_str(), a.version.as_str(), a.values]))
            .collect();
        serde_json::json!([self.reconciler.as_str(), parts]).to_string()
    }

    /// The name the policies behind this content give: `rg-` and 12 hex digits of a hash of the
    /// reconciler and, per app, the policies that selected it. Versions and values are left
    /// out, so changing an app's version or defaults never renames a render group; only a
    /// change in which policies reach which clusters does.
    pub fn signature_name(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(self.reconciler.as_str().as_bytes());
        for a in &self.assignments {
            hasher.update([0]);
            hasher.update(a.app.as_str().as_bytes());
            for reason in &a.reasons {
                hasher.update([1]);
                hasher.update(reason.as_bytes());
            }
        }
        let digest = hasher.finalize();
        format!(
            "rg-{}",
            digest
                .iter()
                .take(6)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )
    }
}

/// The result of assigning the whole platform.
#[derive(Debug, Clone, Default)]
pub struct Assigned {
    /// Render group name → content.
    pub groups: BTreeMap<String, GroupContent>,
    /// Cluster → its render group.
    pub members: BTreeMap<ClusterId, String>,
}

/// Merges `over` into `base`: objects merge key by key, anything else is replaced.
pub fn deep_merge(base: &mut Values, over: &Values) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(serde_json::Value::Object(existing)), serde_json::Value::Object(incoming)) => {
                deep_merge(existing, incoming)
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The assignments of one cluster, or the conflicts that prevent them.
pub fn assign_cluster(
    platform: &Platform,
    cluster: &ClusterId,
) -> Result<Vec<Assignment>, Vec<PlatformError>> {
    let entry = &platform.clusters[cluster];
    let labels = platform.effective_labels(entry);
    let mut chosen: BTreeMap<AppName, Assignment> = BTreeMap::new();
    let mut pins: BTreeMap<AppName, (i32, String, Version)> = BTreeMap::new();
    let mut errors = Vec::new();
    for policy in &platform.policies {
        if !policy.clusters.matches(&labels, &entry.group) {
            continue;
        }
        for app in platform.apps.values() {
            let model_app = fleetscope_model::Application {
                name: app.name.clone(),
                version: app.version.clone(),
                source: app.source.clone(),
                kind: app.kind,
                namespace: app.namespace.clone(),
                depends_on: app.depends_on.clone(),
                labels: app.labels.clone(),
            };
            if !policy.apps.matches(&model_app) {
                continue;
            }
            let assignment = chosen
                .entry(app.name.clone())
                .or_insert_with(|| Assignment {
                    app: app.name.clone(),
                    version: app.version.clone(),
                    values: app.values.clone(),
                    reasons: vec![],
                    pinned_by: None,
                });
            assignment.reasons.push(format!("policy/{}", policy.name));
            deep_merge(&mut assignment.values, &policy.values);
            if let Some(version) = &policy.version {
                if let Some((priority, other, pinned)) = pins.get(&app.name) {
                    if *priority == policy.priority && pinned != version {
                        errors.push(policy.origin.error(
                            "version",
                            format!(
                                "conflicts with policy {other:?} (same priority {priority}): {} pinned to {} and {} on cluster {cluster}; give one a higher priority",
                                app.name, pinned, version
                            ),
                        ));
                    }
                }
                pins.insert(
                    app.name.clone(),
                    (policy.priority, policy.name.clone(), version.clone()),
                );
                assignment.version = version.clone();
                assignment.pinned_by = Some(policy.name.clone());
            }
        }
    }
    // Dependencies come along, at their default version, unless a policy chose them too.
    let mut queue: Vec<AppName> = chosen.keys().cloned().collect();
    let mut seen: BTreeSet<AppName> = queue.iter().cloned().collect();
    while let Some(name) = queue.pop() {
        for dep in platform.apps[&name].depends_on.clone() {
            if seen.insert(dep.clone()) {
                let app = &platform.apps[&dep];
                chosen.entry(dep.clone()).or_insert_with(|| Assignment {
                    app: dep.clone(),
                    version: app.version.clone(),
                    values: app.values.clone(),
                    reasons: vec![format!("dependency of {name}")],
                    pinned_by: None,
                });
                queue.push(dep);
            }
        }
    }
    if errors.is_empty() {
        Ok(chosen.into_values().collect())
    } else {
        Err(errors)
    }
}

/// Assigns every cluster and forms the render groups. Conflicts are reported once per
/// policy and message (not once per cluster).
pub fn assign(platform: &Platform) -> Result<Assigned, Vec<PlatformError>> {
    let mut assigned = Assigned::default();
    let mut errors: BTreeMap<(String, usize, String), (PlatformError, usize)> = BTreeMap::new();
    // Clusters with equal content share a group; among the policy signatures that lead to the
    // same content, the smallest names the group.
    let mut by_content: BTreeMap<String, (String, GroupContent)> = BTreeMap::new();
    let mut cluster_content: BTreeMap<ClusterId, String> = BTreeMap::new();
    for (id, cluster) in &platform.clusters {
        match assign_cluster(platform, id) {
            Ok(assignments) => {
                let content = GroupContent {
                    reconciler: cluster.reconciler,
                    assignments,
                };
                let key = content.key();
                let signature = content.signature_name();
                by_content
                    .entry(key.clone())
                    .and_modify(|(name, _)| {
                        if signature < *name {
                            *name = signature.clone();
                        }
                    })
                    .or_insert((signature, content));
                cluster_content.insert(id.clone(), key);
            }
            Err(found) => {
                for err in found {
                    // Same conflict on many clusters: keep the first message, count the rest.
                    let key = (
                        err.file.clone(),
                        err.document,
                        err.message
                            .split(" on cluster ")
                            .next()
                            .unwrap_or_default()
                            .to_owned(),
                    );
                    errors
                        .entry(key)
                        .and_modify(|(_, n)| *n += 1)
                        .or_insert((err, 1));
                }
            }
        }
    }
    if errors.is_empty() {
        for (id, key) in cluster_content {
            assigned.members.insert(id, by_content[&key].0.clone());
        }
        for (name, content) in by_content.into_values() {
            assigned.groups.insert(name, content);
        }
        Ok(assigned)
    } else {
        Err(errors
            .into_values()
            .map(|(mut err, n)| {
                if n > 1 {
                    err.message = format!("{} (and {} more clusters)", err.message, n - 1);
                }
                err
            })
            .collect())
    }
}
