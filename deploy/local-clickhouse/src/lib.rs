//! A private ClickHouse server as a child process: its own configuration and data directory,
//! free loopback ports, started, waited for and stopped. The local demo and every integration
//! test use it, so none of them depends on a server someone left running.

#![forbid(unsafe_code)]

mod clickhouse_cluster;
mod zookeeper;

pub use clickhouse_cluster::{replica_macro, shard_macro, ClusterSpec, LocalClickHouseCluster};
pub use zookeeper::{find_zookeeper, LocalZooKeeper, JAVA_ENV, ZOOKEEPER_JAR_ENV};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fleetscope_local_process::{log_tail, ChildProcess, SpawnError, StartFailure};

/// Environment variable naming the `clickhouse-server` binary, when it is not in a usual place.
pub const SERVER_BINARY_ENV: &str = "FLEETSCOPE_CLICKHOUSE_SERVER";

const INSTALL_HINT: &str = "install it with `scripts/install-prereqs` (or `apt-get install -y clickhouse-server clickhouse-client`)";

#[derive(Debug, thiserror::Error)]
pub enum LocalClickHouseError {
    #[error("clickhouse-server was not found (looked at ${SERVER_BINARY_ENV}, PATH, /usr/sbin and /usr/bin); {INSTALL_HINT}")]
    NotInstalled,
    #[error("could not prepare the server directory {path}: {source}")]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("could not start {binary}: {source}")]
    Spawn {
        binary: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "clickhouse-server exited during start-up ({status}); last lines of its error log:\n{log}"
    )]
    Exited { status: String, log: String },
    #[error("clickhouse-server did not answer /ping within {waited:?}; last lines of its error log:\n{log}")]
    NotReady { waited: Duration, log: String },
    #[error("{0}")]
    ZooKeeper(#[from] zookeeper::ZooKeeperError),
}

/// Finds the `clickhouse-server` binary: `$FLEETSCOPE_CLICKHOUSE_SERVER`, then `PATH`, then the
/// Debian package's `/usr/sbin`.
pub fn find_server_binary() -> Result<PathBuf, LocalClickHouseError> {
    find_server_binary_in(
        std::env::var_os(SERVER_BINARY_ENV),
        std::env::var_os("PATH"),
    )
}

fn find_server_binary_in(
    explicit: Option<std::ffi::OsString>,
    path: Option<std::ffi::OsString>,
) -> Result<PathBuf, LocalClickHouseError> {
    if let Some(explicit) = explicit {
        let explicit = PathBuf::from(explicit);
        return if explicit.is_file() {
            Ok(explicit)
        } else {
            Err(LocalClickHouseError::NotInstalled)
        };
    }
    let path_dirs = path
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    path_dirs
        .into_iter()
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("clickhouse-server"))
        .find(|candidate| candidate.is_file())
        .ok_or(LocalClickHouseError::NotInstalled)
}

/// Where the server keeps its files: a temporary directory removed on drop, or a directory the
/// caller chose and keeps.
#[derive(Debug)]
enum Home {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl Home {
    fn path(&self) -> &Path {
        match self {
            Home::Temporary(dir) => dir.path(),
            Home::Kept(path) => path,
        }
    }
}

/// A running private ClickHouse server. Dropping it kills the server and removes a temporary
/// directory; [`LocalClickHouse::stop`] shuts it down gracefully.
#[derive(Debug)]
pub struct LocalClickHouse {
    /// Before `home`: fields drop in order, so the server is killed before a temporary
    /// directory is removed.
    process: Option<ChildProcess>,
    home: Home,
    binary: PathBuf,
    http_port: u16,
    tcp_port: u16,
    /// Extra configuration (a whole `config.d` file), for servers that are part of a cluster.
    extra_config: Option<String>,
}

impl LocalClickHouse {
    /// Starts a server in a new temporary directory on free loopback ports and waits until it answers.
    pub fn start() -> Result<LocalClickHouse, LocalClickHouseError> {
        let dir = tempfile::Builder::new()
            .prefix("fleetscope-clickhouse-")
            .tempdir()
            .map_err(|source| LocalClickHouseError::Prepare {
                path: std::env::temp_dir(),
                source,
            })?;
        Self::start_in(Home::Temporary(dir))
    }

    /// Starts a server whose data lives in `dir` (created if needed) and stays after it stops.
    pub fn start_in_dir(dir: impl Into<PathBuf>) -> Result<LocalClickHouse, LocalClickHouseError> {
        Self::start_in(Home::Kept(dir.into()))
    }

    fn start_in(mut home: Home) -> Result<LocalClickHouse, LocalClickHouseError> {
        let binary = find_server_binary()?;
        let mut last_error = None;
        // A port found free can be taken by someone else before the server binds it: retry.
        for _ in 0..3 {
            let (http_port, tcp_port) = (free_port(&home)?, free_port(&home)?);
            let mut server = LocalClickHouse {
                process: None,
                home,
                binary: binary.clone(),
                http_port,
                tcp_port,
                extra_config: None,
            };
            match server.launch() {
                Ok(()) => return Ok(server),
                Err(err) => {
                    last_error = Some(err);
                    home = server.take_home();
                }
            }
        }
        Err(last_error.expect("at least one attempt was made"))
    }

    fn take_home(mut self) -> Home {
        self.kill_now();
        std::mem::replace(&mut self.home, Home::Kept(PathBuf::new()))
    }

    /// Writes the configuration and starts the process, then waits for `/ping`.
    fn launch(&mut self) -> Result<(), LocalClickHouseError> {
        self.spawn()?;
        self.wait_ready(Duration::from_secs(60))
    }

    /// A server on ports chosen by the caller with an extra `config.d` file, not started yet
    /// (a cluster's servers must all know each other's ports before the first one starts).
    pub(crate) fn prepared(
        dir: tempfile::TempDir,
        http_port: u16,
        tcp_port: u16,
        extra_config: String,
    ) -> Result<LocalClickHouse, LocalClickHouseError> {
        Ok(LocalClickHouse {
            process: None,
            home: Home::Temporary(dir),
            binary: find_server_binary()?,
            http_port,
            tcp_port,
            extra_config: Some(extra_config),
        })
    }

    /// Writes the configuration and starts the process without waiting for it.
    pub(crate) fn spawn(&mut self) -> Result<(), LocalClickHouseError> {
        let home = self.home.path().to_owned();
        let prepare = |path: &Path, result: std::io::Result<()>| {
            result.map_err(|source| LocalClickHouseError::Prepare {
                path: path.to_owned(),
                source,
            })
        };
        for sub in ["data", "tmp", "user_files", "format_schemas", "log"] {
            prepare(&home.join(sub), std::fs::create_dir_all(home.join(sub)))?;
        }
        let config = home.join("config.xml");
        prepare(&config, std::fs::write(&config, self.config_xml(&home)))?;
        let users = home.join("users.xml");
        prepare(&users, std::fs::write(&users, USERS_XML))?;
        if let Some(extra) = &self.extra_config {
            // ClickHouse merges every file of `config.d` next to the main file into it.
            let dir = home.join("config.d");
            prepare(&dir, std::fs::create_dir_all(&dir))?;
            let file = dir.join("cluster.xml");
            prepare(&file, std::fs::write(&file, extra))?;
        }
        let mut command = Command::new(&self.binary);
        command.arg(format!("--config-file={}", config.display()));
        let process = ChildProcess::spawn(
            command,
            &home,
            &home.join("log/stdout.log"),
            &home.join("log/stderr.log"),
        )
        .map_err(|err| match err {
            SpawnError::Log { path, source } => LocalClickHouseError::Prepare { path, source },
            SpawnError::Spawn { source, .. } => LocalClickHouseError::Spawn {
                binary: self.binary.clone(),
                source,
            },
        })?;
        self.process = Some(process);
        Ok(())
    }

    pub(crate) fn wait_ready(&mut self, limit: Duration) -> Result<(), LocalClickHouseError> {
        let port = self.http_port;
        let Some(process) = self.process.as_mut() else {
            return Err(LocalClickHouseError::NotReady {
                waited: Duration::ZERO,
                log: "(the server was not started)".to_owned(),
            });
        };
        process
            .wait_until_serving(limit, port, || ping(port))
            .map_err(|failure| match failure {
                StartFailure::Exited(status) => LocalClickHouseError::Exited {
                    status: status.to_string(),
                    log: self.error_log_tail(),
                },
                StartFailure::NotReady(waited) => LocalClickHouseError::NotReady {
                    waited,
                    log: self.error_log_tail(),
                },
            })
    }

    fn config_xml(&self, home: &Path) -> String {
        let home = home.display();
        format!(
            r#"<?xml version="1.0"?>
<!-- Written by Fleetscope for a private, loopback-only server. -->
<yandex>
  <logger>
    <level>warning</level>
    <log>{home}/log/server.log</log>
    <errorlog>{home}/log/server.err.log</errorlog>
    <size>10M</size>
    <count>2</count>
    <console>0</console>
  </logger>
  <timezone>UTC</timezone>
  <listen_host>127.0.0.1</listen_host>
  <http_port>{http}</http_port>
  <tcp_port>{tcp}</tcp_port>
  <path>{home}/data/</path>
  <tmp_path>{home}/tmp/</tmp_path>
  <user_files_path>{home}/user_files/</user_files_path>
  <format_schema_path>{home}/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <max_concurrent_queries>200</max_concurrent_queries>
  <builtin_dictionaries_reload_interval>0</builtin_dictionaries_reload_interval>
</yandex>
"#,
            http = self.http_port,
            tcp = self.tcp_port,
        )
    }

    fn error_log_tail(&self) -> String {
        let home = self.home.path();
        log_tail(
            &[
                &home.join("log/server.err.log"),
                &home.join("log/stderr.log"),
            ],
            15,
        )
    }

    /// The HTTP interface, for example `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    pub fn http_port(&self) -> u16 {
        self.http_port
    }

    /// The native protocol's port (what other servers of a cluster connect to).
    pub fn tcp_port(&self) -> u16 {
        self.tcp_port
    }

    pub fn data_dir(&self) -> &Path {
        self.home.path()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(ChildProcess::pid)
    }

    /// Stops the server gracefully (SIGTERM, then SIGKILL after 20 s), keeping its data, so
    /// [`LocalClickHouse::restart`] can bring the same server back.
    pub fn shut_down(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.terminate(Duration::from_secs(20));
        }
    }

    /// Starts the server again on the same ports and data after [`LocalClickHouse::shut_down`].
    pub fn restart(&mut self) -> Result<(), LocalClickHouseError> {
        self.shut_down();
        self.launch()
    }

    /// Stops the server gracefully and removes a temporary directory.
    pub fn stop(mut self) {
        self.shut_down();
    }

    /// Kills the server at once (SIGKILL), keeping its data, so [`LocalClickHouse::restart`]
    /// can bring the same server back.
    pub fn kill_now(&mut self) {
        // Dropping the process kills it.
        self.process = None;
    }
}

fn free_port(home: &Home) -> Result<u16, LocalClickHouseError> {
    fleetscope_local_process::free_port().map_err(|source| LocalClickHouseError::Prepare {
        path: home.path().to_owned(),
        source,
    })
}

/// True when the HTTP interface answers `GET /ping` with `Ok.`.
fn ping(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /ping HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.") && response.contains(" 200 ") && response.ends_with("Ok.\n")
}

const USERS_XML: &str = r#"<?xml version="1.0"?>
<!-- Written by Fleetscope: one passwordless user reachable from loopback only. -->
<yandex>
  <profiles>
    <default>
      <max_memory_usage>8000000000</max_memory_usage>
      <load_balancing>random</load_balancing>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas>
    <default>
      <interval>
        <duration>3600</duration>
        <queries>0</queries><errors>0</errors><result_rows>0</result_rows>
        <read_rows>0</read_rows><execution_time>0</execution_time>
      </interval>
    </default>
  </quotas>
</yandex>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_restarts_and_stops() {
        let mut server = LocalClickHouse::start().expect("start a private clickhouse-server");
        assert!(ping(server.http_port()), "answers /ping once started");
        let dir = server.data_dir().to_owned();
        server.restart().expect("restart on the same data");
        assert!(ping(server.http_port()), "answers /ping after a restart");
        let port = server.http_port();
        server.stop();
        assert!(!ping(port), "stopped");
        assert!(!dir.exists(), "temporary directory removed");
    }

    #[test]
    fn missing_binary_says_how_to_install() {
        let missing =
            find_server_binary_in(Some("/nonexistent/clickhouse-server".into()), None).unwrap_err();
        assert!(matches!(missing, LocalClickHouseError::NotInstalled));
        let message = missing.to_string();
        assert!(
            message.contains("apt-get install -y clickhouse-server"),
            "{message}"
        );
    }
}
