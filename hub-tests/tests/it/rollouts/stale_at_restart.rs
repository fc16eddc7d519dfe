//! A hub run with a `--stale-after` shorter than the default (300 s) and started again while
//! two clusters are stale by it: they went quiet before a rollback render whose version they
//! still report healthy, so neither the hub that ran through the render nor the one started
//! after it counts them as having reached the rollback (a stale cluster's pair is `stale`,
//! never `in_sync`). They are started again 550 s after their last heartbeat: stale by the
//! hub's threshold, not by the default 600 s one.
//!
//! The fleet (`emea/de`: c1–c3, `amer/us`: c4–c6):
//! - T: web 1.0 everywhere, every cluster in sync at T+60.
//! - T+1000: web 2.0 everywhere; c1, c2 and c4 in sync at 2.0 at T+1100, the others still run
//!   1.0 (healthy). Everyone heard from until T+1500; c3 and c5 are silent from then on.
//! - T+2000: web back to 1.0 everywhere (a rollback rollout of six clusters). c6, running
//!   1.0 and heard from, reaches it at its start; c1 reports 1.0 healthy at T+2030 and reaches
//!   it then; c2 and c4 still run 2.0; c3 and c5 are stale (quiet for 500 s then, 550 s at the
//!   restart).
//! - T+2050 (now): the rollback has two clusters reached, two stale, no 50 % milestone (three
//!   of six needed), in `emea` one reached (c1) and one stale (c3).

use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_hub::{router, AppState, Auth, MetricsConfig};
use fleetscope_model::{DriftPolicy, Timestamp};
use fleetscope_store::HeartbeatRow;
use serde_json::{json, Value};

use super::{id, ok, Fleet, Recording, T};
use crate::common;

const NOW: u32 = T + 2050;

/// The hub's thresholds: stale after 300 s, the default grace.
const POLICY: DriftPolicy = DriftPolicy {
    stale_after_seconds: 300,
    progress_grace_seconds: 900,
};

/// The clock of the hub started again: [`NOW`].
fn now() -> Timestamp {
    Timestamp(i64::from(NOW))
}

/// The hub's state over `index`, under [`POLICY`], answering at [`NOW`].
fn state_over(index: Arc<Index>) -> Arc<AppState> {
    let mut state = AppState::new(index, POLICY, MetricsConfig::default());
    state.fixed_now = Some(now());
    Arc::new(state)
}

/// `clusters` heard from at `at`, then the hub refreshed at `at` under [`POLICY`].
async fn heard(fleet: &Fleet, clusters: &[&str], at: u32) {
    let heartbeats: Vec<HeartbeatRow> = clusters
        .iter()
        .map(|c| HeartbeatRow {
            cluster_id: (*c).into(),
            seen_at: at,
            agent_version: "1.0.0".into(),
            reconciler_names: vec![],
            reconciler_versions: vec![],
        })
        .collect();
    fleet.store.insert_rows(&heartbeats).await.unwrap();
    fleet
        .index
        .refresh_at(Timestamp(i64::from(at)), &POLICY)
        .await
        .unwrap();
}

/// The answers the test compares, with the rollback's own.
async fn answers(base: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for path in [
        "rollouts?app=web&limit=1000".to_owned(),
        "rollouts?app=web&group=emea&limit=1000".to_owned(),
        "rollouts?app=web&group=amer&limit=1000".to_owned(),
        format!("rollouts/{}?depth=2", id("web", T + 2000, "1.0")),
    ] {
        let answer = ok(base, &path).await;
        out.push((path, answer));
    }
    out
}

/// The rollback as a listing at `path` shows it.
fn rollback<'a>(answers: &'a [(String, Value)], path: &str) -> &'a Value {
    let (_, listing) = answers
        .iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("{path} asked"));
    let rollback = id("web", T + 2000, "1.0");
    listing["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == json!(rollback))
        .unwrap_or_else(|| panic!("{rollback} in {path}: {listing}"))
}

fn counts(rollout: &Value) -> Value {
    json!({
        "targeted": rollout["targeted"],
        "reached": rollout["reached"],
        "in_sync": rollout["in_sync"],
        "stale": rollout["stale"],
        "seconds_to_50_percent": rollout["seconds_to_50_percent"],
    })
}

#[tokio::test]
async fn clusters_stale_at_a_rollback_have_not_reached_it_after_a_restart() {
    let mut fleet = Fleet::start(false).await;
    let all = ["c1", "c2", "c3", "c4", "c5", "c6"];
    let to = |from: &'static str, to: &'static str| all.map(move |c| (c, "web", from, to)).to_vec();
    fleet.render(T, "p1", T - 600, &all, &to("", "1.0")).await;
    for c in all {
        fleet.report(c, "web", "1.0", "healthy", T + 60).await;
    }
    heard(&fleet, &all, T + 100).await;
    fleet
        .render(T + 1000, "p2", T + 900, &[], &to("1.0", "2.0"))
        .await;
    for c in ["c1", "c2", "c4"] {
        fleet.report(c, "web", "2.0", "healthy", T + 1100).await;
    }
    heard(&fleet, &all, T + 1200).await;
    heard(&fleet, &all, T + 1500).await;
    let heard_of = ["c1", "c2", "c4", "c6"];
    heard(&fleet, &heard_of, T + 1900).await;
    fleet
        .render(T + 2000, "p3", T + 1950, &[], &to("2.0", "1.0"))
        .await;
    heard(&fleet, &heard_of, T + 2010).await;
    fleet.report("c1", "web", "1.0", "healthy", T + 2030).await;
    heard(&fleet, &heard_of, T + 2040).await;
    fleet.index.refresh_at(now(), &POLICY).await.unwrap();
    let live = state_over(fleet.index.clone());
    let mut recording = Recording::default();
    recording.write(&live).await;
    let live = answers(&common::serve(router(live, Arc::new(Auth::Insecure), false)).await).await;

    // As docs/hub.md counts it: c6 at the start, c1 at T+2030; c3 and c5 stale.
    let whole = json!({
        "targeted": 6, "reached": 2, "in_sync": 2, "stale": 2, "seconds_to_50_percent": null,
    });
    let emea = json!({
        "targeted": 3, "reached": 1, "in_sync": 1, "stale": 1, "seconds_to_50_percent": null,
    });
    let amer = json!({
        "targeted": 3, "reached": 1, "in_sync": 1, "stale": 1, "seconds_to_50_percent": null,
    });
    let expected = [
        ("rollouts?app=web&limit=1000", whole),
        ("rollouts?app=web&group=emea&limit=1000", emea),
        ("rollouts?app=web&group=amer&limit=1000", amer),
    ];
    for (path, figures) in &expected {
        assert_eq!(
            &counts(rollback(&live, path)),
            figures,
            "{path} before the restart"
        );
    }

    // Started again at NOW under the same thresholds, as the hub starts.
    let index = Index::load_under(fleet.store.clone(), now, &POLICY)
        .await
        .unwrap();
    index.refresh_at(now(), &POLICY).await.unwrap();
    let again = state_over(Arc::new(index));
    let again = answers(&common::serve(router(again, Arc::new(Auth::Insecure), false)).await).await;
    for (path, figures) in &expected {
        assert_eq!(
            &counts(rollback(&again, path)),
            figures,
            "{path} after the restart"
        );
    }
    for ((path, before), (_, after)) in live.iter().zip(&again) {
        assert_eq!(after, before, "{path} after the restart");
    }
    let one = &again[3].1;
    let stragglers: Vec<(&str, &str)> = one["stragglers"]
        .as_array()
        .unwrap_or_else(|| panic!("stragglers in {one}"))
        .iter()
        .map(|s| (s["cluster"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert!(
        stragglers.contains(&("c3", "stale")) && stragglers.contains(&("c5", "stale")),
        "{one}"
    );
}
