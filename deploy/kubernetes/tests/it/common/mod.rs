//! Shared by the tests: the builds, lookups in them, and the fleetscope binary.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use fleetscope_deploy_kubernetes::kustomize::{self, Build};
use fleetscope_deploy_kubernetes::{manifests_dir, Validator};
use serde_json::Value;

/// Every kustomization: the central side (base and its overlays) and the agent.
pub const BUILDS: [&str; 4] = ["base", "overlays/small", "overlays/large", "agent"];

/// The kustomizations of the central side.
pub const CENTRAL: [&str; 3] = ["base", "overlays/small", "overlays/large"];

/// The image every Fleetscope container runs.
pub const IMAGE: &str = "ghcr.io/fleetscope/fleetscope:0.1.0";

pub fn build(name: &str) -> &'static Build {
    static BUILDS: OnceLock<BTreeMap<String, Build>> = OnceLock::new();
    let all = BUILDS.get_or_init(|| {
        self::BUILDS
            .iter()
            .map(|name| {
                let build = kustomize::build(&manifests_dir().join(name))
                    .unwrap_or_else(|err| panic!("building {name}: {err:#}"));
                ((*name).to_owned(), build)
            })
            .collect()
    });
    &all[name]
}

pub fn validator() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| Validator::with_monitoring_crds().expect("the vendored CRDs"))
}

pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

pub fn find_mut<'a>(objects: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    objects
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

pub fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects.iter().filter(move |o| o["kind"] == kind)
}

/// The pod spec of a workload, if it is one.
pub fn pod_spec(object: &Value) -> Option<&Value> {
    match object["kind"].as_str()? {
        "Deployment" | "StatefulSet" | "DaemonSet" | "Job" => object.pointer("/spec/template/spec"),
        "CronJob" => object.pointer("/spec/jobTemplate/spec/template/spec"),
        _ => None,
    }
}

/// Every container (init containers first) of every workload, with where it is.
pub fn containers(objects: &[Value]) -> Vec<(String, &Value, &Value)> {
    let mut out = Vec::new();
    for object in objects {
        let Some(pod) = pod_spec(object) else {
            continue;
        };
        for field in ["initContainers", "containers"] {
            for container in pod[field].as_array().into_iter().flatten() {
                let at = format!(
                    "{} {field}/{}",
                    fleetscope_deploy_kubernetes::describe(object),
                    container["name"].as_str().unwrap_or("?")
                );
                out.push((at, object, container));
            }
        }
    }
    out
}

/// A value of a Secret (`stringData`) or ConfigMap (`data`) of the build.
pub fn data_value<'a>(objects: &'a [Value], kind: &str, name: &str, key: &str) -> Option<&'a str> {
    let object = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)?;
    let field = if kind == "Secret" {
        "stringData"
    } else {
        "data"
    };
    object[field][key].as_str()
}

pub use fleetscope_testkit::faults::fleetscope_binary;
