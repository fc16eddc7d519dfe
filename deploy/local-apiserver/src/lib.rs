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
//!
//! `binaries` finds the two programs, `pki` makes the certificates, `launch` starts the
//! processes (`process`), `server` is the running server and its requests (`http`), and `crds`
//! applies CustomResourceDefinitions and waits until they are served.

#![forbid(unsafe_code)]

mod binaries;
mod crds;
mod http;
mod launch;
mod pki;
mod process;
mod server;

use std::path::PathBuf;
use std::time::Duration;

pub use binaries::{cached_apiserver_binary, find_apiserver_binary, find_etcd_binary};
pub use server::LocalApiServer;

/// Environment variable naming the `apiextensions-apiserver` binary, instead of the cache.
pub const APISERVER_BINARY_ENV: &str = "FLEETSCOPE_APISERVER_BIN";

/// Environment variable naming Fleetscope's cache directory (default `$HOME/.cache/fleetscope`).
pub const CACHE_ENV: &str = "FLEETSCOPE_CACHE";

/// What to do when a binary is missing.
const INSTALL_HINT: &str = "run `scripts/install-apiserver` from the Fleetscope checkout";

/// Why the server could not be started, or a request to it failed.
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

/// This crate's results.
type Result<T, E = LocalApiServerError> = std::result::Result<T, E>;
