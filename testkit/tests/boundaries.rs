//! The workspace's dependency rules (ARCHITECTURE.md, "Boundaries"), checked on what cargo
//! reads from the manifests. Dependencies point one way: services above the model and the
//! store, test support beside them, the tools (demo, load test) on top; an edge the wrong way
//! usually arrives as one innocent line in a `Cargo.toml`, so every failure names the crate and
//! the dependency.
//!
//! The rules forbid specific edges and say nothing of crates they do not name, so a new crate
//! is held only to the rules that speak of everyone (who may depend on the tools, the local
//! servers, `clickhouse`, `kube` and `git2`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The binary's release build leaves these out (its `dev-tools` feature brings them).
const TOOLS: &[&str] = &["fleetscope-demo", "fleetscope-loadtest"];
/// Private servers for tests and the tools: never part of a service.
const LOCAL_SERVERS: &[&str] = &[
    "fleetscope-local-process",
    "fleetscope-local-clickhouse",
    "fleetscope-local-apiserver",
];
/// What tests build on; like the local servers, no part of a service.
const TEST_SUPPORT: &[&str] = &["fleetscope-testkit", "fleetscope-fixtures"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Normal,
    Dev,
    Build,
}

/// One dependency a workspace crate declares (optional ones included).
#[derive(Debug)]
struct Edge {
    from: String,
    to: String,
    kind: Kind,
}

impl Edge {
    fn describe(&self) -> String {
        let kind = match self.kind {
            Kind::Normal => "",
            Kind::Dev => " (dev)",
            Kind::Build => " (build)",
        };
        format!("{} depends on {}{kind}", self.from, self.to)
    }
}

#[derive(Debug)]
struct Workspace {
    members: BTreeSet<String>,
    edges: Vec<Edge>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit sits in the workspace root")
        .to_path_buf()
}

fn cargo(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO"))
        .args(args)
        .arg("--locked")
        .current_dir(repo_root())
        .output()
        .expect("run cargo");
    assert!(
        output.status.success(),
        "cargo {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("cargo prints UTF-8")
}

/// Every workspace crate and every dependency it declares, as `cargo metadata` reads them.
fn workspace() -> &'static Workspace {
    static WORKSPACE: OnceLock<Workspace> = OnceLock::new();
    WORKSPACE.get_or_init(|| {
        let metadata: Value =
            serde_json::from_str(&cargo(&["metadata", "--format-version", "1", "--no-deps"]))
                .expect("cargo metadata prints JSON");
        let packages = metadata["packages"].as_array().expect("packages");
        let members = packages
            .iter()
            .map(|p| p["name"].as_str().expect("a name").to_owned())
            .collect();
        let edges = packages
            .iter()
            .flat_map(|p| {
                let from = p["name"].as_str().expect("a name");
                p["dependencies"]
                    .as_array()
                    .expect("dependencies")
                    .iter()
                    .map(move |d| Edge {
                        from: from.to_owned(),
                        to: d["name"].as_str().expect("a name").to_owned(),
                        kind: match d["kind"].as_str() {
                            None => Kind::Normal,
                            Some("dev") => Kind::Dev,
                            Some("build") => Kind::Build,
                            Some(other) => panic!("unknown dependency kind {other}"),
                        },
                    })
            })
            .collect();
        Workspace { members, edges }
    })
}

/// Fails with every edge `forbidden` says yes to, one a line.
fn check(rule: &str, forbidden: impl Fn(&Edge) -> bool) {
    let workspace = workspace();
    for named in ["fleetscope-model", "fleetscope-store", "fleetscope"] {
        assert!(
            workspace.members.contains(named),
            "cargo metadata lists no {named}"
        );
    }
    let broken: Vec<String> = workspace
        .edges
        .iter()
        .filter(|e| forbidden(e))
        .map(Edge::describe)
        .collect();
    assert!(broken.is_empty(), "{rule}, but:\n{}", broken.join("\n"));
}

fn is_member(name: &str) -> bool {
    workspace().members.contains(name)
}

#[test]
fn the_model_depends_on_no_workspace_crate() {
    check("the model depends on no workspace crate", |e| {
        e.from == "fleetscope-model" && is_member(&e.to)
    });
}

#[test]
fn the_fixtures_depend_on_the_model_and_the_store_only() {
    check(
        "of the workspace, the fixtures depend on the model and the store only",
        |e| {
            e.from == "fleetscope-fixtures"
                && is_member(&e.to)
                && !["fleetscope-model", "fleetscope-store"].contains(&e.to.as_str())
        },
    );
}

#[test]
fn only_the_binary_and_the_demo_depend_on_the_tools() {
    check(
        "only the binary depends on the demo, only the binary and the demo on the load test, and nothing on the Kubernetes manifests' tests",
        |e| match e.to.as_str() {
            "fleetscope-demo" => e.from != "fleetscope",
            "fleetscope-loadtest" => !["fleetscope", "fleetscope-demo"].contains(&e.from.as_str()),
            "fleetscope-deploy-kubernetes" => true,
            _ => false,
        },
    );
}

#[test]
fn the_local_servers_are_dev_dependencies_of_everything_but_test_support_and_tools() {
    check(
        "only the testkit, the tools and the local servers themselves depend on a local server other than as a dev-dependency",
        |e| {
            LOCAL_SERVERS.contains(&e.to.as_str())
                && e.kind != Kind::Dev
                && !(e.from == "fleetscope-testkit"
                    || TOOLS.contains(&e.from.as_str())
                    || LOCAL_SERVERS.contains(&e.from.as_str()))
        },
    );
}

#[test]
fn only_the_store_and_the_testkit_link_the_clickhouse_client() {
    check(
        "only the store (and the testkit, which reads test servers directly) depend on clickhouse other than as a dev-dependency",
        |e| {
            e.to == "clickhouse"
                && e.kind != Kind::Dev
                && !["fleetscope-store", "fleetscope-testkit"].contains(&e.from.as_str())
        },
    );
}

#[test]
fn only_the_collector_knows_kube_rs() {
    check("only the collector depends on kube", |e| {
        (e.to == "kube" || e.to.starts_with("kube-")) && e.from != "fleetscope-collector"
    });
}

#[test]
fn only_the_renderer_knows_git2() {
    check("only the renderer depends on git2", |e| {
        e.to == "git2" && e.from != "fleetscope-renderer"
    });
}

#[test]
fn the_services_do_not_depend_on_each_other() {
    const SERVICES: &[&str] = &[
        "fleetscope-collector",
        "fleetscope-renderer",
        "fleetscope-hub",
        "fleetscope-engine",
    ];
    check(
        "the collector, the renderer and the hub (with its engine) do not depend on each other other than as a dev-dependency, but for the hub on its engine",
        |e| {
            SERVICES.contains(&e.from.as_str())
                && SERVICES.contains(&e.to.as_str())
                && e.kind != Kind::Dev
                && !(e.from == "fleetscope-hub" && e.to == "fleetscope-engine")
        },
    );
}

#[test]
fn the_runtime_sits_below_the_services_and_above_the_model() {
    check(
        "of the workspace, the runtime depends on the model and on serve only, and never on the store or the clickhouse client",
        |e| {
            e.from == "fleetscope-runtime"
                && ((is_member(&e.to)
                    && !["fleetscope-model", "fleetscope-serve"].contains(&e.to.as_str()))
                    || e.to == "clickhouse")
        },
    );
}

#[test]
fn the_command_line_client_knows_the_hub_by_its_json_only() {
    check(
        "the command-line client depends on no workspace crate and on no clickhouse client other than for tests",
        |e| {
            e.from == "fleetscope-cli"
                && (is_member(&e.to) || e.to == "clickhouse")
                && e.kind != Kind::Dev
        },
    );
}

#[test]
fn nothing_links_the_api_reference_generator() {
    check(
        "no crate depends on the API reference generator, a development tool",
        |e| e.to == "fleetscope-api-reference",
    );
}

#[test]
fn only_the_hub_makes_the_openapi_document() {
    check("only the hub depends on utoipa", |e| {
        e.to.starts_with("utoipa") && e.from != "fleetscope-hub" && e.kind != Kind::Dev
    });
}

/// The packages of `cargo tree -p <package> -e normal` with these extra arguments.
fn normal_tree(package: &str, features: &[&str]) -> BTreeSet<String> {
    let mut args = vec!["tree", "-p", package, "-e", "normal"];
    args.extend(["--prefix", "none", "--format", "{p}"]);
    args.extend(features);
    cargo(&args)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_release_binary_links_no_tool_local_server_or_test_support() {
    let release = normal_tree("fleetscope", &["--no-default-features"]);
    assert!(
        release.contains("fleetscope-hub") && release.contains("fleetscope-collector"),
        "cargo tree lists no services: {release:?}"
    );
    let linked: Vec<&str> = TOOLS
        .iter()
        .chain(LOCAL_SERVERS)
        .chain(TEST_SUPPORT)
        .copied()
        .filter(|name| release.contains(*name))
        .collect();
    assert!(
        linked.is_empty(),
        "fleetscope without default features links {linked:?}"
    );
    // And the feature is what keeps them out: with it, the tools are there.
    let with_tools = normal_tree("fleetscope", &[]);
    for tool in TOOLS {
        assert!(
            with_tools.contains(*tool),
            "fleetscope with default features does not link {tool}"
        );
    }
}

#[test]
fn the_hub_stands_on_no_test_support_tool_or_other_service() {
    check(
        "the hub and its engine depend on no test support, local server, tool or other service, not even for tests (their integration tests and benchmarks are fleetscope-hub-tests)",
        |e| {
            ["fleetscope-hub", "fleetscope-engine"].contains(&e.from.as_str())
                && (TEST_SUPPORT.contains(&e.to.as_str())
                    || LOCAL_SERVERS.contains(&e.to.as_str())
                    || TOOLS.contains(&e.to.as_str())
                    || ["fleetscope-collector", "fleetscope-renderer"].contains(&e.to.as_str()))
        },
    );
}

/// The engine reads the store (whose ClickHouse client speaks HTTP) but serves nothing: no
/// HTTP server or router, no OpenAPI, no metrics exposition, no service runtime.
#[test]
fn the_engine_links_nothing_that_serves_http() {
    let engine = normal_tree("fleetscope-engine", &[]);
    assert!(
        engine.contains("fleetscope-store"),
        "cargo tree lists no store under the engine: {engine:?}"
    );
    let http: Vec<&String> = engine
        .iter()
        .filter(|name| {
            [
                "axum",
                "tower-http",
                "utoipa",
                "prometheus-client",
                "fleetscope-serve",
                "fleetscope-runtime",
            ]
            .iter()
            .any(|http| name.as_str() == *http || name.starts_with(&format!("{http}-")))
        })
        .collect();
    assert!(http.is_empty(), "the engine links {http:?}");
}

#[path = "boundaries/modules.rs"]
mod modules;

/// Every dependency names at least the version whose breaking changes it was written for: no
/// `*`, and no bare `0` (which takes any 0.x release, each of which may break the API).
#[test]
fn no_dependency_accepts_any_breaking_release() {
    let metadata: Value =
        serde_json::from_str(&cargo(&["metadata", "--format-version", "1", "--no-deps"]))
            .expect("cargo metadata prints JSON");
    let mut loose = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let name = dep["name"].as_str().unwrap_or_default();
            if is_member(name) {
                continue;
            }
            let req = dep["req"].as_str().unwrap_or_default();
            let bare = req.trim_start_matches(['^', '=', '~']);
            if req == "*" || bare == "0" || bare == "0.*" {
                loose.push(format!(
                    "{} depends on {name} {req}",
                    package["name"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    assert!(
        loose.is_empty(),
        "name a minor version:\n{}",
        loose.join("\n")
    );
}
