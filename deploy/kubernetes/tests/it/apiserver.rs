//! The monitoring objects against a real API server serving the vendored prometheus-operator
//! CRDs, with strict field validation and a server-side dry run: the server must accept every
//! ServiceMonitor and PrometheusRule of every build, and must agree with this crate's
//! validator on objects broken in the ways the validator is meant to catch.

use crate::common;

use common::{build, find, validator, CENTRAL};
use fleetscope_deploy_kubernetes::{describe, manifests_dir};
use fleetscope_local_apiserver::LocalApiServer;
use serde_json::{json, Value};

fn collection(object: &Value) -> String {
    let plural = match object["kind"].as_str().unwrap() {
        "ServiceMonitor" => "servicemonitors",
        "PrometheusRule" => "prometheusrules",
        other => panic!("no CRD for {other}"),
    };
    format!(
        "/apis/{}/namespaces/{}/{plural}?dryRun=All&fieldValidation=Strict",
        object["apiVersion"].as_str().unwrap(),
        object["metadata"]["namespace"].as_str().unwrap()
    )
}

#[test]
fn the_api_server_accepts_the_monitoring_objects_and_agrees_on_broken_ones() {
    let server = LocalApiServer::start(Some(&manifests_dir().join("testdata/crds")))
        .unwrap_or_else(|err| panic!("could not start the private API server: {err}"));

    let mut sent = 0;
    for name in CENTRAL {
        for object in &build(name).objects {
            if !matches!(
                object["kind"].as_str(),
                Some("ServiceMonitor" | "PrometheusRule")
            ) {
                continue;
            }
            if let Err(err) = server.post_json(&collection(object), object) {
                panic!("{name}: the API server refuses {}: {err}", describe(object));
            }
            sent += 1;
        }
    }
    assert_eq!(
        sent,
        3 * 3,
        "two ServiceMonitors and a PrometheusRule per build"
    );

    let objects = &build("base").objects;
    let monitor = find(objects, "ServiceMonitor", "fleetscope-hub").clone();
    let rule = find(objects, "PrometheusRule", "fleetscope").clone();
    let mut cases: Vec<(&str, Value)> = Vec::new();
    let mut unknown = monitor.clone();
    unknown["spec"]["endpoints"][0]["bearerTokenSecrett"] = json!({"name": "x", "key": "y"});
    cases.push(("an unknown field", unknown));
    let mut unknown_top = rule.clone();
    unknown_top["spec"]["group"] = json!([]);
    cases.push(("an unknown field of spec", unknown_top));
    let mut missing = rule.clone();
    missing["spec"]["groups"][0]["rules"][0]
        .as_object_mut()
        .unwrap()
        .remove("expr");
    cases.push(("a missing required field", missing));
    let mut missing_selector = monitor.clone();
    missing_selector["spec"]
        .as_object_mut()
        .unwrap()
        .remove("selector");
    cases.push(("a missing selector", missing_selector));
    let mut pattern = monitor.clone();
    pattern["spec"]["endpoints"][0]["interval"] = json!("30 seconds");
    cases.push(("a duration that does not match its pattern", pattern));
    let mut wrong_type = monitor.clone();
    wrong_type["spec"]["endpoints"][0]["authorization"]["credentials"]["name"] = json!(7);
    cases.push(("a number for a string", wrong_type));
    let mut bad_enum = monitor.clone();
    bad_enum["spec"]["endpoints"][0]["scheme"] = json!("gopher");
    cases.push(("a value outside its enum", bad_enum));
    let mut fine = monitor.clone();
    fine["spec"]["endpoints"][0]["scheme"] = json!("http");
    fine["spec"]["endpoints"][0]["honorLabels"] = json!(true);
    cases.push(("optional fields set correctly", fine));

    for (what, object) in cases {
        let server_accepts = server.post_json(&collection(&object), &object);
        let ours = validator().validate(&object);
        let valid = what == "optional fields set correctly";
        assert_eq!(
            server_accepts.is_ok(),
            valid,
            "{what}: the API server says {server_accepts:?}"
        );
        assert_eq!(
            ours.is_ok(),
            server_accepts.is_ok(),
            "{what}: the validator says {ours:?}, the API server {server_accepts:?}"
        );
    }
    server.stop();
}
