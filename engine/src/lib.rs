//! Fleetscope's fleet engine: the fleet kept in memory and current as the store changes.
//!
//! [`Index`] loads the fleet from the store and refreshes it from what arrived since, publishing
//! an immutable [`Fleet`] snapshot after each change. A fleet holds inventory, membership,
//! desired state per render group, reasons, the latest state of every app object and last
//! heartbeats, and keeps every pair's drift state (the model's one definition) and the counters
//! per group ([`rollups`]) current as those change. [`past`] builds the fleet as it was at a
//! past moment from the store's history; [`gate`] and [`insights`] are the arithmetic of the
//! rollout gate and of what failing clusters share.
//!
//! **Boundary**: no HTTP. The engine reads the store (and writes nothing), takes the time as
//! a parameter, and knows nothing of routes, parameters, answers' JSON or metrics.

#![forbid(unsafe_code)]

mod counts;
mod fleet;
pub mod gate;
mod index;
pub mod insights;
pub mod past;
pub mod rollouts;
mod rollups;
mod symbols;

pub use counts::{state_index, Counts};
pub use fleet::rollout_figures;
pub use fleet::rollout_records;
pub use fleet::{
    as_group_rollups, ClusterRec, EnvironmentTable, Filter, Fleet, Pair, VersionsByGroup,
    UNFINISHED_RENDER_GRACE, UNREPLICATED_RENDER_GRACE,
};
pub use index::arrivals::ArrivalRead;
pub use index::{load, Index, RefreshPhases, Refreshed};
