//! The provisioning files create the data sources the dashboards select first, with the
//! ClickHouse plugin and Fleetscope's database, and load the dashboards from a folder.

use fleetscope_dashboards::grafana::{
    CLICKHOUSE_NAME, CLICKHOUSE_PLUGIN, CLICKHOUSE_UID, PROMETHEUS_NAME, PROMETHEUS_PLUGIN,
    PROMETHEUS_UID,
};
use serde_json::Value;

fn load(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("provisioning")
        .join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn the_data_sources_are_the_ones_the_dashboards_select() {
    let file = load("datasources.yaml");
    assert_eq!(file["apiVersion"], 1);
    let sources = file["datasources"]
        .as_array()
        .expect("a list of data sources");
    let clickhouse = sources
        .iter()
        .find(|s| s["uid"] == CLICKHOUSE_UID)
        .expect("the ClickHouse data source");
    assert_eq!(clickhouse["type"], CLICKHOUSE_PLUGIN);
    assert_eq!(clickhouse["name"], CLICKHOUSE_NAME);
    let settings = &clickhouse["jsonData"];
    assert_eq!(
        settings["defaultDatabase"], "fleetscope",
        "the panels name tables without a database"
    );
    assert!(["http", "native"].contains(&settings["protocol"].as_str().expect("a protocol")));
    assert!(settings["host"].is_string() && settings["port"].is_number());
    assert!(
        clickhouse["secureJsonData"]["password"]
            .as_str()
            .is_some_and(|p| p.starts_with("${")),
        "the password comes from the environment, never from the file"
    );

    let prometheus = sources
        .iter()
        .find(|s| s["uid"] == PROMETHEUS_UID)
        .expect("the Prometheus data source");
    assert_eq!(prometheus["type"], PROMETHEUS_PLUGIN);
    assert_eq!(prometheus["name"], PROMETHEUS_NAME);
    assert!(prometheus["url"].is_string());

    for dashboard in fleetscope_dashboards::all() {
        for variable in dashboard.json["templating"]["list"]
            .as_array()
            .expect("variables")
        {
            if variable["type"] == "datasource" {
                let provisioned = sources
                    .iter()
                    .find(|s| s["uid"] == variable["current"]["value"])
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: {} selects no provisioned source",
                            dashboard.file_name, variable["name"]
                        )
                    });
                assert_eq!(provisioned["type"], variable["query"]);
                assert_eq!(provisioned["name"], variable["current"]["text"]);
            }
        }
    }
}

#[test]
fn the_dashboards_load_from_a_folder() {
    let file = load("dashboards.yaml");
    assert_eq!(file["apiVersion"], 1);
    let providers = file["providers"].as_array().expect("a list of providers");
    assert_eq!(providers.len(), 1);
    let provider = &providers[0];
    assert_eq!(provider["type"], "file");
    assert!(provider["folder"].as_str().is_some_and(|f| !f.is_empty()));
    assert!(provider["options"]["path"]
        .as_str()
        .is_some_and(|p| p.starts_with('/')));
    assert_eq!(
        provider["allowUiUpdates"], false,
        "the generated files are the source of truth"
    );
}
