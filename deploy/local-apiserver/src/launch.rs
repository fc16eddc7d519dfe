//! Starting the two processes: etcd, then the API server on top of it, each waited for.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::crds::CRD_API;
use crate::http::http;
use crate::pki::Pki;
use crate::process::Process;
use crate::{LocalApiServerError, Result};

/// Starts etcd and then the API server on fresh ports, waiting for each.
pub(crate) fn launch(
    home: &Path,
    etcd_binary: &Path,
    apiserver_binary: &Path,
    pki: &Pki,
) -> Result<(Process, u16, Process, u16)> {
    let (etcd_port, peer_port, secure_port) =
        (free_port(home)?, free_port(home)?, free_port(home)?);
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    // A data directory left by a failed attempt names other peer ports: start afresh.
    let data = home.join("etcd");
    if data.exists() {
        std::fs::remove_dir_all(&data).map_err(|source| LocalApiServerError::Prepare {
            path: data.clone(),
            source,
        })?;
    }
    let mut etcd_command = Command::new(etcd_binary);
    etcd_command
        .arg("--name=fleetscope")
        .arg(format!("--data-dir={}", data.display()))
        .arg(format!("--listen-client-urls={etcd_url}"))
        .arg(format!("--advertise-client-urls={etcd_url}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster=fleetscope={peer_url}"))
        .arg("--initial-cluster-state=new")
        .arg("--logger=zap")
        .arg("--log-outputs=stderr")
        .arg("--log-level=warn");
    if let Some(arch) = etcd_unsupported_arch() {
        // etcd 3.4 refuses to run on architectures other than amd64 and ppc64le unless told.
        etcd_command.env("ETCD_UNSUPPORTED_ARCH", arch);
    }
    let mut etcd = Process::spawn("etcd", etcd_command, home, &home.join("log/etcd.log"))?;
    let health_url = format!("{etcd_url}/health");
    etcd.wait_for(etcd_port, &format!("GET {health_url}"), || {
        http(None, "GET", &health_url, None)
            .is_ok_and(|answer| answer.status == 200 && answer.body.contains("true"))
    })?;

    let fake = home.join("fake-kubeconfig.yaml");
    let mut apiserver_command = Command::new(apiserver_binary);
    apiserver_command
        .arg(format!("--etcd-servers={etcd_url}"))
        .arg(format!("--secure-port={secure_port}"))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--cert-dir={}", home.join("cert-dir").display()))
        .arg(format!(
            "--tls-cert-file={}",
            home.join("pki/serving.crt").display()
        ))
        .arg(format!(
            "--tls-private-key-file={}",
            home.join("pki/serving.key").display()
        ))
        .arg(format!("--client-ca-file={}", home.join("pki/ca.crt").display()))
        .arg(format!("--kubeconfig={}", fake.display()))
        .arg(format!("--authentication-kubeconfig={}", fake.display()))
        .arg(format!("--authorization-kubeconfig={}", fake.display()))
        .arg("--authentication-skip-lookup")
        // These plug-ins need the core API (namespaces) or webhooks, which this server lacks.
        .arg("--disable-admission-plugins=NamespaceLifecycle,MutatingAdmissionPolicy,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook");
    let mut apiserver = Process::spawn(
        "apiextensions-apiserver",
        apiserver_command,
        home,
        &home.join("log/apiserver.log"),
    )?;
    let tls = pki.client_tls();
    let base = format!("https://127.0.0.1:{secure_port}");
    apiserver.wait_for(
        secure_port,
        &format!("GET {base}/livez and {CRD_API}"),
        || {
            let answers = |path: &str| {
                http(Some(&tls), "GET", &format!("{base}{path}"), None)
                    .is_ok_and(|answer| answer.status == 200)
            };
            answers("/livez") && answers(CRD_API)
        },
    )?;
    Ok((etcd, etcd_port, apiserver, secure_port))
}

/// The value of `ETCD_UNSUPPORTED_ARCH` this machine's architecture needs, if any.
fn etcd_unsupported_arch() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" | "powerpc64" => None,
        "aarch64" => Some("arm64"),
        "s390x" => Some("s390x"),
        _ => None,
    }
}

/// A kubeconfig for the server's own client-side flags (core API, token review, subject access
/// review). It points at a loopback port nothing listens on, so those look-ups fail fast and
/// only `system:masters` (always allowed) and the health paths get through.
pub(crate) fn fake_kubeconfig() -> String {
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "nowhere",
            "cluster": { "server": "https://127.0.0.1:1", "insecure-skip-tls-verify": true },
        }],
        "users": [{ "name": "nobody", "user": { "token": "unused" } }],
        "contexts": [{ "name": "nowhere", "context": { "cluster": "nowhere", "user": "nobody" } }],
        "current-context": "nowhere",
    });
    serde_yaml_ng::to_string(&kubeconfig).expect("a JSON value always serializes to YAML")
}

/// A free loopback port.
fn free_port(home: &Path) -> Result<u16> {
    fleetscope_local_process::free_port().map_err(|source| LocalApiServerError::Prepare {
        path: home.to_owned(),
        source,
    })
}
