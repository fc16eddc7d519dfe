//! Faults on the real binaries: the `fleetscope collector` and `fleetscope agent` processes
//! while ClickHouse is killed and restarted, while ClickHouse is stopped (SIGSTOP) for longer
//! than the collector's timeouts, and while the collector itself is killed with reports waiting
//! in an agent's spool. After each fault every acknowledged change is in ClickHouse exactly
//! once, nothing was acknowledged while ClickHouse could not have accepted it, and no request
//! waited longer than the collector's documented bound. docs/testing.md lists what each proves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetscope_local_apiserver::LocalApiServer;
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_store::{Store, StoreConfig};
use fleetscope_testkit::faults::{
    free_port, helm_release, send_signal, spooled_reports, stored_changes, Attempt, Change,
    RecordingProxy, ReportingAgent, Service, Suspended, HELMRELEASES,
};
use serde_json::json;

/// The tests of this file run one at a time: each starts ClickHouse, a collector and clients,
/// and the timings they check (a 30 s bound on every answer) should not compete with another
/// test's servers on a 2-core machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The longest a collector's ingest request waits for ClickHouse (its ack timeout, documented
/// in docs/ingest-protocol.md), plus what a loaded machine adds to answer and read it.
const ANSWER_BOUND: Duration = Duration::from_secs(30 + 5);

/// How long a client waits for an answer before it counts the request as hanging.
pub(crate) const REQUEST_LIMIT: Duration = Duration::from_secs(60);

pub(crate) const DATABASE: &str = "fleetscope";

pub(crate) fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetscope"))
}

pub(crate) fn token(cluster: &str) -> String {
    format!("fault-test-token-for-{cluster}")
}

/// A ClickHouse with the schema applied and `clusters` in the inventory, and a runtime for
/// reading it.
pub(crate) fn clickhouse_with(
    clusters: &[String],
) -> (LocalClickHouse, Store, tokio::runtime::Runtime) {
    let server = LocalClickHouse::start()
        .unwrap_or_else(|err| panic!("this test needs a private ClickHouse server: {err}"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = Store::connect(&StoreConfig::new(server.url(), DATABASE)).unwrap();
    runtime.block_on(store.migrate()).unwrap();
    let rows: Vec<_> = clusters
        .iter()
        .map(|id| fleetscope_testkit::inventory_row(id, "factories/linz"))
        .collect();
    runtime.block_on(store.insert_rows(&rows)).unwrap();
    (server, store, runtime)
}

/// `fleetscope collector` on `port` with a token per cluster, its log in `dir`, and `extra`
/// arguments.
pub(crate) fn start_collector(
    dir: &Path,
    clusters: &[String],
    clickhouse: &str,
    port: u16,
    extra: &[&str],
) -> Service {
    fleetscope_testkit::faults::start_collector(
        &binary(),
        dir,
        clusters,
        token,
        (clickhouse, DATABASE),
        port,
        extra,
    )
}

/// What one client did: every request, and the changes of the reports it had acknowledged.
struct ClientRun {
    cluster: String,
    attempts: Vec<Attempt>,
    acknowledged: Vec<Change>,
    error: Option<String>,
}

/// The client's view of a fault: from when ClickHouse could no longer accept anything to when
/// it could again.
struct Window {
    from: Instant,
    to: Instant,
}

/// Runs one agent-like client per cluster against the collector at `addr`, each sending a
/// report (every object at a new version) as soon as the previous one is acknowledged, for a
/// few seconds before `fault`, during it and a few seconds after; then each finishes the report
/// it is delivering.
fn report_through(
    addr: &str,
    clusters: &[String],
    fault: impl FnOnce() -> Window,
) -> (Vec<ClientRun>, Window) {
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(180);
    let clients: Vec<_> = clusters
        .iter()
        .map(|cluster| {
            let (cluster, addr, stop) = (cluster.clone(), addr.to_owned(), stop.clone());
            std::thread::spawn(move || {
                let mut agent = ReportingAgent::new(&cluster, &addr, Some(&token(&cluster)), 4);
                let mut run = ClientRun {
                    cluster,
                    attempts: Vec::new(),
                    acknowledged: Vec::new(),
                    error: None,
                };
                let mut round = 1;
                while !stop.load(Ordering::SeqCst) {
                    let report = agent.next_report(&format!("1.0.{round}"));
                    match agent.deliver(&report, REQUEST_LIMIT, deadline, &mut run.attempts) {
                        Ok(()) => run.acknowledged.extend(report.changes),
                        Err(err) => {
                            run.error = Some(err);
                            break;
                        }
                    }
                    round += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                run
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let window = fault();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::SeqCst);
    let runs = clients.into_iter().map(|c| c.join().unwrap()).collect();
    (runs, window)
}

/// The state letter of a process in /proc (`R`, `S`, `T` stopped, `Z` dead and unreaped…).
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

fn wait_for_state(pid: u32, wanted: impl Fn(Option<char>) -> bool, what: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    while !wanted(process_state(pid)) {
        assert!(
            Instant::now() < until,
            "clickhouse (pid {pid}) never {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn describe(attempt: &Attempt, start: Instant) -> String {
    let at = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    let outcome = match &attempt.outcome {
        Ok(answer) => format!("{} {}", answer.status, answer.body),
        Err(err) => format!("no answer: {err}"),
    };
    format!(
        "report {} sent at {:.1} s, answered at {:.1} s: {outcome}",
        attempt.seq,
        at(attempt.sent),
        at(attempt.answered)
    )
}

/// What every fault test of ClickHouse checks: every client got all its reports acknowledged;
/// no request waited past the bound; nothing was acknowledged that was sent while ClickHouse
/// could not accept it and answered before it could again; and ClickHouse holds exactly the
/// acknowledged changes, each once, and every object's latest state is its last version.
fn check_runs(
    runs: &[ClientRun],
    window: &Window,
    store: &Store,
    runtime: &tokio::runtime::Runtime,
    url: &str,
    collector_log: &str,
) {
    let start = runs
        .iter()
        .flat_map(|r| r.attempts.first())
        .map(|a| a.sent)
        .min()
        .unwrap();
    for run in runs {
        assert_eq!(
            run.error, None,
            "{}\ncollector:\n{collector_log}",
            run.cluster
        );
        let slow: Vec<String> = run
            .attempts
            .iter()
            .filter(|a| a.outcome.is_err() || a.took() > ANSWER_BOUND)
            .map(|a| describe(a, start))
            .collect();
        assert!(
            slow.is_empty(),
            "{}: requests without an answer within {ANSWER_BOUND:?}: {slow:#?}\ncollector:\n{collector_log}",
            run.cluster
        );
        let acknowledged_while_down: Vec<String> = run
            .attempts
            .iter()
            .filter(|a| a.acknowledged() && a.sent >= window.from && a.answered <= window.to)
            .map(|a| describe(a, start))
            .collect();
        assert!(
            acknowledged_while_down.is_empty(),
            "{}: acknowledged while clickhouse could not accept anything ({:.1} s to {:.1} s): {acknowledged_while_down:#?}",
            run.cluster,
            window.from.duration_since(start).as_secs_f64(),
            window.to.duration_since(start).as_secs_f64(),
        );
        let stored = runtime.block_on(stored_changes(url, DATABASE, &run.cluster));
        let acknowledged: BTreeMap<(String, u64), (String, u64)> = run
            .acknowledged
            .iter()
            .map(|c| ((c.name.clone(), c.change_seq), (c.version.clone(), 1)))
            .collect();
        assert!(
            acknowledged.len() > 20,
            "{}: {} changes",
            run.cluster,
            acknowledged.len()
        );
        assert_eq!(
            stored, acknowledged,
            "{}: clickhouse holds each acknowledged change once (with its version), and no other",
            run.cluster
        );
        let last = &run.acknowledged.last().unwrap().version;
        let latest = runtime
            .block_on(store.observed_for_cluster(&run.cluster))
            .unwrap();
        assert_eq!(latest.len(), 4, "{}", run.cluster);
        assert!(
            latest.iter().all(|row| &row.version == last),
            "{}: latest versions {:?}, last acknowledged {last}",
            run.cluster,
            latest.iter().map(|r| &r.version).collect::<Vec<_>>()
        );
    }
    // What happened, for the test's output: answers by status during the fault, and the
    // longest any request waited.
    let mut during: BTreeMap<String, usize> = BTreeMap::new();
    for attempt in runs.iter().flat_map(|r| &r.attempts) {
        if attempt.sent >= window.from && attempt.sent <= window.to {
            let key = match &attempt.outcome {
                Ok(answer) => answer.status.to_string(),
                Err(_) => "no answer".to_owned(),
            };
            *during.entry(key).or_default() += 1;
        }
    }
    let longest = runs
        .iter()
        .flat_map(|r| &r.attempts)
        .map(Attempt::took)
        .max()
        .unwrap_or_default();
    let first_ack_after = runs
        .iter()
        .flat_map(|r| &r.attempts)
        .filter(|a| a.acknowledged() && a.answered > window.to)
        .map(|a| a.answered - window.to)
        .min()
        .unwrap_or_default();
    eprintln!(
        "fault of {:.1} s: requests sent during it by answer {during:?}; longest wait \
         {longest:?}; first acknowledgement {first_ack_after:?} after it ended",
        (window.to - window.from).as_secs_f64()
    );
    // The fault was felt: every client had a request out while ClickHouse was out, and had
    // reports acknowledged after it was back.
    for run in runs {
        assert!(
            run.attempts
                .iter()
                .any(|a| a.sent <= window.to && a.answered >= window.from),
            "{}: no request during the fault",
            run.cluster
        );
        assert!(
            run.attempts
                .iter()
                .any(|a| a.acknowledged() && a.answered > window.to),
            "{}: nothing acknowledged after the fault",
            run.cluster
        );
    }
}

fn clusters(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("plant-{i}")).collect()
}

#[test]
fn clickhouse_killed_and_restarted_while_agents_report() {
    let _one_at_a_time = one_at_a_time();
    let work = tempfile::tempdir().unwrap();
    let clusters = clusters(3);
    let (mut server, store, runtime) = clickhouse_with(&clusters);
    let port = free_port();
    let collector = start_collector(work.path(), &clusters, &server.url(), port, &[]);

    let addr = format!("127.0.0.1:{port}");
    let (runs, window) = report_through(&addr, &clusters, || {
        let pid = server.pid().unwrap();
        send_signal(pid, "KILL");
        wait_for_state(pid, |s| s.is_none() || s == Some('Z'), "died");
        let from = Instant::now();
        // Longer than the writer's eight attempts (about 13 s of backoff), so that some
        // requests are answered 503 while it is down.
        std::thread::sleep(Duration::from_secs(16));
        let to = Instant::now();
        server
            .restart()
            .expect("clickhouse starts again on its data");
        Window { from, to }
    });
    let log = collector.log_tail();
    check_runs(&runs, &window, &store, &runtime, &server.url(), &log);
}

#[test]
fn clickhouse_stopped_longer_than_the_timeouts_gets_answers_and_recovers() {
    let _one_at_a_time = one_at_a_time();
    let work = tempfile::tempdir().unwrap();
    let clusters = clusters(3);
    let (server, store, runtime) = clickhouse_with(&clusters);
    let port = free_port();
    let collector = start_collector(work.path(), &clusters, &server.url(), port, &[]);

    let addr = format!("127.0.0.1:{port}");
    let pid = server.pid().unwrap();
    let (runs, window) = report_through(&addr, &clusters, || {
        let resume = Suspended::stop(pid).unwrap();
        let from = Instant::now();
        // Past the collector's 30 s ack timeout and its 30 s ClickHouse timeout.
        std::thread::sleep(Duration::from_secs(40));
        let to = Instant::now();
        drop(resume);
        Window { from, to }
    });
    let log = collector.log_tail();
    check_runs(&runs, &window, &store, &runtime, &server.url(), &log);
    // No hang: every client had an answer, a 503, while ClickHouse was still stopped.
    for run in &runs {
        let answered_503 = run.attempts.iter().any(|a| {
            a.answered >= window.from
                && a.answered <= window.to
                && a.outcome.as_ref().is_ok_and(|answer| answer.status == 503)
        });
        assert!(
            answered_503,
            "{}: no 503 while clickhouse was stopped: {:#?}\ncollector:\n{log}",
            run.cluster, run.attempts
        );
    }
}

const EDGE: &str = "edge-01";
const RELEASES: [&str; 3] = ["checkout", "payments", "search"];

/// Sets the version annotation of a HelmRelease (read, then written back with its resource
/// version).
fn set_version(api: &LocalApiServer, name: &str, version: &str) {
    let path = format!("{HELMRELEASES}/{name}");
    let mut object = api.get_json(&path).unwrap();
    object["metadata"]["annotations"]["fleetscope.io/version"] = json!(version);
    api.put_json(&path, &object).unwrap();
}

pub(crate) fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < until,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_agent_delivers_its_spool_in_order_after_the_collector_was_killed() {
    let _one_at_a_time = one_at_a_time();
    let work = tempfile::tempdir().unwrap();
    let clusters = vec![EDGE.to_owned()];
    let (server, store, runtime) = clickhouse_with(&clusters);
    let api = LocalApiServer::start(None)
        .unwrap_or_else(|err| panic!("this test needs a private Kubernetes API server: {err}"));
    let crd = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../collector/testdata/crds/flux-helmrelease.crd.yaml");
    for name in api.apply_crd_file(&crd).unwrap() {
        api.wait_for_crd(&name).unwrap();
    }
    for name in RELEASES {
        api.post_json(HELMRELEASES, &helm_release(name, "1.0.0"))
            .unwrap();
    }

    let first_port = free_port();
    let mut collector = start_collector(work.path(), &clusters, &server.url(), first_port, &[]);
    let proxy = RecordingProxy::start(first_port);
    let token_file = work.path().join("token");
    std::fs::write(&token_file, token(EDGE)).unwrap();
    let spool = work.path().join("spool");
    let metrics_port = free_port();
    let agent_args: Vec<String> = [
        "agent",
        "--cluster",
        EDGE,
        "--collector-url",
        &proxy.url(),
        "--token-file",
        token_file.to_str().unwrap(),
        "--spool-dir",
        spool.to_str().unwrap(),
        "--kubeconfig",
        api.kubeconfig_path().to_str().unwrap(),
        "--heartbeat-seconds",
        "3600",
        "--metrics-listen",
        &format!("127.0.0.1:{metrics_port}"),
        "--log",
        "info",
    ]
    .map(String::from)
    .to_vec();
    let mut agent = Service::spawn(&binary(), &agent_args, &work.path().join("agent.log"));
    agent.wait_until_healthy(metrics_port);

    let versions = |rows: &[fleetscope_store::ObservedRow]| -> BTreeMap<String, String> {
        rows.iter()
            .map(|r| (r.object_name.clone(), r.version.clone()))
            .collect()
    };
    let all_at = |version: &str| -> BTreeMap<String, String> {
        RELEASES
            .iter()
            .map(|n| (n.to_string(), version.to_owned()))
            .collect()
    };
    eventually("the first state stored", Duration::from_secs(60), || {
        versions(&runtime.block_on(store.observed_for_cluster(EDGE)).unwrap()) == all_at("1.0.0")
            && spooled_reports(&spool).is_empty()
    });

    // The collector dies; the agent keeps watching and spools one report per round.
    collector.kill();
    let rounds = 4;
    for round in 1..=rounds {
        let version = format!("1.0.{round}");
        for name in RELEASES {
            set_version(&api, name, &version);
        }
        eventually(
            &format!("round {round} spooled"),
            Duration::from_secs(30),
            || {
                let spooled: BTreeSet<(String, String)> = spooled_reports(&spool)
                    .into_iter()
                    .flat_map(|r| r.changes)
                    .map(|c| (c.name, c.version))
                    .collect();
                RELEASES
                    .iter()
                    .all(|n| spooled.contains(&(n.to_string(), version.clone())))
            },
        );
    }
    let waiting = spooled_reports(&spool);
    assert!(
        waiting.len() >= rounds,
        "one report per round at least: {waiting:#?}"
    );
    let waiting_seqs: Vec<u64> = waiting.iter().map(|r| r.seq).collect();
    let waiting_changes: Vec<Change> = waiting.iter().flat_map(|r| r.changes.clone()).collect();
    assert_eq!(
        waiting_changes.len(),
        rounds * RELEASES.len(),
        "{waiting:#?}"
    );

    // A new collector (on another port, as after a reschedule); the agent delivers.
    let before_restart = proxy.records().len();
    let second_port = free_port();
    let collector = start_collector(work.path(), &clusters, &server.url(), second_port, &[]);
    proxy.set_upstream(second_port);
    // The agent's backoff may have grown to 16 or 32 s while the collector was away.
    eventually("the spool delivered", Duration::from_secs(90), || {
        spooled_reports(&spool).is_empty()
    });

    // In order and each once: the reports acknowledged after the restart are exactly the
    // waiting ones, in their order, and nothing was sent out of order meanwhile.
    let after: Vec<_> = proxy.records()[before_restart..]
        .iter()
        .filter(|r| r.kind != "heartbeat")
        .cloned()
        .collect();
    let acknowledged: Vec<u64> = after
        .iter()
        .filter(|r| r.status == Some(200))
        .map(|r| r.seq)
        .collect();
    assert_eq!(
        acknowledged,
        waiting_seqs,
        "requests after the restart: {after:#?}\ncollector:\n{}\nagent:\n{}",
        collector.log_tail(),
        agent.log_tail()
    );
    let sent: Vec<u64> = after.iter().map(|r| r.seq).collect();
    eprintln!(
        "waiting reports {waiting_seqs:?}; requests after the restart (report, status): {:?}",
        after.iter().map(|r| (r.seq, r.status)).collect::<Vec<_>>()
    );
    assert!(
        sent.windows(2).all(|w| w[0] <= w[1]),
        "sent in order: {sent:?}"
    );
    assert!(
        after
            .iter()
            .filter(|r| r.status == Some(200))
            .all(|r| r.answer.contains("\"stored\"")),
        "each stored, none a duplicate: {after:#?}"
    );

    // Nothing lost or doubled in ClickHouse: every waiting change once, with its version.
    let stored = runtime.block_on(stored_changes(&server.url(), DATABASE, EDGE));
    for change in &waiting_changes {
        assert_eq!(
            stored.get(&(change.name.clone(), change.change_seq)),
            Some(&(change.version.clone(), 1)),
            "{change:?} in {stored:#?}"
        );
    }
    let history: Vec<(String, String)> = stored
        .iter()
        .map(|((name, _), (version, _))| (name.clone(), version.clone()))
        .collect();
    for name in RELEASES {
        let versions: Vec<&str> = history
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(
            versions,
            ["1.0.0", "1.0.1", "1.0.2", "1.0.3", "1.0.4"],
            "{name}: every version once, in change order"
        );
    }
    assert_eq!(
        versions(&runtime.block_on(store.observed_for_cluster(EDGE)).unwrap()),
        all_at("1.0.4")
    );
}
