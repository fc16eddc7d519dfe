//! Writing the imported repo: YAML text per file, into a new directory beside the target,
//! checked as `render` checks a platform repo, then moved into place; nothing is left behind
//! when any step fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_yaml_ng::Value;

use super::build::{self, Options, Plan};
use super::files::Manifests;
use crate::platform::Document;

/// Refuses a target that exists and is not an empty directory.
pub fn check_target(target: &Path) -> anyhow::Result<()> {
    match std::fs::read_dir(target) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                anyhow::bail!(
                    "{} is not empty: import writes a new platform repo, into a directory that does not exist yet or is empty",
                    target.display()
                );
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotADirectory => {
            anyhow::bail!("{} is a file, not a directory", target.display())
        }
        Err(err) => Err(err).with_context(|| format!("reading {}", target.display())),
    }
}

/// Null, empty text, empty lists and empty maps left out: what a person would not write.
fn prune(value: Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::Sequence(items) => {
            let items: Vec<Value> = items.into_iter().filter_map(prune).collect();
            (!items.is_empty()).then_some(Value::Sequence(items))
        }
        Value::Mapping(map) => {
            let map: serde_yaml_ng::Mapping = map
                .into_iter()
                .filter_map(|(k, v)| prune(v).map(|v| (k, v)))
                .collect();
            (!map.is_empty()).then_some(Value::Mapping(map))
        }
        other => Some(other),
    }
}

/// The YAML of one file's documents.
pub fn yaml(documents: &[Document]) -> String {
    documents
        .iter()
        .map(|doc| {
            let value = serde_yaml_ng::to_value(doc).expect("platform documents serialize");
            serde_yaml_ng::to_string(&prune(value).unwrap_or(Value::Null))
                .expect("platform documents serialize")
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// What a file says of itself before its documents.
fn header(path: &str, plan: &Plan) -> String {
    let mut lines = vec![
        "# Written by `fleetscope import` from what runs; edit it to say what should run."
            .to_owned(),
    ];
    if let Some(app) = path
        .strip_prefix("apps/")
        .and_then(|p| p.strip_suffix(".yaml"))
        .and_then(|name| plan.apps.get(name))
    {
        if !app.has_source() {
            lines.push("# `source` is a placeholder: the agents report what runs, not where it comes from.".into());
            lines.push(
                "# `render --publish-only` does not use it; give the real one before rendering."
                    .into(),
            );
        }
        if app.running.is_empty() {
            lines.push("# No reporting cluster runs this app: add a Policy to place it.".into());
        } else {
            lines.push(format!(
                "# The policies put it on the {} cluster(s) that run it, each at the version it runs.",
                app.running.len()
            ));
        }
    }
    if path == "gitops.yaml" {
        lines.push("# Argo CD clusters pull rendered output from this URL; with `render --publish-only` nothing is pulled.".into());
    }
    lines.join("\n") + "\n"
}

/// What was written, and how the check went.
#[derive(Debug, Clone)]
pub struct Written {
    pub files: usize,
    pub render_groups: usize,
    /// (cluster, app) pairs running a version, and those whose desired version is that one.
    pub running: usize,
    pub desired_equal: usize,
    /// Pairs whose object shows no version.
    pub without_version: usize,
}

impl Written {
    pub fn summary(&self, plan: &Plan, manifests: &Manifests) -> String {
        let environments: std::collections::BTreeSet<&str> = plan
            .clusters
            .iter()
            .map(|c| c.environment.as_str())
            .collect();
        let placeholders = plan.apps.values().filter(|a| !a.has_source()).count();
        let pins: usize = plan
            .apps
            .values()
            .map(|a| {
                let default = a.default_version();
                a.running
                    .values()
                    .flatten()
                    .filter(|v| **v != default)
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
            })
            .sum();
        let mut text = format!(
            "import: {} clusters in {} environment(s), {} apps ({} other version(s) pinned, {} with a placeholder source), {} from {} manifest file(s) ({} other document(s) passed over); wrote {} files\ncheck: valid, {} render groups; desired equals what runs for {} of {} running pairs",
            plan.clusters.len(),
            environments.len(),
            plan.apps.len(),
            pins,
            placeholders,
            manifests.apps.len(),
            manifests.files,
            manifests.skipped,
            self.files,
            self.render_groups,
            self.desired_equal,
            self.running,
        );
        if self.without_version > 0 {
            text.push_str(&format!(
                "\nwarning: {} running pair(s) show no version (nothing applied yet, or a revision that is not a version); they count as a version that differs",
                self.without_version
            ));
        }
        text
    }
}

/// A directory beside `target` that nothing else uses.
fn scratch(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "platform".into());
    target.with_file_name(format!(".{name}.import-{}", std::process::id()))
}

/// Writes the repo into a scratch directory, checks it as `render` would, compares what it
/// desires with what runs, and moves it to `target`.
pub fn write(target: &Path, plan: &Plan, options: &Options) -> anyhow::Result<Written> {
    let documents = build::documents(plan, options);
    let dir = scratch(target);
    let _ = std::fs::remove_dir_all(&dir);
    let result = write_and_check(&dir, &documents, plan);
    let written = match result {
        Ok(written) => written,
        Err(err) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(err);
        }
    };
    if target.exists() {
        std::fs::remove_dir(target)
            .with_context(|| format!("replacing the empty {}", target.display()))?;
    }
    if let Err(err) = std::fs::rename(&dir, target) {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(err).with_context(|| format!("moving the repo to {}", target.display()));
    }
    Ok(written)
}

fn write_and_check(
    dir: &Path,
    documents: &BTreeMap<String, Vec<Document>>,
    plan: &Plan,
) -> anyhow::Result<Written> {
    for (path, docs) in documents {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let text = header(path, plan) + &yaml(docs);
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    }
    let (_, assigned) = crate::plan(dir).map_err(|err| {
        anyhow::anyhow!("the imported repo does not check, so nothing was written: {err}")
    })?;
    let desired = desired_versions(&assigned);
    let mut written = Written {
        files: documents.len(),
        render_groups: assigned.groups.len(),
        running: 0,
        desired_equal: 0,
        without_version: 0,
    };
    for app in plan.apps.values() {
        for (cluster, version) in &app.running {
            let Some(version) = version else {
                written.without_version += 1;
                continue;
            };
            written.running += 1;
            if desired.get(&(cluster.as_str(), app.name.as_str())) == Some(&version.as_str()) {
                written.desired_equal += 1;
            }
        }
    }
    Ok(written)
}

/// (cluster, app) → the desired version the assignment gives.
pub fn desired_versions(assigned: &crate::assign::Assigned) -> BTreeMap<(&str, &str), &str> {
    let mut desired = BTreeMap::new();
    for (cluster, group) in &assigned.members {
        if let Some(content) = assigned.groups.get(group) {
            for a in &content.assignments {
                desired.insert((cluster.as_str(), a.app.as_str()), a.version.as_str());
            }
        }
    }
    desired
}
