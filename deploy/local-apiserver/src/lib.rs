//! A private Kubernetes API server for tests (placeholder until the crate lands).
