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

/// Runs `fleetscope loadtest` with `args` and its report in `out`; fails the test, with the
/// run's output, unless it succeeds; returns the report.
pub(crate) fn run_loadtest(
    args: &[&str],
    out: &std::path::Path,
) -> fleetscope_loadtest::report::LoadtestReport {
    let started = std::time::Instant::now();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .arg("loadtest")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("run fleetscope loadtest");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}");
    assert!(
        output.status.success(),
        "loadtest failed after {:.0?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        started.elapsed()
    );
    let json = std::fs::read_to_string(out.join("report.json")).unwrap();
    serde_json::from_str(&json).unwrap()
}
