//! The load test (`fleetscope loadtest`): a fleet rendered from a generated platform repo,
//! simulated agents reporting it through the real collector, the hub checked against the
//! ground truth of what was delivered, and the measurements. The demo runs the same pipeline.
//! The generated fleet that tests and benchmarks write straight into a store is not here but in
//! `fleetscope-fixtures`, below the services.

#![forbid(unsafe_code)]

pub mod agents;
pub mod args;
pub mod audit;
pub mod cluster;
pub mod faults;
pub mod hubcheck;
pub mod pipeline;
pub mod plot;
pub mod procs;
pub mod readers;
pub mod report;
pub mod run;
pub mod scenario;
pub mod sim;
