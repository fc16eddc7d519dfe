//! The private API server against the real Flux CRDs: install them, create and read back a
//! Kustomization over HTTPS with the generated client certificate, and stop. These tests fail
//! (they never skip) when etcd or apiextensions-apiserver is missing; the failure says to run
//! `scripts/install-apiserver`.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use fleetscope_local_apiserver::{LocalApiServer, LocalApiServerError};
use serde_json::{json, Value};

const KUSTOMIZATION_CRD: &str = "kustomizations.kustomize.toolkit.fluxcd.io";
const KUSTOMIZATIONS: &str =
    "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations";

fn testdata(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(path)
}

fn start(crd_dir: Option<&Path>) -> LocalApiServer {
    LocalApiServer::start(crd_dir)
        .unwrap_or_else(|err| panic!("could not start the private API server: {err}"))
}

fn podinfo() -> Value {
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": { "name": "podinfo", "namespace": "flux-system" },
        "spec": {
            "interval": "5m",
            "path": "./kustomize",
            "prune": true,
            "sourceRef": { "kind": "GitRepository", "name": "podinfo" },
        },
    })
}

/// A blocking client built only from what the server hands out, as the collector would be.
fn client(server: &LocalApiServer, with_certificate: bool) -> reqwest::blocking::Client {
    let mut builder = reqwest::blocking::Client::builder()
        .use_rustls_tls()
        .no_proxy()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(server.ca_pem().as_bytes()).unwrap());
    if with_certificate {
        let identity = format!("{}{}", server.client_cert_pem(), server.client_key_pem());
        builder = builder.identity(reqwest::Identity::from_pem(identity.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

#[test]
fn creates_and_reads_a_flux_kustomization_over_https() {
    let server = start(None);
    let crd = std::fs::read_to_string(testdata("crds/flux-kustomization.crd.yaml")).unwrap();

    let names = server
        .apply_crd_yaml(&crd)
        .expect("create the Kustomization CRD");
    assert_eq!(names, [KUSTOMIZATION_CRD]);
    server
        .wait_for_crd(KUSTOMIZATION_CRD)
        .expect("CRD established");
    // Applying again replaces the existing definition.
    server
        .apply_crd_yaml(&crd)
        .expect("replace the Kustomization CRD");
    server
        .wait_for_crd(KUSTOMIZATION_CRD)
        .expect("CRD still established");

    let created = server
        .post_json(KUSTOMIZATIONS, &podinfo())
        .expect("create a Kustomization");
    assert_eq!(created["metadata"]["name"], "podinfo");
    assert!(created["metadata"]["uid"].is_string(), "{created}");
    // The CRD's schema defaults were applied by the server.
    assert_eq!(created["spec"]["force"], false, "{created}");

    // Read it back with a client built from the accessors alone.
    let url = format!("{}{KUSTOMIZATIONS}/podinfo", server.server_url());
    let response = client(&server, true).get(&url).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let read: Value = response.json().unwrap();
    assert_eq!(read["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(read["spec"]["sourceRef"]["name"], "podinfo");
    assert_eq!(read["spec"]["interval"], "5m");

    let list = server
        .get_json("/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations")
        .expect("list Kustomizations in every namespace");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");

    // The real schema validation runs: sourceRef is required.
    let mut invalid = podinfo();
    invalid["metadata"]["name"] = json!("no-source");
    invalid["spec"].as_object_mut().unwrap().remove("sourceRef");
    match server.post_json(KUSTOMIZATIONS, &invalid) {
        Err(LocalApiServerError::Status { status, body, .. }) => {
            assert_eq!(status, 422, "{body}");
            assert!(body.contains("sourceRef"), "{body}");
        }
        other => panic!("an invalid Kustomization was not rejected: {other:?}"),
    }

    // Without the client certificate, nothing is written. (Anonymous requests reach the
    // delegated authorizer, which points nowhere, so the server answers 500, not 403.)
    let mut intruder = podinfo();
    intruder["metadata"]["name"] = json!("intruder");
    let anonymous = client(&server, false)
        .post(format!("{}{KUSTOMIZATIONS}", server.server_url()))
        .json(&intruder)
        .send()
        .unwrap();
    let status = anonymous.status();
    assert!(
        status.is_client_error() || status.is_server_error(),
        "anonymous create answered {status}: {}",
        anonymous.text().unwrap_or_default()
    );
    let list = server.get_json(KUSTOMIZATIONS).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");

    let url = server.server_url();
    let dir = server.dir().to_owned();
    server.stop();
    assert!(
        client_without_server(&url),
        "the server still answers after stop"
    );
    assert!(!dir.exists(), "temporary directory removed");
}

fn client_without_server(url: &str) -> bool {
    reqwest::blocking::Client::builder()
        .danger_accept_invalid_certs(true)
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{url}/livez"))
        .send()
        .is_err()
}

#[test]
fn installs_a_directory_of_crds_and_writes_a_kubeconfig() {
    let server = start(Some(&testdata("crds")));

    for list in [
        "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations",
        "/apis/helm.toolkit.fluxcd.io/v2/helmreleases",
    ] {
        let answer = server.get_json(list).expect("list a custom resource");
        assert_eq!(answer["items"], json!([]), "{answer}");
    }

    let kubeconfig = std::fs::read_to_string(server.kubeconfig_path()).unwrap();
    let kubeconfig: Value = serde_yaml_ng::from_str(&kubeconfig).unwrap();
    assert_eq!(kubeconfig["current-context"], "fleetscope-local");
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"],
        server.server_url().as_str()
    );
    let decode = |value: &Value| {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.as_str().expect("base64 text"))
            .unwrap();
        String::from_utf8(bytes).unwrap()
    };
    assert_eq!(
        decode(&kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]),
        server.ca_pem()
    );
    assert_eq!(
        decode(&kubeconfig["users"][0]["user"]["client-certificate-data"]),
        server.client_cert_pem()
    );
    assert_eq!(
        decode(&kubeconfig["users"][0]["user"]["client-key-data"]),
        server.client_key_pem()
    );
}

#[test]
fn a_file_that_is_not_a_crd_is_refused_by_name() {
    let server = start(None);
    let err = server
        .apply_crd_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("ConfigMap"), "{err}");
}
