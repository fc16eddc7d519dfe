//! The health dashboard's PromQL asks only for metrics the hub and the central collector
//! export, with labels those metrics carry, and every expression evaluates on a real
//! Prometheus that scrapes a running hub and a running collector.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fleetscope_collector::central::metrics::{
    BatchLabels, CollectorMetrics, Outcome, Reason, ReportLabels, TableLabels,
};
use fleetscope_collector::central::{Collector, CollectorOptions};
use fleetscope_engine::Index;
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_store::{DesiredRow, MembershipRow, Store};
use fleetscope_testkit::prometheus::{Prometheus, PrometheusConfig, ScrapeJob};
use fleetscope_testkit::TestStore;
use prometheus_client::registry::Registry;
use serde_json::Value;

/// Metric family → label names seen on its samples (empty when it has none yet).
fn families(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split_whitespace().next().expect("a name");
            out.entry(name.to_owned()).or_default();
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, labels) = match line.split_once('{') {
            Some((series, rest)) => (series, rest.split_once('}').map(|(l, _)| l).unwrap_or("")),
            None => (line.split_whitespace().next().unwrap_or_default(), ""),
        };
        if let Some(set) = out.get_mut(&family_of(series)) {
            for pair in labels.split(',').filter(|p| !p.is_empty()) {
                let name = pair.split('=').next().expect("a label name");
                if name != "le" {
                    set.insert(name.to_owned());
                }
            }
        }
    }
    out
}

fn family_of(series: &str) -> String {
    for suffix in ["_bucket", "_total", "_sum", "_count"] {
        if let Some(base) = series.strip_suffix(suffix) {
            return base.to_owned();
        }
    }
    series.to_owned()
}

/// One cluster with one app, so the hub's fleet series exist.
async fn one_cluster(store: &Store) {
    store
        .insert_rows(&[fleetscope_testkit::inventory_row("store-1", "emea/de")])
        .await
        .expect("inventory");
    store
        .insert_rows(&[MembershipRow {
            cluster_id: "store-1".into(),
            render_group: "rg-1".into(),
            render_id: 1,
            removed: 0,
        }])
        .await
        .expect("membership");
    store
        .insert_rows(&[DesiredRow {
            render_group: "rg-1".into(),
            app: "checkout".into(),
            render_id: 1,
            version: "1.0.0".into(),
            content_hash: String::new(),
            kind: "flux-kustomization".into(),
            namespace: "shop".into(),
            reasons: vec![],
            commit: "c1".into(),
            desired_since: 1,
            removed: 0,
        }])
        .await
        .expect("desired state");
}

/// Serves `app` on a free loopback port; returns `host:port`.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let address = listener.local_addr().expect("bound address").to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });
    address
}

/// A running hub on `test`'s store, with a few of its own counters moved.
async fn start_hub(test: &TestStore) -> String {
    let index = Index::load(test.store.clone(), fleetscope_runtime::clock::now)
        .await
        .expect("the index loads");
    let state = Arc::new(AppState::new(
        Arc::new(index),
        fleetscope_model::DriftPolicy::default(),
        MetricsConfig::default(),
    ));
    state.metrics.cache_hit(true);
    state.metrics.query("pairs", true, Duration::from_millis(3));
    state.metrics.refreshed(Duration::from_millis(20), true);
    serve(router(state, Arc::new(Auth::Insecure), true)).await
}

/// The collector's families with a sample in each, from its own registry.
fn collector_families() -> BTreeMap<String, BTreeSet<String>> {
    let mut registry = Registry::default();
    let collector = CollectorMetrics::register(&mut registry);
    collector
        .reports
        .get_or_create(&ReportLabels {
            kind: "delta",
            outcome: Outcome::Stored,
        })
        .inc();
    collector.reject(Reason::Malformed);
    collector.rows.inc();
    collector.request_bytes.inc();
    collector
        .batches
        .get_or_create(&BatchLabels {
            table: "heartbeats",
            accepted: "true",
        })
        .inc();
    collector
        .flush_seconds
        .get_or_create(&TableLabels {
            table: "heartbeats",
        })
        .observe(0.01);
    collector
        .backlog_rows
        .get_or_create(&TableLabels {
            table: "heartbeats",
        })
        .set(1);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
    families(&text)
}

/// Metric names and the label names an expression selects or aggregates by.
fn references(expr: &str) -> (Vec<String>, BTreeSet<String>) {
    let mut metrics = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("fleetscope_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        metrics.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    let mut labels = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("by (") {
        let tail = &rest[at + 4..];
        let end = tail.find(')').expect("closed");
        labels.extend(
            tail[..end]
                .split(',')
                .map(|l| l.trim().to_owned())
                .filter(|l| l != "le"),
        );
        rest = &tail[end..];
    }
    let mut rest = expr;
    while let Some(at) = rest.find('{') {
        let tail = &rest[at + 1..];
        let end = tail.find('}').expect("closed");
        for matcher in tail[..end].split(',') {
            labels.insert(
                matcher
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect(),
            );
        }
        rest = &tail[end..];
    }
    (metrics, labels)
}

fn health_expressions() -> Vec<String> {
    let health = fleetscope_dashboards::boards::fleetscope_health().json;
    health["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|panel| panel["targets"].as_array().cloned().unwrap_or_default())
        .map(|target: Value| target["expr"].as_str().expect("PromQL").to_owned())
        .collect()
}

#[tokio::test]
async fn the_health_dashboard_asks_for_exported_metrics_and_labels() {
    let test = TestStore::start().await;
    one_cluster(&test.store).await;
    let hub = start_hub(&test).await;
    let collector =
        serve(Collector::new(test.store.clone(), CollectorOptions::default()).router()).await;
    let http = reqwest::Client::new();
    assert!(http
        .get(format!("http://{hub}/healthz"))
        .send()
        .await
        .expect("the hub answers")
        .status()
        .is_success());
    // A malformed report, so the collector's reject counter has a series.
    let refused = http
        .post(format!("http://{collector}/api/v1/ingest"))
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .expect("the collector answers");
    assert!(refused.status().is_client_error());

    let hub_text = http
        .get(format!("http://{hub}/metrics"))
        .send()
        .await
        .expect("the hub answers")
        .text()
        .await
        .expect("metrics text");
    let mut exported = families(&hub_text);
    exported.extend(collector_families());
    for family in [
        "fleetscope_hub_requests",
        "fleetscope_hub_request_seconds",
        "fleetscope_app_instances",
        "fleetscope_collector_reports",
    ] {
        assert!(
            exported
                .get(family)
                .is_some_and(|labels| !labels.is_empty()),
            "{family} has samples to check labels against: {exported:?}"
        );
    }

    let expressions = health_expressions();
    let mut checked = 0;
    for expr in &expressions {
        let (metrics, labels) = references(expr);
        assert!(!metrics.is_empty(), "{expr} names a Fleetscope metric");
        for metric in &metrics {
            let family = family_of(metric);
            let known = exported.get(&family).unwrap_or_else(|| {
                panic!("{expr}: {metric} is exported by neither the hub nor the collector")
            });
            for label in &labels {
                assert!(
                    known.contains(label),
                    "{expr}: {family} has no label {label:?} (it has {known:?})"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "metric references checked: {checked}");

    // A real Prometheus scraping both: every expression evaluates, and the scrape lines up
    // with the names (series come back for the hub's requests and the collector's backlog).
    let prometheus = Prometheus::start(&PrometheusConfig {
        jobs: vec![
            ScrapeJob::new("fleetscope-hub", &hub),
            ScrapeJob::new("fleetscope-collector", &collector),
        ],
        ..PrometheusConfig::default()
    })
    .await;
    let timeout = Duration::from_secs(30);
    let concrete = |expr: &str| expr.replace("$__rate_interval", "10s");
    for expected in [
        "sum by (route) (rate(fleetscope_hub_requests_total[$__rate_interval]))",
        "sum by (table) (fleetscope_collector_backlog_rows)",
        "sum by (reason) (rate(fleetscope_collector_rejects_total[$__rate_interval]))",
        "max by (state) (fleetscope_app_instances{group=\"\"})",
    ] {
        assert!(
            expressions.iter().any(|e| e == expected),
            "the dashboard asks {expected}"
        );
        prometheus
            .wait_for_query(&concrete(expected), timeout)
            .await;
    }
    for expr in &expressions {
        // Panics with Prometheus's answer when the expression does not parse or evaluate.
        prometheus.query(&concrete(expr)).await;
    }
}
