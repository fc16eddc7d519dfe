//! Objects the normalization tests start from: a Flux Kustomization or an Argo CD Application
//! around a given status, a kstatus condition, and a valid content hash.

use serde_json::{json, Value};

/// A content hash that validates.
pub(super) const HASH: &str =
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A Kustomization `apps/podinfo` with the given status.
pub(super) fn kustomization(status: Value) -> Value {
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "podinfo", "namespace": "apps"},
        "spec": {"interval": "5m"},
        "status": status,
    })
}

/// A condition whose message says its type and status.
pub(super) fn condition(kind: &str, status: &str, reason: &str, at: &str) -> Value {
    json!({
        "type": kind,
        "status": status,
        "reason": reason,
        "message": format!("{kind} is {status}"),
        "lastTransitionTime": at,
    })
}

/// An Application `argocd/shop` with the given status.
pub(super) fn application(status: Value) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "shop", "namespace": "argocd"},
        "status": status,
    })
}
