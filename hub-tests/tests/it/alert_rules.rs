//! The Prometheus rules in `dashboards/prometheus`: promtool accepts them and their unit tests
//! pass; every alert has a severity, a summary, a description, a runbook section and unit
//! tests that see it fire and not fire; and a real Prometheus scraping a hub on a generated
//! fleet raises the alerts that fleet calls for, computed here from the simulator's ground
//! truth.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_engine::Index;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_testkit::prometheus::{promtool, Alert, Prometheus, PrometheusConfig, ScrapeJob};
use fleetscope_testkit::TestStore;
use serde_yaml_ng::Value;

fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

fn rules_file() -> PathBuf {
    repo_path("dashboards/prometheus/fleetscope-rules.yaml")
}

fn rule_test_files() -> Vec<PathBuf> {
    let dir = repo_path("dashboards/prometheus/tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no rule tests in {}", dir.display());
    files
}

fn read_yaml(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn assert_promtool_succeeds(args: &[&std::ffi::OsStr]) {
    let output = promtool(args);
    assert!(
        output.status.success(),
        "promtool {args:?} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn promtool_accepts_the_rules_and_their_unit_tests_pass() {
    let rules = rules_file();
    assert_promtool_succeeds(&["check".as_ref(), "rules".as_ref(), rules.as_os_str()]);
    let tests = rule_test_files();
    let mut args: Vec<&std::ffi::OsStr> = vec!["test".as_ref(), "rules".as_ref()];
    args.extend(tests.iter().map(|path| path.as_os_str()));
    assert_promtool_succeeds(&args);
}

/// Every alerting rule of the rules file: its name and the rule itself.
fn alerting_rules() -> Vec<(String, Value)> {
    let rules = read_yaml(&rules_file());
    let mut out = Vec::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            if let Some(name) = rule["alert"].as_str() {
                out.push((name.to_owned(), rule.clone()));
            }
        }
    }
    out
}

#[test]
fn every_alert_is_labelled_annotated_documented_and_tested_both_ways() {
    let runbooks =
        std::fs::read_to_string(repo_path("docs/runbooks.md")).expect("docs/runbooks.md exists");
    let headings: BTreeSet<&str> = runbooks
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(str::trim)
        .collect();

    // For each alert name: whether some unit test expects it to fire, and whether some expects
    // it not to.
    let mut tested: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for file in rule_test_files() {
        let suite = read_yaml(&file);
        for test in suite["tests"].as_sequence().expect("tests") {
            for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
                let name = case["alertname"].as_str().expect("alertname").to_owned();
                let fires = case["exp_alerts"]
                    .as_sequence()
                    .is_some_and(|alerts| !alerts.is_empty());
                let entry = tested.entry(name).or_default();
                if fires {
                    entry.0 = true;
                } else {
                    entry.1 = true;
                }
            }
        }
    }

    let alerts = alerting_rules();
    assert!(alerts.len() >= 10, "{} alerts", alerts.len());
    for (name, rule) in &alerts {
        let severity = rule["labels"]["severity"].as_str();
        assert!(
            matches!(severity, Some("warning" | "critical")),
            "{name}: severity {severity:?}"
        );
        for annotation in ["summary", "description", "runbook_url"] {
            assert!(
                rule["annotations"][annotation]
                    .as_str()
                    .is_some_and(|text| !text.trim().is_empty()),
                "{name}: no {annotation}"
            );
        }
        assert_eq!(
            rule["annotations"]["runbook_url"].as_str(),
            Some(format!("docs/runbooks.md#{}", name.to_lowercase()).as_str()),
            "{name}: runbook_url"
        );
        assert!(
            headings.contains(name.as_str()),
            "docs/runbooks.md has no section `## {name}`"
        );
        assert_eq!(
            tested.get(name),
            Some(&(true, true)),
            "{name}: the unit tests need a case where it fires and one where it does not (fires, does not)"
        );
    }
    let names: BTreeSet<&str> = alerts.iter().map(|(name, _)| name.as_str()).collect();
    for name in tested.keys() {
        assert!(
            names.contains(name.as_str()),
            "a unit test names alert {name}, which the rules do not have"
        );
    }
}

// The thresholds of the rules, as the expectations below apply them.
const STALE_MIN_SHARE: f64 = 0.10;
const STALE_MIN_CLUSTERS: u64 = 3;
const DRIFT_MIN_SHARE: f64 = 0.05;
const DRIFT_MIN_INSTANCES: u64 = 10;
const DRIFTED_STATES: &[&str] = &["failed", "out_of_sync", "missing", "unexpected", "unknown"];

/// The group above `group`; the fleet ("") is above the top-level groups and has none.
fn parent(group: &str) -> Option<&str> {
    if group.is_empty() {
        None
    } else {
        Some(group.rsplit_once('/').map_or("", |(above, _)| above))
    }
}

/// The groups meeting a condition whose parent does not meet it: the groups the rules alert on.
fn highest(meeting: &BTreeSet<String>) -> BTreeSet<String> {
    meeting
        .iter()
        .filter(|group| parent(group).is_none_or(|above| !meeting.contains(above)))
        .cloned()
        .collect()
}

#[derive(Debug, Default)]
struct GroupTruth {
    clusters: u64,
    stale: u64,
    drifted: u64,
    reporting: u64,
}

/// What the simulator says about the fleet: numbers per exported group (the fleet and the
/// groups down to `depth`), and the apps with failed pairs.
fn ground_truth(
    fleet: &GeneratedFleet,
    depth: usize,
) -> (BTreeMap<String, GroupTruth>, BTreeSet<String>) {
    let mut groups: BTreeMap<String, GroupTruth> = BTreeMap::new();
    let mut failed_apps = BTreeSet::new();
    for index in 0..fleet.spec().clusters {
        let sim = fleet.cluster(index);
        let path = &sim.cluster.group_path;
        let segments: Vec<&str> = path.split('/').collect();
        let mut exported = vec![String::new()];
        for level in 1..=depth.min(segments.len()) {
            exported.push(segments[..level].join("/"));
        }
        let drifted = sim
            .truth
            .iter()
            .filter(|(_, state)| DRIFTED_STATES.contains(&state.as_str()))
            .count() as u64;
        let reporting = sim
            .truth
            .iter()
            .filter(|(_, state)| state.as_str() != "stale")
            .count() as u64;
        for (app, state) in &sim.truth {
            if state.as_str() == "failed" {
                failed_apps.insert(app.clone());
            }
        }
        for group in exported {
            let g = groups.entry(group).or_default();
            g.clusters += 1;
            g.stale += u64::from(sim.stale);
            g.drifted += drifted;
            g.reporting += reporting;
        }
    }
    (groups, failed_apps)
}

fn alerts_named<'a>(alerts: &'a [Alert], name: &str) -> Vec<&'a Alert> {
    alerts.iter().filter(|alert| alert.name() == name).collect()
}

#[tokio::test]
async fn prometheus_raises_the_alerts_the_generated_fleet_calls_for() {
    let started = Instant::now();
    let test = TestStore::start().await;
    // More stale clusters and drift and fewer failures than by default, so that some groups
    // cross the thresholds and others do not, and some apps fail and others do not.
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters: 600,
        apps: 8,
        stale_share: 0.08,
        failed_share: 0.001,
        drifted_share: 0.04,
        ..FleetSpec::default()
    })
    .unwrap();
    let spec = fleet.spec().clone();
    fleetscope_fixtures::write_fleet(&test.store, &fleet)
        .await
        .unwrap();
    let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();
    let metrics = MetricsConfig::default();
    let mut state = AppState::new(Arc::new(index), spec.policy, metrics);
    state.fixed_now = Some(spec.now);
    let app = router(Arc::new(state), Arc::new(Auth::Insecure), true);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hub = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // The alerts the rules should raise on this fleet.
    let (groups, failed_apps) = ground_truth(&fleet, metrics.depth);
    assert!(groups.len() < metrics.max_groups, "no group is folded");
    let stale_meeting: BTreeSet<String> = groups
        .iter()
        .filter(|(_, g)| {
            g.stale >= STALE_MIN_CLUSTERS && g.stale as f64 / g.clusters as f64 >= STALE_MIN_SHARE
        })
        .map(|(group, _)| group.clone())
        .collect();
    let drift_meeting: BTreeSet<String> = groups
        .iter()
        .filter(|(_, g)| {
            g.reporting > 0
                && g.drifted >= DRIFT_MIN_INSTANCES
                && g.drifted as f64 / g.reporting as f64 >= DRIFT_MIN_SHARE
        })
        .map(|(group, _)| group.clone())
        .collect();
    let stale_expected = highest(&stale_meeting);
    let drift_expected = highest(&drift_meeting);
    eprintln!("stale: meeting {stale_meeting:?}, alerted {stale_expected:?}");
    eprintln!("drift: meeting {drift_meeting:?}, alerted {drift_expected:?}");
    eprintln!("apps with failed pairs: {failed_apps:?}");
    // The fleet exercises the selection of the highest group (some groups meet a condition
    // but are not alerted on because their parent is), and not every app fails.
    assert!(!stale_expected.is_empty() && stale_expected.len() < stale_meeting.len());
    assert!(!drift_expected.is_empty() && drift_expected.len() < drift_meeting.len());
    assert!(!failed_apps.is_empty() && failed_apps.len() < spec.apps);

    // No collector job: the collector is absent, by design (see FleetscopeCollectorAbsent).
    let prometheus = Prometheus::start(&PrometheusConfig {
        jobs: vec![ScrapeJob::new("fleetscope-hub", &hub)],
        rule_files: vec![rules_file()],
        ..PrometheusConfig::default()
    })
    .await;
    prometheus
        .wait_for_query(r#"up{job="fleetscope-hub"} == 1"#, Duration::from_secs(20))
        .await;
    let clusters = prometheus
        .query(r#"fleetscope_clusters{job="fleetscope-hub",group=""}"#)
        .await;
    assert_eq!(
        clusters[0]["value"][1],
        spec.clusters.to_string(),
        "{clusters:?}"
    );
    // Every rule group evaluated after the first scrape.
    prometheus
        .wait_for_evaluations(2, Duration::from_secs(20))
        .await;
    let alerts = prometheus.alerts().await;
    let summary: Vec<String> = alerts
        .iter()
        .map(|a| format!("{} {:?} {}", a.name(), a.labels, a.state))
        .collect();
    eprintln!("active alerts after {:?}: {summary:#?}", started.elapsed());

    // Stale clusters and drift: the duration is part of the condition and counts the samples
    // there are, so the alerts fire at the first evaluation after the first scrape.
    for (name, expected) in [
        ("FleetscopeStaleClusters", &stale_expected),
        ("FleetscopeDrift", &drift_expected),
    ] {
        let active = alerts_named(&alerts, name);
        let got: BTreeSet<String> = active.iter().map(|a| a.label("group").to_owned()).collect();
        assert_eq!(&got, expected, "{name}: {summary:#?}");
        for alert in active {
            let group = alert.label("group");
            assert_eq!(alert.state, "firing", "{name} {group}");
            assert_eq!(alert.label("severity"), "warning");
            assert_eq!(
                alert.annotations["runbook_url"],
                format!("docs/runbooks.md#{}", name.to_lowercase())
            );
            let g = &groups[group];
            let (part, whole) = if name == "FleetscopeDrift" {
                (g.drifted, g.reporting)
            } else {
                (g.stale, g.clusters)
            };
            let counts = format!("({part} of {whole} ");
            assert!(
                alert.annotations["description"].contains(&counts),
                "{name} {group}: {counts:?} not in {:?}",
                alert.annotations["description"]
            );
        }
    }

    // Failed deployments: pending (15 minutes to go) for exactly the apps with failed pairs.
    let failed = alerts_named(&alerts, "FleetscopeDeploymentsFailed");
    let got: BTreeSet<String> = failed.iter().map(|a| a.label("app").to_owned()).collect();
    assert_eq!(got, failed_apps, "{summary:#?}");
    assert!(failed.iter().all(|a| a.state == "pending"), "{summary:#?}");

    // Stalled rollouts: pending (10 minutes to go) for exactly the rollouts the hub exports as
    // stalled. The generated fleet's rollouts started three days before its `now`, and those
    // with a cluster that never reached them (failed, stale, drifting) have stalled.
    let exported = crate::common::metrics_text(&format!("http://{hub}")).await;
    let stalled: BTreeSet<(String, String)> = crate::common::stalled_rollouts(&exported)
        .into_keys()
        .collect();
    assert!(
        !stalled.is_empty(),
        "the fleet has stalled rollouts:\n{exported}"
    );
    let alerted = alerts_named(&alerts, "FleetscopeRolloutStalled");
    let got: BTreeSet<(String, String)> = alerted
        .iter()
        .map(|a| (a.label("app").to_owned(), a.label("version").to_owned()))
        .collect();
    assert_eq!(got, stalled, "{summary:#?}");
    assert!(alerted.iter().all(|a| a.state == "pending"), "{summary:#?}");

    // The collector is absent: pending, with the job it misses.
    let absent = alerts_named(&alerts, "FleetscopeCollectorAbsent");
    assert_eq!(absent.len(), 1, "{summary:#?}");
    assert_eq!(absent[0].state, "pending");
    assert_eq!(absent[0].label("job"), "fleetscope-collector");
    assert_eq!(absent[0].label("severity"), "critical");

    // Nothing else: the hub is up and present, no rollout has had an hour to get stuck, and
    // without a collector there are no ingest numbers (and no failing collector target).
    for name in [
        "FleetscopeHubDown",
        "FleetscopeHubAbsent",
        "FleetscopeCollectorDown",
        "FleetscopeRolloutStuck",
        "FleetscopeIngestRejects",
        "FleetscopeIngestBacklogGrowing",
    ] {
        assert!(
            alerts_named(&alerts, name).is_empty(),
            "{name} is active: {summary:#?}"
        );
    }
    eprintln!("done after {:?}", started.elapsed());
}
