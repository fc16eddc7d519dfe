//! Fleetscope's domain model: the concepts of the design brief as plain Rust values.
//!
//! **Invariant**: this crate does no I/O. It never reads a file, a socket or a clock; time is
//! always passed in. Everything that comes from outside enters through a validating constructor
//! (`parse`, `new` or serde's `try_from`) and gets an error that names the bad value.

#![forbid(unsafe_code)]

pub mod app;
pub mod cluster;
pub mod drift;
pub mod group;
pub mod ids;
pub mod matching;
pub mod selector;
pub mod stamps;
pub mod state;
mod string_enum;
pub mod time;

pub use app::{AppSource, Application, AssignmentPolicy, NamespaceSpec, ReconcilerKind};
pub use cluster::{Cluster, Environment, Group, Reconciler};
pub use drift::{
    classify, next_change, DesiredForDrift, DriftInput, DriftPolicy, DriftState, ObservedForDrift,
};
pub use group::{GroupPath, GroupPathError};
pub use ids::{AppName, ClusterId, IdError, Version};
pub use selector::{ClusterSelector, LabelRequirement, Labels, Operator, SelectorError};
pub use state::{DesiredItem, Health, Heartbeat, ObjectKind, ObjectRef, ObservedItem, SyncStatus};
pub use time::Timestamp;
