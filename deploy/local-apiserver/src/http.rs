//! One HTTP request to etcd or the API server, and its answer.

use std::time::Duration;

use serde_json::Value;

use crate::pki::ClientTls;
use crate::{LocalApiServerError, Result};

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A status and a body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
}

impl Answer {
    /// The body as JSON when the status is 2xx, else an error that carries the answer.
    pub(crate) fn json(self, method: &str, url: &str) -> Result<Value> {
        if !(200..300).contains(&self.status) {
            let mut body = self.body;
            if body.len() > 2000 {
                let cut = (0..=2000)
                    .rev()
                    .find(|&i| body.is_char_boundary(i))
                    .unwrap_or(0);
                body.truncate(cut);
                body.push('…');
            }
            return Err(LocalApiServerError::Status {
                method: method.to_owned(),
                url: url.to_owned(),
                status: self.status,
                body,
            });
        }
        serde_json::from_str(&self.body).map_err(|source| LocalApiServerError::Json {
            method: method.to_owned(),
            url: url.to_owned(),
            source,
        })
    }
}

/// One HTTP request with a blocking client. It runs on a thread of its own, because the
/// blocking client refuses to run on a thread inside an async runtime (tests of async code
/// call this from `#[tokio::test]` functions).
pub(crate) fn http(
    tls: Option<&ClientTls>,
    method: &str,
    url: &str,
    body: Option<Vec<u8>>,
) -> Result<Answer> {
    let failed = |source| LocalApiServerError::Http {
        method: method.to_owned(),
        url: url.to_owned(),
        source,
    };
    let send = || -> Result<Answer, reqwest::Error> {
        let mut builder = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT);
        if let Some(tls) = tls {
            builder = builder
                .tls_built_in_root_certs(false)
                .add_root_certificate(reqwest::Certificate::from_pem(tls.ca_pem.as_bytes())?)
                .identity(reqwest::Identity::from_pem(tls.identity_pem.as_bytes())?);
        }
        let client = builder.build()?;
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .expect("only fixed, valid method names are passed");
        let mut request = client.request(method, url);
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request.send()?;
        let status = response.status().as_u16();
        let body = response.text()?;
        Ok(Answer { status, body })
    };
    std::thread::scope(|scope| match scope.spawn(send).join() {
        Ok(result) => result.map_err(failed),
        Err(panic) => std::panic::resume_unwind(panic),
    })
}
