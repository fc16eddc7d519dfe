//! The hub's own pages under `/ui`: read-only views of the API's answers for people, rendered
//! on the server from typed templates (maud).
//!
//! Every page asks the API for what it shows, through the same router the API is served from
//! and with the caller's token, so a page cannot disagree with the API: the same scopes, the
//! same drift rules, the same `at`. The answers are read into the typed structs of `answers`
//! (only the fields a page shows) and laid out by `view`.
//!
//! Signing in puts the token in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` when the hub
//! serves TLS) scoped to `/ui`; the token is sent in a form's body, never in a URL, and never
//! logged. A hub without a token file (insecure) shows its pages without signing in.
//!
//! The pages need no script: links and plain forms (a `GET` form sets `at`). Styles are served
//! by the hub itself, and a strict content security policy keeps everything else out.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::de::DeserializeOwned;
use tower::ServiceExt as _;

use crate::auth::LiveAuth;

mod answers;
mod app;
mod cluster;
mod fleet;
mod lists;
mod oidc;
mod sign_in;
mod view;

/// The name of the cookie that holds the caller's token.
pub const SESSION_COOKIE: &str = "fleetscope_session";

/// How long a sign-in lasts, in seconds (the cookie's `Max-Age`).
pub const SESSION_SECONDS: u32 = 12 * 3600;

/// The largest API answer a page reads; the pages ask for pages of listings, far below this.
const ANSWER_LIMIT: usize = 16 * 1024 * 1024;

/// What the page handlers share: the API to ask, the authentication in force (for signing
/// in), and whether cookies must be `Secure`.
#[derive(Clone)]
pub struct Ui {
    api: Router,
    auth: LiveAuth,
    secure_cookies: bool,
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ui")
            .field("secure_cookies", &self.secure_cookies)
            .finish_non_exhaustive()
    }
}

/// The pages' routes. `api` is the API's router with its state and authentication: the
/// pages ask it as any client would.
pub fn router<S: Clone + Send + Sync + 'static>(
    api: Router,
    auth: LiveAuth,
    secure_cookies: bool,
) -> Router<S> {
    let ui = Arc::new(Ui {
        api,
        auth,
        secure_cookies,
    });
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/") }))
        .route("/ui", get(|| async { Redirect::to("/ui/fleet") }))
        .route("/ui/", get(|| async { Redirect::to("/ui/fleet") }))
        .route("/ui/fleet", get(fleet::page))
        .route("/ui/apps/{app}", get(app::page))
        .route("/ui/clusters/{id}", get(cluster::page))
        .route("/ui/stale", get(lists::stale))
        .route("/ui/gate", get(lists::gate))
        .route("/ui/sign-in", get(sign_in::form).post(sign_in::submit))
        .route("/ui/sign-out", post(sign_in::sign_out))
        .route("/ui/oidc/start", get(oidc::start))
        .route("/ui/oidc/callback", get(oidc::callback))
        .route("/ui/static/style.css", get(style))
        .route("/ui/static/icon.svg", get(icon))
        .layer(axum::middleware::from_fn(page_headers))
        .with_state(ui)
}

/// The stylesheet, the only asset the pages load.
async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        include_str!("style.css"),
    )
        .into_response()
}

/// The pages' icon.
async fn icon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_str!("icon.svg"),
    )
        .into_response()
}

/// The headers every page answer carries: nothing loads from elsewhere, nothing runs inline,
/// no page is framed or cached (they hold fleet data of one caller).
async fn page_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers
            .entry(name)
            .or_insert_with(|| HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::CACHE_CONTROL, "no-store");
    response
}

/// The caller of a page: the token from the session cookie, or none on an insecure hub.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    token: Option<String>,
}

/// Why a page could not be shown.
#[derive(Debug)]
pub(crate) enum PageError {
    /// Not signed in, or the token is no longer admitted: to the sign-in page, back here after.
    SignIn,
    /// The API refused or failed: its status and message, shown on an error page.
    Api(StatusCode, String),
}

impl Ui {
    /// The caller of a request, or [`PageError::SignIn`] when the hub needs a token and the
    /// request has none.
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Result<Caller, PageError> {
        if self.auth.current().is_insecure() {
            return Ok(Caller { token: None });
        }
        session_token(headers)
            .map(|token| Caller { token: Some(token) })
            .ok_or(PageError::SignIn)
    }

    /// A page titled `title` at `uri`, showing the moment `at`, for this hub.
    pub(crate) fn page(&self, title: impl Into<String>, at: Option<&str>, uri: &Uri) -> view::Page {
        let page = view::Page::new(title, at, uri);
        if self.auth.current().is_insecure() {
            page.without_sessions()
        } else {
            page
        }
    }

    /// Asks the API `path_and_query` (built with [`Query`]) as `caller`, and reads its JSON
    /// answer as `T`.
    pub(crate) async fn ask<T: DeserializeOwned>(
        &self,
        caller: &Caller,
        path_and_query: &str,
    ) -> Result<T, PageError> {
        let mut request = Request::get(path_and_query);
        if let Some(token) = &caller.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Body::empty())
            .map_err(|err| PageError::Api(StatusCode::BAD_REQUEST, err.to_string()))?;
        let asked = std::time::Instant::now();
        let response = self
            .api
            .clone()
            .oneshot(request)
            .await
            .unwrap_or_else(|never| match never {});
        let status = response.status();
        tracing::debug!(
            path = path_and_query,
            status = status.as_u16(),
            elapsed_ms = asked.elapsed().as_secs_f64() * 1000.0,
            "a page asked the API"
        );
        let body = axum::body::to_bytes(response.into_body(), ANSWER_LIMIT)
            .await
            .map_err(|err| PageError::Api(StatusCode::SERVICE_UNAVAILABLE, err.to_string()))?;
        if status == StatusCode::UNAUTHORIZED {
            return Err(PageError::SignIn);
        }
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
            return Err(PageError::Api(status, message));
        }
        serde_json::from_slice(&body).map_err(|err| {
            PageError::Api(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the answer of {path_and_query} did not read as expected: {err}"),
            )
        })
    }
}

/// The token in the session cookie, if the request has one.
pub(crate) fn session_token(headers: &HeaderMap) -> Option<String> {
    cookie(headers, SESSION_COOKIE)
        .and_then(percent_decode)
        .filter(|token| !token.is_empty())
}

/// The value of the cookie `name`, if the request has one.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

impl PageError {
    /// The answer: a redirect to sign in (coming back to `uri`), or an error page.
    pub(crate) fn respond(self, uri: &Uri) -> Response {
        match self {
            PageError::SignIn => {
                let next = uri
                    .path_and_query()
                    .map_or("/ui/fleet", |p| p.as_str())
                    .to_owned();
                let target = Query::new("/ui/sign-in").with("next", Some(next)).build();
                Redirect::to(&target).into_response()
            }
            PageError::Api(status, message) => {
                let page =
                    view::Page::new("Error", None, uri).render(view::error(status, &message));
                (status, page).into_response()
            }
        }
    }
}

/// A path with query parameters, each value percent-encoded; parameters without a value are
/// left out.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    path: String,
    pairs: Vec<(String, String)>,
}

impl Query {
    /// `path`, itself already encoded.
    pub(crate) fn new(path: impl Into<String>) -> Query {
        Query {
            path: path.into(),
            pairs: Vec::new(),
        }
    }

    /// Adds `name=value` when `value` is some and not empty.
    pub(crate) fn with(mut self, name: &str, value: Option<impl Into<String>>) -> Query {
        if let Some(value) = value.map(Into::into).filter(|v| !v.is_empty()) {
            self.pairs.push((name.to_owned(), value));
        }
        self
    }

    /// The path and its query.
    pub(crate) fn build(&self) -> String {
        let mut out = self.path.clone();
        for (i, (name, value)) in self.pairs.iter().enumerate() {
            out.push(if i == 0 { '?' } else { '&' });
            out.push_str(&percent_encode(name));
            out.push('=');
            out.push_str(&percent_encode(value));
        }
        out
    }
}

/// `text` with every byte but the unreserved ones (and `/`, which group paths are made of)
/// percent-encoded.
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A path segment: [`percent_encode`] that encodes `/` too.
pub(crate) fn segment(text: &str) -> String {
    percent_encode(text).replace('/', "%2F")
}

/// Percent-decoding (`+` is not a space here: the cookie and paths never use it), `None` when
/// an escape is broken or the bytes are not UTF-8.
pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The moment a page shows, as the API takes it: the time picker's `YYYY-MM-DDTHH:MM` (UTC)
/// gets seconds and a `Z`; anything else is passed on as written, for the API to accept
/// (RFC 3339, seconds since 1970) or refuse with its own message.
pub(crate) fn api_moment(at: Option<&str>) -> Option<String> {
    let at = at?.trim();
    if at.is_empty() {
        return None;
    }
    let civil = |len: usize| at.len() == len && at.as_bytes().get(10) == Some(&b'T');
    Some(if civil(16) {
        format!("{at}:00Z")
    } else if civil(19) {
        format!("{at}Z")
    } else {
        at.to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_encodes_its_values_and_leaves_out_empty_ones() {
        let q = Query::new("/api/v1/drift")
            .with("group", Some("emea/de"))
            .with("label", Some("a=b&c"))
            .with("at", None::<String>)
            .with("app", Some(""));
        assert_eq!(q.build(), "/api/v1/drift?group=emea/de&label=a%3Db%26c");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn percent_decoding_undoes_encoding_and_refuses_broken_escapes() {
        for text in ["plain", "with space", "ümlaut;=,\"", "%41"] {
            assert_eq!(percent_decode(&percent_encode(text)).as_deref(), Some(text));
        }
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None, "not UTF-8");
    }

    #[test]
    fn the_session_token_comes_from_its_cookie_only() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("other=1; fleetscope_session=t%20k; x=y"),
        );
        assert_eq!(session_token(&headers).as_deref(), Some("t k"));
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("fleetscope_session="),
        );
        assert_eq!(session_token(&headers), None);
        headers.insert(header::COOKIE, HeaderValue::from_static("session=abc"));
        assert_eq!(session_token(&headers), None);
    }

    #[test]
    fn the_time_pickers_moment_becomes_rfc_3339_in_utc() {
        assert_eq!(
            api_moment(Some("2026-11-20T14:05")).as_deref(),
            Some("2026-11-20T14:05:00Z")
        );
        assert_eq!(
            api_moment(Some("2026-11-20T14:05:09")).as_deref(),
            Some("2026-11-20T14:05:09Z")
        );
        assert_eq!(
            api_moment(Some("2026-11-20T14:05:09+01:00")).as_deref(),
            Some("2026-11-20T14:05:09+01:00")
        );
        assert_eq!(
            api_moment(Some("1790000000")).as_deref(),
            Some("1790000000")
        );
        assert_eq!(api_moment(Some(" ")), None);
        assert_eq!(api_moment(None), None);
    }
}
