//! Assignment: for every cluster, which apps it should run, at which version, with which values,
//! and why (the policies, in precedence order). Clusters whose assignments come out identical
//! share a render group, named by a hash of that content, so a change elsewhere never renames it.

use std::collections::{BTreeMap, BTreeSet};

use fleetscope_model::{AppName, ClusterId, Reconciler, Version};
use sha2::{Digest, Sha256};

use crate::platform::{PlatformError, Values};
use crate::validate::Platform;

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

/// Why one app is on a cluster, as `explain` says it: the reasons and the pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppReasons {
    pub app: AppName,
    /// As [`Assignment::reasons`].
    pub reasons: Vec<String>,
    /// As [`Assignment::pinned_by`].
    pub pinned_by: Option<String>,
}

/// The explanation of every app of a cluster, sorted by app. Clusters matched by the same
/// policies share one; clusters of one render group may have different ones.
pub type ReasonSet = Vec<AppReasons>;

/// The name of a reason set: `rs-` and 12 hex digits of a hash of its apps, reasons and pins,
/// so equal explanations share a name and a name never changes its meaning.
pub fn reason_set_name(reasons: &[AppReasons]) -> String {
    let mut hasher = Sha256::new();
    for a in reasons {
        hasher.update([0]);
        hasher.update(a.app.as_str().as_bytes());
        for reason in &a.reasons {
            hasher.update([1]);
            hasher.update(reason.as_bytes());
        }
        if let Some(policy) = &a.pinned_by {
            hasher.update([2]);
            hasher.update(policy.as_bytes());
        }
    }
    let digest = hasher.finalize();
    format!(
        "rs-{}",
        digest
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// Everything one render group gets. Equal content means equal render group.
///
/// The `reasons` and `pinned_by` of its assignments are those of the first clusters assigned to
/// it; other clusters of the group may have got the same content for other reasons (their own
/// are in [`Assigned::reason_sets`]).
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assigned {
    /// Render group name → content.
    pub groups: BTreeMap<String, GroupContent>,
    /// Cluster → its render group.
    pub members: BTreeMap<ClusterId, String>,
    /// Reason set name → why each app is there (one per distinct explanation, not per cluster).
    pub reason_sets: BTreeMap<String, ReasonSet>,
    /// Cluster → its reason set.
    pub reason_set_of: BTreeMap<ClusterId, String>,
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

/// For every policy (in precedence order), the apps it selects. Apps do not depend on the
/// cluster, so this is computed once per render.
pub fn policy_apps(platform: &Platform) -> Vec<Vec<AppName>> {
    platform
        .policies
        .iter()
        .map(|policy| {
            platform
                .apps
                .values()
                .filter(|app| {
                    let model_app = fleetscope_model::Application {
                        name: app.name.clone(),
                        version: app.version.clone(),
                        source: app.source.clone(),
                        kind: app.kind,
                        namespace: app.namespace.clone(),
                        depends_on: app.depends_on.clone(),
                        labels: app.labels.clone(),
                    };
                    policy.apps.matches(&model_app)
                })
                .map(|app| app.name.clone())
                .collect()
        })
        .collect()
}

/// The policies (by index, in precedence order) that select a cluster.
pub fn matching_policies(platform: &Platform, cluster: &ClusterId) -> Vec<usize> {
    PolicyMatcher::new(platform).matching(platform, cluster)
}

/// `In` and `NotIn` requirements with more values than this are looked up in a set.
const SET_FROM: usize = 8;

/// Every policy's cluster selector, ready to be tried on many clusters: the values of a long
/// `In` or `NotIn` list (a policy naming thousands of clusters by `fleetscope.io/cluster`, as
/// `fleetscope import` writes them) are looked up in a hash set instead of read one by one.
/// It selects exactly what [`fleetscope_model::ClusterSelector::matches`] selects.
#[derive(Debug)]
pub struct PolicyMatcher<'a> {
    selectors: Vec<CompiledSelector<'a>>,
}

/// One cluster selector with a set per long value list.
#[derive(Debug)]
pub struct CompiledSelector<'a> {
    selector: &'a fleetscope_model::ClusterSelector,
    sets: Vec<Option<std::collections::HashSet<&'a str>>>,
}

impl<'a> CompiledSelector<'a> {
    pub fn new(selector: &'a fleetscope_model::ClusterSelector) -> CompiledSelector<'a> {
        use fleetscope_model::Operator;
        let sets = selector
            .match_expressions
            .iter()
            .map(|r| {
                (matches!(r.operator, Operator::In | Operator::NotIn) && r.values.len() > SET_FROM)
                    .then(|| r.values.iter().map(String::as_str).collect())
            })
            .collect();
        CompiledSelector { selector, sets }
    }

    pub fn matches(
        &self,
        labels: &fleetscope_model::Labels,
        group: &fleetscope_model::GroupPath,
    ) -> bool {
        use fleetscope_model::Operator;
        let selector = self.selector;
        selector
            .match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && selector
                .match_expressions
                .iter()
                .zip(&self.sets)
                .all(|(requirement, set)| match set {
                    Some(set) => {
                        let value = labels.get(&requirement.key);
                        let listed = value.is_some_and(|v| set.contains(v.as_str()));
                        match requirement.operator {
                            Operator::In => listed,
                            _ => !listed,
                        }
                    }
                    None => requirement.matches(labels),
                })
            && (selector.groups.is_empty() || selector.groups.iter().any(|g| group.is_within(g)))
    }
}

impl<'a> PolicyMatcher<'a> {
    pub fn new(platform: &'a Platform) -> PolicyMatcher<'a> {
        PolicyMatcher {
            selectors: platform
                .policies
                .iter()
                .map(|p| CompiledSelector::new(&p.clusters))
                .collect(),
        }
    }

    /// The policies (by index, in precedence order) that select `cluster`.
    pub fn matching(&self, platform: &Platform, cluster: &ClusterId) -> Vec<usize> {
        let entry = &platform.clusters[cluster];
        let labels = platform.effective_labels(entry);
        self.selectors
            .iter()
            .enumerate()
            .filter(|(_, s)| s.matches(&labels, &entry.group))
            .map(|(i, _)| i)
            .collect()
    }
}

/// The assignments of one cluster, or the conflicts that prevent them.
pub fn assign_cluster(
    platform: &Platform,
    cluster: &ClusterId,
) -> Result<Vec<Assignment>, Vec<PlatformError>> {
    assign_matched(
        platform,
        &policy_apps(platform),
        &matching_policies(platform, cluster),
        cluster,
    )
}

/// The assignments that the `matched` policies give; `cluster` only names the cluster in errors.
/// Clusters matched by the same policies get the same result.
pub fn assign_matched(
    platform: &Platform,
    policy_apps: &[Vec<AppName>],
    matched: &[usize],
    cluster: &ClusterId,
) -> Result<Vec<Assignment>, Vec<PlatformError>> {
    let mut chosen: BTreeMap<AppName, Assignment> = BTreeMap::new();
    let mut pins: BTreeMap<AppName, (i32, String, Version)> = BTreeMap::new();
    let mut errors = Vec::new();
    for &index in matched {
        let policy = &platform.policies[index];
        for name in &policy_apps[index] {
            let app = &platform.apps[name];
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
    assign_with_matches(platform, &cluster_matches(platform))
}

/// The policies (by index, in precedence order) that select each cluster, in the order of
/// `platform.clusters`.
pub fn cluster_matches(platform: &Platform) -> Vec<Vec<usize>> {
    let matcher = PolicyMatcher::new(platform);
    platform
        .clusters
        .keys()
        .map(|id| matcher.matching(platform, id))
        .collect()
}

/// [`assign`] with the policies that select each cluster already known: `matches` holds, in
/// the order of `platform.clusters`, what [`matching_policies`] gives for each cluster.
///
/// # Panics
/// When `matches` has another length than `platform.clusters` or names a policy that does
/// not exist (the render cache checks both before it calls this).
pub fn assign_with_matches(
    platform: &Platform,
    matches: &[Vec<usize>],
) -> Result<Assigned, Vec<PlatformError>> {
    assert_eq!(
        matches.len(),
        platform.clusters.len(),
        "one match list per cluster"
    );
    let mut errors: BTreeMap<(String, usize, String), (PlatformError, usize)> = BTreeMap::new();
    let apps_of = policy_apps(platform);
    // Clusters matched by the same policies (on the same reconciler) get the same content:
    // assign once per such signature. Distinct signatures may still give equal content; those
    // share a group named by the smallest signature name.
    // Each signature also has its reasons (a reason set): a render group can hold clusters
    // with different reason sets, and one reason set can span render groups.
    let mut by_signature: BTreeMap<(Reconciler, &[usize]), (usize, usize)> = BTreeMap::new();
    let mut contents: Vec<(String, GroupContent)> = Vec::new();
    let mut by_content: BTreeMap<String, usize> = BTreeMap::new();
    let mut reason_names: Vec<String> = Vec::new();
    let mut reason_sets: BTreeMap<String, ReasonSet> = BTreeMap::new();
    let mut cluster_slot: Vec<(ClusterId, (usize, usize))> =
        Vec::with_capacity(platform.clusters.len());
    for ((id, cluster), matched) in platform.clusters.iter().zip(matches) {
        let signature = (cluster.reconciler, matched.as_slice());
        if let Some(&slots) = by_signature.get(&signature) {
            cluster_slot.push((id.clone(), slots));
            continue;
        }
        match assign_matched(platform, &apps_of, signature.1, id) {
            Ok(assignments) => {
                let reasons: ReasonSet = assignments
                    .iter()
                    .map(|a| AppReasons {
                        app: a.app.clone(),
                        reasons: a.reasons.clone(),
                        pinned_by: a.pinned_by.clone(),
                    })
                    .collect();
                let reason_name = reason_set_name(&reasons);
                reason_sets.entry(reason_name.clone()).or_insert(reasons);
                let reason_slot = reason_names.len();
                reason_names.push(reason_name);
                let content = GroupContent {
                    reconciler: cluster.reconciler,
                    assignments,
                };
                let name = content.signature_name();
                let slot = match by_content.get(&content.key()) {
                    Some(&slot) => {
                        if name < contents[slot].0 {
                            contents[slot].0 = name;
                        }
                        slot
                    }
                    None => {
                        by_content.insert(content.key(), contents.len());
                        contents.push((name, content));
                        contents.len() - 1
                    }
                };
                by_signature.insert(signature, (slot, reason_slot));
                cluster_slot.push((id.clone(), (slot, reason_slot)));
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
    if !errors.is_empty() {
        return Err(errors
            .into_values()
            .map(|(mut err, n)| {
                if n > 1 {
                    err.message = format!("{} (and {} more clusters)", err.message, n - 1);
                }
                err
            })
            .collect());
    }
    // The clusters come in id order, so the maps are built in one pass rather than by
    // inserting one at a time.
    let mut assigned = Assigned {
        members: cluster_slot
            .iter()
            .map(|(id, (slot, _))| (id.clone(), contents[*slot].0.clone()))
            .collect(),
        reason_set_of: cluster_slot
            .into_iter()
            .map(|(id, (_, reason_slot))| (id, reason_names[reason_slot].clone()))
            .collect(),
        ..Assigned::default()
    };
    assigned.reason_sets = reason_sets;
    for (name, content) in contents {
        assigned.groups.insert(name, content);
    }
    Ok(assigned)
}
