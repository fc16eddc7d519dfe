//! TLS without a proxy: the collector and the hub started with `--tls-cert`/`--tls-key` from a
//! private CA made here; an agent's sender that trusts that CA (`--ca-file`) delivers a report,
//! one that trusts only the Web PKI roots is refused by verification; a new certificate written
//! over the files is served without a restart. Both serve HTTP/2 to clients that take it.

use std::path::Path;
use std::time::{Duration, Instant};

use fleetscope_collector::agent::sender::{SendOutcome, Sender};
use fleetscope_collector::protocol::{Report, ReportKind};
use fleetscope_local_clickhouse::LocalClickHouse;
use fleetscope_testkit::faults::{free_port, Service};
use fleetscope_testkit::pki::{private_pki, PrivatePki};

const AGENT_TOKEN: &str = "agent-token-for-store-1-0123";
const HUB_TOKEN: &str = "hub-admin-token-0123456789";

fn client(ca_pem: Option<&str>) -> reqwest::Client {
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(5));
    if let Some(pem) = ca_pem {
        builder =
            builder.add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

/// Waits until `url` answers 200 to a client trusting `ca_pem`.
async fn until_ok(url: &str, ca_pem: &str, service: &Service) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(response) = client(Some(ca_pem)).get(url).send().await {
            if response.status() == 200 {
                return;
            }
        }
        if service.pid().is_none() {
            panic!(
                "the server exited before {url} answered:\n{}",
                service.log_tail()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{url} did not answer 200 over tls"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// curl's status and HTTP version for `url`, trusting `ca_file`, with curl's defaults and
/// `extra` arguments.
fn curl(ca_file: &Path, url: &str, extra: &[&str]) -> String {
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{http_version}",
            "--cacert",
        ])
        .arg(ca_file)
        .args(extra)
        .arg(url)
        .output()
        .unwrap_or_else(|err| panic!("this test needs curl (Debian package curl): {err}"));
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn heartbeat() -> Vec<u8> {
    Report {
        cluster: "store-1".into(),
        agent_version: "0.1.0".into(),
        report_seq: 0,
        sent_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64,
        kind: ReportKind::Heartbeat,
        reconcilers: [("flux".to_owned(), "v2.4.0".to_owned())].into(),
        change_seq_high: 0,
        changes: vec![],
        stamped_apps: Vec::new(),
    }
    .encode()
}

fn args(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

fn path_text(path: &Path) -> String {
    path.to_str().expect("a UTF-8 temporary path").to_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn collector_and_hub_serve_tls_from_a_private_ca_and_reload_the_certificate() {
    let server = LocalClickHouse::start().expect("private clickhouse-server");
    let dir = tempfile::tempdir().unwrap();
    let PrivatePki { ca, cert, key } = private_pki("first");
    let ca_file = dir.path().join("ca.pem");
    let cert_file = dir.path().join("tls.crt");
    let key_file = dir.path().join("tls.key");
    write(&ca_file, &ca);
    write(&cert_file, &cert);
    write(&key_file, &key);
    let agent_tokens = dir.path().join("agents.yaml");
    write(
        &agent_tokens,
        &format!("agents:\n  - cluster: store-1\n    token: {AGENT_TOKEN}\n"),
    );
    let hub_tokens = dir.path().join("tokens.yaml");
    write(
        &hub_tokens,
        &format!("tokens:\n  - name: admins\n    token: {HUB_TOKEN}\n    role: admin\n"),
    );

    let collector_port = free_port();
    let collector = Service::spawn(
        Path::new(env!("CARGO_BIN_EXE_fleetscope")),
        &args(&[
            "collector",
            "--auto-register",
            "--listen",
            &format!("127.0.0.1:{collector_port}"),
            "--clickhouse-url",
            &server.url(),
            "--agent-tokens",
            &path_text(&agent_tokens),
            "--tls-cert",
            &path_text(&cert_file),
            "--tls-key",
            &path_text(&key_file),
        ]),
        &dir.path().join("collector.log"),
    );
    let collector_url = format!("https://127.0.0.1:{collector_port}");
    until_ok(&format!("{collector_url}/readyz"), &ca, &collector).await;

    // The agent's sender with --ca-file delivers; without it, verification refuses the server.
    let trusting = Sender::new(
        &collector_url,
        Some(AGENT_TOKEN.into()),
        Duration::from_secs(10),
        Some(&ca_file),
    )
    .unwrap();
    assert_eq!(trusting.send(heartbeat()).await, SendOutcome::Acknowledged);
    let untrusting = Sender::new(
        &collector_url,
        Some(AGENT_TOKEN.into()),
        Duration::from_secs(10),
        None,
    )
    .unwrap();
    match untrusting.send(heartbeat()).await {
        SendOutcome::Unreachable(_) => {}
        other => panic!("a server signed by an unknown CA was accepted: {other:?}"),
    }
    // What refused it: the verification of the certificate.
    let refused = client(None)
        .get(format!("{collector_url}/healthz"))
        .send()
        .await
        .unwrap_err();
    let mut reasons = Vec::new();
    let mut source: Option<&dyn std::error::Error> = Some(&refused);
    while let Some(err) = source {
        reasons.push(err.to_string());
        source = err.source();
    }
    assert!(
        reasons.iter().any(|r| r.contains("UnknownIssuer")),
        "{reasons:?}"
    );
    // Plain HTTP on the TLS port gets no answer.
    assert!(client(None)
        .get(format!("http://127.0.0.1:{collector_port}/healthz"))
        .send()
        .await
        .is_err());

    let hub_port = free_port();
    let hub = Service::spawn(
        Path::new(env!("CARGO_BIN_EXE_fleetscope")),
        &args(&[
            "hub",
            "--listen",
            &format!("127.0.0.1:{hub_port}"),
            "--clickhouse-url",
            &server.url(),
            "--tokens",
            &path_text(&hub_tokens),
            "--tls-cert",
            &path_text(&cert_file),
            "--tls-key",
            &path_text(&key_file),
        ]),
        &dir.path().join("hub.log"),
    );
    let hub_url = format!("https://127.0.0.1:{hub_port}");
    until_ok(&format!("{hub_url}/healthz"), &ca, &hub).await;
    // A browser opens the pages over TLS, and takes HTTP/2 for them.
    let browser = fleetscope_testkit::browser::Browser::start().await;
    browser.goto(&format!("{hub_url}/ui/sign-in")).await;
    browser
        .wait_for("form.sign-in", Duration::from_secs(10))
        .await;
    let protocol = browser
        .execute(
            "return performance.getEntriesByType('navigation')[0].nextHopProtocol;",
            &[],
        )
        .await;
    browser.quit().await;
    assert_eq!(
        protocol,
        serde_json::json!("h2"),
        "the sign-in page over TLS"
    );
    // Both serve the HTTP/2 they offer in ALPN (what browsers and curl's defaults take), and
    // HTTP/1.1 to a client that asks for it.
    for url in [&collector_url, &hub_url] {
        assert_eq!(
            curl(&ca_file, &format!("{url}/healthz"), &[]),
            "200 2",
            "{url}"
        );
        assert_eq!(
            curl(&ca_file, &format!("{url}/healthz"), &["--http1.1"]),
            "200 1.1",
            "{url}"
        );
    }
    let summary = client(Some(&ca))
        .get(format!("{hub_url}/api/v1/summary"))
        .bearer_auth(HUB_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(summary.status(), 200);
    assert!(client(None)
        .get(format!("{hub_url}/healthz"))
        .send()
        .await
        .is_err());

    // A certificate from another CA written over the files is served without a restart.
    let PrivatePki {
        ca: second_ca,
        cert: second_cert,
        key: second_key,
    } = private_pki("second");
    write(&key_file, &second_key);
    write(&cert_file, &second_cert);
    until_ok(&format!("{collector_url}/healthz"), &second_ca, &collector).await;
    until_ok(&format!("{hub_url}/healthz"), &second_ca, &hub).await;
    assert!(client(Some(&ca))
        .get(format!("{collector_url}/healthz"))
        .send()
        .await
        .is_err());
    let metrics = client(Some(&second_ca))
        .get(format!("{hub_url}/metrics"))
        .bearer_auth(HUB_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("fleetscope_hub_tls_reloads_total{outcome=\"applied\"} 1"),
        "{metrics}"
    );
}

/// ClickHouse reached over TLS: HAProxy terminates TLS in front of a private ClickHouse with a
/// certificate from a private CA. `migrate` over `https://` succeeds when the CA is among the
/// trusted roots (`SSL_CERT_FILE`), and is refused by certificate verification when it is not.
#[test]
fn clickhouse_is_reached_over_tls() {
    use fleetscope_local_process::haproxy::{Balanced, LocalHaproxy};
    let server = LocalClickHouse::start().expect("private clickhouse-server");
    let dir = tempfile::tempdir().unwrap();
    let PrivatePki { ca, cert, key } = private_pki("clickhouse");
    let ca_file = dir.path().join("ca.pem");
    write(&ca_file, &ca);
    let pem = dir.path().join("clickhouse.pem");
    write(&pem, &format!("{cert}{key}"));
    let proxy = LocalHaproxy::start(&[Balanced {
        name: "clickhouse".into(),
        health: "/ping".into(),
        backends: vec![server.http_port()],
        tls: Some(pem),
    }])
    .unwrap_or_else(|err| panic!("this test needs HAProxy (Debian package haproxy): {err}"));
    let url = format!("https://{}", proxy.addr("clickhouse"));
    let migrate = |trust: Option<&Path>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_fleetscope"));
        command.args(["migrate", "--clickhouse-url", &url]);
        if let Some(ca) = trust {
            command.env("SSL_CERT_FILE", ca);
        }
        command.output().unwrap()
    };
    let trusted = migrate(Some(&ca_file));
    assert!(
        trusted.status.success(),
        "migrate over TLS: {}{}\n{}",
        String::from_utf8_lossy(&trusted.stdout),
        String::from_utf8_lossy(&trusted.stderr),
        proxy.log_tail()
    );
    assert!(
        String::from_utf8_lossy(&trusted.stdout)
            .contains("database fleetscope: applied migrations"),
        "{}",
        String::from_utf8_lossy(&trusted.stdout)
    );
    let untrusted = migrate(None);
    let err = String::from_utf8_lossy(&untrusted.stderr);
    assert!(!untrusted.status.success(), "an unknown CA was trusted");
    assert!(
        err.contains("UnknownIssuer") || err.contains("certificate"),
        "{err}"
    );
}
