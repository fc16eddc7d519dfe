//! The GitOps output: per render group, the reconciler object of every app (stamped with app,
//! version and content hash), the namespaces as a service, and the sources; per cluster, one
//! small entry file pointing at its render group. Files are a pure function of the assignment:
//! same input, same bytes.
//!
//! ```text
//! render-groups/<rg>/kustomization.yaml   what Flux or Argo CD applies for the group
//! render-groups/<rg>/namespaces.yaml      Namespace, ResourceQuota, LimitRange, RoleBinding
//! render-groups/<rg>/sources.yaml         Flux GitRepository / HelmRepository / OCIRepository
//! render-groups/<rg>/apps/<app>.yaml      Kustomization, HelmRelease or Application
//! render-groups/<rg>/.fleetscope-render   what the folder was rendered from (not applied)
//! clusters/<cluster>/entry.yaml           the cluster's entry: its values and its render group
//! clusters/.fleetscope-render             what the entries were rendered from (not applied)
//! ```

use std::collections::BTreeMap;

use fleetscope_model::stamps::{
    ANNOTATION_CONTENT_HASH, ANNOTATION_RENDER_GROUP, ANNOTATION_VERSION, CONTENT_HASH_PREFIX,
    LABEL_APP, LABEL_MANAGED_BY, MANAGED_BY_VALUE,
};
use fleetscope_model::{AppSource, Reconciler, ReconcilerKind};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::assign::{Assigned, Assignment, GroupContent};
use crate::validate::Platform;

/// The ConfigMap each cluster's entry creates with its own values, for Flux substitution.
pub const CLUSTER_VALUES_CONFIGMAP: &str = "fleetscope-cluster-values";
/// The GitRepository the Flux entry files point at: the output repo, created at bootstrap.
pub const OUTPUT_SOURCE: &str = "fleetscope";
/// The file in each render group folder recording what the folder was rendered from.
pub const RENDER_RECORD: &str = ".fleetscope-render";

/// Rendered files, path → content.
pub type Files = BTreeMap<String, String>;

/// (render group, app) → content hash of the app's object.
pub type ContentHashes = BTreeMap<(String, String), String>;

fn yaml(documents: &[Value]) -> String {
    documents
        .iter()
        .map(|d| serde_yaml_ng::to_string(d).expect("json values serialize"))
        .collect::<Vec<_>>()
        .join("---\n")
}

fn short_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn source_name(source: &AppSource) -> String {
    match source {
        AppSource::Git { url, reference, .. } => {
            format!("git-{}", short_hash(&format!("{url}@{reference}")))
        }
        AppSource::Helm { repository, .. } => format!("helm-{}", short_hash(repository)),
        AppSource::Oci { url } => format!("oci-{}", short_hash(url)),
    }
}

/// SHA-256 of an object's JSON (keys sorted, no spaces), as `sha256:<64 hex>`. An app's
/// content hash is this of its [`canonical_object`].
pub fn content_hash(object: &Value) -> String {
    let digest = Sha256::digest(serde_json::to_vec(object).expect("json serializes"));
    format!(
        "{CONTENT_HASH_PREFIX}{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// What an app's content hash is taken of: its object as rendered, without the two stamps that
/// are not content: the render group annotation (which render group folder carries the object,
/// not what it deploys) and the content hash annotation itself. So an app keeps its hash when
/// its cluster moves to another render group with the same content for it.
pub fn canonical_object(object: &Value) -> Value {
    let mut canonical = object.clone();
    if let Some(annotations) = canonical["metadata"]["annotations"].as_object_mut() {
        annotations.remove(ANNOTATION_RENDER_GROUP);
        annotations.remove(ANNOTATION_CONTENT_HASH);
    }
    canonical
}

fn stamp(mut object: Value, assignment: &Assignment, render_group: &str) -> (Value, String) {
    object["metadata"]["labels"] =
        json!({ LABEL_APP: assignment.app.as_str(), LABEL_MANAGED_BY: MANAGED_BY_VALUE });
    object["metadata"]["annotations"] = json!({ ANNOTATION_VERSION: assignment.version.as_str() });
    let hash = content_hash(&canonical_object(&object));
    object["metadata"]["annotations"][ANNOTATION_RENDER_GROUP] = json!(render_group);
    object["metadata"]["annotations"][ANNOTATION_CONTENT_HASH] = json!(hash);
    (object, hash)
}

/// The reconciler object for one app in one render group, and its content hash.
pub fn app_object(
    platform: &Platform,
    content: &GroupContent,
    assignment: &Assignment,
    render_group: &str,
) -> (Value, String) {
    let app = &platform.apps[&assignment.app];
    let depends_on: Vec<Value> = app
        .depends_on
        .iter()
        .filter(|dep| content.assignments.iter().any(|a| &a.app == *dep))
        .map(|dep| json!({ "name": dep.as_str() }))
        .collect();
    let name = assignment.app.as_str();
    let object = match (content.reconciler, app.kind, &app.source) {
        (Reconciler::ArgoCd, _, source) => {
            let source = match source {
                AppSource::Git {
                    url,
                    path,
                    reference,
                } => json!({ "repoURL": url, "path": path, "targetRevision": reference }),
                AppSource::Helm { repository, chart } => json!({
                    "repoURL": repository, "chart": chart, "targetRevision": assignment.version.as_str(),
                    "helm": { "valuesObject": Value::Object(assignment.values.clone()) },
                }),
                AppSource::Oci { url } => {
                    json!({ "repoURL": url, "path": ".", "targetRevision": assignment.version.as_str() })
                }
            };
            json!({
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Application",
                "metadata": { "name": name, "namespace": "argocd" },
                "spec": {
                    "project": "default",
                    "destination": { "server": "https://kubernetes.default.svc", "namespace": app.namespace },
                    "source": source,
                    "syncPolicy": { "automated": { "prune": true, "selfHeal": true } },
                },
            })
        }
        (Reconciler::Flux, ReconcilerKind::FluxHelmRelease, AppSource::Helm { chart, .. }) => {
            json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2",
                "kind": "HelmRelease",
                "metadata": { "name": name, "namespace": "flux-system" },
                "spec": {
                    "interval": "10m",
                    "releaseName": name,
                    "targetNamespace": app.namespace,
                    "chart": { "spec": { "chart": chart, "version": assignment.version.as_str(),
                                          "sourceRef": { "kind": "HelmRepository", "name": source_name(&app.source) } } },
                    "dependsOn": depends_on,
                    "values": Value::Object(assignment.values.clone()),
                },
            })
        }
        (Reconciler::Flux, _, source) => {
            let (kind, path) = match source {
                AppSource::Git { path, .. } => ("GitRepository", path.clone()),
                AppSource::Oci { .. } => ("OCIRepository", "./".to_owned()),
                AppSource::Helm { .. } => ("HelmRepository", "./".to_owned()),
            };
            let substitute: BTreeMap<String, String> = assignment
                .values
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| v.to_string()),
                    )
                })
                .collect();
            json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": { "name": name, "namespace": "flux-system" },
                "spec": {
                    "interval": "10m",
                    "path": path,
                    "prune": true,
                    "sourceRef": { "kind": kind, "name": source_name(source) },
                    "targetNamespace": app.namespace,
                    "dependsOn": depends_on,
                    "postBuild": {
                        "substitute": substitute,
                        "substituteFrom": [{ "kind": "ConfigMap", "name": CLUSTER_VALUES_CONFIGMAP, "optional": true }],
                    },
                },
            })
        }
    };
    stamp(object, assignment, render_group)
}

fn namespace_objects(platform: &Platform, namespace: &str) -> Vec<Value> {
    let entry = &platform.namespaces[namespace];
    let labels = json!({ LABEL_MANAGED_BY: MANAGED_BY_VALUE });
    let mut objects = vec![
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace, "labels": labels } }),
    ];
    if !entry.quota.is_empty() {
        objects.push(json!({ "apiVersion": "v1", "kind": "ResourceQuota", "metadata": { "name": "fleetscope-quota", "namespace": namespace, "labels": labels }, "spec": { "hard": entry.quota } }));
    }
    if !entry.default_limits.is_empty() {
        objects.push(json!({
            "apiVersion": "v1", "kind": "LimitRange", "metadata": { "name": "fleetscope-limits", "namespace": namespace, "labels": labels },
            "spec": { "limits": [{ "type": "Container", "default": entry.default_limits }] },
        }));
    }
    let subjects: Vec<Value> = entry.owners.iter().map(|owner| json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": owner })).collect();
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": { "name": "fleetscope-owners", "namespace": namespace, "labels": labels },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin" },
        "subjects": subjects,
    }));
    objects
}

fn source_object(source: &AppSource) -> Value {
    let name = source_name(source);
    match source {
        AppSource::Git { url, reference, .. } => json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository", "metadata": { "name": name, "namespace": "flux-system" },
            "spec": { "interval": "5m", "url": url, "ref": { "branch": reference } },
        }),
        AppSource::Helm { repository, .. } => json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository", "metadata": { "name": name, "namespace": "flux-system" },
            "spec": { "interval": "30m", "url": repository },
        }),
        AppSource::Oci { url } => json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "metadata": { "name": name, "namespace": "flux-system" },
            "spec": { "interval": "10m", "url": url, "ref": { "tag": "latest" } },
        }),
    }
}

/// A digest of everything a render group's files are made of: the renderer's output format,
/// the group's name and content (apps, versions, values), and of each app its source, kind,
/// namespace and dependencies, and of each namespace its quota, limits and owners. Equal
/// digests mean equal files.
pub fn group_inputs_digest(platform: &Platform, name: &str, content: &GroupContent) -> String {
    let mut hasher = Sha256::new();
    hasher.update(crate::OUTPUT_FORMAT.as_bytes());
    hasher.update([0]);
    hasher.update(name.as_bytes());
    hasher.update([0]);
    hasher.update(content.key().as_bytes());
    let mut namespaces = std::collections::BTreeSet::new();
    for a in &content.assignments {
        let app = &platform.apps[&a.app];
        let deps: Vec<&str> = app.depends_on.iter().map(|d| d.as_str()).collect();
        let part = json!([a.app.as_str(), app.source, app.kind, app.namespace, deps]);
        hasher.update([0]);
        hasher.update(part.to_string().as_bytes());
        namespaces.insert(app.namespace.as_str());
    }
    for namespace in namespaces {
        let ns = &platform.namespaces[namespace];
        let part = json!([ns.name, ns.owners, ns.quota, ns.default_limits]);
        hasher.update([0]);
        hasher.update(part.to_string().as_bytes());
    }
    sha256_text(hasher)
}

fn sha256_text(hasher: Sha256) -> String {
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// What a render group folder was rendered from, as recorded in its [`RENDER_RECORD`] file:
/// the inputs' digest, the Git blob id of every other file of the folder, and each app's
/// content hash. A later render whose inputs digest is equal keeps the folder after checking
/// that its files are still exactly these (a folder edited by hand is rendered again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderRecord {
    pub inputs: String,
    /// Path inside the folder → Git blob id (hex).
    pub files: BTreeMap<String, String>,
    /// App → content hash.
    pub hashes: BTreeMap<String, String>,
}

impl RenderRecord {
    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "# Written by the Fleetscope renderer and never applied: what this folder was rendered from.\n",
        );
        out.push_str(&format!("inputs {}\n", self.inputs));
        for (path, blob) in &self.files {
            out.push_str(&format!("file {path} {blob}\n"));
        }
        for (app, hash) in &self.hashes {
            out.push_str(&format!("hash {app} {hash}\n"));
        }
        out
    }

    /// Reads a record; `None` for anything malformed (the folder is then rendered again).
    pub fn parse(text: &str) -> Option<RenderRecord> {
        let mut record = RenderRecord::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let mut words = line.split(' ');
            match (words.next()?, words.next()?, words.next(), words.next()) {
                ("inputs", digest, None, None) => record.inputs = digest.to_owned(),
                ("file", path, Some(blob), None) => {
                    record.files.insert(path.to_owned(), blob.to_owned());
                }
                ("hash", app, Some(hash), None) => {
                    record.hashes.insert(app.to_owned(), hash.to_owned());
                }
                _ => return None,
            }
        }
        (!record.inputs.is_empty()).then_some(record)
    }
}

/// The files of one render group, and each app's content hash.
pub fn render_group_files(
    platform: &Platform,
    name: &str,
    content: &GroupContent,
) -> (Files, BTreeMap<String, String>) {
    render_group_files_reusing(platform, name, content, &ReusedApps::new())
}

/// App files a render group takes as they are from its previous render, because their
/// [`app_inputs_digest`] did not change: app → (the file's text, the app's content hash).
pub type ReusedApps = BTreeMap<String, (String, String)>;

/// A digest of everything one app's file in a render group is made of: the output format, the
/// render group's name and reconciler, the app's version and values there, its source, kind
/// and namespace, and which of its dependencies the group holds (see [`app_object`]). Equal
/// digests mean equal files and equal content hashes.
pub fn app_inputs_digest(
    platform: &Platform,
    content: &GroupContent,
    assignment: &Assignment,
    render_group: &str,
) -> String {
    let app = &platform.apps[&assignment.app];
    let present: Vec<&str> = app
        .depends_on
        .iter()
        .filter(|dep| content.assignments.iter().any(|a| &a.app == *dep))
        .map(|dep| dep.as_str())
        .collect();
    let part = json!([
        render_group,
        content.reconciler.as_str(),
        assignment.app.as_str(),
        assignment.version.as_str(),
        assignment.values,
        app.source,
        app.kind,
        app.namespace,
        present
    ]);
    let mut hasher = Sha256::new();
    hasher.update(crate::OUTPUT_FORMAT.as_bytes());
    hasher.update([0]);
    hasher.update(part.to_string().as_bytes());
    sha256_text(hasher)
}

/// [`render_group_files`], taking the files of the apps in `reused` as they are.
pub fn render_group_files_reusing(
    platform: &Platform,
    name: &str,
    content: &GroupContent,
    reused: &ReusedApps,
) -> (Files, BTreeMap<String, String>) {
    let mut files = Files::new();
    let mut hashes = BTreeMap::new();
    let dir = format!("render-groups/{name}");
    let mut resources = Vec::new();
    let namespaces: std::collections::BTreeSet<&str> = content
        .assignments
        .iter()
        .map(|a| platform.apps[&a.app].namespace.as_str())
        .collect();
    if !namespaces.is_empty() {
        let objects: Vec<Value> = namespaces
            .iter()
            .flat_map(|ns| namespace_objects(platform, ns))
            .collect();
        files.insert(format!("{dir}/namespaces.yaml"), yaml(&objects));
        resources.push("namespaces.yaml".to_owned());
    }
    if content.reconciler == Reconciler::Flux {
        let mut sources: BTreeMap<String, Value> = BTreeMap::new();
        for a in &content.assignments {
            let source = &platform.apps[&a.app].source;
            sources
                .entry(source_name(source))
                .or_insert_with(|| source_object(source));
        }
        if !sources.is_empty() {
            files.insert(
                format!("{dir}/sources.yaml"),
                yaml(&sources.into_values().collect::<Vec<_>>()),
            );
            resources.push("sources.yaml".to_owned());
        }
    }
    for assignment in &content.assignments {
        let (text, hash) = match reused.get(assignment.app.as_str()) {
            Some((text, hash)) => {
                if cfg!(debug_assertions) {
                    // Tests run with debug assertions: every reused file is what rendering
                    // it again gives.
                    let (object, fresh) = app_object(platform, content, assignment, name);
                    assert_eq!(
                        (&yaml(&[object]), &fresh),
                        (text, hash),
                        "{name}/{}",
                        assignment.app
                    );
                }
                (text.clone(), hash.clone())
            }
            None => {
                let (object, hash) = app_object(platform, content, assignment, name);
                (yaml(&[object]), hash)
            }
        };
        files.insert(format!("{dir}/apps/{}.yaml", assignment.app), text);
        resources.push(format!("apps/{}.yaml", assignment.app));
        hashes.insert(assignment.app.to_string(), hash);
    }
    files.insert(
        format!("{dir}/kustomization.yaml"),
        yaml(&[json!({ "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": resources })]),
    );
    let record = RenderRecord {
        inputs: group_inputs_digest(platform, name, content),
        files: files
            .iter()
            .map(|(path, text)| {
                let blob = git2::Oid::hash_object(git2::ObjectType::Blob, text.as_bytes())
                    .expect("hashing in memory does not fail");
                (path[dir.len() + 1..].to_owned(), blob.to_string())
            })
            .collect(),
        hashes: hashes.clone(),
    };
    files.insert(format!("{dir}/{RENDER_RECORD}"), record.to_text());
    (files, hashes)
}

/// A YAML scalar: JSON's quoted string is valid YAML and escapes everything that needs it.
fn scalar(text: &str) -> String {
    serde_json::to_string(text).expect("strings serialize")
}

/// One cluster's entry file: its values, and the object that applies its render group. Written
/// from a template (one per cluster, tens of thousands per render), with every value quoted.
pub fn cluster_entry(
    platform: &Platform,
    cluster: &fleetscope_model::ClusterId,
    render_group: &str,
) -> String {
    let entry = &platform.clusters[cluster];
    let mut values: BTreeMap<String, String> = entry.values.clone();
    values.insert("CLUSTER_ID".into(), cluster.to_string());
    values.insert("CLUSTER_GROUP".into(), entry.group.to_string());
    values.insert("CLUSTER_ENVIRONMENT".into(), entry.environment.to_string());
    let path = scalar(&format!("./render-groups/{render_group}"));
    let mut out = String::with_capacity(1024);
    match entry.reconciler {
        Reconciler::Flux => {
            out.push_str("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ");
            out.push_str(CLUSTER_VALUES_CONFIGMAP);
            out.push_str("\n  namespace: flux-system\ndata:\n");
            for (key, value) in &values {
                out.push_str(&format!("  {}: {}\n", scalar(key), scalar(value)));
            }
            out.push_str(&format!(
                "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  labels:\n    {LABEL_MANAGED_BY}: {MANAGED_BY_VALUE}\n  name: fleetscope-render-group\n  namespace: flux-system\nspec:\n  interval: 5m\n  path: {path}\n  postBuild:\n    substituteFrom:\n    - kind: ConfigMap\n      name: {CLUSTER_VALUES_CONFIGMAP}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: {OUTPUT_SOURCE}\n"
            ));
        }
        Reconciler::ArgoCd => {
            let repo_url = scalar(
                platform
                    .gitops_url
                    .as_deref()
                    .expect("validation requires a GitOps repository URL for Argo CD clusters"),
            );
            out.push_str(&format!(
                "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  labels:\n    {LABEL_MANAGED_BY}: {MANAGED_BY_VALUE}\n  name: fleetscope-render-group\n  namespace: argocd\nspec:\n  destination:\n    namespace: argocd\n    server: https://kubernetes.default.svc\n  project: default\n  source:\n    path: {path}\n    repoURL: {repo_url}\n    targetRevision: HEAD\n  syncPolicy:\n    automated:\n      prune: true\n      selfHeal: true\n"
            ));
        }
    }
    out
}

/// Everything the platform renders to, and each (render group, app)'s content hash; render
/// groups named in `skip` are left out (their folders are kept from the last render). Render
/// groups are independent, so they are rendered on every available core; the result does not
/// depend on how the work was split.
pub fn render_files(
    platform: &Platform,
    assigned: &Assigned,
    skip: &std::collections::BTreeSet<String>,
    skip_entries: bool,
) -> (Files, ContentHashes) {
    render_files_reusing(platform, assigned, skip, skip_entries, &BTreeMap::new())
}

/// [`render_files`], each render group taking the app files `reused` holds for it (render
/// group → [`ReusedApps`]) as they are.
pub fn render_files_reusing(
    platform: &Platform,
    assigned: &Assigned,
    skip: &std::collections::BTreeSet<String>,
    skip_entries: bool,
    reused: &BTreeMap<String, ReusedApps>,
) -> (Files, ContentHashes) {
    let nothing_reused = &ReusedApps::new();
    let groups: Vec<(&String, &GroupContent)> = assigned
        .groups
        .iter()
        .filter(|(name, _)| !skip.contains(*name))
        .collect();
    let members: Vec<_> = if skip_entries {
        Vec::new()
    } else {
        assigned.members.iter().collect()
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .max(1);
    let group_chunk = groups.len().div_ceil(workers).max(1);
    let member_chunk = members.len().div_ceil(workers).max(1);
    let parts: Vec<(Files, ContentHashes)> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for chunk in groups.chunks(group_chunk) {
            handles.push(scope.spawn(move || {
                let mut files = Files::new();
                let mut hashes = BTreeMap::new();
                for (name, content) in chunk {
                    let reused = reused.get(*name).unwrap_or(nothing_reused);
                    let (group_files, group_hashes) =
                        render_group_files_reusing(platform, name, content, reused);
                    files.extend(group_files);
                    hashes.extend(
                        group_hashes
                            .into_iter()
                            .map(|(app, hash)| (((*name).clone(), app), hash)),
                    );
                }
                (files, hashes)
            }));
        }
        for chunk in members.chunks(member_chunk) {
            handles.push(scope.spawn(move || {
                let files: Files = chunk
                    .iter()
                    .map(|(cluster, group)| {
                        (entry_path(cluster), cluster_entry(platform, cluster, group))
                    })
                    .collect();
                (files, BTreeMap::new())
            }));
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("rendering does not panic"))
            .collect()
    });
    let mut files = Files::new();
    let mut hashes = BTreeMap::new();
    for (part_files, part_hashes) in parts {
        files.extend(part_files);
        hashes.extend(part_hashes);
    }
    if !skip_entries {
        let record = RenderRecord {
            inputs: entries_inputs_digest(platform, assigned),
            files: files
                .range("clusters/".to_owned()..)
                .take_while(|(path, _)| path.starts_with("clusters/"))
                .map(|(path, text)| {
                    let blob = git2::Oid::hash_object(git2::ObjectType::Blob, text.as_bytes())
                        .expect("hashing in memory does not fail");
                    (path["clusters/".len()..].to_owned(), blob.to_string())
                })
                .collect(),
            hashes: BTreeMap::new(),
        };
        files.insert(format!("clusters/{RENDER_RECORD}"), record.to_text());
    }
    (files, hashes)
}

/// Where a cluster's entry file lives: a folder of its own, which its bootstrap object
/// (Flux Kustomization or Argo CD Application) points at.
pub fn entry_path(cluster: &fleetscope_model::ClusterId) -> String {
    format!("clusters/{cluster}/entry.yaml")
}

/// A digest of everything the entry files are made of: the output format, the GitOps
/// repository URL, and per cluster its id, render group, reconciler, group, environment and
/// values.
pub fn entries_inputs_digest(platform: &Platform, assigned: &Assigned) -> String {
    let mut hasher = Sha256::new();
    hasher.update(crate::OUTPUT_FORMAT.as_bytes());
    hasher.update([0]);
    hasher.update(
        platform
            .gitops_url
            .as_deref()
            .unwrap_or_default()
            .as_bytes(),
    );
    // Each cluster's part is the JSON array `[id, render group, reconciler, group,
    // environment, values]`, written straight into one buffer (30,000 clusters per render).
    let mut part = Vec::with_capacity(256);
    for (cluster, group) in &assigned.members {
        let entry = &platform.clusters[cluster];
        part.clear();
        serde_json::to_writer(
            &mut part,
            &(
                cluster.as_str(),
                group,
                entry.reconciler.as_str(),
                entry.group.as_str(),
                entry.environment.as_str(),
                &entry.values,
            ),
        )
        .expect("strings serialize");
        hasher.update([0]);
        hasher.update(&part);
    }
    sha256_text(hasher)
}

#[cfg(test)]
mod content_hash_tests {
    use super::*;

    /// The example platform with its assignment.
    fn example() -> (Platform, Assigned) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/platform");
        crate::plan(&dir).expect("the example platform is valid")
    }

    #[test]
    fn an_apps_hash_does_not_depend_on_the_render_group_that_carries_it() {
        let (platform, assigned) = example();
        for content in assigned.groups.values() {
            for assignment in &content.assignments {
                let (here, hash_here) =
                    app_object(&platform, content, assignment, "rg-aaaaaaaaaaaa");
                let (there, hash_there) =
                    app_object(&platform, content, assignment, "rg-bbbbbbbbbbbb");
                assert_ne!(here, there, "the render group annotation names the folder");
                assert_eq!(hash_here, hash_there, "{}", assignment.app);
                // The stated rule: the hash of the object without the two annotations.
                assert_eq!(hash_here, content_hash(&canonical_object(&here)));
                assert_eq!(
                    here["metadata"]["annotations"][ANNOTATION_CONTENT_HASH],
                    json!(hash_here)
                );
                let mut stripped = here.clone();
                let annotations = stripped["metadata"]["annotations"].as_object_mut().unwrap();
                annotations.remove(ANNOTATION_RENDER_GROUP);
                annotations.remove(ANNOTATION_CONTENT_HASH);
                assert_eq!(
                    hash_here,
                    format!(
                        "sha256:{}",
                        Sha256::digest(serde_json::to_vec(&stripped).unwrap())
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect::<String>()
                    )
                );
            }
        }
    }

    #[test]
    fn the_entries_digest_hashes_each_cluster_as_a_json_array() {
        let (platform, assigned) = example();
        let mut hasher = Sha256::new();
        hasher.update(crate::OUTPUT_FORMAT.as_bytes());
        hasher.update([0]);
        hasher.update(
            platform
                .gitops_url
                .as_deref()
                .unwrap_or_default()
                .as_bytes(),
        );
        for (cluster, group) in &assigned.members {
            let entry = &platform.clusters[cluster];
            let part = json!([
                cluster.as_str(),
                group,
                entry.reconciler.as_str(),
                entry.group.to_string(),
                entry.environment.to_string(),
                entry.values
            ]);
            hasher.update([0]);
            hasher.update(part.to_string().as_bytes());
        }
        assert_eq!(
            entries_inputs_digest(&platform, &assigned),
            sha256_text(hasher)
        );
    }

    #[test]
    fn whatever_is_rendered_for_the_app_changes_its_hash() {
        let (platform, assigned) = example();
        let content = assigned.groups.values().next().unwrap();
        let assignment = &content.assignments[0];
        let (_, hash) = app_object(&platform, content, assignment, "rg-aaaaaaaaaaaa");
        let mut other = assignment.clone();
        other.values.insert("replicas".into(), json!(17));
        let (_, values_hash) = app_object(&platform, content, &other, "rg-aaaaaaaaaaaa");
        assert_ne!(hash, values_hash, "values");
        let mut other = assignment.clone();
        other.version = fleetscope_model::Version::parse("9.9.9").unwrap();
        let (_, version_hash) = app_object(&platform, content, &other, "rg-aaaaaaaaaaaa");
        assert_ne!(hash, version_hash, "version");
    }
}
