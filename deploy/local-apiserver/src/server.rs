//! The running server: starting it, where its parts are, requests to it, and stopping it.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::binaries::{find_apiserver_binary, find_etcd_binary};
use crate::http::http;
use crate::launch::{fake_kubeconfig, launch};
use crate::pki::Pki;
use crate::process::Process;
use crate::{LocalApiServerError, Result};

/// A running private API server (etcd plus apiextensions-apiserver). Dropping it kills both
/// processes and removes the temporary directory; [`LocalApiServer::stop`] stops them gracefully.
pub struct LocalApiServer {
    // Declared before `dir`, so the processes are gone before their directory is removed.
    apiserver: Process,
    etcd: Process,
    etcd_port: u16,
    secure_port: u16,
    pki: Pki,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for LocalApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalApiServer")
            .field("server_url", &self.server_url())
            .field("etcd_url", &self.etcd_url())
            .field("dir", &self.dir.path())
            .field("apiserver_pid", &self.apiserver.pid())
            .field("etcd_pid", &self.etcd.pid())
            .finish_non_exhaustive()
    }
}

impl LocalApiServer {
    /// Starts etcd and apiextensions-apiserver in a new temporary directory on free loopback
    /// ports, waits until the CRD API answers, and, given `crd_dir`, applies every `*.yaml`,
    /// `*.yml` and `*.json` file in it (see [`LocalApiServer::install_crd_dir`]).
    pub fn start(crd_dir: Option<&Path>) -> Result<LocalApiServer> {
        let apiserver_binary = find_apiserver_binary()?;
        let etcd_binary = find_etcd_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("fleetscope-apiserver-")
            .tempdir()
            .map_err(|source| LocalApiServerError::Prepare {
                path: std::env::temp_dir(),
                source,
            })?;
        let home = dir.path().to_owned();
        for sub in ["pki", "log", "cert-dir"] {
            create_dir(&home.join(sub))?;
        }
        let pki = Pki::generate()?;
        write_file(&home.join("pki/ca.crt"), &pki.ca_pem)?;
        write_file(&home.join("pki/serving.crt"), &pki.serving_cert_pem)?;
        write_file(&home.join("pki/serving.key"), &pki.serving_key_pem)?;
        write_file(&home.join("fake-kubeconfig.yaml"), &fake_kubeconfig())?;

        let mut last_error = None;
        // A port found free can be taken by someone else before a server binds it: retry.
        for _ in 0..3 {
            let launched = launch(&home, &etcd_binary, &apiserver_binary, &pki);
            match launched {
                Ok((etcd, etcd_port, apiserver, secure_port)) => {
                    let kubeconfig = home.join("kubeconfig.yaml");
                    let server = LocalApiServer {
                        apiserver,
                        etcd,
                        etcd_port,
                        secure_port,
                        pki,
                        kubeconfig,
                        dir,
                    };
                    write_file(&server.kubeconfig, &server.kubeconfig_yaml())?;
                    if let Some(crd_dir) = crd_dir {
                        server.install_crd_dir(crd_dir)?;
                    }
                    return Ok(server);
                }
                // Losing a port to someone else makes a process exit; anything else is final.
                Err(err @ LocalApiServerError::Exited { .. }) => last_error = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last_error.expect("at least one attempt was made"))
    }

    /// The API server, for example `https://127.0.0.1:41234`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.secure_port)
    }

    /// etcd's client URL, for example `http://127.0.0.1:41235`.
    pub fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// A kubeconfig (one cluster, one user, one current context) that reaches this server as a
    /// member of `system:masters`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The certificate authority (PEM) that signed the server's serving certificate and the
    /// client certificate.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The client certificate (PEM; X.509 v3, `O=system:masters`, extended key usage clientAuth).
    pub fn client_cert_pem(&self) -> &str {
        &self.pki.client_cert_pem
    }

    /// The client certificate's private key (PEM, PKCS#8).
    pub fn client_key_pem(&self) -> &str {
        &self.pki.client_key_pem
    }

    /// The temporary directory with etcd's data, the certificates, the kubeconfig and the logs
    /// (`log/etcd.log`, `log/apiserver.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `GET` a path on the server (for example
    /// `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations`) with the
    /// client certificate. Anything but a 2xx answer is an error that carries the answer.
    pub fn get_json(&self, path: &str) -> Result<Value> {
        self.request_json("GET", path, None)
    }

    /// `POST` a JSON object to a path on the server, returning the object the server answers.
    pub fn post_json(&self, path: &str, body: &Value) -> Result<Value> {
        self.request_json("POST", path, Some(body))
    }

    /// `PUT` a JSON object to a path on the server, returning the object the server answers.
    pub fn put_json(&self, path: &str, body: &Value) -> Result<Value> {
        self.request_json("PUT", path, Some(body))
    }

    /// Sends one request with the client certificate and reads a 2xx answer as JSON.
    fn request_json(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
        let url = format!("{}{path}", self.server_url());
        let body = body.map(|value| value.to_string().into_bytes());
        let answer = http(Some(&self.pki.client_tls()), method, &url, body)?;
        answer.json(method, &url)
    }

    /// Stops the API server, then etcd, gracefully (SIGTERM, then SIGKILL after 10 s), and
    /// removes the temporary directory.
    pub fn stop(mut self) {
        self.apiserver.terminate();
        self.etcd.terminate();
    }

    /// A kubeconfig that reaches this server with the client certificate.
    fn kubeconfig_yaml(&self) -> String {
        let kubeconfig = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{
                "name": "fleetscope-local",
                "cluster": {
                    "server": self.server_url(),
                    "certificate-authority-data": BASE64.encode(&self.pki.ca_pem),
                },
            }],
            "users": [{
                "name": "fleetscope-admin",
                "user": {
                    "client-certificate-data": BASE64.encode(&self.pki.client_cert_pem),
                    "client-key-data": BASE64.encode(&self.pki.client_key_pem),
                },
            }],
            "contexts": [{
                "name": "fleetscope-local",
                "context": {
                    "cluster": "fleetscope-local",
                    "user": "fleetscope-admin",
                    "namespace": "default",
                },
            }],
            "current-context": "fleetscope-local",
            "preferences": {},
        });
        serde_yaml_ng::to_string(&kubeconfig).expect("a JSON value always serializes to YAML")
    }
}

impl Drop for LocalApiServer {
    fn drop(&mut self) {
        self.apiserver.kill_now();
        self.etcd.kill_now();
    }
}

/// Creates `path` and its parents.
fn create_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|source| LocalApiServerError::Prepare {
        path: path.to_owned(),
        source,
    })
}

/// Writes `content` into `path`.
fn write_file(path: &Path, content: &str) -> Result<()> {
    std::fs::write(path, content).map_err(|source| LocalApiServerError::Prepare {
        path: path.to_owned(),
        source,
    })
}
