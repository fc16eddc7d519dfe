//! Files a team already has, as `fleetscope import` reads them: Argo CD `Application`
//! manifests, Flux `Kustomization` and `HelmRelease` manifests (with the `GitRepository`,
//! `OCIRepository` and `HelmRepository` they name), and a cluster inventory as CSV.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fleetscope_model::{AppSource, Labels, ObjectKind, ReconcilerKind};
use serde_yaml_ng::Value;

/// A problem of an input file, with where it is: `file#document field` or `file:line column`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// One reconciler object a manifest declares, and the app it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredApp {
    /// `file#document`.
    pub origin: String,
    pub kind: ObjectKind,
    /// The object's namespace and name, as its match rule names them.
    pub namespace: String,
    pub name: String,
    pub source: AppSource,
    pub reconciler: ReconcilerKind,
    /// Where the app's resources go (`spec.destination.namespace`, `spec.targetNamespace`),
    /// or the object's own namespace.
    pub app_namespace: String,
    /// The version the manifest asks for (a chart version, a target revision, a tag or
    /// branch), if it names one.
    pub version: Option<String>,
}

/// What the manifests held.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub apps: Vec<DeclaredApp>,
    /// Files read, and documents of other kinds passed over.
    pub files: usize,
    pub skipped: usize,
}

/// A Flux source, by kind, namespace and name.
type SourceKey = (String, String, String);

#[derive(Debug, Clone)]
struct FluxSource {
    url: String,
    /// GitRepository: branch, tag, semver or commit; OCIRepository: the tag.
    reference: Option<String>,
    tag: Option<String>,
    oci: bool,
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut at = value;
    for key in path {
        at = at.get(*key)?;
    }
    at.as_str().filter(|s| !s.is_empty())
}

/// Every `.yaml`/`.yml` file of `paths` (files as given, directories below them in name
/// order, hidden ones skipped).
fn yaml_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|err| InputError {
            at: path.display().to_string(),
            message: format!("cannot read: {err}"),
        })?;
        if meta.is_dir() {
            let found = crate::platform::yaml_file_list(path).map_err(|err| InputError {
                at: path.display().to_string(),
                message: format!("cannot read: {err}"),
            })?;
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Reads every manifest below `paths`. Documents of other kinds are passed over; every
/// problem of the ones read is returned at once.
pub fn read_manifests(paths: &[PathBuf]) -> Result<Manifests, Vec<InputError>> {
    let files = yaml_files(paths).map_err(|err| vec![err])?;
    let mut errors = Vec::new();
    let mut documents = Vec::new();
    for file in &files {
        let name = file.display().to_string();
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(err) => {
                errors.push(InputError {
                    at: name,
                    message: format!("cannot read: {err}"),
                });
                continue;
            }
        };
        for (index, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
            let at = format!("{name}#{}", index + 1);
            match <Value as serde::Deserialize>::deserialize(doc) {
                Ok(Value::Null) => {}
                Ok(value) => documents.push((at, value)),
                Err(err) => {
                    // The reader cannot go on past a syntax error: the rest of the file is
                    // not read.
                    errors.push(InputError {
                        at,
                        message: format!("not YAML: {err}"),
                    });
                    break;
                }
            }
        }
    }
    let mut manifests = Manifests {
        files: files.len(),
        ..Manifests::default()
    };
    let sources = flux_sources(&documents, &mut errors);
    for (at, doc) in &documents {
        let api = str_at(doc, &["apiVersion"]).unwrap_or_default();
        let declared = match str_at(doc, &["kind"]).unwrap_or_default() {
            "Application" if api.starts_with("argoproj.io/") => argo_application(at, doc),
            "HelmRelease" if api.starts_with("helm.toolkit.fluxcd.io/") => {
                helm_release(at, doc, &sources)
            }
            "Kustomization" if api.starts_with("kustomize.toolkit.fluxcd.io/") => {
                kustomization(at, doc, &sources)
            }
            _ => {
                manifests.skipped += 1;
                continue;
            }
        };
        match declared {
            Ok(app) => manifests.apps.push(app),
            Err(err) => errors.push(err),
        }
    }
    if errors.is_empty() {
        Ok(manifests)
    } else {
        Err(errors)
    }
}

fn missing(at: &str, field: &str) -> InputError {
    InputError {
        at: format!("{at} {field}"),
        message: "is required".into(),
    }
}

/// The Flux sources the documents declare, by kind, namespace and name.
fn flux_sources(
    documents: &[(String, Value)],
    errors: &mut Vec<InputError>,
) -> BTreeMap<SourceKey, FluxSource> {
    let mut sources = BTreeMap::new();
    for (at, doc) in documents {
        let api = str_at(doc, &["apiVersion"]).unwrap_or_default();
        if !api.starts_with("source.toolkit.fluxcd.io/") {
            continue;
        }
        let kind = str_at(doc, &["kind"]).unwrap_or_default();
        if !matches!(kind, "GitRepository" | "OCIRepository" | "HelmRepository") {
            continue;
        }
        let Some(name) = str_at(doc, &["metadata", "name"]) else {
            errors.push(missing(at, "metadata.name"));
            continue;
        };
        let Some(url) = str_at(doc, &["spec", "url"]) else {
            errors.push(missing(at, "spec.url"));
            continue;
        };
        let namespace = str_at(doc, &["metadata", "namespace"]).unwrap_or("flux-system");
        let reference = ["branch", "tag", "semver", "commit"]
            .iter()
            .find_map(|key| str_at(doc, &["spec", "ref", key]))
            .map(str::to_owned);
        sources.insert(
            (kind.to_owned(), namespace.to_owned(), name.to_owned()),
            FluxSource {
                url: url.to_owned(),
                tag: str_at(doc, &["spec", "ref", "tag"]).map(str::to_owned),
                reference,
                oci: kind == "OCIRepository" || str_at(doc, &["spec", "type"]) == Some("oci"),
            },
        );
    }
    sources
}

/// Name and namespace of a manifest's object (`default_namespace` when it gives none).
fn object_name(
    at: &str,
    doc: &Value,
    default_namespace: &str,
) -> Result<(String, String), InputError> {
    let name = str_at(doc, &["metadata", "name"]).ok_or_else(|| missing(at, "metadata.name"))?;
    let namespace = str_at(doc, &["metadata", "namespace"]).unwrap_or(default_namespace);
    Ok((namespace.to_owned(), name.to_owned()))
}

fn argo_application(at: &str, doc: &Value) -> Result<DeclaredApp, InputError> {
    let (namespace, name) = object_name(at, doc, "argocd")?;
    let (source, field) = match doc.get("spec").and_then(|s| s.get("source")) {
        Some(source) => (source, "spec.source"),
        None => match doc
            .get("spec")
            .and_then(|s| s.get("sources"))
            .and_then(|s| s.get(0))
        {
            Some(source) => (source, "spec.sources[0]"),
            None => return Err(missing(at, "spec.source")),
        },
    };
    let url =
        str_at(source, &["repoURL"]).ok_or_else(|| missing(at, &format!("{field}.repoURL")))?;
    let target = str_at(source, &["targetRevision"]);
    let source = match str_at(source, &["chart"]) {
        Some(chart) => AppSource::Helm {
            repository: url.to_owned(),
            chart: chart.to_owned(),
        },
        None => AppSource::Git {
            url: url.to_owned(),
            path: str_at(source, &["path"]).unwrap_or(".").to_owned(),
            reference: target.unwrap_or("HEAD").to_owned(),
        },
    };
    Ok(DeclaredApp {
        origin: at.to_owned(),
        kind: ObjectKind::Application,
        app_namespace: str_at(doc, &["spec", "destination", "namespace"])
            .unwrap_or(&namespace)
            .to_owned(),
        namespace,
        name,
        source,
        reconciler: ReconcilerKind::ArgoApplication,
        version: target.map(str::to_owned),
    })
}

/// The source a Flux object's `sourceRef` (at `path`) names, looked up among the manifests'.
fn source_ref<'a>(
    at: &str,
    doc: &Value,
    path: &[&str],
    namespace: &str,
    sources: &'a BTreeMap<SourceKey, FluxSource>,
) -> Result<&'a FluxSource, InputError> {
    let field = path.join(".");
    let reference = path.iter().try_fold(doc, |v, key| v.get(*key));
    let reference = reference.ok_or_else(|| missing(at, &field))?;
    let kind = str_at(reference, &["kind"]).ok_or_else(|| missing(at, &format!("{field}.kind")))?;
    let name = str_at(reference, &["name"]).ok_or_else(|| missing(at, &format!("{field}.name")))?;
    let source_namespace = str_at(reference, &["namespace"]).unwrap_or(namespace);
    sources
        .get(&(kind.to_owned(), source_namespace.to_owned(), name.to_owned()))
        .ok_or_else(|| InputError {
            at: format!("{at} {field}"),
            message: format!(
                "{kind} {source_namespace}/{name} is not among the manifests given (pass the file that declares it with --manifests)"
            ),
        })
}

fn helm_release(
    at: &str,
    doc: &Value,
    sources: &BTreeMap<SourceKey, FluxSource>,
) -> Result<DeclaredApp, InputError> {
    let (namespace, name) = object_name(at, doc, "default")?;
    let app_namespace = str_at(doc, &["spec", "targetNamespace"])
        .unwrap_or(&namespace)
        .to_owned();
    let (source, version) = if doc.get("spec").and_then(|s| s.get("chartRef")).is_some() {
        // A chart from an OCIRepository: its tag is the chart's version.
        let found = source_ref(at, doc, &["spec", "chartRef"], &namespace, sources)?;
        let chart = found.url.rsplit('/').next().unwrap_or(&name).to_owned();
        let repository = found
            .url
            .rsplit_once('/')
            .map_or(found.url.as_str(), |(r, _)| r);
        (
            AppSource::Helm {
                repository: repository.to_owned(),
                chart,
            },
            found.tag.clone(),
        )
    } else {
        let chart = str_at(doc, &["spec", "chart", "spec", "chart"])
            .ok_or_else(|| missing(at, "spec.chart.spec.chart"))?;
        let found = source_ref(
            at,
            doc,
            &["spec", "chart", "spec", "sourceRef"],
            &namespace,
            sources,
        )?;
        (
            AppSource::Helm {
                repository: found.url.clone(),
                chart: chart.to_owned(),
            },
            str_at(doc, &["spec", "chart", "spec", "version"]).map(str::to_owned),
        )
    };
    Ok(DeclaredApp {
        origin: at.to_owned(),
        kind: ObjectKind::HelmRelease,
        namespace,
        name,
        source,
        reconciler: ReconcilerKind::FluxHelmRelease,
        app_namespace,
        version,
    })
}

fn kustomization(
    at: &str,
    doc: &Value,
    sources: &BTreeMap<SourceKey, FluxSource>,
) -> Result<DeclaredApp, InputError> {
    let (namespace, name) = object_name(at, doc, "flux-system")?;
    let found = source_ref(at, doc, &["spec", "sourceRef"], &namespace, sources)?;
    let path = str_at(doc, &["spec", "path"]).unwrap_or("./").to_owned();
    let source = if found.oci {
        AppSource::Oci {
            url: found.url.clone(),
        }
    } else {
        AppSource::Git {
            url: found.url.clone(),
            path,
            reference: found.reference.clone().unwrap_or_else(|| "main".into()),
        }
    };
    Ok(DeclaredApp {
        origin: at.to_owned(),
        kind: ObjectKind::Kustomization,
        app_namespace: str_at(doc, &["spec", "targetNamespace"])
            .unwrap_or(&namespace)
            .to_owned(),
        namespace,
        name,
        source,
        reconciler: ReconcilerKind::FluxKustomization,
        version: found.tag.clone().or_else(|| found.reference.clone()),
    })
}

/// One cluster of the inventory CSV.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InventoryRow {
    /// `file:line`.
    pub origin: String,
    pub cluster: String,
    pub group: Option<String>,
    pub environment: Option<String>,
    pub reconciler: Option<String>,
    pub labels: Labels,
}

/// The columns with a meaning of their own; every other column is a label of that name.
pub const INVENTORY_COLUMNS: [&str; 4] = ["cluster", "group", "environment", "reconciler"];

/// Splits one CSV line: fields separated by `,`, a field in double quotes may hold `,` and
/// `""` for a quote.
fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (_, c) => field.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed".into());
    }
    fields.push(field);
    Ok(fields.into_iter().map(|f| f.trim().to_owned()).collect())
}

/// Reads the inventory CSV: a header naming `cluster` and any of `group`, `environment`,
/// `reconciler`, and label columns; one cluster per line. Values are checked as the platform
/// repo checks them; every problem is returned at once.
pub fn read_inventory(path: &Path) -> Result<Vec<InventoryRow>, Vec<InputError>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| {
        vec![InputError {
            at: file.clone(),
            message: format!("cannot read: {err}"),
        }]
    })?;
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with('#'));
    let Some((header_line, header)) = lines.next() else {
        return Err(vec![InputError {
            at: file,
            message: "is empty: the first line names the columns (cluster,group,environment,reconciler, then labels)".into(),
        }]);
    };
    let at_header = format!("{file}:{}", header_line + 1);
    let header = csv_fields(header).map_err(|message| {
        vec![InputError {
            at: at_header.clone(),
            message,
        }]
    })?;
    let mut errors = Vec::new();
    check_header(&at_header, &header, &mut errors);
    let mut rows = Vec::new();
    let mut seen = BTreeMap::new();
    for (number, line) in lines {
        let at = format!("{file}:{}", number + 1);
        match inventory_row(&at, &header, line) {
            Ok(row) => {
                if let Some(first) = seen.insert(row.cluster.clone(), at.clone()) {
                    errors.push(InputError {
                        at: format!("{at} cluster"),
                        message: format!("cluster {:?} is also on {first}", row.cluster),
                    });
                }
                rows.push(row);
            }
            Err(mut problems) => errors.append(&mut problems),
        }
    }
    if errors.is_empty() {
        Ok(rows)
    } else {
        Err(errors)
    }
}

fn check_header(at: &str, header: &[String], errors: &mut Vec<InputError>) {
    if !header.iter().any(|h| h == "cluster") {
        errors.push(InputError {
            at: at.to_owned(),
            message: "the header has no `cluster` column".into(),
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for column in header {
        if !seen.insert(column) {
            errors.push(InputError {
                at: at.to_owned(),
                message: format!("column {column:?} appears twice"),
            });
        } else if !INVENTORY_COLUMNS.contains(&column.as_str()) {
            if let Err(err) = fleetscope_model::selector::validate_label_key(column) {
                errors.push(InputError {
                    at: format!("{at} {column}"),
                    message: format!(
                        "a column other than {} is a label: {err}",
                        INVENTORY_COLUMNS.join(", ")
                    ),
                });
            }
        }
    }
}

fn inventory_row(at: &str, header: &[String], line: &str) -> Result<InventoryRow, Vec<InputError>> {
    let fields = csv_fields(line).map_err(|message| {
        vec![InputError {
            at: at.to_owned(),
            message,
        }]
    })?;
    if fields.len() != header.len() {
        return Err(vec![InputError {
            at: at.to_owned(),
            message: format!("{} fields, the header has {}", fields.len(), header.len()),
        }]);
    }
    let mut row = InventoryRow {
        origin: at.to_owned(),
        ..InventoryRow::default()
    };
    let mut errors = Vec::new();
    let mut problem = |column: &str, message: String| {
        errors.push(InputError {
            at: format!("{at} {column}"),
            message,
        })
    };
    for (column, value) in header.iter().zip(fields) {
        match column.as_str() {
            "cluster" => match fleetscope_model::ClusterId::parse(&value) {
                Ok(_) => row.cluster = value,
                Err(err) => problem(column, err.to_string()),
            },
            _ if value.is_empty() => {}
            "group" => match fleetscope_model::GroupPath::parse(&value) {
                Ok(_) => row.group = Some(value),
                Err(err) => problem(column, err.to_string()),
            },
            "environment" => match fleetscope_model::ids::validate_dns_label("environment", &value)
            {
                Ok(()) => row.environment = Some(value),
                Err(err) => problem(column, err.to_string()),
            },
            "reconciler" => match fleetscope_model::Reconciler::parse(&value) {
                Some(_) => row.reconciler = Some(value),
                None => problem(
                    column,
                    format!("{value:?} is not a reconciler (flux or argocd)"),
                ),
            },
            key => match fleetscope_model::selector::validate_label_value(key, &value) {
                Ok(()) => {
                    row.labels.insert(key.to_owned(), value);
                }
                Err(err) => problem(column, err.to_string()),
            },
        }
    }
    if errors.is_empty() {
        Ok(row)
    } else {
        Err(errors)
    }
}
