//! docs/existing-fleet.md, run as it is written: every command of its `sh` blocks, in order,
//! through `bash -euo pipefail` in a temporary directory, against a private ClickHouse, one
//! real Kubernetes API server per cluster (with the Flux and Argo CD CRDs and objects as Flux
//! and Argo CD leave them, without Fleetscope's stamps), and the real `fleetscope` binary.
//!
//! The guide's placeholders (`export CLICKHOUSE_URL=…` and the others in [`PLACEHOLDERS`]) are
//! set to the private servers. `fleetscope collector` and `fleetscope hub` run in the
//! background, as the guide says, until the test ends. A command the test does not know how
//! to run fails it.
//!
//! `kubectl --context CLUSTER apply -k DIR` is what the test cannot hand to the API server:
//! the private one (`apiextensions-apiserver`) serves custom resources only, no core, RBAC or
//! apps API, no discovery and no service account tokens, and authorizes nothing but
//! `system:masters`. So the test builds DIR with the real `kubectl kustomize` and applies the
//! objects itself: it issues a token for the ServiceAccount, puts the ClusterRoles bound to it
//! in front of the cluster's API server (an authorizing front that answers 401 and 403 as the
//! API server's RBAC does, for rules of API groups, resources and verbs), and starts the
//! Deployment's container as a process: its image's `fleetscope` with the container's
//! arguments and environment (ConfigMap and Secret keys resolved), its volumes as
//! directories, and the service account's token in a kubeconfig for the front in place of the
//! in-cluster configuration. So the manifests' RBAC is what the agent runs under.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fleetscope_local_apiserver::LocalApiServer;
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_testkit::faults::{free_port, http_request, Service};
use serde_json::{json, Value};

use crate::faults::{binary, one_at_a_time};

mod applied;
mod fleet;
mod front;

use applied::Applied;
use front::Front;

/// Every variable the guide tells its reader to set for their installation.
const PLACEHOLDERS: &[&str] = &[
    "CLICKHOUSE_URL",
    "COLLECTOR_LISTEN",
    "COLLECTOR_URL",
    "HUB_LISTEN",
    "HUB_URL",
    "FLEETSCOPE_SRC",
];

/// Every drift state, for asking the hub about every pair.
const EVERY_STATE: &str = "in_sync,progressing,failed,out_of_sync,missing,unexpected,stale,unknown";

/// How long the fleet may take to reach what the guide shows after a step.
const WAIT: Duration = Duration::from_secs(90);

/// One command of the guide and the line of the document it starts on.
#[derive(Debug, Clone)]
struct Step {
    line: usize,
    text: String,
}

/// The commands of every `sh` block of `markdown`, each whole: continued lines, loops, groups
/// and here-documents are joined until bash reads a complete command.
fn sh_commands(markdown: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut in_sh = false;
    let mut pending: Option<Step> = None;
    let mut heredocs: Vec<String> = Vec::new();
    for (index, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        if !in_sh {
            in_sh = fence && line.trim() == "```sh";
            continue;
        }
        if fence && heredocs.is_empty() {
            if let Some(step) = pending.take() {
                panic!(
                    "docs/existing-fleet.md:{}: the command does not end within its block:\n{}",
                    step.line, step.text
                );
            }
            in_sh = false;
            continue;
        }
        if pending.is_none() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        let step = pending.get_or_insert_with(|| Step {
            line: index + 1,
            text: String::new(),
        });
        step.text.push_str(line);
        step.text.push('\n');
        if let Some(delimiter) = heredocs.first() {
            if line.trim() == delimiter {
                heredocs.remove(0);
            }
        } else {
            heredocs.extend(heredoc_delimiters(line));
        }
        if heredocs.is_empty() && complete(&step.text) {
            steps.push(pending.take().expect("a pending command"));
        }
    }
    assert!(pending.is_none() && !in_sh, "an sh block is not closed");
    steps
}

/// The delimiters of the here-documents a line opens (`<<EOF`, `<<'EOF'`, `<<-EOF`).
fn heredoc_delimiters(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("<<") {
        let after = rest[at + 2..].trim_start_matches('-').trim_start();
        let word: String = after
            .chars()
            .filter(|c| *c != '\'' && *c != '"')
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !word.is_empty() {
            found.push(word);
        }
        rest = &rest[at + 2..];
    }
    found
}

/// Whether bash reads `text` as complete commands.
fn complete(text: &str) -> bool {
    let trimmed = text.trim_end();
    if trimmed.ends_with('\\') || trimmed.ends_with('|') || trimmed.ends_with("&&") {
        return false;
    }
    Command::new("bash")
        .args(["-n", "-c", text])
        .output()
        .expect("run bash -n")
        .status
        .success()
}

/// What the test does with a command.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// `export NAME=…` of a placeholder: set to the test's value instead.
    Placeholder(String),
    /// `fleetscope collector …` or `fleetscope hub …`: started in the background.
    Service(&'static str),
    /// `kubectl --context CLUSTER apply -k DIR`.
    Apply { cluster: String, dir: String },
    /// A command that asks the hub (`fleetscope status`, `drift`, `versions`).
    AskHub,
    /// `fleetscope render --publish-only …`.
    Publish,
    /// `fleetscope import …`.
    Import,
    /// Anything else the test runs as it is.
    Plain,
}

/// The programs a plain command may start (words at the start of a command or after `|`,
/// `;`, `&&`, `$(`, `do` or `{`).
const PROGRAMS: &[&str] = &[
    "cat",
    "cp",
    "curl",
    "cut",
    "echo",
    "find",
    "grep",
    "head",
    "ls",
    "mkdir",
    "openssl",
    "printf",
    "sed",
    "sha256sum",
    "sort",
    "tr",
    "fleetscope",
    "kubectl",
    "for",
    "do",
    "done",
    "{",
    "}",
    "chmod",
    "export",
];

/// What the test does with `step`, or why it cannot run it.
fn classify(step: &Step) -> Result<Kind, String> {
    let text = step.text.trim();
    let at = format!("docs/existing-fleet.md:{}", step.line);
    let words: Vec<&str> = text.split_whitespace().collect();
    if let Some(assignment) = text.strip_prefix("export ") {
        let name = assignment.split('=').next().unwrap_or_default();
        if PLACEHOLDERS.contains(&name) {
            return Ok(Kind::Placeholder(name.to_owned()));
        }
    }
    if let ["kubectl", "--context", cluster, "apply", "-k", dir] = words.as_slice() {
        return Ok(Kind::Apply {
            cluster: (*cluster).to_owned(),
            dir: (*dir).to_owned(),
        });
    }
    if let Some(program) = command_words(text)
        .into_iter()
        .find(|program| !PROGRAMS.contains(&program.as_str()))
    {
        return Err(format!(
            "{at}: the test does not know how to run `{program}` in:\n{text}"
        ));
    }
    if text.contains("kubectl ") && !text.starts_with("kubectl kustomize ") {
        return Err(format!(
            "{at}: the test runs `kubectl kustomize` and `kubectl --context C apply -k DIR` only:\n{text}"
        ));
    }
    Ok(match words.as_slice() {
        ["fleetscope", "collector", ..] => Kind::Service("collector"),
        ["fleetscope", "hub", ..] => Kind::Service("hub"),
        ["fleetscope", "agent", ..] => {
            return Err(format!(
                "{at}: the agent runs from its Deployment, not from a command"
            ))
        }
        ["fleetscope", "render", "--publish-only", ..] => Kind::Publish,
        ["fleetscope", "import", ..] => Kind::Import,
        ["fleetscope", "status" | "drift" | "versions", ..] => Kind::AskHub,
        _ => Kind::Plain,
    })
}

/// The first word of every simple command in `text` (here-document bodies left out).
fn command_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut heredoc: Option<String> = None;
    let mut continued = false;
    for line in text.lines() {
        if let Some(delimiter) = &heredoc {
            if line.trim() == delimiter {
                heredoc = None;
            }
            continue;
        }
        heredoc = heredoc_delimiters(line).into_iter().next();
        let code = line.split(" #").next().unwrap_or_default();
        let separated = code
            .replace("$(", ";")
            .replace("&&", ";")
            .replace("||", ";")
            .replace('|', ";");
        for (index, part) in separated.split(';').enumerate() {
            if index == 0 && continued {
                continue;
            }
            for token in part.split_whitespace() {
                if token.contains('=') && !token.starts_with('-') {
                    continue; // an assignment before the command
                }
                words.push(token.to_owned());
                if !["do", "{", "then"].contains(&token) {
                    break;
                }
            }
        }
        continued = code.trim_end().ends_with('\\');
    }
    words.retain(|word| !word.starts_with('"') && !word.starts_with('>'));
    words
}

/// An agent as its Deployment runs it: the process and the front it reaches its API server
/// through.
struct Agent {
    cluster: String,
    front: Front,
    process: Service,
}

/// The guide's run: its directory and shell variables, the servers it talks to and the ones
/// it started, and where it is.
struct Run {
    work: tempfile::TempDir,
    values: BTreeMap<&'static str, String>,
    base_env: Vec<(String, String)>,
    clickhouse: LocalClickHouse,
    apis: BTreeMap<String, LocalApiServer>,
    objects: BTreeMap<String, usize>,
    services: Vec<(&'static str, Service)>,
    agents: Vec<Agent>,
    /// Publications made so far, and the phases whose checks passed.
    publications: usize,
    checked: BTreeSet<usize>,
    took: Vec<(usize, String, Duration)>,
}

impl Run {
    fn env_file(&self) -> PathBuf {
        self.work.path().join(".guide-env")
    }

    /// Runs `text` with the variables of the commands before it; returns its output (stdout
    /// and stderr, in order). Panics when it fails.
    fn shell(&mut self, step: &Step, text: &str) -> String {
        let output = self.quiet_shell(step, text);
        println!("$ {}{output}", text.trim_start());
        output
    }

    /// [`Run::shell`] without printing what it ran.
    fn quiet_shell(&mut self, step: &Step, text: &str) -> String {
        let env = self.env_file();
        let script = format!(
            "exec 2>&1\nset -a\n. {env}\n{text}\nexport -p > {env}.next\n",
            env = env.display()
        );
        let started = Instant::now();
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(self.work.path())
            .env_clear()
            .envs(self.base_env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run bash");
        let output = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "docs/existing-fleet.md:{}: the command failed ({}):\n{text}\n--- its output:\n{output}",
            step.line,
            out.status
        );
        std::fs::rename(format!("{}.next", env.display()), &env).unwrap();
        self.took
            .push((step.line, first_line(text), started.elapsed()));
        output
    }

    fn step(&mut self, step: &Step) {
        match classify(step).unwrap_or_else(|err| panic!("{err}")) {
            Kind::Placeholder(name) => {
                let value = self.values[name.as_str()].clone();
                self.shell(step, &format!("export {name}='{value}'"));
            }
            Kind::Service(which) => self.start_service(step, which),
            Kind::Apply { cluster, dir } => self.apply(step, &cluster, &dir),
            Kind::AskHub => {
                self.check_phase();
                self.shell(step, &step.text.clone());
            }
            Kind::Import => {
                let waited = self.wait_reported();
                let what = "(waited for every object in ClickHouse)".to_owned();
                self.took.push((step.line, what, waited));
                self.shell(step, &step.text.clone());
            }
            Kind::Publish => {
                self.check_phase();
                self.shell(step, &step.text.clone());
                self.publications += 1;
            }
            Kind::Plain => {
                self.shell(step, &step.text.clone());
            }
        }
    }

    /// `fleetscope collector …` or `fleetscope hub …` in the background, as the guide starts
    /// it, until the end of the test.
    fn start_service(&mut self, step: &Step, which: &'static str) {
        let listen = match which {
            "collector" => &self.values["COLLECTOR_LISTEN"],
            _ => &self.values["HUB_LISTEN"],
        };
        let port: u16 = listen.rsplit(':').next().unwrap().parse().unwrap();
        let script = format!(
            "set -a\n. {}\nset +a\nexec {}",
            self.env_file().display(),
            step.text.trim()
        );
        let mut args: Vec<String> = vec!["-i".into()];
        args.extend(self.base_env.iter().map(|(k, v)| format!("{k}={v}")));
        args.extend(["bash", "-euo", "pipefail", "-c", &script].map(String::from));
        let log = self.work.path().join(format!("{which}.log"));
        let started = Instant::now();
        let mut service = Service::spawn(Path::new("/usr/bin/env"), &args, &log);
        service.wait_until_healthy(port);
        self.took
            .push((step.line, first_line(&step.text), started.elapsed()));
        println!(
            "$ {}(started: {which} on port {port})",
            step.text.trim_start()
        );
        self.services.push((which, service));
    }

    /// `kubectl --context CLUSTER apply -k DIR`: the objects `kubectl kustomize DIR` builds,
    /// applied as the module's documentation says.
    fn apply(&mut self, step: &Step, cluster: &str, dir: &str) {
        assert!(
            self.apis.contains_key(cluster),
            "docs/existing-fleet.md:{}: no cluster {cluster}",
            step.line
        );
        let built = self.quiet_shell(
            step,
            &format!("kubectl kustomize {dir} | kubectl annotate --local -f - -o json kubectl.kubernetes.io/applied-by=guide"),
        );
        let objects: Vec<Value> = serde_json::Deserializer::from_str(&built)
            .into_iter::<Value>()
            .map(|object| object.unwrap_or_else(|err| panic!("{err}:\n{built}")))
            .flat_map(|object| match object["kind"].as_str() {
                Some("List") => object["items"].as_array().cloned().unwrap_or_default(),
                _ => vec![object],
            })
            .collect();
        let applied = Applied::read(objects);
        assert_eq!(applied.deployments.len(), 1, "one Deployment, the agent's");
        let root = self.work.path().join(format!(".cluster-{cluster}"));
        let pod = applied.pod(&applied.deployments[0], &root);
        let token = format!("service-account-token-{cluster}-{}", std::process::id());
        let tokens = BTreeMap::from([(token.clone(), pod.service_account.clone())]);
        let grants = BTreeMap::from([(
            pod.service_account.clone(),
            applied.rules_of(&pod.service_account),
        )]);
        let front = Front::start(&self.apis[cluster], tokens, grants);
        let kubeconfig = root.join("in-cluster-kubeconfig");
        let config = json!({"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "in-cluster", "cluster": {"server": format!("http://127.0.0.1:{}", front.port)}}],
            "users": [{"name": "service-account", "user": {"token": token}}],
            "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "service-account"}}],
            "current-context": "in-cluster"});
        std::fs::write(&kubeconfig, config.to_string()).unwrap();
        let mut args: Vec<String> = vec![
            "-i".into(),
            format!("KUBECONFIG={}", kubeconfig.display()),
            // The agent reports its objects again at once when the match rules change, instead
            // of within a minute: the one setting of the test's own, to keep it short.
            "FLEETSCOPE_MATCH_RULES_SPREAD_SECONDS=0".into(),
        ];
        args.extend(pod.env.iter().map(|(k, v)| format!("{k}={v}")));
        args.push(binary().display().to_string());
        args.extend(pod.args.iter().cloned());
        let log = root.join("agent.log");
        let process = Service::spawn(Path::new("/usr/bin/env"), &args, &log);
        println!(
            "(the agent of {cluster} runs: fleetscope {})",
            pod.args.join(" ")
        );
        self.agents.push(Agent {
            cluster: cluster.to_owned(),
            front,
            process,
        });
    }
}

fn first_line(text: &str) -> String {
    text.trim().lines().next().unwrap_or_default().to_owned()
}

/// Percent-encodes a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Waits for `check` to say `Ok`, at most `WAIT`; fails with what it said last.
fn wait_for(what: &str, mut check: impl FnMut() -> Result<(), String>) -> Duration {
    let started = Instant::now();
    let until = started + WAIT;
    loop {
        match check() {
            Ok(()) => return started.elapsed(),
            Err(last) if Instant::now() >= until => {
                panic!("waited {WAIT:?} for {what}; last seen:\n{last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// (cluster, app) → (state, desired version, observed version).
type Pairs = BTreeMap<(String, String), (String, String, String)>;

impl Run {
    fn hub_token(&self) -> String {
        std::fs::read_to_string(self.work.path().join("secrets/hub-read.token"))
            .expect("the guide's read token for the hub, secrets/hub-read.token")
            .trim()
            .to_owned()
    }

    fn hub_addr(&self) -> String {
        self.values["HUB_URL"]
            .trim_start_matches("http://")
            .to_owned()
    }

    /// `GET path` on the hub with the guide's read token.
    fn hub(&self, path: &str) -> Result<Value, String> {
        let token = format!("Bearer {}", self.hub_token());
        let answer = http_request(
            &self.hub_addr(),
            "GET",
            path,
            &[("Authorization", &token)],
            b"",
            Duration::from_secs(10),
        )
        .map_err(|err| format!("GET {path}: {err}"))?;
        if answer.status != 200 {
            return Err(format!("GET {path}: {} {}", answer.status, answer.body));
        }
        serde_json::from_str(&answer.body).map_err(|err| format!("GET {path}: {err}"))
    }

    fn pairs(&self) -> Result<Pairs, String> {
        let answer = self.hub(&format!("/api/v1/drift?state={EVERY_STATE}&limit=1000"))?;
        let text = |item: &Value, key: &str| item[key].as_str().unwrap_or("-").to_owned();
        Ok(answer["items"]
            .as_array()
            .ok_or_else(|| answer.to_string())?
            .iter()
            .map(|item| {
                (
                    (text(item, "cluster"), text(item, "app")),
                    (
                        text(item, "state"),
                        text(item, "desired_version"),
                        text(item, "observed_version"),
                    ),
                )
            })
            .collect())
    }

    /// The objects each cluster's agent has reported, as ClickHouse holds them.
    fn reported(&self) -> Result<BTreeMap<String, usize>, String> {
        let query = "SELECT cluster_id, uniqExact(object_kind, object_namespace, object_name) \
                     FROM fleetscope.observed_latest GROUP BY cluster_id FORMAT TSV";
        let addr = self
            .clickhouse
            .url()
            .trim_start_matches("http://")
            .to_owned();
        let answer = http_request(
            &addr,
            "GET",
            &format!("/?query={}", encode(query)),
            &[],
            b"",
            Duration::from_secs(10),
        )
        .map_err(|err| err.to_string())?;
        Ok(answer
            .body
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(cluster, n)| (cluster.to_owned(), n.parse().unwrap_or(0)))
            .collect())
    }

    /// Before `fleetscope import`: every agent has reported every object of its cluster.
    fn wait_reported(&self) -> Duration {
        assert_eq!(
            self.agents.len(),
            self.apis.len(),
            "the guide imports before every cluster's agent is installed"
        );
        wait_for("every cluster's objects in ClickHouse", || {
            let reported = self.reported()?;
            let agents: Vec<String> = self
                .agents
                .iter()
                .map(|agent| format!("{}:\n{}", agent.cluster, agent.process.log_tail()))
                .collect();
            (reported == self.objects).then_some(()).ok_or_else(|| {
                format!(
                    "{reported:?}, wanted {:?}\n{}",
                    self.objects,
                    agents.join("\n")
                )
            })
        })
    }

    /// What the fleet must show before the guide asks the hub, or publishes again: after the
    /// agents, every cluster is known; after the first publication, every pair is in sync;
    /// after the second, the changed app is on its way.
    fn check_phase(&mut self) {
        let phase = self.publications;
        if self.agents.is_empty() || !self.checked.insert(phase) {
            return;
        }
        let (what, waited) = match phase {
            0 => {
                let clusters = self.apis.len() as u64;
                let waited = self.wait_reported()
                    + wait_for("the hub knowing every cluster", || {
                        let summary = self.hub("/api/v1/summary?depth=1")?;
                        (summary["total"]["clusters"].as_u64() == Some(clusters))
                            .then_some(())
                            .ok_or_else(|| summary.to_string())
                    });
                ("every cluster reporting", waited)
            }
            1 => ("every pair in sync", self.check_in_sync()),
            2 => ("the changed version desired", self.check_changed()),
            _ => panic!("the guide publishes more than twice"),
        };
        self.took.push((0, format!("(waited for {what})"), waited));
    }

    /// Every running app is an app of the platform repo, in sync, and the pages say so.
    fn check_in_sync(&self) -> Duration {
        let wanted: BTreeSet<(String, String)> = [
            ("shop-de-1", "checkout"),
            ("shop-de-1", "ingress-nginx"),
            ("shop-de-1", "podinfo"),
            ("shop-fr-1", "catalog"),
            ("shop-fr-1", "search"),
        ]
        .iter()
        .map(|(c, a)| (c.to_string(), a.to_string()))
        .collect();
        let waited = wait_for("every pair in sync", || {
            let pairs = self.pairs()?;
            let keys: BTreeSet<_> = pairs.keys().cloned().collect();
            let in_sync = pairs.values().all(|(state, _, _)| state == "in_sync");
            (keys == wanted && in_sync)
                .then_some(())
                .ok_or_else(|| format!("{pairs:#?}"))
        });
        let summary = self.hub("/api/v1/summary?depth=2").unwrap();
        let total = &summary["total"];
        assert_eq!(total["clusters"], 2, "{summary:#}");
        assert_eq!(total["app_instances"], 5, "{summary:#}");
        let groups: BTreeSet<&str> = summary["groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|g| g["group"].as_str().or(g["path"].as_str()))
            .collect();
        assert!(
            groups.contains("emea/de") && groups.contains("emea/fr"),
            "groups from --group-labels region,country: {summary:#}"
        );
        self.check_pages();
        waited
    }

    /// `/ui/` leads to the sign-in, the read token signs in, and the fleet page lists the
    /// groups.
    fn check_pages(&self) {
        let get = |path: &str, headers: &[(&str, &str)]| {
            http_request(
                &self.hub_addr(),
                "GET",
                path,
                headers,
                b"",
                Duration::from_secs(10),
            )
            .unwrap()
        };
        let first = get("/ui/", &[]);
        assert!(
            [200, 302, 303, 307].contains(&first.status),
            "GET /ui/: {first:?}"
        );
        let form = get("/ui/sign-in", &[]);
        assert!(
            form.status == 200 && form.body.contains("name=\"token\""),
            "{form:?}"
        );
        let body = format!("token={}&next=%2Fui%2Ffleet", self.hub_token());
        let signed_in = http_request(
            &self.hub_addr(),
            "POST",
            "/ui/sign-in",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            body.as_bytes(),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(signed_in.status, 303, "sign-in: {signed_in:?}");
        let cookie = format!("fleetscope_session={}", self.hub_token());
        let fleet = get("/ui/fleet", &[("Cookie", &cookie)]);
        assert!(
            fleet.status == 200 && fleet.body.contains("emea"),
            "{fleet:?}"
        );
        let page = get("/ui/fleet?group=emea", &[("Cookie", &cookie)]);
        assert_eq!(page.status, 200, "{page:?}");
        assert!(
            page.body.contains("emea/de") && page.body.contains("emea/fr"),
            "{}",
            page.body
        );
        let cluster = get("/ui/clusters/shop-de-1", &[("Cookie", &cookie)]);
        assert!(
            cluster.status == 200
                && cluster.body.contains("data-state=\"in_sync\"")
                && cluster.body.contains("import-podinfo"),
            "the cluster page, with each app's state and the policy that puts it there: {cluster:?}"
        );
    }

    /// After the version change: podinfo is desired at the new version and on its way (or,
    /// past the grace period, out of sync); the rest stays in sync.
    fn check_changed(&self) -> Duration {
        let waited = wait_for("podinfo's new version desired", || {
            let pairs = self.pairs()?;
            let ok = pairs
                .iter()
                .all(|((cluster, app), (state, desired, observed))| {
                    if (cluster.as_str(), app.as_str()) == ("shop-de-1", "podinfo") {
                        ["progressing", "out_of_sync"].contains(&state.as_str())
                            && desired == "6.6.0"
                            && observed == "6.5.0"
                    } else {
                        state == "in_sync"
                    }
                });
            (ok && pairs.len() == 5)
                .then_some(())
                .ok_or_else(|| format!("{pairs:#?}"))
        });
        let rollouts = self.hub("/api/v1/rollouts?app=podinfo").unwrap();
        assert_eq!(rollouts["items"][0]["version"], "6.6.0", "{rollouts:#}");
        waited
    }

    /// The agents ran under the manifests' RBAC: nothing they asked was refused, and each
    /// listed and watched every kind its cluster serves.
    fn check_agents(&self) {
        for agent in &self.agents {
            let requests = agent.front.requests();
            let refused: Vec<_> = requests.iter().filter(|(_, _, allowed)| !allowed).collect();
            assert!(
                refused.is_empty(),
                "{}: the agent's RBAC refused {refused:#?}\n{}",
                agent.cluster,
                agent.process.log_tail()
            );
            let served: &[&str] = if agent.cluster == "shop-fr-1" {
                &["applications"]
            } else {
                &["kustomizations", "helmreleases", "gitrepositories"]
            };
            for resource in served {
                for verb in ["list", "watch"] {
                    assert!(
                        requests
                            .iter()
                            .any(|(_, a, _)| a.resource == *resource && a.verb == verb),
                        "{}: the agent did not {verb} {resource}: {requests:#?}",
                        agent.cluster
                    );
                }
            }
        }
    }
}

/// The private servers the guide's placeholders name, the fleet in them, and the team's
/// GitOps repository in the guide's directory.
fn prepare() -> Run {
    let kubectl = Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .output();
    let minor = kubectl
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| {
            let version: Value = serde_json::from_slice(&out.stdout).ok()?;
            let minor = version["clientVersion"]["minor"]
                .as_str()?
                .trim_end_matches('+');
            (version["clientVersion"]["major"] == "1").then(|| minor.parse::<u32>().ok())?
        });
    assert!(
        minor.is_some_and(|minor| minor >= 27),
        "this test needs kubectl 1.27 or newer (kustomize 5) on the PATH, found {minor:?}: install \
         it (scripts/install-prereqs --tests does where an apt source has it)"
    );
    let work = tempfile::Builder::new()
        .prefix("fleetscope-guide-")
        .tempdir()
        .unwrap();
    let clickhouse = LocalClickHouse::start()
        .unwrap_or_else(|err| panic!("this test needs a private ClickHouse server: {err}"));
    let mut apis = BTreeMap::new();
    let mut objects = BTreeMap::new();
    for cluster in fleet::fleet() {
        objects.insert(cluster.id.to_owned(), cluster.objects.len());
        apis.insert(cluster.id.to_owned(), fleet::api_server(&cluster));
    }
    for (path, text) in fleet::GITOPS {
        let path = work.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let kubeconfig = work.path().join(".kube/config");
    std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
    std::fs::write(&kubeconfig, fleet::admin_kubeconfig(&apis)).unwrap();
    std::fs::write(work.path().join(".guide-env"), "").unwrap();
    let (collector, hub) = (free_port(), free_port());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let values = BTreeMap::from([
        ("CLICKHOUSE_URL", clickhouse.url()),
        ("COLLECTOR_LISTEN", format!("127.0.0.1:{collector}")),
        ("COLLECTOR_URL", format!("http://127.0.0.1:{collector}")),
        ("HUB_LISTEN", format!("127.0.0.1:{hub}")),
        ("HUB_URL", format!("http://127.0.0.1:{hub}")),
        (
            "FLEETSCOPE_SRC",
            root.canonicalize().unwrap().display().to_string(),
        ),
    ]);
    let bin_dir = binary().parent().unwrap().display().to_string();
    let base_env = vec![
        (
            "PATH".to_owned(),
            format!("{bin_dir}:/usr/local/bin:/usr/bin:/bin"),
        ),
        ("HOME".to_owned(), work.path().display().to_string()),
        ("KUBECONFIG".to_owned(), kubeconfig.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ];
    Run {
        work,
        values,
        base_env,
        clickhouse,
        apis,
        objects,
        services: Vec::new(),
        agents: Vec::new(),
        publications: 0,
        checked: BTreeSet::new(),
        took: Vec::new(),
    }
}

#[test]
fn the_existing_fleet_guide_runs_as_written() {
    let _one_at_a_time = one_at_a_time();
    let started = Instant::now();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/existing-fleet.md");
    let guide = std::fs::read_to_string(&path).unwrap();
    let steps = sh_commands(&guide);
    assert!(steps.len() > 10, "{steps:#?}");
    for step in &steps {
        // Every command known before anything starts.
        classify(step).unwrap_or_else(|err| panic!("{err}"));
    }
    let mut run = prepare();
    for step in &steps {
        run.step(step);
    }
    run.check_phase();
    assert!(
        run.checked.contains(&1) && run.checked.contains(&2),
        "the guide must publish, show every pair in sync, change a version and publish again"
    );
    run.check_agents();
    for (line, command, took) in &run.took {
        println!("{took:>10.2?}  line {line:>3}: {command}");
    }
    println!(
        "the guide: {} commands in {:.1?}",
        steps.len(),
        started.elapsed()
    );
    for (which, service) in &run.services {
        println!("--- {which}'s log, last lines:\n{}", service.log_tail());
    }
    for agent in &run.agents {
        println!(
            "--- the agent of {}, last lines:\n{}",
            agent.cluster,
            agent.process.log_tail()
        );
    }
    for (_, service) in run.services.drain(..).rev() {
        drop(service);
    }
}

#[test]
fn a_command_the_guide_test_cannot_run_fails_it() {
    let step = |text: &str| Step {
        line: 1,
        text: format!("{text}\n"),
    };
    for text in [
        "kubectl -n fleetscope rollout status deployment/fleetscope-agent",
        "helm install podinfo podinfo/podinfo",
        "fleetscope agent --cluster shop-de-1 --collector-url http://collector",
        "systemctl start fleetscope-hub",
    ] {
        let refused = classify(&step(text));
        assert!(refused.is_err(), "{text} was taken: {refused:?}");
    }
    let markdown = "```sh\nexport HUB_URL=https://hub\nfor c in a b; do\n    echo \"$c\"\ndone\ncat > f <<'EOF'\nx\nEOF\nkubectl --context a apply -k agents/a\n```\n";
    let steps = sh_commands(markdown);
    let kinds: Vec<Kind> = steps.iter().map(|step| classify(step).unwrap()).collect();
    assert_eq!(steps.len(), 4, "{steps:#?}");
    assert_eq!(kinds[0], Kind::Placeholder("HUB_URL".into()));
    assert_eq!(kinds[1], Kind::Plain);
    assert_eq!(kinds[2], Kind::Plain);
    assert_eq!(
        kinds[3],
        Kind::Apply {
            cluster: "a".into(),
            dir: "agents/a".into()
        }
    );
}
