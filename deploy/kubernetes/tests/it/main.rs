//! The Kubernetes manifests' tests, one program: the manifests against the typed models, the
//! flags they pass, the renderer's pod, and the manifests applied to a real API server.

mod apiserver;
mod common;
mod flags;
mod manifests;
mod renderer_pod;
