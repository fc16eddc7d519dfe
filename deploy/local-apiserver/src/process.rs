//! A child process of the server, with its log, waited for and stopped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fleetscope_local_process::{log_tail, ChildProcess, SpawnError, StartFailure};

use crate::{LocalApiServerError, Result};

/// How long a process gets to start.
const START_LIMIT: Duration = Duration::from_secs(60);

/// How long a process gets to stop gracefully before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A child process with its output in a log file, named in errors.
#[derive(Debug)]
pub(crate) struct Process {
    name: &'static str,
    process: ChildProcess,
    log: PathBuf,
}

impl Process {
    /// Starts `command` in `cwd` with its output in `log`.
    pub(crate) fn spawn(
        name: &'static str,
        command: Command,
        cwd: &Path,
        log: &Path,
    ) -> Result<Process> {
        let process = ChildProcess::spawn(command, cwd, log, log).map_err(|err| match err {
            SpawnError::Log { path, source } => LocalApiServerError::Prepare { path, source },
            SpawnError::Spawn { program, source } => LocalApiServerError::Spawn {
                binary: program,
                source,
            },
        })?;
        Ok(Process {
            name,
            process,
            log: log.to_owned(),
        })
    }

    /// Its process id while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Polls until it listens on `port` and `ready` holds, it exits, or [`START_LIMIT`] passes.
    pub(crate) fn wait_for(
        &mut self,
        port: u16,
        probe: &str,
        ready: impl FnMut() -> bool,
    ) -> Result<()> {
        self.process
            .wait_until_serving(START_LIMIT, port, ready)
            .map_err(|failure| match failure {
                StartFailure::Exited(status) => LocalApiServerError::Exited {
                    process: self.name,
                    status: status.to_string(),
                    log: self.log.clone(),
                    tail: log_tail(&[&self.log], 20),
                },
                StartFailure::NotReady(waited) => LocalApiServerError::NotReady {
                    process: self.name,
                    probe: probe.to_owned(),
                    waited,
                    log: self.log.clone(),
                    tail: log_tail(&[&self.log], 20),
                },
            })
    }

    /// SIGTERM, then SIGKILL after [`STOP_GRACE`].
    pub(crate) fn terminate(&mut self) {
        self.process.terminate(STOP_GRACE);
    }

    /// SIGKILL, at once.
    pub(crate) fn kill_now(&mut self) {
        self.process.kill_now();
    }
}
