//! The binary as a user runs it: `migrate` against a ClickHouse server, the demo end to end,
//! and clear errors for bad input.

use std::process::Command;

use fleetscope_local_clickhouse::LocalClickHouse;

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

#[test]
fn demo_runs_end_to_end_on_a_small_fleet() {
    let (ok, out, err) = fleetscope(&["demo", "--clusters", "300", "--apps", "20", "--depth", "1"]);
    assert!(ok, "demo failed:\n{out}\n{err}");
    assert!(
        out.contains("Fleetscope demo: 300 simulated clusters × 20 apps"),
        "{out}"
    );
    assert!(out.contains("ClickHouse 18.16"), "{out}");
    assert!(
        out.contains("The rollup matches the simulator's ground truth"),
        "{out}"
    );
    let fleet_line = out
        .lines()
        .find(|l| l.starts_with("(fleet)"))
        .expect("a fleet row");
    assert!(
        fleet_line.split_whitespace().nth(1) == Some("300"),
        "{fleet_line}"
    );
    assert!(out.contains("ClickHouse stopped."), "{out}");
}

#[test]
fn demo_refuses_bad_arguments() {
    let (ok, _, err) = fleetscope(&["demo", "--clusters", "0"]);
    assert!(!ok);
    assert!(
        err.contains("invalid demo fleet: clusters must be between 1 and 10,000,000, got 0"),
        "{err}"
    );
    let (ok, _, err) = fleetscope(&["demo", "--stale-after=-5"]);
    assert!(!ok);
    assert!(
        err.contains("--stale-after must be positive, got -5"),
        "{err}"
    );
}
