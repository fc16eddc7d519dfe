//! Validation of the Kubernetes manifests in `deploy/kubernetes/`.
//!
//! - [`yaml`] reads YAML documents into JSON values, refusing what different YAML versions
//!   would read differently.
//! - [`typed`] checks a core Kubernetes object against the k8s-openapi type of its apiVersion
//!   and kind: it must deserialize, serializing it back must keep every field (k8s-openapi
//!   drops unknown fields silently), and the fields the API server requires but the types
//!   leave optional must be there.
//! - [`crd`] checks a custom resource against the `openAPIV3Schema` of its
//!   CustomResourceDefinition (the prometheus-operator CRDs are vendored in `testdata/`).
//! - [`kustomize`] builds a kustomization with the subset of kustomize these manifests use,
//!   and refuses every other feature.
//!
//! The tests in `tests/` apply all of it to every file and every build, plus Fleetscope's own
//! rules (dashboards and alert rules equal to their sources, flags the binary accepts, the
//! agent's read-only RBAC).

#![forbid(unsafe_code)]

pub mod crd;
pub mod kustomize;
pub mod typed;
pub mod yaml;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `deploy/kubernetes/`.
pub fn manifests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    manifests_dir().join("../..")
}

/// The prometheus-operator CRDs the monitoring objects are checked against.
pub fn monitoring_crds() -> anyhow::Result<Vec<crd::Crd>> {
    let dir = manifests_dir().join("testdata/crds");
    let mut crds = Vec::new();
    for name in [
        "monitoring.coreos.com_servicemonitors.yaml",
        "monitoring.coreos.com_prometheusrules.yaml",
    ] {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)?;
        crds.push(crd::Crd::parse(&text).map_err(|err| anyhow::anyhow!("{name}: {err}"))?);
    }
    Ok(crds)
}

/// What any object is checked against: the k8s-openapi types, or a CRD's schema.
#[derive(Debug)]
pub struct Validator {
    crds: Vec<crd::Crd>,
}

impl Validator {
    pub fn new(crds: Vec<crd::Crd>) -> Validator {
        Validator { crds }
    }

    /// With the vendored prometheus-operator CRDs.
    pub fn with_monitoring_crds() -> anyhow::Result<Validator> {
        Ok(Validator::new(monitoring_crds()?))
    }

    /// Every problem of `object`, each starting with the path of the field it is about.
    pub fn validate(&self, object: &Value) -> Result<(), Vec<String>> {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        let (Some(api_version), Some(kind)) = (api_version, kind) else {
            return Err(vec!["apiVersion and kind are required".to_owned()]);
        };
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        if let Some(crd) = self
            .crds
            .iter()
            .find(|crd| crd.group == group && crd.kind == kind)
        {
            return crd.validate(version, object);
        }
        typed::validate(api_version, kind, object)
    }
}

/// A short name for an object in messages: `Deployment fleetscope/fleetscope-hub`.
pub fn describe(object: &Value) -> String {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("?");
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Every file below `dir` (sorted, recursively), skipping the folders named in `skip`.
pub fn files_below(dir: &Path, skip: &[&str]) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            if !skip.iter().any(|s| entry.file_name() == *s) {
                out.extend(files_below(&path, skip)?);
            }
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

/// The PrometheusRule of `base/prometheusrule.yaml`, made from the text of
/// `dashboards/prometheus/fleetscope-rules.yaml`: the rules file becomes the object's `spec`
/// as it is, comments included.
pub fn prometheus_rule_text(rules: &str) -> String {
    let mut out = String::from(
        "# GENERATED from dashboards/prometheus/fleetscope-rules.yaml: do not edit here; edit the\n\
         # rules there and run `UPDATE_MANIFESTS=1 cargo test -p fleetscope-deploy-kubernetes`.\n\
         #\n\
         # Your Prometheus selects PrometheusRules by label (kube-prometheus-stack: `release: <its\n\
         # release name>` unless ruleSelectorNilUsesHelmValues is false): add that label in an\n\
         # overlay if it needs one.\n\
         apiVersion: monitoring.coreos.com/v1\n\
         kind: PrometheusRule\n\
         metadata:\n  name: fleetscope\n  namespace: fleetscope\n  labels:\n    app.kubernetes.io/name: fleetscope\n\
         spec:\n",
    );
    for line in rules.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
