//! Heartbeats at a moment over a week of heartbeat history (30,000 clusters every 30 s in a
//! private ClickHouse): the store's read (`Store::heartbeats_at`) against the lookup it replaced,
//! which searched the whole history for every cluster without a heartbeat in the 15 minutes
//! before the moment. Prints both times and whether they give the same heartbeats.
//!
//! `cargo run --release -p fleetscope-hub-tests --example heartbeats_at_week -- 7` (days of history).

use std::time::Instant;

use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_model::Timestamp;
use fleetscope_store::past::{
    heartbeats_in_window_query, heartbeats_of_clusters_at_query, synthetic,
};
use fleetscope_store::HeartbeatRow;

#[tokio::main]
async fn main() {
    let test = fleetscope_testkit::TestStore::start().await;
    let store = &test.store;
    let fleet = GeneratedFleet::new(FleetSpec {
        clusters: 30_000,
        apps: 100,
        ..FleetSpec::default()
    })
    .unwrap();
    let now = fleet.spec().now;
    fleetscope_fixtures::write_fleet(store, &fleet)
        .await
        .unwrap();
    let days: u32 = std::env::args()
        .nth(1)
        .map(|d| d.parse().unwrap())
        .unwrap_or(7);
    let from = Timestamp(now.seconds() - i64::from(days) * 86_400);
    let t = Instant::now();
    synthetic::heartbeats(store, from, days, 30).await.unwrap();
    println!(
        "{days} days of heartbeats: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let ids: Vec<String> = (0..30_000)
        .map(|i| fleet.cluster(i).cluster.cluster_id)
        .collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    for round in 0..3 {
        let at = Timestamp(now.seconds() - 86_400 - 3_000 - round * 977);
        let t = Instant::now();
        let new = store.heartbeats_at(at, None, &ids).await.unwrap();
        let new_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let mut old: Vec<HeartbeatRow> = heartbeats_in_window_query(store, at)
            .fetch_all()
            .await
            .unwrap();
        let found: std::collections::HashSet<String> =
            old.iter().map(|r| r.cluster_id.clone()).collect();
        let rest: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| !found.contains(*id))
            .collect();
        for part in rest.chunks(1_000) {
            let more: Vec<HeartbeatRow> = heartbeats_of_clusters_at_query(store, at, part)
                .fetch_all()
                .await
                .unwrap();
            old.extend(more);
        }
        let old_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut a: Vec<(String, u32)> = new
            .iter()
            .map(|r| (r.cluster_id.clone(), r.seen_at))
            .collect();
        let mut b: Vec<(String, u32)> = old
            .iter()
            .map(|r| (r.cluster_id.clone(), r.seen_at))
            .collect();
        a.sort();
        b.sort();
        println!("round {round}: new {new_ms:.0} ms ({} rows), old {old_ms:.0} ms ({} rows, {} looked up), equal: {}", a.len(), b.len(), rest.len(), a == b);
    }
}
