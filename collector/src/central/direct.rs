//! Direct mode: the central collector watches clusters it can reach itself (from kubeconfig
//! files) and feeds what it sees into the same pipeline agents' reports go through, without the
//! HTTP hop and the spool.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fleetscope_model::{ClusterId, ObservedItem};
use fleetscope_runtime::clock::now;
use tokio::sync::mpsc;

use super::{Collector, IngestError};
use crate::agent::tracker::Tracker;
use crate::agent::{SourceEvent, AGENT_VERSION};
use crate::normalize::normalize;
use crate::protocol::{ReportKind, ValidReport};

/// Watches one cluster through `client` and stores what changes, until the task is dropped.
pub async fn run(
    collector: Collector,
    cluster: ClusterId,
    client: kube::Client,
    heartbeat: Duration,
) {
    let (events, mut receiver) = mpsc::channel(1024);
    let _watchers = crate::watch::watch_all(client, events, Duration::from_secs(30));
    let mut tracker = Tracker::default();
    // Direct mode has no spool to remember change numbers across restarts: start them at the
    // clock, in microseconds, so they still grow across restarts.
    let mut next_seq = u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(1),
    )
    .unwrap_or(1);
    let mut report_seq = next_seq;
    let mut pending: Vec<ObservedItem> = Vec::new();
    let mut flush = tokio::time::interval(Duration::from_secs(1));
    let mut beat = tokio::time::interval(heartbeat);
    let mut rules_check = tokio::time::interval(Duration::from_secs(5));
    let mut rules_seen = collector.match_rules_digest();
    loop {
        tokio::select! {
            event = receiver.recv() => {
                let Some(event) = event else { return };
                let now = now();
                let mut take = || { next_seq += 1; next_seq };
                match event {
                    SourceEvent::Applied(object) => {
                        if let Ok(o) = normalize(&object) { pending.extend(tracker.apply(&cluster, o, now, &mut take)); }
                    }
                    SourceEvent::Deleted(object) => {
                        if let Ok(o) = normalize(&object) { pending.extend(tracker.delete(&o.object, now, &mut take)); }
                    }
                    SourceEvent::Listed { kind, objects } => {
                        let listed = objects.iter().filter_map(|o| normalize(o).ok()).filter(|o| o.object.kind == kind).collect();
                        pending.extend(tracker.relist(&cluster, kind, listed, now, &mut take));
                    }
                    SourceEvent::Reconciler { .. } => {}
                }
                if tracker.take_stamped_changed() {
                    pending.retain(|item| !item.is_unstamped_app_object());
                    pending.extend(tracker.report_unstamped_again(now, &mut take));
                }
            }
            _ = rules_check.tick() => {
                // Objects without stamps are resolved again by rules that changed.
                let digest = collector.match_rules_digest();
                if digest != rules_seen {
                    if rules_seen.is_some() {
                        let mut take = || { next_seq += 1; next_seq };
                        pending.retain(|item| !item.is_unstamped_app_object());
                        pending.extend(tracker.report_unstamped_again(now(), &mut take));
                    }
                    rules_seen = digest;
                }
            }
            _ = flush.tick(), if !pending.is_empty() => {
                report_seq += 1;
                let report = ValidReport {
                    cluster: cluster.clone(),
                    agent_version: format!("direct/{AGENT_VERSION}"),
                    report_seq,
                    kind: ReportKind::Delta,
                    reconcilers: Default::default(),
                    change_seq_high: 0,
                    items: pending.clone(),
                    stamped_apps: tracker.stamped_apps().iter().filter_map(|app| fleetscope_model::AppName::parse(app).ok()).collect(),
                };
                match store_with_retries(&collector, report).await {
                    Ok(()) => pending.clear(),
                    Err(err) => tracing::error!(cluster = %cluster, error = %err, "direct mode: changes kept for the next try"),
                }
            }
            _ = beat.tick() => {
                let report = ValidReport {
                    cluster: cluster.clone(),
                    agent_version: format!("direct/{AGENT_VERSION}"),
                    report_seq: 0,
                    kind: ReportKind::Heartbeat,
                    reconcilers: Default::default(),
                    change_seq_high: 0,
                    items: vec![],
                    stamped_apps: vec![],
                };
                let _ = collector.ingest(report).await;
            }
        }
    }
}

async fn store_with_retries(collector: &Collector, report: ValidReport) -> Result<(), IngestError> {
    let mut delay = Duration::from_millis(200);
    loop {
        match collector.ingest(report.clone()).await {
            Ok(_) => return Ok(()),
            Err(err @ IngestError::UnknownCluster(_)) => return Err(err),
            Err(err) if delay > Duration::from_secs(30) => return Err(err),
            Err(_) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
}
