//! A collector killed (SIGKILL) and another started in its place, with a hub reading: a change
//! acknowledged by the new collector is in the hub's answers within 5 s, although the dead
//! collector never publishes again, and so is the change the dead one acknowledged just before
//! it was killed (docs/data-model.md, "Silence").

use std::time::{Duration, Instant};

use fleetscope_testkit::faults::{free_port, observed_versions, ReportingAgent, Service};

use super::faults::{
    binary, clickhouse_with, one_at_a_time, start_collector, token, DATABASE, REQUEST_LIMIT,
};

/// Reports through the collector that is killed: its last change is acknowledged just before.
const LAST_WORDS: &str = "crash-01";
/// Reports through the collector started in its place.
const NEWCOMER: &str = "crash-02";

/// The documented bound: a change acknowledged by a live collector shows in the hub within 5 s,
/// even while another collector has just died.
const FRESH_WITHIN: Duration = Duration::from_secs(5);

/// How long after now the hub shows every object of `cluster` at `version` (panics after a
/// minute).
fn time_until_shown(hub: &str, cluster: &str, version: &str) -> Duration {
    let start = Instant::now();
    loop {
        let shown = observed_versions(hub, cluster);
        if shown.len() == 2 && shown.values().all(|shown| shown == version) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the hub never showed {cluster} at {version}: it shows {shown:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `agent`'s next report, every object at `version`, until it is acknowledged.
fn send(agent: &mut ReportingAgent, version: &str) {
    let report = agent.next_report(version);
    let deadline = Instant::now() + Duration::from_secs(60);
    agent
        .deliver(&report, REQUEST_LIMIT, deadline, &mut Vec::new())
        .unwrap();
}

#[test]
fn a_change_through_a_new_collector_shows_within_5_s_after_another_was_killed() {
    let _one_at_a_time = one_at_a_time();
    let work = tempfile::tempdir().unwrap();
    let clusters = vec![LAST_WORDS.to_owned(), NEWCOMER.to_owned()];
    let (server, _store, _runtime) = clickhouse_with(&clusters);
    let hub_port = free_port();
    let hub_args: Vec<String> = [
        "hub",
        "--insecure",
        "--listen",
        &format!("127.0.0.1:{hub_port}"),
        "--clickhouse-url",
        &server.url(),
        "--clickhouse-database",
        DATABASE,
        "--log",
        "info",
    ]
    .map(String::from)
    .to_vec();
    let _hub = Service::start(&binary(), &hub_args, &work.path().join("hub.log"), hub_port);
    let hub = format!("127.0.0.1:{hub_port}");

    let port = free_port();
    let mut collector = start_collector(work.path(), &clusters, &server.url(), port, &[]);
    let addr = format!("127.0.0.1:{port}");
    let mut last_words = ReportingAgent::new(LAST_WORDS, &addr, Some(&token(LAST_WORDS)), 2);
    let mut newcomer = ReportingAgent::new(NEWCOMER, &addr, Some(&token(NEWCOMER)), 2);
    send(&mut last_words, "1.0.0");
    send(&mut newcomer, "1.0.0");
    time_until_shown(&hub, LAST_WORDS, "1.0.0");
    time_until_shown(&hub, NEWCOMER, "1.0.0");

    let mut took = Vec::new();
    for round in 1..=3 {
        // A change the collector acknowledges just before it dies…
        let said = format!("1.{round}.0");
        send(&mut last_words, &said);
        collector.kill();
        // …and one through the collector started in its place.
        let port = free_port();
        collector = start_collector(work.path(), &clusters, &server.url(), port, &[]);
        let addr = format!("127.0.0.1:{port}");
        last_words.set_collector(&addr);
        newcomer.set_collector(&addr);
        let version = format!("1.{round}.1");
        send(&mut newcomer, &version);
        took.push(time_until_shown(&hub, NEWCOMER, &version));
        let late = time_until_shown(&hub, LAST_WORDS, &said);
        assert!(
            late <= FRESH_WITHIN,
            "round {round}: the change the killed collector acknowledged ({said}) showed {late:?} \
             after the new collector's"
        );
    }
    eprintln!("shown after a collector was killed and replaced: {took:?}");
    for (round, took) in took.iter().enumerate() {
        assert!(
            *took <= FRESH_WITHIN,
            "round {}: the change through the new collector showed after {took:?}, more than \
             {FRESH_WITHIN:?}",
            round + 1
        );
    }
}
