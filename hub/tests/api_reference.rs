//! `docs/api.md` is generated from the hub's OpenAPI document; these tests fail when the
//! committed file is not what the current document gives. `UPDATE_DOCS=1` rewrites it.

use std::collections::BTreeSet;

use fleetscope_hub::api_reference::{markdown, REFRESH_COMMAND};
use fleetscope_hub::openapi;
use serde_json::Value;

const API_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md");
const OPENAPI_JSON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");

fn generated() -> String {
    markdown(&openapi::document()).expect("the hub's OpenAPI document makes a reference")
}

#[test]
fn the_committed_api_reference_is_current() {
    let generated = generated();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(API_MD, &generated).expect("docs/api.md is writable");
        return;
    }
    let committed = std::fs::read_to_string(API_MD).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "docs/api.md is out of date (first difference at line {}); refresh it with `{REFRESH_COMMAND}`\n  committed: {:?}\n  generated: {:?}",
            line + 1,
            committed.lines().nth(line).unwrap_or("(end of file)"),
            generated.lines().nth(line).unwrap_or("(end of file)"),
        );
    }
}

#[test]
fn the_committed_openapi_json_gives_the_same_reference() {
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(OPENAPI_JSON).expect("docs/openapi.json is committed"),
    )
    .expect("docs/openapi.json is JSON");
    assert!(
        markdown(&committed).expect("docs/openapi.json makes a reference") == generated(),
        "docs/openapi.json is out of date: regenerate it with `UPDATE_EXPECT=1 cargo test -p fleetscope-hub --lib openapi`"
    );
}

#[test]
fn every_operation_and_parameter_of_the_document_is_in_the_reference() {
    let document = openapi::document();
    let reference = generated();
    let mut operations = BTreeSet::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let heading = format!("### {} `{path}`", method.to_ascii_uppercase());
            assert!(reference.contains(&heading), "{heading} is missing");
            let section = reference
                .split(&heading)
                .nth(1)
                .unwrap()
                .split("\n### ")
                .next()
                .unwrap();
            for parameter in operation["parameters"].as_array().unwrap() {
                let name = format!("| `{}` |", parameter["name"].as_str().unwrap());
                assert!(
                    section.contains(&name),
                    "{heading}: parameter {name} is missing"
                );
            }
            for status in operation["responses"].as_object().unwrap().keys() {
                assert!(
                    section.contains(&format!("\n| {status} |")),
                    "{heading}: response {status} is missing"
                );
            }
            assert!(section.contains("curl -sS"), "{heading}: no example");
            operations.insert((path.clone(), method.clone()));
        }
    }
    assert_eq!(operations.len(), openapi::ROUTES.len());
}
