//! The agent's Prometheus metrics, read from its counters at scrape time, served on an optional
//! address (`--metrics-listen`). Every series is per agent; none has a label of its own.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::AgentStats;

struct Exported {
    registry: Registry,
    changes: Counter<u64, AtomicU64>,
    reports_sent: Counter<u64, AtomicU64>,
    heartbeats_sent: Counter<u64, AtomicU64>,
    send_failures: Counter<u64, AtomicU64>,
    bytes_sent: Counter<u64, AtomicU64>,
    renumberings: Counter<u64, AtomicU64>,
    spool_reports: Gauge<i64, AtomicI64>,
    spool_bytes: Gauge<i64, AtomicI64>,
}

fn catch_up(counter: &Counter<u64, AtomicU64>, value: u64) {
    let now = counter.get();
    if value > now {
        counter.inc_by(value - now);
    }
}

impl Exported {
    fn new() -> Exported {
        let mut registry = Registry::default();
        let exported = Exported {
            registry: Registry::default(),
            changes: Counter::default(),
            reports_sent: Counter::default(),
            heartbeats_sent: Counter::default(),
            send_failures: Counter::default(),
            bytes_sent: Counter::default(),
            renumberings: Counter::default(),
            spool_reports: Gauge::default(),
            spool_bytes: Gauge::default(),
        };
        let r = registry.sub_registry_with_prefix("fleetscope_agent");
        r.register(
            "changes",
            "Object changes detected",
            exported.changes.clone(),
        );
        r.register(
            "reports_sent",
            "Reports the collector acknowledged",
            exported.reports_sent.clone(),
        );
        r.register(
            "heartbeats_sent",
            "Heartbeats the collector acknowledged",
            exported.heartbeats_sent.clone(),
        );
        r.register(
            "send_failures",
            "Sends that failed or were refused",
            exported.send_failures.clone(),
        );
        r.register(
            "bytes_sent",
            "Request bytes sent (bodies and headers)",
            exported.bytes_sent.clone(),
        );
        r.register(
            "renumberings",
            "Times the collector showed this agent's numbers behind its cluster's and the waiting reports were renumbered",
            exported.renumberings.clone(),
        );
        r.register(
            "spool_reports",
            "Reports waiting in the spool",
            exported.spool_reports.clone(),
        );
        r.register(
            "spool_bytes",
            "Bytes waiting in the spool",
            exported.spool_bytes.clone(),
        );
        Exported {
            registry,
            ..exported
        }
    }

    fn render(&self, stats: &AgentStats) -> String {
        catch_up(&self.changes, stats.changes.load(Ordering::Relaxed));
        catch_up(
            &self.reports_sent,
            stats.reports_sent.load(Ordering::Relaxed),
        );
        catch_up(
            &self.heartbeats_sent,
            stats.heartbeats_sent.load(Ordering::Relaxed),
        );
        catch_up(
            &self.send_failures,
            stats.send_failures.load(Ordering::Relaxed),
        );
        catch_up(&self.bytes_sent, stats.bytes_sent.load(Ordering::Relaxed));
        catch_up(
            &self.renumberings,
            stats.renumberings.load(Ordering::Relaxed),
        );
        self.spool_reports
            .set(stats.spool_reports.load(Ordering::Relaxed) as i64);
        self.spool_bytes
            .set(stats.spool_bytes.load(Ordering::Relaxed) as i64);
        let mut text = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// Routes `/metrics` and `/healthz` for one agent's counters.
pub fn router(stats: Arc<AgentStats>) -> Router {
    let exported = Arc::new(Exported::new());
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let (exported, stats) = (exported.clone(), stats.clone());
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        exported.render(&stats),
                    )
                        .into_response()
                }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_follow_the_stats() {
        let stats = AgentStats::default();
        let exported = Exported::new();
        stats.changes.store(7, Ordering::Relaxed);
        stats.spool_bytes.store(1234, Ordering::Relaxed);
        stats.renumberings.store(1, Ordering::Relaxed);
        let text = exported.render(&stats);
        assert!(
            text.contains("fleetscope_agent_renumberings_total 1"),
            "{text}"
        );
        assert!(text.contains("fleetscope_agent_changes_total 7"), "{text}");
        assert!(text.contains("fleetscope_agent_spool_bytes 1234"), "{text}");
        stats.changes.store(9, Ordering::Relaxed);
        stats.spool_bytes.store(0, Ordering::Relaxed);
        let text = exported.render(&stats);
        assert!(text.contains("fleetscope_agent_changes_total 9"), "{text}");
        assert!(text.contains("fleetscope_agent_spool_bytes 0"), "{text}");
    }
}
