//! The collector and the hub as child processes of the `fleetscope` binary, the way they run in
//! production, so their CPU time and resident memory can be measured apart from the simulator;
//! and a sampler of both (and ClickHouse) from `/proc`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// A running child process; killed when dropped.
#[derive(Debug)]
pub struct Service {
    pub name: String,
    pub url: String,
    /// Where its output goes.
    pub log: PathBuf,
    child: std::process::Child,
    exe: PathBuf,
    args: Vec<String>,
    port: u16,
}

impl Service {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails when the process has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            anyhow::bail!(
                "the {} exited ({status}); the end of {}:\n{}",
                self.name,
                self.log.display(),
                lines[lines.len().saturating_sub(10)..].join("\n")
            );
        }
        Ok(())
    }

    /// Kills the process at once (SIGKILL), as a crash would, and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the process again with the same arguments on the same port, its output appended
    /// to the same log, and waits until `/readyz` answers 200.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.child = spawn(
            &self.name, &self.exe, &self.args, &self.log, self.port, true,
        )?;
        wait_ready(self).await
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Starts `exe args… --listen 127.0.0.1:<free port>` with its output in `<log_dir>/<name>.log`
/// and waits until `/readyz` answers 200.
pub async fn start(
    name: &str,
    exe: &Path,
    args: &[String],
    log_dir: &Path,
) -> anyhow::Result<Service> {
    start_on(name, exe, args, log_dir, free_port()?).await
}

/// `port` if nothing listens on it on the loopback interface now, else a free port.
pub fn port_or_free(port: u16) -> anyhow::Result<u16> {
    match std::net::TcpListener::bind(("127.0.0.1", port)) {
        Ok(listener) => Ok(listener.local_addr()?.port()),
        Err(_) => free_port(),
    }
}

/// Like [`start`], on the given port.
pub async fn start_on(
    name: &str,
    exe: &Path,
    args: &[String],
    log_dir: &Path,
    port: u16,
) -> anyhow::Result<Service> {
    let log = log_dir.join(format!("{name}.log"));
    let child = spawn(name, exe, args, &log, port, false)?;
    let mut service = Service {
        name: name.to_owned(),
        url: format!("http://127.0.0.1:{port}"),
        log,
        child,
        exe: exe.to_path_buf(),
        args: args.to_vec(),
        port,
    };
    wait_ready(&mut service).await?;
    Ok(service)
}

/// Spawns `exe args… --listen 127.0.0.1:<port>` with its output in `log` (appended to when
/// `append`).
fn spawn(
    name: &str,
    exe: &Path,
    args: &[String],
    log: &Path,
    port: u16,
    append: bool,
) -> anyhow::Result<std::process::Child> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(log)
        .with_context(|| format!("creating {}", log.display()))?;
    Command::new(exe)
        .args(args)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .env(
            "FLEETSCOPE_LOG",
            std::env::var("FLEETSCOPE_SERVICE_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("starting {} {name}", exe.display()))
}

/// Waits (at most 30 s) until `url`'s `/readyz` answers 200: a balancer in front of services
/// that are ready.
pub async fn wait_ready_at(url: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(response) = http.get(format!("{url}/readyz")).send().await {
            if response.status().is_success() {
                return Ok(());
            }
        }
        anyhow::ensure!(
            Instant::now() < until,
            "{url}/readyz did not answer 200 within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (at most 120 s) until the service's `/readyz` answers 200; fails when it exits first.
async fn wait_ready(service: &mut Service) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        service.check_alive()?;
        if let Ok(response) = http.get(format!("{}/readyz", service.url)).send().await {
            if response.status().is_success() {
                return Ok(());
            }
        }
        anyhow::ensure!(
            Instant::now() < until,
            "the {} did not become ready within 120 s; see {}",
            service.name,
            service.log.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One sample of one process.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProcSample {
    pub process: String,
    /// Seconds since the run started.
    pub at_s: f64,
    /// CPU used since the previous sample, in cores (1.0 = one core busy).
    pub cpu_cores: f64,
    pub rss_mb: f64,
}

/// Kernel clock ticks per second in `/proc/<pid>/stat` (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU ticks (user + system) and resident bytes of a process, from `/proc`.
pub fn read_proc(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3 of the man page, utime 14 and stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((utime + stime, rss_kb * 1024))
}

/// The name under which the sampler records the whole machine's CPU: every process on it, the
/// load test's and any other.
pub const MACHINE: &str = "machine";

/// Busy CPU ticks of the whole machine, every CPU together (all but idle and I/O wait), from
/// `/proc/stat`.
pub fn read_machine_busy() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is counted in user already).
    let busy: u64 = ticks.iter().take(8).sum::<u64>()
        - ticks.get(3).copied().unwrap_or(0)
        - ticks.get(4).copied().unwrap_or(0);
    Some(busy)
}

/// The processes a [`Sampler`] watches, by name; several processes may share a name (the
/// copies of a service), and a restarted process's entry takes its new pid.
pub type Watched = Arc<Mutex<Vec<(String, u32)>>>;

/// Samples the watched processes, and the whole machine as [`MACHINE`], every second until
/// dropped. Processes that share a name give one sample: their CPU added up, the resident
/// memory of the largest.
#[derive(Debug)]
pub struct Sampler {
    pub samples: Arc<Mutex<Vec<ProcSample>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sampler {
    pub fn start(watched: Watched, started: Instant) -> Sampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let out = samples.clone();
        let task = tokio::spawn(async move {
            // pid → (ticks, when) at its previous sample.
            let mut last: std::collections::HashMap<u32, (u64, Instant)> =
                std::collections::HashMap::new();
            let mut machine_last: Option<(u64, Instant)> = None;
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let processes = watched.lock().expect("watched lock").clone();
                // name → (cores, largest resident bytes), in the order first watched.
                let mut by_name: Vec<(String, f64, u64)> = Vec::new();
                for (name, pid) in &processes {
                    let now = Instant::now();
                    let Some((ticks, rss)) = read_proc(*pid) else {
                        continue;
                    };
                    let Some((before, at)) = last.insert(*pid, (ticks, now)) else {
                        continue;
                    };
                    let used =
                        cpu_cores(ticks.saturating_sub(before), now.duration_since(at), cores);
                    match by_name.iter_mut().find(|(n, _, _)| n == name) {
                        Some(entry) => {
                            entry.1 += used;
                            entry.2 = entry.2.max(rss);
                        }
                        None => by_name.push((name.clone(), used, rss)),
                    }
                }
                let at_s = Instant::now().duration_since(started).as_secs_f64();
                {
                    let mut out = out.lock().expect("samples lock");
                    for (process, used, rss) in by_name {
                        out.push(ProcSample {
                            process,
                            at_s,
                            cpu_cores: used.min(cores as f64),
                            rss_mb: rss as f64 / 1_048_576.0,
                        });
                    }
                }
                let now = Instant::now();
                if let Some(ticks) = read_machine_busy() {
                    if let Some((before, at)) = machine_last {
                        out.lock().expect("samples lock").push(ProcSample {
                            process: MACHINE.to_owned(),
                            at_s: now.duration_since(started).as_secs_f64(),
                            cpu_cores: cpu_cores(
                                ticks.saturating_sub(before),
                                now.duration_since(at),
                                cores,
                            ),
                            rss_mb: 0.0,
                        });
                    }
                    machine_last = Some((ticks, now));
                }
            }
        });
        Sampler { samples, task }
    }
}

/// Cores used over `elapsed` from the CPU ticks counted in it. At most the machine's `cores`:
/// on a stalled machine a sample can be taken late, and the ticks of a longer stretch then fall
/// into a short interval.
pub fn cpu_cores(ticks: u64, elapsed: Duration, cores: usize) -> f64 {
    let seconds = elapsed.as_secs_f64().max(1e-3);
    (ticks as f64 / TICKS_PER_SECOND / seconds).min(cores as f64)
}

/// The `fleetscope` binary to start the collector and hub from: `exe` if given, else this
/// process's own executable when it is `fleetscope`.
pub fn fleetscope_exe(exe: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(exe) = exe {
        return Ok(exe);
    }
    let me = std::env::current_exe().context("finding this program's path")?;
    anyhow::ensure!(
        me.file_stem().is_some_and(|s| s == "fleetscope"),
        "the load test starts the collector and hub from the fleetscope binary; run it as `fleetscope loadtest` or pass --fleetscope-binary"
    );
    Ok(me)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let (ticks, rss) = read_proc(std::process::id()).unwrap();
        let busy = Instant::now();
        let mut x = 0u64;
        while busy.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let (after, _) = read_proc(std::process::id()).unwrap();
        assert!(after > ticks, "300 ms of work shows up as CPU ticks");
        assert!(rss > 1_000_000, "a running test uses more than 1 MB: {rss}");
    }

    #[test]
    fn the_machine_counts_this_process_busy_time() {
        let before = read_machine_busy().unwrap();
        let busy = Instant::now();
        let mut x = 0u64;
        while busy.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let after = read_machine_busy().unwrap();
        assert!(
            after >= before + 20,
            "300 ms of work shows up as busy ticks: {before} then {after}"
        );
    }

    #[test]
    fn cpu_is_ticks_over_time_and_never_more_than_the_cores() {
        let second = Duration::from_secs(1);
        assert_eq!(cpu_cores(50, second, 2), 0.5);
        assert_eq!(cpu_cores(150, second, 2), 1.5);
        assert_eq!(cpu_cores(100, Duration::from_millis(500), 4), 2.0);
        // A late sample: a second's ticks of two busy cores in a tenth of a second.
        assert_eq!(cpu_cores(200, Duration::from_millis(100), 2), 2.0);
    }
}
