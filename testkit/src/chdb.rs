//! Runs statements on the current ClickHouse engine through chdb (embedded, from PyPI), the way
//! the SQL conformance test checks that everything the store sends also works on current
//! ClickHouse.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

/// Environment variable naming a Python that has chdb installed.
pub const PYTHON_ENV: &str = "FLEETSCOPE_PYTHON";

#[derive(Debug, Clone, Serialize)]
pub struct Statement {
    pub name: String,
    pub sql: String,
    /// Return the result as TabSeparated text.
    pub fetch: bool,
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
    let request = serde_json::json!({ "database": database, "statements": statements });
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(request.to_string().as_bytes())
        .expect("send statements to the chdb runner");
    let output = child.wait_with_output().expect("chdb runner finishes");
    assert!(
        output.status.success(),
        "the chdb runner failed ({}): {}; {hint}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the chdb runner writes JSON")
}
