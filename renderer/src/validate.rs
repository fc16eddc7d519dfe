//! The validated platform: every document checked on its own and against the others (unique
//! names, references that resolve, no dependency cycles, consistent namespaces). Problems are
//! collected, never returned one at a time.

use std::collections::{BTreeMap, BTreeSet};

use fleetscope_model::app::AppSelector;
use fleetscope_model::selector::validate_labels;
use fleetscope_model::{
    AppName, AppSource, ClusterId, ClusterSelector, Environment, GroupPath, Labels, Reconciler,
    ReconcilerKind, Version,
};

use crate::platform::{
    ApplicationDoc, ClusterDoc, Document, GroupDoc, NamespaceDoc, Origin, PlatformDocs,
    PlatformError, PolicyDoc, Values,
};

#[derive(Debug, Clone, PartialEq)]
pub struct ClusterEntry {
    pub id: ClusterId,
    pub group: GroupPath,
    pub environment: Environment,
    pub reconciler: Reconciler,
    pub labels: Labels,
    pub values: BTreeMap<String, String>,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AppEntry {
    pub name: AppName,
    pub version: Version,
    pub source: AppSource,
    pub kind: ReconcilerKind,
    pub namespace: String,
    pub depends_on: Vec<AppName>,
    pub labels: Labels,
    pub values: Values,
    /// How its objects without stamps are recognised (`match`).
    pub match_rules: Vec<fleetscope_model::matching::MatchRule>,
    pub origin: Origin,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceEntry {
    pub name: String,
    pub owners: Vec<String>,
    pub quota: BTreeMap<String, String>,
    pub default_limits: BTreeMap<String, String>,
    pub apps: BTreeSet<AppName>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PolicyEntry {
    pub name: String,
    pub apps: AppSelector,
    pub clusters: ClusterSelector,
    pub version: Option<Version>,
    pub values: Values,
    pub priority: i32,
    pub origin: Origin,
}

/// A platform repo that passed validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Platform {
    pub environments: BTreeSet<Environment>,
    pub group_labels: BTreeMap<GroupPath, Labels>,
    pub clusters: BTreeMap<ClusterId, ClusterEntry>,
    pub apps: BTreeMap<AppName, AppEntry>,
    pub namespaces: BTreeMap<String, NamespaceEntry>,
    /// In precedence order: lowest priority first, ties by name; later policies win.
    pub policies: Vec<PolicyEntry>,
    /// The URL Argo CD clusters pull the output from (`kind: GitOpsRepository`).
    pub gitops_url: Option<String>,
}

impl Platform {
    /// Every app's match rules, in app name order (apps without rules left out): what a render
    /// publishes for the collector.
    pub fn match_rules(&self) -> fleetscope_model::matching::MatchRules {
        fleetscope_model::matching::MatchRules {
            apps: self
                .apps
                .values()
                .filter(|app| !app.match_rules.is_empty())
                .map(|app| fleetscope_model::matching::AppRules {
                    app: app.name.clone(),
                    rules: app.match_rules.clone(),
                })
                .collect(),
        }
    }

    /// The labels a cluster's selectors see: its groups' from the root down, its own, and
    /// `fleetscope.io/environment`, `fleetscope.io/cluster` and `fleetscope.io/reconciler`.
    pub fn effective_labels(&self, cluster: &ClusterEntry) -> Labels {
        let mut labels = Labels::new();
        for prefix in cluster.group.prefixes() {
            if let Some(group) = self.group_labels.get(&prefix) {
                labels.extend(group.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        labels.extend(cluster.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        labels.insert(
            "fleetscope.io/environment".into(),
            cluster.environment.to_string(),
        );
        labels.insert("fleetscope.io/cluster".into(), cluster.id.to_string());
        labels.insert(
            "fleetscope.io/reconciler".into(),
            cluster.reconciler.as_str().into(),
        );
        labels
    }
}

/// One input of [`build_inputs`]: a document as parsed, or a cluster that already passed every
/// check that depends on its own document alone (kept by the render cache from an earlier
/// render of the same file).
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// A document with where it came from, checked in full.
    Document(&'a Origin, &'a Document),
    /// A cluster whose own document passed every check before (its origin names it).
    CheckedCluster(ClusterEntry),
}

/// A cluster waiting for validation, in document order.
enum RawCluster<'a> {
    Document(&'a Origin, &'a ClusterDoc),
    Checked(ClusterEntry),
}

/// The error for a cluster whose environment has no `kind: Environment` document.
fn undefined_environment(origin: &Origin, environment: &str) -> PlatformError {
    origin.error(
        "environment",
        format!("environment {environment:?} is not defined (add a `kind: Environment` document)"),
    )
}

/// Adds a cluster to the platform unless its id is taken: then the error names the first
/// cluster with that id (the message every other kind's duplicates get).
fn add_cluster(platform: &mut Platform, errors: &mut Vec<PlatformError>, entry: ClusterEntry) {
    match platform.clusters.entry(entry.id.clone()) {
        std::collections::btree_map::Entry::Occupied(first) => {
            let first = &first.get().origin;
            errors.push(entry.origin.error(
                "id",
                format!(
                    "cluster {:?} is already defined in {}#{}",
                    entry.id.as_str(),
                    first.file,
                    first.document
                ),
            ));
        }
        std::collections::btree_map::Entry::Vacant(slot) => {
            slot.insert(entry);
        }
    }
}

/// Whether `key` can name a cluster value, which reaches the cluster as a substitution
/// variable: letters, digits and `_`, not starting with a digit.
pub fn is_substitution_variable(key: &str) -> bool {
    !key.is_empty()
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !key.starts_with(|c: char| c.is_ascii_digit())
}

/// Builds and validates the platform from its documents.
pub fn build(docs: &PlatformDocs) -> Result<Platform, Vec<PlatformError>> {
    build_inputs(
        docs.documents
            .iter()
            .map(|(origin, document)| Input::Document(origin, document)),
    )
}

/// Like [`build`], from inputs in file and document order, some of which may be clusters
/// checked before. A checked cluster is one whose own document passed every check (its id,
/// group, environment name, reconciler, labels and values); what depends on the other
/// documents (its environment being defined, its id being unique, an Argo CD cluster needing a
/// GitOps repository) is checked here again, with the same messages, so the result equals
/// [`build`] of the documents the checked clusters came from.
pub fn build_inputs<'a>(
    inputs: impl IntoIterator<Item = Input<'a>>,
) -> Result<Platform, Vec<PlatformError>> {
    let mut checker = Checker::default();
    let deferred = checker.read_inputs(inputs);
    checker.add_clusters(deferred.clusters);
    checker.require_gitops_repository_for_argo_cd();
    checker.add_apps(&deferred.apps);
    checker.check_dependencies();
    checker.add_namespaces(&deferred.namespaces);
    checker.check_app_namespaces();
    checker.add_policies(&deferred.policies);
    checker.finish()
}

/// The documents whose checks need others first (the environments for clusters, the apps for
/// namespaces and policies), in document order.
#[derive(Default)]
struct Deferred<'a> {
    clusters: Vec<RawCluster<'a>>,
    apps: Vec<(&'a Origin, &'a ApplicationDoc)>,
    namespaces: Vec<(&'a Origin, &'a NamespaceDoc)>,
    policies: Vec<(&'a Origin, &'a PolicyDoc)>,
}

/// The platform being built, the problems found so far, and where each name was defined.
#[derive(Default)]
struct Checker {
    platform: Platform,
    errors: Vec<PlatformError>,
    /// Where each (kind, name) was first defined.
    seen: BTreeMap<(&'static str, String), Origin>,
    gitops_declared: bool,
    gitops_origin: Option<Origin>,
}

impl Checker {
    /// Records `kind` `name` as defined at `origin`; returns false, with an error naming the
    /// first definition, when it was defined before.
    fn unique(&mut self, kind: &'static str, name: &str, origin: &Origin, field: &str) -> bool {
        if let Some(first) = self.seen.get(&(kind, name.to_owned())) {
            self.errors.push(origin.error(
                field,
                format!(
                    "{kind} {name:?} is already defined in {}#{}",
                    first.file, first.document
                ),
            ));
            false
        } else {
            self.seen.insert((kind, name.to_owned()), origin.clone());
            true
        }
    }

    /// Checks the documents that need no other (environments, groups, the GitOps repository)
    /// and returns the rest.
    fn read_inputs<'a>(&mut self, inputs: impl IntoIterator<Item = Input<'a>>) -> Deferred<'a> {
        let mut deferred = Deferred::default();
        for input in inputs {
            let (origin, document) = match input {
                Input::Document(origin, document) => (origin, document),
                Input::CheckedCluster(entry) => {
                    deferred.clusters.push(RawCluster::Checked(entry));
                    continue;
                }
            };
            match document {
                Document::Environment(env) => self.add_environment(origin, &env.name),
                Document::Group(group) => self.add_group(origin, group),
                Document::Cluster(cluster) => deferred
                    .clusters
                    .push(RawCluster::Document(origin, cluster)),
                Document::Application(app) => deferred.apps.push((origin, app)),
                Document::Namespace(namespace) => deferred.namespaces.push((origin, namespace)),
                Document::Policy(policy) => deferred.policies.push((origin, policy)),
                Document::GitOpsRepository(repo) => {
                    self.add_gitops_repository(origin, repo.url.as_str())
                }
            }
        }
        deferred
    }

    /// Adds an environment unless its name is invalid or taken.
    fn add_environment(&mut self, origin: &Origin, name: &str) {
        match Environment::parse(name) {
            Ok(parsed) if self.unique("environment", name, origin, "name") => {
                self.platform.environments.insert(parsed);
            }
            Ok(_) => {}
            Err(err) => self.errors.push(origin.error("name", err.to_string())),
        }
    }

    /// Adds a group's labels unless its path is invalid or taken; checks the labels.
    fn add_group(&mut self, origin: &Origin, group: &GroupDoc) {
        match GroupPath::parse(&group.path) {
            Ok(path) => {
                for err in validate_labels(&group.labels) {
                    self.errors.push(origin.error("labels", err.to_string()));
                }
                if self.unique("group", &group.path, origin, "path") {
                    self.platform
                        .group_labels
                        .insert(path, group.labels.clone());
                }
            }
            Err(err) => self.errors.push(origin.error("path", err.to_string())),
        }
    }

    /// Takes the output repository's URL from the first valid `GitOpsRepository` document; a
    /// second one is an error.
    fn add_gitops_repository(&mut self, origin: &Origin, url: &str) {
        self.gitops_declared = true;
        let scheme_ok = ["https://", "http://", "ssh://"]
            .iter()
            .any(|s| url.len() > s.len() && url.starts_with(s))
            || (url.starts_with("git@") && url.contains(':'));
        if !scheme_ok || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            self.errors.push(origin.error(
                "url",
                format!("{url:?} is not a Git URL (https://, http://, ssh:// or git@host:path, no spaces)"),
            ));
        } else if let Some(first) = &self.gitops_origin {
            self.errors.push(origin.error(
                "kind",
                format!(
                    "only one GitOpsRepository document is allowed; the first is {}#{}",
                    first.file, first.document
                ),
            ));
        } else {
            self.gitops_origin = Some(origin.clone());
            self.platform.gitops_url = Some(url.to_owned());
        }
    }

    /// Adds the clusters, in document order, once every environment is known.
    fn add_clusters(&mut self, clusters: Vec<RawCluster<'_>>) {
        for raw in clusters {
            match raw {
                RawCluster::Document(origin, doc) => self.add_cluster_document(origin, doc),
                RawCluster::Checked(entry) => self.add_checked_cluster(entry),
            }
        }
    }

    /// Adds a cluster checked before, once its environment is known to be defined.
    fn add_checked_cluster(&mut self, entry: ClusterEntry) {
        if !self.platform.environments.contains(&entry.environment) {
            self.errors.push(undefined_environment(
                &entry.origin,
                entry.environment.as_str(),
            ));
        } else {
            add_cluster(&mut self.platform, &mut self.errors, entry);
        }
    }

    /// Checks a cluster's document in full and adds the cluster when it passes.
    fn add_cluster_document(&mut self, origin: &Origin, doc: &ClusterDoc) {
        let id = ClusterId::parse(&doc.id).map_err(|err| origin.error("id", err.to_string()));
        let group =
            GroupPath::parse(&doc.group).map_err(|err| origin.error("group", err.to_string()));
        let environment = Environment::parse(&doc.environment)
            .map_err(|err| origin.error("environment", err.to_string()))
            .and_then(|env| {
                if self.platform.environments.contains(&env) {
                    Ok(env)
                } else {
                    Err(undefined_environment(origin, &doc.environment))
                }
            });
        let reconciler = Reconciler::parse(&doc.reconciler).ok_or_else(|| {
            origin.error(
                "reconciler",
                format!("{:?} is not a reconciler (flux or argocd)", doc.reconciler),
            )
        });
        for err in validate_labels(&doc.labels) {
            self.errors.push(origin.error("labels", err.to_string()));
        }
        for key in doc.values.keys() {
            if !is_substitution_variable(key) {
                self.errors.push(origin.error(format!("values.{key}"), format!("{key:?} cannot be a substitution variable (letters, digits and _, not starting with a digit)")));
            }
        }
        match (id, group, environment, reconciler) {
            (Ok(id), Ok(group), Ok(environment), Ok(reconciler)) => {
                let entry = ClusterEntry {
                    id,
                    group,
                    environment,
                    reconciler,
                    labels: doc.labels.clone(),
                    values: doc.values.clone(),
                    origin: origin.clone(),
                };
                add_cluster(&mut self.platform, &mut self.errors, entry);
            }
            (id, group, environment, reconciler) => {
                self.errors.extend(
                    [id.err(), group.err(), environment.err(), reconciler.err()]
                        .into_iter()
                        .flatten(),
                );
            }
        }
    }

    /// Argo CD clusters pull their render group by URL: without a `GitOpsRepository` document,
    /// an error at the first of them.
    fn require_gitops_repository_for_argo_cd(&mut self) {
        if self.gitops_declared {
            return;
        }
        let argo: Vec<&ClusterEntry> = self
            .platform
            .clusters
            .values()
            .filter(|c| c.reconciler == Reconciler::ArgoCd)
            .collect();
        if let Some(first) = argo.first() {
            self.errors.push(first.origin.error(
                "reconciler",
                format!(
                    "{} cluster(s) use Argo CD, which pulls its render group by URL: add a `kind: GitOpsRepository` document with the output repository's url",
                    argo.len()
                ),
            ));
        }
    }

    /// Adds the applications, in document order.
    fn add_apps(&mut self, apps: &[(&Origin, &ApplicationDoc)]) {
        for (origin, doc) in apps {
            self.add_app(origin, doc);
        }
    }

    /// Checks an application's document as the model validates an application, and adds it
    /// unless its name is taken.
    fn add_app(&mut self, origin: &Origin, doc: &ApplicationDoc) {
        let name = AppName::parse(&doc.name).map_err(|err| origin.error("name", err.to_string()));
        let version =
            Version::parse(&doc.version).map_err(|err| origin.error("version", err.to_string()));
        let mut depends_on = Vec::new();
        for (i, dep) in doc.depends_on.iter().enumerate() {
            match AppName::parse(dep) {
                Ok(dep) => depends_on.push(dep),
                Err(err) => self
                    .errors
                    .push(origin.error(format!("dependsOn[{i}]"), err.to_string())),
            }
        }
        let (Ok(name), Ok(version)) = (&name, &version) else {
            self.errors
                .extend([name.err(), version.err()].into_iter().flatten());
            return;
        };
        let model = fleetscope_model::Application {
            name: name.clone(),
            version: version.clone(),
            source: doc.source.clone(),
            kind: doc.reconciler,
            namespace: doc.namespace.clone(),
            depends_on: depends_on.clone(),
            labels: doc.labels.clone(),
        };
        for problem in model.validate() {
            self.errors.push(origin.error("", problem));
        }
        for (index, rule) in doc.match_rules.iter().enumerate() {
            for (field, problem) in rule.problems() {
                let at = if field.is_empty() {
                    format!("match[{index}]")
                } else {
                    format!("match[{index}].{field}")
                };
                self.errors.push(origin.error(at, problem));
            }
        }
        if self.unique("application", name.as_str(), origin, "name") {
            self.platform.apps.insert(
                name.clone(),
                AppEntry {
                    name: name.clone(),
                    version: version.clone(),
                    source: doc.source.clone(),
                    kind: doc.reconciler,
                    namespace: doc.namespace.clone(),
                    depends_on,
                    labels: doc.labels.clone(),
                    values: doc.values.clone(),
                    match_rules: doc.match_rules.clone(),
                    origin: origin.clone(),
                },
            );
        }
    }

    /// Every dependency names a defined application, and no dependencies form a cycle.
    fn check_dependencies(&mut self) {
        for app in self.platform.apps.values() {
            for (i, dep) in app.depends_on.iter().enumerate() {
                if !self.platform.apps.contains_key(dep) {
                    self.errors.push(app.origin.error(
                        format!("dependsOn[{i}]"),
                        format!("application {:?} is not defined", dep.as_str()),
                    ));
                }
            }
        }
        self.errors.extend(dependency_cycles(&self.platform));
    }

    /// Adds the namespaces, in document order, once every application is known.
    fn add_namespaces(&mut self, namespaces: &[(&Origin, &NamespaceDoc)]) {
        for (origin, doc) in namespaces {
            self.add_namespace(origin, doc);
        }
    }

    /// Checks a namespace's document and adds it unless its name is taken.
    fn add_namespace(&mut self, origin: &Origin, doc: &NamespaceDoc) {
        if let Err(err) = fleetscope_model::ids::validate_dns_label("namespace", &doc.name) {
            self.errors.push(origin.error("name", err.to_string()));
            return;
        }
        if doc.owners.is_empty() {
            self.errors
                .push(origin.error("owners", "a namespace needs at least one owner"));
        }
        let apps = self.namespace_apps(origin, doc);
        if self.unique("namespace", &doc.name, origin, "name") {
            self.platform.namespaces.insert(
                doc.name.clone(),
                NamespaceEntry {
                    name: doc.name.clone(),
                    owners: doc.owners.clone(),
                    quota: doc.quota.clone(),
                    default_limits: doc.default_limits.clone(),
                    apps,
                },
            );
        }
    }

    /// The applications a namespace lists that are defined and live in it; an error for each
    /// other.
    fn namespace_apps(&mut self, origin: &Origin, doc: &NamespaceDoc) -> BTreeSet<AppName> {
        let mut apps = BTreeSet::new();
        for (i, app) in doc.apps.iter().enumerate() {
            match AppName::parse(app)
                .ok()
                .and_then(|name| self.platform.apps.get(&name).map(|entry| (name, entry)))
            {
                None => self.errors.push(origin.error(
                    format!("apps[{i}]"),
                    format!("application {app:?} is not defined"),
                )),
                Some((_, entry)) if entry.namespace != doc.name => self.errors.push(origin.error(
                    format!("apps[{i}]"),
                    format!(
                        "application {app:?} lives in namespace {:?}, not {:?}",
                        entry.namespace, doc.name
                    ),
                )),
                Some((name, _)) => {
                    apps.insert(name);
                }
            }
        }
        apps
    }

    /// Every application's namespace has a `kind: Namespace` document.
    fn check_app_namespaces(&mut self) {
        for app in self.platform.apps.values() {
            if !self.platform.namespaces.contains_key(&app.namespace) {
                self.errors.push(app.origin.error(
                    "namespace",
                    format!(
                        "namespace {:?} is not defined (add a `kind: Namespace` document)",
                        app.namespace
                    ),
                ));
            }
        }
    }

    /// Adds the policies, in document order, then puts them in precedence order.
    fn add_policies(&mut self, policies: &[(&Origin, &PolicyDoc)]) {
        for (origin, doc) in policies {
            self.add_policy(origin, doc);
        }
        self.platform
            .policies
            .sort_by(|a, b| (a.priority, &a.name).cmp(&(b.priority, &b.name)));
    }

    /// Checks a policy's document (selectors, the apps it names, its version) and adds it
    /// unless its name is taken.
    fn add_policy(&mut self, origin: &Origin, doc: &PolicyDoc) {
        if doc.name.trim().is_empty() {
            self.errors.push(origin.error("name", "is empty"));
            return;
        }
        for err in doc.clusters.validate() {
            self.errors.push(origin.error("clusters", err.to_string()));
        }
        for requirement in &doc.apps.match_expressions {
            for err in requirement.validate() {
                self.errors
                    .push(origin.error("apps.matchExpressions", err.to_string()));
            }
        }
        for (i, name) in doc.apps.names.iter().enumerate() {
            if !self.platform.apps.contains_key(name) {
                self.errors.push(origin.error(
                    format!("apps.names[{i}]"),
                    format!("application {:?} is not defined", name.as_str()),
                ));
            }
        }
        let version = match doc.version.as_deref().map(Version::parse).transpose() {
            Ok(version) => version,
            Err(err) => {
                self.errors.push(origin.error("version", err.to_string()));
                None
            }
        };
        if self.unique("policy", &doc.name, origin, "name") {
            self.platform.policies.push(PolicyEntry {
                name: doc.name.clone(),
                apps: doc.apps.clone(),
                clusters: doc.clusters.clone(),
                version,
                values: doc.values.clone(),
                priority: doc.priority,
                origin: origin.clone(),
            });
        }
    }

    /// The platform, or every problem found, sorted, each once.
    fn finish(mut self) -> Result<Platform, Vec<PlatformError>> {
        if self.errors.is_empty() {
            Ok(self.platform)
        } else {
            self.errors.sort();
            self.errors.dedup();
            Err(self.errors)
        }
    }
}

/// Every dependency cycle, reported once at the app that sorts first in it.
fn dependency_cycles(platform: &Platform) -> Vec<PlatformError> {
    let mut errors = Vec::new();
    let mut reported: BTreeSet<Vec<AppName>> = BTreeSet::new();
    for start in platform.apps.keys() {
        // Depth-first search for a path back to `start`.
        let mut stack: Vec<(AppName, Vec<AppName>)> = vec![(start.clone(), vec![start.clone()])];
        let mut visited = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            let Some(entry) = platform.apps.get(&node) else {
                continue;
            };
            for dep in &entry.depends_on {
                if dep == start {
                    let mut cycle = path.clone();
                    let mut key = cycle.clone();
                    key.sort();
                    if reported.insert(key) {
                        cycle.push(start.clone());
                        let names: Vec<&str> = cycle.iter().map(AppName::as_str).collect();
                        errors.push(platform.apps[start].origin.error(
                            "dependsOn",
                            format!("dependency cycle: {}", names.join(" → ")),
                        ));
                    }
                } else if visited.insert(dep.clone()) {
                    let mut next = path.clone();
                    next.push(dep.clone());
                    stack.push((dep.clone(), next));
                }
            }
        }
    }
    errors
}
