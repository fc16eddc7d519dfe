//! CustomResourceDefinitions: applying them from files or text, and waiting until they are
//! established and served.

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{LocalApiServer, LocalApiServerError, Result};

/// The path of the CRD API.
pub(crate) const CRD_API: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// How long a CRD gets to be established and served.
const CRD_LIMIT: Duration = Duration::from_secs(30);

/// How often a CRD is looked at while waiting for it.
const POLL: Duration = Duration::from_millis(50);

impl LocalApiServer {
    /// Applies every `*.yaml`, `*.yml` and `*.json` file in `dir` (in name order) as CRDs and
    /// waits until each is established and served. Returns the CRD names.
    pub fn install_crd_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let entries = std::fs::read_dir(dir).map_err(|source| LocalApiServerError::Read {
            path: dir.to_owned(),
            source,
        })?;
        let mut files = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|source| LocalApiServerError::Read {
                    path: dir.to_owned(),
                    source,
                })?
                .path();
            let is_manifest = path
                .extension()
                .and_then(OsStr::to_str)
                .is_some_and(|ext| matches!(ext, "yaml" | "yml" | "json"));
            if is_manifest && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        let mut names = Vec::new();
        for file in files {
            names.extend(self.apply_crd_file(&file)?);
        }
        for name in &names {
            self.wait_for_crd(name)?;
        }
        Ok(names)
    }

    /// Applies the CRDs in a YAML (or JSON) file; see [`LocalApiServer::apply_crd_yaml`].
    pub fn apply_crd_file(&self, path: &Path) -> Result<Vec<String>> {
        let text = std::fs::read_to_string(path).map_err(|source| LocalApiServerError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.apply_crds(&text, &path.display().to_string())
    }

    /// Creates every CustomResourceDefinition in `yaml` (one or more documents), or replaces
    /// one that already exists. Returns their names (`<plural>.<group>`), which
    /// [`LocalApiServer::wait_for_crd`] takes; this does not wait.
    pub fn apply_crd_yaml(&self, yaml: &str) -> Result<Vec<String>> {
        self.apply_crds(yaml, "the CRD YAML")
    }

    /// Creates or replaces every CRD in `yaml`, read from `origin`; returns their names.
    fn apply_crds(&self, yaml: &str, origin: &str) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for (index, mut crd) in yaml_documents(yaml, origin)?.into_iter().enumerate() {
            let name = crd_name(&crd).ok_or_else(|| LocalApiServerError::NotACrd {
                origin: origin.to_owned(),
                index,
                api_version: string_at(&crd, "/apiVersion"),
                kind: string_at(&crd, "/kind"),
            })?;
            match self.post_json(CRD_API, &crd) {
                Ok(_) => {}
                Err(LocalApiServerError::Status { status: 409, .. }) => {
                    let path = format!("{CRD_API}/{name}");
                    let existing = self.get_json(&path)?;
                    if let (Some(version), Some(metadata)) = (
                        existing.pointer("/metadata/resourceVersion").cloned(),
                        crd.pointer_mut("/metadata").and_then(Value::as_object_mut),
                    ) {
                        metadata.insert("resourceVersion".to_owned(), version);
                    }
                    self.put_json(&path, &crd)?;
                }
                Err(err) => return Err(err),
            }
            names.push(name);
        }
        Ok(names)
    }

    /// Waits until the CRD `name` (`<plural>.<group>`, for example
    /// `kustomizations.kustomize.toolkit.fluxcd.io`) is Established and every served version
    /// answers a list request.
    pub fn wait_for_crd(&self, name: &str) -> Result<()> {
        let path = format!("{CRD_API}/{name}");
        let started = Instant::now();
        let mut last = String::from("nothing yet");
        while started.elapsed() < CRD_LIMIT {
            match self.get_json(&path) {
                Ok(crd) => match crd_serving_paths(&crd) {
                    None => last = format!("not established; status {}", crd["status"]),
                    Some(lists) => {
                        let unserved = lists.iter().find(|list| self.get_json(list).is_err());
                        match unserved {
                            None => return Ok(()),
                            Some(list) => last = format!("established, but {list} is not served"),
                        }
                    }
                },
                Err(err) => last = err.to_string(),
            }
            std::thread::sleep(POLL);
        }
        Err(LocalApiServerError::CrdNotServed {
            name: name.to_owned(),
            waited: CRD_LIMIT,
            last,
        })
    }
}

/// Every non-empty document of a YAML (or JSON) text, as JSON values.
fn yaml_documents(yaml: &str, origin: &str) -> Result<Vec<Value>> {
    use serde::Deserialize as _;
    let mut documents = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(yaml).enumerate() {
        let value = Value::deserialize(document).map_err(|source| LocalApiServerError::Yaml {
            origin: origin.to_owned(),
            index,
            source,
        })?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

/// The text at `pointer` in `value`, or empty.
fn string_at(value: &Value, pointer: &str) -> String {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// The name of a v1 CRD object, or `None` when `value` is not one.
fn crd_name(value: &Value) -> Option<String> {
    let is_crd = string_at(value, "/apiVersion") == "apiextensions.k8s.io/v1"
        && string_at(value, "/kind") == "CustomResourceDefinition";
    let name = string_at(value, "/metadata/name");
    (is_crd && !name.is_empty()).then_some(name)
}

/// For an established CRD, the list path of every served version; `None` until established.
fn crd_serving_paths(crd: &Value) -> Option<Vec<String>> {
    let established = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .any(|condition| condition["type"] == "Established" && condition["status"] == "True");
    if !established {
        return None;
    }
    let group = string_at(crd, "/spec/group");
    let plural = string_at(crd, "/spec/names/plural");
    let paths = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)?
        .iter()
        .filter(|version| version["served"] == true)
        .filter_map(|version| version["name"].as_str())
        .map(|version| format!("/apis/{group}/{version}/{plural}?limit=1"))
        .collect();
    Some(paths)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn yaml_documents_skip_empty_ones_and_name_crds() {
        let text = "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n";
        let documents = yaml_documents(text, "test").unwrap();
        assert_eq!(documents.len(), 2);
        assert_eq!(
            crd_name(&documents[0]).as_deref(),
            Some("widgets.example.com")
        );
        assert_eq!(crd_name(&documents[1]), None);

        let err = yaml_documents("a: [", "broken.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("broken.yaml"), "{err}");
    }

    #[test]
    fn serving_paths_wait_for_established() {
        let mut crd = json!({
            "spec": {
                "group": "example.com",
                "names": { "plural": "widgets" },
                "versions": [
                    { "name": "v1", "served": true },
                    { "name": "v1beta1", "served": false },
                ],
            },
            "status": { "conditions": [{ "type": "NamesAccepted", "status": "True" }] },
        });
        assert_eq!(crd_serving_paths(&crd), None);
        crd["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "type": "Established", "status": "True" }));
        assert_eq!(
            crd_serving_paths(&crd),
            Some(vec!["/apis/example.com/v1/widgets?limit=1".to_owned()])
        );
    }
}
