//! The central collector: receives agents' reports over HTTP, checks who sent them and what they
//! contain, and writes them through the store's batch writer. A report is acknowledged only after
//! ClickHouse accepted every row of it; when the writer is full the answer is 429 with
//! `Retry-After`, so memory stays bounded while ClickHouse is slow or down.

pub mod auth;
pub mod direct;
mod ingest_route;
pub mod lookup;
pub mod matching;
pub mod metrics;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use fleetscope_model::{ClusterId, GroupPath, Timestamp};
use fleetscope_runtime::clock::now;
use fleetscope_serve::reload::ReloadMetrics;
use fleetscope_store::writer::{BatchWriter, BatchWriterConfig, Pending, WriteError};
use fleetscope_store::{ClusterRow, HeartbeatRow, ObservedRow, Store};
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio::sync::{mpsc, RwLock};

use crate::protocol::{ObservedState, ReportKind, ValidReport};
use auth::{AgentAuth, AuthError};
use lookup::{LiveObjectLookup, LookupConfig};
use metrics::{BatchLabels, CollectorMetrics, Stage, StoreMetrics, TableLabels};

/// The group auto-registered clusters are placed in until the platform repo places them.
pub const UNASSIGNED_GROUP: &str = "unassigned";

/// How long `/readyz` waits for ClickHouse to answer its ping before answering 503.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// The deadline of every route but ingest (`/readyz`, `/healthz`, `/metrics`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What the ingest route gets beyond the ack timeout, for reading the body.
pub const INGEST_BODY_ALLOWANCE: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct CollectorOptions {
    pub auth: AgentAuth,
    /// Accept reports from clusters not in the inventory, and add them to it.
    pub auto_register: bool,
    pub writer: BatchWriterConfig,
    /// How long a request waits for ClickHouse to accept its rows before answering 503.
    pub ack_timeout: Duration,
    /// How often the inventory of known clusters is re-read.
    pub inventory_refresh: Duration,
    /// Batching of the reads snapshots make for inferred deletions.
    pub lookup: LookupConfig,
    /// How often the match rules are read again.
    pub match_rules_refresh: Duration,
}

impl Default for CollectorOptions {
    fn default() -> Self {
        CollectorOptions {
            auth: AgentAuth::Insecure,
            auto_register: false,
            writer: BatchWriterConfig::default(),
            ack_timeout: Duration::from_secs(30),
            inventory_refresh: Duration::from_secs(15),
            lookup: LookupConfig::default(),
            match_rules_refresh: matching::MATCH_RULES_REFRESH,
        }
    }
}

/// The outcome of one accepted report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IngestReceipt {
    Stored {
        /// Object rows written, inferred deletions included.
        rows: usize,
        /// A snapshot's objects whose change the store already held unchanged: not written
        /// again.
        unchanged: usize,
    },
    /// Already stored earlier; nothing was written again. Carries what this collector
    /// acknowledged for the cluster, so an agent whose counters fell behind can tell.
    Duplicate {
        /// The highest report number acknowledged for the cluster.
        acked_seq: u64,
        /// The highest change number stored for the cluster (0 when unknown).
        highest_change_seq: u64,
    },
}

/// What this collector process acknowledged for one cluster.
#[derive(Debug, Clone, Copy, Default)]
struct Acked {
    report_seq: u64,
    change_seq: u64,
}

/// Why a report was not stored. Each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IngestError {
    #[error("unknown cluster {0:?}: it is not in the inventory (render it, or run the collector with auto-registration)")]
    UnknownCluster(String),
    #[error("the collector is busy writing ({0}); retry later")]
    Busy(String),
    #[error("clickhouse did not accept the rows: {0}")]
    Store(String),
}

struct KnownClusters {
    ids: HashSet<String>,
    refreshed: Option<Instant>,
}

struct Inner {
    store: Store,
    observed: BatchWriter<ObservedRow>,
    heartbeats: BatchWriter<HeartbeatRow>,
    lookup: LiveObjectLookup,
    options: CollectorOptions,
    /// The agent credentials in force; a reloaded token file replaces them.
    auth: std::sync::RwLock<Arc<AgentAuth>>,
    token_reloads: ReloadMetrics,
    tls_reloads: ReloadMetrics,
    known: RwLock<KnownClusters>,
    /// Held while the inventory is read, so concurrent reports wait for one read instead of
    /// each starting their own (at 100,000 clusters a read takes seconds under load).
    known_refresh: Arc<tokio::sync::Mutex<()>>,
    acked: Mutex<HashMap<String, Acked>>,
    /// The match rules objects without stamps are resolved by.
    rules: matching::RulesInForce,
    /// Held while the rules are read for the first time; reports wait for that read.
    rules_first_read: tokio::sync::Mutex<bool>,
    metrics: CollectorMetrics,
    store_metrics: StoreMetrics,
    registry: Registry,
}

/// The central collector. Cheap to clone.
#[derive(Clone)]
pub struct Collector {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector").finish_non_exhaustive()
    }
}

impl Collector {
    /// Starts the batch writers. The schema must already be migrated.
    pub fn new(store: Store, options: CollectorOptions) -> Collector {
        let mut registry = Registry::default();
        let metrics = CollectorMetrics::register(&mut registry);
        let store_metrics = StoreMetrics::register(&mut registry);
        let (token_reloads, tls_reloads) = {
            let registry = registry.sub_registry_with_prefix("fleetscope_collector");
            (
                ReloadMetrics::register(registry, "agent_tokens", "agent token file"),
                ReloadMetrics::register(registry, "tls", "tls certificate and key"),
            )
        };
        let (outcomes_tx, mut outcomes) = mpsc::unbounded_channel();
        let writer_name = arrival_writer_name();
        // Observed rows are stamped with their arrival when their batch is formed, and the
        // writer publishes up to when they are visible, so the hub reads them without overlap.
        let observed = BatchWriter::spawn(
            store.clone(),
            BatchWriterConfig {
                arrival_writer: Some(writer_name.clone()),
                ..options.writer.clone()
            },
            Some(outcomes_tx.clone()),
        );
        // Heartbeats likewise, under their own writer name: the hub reads them between that
        // writer's horizons.
        let heartbeat_config = BatchWriterConfig {
            max_rows: 50_000,
            arrival_writer: Some(format!(
                "{}{writer_name}",
                fleetscope_store::queries::HEARTBEAT_WRITER_PREFIX
            )),
            ..options.writer.clone()
        };
        let heartbeats = BatchWriter::spawn(store.clone(), heartbeat_config, Some(outcomes_tx));
        let batch_metrics = metrics.clone();
        tokio::spawn(async move {
            while let Some(outcome) = outcomes.recv().await {
                let accepted = if outcome.accepted { "true" } else { "false" };
                batch_metrics
                    .batches
                    .get_or_create(&BatchLabels {
                        table: outcome.table,
                        accepted,
                    })
                    .inc();
                batch_metrics
                    .flush_seconds
                    .get_or_create(&TableLabels {
                        table: outcome.table,
                    })
                    .observe(outcome.elapsed.as_secs_f64());
            }
        });
        let lookup = LiveObjectLookup::spawn(store.clone(), options.lookup);
        let rules = matching::RulesInForce::default();
        rules.watch(store.clone(), options.match_rules_refresh);
        Collector {
            inner: Arc::new(Inner {
                store,
                observed,
                heartbeats,
                lookup,
                auth: std::sync::RwLock::new(Arc::new(options.auth.clone())),
                token_reloads,
                tls_reloads,
                options,
                known: RwLock::new(KnownClusters {
                    ids: HashSet::new(),
                    refreshed: None,
                }),
                known_refresh: Arc::new(tokio::sync::Mutex::new(())),
                acked: Mutex::new(HashMap::new()),
                rules,
                rules_first_read: tokio::sync::Mutex::new(false),
                metrics,
                store_metrics,
                registry,
            }),
        }
    }

    /// The `fleetscope_store_*` gauges, which the store's upkeep keeps current.
    pub fn store_metrics(&self) -> &StoreMetrics {
        &self.inner.store_metrics
    }

    pub fn metrics(&self) -> &CollectorMetrics {
        &self.inner.metrics
    }

    /// The batcher of the reads that snapshots make.
    pub fn lookup(&self) -> &LiveObjectLookup {
        &self.inner.lookup
    }

    /// Puts new agent credentials in force; requests from then on are checked against them.
    pub fn replace_auth(&self, auth: AgentAuth) {
        *self.inner.auth.write().expect("auth lock") = Arc::new(auth);
    }

    /// The cluster a request's `Authorization` header may report for (`None`: any, insecure
    /// mode), checked against the credentials in force.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Option<ClusterId>, AuthError> {
        let auth = self.inner.auth.read().expect("auth lock").clone();
        auth.authenticate_headers(headers).map(|c| c.cloned())
    }

    /// Reloads the agent token file when it changes or on SIGHUP, starting from `version`
    /// (what [`AgentAuth::load_versioned`] returned at start).
    pub fn watch_agent_tokens(
        &self,
        path: PathBuf,
        version: String,
        interval: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let collector = self.clone();
        AgentAuth::watch(
            path,
            version,
            interval,
            self.inner.token_reloads.clone(),
            move |auth| collector.replace_auth(auth),
        )
    }

    /// The metrics of the TLS certificate's reloads.
    pub fn tls_reload_metrics(&self) -> ReloadMetrics {
        self.inner.tls_reloads.clone()
    }

    /// Rows waiting to be written, across tables.
    pub fn backlog_rows(&self) -> usize {
        self.inner.observed.queued_rows() + self.inner.heartbeats.queued_rows()
    }

    async fn is_known(&self, cluster: &str) -> Result<bool, IngestError> {
        let refresh_every = self.inner.options.inventory_refresh;
        {
            let known = self.inner.known.read().await;
            if known.ids.contains(cluster) {
                // Known: answered at once. When the set is due for a refresh, one read runs in
                // the background (a cluster removed from the inventory is refused after it).
                let due = known
                    .refreshed
                    .is_none_or(|at| at.elapsed() >= refresh_every);
                if due {
                    if let Ok(guard) = self.inner.known_refresh.clone().try_lock_owned() {
                        let collector = self.clone();
                        tokio::spawn(async move {
                            if let Err(err) = collector.read_inventory().await {
                                tracing::warn!(%err, "re-reading the cluster inventory failed");
                            }
                            drop(guard);
                        });
                    }
                }
                return Ok(true);
            }
        }
        // Unknown: read the inventory again (a cluster rendered a moment ago is accepted without
        // waiting for the next refresh), at most once a second and one read at a time.
        let _guard = self.inner.known_refresh.lock().await;
        {
            let known = self.inner.known.read().await;
            let recent = known
                .refreshed
                .is_some_and(|at| at.elapsed() < Duration::from_secs(1));
            if recent || known.ids.contains(cluster) {
                return Ok(known.ids.contains(cluster));
            }
        }
        self.read_inventory().await?;
        Ok(self.inner.known.read().await.ids.contains(cluster))
    }

    async fn read_inventory(&self) -> Result<(), IngestError> {
        let ids = self
            .inner
            .store
            .known_clusters()
            .await
            .map_err(|err| IngestError::Store(err.to_string()))?;
        let mut known = self.inner.known.write().await;
        known.ids = ids.into_iter().collect();
        known.refreshed = Some(Instant::now());
        Ok(())
    }

    async fn register(&self, report: &ValidReport, now: Timestamp) -> Result<(), IngestError> {
        let group =
            GroupPath::parse(UNASSIGNED_GROUP).expect("the unassigned group is a valid path");
        let row = ClusterRow {
            cluster_id: report.cluster.to_string(),
            group_path: group.to_string(),
            group_prefixes: vec![group.to_string()],
            environment: "unknown".into(),
            reconciler: report
                .reconcilers
                .keys()
                .next()
                .cloned()
                .unwrap_or_else(|| "unknown".into()),
            label_keys: vec![],
            label_values: vec![],
            updated_at: fleetscope_store::to_datetime(now),
            // Version 0: any inventory row the renderer writes later wins.
            version: 0,
            removed: 0,
        };
        self.inner
            .store
            .insert_rows(&[row])
            .await
            .map_err(|err| IngestError::Store(err.to_string()))?;
        self.inner
            .known
            .write()
            .await
            .ids
            .insert(report.cluster.to_string());
        tracing::info!(cluster = %report.cluster, "registered unknown cluster");
        Ok(())
    }

    /// The digest of the match rules in force, for the agents (`None` before any render
    /// published rules).
    pub fn match_rules_digest(&self) -> Option<String> {
        self.inner.rules.get().digest.clone()
    }

    /// The match rules in force, read first if they never were: a report is not resolved
    /// by rules the collector has not read yet.
    async fn rules(&self) -> Result<Arc<matching::LoadedRules>, IngestError> {
        let mut read = self.inner.rules_first_read.lock().await;
        if !*read {
            self.inner
                .rules
                .read(&self.inner.store)
                .await
                .map_err(IngestError::Store)?;
            *read = true;
        }
        drop(read);
        Ok(self.inner.rules.get())
    }

    /// Stores one validated report; returns once ClickHouse accepted all of it.
    pub async fn ingest(&self, mut report: ValidReport) -> Result<IngestReceipt, IngestError> {
        let now = now();
        let cluster = report.cluster.to_string();
        if !self.is_known(&cluster).await? {
            if self.inner.options.auto_register {
                self.register(&report, now).await?;
            } else {
                return Err(IngestError::UnknownCluster(cluster));
            }
        }
        let tracks_seq = report.kind != ReportKind::Heartbeat;
        if tracks_seq {
            let acked = self
                .inner
                .acked
                .lock()
                .expect("acked map lock")
                .get(&cluster)
                .copied();
            if let Some(acked) = acked.filter(|acked| report.report_seq <= acked.report_seq) {
                return Ok(IngestReceipt::Duplicate {
                    acked_seq: acked.report_seq,
                    highest_change_seq: acked.change_seq,
                });
            }
        }
        if report
            .items
            .iter()
            .any(fleetscope_model::ObservedItem::is_unstamped_app_object)
        {
            let rules = self.rules().await?;
            let resolved = matching::resolve(&mut report, &rules);
            self.inner.metrics.count_resolved(resolved);
        }
        let highest_change_seq = report
            .items
            .iter()
            .map(|item| item.change_seq)
            .chain([report.change_seq_high])
            .max()
            .unwrap_or(0);
        let mut rows: Vec<ObservedRow> = report
            .items
            .iter()
            .map(|item| ObservedRow::new(item, now))
            .collect();
        // A snapshot: what the store holds for the cluster is read first (one query for many
        // concurrent snapshots). Objects it holds with the same change in the same state are
        // not written again, and objects it holds that the snapshot does not list are deleted.
        let mut deletions = Vec::new();
        let mut unchanged = 0;
        if report.kind == ReportKind::Snapshot {
            let looking = Instant::now();
            let stored = self
                .inner
                .lookup
                .observed_rows(report.cluster.as_str())
                .await
                .map_err(IngestError::Store)?;
            self.inner
                .metrics
                .stage(Stage::Lookup, report.kind.as_str(), looking.elapsed());
            let before = rows.len();
            rows = without_stored_changes(rows, &stored);
            unchanged = before - rows.len();
            deletions = inferred_deletions(&report, &stored, now);
        }
        let heartbeat = HeartbeatRow {
            cluster_id: cluster.clone(),
            seen_at: fleetscope_store::to_datetime(now),
            agent_version: report.agent_version.clone(),
            reconciler_names: report.reconcilers.keys().cloned().collect(),
            reconciler_versions: report.reconcilers.values().cloned().collect(),
        };
        let row_count = rows.len() + deletions.len();
        rows.append(&mut deletions);
        let writing = Instant::now();
        let mut pending: Vec<Pending> = Vec::with_capacity(2);
        if !rows.is_empty() {
            pending.push(
                self.inner
                    .observed
                    .try_submit(rows)
                    .map_err(|err| IngestError::Busy(err.to_string()))?,
            );
        }
        pending.push(
            self.inner
                .heartbeats
                .try_submit(vec![heartbeat])
                .map_err(|err| IngestError::Busy(err.to_string()))?,
        );
        let timeout = self.inner.options.ack_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        for p in pending {
            match tokio::time::timeout_at(deadline, p.accepted()).await {
                Ok(Ok(_receipt)) => {}
                Ok(Err(WriteError::Full { .. })) => {
                    unreachable!("full is only returned when submitting")
                }
                Ok(Err(err)) => return Err(IngestError::Store(err.to_string())),
                Err(_) => {
                    return Err(IngestError::Store(format!(
                        "no answer from clickhouse within {timeout:?}"
                    )))
                }
            }
        }
        self.inner
            .metrics
            .stage(Stage::Write, report.kind.as_str(), writing.elapsed());
        if tracks_seq {
            let mut acked = self.inner.acked.lock().expect("acked map lock");
            let entry = acked.entry(cluster).or_default();
            entry.report_seq = entry.report_seq.max(report.report_seq);
            entry.change_seq = entry.change_seq.max(highest_change_seq);
        }
        self.inner.metrics.rows.inc_by(row_count as u64);
        self.inner.metrics.unchanged_rows.inc_by(unchanged as u64);
        Ok(IngestReceipt::Stored {
            rows: row_count,
            unchanged,
        })
    }

    /// The HTTP routes: `POST /api/v1/ingest`, `GET /healthz`, `GET /readyz`, `GET /metrics`.
    /// Each has a deadline: ingest the ack timeout plus [`INGEST_BODY_ALLOWANCE`], the others
    /// [`REQUEST_TIMEOUT`]; a request past it is answered 503.
    pub fn router(&self) -> Router {
        let deadline = |limit: Duration| {
            axum::middleware::from_fn_with_state(limit, fleetscope_serve::deadline::limit)
        };
        let ingest = Router::new()
            .route("/api/v1/ingest", post(ingest_route::ingest_handler))
            .layer(deadline(
                self.inner.options.ack_timeout + INGEST_BODY_ALLOWANCE,
            ));
        let probes = Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/readyz", get(ready_handler))
            .route("/metrics", get(metrics_handler))
            .layer(deadline(REQUEST_TIMEOUT));
        ingest.merge(probes).with_state(self.clone())
    }
}

/// The snapshot's rows less those whose change the store already holds as the object's latest
/// row, unchanged: the same change number and the same state. Writing them again would only
/// add duplicates for ClickHouse to merge away (and a later observation time to the history).
fn without_stored_changes(rows: Vec<ObservedRow>, stored: &[ObservedRow]) -> Vec<ObservedRow> {
    if stored.is_empty() {
        return rows;
    }
    let latest: HashMap<(&str, &str, &str), &ObservedRow> = stored
        .iter()
        .map(|row| {
            (
                (
                    row.object_kind.as_str(),
                    row.object_namespace.as_str(),
                    row.object_name.as_str(),
                ),
                row,
            )
        })
        .collect();
    rows.into_iter()
        .filter(|row| {
            let key = (
                row.object_kind.as_str(),
                row.object_namespace.as_str(),
                row.object_name.as_str(),
            );
            !latest.get(&key).is_some_and(|held| same_change(held, row))
        })
        .collect()
}

/// Whether two rows of one object carry the same change: the same change number and the same
/// state. Unlike the agent, which compares states alone (its changes are not numbered yet when
/// it compares them), a stored row is one numbered change: a row whose state is unchanged but
/// whose number differs is written again.
fn same_change(a: &ObservedRow, b: &ObservedRow) -> bool {
    a.change_seq == b.change_seq && ObservedState::of_row(a) == ObservedState::of_row(b)
}

/// Objects the store holds for the cluster (`stored`: each object's latest row) that a
/// snapshot no longer lists, and whose change is older than the snapshot, were deleted while
/// nobody was looking: their deletion rows, carrying the last known state.
fn inferred_deletions(
    report: &ValidReport,
    stored: &[ObservedRow],
    now: Timestamp,
) -> Vec<ObservedRow> {
    let present: HashSet<(&str, &str, &str)> = report
        .items
        .iter()
        .map(|item| {
            (
                item.object.kind.as_str(),
                item.object.namespace.as_str(),
                item.object.name.as_str(),
            )
        })
        .collect();
    stored
        .iter()
        .filter(|row| {
            row.deleted == 0
                && row.change_seq < report.change_seq_high
                && !present.contains(&(
                    row.object_kind.as_str(),
                    row.object_namespace.as_str(),
                    row.object_name.as_str(),
                ))
        })
        .map(|row| ObservedRow {
            deleted: 1,
            change_seq: report.change_seq_high,
            observed_at: fleetscope_store::to_datetime(now),
            received_at: fleetscope_store::to_datetime(now),
            reason: "DeletedWhileOffline".into(),
            message: "not in the agent's snapshot".into(),
            ..row.clone()
        })
        .collect()
}

fn error_response(status: StatusCode, message: impl Into<String>, field: Option<&str>) -> Response {
    let mut body = json!({ "error": message.into() });
    if let Some(field) = field {
        body["field"] = json!(field);
    }
    (status, Json(body)).into_response()
}

/// `response` with a `Retry-After` between `base` and twice `base` seconds, picked at random,
/// so that agents refused at the same moment do not all come back at the same one.
fn with_retry_after(mut response: Response, base: u32) -> Response {
    let seconds = crate::jitter::retry_after_seconds(base, crate::jitter::random_fraction());
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// Ready when ClickHouse answers a ping within [`READY_TIMEOUT`]; otherwise 503 with the reason.
async fn ready_handler(State(collector): State<Collector>) -> Response {
    match tokio::time::timeout(READY_TIMEOUT, collector.inner.store.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(err)) => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("clickhouse is not reachable: {err}"),
            None,
        ),
        Err(_) => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "clickhouse did not answer a ping within {}",
                fleetscope_serve::deadline::describe(READY_TIMEOUT)
            ),
            None,
        ),
    }
}

async fn metrics_handler(State(collector): State<Collector>) -> Response {
    let inner = &collector.inner;
    inner
        .metrics
        .backlog_rows
        .get_or_create(&TableLabels {
            table: "observed_transitions",
        })
        .set(inner.observed.queued_rows() as i64);
    inner
        .metrics
        .backlog_rows
        .get_or_create(&TableLabels {
            table: "heartbeats",
        })
        .set(inner.heartbeats.queued_rows() as i64);
    let mut text = String::new();
    if let Err(err) = prometheus_client::encoding::text::encode(&mut text, &inner.registry) {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics: {err}"),
            None,
        );
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// A name for this process's observed-row writer (its heartbeat writer's is the same after
/// `heartbeats/`), unique across restarts and hosts: the host, the process id and the start
/// time.
fn arrival_writer_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("collector/{host}/{}/{started:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64) -> ObservedRow {
        ObservedRow {
            cluster_id: "store-1".into(),
            object_kind: "HelmRelease".into(),
            object_namespace: "shop".into(),
            object_name: "api".into(),
            app: "api".into(),
            version: "1.2.0".into(),
            content_hash: String::new(),
            applied_revision: "1.2.0".into(),
            health: "healthy".into(),
            sync: "unknown".into(),
            reason: "UpgradeSucceeded".into(),
            message: String::new(),
            transitioned_at: 1_800_000_000,
            observed_at: 1_800_000_010,
            received_at: 1_800_000_020,
            change_seq: seq,
            deleted: 0,
        }
    }

    #[test]
    fn a_change_is_its_number_and_its_state() {
        let received_later = ObservedRow {
            observed_at: 1_800_000_030,
            received_at: 1_800_000_040,
            ..row(7)
        };
        assert!(same_change(&row(7), &received_later));
        assert!(
            !same_change(&row(7), &row(8)),
            "the same state under another number"
        );
        let failed = ObservedRow {
            health: "degraded".into(),
            ..row(7)
        };
        assert!(!same_change(&row(7), &failed));
    }
}
