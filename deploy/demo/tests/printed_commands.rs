//! Every command the demo prints under "Try:" works as printed: a short demo of a small fleet
//! runs (the `fleetscope` binary built from this checkout, its own private ClickHouse on a free
//! port, the hub and collector on free ports), and each example's lines are run, exactly as
//! printed, in a new shell started in the checkout (no `FLEETSCOPE_*` variable inherited): each
//! line exits 0, each `curl` in it gets HTTP 200 (seen through a `curl` first on the `PATH`
//! that passes every argument on and adds only `--write-out` of the status to stderr), and an
//! answer printed whole is JSON that is not an error. The fleet five minutes ago, before the
//! demo started, is the simulated history's: the clusters that report now reporting, app
//! instances in sync (and so near the start of that hour). The version the printed gate names
//! is the one the first rollout takes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fleetscope_testkit::faults::fleetscope_binary;
use serde_json::Value;

/// The checkout's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `curl` the examples would run, found on the `PATH`.
fn real_curl() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("curl"))
        .find(|path| path.is_file())
        .expect("the demo's examples use curl: install it (apt-get install curl)")
}

/// The marker the `curl` wrapper writes to stderr before each status.
const STATUS_MARK: &str = "printed-commands-http-status ";

/// A directory with a `curl` that runs the real one with every argument as given, writing the
/// HTTP status to stderr after the transfer.
fn curl_wrapper(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("curl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec '{}' --write-out '%{{stderr}}{STATUS_MARK}%{{http_code}}\\n' \"$@\"\n",
            real_curl().display()
        ),
    )
    .unwrap();
    let chmod = Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    assert!(chmod.success());
    bin
}

/// The demo as a child process, its output read line by line on a thread of its own.
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    out: String,
    /// Where its stderr goes.
    errors: PathBuf,
}

impl Demo {
    /// Reads the demo's output until a line contains `text`; fails after `limit`.
    fn until(&mut self, text: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.out.push_str(&line);
                    self.out.push('\n');
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line with {text:?} from the demo within {limit:?}; its output:\n{}\n{}",
                    self.out,
                    std::fs::read_to_string(&self.errors).unwrap_or_default()
                ),
            }
        }
    }
}

impl Demo {
    /// Interrupts the demo as Ctrl-C does (it stops what it started) and waits for it to end;
    /// kills it after `limit`. Whether it ended by itself.
    fn interrupt(&mut self, limit: Duration) -> bool {
        if let Ok(Some(_)) = self.child.try_wait() {
            return false;
        }
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        // A failed test still stops the demo's ClickHouse, collector and hub.
        self.interrupt(Duration::from_secs(30));
    }
}

/// The printed examples: each `# what` line with the command lines after it, up to the blank
/// line that ends the list.
fn examples(out: &str) -> Vec<(String, Vec<String>)> {
    let mut examples: Vec<(String, Vec<String>)> = Vec::new();
    for line in out
        .lines()
        .skip_while(|l| *l != "Try:")
        .skip(1)
        .take_while(|l| !l.is_empty())
    {
        let line = line
            .strip_prefix("  ")
            .unwrap_or_else(|| panic!("an example line without its indent: {line:?}"));
        match line.strip_prefix("# ") {
            Some(what) => examples.push((what.to_owned(), Vec::new())),
            None => examples
                .last_mut()
                .unwrap_or_else(|| panic!("a command before any `# what` line: {line:?}"))
                .1
                .push(line.to_owned()),
        }
    }
    examples
}

/// What one printed line did.
#[derive(Debug, Default)]
struct Ran {
    exit: Option<i32>,
    stdout: String,
    statuses: Vec<String>,
    stderr: String,
}

/// Runs `lines` in one new shell, each as printed, and what each did.
fn run_in_a_new_shell(lines: &[String], curl_dir: &Path) -> Vec<Ran> {
    let mut script = String::new();
    for (i, line) in lines.iter().enumerate() {
        // The markers start on a line of their own even after output without a final newline.
        script.push_str(&format!(
            "printf '\\n@@line {i}\\n'; printf '\\n@@line {i}\\n' >&2\n"
        ));
        script.push_str(line);
        script.push_str(&format!("\nprintf '\\n@@exit {i} %s\\n' $?\n"));
    }
    let path = std::env::join_paths(
        std::iter::once(curl_dir.to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let mut command = Command::new("sh");
    command.arg("-c").arg(&script).current_dir(root());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("FLEETSCOPE_") {
            command.env_remove(name);
        }
    }
    let output = command.env("PATH", path).output().expect("run sh");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let mut ran: Vec<Ran> = (0..lines.len()).map(|_| Ran::default()).collect();
    let mut at = None;
    for line in stdout.lines() {
        if let Some(i) = line.strip_prefix("@@line ") {
            at = Some(i.parse::<usize>().unwrap());
        } else if let Some(rest) = line.strip_prefix("@@exit ") {
            let (i, code) = rest.split_once(' ').unwrap();
            ran[i.parse::<usize>().unwrap()].exit = Some(code.parse().unwrap());
        } else if let Some(i) = at {
            ran[i].stdout.push_str(line);
            ran[i].stdout.push('\n');
        }
    }
    let mut at = None;
    for line in stderr.lines() {
        if let Some(i) = line.strip_prefix("@@line ") {
            at = Some(i.parse::<usize>().unwrap());
        } else if let Some(i) = at {
            match line.strip_prefix(STATUS_MARK) {
                Some(status) => ran[i].statuses.push(status.to_owned()),
                None => {
                    ran[i].stderr.push_str(line);
                    ran[i].stderr.push('\n');
                }
            }
        }
    }
    ran
}

/// The `(total)` row of a `fleetscope status` table, by column.
fn total_row(table: &str) -> BTreeMap<String, String> {
    let mut lines = table.lines();
    let headers: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let total = lines
        .find(|l| l.starts_with("(total)"))
        .unwrap_or_else(|| panic!("no (total) row: {table}"));
    headers
        .iter()
        .map(|h| (*h).to_owned())
        .zip(total.split_whitespace().map(str::to_owned))
        .collect()
}

#[test]
fn every_printed_command_works_as_printed() {
    let binary = fleetscope_binary();
    let scratch = tempfile::tempdir().unwrap();
    let curl_dir = curl_wrapper(scratch.path());
    let errors = scratch.path().join("demo-stderr.log");
    let mut child = Command::new(binary)
        .args([
            "demo",
            "--clusters",
            "120",
            "--hub-port",
            "0",
            "--collector-port",
            "0",
        ])
        .args([
            "--waves",
            "2",
            "--wave-seconds",
            "4",
            "--pause-seconds",
            "600",
        ])
        .args(["--status-every", "600", "--duration", "600"])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&errors).unwrap())
        .spawn()
        .expect("start fleetscope demo");
    let stdout = child.stdout.take().unwrap();
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let mut demo = Demo {
        child,
        lines,
        out: String::new(),
        errors,
    };
    demo.until("What happens now", Duration::from_secs(240));
    let examples = examples(&demo.out);
    assert!(examples.len() >= 10, "{}", demo.out);
    let printed: Vec<&String> = examples.iter().flat_map(|(_, lines)| lines).collect();
    assert!(
        printed.iter().all(|l| !l.contains('<')),
        "a placeholder left in a printed command: {printed:#?}"
    );
    // Each line is a curl, the one export of the command-line examples, or the binary by the
    // absolute path it has in this checkout, which any shell can run.
    let binary_word = format!("{} ", binary.display());
    assert!(binary.is_absolute());
    for line in &printed {
        assert!(
            line.starts_with("curl ")
                || line.starts_with("export ")
                || line.starts_with(&binary_word),
            "{line}"
        );
    }
    assert!(printed.iter().any(|l| l.starts_with(&binary_word)));

    let mut live_reporting = None;
    let mut past_reporting = None;
    let mut gate_version = None;
    let mut curls = 0;
    for (what, lines) in &examples {
        let ran = run_in_a_new_shell(lines, &curl_dir);
        for (line, ran) in lines.iter().zip(&ran) {
            let context = format!("# {what}\n{line}\n{ran:#?}");
            assert_eq!(ran.exit, Some(0), "{context}");
            let calls = line.matches("curl ").count();
            curls += calls;
            assert_eq!(ran.statuses.len(), calls, "{context}");
            assert!(ran.statuses.iter().all(|s| s == "200"), "{context}");
            if !line.starts_with("export ") {
                assert!(!ran.stdout.trim().is_empty(), "{context}");
            }
            let whole_answer = line.starts_with("curl ") && !line.contains('|');
            if whole_answer && !line.contains("format=csv") {
                let answer: Value = serde_json::from_str(&ran.stdout)
                    .unwrap_or_else(|err| panic!("not JSON ({err}): {context}"));
                assert!(answer.get("error").is_none(), "{context}");
                if line.contains("/api/v1/summary?depth=1'") && !line.contains("emea") {
                    live_reporting = answer["total"]["reporting_clusters"].as_u64();
                }
                if line.contains("&at=") {
                    past_reporting = answer["total"]["reporting_clusters"].as_u64();
                    let in_sync = answer["total"]["app_instances_by_state"]["in_sync"]
                        .as_u64()
                        .unwrap();
                    assert!(in_sync > 0, "{context}");
                }
                if line.contains("/api/v1/gate?") {
                    gate_version = answer["version"].as_str().map(str::to_owned);
                }
            }
            if line.contains(" status --at ") {
                let total = total_row(&ran.stdout);
                assert!(total["REPORTING"].parse::<u64>().unwrap() > 0, "{context}");
            }
        }
    }
    assert!(curls >= 10, "{curls} curl calls");
    // Five minutes ago the demo had not started: the simulated history's fleet was reporting,
    // every cluster that reports now.
    let live_reporting = live_reporting.expect("the summary example");
    assert!(live_reporting > 100, "{live_reporting}");
    assert_eq!(past_reporting, Some(live_reporting));
    // So it was near the start of the simulated hour.
    let past = printed
        .iter()
        .find(|l| l.contains("&at=$(( $(date +%s) - 300 ))"))
        .expect("the past-moment example");
    let earlier = past.replace("- 300 ))", "- 3500 ))");
    let ran = run_in_a_new_shell(std::slice::from_ref(&earlier), &curl_dir);
    let answer: Value = serde_json::from_str(&ran[0].stdout)
        .unwrap_or_else(|err| panic!("not JSON ({err}): {earlier}\n{:#?}", ran[0]));
    assert_eq!(
        answer["total"]["reporting_clusters"].as_u64(),
        Some(live_reporting),
        "{answer}"
    );
    // The gate names the version the first rollout takes.
    let gate_version = gate_version.expect("the gate example");
    let rollout = demo.until(" in the platform repo: rendered", Duration::from_secs(60));
    assert!(
        rollout.contains(&format!(" → {gate_version} in the platform repo")),
        "{rollout}"
    );

    assert!(
        demo.interrupt(Duration::from_secs(60)),
        "Ctrl-C is how the demo ends"
    );
}
