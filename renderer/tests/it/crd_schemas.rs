//! Every object the renderer emits for a cluster is checked, except kustomize's own
//! `kustomization.yaml`:
//!
//! - Flux and Argo CD objects must be accepted by a real API server serving the real CRDs, with
//!   strict field validation (unknown or misplaced fields are errors) and a dry run (nothing is
//!   stored).
//! - Core objects (ConfigMap, Namespace, ResourceQuota, LimitRange, RoleBinding) cannot be checked
//!   there, as that server serves CRDs only. Each is read into its Kubernetes API type and written
//!   back, and the result must equal the emitted object: reading refuses a wrongly typed value
//!   and drops an unknown or misplaced field, so either makes the test fail with the file, the
//!   object and the JSON pointer of the field.

use std::collections::BTreeSet;
use std::path::PathBuf;

use fleetscope_local_apiserver::LocalApiServer;
use fleetscope_renderer::render;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::rbac::v1 as rbac;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn plural(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Kustomization" => "kustomizations",
        "HelmRelease" => "helmreleases",
        "GitRepository" => "gitrepositories",
        "HelmRepository" => "helmrepositories",
        "OCIRepository" => "ocirepositories",
        "Application" => "applications",
        _ => return None,
    })
}

/// Checks a core object against its Kubernetes API type (see [`round_trip`]); `None` when the
/// object is not of one of the core kinds the renderer emits.
fn check_core_object(api_version: &str, kind: &str, object: &Value) -> Option<Result<(), String>> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => round_trip::<core::ConfigMap>(object),
        ("v1", "Namespace") => round_trip::<core::Namespace>(object),
        ("v1", "ResourceQuota") => round_trip::<core::ResourceQuota>(object),
        ("v1", "LimitRange") => round_trip::<core::LimitRange>(object),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => round_trip::<rbac::RoleBinding>(object),
        _ => return None,
    })
}

/// Reads `object` as `T` and writes it back. Reading fails on a wrongly typed value or a missing
/// required field, and silently drops a field `T` does not have, so the object is accepted only if
/// reading succeeds and nothing was lost or changed.
fn round_trip<T: DeserializeOwned + Serialize>(object: &Value) -> Result<(), String> {
    let typed: T = serde_path_to_error::deserialize(object)
        .map_err(|err| format!("at {}: {}", err.path(), err.inner()))?;
    let written = serde_json::to_value(&typed).map_err(|err| err.to_string())?;
    first_difference("", object, &written).map_or(Ok(()), Err)
}

/// The first place, as a JSON pointer with a reason, where `written` (the object after a round
/// trip through its type) differs from `emitted`.
fn first_difference(pointer: &str, emitted: &Value, written: &Value) -> Option<String> {
    let child = |key: &str| format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
    match (emitted, written) {
        (Value::Object(emitted), Value::Object(written)) => emitted
            .iter()
            .find_map(|(key, value)| match written.get(key) {
                None => Some(format!(
                    "{}: not a field of the Kubernetes type at this place (unknown or misplaced)",
                    child(key)
                )),
                Some(written) => first_difference(&child(key), value, written),
            })
            .or_else(|| {
                written
                    .keys()
                    .find(|key| !emitted.contains_key(*key))
                    .map(|key| format!("{}: added by the round trip", child(key)))
            }),
        (Value::Array(emitted), Value::Array(written)) if emitted.len() == written.len() => emitted
            .iter()
            .zip(written)
            .enumerate()
            .find_map(|(index, (emitted, written))| {
                first_difference(&child(&index.to_string()), emitted, written)
            }),
        // A quantity may be written as a number; its type reads it as the number's text.
        (Value::Number(number), Value::String(text)) if number.to_string() == *text => None,
        _ if emitted == written => None,
        _ => Some(format!(
            "{}: emitted {emitted}, read back as {written}",
            if pointer.is_empty() { "/" } else { pointer }
        )),
    }
}

#[test]
fn emitted_objects_validate_against_the_real_crds_and_core_types() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let server = LocalApiServer::start(Some(&here.join("testdata/crds")))
        .unwrap_or_else(|err| panic!("this test needs a private Kubernetes API server: {err}"));
    let out = tempfile::tempdir().unwrap();
    let outcome = render(&here.join("../examples/platform"), out.path()).unwrap();

    let mut by_api_server = BTreeSet::<String>::new();
    let mut by_type = BTreeSet::<String>::new();
    let mut not_validated = BTreeSet::<String>::new();
    let mut failures = Vec::<String>::new();
    let mut emitted = Vec::<Value>::new();
    for (path, content) in &outcome.files {
        if path.ends_with(fleetscope_renderer::output::RENDER_RECORD) {
            continue; // the renderer's own record, never applied
        }
        for document in serde_yaml_ng::Deserializer::from_str(content) {
            let object: Value = serde::Deserialize::deserialize(document).unwrap();
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let kind = object["kind"].as_str().unwrap_or_default();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let what = format!("{api_version} {kind}");
            if let Some(result) = check_core_object(api_version, kind, &object) {
                if let Err(err) = result {
                    failures.push(format!(
                        "{path}: {what} {name} does not match its Kubernetes type: {err}"
                    ));
                }
                by_type.insert(what);
                emitted.push(object);
                continue;
            }
            let group = api_version.split('/').next().unwrap_or_default();
            let served = matches!(
                group,
                "kustomize.toolkit.fluxcd.io"
                    | "helm.toolkit.fluxcd.io"
                    | "source.toolkit.fluxcd.io"
                    | "argoproj.io"
            );
            let Some(plural) = plural(kind).filter(|_| served) else {
                not_validated.insert(what);
                continue;
            };
            let namespace = object["metadata"]["namespace"].as_str().unwrap();
            let url = format!("/apis/{api_version}/namespaces/{namespace}/{plural}?fieldValidation=Strict&dryRun=All");
            if let Err(err) = server.post_json(&url, &object) {
                failures.push(format!(
                    "{path}: {what} {name} refused by the API server: {err}"
                ));
            }
            by_api_server.insert(what);
            emitted.push(object);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        by_api_server.into_iter().collect::<Vec<_>>(),
        vec![
            "argoproj.io/v1alpha1 Application",
            "helm.toolkit.fluxcd.io/v2 HelmRelease",
            "kustomize.toolkit.fluxcd.io/v1 Kustomization",
            "source.toolkit.fluxcd.io/v1 GitRepository",
            "source.toolkit.fluxcd.io/v1 HelmRepository",
            "source.toolkit.fluxcd.io/v1 OCIRepository",
        ],
        "every Flux and Argo CD kind the renderer emits was checked by the API server"
    );
    assert_eq!(
        by_type.into_iter().collect::<Vec<_>>(),
        vec![
            "rbac.authorization.k8s.io/v1 RoleBinding",
            "v1 ConfigMap",
            "v1 LimitRange",
            "v1 Namespace",
            "v1 ResourceQuota",
        ],
        "every core kind the renderer emits was checked against its type"
    );
    // Only kustomize's own file is not a Kubernetes object and stays unchecked.
    assert_eq!(
        not_validated.into_iter().collect::<Vec<_>>(),
        vec!["kustomize.config.k8s.io/v1beta1 Kustomization"]
    );

    // The API server check is real: a misplaced field is refused.
    let mut wrong: Value = serde_yaml_ng::from_str(
        &outcome
            .files
            .iter()
            .find(|(p, _)| p.ends_with("apps/payments.yaml"))
            .unwrap()
            .1
            .clone(),
    )
    .unwrap();
    wrong["spec"]["pathh"] = Value::String("./typo".into());
    let err = server
        .post_json("/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations?fieldValidation=Strict&dryRun=All", &wrong)
        .unwrap_err()
        .to_string();
    assert!(err.contains("pathh"), "{err}");
    server.stop();

    // The type check is real: a misspelled field and a wrongly typed value are caught.
    let first = |kind: &str| emitted.iter().find(|o| o["kind"] == kind).unwrap().clone();
    let mut quota = first("ResourceQuota");
    let hard = quota["spec"]
        .as_object_mut()
        .unwrap()
        .remove("hard")
        .unwrap();
    quota["spec"]["hardd"] = hard;
    let err = check_core_object("v1", "ResourceQuota", &quota)
        .unwrap()
        .unwrap_err();
    assert!(err.starts_with("/spec/hardd: not a field"), "{err}");
    let mut config_map = first("ConfigMap");
    config_map["data"]["CLUSTER_ID"] = Value::from(7);
    let err = check_core_object("v1", "ConfigMap", &config_map)
        .unwrap()
        .unwrap_err();
    assert!(err.starts_with("at data.CLUSTER_ID: invalid type"), "{err}");
}
