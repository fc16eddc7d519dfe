//! The platform repo: YAML documents, each with a `kind`, in any `.yaml` file below one
//! directory. Loading reads every file and reports every problem at once, each with its file,
//! document number and field.
//!
//! ```yaml
//! kind: Cluster
//! id: berlin-01
//! group: emea/de/berlin
//! environment: prod
//! reconciler: flux
//! labels: {tier: flagship}
//! values: {storeNumber: "0042"}
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use fleetscope_model::app::{AppSelector, AppSource};
use fleetscope_model::{ClusterSelector, Labels, ReconcilerKind};
use serde::{Deserialize, Serialize};

/// One problem in the platform repo.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlatformError {
    /// Path relative to the platform repo's root.
    pub file: String,
    /// 1-based document number within the file; 0 when the problem is the file itself.
    pub document: usize,
    /// Dotted field path (`spec.version`), empty when the whole document is meant.
    pub field: String,
    pub message: String,
}

impl fmt::Display for PlatformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.document > 0 {
            write!(f, "#{}", self.document)?;
        }
        if !self.field.is_empty() {
            write!(f, " {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Where a document came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    pub file: String,
    pub document: usize,
}

impl Origin {
    pub fn error(&self, field: impl Into<String>, message: impl Into<String>) -> PlatformError {
        PlatformError {
            file: self.file.clone(),
            document: self.document,
            field: field.into(),
            message: message.into(),
        }
    }
}

pub type Values = serde_json::Map<String, serde_json::Value>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentDoc {
    pub name: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupDoc {
    pub path: String,
    #[serde(default)]
    pub labels: Labels,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterDoc {
    pub id: String,
    pub group: String,
    pub environment: String,
    pub reconciler: String,
    #[serde(default)]
    pub labels: Labels,
    /// Cluster-specific variables, delivered through the reconciler's substitution
    /// (Flux `postBuild.substitute`), never through a file per cluster and app.
    #[serde(default)]
    pub values: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApplicationDoc {
    pub name: String,
    pub version: String,
    pub source: AppSource,
    /// The reconciler object the app becomes on Flux clusters (`flux-kustomization` or
    /// `flux-helmrelease`); Argo CD clusters always get an Application.
    pub reconciler: ReconcilerKind,
    pub namespace: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub labels: Labels,
    /// Default values (Helm values, or substitution variables for Kustomizations).
    #[serde(default)]
    pub values: Values,
    /// How the app's objects are recognised on a cluster when they carry no Fleetscope stamps
    /// (objects of a fleet Fleetscope did not render), and where their version is read.
    #[serde(default, rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub match_rules: Vec<fleetscope_model::matching::MatchRule>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamespaceDoc {
    pub name: String,
    pub owners: Vec<String>,
    #[serde(default)]
    pub quota: BTreeMap<String, String>,
    #[serde(default)]
    pub default_limits: BTreeMap<String, String>,
    #[serde(default)]
    pub apps: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyDoc {
    pub name: String,
    #[serde(default)]
    pub apps: AppSelector,
    #[serde(default)]
    pub clusters: ClusterSelector,
    /// Pins the matched apps to this version.
    #[serde(default)]
    pub version: Option<String>,
    /// Values merged over the app's defaults (deep merge; higher priority wins).
    #[serde(default)]
    pub values: Values,
    /// Higher wins; among equal priorities, the policy whose name sorts last wins, and two
    /// equal-priority policies pinning different versions of one app on one cluster are an error.
    #[serde(default)]
    pub priority: i32,
}

/// Where the rendered output is served from, as the clusters' reconcilers reach it. Required
/// when any cluster uses Argo CD: its entry Application pulls its render group from this URL
/// (Flux clusters use their `GitRepository` named `fleetscope`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitOpsRepositoryDoc {
    /// `https://`, `http://`, `ssh://` or `git@host:path`.
    pub url: String,
}

/// One document of the platform repo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind")]
pub enum Document {
    Environment(EnvironmentDoc),
    Group(GroupDoc),
    Cluster(ClusterDoc),
    Application(ApplicationDoc),
    Namespace(NamespaceDoc),
    Policy(PolicyDoc),
    GitOpsRepository(GitOpsRepositoryDoc),
}

/// Every document of a platform repo, with where it came from, in file and document order.
#[derive(Debug, Clone, Default)]
pub struct PlatformDocs {
    pub documents: Vec<(Origin, Document)>,
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            yaml_files(&path, out)?;
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            out.push(path);
        }
    }
    Ok(())
}

fn read<T: serde::de::DeserializeOwned>(
    value: serde_yaml_ng::Value,
) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let field = err.path().to_string();
        let field = if field == "." { String::new() } else { field };
        (field, err.into_inner().to_string())
    })
}

/// Every `.yaml`/`.yml` file below `root`, in the order [`load`] reads them.
pub fn yaml_file_list(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    yaml_files(root, &mut files)?;
    Ok(files)
}

/// Parses one file's text: every document, or every problem.
pub fn parse_text(file: &str, text: &str) -> (Vec<(Origin, Document)>, Vec<PlatformError>) {
    let mut documents = Vec::new();
    let mut errors = Vec::new();
    for (index, deserializer) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let origin = Origin {
            file: file.to_owned(),
            document: index + 1,
        };
        let value: serde_yaml_ng::Value = match serde_yaml_ng::Value::deserialize(deserializer) {
            Ok(value) => value,
            Err(err) => {
                errors.push(origin.error("", format!("not valid YAML: {err}")));
                break;
            }
        };
        if value.is_null() {
            continue; // an empty document, for example after a trailing `---`
        }
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .map(str::to_owned);
        match kind.as_deref() {
            None => errors.push(origin.error("kind", "missing; one of Environment, Group, Cluster, Application, Namespace, Policy, GitOpsRepository")),
            Some(kind @ ("Environment" | "Group" | "Cluster" | "Application" | "Namespace" | "Policy" | "GitOpsRepository")) => {
                let mut body = value;
                if let Some(map) = body.as_mapping_mut() {
                    map.remove("kind");
                }
                // Each kind is read on its own so that errors keep their field path.
                let parsed = match kind {
                    "Environment" => read(body).map(Document::Environment),
                    "Group" => read(body).map(Document::Group),
                    "Cluster" => read(body).map(Document::Cluster),
                    "Application" => read(body).map(Document::Application),
                    "Namespace" => read(body).map(Document::Namespace),
                    "GitOpsRepository" => read(body).map(Document::GitOpsRepository),
                    _ => read(body).map(Document::Policy),
                };
                match parsed {
                    Ok(document) => documents.push((origin, document)),
                    Err((field, message)) => errors.push(origin.error(field, message)),
                }
            }
            Some(other) => errors.push(origin.error(
                "kind",
                format!("{other:?} is not one of Environment, Group, Cluster, Application, Namespace, Policy, GitOpsRepository"),
            )),
        }
    }
    (documents, errors)
}

/// A file's documents and problems.
pub type Parsed = (Vec<(Origin, Document)>, Vec<PlatformError>);

/// The problem of a file that could not be read.
fn unreadable_file(relative: String, err: &std::io::Error) -> Parsed {
    (
        Vec::new(),
        vec![PlatformError {
            file: relative,
            document: 0,
            field: String::new(),
            message: format!("cannot read: {err}"),
        }],
    )
}

fn relative_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn parse_file(root: &Path, path: &Path) -> Parsed {
    let relative = relative_path(root, path);
    match std::fs::read_to_string(path) {
        Ok(text) => parse_text(&relative, &text),
        Err(err) => unreadable_file(relative, &err),
    }
}

/// One platform file as a render reads it: its path relative to the platform repo's root (as
/// documents' origins name it) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub relative: String,
    pub bytes: Vec<u8>,
}

impl SourceFile {
    /// The file's documents and problems, as [`load`] reports them.
    pub fn parse(&self) -> Parsed {
        match std::str::from_utf8(&self.bytes) {
            Ok(text) => parse_text(&self.relative, text),
            // The error `std::fs::read_to_string` gives, which `load` reports.
            Err(_) => unreadable_file(
                self.relative.clone(),
                &std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "stream did not contain valid UTF-8",
                ),
            ),
        }
    }
}

/// Reads every `.yaml`/`.yml` file below `root`, in the order [`load`] reads them; the first
/// file or folder that cannot be read is the error.
pub fn read_files(root: &Path) -> std::io::Result<Vec<SourceFile>> {
    yaml_file_list(root)?
        .into_iter()
        .map(|path| {
            Ok(SourceFile {
                relative: relative_path(root, &path),
                bytes: std::fs::read(&path)?,
            })
        })
        .collect()
}

/// `work` applied to every item on every available core; the results come back in the
/// items' order, however the work was split.
pub(crate) fn in_parallel<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .max(1);
    if items.len() <= 1 || workers == 1 {
        return items.iter().map(work).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers.min(items.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(index) else { break };
                        out.push((index, work(item)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("parallel work does not panic"))
            .collect()
    });
    done.sort_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, result)| result).collect()
}

/// Reads every `.yaml`/`.yml` file below `root` (hidden files and folders skipped).
pub fn load(root: &Path) -> Result<PlatformDocs, Vec<PlatformError>> {
    let mut files = Vec::new();
    if let Err(err) = yaml_files(root, &mut files) {
        return Err(vec![PlatformError {
            file: root.display().to_string(),
            document: 0,
            field: String::new(),
            message: format!("cannot read: {err}"),
        }]);
    }
    // Files are parsed on every available core, then joined in file order, so documents and
    // errors come out in the same order however the work was split.
    let parsed = in_parallel(&files, |path| parse_file(root, path));
    let mut docs = PlatformDocs::default();
    let mut errors = Vec::new();
    for (documents, file_errors) in parsed {
        docs.documents.extend(documents);
        errors.extend(file_errors);
    }
    if errors.is_empty() {
        Ok(docs)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    #[test]
    fn every_problem_of_a_file_is_named() {
        let text = "kind: Cluster\nid: a\ngroup: emea\nenvironment: prod\nreconciler: flux\n---\nkind: Cluster\nid: b\ngroup: emea\nenvironment: prod\nreconciler: flux\ncolour: blue\n---\nkind: Widget\n---\nname: x\n---\nkind: Application\nname: api\nversion: 1.0.0\nreconciler: flux-helmrelease\nnamespace: shop\nsource: {type: helm, repository: r, chart: api, extra: 1}\n---\n";
        let (documents, errors) = parse_text("clusters/emea.yaml", text);
        assert_eq!(documents.len(), 1);
        let rendered: Vec<String> = errors.iter().map(ToString::to_string).collect();
        expect![[r#"
            [
                "clusters/emea.yaml#2 colour: unknown field `colour`, expected one of `id`, `group`, `environment`, `reconciler`, `labels`, `values`",
                "clusters/emea.yaml#3 kind: \"Widget\" is not one of Environment, Group, Cluster, Application, Namespace, Policy, GitOpsRepository",
                "clusters/emea.yaml#4 kind: missing; one of Environment, Group, Cluster, Application, Namespace, Policy, GitOpsRepository",
                "clusters/emea.yaml#5 source: unknown field `extra`, expected `repository` or `chart`",
            ]
        "#]]
        .assert_debug_eq(&rendered);
    }
}
