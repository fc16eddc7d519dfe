//! A private ZooKeeper as a child process: standalone, its own data directory, a free loopback
//! port and no admin server. ClickHouse needs one for replicated tables and `ON CLUSTER` DDL.
//! It comes from Debian's `zookeeper` package (Java), started directly with its jar.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

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
    child: Option<Child>,
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
            let port = free_port(home.path())?;
            let mut keeper = LocalZooKeeper {
                child: None,
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
        let out = std::fs::File::create(&log).map_err(|source| ZooKeeperError::Prepare {
            path: log.clone(),
            source,
        })?;
        let err = out.try_clone().map_err(|source| ZooKeeperError::Prepare {
            path: log.clone(),
            source,
        })?;
        let child = Command::new(java)
            // A small heap and the quick JIT: this ZooKeeper serves a handful of test servers.
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
            .arg(&config)
            .current_dir(&home)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| ZooKeeperError::Spawn {
                java: java.to_owned(),
                source,
            })?;
        self.child = Some(child);
        let limit = Duration::from_secs(60);
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(ZooKeeperError::Exited {
                        status: status.to_string(),
                        log: self.log_tail(),
                    });
                }
            }
            if self.is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(ZooKeeperError::NotReady {
            waited: limit,
            log: self.log_tail(),
        })
    }

    fn log_tail(&self) -> String {
        let content =
            std::fs::read_to_string(self.home.path().join("zookeeper.log")).unwrap_or_default();
        let lines: Vec<&str> = content.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        if tail.is_empty() {
            "(empty)".to_owned()
        } else {
            tail
        }
    }

    /// The client port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while ZooKeeper serves requests (`ruok` is answered earlier, before it does).
    pub fn is_ok(&self) -> bool {
        four_letter_word(self.port, "srvr").is_some_and(|answer| answer.contains("Mode: "))
    }

    /// Stops ZooKeeper (SIGTERM, then SIGKILL after 10 s) and removes its directory.
    pub fn stop(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
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

    fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for LocalZooKeeper {
    fn drop(&mut self) {
        self.kill_now();
    }
}

fn free_port(home: &Path) -> Result<u16, ZooKeeperError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|source| ZooKeeperError::Prepare {
            path: home.to_owned(),
            source,
        })
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
        let started = Instant::now();
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
