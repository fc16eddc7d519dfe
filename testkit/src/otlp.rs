//! A real OTLP/HTTP trace receiver for tests: the protobuf stubs OpenTelemetry publishes, behind
//! a small Python server that writes every span it receives as one JSON line.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const INSTALL_HINT: &str = "the OTLP receiver for trace tests needs the Python package \
opentelemetry-proto: run scripts/install-prereqs --tests (it installs it into \
~/.cache/fleetscope/py), or point FLEETSCOPE_PYTHON at a Python that has it";

/// How long the receiver may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running receiver on a free loopback port, stopped when dropped. Each span is a JSON object
/// with `name`, `trace_id`, `span_id`, `parent_span_id` (hex, empty for a root), `kind`,
/// `status_code` (OTLP numbers), `scope`, and `attributes` and `resource` as maps from key to
/// the value as a string.
#[derive(Debug)]
pub struct OtlpReceiver {
    child: Child,
    port: u16,
    spans_file: PathBuf,
    log_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl OtlpReceiver {
    /// Starts the receiver and waits until it listens. Panics with what to install when the
    /// Python packages are missing.
    pub fn start() -> OtlpReceiver {
        let python = crate::chdb::python();
        assert!(
            python.is_file(),
            "{} not found; {INSTALL_HINT}",
            python.display()
        );
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let spans_file = dir.path().join("spans.jsonl");
        let log_file = dir.path().join("receiver.log");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("otlp_receiver.py");
        let log = std::fs::File::create(&log_file).expect("create the receiver's log");
        let mut child = Command::new(&python)
            .arg(&script)
            .arg(&spans_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| {
                panic!("could not run {}: {err}; {INSTALL_HINT}", python.display())
            });

        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(read.map(|_| line));
        });
        let first_line = receiver.recv_timeout(START_TIMEOUT);
        let port = first_line
            .as_ref()
            .ok()
            .and_then(|read| read.as_ref().ok())
            .and_then(|line| line.trim().strip_prefix("listening "))
            .and_then(|port| port.parse::<u16>().ok());
        let Some(port) = port else {
            let _ = child.kill();
            let status = child.wait().expect("wait for the receiver");
            let log = std::fs::read_to_string(&log_file).unwrap_or_default();
            if status.code() == Some(3) {
                panic!("{}; {INSTALL_HINT}", log.trim());
            }
            panic!(
                "the OTLP receiver did not start ({status}, first line {first_line:?}): {}",
                log.trim()
            );
        };
        OtlpReceiver {
            child,
            port,
            spans_file,
            log_file,
            _dir: dir,
        }
    }

    /// The receiver's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The URL traces are posted to.
    pub fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.endpoint())
    }

    /// Every span received so far, in the order received.
    pub fn spans(&self) -> Vec<serde_json::Value> {
        let text = match std::fs::read_to_string(&self.spans_file) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(err) => panic!("read {}: {err}", self.spans_file.display()),
        };
        text.lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|err| panic!("the receiver wrote {line:?}: {err}"))
            })
            .collect()
    }

    /// What the receiver wrote to its standard error (tracebacks of failed requests).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
