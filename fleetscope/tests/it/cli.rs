//! The binary as a user runs it: `migrate` against a ClickHouse server, the demo on the real
//! pipeline (and its cleanup when interrupted; with the `dev-tools` feature, on by default),
//! and clear errors for bad input.

use std::process::Command;

use fleetscope_local_clickhouse::LocalClickHouse;

/// The tests of this file run one at a time: several start servers and the demo a whole
/// pipeline, and a ClickHouse 18.16 cluster node starting under that much load was seen to
/// drop, and then die on, the first distributed DDL.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn fleetscope(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(args)
        .output()
        .expect("run fleetscope");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn migrate_applies_once_then_reports_nothing_to_do() {
    let _one_at_a_time = one_at_a_time();
    let server = LocalClickHouse::start().expect("private clickhouse-server");
    let url = server.url();
    let (ok, out, err) = fleetscope(&[
        "migrate",
        "--clickhouse-url",
        &url,
        "--clickhouse-database",
        "cli_test",
    ]);
    assert!(ok, "{err}");
    let all: Vec<u32> = fleetscope_store::schema::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert!(all.len() >= 2, "{all:?}");
    assert_eq!(
        out.trim(),
        format!("database cli_test: applied migrations {all:?}, already applied []")
    );
    let (ok, out, _) = fleetscope(&[
        "migrate",
        "--clickhouse-url",
        &url,
        "--clickhouse-database",
        "cli_test",
    ]);
    assert!(ok);
    assert_eq!(
        out.trim(),
        format!("database cli_test: applied migrations [], already applied {all:?}")
    );

    let (ok, _, err) = fleetscope(&[
        "migrate",
        "--clickhouse-url",
        &url,
        "--clickhouse-database",
        "Bad-Name",
    ]);
    assert!(!ok);
    assert!(
        err.contains("database name \"Bad-Name\" is invalid"),
        "{err}"
    );
}

#[test]
fn migrate_against_nothing_says_what_failed() {
    let _one_at_a_time = one_at_a_time();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (ok, _, err) = fleetscope(&[
        "migrate",
        "--clickhouse-url",
        &format!("http://127.0.0.1:{port}"),
        "--clickhouse-timeout",
        "2",
    ]);
    assert!(!ok);
    assert!(
        err.starts_with("error: creating database fleetscope: "),
        "{err}"
    );
}

#[cfg(feature = "dev-tools")]
/// The pids after `label` in lines like `collector http://… (pid 123), hub http://… (pid 456)`.
fn pid_after(line: &str, label: &str) -> Option<i32> {
    let rest = &line[line.find(label)? + label.len()..];
    rest.find("(pid ")
        .and_then(|i| rest[i + 5..].split(')').next())
        .and_then(|n| n.parse().ok())
}

#[cfg(feature = "dev-tools")]
fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(feature = "dev-tools")]
/// The pids of ClickHouse, the collector and the hub from the demo's output.
fn service_pids(out: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for line in out.lines() {
        if line.trim_start().starts_with("clickhouse:") {
            pids.extend(pid_after(line, "clickhouse:"));
        }
        if line.trim_start().starts_with("services:") {
            pids.extend(pid_after(line, "collector"));
            pids.extend(pid_after(line, "hub"));
        }
    }
    pids
}

#[cfg(feature = "dev-tools")]
fn all_gone(pids: &[i32]) -> Vec<i32> {
    // The demo stops its children before it exits; allow the kernel a moment.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pids.iter().any(|&p| alive(p)) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    pids.iter().copied().filter(|&p| alive(p)).collect()
}

#[cfg(feature = "dev-tools")]
/// `hub: 300 clusters, 12 stale · … 5 failed, …` → (stale clusters, failed app instances).
fn status_numbers(line: &str) -> Option<(u64, u64)> {
    let rest = &line[line.find("hub: ")? + 5..];
    let stale = rest
        .split(" stale")
        .next()?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()?;
    let failed = rest
        .split(" failed")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Some((stale, failed))
}

#[cfg(feature = "dev-tools")]
#[test]
fn demo_runs_the_real_pipeline_with_a_rollout_drift_and_stale_clusters() {
    let _one_at_a_time = one_at_a_time();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("demo");
    let (ok, out, err) = fleetscope(&[
        "demo",
        "--clusters",
        "300",
        "--waves",
        "3",
        "--wave-seconds",
        "4",
        "--pause-seconds",
        "3",
        "--status-every",
        "3",
        "--heartbeat-seconds",
        "4",
        "--stale-after",
        "10",
        "--dark-share",
        "0.05",
        "--duration",
        "45",
        "--hub-port",
        "0",
        "--collector-port",
        "0",
        "--work-dir",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "demo failed:\n{out}\n{err}");
    assert!(
        out.contains("Fleetscope demo: 300 simulated clusters"),
        "{out}"
    );
    assert!(
        out.contains("the bundled example (3 apps, 300 clusters of which 293 simulated)"),
        "{out}"
    );
    assert!(
        out.contains(
            "the hub's rollups and version inventories equal the simulator's ground truth"
        ),
        "{out}"
    );
    // The rollout went through the real renderer: a commit per render in the GitOps repo, and
    // the platform repo carries the new version.
    let log = Command::new("git")
        .arg("-C")
        .arg(dir.join("gitops"))
        .args(["log", "--format=%s"])
        .output()
        .expect("git log");
    assert!(log.status.success());
    let commits = String::from_utf8_lossy(&log.stdout).lines().count();
    let rollouts = out
        .matches("in the platform repo: rendered, committed")
        .count();
    assert!(rollouts >= 1, "{out}");
    assert_eq!(
        commits,
        1 + rollouts,
        "one commit for the first render, one per rollout"
    );
    assert!(
        std::fs::read_to_string(dir.join("platform/apps/shop.yaml"))
            .unwrap()
            .contains("name: checkout\nversion: 1.5.0\n"),
        "checkout was rolled out first"
    );
    assert!(
        out.contains("rollout of checkout 1.5.0: wave 3/3 done"),
        "{out}"
    );
    assert!(out.contains("the hub's gate at 90% in sync says"), "{out}");
    // The hub shows failing app instances, and clusters turning stale after they went dark.
    let numbers: Vec<(u64, u64)> = out.lines().filter_map(status_numbers).collect();
    assert!(numbers.len() >= 5, "status lines: {out}");
    let (min_stale, max_stale) = (
        numbers.iter().map(|n| n.0).min().unwrap(),
        numbers.iter().map(|n| n.0).max().unwrap(),
    );
    assert!(
        max_stale >= min_stale + 10,
        "about 15 clusters went dark and should have turned stale: {numbers:?}"
    );
    assert!(numbers.iter().any(|n| n.1 > 0), "{numbers:?}");
    assert!(out.contains("dark clusters came back and deliver"), "{out}");
    // The Prometheus configuration written for the run is valid, rules included.
    let check = Command::new("promtool")
        .args(["check", "config"])
        .arg(dir.join("prometheus/prometheus.yml"))
        .output()
        .expect(
            "promtool (from the prometheus package: scripts/install-prereqs --tests installs it)",
        );
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    // Everything it started is stopped; the work directory given is kept.
    let pids = service_pids(&out);
    assert_eq!(pids.len(), 3, "{out}");
    assert_eq!(all_gone(&pids), Vec::<i32>::new());
    assert!(out.contains(&format!("Kept {}.", dir.display())), "{out}");
}

#[cfg(feature = "dev-tools")]
#[test]
fn an_interrupted_demo_stops_everything_and_removes_its_files() {
    let _one_at_a_time = one_at_a_time();
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(["demo", "--clusters", "100", "--hub-port", "0"])
        .args(["--collector-port", "0", "--status-every", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = String::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        if line.contains(" hub: ") {
            break;
        }
    }
    let pids = service_pids(&out);
    assert_eq!(pids.len(), 3, "{out}");
    assert!(pids.iter().all(|&p| alive(p)), "{out}");
    let dir = out
        .lines()
        .next()
        .and_then(|l| l.split("files in ").nth(1))
        .map(std::path::PathBuf::from)
        .expect("the first line names the work directory");
    assert!(dir.join("gitops").exists());
    // The two tokens the demo prints: the fleet reader sees every region, the emea reader
    // only emea, and no token gets a 401.
    let hub = out
        .lines()
        .find_map(|l| l.split("hub http://").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the services line names the hub")
        .to_owned();
    let summary = "/api/v1/summary?depth=1";
    let fleet = http_get_as(&hub, summary, Some("demo-read-token-fleet")).unwrap();
    assert!(fleet.starts_with("HTTP/1.1 200"), "{fleet}");
    assert!(
        fleet.contains("\"emea\"") && fleet.contains("\"amer\""),
        "{fleet}"
    );
    let emea = http_get_as(&hub, summary, Some("demo-read-token-emea")).unwrap();
    assert!(emea.starts_with("HTTP/1.1 200"), "{emea}");
    assert!(
        emea.contains("\"emea\"") && !emea.contains("\"amer\""),
        "{emea}"
    );
    let refused = http_get(&hub, summary).unwrap();
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");

    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    for line in lines {
        out.push_str(&line.unwrap());
        out.push('\n');
    }
    let exit = child.wait().unwrap();
    assert!(exit.success(), "Ctrl-C is how the demo ends: {out}");
    assert!(out.contains("interrupted; stopping."), "{out}");
    assert_eq!(all_gone(&pids), Vec::<i32>::new());
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[cfg(feature = "dev-tools")]
#[test]
fn demo_refuses_bad_arguments() {
    let _one_at_a_time = one_at_a_time();
    let (ok, _, err) = fleetscope(&["demo", "--clusters", "0"]);
    assert!(!ok);
    assert!(
        err.contains("--clusters must be between 1 and 200,000, got 0"),
        "{err}"
    );
    let (ok, _, err) = fleetscope(&["demo", "--stale-after=30", "--heartbeat-seconds", "20"]);
    assert!(!ok);
    assert!(
        err.contains("--stale-after (30) must exceed two heartbeat intervals (40 s)"),
        "{err}"
    );
    let (ok, _, err) = fleetscope(&["demo", "--dark-share", "1.5"]);
    assert!(!ok);
    assert!(
        err.contains("--dark-share must be between 0 and 1, got 1.5"),
        "{err}"
    );
    let (ok, _, err) = fleetscope(&[
        "demo",
        "--clusters",
        "3",
        "--hub-port",
        "0",
        "--collector-port",
        "0",
    ]);
    assert!(!ok);
    assert!(
        err.contains("--clusters must be at least 7, the clusters the platform repo already has"),
        "{err}"
    );
    let busy = tempfile::tempdir().unwrap();
    std::fs::write(busy.path().join("something"), "x").unwrap();
    let (ok, _, err) = fleetscope(&["demo", "--work-dir", busy.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("is not empty; give a new or empty directory"),
        "{err}"
    );
}

#[test]
fn the_collector_drops_history_past_its_retention_when_it_starts() {
    let _one_at_a_time = one_at_a_time();
    use fleetscope_store::{ObservedRow, Store, StoreConfig};

    let server = LocalClickHouse::start().expect("private clickhouse-server");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = Store::connect(&StoreConfig::new(server.url(), "fleetscope")).unwrap();
    runtime.block_on(store.migrate()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    let row = |days_ago: u32| ObservedRow {
        cluster_id: "store-1".into(),
        object_kind: "Kustomization".into(),
        object_namespace: "flux-system".into(),
        object_name: "checkout".into(),
        app: "checkout".into(),
        version: "1.4.0".into(),
        content_hash: String::new(),
        applied_revision: "1.4.0@sha1:0".into(),
        health: "healthy".into(),
        sync: "synced".into(),
        reason: String::new(),
        message: String::new(),
        transitioned_at: now - days_ago * 86_400,
        observed_at: now - days_ago * 86_400,
        received_at: now - days_ago * 86_400,
        change_seq: u64::from(100 - days_ago),
        deleted: 0,
    };
    runtime
        .block_on(store.insert_rows(&[row(40), row(31), row(29), row(0)]))
        .unwrap();
    let transitions = || {
        runtime
            .block_on(store.table_sizes())
            .unwrap()
            .into_iter()
            .filter(|t| t.table == "observed_transitions")
            .map(|t| t.rows)
            .sum::<u64>()
    };
    assert_eq!(transitions(), 4);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut collector = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(["collector", "--insecure", "--retention-days", "30"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--clickhouse-url", &server.url()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while transitions() > 2 && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let _ = collector.kill();
    let _ = collector.wait();
    assert_eq!(transitions(), 2, "the days 40 and 31 days ago are dropped");
    // The current state of the object is not history: it stays.
    let latest = runtime
        .block_on(store.observed_for_cluster("store-1"))
        .unwrap();
    assert_eq!(latest.len(), 1);
    assert_eq!(latest[0].change_seq, 100);
}

/// One plain HTTP/1.1 GET; the answer's status line and body.
fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    http_get_as(addr, path, None)
}

/// [`http_get`] with a bearer token.
fn http_get_as(addr: &str, path: &str, token: Option<&str>) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

#[test]
fn the_agent_serves_its_metrics_on_metrics_listen() {
    let _one_at_a_time = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // A kubeconfig naming an API server that is not there: the agent keeps retrying its
    // watchers, and its metrics say so meanwhile.
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: none\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: none\n  user: {token: x}\ncontexts:\n- name: none\n  context: {cluster: none, user: none}\ncurrent-context: none\n",
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut agent = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(["agent", "--cluster", "store-0042"])
        .args(["--collector-url", "http://127.0.0.1:1"])
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--metrics-listen", &addr])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let answer = loop {
        match http_get(&addr, "/metrics") {
            Ok(answer) => break answer,
            Err(_) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            Err(err) => panic!("no metrics on {addr}: {err}"),
        }
    };
    let health = http_get(&addr, "/healthz").unwrap();
    let _ = agent.kill();
    let _ = agent.wait();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("fleetscope_agent_spool_bytes"), "{answer}");
    assert!(
        answer.contains("fleetscope_agent_send_failures_total"),
        "{answer}"
    );
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");

    // An address already taken stops the agent at once, saying which flag.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (ok, _, err) = fleetscope(&[
        "agent",
        "--cluster",
        "store-0042",
        "--collector-url",
        "http://127.0.0.1:1",
        "--spool-dir",
        dir.path().join("spool2").to_str().unwrap(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--metrics-listen",
        &taken.local_addr().unwrap().to_string(),
    ]);
    assert!(!ok);
    assert!(err.contains("--metrics-listen 127.0.0.1:"), "{err}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `fleetscope <args>`, waits until `ready` says it is serving, sends SIGTERM (what
/// Kubernetes sends a pod it stops) and returns how it exited and how long that took.
fn terminate_when_ready(
    args: &[String],
    ready: impl Fn() -> bool,
) -> (std::process::ExitStatus, std::time::Duration, String) {
    use std::time::{Duration, Instant};
    let logs = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(logs.reopen().unwrap())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if let Some(exit) = child.try_wait().unwrap() {
            panic!(
                "fleetscope {args:?} exited before it was ready ({exit}): {}",
                std::fs::read_to_string(logs.path()).unwrap()
            );
        }
        assert!(
            Instant::now() < until,
            "fleetscope {args:?} never got ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let sent = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let until = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("fleetscope {args:?} did not stop within 20 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        exit,
        sent.elapsed(),
        std::fs::read_to_string(logs.path()).unwrap(),
    )
}

#[test]
fn the_hub_collector_and_render_loop_stop_cleanly_on_sigterm() {
    let _one_at_a_time = one_at_a_time();
    let server = LocalClickHouse::start().expect("private clickhouse-server");
    let ch = ["--clickhouse-url".to_owned(), server.url()];
    let (ok, out, err) = fleetscope(&["migrate", "--clickhouse-url", &server.url()]);
    assert!(ok, "{out}{err}");
    let serving = |port: u16| move || http_get(&format!("127.0.0.1:{port}"), "/healthz").is_ok();

    let port = free_port();
    let mut hub = vec!["hub".to_owned(), "--insecure".into(), "--listen".into()];
    hub.push(format!("127.0.0.1:{port}"));
    hub.extend(ch.iter().cloned());
    let (exit, took, log) = terminate_when_ready(&hub, serving(port));
    assert!(exit.success(), "hub: {exit} {log}");
    assert!(took.as_secs() < 10, "hub took {took:?}");

    let port = free_port();
    let mut collector = vec![
        "collector".to_owned(),
        "--insecure".into(),
        "--listen".into(),
    ];
    collector.push(format!("127.0.0.1:{port}"));
    collector.extend(ch.iter().cloned());
    let (exit, took, log) = terminate_when_ready(&collector, serving(port));
    assert!(exit.success(), "collector: {exit} {log}");
    assert!(took.as_secs() < 10, "collector took {took:?}");

    // The render loop: ready once its first render is committed.
    let work = tempfile::tempdir().unwrap();
    let output = work.path().join("gitops");
    let platform = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/platform");
    let render = vec![
        "render".to_owned(),
        "--platform".into(),
        platform.display().to_string(),
        "--output".into(),
        output.display().to_string(),
        "--every".into(),
        "3600".into(),
    ];
    let committed = || output.join(".git").exists() && output.join("clusters").exists();
    let (exit, took, log) = terminate_when_ready(&render, committed);
    assert!(exit.success(), "render --every: {exit} {log}");
    assert!(took.as_secs() < 10, "render --every took {took:?}");
}

#[test]
fn render_publishes_into_a_clickhouse_cluster_with_clickhouse_cluster() {
    let _one_at_a_time = one_at_a_time();

    // Two shards of one replica each: the renderer's tables are replicated to every node, so
    // each node must answer with the whole desired state.
    let cluster = fleetscope_testkit::clickhouse_cluster::start("fleet", 2, 1);
    let first = cluster.servers()[0].url();
    let (ok, out, err) = fleetscope(&[
        "migrate",
        "--clickhouse-url",
        &first,
        "--clickhouse-cluster",
        "fleet",
    ]);
    assert!(ok, "{out}{err}");
    let work = tempfile::tempdir().unwrap();
    let output = work.path().join("gitops");
    let platform = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/platform");
    let render = |cluster_flag: bool| {
        let mut args = vec![
            "render",
            "--platform",
            platform.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--clickhouse-url",
            &first,
        ];
        if cluster_flag {
            args.extend(["--clickhouse-cluster", "fleet"]);
        }
        fleetscope(&args)
    };
    // Without the flag the renderer would create single-server tables: it refuses, saying why.
    let (ok, out, err) = render(false);
    assert!(!ok, "{out}");
    assert!(
        err.contains("was migrated for a cluster") && err.contains("--clickhouse-cluster"),
        "{err}"
    );
    let (ok, out, err) = render(true);
    assert!(ok, "{out}{err}");
    assert!(out.contains("12 desired rows"), "{out}");
    let desired_rows = |url: &str| {
        let out = Command::new("curl")
            .args(["-sS", "--fail", url, "--data-binary"])
            .arg("SELECT count() FROM fleetscope.desired_latest FINAL")
            .output()
            .expect("curl");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    for server in cluster.servers() {
        // Replication is asynchronous: wait for this node to have the rows.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut rows = desired_rows(&server.url());
        while rows != "12" && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(200));
            rows = desired_rows(&server.url());
        }
        assert_eq!(rows, "12", "desired rows on {}", server.url());
    }
}

/// The hub restarts itself once, keeping its pid, with jemalloc set to one arena that gives
/// freed pages back after a second (its memory under steady ingest depends on it; see
/// docs/benchmarks.md); settings the caller gives win.
#[test]
fn the_hub_runs_with_one_allocator_arena_unless_told_otherwise() {
    let _one_at_a_time = one_at_a_time();
    let server = LocalClickHouse::start().expect("private clickhouse-server");
    let (ok, out, err) = fleetscope(&["migrate", "--clickhouse-url", &server.url()]);
    assert!(ok, "{out}{err}");
    for (given, expected) in [
        (None, "narenas:1,dirty_decay_ms:1000"),
        (Some("narenas:3"), "narenas:3"),
    ] {
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_fleetscope"));
        command
            .args(["hub", "--insecure", "--clickhouse-url", &server.url()])
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("_RJEM_MALLOC_CONF")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        if let Some(given) = given {
            command.env("_RJEM_MALLOC_CONF", given);
        }
        let mut child = command.spawn().unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while http_get(&format!("127.0.0.1:{port}"), "/healthz").is_err() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the hub exited before it served"
            );
            assert!(std::time::Instant::now() < until, "the hub never served");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        // The process serving is the one started (same pid), now with the setting.
        let environ = std::fs::read(format!("/proc/{}/environ", child.id())).unwrap();
        let settings: Vec<String> = environ
            .split(|b| *b == 0)
            .filter_map(|v| std::str::from_utf8(v).ok())
            .filter_map(|v| v.strip_prefix("_RJEM_MALLOC_CONF="))
            .map(str::to_owned)
            .collect();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(settings, [expected], "given {given:?}");
    }
}

/// The renderer's `FLEETSCOPE_OUTPUT` (a path) exported in the shell leaves the command line
/// client alone: its format has a variable of its own, `FLEETSCOPE_OUTPUT_FORMAT`.
#[test]
fn the_renderers_output_variable_does_not_reach_the_clients_format() {
    let port = fleetscope_testkit::faults::free_port();
    let output = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(["status", "--hub-url", &format!("http://127.0.0.1:{port}")])
        .env("FLEETSCOPE_OUTPUT", "/srv/gitops")
        .output()
        .expect("run fleetscope");
    let err = String::from_utf8_lossy(&output.stderr);
    // Not a usage error (2): the client tried the hub, which is not there (3).
    assert_eq!(output.status.code(), Some(3), "{err}");
    assert!(err.contains("cannot reach the hub"), "{err}");
    let output = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(["status", "--hub-url", &format!("http://127.0.0.1:{port}")])
        .env("FLEETSCOPE_OUTPUT_FORMAT", "yaml")
        .output()
        .expect("run fleetscope");
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
