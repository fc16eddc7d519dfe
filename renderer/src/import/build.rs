//! From what runs and what the files say to the documents of a platform repo: every cluster
//! with its group, environment, reconciler and labels; every app found, with match rules for
//! its objects that carry no stamps; and policies that put each app where it runs, at the
//! version it runs there.

use std::collections::{BTreeMap, BTreeSet};

use fleetscope_model::app::AppSelector;
use fleetscope_model::matching::MatchRule;
use fleetscope_model::selector::{ClusterSelector, LabelRequirement};
use fleetscope_model::{
    AppName, AppSource, GroupPath, Labels, ObjectKind, Operator, ReconcilerKind,
};

use super::facts::{FleetFacts, RunningObject};
use super::files::{DeclaredApp, InventoryRow, Manifests};
use crate::platform::{
    ApplicationDoc, ClusterDoc, Document, EnvironmentDoc, GitOpsRepositoryDoc, NamespaceDoc,
    PolicyDoc,
};

/// The label every cluster carries with its own id, which the policies select by.
pub const CLUSTER_LABEL: &str = "fleetscope.io/cluster";
/// Where clusters go that nothing places.
pub const UNASSIGNED: &str = "unassigned";
/// The environment of clusters that nothing names one for.
pub const UNKNOWN_ENVIRONMENT: &str = "unknown";
/// The version of an app none of whose objects shows one and no manifest names one.
pub const UNKNOWN_VERSION: &str = "unknown";
/// The GitOps repository URL written when Argo CD clusters need one and none was given.
pub const PLACEHOLDER_GITOPS_URL: &str = "https://git.example.invalid/fleet-gitops.git";

/// How to write the repo.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Cluster labels whose values, in this order, make a cluster's group path.
    pub group_labels: Vec<String>,
    pub gitops_url: Option<String>,
    /// The owners of every namespace written.
    pub owners: Vec<String>,
}

/// One cluster as it will be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPlan {
    pub id: String,
    pub group: String,
    pub environment: String,
    pub reconciler: String,
    pub labels: Labels,
}

/// One app as it will be written.
#[derive(Debug, Clone, Default)]
pub struct AppPlan {
    pub name: String,
    /// Cluster → the version it runs (`None`: its object shows none).
    pub running: BTreeMap<String, Option<String>>,
    /// Objects of the app that carry no stamps and were taken by no rule: a rule each.
    pub identities: BTreeSet<(ObjectKind, String, String)>,
    /// The rules in force for it, kept when some of its objects were matched by them.
    pub rules_in_force: Vec<MatchRule>,
    pub declared: Option<DeclaredApp>,
    kinds: BTreeMap<ObjectKind, usize>,
    namespaces: BTreeMap<String, usize>,
}

impl AppPlan {
    /// The version most clusters run (ties: the one that sorts last), else the manifest's.
    pub fn default_version(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for version in self.running.values().flatten() {
            *counts.entry(version).or_default() += 1;
        }
        counts
            .into_iter()
            .max_by_key(|(version, n)| (*n, *version))
            .map(|(version, _)| version.to_owned())
            .or_else(|| self.declared.as_ref().and_then(|d| d.version.clone()))
            .unwrap_or_else(|| UNKNOWN_VERSION.to_owned())
    }

    /// Whether its source is known (from a manifest) rather than a placeholder.
    pub fn has_source(&self) -> bool {
        self.declared.is_some()
    }
}

/// What the import found, before it is written.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub clusters: Vec<ClusterPlan>,
    pub apps: BTreeMap<String, AppPlan>,
}

/// Lowercase, every run of characters outside `[a-z0-9]` made one `-`, cut to `max`.
pub fn dns_label(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.truncate(max);
    out.trim_end_matches('-').to_owned()
}

fn group_from_labels(labels: &Labels, keys: &[String]) -> Option<String> {
    if keys.is_empty() {
        return None;
    }
    let segments: Option<Vec<String>> = keys
        .iter()
        .map(|key| {
            labels
                .get(key)
                .map(|v| dns_label(v, 63))
                .filter(|s| !s.is_empty())
        })
        .collect();
    let path = segments?.join("/");
    GroupPath::parse(&path).ok().map(|_| path)
}

/// Every cluster that reports, is in the inventory or in the CSV, placed by the CSV first,
/// then by the group labels, then by the inventory.
pub fn plan_clusters(
    facts: &FleetFacts,
    inventory: &[InventoryRow],
    options: &Options,
) -> Vec<ClusterPlan> {
    let csv: BTreeMap<&str, &InventoryRow> = inventory
        .iter()
        .map(|row| (row.cluster.as_str(), row))
        .collect();
    let mut argo: BTreeSet<&str> = BTreeSet::new();
    for object in &facts.objects {
        if object.kind == ObjectKind::Application {
            argo.insert(&object.cluster);
        }
    }
    let ids: BTreeSet<&str> = facts
        .clusters
        .keys()
        .map(String::as_str)
        .chain(csv.keys().copied())
        .collect();
    ids.into_iter()
        .map(|id| {
            let known = facts.clusters.get(id).cloned().flatten();
            let row = csv.get(id);
            let mut labels = known.as_ref().map(|k| k.labels.clone()).unwrap_or_default();
            if let Some(row) = row {
                labels.extend(row.labels.clone());
            }
            let known_group = known
                .as_ref()
                .map(|k| k.group.clone())
                .filter(|g| GroupPath::parse(g).is_ok());
            let group = row
                .and_then(|r| r.group.clone())
                .or_else(|| group_from_labels(&labels, &options.group_labels))
                .or(known_group)
                .unwrap_or_else(|| UNASSIGNED.to_owned());
            let environment = row
                .and_then(|r| r.environment.clone())
                .or_else(|| {
                    known.as_ref().map(|k| k.environment.clone()).filter(|e| {
                        fleetscope_model::ids::validate_dns_label("environment", e).is_ok()
                    })
                })
                .unwrap_or_else(|| UNKNOWN_ENVIRONMENT.to_owned());
            let reconciler = row
                .and_then(|r| r.reconciler.clone())
                .or_else(|| {
                    known
                        .as_ref()
                        .map(|k| k.reconciler.clone())
                        .filter(|r| fleetscope_model::Reconciler::parse(r).is_some())
                })
                .unwrap_or_else(|| if argo.contains(id) { "argocd" } else { "flux" }.to_owned());
            ClusterPlan {
                id: id.to_owned(),
                group,
                environment,
                reconciler,
                labels,
            }
        })
        .collect()
}

type Identity = (ObjectKind, String, String);

fn identity(object: &RunningObject) -> Identity {
    (object.kind, object.namespace.clone(), object.name.clone())
}

/// The app name each object that no rule took is proposed under: the manifest's name for the
/// object, else its own name; names that two objects of one cluster would share get the
/// namespace (and then the kind) added.
fn proposed_names(
    objects: &[RunningObject],
    declared: &BTreeMap<Identity, &DeclaredApp>,
) -> BTreeMap<Identity, String> {
    let mut by_name: BTreeMap<String, BTreeSet<Identity>> = BTreeMap::new();
    let mut per_cluster: BTreeMap<(&str, String), BTreeSet<Identity>> = BTreeMap::new();
    let base = |id: &Identity| -> String {
        let name = declared.get(id).map_or(id.2.as_str(), |d| d.name.as_str());
        dns_label(name, 63)
    };
    for object in objects.iter().filter(|o| o.app.is_none()) {
        let id = identity(object);
        let name = base(&id);
        by_name.entry(name.clone()).or_default().insert(id.clone());
        per_cluster
            .entry((&object.cluster, name))
            .or_default()
            .insert(id);
    }
    for app in declared.values() {
        let id = (app.kind, app.namespace.clone(), app.name.clone());
        by_name.entry(base(&id)).or_default().insert(id);
    }
    let clashing: BTreeSet<&String> = per_cluster
        .iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|((_, name), _)| name)
        .collect();
    let mut names = BTreeMap::new();
    for (name, ids) in &by_name {
        for id in ids {
            let proposed = if clashing.contains(name) {
                let with_namespace = dns_label(&format!("{name}-{}", id.1), 63);
                let clashes = ids.iter().filter(|other| other.1 == id.1).count() > 1;
                if clashes {
                    dns_label(&format!("{name}-{}-{}", id.1, id.0.as_str()), 63)
                } else {
                    with_namespace
                }
            } else {
                name.clone()
            };
            names.insert(id.clone(), proposed);
        }
    }
    names
}

/// Every app found in the fleet and in the manifests.
pub fn plan_apps(facts: &FleetFacts, manifests: &Manifests) -> BTreeMap<String, AppPlan> {
    let declared: BTreeMap<Identity, &DeclaredApp> = manifests
        .apps
        .iter()
        .map(|d| ((d.kind, d.namespace.clone(), d.name.clone()), d))
        .collect();
    let names = proposed_names(&facts.objects, &declared);
    let mut apps: BTreeMap<String, AppPlan> = BTreeMap::new();
    for (id, name) in &names {
        if let Some(d) = declared.get(id) {
            let app = apps.entry(name.clone()).or_default();
            app.declared.get_or_insert_with(|| (*d).clone());
        }
    }
    for object in &facts.objects {
        let id = identity(object);
        let name = match &object.app {
            Some(app) => app.clone(),
            None => names[&id].clone(),
        };
        let app = apps.entry(name.clone()).or_default();
        match &object.app {
            None => {
                app.identities.insert(id.clone());
            }
            Some(_) if !object.stamped && app.rules_in_force.is_empty() => {
                app.rules_in_force = facts.rules.get(&name).cloned().unwrap_or_default();
            }
            Some(_) => {}
        }
        if app.declared.is_none() {
            if let Some(d) = declared.get(&id) {
                app.declared = Some((*d).clone());
            }
        }
        // One object per app and cluster: the first one read stays.
        app.running
            .entry(object.cluster.clone())
            .or_insert_with(|| object.version.clone());
        *app.kinds.entry(object.kind).or_default() += 1;
        *app.namespaces.entry(object.namespace.clone()).or_default() += 1;
    }
    for (name, app) in apps.iter_mut() {
        app.name = name.clone();
    }
    apps
}

/// The key counted most often (ties: the first).
fn most<K: Clone + Ord>(counts: &BTreeMap<K, usize>) -> Option<K> {
    let top = counts.values().copied().max()?;
    counts
        .iter()
        .find(|(_, n)| **n == top)
        .map(|(k, _)| k.clone())
}

/// The app's document: the manifest's source, namespace and kind, or placeholders from what
/// its objects are.
fn application_doc(app: &AppPlan) -> ApplicationDoc {
    let (source, reconciler, namespace) = match &app.declared {
        Some(d) => (d.source.clone(), d.reconciler, d.app_namespace.clone()),
        None => {
            let namespace = most(&app.namespaces).unwrap_or_else(|| "default".to_owned());
            match most(&app.kinds) {
                Some(ObjectKind::HelmRelease) => (
                    AppSource::Helm {
                        repository: format!("https://charts.example.invalid/{}", app.name),
                        chart: app.name.clone(),
                    },
                    ReconcilerKind::FluxHelmRelease,
                    namespace,
                ),
                kind => (
                    AppSource::Git {
                        url: format!("https://git.example.invalid/{}.git", app.name),
                        path: "./".into(),
                        reference: "main".into(),
                    },
                    if kind == Some(ObjectKind::Application) {
                        ReconcilerKind::ArgoApplication
                    } else {
                        ReconcilerKind::FluxKustomization
                    },
                    namespace,
                ),
            }
        }
    };
    let mut match_rules = app.rules_in_force.clone();
    for (kind, namespace, name) in &app.identities {
        let rule = MatchRule {
            kind: Some(*kind),
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            ..MatchRule::default()
        };
        if !match_rules.contains(&rule) {
            match_rules.push(rule);
        }
    }
    ApplicationDoc {
        name: app.name.clone(),
        version: app.default_version(),
        source,
        reconciler,
        namespace,
        depends_on: vec![],
        labels: Labels::new(),
        values: Default::default(),
        match_rules,
    }
}

fn clusters_in(ids: BTreeSet<&str>, all: usize) -> ClusterSelector {
    if ids.len() == all {
        return ClusterSelector::default();
    }
    ClusterSelector {
        match_expressions: vec![LabelRequirement {
            key: CLUSTER_LABEL.into(),
            operator: Operator::In,
            values: ids.into_iter().map(str::to_owned).collect(),
        }],
        ..ClusterSelector::default()
    }
}

/// The policies that put the app on the clusters that run it: one at its default version,
/// and one pin per other version, on the clusters that run that one.
fn policies(app: &AppPlan, clusters: usize) -> Vec<PolicyDoc> {
    if app.running.is_empty() {
        return vec![];
    }
    let default = app.default_version();
    let selector = |ids: BTreeSet<&str>| clusters_in(ids, clusters);
    let apps = AppSelector {
        names: AppName::parse(&app.name).into_iter().collect(),
        ..AppSelector::default()
    };
    let mut docs = vec![PolicyDoc {
        name: format!("import-{}", app.name),
        apps: apps.clone(),
        clusters: selector(app.running.keys().map(String::as_str).collect()),
        version: None,
        values: Default::default(),
        priority: 0,
    }];
    let mut others: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (cluster, version) in &app.running {
        if let Some(version) = version.as_deref().filter(|v| *v != default) {
            others.entry(version).or_default().insert(cluster);
        }
    }
    for (version, ids) in others {
        docs.push(PolicyDoc {
            name: format!("import-{}-at-{version}", app.name),
            apps: apps.clone(),
            clusters: selector(ids),
            version: Some(version.to_owned()),
            values: Default::default(),
            priority: 1,
        });
    }
    docs
}

/// The documents of the repo, by file.
pub fn documents(plan: &Plan, options: &Options) -> BTreeMap<String, Vec<Document>> {
    let mut files: BTreeMap<String, Vec<Document>> = BTreeMap::new();
    let environments: BTreeSet<&str> = plan
        .clusters
        .iter()
        .map(|c| c.environment.as_str())
        .collect();
    files.insert(
        "environments.yaml".into(),
        environments
            .into_iter()
            .map(|name| {
                Document::Environment(EnvironmentDoc {
                    name: name.to_owned(),
                    description: String::new(),
                })
            })
            .collect(),
    );
    for cluster in &plan.clusters {
        let top = cluster.group.split('/').next().unwrap_or(UNASSIGNED);
        files
            .entry(format!("clusters/{top}.yaml"))
            .or_default()
            .push(Document::Cluster(ClusterDoc {
                id: cluster.id.clone(),
                group: cluster.group.clone(),
                environment: cluster.environment.clone(),
                reconciler: cluster.reconciler.clone(),
                labels: cluster.labels.clone(),
                values: BTreeMap::new(),
            }));
    }
    if plan.clusters.iter().any(|c| c.reconciler == "argocd") {
        files.insert(
            "gitops.yaml".into(),
            vec![Document::GitOpsRepository(GitOpsRepositoryDoc {
                url: options
                    .gitops_url
                    .clone()
                    .unwrap_or_else(|| PLACEHOLDER_GITOPS_URL.to_owned()),
            })],
        );
    }
    let mut namespaces: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for app in plan.apps.values() {
        let doc = application_doc(app);
        namespaces
            .entry(doc.namespace.clone())
            .or_default()
            .push(doc.name.clone());
        let mut docs = vec![Document::Application(doc)];
        docs.extend(
            policies(app, plan.clusters.len())
                .into_iter()
                .map(Document::Policy),
        );
        files.insert(format!("apps/{}.yaml", app.name), docs);
    }
    files.insert(
        "namespaces.yaml".into(),
        namespaces
            .into_iter()
            .map(|(name, apps)| {
                Document::Namespace(NamespaceDoc {
                    name,
                    owners: options.owners.clone(),
                    quota: BTreeMap::new(),
                    default_limits: BTreeMap::new(),
                    apps,
                })
            })
            .collect(),
    );
    files
}
