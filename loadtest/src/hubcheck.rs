//! What the hub says, read over its HTTP API, and the comparison with the simulator's ground
//! truth: the summary's rollup of every group and every app's version inventory.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use fleetscope_model::DriftState;
use serde_json::Value;

use crate::sim::{AppTruth, GroupTruth, StateCounts};

/// A histogram's cumulative buckets as Prometheus's text format gives them: (upper bound,
/// count), ascending, the last bound infinite.
pub type Buckets = Vec<(f64, u64)>;

/// The buckets of the histogram `name`, one without labels of its own, in a `/metrics` text;
/// empty when it is not there.
pub fn parse_buckets(text: &str, name: &str) -> Buckets {
    let prefix = format!("{name}_bucket{{le=\"");
    let mut buckets: Buckets = text
        .lines()
        .filter_map(|line| {
            let (le, value) = line.strip_prefix(&prefix)?.split_once("\"} ")?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((bound, value.trim().parse::<f64>().ok()? as u64))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// A client of the hub's API with a read token.
#[derive(Debug, Clone)]
pub struct HubClient {
    pub url: String,
    pub token: String,
    pub http: reqwest::Client,
}

impl HubClient {
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let response = self
            .http
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        let status = response.status();
        let text = response.text().await?;
        anyhow::ensure!(status.is_success(), "GET {path}: {status}: {text}");
        serde_json::from_str(&text).with_context(|| format!("GET {path}: not JSON"))
    }

    /// The hub's `/metrics` text.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        let response = self
            .http
            .get(format!("{}/metrics", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .context("GET /metrics")?;
        let status = response.status();
        let text = response.text().await?;
        anyhow::ensure!(status.is_success(), "GET /metrics: {status}: {text}");
        Ok(text)
    }

    /// Group path ("" for the fleet) → numbers, from `/api/v1/summary`.
    pub async fn rollups(&self) -> anyhow::Result<BTreeMap<String, GroupTruth>> {
        let summary = self.get("/api/v1/summary").await?;
        let mut out = BTreeMap::new();
        out.insert(String::new(), group_numbers(&summary["total"])?);
        for g in summary["groups"]
            .as_array()
            .context("summary without groups")?
        {
            let path = g["group"].as_str().context("group without a path")?;
            out.insert(path.to_owned(), group_numbers(g)?);
        }
        Ok(out)
    }

    /// One app's inventory from `/api/v1/apps/{app}/versions` (running versions by region).
    pub async fn inventory(&self, app: &str) -> anyhow::Result<AppTruth> {
        let answer = self.get(&format!("/api/v1/apps/{app}/versions")).await?;
        let mut truth = AppTruth::default();
        for d in answer["desired"].as_array().context("no desired list")? {
            truth.desired.insert(
                d["version"].as_str().unwrap_or_default().to_owned(),
                d["clusters"].as_u64().unwrap_or_default(),
            );
        }
        for r in answer["running"].as_array().context("no running list")? {
            let groups = r["groups"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(g, n)| (g.clone(), n.as_u64().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default();
            truth.running.insert(
                r["version"].as_str().unwrap_or_default().to_owned(),
                (r["clusters"].as_u64().unwrap_or_default(), groups),
            );
        }
        Ok(truth)
    }
}

fn group_numbers(value: &Value) -> anyhow::Result<GroupTruth> {
    let mut pairs = StateCounts::new();
    for state in DriftState::ALL {
        let n = value["app_instances_by_state"][state.as_str()]
            .as_u64()
            .with_context(|| format!("no count of {}", state.as_str()))?;
        if n > 0 {
            pairs.insert(*state, n);
        }
    }
    Ok(GroupTruth {
        clusters: value["clusters"].as_u64().context("no clusters")?,
        stale_clusters: value["stale_clusters"]
            .as_u64()
            .context("no stale_clusters")?,
        pairs,
    })
}

fn without_zeros(truth: &GroupTruth) -> GroupTruth {
    GroupTruth {
        pairs: truth
            .pairs
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(s, n)| (*s, *n))
            .collect(),
        ..truth.clone()
    }
}

/// The first difference between the hub's rollups and the ground truth, if any.
pub fn first_rollup_mismatch(
    hub: &BTreeMap<String, GroupTruth>,
    truth: &BTreeMap<String, GroupTruth>,
) -> Option<String> {
    for (group, expected) in truth {
        let name = if group.is_empty() { "the fleet" } else { group };
        match hub.get(group) {
            None => return Some(format!("{name}: missing in the hub's summary")),
            Some(got) if without_zeros(got) != without_zeros(expected) => {
                return Some(format!(
                    "{name}: hub {} clusters, {} stale, pairs {:?}; ground truth {} clusters, {} stale, pairs {:?}",
                    got.clusters,
                    got.stale_clusters,
                    named(&got.pairs),
                    expected.clusters,
                    expected.stale_clusters,
                    named(&expected.pairs)
                ))
            }
            Some(_) => {}
        }
    }
    hub.keys()
        .find(|g| !truth.contains_key(*g))
        .map(|g| format!("group {g} is in the hub's summary but not in the fleet"))
}

fn named(counts: &StateCounts) -> BTreeMap<&'static str, u64> {
    counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| (s.as_str(), *n))
        .collect()
}

/// The first difference between an app's inventory in the hub and in the ground truth.
pub fn inventory_mismatch(app: &str, hub: &AppTruth, truth: &AppTruth) -> Option<String> {
    (hub != truth).then(|| {
        format!(
            "app {app}: hub desired {:?} running {:?}; ground truth desired {:?} running {:?}",
            hub.desired, hub.running, truth.desired, truth.running
        )
    })
}

/// How a check ended.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    pub passed: bool,
    /// From the start of the check until the hub agreed (or the timeout).
    pub seconds: f64,
    pub attempts: u32,
    pub mismatch: Option<String>,
}

/// Compares until the hub agrees with `truth()` or `timeout` passes; the truth is recomputed
/// on every attempt (it depends on the time).
pub async fn converge<F, Fut>(timeout: Duration, mut attempt: F) -> CheckOutcome
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<String>>>,
{
    let started = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mismatch = match attempt().await {
            Ok(None) => {
                return CheckOutcome {
                    passed: true,
                    seconds: started.elapsed().as_secs_f64(),
                    attempts,
                    mismatch: None,
                }
            }
            Ok(Some(mismatch)) => mismatch,
            Err(err) => format!("{err:#}"),
        };
        if started.elapsed() >= timeout {
            return CheckOutcome {
                passed: false,
                seconds: started.elapsed().as_secs_f64(),
                attempts,
                mismatch: Some(mismatch),
            };
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The newest rollout of `app` as the hub lists it, against the simulator: its version, its
/// clusters `[targeted, in_sync, failed, stale]` now (`truth`) and the clusters that failed at
/// it before reaching it (`failed_first`, every wave's failures); and the app's delivery
/// figures over the last day against its rollouts listed over the same day (changes, and
/// failed changes by the documented rule with the default budget of 5 %). `None` when all agree.
pub async fn rollout_mismatch(
    hub: &HubClient,
    app: &str,
    version: &str,
    truth: [u64; 4],
    failed_first: u64,
) -> anyhow::Result<Option<String>> {
    let page = hub
        .get(&format!("/api/v1/rollouts?app={app}&limit=1"))
        .await?;
    let delivery = hub
        .get(&format!("/api/v1/delivery?app={app}&window=1d"))
        .await?;
    let from = delivery["from"].as_str().unwrap_or_default().to_owned();
    let listed = hub
        .get(&format!(
            "/api/v1/rollouts?app={app}&since={from}&limit=1000"
        ))
        .await?;
    Ok(rollout_answers_mismatch(
        app,
        version,
        truth,
        failed_first,
        &page,
        &delivery,
        &listed,
    ))
}

/// [`rollout_mismatch`] on the answers read: `page` (the newest rollout of `app`), `delivery`
/// (the app's over a day) and `listed` (its rollouts of that day).
pub fn rollout_answers_mismatch(
    app: &str,
    version: &str,
    truth: [u64; 4],
    failed_first: u64,
    page: &Value,
    delivery: &Value,
    listed: &Value,
) -> Option<String> {
    let Some(newest) = page["items"].get(0) else {
        return Some(format!("rollouts: none of {app}"));
    };
    if newest["version"] != version {
        return Some(format!(
            "rollouts: the newest of {app} is of {}, not {version}",
            newest["version"]
        ));
    }
    let number = |v: &Value, field: &str| v[field].as_u64().unwrap_or(u64::MAX);
    let got = [
        number(newest, "targeted"),
        number(newest, "in_sync"),
        number(newest, "failed"),
        number(newest, "stale"),
        number(newest, "failed_before_reaching"),
    ];
    let want = [truth[0], truth[1], truth[2], truth[3], failed_first];
    if got != want {
        return Some(format!(
            "rollout {}: [targeted, in_sync, failed, stale, failed_before_reaching] is {got:?}, the simulator says {want:?}",
            newest["id"]
        ));
    }
    let items = listed["items"].as_array().cloned().unwrap_or_default();
    let failed = items
        .iter()
        .filter(|r| {
            !r["rolled_back_by"].is_null()
                || number(r, "failed_before_reaching").saturating_mul(100)
                    > (number(r, "targeted_at_start").saturating_add(number(r, "joined")))
                        .saturating_mul(5)
        })
        .count() as u64;
    let figures = &delivery["apps"][0];
    let got = [
        number(figures, "changes"),
        number(figures, "failed_changes"),
    ];
    let want = [items.len() as u64, failed];
    (got != want).then(|| {
        format!(
            "delivery of {app} over a day: [changes, failed_changes] is {got:?}, its rollouts listed say {want:?}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group(clusters: u64, stale: u64, in_sync: u64, failed: u64) -> GroupTruth {
        GroupTruth {
            clusters,
            stale_clusters: stale,
            pairs: [(DriftState::InSync, in_sync), (DriftState::Failed, failed)].into(),
        }
    }

    #[test]
    fn equal_rollups_match_and_every_kind_of_difference_is_named() {
        let truth: BTreeMap<String, GroupTruth> = [
            (String::new(), group(3, 1, 20, 1)),
            ("emea".to_owned(), group(3, 1, 20, 1)),
        ]
        .into();
        let mut hub = truth.clone();
        hub.get_mut("emea")
            .unwrap()
            .pairs
            .insert(DriftState::Missing, 0);
        assert_eq!(
            first_rollup_mismatch(&hub, &truth),
            None,
            "zero counts are no difference"
        );

        let mut hub = truth.clone();
        hub.get_mut("emea").unwrap().stale_clusters = 0;
        let m = first_rollup_mismatch(&hub, &truth).unwrap();
        assert!(m.starts_with("emea: hub 3 clusters, 0 stale"), "{m}");

        let mut hub = truth.clone();
        hub.remove("");
        assert_eq!(
            first_rollup_mismatch(&hub, &truth).unwrap(),
            "the fleet: missing in the hub's summary"
        );

        let mut hub = truth.clone();
        hub.insert("apac".into(), group(1, 0, 1, 0));
        assert!(first_rollup_mismatch(&hub, &truth)
            .unwrap()
            .contains("apac is in the hub's summary but not in the fleet"));
    }

    #[tokio::test]
    async fn converge_retries_until_the_hub_agrees_and_reports_the_last_mismatch() {
        let mut left = 2;
        let outcome = converge(Duration::from_secs(10), || {
            left -= 1;
            let answer = if left > 0 {
                Some("not yet".to_owned())
            } else {
                None
            };
            async move { Ok(answer) }
        })
        .await;
        assert!(outcome.passed);
        assert_eq!(outcome.attempts, 2);

        let outcome = converge(Duration::from_millis(0), || async {
            Ok(Some("never".to_owned()))
        })
        .await;
        assert!(!outcome.passed);
        assert_eq!(outcome.mismatch.as_deref(), Some("never"));
    }

    #[test]
    fn rollout_answers_agree_only_with_the_simulators_figures() {
        let rollout = |failed_first: u64, rolled_back: bool| {
            json!({"id": "app-001@1@1.2.0", "version": "1.2.0", "targeted": 100, "in_sync": 90,
                "failed": 6, "stale": 4, "failed_before_reaching": failed_first,
                "targeted_at_start": 100, "joined": 0,
                "rolled_back_by": if rolled_back { json!(2) } else { Value::Null }})
        };
        let page = json!({"items": [rollout(6, false)]});
        // Two rollouts of the day: this one (6 of 100 failed first: over 5 %) and one rolled back.
        let listed = json!({"items": [rollout(6, false), rollout(0, true)]});
        let delivery = |changes: u64, failed: u64| {
            json!({"from": "2026-11-27T00:00:00Z",
                "apps": [{"app": "app-001", "changes": changes, "failed_changes": failed}]})
        };
        let check = |version: &str, truth: [u64; 4], failed_first: u64, delivery: &Value| {
            rollout_answers_mismatch(
                "app-001",
                version,
                truth,
                failed_first,
                &page,
                delivery,
                &listed,
            )
        };
        assert_eq!(check("1.2.0", [100, 90, 6, 4], 6, &delivery(2, 2)), None);
        let wrong_state = check("1.2.0", [100, 91, 5, 4], 6, &delivery(2, 2)).unwrap();
        assert!(
            wrong_state.contains("[100, 90, 6, 4, 6]")
                && wrong_state.contains("[100, 91, 5, 4, 6]"),
            "{wrong_state}"
        );
        assert!(check("1.2.0", [100, 90, 6, 4], 5, &delivery(2, 2)).is_some());
        assert!(check("1.3.0", [100, 90, 6, 4], 6, &delivery(2, 2))
            .unwrap()
            .contains("not 1.3.0"));
        let delivered = check("1.2.0", [100, 90, 6, 4], 6, &delivery(2, 1)).unwrap();
        assert!(
            delivered.contains("[2, 1]") && delivered.contains("[2, 2]"),
            "{delivered}"
        );
        assert!(check("1.2.0", [100, 90, 6, 4], 6, &delivery(3, 2)).is_some());
        let empty = rollout_answers_mismatch(
            "app-001",
            "1.2.0",
            [0; 4],
            0,
            &json!({"items": []}),
            &delivery(0, 0),
            &json!({"items": []}),
        );
        assert_eq!(empty.as_deref(), Some("rollouts: none of app-001"));
    }
}
