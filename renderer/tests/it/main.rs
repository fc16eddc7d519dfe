//! The renderer's integration tests, one binary so that a change links one test program: a
//! module per area. `watch_signal.rs` is a program of its own: it signals its own process.

mod cache;
mod crd_schemas;
mod desired;
mod import;
mod render;
mod schema;
mod version_changes;
mod watch;

/// The project's example platform repo.
fn example() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/platform")
}

/// A copy of the example platform repo in a directory of its own, for a test to change.
fn copy_of_example() -> tempfile::TempDir {
    let platform = tempfile::tempdir().unwrap();
    fleetscope_testkit::copy_dir(&example(), platform.path());
    platform
}
