//! The part of kustomize these manifests use, and nothing more: a kustomization with any
//! other field, or a use of these fields beyond what is implemented, is an error here.
//!
//! Implemented, in the order kustomize applies them within one kustomization:
//!
//! 1. `resources`: YAML files inside the kustomization's folder, and other kustomizations'
//!    folders (built first, recursively);
//! 2. `configMapGenerator` with `generatorOptions`: ConfigMaps from files and literals, with
//!    `disableNameSuffixHash: true` only (hashed names need name-reference rewriting);
//! 3. `patches`: from `path` or inline `patch`; a YAML list is a JSON 6902 patch applied to
//!    every resource its `target` selects (group, version, kind, name, namespace); a mapping
//!    is a strategic-merge patch of the resource with its apiVersion, kind, name and
//!    namespace, merging the lists Kubernetes merges by key for the fields listed in
//!    [`MERGE_KEYS`] and replacing those in [`ATOMIC_LISTS`];
//! 4. `labels`: `pairs` added to every resource's `metadata.labels` (not to selectors or
//!    templates);
//! 5. `images`: `newName`, `newTag` and `digest` for the containers and init containers of
//!    pod templates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The fields of a kustomization this subset implements.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kustomization {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub config_map_generator: Vec<ConfigMapGenerator>,
    pub generator_options: Option<GeneratorOptions>,
    #[serde(default)]
    pub patches: Vec<Patch>,
    #[serde(default)]
    pub labels: Vec<Labels>,
    #[serde(default)]
    pub images: Vec<Image>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigMapGenerator {
    pub name: String,
    pub namespace: Option<String>,
    #[serde(default)]
    pub files: Vec<String>,
    #[serde(default)]
    pub literals: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GeneratorOptions {
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub disable_name_suffix_hash: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    pub path: Option<String>,
    pub patch: Option<String>,
    pub target: Option<Target>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub group: Option<String>,
    pub version: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Labels {
    pub pairs: BTreeMap<String, String>,
    #[serde(default)]
    pub include_selectors: bool,
    #[serde(default)]
    pub include_templates: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Image {
    pub name: String,
    pub new_name: Option<String>,
    pub new_tag: Option<String>,
    pub digest: Option<String>,
}

/// Lists a strategic-merge patch merges item by item, by the field that identifies an item.
pub const MERGE_KEYS: &[(&str, &str)] = &[
    ("containers", "name"),
    ("initContainers", "name"),
    ("env", "name"),
    ("volumes", "name"),
    ("volumeMounts", "mountPath"),
];

/// Lists a strategic-merge patch replaces as a whole.
pub const ATOMIC_LISTS: &[&str] = &["args", "command"];

/// The names a kustomization file may have.
const FILE_NAMES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// What a file is to the kustomization that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    Kustomization,
    Resource,
    Patch,
    GeneratorInput,
}

/// What a build produced.
#[derive(Debug, Clone, Default)]
pub struct Build {
    pub objects: Vec<Value>,
    /// Every file the build read, canonicalized, with what it was read as.
    pub files: BTreeMap<PathBuf, FileRole>,
}

/// Reads the kustomization file of `dir`.
pub fn read_kustomization(dir: &Path) -> anyhow::Result<(PathBuf, Kustomization)> {
    let found: Vec<PathBuf> = FILE_NAMES
        .iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_file())
        .collect();
    let path = match found.as_slice() {
        [one] => one.clone(),
        [] => bail!("{} has no kustomization file", dir.display()),
        _ => bail!("{} has more than one kustomization file", dir.display()),
    };
    let text = std::fs::read_to_string(&path)?;
    let kustomization =
        parse_kustomization(&text).map_err(|err| anyhow!("{}: {err}", path.display()))?;
    Ok((path, kustomization))
}

/// Parses a kustomization's text: every field known, every feature used implemented.
pub fn parse_kustomization(text: &str) -> Result<Kustomization, String> {
    let docs = crate::yaml::documents(text)?;
    let [doc] = docs.as_slice() else {
        return Err(format!("expected one document, found {}", docs.len()));
    };
    let k: Kustomization = serde_path_to_error::deserialize(doc).map_err(|err| {
        let path = err.path().to_string();
        format!(
            "{path}: {} (this kustomize subset has no such field)",
            err.into_inner()
        )
    })?;
    if k.api_version != "kustomize.config.k8s.io/v1beta1" || k.kind != "Kustomization" {
        return Err(
            "apiVersion kustomize.config.k8s.io/v1beta1 and kind Kustomization are required"
                .to_owned(),
        );
    }
    for (index, labels) in k.labels.iter().enumerate() {
        if labels.include_selectors || labels.include_templates {
            return Err(format!(
                "labels[{index}]: includeSelectors and includeTemplates are not implemented"
            ));
        }
    }
    if !k.config_map_generator.is_empty()
        && !k
            .generator_options
            .as_ref()
            .is_some_and(|o| o.disable_name_suffix_hash)
    {
        return Err(
            "configMapGenerator: generated names with a hash suffix are not implemented; set generatorOptions.disableNameSuffixHash: true".to_owned(),
        );
    }
    for (index, patch) in k.patches.iter().enumerate() {
        if patch.path.is_some() == patch.patch.is_some() {
            return Err(format!("patches[{index}]: exactly one of path and patch"));
        }
    }
    for (index, image) in k.images.iter().enumerate() {
        if image.new_name.is_none() && image.new_tag.is_none() && image.digest.is_none() {
            return Err(format!("images[{index}]: nothing to change"));
        }
    }
    Ok(k)
}

/// A file named in a kustomization, which must lie inside the kustomization's folder.
fn inside(dir: &Path, relative: &str) -> anyhow::Result<PathBuf> {
    if relative.contains("://") {
        bail!("{relative}: remote resources are not implemented");
    }
    let root = dir.canonicalize()?;
    let path = dir
        .join(relative)
        .canonicalize()
        .with_context(|| format!("{relative} in {}", dir.display()))?;
    if !path.starts_with(&root) {
        bail!(
            "{relative}: a file outside the kustomization's folder {} (kustomize refuses it)",
            dir.display()
        );
    }
    Ok(path)
}

/// Builds the kustomization in `dir`.
pub fn build(dir: &Path) -> anyhow::Result<Build> {
    let (file, k) = read_kustomization(dir)?;
    let mut out = Build::default();
    out.files
        .insert(file.canonicalize()?, FileRole::Kustomization);
    add_resources(dir, &k, &mut out)?;
    for generator in &k.config_map_generator {
        let config_map =
            generate_config_map(dir, generator, k.generator_options.as_ref(), &mut out)?;
        out.objects.push(config_map);
    }
    check_defined_once(&out.objects)?;
    apply_patches(dir, &k, &mut out)?;
    for labels in &k.labels {
        add_labels(labels, &mut out.objects)?;
    }
    for image in &k.images {
        set_image(image, &mut out.objects);
    }
    Ok(out)
}

/// Adds the kustomization's resources to `out`: other kustomizations' folders, built first,
/// and the documents of YAML files.
fn add_resources(dir: &Path, k: &Kustomization, out: &mut Build) -> anyhow::Result<()> {
    for resource in &k.resources {
        let path = dir.join(resource);
        if path.is_dir() {
            let sub = build(&path).with_context(|| format!("building {resource}"))?;
            out.objects.extend(sub.objects);
            out.files.extend(sub.files);
        } else {
            let path = inside(dir, resource)?;
            let text = std::fs::read_to_string(&path)?;
            let docs = crate::yaml::documents(&text)
                .map_err(|err| anyhow!("{}: {err}", path.display()))?;
            for doc in docs {
                if doc.get("kind").is_none() || doc.pointer("/metadata/name").is_none() {
                    bail!(
                        "{}: a document without kind or metadata.name",
                        path.display()
                    );
                }
                out.objects.push(doc);
            }
            out.files.insert(path, FileRole::Resource);
        }
    }
    Ok(())
}

/// The ConfigMap `generator` makes from its files and literals, with the generator options'
/// labels and annotations; its files are recorded in `out`.
fn generate_config_map(
    dir: &Path,
    generator: &ConfigMapGenerator,
    options: Option<&GeneratorOptions>,
    out: &mut Build,
) -> anyhow::Result<Value> {
    let mut data = Map::new();
    for file in &generator.files {
        let (key, relative) = match file.split_once('=') {
            Some((key, relative)) => (key.to_owned(), relative),
            None => (
                Path::new(file)
                    .file_name()
                    .context("a file without a name")?
                    .to_string_lossy()
                    .into_owned(),
                file.as_str(),
            ),
        };
        let path = inside(dir, relative)?;
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{}: binary files (binaryData) are not implemented",
                path.display()
            )
        })?;
        if data.insert(key.clone(), Value::String(text)).is_some() {
            bail!("configMapGenerator {}: key {key} twice", generator.name);
        }
        out.files.insert(path, FileRole::GeneratorInput);
    }
    for literal in &generator.literals {
        let (key, value) = literal
            .split_once('=')
            .with_context(|| format!("literal {literal:?}: expected KEY=VALUE"))?;
        if data
            .insert(key.to_owned(), Value::String(value.to_owned()))
            .is_some()
        {
            bail!("configMapGenerator {}: key {key} twice", generator.name);
        }
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), generator.name.clone().into());
    if let Some(namespace) = &generator.namespace {
        metadata.insert("namespace".into(), namespace.clone().into());
    }
    if let Some(options) = options {
        if !options.labels.is_empty() {
            metadata.insert("labels".into(), serde_json::to_value(&options.labels)?);
        }
        if !options.annotations.is_empty() {
            metadata.insert(
                "annotations".into(),
                serde_json::to_value(&options.annotations)?,
            );
        }
    }
    Ok(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": data,
    }))
}

/// Fails when two objects have the same identity.
fn check_defined_once(objects: &[Value]) -> anyhow::Result<()> {
    let mut ids = BTreeSet::new();
    for object in objects {
        if !ids.insert(id(object)) {
            bail!("{} is defined twice", crate::describe(object));
        }
    }
    Ok(())
}

/// Applies the kustomization's patches in order; their files are recorded in `out`.
fn apply_patches(dir: &Path, k: &Kustomization, out: &mut Build) -> anyhow::Result<()> {
    for (index, patch) in k.patches.iter().enumerate() {
        let text = match (&patch.path, &patch.patch) {
            (Some(relative), None) => {
                let path = inside(dir, relative)?;
                out.files.insert(path.clone(), FileRole::Patch);
                std::fs::read_to_string(path)?
            }
            (None, Some(text)) => text.clone(),
            _ => unreachable!("checked when parsing"),
        };
        apply_patch(&mut out.objects, &text, patch.target.as_ref())
            .with_context(|| format!("patches[{index}] of {}", dir.display()))?;
    }
    Ok(())
}

/// Adds `labels`' pairs to every object's `metadata.labels`.
fn add_labels(labels: &Labels, objects: &mut [Value]) -> anyhow::Result<()> {
    for object in objects {
        let metadata = object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .context("an object without metadata")?;
        let map = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .context("metadata.labels is not a mapping")?;
        for (key, value) in &labels.pairs {
            map.insert(key.clone(), value.clone().into());
        }
    }
    Ok(())
}

/// Applies `image` to the containers and init containers of every pod template.
fn set_image(image: &Image, objects: &mut [Value]) {
    for object in objects {
        for pod in pod_specs(object) {
            for field in ["initContainers", "containers"] {
                for container in pod
                    .get_mut(field)
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    if let Some(Value::String(reference)) = container.get_mut("image") {
                        if let Some(new) = retag(reference, image) {
                            *reference = new;
                        }
                    }
                }
            }
        }
    }
}

/// An object's identity: group, kind, namespace, name.
fn id(object: &Value) -> (String, String, String, String) {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let api_version = text("/apiVersion");
    let group = api_version
        .split_once('/')
        .map(|(g, _)| g.to_owned())
        .unwrap_or_default();
    (
        group,
        text("/kind"),
        text("/metadata/namespace"),
        text("/metadata/name"),
    )
}

/// The pod specs of a workload object, to change in place.
pub fn pod_specs(object: &mut Value) -> Vec<&mut Value> {
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let pointer = match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => "/spec/template/spec",
        "CronJob" => "/spec/jobTemplate/spec/template/spec",
        "Pod" => "/spec",
        _ => return Vec::new(),
    };
    object.pointer_mut(pointer).into_iter().collect()
}

/// `reference` with `image` applied, if `image` names it.
fn retag(reference: &str, image: &Image) -> Option<String> {
    let (rest, digest) = match reference.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (reference, None),
    };
    let (name, tag) = match rest.rfind(':') {
        Some(colon) if !rest[colon..].contains('/') => (&rest[..colon], Some(&rest[colon + 1..])),
        _ => (rest, None),
    };
    if name != image.name {
        return None;
    }
    let name = image.new_name.as_deref().unwrap_or(name);
    Some(match (&image.digest, &image.new_tag, digest, tag) {
        (Some(new_digest), _, _, _) => format!("{name}@{new_digest}"),
        (None, Some(new_tag), _, _) => format!("{name}:{new_tag}"),
        (None, None, Some(digest), _) => format!("{name}@{digest}"),
        (None, None, None, Some(tag)) => format!("{name}:{tag}"),
        (None, None, None, None) => name.to_owned(),
    })
}

fn matches(object: &Value, target: &Target) -> bool {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (group, version) = match text("/apiVersion").split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", text("/apiVersion")),
    };
    target.group.as_deref().is_none_or(|g| g == group)
        && target.version.as_deref().is_none_or(|v| v == version)
        && target.kind.as_deref().is_none_or(|k| k == text("/kind"))
        && target
            .name
            .as_deref()
            .is_none_or(|n| n == text("/metadata/name"))
        && target
            .namespace
            .as_deref()
            .is_none_or(|n| n == text("/metadata/namespace"))
}

/// Applies one patch (JSON 6902 or strategic merge) to the objects it selects.
pub fn apply_patch(
    objects: &mut [Value],
    text: &str,
    target: Option<&Target>,
) -> anyhow::Result<()> {
    let docs = crate::yaml::documents(text).map_err(|err| anyhow!("{err}"))?;
    if let [Value::Array(operations)] = docs.as_slice() {
        let target = target.context("a JSON 6902 patch needs a target")?;
        let operations: Vec<json_patch::PatchOperation> =
            serde_json::from_value(Value::Array(operations.clone()))
                .context("not a JSON 6902 patch")?;
        let mut applied = 0;
        for object in objects.iter_mut().filter(|o| matches(o, target)) {
            json_patch::patch(object, &operations)
                .map_err(|err| anyhow!("{}: {err}", crate::describe(object)))?;
            applied += 1;
        }
        if applied == 0 {
            bail!("the target {target:?} selects no resource");
        }
        return Ok(());
    }
    if target.is_some() {
        bail!("strategic-merge patches with a target are not implemented; name the resource in the patch");
    }
    for doc in docs {
        let Value::Object(_) = &doc else {
            bail!("a patch document must be a mapping or a list of operations");
        };
        let wanted = id(&doc);
        let api_version = doc.get("apiVersion").cloned();
        let mut found = objects
            .iter_mut()
            .filter(|o| id(o) == wanted && o.get("apiVersion") == api_version.as_ref());
        let object = found.next().with_context(|| {
            format!("the patch of {} matches no resource", crate::describe(&doc))
        })?;
        merge(object, &doc, "")?;
    }
    Ok(())
}

/// A strategic merge of `patch` into `target`.
fn merge(target: &mut Value, patch: &Value, path: &str) -> anyhow::Result<()> {
    let (Value::Object(target), Value::Object(patch)) = (target, patch) else {
        bail!("{path}: a mapping is merged into a mapping only");
    };
    for (key, value) in patch {
        let at = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        if key.starts_with('$') {
            bail!("{at}: patch directives are not implemented");
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        no_directives(value, &at)?;
        match (target.get_mut(key), value) {
            (Some(old @ Value::Object(_)), Value::Object(_)) => merge(old, value, &at)?,
            (Some(Value::Array(old)), Value::Array(new)) => merge_list(key, old, new, &at)?,
            (Some(old), _) => *old = value.clone(),
            (None, _) => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(())
}

fn no_directives(value: &Value, at: &str) -> anyhow::Result<()> {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                if key.starts_with('$') {
                    bail!("{at}.{key}: patch directives are not implemented");
                }
                no_directives(item, &format!("{at}.{key}"))?;
            }
        }
        Value::Array(items) => {
            for item in items {
                no_directives(item, at)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn merge_list(field: &str, old: &mut Vec<Value>, new: &[Value], at: &str) -> anyhow::Result<()> {
    if ATOMIC_LISTS.contains(&field) {
        *old = new.to_vec();
        return Ok(());
    }
    let Some((_, key)) = MERGE_KEYS.iter().find(|(f, _)| *f == field) else {
        bail!("{at}: merging the list {field} is not implemented in this kustomize subset");
    };
    for item in new {
        let wanted = item
            .get(*key)
            .with_context(|| format!("{at}: an item without its merge key {key}"))?;
        match old.iter_mut().find(|o| o.get(*key) == Some(wanted)) {
            Some(existing) => merge(existing, item, &format!("{at}[{key}={wanted}]"))?,
            None => old.push(item.clone()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn retags_only_the_named_image() {
        let image = Image {
            name: "ghcr.io/fleetscope/fleetscope".into(),
            new_name: Some("registry.example.com/fs".into()),
            new_tag: Some("1.2.3".into()),
            digest: None,
        };
        assert_eq!(
            retag("ghcr.io/fleetscope/fleetscope:0.1.0", &image).as_deref(),
            Some("registry.example.com/fs:1.2.3")
        );
        assert_eq!(retag("ghcr.io/fleetscope/other:0.1.0", &image), None);
        let pinned = Image {
            digest: Some("sha256:abc".into()),
            ..image.clone()
        };
        assert_eq!(
            retag("ghcr.io/fleetscope/fleetscope", &pinned).as_deref(),
            Some("registry.example.com/fs@sha256:abc")
        );
        let port = Image {
            name: "host:5000/app".into(),
            new_name: None,
            new_tag: Some("2".into()),
            digest: None,
        };
        assert_eq!(
            retag("host:5000/app:1", &port).as_deref(),
            Some("host:5000/app:2")
        );
    }

    #[test]
    fn strategic_merge_merges_by_key_and_replaces_atomic_lists() {
        let mut objects = vec![json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "a", "image": "x", "args": ["one", "two"], "env": [{"name": "A", "value": "1"}]},
                {"name": "b", "image": "y"}
            ]}}}
        })];
        apply_patch(
            &mut objects,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\nspec:\n  replicas: null\n  template:\n    spec:\n      containers:\n        - name: a\n          args: [three]\n          env: [{name: B, value: \"2\"}]\n",
            None,
        )
        .unwrap();
        assert_eq!(
            objects[0]["spec"],
            json!({"template": {"spec": {"containers": [
                {"name": "a", "image": "x", "args": ["three"], "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "b", "image": "y"}
            ]}}})
        );
    }

    #[test]
    fn refuses_what_it_does_not_implement() {
        let mut objects = vec![json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns"},
            "spec": {"template": {"spec": {"tolerations": [{"key": "a"}]}}}
        })];
        let err = apply_patch(
            &mut objects,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\nspec: {template: {spec: {tolerations: [{key: b}]}}}\n",
            None,
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("merging the list tolerations is not implemented"),
            "{err:#}"
        );
        let err = apply_patch(
            &mut objects,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\n$patch: replace\n",
            None,
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("directives are not implemented"),
            "{err:#}"
        );
        let err = apply_patch(
            &mut objects,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: other, namespace: ns}\nspec: {}\n",
            None,
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("matches no resource"),
            "{err:#}"
        );
        let err = apply_patch(
            &mut objects,
            "- op: remove\n  path: /spec\n",
            Some(&Target {
                kind: Some("Service".into()),
                ..Target::default()
            }),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("selects no resource"),
            "{err:#}"
        );

        for (text, expected) in [
            ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: x-\n", "unknown field `namePrefix`"),
            ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\npatches: [{path: p.yaml, options: {allowNameChange: true}}]\n", "unknown field `options`"),
            ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nlabels: [{pairs: {a: b}, includeSelectors: true}]\n", "includeSelectors and includeTemplates are not implemented"),
            ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nconfigMapGenerator: [{name: x, literals: [a=b]}]\n", "hash suffix are not implemented"),
            ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\npatches: [{target: {labelSelector: a=b}, patch: x}]\n", "unknown field `labelSelector`"),
        ] {
            let err = parse_kustomization(text).unwrap_err();
            assert!(err.contains(expected), "{err}");
        }
    }
}
