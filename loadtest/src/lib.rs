//! Fleet simulation: a generated fleet of clusters and apps, with the desired state, what the
//! clusters report, and the ground truth the model says about every pair. The demo writes it
//! into ClickHouse; benchmarks and the load test drive it through the real pipeline.

#![forbid(unsafe_code)]

pub mod agents;
pub mod fleet;
pub mod hubcheck;
pub mod pipeline;
pub mod plot;
pub mod procs;
pub mod readers;
pub mod report;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod sim;

pub use fleet::{FleetSpec, FleetSpecError, GeneratedFleet};
