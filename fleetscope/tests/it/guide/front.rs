//! An authorizing front for an API server that authorizes nothing itself: service account
//! tokens in, RBAC rules applied to each request, the allowed ones forwarded.

use std::collections::BTreeMap;

use fleetscope_local_apiserver::LocalApiServer;
use serde_json::{json, Value};

/// One rule of a ClusterRole.
#[derive(Debug, Clone)]
pub(super) struct Rule {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    resource_names: Vec<String>,
}

impl Rule {
    pub(super) fn read(rule: &Value) -> Rule {
        let list = |key: &str| -> Vec<String> {
            rule[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        assert!(
            list("nonResourceURLs").is_empty(),
            "the test's authorizer does not grant non-resource URLs: {rule}"
        );
        Rule {
            api_groups: list("apiGroups"),
            resources: list("resources"),
            verbs: list("verbs"),
            resource_names: list("resourceNames"),
        }
    }

    /// RBAC's rule match for a resource request.
    fn allows(&self, request: &Attributes) -> bool {
        let has = |list: &[String], value: &str| list.iter().any(|v| v == "*" || v == value);
        let resource = match &request.subresource {
            Some(sub) => format!("{}/{sub}", request.resource),
            None => request.resource.clone(),
        };
        has(&self.api_groups, &request.group)
            && has(&self.resources, &resource)
            && has(&self.verbs, &request.verb)
            && (self.resource_names.is_empty()
                || request
                    .name
                    .as_ref()
                    .is_some_and(|name| self.resource_names.contains(name)))
    }
}

/// What a request asks for, as the API server's authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Attributes {
    pub(super) verb: String,
    pub(super) group: String,
    pub(super) resource: String,
    subresource: Option<String>,
    name: Option<String>,
}

/// The attributes of a resource request; `None` for any other path.
fn attributes(method: &str, target: &str) -> Option<Attributes> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _namespace, rest @ ..] if !rest.is_empty() => rest,
        rest => rest,
    };
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub] => (*resource, Some(*name), Some(*sub)),
        _ => return None,
    };
    let watch = query
        .split('&')
        .any(|pair| pair == "watch=true" || pair == "watch=1");
    let verb = match (method, name.is_some()) {
        ("GET", _) if watch => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", false) => "deletecollection",
        ("DELETE", true) => "delete",
        _ => return None,
    };
    Some(Attributes {
        verb: verb.to_owned(),
        group: group.to_owned(),
        resource: resource.to_owned(),
        subresource: subresource.map(str::to_owned),
        name: name.map(str::to_owned),
    })
}

/// In front of one cluster's API server: authenticates service account tokens and authorizes
/// each request by the ClusterRoles bound to the account, then forwards what it allows (with
/// the administrator's certificate, watches streamed) and answers the rest 401 or 403 as the
/// API server would.
pub(super) struct Front {
    pub(super) port: u16,
    /// Every request: user, attributes, whether it was allowed.
    requests: std::sync::Arc<std::sync::Mutex<Vec<(String, Attributes, bool)>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct FrontState {
    upstream: String,
    client: reqwest::Client,
    /// token → user.
    tokens: BTreeMap<String, String>,
    grants: BTreeMap<String, Vec<Rule>>,
    requests: std::sync::Arc<std::sync::Mutex<Vec<(String, Attributes, bool)>>>,
}

impl Front {
    pub(super) fn start(
        api: &LocalApiServer,
        tokens: BTreeMap<String, String>,
        grants: BTreeMap<String, Vec<Rule>>,
    ) -> Front {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let identity = reqwest::Identity::from_pem(
            format!("{}{}", api.client_cert_pem(), api.client_key_pem()).as_bytes(),
        )
        .unwrap();
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .add_root_certificate(reqwest::Certificate::from_pem(api.ca_pem().as_bytes()).unwrap())
            .identity(identity)
            .build()
            .unwrap();
        let requests = std::sync::Arc::default();
        let state = std::sync::Arc::new(FrontState {
            upstream: api.server_url(),
            client,
            tokens,
            grants,
            requests: std::sync::Arc::clone(&requests),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((socket, _)) = listener.accept().await {
                let state = std::sync::Arc::clone(&state);
                tokio::spawn(async move {
                    let _ = serve(socket, &state).await;
                });
            }
        });
        Front {
            port,
            requests,
            runtime: Some(runtime),
        }
    }

    pub(super) fn requests(&self) -> Vec<(String, Attributes, bool)> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A Kubernetes `Status` answer.
fn status_answer(code: u16, reason: &str, message: &str) -> String {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code})
    .to_string();
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Answers one request on `socket` (one per connection).
async fn serve(mut socket: tokio::net::TcpStream, state: &FrontState) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut raw = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        let read = socket.read(&mut buffer).await?;
        if read == 0 {
            return Ok(());
        }
        raw.extend_from_slice(&buffer[..read]);
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.lines();
    let request_line: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
    let (method, target) = (request_line[0], request_line.get(1).copied().unwrap_or("/"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = raw[head_end..].to_vec();
    while body.len() < length {
        let read = socket.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&buffer[..read]);
    }
    let user = header("authorization")
        .and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned))
        .and_then(|token| state.tokens.get(&token).cloned());
    let Some(user) = user else {
        let answer = status_answer(401, "Unauthorized", "Unauthorized");
        return socket.write_all(answer.as_bytes()).await;
    };
    let attributes = attributes(method, target);
    let allowed = attributes.as_ref().is_some_and(|request| {
        state
            .grants
            .get(&user)
            .is_some_and(|rules| rules.iter().any(|rule| rule.allows(request)))
    });
    let recorded = attributes.clone().unwrap_or(Attributes {
        verb: method.to_ascii_lowercase(),
        group: String::new(),
        resource: target.to_owned(),
        subresource: None,
        name: None,
    });
    state
        .requests
        .lock()
        .unwrap()
        .push((user.clone(), recorded.clone(), allowed));
    if !allowed {
        let message = format!(
            "{}.{} is forbidden: User \"{user}\" cannot {} resource \"{}\" in API group \"{}\" at the cluster scope",
            recorded.resource, recorded.group, recorded.verb, recorded.resource, recorded.group
        );
        let answer = status_answer(403, "Forbidden", &message);
        return socket.write_all(answer.as_bytes()).await;
    }
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let mut forwarded = state
        .client
        .request(method, format!("{}{target}", state.upstream))
        .body(body);
    for name in ["accept", "content-type"] {
        if let Some(value) = header(name) {
            forwarded = forwarded.header(name, value);
        }
    }
    let mut answer = match forwarded.send().await {
        Ok(answer) => answer,
        Err(err) => {
            let answer = status_answer(503, "ServiceUnavailable", &err.to_string());
            return socket.write_all(answer.as_bytes()).await;
        }
    };
    let content_type = answer
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        answer.status()
    );
    socket.write_all(head.as_bytes()).await?;
    while let Some(chunk) = answer.chunk().await.ok().flatten() {
        socket
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await?;
        socket.write_all(&chunk).await?;
        socket.write_all(b"\r\n").await?;
    }
    socket.write_all(b"0\r\n\r\n").await
}
