//! The report of a sample run, as Markdown and JSON, against the committed copies.

use super::*;
use crate::agents::Ack;
use crate::scenario::{PhaseRefreshes, WaveReport};

fn args() -> LoadtestArgs {
    LoadtestArgs {
        clusters: 40,
        apps: 3,
        scenarios: Vec::new(),
        concurrency: 8,
        readers: 2,
        seed: 7,
        unstamped: false,
        out: "out".into(),
        heartbeat_seconds: 30,
        stale_after: 120,
        steady_seconds: 60,
        change_rate: 0.01,
        rollout_app: None,
        waves: 2,
        wave_seconds: 20,
        failure_rate: 0.05,
        flap_share: 0.02,
        flap_seconds: 60,
        flap_period_seconds: 5,
        dark_share: 0.05,
        check_seconds: 60,
        freshness_samples: 100,
        fleetscope_binary: None,
        clickhouse_cluster: None,
        faults: Vec::new(),
        fault_scenarios: Vec::new(),
        fault_lead_seconds: 5,
        replica_down_seconds: 10,
        zookeeper_stop_seconds: 60,
        service_down_seconds: 5,
        outage_seconds: 60,
        outage_after_seconds: 120,
        agent_backoff: crate::agents::Backoff::Spread,
    }
}

fn ack(at_ms: u64, kind: ReportKind, rows: u32, latency_us: u32) -> Ack {
    Ack {
        at_ms,
        kind,
        rows,
        bytes: rows * 100 + 300,
        latency_us,
        wait_us: latency_us / 4,
    }
}

fn phase(name: &str, started_s: f64, passed: bool) -> PhaseReport {
    PhaseReport {
        name: name.to_owned(),
        started_s,
        seconds: 10.0,
        changes: 12,
        notes: vec![format!("{name} note"), "second note".to_owned()],
        check_passed: passed,
        check_seconds: 1.5,
        check_mismatch: (!passed).then(|| "group emea differs".to_owned()),
        refreshes: (name != "connect").then_some(PhaseRefreshes {
            count: 20,
            within_512ms: 19,
            p99_at_most_s: (name == "steady").then_some(1.024),
        }),
        load: None,
    }
}

/// A collector killed during the rollout phase, everything stored.
fn collector_fault() -> FaultRecord {
    FaultRecord {
        fault: crate::faults::Fault::Collector,
        scenario: "rollout",
        phase: "collector fault, rollout".to_owned(),
        phase_started_s: 20.0,
        injected_s: 22.0,
        restored_s: 24.5,
        scenario_ended_s: 24.0,
        drained_s: 25.0,
        phase_ended_s: 30.0,
        not_acknowledged: 2,
        check_passed: true,
        check_seconds: 0.6,
        audit: StoreAudit {
            clusters: 38,
            acknowledged_changes: 3_400,
            stored_changes: 3_400,
            arrived_again: 3,
            ..StoreAudit::default()
        },
    }
}

/// The run's audit: one acknowledged change missing.
fn audit_with_one_lost() -> StoreAudit {
    StoreAudit {
        clusters: 38,
        acknowledged_changes: 3_400,
        stored_changes: 3_399,
        lost: 1,
        differences: vec![
            "cluster-003: 90 changes acknowledged up to number 90; stored 89 up to 90 in 89 rows"
                .to_owned(),
        ],
        ..StoreAudit::default()
    }
}

/// A run with every section of the report present.
fn inputs(args: &LoadtestArgs) -> Inputs<'_> {
    let mut acks = Vec::new();
    for i in 0..40u32 {
        let at = u64::from(i) * 500;
        acks.push(ack(at, ReportKind::Snapshot, 50 + i, 80_000 + i * 9_000));
        acks.push(ack(at + 100, ReportKind::Heartbeat, 0, 2_000 + i * 150));
        acks.push(ack(at + 200, ReportKind::Delta, 1 + i % 3, 5_000 + i * 700));
    }
    let mut timings = Timings::default();
    for (route, base) in [
        ("summary", 40.0),
        ("cluster apps", 3.0),
        ("app versions", 90.0),
    ] {
        let answers = (0..30)
            .map(|i| (f64::from(i), base + f64::from(i) * 1.5))
            .collect();
        timings
            .by_route
            .insert(route, (answers, u64::from(route == "summary")));
    }
    timings.first_errors.push("summary: 503".to_owned());
    // The simulator busy for a core's worth in the rollout (from 20 s on), with nothing else
    // on the machine.
    let mut samples: Vec<ProcSample> = ["collector", "hub", "loadtest", "clickhouse"]
        .iter()
        .flat_map(|p| {
            (0..30).map(move |i| ProcSample {
                process: (*p).to_owned(),
                at_s: f64::from(i),
                cpu_cores: if *p == "loadtest" && i > 20 {
                    1.25
                } else {
                    0.05 * f64::from(i % 5)
                },
                rss_mb: 100.0 + f64::from(i),
            })
        })
        .collect();
    let machine: Vec<ProcSample> = (0..30)
        .map(|i| ProcSample {
            process: crate::procs::MACHINE.to_owned(),
            at_s: f64::from(i),
            cpu_cores: samples
                .iter()
                .filter(|s| s.at_s == f64::from(i))
                .map(|s| s.cpu_cores)
                .sum::<f64>()
                + 0.1,
            rss_mb: 0.0,
        })
        .collect();
    samples.extend(machine);
    let waves = vec![
        WaveReport {
            wave: 1,
            groups: vec!["emea/de".to_owned(), "emea/fr".to_owned()],
            clusters: 10,
            failed: 1,
            gate_share_in_sync: 0.9,
            gate_verdict: "pass".to_owned(),
        },
        WaveReport {
            wave: 2,
            groups: (0..8).map(|i| format!("amer/g{i}")).collect(),
            clusters: 30,
            failed: 2,
            gate_share_in_sync: 0.925,
            gate_verdict: "hold".to_owned(),
        },
    ];
    Inputs {
        args,
        live_clusters: 38,
        app_instances: 110,
        render: RenderNumbers {
            render_groups: 12,
            files: 300,
            render_seconds: 1.25,
            publish_seconds: 0.5,
        },
        connect: (38, 1_900, 2.5),
        storm: Some((38, 1_900, 3.0)),
        phases: vec![
            phase("connect", 0.0, true),
            phase("steady", 10.0, true),
            phase("rollout", 20.0, false),
        ],
        phase_windows: vec![
            ((0.0, 2.5), true),
            ((10.0, 20.0), false),
            ((20.0, 30.0), false),
        ],
        cores: 2,
        tally: Tally {
            acks,
            retried: 3,
            refused: vec!["cluster-007: 400".to_owned()],
            unreachable: 1,
            attempts: None,
        },
        freshness: (0..25)
            .map(|i| (5.0 + f64::from(i) * 0.8, 200.0 + f64::from(i) * 40.0))
            .collect(),
        not_seen: 1,
        superseded: 2,
        timings,
        samples,
        tables: vec![
            TableSize {
                table: "observed_transitions".to_owned(),
                rows: 4_000,
                bytes_on_disk: 90_000,
            },
            TableSize {
                table: "heartbeats".to_owned(),
                rows: 900,
                bytes_on_disk: 12_000,
            },
        ],
        steady: Some(SteadyWindow {
            from_ms: 10_000,
            to_ms: 20_000,
            delivering_clusters: 38,
            rows_before: 3_000,
            bytes_before: 70_000,
            rows_after: 3_400,
            bytes_after: 80_000,
        }),
        rollout: Some(RolloutReport {
            app: "app-001".to_owned(),
            from_version: "1.1.0".to_owned(),
            to_version: "1.2.0".to_owned(),
            render_seconds: 0.25,
            publish_seconds: 1.5,
            render_summary: "1 app changed".to_owned(),
            changed_pairs: 40,
            waves,
        }),
        seconds: 30.0,
        cluster: Some("ClickHouse as 2x2 with ZooKeeper".to_owned()),
        faults: vec![collector_fault()],
        outages: vec![collector_outage()],
        store_audit: Some(audit_with_one_lost()),
    }
}

fn collector_outage() -> OutageReport {
    use crate::agents::{Answered, Attempt};
    let record = crate::scenario::OutageRecord {
        backoff: crate::agents::Backoff::Spread,
        started_s: 20.0,
        killed_s: 30.0,
        restarted_s: 90.0,
        ready_s: 90.4,
        drained_s: 97.5,
        backlog_clusters: 30,
        backlog_reports: 41,
        changes: 55,
        window_seconds: 3,
    };
    let mut attempts: Vec<Attempt> = (0..50)
        .map(|i| Attempt {
            sent_ms: 20_000 + i * 200,
            answered: Answered::Acknowledged,
        })
        .collect();
    attempts.extend((0..12).map(|i| Attempt {
        sent_ms: 30_000 + i * 5_000,
        answered: Answered::Unreachable,
    }));
    attempts.extend((0..40).map(|i| Attempt {
        sent_ms: 90_300 + i * 50,
        answered: if i % 8 == 0 {
            Answered::Busy
        } else {
            Answered::Acknowledged
        },
    }));
    OutageReport::from_record(&record, &attempts)
}

#[test]
fn the_report_of_a_run_reads_as_before() {
    let args = args();
    let (report, plots) = build(inputs(&args));
    expect_test::expect_file!["report_sample.md"].assert_eq(&markdown(&report));
    expect_test::expect_file!["report_sample.json"]
        .assert_eq(&(serde_json::to_string_pretty(&report).unwrap() + "\n"));
    assert_eq!(plots.throughput.len(), 2);
    assert_eq!(plots.ack_latency.len(), 3);
}

#[test]
fn the_report_of_a_large_run_without_steady_or_storm_reads_as_before() {
    let mut args = args();
    args.clusters = 40_000;
    let mut inputs = inputs(&args);
    inputs.storm = None;
    inputs.steady = None;
    inputs.phases.truncate(1);
    inputs.phase_windows.truncate(1);
    inputs.cluster = None;
    inputs.faults.clear();
    inputs.outages.clear();
    inputs.store_audit = None;
    let (report, _) = build(inputs);
    expect_test::expect_file!["report_sample_large.md"].assert_eq(&markdown(&report));
}
