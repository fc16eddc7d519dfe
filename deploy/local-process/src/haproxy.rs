//! A private HAProxy in front of several copies of a service: one frontend per service on a
//! free loopback port, each spreading requests over its backends round robin and taking a
//! backend out of rotation when its health check fails. Its configuration and log live in a
//! temporary directory, and it stops when dropped.
//!
//! HAProxy comes from the Debian package `haproxy`; without it, starting fails and says how to
//! install it.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::ChildProcess;

const INSTALL_HINT: &str =
    "HAProxy comes from the Debian package haproxy: run scripts/install-prereqs --tests";

/// Why HAProxy could not be started.
#[derive(Debug)]
pub struct HaproxyError(pub String);

impl std::fmt::Display for HaproxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HaproxyError {}

/// One balanced service: its name, the health check path (`/readyz`, `/ping`) and the loopback
/// ports of its copies.
#[derive(Debug, Clone)]
pub struct Balanced {
    pub name: String,
    pub health: String,
    pub backends: Vec<u16>,
    /// Terminate TLS at the frontend with this PEM file (the certificate chain, then its key).
    pub tls: Option<PathBuf>,
}

/// A running HAProxy.
#[derive(Debug)]
pub struct LocalHaproxy {
    process: ChildProcess,
    dir: tempfile::TempDir,
    ports: Vec<(String, u16)>,
}

/// How often a backend is checked, and how many failed (passed) checks take it out of (put it
/// back into) rotation: a dead backend is out within about a second.
const CHECK_EVERY: &str = "300ms";
const FALL: u32 = 2;
const RISE: u32 = 2;

impl LocalHaproxy {
    /// Starts HAProxy with a frontend for each of `services`, and waits until every frontend
    /// accepts connections. Fails, saying what to install, when HAProxy is missing.
    pub fn start(services: &[Balanced]) -> Result<LocalHaproxy, HaproxyError> {
        let io = |what: &str, err: std::io::Error| HaproxyError(format!("{what}: {err}"));
        let dir = tempfile::tempdir().map_err(|e| io("creating a temporary directory", e))?;
        let mut ports = Vec::new();
        let mut config = String::from(
            "global\n    maxconn 4096\n\ndefaults\n    mode http\n    timeout connect 1s\n    \
             timeout client 120s\n    timeout server 120s\n    retries 3\n    option redispatch\n\n",
        );
        for service in services {
            let port = crate::free_port().map_err(|e| io("finding a free port", e))?;
            ports.push((service.name.clone(), port));
            let tls = service
                .tls
                .as_ref()
                .map(|pem| format!(" ssl crt {}", pem.display()))
                .unwrap_or_default();
            config.push_str(&format!(
                "frontend {name}\n    bind 127.0.0.1:{port}{tls}\n    default_backend {name}\n\n\
                 backend {name}\n    balance roundrobin\n    option httpchk GET {health}\n    \
                 http-check expect status 200\n    default-server inter {CHECK_EVERY} fall {FALL} rise {RISE}\n",
                name = service.name,
                health = service.health,
            ));
            for (i, backend) in service.backends.iter().enumerate() {
                config.push_str(&format!(
                    "    server {}-{i} 127.0.0.1:{backend} check\n",
                    service.name
                ));
            }
            config.push('\n');
        }
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).map_err(|e| io("writing haproxy.cfg", e))?;
        let log = dir.path().join("haproxy.log");
        let binary = find_haproxy()?;
        let mut command = Command::new(&binary);
        command.arg("-f").arg(&path).arg("-db");
        let process = ChildProcess::spawn(command, dir.path(), &log, &log).map_err(|err| {
            HaproxyError(format!(
                "could not start {}: {err:?}; {INSTALL_HINT}",
                binary.display()
            ))
        })?;
        let balancer = LocalHaproxy {
            process,
            dir,
            ports,
        };
        let until = Instant::now() + Duration::from_secs(10);
        for (name, port) in &balancer.ports {
            while std::net::TcpStream::connect(("127.0.0.1", *port)).is_err() {
                if Instant::now() >= until {
                    return Err(HaproxyError(format!(
                        "HAProxy did not listen for {name} on {port}: {}",
                        balancer.log_tail()
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(balancer)
    }

    /// `127.0.0.1:<port>` of the frontend of service `name`.
    pub fn addr(&self, name: &str) -> String {
        let port = self
            .ports
            .iter()
            .find(|(service, _)| service == name)
            .map(|(_, port)| *port)
            .unwrap_or_else(|| panic!("no balanced service {name}"));
        format!("127.0.0.1:{port}")
    }

    /// The end of HAProxy's own log.
    pub fn log_tail(&self) -> String {
        crate::log_tail(&[&self.dir.path().join("haproxy.log")], 40)
    }

    /// Stops HAProxy.
    pub fn stop(mut self) {
        self.process.terminate(Duration::from_secs(5));
    }
}

fn find_haproxy() -> Result<PathBuf, HaproxyError> {
    for candidate in [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ] {
        let path = PathBuf::from(candidate);
        if path.is_file() {
            return Ok(path);
        }
    }
    let found = Command::new("sh")
        .args(["-c", "command -v haproxy"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    found.ok_or_else(|| HaproxyError(format!("haproxy is not installed; {INSTALL_HINT}")))
}
