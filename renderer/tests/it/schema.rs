//! The platform repo's JSON Schema is generated from the Rust types and committed; this test
//! fails when the two drift apart (run with UPDATE_EXPECT=1 to regenerate, then review).

use expect_test::expect_file;
use fleetscope_renderer::platform::Document;

#[test]
fn committed_schema_matches_the_types() {
    let schema = schemars::schema_for!(Document);
    let text = serde_json::to_string_pretty(&schema).expect("schemas serialize") + "\n";
    expect_file!["../../../docs/platform-repo.schema.json"].assert_eq(&text);
}

#[test]
fn the_example_parses_into_the_types_the_schema_describes() {
    // Not a JSON Schema validation: the documents parse into the types the schema is made from.
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/platform");
    let docs = fleetscope_renderer::platform::load(&root).expect("the example is valid");
    assert!(docs.documents.len() > 10);
}
