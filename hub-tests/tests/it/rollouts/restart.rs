//! A hub started after the fleet's life takes the rollouts' history back from the records the
//! hub before it wrote: every rollout answer equals the answer of the hub that ran through it.
//! Without the records, the history it could not see is gone (the failure c4 mended before
//! the start, so the time to restore).

use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_hub::{router, AppState, Auth, MetricsConfig};
use fleetscope_model::{DriftPolicy, Timestamp};
use serde_json::Value;

use super::{built, id, ok, Recording, Servers, T};
use crate::common;

const NOW: u32 = T + 7300;

/// A hub loaded afresh from `store`, refreshed and answering at [`NOW`].
async fn started_again(store: &fleetscope_store::Store) -> String {
    let index = Index::load(store.clone(), fleetscope_runtime::clock::now)
        .await
        .unwrap();
    index
        .refresh_at(Timestamp(i64::from(NOW)), &DriftPolicy::default())
        .await
        .unwrap();
    let mut state = AppState::new(
        Arc::new(index),
        DriftPolicy::default(),
        MetricsConfig::default(),
    );
    state.fixed_now = Some(Timestamp(i64::from(NOW)));
    common::serve(router(Arc::new(state), Arc::new(Auth::Insecure), false)).await
}

/// Every rollout answer the test compares.
async fn answers(base: &str) -> Vec<(String, Value)> {
    let mut paths = vec![
        "rollouts?limit=1000".to_owned(),
        "rollouts?group=amer&limit=1000".to_owned(),
        "delivery".to_owned(),
        "delivery?group=emea".to_owned(),
    ];
    for (app, at, version) in [
        ("web", T, "1.0"),
        ("web", T + 1000, "2.0"),
        ("web", T + 2000, "2.0"),
        ("web", T + 3000, "2.0"),
        ("api", T + 1000, "3.1"),
        ("api", T + 2000, "3.0"),
    ] {
        paths.push(format!("rollouts/{}?depth=2", id(app, at, version)));
    }
    let mut out = Vec::new();
    for path in paths {
        let answer = ok(base, &path).await;
        out.push((path, answer));
    }
    out
}

#[tokio::test]
async fn a_hub_started_again_takes_the_rollouts_history_back_from_the_records() {
    let mut recording = Recording::default();
    let (fleet, _state, base) = built(false, Some(&mut recording)).await;
    let through = answers(&base).await;

    let again = started_again(&fleet.store).await;
    for ((path, expected), (_, answer)) in through.iter().zip(answers(&again).await) {
        assert_eq!(&answer, expected, "{path} after a restart");
    }

    // Without the records, c4's failure before it reached the second wave is not seen again.
    let Servers::One(test) = &fleet.servers else {
        unreachable!("one server")
    };
    for table in ["rollout_records", "rollout_clusters"] {
        let response = reqwest::Client::new()
            .post(test.server.url())
            .query(&[("database", fleet.store.database())])
            .body(format!("TRUNCATE TABLE {table}"))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success());
    }
    let forgetful = started_again(&fleet.store).await;
    let delivery = ok(&forgetful, "delivery?app=web").await;
    assert_eq!(
        delivery["apps"][0]["time_to_restore"]["count"],
        serde_json::json!(0),
        "{delivery}"
    );
    let with_records = &through[2].1;
    let web = with_records["apps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["app"] == "web")
        .unwrap();
    assert_eq!(web["time_to_restore"]["count"], serde_json::json!(1));
}
