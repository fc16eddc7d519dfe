//! The renderer's integration tests, one binary so that a change links one test program: a
//! module per area. `watch_signal.rs` is a program of its own: it signals its own process.

mod cache;
mod crd_schemas;
mod desired;
mod render;
mod schema;
mod version_changes;
mod watch;
