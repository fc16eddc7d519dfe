//! The `fleetscope` binary's tests that need its development tools (the `dev-tools` feature,
//! on by default): the docs' examples and the load test's command.

mod docs;
mod loadtest;
