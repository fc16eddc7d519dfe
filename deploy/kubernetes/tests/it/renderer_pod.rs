//! The renderer pod's flow, run here with its own scripts and command lines: the paths of the
//! pod (`/data`, `/scripts`, `/tmp`, ...) moved into a temporary directory, a local bare
//! repository as the GitOps remote, a directory swapped behind a symbolic link in place of
//! git-sync's checkout, a private ClickHouse, and the real `fleetscope` binary.
//!
//! It shows that a pod starts a new GitOps history from an empty remote; that a commit
//! reaches the remote only after its desired state is in ClickHouse; that a new pod continues
//! the remote's history without rendering again; that a new platform revision is rendered,
//! published and pushed on top of it; and that SIGTERM stops the renderer and the push loop.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{build, find, fleetscope_binary};
use fleetscope_deploy_kubernetes::repo_root;
use serde_json::Value;

/// The pod's file system, moved into one directory.
struct Pod {
    root: PathBuf,
    /// (path in the pod, path here), longest first.
    moves: Vec<(String, String)>,
    /// Values of the ConfigMap keys the containers read.
    config: BTreeMap<String, String>,
}

impl Pod {
    fn new(root: &Path, data: &str, config: BTreeMap<String, String>) -> Pod {
        let objects = &build("base").objects;
        let scripts = root.join("scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        for dir in [data, "tmp", "creds"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("creds/username"), "unused").unwrap();
        std::fs::write(root.join("creds/password"), "unused").unwrap();
        let pod = Pod {
            root: root.to_owned(),
            moves: vec![
                (
                    "/etc/git-credentials".into(),
                    root.join("creds").display().to_string(),
                ),
                ("/scripts".into(), scripts.display().to_string()),
                ("/data".into(), root.join(data).display().to_string()),
                ("/tmp".into(), root.join("tmp").display().to_string()),
            ],
            config,
        };
        let source = find(objects, "ConfigMap", "fleetscope-renderer-scripts");
        for (name, text) in source["data"].as_object().unwrap() {
            std::fs::write(scripts.join(name), pod.moved(text.as_str().unwrap())).unwrap();
        }
        pod
    }

    /// `text` with every pod path that starts a word replaced by its place here, in one pass
    /// (so that a replacement is never replaced again).
    fn moved(&self, text: &str) -> String {
        let alternatives: Vec<String> = self
            .moves
            .iter()
            .map(|(from, _)| regex::escape(from))
            .collect();
        let pattern = regex::Regex::new(&format!(
            r#"(?m)(^|[\s=!"'])({})\b"#,
            alternatives.join("|")
        ))
        .unwrap();
        pattern
            .replace_all(text, |c: &regex::Captures| {
                let to = &self.moves.iter().find(|(from, _)| *from == c[2]).unwrap().1;
                format!("{}{to}", &c[1])
            })
            .into_owned()
    }

    fn data(&self, path: &str) -> PathBuf {
        PathBuf::from(self.moved(&format!("/data/{path}")))
    }

    /// The container's command line and environment as the pod would run them.
    fn command(&self, container: &Value) -> Command {
        let mut line: Vec<String> = container["command"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(container["args"].as_array().into_iter().flatten())
            .map(|a| self.moved(a.as_str().unwrap()))
            .collect();
        let mut command = if container["image"] == common::IMAGE {
            Command::new(fleetscope_binary())
        } else {
            Command::new(line.remove(0))
        };
        command
            .args(line)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap());
        for env in container["env"].as_array().into_iter().flatten() {
            let name = env["name"].as_str().unwrap();
            if let Some(value) = env["value"].as_str() {
                command.env(name, self.moved(value));
            } else if let Some(key) = env["valueFrom"]["configMapKeyRef"]["key"].as_str() {
                match self.config.get(key) {
                    Some(value) => command.env(name, value),
                    None => panic!("no value for ConfigMap key {key} ({name})"),
                };
            }
            // Secret values (ClickHouse user and password, Git credentials) are placeholders;
            // the private ClickHouse and the local remote need none.
        }
        command.current_dir(&self.root);
        command
    }
}

fn renderer_container(name: &str) -> Value {
    let deployment = find(&build("base").objects, "Deployment", "fleetscope-renderer");
    let spec = &deployment["spec"]["template"]["spec"];
    spec["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .chain(spec["containers"].as_array().unwrap())
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
        .clone()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn main_of(repo: &Path) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--quiet", "--verify", "refs/heads/main"])
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| String::from_utf8(output.stdout).unwrap().trim().to_owned())
}

fn run(mut command: Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn spawn(mut command: Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// SIGTERM, as the kubelet sends it; the process must end by itself, successfully.
fn terminate(mut child: Child, within: Duration) -> Output {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > within {
            child.kill().unwrap();
            panic!("still running {within:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "ended with {} after SIGTERM:\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

async fn until<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A platform revision as git-sync publishes it: a directory, and the link moved to it.
fn publish_revision(pod: &Pod, revision: &Path) {
    let platform = pod.data("platform");
    std::fs::create_dir_all(&platform).unwrap();
    let link = platform.join("current.new");
    std::os::unix::fs::symlink(revision, &link).unwrap();
    std::fs::rename(&link, platform.join("current")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_renderer_pod_renders_publishes_then_pushes_and_a_new_pod_continues_the_history() {
    let test = fleetscope_testkit::TestStore::start().await;
    let store = test.store.clone();
    let published = || {
        let store = store.clone();
        async move { store.last_render_commit().await.unwrap() }
    };
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("gitops.git");
    git(
        dir.path(),
        &["init", "--quiet", "--bare", remote.to_str().unwrap()],
    );
    let revision_1 = dir.path().join("platform-rev-1");
    fleetscope_testkit::copy_dir(&repo_root().join("examples/platform"), &revision_1);
    let config = BTreeMap::from([
        ("gitops-repo".to_owned(), remote.display().to_string()),
        ("push-interval".to_owned(), "1".to_owned()),
        ("url".to_owned(), test.server.url()),
        ("database".to_owned(), test.store.database().to_owned()),
    ]);

    // The first pod: an empty remote starts a new history.
    let pod = Pod::new(dir.path(), "data-1", config.clone());
    let init = run(pod.command(&renderer_container("gitops-init")));
    assert!(String::from_utf8_lossy(&init.stdout).contains("has no branch main yet"));
    assert_eq!(
        git(&pod.data("gitops"), &["remote", "get-url", "origin"]),
        pod.data("outbox.git").display().to_string()
    );
    publish_revision(&pod, &revision_1);

    let renderer = spawn(pod.command(&renderer_container("renderer")));
    let first = until("the renderer pushes to the outbox", async || {
        main_of(&pod.data("outbox.git"))
    })
    .await;
    assert_eq!(
        published().await.as_deref(),
        Some(first.as_str()),
        "published before it was pushed"
    );
    assert_eq!(
        main_of(&pod.data("gitops")).as_deref(),
        Some(first.as_str())
    );
    assert_eq!(
        main_of(&remote),
        None,
        "nothing reaches the remote before gitops-push"
    );

    let pusher = spawn(pod.command(&renderer_container("gitops-push")));
    until("gitops-push forwards it", async || {
        (main_of(&remote).as_deref() == Some(first.as_str())).then_some(())
    })
    .await;
    let out = terminate(renderer, Duration::from_secs(10));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("stopped after 1 pass(es): 1 commit(s), 0 failed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    terminate(pusher, Duration::from_secs(5));

    // A new pod: the remote's history is cloned, and the unchanged platform repo is known from
    // the last commit's recorded digest: nothing to render, commit, publish or push.
    let pod = Pod::new(dir.path(), "data-2", config.clone());
    let init = run(pod.command(&renderer_container("gitops-init")));
    assert!(!String::from_utf8_lossy(&init.stdout).contains("no branch main"));
    assert_eq!(
        main_of(&pod.data("gitops")).as_deref(),
        Some(first.as_str())
    );
    assert_eq!(
        main_of(&pod.data("outbox.git")).as_deref(),
        Some(first.as_str())
    );
    publish_revision(&pod, &revision_1);
    let mut once = renderer_container("renderer");
    once["args"]
        .as_array_mut()
        .unwrap()
        .retain(|a| !a.as_str().unwrap().starts_with("--every"));
    let output = run(pod.command(&once));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("render: nothing changed"), "{stdout}");
    assert_eq!(
        main_of(&pod.data("gitops")).as_deref(),
        Some(first.as_str())
    );

    // git-sync publishes a new revision while the renderer runs: rendered on top of the
    // remote's history, published, then pushed.
    // (Checking every second instead of every minute, to keep the test short.)
    let mut quick = renderer_container("renderer");
    for arg in quick["args"].as_array_mut().unwrap() {
        if arg.as_str().unwrap().starts_with("--every=") {
            *arg = "--every=1".into();
        }
    }
    let renderer = spawn(pod.command(&quick));
    let pusher = spawn(pod.command(&renderer_container("gitops-push")));
    let revision_2 = dir.path().join("platform-rev-2");
    fleetscope_testkit::copy_dir(&revision_1, &revision_2);
    let apps = revision_2.join("apps/platform.yaml");
    let text = std::fs::read_to_string(&apps).unwrap();
    assert!(text.contains("version: 0.9.3"));
    std::fs::write(&apps, text.replace("version: 0.9.3", "version: 0.9.4")).unwrap();
    publish_revision(&pod, &revision_2);
    std::fs::remove_dir_all(&revision_1).unwrap();
    let second = until("the new revision reaches the remote", async || {
        main_of(&remote).filter(|head| *head != first)
    })
    .await;
    assert_eq!(
        git(&remote, &["rev-parse", &format!("{second}^")]),
        first,
        "the new commit continues the history"
    );
    assert_eq!(published().await.as_deref(), Some(second.as_str()));
    terminate(renderer, Duration::from_secs(10));
    terminate(pusher, Duration::from_secs(5));
}
