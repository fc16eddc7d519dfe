//! A child process the way the private servers of the demo and the tests need one (ClickHouse,
//! ZooKeeper, etcd, the Kubernetes API server): its output in log files, started and polled until
//! a probe says it serves (or it exits, or a time limit passes), stopped with SIGTERM and then
//! SIGKILL, and killed when dropped so that a failing test leaves nothing running.

#![forbid(unsafe_code)]

pub mod haproxy;

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How often readiness and exit are polled.
const POLL: Duration = Duration::from_millis(50);

/// Why a process did not become ready. The caller adds its own context and log tail.
#[derive(Debug)]
pub enum StartFailure {
    /// It exited during start-up.
    Exited(ExitStatus),
    /// The probe never held within the limit.
    NotReady(Duration),
}

/// A running child process. Dropping it kills the process (no grace).
#[derive(Debug)]
pub struct ChildProcess {
    child: Option<Child>,
}

impl ChildProcess {
    /// Starts `command` in `cwd` with stdin closed, stdout into `stdout_log` and stderr into
    /// `stderr_log` (the same file when both name it).
    pub fn spawn(
        mut command: Command,
        cwd: &Path,
        stdout_log: &Path,
        stderr_log: &Path,
    ) -> Result<ChildProcess, SpawnError> {
        let prepare = |path: &Path| {
            File::create(path).map_err(|source| SpawnError::Log {
                path: path.to_owned(),
                source,
            })
        };
        let stdout = prepare(stdout_log)?;
        let stderr = if stderr_log == stdout_log {
            stdout.try_clone().map_err(|source| SpawnError::Log {
                path: stderr_log.to_owned(),
                source,
            })?
        } else {
            prepare(stderr_log)?
        };
        let child = command
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|source| SpawnError::Spawn {
                program: PathBuf::from(command.get_program()),
                source,
            })?;
        Ok(ChildProcess { child: Some(child) })
    }

    /// Polls until this process listens on `port` and `ready` holds, the process exits, or
    /// `limit` passes. The port check comes first: a port picked as free can be taken by
    /// another server before this one binds it, and that server would answer the probe.
    pub fn wait_until_serving(
        &mut self,
        limit: Duration,
        port: u16,
        mut ready: impl FnMut() -> bool,
    ) -> Result<(), StartFailure> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(StartFailure::Exited(status));
                }
            }
            let ours = self.pid().is_some_and(|pid| listens_on(pid, port));
            if ours && ready() {
                return Ok(());
            }
            std::thread::sleep(POLL);
        }
        Err(StartFailure::NotReady(limit))
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stops it: SIGTERM, then SIGKILL when it has not exited after `grace`.
    pub fn terminate(&mut self, grace: Duration) {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills it at once and reaps it.
    pub fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Lets it run on after this value is gone; its process id.
    pub fn detach(mut self) -> Option<u32> {
        self.child.take().map(|child| child.id())
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Why a child process could not be started.
#[derive(Debug)]
pub enum SpawnError {
    /// Its log file could not be created.
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
}

/// True when process `pid` holds a socket listening on TCP `port` (IPv4 or IPv6), read from
/// `/proc`.
pub fn listens_on(pid: u32, port: u16) -> bool {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address is `ADDRESS:PORT` in hex; state 0A is LISTEN; field 9 the inode.
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let listening_port = local
                .rsplit_once(':')
                .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok());
            if *state == "0A" && listening_port == Some(port) {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    })
}

/// The last `lines` lines of each of `logs` that exists, or `(empty)`.
pub fn log_tail(logs: &[&Path], lines: usize) -> String {
    let mut tail = Vec::new();
    for log in logs {
        if let Ok(content) = std::fs::read_to_string(log) {
            let all: Vec<&str> = content.lines().collect();
            tail.extend(
                all[all.len().saturating_sub(lines)..]
                    .iter()
                    .map(|l| l.to_string()),
            );
        }
    }
    if tail.is_empty() {
        "(empty)".to_owned()
    } else {
        tail.join("\n")
    }
}

/// A loopback port nothing listens on now (it can be taken before the caller binds it, so
/// callers retry a failed start on another).
pub fn free_port() -> std::io::Result<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    #[test]
    fn waits_for_readiness_and_stops_with_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let flag = dir.path().join("ready");
        let script = format!(
            "trap 'echo stopping; exit 0' TERM; echo starting; sleep 0.2; touch {}; while :; do sleep 0.05; done",
            flag.display()
        );
        // A port this test holds itself: the shell never listens on it, so the wait must run
        // out even though the probe holds.
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let mut process = ChildProcess::spawn(shell(&script), dir.path(), &log, &log).unwrap();
        match process.wait_until_serving(Duration::from_millis(500), port, || flag.exists()) {
            Err(StartFailure::NotReady(_)) => {}
            other => panic!("another process's port counted as ours: {other:?}"),
        }
        assert!(flag.exists(), "the probe itself held");
        // A process that does listen on its port is ready.
        let port = free_port().unwrap();
        let listen = format!(
            "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(30)"
        );
        let mut command = Command::new("python3");
        command.args(["-c", &listen]);
        let server_log = dir.path().join("server.log");
        let mut server =
            ChildProcess::spawn(command, dir.path(), &server_log, &server_log).unwrap();
        server
            .wait_until_serving(Duration::from_secs(10), port, || true)
            .expect("its own listening socket counts");
        drop(server);
        let pid = process.pid().expect("running");
        process.terminate(Duration::from_secs(10));
        assert!(process.pid().is_none());
        assert!(log_tail(&[&log], 5).contains("starting"), "{pid}");
        assert!(log_tail(&[&log], 5).contains("stopping"));
    }

    #[test]
    fn an_exit_during_start_up_and_a_probe_that_never_holds_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("out.log"), dir.path().join("err.log"));
        let mut exits =
            ChildProcess::spawn(shell("echo bad config >&2; exit 3"), dir.path(), &out, &err)
                .unwrap();
        match exits.wait_until_serving(Duration::from_secs(10), free_port().unwrap(), || true) {
            Err(StartFailure::Exited(status)) => assert_eq!(status.code(), Some(3)),
            other => panic!("{other:?}"),
        }
        assert_eq!(log_tail(&[&out, &err], 5), "bad config");
        let mut hangs = ChildProcess::spawn(shell("sleep 30"), dir.path(), &out, &err).unwrap();
        match hangs.wait_until_serving(Duration::from_millis(300), free_port().unwrap(), || true) {
            Err(StartFailure::NotReady(waited)) => assert_eq!(waited, Duration::from_millis(300)),
            other => panic!("{other:?}"),
        }
        let pid = hangs.pid().unwrap();
        drop(hangs);
        // Dropped means killed and reaped: no process of that id runs `sleep` any more.
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(!cmdline.contains("sleep"), "{cmdline:?}");
    }

    #[test]
    fn tells_whose_socket_listens_on_a_port() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listens_on(std::process::id(), port), "this process listens");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let mut other = ChildProcess::spawn(shell("sleep 30"), dir.path(), &log, &log).unwrap();
        let pid = other.pid().unwrap();
        assert!(!listens_on(pid, port), "another process does not");
        other.kill_now();
        drop(listener);
        assert!(
            !listens_on(std::process::id(), port),
            "nobody listens any more"
        );
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let err = ChildProcess::spawn(
            Command::new("/nonexistent/fleetscope-test-binary"),
            dir.path(),
            &log,
            &log,
        )
        .unwrap_err();
        assert!(matches!(err, SpawnError::Spawn { .. }), "{err:?}");
    }
}

/// A process stopped with SIGSTOP, continued with SIGCONT when dropped (so that a failing test
/// or an interrupted run does not leave it stopped).
///
/// `kill` returns once the signal is queued, but a multi-threaded process stops only when one
/// of its threads takes the signal; on a loaded machine its other threads can go on serving for
/// a while. [`Suspended::stop`] therefore returns only when every thread is seen stopped.
#[derive(Debug)]
pub struct Suspended(u32);

impl Suspended {
    /// Sends SIGSTOP to `pid` and waits (at most 10 s) until all its threads stop.
    pub fn stop(pid: u32) -> Result<Suspended, String> {
        kill(Pid::from_raw(pid as i32), Signal::SIGSTOP)
            .map_err(|err| format!("SIGSTOP to {pid}: {err}"))?;
        let stopped = Suspended(pid);
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let states = thread_states(pid);
            if !states.is_empty() && states.iter().all(|state| matches!(state, 'T' | 't')) {
                return Ok(stopped);
            }
            if Instant::now() >= until {
                return Err(format!(
                    "process {pid} did not stop within 10 s of SIGSTOP; thread states {states:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Suspended {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0 as i32), Signal::SIGCONT);
    }
}

/// The state letter of every thread of `pid` (`R`, `S`, `T` stopped…), from /proc; empty when
/// the process is gone.
fn thread_states(pid: u32) -> Vec<char> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
            stat[stat.rfind(')')? + 1..].trim_start().chars().next()
        })
        .collect()
}
