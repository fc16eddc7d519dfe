//! Fleetscope's renderer: reads the platform repo (clusters, groups, apps, namespaces,
//! assignment policies), decides which app runs on which cluster and why, groups clusters with
//! identical content into render groups, and writes the GitOps output and desired-state rows.
//!
//! **Boundary**: the renderer never talks to a cluster.

#![forbid(unsafe_code)]

pub mod platform;
