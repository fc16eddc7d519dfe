//! `fleetscope render --every`: the renderer as a long-running service. Each test runs the loop
//! against a platform repo in a temporary directory, changes it between passes, and reads what
//! reached the output repository, its remote and ClickHouse.

use std::path::Path;
use std::time::{Duration, Instant};

use fleetscope_renderer::args::{watch, RenderArgs, ServiceArgs, WatchReport};
use fleetscope_renderer::{git, DIGEST_TRAILER};

use crate::example;
use fleetscope_testkit::TestStore;

const EVERY: Duration = Duration::from_millis(100);

fn args(platform: &Path, output: &Path) -> RenderArgs {
    RenderArgs {
        platform: platform.to_owned(),
        output: Some(output.to_owned()),
        push: false,
        dry_run: false,
        publish_only: false,
        clickhouse_url: None,
        clickhouse_database: "fleetscope".to_owned(),
        service: ServiceArgs::default(),
        command: None,
    }
}

/// The commit ids of `main`, newest first, following first parents.
fn log(repo: &Path) -> Vec<(String, String)> {
    let Ok(repo) = git2::Repository::open(repo) else {
        return Vec::new();
    };
    let Ok(reference) = repo.find_reference(git::BRANCH) else {
        return Vec::new();
    };
    let mut commit = Some(reference.peel_to_commit().unwrap());
    let mut out = Vec::new();
    while let Some(c) = commit {
        out.push((
            c.id().to_string(),
            c.message().unwrap_or_default().to_owned(),
        ));
        commit = c.parent(0).ok();
    }
    out
}

/// Waits until `condition` holds, failing with `what` after 30 s.
async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Replaces `from` by `to` in one platform file (the text must be there).
fn edit(platform: &Path, file: &str, from: &str, to: &str) {
    let path = platform.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} has no {from:?}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

type Running = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<WatchReport>>,
);

fn start(args: RenderArgs) -> Running {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(watch(args, EVERY, async move {
        let _ = stopped.await;
    }));
    (stop, task)
}

async fn stop((stop, task): Running) -> WatchReport {
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the loop stops when asked")
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_rendered_committed_and_pushed_and_an_invalid_repo_keeps_the_last_output() {
    let platform = crate::copy_of_example();
    let out = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    git2::Repository::init_bare(remote.path()).unwrap();
    let repo = git::open_or_init(out.path()).unwrap();
    repo.remote("origin", remote.path().to_str().unwrap())
        .unwrap();
    let mut args = args(platform.path(), out.path());
    args.push = true;
    let running = start(args);

    // First pass: the whole platform repo, committed and pushed.
    until("the first render is pushed", || {
        log(remote.path()).len() == 1
    })
    .await;
    let first = log(out.path());
    assert_eq!(first.len(), 1);
    assert_eq!(log(remote.path()), first);

    // Passes over an unchanged platform repo commit and push nothing.
    tokio::time::sleep(EVERY * 5).await;
    assert_eq!(log(out.path()), first);

    // A new version of one app: a second commit on top of the first, pushed.
    edit(
        platform.path(),
        "apps/platform.yaml",
        "version: 0.9.3",
        "version: 0.9.4",
    );
    until("the change is pushed", || log(remote.path()).len() == 2).await;
    let second = log(out.path());
    assert_eq!(second.len(), 2);
    assert_eq!(second[1], first[0], "the new commit's parent is the first");
    assert_eq!(log(remote.path()), second);
    let digest_lines: Vec<usize> = second
        .iter()
        .map(|(_, m)| m.lines().filter(|l| l.starts_with(DIGEST_TRAILER)).count())
        .collect();
    assert_eq!(
        digest_lines,
        [1, 1],
        "every render commit records its inputs"
    );

    // An invalid platform repo: passes fail, nothing is written, the loop keeps going.
    std::fs::write(
        platform.path().join("apps/broken.yaml"),
        "kind: Application\nname: [broken\n",
    )
    .unwrap();
    tokio::time::sleep(EVERY * 10).await;
    assert!(
        !running.1.is_finished(),
        "an invalid platform repo does not stop the loop"
    );
    assert_eq!(log(out.path()), second, "the last good output stays");
    assert_eq!(log(remote.path()), second);

    // Fixed, and changed once more: rendered again from where it was.
    std::fs::remove_file(platform.path().join("apps/broken.yaml")).unwrap();
    edit(
        platform.path(),
        "apps/platform.yaml",
        "version: 0.9.4",
        "version: 0.9.5",
    );
    until("the third render is pushed", || {
        log(remote.path()).len() == 3
    })
    .await;
    let third = log(out.path());
    assert_eq!(third[1..], second[..]);
    assert_eq!(log(remote.path()), third);
    let objects = std::fs::read_dir(out.path().join("render-groups"))
        .unwrap()
        .flat_map(|group| std::fs::read_dir(group.unwrap().path().join("apps")).unwrap())
        .map(|file| std::fs::read_to_string(file.unwrap().path()).unwrap())
        .filter(|text| text.contains("metrics-agent"))
        .collect::<Vec<_>>();
    assert!(!objects.is_empty());
    assert!(
        objects
            .iter()
            .all(|text| text.contains("0.9.5") && !text.contains("0.9.4")),
        "the checkout carries the last version only"
    );

    let report = stop(running).await;
    assert_eq!(report.commits, 3, "{report:?}");
    assert!(report.failures >= 2, "{report:?}");
    assert!(report.passes >= report.failures + 3, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_repo_that_is_not_there_yet_is_rendered_once_it_appears() {
    // As with a checkout that a sidecar has not made yet when the renderer starts.
    let parent = tempfile::tempdir().unwrap();
    let platform = parent.path().join("current");
    let out = tempfile::tempdir().unwrap();
    let running = start(args(&platform, out.path()));
    tokio::time::sleep(EVERY * 5).await;
    assert!(!running.1.is_finished());
    assert!(log(out.path()).is_empty());

    // The checkout appears as a symbolic link to a directory, the way git-sync publishes one.
    let checkout = parent.path().join("rev-1");
    fleetscope_testkit::copy_dir(&example(), &checkout);
    std::os::unix::fs::symlink(&checkout, &platform).unwrap();
    until("the checkout is rendered", || log(out.path()).len() == 1).await;

    // A new revision replaces the link; the old directory goes away.
    let next = parent.path().join("rev-2");
    fleetscope_testkit::copy_dir(&example(), &next);
    edit(
        &next,
        "apps/platform.yaml",
        "version: 0.9.3",
        "version: 1.0.0",
    );
    let link = parent.path().join("current.new");
    std::os::unix::fs::symlink(&next, &link).unwrap();
    std::fs::rename(&link, &platform).unwrap();
    std::fs::remove_dir_all(&checkout).unwrap();
    until("the new revision is rendered", || {
        log(out.path()).len() == 2
    })
    .await;

    let report = stop(running).await;
    assert_eq!(report.commits, 2, "{report:?}");
    assert!(report.failures >= 2, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_commit_is_published_to_clickhouse_once() {
    let test = TestStore::start().await;
    let platform = crate::copy_of_example();
    let out = tempfile::tempdir().unwrap();
    let mut args = args(platform.path(), out.path());
    args.clickhouse_url = Some(test.server.url());
    args.clickhouse_database = test.store.database().to_owned();
    let running = start(args);

    let store = test.store.clone();
    let published = || {
        let store = store.clone();
        async move { store.last_render_commit().await.unwrap() }
    };
    let started = Instant::now();
    while published().await.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "nothing published"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let head = log(out.path())[0].0.clone();
    assert_eq!(published().await, Some(head));

    edit(
        platform.path(),
        "apps/platform.yaml",
        "version: 0.9.3",
        "version: 0.9.4",
    );
    let started = Instant::now();
    loop {
        let heads = log(out.path());
        if heads.len() == 2 && published().await.as_ref() == Some(&heads[0].0) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the change was not published"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let desired = test.store.desired_for_cluster("lab-01").await.unwrap();
    let metrics_agent: Vec<&str> = desired
        .iter()
        .filter(|r| r.app == "metrics-agent")
        .map(|r| r.version.as_str())
        .collect();
    assert_eq!(metrics_agent, ["0.9.4"]);

    // Idle passes publish nothing more: two renders recorded, however many passes ran.
    tokio::time::sleep(EVERY * 10).await;
    let report = stop(running).await;
    assert!(report.passes >= 10, "{report:?}");
    assert_eq!(report.failures, 0, "{report:?}");
    assert_eq!(
        test.store
            .count_rows::<fleetscope_store::RenderRow>()
            .await
            .unwrap(),
        2
    );
}

#[tokio::test]
async fn every_does_not_go_with_dry_run_or_explain() {
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    enum Cli {
        Render(RenderArgs),
    }
    let err =
        Cli::try_parse_from(["fleetscope", "render", "--every", "10", "--dry-run"]).unwrap_err();
    assert_eq!(
        err.kind(),
        clap::error::ErrorKind::ArgumentConflict,
        "{err}"
    );
    let err =
        Cli::try_parse_from(["fleetscope", "render", "--every", "0", "--output", "x"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{err}");
    let Cli::Render(args) = Cli::try_parse_from([
        "fleetscope",
        "render",
        "--every",
        "10",
        "--output",
        "x",
        "explain",
        "lab-01",
    ])
    .unwrap();
    let err = fleetscope_renderer::args::run(args)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "--every renders continuously; it does not go with explain"
    );
}
