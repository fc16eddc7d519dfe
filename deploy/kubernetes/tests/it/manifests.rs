//! Every manifest of deploy/kubernetes: each file parsed and each object checked against its
//! typed model; each kustomization built and the result checked again; then what Fleetscope
//! needs of them (sources equal, references resolve, pods hardened, the agent's RBAC read-only,
//! sizes growing with the fleet), and proof that the checks catch what they are meant to.
//!
//! `UPDATE_MANIFESTS=1` rewrites the generated files (the dashboards' copies and the
//! PrometheusRule) from their sources before comparing.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{
    build, containers, data_value, find, find_mut, of_kind, pod_spec, validator, BUILDS, CENTRAL,
    IMAGE,
};
use fleetscope_deploy_kubernetes::kustomize::{self, FileRole};
use fleetscope_deploy_kubernetes::{
    describe, files_below, manifests_dir, prometheus_rule_text, repo_root, yaml,
};
use serde_json::{json, Value};

fn problems_of(object: &Value) -> Vec<String> {
    validator().validate(object).err().unwrap_or_default()
}

#[test]
fn every_file_is_read_by_a_kustomization_and_every_document_is_valid() {
    let dir = manifests_dir();
    let mut roles: BTreeMap<std::path::PathBuf, FileRole> = BTreeMap::new();
    for name in BUILDS {
        roles.extend(build(name).files.clone());
    }
    let mut problems = Vec::new();
    let mut checked = 0;
    for top in ["base", "agent", "overlays"] {
        for file in files_below(&dir.join(top), &[]).unwrap() {
            let shown = file.strip_prefix(&dir).unwrap().display().to_string();
            let Some(role) = roles.get(&file.canonicalize().unwrap()) else {
                problems.push(format!("{shown}: no kustomization reads it"));
                continue;
            };
            let text = std::fs::read_to_string(&file).unwrap();
            match role {
                FileRole::Kustomization => {
                    if let Err(err) = kustomize::parse_kustomization(&text) {
                        problems.push(format!("{shown}: {err}"));
                    }
                }
                FileRole::Resource | FileRole::Patch => {
                    let docs = match yaml::documents(&text) {
                        Ok(docs) => docs,
                        Err(err) => {
                            problems.push(format!("{shown}: {err}"));
                            continue;
                        }
                    };
                    for (index, doc) in docs.iter().enumerate() {
                        checked += 1;
                        for problem in problems_of(doc) {
                            // A patch is a fragment: only what it says must be right (no
                            // unknown fields, no coerced values); it is complete once applied,
                            // and the builds are checked in full below.
                            let relevant = *role == FileRole::Resource
                                || problem.ends_with(": unknown field")
                                || problem.contains(" was read as ")
                                || problem.contains("required, not");
                            if relevant {
                                problems.push(format!(
                                    "{shown}#{} {}: {problem}",
                                    index + 1,
                                    describe(doc)
                                ));
                            }
                        }
                    }
                }
                FileRole::GeneratorInput => {
                    if file.extension().is_some_and(|e| e == "json") {
                        if let Err(err) = serde_json::from_str::<Value>(&text) {
                            problems.push(format!("{shown}: {err}"));
                        }
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(checked >= 30, "only {checked} documents checked");
}

#[test]
fn every_build_is_valid_and_its_references_resolve() {
    let mut problems = Vec::new();
    for name in BUILDS {
        let objects = &build(name).objects;
        for object in objects {
            for problem in problems_of(object) {
                problems.push(format!("{name}: {}: {problem}", describe(object)));
            }
        }
        for problem in references(objects) {
            problems.push(format!("{name}: {problem}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// What one object of a build names in another that is not there.
fn references(objects: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let lookup = |kind: &str, namespace: &str, name: &str| {
        objects.iter().find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && o["metadata"]["namespace"] == namespace
        })
    };
    let has_key = |object: &Value, key: &str| {
        ["data", "stringData", "binaryData"]
            .iter()
            .any(|field| object[field].get(key).is_some())
    };
    let namespaces: BTreeSet<&str> = of_kind(objects, "Namespace")
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    for object in objects {
        let at = describe(object);
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        if !namespace.is_empty() && !namespaces.contains(namespace) {
            problems.push(format!(
                "{at}: namespace {namespace} is not created by this build"
            ));
        }
        if let Some(pod) = pod_spec(object) {
            if let Some(sa) = pod["serviceAccountName"].as_str() {
                if lookup("ServiceAccount", namespace, sa).is_none() {
                    problems.push(format!("{at}: no ServiceAccount {sa}"));
                }
            } else {
                problems.push(format!(
                    "{at}: no serviceAccountName (the default account is shared)"
                ));
            }
            for volume in pod["volumes"].as_array().into_iter().flatten() {
                for (field, kind, name_field) in [
                    ("secret", "Secret", "secretName"),
                    ("configMap", "ConfigMap", "name"),
                    (
                        "persistentVolumeClaim",
                        "PersistentVolumeClaim",
                        "claimName",
                    ),
                ] {
                    if let Some(name) = volume[field][name_field].as_str() {
                        if lookup(kind, namespace, name).is_none() {
                            problems.push(format!(
                                "{at}: volume {} names a missing {kind} {name}",
                                volume["name"]
                            ));
                        }
                    }
                }
            }
            for field in ["initContainers", "containers"] {
                for container in pod[field].as_array().into_iter().flatten() {
                    for env in container["env"].as_array().into_iter().flatten() {
                        for (field, kind) in
                            [("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")]
                        {
                            let reference = &env["valueFrom"][field];
                            let (Some(name), Some(key)) =
                                (reference["name"].as_str(), reference["key"].as_str())
                            else {
                                continue;
                            };
                            match lookup(kind, namespace, name) {
                                None => problems.push(format!(
                                    "{at}: env {} names a missing {kind} {name}",
                                    env["name"]
                                )),
                                Some(source) if !has_key(source, key) => problems.push(format!(
                                    "{at}: env {} names key {key} that {kind} {name} does not have",
                                    env["name"]
                                )),
                                Some(_) => {}
                            }
                        }
                    }
                }
            }
        }
        let selects = |selector: &Value, pod_labels: &Value| {
            let wanted = selector.as_object().cloned().unwrap_or_default();
            !wanted.is_empty() && wanted.iter().all(|(k, v)| pod_labels.get(k) == Some(v))
        };
        let workloads_selected = |selector: &Value| -> Vec<&Value> {
            objects
                .iter()
                .filter(|o| o["kind"] == "Deployment" && o["metadata"]["namespace"] == namespace)
                .filter(|o| selects(selector, &o["spec"]["template"]["metadata"]["labels"]))
                .collect()
        };
        match object["kind"].as_str().unwrap_or_default() {
            "Service" => {
                let selected = workloads_selected(&object["spec"]["selector"]);
                if selected.len() != 1 {
                    problems.push(format!(
                        "{at}: selects {} Deployments, not one",
                        selected.len()
                    ));
                }
                for port in object["spec"]["ports"].as_array().into_iter().flatten() {
                    if let Some(name) = port["targetPort"].as_str() {
                        let found = selected.iter().any(|d| {
                            d["spec"]["template"]["spec"]["containers"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .flat_map(|c| c["ports"].as_array().into_iter().flatten())
                                .any(|p| p["name"] == name)
                        });
                        if !found {
                            problems.push(format!(
                                "{at}: targetPort {name} is no container port of what it selects"
                            ));
                        }
                    }
                }
            }
            "PodDisruptionBudget"
                if workloads_selected(&object["spec"]["selector"]["matchLabels"]).len() != 1 =>
            {
                problems.push(format!("{at}: does not select exactly one Deployment"));
            }
            "HorizontalPodAutoscaler" => {
                let target = &object["spec"]["scaleTargetRef"];
                if lookup(
                    target["kind"].as_str().unwrap_or_default(),
                    namespace,
                    target["name"].as_str().unwrap_or_default(),
                )
                .is_none()
                {
                    problems.push(format!(
                        "{at}: scales a missing {} {}",
                        target["kind"], target["name"]
                    ));
                }
            }
            "ClusterRoleBinding" | "RoleBinding" => {
                let role = &object["roleRef"];
                let role_namespace = if role["kind"] == "Role" {
                    namespace
                } else {
                    ""
                };
                let exists = objects.iter().any(|o| {
                    o["kind"] == role["kind"]
                        && o["metadata"]["name"] == role["name"]
                        && o["metadata"]["namespace"].as_str().unwrap_or_default() == role_namespace
                });
                if !exists {
                    problems.push(format!(
                        "{at}: binds a missing {} {}",
                        role["kind"], role["name"]
                    ));
                }
                for subject in object["subjects"].as_array().into_iter().flatten() {
                    if subject["kind"] == "ServiceAccount" {
                        let ns = subject["namespace"].as_str().unwrap_or(namespace);
                        if lookup(
                            "ServiceAccount",
                            ns,
                            subject["name"].as_str().unwrap_or_default(),
                        )
                        .is_none()
                        {
                            problems.push(format!(
                                "{at}: subject ServiceAccount {ns}/{} is missing",
                                subject["name"]
                            ));
                        }
                    }
                }
            }
            "ServiceMonitor" => {
                let in_namespaces: Vec<&str> = object["spec"]["namespaceSelector"]["matchNames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let services: Vec<&Value> = of_kind(objects, "Service")
                    .filter(|s| {
                        in_namespaces
                            .contains(&s["metadata"]["namespace"].as_str().unwrap_or_default())
                    })
                    .filter(|s| {
                        selects(
                            &object["spec"]["selector"]["matchLabels"],
                            &s["metadata"]["labels"],
                        )
                    })
                    .collect();
                if services.len() != 1 {
                    problems.push(format!(
                        "{at}: selects {} Services, not one",
                        services.len()
                    ));
                }
                for endpoint in object["spec"]["endpoints"].as_array().into_iter().flatten() {
                    let port = &endpoint["port"];
                    if !services.iter().all(|s| {
                        s["spec"]["ports"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|p| p["name"] == *port)
                    }) {
                        problems.push(format!("{at}: port {port} is not a port of the Service"));
                    }
                    let credentials = &endpoint["authorization"]["credentials"];
                    if let (Some(name), Some(key)) =
                        (credentials["name"].as_str(), credentials["key"].as_str())
                    {
                        match lookup("Secret", namespace, name) {
                            Some(secret) if has_key(secret, key) => {}
                            _ => problems.push(format!(
                                "{at}: no Secret {name} with key {key} in its namespace"
                            )),
                        }
                    }
                }
            }
            _ => {}
        }
    }
    problems
}

/// Writes `text` to `path` when UPDATE_MANIFESTS is set; then requires the file to hold it.
fn committed_equals(path: &Path, text: &str) {
    if std::env::var_os("UPDATE_MANIFESTS").is_some() {
        std::fs::write(path, text).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is not what its source makes; run UPDATE_MANIFESTS=1 cargo test -p fleetscope-deploy-kubernetes",
        path.display()
    );
}

fn grafana_dashboards() -> BTreeMap<String, String> {
    files_below(&repo_root().join("dashboards/grafana"), &[])
        .unwrap()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn dashboards_are_the_grafana_files() {
    let sources = grafana_dashboards();
    assert!(sources.len() >= 6, "{:?}", sources.keys());
    let copies = manifests_dir().join("base/dashboards");
    for (name, text) in &sources {
        committed_equals(&copies.join(name), text);
    }
    for name in CENTRAL {
        let mut shipped = BTreeMap::new();
        for config_map in of_kind(&build(name).objects, "ConfigMap") {
            if config_map["metadata"]["labels"]["grafana_dashboard"] != "1" {
                continue;
            }
            let data = config_map["data"].as_object().unwrap();
            assert_eq!(
                data.len(),
                1,
                "{name}: one dashboard per ConfigMap: {}",
                describe(config_map)
            );
            for (key, value) in data {
                let json: Value = serde_json::from_str(value.as_str().unwrap()).unwrap();
                assert!(json["uid"].is_string(), "{key} has no uid");
                assert!(
                    shipped
                        .insert(key.clone(), value.as_str().unwrap().to_owned())
                        .is_none(),
                    "{key} twice"
                );
            }
        }
        assert_eq!(
            shipped.keys().collect::<Vec<_>>(),
            sources.keys().collect::<Vec<_>>(),
            "{name}: the dashboards shipped are those of dashboards/grafana"
        );
        for (key, text) in &shipped {
            assert!(
                text == &sources[key],
                "{name}: {key} differs from dashboards/grafana/{key}"
            );
        }
    }
}

#[test]
fn the_prometheus_rule_is_the_rules_file() {
    let rules_text =
        std::fs::read_to_string(repo_root().join("dashboards/prometheus/fleetscope-rules.yaml"))
            .unwrap();
    committed_equals(
        &manifests_dir().join("base/prometheusrule.yaml"),
        &prometheus_rule_text(&rules_text),
    );
    let rules = yaml::documents(&rules_text).unwrap().remove(0);
    assert!(rules["groups"].as_array().is_some_and(|g| !g.is_empty()));
    let jobs: BTreeSet<String> = regex::Regex::new(r#"job="([^"]+)""#)
        .unwrap()
        .captures_iter(&rules_text)
        .map(|c| c[1].to_owned())
        .collect();
    for name in CENTRAL {
        let objects = &build(name).objects;
        let shipped: Vec<&Value> = of_kind(objects, "PrometheusRule").collect();
        assert_eq!(shipped.len(), 1, "{name}");
        assert!(
            shipped[0]["spec"] == rules,
            "{name}: the PrometheusRule's spec differs from the rules file"
        );

        // The rules select on the scrape jobs; the operator names a job after the Service.
        assert_eq!(
            jobs,
            BTreeSet::from([
                "fleetscope-hub".to_owned(),
                "fleetscope-collector".to_owned()
            ])
        );
        for job in &jobs {
            let service = find(objects, "Service", job);
            let monitored = of_kind(objects, "ServiceMonitor").any(|m| {
                m["spec"]["selector"]["matchLabels"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| service["metadata"]["labels"].get(k) == Some(v))
                    && m["spec"]["jobLabel"].is_null()
            });
            assert!(
                monitored,
                "{name}: no ServiceMonitor scrapes Service {job} as job {job}"
            );
        }
    }
}

/// Cores, from a CPU quantity.
fn cpu(quantity: &Value) -> f64 {
    let text = quantity
        .as_str()
        .unwrap_or_else(|| panic!("quantity {quantity} is not a string"));
    match text.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().unwrap() / 1000.0,
        None => text.parse().unwrap(),
    }
}

/// Bytes, from a memory quantity.
fn bytes(quantity: &Value) -> f64 {
    let text = quantity
        .as_str()
        .unwrap_or_else(|| panic!("quantity {quantity} is not a string"));
    for (suffix, factor) in [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("M", 1e6),
        ("G", 1e9),
    ] {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().unwrap() * factor;
        }
    }
    text.parse().unwrap()
}

#[test]
fn pods_run_hardened_with_resources_set() {
    let mut problems = Vec::new();
    for name in BUILDS {
        let objects = &build(name).objects;
        for object in objects {
            let Some(pod) = pod_spec(object) else {
                continue;
            };
            let at = describe(object);
            let context = &pod["securityContext"];
            if context["runAsNonRoot"] != true
                || context["runAsUser"] != 65532
                || context["runAsGroup"] != 65532
            {
                problems.push(format!(
                    "{name}: {at}: not run as non-root 65532:65532 (the image's user)"
                ));
            }
            if context["seccompProfile"]["type"] != "RuntimeDefault" {
                problems.push(format!("{name}: {at}: no RuntimeDefault seccomp profile"));
            }
            let is_agent = object["metadata"]["name"] == "fleetscope-agent";
            if pod["automountServiceAccountToken"] != json!(is_agent) {
                problems.push(format!(
                    "{name}: {at}: automountServiceAccountToken must be {is_agent} (only the agent reads the API server)"
                ));
            }
            for volume in pod["volumes"].as_array().into_iter().flatten() {
                if volume["hostPath"].is_object() {
                    problems.push(format!("{name}: {at}: hostPath volume {}", volume["name"]));
                }
                if volume["emptyDir"].is_object() && volume["emptyDir"]["sizeLimit"].is_null() {
                    problems.push(format!(
                        "{name}: {at}: emptyDir {} without sizeLimit",
                        volume["name"]
                    ));
                }
            }
        }
        for (at, _, container) in containers(objects) {
            let context = &container["securityContext"];
            if context["allowPrivilegeEscalation"] != false
                || context["readOnlyRootFilesystem"] != true
                || context["capabilities"]["drop"] != json!(["ALL"])
                || !context["capabilities"]["add"].is_null()
                || context["privileged"] == true
            {
                problems.push(format!("{name}: {at}: securityContext is not locked down"));
            }
            let resources = &container["resources"];
            for kind in ["cpu", "memory"] {
                let (request, limit) = (&resources["requests"][kind], &resources["limits"][kind]);
                if request.is_null() || limit.is_null() {
                    problems.push(format!(
                        "{name}: {at}: {kind} request and limit are required"
                    ));
                    continue;
                }
                let (request, limit) = if kind == "cpu" {
                    (cpu(request), cpu(limit))
                } else {
                    (bytes(request), bytes(limit))
                };
                if request > limit || request <= 0.0 {
                    problems.push(format!(
                        "{name}: {at}: {kind} request {request} above limit {limit}"
                    ));
                }
            }
            let image = container["image"].as_str().unwrap_or_default();
            let pinned = image
                .rsplit_once(':')
                .is_some_and(|(_, tag)| !tag.contains('/') && tag != "latest");
            if !pinned {
                problems.push(format!("{name}: {at}: image {image} has no version tag"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_fleetscope_container_runs_the_one_image_with_a_subcommand() {
    let dockerfile = std::fs::read_to_string(repo_root().join("deploy/Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("cargo build --release --locked -p fleetscope --no-default-features"),
        "the image carries the services, not the demo and load test"
    );
    assert!(
        dockerfile.contains("USER 65532:65532"),
        "the manifests run as 65532"
    );
    assert!(
        dockerfile.contains(r#"ENTRYPOINT ["/usr/local/bin/fleetscope"]"#),
        "args start with the subcommand"
    );
    let mut seen = BTreeSet::new();
    for name in BUILDS {
        for (at, _, container) in containers(&build(name).objects) {
            let image = container["image"].as_str().unwrap();
            if !image.starts_with("ghcr.io/fleetscope/") {
                assert!(
                    image.starts_with("registry.k8s.io/git-sync/git-sync:v4."),
                    "{name}: {at}: unexpected image {image}"
                );
                continue;
            }
            assert_eq!(image, IMAGE, "{name}: {at}");
            assert!(
                container["command"].is_null(),
                "{name}: {at}: the image's entrypoint is the binary"
            );
            let subcommand = container["args"][0].as_str().unwrap_or_default();
            assert!(
                ["hub", "collector", "agent", "render", "migrate"].contains(&subcommand),
                "{name}: {at}: args start with {subcommand:?}"
            );
            seen.insert(subcommand.to_owned());
        }
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
}

#[test]
fn probes_use_the_endpoints_each_component_serves() {
    // Hub and collector serve /healthz and /readyz; the agent and the renderer serve nothing.
    for (source, routes) in [
        (
            "hub/src/server.rs",
            [r#".route("/healthz""#, r#".route("/readyz""#],
        ),
        (
            "collector/src/central/mod.rs",
            [r#".route("/healthz""#, r#".route("/readyz""#],
        ),
    ] {
        let text = std::fs::read_to_string(repo_root().join(source)).unwrap();
        for route in routes {
            assert!(text.contains(route), "{source} no longer has {route}");
        }
    }
    for name in BUILDS {
        for (at, _, container) in containers(&build(name).objects) {
            let subcommand = container["args"][0].as_str().unwrap_or_default();
            let serves = matches!(subcommand, "hub" | "collector") && container["image"] == IMAGE;
            for (probe, path) in [
                ("livenessProbe", "/healthz"),
                ("readinessProbe", "/readyz"),
                ("startupProbe", "/healthz"),
            ] {
                if serves {
                    assert_eq!(
                        container[probe]["httpGet"]["path"], path,
                        "{name}: {at}: {probe}"
                    );
                    assert_eq!(
                        container[probe]["httpGet"]["port"], "http",
                        "{name}: {at}: {probe}"
                    );
                } else {
                    assert!(
                        container[probe].is_null(),
                        "{name}: {at}: {probe} on something that serves no HTTP"
                    );
                }
            }
        }
    }
}

/// Everything wrong with the agent's RBAC: only list, watch (and get) on exactly the kinds
/// the agent watches.
fn agent_rbac_problems(objects: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let wanted: BTreeSet<(String, String)> = fleetscope_collector::watch::WATCHED_KINDS
        .iter()
        .map(|k| (k.group.to_owned(), k.plural.to_owned()))
        .collect();
    let mut granted = BTreeSet::new();
    for kind in ["Role", "RoleBinding"] {
        if of_kind(objects, kind).next().is_some() {
            problems.push(format!("the agent needs no {kind}"));
        }
    }
    let roles: Vec<&Value> = of_kind(objects, "ClusterRole").collect();
    if roles.len() != 1 {
        problems.push(format!("{} ClusterRoles, expected one", roles.len()));
    }
    for role in &roles {
        if !role["aggregationRule"].is_null() {
            problems.push("an aggregated ClusterRole grants whatever others add".to_owned());
        }
        for (index, rule) in role["rules"].as_array().into_iter().flatten().enumerate() {
            let list = |field: &str| -> Vec<String> {
                rule[field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            };
            for verb in list("verbs") {
                if !["get", "list", "watch"].contains(&verb.as_str()) {
                    problems.push(format!("rules[{index}]: verb {verb:?} is not read-only"));
                }
            }
            for field in ["resourceNames", "nonResourceURLs"] {
                if !rule[field].is_null() {
                    problems.push(format!("rules[{index}]: {field} are not expected"));
                }
            }
            for group in list("apiGroups") {
                for resource in list("resources") {
                    if !wanted.contains(&(group.clone(), resource.clone())) {
                        problems.push(format!(
                            "rules[{index}]: {group}/{resource} is not a kind the agent watches"
                        ));
                    }
                    if list("verbs").iter().any(|v| v == "list")
                        && list("verbs").iter().any(|v| v == "watch")
                    {
                        granted.insert((group.clone(), resource));
                    }
                }
            }
        }
    }
    for missing in wanted.difference(&granted) {
        problems.push(format!(
            "{}/{} cannot be listed and watched",
            missing.0, missing.1
        ));
    }
    let agent = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "fleetscope-agent");
    let account = agent.and_then(|a| a["spec"]["template"]["spec"]["serviceAccountName"].as_str());
    let bound = of_kind(objects, "ClusterRoleBinding").any(|b| {
        roles
            .iter()
            .any(|r| r["metadata"]["name"] == b["roleRef"]["name"])
            && b["subjects"].as_array().into_iter().flatten().any(|s| {
                s["kind"] == "ServiceAccount"
                    && s["name"].as_str() == account
                    && &s["namespace"]
                        == agent.map_or(&Value::Null, |a| &a["metadata"]["namespace"])
            })
    });
    if !bound {
        problems.push("the ClusterRole is not bound to the agent's service account".to_owned());
    }
    problems
}

#[test]
fn the_agent_may_only_read_the_kinds_it_watches() {
    let objects = &build("agent").objects;
    assert_eq!(agent_rbac_problems(objects), Vec::<String>::new());
    // The central side grants nothing in its cluster.
    for name in CENTRAL {
        for kind in ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] {
            assert!(
                of_kind(&build(name).objects, kind).next().is_none(),
                "{name} has a {kind}"
            );
        }
    }
}

#[test]
fn a_write_verb_or_another_resource_in_the_agent_rbac_is_refused() {
    let objects = build("agent").objects.clone();
    let mut with_patch = objects.clone();
    find_mut(&mut with_patch, "ClusterRole", "fleetscope-agent")["rules"][0]["verbs"]
        .as_array_mut()
        .unwrap()
        .push(json!("patch"));
    assert_eq!(
        agent_rbac_problems(&with_patch),
        ["rules[0]: verb \"patch\" is not read-only"]
    );
    let mut with_secrets = objects.clone();
    find_mut(&mut with_secrets, "ClusterRole", "fleetscope-agent")["rules"]
        .as_array_mut()
        .unwrap()
        .push(json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}));
    assert_eq!(
        agent_rbac_problems(&with_secrets),
        ["rules[4]: /secrets is not a kind the agent watches"]
    );
    let mut wildcard = objects.clone();
    find_mut(&mut wildcard, "ClusterRole", "fleetscope-agent")["rules"][3]["verbs"] = json!(["*"]);
    let problems = agent_rbac_problems(&wildcard);
    assert!(
        problems.contains(&"rules[3]: verb \"*\" is not read-only".to_owned()),
        "{problems:?}"
    );
    assert!(
        problems.contains(&"argoproj.io/applications cannot be listed and watched".to_owned()),
        "{problems:?}"
    );
}

#[test]
fn the_token_files_are_what_hub_and_collector_read_and_refuse_the_placeholders() {
    use sha2::{Digest, Sha256};
    let hex = |text: &str| -> String {
        Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let placeholder = regex::Regex::new(r"REPLACE_WITH_[A-Z0-9_]+").unwrap();
    for name in CENTRAL {
        let objects = &build(name).objects;
        let hub_file =
            data_value(objects, "Secret", "fleetscope-hub-tokens", "tokens.yaml").unwrap();
        let problems = fleetscope_hub::Auth::parse(hub_file).unwrap_err();
        assert_eq!(
            problems.len(),
            3,
            "every placeholder is refused: {problems:?}"
        );
        assert!(
            problems.iter().all(|p| p.contains("tokenSha256")),
            "{problems:?}"
        );

        // With the placeholders replaced as README.md says, the file loads, and Prometheus's
        // token (from the Secret its ServiceMonitor names) reads /metrics: unscoped.
        let prometheus_token = "prometheus-scrape-token-0123456789abcdef";
        let filled = placeholder.replace_all(hub_file, |c: &regex::Captures| {
            if &c[0] == "REPLACE_WITH_THE_SHA256_OF_THE_PROMETHEUS_TOKEN" {
                hex(prometheus_token)
            } else {
                hex(&c[0])
            }
        });
        let auth = fleetscope_hub::Auth::parse(&filled).unwrap();
        let monitor = find(objects, "ServiceMonitor", "fleetscope-hub");
        let credentials = &monitor["spec"]["endpoints"][0]["authorization"]["credentials"];
        let shipped = data_value(
            objects,
            "Secret",
            credentials["name"].as_str().unwrap(),
            credentials["key"].as_str().unwrap(),
        )
        .unwrap();
        assert!(
            placeholder.is_match(shipped),
            "the Prometheus token is a placeholder: {shipped}"
        );
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(
            "authorization",
            format!("Bearer {prometheus_token}").parse().unwrap(),
        );
        let principal = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(auth.authenticate(&headers))
            .unwrap();
        assert_eq!(principal.name, "prometheus");
        assert_eq!(principal.scope, None, "/metrics refuses scoped tokens");

        let agents_file = data_value(
            objects,
            "Secret",
            "fleetscope-agent-tokens",
            "agent-tokens.yaml",
        )
        .unwrap();
        let problems =
            fleetscope_collector::central::auth::AgentAuth::parse(agents_file).unwrap_err();
        assert!(
            problems.iter().all(|p| p.contains("tokenSha256")) && !problems.is_empty(),
            "{problems:?}"
        );
        let agent_token = "agent-token-of-store-0001-0123456789";
        let filled = placeholder.replace_all(agents_file, hex(agent_token).as_str());
        let auth = fleetscope_collector::central::auth::AgentAuth::parse(&filled).unwrap();
        let cluster = auth
            .authenticate(Some(&format!("Bearer {agent_token}")))
            .unwrap();
        assert_eq!(
            cluster.map(ToString::to_string).as_deref(),
            Some("store-0001")
        );
    }

    // Every other secret value is a placeholder too: nothing real is shipped.
    for name in BUILDS {
        for secret in of_kind(&build(name).objects, "Secret") {
            assert!(
                secret["data"].is_null(),
                "{}: base64 data hides what it holds",
                describe(secret)
            );
            for (key, value) in secret["stringData"].as_object().unwrap() {
                let value = value.as_str().unwrap();
                let known_non_secret =
                    key == "user" || key == "tokens.yaml" || key == "agent-tokens.yaml";
                assert!(
                    known_non_secret || placeholder.is_match(value),
                    "{name}: {} {key} is not a placeholder",
                    describe(secret)
                );
            }
        }
    }
    // The agent's cluster id placeholder is refused as a cluster id.
    let agent = &build("agent").objects;
    let cluster = data_value(agent, "ConfigMap", "fleetscope-agent", "cluster").unwrap();
    assert!(placeholder.is_match(cluster));
    assert!(fleetscope_model_cluster_id_refused(cluster));
}

fn fleetscope_model_cluster_id_refused(text: &str) -> bool {
    // The agent parses --cluster with the model's ClusterId; the collector's token file does
    // the same, so its refusal shows through AgentAuth.
    let file = format!("agents:\n  - cluster: {text}\n    token: a-long-enough-token-0123456789\n");
    fleetscope_collector::central::auth::AgentAuth::parse(&file).is_err()
}

/// A container's resource value, in a build.
fn resource(name: &str, deployment: &str, container: &str, path: &str) -> f64 {
    let object = find(&build(name).objects, "Deployment", deployment);
    let container = object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == container)
        .unwrap();
    let value = container["resources"].pointer(path).unwrap();
    if path.ends_with("cpu") {
        cpu(value)
    } else {
        bytes(value)
    }
}

fn flag(name: &str, deployment: &str, container: &str, flag: &str) -> Option<String> {
    let object = find(&build(name).objects, "Deployment", deployment);
    object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == container)
        .unwrap()["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix(&format!("{flag}=")).map(str::to_owned))
}

#[test]
fn overlays_size_for_their_fleets() {
    let sizes = ["overlays/small", "base", "overlays/large"];
    for (deployment, container) in [
        ("fleetscope-hub", "hub"),
        ("fleetscope-collector", "collector"),
        ("fleetscope-renderer", "renderer"),
    ] {
        for path in [
            "/requests/cpu",
            "/requests/memory",
            "/limits/cpu",
            "/limits/memory",
        ] {
            let values: Vec<f64> = sizes
                .iter()
                .map(|s| resource(s, deployment, container, path))
                .collect();
            assert!(
                values[0] < values[1] && values[1] < values[2],
                "{container} {path}: {values:?} does not grow with the fleet"
            );
        }
    }
    // docs/benchmarks.md: the hub held 1,215 MB resident at 100,000 clusters x 100 apps, and
    // 433 MB at 30,000 under load; the collector 124 MB at 100,000 clusters.
    assert!(
        resource(
            "overlays/large",
            "fleetscope-hub",
            "hub",
            "/requests/memory"
        ) >= 1_215e6
    );
    assert!(resource("overlays/large", "fleetscope-hub", "hub", "/limits/memory") >= 2.0 * 1_215e6);
    assert!(resource("base", "fleetscope-hub", "hub", "/limits/memory") >= 433e6);
    assert!(
        resource(
            "overlays/large",
            "fleetscope-collector",
            "collector",
            "/requests/memory"
        ) >= 124e6
    );

    let every: Vec<u64> = sizes
        .iter()
        .map(|s| {
            flag(s, "fleetscope-renderer", "renderer", "--every")
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(every[0] < every[1] && every[1] < every[2], "{every:?}");

    let large = &build("overlays/large").objects;
    assert_eq!(
        find(large, "Deployment", "fleetscope-hub")["spec"]["replicas"],
        3
    );
    assert!(
        find(large, "Deployment", "fleetscope-collector")["spec"]["replicas"].is_null(),
        "the autoscaler owns it"
    );
    let hpa = find(large, "HorizontalPodAutoscaler", "fleetscope-collector");
    assert!(hpa["spec"]["minReplicas"].as_i64().unwrap() >= 3);
    assert_eq!(
        find(large, "Deployment", "fleetscope-hub")["spec"]["template"]["spec"]["containers"][0]
            ["startupProbe"],
        json!({"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5, "failureThreshold": 120}),
        "the patch merged into the base's probe"
    );
    for name in CENTRAL {
        let objects = &build(name).objects;
        assert_eq!(
            find(objects, "Deployment", "fleetscope-renderer")["spec"]["replicas"],
            1,
            "{name}: one renderer"
        );
        assert_eq!(
            find(objects, "Deployment", "fleetscope-renderer")["spec"]["strategy"]["type"],
            "Recreate"
        );
    }
}

// What follows proves that the checks above fail when they should.

fn hub_deployment() -> Value {
    find(&build("base").objects, "Deployment", "fleetscope-hub").clone()
}

#[test]
fn an_unknown_field_is_refused_with_its_path() {
    let mut hub = hub_deployment();
    hub["spec"]["template"]["spec"]["containers"][0]["resources"]["limit"] = json!({"cpu": "1"});
    assert_eq!(
        problems_of(&hub),
        ["spec.template.spec.containers[0].resources.limit: unknown field"]
    );
    let mut hub = hub_deployment();
    hub["spec"]["replica"] = json!(2);
    assert_eq!(problems_of(&hub), ["spec.replica: unknown field"]);

    let mut monitor = find(&build("base").objects, "ServiceMonitor", "fleetscope-hub").clone();
    monitor["spec"]["endpoints"][0]["bearerTokenSecrett"] = json!({"name": "x", "key": "y"});
    assert_eq!(
        problems_of(&monitor),
        ["spec.endpoints[0].bearerTokenSecrett: unknown field"]
    );

    let mut rule = find(&build("base").objects, "PrometheusRule", "fleetscope").clone();
    rule["spec"]["groups"][0]["rules"][0]["labelz"] = json!({"a": "b"});
    assert_eq!(
        problems_of(&rule),
        ["spec.groups[0].rules[0].labelz: unknown field"]
    );

    let mut metadata = find(&build("base").objects, "PrometheusRule", "fleetscope").clone();
    metadata["metadata"]["label"] = json!({"a": "b"});
    assert_eq!(problems_of(&metadata), ["metadata.label: unknown field"]);
}

#[test]
fn a_missing_required_field_is_refused() {
    // Required by the OpenAPI document; k8s-openapi would quietly make it "".
    let mut hub = hub_deployment();
    hub["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("name");
    let problems = problems_of(&hub);
    assert!(
        problems.contains(
            &"spec.template.spec.containers[0].name: required field missing (it would become \"\")"
                .to_owned()
        ),
        "{problems:?}"
    );
    let mut hub = hub_deployment();
    hub["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["configMapKeyRef"]
        .as_object_mut()
        .unwrap()
        .remove("key");
    assert!(problems_of(&hub).iter().any(|p| p.starts_with("spec.template.spec.containers[0].env[0].valueFrom.configMapKeyRef.key: required field missing")));

    // Optional in the OpenAPI document, required by the API server for a Deployment.
    let mut hub = hub_deployment();
    hub["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    assert_eq!(
        problems_of(&hub),
        ["spec.template.spec.containers[0].image: required"]
    );
    let mut hub = hub_deployment();
    hub["metadata"].as_object_mut().unwrap().remove("name");
    assert_eq!(problems_of(&hub), ["metadata.name: required"]);
    let mut hub = hub_deployment();
    hub["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] = json!("other");
    assert_eq!(
        problems_of(&hub),
        ["spec.template.metadata.labels: the selector's app.kubernetes.io/component=hub is not among them"]
    );

    let mut role = find(&build("agent").objects, "ClusterRole", "fleetscope-agent").clone();
    role["rules"][0].as_object_mut().unwrap().remove("verbs");
    let problems = problems_of(&role);
    assert!(
        problems
            .contains(&"rules[0].verbs: required field missing (it would become [])".to_owned()),
        "{problems:?}"
    );

    let mut rule = find(&build("base").objects, "PrometheusRule", "fleetscope").clone();
    rule["spec"]["groups"][0]["rules"][0]
        .as_object_mut()
        .unwrap()
        .remove("expr");
    assert_eq!(
        problems_of(&rule),
        ["spec.groups[0].rules[0].expr: required field missing"]
    );

    let mut monitor = find(&build("base").objects, "ServiceMonitor", "fleetscope-hub").clone();
    monitor["spec"].as_object_mut().unwrap().remove("selector");
    assert_eq!(
        problems_of(&monitor),
        ["spec.selector: required field missing"]
    );
}

#[test]
fn wrong_types_and_values_are_refused() {
    let mut hub = hub_deployment();
    hub["spec"]["replicas"] = json!("2");
    assert!(
        problems_of(&hub)[0].starts_with("spec.replicas: invalid type"),
        "{:?}",
        problems_of(&hub)
    );
    let mut monitor = find(&build("base").objects, "ServiceMonitor", "fleetscope-hub").clone();
    monitor["spec"]["endpoints"][0]["interval"] = json!("30 seconds");
    assert_eq!(
        problems_of(&monitor),
        [
            r#"spec.endpoints[0].interval: "30 seconds" does not match ^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"#
        ]
    );
    let mut monitor = find(&build("base").objects, "ServiceMonitor", "fleetscope-hub").clone();
    monitor["spec"]["endpoints"][0]["authorization"]["credentials"]["name"] = json!(7);
    assert_eq!(
        problems_of(&monitor),
        ["spec.endpoints[0].authorization.credentials.name: string required, not an integer"]
    );
    let mut unknown = hub_deployment();
    unknown["apiVersion"] = json!("apps/v1beta1");
    assert!(problems_of(&unknown)[0].starts_with("no typed model for apiVersion \"apps/v1beta1\""));
}

#[test]
fn the_kustomize_subset_refuses_an_unknown_field_and_an_unknown_feature() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../base]\nreplicas: [{name: fleetscope-hub, count: 5}]\n",
    )
    .unwrap();
    let err = format!("{:#}", kustomize::build(dir.path()).unwrap_err());
    assert!(err.contains("unknown field `replicas`"), "{err}");

    // A resource file outside the kustomization's folder is refused, as kustomize does.
    let overlay = dir.path().join("overlay");
    std::fs::create_dir(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [{}]\n",
            manifests_dir().join("base/hub.yaml").display()
        ),
    )
    .unwrap();
    let err = format!("{:#}", kustomize::build(&overlay).unwrap_err());
    assert!(err.contains("outside the kustomization's folder"), "{err}");
}
