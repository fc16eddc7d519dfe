//! The serving pieces on a real socket: the deadline answers 503 in time, TLS from a private CA
//! made here, a certificate with a key of another refused, and a new certificate served after
//! its files changed while an invalid change keeps the old one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use fleetscope_serve::reload::ReloadMetrics;
use fleetscope_serve::tls::{certified_key, TlsAcceptor, TlsFiles};
use fleetscope_testkit::pki::{private_pki, PrivatePki};

fn client(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_request_past_its_deadline_is_answered_503() {
    /// Counts when the handler's work is dropped.
    struct OnDrop(Arc<AtomicU64>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    let dropped = Arc::new(AtomicU64::new(0));
    let counter = dropped.clone();
    let router = Router::new()
        .route(
            "/slow",
            get(move || async move {
                let _guard = OnDrop(counter);
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route("/fast", get(|| async { "fast" }))
        .layer(axum::middleware::from_fn_with_state(
            Duration::from_millis(300),
            fleetscope_serve::deadline::limit,
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fleetscope_serve::serve(
        listener,
        router,
        None,
        std::future::pending(),
    ));
    let http = reqwest::Client::new();
    assert_eq!(
        http.get(format!("{base}/fast"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "fast"
    );
    let started = Instant::now();
    let slow = http.get(format!("{base}/slow")).send().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(slow.status(), 503);
    assert_eq!(slow.headers()["retry-after"], "5");
    assert_eq!(
        slow.text().await.unwrap(),
        r#"{"error":"no answer within 300 ms; the request was abandoned"}"#
    );
    // Dropped at the deadline, not left running for its 30 s.
    assert_eq!(dropped.load(Ordering::Relaxed), 1);
}

#[test]
fn a_key_of_another_certificate_is_refused_with_every_problem() {
    let PrivatePki { cert, .. } = private_pki("one");
    let PrivatePki { key: other_key, .. } = private_pki("two");
    let problems = certified_key(cert.as_bytes(), other_key.as_bytes()).unwrap_err();
    assert_eq!(
        problems,
        ["key: it does not belong to the certificate (the first certificate must be the server's own)"]
    );
    let problems = certified_key(b"nothing", b"nothing").unwrap_err();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("certificate: "), "{problems:?}");
    assert!(problems[1].starts_with("key: "), "{problems:?}");
}

#[tokio::test]
async fn a_changed_certificate_is_served_and_a_broken_change_keeps_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let PrivatePki { ca, cert, key } = private_pki("first");
    std::fs::write(&files.cert, &cert).unwrap();
    std::fs::write(&files.key, &key).unwrap();
    let acceptor = TlsAcceptor::load(files.clone()).unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ReloadMetrics::register(&mut registry, "tls", "tls certificate and key");
    acceptor.watch(Duration::from_millis(100), metrics);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/", listener.local_addr().unwrap());
    let router = Router::new().route("/", get(|| async { "hello" }));
    tokio::spawn(fleetscope_serve::serve(
        listener,
        router,
        Some(acceptor),
        std::future::pending(),
    ));
    assert_eq!(
        client(&ca)
            .get(&url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "hello"
    );

    // A client that sends nothing does not hold up the others.
    let _idle =
        tokio::net::TcpStream::connect(url.trim_start_matches("https://").trim_end_matches('/'))
            .await
            .unwrap();
    assert_eq!(client(&ca).get(&url).send().await.unwrap().status(), 200);

    // Broken: a certificate without its key. The old pair stays.
    let PrivatePki {
        ca: second_ca,
        cert: second_cert,
        key: second_key,
    } = private_pki("second");
    std::fs::write(&files.cert, &second_cert).unwrap();
    let encoded = || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !encoded().contains("tls_reloads_total{outcome=\"refused\"} 1") {
        assert!(Instant::now() < deadline, "{}", encoded());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client(&ca).get(&url).send().await.unwrap().status(), 200);
    assert!(client(&second_ca).get(&url).send().await.is_err());

    // The key follows: the new pair is served to new connections.
    std::fs::write(&files.key, &second_key).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while client(&second_ca).get(&url).send().await.is_err() {
        assert!(Instant::now() < deadline, "{}", encoded());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(client(&ca).get(&url).send().await.is_err());
    assert!(
        encoded().contains("tls_reloads_total{outcome=\"applied\"} 1"),
        "{}",
        encoded()
    );
}
