//! What `kubectl apply -k` would have created: the objects of the agent's manifests, read.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::front::Rule;

/// Decodes standard base64 (a Secret's `data`).
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
    {
        let value = ALPHABET
            .iter()
            .position(|c| *c == byte)
            .unwrap_or_else(|| panic!("not base64: {text}")) as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    out
}

/// The objects `kubectl kustomize` built, by kind.
#[derive(Debug, Default)]
pub(super) struct Applied {
    pub(super) namespaces: BTreeSet<String>,
    /// (namespace, name) → keys.
    pub(super) config_maps: BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>,
    pub(super) secrets: BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>,
    pub(super) claims: BTreeSet<(String, String)>,
    pub(super) service_accounts: BTreeSet<(String, String)>,
    pub(super) cluster_roles: BTreeMap<String, Vec<Rule>>,
    /// user → the ClusterRoles bound to it.
    pub(super) bindings: BTreeMap<String, Vec<String>>,
    pub(super) deployments: Vec<Value>,
}

impl Applied {
    pub(super) fn read(objects: Vec<Value>) -> Applied {
        let mut applied = Applied::default();
        let text = |value: &Value, pointer: &str| {
            value
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        for object in &objects {
            let (kind, name) = (text(object, "/kind"), text(object, "/metadata/name"));
            let key = (text(object, "/metadata/namespace"), name.clone());
            let namespace = key.0.clone();
            assert!(
                namespace.is_empty() || applied.namespaces.contains(&namespace),
                "{kind} {name} is in namespace {namespace}, which the manifests do not create before it"
            );
            match kind.as_str() {
                "Namespace" => {
                    applied.namespaces.insert(name);
                }
                "ServiceAccount" => {
                    applied.service_accounts.insert(key);
                }
                "ConfigMap" | "Secret" => {
                    let mut keys: BTreeMap<String, Vec<u8>> = BTreeMap::new();
                    let decode = kind == "Secret";
                    for (field, encoded) in [("data", decode), ("stringData", false)] {
                        for (k, v) in object[field].as_object().into_iter().flatten() {
                            let v = v.as_str().expect("a string value");
                            let bytes = if encoded { base64_decode(v) } else { v.into() };
                            keys.insert(k.clone(), bytes);
                        }
                    }
                    let map = if decode {
                        &mut applied.secrets
                    } else {
                        &mut applied.config_maps
                    };
                    map.insert(key, keys);
                }
                "PersistentVolumeClaim" => {
                    applied.claims.insert(key);
                }
                "ClusterRole" => {
                    let rules = object["rules"].as_array().cloned().unwrap_or_default();
                    let rules = rules.iter().map(Rule::read).collect();
                    applied.cluster_roles.insert(name, rules);
                }
                "ClusterRoleBinding" => {
                    assert_eq!(text(object, "/roleRef/kind"), "ClusterRole", "{object:#}");
                    for subject in object["subjects"].as_array().into_iter().flatten() {
                        assert_eq!(text(subject, "/kind"), "ServiceAccount", "{object:#}");
                        let user = format!(
                            "system:serviceaccount:{}:{}",
                            text(subject, "/namespace"),
                            text(subject, "/name")
                        );
                        let role = text(object, "/roleRef/name");
                        applied.bindings.entry(user).or_default().push(role);
                    }
                }
                "Deployment" => applied.deployments.push(object.clone()),
                other => {
                    panic!("the agent's manifests hold a {other}, which the test does not apply")
                }
            }
        }
        applied
    }

    /// The rules the user is granted.
    pub(super) fn rules_of(&self, user: &str) -> Vec<Rule> {
        self.bindings
            .get(user)
            .into_iter()
            .flatten()
            .filter_map(|role| self.cluster_roles.get(role))
            .flatten()
            .cloned()
            .collect()
    }
}

/// A Deployment's one container as a process: its program, arguments and environment with
/// volumes as directories under `root`, and the service account it runs as.
#[derive(Debug)]
pub(super) struct Pod {
    pub(super) args: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) service_account: String,
}

impl Applied {
    /// What the kubelet would run for `deployment`, its volumes made under `root`.
    pub(super) fn pod(&self, deployment: &Value, root: &std::path::Path) -> Pod {
        let namespace = deployment["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        let replicas = deployment["spec"]["replicas"].as_u64().unwrap_or(1);
        assert_eq!(replicas, 1, "the agent's Deployment runs one replica");
        let spec = &deployment["spec"]["template"]["spec"];
        let account = spec["serviceAccountName"].as_str().unwrap_or("default");
        assert!(
            self.service_accounts
                .contains(&(namespace.to_owned(), account.to_owned())),
            "the Deployment runs as service account {account}, which the manifests do not create"
        );
        assert_ne!(
            spec["automountServiceAccountToken"],
            Value::Bool(false),
            "the agent needs its service account's token"
        );
        let containers = spec["containers"].as_array().expect("containers");
        assert_eq!(containers.len(), 1, "the agent's pod has one container");
        let container = &containers[0];
        let image = container["image"].as_str().unwrap_or_default();
        assert!(image.contains("fleetscope"), "image {image}");
        assert!(
            container["command"].is_null(),
            "the container runs the image's entrypoint, fleetscope"
        );
        let mut volumes: BTreeMap<String, std::path::PathBuf> = BTreeMap::new();
        for volume in spec["volumes"].as_array().into_iter().flatten() {
            let name = volume["name"].as_str().expect("a volume name");
            let dir = root.join("volumes").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            if let Some(secret) = volume["secret"]["secretName"].as_str() {
                let keys = self
                    .secrets
                    .get(&(namespace.to_owned(), secret.to_owned()))
                    .unwrap_or_else(|| panic!("volume {name}: no Secret {secret}"));
                for (key, value) in keys {
                    std::fs::write(dir.join(key), value).unwrap();
                }
            } else if let Some(claim) = volume["persistentVolumeClaim"]["claimName"].as_str() {
                assert!(
                    self.claims
                        .contains(&(namespace.to_owned(), claim.to_owned())),
                    "volume {name}: no PersistentVolumeClaim {claim}"
                );
            } else {
                assert!(volume["emptyDir"].is_object(), "volume {volume}");
            }
            volumes.insert(name.to_owned(), dir);
        }
        let mut mounts: Vec<(String, std::path::PathBuf)> = Vec::new();
        for mount in container["volumeMounts"].as_array().into_iter().flatten() {
            assert!(mount["subPath"].is_null(), "mount {mount}: subPath");
            let name = mount["name"].as_str().expect("a mount's volume");
            let dir = volumes
                .get(name)
                .unwrap_or_else(|| panic!("mount of unknown volume {name}"));
            let path = mount["mountPath"].as_str().expect("a mountPath").to_owned();
            mounts.push((path, dir.clone()));
        }
        mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        let on_disk = |value: &str| -> String {
            for (path, dir) in &mounts {
                let rest = value.split_once(path.as_str()).filter(|(before, after)| {
                    (before.is_empty() || before.ends_with('='))
                        && (after.is_empty() || after.starts_with('/'))
                });
                if let Some((before, after)) = rest {
                    return format!("{before}{}{after}", dir.display());
                }
            }
            value.to_owned()
        };
        let args = container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|arg| on_disk(arg.as_str().expect("a string argument")))
            .collect();
        let mut env = Vec::new();
        for variable in container["env"].as_array().into_iter().flatten() {
            let name = variable["name"]
                .as_str()
                .expect("a variable name")
                .to_owned();
            let value = if let Some(value) = variable["value"].as_str() {
                value.to_owned()
            } else {
                let from = &variable["valueFrom"];
                let (map, reference) = if from["configMapKeyRef"].is_object() {
                    (&self.config_maps, &from["configMapKeyRef"])
                } else {
                    (&self.secrets, &from["secretKeyRef"])
                };
                let source = reference["name"].as_str().expect("a reference's name");
                let key = reference["key"].as_str().expect("a reference's key");
                let bytes = map
                    .get(&(namespace.to_owned(), source.to_owned()))
                    .and_then(|keys| keys.get(key))
                    .unwrap_or_else(|| panic!("{name}: no key {key} in {source}"));
                String::from_utf8(bytes.clone()).unwrap()
            };
            env.push((name, on_disk(&value)));
        }
        Pod {
            args,
            env,
            service_account: format!("system:serviceaccount:{namespace}:{account}"),
        }
    }
}
