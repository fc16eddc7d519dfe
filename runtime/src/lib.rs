//! What every Fleetscope service shares at run time: the signal that stops it, how it logs and
//! exports traces, the clock, and the bearer-token files the collector and the hub read.
//!
//! Each of these once existed in several copies that drifted apart in small ways; here each
//! exists once. The crate knows nothing of ClickHouse or HTTP routing, so that any component,
//! including the agent, can depend on it.

#![forbid(unsafe_code)]

pub mod clock;
pub mod signal;
pub mod telemetry;
pub mod tokens;

pub use signal::shutdown_signal;
