//! Every Flux and Argo CD object the renderer emits is accepted by a real API server serving the
//! real CRDs, with strict field validation (unknown or misplaced fields are errors) and a dry
//! run (nothing is stored).

use std::path::PathBuf;

use fleetscope_local_apiserver::LocalApiServer;
use fleetscope_renderer::render;
use serde_json::Value;

fn plural(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Kustomization" => "kustomizations",
        "HelmRelease" => "helmreleases",
        "GitRepository" => "gitrepositories",
        "OCIRepository" => "ocirepositories",
        "Application" => "applications",
        _ => return None,
    })
}

#[test]
fn emitted_objects_validate_against_the_real_crds() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let server = LocalApiServer::start(Some(&here.join("testdata/crds")))
        .unwrap_or_else(|err| panic!("this test needs a private Kubernetes API server: {err}"));
    let out = tempfile::tempdir().unwrap();
    let outcome = render(&here.join("../examples/platform"), out.path()).unwrap();

    let mut validated = std::collections::BTreeMap::<String, usize>::new();
    let mut not_validated = std::collections::BTreeSet::<String>::new();
    for (path, content) in &outcome.files {
        for document in serde_yaml_ng::Deserializer::from_str(content) {
            let object: Value = serde::Deserialize::deserialize(document).unwrap();
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let kind = object["kind"].as_str().unwrap_or_default();
            let group = api_version.split('/').next().unwrap_or_default();
            let served = matches!(
                group,
                "kustomize.toolkit.fluxcd.io"
                    | "helm.toolkit.fluxcd.io"
                    | "source.toolkit.fluxcd.io"
                    | "argoproj.io"
            );
            let Some(plural) = plural(kind).filter(|_| served) else {
                not_validated.insert(format!("{api_version} {kind}"));
                continue;
            };
            let namespace = object["metadata"]["namespace"].as_str().unwrap();
            let url = format!("/apis/{api_version}/namespaces/{namespace}/{plural}?fieldValidation=Strict&dryRun=All");
            server
                .post_json(&url, &object)
                .unwrap_or_else(|err| panic!("{path}: {kind} refused by the API server: {err}"));
            *validated.entry(kind.to_owned()).or_default() += 1;
        }
    }
    assert_eq!(
        validated.keys().cloned().collect::<Vec<_>>(),
        vec![
            "Application",
            "GitRepository",
            "HelmRelease",
            "Kustomization",
            "OCIRepository"
        ],
        "every Flux and Argo CD kind the renderer emits was checked"
    );
    // Kinds this API server cannot check: core objects (it serves CRDs only), Flux's
    // HelmRepository (no CRD among the fixtures) and kustomize's own file.
    assert_eq!(
        not_validated.into_iter().collect::<Vec<_>>(),
        vec![
            "kustomize.config.k8s.io/v1beta1 Kustomization",
            "rbac.authorization.k8s.io/v1 RoleBinding",
            "source.toolkit.fluxcd.io/v1 HelmRepository",
            "v1 ConfigMap",
            "v1 LimitRange",
            "v1 Namespace",
            "v1 ResourceQuota",
        ]
    );

    // The check is real: a misplaced field is refused.
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
}
