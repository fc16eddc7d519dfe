//! The `fleetscope` binary's tests that need its development tools (the `dev-tools` feature,
//! on by default): the docs' examples and the load test's command, in one server's set-up and
//! in cluster mode losing one server at a time.

mod cluster_faults;
mod docs;
mod loadtest;

/// The load test runs take this in turn: each starts its own servers and measures time, and two
/// at once on a small machine would starve both.
pub(crate) fn one_run_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    RUNS.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
