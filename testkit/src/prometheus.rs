//! A private Prometheus server for tests, and promtool: the server scrapes the given targets
//! and evaluates the given rule files at short intervals, listens on a free loopback port,
//! keeps its data in a temporary directory, and stops when dropped.
//!
//! Both programs come from the Debian package `prometheus`; a test that cannot find them fails
//! and says how to install them.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

const INSTALL_HINT: &str =
    "Prometheus and promtool come from the Debian package prometheus: run scripts/install-prereqs --tests";

/// How long the server may take to become ready.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Attempts at starting on a free port, in case another process takes the port first.
const START_ATTEMPTS: usize = 3;

/// Runs promtool with `args` and returns what it did. Panics with what to install when promtool
/// is missing.
pub fn promtool<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new("promtool")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|err| panic!("could not run promtool: {err}; {INSTALL_HINT}"))
}

/// One scrape job: its name (the `job` label) and the `host:port` of each target.
#[derive(Debug, Clone)]
pub struct ScrapeJob {
    pub job: String,
    pub targets: Vec<String>,
    pub metrics_path: String,
    /// Sent as `Authorization: Bearer <token>` on every scrape.
    pub bearer_token: Option<String>,
}

impl ScrapeJob {
    /// A job scraping `/metrics` of one target without credentials.
    pub fn new(job: &str, target: &str) -> ScrapeJob {
        ScrapeJob {
            job: job.to_owned(),
            targets: vec![target.to_owned()],
            metrics_path: "/metrics".to_owned(),
            bearer_token: None,
        }
    }
}

/// What the server scrapes and evaluates, and how often.
#[derive(Debug, Clone)]
pub struct PrometheusConfig {
    pub scrape_interval: Duration,
    pub evaluation_interval: Duration,
    pub jobs: Vec<ScrapeJob>,
    pub rule_files: Vec<PathBuf>,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            scrape_interval: Duration::from_secs(1),
            evaluation_interval: Duration::from_secs(1),
            jobs: Vec::new(),
            rule_files: Vec::new(),
        }
    }
}

/// A Prometheus duration: whole seconds where possible, else milliseconds (at least 1 ms).
fn prometheus_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 && duration.as_secs() > 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis().max(1))
    }
}

impl PrometheusConfig {
    /// The configuration file's text. JSON is YAML, so serde_json writes it.
    fn file_text(&self) -> String {
        let interval = prometheus_duration(self.scrape_interval);
        let scrape_configs: Vec<Value> = self
            .jobs
            .iter()
            .map(|job| {
                let mut config = json!({
                    "job_name": job.job,
                    "metrics_path": job.metrics_path,
                    "static_configs": [{ "targets": job.targets }],
                });
                if let Some(token) = &job.bearer_token {
                    config["authorization"] = json!({ "type": "Bearer", "credentials": token });
                }
                config
            })
            .collect();
        let rule_files: Vec<String> = self
            .rule_files
            .iter()
            .map(|path| {
                let path = path
                    .canonicalize()
                    .unwrap_or_else(|err| panic!("rule file {}: {err}", path.display()));
                path.to_string_lossy().into_owned()
            })
            .collect();
        let config = json!({
            "global": {
                "scrape_interval": interval,
                // The timeout may not exceed the interval.
                "scrape_timeout": interval,
                "evaluation_interval": prometheus_duration(self.evaluation_interval),
            },
            "rule_files": rule_files,
            "scrape_configs": scrape_configs,
        });
        serde_json::to_string_pretty(&config).expect("a JSON value serializes")
    }
}

/// One alert as `/api/v1/alerts` lists it: `state` is `pending` or `firing`.
#[derive(Debug, Clone, Deserialize)]
pub struct Alert {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub state: String,
    #[serde(rename = "activeAt")]
    pub active_at: Option<String>,
    pub value: String,
}

impl Alert {
    pub fn name(&self) -> &str {
        self.labels.get("alertname").map_or("", String::as_str)
    }

    /// The value of label `name`, "" when the alert does not have it (Prometheus drops labels
    /// with empty values).
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

/// A running server, killed when dropped.
#[derive(Debug)]
pub struct Prometheus {
    child: Child,
    port: u16,
    log_file: PathBuf,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("bind a free loopback port")
}

impl Prometheus {
    /// Writes the configuration, starts the server and waits until it is ready. Panics with
    /// what to install when prometheus is missing, and with the server's log when it does not
    /// start.
    pub async fn start(config: &PrometheusConfig) -> Prometheus {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config.file_text()).expect("write prometheus.yml");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("build an HTTP client");
        let mut last_log = String::new();
        for attempt in 0..START_ATTEMPTS {
            let port = free_port();
            let data = dir.path().join(format!("data-{attempt}"));
            let log_file = dir.path().join(format!("prometheus-{attempt}.log"));
            let mut child = spawn(&config_file, &data, port, &log_file);
            let ready_url = format!("http://127.0.0.1:{port}/-/ready");
            let deadline = Instant::now() + START_TIMEOUT;
            loop {
                if let Some(status) = child.try_wait().expect("poll prometheus") {
                    last_log = std::fs::read_to_string(&log_file).unwrap_or_default();
                    if last_log.contains("address already in use") {
                        break;
                    }
                    panic!("prometheus exited ({status}) before it was ready: {last_log}");
                }
                let ready = client
                    .get(&ready_url)
                    .send()
                    .await
                    .is_ok_and(|response| response.status().is_success());
                if ready {
                    return Prometheus {
                        child,
                        port,
                        log_file,
                        client,
                        _dir: dir,
                    };
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    let log = std::fs::read_to_string(&log_file).unwrap_or_default();
                    panic!("prometheus was not ready within {START_TIMEOUT:?}: {log}");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        panic!("prometheus found no free port in {START_ATTEMPTS} attempts: {last_log}");
    }

    /// The server's base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    /// GETs an API path and returns its `data`, panicking on any error with the answer.
    async fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let url = format!("{}{path}", self.url());
        let response = self
            .client
            .get(&url)
            .query(params)
            .send()
            .await
            .unwrap_or_else(|err| panic!("GET {url}: {err}"));
        let status = response.status();
        let body = response
            .text()
            .await
            .unwrap_or_else(|err| panic!("GET {url}: {err}"));
        let answer: Value = serde_json::from_str(&body).unwrap_or_else(|err| {
            panic!("GET {url} {params:?}: {status}, not JSON ({err}): {body}")
        });
        assert!(
            status.is_success() && answer["status"] == "success",
            "GET {url} {params:?}: {status}: {body}"
        );
        answer["data"].clone()
    }

    /// An instant query at the current time: the `result` of `/api/v1/query` (for a vector,
    /// one object per series with `metric` and `value`).
    pub async fn query(&self, promql: &str) -> Vec<Value> {
        let data = self.api("/api/v1/query", &[("query", promql)]).await;
        match &data["result"] {
            Value::Array(items) => items.clone(),
            other => vec![other.clone()],
        }
    }

    /// Polls an instant query until it returns at least one series, and returns them.
    pub async fn wait_for_query(&self, promql: &str, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let result = self.query(promql).await;
            if !result.is_empty() {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "`{promql}` returned nothing within {timeout:?}; targets: {}; log: {}",
                self.api("/api/v1/targets", &[]).await,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The rule groups as `/api/v1/rules` lists them, with every rule's health, last error and
    /// (for alerting rules) active alerts.
    pub async fn rule_groups(&self) -> Vec<Value> {
        let data = self.api("/api/v1/rules", &[]).await;
        data["groups"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until every rule group has finished `evaluations` more evaluations than when this
    /// was called. Two are enough for an evaluation that started after the call, so that the
    /// rules have seen every sample scraped before it. Panics when a rule is unhealthy.
    pub async fn wait_for_evaluations(&self, evaluations: usize, timeout: Duration) {
        let last_evaluations = |groups: &[Value]| -> BTreeMap<String, String> {
            groups
                .iter()
                .map(|g| {
                    (
                        g["name"].as_str().unwrap_or_default().to_owned(),
                        g["lastEvaluation"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        };
        let groups = self.rule_groups().await;
        assert!(
            !groups.is_empty(),
            "prometheus has loaded no rule groups: {}",
            self.log()
        );
        let mut seen = last_evaluations(&groups);
        let mut counts: BTreeMap<String, usize> = seen.keys().map(|k| (k.clone(), 0)).collect();
        let deadline = Instant::now() + timeout;
        loop {
            let groups = self.rule_groups().await;
            for group in &groups {
                for rule in group["rules"].as_array().into_iter().flatten() {
                    assert!(
                        rule["health"] != "err",
                        "rule {} in group {} fails: {}",
                        rule["name"],
                        group["name"],
                        rule["lastError"]
                    );
                }
            }
            for (name, at) in last_evaluations(&groups) {
                if seen.get(&name) != Some(&at) {
                    *counts.entry(name.clone()).or_default() += 1;
                    seen.insert(name, at);
                }
            }
            if counts.values().all(|n| *n >= evaluations) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "rule groups not evaluated {evaluations} times within {timeout:?}: {counts:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The active (pending or firing) alerts, as `/api/v1/alerts` lists them.
    pub async fn alerts(&self) -> Vec<Alert> {
        let data = self.api("/api/v1/alerts", &[]).await;
        serde_json::from_value(data["alerts"].clone())
            .unwrap_or_else(|err| panic!("alerts in an unexpected form ({err}): {data}"))
    }
}

fn spawn(config_file: &Path, data: &Path, port: u16, log_file: &Path) -> Child {
    let log = std::fs::File::create(log_file).expect("create the server's log");
    Command::new("prometheus")
        .arg(format!("--config.file={}", config_file.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone the log file handle"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|err| panic!("could not run prometheus: {err}; {INSTALL_HINT}"))
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_as_prometheus_reads_them() {
        assert_eq!(prometheus_duration(Duration::from_secs(1)), "1s");
        assert_eq!(prometheus_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(prometheus_duration(Duration::from_millis(200)), "200ms");
        assert_eq!(prometheus_duration(Duration::ZERO), "1ms");
    }
}
