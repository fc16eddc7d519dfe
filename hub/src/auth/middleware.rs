//! Requests authenticated: the bearer-token middleware [`require`], the authentication in
//! force ([`LiveAuth`], replaced when the token file is reloaded), the [`Principal`] extractor,
//! and refusals as HTTP answers ([`AuthRejection`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::oidc::{looks_like_jwt, Refusal};
use super::tokens::Auth;
use super::Principal;

/// Requests checked against a token file (reading the file is in `tokens`).
impl Auth {
    /// The caller a request's headers identify: a token of the file, else a JWT of the
    /// identity provider the file names.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthRejection> {
        let secured = match self {
            Auth::Insecure => return Ok(Principal::insecure()),
            Auth::Secured(secured) => secured,
        };
        let token = bearer_token(headers)?;
        if let Some(principal) = secured.tokens.find(token) {
            return Ok(principal.clone());
        }
        match &secured.oidc {
            Some(oidc) if looks_like_jwt(token) => oidc
                .verify(token)
                .await
                .map(|verified| verified.principal)
                .map_err(AuthRejection::Oidc),
            _ => Err(AuthRejection::UnknownToken),
        }
    }
}

/// The authentication in force, replaced when the token file is reloaded (see
/// `fleetscope_serve::reload`). Cheap to clone; every clone sees the same replacement.
#[derive(Debug, Clone)]
pub struct LiveAuth(Arc<RwLock<Arc<Auth>>>);

impl LiveAuth {
    /// Puts `auth` in force.
    pub fn new(auth: Auth) -> LiveAuth {
        LiveAuth(Arc::new(RwLock::new(Arc::new(auth))))
    }

    /// The authentication in force now.
    pub fn current(&self) -> Arc<Auth> {
        self.0.read().expect("auth lock").clone()
    }

    /// Puts `auth` in force for every request from now on, keeping what was discovered and
    /// fetched of an identity provider it shares with the file it replaces.
    pub fn replace(&self, mut auth: Auth) {
        auth.carry_over(&self.current());
        *self.0.write().expect("auth lock") = Arc::new(auth);
    }

    /// Reads a token file as [`Auth::load`] does, with the version of the file read.
    pub fn load_versioned(path: &Path) -> Result<(Auth, String), String> {
        fleetscope_runtime::tokens::load_versioned(path, Auth::parse)
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
        fleetscope_runtime::tokens::watch(
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
    /// No `Authorization` header.
    #[error("missing bearer token (send Authorization: Bearer <token>)")]
    MissingToken,
    /// An `Authorization` header that does not carry a bearer token; says what is wrong.
    #[error("{0}")]
    MalformedHeader(&'static str),
    /// A bearer token the token file does not admit.
    #[error("unknown token")]
    UnknownToken,
    /// A JWT the identity provider's verification refused, or whose groups give no role.
    #[error("{0}")]
    Oidc(Refusal),
    /// A handler asked for the caller on a route without the middleware: a wiring mistake,
    /// refused rather than served unauthenticated.
    #[error("this route is not behind authentication")]
    NotAuthenticated,
}

impl AuthRejection {
    /// The HTTP status the rejection is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            AuthRejection::MissingToken
            | AuthRejection::MalformedHeader(_)
            | AuthRejection::UnknownToken => StatusCode::UNAUTHORIZED,
            AuthRejection::Oidc(Refusal::NoRole) => StatusCode::FORBIDDEN,
            AuthRejection::Oidc(Refusal::Unavailable) => StatusCode::SERVICE_UNAVAILABLE,
            AuthRejection::Oidc(_) => StatusCode::UNAUTHORIZED,
            AuthRejection::NotAuthenticated => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AuthRejection {
    fn into_response(self) -> Response {
        let challenge = match &self {
            AuthRejection::MissingToken | AuthRejection::MalformedHeader(_) => {
                Some("Bearer".to_owned())
            }
            AuthRejection::UnknownToken => Some("Bearer error=\"invalid_token\"".to_owned()),
            AuthRejection::Oidc(Refusal::NoRole) => {
                Some("Bearer error=\"insufficient_scope\"".to_owned())
            }
            AuthRejection::Oidc(Refusal::Unavailable) => None,
            AuthRejection::Oidc(refusal) => Some(format!(
                "Bearer error=\"invalid_token\", error_description=\"{refusal}\""
            )),
            AuthRejection::NotAuthenticated => None,
        };
        let unavailable = matches!(self, AuthRejection::Oidc(Refusal::Unavailable));
        let mut response = (
            self.status(),
            Json(crate::answers::ErrorBody {
                error: self.to_string(),
                parameter: None,
            }),
        )
            .into_response();
        if let Some(challenge) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response.headers_mut().insert(WWW_AUTHENTICATE, challenge);
        }
        if unavailable {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                HeaderValue::from_static("5"),
            );
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
    match auth.authenticate(request.headers()).await {
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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use axum::Router;
    use serde_json::json;
    use tower::ServiceExt;

    use super::super::fixtures::{hex, sample_file, ADMIN_TOKEN, READ_TOKEN, SCOPED_TOKEN};
    use super::*;

    fn tokens() -> Auth {
        Auth::parse(&sample_file()).unwrap()
    }

    async fn whoami(principal: Principal) -> Json<Principal> {
        Json(principal)
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
    async fn admin_token_is_its_principal() {
        let reply = send(tokens(), "GET", "/whoami", &[&bearer(ADMIN_TOKEN)]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(
            reply.json(),
            json!({"name": "platform-admins", "role": "admin", "scope": null})
        );
    }

    #[tokio::test]
    async fn read_token_is_its_principal() {
        let reply = send(tokens(), "GET", "/whoami", &[&bearer(READ_TOKEN)]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(
            reply.json(),
            json!({"name": "viewers", "role": "read", "scope": null})
        );
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
            futures::executor::block_on(tokens().authenticate(&headers)),
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
        assert!(Auth::Insecure.is_insecure());
        assert!(!tokens().is_insecure());
    }
}
