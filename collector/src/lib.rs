//! Fleetscope's collector: turns Flux and Argo CD objects into observed items, watches them
//! with kube-rs, and moves them from the fleet into the store, through the edge agent (with its
//! on-disk spool) and the central collector.
//!
//! **Boundary**: the only crate that knows kube-rs and the Flux and Argo CD object formats.

#![forbid(unsafe_code)]

pub mod agent;
pub mod args;
pub mod central;
pub mod jitter;
pub mod normalize;
pub mod protocol;
pub mod watch;
