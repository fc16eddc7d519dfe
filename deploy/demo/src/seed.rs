//! A generated fleet written straight into the store, the way the collector and renderer would
//! have written it: used by tests and benchmarks that need a known fleet in ClickHouse without
//! running the services.

use fleetscope_loadtest::fleet::GroundTruth;
use fleetscope_loadtest::GeneratedFleet;
use fleetscope_store::writer::{BatchWriter, BatchWriterConfig};
use fleetscope_store::{ObservedRow, Store};

/// What [`write_fleet`] wrote, and the simulator's ground truth for it.
#[derive(Debug)]
pub struct Written {
    pub clusters: u64,
    pub heartbeats: u64,
    pub desired: u64,
    pub render_groups: usize,
    pub observed: u64,
    pub batches: u64,
    pub truth: GroundTruth,
}

/// Streams the fleet into the store: inventory, membership and heartbeats in chunks, observed
/// state through the batch writer (the path the collector uses).
pub async fn write_fleet(store: &Store, fleet: &GeneratedFleet) -> anyhow::Result<Written> {
    let desired = fleet.desired();
    let render_groups = desired
        .iter()
        .map(|d| d.render_group.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    store.insert_rows(&[fleet.render()]).await?;
    store.insert_rows(&desired).await?;

    let writer =
        BatchWriter::<ObservedRow>::spawn(store.clone(), BatchWriterConfig::default(), None);
    let mut truth = GroundTruth::default();
    let mut written = Written {
        clusters: 0,
        heartbeats: 0,
        desired: desired.len() as u64,
        render_groups,
        observed: 0,
        batches: 0,
        truth: GroundTruth::default(),
    };
    let mut pending = Vec::new();
    const CHUNK: usize = 1_000;
    for start in (0..fleet.spec().clusters).step_by(CHUNK) {
        let sims: Vec<_> = (start..(start + CHUNK).min(fleet.spec().clusters))
            .map(|i| fleet.cluster(i))
            .collect();
        let clusters: Vec<_> = sims.iter().map(|s| s.cluster.clone()).collect();
        let members: Vec<_> = sims.iter().map(|s| s.membership.clone()).collect();
        let heartbeats: Vec<_> = sims.iter().filter_map(|s| s.heartbeat.clone()).collect();
        store.insert_rows(&clusters).await?;
        store.insert_rows(&members).await?;
        store.insert_rows(&heartbeats).await?;
        written.clusters += clusters.len() as u64;
        written.heartbeats += heartbeats.len() as u64;
        for sim in sims {
            truth.add(&sim);
            written.observed += sim.observed.len() as u64;
            pending.push(writer.submit(sim.observed).await?);
        }
    }
    let mut batches = std::collections::BTreeSet::new();
    for p in pending {
        batches.insert(p.accepted().await?.batch_id);
    }
    writer.close().await;
    written.batches = batches.len() as u64;
    written.truth = truth;
    Ok(written)
}
