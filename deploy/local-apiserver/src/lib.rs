//! A private Kubernetes API server for tests: `etcd` and `apiextensions-apiserver` as child
//! processes, on free loopback ports, with their data, certificates and logs in one temporary
//! directory.
//!
//! `apiextensions-apiserver` is the part of Kubernetes that serves CustomResourceDefinitions and
//! custom resources, which is all the collector reads (Flux and Argo CD objects). It has no core
//! API (`/api`: no namespaces, pods or events), `/apis` discovery answers 404 and `/readyz` never
//! turns ready, so readiness here means `/livez` plus a served CRD list.
//!
//! Every start generates a throwaway certificate authority that signs the server's serving
//! certificate and a client certificate in the `system:masters` group; [`LocalApiServer::kubeconfig_path`]
//! names a kubeconfig that uses both, for kube-rs or `kubectl`.
//!
//! The binaries come from `scripts/install-apiserver`: `etcd` from Debian's `etcd-server`
//! package, `apiextensions-apiserver` built from Debian's Go source packages and cached in
//! `${FLEETSCOPE_CACHE:-$HOME/.cache/fleetscope}/apiserver/bin/` (or named by
//! `$FLEETSCOPE_APISERVER_BIN`). When either is missing, [`LocalApiServer::start`] fails with an
//! error that says to run that script.

#![forbid(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use fleetscope_local_process::{log_tail, ChildProcess, SpawnError, StartFailure};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use serde_json::{json, Value};

/// Environment variable naming the `apiextensions-apiserver` binary, instead of the cache.
pub const APISERVER_BINARY_ENV: &str = "FLEETSCOPE_APISERVER_BIN";

/// Environment variable naming Fleetscope's cache directory (default `$HOME/.cache/fleetscope`).
pub const CACHE_ENV: &str = "FLEETSCOPE_CACHE";

const INSTALL_HINT: &str = "run `scripts/install-apiserver` from the Fleetscope checkout";

/// How long the processes get to start, a CRD gets to be served, and a process gets to stop
/// gracefully before it is killed.
const START_LIMIT: Duration = Duration::from_secs(60);
const CRD_LIMIT: Duration = Duration::from_secs(30);
const STOP_GRACE: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);

const CRD_API: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

#[derive(Debug, thiserror::Error)]
pub enum LocalApiServerError {
    #[error("apiextensions-apiserver was not found at {looked_at}; {INSTALL_HINT} (it builds the binary into that cache) or set ${APISERVER_BINARY_ENV}")]
    ApiServerNotInstalled { looked_at: String },
    #[error("etcd was not found in PATH or at /usr/bin/etcd; {INSTALL_HINT} (it installs the Debian package etcd-server)")]
    EtcdNotInstalled,
    #[error("could not prepare {path}: {source}")]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not generate the {what} certificate: {source}")]
    Certificate {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("could not start {binary}: {source}")]
    Spawn {
        binary: PathBuf,
        source: std::io::Error,
    },
    #[error("{process} exited during start-up ({status}); last lines of {log}:\n{tail}")]
    Exited {
        process: &'static str,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{process} did not answer {probe} within {waited:?}; last lines of {log}:\n{tail}")]
    NotReady {
        process: &'static str,
        probe: String,
        waited: Duration,
        log: PathBuf,
        tail: String,
    },
    #[error("could not read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("document {index} of {origin} is not valid YAML: {source}")]
    Yaml {
        origin: String,
        index: usize,
        source: serde_yaml_ng::Error,
    },
    #[error("document {index} of {origin} is not an apiextensions.k8s.io/v1 CustomResourceDefinition with a name (apiVersion {api_version:?}, kind {kind:?})")]
    NotACrd {
        origin: String,
        index: usize,
        api_version: String,
        kind: String,
    },
    #[error("{method} {url} failed: {source}")]
    Http {
        method: String,
        url: String,
        source: reqwest::Error,
    },
    #[error("{method} {url} answered {status}: {body}")]
    Status {
        method: String,
        url: String,
        status: u16,
        body: String,
    },
    #[error("{method} {url} answered with a body that is not JSON: {source}")]
    Json {
        method: String,
        url: String,
        source: serde_json::Error,
    },
    #[error("crd {name} was not established and served within {waited:?}; last seen: {last}")]
    CrdNotServed {
        name: String,
        waited: Duration,
        last: String,
    },
}

type Result<T, E = LocalApiServerError> = std::result::Result<T, E>;

/// Finds `apiextensions-apiserver`: `$FLEETSCOPE_APISERVER_BIN`, else the binary that
/// `scripts/install-apiserver` caches (see [`cached_apiserver_binary`]).
pub fn find_apiserver_binary() -> Result<PathBuf> {
    find_apiserver_binary_in(
        std::env::var_os(APISERVER_BINARY_ENV),
        std::env::var_os(CACHE_ENV),
        std::env::var_os("HOME"),
    )
}

/// Where `scripts/install-apiserver` puts the binary:
/// `${FLEETSCOPE_CACHE:-$HOME/.cache/fleetscope}/apiserver/bin/apiextensions-apiserver`, or
/// `None` when neither variable is set.
pub fn cached_apiserver_binary() -> Option<PathBuf> {
    cached_binary_in(std::env::var_os(CACHE_ENV), std::env::var_os("HOME"))
}

fn cached_binary_in(cache: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    // As in the script's `${FLEETSCOPE_CACHE:-…}`, an empty value counts as unset.
    let cache = match cache.filter(|value| !value.is_empty()) {
        Some(cache) => PathBuf::from(cache),
        None => PathBuf::from(home.filter(|value| !value.is_empty())?).join(".cache/fleetscope"),
    };
    Some(cache.join("apiserver/bin/apiextensions-apiserver"))
}

fn find_apiserver_binary_in(
    explicit: Option<OsString>,
    cache: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf> {
    if let Some(explicit) = explicit.filter(|value| !value.is_empty()) {
        let explicit = PathBuf::from(explicit);
        return if explicit.is_file() {
            Ok(explicit)
        } else {
            Err(LocalApiServerError::ApiServerNotInstalled {
                looked_at: format!("{} (from ${APISERVER_BINARY_ENV})", explicit.display()),
            })
        };
    }
    let Some(cached) = cached_binary_in(cache, home) else {
        return Err(LocalApiServerError::ApiServerNotInstalled {
            looked_at: format!("the cache (${CACHE_ENV} and $HOME are both unset)"),
        });
    };
    if cached.is_file() {
        Ok(cached)
    } else {
        Err(LocalApiServerError::ApiServerNotInstalled {
            looked_at: cached.display().to_string(),
        })
    }
}

/// Finds `etcd` in `PATH`, else at `/usr/bin/etcd` (Debian's `etcd-server` package).
pub fn find_etcd_binary() -> Result<PathBuf> {
    find_etcd_binary_in(std::env::var_os("PATH"))
}

fn find_etcd_binary_in(path: Option<OsString>) -> Result<PathBuf> {
    path.map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("etcd"))
        .find(|candidate| candidate.is_file())
        .ok_or(LocalApiServerError::EtcdNotInstalled)
}

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

/// Starts etcd and then the API server on fresh ports, waiting for each.
fn launch(
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
fn fake_kubeconfig() -> String {
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

/// The certificates of one server: a CA, the server's serving certificate and one client.
#[derive(Debug)]
struct Pki {
    ca_pem: String,
    serving_cert_pem: String,
    serving_key_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

impl Pki {
    fn generate() -> Result<Pki> {
        let failed = |what| move |source| LocalApiServerError::Certificate { what, source };

        let ca_key = KeyPair::generate().map_err(failed("ca"))?;
        let mut ca = CertificateParams::default();
        ca.distinguished_name = name("fleetscope-local-apiserver-ca", None);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(failed("ca"))?;
        let issuer = Issuer::new(ca, &ca_key);

        let serving_key = KeyPair::generate().map_err(failed("serving"))?;
        let mut serving = CertificateParams::new(["127.0.0.1".to_owned(), "localhost".to_owned()])
            .map_err(failed("serving"))?;
        serving.distinguished_name = name("fleetscope-local-apiserver", None);
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving.use_authority_key_identifier_extension = true;
        let serving_cert = serving
            .signed_by(&serving_key, &issuer)
            .map_err(failed("serving"))?;

        // The API server takes the user from CN and the groups from O.
        let client_key = KeyPair::generate().map_err(failed("client"))?;
        let mut client = CertificateParams::default();
        client.distinguished_name = name("fleetscope-test-admin", Some("system:masters"));
        client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        client.use_authority_key_identifier_extension = true;
        let client_cert = client
            .signed_by(&client_key, &issuer)
            .map_err(failed("client"))?;

        Ok(Pki {
            ca_pem: ca_cert.pem(),
            serving_cert_pem: serving_cert.pem(),
            serving_key_pem: serving_key.serialize_pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        })
    }

    fn client_tls(&self) -> ClientTls {
        ClientTls {
            ca_pem: self.ca_pem.clone(),
            identity_pem: format!("{}{}", self.client_cert_pem, self.client_key_pem),
        }
    }
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name
}

/// A child process with its output in a log file, named in errors.
#[derive(Debug)]
struct Process {
    name: &'static str,
    process: ChildProcess,
    log: PathBuf,
}

impl Process {
    fn spawn(name: &'static str, command: Command, cwd: &Path, log: &Path) -> Result<Process> {
        let process = ChildProcess::spawn(command, cwd, log, log).map_err(|err| match err {
            SpawnError::Log { path, source } => LocalApiServerError::Prepare { path, source },
            SpawnError::Spawn { program, source } => LocalApiServerError::Spawn {
                binary: program,
                source,
            },
        })?;
        Ok(Process {
            name,
            process,
            log: log.to_owned(),
        })
    }

    fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Polls until it listens on `port` and `ready` holds, it exits, or [`START_LIMIT`] passes.
    fn wait_for(&mut self, port: u16, probe: &str, ready: impl FnMut() -> bool) -> Result<()> {
        self.process
            .wait_until_serving(START_LIMIT, port, ready)
            .map_err(|failure| match failure {
                StartFailure::Exited(status) => LocalApiServerError::Exited {
                    process: self.name,
                    status: status.to_string(),
                    log: self.log.clone(),
                    tail: log_tail(&[&self.log], 20),
                },
                StartFailure::NotReady(waited) => LocalApiServerError::NotReady {
                    process: self.name,
                    probe: probe.to_owned(),
                    waited,
                    log: self.log.clone(),
                    tail: log_tail(&[&self.log], 20),
                },
            })
    }

    /// SIGTERM, then SIGKILL after [`STOP_GRACE`].
    fn terminate(&mut self) {
        self.process.terminate(STOP_GRACE);
    }

    fn kill_now(&mut self) {
        self.process.kill_now();
    }
}

/// What a client presents and trusts: the CA and the client certificate with its key.
#[derive(Debug, Clone)]
struct ClientTls {
    ca_pem: String,
    identity_pem: String,
}

#[derive(Debug)]
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn json(self, method: &str, url: &str) -> Result<Value> {
        if !(200..300).contains(&self.status) {
            let mut body = self.body;
            if body.len() > 2000 {
                let cut = (0..=2000)
                    .rev()
                    .find(|&i| body.is_char_boundary(i))
                    .unwrap_or(0);
                body.truncate(cut);
                body.push('…');
            }
            return Err(LocalApiServerError::Status {
                method: method.to_owned(),
                url: url.to_owned(),
                status: self.status,
                body,
            });
        }
        serde_json::from_str(&self.body).map_err(|source| LocalApiServerError::Json {
            method: method.to_owned(),
            url: url.to_owned(),
            source,
        })
    }
}

/// One HTTP request with a blocking client. It runs on a thread of its own, because the
/// blocking client refuses to run on a thread inside an async runtime (tests of async code
/// call this from `#[tokio::test]` functions).
fn http(tls: Option<&ClientTls>, method: &str, url: &str, body: Option<Vec<u8>>) -> Result<Answer> {
    let failed = |source| LocalApiServerError::Http {
        method: method.to_owned(),
        url: url.to_owned(),
        source,
    };
    let send = || -> Result<Answer, reqwest::Error> {
        let mut builder = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT);
        if let Some(tls) = tls {
            builder = builder
                .tls_built_in_root_certs(false)
                .add_root_certificate(reqwest::Certificate::from_pem(tls.ca_pem.as_bytes())?)
                .identity(reqwest::Identity::from_pem(tls.identity_pem.as_bytes())?);
        }
        let client = builder.build()?;
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .expect("only fixed, valid method names are passed");
        let mut request = client.request(method, url);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request.send()?;
        let status = response.status().as_u16();
        let body = response.text()?;
        Ok(Answer { status, body })
    };
    std::thread::scope(|scope| match scope.spawn(send).join() {
        Ok(result) => result.map_err(failed),
        Err(panic) => std::panic::resume_unwind(panic),
    })
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

fn create_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|source| LocalApiServerError::Prepare {
        path: path.to_owned(),
        source,
    })
}

fn write_file(path: &Path, content: &str) -> Result<()> {
    std::fs::write(path, content).map_err(|source| LocalApiServerError::Prepare {
        path: path.to_owned(),
        source,
    })
}

fn free_port(home: &Path) -> Result<u16> {
    fleetscope_local_process::free_port().map_err(|source| LocalApiServerError::Prepare {
        path: home.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_apiserver_says_to_run_the_install_script() {
        let err = find_apiserver_binary_in(
            None,
            Some("/nonexistent/fleetscope-cache".into()),
            Some("/root".into()),
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(message.contains("scripts/install-apiserver"), "{message}");
        assert!(
            message.contains("/nonexistent/fleetscope-cache/apiserver/bin/apiextensions-apiserver"),
            "{message}"
        );

        let err = find_apiserver_binary_in(Some("/nonexistent/apiserver".into()), None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/apiserver"), "{err}");
        assert!(err.contains(APISERVER_BINARY_ENV), "{err}");
    }

    #[test]
    fn cache_path_follows_the_install_script() {
        assert_eq!(
            cached_binary_in(None, Some("/home/dev".into())),
            Some(PathBuf::from(
                "/home/dev/.cache/fleetscope/apiserver/bin/apiextensions-apiserver"
            ))
        );
        assert_eq!(
            cached_binary_in(Some("".into()), Some("/home/dev".into())),
            Some(PathBuf::from(
                "/home/dev/.cache/fleetscope/apiserver/bin/apiextensions-apiserver"
            ))
        );
        assert_eq!(
            cached_binary_in(Some("/srv/cache".into()), Some("/home/dev".into())),
            Some(PathBuf::from(
                "/srv/cache/apiserver/bin/apiextensions-apiserver"
            ))
        );
        assert_eq!(cached_binary_in(None, None), None);
    }

    #[test]
    fn missing_etcd_says_to_run_the_install_script() {
        // /usr/bin/etcd is always looked at, so this only checks the message.
        let message = LocalApiServerError::EtcdNotInstalled.to_string();
        assert!(message.contains("scripts/install-apiserver"), "{message}");
        assert!(message.contains("etcd-server"), "{message}");
        if !Path::new("/usr/bin/etcd").is_file() {
            assert!(find_etcd_binary_in(Some("/nonexistent".into())).is_err());
        }
    }

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

    fn der(pem: &str) -> Vec<u8> {
        let body: String = pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect();
        BASE64.decode(body).unwrap()
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack
            .windows(needle.len())
            .any(|window| window == needle)
    }

    #[test]
    fn certificates_are_v3_with_the_masters_group() {
        // The start of a tbsCertificate's explicit version field holding v3 (INTEGER 2).
        const VERSION_3: &[u8] = &[0xa0, 0x03, 0x02, 0x01, 0x02];
        // The OIDs of id-kp-clientAuth and id-kp-serverAuth, DER-encoded.
        const CLIENT_AUTH: &[u8] = &[0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
        const SERVER_AUTH: &[u8] = &[0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
        let pki = Pki::generate().unwrap();
        for pem in [&pki.ca_pem, &pki.serving_cert_pem, &pki.client_cert_pem] {
            assert!(contains(&der(pem)[..16], VERSION_3), "not v3: {pem}");
        }
        let client = der(&pki.client_cert_pem);
        assert!(contains(&client, b"system:masters"));
        assert!(contains(&client, CLIENT_AUTH));
        let serving = der(&pki.serving_cert_pem);
        assert!(contains(&serving, SERVER_AUTH));
        assert!(
            contains(&serving, &[127, 0, 0, 1]),
            "an IP address SAN for 127.0.0.1"
        );
        assert!(pki
            .client_key_pem
            .starts_with("-----BEGIN PRIVATE KEY-----"));
        // The TLS client that talks to the server accepts both.
        let tls = pki.client_tls();
        reqwest::Identity::from_pem(tls.identity_pem.as_bytes()).unwrap();
        reqwest::Certificate::from_pem(tls.ca_pem.as_bytes()).unwrap();
    }
}
