//! Pieces of the fault tests on the real binaries: a `fleetscope` service as a child process, a
//! client that reports like an agent and records every answer it gets, a proxy in front of the
//! collector that records which reports reach it in which order, the reports waiting in an
//! agent's spool, and how many copies of each change ClickHouse holds once duplicates collapse.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fleetscope_local_process::{log_tail, ChildProcess, StartFailure};

/// How long a service may take to start serving.
const START_LIMIT: Duration = Duration::from_secs(60);

/// A `fleetscope` subcommand running as a child process, its output in a log file. Dropping it
/// kills it.
#[derive(Debug)]
pub struct Service {
    process: ChildProcess,
    log: PathBuf,
}

impl Service {
    /// Starts `binary args…` with stdout and stderr in `log`, without waiting for anything.
    pub fn spawn(binary: &Path, args: &[String], log: &Path) -> Service {
        let mut command = Command::new(binary);
        command.args(args);
        let cwd = log.parent().expect("the log file is in a directory");
        let process = ChildProcess::spawn(command, cwd, log, log)
            .unwrap_or_else(|err| panic!("start {} {args:?}: {err:?}", binary.display()));
        Service {
            process,
            log: log.to_owned(),
        }
    }

    /// [`Service::spawn`], then waits until the process listens on `port` and answers
    /// `GET /healthz` there with 200; panics with the log's tail when it exits first or does
    /// not within a minute.
    pub fn start(binary: &Path, args: &[String], log: &Path, port: u16) -> Service {
        let mut service = Service::spawn(binary, args, log);
        service.wait_until_healthy(port);
        service
    }

    /// Waits until the process listens on `port` and answers `GET /healthz` with 200.
    pub fn wait_until_healthy(&mut self, port: u16) {
        let addr = format!("127.0.0.1:{port}");
        let healthy = || {
            http_request(&addr, "GET", "/healthz", &[], b"", Duration::from_secs(2))
                .is_ok_and(|answer| answer.status == 200)
        };
        match self.process.wait_until_serving(START_LIMIT, port, healthy) {
            Ok(()) => {}
            Err(StartFailure::Exited(status)) => {
                panic!(
                    "the service exited while starting ({status}):\n{}",
                    self.log_tail()
                )
            }
            Err(StartFailure::NotReady(waited)) => panic!(
                "the service did not answer /healthz on {addr} within {waited:?}:\n{}",
                self.log_tail()
            ),
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Kills it at once (SIGKILL), as a crash or an OOM kill would, and reaps it.
    pub fn kill(&mut self) {
        self.process.kill_now();
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        log_tail(&[self.log.as_path()], 40)
    }
}

/// Sends `signal` (a name such as `STOP`, `CONT` or `KILL`) to `pid` with `kill(1)`.
pub fn send_signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed: {status}");
}

pub use fleetscope_local_process::Suspended;

/// The `fleetscope` binary built from this checkout (the test profile's, as `scripts/demo`
/// builds it), built once per test process.
pub fn fleetscope_binary() -> &'static Path {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY.get_or_init(|| cargo_build_fleetscope(&[]))
}

/// The release `fleetscope` binary built from this checkout (benchmarks), built once per
/// process (a no-op for cargo when it is current).
pub fn fleetscope_release_binary() -> &'static Path {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY.get_or_init(|| cargo_build_fleetscope(&["--release"]))
}

/// Builds `fleetscope` with `cargo build -p fleetscope` and `extra` arguments, and returns the
/// executable cargo reports.
fn cargo_build_fleetscope(extra: &[&str]) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(env!("CARGO"))
        .args(["build", "-p", "fleetscope", "--message-format=json"])
        .args(extra)
        .current_dir(root)
        .output()
        .expect("run cargo build");
    assert!(
        output.status.success(),
        "cargo build -p fleetscope {extra:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "fleetscope")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported no fleetscope executable")
}

/// `binary collector` on `port` over `clickhouse` (database `database`), with an agent token
/// `token(cluster)` per cluster in a tokens file in `dir`, its log in `dir`, and `extra`
/// arguments; waits until it is healthy.
pub fn start_collector(
    binary: &Path,
    dir: &Path,
    clusters: &[String],
    token: impl Fn(&str) -> String,
    (clickhouse, database): (&str, &str),
    port: u16,
    extra: &[&str],
) -> Service {
    let tokens = dir.join("agent-tokens.yaml");
    let mut yaml = String::from("agents:\n");
    for cluster in clusters {
        yaml.push_str(&format!(
            "  - cluster: {cluster}\n    token: {}\n",
            token(cluster)
        ));
    }
    std::fs::write(&tokens, yaml).expect("write the agent tokens file");
    let listen = format!("127.0.0.1:{port}");
    let mut args: Vec<String> = [
        "collector",
        "--agent-tokens",
        tokens.to_str().expect("a UTF-8 path"),
        "--listen",
        &listen,
        "--clickhouse-url",
        clickhouse,
        "--clickhouse-database",
        database,
        "--log",
        "info",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    let log = dir.join(format!("collector-{port}.log"));
    Service::start(binary, &args, &log, port)
}

/// The observed version of each app a hub (`host:port`, no authentication) shows on
/// `cluster`'s page, by app; empty when the hub does not answer 200.
pub fn observed_versions(hub: &str, cluster: &str) -> BTreeMap<String, String> {
    let Ok(answer) = http_request(
        hub,
        "GET",
        &format!("/api/v1/clusters/{cluster}?history_hours=0"),
        &[],
        b"",
        Duration::from_secs(10),
    ) else {
        return BTreeMap::new();
    };
    if answer.status != 200 {
        return BTreeMap::new();
    }
    let page: serde_json::Value =
        serde_json::from_str(&answer.body).expect("the cluster page is JSON");
    page["apps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|app| {
            Some((
                app["app"].as_str()?.to_owned(),
                app["observed_version"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// The API path of the HelmReleases in namespace `apps`.
pub const HELMRELEASES: &str = "/apis/helm.toolkit.fluxcd.io/v2/namespaces/apps/helmreleases";

/// A Flux HelmRelease `name` in namespace `apps`, stamped with `version` as the renderer stamps
/// it (`fleetscope.io/app` label, `fleetscope.io/version` annotation), without a status.
pub fn helm_release(name: &str, version: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {
            "name": name,
            "namespace": "apps",
            "labels": {"fleetscope.io/app": name},
            "annotations": {"fleetscope.io/version": version},
        },
        "spec": {
            "interval": "10m",
            "chart": {"spec": {"chart": name, "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
        },
    })
}

/// A free loopback port.
pub fn free_port() -> u16 {
    fleetscope_local_process::free_port().expect("a free loopback port")
}

/// The seconds since the epoch now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_secs() as i64
}

/// An HTTP answer: its status and its body as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// One HTTP/1.1 request on a new connection (`Connection: close`), waiting at most `limit` for
/// the whole answer. An error when there is no connection or no complete answer in time.
pub fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    limit: Duration,
) -> std::io::Result<Answer> {
    let deadline = Instant::now() + limit;
    let socket_addr: std::net::SocketAddr = addr
        .parse()
        .map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidInput, err))?;
    let mut stream = TcpStream::connect_timeout(&socket_addr, limit)?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.set_write_timeout(Some(limit))?;
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let raw = read_to_end_by(&mut stream, deadline)?;
    parse_answer(&raw).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not an http answer: {:?}",
                String::from_utf8_lossy(&raw[..raw.len().min(200)])
            ),
        )
    })
}

/// Reads until the peer closes, failing with `TimedOut` once `deadline` passes.
fn read_to_end_by(stream: &mut TcpStream, deadline: Instant) -> std::io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no complete answer in time",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buffer) {
            Ok(0) => return Ok(raw),
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no complete answer in time",
                ))
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
}

/// The position after the blank line that ends an HTTP head.
fn head_end(raw: &[u8]) -> Option<usize> {
    raw.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The value of header `name` (any letter case) in an HTTP head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then_some(value.trim())
    })
}

fn parse_answer(raw: &[u8]) -> Option<Answer> {
    let end = head_end(raw)?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = &raw[end..];
    let body = if header(head, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Some(Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&raw[..line_end]).ok()?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

/// One change a [`ReportingAgent`] made: an object's new version under a change number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Change {
    pub name: String,
    pub change_seq: u64,
    pub version: String,
}

/// A numbered delta, ready to send.
#[derive(Debug, Clone)]
pub struct PlannedReport {
    pub seq: u64,
    pub changes: Vec<Change>,
    body: String,
}

/// One request of a report and what came of it: the answer, or why there was none.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub seq: u64,
    pub sent: Instant,
    pub answered: Instant,
    pub outcome: Result<Answer, String>,
}

impl Attempt {
    /// Whether the collector acknowledged the report with this request.
    pub fn acknowledged(&self) -> bool {
        self.outcome.as_ref().is_ok_and(|a| a.status == 200)
    }

    pub fn took(&self) -> Duration {
        self.answered - self.sent
    }
}

/// A client that reports like an agent for one cluster: numbered deltas about `objects`
/// HelmReleases (`svc-0`, `svc-1`, …), each report sent until it is acknowledged (a 2xx),
/// oldest first, and every request recorded.
#[derive(Debug)]
pub struct ReportingAgent {
    pub cluster: String,
    addr: String,
    token: Option<String>,
    objects: usize,
    next_seq: u64,
    next_change_seq: u64,
}

impl ReportingAgent {
    /// Reports to the collector at `addr` (`host:port`) with `token` when given.
    pub fn new(cluster: &str, addr: &str, token: Option<&str>, objects: usize) -> ReportingAgent {
        ReportingAgent {
            cluster: cluster.to_owned(),
            addr: addr.to_owned(),
            token: token.map(str::to_owned),
            objects,
            next_seq: 1,
            next_change_seq: 1,
        }
    }

    /// Reports to the collector at `addr` from now on (one that took a dead one's place).
    pub fn set_collector(&mut self, addr: &str) {
        addr.clone_into(&mut self.addr);
    }

    /// The next delta: every object at `version`, each change under a new change number.
    pub fn next_report(&mut self, version: &str) -> PlannedReport {
        let now = unix_now();
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut changes = Vec::with_capacity(self.objects);
        let mut wire = Vec::with_capacity(self.objects);
        for object in 0..self.objects {
            let name = format!("svc-{object}");
            let change_seq = self.next_change_seq;
            self.next_change_seq += 1;
            wire.push(serde_json::json!({
                "change_seq": change_seq,
                "kind": "HelmRelease",
                "namespace": "apps",
                "name": name,
                "app": name,
                "version": version,
                "applied_revision": version,
                "health": "healthy",
                "sync": "unknown",
                "reason": "UpgradeSucceeded",
                "message": format!("upgraded to {version}"),
                "transitioned_at": now,
                "observed_at": now,
            }));
            changes.push(Change {
                name,
                change_seq,
                version: version.to_owned(),
            });
        }
        let body = serde_json::json!({
            "cluster": self.cluster,
            "agent_version": "fault-test",
            "seq": seq,
            "sent_at": now,
            "kind": "delta",
            "changes": wire,
        })
        .to_string();
        PlannedReport { seq, changes, body }
    }

    /// Sends `report` until it is acknowledged: a 429, a 5xx or no answer within
    /// `request_limit` is tried again a quarter of a second later, any other status is an
    /// error carrying the answer, and so is still being unacknowledged at `deadline`. Every
    /// request is appended to `attempts`.
    pub fn deliver(
        &self,
        report: &PlannedReport,
        request_limit: Duration,
        deadline: Instant,
        attempts: &mut Vec<Attempt>,
    ) -> Result<(), String> {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth));
        }
        loop {
            if Instant::now() >= deadline {
                return Err(format!(
                    "{}: report {} was not acknowledged by the deadline",
                    self.cluster, report.seq
                ));
            }
            let sent = Instant::now();
            let outcome = http_request(
                &self.addr,
                "POST",
                "/api/v1/ingest",
                &headers,
                report.body.as_bytes(),
                request_limit,
            )
            .map_err(|err| err.to_string());
            let attempt = Attempt {
                seq: report.seq,
                sent,
                answered: Instant::now(),
                outcome,
            };
            let retry = match &attempt.outcome {
                Ok(answer) if (200..300).contains(&answer.status) => {
                    attempts.push(attempt);
                    return Ok(());
                }
                Ok(answer) if answer.status == 429 || answer.status >= 500 => true,
                Ok(answer) => {
                    let message = format!(
                        "{}: report {} refused with {}: {}",
                        self.cluster, report.seq, answer.status, answer.body
                    );
                    attempts.push(attempt);
                    return Err(message);
                }
                Err(_) => true,
            };
            attempts.push(attempt);
            if retry {
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
}

/// A report as it passed through a [`RecordingProxy`]: what it was and the collector's status
/// (`None` when the collector could not be reached or did not answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedReport {
    pub kind: String,
    pub seq: u64,
    pub change_seqs: Vec<u64>,
    pub status: Option<u16>,
    pub answer: String,
}

/// A plain-HTTP proxy in front of the collector that records every ingest request in the order
/// it arrived, with the report's kind, number and change numbers (gzip bodies decompressed),
/// and the collector's answer. One request per connection: every answer says
/// `Connection: close`. When the collector cannot be reached, the client's connection is
/// closed without an answer, as a refused connection would end it. Stopped when dropped.
#[derive(Debug)]
pub struct RecordingProxy {
    port: u16,
    upstream: Arc<AtomicU16>,
    records: Arc<Mutex<Vec<ProxiedReport>>>,
    stop: Arc<AtomicBool>,
}

impl RecordingProxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:upstream_port`.
    pub fn start(upstream_port: u16) -> RecordingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("the proxy's address").port();
        let proxy = RecordingProxy {
            port,
            upstream: Arc::new(AtomicU16::new(upstream_port)),
            records: Arc::default(),
            stop: Arc::default(),
        };
        let (upstream, records, stop) = (
            proxy.upstream.clone(),
            proxy.records.clone(),
            proxy.stop.clone(),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let (upstream, records) = (upstream.load(Ordering::SeqCst), records.clone());
                std::thread::spawn(move || proxy_one(client, upstream, &records));
            }
        });
        proxy
    }

    /// Where clients connect, for example `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Forwards later requests to `127.0.0.1:port` (a collector started again elsewhere).
    pub fn set_upstream(&self, port: u16) {
        self.upstream.store(port, Ordering::SeqCst);
    }

    /// Every ingest request so far, in the order they arrived.
    pub fn records(&self) -> Vec<ProxiedReport> {
        self.records.lock().expect("records lock").clone()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn proxy_one(mut client: TcpStream, upstream: u16, records: &Mutex<Vec<ProxiedReport>>) {
    let limit = Duration::from_secs(90);
    let _ = client.set_read_timeout(Some(limit));
    // The head, then the body by its Content-Length.
    let mut raw = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    let end = loop {
        if let Some(end) = head_end(&raw) {
            break end;
        }
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
        }
    };
    let Ok(head) = std::str::from_utf8(&raw[..end]).map(str::to_owned) else {
        return;
    };
    let length: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while raw.len() < end + length {
        match client.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
        }
    }
    let body = raw[end..end + length].to_vec();
    let gzip = header(&head, "content-encoding").is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
    let report = decode_report(&body, gzip);
    let is_ingest = head.starts_with("POST /api/v1/ingest");

    // The same request with `Connection: close`, so that the collector's answer ends with EOF.
    let mut forwarded: String = head
        .trim_end_matches("\r\n")
        .split("\r\n")
        .filter(|line| {
            !line
                .split_once(':')
                .is_some_and(|(key, _)| key.trim().eq_ignore_ascii_case("connection"))
        })
        .map(|line| format!("{line}\r\n"))
        .collect();
    forwarded.push_str("Connection: close\r\n\r\n");
    let answer = TcpStream::connect(("127.0.0.1", upstream)).and_then(|mut server| {
        server.set_write_timeout(Some(limit))?;
        server.write_all(forwarded.as_bytes())?;
        server.write_all(&body)?;
        read_to_end_by(&mut server, Instant::now() + limit)
    });
    let parsed = answer.as_ref().ok().and_then(|raw| parse_answer(raw));
    if is_ingest {
        let (kind, seq, change_seqs) = report.unwrap_or_default();
        records.lock().expect("records lock").push(ProxiedReport {
            kind,
            seq,
            change_seqs,
            status: parsed.as_ref().map(|a| a.status),
            answer: parsed.as_ref().map(|a| a.body.clone()).unwrap_or_default(),
        });
    }
    match answer {
        Ok(raw) if parsed.is_some() => {
            let _ = client.write_all(&raw);
        }
        // No answer: close the connection without one.
        _ => {}
    }
    let _ = client.shutdown(Shutdown::Both);
}

/// A report body's kind, number and change numbers.
fn decode_report(body: &[u8], gzip: bool) -> Option<(String, u64, Vec<u64>)> {
    let json = if gzip {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(body)
            .read_to_end(&mut plain)
            .ok()?;
        plain
    } else {
        body.to_vec()
    };
    let value: serde_json::Value = serde_json::from_slice(&json).ok()?;
    let kind = value.get("kind")?.as_str()?.to_owned();
    let seq = value.get("seq")?.as_u64()?;
    let change_seqs = value
        .get("changes")
        .and_then(|c| c.as_array())
        .map(|changes| {
            changes
                .iter()
                .filter_map(|c| c.get("change_seq")?.as_u64())
                .collect()
        })
        .unwrap_or_default();
    Some((kind, seq, change_seqs))
}

/// A report waiting in an agent's spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpooledReport {
    pub seq: u64,
    pub kind: String,
    pub changes: Vec<Change>,
}

/// The reports waiting in the agent's spool directory `dir`, oldest first (by their file
/// names, which carry the report number). A file the agent removes while this reads is left out.
pub fn spooled_reports(dir: &Path) -> Vec<SpooledReport> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("report-") && n.ends_with(".json.gz"))
        })
        .collect();
    files.sort();
    let mut reports = Vec::new();
    for file in files {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut plain)
            .unwrap_or_else(|err| panic!("{} is not gzip: {err}", file.display()));
        let value: serde_json::Value = serde_json::from_slice(&plain)
            .unwrap_or_else(|err| panic!("{} is not a report: {err}", file.display()));
        let text = |v: &serde_json::Value, key: &str| {
            v.get(key)
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let changes = value
            .get("changes")
            .and_then(|c| c.as_array())
            .map(|changes| {
                changes
                    .iter()
                    .map(|c| Change {
                        name: text(c, "name"),
                        change_seq: c
                            .get("change_seq")
                            .and_then(|s| s.as_u64())
                            .unwrap_or_default(),
                        version: text(c, "version"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        reports.push(SpooledReport {
            seq: value
                .get("seq")
                .and_then(|s| s.as_u64())
                .unwrap_or_default(),
            kind: text(&value, "kind"),
            changes,
        });
    }
    reports
}

#[derive(Debug, clickhouse::Row, serde::Deserialize)]
struct StoredChangeRow {
    object_name: String,
    seq: u64,
    version: String,
    copies: u64,
}

/// For one cluster, every change `observed_transitions` holds, keyed by (object name, change
/// number): its version and how many rows remain once duplicates collapse (`FINAL`), which is
/// 1 unless the same change was stored under two different sort keys.
pub async fn stored_changes(
    url: &str,
    database: &str,
    cluster: &str,
) -> BTreeMap<(String, u64), (String, u64)> {
    let client = clickhouse::Client::default()
        .with_url(url)
        .with_database(database)
        // ClickHouse 18.16 knows no RowBinaryWithNamesAndTypes, which validation asks for.
        .with_validation(false);
    let rows: Vec<StoredChangeRow> = client
        .query(
            "SELECT object_name, seq, any(version) AS version, count() AS copies \
             FROM observed_transitions FINAL WHERE cluster_id = ? \
             GROUP BY object_name, seq ORDER BY object_name, seq",
        )
        .bind(cluster)
        .fetch_all()
        .await
        .unwrap_or_else(|err| panic!("read the stored changes of {cluster}: {err}"));
    rows.into_iter()
        .map(|r| ((r.object_name, r.seq), (r.version, r.copies)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_with_and_without_chunks() {
        let plain = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(
            parse_answer(plain),
            Some(Answer {
                status: 503,
                body: "{}".into()
            })
        );
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(
            parse_answer(chunked),
            Some(Answer {
                status: 200,
                body: "abcde".into()
            })
        );
        assert_eq!(parse_answer(b"HTTP/1.1 200 OK\r\n"), None);
    }

    #[test]
    fn reports_are_numbered_in_order_and_changes_are_numbered_per_object() {
        let mut agent = ReportingAgent::new("plant-1", "127.0.0.1:1", None, 2);
        let first = agent.next_report("1.0.1");
        let second = agent.next_report("1.0.2");
        assert_eq!((first.seq, second.seq), (1, 2));
        let numbers: Vec<(String, u64)> = first
            .changes
            .iter()
            .chain(&second.changes)
            .map(|c| (c.name.clone(), c.change_seq))
            .collect();
        assert_eq!(
            numbers,
            [("svc-0", 1), ("svc-1", 2), ("svc-0", 3), ("svc-1", 4)]
                .map(|(n, s)| (n.to_owned(), s))
        );
        let body: serde_json::Value = serde_json::from_str(&second.body).unwrap();
        assert_eq!(body["seq"], 2);
        assert_eq!(body["changes"][1]["version"], "1.0.2");
        assert_eq!(
            decode_report(second.body.as_bytes(), false),
            Some(("delta".into(), 2, vec![3, 4]))
        );
    }
}
