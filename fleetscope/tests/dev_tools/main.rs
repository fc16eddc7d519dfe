//! The `fleetscope` binary's tests that need its development tools (the `dev-tools` feature,
//! on by default): the docs' examples and the load test's command, in one server's set-up and
//! in cluster mode losing one server at a time.

mod cluster_faults;
mod docs;
mod loadtest;
