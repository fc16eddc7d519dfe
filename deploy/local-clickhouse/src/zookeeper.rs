//! A private ZooKeeper as a child process: standalone, its own data directory, a free loopback
//! port and no admin server. ClickHouse needs one for replicated tables and `ON CLUSTER` DDL.
//! It comes from Debian's `zookeeper` package (Java), started directly with its jar.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fleetscope_local_process::{log_tail, ChildProcess, SpawnError, StartFailure};

/// Environment variable naming the `java` binary, when it is not on the `PATH`.
pub const JAVA_ENV: &str = "FLEETSCOPE_JAVA";
/// Environment variable naming ZooKeeper's jar, when it is not where Debian puts it.
pub const ZOOKEEPER_JAR_ENV: &str = "FLEETSCOPE_ZOOKEEPER_JAR";

const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";
const INSTALL_HINT: &str =
    "install it with `scripts/install-prereqs --tests` (or `apt-get install -y zookeeper`)";

#[derive(Debug, thiserror::Error)]
pub enum ZooKeeperError {
    #[error("ZooKeeper was not found (looked for java at ${JAVA_ENV} and on the PATH, and for the jar at ${ZOOKEEPER_JAR_ENV} and {DEBIAN_JAR}); {INSTALL_HINT}")]
    NotInstalled,
    #[error("could not prepare the ZooKeeper directory {path}: {source}")]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not start ZooKeeper with {java}: {source}")]
    Spawn {
        java: PathBuf,
        source: std::io::Error,
    },
    #[error("ZooKeeper exited during start-up ({status}); last lines of its output:\n{log}")]
    Exited { status: String, log: String },
    #[error(
        "ZooKeeper did not serve requests within {waited:?}; last lines of its output:\n{log}"
    )]
    NotReady { waited: Duration, log: String },
}

/// The `java` binary and ZooKeeper's jar (whose manifest names the libraries it needs).
pub fn find_zookeeper() -> Result<(PathBuf, PathBuf), ZooKeeperError> {
    let java = match std::env::var_os(JAVA_ENV) {
        Some(explicit) => Some(PathBuf::from(explicit)).filter(|p| p.is_file()),
        None => std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("java"))
                .find(|candidate| candidate.is_file())
        }),
    };
    let jar = std::env::var_os(ZOOKEEPER_JAR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEBIAN_JAR));
    match java {
        Some(java) if jar.is_file() => Ok((java, jar)),
        _ => Err(ZooKeeperError::NotInstalled),
    }
}

/// A running private ZooKeeper. Dropping it kills the process and removes its directory.
#[derive(Debug)]
pub struct LocalZooKeeper {
    /// Before `home`: fields drop in order, so the process is gone before its directory is.
    process: Option<ChildProcess>,
    home: tempfile::TempDir,
    port: u16,
}

impl LocalZooKeeper {
    /// Starts ZooKeeper on a free loopback port in a new temporary directory and waits until it
    /// serves requests.
    pub fn start() -> Result<LocalZooKeeper, ZooKeeperError> {
        let (java, jar) = find_zookeeper()?;
        let mut last_error = None;
        // A port found free can be taken before ZooKeeper binds it: retry with another.
        for _ in 0..3 {
            let home = tempfile::Builder::new()
                .prefix("fleetscope-zookeeper-")
                .tempdir()
                .map_err(|source| ZooKeeperError::Prepare {
                    path: std::env::temp_dir(),
                    source,
                })?;
            let port = fleetscope_local_process::free_port().map_err(|source| {
                ZooKeeperError::Prepare {
                    path: home.path().to_owned(),
                    source,
                }
            })?;
            let mut keeper = LocalZooKeeper {
                process: None,
                home,
                port,
            };
            match keeper.launch(&java, &jar) {
                Ok(()) => return Ok(keeper),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.expect("at least one attempt was made"))
    }

    fn launch(&mut self, java: &Path, jar: &Path) -> Result<(), ZooKeeperError> {
        let home = self.home.path().to_owned();
        let prepare = |path: &Path, result: std::io::Result<()>| {
            result.map_err(|source| ZooKeeperError::Prepare {
                path: path.to_owned(),
                source,
            })
        };
        let data = home.join("data");
        prepare(&data, std::fs::create_dir_all(&data))?;
        let config = home.join("zoo.cfg");
        let text = format!(
            "# Written by Fleetscope for a private, loopback-only ZooKeeper.\n\
             tickTime=500\n\
             dataDir={data}\n\
             clientPort={port}\n\
             clientPortAddress=127.0.0.1\n\
             maxClientCnxns=0\n\
             admin.enableServer=false\n\
             4lw.commands.whitelist=ruok,srvr\n",
            data = data.display(),
            port = self.port,
        );
        prepare(&config, std::fs::write(&config, text))?;
        let log = home.join("zookeeper.log");
        let mut command = Command::new(java);
        // A small heap and the quick JIT: this ZooKeeper serves a handful of test servers.
        command
            .args([
                "-Xms32m",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true",
                "-Dzookeeper.admin.enableServer=false",
            ])
            .arg("-cp")
            .arg(jar)
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(&config);
        let process = ChildProcess::spawn(command, &home, &log, &log).map_err(|err| match err {
            SpawnError::Log { path, source } => ZooKeeperError::Prepare { path, source },
            SpawnError::Spawn { source, .. } => ZooKeeperError::Spawn {
                java: java.to_owned(),
                source,
            },
        })?;
        let port = self.port;
        let process = self.process.insert(process);
        process
            .wait_until_serving(Duration::from_secs(60), port, || serves(port))
            .map_err(|failure| {
                let log = log_tail(&[&log], 15);
                match failure {
                    StartFailure::Exited(status) => ZooKeeperError::Exited {
                        status: status.to_string(),
                        log,
                    },
                    StartFailure::NotReady(waited) => ZooKeeperError::NotReady { waited, log },
                }
            })
    }

    /// The client port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(ChildProcess::pid)
    }

    /// True while ZooKeeper serves requests.
    pub fn is_ok(&self) -> bool {
        serves(self.port)
    }

    /// Stops ZooKeeper (SIGTERM, then SIGKILL after 10 s) and removes its directory.
    pub fn stop(mut self) {
        if let Some(process) = self.process.as_mut() {
            process.terminate(Duration::from_secs(10));
        }
    }
}

/// True while the ZooKeeper on `port` serves requests (`ruok` is answered earlier, before it
/// does).
fn serves(port: u16) -> bool {
    four_letter_word(port, "srvr").is_some_and(|answer| answer.contains("Mode: "))
}

/// Sends one of ZooKeeper's four-letter commands and returns the answer.
fn four_letter_word(port: u16, word: &str) -> Option<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(word.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_and_stops() {
        let started = std::time::Instant::now();
        let keeper = LocalZooKeeper::start().expect("start a private ZooKeeper");
        eprintln!("ZooKeeper answered after {:?}", started.elapsed());
        assert!(keeper.is_ok());
        assert_eq!(
            four_letter_word(keeper.port(), "ruok").as_deref(),
            Some("imok")
        );
        let srvr = four_letter_word(keeper.port(), "srvr").expect("srvr answers");
        assert!(srvr.contains("Mode: standalone"), "{srvr}");
        let port = keeper.port();
        let dir = keeper.home.path().to_owned();
        keeper.stop();
        assert!(four_letter_word(port, "ruok").is_none(), "stopped");
        assert!(!dir.exists(), "directory removed");
    }
}
