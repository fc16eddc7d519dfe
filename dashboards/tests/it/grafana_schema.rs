//! Every dashboard validates against Grafana's own dashboard JSON Schema (generated from
//! `@grafana/schema` 13.2.3), with the `jsonschema` package; a document with an unknown key or
//! a wrong type is refused, so the validation is real.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const SCHEMA_VERSION: &str = "13.2.3";
const HINT: &str = "run scripts/install-prereqs --tests (it generates Grafana's dashboard schema \
from @grafana/schema and installs jsonschema into the test Python)";

fn schema_path() -> PathBuf {
    let dir = std::env::var_os("FLEETSCOPE_GRAFANA_SCHEMA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| {
                panic!("neither FLEETSCOPE_GRAFANA_SCHEMA_DIR nor HOME is set; {HINT}")
            });
            PathBuf::from(home).join(".cache/fleetscope/grafana-schema")
        });
    dir.join(format!("dashboard-{SCHEMA_VERSION}.schema.json"))
}

/// Validation errors per document, in order.
fn validate(documents: &[(&str, &Value)]) -> Vec<Vec<String>> {
    let schema = schema_path();
    assert!(
        schema.is_file(),
        "Grafana's dashboard schema {} is missing; {HINT}",
        schema.display()
    );
    let python = fleetscope_testkit::chdb::python();
    assert!(
        python.is_file(),
        "the test Python {} is missing; {HINT}",
        python.display()
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/validate_schema.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("could not run {}: {err}; {HINT}", python.display()));
    let request = json!({
        "schema": schema,
        "documents": documents.iter().map(|(name, document)| json!({"name": name, "document": document})).collect::<Vec<_>>(),
    });
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(request.to_string().as_bytes())
        .expect("send the dashboards to the validator");
    let output = child.wait_with_output().expect("the validator finishes");
    assert!(
        output.status.success(),
        "the schema validator failed ({}): {}; {HINT}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_slice(&output.stdout).expect("the validator writes JSON");
    assert!(
        answer["validator"]
            .as_str()
            .is_some_and(|v| v.starts_with("Draft")),
        "a JSON Schema draft validator was used: {answer}"
    );
    answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            r["errors"]
                .as_array()
                .expect("errors")
                .iter()
                .map(|e| e.as_str().expect("text").to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn every_dashboard_validates_against_grafanas_schema() {
    let dashboards = fleetscope_dashboards::all();
    let documents: Vec<(&str, &Value)> = dashboards
        .iter()
        .map(|d| (d.file_name.as_str(), &d.json))
        .collect();
    let results = validate(&documents);
    let failures: Vec<String> = documents
        .iter()
        .zip(&results)
        .filter(|(_, errors)| !errors.is_empty())
        .map(|((name, _), errors)| format!("{name}:\n  {}", errors.join("\n  ")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_schema_refuses_unknown_keys_and_wrong_types() {
    let dashboard = fleetscope_dashboards::boards::fleet_overview().json;
    let mut unknown_key = dashboard.clone();
    unknown_key["colour"] = json!("blue");
    let mut unknown_panel_key = dashboard.clone();
    unknown_panel_key["panels"][1]["gridPosition"] = json!({"x": 0});
    let mut wrong_type = dashboard.clone();
    wrong_type["refresh"] = json!(300);
    let mut wrong_grid = dashboard.clone();
    wrong_grid["panels"][1]["gridPos"]["w"] = json!("wide");
    let mut wrong_variable = dashboard.clone();
    wrong_variable["templating"]["list"][1]["type"] = json!("dropdown");
    let mut no_schema_version = dashboard.clone();
    no_schema_version
        .as_object_mut()
        .expect("an object")
        .remove("schemaVersion");
    let cases = [
        ("unknown top-level key", &unknown_key, "colour"),
        ("unknown panel key", &unknown_panel_key, "gridPosition"),
        ("refresh as a number", &wrong_type, "300"),
        ("panel width as text", &wrong_grid, "wide"),
        ("unknown variable type", &wrong_variable, "dropdown"),
        ("no schema version", &no_schema_version, "schemaVersion"),
    ];
    let mut documents: Vec<(&str, &Value)> = vec![("unchanged", &dashboard)];
    documents.extend(cases.iter().map(|(name, document, _)| (*name, *document)));
    let results = validate(&documents);
    assert_eq!(
        results[0],
        Vec::<String>::new(),
        "the unchanged dashboard is valid"
    );
    for ((name, _, mentioned), errors) in cases.iter().zip(&results[1..]) {
        assert!(
            !errors.is_empty(),
            "{name}: accepted, so the validation proves nothing"
        );
        assert!(
            errors.iter().any(|e| e.contains(mentioned)),
            "{name}: refused, but no error mentions {mentioned:?}: {errors:?}"
        );
    }
}

/// Runs the validation test again in a child process with `variable` set to `value`.
fn validation_with(variable: &str, value: &std::path::Path) -> (bool, String) {
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "grafana_schema::every_dashboard_validates_against_grafanas_schema",
            "--nocapture",
        ])
        .env(variable, value)
        .output()
        .expect("run this test binary again");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn a_missing_schema_or_python_names_the_install_script() {
    let nowhere = std::env::temp_dir().join("fleetscope-nothing-here");
    for variable in [
        "FLEETSCOPE_GRAFANA_SCHEMA_DIR",
        fleetscope_testkit::chdb::PYTHON_ENV,
    ] {
        let (passed, text) = validation_with(variable, &nowhere);
        assert!(!passed, "passed with {variable} pointing nowhere: {text}");
        assert!(
            text.contains("scripts/install-prereqs --tests"),
            "with {variable} pointing nowhere, the failure does not say what to run: {text}"
        );
    }
}
