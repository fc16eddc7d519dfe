//! Core Kubernetes objects checked against the k8s-openapi types.
//!
//! The types alone let a lot through: unknown fields are dropped without a word, and a missing
//! required field (a container's `name`, a rule's `verbs`) silently becomes its default. So an
//! object is deserialized, serialized back, and the two compared:
//!
//! - a field of the original that the round trip lost is unknown to the type;
//! - a field the round trip has and the original had not is a required field that was
//!   missing (k8s-openapi writes required fields always, optional ones only when set);
//! - a value that came back different was coerced.
//!
//! Then the rules the API server applies beyond the OpenAPI document, for the kinds used
//! here: names, a Deployment's selector matching its pod template, an image per container,
//! references between volumes and mounts, and so on.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::{apps, autoscaling, batch, core, policy, rbac};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Checks `object`, of the given apiVersion and kind, against its k8s-openapi type. Returns
/// every problem, each starting with the path of its field.
pub fn validate(api_version: &str, kind: &str, object: &Value) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    match (api_version, kind) {
        ("v1", "Namespace") => namespace(object, &mut problems),
        ("v1", "ConfigMap") => config_map(object, &mut problems),
        ("v1", "Secret") => secret(object, &mut problems),
        ("v1", "ServiceAccount") => service_account(object, &mut problems),
        ("v1", "Service") => service_object(object, &mut problems),
        ("v1", "PersistentVolumeClaim") => persistent_volume_claim(object, &mut problems),
        ("apps/v1", "Deployment") => deployment(object, &mut problems),
        ("batch/v1", "Job") => job(object, &mut problems),
        ("policy/v1", "PodDisruptionBudget") => pod_disruption_budget(object, &mut problems),
        ("autoscaling/v2", "HorizontalPodAutoscaler") => horizontal_pod_autoscaler(object, &mut problems),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => cluster_role(object, &mut problems),
        ("rbac.authorization.k8s.io/v1", "Role") => role(object, &mut problems),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => cluster_role_binding(object, &mut problems),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => role_binding(object, &mut problems),
        _ => problems.push(format!(
            "no typed model for apiVersion {api_version:?} kind {kind:?}; add one before using the kind"
        )),
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// A Namespace: its name.
fn namespace(object: &Value, problems: &mut Vec<String>) {
    if let Some(ns) = roundtrip::<core::v1::Namespace>(object, problems) {
        metadata(&ns.metadata, Scope::Cluster, NameRule::Label, problems);
    }
}

/// A ConfigMap: its name and data keys, none both in data and binaryData.
fn config_map(object: &Value, problems: &mut Vec<String>) {
    if let Some(cm) = roundtrip::<core::v1::ConfigMap>(object, problems) {
        metadata(
            &cm.metadata,
            Scope::Namespaced,
            NameRule::Subdomain,
            problems,
        );
        let data: BTreeSet<&String> = cm.data.iter().flat_map(|d| d.keys()).collect();
        let binary: BTreeSet<&String> = cm.binary_data.iter().flat_map(|d| d.keys()).collect();
        data_keys(data.iter().chain(&binary).copied(), "data", problems);
        for key in data.intersection(&binary) {
            problems.push(format!("data.{key}: also in binaryData"));
        }
    }
}

/// A Secret: its name and data keys.
fn secret(object: &Value, problems: &mut Vec<String>) {
    if let Some(secret) = roundtrip::<core::v1::Secret>(object, problems) {
        metadata(
            &secret.metadata,
            Scope::Namespaced,
            NameRule::Subdomain,
            problems,
        );
        let keys = secret
            .data
            .iter()
            .flat_map(|d| d.keys())
            .chain(secret.string_data.iter().flat_map(|d| d.keys()));
        data_keys(keys, "data", problems);
    }
}

/// A ServiceAccount: its name.
fn service_account(object: &Value, problems: &mut Vec<String>) {
    if let Some(sa) = roundtrip::<core::v1::ServiceAccount>(object, problems) {
        metadata(
            &sa.metadata,
            Scope::Namespaced,
            NameRule::Subdomain,
            problems,
        );
    }
}

/// A Service: its name and spec.
fn service_object(object: &Value, problems: &mut Vec<String>) {
    if let Some(service) = roundtrip::<core::v1::Service>(object, problems) {
        metadata(
            &service.metadata,
            Scope::Namespaced,
            NameRule::Dns1035,
            problems,
        );
        self::service(service.spec.as_ref(), problems);
    }
}

/// A PersistentVolumeClaim: its name, an access mode and a storage request.
fn persistent_volume_claim(object: &Value, problems: &mut Vec<String>) {
    if let Some(pvc) = roundtrip::<core::v1::PersistentVolumeClaim>(object, problems) {
        metadata(
            &pvc.metadata,
            Scope::Namespaced,
            NameRule::Subdomain,
            problems,
        );
        match &pvc.spec {
            None => problems.push("spec: required".to_owned()),
            Some(spec) => {
                if spec.access_modes.as_ref().is_none_or(Vec::is_empty) {
                    problems.push("spec.accessModes: at least one is required".to_owned());
                }
                let storage = spec
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage"));
                if storage.is_none() {
                    problems.push("spec.resources.requests.storage: required".to_owned());
                }
            }
        }
    }
}

/// A Deployment: its name, a selector matching its pod template, and a pod spec whose pods restart Always.
fn deployment(object: &Value, problems: &mut Vec<String>) {
    if let Some(deployment) = roundtrip::<apps::v1::Deployment>(object, problems) {
        metadata(
            &deployment.metadata,
            Scope::Namespaced,
            NameRule::Subdomain,
            problems,
        );
        match &deployment.spec {
            None => problems.push("spec: required".to_owned()),
            Some(spec) => {
                selector_matches_template(&spec.selector, &spec.template, "spec", problems);
                if spec.template.spec.is_none() {
                    problems.push("spec.template.spec: required".to_owned());
                }
                if let Some(pod) = &spec.template.spec {
                    pod_spec(pod, "spec.template.spec", problems);
                    if pod.restart_policy.as_deref().is_some_and(|p| p != "Always") {
                        problems.push(
                            "spec.template.spec.restartPolicy: a Deployment's pods restart Always"
                                .to_owned(),
                        );
                    }
                }
            }
        }
    }
}

/// A Job: its name and a pod spec whose pods restart Never or OnFailure.
fn job(object: &Value, problems: &mut Vec<String>) {
    if let Some(job) = roundtrip::<batch::v1::Job>(object, problems) {
        metadata(
            &job.metadata,
            Scope::Namespaced,
            NameRule::Subdomain,
            problems,
        );
        match job.spec.as_ref().and_then(|s| s.template.spec.as_ref()) {
            None => problems.push("spec.template.spec: required".to_owned()),
            Some(pod) => {
                pod_spec(pod, "spec.template.spec", problems);
                if !matches!(pod.restart_policy.as_deref(), Some("Never" | "OnFailure")) {
                    problems.push(
                        "spec.template.spec.restartPolicy: a Job's pods need Never or OnFailure"
                            .to_owned(),
                    );
                }
            }
        }
    }
}

/// A PodDisruptionBudget: its name, a selector, and one of minAvailable and maxUnavailable.
fn pod_disruption_budget(object: &Value, problems: &mut Vec<String>) {
    if let Some(pdb) = roundtrip::<policy::v1::PodDisruptionBudget>(object, problems) {
        metadata(
            &pdb.metadata,
            Scope::Namespaced,
            NameRule::Subdomain,
            problems,
        );
        match &pdb.spec {
            None => problems.push("spec: required".to_owned()),
            Some(spec) => {
                if spec.selector.as_ref().is_none_or(selector_is_empty) {
                    problems.push(
                            "spec.selector: required (an empty selector selects every pod of the namespace)".to_owned(),
                        );
                }
                if spec.min_available.is_some() == spec.max_unavailable.is_some() {
                    problems
                        .push("spec: exactly one of minAvailable and maxUnavailable".to_owned());
                }
            }
        }
    }
}

/// A HorizontalPodAutoscaler: its name, replica bounds and scale target.
fn horizontal_pod_autoscaler(object: &Value, problems: &mut Vec<String>) {
    if let Some(hpa) = roundtrip::<autoscaling::v2::HorizontalPodAutoscaler>(object, problems) {
        metadata(
            &hpa.metadata,
            Scope::Namespaced,
            NameRule::Subdomain,
            problems,
        );
        match &hpa.spec {
            None => problems.push("spec: required".to_owned()),
            Some(spec) => {
                if spec.min_replicas.unwrap_or(1) < 1 {
                    problems.push("spec.minReplicas: at least 1".to_owned());
                }
                if spec.max_replicas < spec.min_replicas.unwrap_or(1) {
                    problems.push("spec.maxReplicas: less than minReplicas".to_owned());
                }
                let target = &spec.scale_target_ref;
                if target.name.is_empty() || target.kind.is_empty() {
                    problems.push("spec.scaleTargetRef: kind and name are required".to_owned());
                }
            }
        }
    }
}

/// A ClusterRole: its name and, unless aggregated, its rules.
fn cluster_role(object: &Value, problems: &mut Vec<String>) {
    if let Some(role) = roundtrip::<rbac::v1::ClusterRole>(object, problems) {
        metadata(&role.metadata, Scope::Cluster, NameRule::Path, problems);
        if role.aggregation_rule.is_none() {
            rules(role.rules.as_deref().unwrap_or_default(), problems);
        }
    }
}

/// A Role: its name and rules.
fn role(object: &Value, problems: &mut Vec<String>) {
    if let Some(role) = roundtrip::<rbac::v1::Role>(object, problems) {
        metadata(&role.metadata, Scope::Namespaced, NameRule::Path, problems);
        rules(role.rules.as_deref().unwrap_or_default(), problems);
    }
}

/// A ClusterRoleBinding: its name, a ClusterRole and its subjects.
fn cluster_role_binding(object: &Value, problems: &mut Vec<String>) {
    if let Some(binding) = roundtrip::<rbac::v1::ClusterRoleBinding>(object, problems) {
        metadata(&binding.metadata, Scope::Cluster, NameRule::Path, problems);
        role_ref(&binding.role_ref, &["ClusterRole"], problems);
        subjects(
            binding.subjects.as_deref().unwrap_or_default(),
            true,
            problems,
        );
    }
}

/// A RoleBinding: its name, its role and its subjects.
fn role_binding(object: &Value, problems: &mut Vec<String>) {
    if let Some(binding) = roundtrip::<rbac::v1::RoleBinding>(object, problems) {
        metadata(
            &binding.metadata,
            Scope::Namespaced,
            NameRule::Path,
            problems,
        );
        role_ref(&binding.role_ref, &["ClusterRole", "Role"], problems);
        subjects(
            binding.subjects.as_deref().unwrap_or_default(),
            false,
            problems,
        );
    }
}

/// Deserializes `object` as `T` and compares it with `T`'s serialization (see the module
/// documentation). `None` when it does not deserialize at all.
pub fn roundtrip<T: DeserializeOwned + Serialize>(
    object: &Value,
    problems: &mut Vec<String>,
) -> Option<T> {
    let typed: T = match serde_path_to_error::deserialize(object) {
        Ok(typed) => typed,
        Err(err) => {
            let path = err.path().to_string();
            problems.push(format!("{path}: {}", err.into_inner()));
            return None;
        }
    };
    let back = match serde_json::to_value(&typed) {
        Ok(back) => back,
        Err(err) => {
            problems.push(format!("cannot serialize it back: {err}"));
            return None;
        }
    };
    compare(object, &back, "", problems);
    Some(typed)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn compare(original: &Value, back: &Value, path: &str, problems: &mut Vec<String>) {
    match (original, back) {
        (Value::Object(original), Value::Object(back)) => {
            for (key, value) in original {
                let at = join(path, key);
                match back.get(key) {
                    None if value.is_null() => {
                        problems.push(format!("{at}: null; leave it out instead"))
                    }
                    None => problems.push(format!("{at}: unknown field")),
                    Some(other) => compare(value, other, &at, problems),
                }
            }
            for (key, value) in back {
                if !original.contains_key(key) {
                    problems.push(format!(
                        "{}: required field missing (it would become {value})",
                        join(path, key)
                    ));
                }
            }
        }
        (Value::Array(original), Value::Array(back)) if original.len() == back.len() => {
            for (index, (a, b)) in original.iter().zip(back).enumerate() {
                compare(a, b, &format!("{path}[{index}]"), problems);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => problems.push(format!("{path}: {a} was read as {b}")),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Scope {
    Namespaced,
    Cluster,
}

#[derive(Clone, Copy)]
enum NameRule {
    /// DNS-1123 subdomain: most kinds.
    Subdomain,
    /// DNS-1123 label: namespaces.
    Label,
    /// DNS-1035 label: services.
    Dns1035,
    /// Anything without `/` or `%`, not `.` or `..`: RBAC objects.
    Path,
}

fn is_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

fn name_ok(name: &str, rule: NameRule) -> bool {
    match rule {
        NameRule::Subdomain => name.len() <= 253 && name.split('.').all(is_label),
        NameRule::Label => is_label(name),
        NameRule::Dns1035 => is_label(name) && name.as_bytes()[0].is_ascii_lowercase(),
        NameRule::Path => {
            !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%'])
        }
    }
}

fn metadata(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    scope: Scope,
    rule: NameRule,
    problems: &mut Vec<String>,
) {
    match &meta.name {
        None => problems.push("metadata.name: required".to_owned()),
        Some(name) if !name_ok(name, rule) => problems.push(format!(
            "metadata.name: {name:?} is not a valid name for this kind"
        )),
        Some(_) => {}
    }
    match (scope, &meta.namespace) {
        (Scope::Namespaced, None) => problems.push(
            "metadata.namespace: required here (every namespaced object names its namespace)"
                .to_owned(),
        ),
        (Scope::Namespaced, Some(ns)) if !is_label(ns) => problems.push(format!(
            "metadata.namespace: {ns:?} is not a valid namespace"
        )),
        (Scope::Cluster, Some(_)) => {
            problems.push("metadata.namespace: this kind is cluster-scoped".to_owned())
        }
        _ => {}
    }
    for (key, value) in meta.labels.iter().flatten() {
        if !label_key_ok(key) {
            problems.push(format!("metadata.labels.{key}: not a valid label key"));
        }
        if !label_value_ok(value) {
            problems.push(format!(
                "metadata.labels.{key}: {value:?} is not a valid label value"
            ));
        }
    }
}

fn label_key_ok(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    prefix.is_none_or(|p| name_ok(p, NameRule::Subdomain))
        && label_value_ok(name)
        && !name.is_empty()
}

fn label_value_ok(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_none_or(u8::is_ascii_alphanumeric)
        && bytes.last().is_none_or(u8::is_ascii_alphanumeric)
}

fn data_keys<'a>(keys: impl Iterator<Item = &'a String>, at: &str, problems: &mut Vec<String>) {
    for key in keys {
        let ok = !key.is_empty()
            && key.len() <= 253
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !ok {
            problems.push(format!("{at}.{key}: not a valid key"));
        }
    }
}

fn selector_is_empty(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

fn selector_matches_template(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    template: &core::v1::PodTemplateSpec,
    at: &str,
    problems: &mut Vec<String>,
) {
    if selector.match_expressions.is_some() {
        problems.push(format!(
            "{at}.selector.matchExpressions: not supported by this validator; use matchLabels"
        ));
    }
    let wanted = selector.match_labels.clone().unwrap_or_default();
    if wanted.is_empty() {
        problems.push(format!("{at}.selector.matchLabels: required"));
    }
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    for (key, value) in &wanted {
        if labels.get(key) != Some(value) {
            problems.push(format!(
                "{at}.template.metadata.labels: the selector's {key}={value} is not among them"
            ));
        }
    }
}

fn service(spec: Option<&core::v1::ServiceSpec>, problems: &mut Vec<String>) {
    let Some(spec) = spec else {
        problems.push("spec: required".to_owned());
        return;
    };
    let ports = spec.ports.as_deref().unwrap_or_default();
    if ports.is_empty() {
        problems.push("spec.ports: at least one is required".to_owned());
    }
    let mut names = BTreeSet::new();
    for (index, port) in ports.iter().enumerate() {
        if ports.len() > 1 && port.name.is_none() {
            problems.push(format!(
                "spec.ports[{index}].name: required when there are several ports"
            ));
        }
        if let Some(name) = &port.name {
            if !names.insert(name) {
                problems.push(format!("spec.ports[{index}].name: {name:?} is used twice"));
            }
        }
        if !(1..=65535).contains(&port.port) {
            problems.push(format!(
                "spec.ports[{index}].port: {} is not a port",
                port.port
            ));
        }
    }
    if spec.type_.as_deref() != Some("ExternalName")
        && spec.selector.as_ref().is_none_or(BTreeMap::is_empty)
    {
        problems.push(
            "spec.selector: required (this validator does not allow manual endpoints)".to_owned(),
        );
    }
}

fn pod_spec(pod: &core::v1::PodSpec, at: &str, problems: &mut Vec<String>) {
    if pod.containers.is_empty() {
        problems.push(format!("{at}.containers: at least one is required"));
    }
    let volumes: BTreeMap<&str, &core::v1::Volume> = pod
        .volumes
        .iter()
        .flatten()
        .map(|v| (v.name.as_str(), v))
        .collect();
    for (index, volume) in pod.volumes.iter().flatten().enumerate() {
        let here = format!("{at}.volumes[{index}]");
        if !is_label(&volume.name) {
            problems.push(format!(
                "{here}.name: {:?} is not a valid name",
                volume.name
            ));
        }
        let sources = [
            volume.config_map.is_some(),
            volume.secret.is_some(),
            volume.empty_dir.is_some(),
            volume.persistent_volume_claim.is_some(),
            volume.host_path.is_some(),
            volume.projected.is_some(),
            volume.downward_api.is_some(),
        ];
        let other = serde_json::to_value(volume)
            .ok()
            .and_then(|v| v.as_object().map(|m| m.len()))
            .unwrap_or(0);
        if sources.iter().filter(|s| **s).count() != 1 || other != 2 {
            problems.push(format!("{here}: exactly one volume source is required"));
        }
        if let Some(secret) = &volume.secret {
            if secret.secret_name.as_deref().is_none_or(str::is_empty) {
                problems.push(format!("{here}.secret.secretName: required"));
            }
            mode(
                secret.default_mode,
                &format!("{here}.secret.defaultMode"),
                problems,
            );
        }
        if let Some(config_map) = &volume.config_map {
            if config_map.name.is_empty() {
                problems.push(format!("{here}.configMap.name: required"));
            }
            mode(
                config_map.default_mode,
                &format!("{here}.configMap.defaultMode"),
                problems,
            );
        }
        if let Some(pvc) = &volume.persistent_volume_claim {
            if pvc.claim_name.is_empty() {
                problems.push(format!("{here}.persistentVolumeClaim.claimName: required"));
            }
        }
    }
    if volumes.len() != pod.volumes.as_ref().map_or(0, Vec::len) {
        problems.push(format!("{at}.volumes: names must be unique"));
    }
    let mut names = BTreeSet::new();
    let all = pod
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (format!("{at}.initContainers[{i}]"), c))
        .chain(
            pod.containers
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("{at}.containers[{i}]"), c)),
        );
    for (here, container) in all {
        if !is_label(&container.name) {
            problems.push(format!(
                "{here}.name: {:?} is not a valid name",
                container.name
            ));
        }
        if !names.insert(container.name.clone()) {
            problems.push(format!(
                "{here}.name: {:?} is used twice in the pod",
                container.name
            ));
        }
        self::container(container, &volumes, &here, problems);
    }
}

fn mode(mode: Option<i32>, at: &str, problems: &mut Vec<String>) {
    if let Some(mode) = mode {
        if !(0..=0o777).contains(&mode) {
            problems.push(format!(
                "{at}: {mode} is not a file mode (0 to 0777, that is 511)"
            ));
        }
    }
}

fn container(
    container: &core::v1::Container,
    volumes: &BTreeMap<&str, &core::v1::Volume>,
    at: &str,
    problems: &mut Vec<String>,
) {
    if container.image.as_deref().is_none_or(str::is_empty) {
        problems.push(format!("{at}.image: required"));
    }
    let mut port_names = BTreeSet::new();
    for (index, port) in container.ports.iter().flatten().enumerate() {
        if let Some(name) = &port.name {
            if name.len() > 15 || !is_label(name) || !name.bytes().any(|b| b.is_ascii_lowercase()) {
                problems.push(format!(
                    "{at}.ports[{index}].name: {name:?} is not a valid port name"
                ));
            }
            if !port_names.insert(name.clone()) {
                problems.push(format!("{at}.ports[{index}].name: {name:?} is used twice"));
            }
        }
        if !(1..=65535).contains(&port.container_port) {
            problems.push(format!("{at}.ports[{index}].containerPort: not a port"));
        }
    }
    let mut env_names = BTreeSet::new();
    for (index, env) in container.env.iter().flatten().enumerate() {
        let here = format!("{at}.env[{index}]");
        if env.name.is_empty() || !env_names.insert(env.name.clone()) {
            problems.push(format!(
                "{here}.name: {:?} is empty or used twice",
                env.name
            ));
        }
        if let Some(from) = &env.value_from {
            if env.value.is_some() {
                problems.push(format!("{here}: value and valueFrom together"));
            }
            let refs = [
                from.config_map_key_ref.as_ref().map(|r| (&r.name, &r.key)),
                from.secret_key_ref.as_ref().map(|r| (&r.name, &r.key)),
            ];
            let set = refs.iter().flatten().count()
                + usize::from(from.field_ref.is_some())
                + usize::from(from.resource_field_ref.is_some());
            if set != 1 {
                problems.push(format!("{here}.valueFrom: exactly one source is required"));
            }
            for (name, key) in refs.into_iter().flatten() {
                if name.is_empty() || key.is_empty() {
                    problems.push(format!("{here}.valueFrom: name and key are required"));
                }
            }
        }
    }
    let mut mount_paths = BTreeSet::new();
    for (index, mount) in container.volume_mounts.iter().flatten().enumerate() {
        if !volumes.contains_key(mount.name.as_str()) {
            problems.push(format!(
                "{at}.volumeMounts[{index}].name: no volume {:?} in the pod",
                mount.name
            ));
        }
        if !mount.mount_path.starts_with('/') || !mount_paths.insert(mount.mount_path.clone()) {
            problems.push(format!(
                "{at}.volumeMounts[{index}].mountPath: {:?} is not absolute or is used twice",
                mount.mount_path
            ));
        }
    }
    for (name, probe) in [
        ("livenessProbe", &container.liveness_probe),
        ("readinessProbe", &container.readiness_probe),
        ("startupProbe", &container.startup_probe),
    ] {
        let Some(probe) = probe else { continue };
        let handlers = usize::from(probe.http_get.is_some())
            + usize::from(probe.tcp_socket.is_some())
            + usize::from(probe.exec.is_some())
            + usize::from(probe.grpc.is_some());
        if handlers != 1 {
            problems.push(format!("{at}.{name}: exactly one handler is required"));
        }
        if let Some(get) = &probe.http_get {
            let port_ok = match &get.port {
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(name) => {
                    port_names.contains(name)
                }
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(number) => container
                    .ports
                    .iter()
                    .flatten()
                    .any(|p| p.container_port == *number),
            };
            if !port_ok {
                problems.push(format!(
                    "{at}.{name}.httpGet.port: not a port of the container"
                ));
            }
            if !get.path.as_deref().is_some_and(|p| p.starts_with('/')) {
                problems.push(format!(
                    "{at}.{name}.httpGet.path: an absolute path is required"
                ));
            }
        }
        if name == "startupProbe" && probe.success_threshold.is_some_and(|t| t != 1) {
            problems.push(format!("{at}.{name}.successThreshold: must be 1"));
        }
    }
}

fn rules(rules: &[rbac::v1::PolicyRule], problems: &mut Vec<String>) {
    for (index, rule) in rules.iter().enumerate() {
        let at = format!("rules[{index}]");
        if rule.verbs.is_empty() {
            problems.push(format!("{at}.verbs: at least one is required"));
        }
        match &rule.non_resource_urls {
            Some(_) if rule.api_groups.is_some() || rule.resources.is_some() => problems.push(
                format!("{at}: nonResourceURLs do not go with apiGroups or resources"),
            ),
            Some(_) => {}
            None => {
                if rule.api_groups.is_none() {
                    problems.push(format!("{at}.apiGroups: required"));
                }
                if rule.resources.as_ref().is_none_or(Vec::is_empty) {
                    problems.push(format!("{at}.resources: at least one is required"));
                }
            }
        }
    }
}

fn role_ref(role_ref: &rbac::v1::RoleRef, kinds: &[&str], problems: &mut Vec<String>) {
    if role_ref.api_group != "rbac.authorization.k8s.io" {
        problems.push("roleRef.apiGroup: must be rbac.authorization.k8s.io".to_owned());
    }
    if !kinds.contains(&role_ref.kind.as_str()) {
        problems.push(format!("roleRef.kind: one of {kinds:?}"));
    }
    if role_ref.name.is_empty() {
        problems.push("roleRef.name: required".to_owned());
    }
}

fn subjects(subjects: &[rbac::v1::Subject], cluster: bool, problems: &mut Vec<String>) {
    if subjects.is_empty() {
        problems.push("subjects: at least one is required".to_owned());
    }
    for (index, subject) in subjects.iter().enumerate() {
        let at = format!("subjects[{index}]");
        match subject.kind.as_str() {
            "ServiceAccount" => {
                if subject.api_group.as_deref().is_some_and(|g| !g.is_empty()) {
                    problems.push(format!("{at}.apiGroup: empty for a ServiceAccount"));
                }
                if cluster && subject.namespace.as_deref().is_none_or(str::is_empty) {
                    problems.push(format!("{at}.namespace: required for a ServiceAccount"));
                }
            }
            "User" | "Group" => {
                if subject.api_group.as_deref() != Some("rbac.authorization.k8s.io") {
                    problems.push(format!("{at}.apiGroup: rbac.authorization.k8s.io"));
                }
            }
            other => problems.push(format!("{at}.kind: {other:?} is not a subject kind")),
        }
        if subject.name.is_empty() {
            problems.push(format!("{at}.name: required"));
        }
    }
}
