//! `fleetscope render --every` stops cleanly on SIGTERM, the way Kubernetes stops a pod. The
//! signal goes to this test's own process, so this file holds this one test only.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fleetscope_renderer::args::{RenderArgs, ServiceArgs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_loop_and_the_command_succeeds() {
    let platform = tempfile::tempdir().unwrap();
    fleetscope_testkit::copy_dir(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/platform"),
        platform.path(),
    );
    let out = tempfile::tempdir().unwrap();
    let args = RenderArgs {
        platform: platform.path().to_owned(),
        output: Some(out.path().to_owned()),
        push: false,
        dry_run: false,
        publish_only: false,
        clickhouse_url: None,
        clickhouse_database: "fleetscope".to_owned(),
        service: ServiceArgs {
            every: Some(1),
            ..ServiceArgs::default()
        },
        command: None,
    };
    let task = tokio::spawn(fleetscope_renderer::args::run(args));

    // The first pass has committed: the handlers are installed (they are before the first pass).
    let started = Instant::now();
    while git2::Repository::open(out.path())
        .ok()
        .and_then(|repo| fleetscope_renderer::git::head_commit(&repo))
        .is_none()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no first render"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!task.is_finished());

    let status = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let result = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("SIGTERM stops the loop within its interval")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
}
