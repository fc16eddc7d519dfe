//! Batched reads of what the store holds per cluster, for inferred deletions.
//!
//! Every snapshot asks for the latest stored row of each of its cluster's objects (to leave out
//! what is stored unchanged and to find what is gone). Asked one cluster
//! at a time, that is one ClickHouse query per report, which does not keep up with a fleet
//! connecting at once (`docs/benchmarks.md` has the figures). Here the lookups of concurrent snapshots are gathered:
//! while a query runs, the next lookups wait in the queue and then go out together as one query
//! (group commit, as in the batch writer). Nothing is cached: every answer is read from the
//! store after the lookup was asked for, so several collectors behind a load balancer are safe.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fleetscope_store::{ObservedRow, Store};
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Limits of the lookup batchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupConfig {
    /// Clusters asked about in one query.
    pub max_clusters: usize,
    /// Queries running at once; further lookups wait and join the next query.
    pub max_in_flight: usize,
}

impl Default for LookupConfig {
    fn default() -> Self {
        LookupConfig {
            max_clusters: 256,
            max_in_flight: 2,
        }
    }
}

/// Counters of the batcher (tests and benchmarks).
#[derive(Debug, Default)]
pub struct LookupStats {
    pub queries: AtomicU64,
    pub clusters: AtomicU64,
}

/// The latest stored row of each of a cluster's objects, read for many clusters at once.
#[derive(Clone)]
pub struct LiveObjectLookup {
    rows: Batcher<ObservedRow>,
}

impl std::fmt::Debug for LiveObjectLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveObjectLookup").finish_non_exhaustive()
    }
}

impl LiveObjectLookup {
    pub fn spawn(store: Store, config: LookupConfig) -> LiveObjectLookup {
        LiveObjectLookup {
            rows: Batcher::spawn(store, config, |store, ids| {
                Box::pin(async move {
                    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                    let rows = store.observed_for_clusters(&ids).await;
                    rows.map(|rows| group(rows, |r| &r.cluster_id))
                        .map_err(|err| err.to_string())
                })
            }),
        }
    }

    /// The latest row of each of the cluster's objects, as the store holds them now.
    pub async fn observed_rows(&self, cluster: &str) -> Result<Arc<Vec<ObservedRow>>, String> {
        self.rows.get(cluster).await
    }

    /// Counters of the queries.
    pub fn stats(&self) -> &LookupStats {
        &self.rows.stats
    }
}

fn group<T>(rows: Vec<T>, cluster: impl Fn(&T) -> &String) -> HashMap<String, Arc<Vec<T>>> {
    let mut per_cluster: HashMap<String, Vec<T>> = HashMap::new();
    for row in rows {
        match per_cluster.get_mut(cluster(&row)) {
            Some(rows) => rows.push(row),
            None => {
                per_cluster.insert(cluster(&row).clone(), vec![row]);
            }
        }
    }
    per_cluster
        .into_iter()
        .map(|(cluster, rows)| (cluster, Arc::new(rows)))
        .collect()
}

type Answer<T> = Result<Arc<Vec<T>>, String>;

/// Reads the rows of many clusters in one query, grouped by cluster.
type Fetch<T> =
    fn(Store, Vec<String>) -> BoxFuture<'static, Result<HashMap<String, Arc<Vec<T>>>, String>>;

struct Lookup<T> {
    cluster: String,
    reply: oneshot::Sender<Answer<T>>,
}

struct Batcher<T> {
    tx: mpsc::UnboundedSender<Lookup<T>>,
    stats: Arc<LookupStats>,
}

impl<T> Clone for Batcher<T> {
    fn clone(&self) -> Self {
        Batcher {
            tx: self.tx.clone(),
            stats: self.stats.clone(),
        }
    }
}

impl<T: Send + Sync + 'static> Batcher<T> {
    fn spawn(store: Store, config: LookupConfig, fetch: Fetch<T>) -> Batcher<T> {
        let (tx, rx) = mpsc::unbounded_channel();
        let stats = Arc::new(LookupStats::default());
        tokio::spawn(run(store, config, fetch, rx, stats.clone()));
        Batcher { tx, stats }
    }

    async fn get(&self, cluster: &str) -> Answer<T> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Lookup {
                cluster: cluster.to_owned(),
                reply,
            })
            .map_err(|_| "the lookup task has stopped".to_owned())?;
        answer
            .await
            .unwrap_or_else(|_| Err("the lookup task has stopped".to_owned()))
    }
}

async fn run<T: Send + Sync + 'static>(
    store: Store,
    config: LookupConfig,
    fetch: Fetch<T>,
    mut rx: mpsc::UnboundedReceiver<Lookup<T>>,
    stats: Arc<LookupStats>,
) {
    let slots = Arc::new(Semaphore::new(config.max_in_flight.max(1)));
    let max_clusters = config.max_clusters.max(1);
    while let Some(first) = rx.recv().await {
        // Wait for a free slot first: lookups arriving meanwhile join this batch.
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < max_clusters {
            match rx.try_recv() {
                Ok(lookup) => batch.push(lookup),
                Err(_) => break,
            }
        }
        let mut ids: Vec<String> = batch.iter().map(|l| l.cluster.clone()).collect();
        ids.sort_unstable();
        ids.dedup();
        stats.queries.fetch_add(1, Ordering::Relaxed);
        stats
            .clusters
            .fetch_add(ids.len() as u64, Ordering::Relaxed);
        let answer = fetch(store.clone(), ids);
        tokio::spawn(async move {
            let answer = answer.await;
            drop(permit);
            for lookup in batch {
                let reply = match &answer {
                    // A cluster with nothing stored has no rows in the answer.
                    Ok(per_cluster) => Ok(per_cluster
                        .get(&lookup.cluster)
                        .cloned()
                        .unwrap_or_default()),
                    Err(err) => Err(err.clone()),
                };
                let _ = lookup.reply.send(reply);
            }
        });
    }
}
