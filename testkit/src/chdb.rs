//! Runs statements on the current ClickHouse engine through chdb (embedded, from PyPI), the way
//! the SQL conformance tests check that everything the store and the dashboards send also works
//! on current ClickHouse.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Environment variable naming a Python that has chdb installed.
pub const PYTHON_ENV: &str = "FLEETSCOPE_PYTHON";

/// The longest a run may take before the test fails (a hung embedded engine is a failure, not
/// a test that never ends).
const DEADLINE: Duration = Duration::from_secs(600);

/// What the runner does with a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Run it; no result.
    Execute,
    /// Run it and return the result as TabSeparated text.
    Fetch,
    /// Only parse it (`EXPLAIN AST`).
    Parse,
}

#[derive(Debug, Clone, Serialize)]
pub struct Statement {
    pub name: String,
    pub sql: String,
    pub mode: Mode,
}

impl Statement {
    pub fn execute(name: impl Into<String>, sql: impl Into<String>) -> Statement {
        Statement {
            name: name.into(),
            sql: sql.into(),
            mode: Mode::Execute,
        }
    }

    pub fn fetch(name: impl Into<String>, sql: impl Into<String>) -> Statement {
        Statement {
            name: name.into(),
            sql: sql.into(),
            mode: Mode::Fetch,
        }
    }

    pub fn parse(name: impl Into<String>, sql: impl Into<String>) -> Statement {
        Statement {
            name: name.into(),
            sql: sql.into(),
            mode: Mode::Parse,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct StatementResult {
    pub name: String,
    pub ok: bool,
    pub output: String,
    pub error: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ChdbRun {
    pub version: String,
    pub results: Vec<StatementResult>,
}

impl ChdbRun {
    /// Panics, naming every statement that failed with its error, unless all of them ran.
    pub fn assert_all_ran(&self) {
        let failures: Vec<String> = self
            .results
            .iter()
            .filter(|r| !r.ok)
            .map(|r| format!("{}: {}", r.name, r.error))
            .collect();
        assert!(
            failures.is_empty(),
            "on ClickHouse {}:\n{}",
            self.version,
            failures.join("\n")
        );
    }

    /// The result of the statement named `name`.
    pub fn result(&self, name: &str) -> &StatementResult {
        self.results
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("{name} ran on current ClickHouse"))
    }
}

/// The Python with chdb: `$FLEETSCOPE_PYTHON`, else the environment the install script makes.
pub fn python() -> PathBuf {
    if let Some(path) = std::env::var_os(PYTHON_ENV) {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/fleetscope/py/bin/python")
}

/// Runs `statements` in order in a fresh chdb session with `database` as the current database.
/// Panics with what to install when chdb is not there.
pub fn run(database: &str, statements: &[Statement]) -> ChdbRun {
    run_session(Some(database), None, statements, DEADLINE)
}

/// [`run`] allowed `deadline` instead of 10 minutes (a benchmark's large writes).
pub fn run_within(database: &str, statements: &[Statement], deadline: Duration) -> ChdbRun {
    run_session(Some(database), None, statements, deadline)
}

/// Runs `statements` in a fresh chdb session started with a server configuration file (macros,
/// `remote_servers`, ZooKeeper), in no particular database.
pub fn run_configured(config: &Path, statements: &[Statement]) -> ChdbRun {
    run_session(None, Some(config), statements, DEADLINE)
}

fn run_session(
    database: Option<&str>,
    config: Option<&Path>,
    statements: &[Statement],
    deadline: Duration,
) -> ChdbRun {
    let python = python();
    let hint = "the current ClickHouse engine for SQL checks comes from chdb: run scripts/install-prereqs --tests \
(it creates ~/.cache/fleetscope/py with `pip install chdb`), or point FLEETSCOPE_PYTHON at a Python that has chdb";
    assert!(python.is_file(), "{} not found; {hint}", python.display());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("chdb_runner.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("could not run {}: {err}; {hint}", python.display()));
    let request = serde_json::json!({
        "database": database,
        "config": config,
        "statements": statements,
    });
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(request.to_string().as_bytes())
        .expect("send statements to the chdb runner");
    // Read both pipes while waiting, so a large answer cannot stall the runner.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).map(|_| bytes)
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout is piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr is piped")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the chdb runner") {
            break status;
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the chdb runner did not finish within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout
        .join()
        .expect("stdout reader")
        .expect("runner output");
    let stderr = stderr.join().expect("stderr reader").unwrap_or_default();
    assert!(
        status.success(),
        "the chdb runner failed ({status}): {}; {hint}",
        String::from_utf8_lossy(&stderr)
    );
    serde_json::from_slice(&stdout).unwrap_or_else(|err| {
        panic!(
            "the chdb runner writes JSON: {err}: {}",
            String::from_utf8_lossy(&stdout)
        )
    })
}
