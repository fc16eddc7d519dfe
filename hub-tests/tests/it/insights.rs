//! `GET /api/v1/insights/failures` over real HTTP on fleets in a private ClickHouse whose
//! failures are decided here: one where a planted cause (`hw=gen2`) makes clusters fail, which
//! the route must name first and significant; one where failures fall independently of every
//! attribute, where it must name nothing significant; and a scoped token, which must see only
//! its subtree. Every count is checked against the tally kept while the fleet was written.

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetscope_engine::Index;
use fleetscope_fixtures::rng::SplitMix64;
use fleetscope_fixtures::{FleetSpec, GeneratedFleet};
use fleetscope_hub::Auth;
use fleetscope_hub::MetricsConfig;
use fleetscope_hub::{router, AppState};
use fleetscope_model::{DriftState, GroupPath};
use fleetscope_store::writer::{BatchWriter, BatchWriterConfig};
use fleetscope_store::ObservedRow;
use fleetscope_testkit::TestStore;
use serde_json::Value;

use crate::common;

const READER: &str = "insights-reader-token-0123456789";
const SCOPED: &str = "insights-emea-de-token-0123456789";
const SCOPE: &str = "emea/de";
const APP: &str = "checkout";

/// How a cluster's failure of `checkout` is decided.
#[derive(Debug, Clone, Copy)]
enum Cause {
    /// `hw=gen2` clusters fail with probability 0.6, the others with 0.01.
    Planted,
    /// Every cluster fails with probability 0.1, whatever its attributes.
    None,
}

/// One cluster as written: its side for `checkout` (`None`: neither), group, environment,
/// `hw` label and the desired version of `checkout`.
#[derive(Debug)]
struct Written {
    side: Option<bool>,
    group: GroupPath,
    environment: String,
    gen2: bool,
    desired: String,
}

struct Hub {
    _test: TestStore,
    base: String,
    client: reqwest::Client,
    clusters: Vec<Written>,
}

impl Hub {
    /// A generated fleet of `clusters` with no drift of its own, given an `hw` label (a quarter
    /// `gen2`), two agent versions, and `checkout` failing as `cause` decides.
    async fn start(clusters: usize, cause: Cause, seed: u64) -> Hub {
        let test = TestStore::start().await;
        let fleet = GeneratedFleet::new(FleetSpec {
            clusters,
            apps: 3,
            seed,
            never_seen_share: 0.0,
            stale_share: 0.03,
            failed_share: 0.0,
            drifted_share: 0.0,
            missing_share: 0.02,
            unexpected_share: 0.0,
            ..FleetSpec::default()
        })
        .expect("a valid fleet");
        let store = &test.store;
        let desired = fleet.desired();
        store.insert_rows(&[fleet.render()]).await.unwrap();
        store.insert_rows(&desired).await.unwrap();
        let mut rng = SplitMix64::new(seed ^ 0x1a5e);
        let mut written = Vec::new();
        let (mut rows, mut members, mut heartbeats, mut observed) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..clusters {
            let mut sim = fleet.cluster(i);
            let gen2 = rng.chance(0.25);
            let fails = match cause {
                Cause::Planted => rng.chance(if gen2 { 0.6 } else { 0.01 }),
                Cause::None => rng.chance(0.1),
            };
            sim.cluster.label_keys.push("hw".to_owned());
            sim.cluster
                .label_values
                .push(if gen2 { "gen2" } else { "gen1" }.to_owned());
            if let Some(heartbeat) = &mut sim.heartbeat {
                heartbeat.agent_version = if rng.chance(0.5) { "0.1.0" } else { "0.2.0" }.into();
            }
            let truth = sim
                .truth
                .iter()
                .find(|(app, _)| app == APP)
                .map(|(_, state)| *state);
            let mut side = match truth {
                Some(DriftState::InSync) => Some(false),
                _ => None,
            };
            if fails && side.is_some() {
                let row = sim
                    .observed
                    .iter_mut()
                    .find(|r| r.app == APP)
                    .expect("an in-sync pair was observed");
                row.health = "degraded".to_owned();
                row.reason = "ReconciliationFailed".to_owned();
                row.message = "Deployment/checkout: 0 of 3 replicas ready".to_owned();
                side = Some(true);
            }
            written.push(Written {
                side,
                group: GroupPath::parse(&sim.cluster.group_path).unwrap(),
                environment: sim.cluster.environment.clone(),
                gen2,
                desired: desired
                    .iter()
                    .find(|d| d.render_group == sim.membership.render_group && d.app == APP)
                    .expect("checkout is desired everywhere")
                    .version
                    .clone(),
            });
            rows.push(sim.cluster);
            members.push(sim.membership);
            heartbeats.extend(sim.heartbeat);
            observed.push(sim.observed);
        }
        store.insert_rows(&rows).await.unwrap();
        store.insert_rows(&members).await.unwrap();
        store.insert_rows(&heartbeats).await.unwrap();
        let writer =
            BatchWriter::<ObservedRow>::spawn(store.clone(), BatchWriterConfig::default(), None);
        let mut pending = Vec::new();
        for rows in observed {
            pending.push(writer.submit(rows).await.unwrap());
        }
        for p in pending {
            p.accepted().await.unwrap();
        }
        writer.close().await;

        let spec = fleet.spec();
        let index = Index::load(store.clone(), fleetscope_runtime::clock::now)
            .await
            .unwrap();
        let mut state = AppState::new(Arc::new(index), spec.policy, MetricsConfig::default());
        state.fixed_now = Some(spec.now);
        let auth = Auth::parse(&format!(
            "tokens:\n  - name: reader\n    token: {READER}\n    role: read\n  - name: team-de\n    token: {SCOPED}\n    role: read\n    scope: {SCOPE}\n"
        ))
        .unwrap();
        let base = common::serve(router(Arc::new(state), Arc::new(auth), false)).await;
        Hub {
            _test: test,
            base,
            client: reqwest::Client::new(),
            clusters: written,
        }
    }

    async fn get(&self, token: &str, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&body).unwrap_or_else(|err| panic!("{path}: {err}: {body}")),
        )
    }

    async fn insights(&self, token: &str, query: &str) -> Value {
        let path = format!("/api/v1/insights/failures?{query}");
        let (status, answer) = self.get(token, &path).await;
        assert_eq!(status, 200, "{path}: {answer}");
        answer
    }

    /// (failing, in sync) among the written clusters `select` keeps.
    fn sides(&self, select: impl Fn(&Written) -> bool) -> (u64, u64) {
        let mut sides = (0, 0);
        for c in self.clusters.iter().filter(|c| select(c)) {
            match c.side {
                Some(true) => sides.0 += 1,
                Some(false) => sides.1 += 1,
                None => {}
            }
        }
        sides
    }
}

/// The totals of an answer against the written tally, and every finding's table adding up.
fn check_counts(answer: &Value, (failing, in_sync): (u64, u64)) {
    assert_eq!(answer["failing"], failing, "{answer}");
    assert_eq!(answer["in_sync"], in_sync, "{answer}");
    assert_eq!(answer["considered"], failing + in_sync, "{answer}");
    for finding in answer["findings"].as_array().unwrap() {
        let n = |k: &str| finding[k].as_u64().unwrap();
        assert_eq!(
            n("failing_with") + n("failing_without"),
            failing,
            "{finding}"
        );
        assert_eq!(
            n("in_sync_with") + n("in_sync_without"),
            in_sync,
            "{finding}"
        );
        assert!(
            finding["failure_rate_with"].as_f64() > finding["failure_rate_without"].as_f64(),
            "only over-represented values are listed: {finding}"
        );
        assert!(finding["lift"].as_f64().unwrap() > 1.0, "{finding}");
    }
}

#[tokio::test]
async fn a_planted_cause_comes_first_and_significant() {
    let hub = Hub::start(1_500, Cause::Planted, 7).await;
    let answer = hub.insights(READER, &format!("app={APP}")).await;
    check_counts(&answer, hub.sides(|_| true));
    let top = &answer["findings"][0];
    assert_eq!(top["attribute"], "label", "{answer:#}");
    assert_eq!(top["value"], "hw=gen2", "{answer:#}");
    assert_eq!(top["significant"], true, "{answer:#}");
    assert!(top["p_adjusted"].as_f64().unwrap() < 1e-10, "{top}");
    let (gen2_failing, gen2_in_sync) = hub.sides(|c| c.gen2);
    assert_eq!(top["failing_with"], gen2_failing);
    assert_eq!(top["in_sync_with"], gen2_in_sync);
    let headline = answer["headline"].as_str().expect("a headline");
    let failing = answer["failing"].as_u64().unwrap();
    assert!(
        headline.starts_with(&format!(
            "of {failing} clusters failing {APP}, {gen2_failing} have hw=gen2; "
        )),
        "{headline}"
    );
    // Ordered: p-values never fall down the list.
    let p: Vec<f64> = answer["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["log10_p_value"].as_f64().unwrap())
        .collect();
    assert!(p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");

    // One desired version: only the clusters desiring it, and the cause still first.
    let prod_version = hub
        .clusters
        .iter()
        .find(|c| c.environment == "prod")
        .unwrap()
        .desired
        .clone();
    let answer = hub
        .insights(READER, &format!("app={APP}&version={prod_version}&limit=3"))
        .await;
    check_counts(&answer, hub.sides(|c| c.desired == prod_version));
    assert_eq!(answer["version"], prod_version.as_str());
    assert_eq!(answer["findings"][0]["value"], "hw=gen2", "{answer:#}");
    assert!(answer["findings"].as_array().unwrap().len() <= 3);
    assert!(answer["headline"]
        .as_str()
        .unwrap()
        .contains(&format!("failing {APP} {prod_version}, ")));

    // Filters narrow the comparison like on every route.
    let answer = hub
        .insights(READER, &format!("app={APP}&environment=prod&group=amer"))
        .await;
    let amer = GroupPath::parse("amer").unwrap();
    check_counts(
        &answer,
        hub.sides(|c| c.environment == "prod" && c.group.is_within(&amer)),
    );
    let answer = hub
        .insights(READER, &format!("app={APP}&label=hw=gen1"))
        .await;
    check_counts(&answer, hub.sides(|c| !c.gen2));
    assert!(answer["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["value"] != "hw=gen1"));

    // An app nobody runs: nothing to compare, nothing found.
    let answer = hub.insights(READER, "app=no-such-app").await;
    check_counts(&answer, (0, 0));
    assert_eq!(answer["tests"], 0);
    assert_eq!(answer["findings"], Value::Array(Vec::new()));
    assert_eq!(answer["headline"], Value::Null);

    // Bad questions are 400s naming the parameter.
    for (query, parameter) in [
        ("", "app"),
        ("app=checkout&limit=0", "limit"),
        ("app=checkout&limit=1001", "limit"),
        ("app=checkout&state=failed", "state"),
    ] {
        let (status, body) = hub
            .get(READER, &format!("/api/v1/insights/failures?{query}"))
            .await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["parameter"], parameter, "{query}: {body}");
    }
}

#[tokio::test]
async fn failures_independent_of_every_attribute_find_nothing_significant() {
    let hub = Hub::start(1_500, Cause::None, 11).await;
    let answer = hub.insights(READER, &format!("app={APP}&limit=1000")).await;
    check_counts(&answer, hub.sides(|_| true));
    assert!(
        answer["failing"].as_u64().unwrap() > 100,
        "enough failures to find something: {answer}"
    );
    assert!(answer["tests"].as_u64().unwrap() > 20, "{answer}");
    let significant: Vec<&Value> = answer["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["significant"] == true)
        .collect();
    assert!(significant.is_empty(), "{significant:#?}");
    assert_eq!(answer["headline"], Value::Null, "{answer:#}");
    // Bonferroni: every adjusted p is the raw one times the number of tests, at most 1.
    let tests = answer["tests"].as_f64().unwrap();
    for f in answer["findings"].as_array().unwrap() {
        let (p, adjusted) = (
            f["p_value"].as_f64().unwrap(),
            f["p_adjusted"].as_f64().unwrap(),
        );
        assert!((adjusted - (p * tests).min(1.0)).abs() < 1e-12, "{f}");
    }
}

#[tokio::test]
async fn a_scoped_token_compares_only_its_subtree() {
    let hub = Hub::start(1_500, Cause::Planted, 7).await;
    let scope = GroupPath::parse(SCOPE).unwrap();
    let answer = hub.insights(SCOPED, &format!("app={APP}&limit=1000")).await;
    let sides = hub.sides(|c| c.group.is_within(&scope));
    assert!(
        sides.0 > 0 && sides.1 > 0,
        "the scope has both sides: {sides:?}"
    );
    check_counts(&answer, sides);
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in answer["findings"].as_array().unwrap() {
        values
            .entry(f["attribute"].as_str().unwrap().to_owned())
            .or_default()
            .push(f["value"].as_str().unwrap().to_owned());
    }
    for group in values.get("group").into_iter().flatten() {
        // Groups within the scope only; the scope itself is on every cluster, so not tested.
        assert!(
            GroupPath::parse(group).unwrap().is_within(&scope) && group != SCOPE,
            "{group} is outside {SCOPE}"
        );
    }
    for label in values.get("label").into_iter().flatten() {
        assert!(
            !label.starts_with("region=") || label == "region=emea",
            "{label}"
        );
    }
    // Asking for a wider group does not widen the scope; a disjoint one selects nothing.
    let wider = hub.insights(SCOPED, &format!("app={APP}&group=emea")).await;
    check_counts(&wider, sides);
    let elsewhere = hub.insights(SCOPED, &format!("app={APP}&group=amer")).await;
    check_counts(&elsewhere, (0, 0));
    assert_eq!(elsewhere["findings"], Value::Array(Vec::new()));
}
