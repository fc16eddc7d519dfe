//! One example answer per route, as the OpenAPI document shows them.

use serde_json::json;

use crate::answers::{ByState, GroupCounts};

/// One example answer per route, as the document shows them (validated against the schemas by
/// `hub-tests/tests/it/openapi_schemas.rs`, so an example cannot drift from what the hub sends). Names
/// are those of the example platform repo.
pub(crate) fn examples() -> Vec<(&'static str, serde_json::Value)> {
    let mut examples = fleet_examples();
    examples.extend(question_examples());
    examples.extend(rollout_examples());
    examples
}

/// The examples of the routes that count and list the fleet: summary, drift, a cluster's
/// page, versions and stale clusters.
fn fleet_examples() -> Vec<(&'static str, serde_json::Value)> {
    let pair = json!({
        "cluster": "berlin-01", "group": "emea/de/berlin", "environment": "prod",
        "app": "checkout", "state": "failed", "since": "2026-11-22T09:41:07Z",
        "desired_version": "1.5.0", "desired_content_hash": "9f2c41d0a7e3",
        "desired_since": "2026-11-22T09:30:00Z", "observed_version": "1.5.0",
        "observed_content_hash": "9f2c41d0a7e3", "revision": "main@sha1:4b1f0c2",
        "health": "degraded", "sync": "unknown", "reason": "HealthCheckFailed",
        "message": "Deployment/checkout: 0 of 3 replicas ready",
        "last_seen": "2026-11-22T10:00:03Z",
    });
    let counts = |clusters: u64, stale: u64, by: [u64; 8]| {
        let mut value = serde_json::to_value(GroupCounts {
            group: None,
            depth: None,
            clusters,
            reporting_clusters: clusters - stale,
            stale_clusters: stale,
            app_instances: by.iter().sum(),
            app_instances_by_state: ByState::from(by),
        })
        .expect("counts serialize");
        value
            .as_object_mut()
            .expect("an object")
            .retain(|_, v| !v.is_null());
        value
    };
    let mut emea = counts(120, 2, [0, 8, 1, 2, 3, 4, 10, 692]);
    emea["group"] = json!("emea");
    emea["depth"] = json!(1);
    vec![
        (
            "/api/v1/summary",
            json!({
                "generated_at": "2026-11-22T10:00:05Z", "scope": null,
                "policy": { "stale_after_seconds": 600, "progress_grace_seconds": 900 },
                "total": counts(300, 5, [0, 20, 2, 4, 6, 9, 25, 1734]),
                "groups": [emea],
            }),
        ),
        (
            "/api/v1/drift",
            json!({ "items": [pair.clone()], "next_cursor": "6265726c696e2d30312f636865636b6f7574" }),
        ),
        (
            "/api/v1/clusters/{id}",
            json!({
                "cluster": "berlin-01", "group": "emea/de/berlin", "environment": "prod",
                "reconciler": "flux", "labels": { "tier": "edge", "hw": "gen2" },
                "render_group": "rg-3f9a", "last_seen": "2026-11-22T10:00:03Z", "stale": false,
                "agent_version": "0.1.0", "apps": [pair.clone()],
                "history": [{
                    "at": "2026-11-22T09:41:07Z", "kind": "Kustomization", "namespace": "flux-system",
                    "name": "checkout", "app": "checkout", "version": "1.5.0",
                    "revision": "main@sha1:4b1f0c2", "health": "degraded", "sync": "unknown",
                    "reason": "HealthCheckFailed", "message": "Deployment/checkout: 0 of 3 replicas ready",
                    "deleted": false,
                }],
            }),
        ),
        (
            "/api/v1/apps/{app}/versions",
            json!({
                "app": "checkout",
                "desired": [{ "version": "1.5.0", "clusters": 300, "groups": { "amer": 100, "apac": 80, "emea": 120 } }],
                "running": [
                    { "version": "1.4.2", "clusters": 21, "groups": { "emea": 21 } },
                    { "version": "1.5.0", "clusters": 277, "groups": { "amer": 100, "apac": 78, "emea": 99 } },
                ],
                "clusters": [], "next_cursor": null,
            }),
        ),
        (
            "/api/v1/stale",
            json!({
                "total": 1,
                "items": [{ "cluster": "hamburg-07", "group": "emea/de/hamburg", "environment": "prod",
                            "last_seen": "2026-11-22T08:12:40Z", "silent_seconds": 6445 }],
                "next_cursor": null,
            }),
        ),
    ]
}

/// The examples of the routes that answer a question about some clusters: explain,
/// environments, the gate, failure insights and history.
fn question_examples() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        (
            "/api/v1/explain",
            json!({
                "cluster": "berlin-01", "group": "emea/de/berlin", "render_group": "rg-3f9a",
                "apps": [
                    { "app": "checkout", "desired": true, "version": "1.5.0",
                      "reasons": ["policy/emea-prod"], "pinned_by": "emea-canary",
                      "render_group": "rg-3f9a", "commit": "4b1f0c2e9d", "render_id": 42,
                      "desired_since": "2026-11-22T09:30:00Z", "state": "failed" },
                    { "app": "debug-tools", "desired": false,
                      "explanation": "runs on the cluster, but no policy of render group rg-3f9a selects it",
                      "state": "unexpected" },
                ],
            }),
        ),
        (
            "/api/v1/environments",
            json!({ "apps": [{ "app": "checkout", "environments": [
                { "environment": "prod", "desired": { "1.5.0": 250 }, "running": { "1.4.2": 21, "1.5.0": 227 } },
                { "environment": "staging", "desired": { "1.5.0": 50 }, "running": { "1.5.0": 50 } },
            ] }] }),
        ),
        (
            "/api/v1/gate",
            json!({
                "app": "checkout", "version": "1.5.0", "commit": null, "group": "emea",
                "targeted_clusters": 120, "in_sync": 99,
                "by_state": { "failed": 3, "in_sync": 99, "progressing": 16, "stale": 2 },
                "share_in_sync": 0.825, "threshold": 0.95, "verdict": "fail",
                "reason": "more targeted clusters are failed than max_failed allows",
                "rule": "max_failed", "soak_seconds": 7200, "soaked": 97, "share_soaked": 0.8083,
                "failed": 3, "max_failed": "2%", "failed_allowed": 2,
                "stale": "count", "stale_clusters": 2,
                "holding_back": [
                    { "cluster": "berlin-01", "group": "emea/de/berlin", "state": "failed",
                      "since": "2026-11-22T09:41:07Z", "soaks_at": null },
                    { "cluster": "berlin-02", "group": "emea/de/berlin", "state": "in_sync",
                      "since": "2026-11-22T09:12:30Z", "soaks_at": "2026-11-22T11:12:30Z" },
                ],
                "next_cursor": "6265726c696e2d3032",
            }),
        ),
        (
            "/api/v1/insights/failures",
            json!({
                "app": "checkout", "version": "1.5.0", "group": null,
                "failing": 412, "in_sync": 9_318, "considered": 9_730, "other_states": 270,
                "tests": 118, "significance_level": 0.05,
                "findings": [{
                    "attribute": "label", "value": "hw=gen2",
                    "failing_with": 405, "in_sync_with": 8, "failing_without": 7, "in_sync_without": 9_310,
                    "failure_rate_with": 0.980_629_539_951_573_8, "failure_rate_without": 0.000_751_314_800_901_577_7,
                    "lift": 23.159_042_290_603_917, "p_value": 0.0, "log10_p_value": -698.780_089_970_664_9,
                    "p_adjusted": 0.0, "significant": true,
                }],
                "headline": "of 412 clusters failing checkout 1.5.0, 405 have hw=gen2; 2 % of the clusters with hw=gen2 are in sync against 99.9 % of the others",
            }),
        ),
        (
            "/api/v1/history",
            json!({
                "cluster": "berlin-01", "render_group": "rg-3f9a",
                "from": "2026-11-21T10:00:05Z", "to": "2026-11-22T10:00:06Z",
                "events": [
                    { "type": "observed", "at": "2026-11-22T09:41:07Z", "app": "checkout",
                      "kind": "Kustomization", "name": "checkout", "version": "1.5.0",
                      "revision": "main@sha1:4b1f0c2", "health": "degraded", "sync": "unknown",
                      "reason": "HealthCheckFailed", "message": "Deployment/checkout: 0 of 3 replicas ready",
                      "deleted": false },
                    { "type": "desired", "at": "2026-11-22T09:30:00Z", "app": "checkout",
                      "version": "1.5.0", "render_group": "rg-3f9a", "commit": "4b1f0c2e9d",
                      "render_id": 42, "reasons": ["policy/emea-prod"], "removed": false },
                ],
                "truncated": false,
            }),
        ),
    ]
}

/// The examples of the rollout routes: the list, one rollout, delivery figures.
fn rollout_examples() -> Vec<(&'static str, serde_json::Value)> {
    let rollout = json!({
        "id": "checkout@1795338000000@1.5.0", "app": "checkout", "version": "1.5.0",
        "render_id": 1_795_338_000_000_u64, "started_at": "2026-11-22T09:00:00Z",
        "platform_commit": "4b1f0c2e9d", "committed_at": "2026-11-22T08:52:10Z",
        "status": "in_progress",
        "from_versions": [{ "version": "1.4.2", "clusters": 118 }, { "version": null, "clusters": 2 }],
        "targeted_at_start": 120, "joined": 1, "rolled_back": 0, "superseded": 0, "removed": 0,
        "rolled_back_by": null, "superseded_by": null,
        "targeted": 121, "in_sync": 110, "failed": 3, "stale": 2, "reached": 111,
        "failed_before_reaching": 4,
        "seconds_to_50_percent": 420, "seconds_to_90_percent": 2_580,
        "seconds_to_99_percent": null, "seconds_to_100_percent": null,
        "last_reached_at": "2026-11-22T09:58:41Z",
    });
    let point = |seconds: u32, at: &str, in_sync: u32, failed: u32, waiting: u32| json!({ "at": at, "seconds": seconds, "in_sync": in_sync, "failed": failed, "waiting": waiting });
    vec![
        (
            "/api/v1/rollouts",
            json!({ "items": [rollout.clone()], "next_cursor": null }),
        ),
        (
            "/api/v1/rollouts/{rollout}",
            json!({
                "rollout": rollout,
                "step_seconds": 60,
                "curve": [
                    point(0, "2026-11-22T09:00:00Z", 0, 0, 121),
                    point(3_600, "2026-11-22T10:00:00Z", 111, 3, 7),
                ],
                "groups": [{
                    "group": "emea", "targeted": 121,
                    "curve": [
                        point(0, "2026-11-22T09:00:00Z", 0, 0, 121),
                        point(3_600, "2026-11-22T10:00:00Z", 111, 3, 7),
                    ],
                }],
                "stragglers": [{
                    "cluster": "berlin-01", "group": "emea/de/berlin", "environment": "prod",
                    "app": "checkout", "state": "failed", "since": "2026-11-22T09:41:07Z",
                    "desired_version": "1.5.0", "desired_content_hash": "9f2c41d0a7e3",
                    "desired_since": "2026-11-22T09:00:00Z", "observed_version": "1.5.0",
                    "observed_content_hash": "9f2c41d0a7e3", "revision": "main@sha1:4b1f0c2",
                    "health": "degraded", "sync": "unknown", "reason": "HealthCheckFailed",
                    "message": "Deployment/checkout: 0 of 3 replicas ready",
                    "last_seen": "2026-11-22T10:00:03Z",
                }],
                "next_cursor": null,
            }),
        ),
        (
            "/api/v1/delivery",
            json!({
                "from": "2026-10-23T10:00:00Z", "to": "2026-11-22T10:00:00Z",
                "failure_budget_percent": 5.0,
                "apps": [{
                    "app": "checkout", "deployments": 12, "deployments_per_day": 0.4,
                    "lead_time": { "count": 12, "median_seconds": 3_120, "p90_seconds": 9_840 },
                    "changes": 13, "failed_changes": 2, "change_failure_rate": 0.153_846_153_846_153_85,
                    "time_to_restore": { "count": 9, "median_seconds": 640, "p90_seconds": 2_200 },
                }],
            }),
        ),
    ]
}
