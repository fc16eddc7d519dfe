//! Sending reports to the central collector and reading its answer.

use std::path::Path;
use std::time::Duration;

use reqwest::header;

/// What the collector said about one report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// Stored (or already stored earlier): the report can be forgotten.
    Acknowledged,
    /// Busy or unable to store now: send the same report again after the delay.
    RetryAfter(Duration),
    /// Refused for a reason a retry alone will not fix (credentials, inventory, a malformed
    /// report). The report is kept and retried slowly, so nothing is lost while it is fixed.
    Refused { status: u16, message: String },
    /// No answer (collector down, network gone, timeout).
    Unreachable(String),
}

/// What a `duplicate` answer says the collector acknowledged for the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duplicate {
    /// The number of the report that was answered.
    pub report_seq: u64,
    /// The highest report number the collector acknowledged for the cluster.
    pub acked_seq: u64,
    /// The highest change number the collector stored for the cluster, as far as it knows.
    pub highest_change_seq: u64,
}

impl Duplicate {
    /// Whether the collector acknowledged a higher number than the report's own. Reports are
    /// delivered in order, so a genuine duplicate is exactly the highest acknowledged number;
    /// a higher one means this agent's counters are behind the numbers its cluster already
    /// used (a clock that went back, a restored spool).
    pub fn counters_behind(&self) -> bool {
        self.acked_seq > self.report_seq
    }
}

/// What [`Answer::match_rules`] holds for an acknowledgement that named no match rules: none
/// were in force at the collector. Not a digest (those are hexadecimal).
pub const NO_MATCH_RULES: &str = "none";

/// What an acknowledgement said besides "stored".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub duplicate: Option<Duplicate>,
    /// The digest of the match rules in force at the collector, or [`NO_MATCH_RULES`]; `None`
    /// when the report was not acknowledged.
    pub match_rules: Option<String>,
}

/// The certificates of a PEM file of CA certificates; at least one.
pub fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem =
        std::fs::read(path).map_err(|err| format!("reading ca file {}: {err}", path.display()))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|err| format!("ca file {}: not PEM certificates: {err}", path.display()))?;
    if certificates.is_empty() {
        return Err(format!(
            "ca file {}: no CERTIFICATE block in it",
            path.display()
        ));
    }
    Ok(certificates)
}

#[derive(Debug, Clone)]
pub struct Sender {
    client: reqwest::Client,
    ingest_url: String,
    token: Option<String>,
}

/// Bytes of request line and headers the agent sends besides the body (145 measured for a
/// heartbeat to a collector on `127.0.0.1`), used to account bandwidth; a longer host name adds
/// its length.
pub const REQUEST_OVERHEAD_BYTES: u64 = 145;

impl Sender {
    /// A sender with its own client. An `https://` collector is verified against the Web PKI
    /// roots built in and, when `ca_file` is given, the CA certificates in that PEM file.
    pub fn new(
        collector_url: &str,
        token: Option<String>,
        timeout: Duration,
        ca_file: Option<&Path>,
    ) -> Result<Sender, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .pool_idle_timeout(Duration::from_secs(300));
        if let Some(path) = ca_file {
            for certificate in ca_certificates(path)? {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let client = builder
            .build()
            .map_err(|err| format!("building the http client: {err}"))?;
        Sender::with_client(client, collector_url, token)
    }

    /// A sender on an existing client, so many senders (the load test's simulated agents)
    /// share one connection pool.
    pub fn with_client(
        client: reqwest::Client,
        collector_url: &str,
        token: Option<String>,
    ) -> Result<Sender, String> {
        let base = collector_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!(
                "collector url {collector_url:?} must start with http:// or https://"
            ));
        }
        Ok(Sender {
            client,
            ingest_url: format!("{base}/api/v1/ingest"),
            token,
        })
    }

    /// Sends one gzip-compressed report body.
    pub async fn send(&self, body: Vec<u8>) -> SendOutcome {
        self.send_with_answer(body).await.0
    }

    /// [`Sender::send`], also returning what a `duplicate` answer said, and the digest of the
    /// match rules the collector resolves objects without stamps by (`match_rules` in an
    /// acknowledgement; `None` when the answer has none).
    pub async fn send_with_answer(&self, body: Vec<u8>) -> (SendOutcome, Option<Duplicate>) {
        let (outcome, answer) = self.send_for_answer(body).await;
        (outcome, answer.duplicate)
    }

    /// [`Sender::send`] with everything an acknowledgement says.
    pub async fn send_for_answer(&self, body: Vec<u8>) -> (SendOutcome, Answer) {
        let mut request = self
            .client
            .post(&self.ingest_url)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_ENCODING, "gzip")
            .body(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => return (SendOutcome::Unreachable(err.to_string()), Answer::default()),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = response.text().await.unwrap_or_default();
        let answer = serde_json::from_str::<serde_json::Value>(&text).ok();
        let duplicate = answer
            .as_ref()
            .filter(|v| v.get("status").and_then(|s| s.as_str()) == Some("duplicate"))
            .and_then(|v| {
                let number = |field: &str| v.get(field).and_then(serde_json::Value::as_u64);
                Some(Duplicate {
                    report_seq: number("seq")?,
                    acked_seq: number("acked_seq")?,
                    highest_change_seq: number("highest_change_seq").unwrap_or(0),
                })
            });
        let match_rules = answer
            .as_ref()
            .and_then(|v| v.get("match_rules"))
            .and_then(serde_json::Value::as_str)
            .filter(|digest| !digest.is_empty() && digest.len() <= 128)
            .map(str::to_owned);
        let message = answer
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or(text);
        let outcome = match status {
            200..=299 => SendOutcome::Acknowledged,
            429 | 500..=599 => {
                SendOutcome::RetryAfter(retry_after.unwrap_or(Duration::from_secs(5)))
            }
            _ => SendOutcome::Refused { status, message },
        };
        let acknowledged = outcome == SendOutcome::Acknowledged;
        let answer = Answer {
            duplicate: duplicate.filter(|_| acknowledged),
            // An acknowledgement without a digest: no rules are in force.
            match_rules: acknowledged
                .then(|| match_rules.unwrap_or_else(|| NO_MATCH_RULES.to_owned())),
        };
        (outcome, answer)
    }
}
