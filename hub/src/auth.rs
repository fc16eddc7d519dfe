//! Who may use the HTTP API, and how much of the fleet they see.
//!
//! A token file gives each caller a name (for logs), a role and, optionally, a group subtree
//! outside of which the caller sees nothing. Tokens are kept only as their SHA-256, the way the
//! central collector keeps agent tokens, and the file may give either the token itself or its
//! digest:
//!
//! ```yaml
//! tokens:
//!   - name: platform-admins
//!     tokenSha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//!     role: admin
//!   - name: team-de
//!     token: a-long-random-secret
//!     role: read
//!     scope: emea/de
//! ```
//!
//! [`require`] is the middleware: it turns `Authorization: Bearer <token>` into a [`Principal`]
//! in the request's extensions, which handlers take as an extractor ([`Principal`], or
//! [`Admin`] for routes that change something). Which routes are open is the router's
//! decision: it puts the middleware only on the others.
//!
//! Reading the file, hashing tokens and reporting a bad file at start or on reload are shared
//! with the collector's agent tokens (`fleetscope_runtime::tokens`); roles and scopes are the
//! hub's own. Tokens never appear in logs, errors or response bodies.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fleetscope_model::GroupPath;
use fleetscope_runtime::tokens::{self, TokenDigest};
use serde::Serialize;
use serde_yaml_ng::{Mapping, Value};

/// Why a token file could not be used: the same errors as for the collector's token file.
pub use fleetscope_runtime::tokens::TokenFileError as AuthError;
pub use fleetscope_runtime::tokens::MIN_TOKEN_LEN;

/// The longest caller name accepted; names go into logs.
pub const MAX_NAME_LEN: usize = 128;

/// The fields an entry of the token file may have.
const ENTRY_FIELDS: [&str; 5] = ["name", "token", "tokenSha256", "role", "scope"];

/// What a caller may do. `Admin` includes everything `Read` may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Read,
    Admin,
}

impl Role {
    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "read" => Some(Role::Read),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Admin => "admin",
        }
    }

    /// Whether this role may do what `needed` may do.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Principal {
    /// The name the token file gives the caller; for logs, never a secret.
    pub name: String,
    pub role: Role,
    /// The group subtree the caller is limited to; `None` sees the whole fleet.
    pub scope: Option<GroupPath>,
}

impl Principal {
    /// The principal of every request in insecure mode: an unscoped admin.
    pub fn insecure() -> Principal {
        Principal {
            name: "insecure".to_owned(),
            role: Role::Admin,
            scope: None,
        }
    }

    pub fn is_admin(&self) -> bool {
        self.role.allows(Role::Admin)
    }

    /// Whether `group` is visible to this caller: always when unscoped, otherwise when `group`
    /// is the scope or lies below it (segment-wise: scope `emea/de` does not see `emea/dev`).
    pub fn sees_group(&self, group: &GroupPath) -> bool {
        self.scope
            .as_ref()
            .is_none_or(|scope| group.is_within(scope))
    }

    /// The subtree every answer to this caller must be limited to, if any.
    pub fn scope_prefix(&self) -> Option<&GroupPath> {
        self.scope.as_ref()
    }
}

/// Fails with 403 unless the caller has the admin role.
pub fn require_admin(principal: &Principal) -> Result<(), AuthRejection> {
    if principal.is_admin() {
        Ok(())
    } else {
        Err(AuthRejection::AdminRequired {
            name: principal.name.clone(),
            role: principal.role,
        })
    }
}

/// Fails with 403 unless the caller sees `group`.
pub fn require_group(principal: &Principal, group: &GroupPath) -> Result<(), AuthRejection> {
    match &principal.scope {
        Some(scope) if !group.is_within(scope) => Err(AuthRejection::OutsideScope {
            name: principal.name.clone(),
            scope: scope.clone(),
            group: group.clone(),
        }),
        _ => Ok(()),
    }
}

/// The callers a token file admits, by the SHA-256 of their token.
#[derive(Clone)]
pub struct TokenTable {
    by_digest: HashMap<TokenDigest, Principal>,
}

impl TokenTable {
    /// Every caller of the file, sorted by name.
    pub fn principals(&self) -> Vec<&Principal> {
        let mut all: Vec<&Principal> = self.by_digest.values().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    fn find(&self, token: &str) -> Option<&Principal> {
        self.by_digest.get(&tokens::digest(token))
    }
}

/// Digests stay out of debug output; names are enough to tell tables apart.
impl fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.principals().iter().map(|p| &p.name))
            .finish()
    }
}

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum Auth {
    /// Local use only: every request is [`Principal::insecure`], whatever it sends.
    Insecure,
    Tokens(TokenTable),
}

impl Auth {
    /// Reads a token file, reporting every problem in it at once.
    pub fn load(path: &Path) -> Result<Auth, AuthError> {
        tokens::load(path, Auth::parse)
    }

    /// Reads the text of a token file. On failure, returns every problem found, each starting
    /// with the entry and field it is about (`tokens[2].role: ...`).
    pub fn parse(text: &str) -> Result<Auth, Vec<String>> {
        let document: Value = serde_yaml_ng::from_str(text).map_err(|err| vec![err.to_string()])?;
        let top = match &document {
            Value::Mapping(top) => top,
            Value::Null => return Err(vec!["the file is empty; expected a `tokens` list".into()]),
            _ => return Err(vec!["expected a mapping with a `tokens` list".into()]),
        };
        let mut problems = Vec::new();
        for key in top.keys() {
            if key.as_str() != Some("tokens") {
                problems.push(format!("{}; expected `tokens`", describe_key(key)));
            }
        }
        let entries: &[Value] = match top.get("tokens") {
            Some(Value::Sequence(entries)) if entries.is_empty() => {
                problems.push("tokens: the list is empty; every request would be refused".into());
                &[]
            }
            Some(Value::Sequence(entries)) => entries,
            Some(_) => {
                problems.push("tokens: expected a list of entries".into());
                &[]
            }
            None => {
                problems.push("tokens: missing".into());
                &[]
            }
        };
        let mut names: HashMap<&str, usize> = HashMap::new();
        let mut digests: HashMap<TokenDigest, usize> = HashMap::new();
        let mut by_digest: HashMap<TokenDigest, Principal> = HashMap::new();
        for (index, entry) in entries.iter().enumerate() {
            let at = format!("tokens[{index}]");
            let Value::Mapping(fields) = entry else {
                problems.push(format!(
                    "{at}: expected a mapping with name, role and token or tokenSha256"
                ));
                continue;
            };
            if let Some(name) = fields.get("name").and_then(Value::as_str) {
                match names.entry(name) {
                    Entry::Occupied(first) => problems.push(format!(
                        "{at}.name: {name:?} is already the name of tokens[{}]",
                        first.get()
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(index);
                    }
                }
            }
            let checked = check_entry(fields, &at, &mut problems);
            if let Some(digest) = checked.digest {
                match digests.entry(digest) {
                    Entry::Occupied(first) => problems.push(format!(
                        "{at}: the same token is already given to tokens[{}]",
                        first.get()
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(index);
                        if let Some(principal) = checked.principal {
                            by_digest.insert(digest, principal);
                        }
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(Auth::Tokens(TokenTable { by_digest }))
        } else {
            Err(problems)
        }
    }

    pub fn is_insecure(&self) -> bool {
        matches!(self, Auth::Insecure)
    }

    /// The caller a request's headers identify.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthRejection> {
        let table = match self {
            Auth::Insecure => return Ok(Principal::insecure()),
            Auth::Tokens(table) => table,
        };
        let token = bearer_token(headers)?;
        table
            .find(token)
            .cloned()
            .ok_or(AuthRejection::UnknownToken)
    }
}

/// The authentication in force, replaced when the token file is reloaded (see
/// `fleetscope_serve::reload`). Cheap to clone; every clone sees the same replacement.
#[derive(Debug, Clone)]
pub struct LiveAuth(Arc<RwLock<Arc<Auth>>>);

impl LiveAuth {
    pub fn new(auth: Auth) -> LiveAuth {
        LiveAuth(Arc::new(RwLock::new(Arc::new(auth))))
    }

    /// The authentication in force now.
    pub fn current(&self) -> Arc<Auth> {
        self.0.read().expect("auth lock").clone()
    }

    /// Puts `auth` in force for every request from now on.
    pub fn replace(&self, auth: Auth) {
        *self.0.write().expect("auth lock") = Arc::new(auth);
    }

    /// Reads a token file as [`Auth::load`] does, with the version of the file read.
    pub fn load_versioned(path: &Path) -> Result<(Auth, String), String> {
        tokens::load_versioned(path, Auth::parse)
    }

    /// Reloads the token file when it changes or on SIGHUP, starting from `version` (what
    /// [`LiveAuth::load_versioned`] returned at start).
    pub fn watch(
        &self,
        path: PathBuf,
        version: String,
        interval: std::time::Duration,
        metrics: fleetscope_serve::reload::ReloadMetrics,
    ) -> tokio::task::JoinHandle<()> {
        let live = self.clone();
        tokens::watch(
            "token file",
            path,
            version,
            interval,
            metrics,
            Auth::parse,
            move |auth| live.replace(auth),
        )
    }
}

impl From<Auth> for LiveAuth {
    fn from(auth: Auth) -> LiveAuth {
        LiveAuth::new(auth)
    }
}

impl From<Arc<Auth>> for LiveAuth {
    fn from(auth: Arc<Auth>) -> LiveAuth {
        LiveAuth(Arc::new(RwLock::new(auth)))
    }
}

/// What could be made of one entry: its token's digest when the token is valid, its caller
/// when every field is.
struct Checked {
    digest: Option<TokenDigest>,
    principal: Option<Principal>,
}

/// Checks one entry, adding each problem found to `problems`. Values of `token` and
/// `tokenSha256` are never quoted in a problem.
fn check_entry(fields: &Mapping, at: &str, problems: &mut Vec<String>) -> Checked {
    let before = problems.len();
    for key in fields.keys() {
        if !key.as_str().is_some_and(|key| ENTRY_FIELDS.contains(&key)) {
            problems.push(format!(
                "{at}: {}; expected one of {}",
                describe_key(key),
                ENTRY_FIELDS.join(", ")
            ));
        }
    }
    let name = match string_field(fields, "name", at, problems) {
        Some(Some(name)) => match check_name(name) {
            Ok(()) => Some(name),
            Err(why) => {
                problems.push(format!("{at}.name: {why}"));
                None
            }
        },
        Some(None) => {
            problems.push(format!("{at}.name: missing"));
            None
        }
        None => None,
    };
    let token = string_field(fields, "token", at, problems);
    let token_sha256 = string_field(fields, "tokenSha256", at, problems);
    let digest = match (token, token_sha256) {
        (Some(Some(token)), Some(None)) => match check_token(token) {
            Ok(()) => Some(tokens::digest(token)),
            Err(why) => {
                problems.push(format!("{at}.token: {why}"));
                None
            }
        },
        (Some(None), Some(Some(hex))) => match tokens::parse_hex_digest(hex) {
            Ok(digest) => Some(digest),
            Err(why) => {
                problems.push(format!("{at}.tokenSha256: {why}"));
                None
            }
        },
        (Some(Some(_)), Some(Some(_))) | (Some(None), Some(None)) => {
            problems.push(format!("{at}: give exactly one of token and tokenSha256"));
            None
        }
        // One of the two is not a string; that is already reported.
        _ => None,
    };
    let role = match string_field(fields, "role", at, problems) {
        Some(Some(role)) => match Role::parse(role) {
            Some(role) => Some(role),
            None => {
                problems.push(format!(
                    "{at}.role: {role:?} is not a role; expected read or admin"
                ));
                None
            }
        },
        Some(None) => {
            problems.push(format!("{at}.role: missing; expected read or admin"));
            None
        }
        None => None,
    };
    let scope = match string_field(fields, "scope", at, problems) {
        Some(Some(scope)) => match GroupPath::parse(scope) {
            Ok(scope) => Some(Some(scope)),
            Err(err) => {
                problems.push(format!("{at}.scope: {err}"));
                None
            }
        },
        Some(None) => Some(None),
        None => None,
    };
    let principal = match (name, role, scope) {
        (Some(name), Some(role), Some(scope)) if problems.len() == before => Some(Principal {
            name: name.to_owned(),
            role,
            scope,
        }),
        _ => None,
    };
    Checked { digest, principal }
}

/// A field's text: `Some(None)` when absent or null, `None` (with a problem added) when it is
/// not a string.
fn string_field<'a>(
    fields: &'a Mapping,
    field: &str,
    at: &str,
    problems: &mut Vec<String>,
) -> Option<Option<&'a str>> {
    match fields.get(field) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(text)) => Some(Some(text)),
        Some(_) => {
            problems.push(format!("{at}.{field}: expected a string"));
            None
        }
    }
}

fn describe_key(key: &Value) -> String {
    match key.as_str() {
        Some(key) => format!("unknown field {key:?}"),
        None => "a field name that is not a string".to_owned(),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("is empty".into());
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(format!("is longer than {MAX_NAME_LEN} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(format!("{name:?} contains a control character"));
    }
    Ok(())
}

fn check_token(token: &str) -> Result<(), String> {
    if token.len() < MIN_TOKEN_LEN {
        return Err(format!("shorter than {MIN_TOKEN_LEN} characters"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "contains a character a request cannot send (use printable ASCII without spaces)"
                .into(),
        );
    }
    Ok(())
}

/// The token of an `Authorization: Bearer <token>` header. The scheme is matched without
/// regard to case.
fn bearer_token(headers: &HeaderMap) -> Result<&str, AuthRejection> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthRejection::MissingToken)?;
    if values.next().is_some() {
        return Err(AuthRejection::MalformedHeader(
            "more than one Authorization header",
        ));
    }
    let value = value.to_str().map_err(|_| {
        AuthRejection::MalformedHeader("the Authorization header is not printable ASCII")
    })?;
    let (scheme, token) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthRejection::MalformedHeader(
            "the Authorization header must use the Bearer scheme",
        ));
    }
    let token = token.trim();
    if token.is_empty() {
        return Err(AuthRejection::MalformedHeader(
            "the Authorization header has no token after Bearer",
        ));
    }
    Ok(token)
}

/// Why a request was refused. Responds with `{"error": "..."}`, and for 401 with a
/// `WWW-Authenticate` header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthRejection {
    #[error("missing bearer token (send Authorization: Bearer <token>)")]
    MissingToken,
    #[error("{0}")]
    MalformedHeader(&'static str),
    #[error("unknown token")]
    UnknownToken,
    #[error("{name:?} has the {role} role; this needs admin")]
    AdminRequired { name: String, role: Role },
    #[error("{name:?} is limited to group {scope} and cannot see group {group}")]
    OutsideScope {
        name: String,
        scope: GroupPath,
        group: GroupPath,
    },
    /// A handler asked for the caller on a route without the middleware: a wiring mistake,
    /// refused rather than served unauthenticated.
    #[error("this route is not behind authentication")]
    NotAuthenticated,
}

impl AuthRejection {
    pub fn status(&self) -> StatusCode {
        match self {
            AuthRejection::MissingToken
            | AuthRejection::MalformedHeader(_)
            | AuthRejection::UnknownToken => StatusCode::UNAUTHORIZED,
            AuthRejection::AdminRequired { .. } | AuthRejection::OutsideScope { .. } => {
                StatusCode::FORBIDDEN
            }
            AuthRejection::NotAuthenticated => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AuthRejection {
    fn into_response(self) -> Response {
        let challenge = match self {
            AuthRejection::MissingToken | AuthRejection::MalformedHeader(_) => Some("Bearer"),
            AuthRejection::UnknownToken => Some("Bearer error=\"invalid_token\""),
            _ => None,
        };
        let mut response = (
            self.status(),
            Json(crate::answers::ErrorBody {
                error: self.to_string(),
                parameter: None,
            }),
        )
            .into_response();
        if let Some(challenge) = challenge {
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response
    }
}

/// The middleware: `axum::middleware::from_fn_with_state(LiveAuth, require)`. On success the
/// request goes on with its [`Principal`] in the extensions and without its `Authorization`
/// header, so that nothing further along can log the token. The request is checked against the
/// token file in force when it arrives.
pub async fn require(State(auth): State<LiveAuth>, mut request: Request, next: Next) -> Response {
    let auth = auth.current();
    match auth.authenticate(request.headers()) {
        Ok(principal) => {
            request.headers_mut().remove(AUTHORIZATION);
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(rejection) => {
            tracing::debug!(
                method = %request.method(),
                path = request.uri().path(),
                reason = %rejection,
                "request refused"
            );
            rejection.into_response()
        }
    }
}

/// The caller, as [`require`] put it on the request.
impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = AuthRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or(AuthRejection::NotAuthenticated)
    }
}

/// A caller with the admin role; a read-only caller gets 403.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admin(pub Principal);

impl<S: Send + Sync> FromRequestParts<S> for Admin {
    type Rejection = AuthRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let principal = Principal::from_request_parts(parts, state).await?;
        require_admin(&principal)?;
        Ok(Admin(principal))
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::{get, post};
    use axum::Router;
    use serde_json::json;
    use sha2::{Digest, Sha256};
    use tower::ServiceExt;

    use super::*;

    const ADMIN_TOKEN: &str = "admin-token-0123456789";
    const READ_TOKEN: &str = "read-token-0123456789";
    const SCOPED_TOKEN: &str = "scoped-token-0123456789";

    fn hex(token: &str) -> String {
        format!("{:x}", Sha256::digest(token.as_bytes()))
    }

    fn tokens() -> Auth {
        Auth::parse(&format!(
            "tokens:
  - name: platform-admins
    tokenSha256: {}
    role: admin
  - name: viewers
    token: {READ_TOKEN}
    role: read
  - name: team-de
    tokenSha256: {}
    role: read
    scope: emea/de
",
            hex(ADMIN_TOKEN),
            hex(SCOPED_TOKEN).to_uppercase(),
        ))
        .unwrap()
    }

    fn group(path: &str) -> GroupPath {
        GroupPath::parse(path).unwrap()
    }

    async fn whoami(principal: Principal) -> Json<Principal> {
        Json(principal)
    }

    async fn change(Admin(principal): Admin) -> String {
        format!("changed by {}", principal.name)
    }

    async fn sees_authorization(headers: HeaderMap) -> String {
        headers.contains_key(AUTHORIZATION).to_string()
    }

    async fn unguarded(principal: Principal) -> String {
        principal.name
    }

    fn app(auth: Auth) -> Router {
        Router::new()
            .route("/whoami", get(whoami))
            .route("/change", post(change))
            .route("/headers", get(sees_authorization))
            .layer(axum::middleware::from_fn_with_state(
                LiveAuth::new(auth),
                require,
            ))
            .route("/unguarded", get(unguarded))
    }

    struct Reply {
        status: StatusCode,
        challenge: Option<String>,
        body: String,
    }

    impl Reply {
        fn json(&self) -> serde_json::Value {
            serde_json::from_str(&self.body).unwrap()
        }
    }

    async fn send(auth: Auth, method: &str, path: &str, authorization: &[&str]) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        for value in authorization {
            request = request.header(AUTHORIZATION, *value);
        }
        let response = app(auth)
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        Reply {
            status,
            challenge,
            body: String::from_utf8(body.to_vec()).unwrap(),
        }
    }

    fn bearer(token: &str) -> String {
        format!("Bearer {token}")
    }

    #[tokio::test]
    async fn admin_token_reads_and_changes() {
        let reply = send(tokens(), "GET", "/whoami", &[&bearer(ADMIN_TOKEN)]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(
            reply.json(),
            json!({"name": "platform-admins", "role": "admin", "scope": null})
        );
        let reply = send(tokens(), "POST", "/change", &[&bearer(ADMIN_TOKEN)]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "changed by platform-admins");
    }

    #[tokio::test]
    async fn read_token_reads_but_may_not_change() {
        let reply = send(tokens(), "GET", "/whoami", &[&bearer(READ_TOKEN)]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(
            reply.json(),
            json!({"name": "viewers", "role": "read", "scope": null})
        );
        let reply = send(tokens(), "POST", "/change", &[&bearer(READ_TOKEN)]).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN);
        assert_eq!(
            reply.json(),
            json!({"error": "\"viewers\" has the read role; this needs admin"})
        );
        assert_eq!(reply.challenge, None);
    }

    #[tokio::test]
    async fn scoped_token_carries_its_scope_and_scheme_case_does_not_matter() {
        let reply = send(
            tokens(),
            "GET",
            "/whoami",
            &[&format!("bearer   {SCOPED_TOKEN} ")],
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(
            reply.json(),
            json!({"name": "team-de", "role": "read", "scope": "emea/de"})
        );
    }

    #[tokio::test]
    async fn missing_header_is_401_with_a_challenge() {
        let reply = send(tokens(), "GET", "/whoami", &[]).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.challenge.as_deref(), Some("Bearer"));
        assert_eq!(
            reply.json(),
            json!({"error": "missing bearer token (send Authorization: Bearer <token>)"})
        );
    }

    #[tokio::test]
    async fn malformed_headers_are_401_with_a_challenge() {
        let cases = [
            (
                vec![format!("Basic {ADMIN_TOKEN}")],
                "the Authorization header must use the Bearer scheme",
            ),
            (
                vec![ADMIN_TOKEN.to_owned()],
                "the Authorization header must use the Bearer scheme",
            ),
            (
                vec!["Bearer".to_owned()],
                "the Authorization header has no token after Bearer",
            ),
            (
                vec!["Bearer    ".to_owned()],
                "the Authorization header has no token after Bearer",
            ),
            (
                vec![bearer(ADMIN_TOKEN), bearer(READ_TOKEN)],
                "more than one Authorization header",
            ),
        ];
        for (headers, message) in cases {
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            let reply = send(tokens(), "GET", "/whoami", &headers).await;
            assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{headers:?}");
            assert_eq!(reply.challenge.as_deref(), Some("Bearer"), "{headers:?}");
            assert_eq!(reply.json(), json!({ "error": message }), "{headers:?}");
        }
    }

    #[test]
    fn a_header_that_is_not_ascii_is_malformed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            AUTHORIZATION,
            HeaderValue::from_bytes("Bearer tökenß-0123456789".as_bytes()).unwrap(),
        );
        assert_eq!(
            tokens().authenticate(&headers),
            Err(AuthRejection::MalformedHeader(
                "the Authorization header is not printable ASCII"
            ))
        );
    }

    #[tokio::test]
    async fn unknown_token_is_401_and_not_echoed() {
        let presented = "not-a-known-token-0123456789";
        let reply = send(tokens(), "GET", "/whoami", &[&bearer(presented)]).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            reply.challenge.as_deref(),
            Some("Bearer error=\"invalid_token\"")
        );
        assert_eq!(reply.json(), json!({"error": "unknown token"}));
        assert!(!reply.body.contains(presented));
        // The digest given in the file is not itself a token.
        let reply = send(tokens(), "GET", "/whoami", &[&bearer(&hex(ADMIN_TOKEN))]).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn handlers_do_not_see_the_token() {
        let reply = send(tokens(), "GET", "/headers", &[&bearer(ADMIN_TOKEN)]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "false");
    }

    #[tokio::test]
    async fn a_route_without_the_middleware_does_not_get_a_principal() {
        let reply = send(tokens(), "GET", "/unguarded", &[&bearer(ADMIN_TOKEN)]).await;
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            reply.json(),
            json!({"error": "this route is not behind authentication"})
        );
    }

    #[tokio::test]
    async fn insecure_mode_makes_every_request_an_unscoped_admin() {
        for headers in [vec![], vec!["Basic whatever"], vec!["Bearer unknown"]] {
            let reply = send(Auth::Insecure, "GET", "/whoami", &headers).await;
            assert_eq!(reply.status, StatusCode::OK, "{headers:?}");
            assert_eq!(
                reply.json(),
                json!({"name": "insecure", "role": "admin", "scope": null})
            );
        }
        let reply = send(Auth::Insecure, "POST", "/change", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "changed by insecure");
        assert!(Auth::Insecure.is_insecure());
        assert!(!tokens().is_insecure());
    }

    #[test]
    fn admin_implies_read() {
        assert!(Role::Admin.allows(Role::Read));
        assert!(Role::Admin.allows(Role::Admin));
        assert!(Role::Read.allows(Role::Read));
        assert!(!Role::Read.allows(Role::Admin));
        let reader = Principal {
            name: "r".into(),
            role: Role::Read,
            scope: None,
        };
        assert_eq!(
            require_admin(&reader),
            Err(AuthRejection::AdminRequired {
                name: "r".into(),
                role: Role::Read
            })
        );
        assert_eq!(require_admin(&Principal::insecure()), Ok(()));
    }

    #[test]
    fn a_scope_limits_what_a_principal_sees() {
        let scoped = Principal {
            name: "team-de".into(),
            role: Role::Read,
            scope: Some(group("emea/de")),
        };
        assert_eq!(scoped.scope_prefix(), Some(&group("emea/de")));
        assert!(scoped.sees_group(&group("emea/de")));
        assert!(scoped.sees_group(&group("emea/de/berlin")));
        assert!(scoped.sees_group(&group("emea/de/berlin/store-1")));
        assert!(!scoped.sees_group(&group("emea")), "the parent");
        assert!(
            !scoped.sees_group(&group("emea/dev")),
            "a sibling with the scope as prefix"
        );
        assert!(!scoped.sees_group(&group("emea/fr")), "a sibling");
        assert!(
            !scoped.sees_group(&group("apac/emea/de")),
            "the same tail elsewhere"
        );
        assert_eq!(require_group(&scoped, &group("emea/de/berlin")), Ok(()));
        let refused = require_group(&scoped, &group("emea/dev")).unwrap_err();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            refused.to_string(),
            "\"team-de\" is limited to group emea/de and cannot see group emea/dev"
        );

        let unscoped = Principal {
            name: "all".into(),
            role: Role::Read,
            scope: None,
        };
        assert_eq!(unscoped.scope_prefix(), None);
        assert!(unscoped.sees_group(&group("emea/dev")));
        assert!(unscoped.sees_group(&group("apac")));
        assert_eq!(require_group(&unscoped, &group("apac")), Ok(()));
    }

    #[test]
    fn every_problem_in_the_file_is_reported_at_once() {
        let secret = "a-secret-that-must-not-leak";
        let text = format!(
            "tokens:
  - name: ok
    token: abcdefghijklmnopq
    role: read
  - name: ok
    token: bcdefghijklmnopqr
    role: read
  - name: bad-role
    token: cdefghijklmnopqrs
    role: owner
  - name: bad-scope
    token: defghijklmnopqrs
    role: read
    scope: emea//de
  - name: bad-hex
    tokenSha256: {secret}
    role: admin
  - name: short
    token: short
    role: read
  - name: both
    token: efghijklmnopqrstu
    tokenSha256: {}
  - role: read
    tokn: fghijklmnopqrstuv
  - name: same-token
    token: abcdefghijklmnopq
    role: admin
  - name: spaced
    token: \"{secret} x\"
    role: read
  - name: [not, text]
    token: ghijklmnopqrstuvw
    role: 3
  - just a string
",
            hex("x")
        );
        let problems = Auth::parse(&text).unwrap_err();
        let expected = [
            "tokens[1].name: \"ok\" is already the name of tokens[0]",
            "tokens[2].role: \"owner\" is not a role; expected read or admin",
            "tokens[3].scope: group path \"emea//de\" has an empty segment at position 1 (leading, trailing or doubled '/')",
            "tokens[4].tokenSha256: expected 64 hex digits, found 27 characters",
            "tokens[5].token: shorter than 16 characters",
            "tokens[6]: give exactly one of token and tokenSha256",
            "tokens[6].role: missing; expected read or admin",
            "tokens[7]: unknown field \"tokn\"; expected one of name, token, tokenSha256, role, scope",
            "tokens[7].name: missing",
            "tokens[7]: give exactly one of token and tokenSha256",
            "tokens[8]: the same token is already given to tokens[0]",
            "tokens[9].token: contains a character a request cannot send (use printable ASCII without spaces)",
            "tokens[10].name: expected a string",
            "tokens[10].role: expected a string",
            "tokens[11]: expected a mapping with name, role and token or tokenSha256",
        ];
        assert_eq!(problems, expected, "{problems:#?}");
        assert!(problems.iter().all(|p| !p.contains(secret)));
    }

    #[test]
    fn the_shape_of_the_file_is_checked() {
        assert_eq!(
            Auth::parse("tokens: []\nextra: 1\n").unwrap_err(),
            [
                "unknown field \"extra\"; expected `tokens`",
                "tokens: the list is empty; every request would be refused",
            ]
        );
        assert_eq!(
            Auth::parse("token:\n  - name: a\n").unwrap_err(),
            [
                "unknown field \"token\"; expected `tokens`",
                "tokens: missing"
            ]
        );
        assert_eq!(
            Auth::parse("tokens: abc\n").unwrap_err(),
            ["tokens: expected a list of entries"]
        );
        assert_eq!(
            Auth::parse("").unwrap_err(),
            ["the file is empty; expected a `tokens` list"]
        );
        assert_eq!(
            Auth::parse("- a\n").unwrap_err(),
            ["expected a mapping with a `tokens` list"]
        );
        let syntax = Auth::parse("tokens: [\n").unwrap_err();
        assert_eq!(syntax.len(), 1);
        assert!(syntax[0].contains("line"), "{syntax:?}");
        let bad_hex = Auth::parse(&format!(
            "tokens:\n  - name: a\n    tokenSha256: {}zz\n    role: read\n",
            &hex("x")[..62]
        ))
        .unwrap_err();
        assert_eq!(
            bad_hex,
            ["tokens[0].tokenSha256: expected 64 hex digits, found another character at position 62"]
        );
    }

    #[test]
    fn debug_output_names_callers_only() {
        let debug = format!("{:?}", tokens());
        assert_eq!(
            debug,
            "Tokens([\"platform-admins\", \"team-de\", \"viewers\"])"
        );
    }

    #[test]
    fn load_names_the_file_in_its_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.yaml");
        std::fs::write(
            &path,
            format!("tokens:\n  - name: a\n    token: {ADMIN_TOKEN}\n    role: admin\n"),
        )
        .unwrap();
        let Auth::Tokens(table) = Auth::load(&path).unwrap() else {
            panic!("a token file gives tokens");
        };
        let names: Vec<&str> = table.principals().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a"]);

        std::fs::write(&path, "tokens:\n  - name: a\n  - name: b\n    role: x\n").unwrap();
        let err = Auth::load(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "token file {}:
  tokens[0]: give exactly one of token and tokenSha256
  tokens[0].role: missing; expected read or admin
  tokens[1]: give exactly one of token and tokenSha256
  tokens[1].role: \"x\" is not a role; expected read or admin",
                path.display()
            )
        );

        let missing = dir.path().join("absent.yaml");
        let err = Auth::load(&missing).unwrap_err();
        assert!(matches!(err, AuthError::Read { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&format!("reading token file {}: ", missing.display())),
            "{err}"
        );
    }
}
