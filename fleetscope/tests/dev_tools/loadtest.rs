//! `fleetscope loadtest` as a user runs it, on a small fleet with every scenario and short
//! phases: the real renderer, collector (child process, per-cluster tokens) and hub (child
//! process, read token), every ground-truth check passing, and a complete report.

use std::process::Command;

#[test]
fn small_fleet_through_every_scenario_matches_the_ground_truth() {
    let _turn = super::one_run_at_a_time();
    let out = tempfile::tempdir().unwrap();
    let report = super::run_loadtest(
        &[
            "--clusters",
            "500",
            "--apps",
            "12",
            "--scenarios",
            "steady,rollout,flap,dark,storm",
            "--concurrency",
            "16",
            "--readers",
            "2",
            "--heartbeat-seconds",
            "5",
            "--stale-after",
            "15",
            "--steady-seconds",
            "10",
            "--change-rate",
            "0.05",
            "--wave-seconds",
            "2",
            "--failure-rate",
            "0.2",
            "--flap-seconds",
            "6",
            "--flap-period-seconds",
            "2",
            "--dark-share",
            "0.1",
        ],
        out.path(),
    );
    assert!(report.correctness_passed);
    let phases: Vec<&str> = report.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        phases,
        ["connect", "steady", "rollout", "flap", "dark", "storm"]
    );
    assert!(
        report.phases.iter().all(|p| p.check_passed),
        "{:?}",
        report.phases
    );

    // Nearly every cluster delivers (about 1% never report); every snapshot row arrived.
    assert_eq!(report.clusters, 500);
    assert!(report.delivering_clusters > 450 && report.delivering_clusters < 500);
    assert!(report.connect.rows > report.delivering_clusters * 5);
    assert_eq!(
        report.storm.as_ref().unwrap().reports,
        report.delivering_clusters
    );
    assert!(report.refused.is_empty(), "{:?}", report.refused);

    // The rollout went through the renderer and the hub's gate saw it progress.
    let rollout = report.rollout.as_ref().unwrap();
    assert_eq!(rollout.app, "app-001");
    assert!(rollout.changed_pairs > 0);
    assert_eq!(rollout.waves.len(), 3);
    let shares: Vec<f64> = rollout.waves.iter().map(|w| w.gate_share_in_sync).collect();
    assert!(shares.windows(2).all(|w| w[0] <= w[1]), "{shares:?}");
    assert!(*shares.last().unwrap() > 0.5, "{shares:?}");

    // Measurements are there and plausible.
    assert!(report.freshness.samples > 0);
    assert_eq!(report.freshness.not_seen_within_60_s, 0);
    let steady = report.steady.as_ref().unwrap();
    assert!(steady.heartbeats_per_second > 0.0 && steady.deltas_per_second > 0.0);
    assert!(steady.idle_wire_bytes_per_cluster_per_minute > 0.0);
    for route in [
        "summary",
        "cluster page",
        "cluster apps",
        "app versions",
        "drift page",
    ] {
        let l = report
            .hub_latency
            .iter()
            .find(|r| r.route == route)
            .unwrap();
        assert!(l.requests > 0 && l.errors == 0, "{l:?}");
    }
    for process in ["collector", "hub", "clickhouse"] {
        let p = report
            .processes
            .iter()
            .find(|p| p.process == process)
            .unwrap();
        assert!(p.samples > 0 && p.rss_mb_max > 1.0, "{p:?}");
    }
    assert!(report
        .clickhouse_tables
        .iter()
        .any(|t| t.table == "observed_transitions" && t.rows > 0 && t.bytes_on_disk > 0));
    assert!(!report.targets.is_empty());
    // Every phase says where the CPU went: the simulator's own beside the services' and the
    // machine's, in a window inside the phase.
    for phase in &report.phases {
        let load = phase.load.as_ref().unwrap();
        assert!(
            load.from_s >= phase.started_s - 1.0
                && load.to_s <= phase.started_s + phase.seconds + 1.0,
            "{phase:?}"
        );
        assert!(load.cores > 0 && load.machine_cores > 0.0, "{load:?}");
        assert!(
            load.machine_cores + 0.2 >= load.simulator_cores,
            "the machine counts the simulator: {load:?}"
        );
    }

    for file in [
        "report.md",
        "throughput.png",
        "freshness.png",
        "ack_latency.png",
        "hub_latency.png",
        "cpu.png",
        "memory.png",
        "collector.log",
        "hub.log",
    ] {
        assert!(out.path().join(file).exists(), "{file} missing");
    }
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("## Against the design targets"));
    assert!(md.contains("## Simulator and services"));
    assert!(md.contains("\nSimulator: "), "the verdict at the top");
}

#[test]
fn bad_options_are_refused_with_the_option_named() {
    let output = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(["loadtest", "--clusters", "10", "--failure-rate", "1.5"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--failure-rate must be between 0 and 1"),
        "{stderr}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args([
            "loadtest",
            "--heartbeat-seconds",
            "30",
            "--stale-after",
            "40",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--stale-after (40) must exceed"),
        "{stderr}"
    );

    for (args, says) in [
        (
            &["--faults", "hub"][..],
            "--faults needs --clickhouse-cluster",
        ),
        (
            &["--clickhouse-cluster", "2x1", "--faults", "replica"][..],
            "--faults replica needs at least two replicas per shard",
        ),
        (&["--clickhouse-cluster", "2by2"][..], "SHARDSxREPLICAS"),
        (
            &["--clickhouse-cluster", "2x2", "--fault-scenarios", "storm"][..],
            "--fault-scenarios takes steady and rollout, not storm",
        ),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
            .arg("loadtest")
            .args(args)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// Ctrl-C (or SIGTERM) in the middle of a run stops the private ClickHouse, the collector and
/// the hub it started, instead of leaving them running.
#[test]
fn an_interrupted_run_stops_the_services_it_started() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(["loadtest", "--clusters", "300", "--apps", "8"])
        .args(["--scenarios", "steady", "--steady-seconds", "600"])
        .arg("--out")
        .arg(out.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid_after = |line: &str, label: &str| -> Option<i32> {
        let rest = &line[line.find(label)? + label.len()..];
        rest.find("(pid ")
            .and_then(|i| rest[i + 5..].split(')').next())
            .and_then(|n| n.parse().ok())
    };
    let mut pids = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(pid) = pid_after(&line, "clickhouse:") {
            pids.push(pid);
        }
        if line.contains("services:") {
            pids.extend(pid_after(&line, "collector"));
            pids.extend(pid_after(&line, "hub"));
            break;
        }
    }
    assert_eq!(
        pids.len(),
        3,
        "expected the pids of ClickHouse, collector and hub: {pids:?}"
    );
    let alive = |pid: i32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    assert!(
        pids.iter().all(|&p| alive(p)),
        "services not running: {pids:?}"
    );

    std::thread::sleep(std::time::Duration::from_secs(2));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(!exit.success(), "an interrupted run must not exit 0");
    drop(lines);
    // The parent stops its children while it unwinds; allow a moment for the kernel.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pids.iter().any(|&p| alive(p)) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        left.is_empty(),
        "still running after the interrupt: {left:?}"
    );
}
