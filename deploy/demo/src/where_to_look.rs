//! What the demo prints once the pipeline runs: the endpoints, example requests, and ready-made
//! Prometheus and Grafana configuration pointing at this run (written into the work directory).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use fleetscope_loadtest::scenario::clock_time;
use fleetscope_model::Timestamp;

use crate::{EMEA_TOKEN, READ_TOKEN};

/// The generated dashboards (`dashboards/grafana/` in the source tree), file by file.
pub const DASHBOARDS: &[(&str, &str)] = &[
    (
        "app-versions.json",
        include_str!("../../../dashboards/grafana/app-versions.json"),
    ),
    (
        "cluster-detail.json",
        include_str!("../../../dashboards/grafana/cluster-detail.json"),
    ),
    (
        "deployment-history.json",
        include_str!("../../../dashboards/grafana/deployment-history.json"),
    ),
    (
        "environment-comparison.json",
        include_str!("../../../dashboards/grafana/environment-comparison.json"),
    ),
    (
        "fleet-overview.json",
        include_str!("../../../dashboards/grafana/fleet-overview.json"),
    ),
    (
        "fleetscope-health.json",
        include_str!("../../../dashboards/grafana/fleetscope-health.json"),
    ),
    (
        "rollouts-and-delivery.json",
        include_str!("../../../dashboards/grafana/rollouts-and-delivery.json"),
    ),
];

/// The alert and recording rules (`dashboards/prometheus/fleetscope-rules.yaml`).
pub const RULES: &str = include_str!("../../../dashboards/prometheus/fleetscope-rules.yaml");

/// The Prometheus port the written Grafana data source expects.
pub const PROMETHEUS_PORT: u16 = 9090;

/// Where the running demo's parts are.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub hub: String,
    pub collector: String,
    pub clickhouse: String,
    pub clickhouse_version: String,
    pub work: PathBuf,
    pub logs: PathBuf,
    /// A cluster that reports, for the example requests.
    pub example_cluster: String,
    /// The app the first rollout takes.
    pub rollout_app: String,
    /// The version the first rollout takes it to.
    pub rollout_version: Option<String>,
    pub stale_after: i64,
    /// The `fleetscope` binary this demo runs (absolute), for the command-line examples.
    pub fleetscope: PathBuf,
    /// The oldest moment the hub answers for: the start of the simulated history.
    pub history_from: Timestamp,
}

/// `text` as one word of a POSIX shell command line: as it is when it has nothing the shell
/// would read otherwise, else in single quotes.
pub fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/')
}

/// Writes `prometheus/prometheus.yml` (scraping the hub and the collector, loading the alert
/// rules) and the rules file. Returns the configuration file's path.
pub fn write_prometheus(e: &Endpoints) -> anyhow::Result<PathBuf> {
    let dir = e.work.join("prometheus");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("fleetscope-rules.yaml"), RULES)?;
    let config = format!(
        "# Written by `fleetscope demo` for this run: scrapes the demo's hub and collector and\n\
         # loads Fleetscope's alert and recording rules.\n\
         global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\n\
         rule_files:\n  - fleetscope-rules.yaml\n\
         scrape_configs:\n\
         \x20 - job_name: fleetscope-hub\n\
         \x20   authorization:\n      credentials: {READ_TOKEN}\n\
         \x20   static_configs:\n      - targets: [\"{}\"]\n\
         \x20 - job_name: fleetscope-collector\n\
         \x20   static_configs:\n      - targets: [\"{}\"]\n",
        host_port(&e.hub),
        host_port(&e.collector)
    );
    let path = dir.join("prometheus.yml");
    std::fs::write(&path, config)?;
    Ok(path)
}

/// Writes Grafana provisioning (data sources for this ClickHouse and a Prometheus on
/// [`PROMETHEUS_PORT`], a dashboard provider) and the dashboards. Returns the provisioning
/// folder and the dashboards folder.
pub fn write_grafana(e: &Endpoints) -> anyhow::Result<(PathBuf, PathBuf)> {
    let root = e.work.join("grafana");
    let provisioning = root.join("provisioning");
    let dashboards = root.join("dashboards");
    for dir in [
        provisioning.join("datasources"),
        provisioning.join("dashboards"),
        dashboards.clone(),
    ] {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for (file, text) in DASHBOARDS {
        std::fs::write(dashboards.join(file), text)?;
    }
    let (host, port) = host_port(&e.clickhouse)
        .rsplit_once(':')
        .context("ClickHouse URL without a port")?;
    std::fs::write(
        provisioning.join("datasources/fleetscope.yaml"),
        format!(
            "# Written by `fleetscope demo` for this run.\n\
             apiVersion: 1\n\
             datasources:\n\
             \x20 - name: Fleetscope ClickHouse\n    uid: fleetscope-clickhouse\n    type: grafana-clickhouse-datasource\n    access: proxy\n\
             \x20   jsonData:\n      host: {host}\n      port: {port}\n      protocol: http\n      secure: false\n      defaultDatabase: fleetscope\n      username: default\n\
             \x20 - name: Fleetscope Prometheus\n    uid: fleetscope-prometheus\n    type: prometheus\n    access: proxy\n    url: http://127.0.0.1:{PROMETHEUS_PORT}\n"
        ),
    )?;
    std::fs::write(
        provisioning.join("dashboards/fleetscope.yaml"),
        format!(
            "# Written by `fleetscope demo` for this run.\n\
             apiVersion: 1\n\
             providers:\n\
             \x20 - name: fleetscope\n    type: file\n    folder: Fleetscope\n    folderUid: fleetscope\n    allowUiUpdates: false\n\
             \x20   options:\n      path: {}\n",
            dashboards.display()
        ),
    )?;
    Ok((provisioning, dashboards))
}

/// The indent of every line of the printed examples: a `# what` line, then its commands.
pub const EXAMPLE_INDENT: &str = "  ";

/// The ClickHouse version the Grafana ClickHouse plugin needs at least.
const PLUGIN_MIN_CLICKHOUSE: (u32, u32) = (22, 7);

fn version_at_least(version: &str, min: (u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) >= min
}

/// The text printed once everything runs.
pub fn text(e: &Endpoints, prometheus: &Path, grafana: &(PathBuf, PathBuf)) -> String {
    let mut t = String::new();
    endpoints(&mut t, e);
    // Each example: a `# what` line, then its command lines, each a shell command line that
    // works as printed, pasted into a new shell (the last example's lines in that order).
    let _ = writeln!(t, "\nTry:");
    let mut examples = api_examples(e);
    examples.push((
        "the same from the command line: tables, `-o json` for scripts; the gate exits 1 on fail"
            .into(),
        command_line_example(e),
    ));
    for (what, lines) in examples {
        let _ = writeln!(t, "{EXAMPLE_INDENT}# {what}");
        for line in lines {
            let _ = writeln!(t, "{EXAMPLE_INDENT}{line}");
        }
    }
    monitoring(&mut t, e, prometheus, grafana);
    let _ = writeln!(
        t,
        "\nWhat happens now: rollouts of one app after the other, rendered into the GitOps repo and taken by the fleet in waves (some clusters fail them); a few clusters go dark and come back with their spooled changes; a status line from the hub every so often. Times are UTC.\n"
    );
    t
}

/// The `curl` command line with the fleet-wide reader's token.
fn curl() -> String {
    format!("curl -s -H \"Authorization: Bearer {READ_TOKEN}\"")
}

/// Where the hub, the collector, ClickHouse, the GitOps repo and the logs are.
fn endpoints(t: &mut String, e: &Endpoints) {
    let _ = writeln!(t, "\nEverything runs. Ctrl-C stops it and cleans up.");
    let _ = writeln!(
        t,
        "  hub        {}   (API tokens: {READ_TOKEN} reads the fleet, {EMEA_TOKEN} only emea)",
        e.hub
    );
    let _ = writeln!(
        t,
        "  pages      {}/ui/fleet   (in a browser; sign in with {READ_TOKEN}, or {EMEA_TOKEN} to see emea only)",
        e.hub
    );
    let _ = writeln!(
        t,
        "  collector  {}   (agents POST /api/v1/ingest)",
        e.collector
    );
    let _ = writeln!(
        t,
        "  ClickHouse {}   (ClickHouse {}, database fleetscope)",
        e.clickhouse, e.clickhouse_version
    );
    let _ = writeln!(
        t,
        "  GitOps repo {}   (`git -C {} log --stat` shows every render)",
        e.work.join("gitops").display(),
        e.work.join("gitops").display()
    );
    let _ = writeln!(t, "  logs       {}", e.logs.display());
}

/// The example requests of the hub's API, each a `# what` line's text and its command lines.
fn api_examples(e: &Endpoints) -> Vec<(String, Vec<String>)> {
    let curl = curl();
    let hub = &e.hub;
    let app = &e.rollout_app;
    let mut examples: Vec<(String, Vec<String>)> = vec![
        (
            "the fleet and each region".into(),
            vec![format!("{curl} '{hub}/api/v1/summary?depth=1'")],
        ),
        (
            "failing app instances, with the reconciler's message".into(),
            vec![format!("{curl} '{hub}/api/v1/drift?state=failed&limit=5'")],
        ),
        (
            "the rollout: versions of one app, desired and running".into(),
            vec![format!("{curl} '{hub}/api/v1/apps/{app}/versions'")],
        ),
    ];
    if let Some(version) = &e.rollout_version {
        examples.push((
            format!("the rollout gate of {app} {version}, the version rolled out first (pass at 90% in sync)"),
            vec![format!(
                "{curl} '{hub}/api/v1/gate?app={app}&version={version}&threshold=0.9'"
            )],
        ));
    }
    examples.extend([
        (
            "every release as a rollout, newest first: its waves, its status (every third one is rolled back)".into(),
            vec![format!("{curl} '{hub}/api/v1/rollouts?limit=5'")],
        ),
        (
            "delivery figures per app over the last day".into(),
            vec![format!("{curl} '{hub}/api/v1/delivery?window=1d'")],
        ),
        (
            format!("clusters not heard from for {} s", e.stale_after),
            vec![format!("{curl} '{hub}/api/v1/stale?limit=5'")],
        ),
        (
            "one cluster: desired, actual, history".into(),
            vec![format!("{curl} '{hub}/api/v1/clusters/{}'", e.example_cluster)],
        ),
        (
            "why an app runs there".into(),
            vec![format!(
                "{curl} '{hub}/api/v1/explain?cluster={}&app={app}'",
                e.example_cluster
            )],
        ),
        (
            format!(
                "the fleet as it was five minutes ago (any moment since {} UTC: the demo simulates the hour before it started)",
                &clock_time(e.history_from)[..5]
            ),
            vec![format!(
                "{curl} \"{hub}/api/v1/summary?depth=1&at=$(( $(date +%s) - 300 ))\""
            )],
        ),
        (
            "drift of one country as CSV".into(),
            vec![format!(
                "{curl} '{hub}/api/v1/drift?group=emea/de&format=csv' | head"
            )],
        ),
        (
            "a scoped token sees only its subtree".into(),
            vec![format!(
                "curl -s -H \"Authorization: Bearer {EMEA_TOKEN}\" '{hub}/api/v1/summary?depth=1'"
            )],
        ),
        (
            "the OpenAPI document (needs no token)".into(),
            vec![format!("curl -s '{hub}/api/v1/openapi.json'")],
        ),
        (
            "Prometheus metrics of the hub and the collector".into(),
            vec![format!(
                "{curl} '{hub}/metrics' | grep fleetscope_app_instances; curl -s '{}/metrics' | head",
                e.collector
            )],
        ),
    ]);
    examples
}

/// The command-line client's examples, in the order they run in one shell.
fn command_line_example(e: &Endpoints) -> Vec<String> {
    let hub = &e.hub;
    let app = &e.rollout_app;
    let fleetscope = shell_word(&e.fleetscope.display().to_string());
    let mut commands = vec![
        format!("export FLEETSCOPE_HUB_URL={hub} FLEETSCOPE_HUB_TOKEN={READ_TOKEN}"),
        format!("{fleetscope} status"),
        format!("{fleetscope} versions {app}"),
        format!("{fleetscope} drift --state failed --limit 5"),
        format!("{fleetscope} status --at \"$(date -u -d '5 minutes ago' +%Y-%m-%dT%H:%M:%SZ)\""),
    ];
    if let Some(version) = &e.rollout_version {
        commands.push(format!(
            "{fleetscope} gate --app {app} --version {version} --threshold 0.9; echo \"exit $?\""
        ));
    }
    commands.push(format!("{fleetscope} rollouts {app}"));
    commands.push(format!(
        "{fleetscope} rollout \"$({fleetscope} rollouts {app} --limit 1 | awk 'NR == 2 {{ print $NF }}')\""
    ));
    commands.push(format!("{fleetscope} delivery --window 1d"));
    commands
}

/// How to run Prometheus and Grafana on the written configuration, and whether Grafana's
/// ClickHouse plugin can read this server.
fn monitoring(t: &mut String, e: &Endpoints, prometheus: &Path, grafana: &(PathBuf, PathBuf)) {
    let _ = writeln!(
        t,
        "\nPrometheus (scrapes both, loads the alert rules):\n  prometheus --config.file={} --storage.tsdb.path={} --web.listen-address=127.0.0.1:{PROMETHEUS_PORT}",
        prometheus.display(),
        e.work.join("prometheus/data").display()
    );
    let (provisioning, dashboards) = grafana;
    let _ = writeln!(
        t,
        "Grafana (data sources for this ClickHouse and that Prometheus, and every Fleetscope dashboard):\n  docker run --rm --network host -e GF_INSTALL_PLUGINS=grafana-clickhouse-datasource -v {p}:/etc/grafana/provisioning -v {d}:{d} grafana/grafana\n  (or copy {p} into your Grafana's provisioning folder; then open http://localhost:3000, folder Fleetscope)",
        p = provisioning.display(),
        d = dashboards.display()
    );
    if !version_at_least(&e.clickhouse_version, PLUGIN_MIN_CLICKHOUSE) {
        let _ = writeln!(
            t,
            "  Note: Grafana's ClickHouse plugin needs ClickHouse {}.{} or newer and this server is {}; against it only the Prometheus panels work.",
            PLUGIN_MIN_CLICKHOUSE.0, PLUGIN_MIN_CLICKHOUSE.1, e.clickhouse_version
        );
    }
}

/// Writes the Prometheus and Grafana configuration and prints where to look.
pub fn print(e: &Endpoints) -> anyhow::Result<()> {
    let prometheus = write_prometheus(e)?;
    let grafana = write_grafana(e)?;
    print!("{}", text(e, &prometheus, &grafana));
    Ok(())
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    fn endpoints(work: &Path) -> Endpoints {
        Endpoints {
            hub: "http://127.0.0.1:8080".into(),
            collector: "http://127.0.0.1:8081".into(),
            clickhouse: "http://127.0.0.1:40123".into(),
            clickhouse_version: "18.16.1".into(),
            work: work.to_path_buf(),
            logs: work.join("logs"),
            example_cluster: "berlin-01".into(),
            rollout_app: "checkout".into(),
            rollout_version: Some("1.5.0".into()),
            stale_after: 120,
            fleetscope: PathBuf::from("/src/fleet scope/target/release/fleetscope"),
            history_from: Timestamp(1_764_000_000),
        }
    }

    #[test]
    fn the_bundled_dashboards_and_rules_are_the_generated_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dashboards");
        let mut on_disk: Vec<String> = std::fs::read_dir(root.join("grafana"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        on_disk.sort();
        let bundled: Vec<String> = DASHBOARDS.iter().map(|(f, _)| (*f).to_owned()).collect();
        assert_eq!(bundled, on_disk);
        for (file, text) in DASHBOARDS {
            assert_eq!(
                std::fs::read_to_string(root.join("grafana").join(file)).unwrap(),
                *text
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join("prometheus/fleetscope-rules.yaml")).unwrap(),
            RULES
        );
    }

    #[test]
    fn prometheus_config_scrapes_both_services_with_the_hub_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_prometheus(&endpoints(dir.path())).unwrap();
        let config: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let jobs = config["scrape_configs"].as_sequence().unwrap();
        assert_eq!(jobs[0]["job_name"].as_str(), Some("fleetscope-hub"));
        assert_eq!(
            jobs[0]["authorization"]["credentials"].as_str(),
            Some(READ_TOKEN)
        );
        assert_eq!(
            jobs[0]["static_configs"][0]["targets"][0].as_str(),
            Some("127.0.0.1:8080")
        );
        assert_eq!(jobs[1]["job_name"].as_str(), Some("fleetscope-collector"));
        assert_eq!(
            jobs[1]["static_configs"][0]["targets"][0].as_str(),
            Some("127.0.0.1:8081")
        );
        assert_eq!(
            config["rule_files"][0].as_str(),
            Some("fleetscope-rules.yaml")
        );
        assert!(dir.path().join("prometheus/fleetscope-rules.yaml").exists());
    }

    #[test]
    fn grafana_provisioning_points_at_this_clickhouse_and_the_dashboards() {
        let dir = tempfile::tempdir().unwrap();
        let (provisioning, dashboards) = write_grafana(&endpoints(dir.path())).unwrap();
        let sources: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(provisioning.join("datasources/fleetscope.yaml")).unwrap(),
        )
        .unwrap();
        let ch = &sources["datasources"][0];
        assert_eq!(ch["uid"].as_str(), Some("fleetscope-clickhouse"));
        assert_eq!(ch["jsonData"]["host"].as_str(), Some("127.0.0.1"));
        assert_eq!(ch["jsonData"]["port"].as_u64(), Some(40123));
        assert_eq!(
            sources["datasources"][1]["url"].as_str(),
            Some("http://127.0.0.1:9090")
        );
        let provider: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(provisioning.join("dashboards/fleetscope.yaml")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            provider["providers"][0]["options"]["path"].as_str(),
            Some(dashboards.to_str().unwrap())
        );
        assert_eq!(
            std::fs::read_dir(&dashboards).unwrap().count(),
            DASHBOARDS.len()
        );
    }

    /// The examples as printed: each `# what` line followed by its command lines, every line
    /// with the same indent, real values in place of placeholders, the binary by its absolute
    /// path (quoted, as it has a space here).
    #[test]
    fn the_examples_are_commands_to_paste() {
        let dir = tempfile::tempdir().unwrap();
        let e = endpoints(dir.path());
        let paths = (dir.path().join("p"), dir.path().join("d"));
        let text = text(&e, &dir.path().join("prometheus.yml"), &paths);
        let examples: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "Try:")
            .take_while(|l| !l.is_empty())
            .collect();
        expect![[r#"
            Try:
              # the fleet and each region
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/summary?depth=1'
              # failing app instances, with the reconciler's message
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/drift?state=failed&limit=5'
              # the rollout: versions of one app, desired and running
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/apps/checkout/versions'
              # the rollout gate of checkout 1.5.0, the version rolled out first (pass at 90% in sync)
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/gate?app=checkout&version=1.5.0&threshold=0.9'
              # every release as a rollout, newest first: its waves, its status (every third one is rolled back)
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/rollouts?limit=5'
              # delivery figures per app over the last day
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/delivery?window=1d'
              # clusters not heard from for 120 s
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/stale?limit=5'
              # one cluster: desired, actual, history
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/clusters/berlin-01'
              # why an app runs there
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/explain?cluster=berlin-01&app=checkout'
              # the fleet as it was five minutes ago (any moment since 16:00 UTC: the demo simulates the hour before it started)
              curl -s -H "Authorization: Bearer demo-read-token-fleet" "http://127.0.0.1:8080/api/v1/summary?depth=1&at=$(( $(date +%s) - 300 ))"
              # drift of one country as CSV
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/api/v1/drift?group=emea/de&format=csv' | head
              # a scoped token sees only its subtree
              curl -s -H "Authorization: Bearer demo-read-token-emea" 'http://127.0.0.1:8080/api/v1/summary?depth=1'
              # the OpenAPI document (needs no token)
              curl -s 'http://127.0.0.1:8080/api/v1/openapi.json'
              # Prometheus metrics of the hub and the collector
              curl -s -H "Authorization: Bearer demo-read-token-fleet" 'http://127.0.0.1:8080/metrics' | grep fleetscope_app_instances; curl -s 'http://127.0.0.1:8081/metrics' | head
              # the same from the command line: tables, `-o json` for scripts; the gate exits 1 on fail
              export FLEETSCOPE_HUB_URL=http://127.0.0.1:8080 FLEETSCOPE_HUB_TOKEN=demo-read-token-fleet
              '/src/fleet scope/target/release/fleetscope' status
              '/src/fleet scope/target/release/fleetscope' versions checkout
              '/src/fleet scope/target/release/fleetscope' drift --state failed --limit 5
              '/src/fleet scope/target/release/fleetscope' status --at "$(date -u -d '5 minutes ago' +%Y-%m-%dT%H:%M:%SZ)"
              '/src/fleet scope/target/release/fleetscope' gate --app checkout --version 1.5.0 --threshold 0.9; echo "exit $?"
              '/src/fleet scope/target/release/fleetscope' rollouts checkout
              '/src/fleet scope/target/release/fleetscope' rollout "$('/src/fleet scope/target/release/fleetscope' rollouts checkout --limit 1 | awk 'NR == 2 { print $NF }')"
              '/src/fleet scope/target/release/fleetscope' delivery --window 1d
        "#]]
        .assert_eq(&(examples.join("\n") + "\n"));
        assert_eq!(shell_word("/usr/bin/fleetscope"), "/usr/bin/fleetscope");
        assert_eq!(shell_word("/tmp/it's here"), r"'/tmp/it'\''s here'");
    }

    #[test]
    fn the_text_warns_when_clickhouse_is_too_old_for_the_grafana_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = endpoints(dir.path());
        let paths = (dir.path().join("p"), dir.path().join("d"));
        let text = text(&e, &dir.path().join("prometheus.yml"), &paths);
        assert!(text.contains("needs ClickHouse 22.7 or newer and this server is 18.16.1"));
        assert!(text.contains("/api/v1/apps/checkout/versions"));
        e.clickhouse_version = "24.3.2.23".into();
        let text = super::text(&e, &dir.path().join("prometheus.yml"), &paths);
        assert!(!text.contains("needs ClickHouse"));
        assert!(version_at_least("22.7.1", (22, 7)));
        assert!(!version_at_least("22.6.9", (22, 7)));
    }
}
