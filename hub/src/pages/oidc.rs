//! Signing in with the identity provider the token file names: the authorization code flow
//! with PKCE (S256), a `state` against cross-site sign-ins and a `nonce` bound to the ID
//! token.
//!
//! `GET /ui/oidc/start` keeps the flow's secrets (state, nonce, PKCE verifier) and the page to
//! go back to in a short-lived cookie (`HttpOnly`, `SameSite=Lax` so that it comes back with
//! the provider's redirect, path `/ui/oidc`) and sends the browser to the provider.
//! `GET /ui/oidc/callback` checks the state, exchanges the code, verifies the ID token (the
//! crate's verifier: signature, issuer, audience, expiry, nonce), finds the person's role and
//! scope from their groups, and keeps the ID token as the session: the session ends when the
//! token does. Every page is then asked with it as the API's bearer token, verified as any
//! JWT of the provider.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse as _,
};

use super::lists::Params;
use super::sign_in::{next_page, sign_in_page};
use super::view::Page;
use super::{cookie, percent_decode, percent_encode, Ui, SESSION_COOKIE, SESSION_SECONDS};
use crate::auth::oidc::provider::{chain, Discovered};
use crate::auth::oidc::{Oidc, Refusal, Verified};

/// The cookie that carries a sign-in in progress.
pub const FLOW_COOKIE: &str = "fleetscope_oidc";

/// How long a sign-in at the provider may take, in seconds.
const FLOW_SECONDS: u32 = 600;

/// The largest ID token kept as a session: browsers keep cookies of up to 4096 bytes.
const MAX_SESSION_TOKEN: usize = 3800;

/// The error codes of OAuth 2 and OpenID Connect a provider may send back, shown as they are;
/// anything else in `error` is not repeated on the page.
const KNOWN_ERRORS: [&str; 12] = [
    "access_denied",
    "invalid_request",
    "unauthorized_client",
    "unsupported_response_type",
    "invalid_scope",
    "server_error",
    "temporarily_unavailable",
    "interaction_required",
    "login_required",
    "account_selection_required",
    "consent_required",
    "invalid_request_uri",
];

/// The flow's secrets, as kept in [`FLOW_COOKIE`].
struct Flow {
    state: String,
    nonce: String,
    verifier: String,
    next: String,
}

impl Flow {
    fn cookie_value(&self) -> String {
        format!(
            "{}|{}|{}|{}",
            self.state,
            self.nonce,
            self.verifier,
            percent_encode(&self.next)
        )
    }

    fn from_headers(headers: &HeaderMap) -> Option<Flow> {
        let value = cookie(headers, FLOW_COOKIE)?;
        let mut parts = value.split('|');
        let flow = Flow {
            state: parts.next()?.to_owned(),
            nonce: parts.next()?.to_owned(),
            verifier: parts.next()?.to_owned(),
            next: next_page(Some(&percent_decode(parts.next()?)?)),
        };
        (parts.next().is_none() && !flow.state.is_empty()).then_some(flow)
    }
}

/// `GET /ui/oidc/start?next=`: to the provider's sign-in.
pub async fn start(State(ui): State<Arc<Ui>>, uri: Uri, params: Params) -> Response {
    let next = next_page(params.get("next"));
    let auth = ui.auth.current();
    let Some(oidc) = auth.oidc() else {
        return Redirect::to("/ui/sign-in").into_response();
    };
    let discovered = match oidc.provider.discovered(None).await {
        Ok(discovered) => discovered,
        Err(why) => {
            tracing::warn!(error = %why, "a sign-in could not start: the identity provider is unreachable");
            return problem(
                &ui,
                &uri,
                &next,
                "The identity provider could not be reached. Try again in a moment.",
                StatusCode::SERVICE_UNAVAILABLE,
            );
        }
    };
    let client = match client(oidc, &discovered) {
        Ok(client) => client,
        Err(why) => return misconfigured(&ui, &uri, &next, &why),
    };
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state, nonce) = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .add_scopes(
            oidc.config
                .scopes
                .iter()
                .filter(|scope| *scope != "openid")
                .map(|scope| Scope::new(scope.clone())),
        )
        .set_pkce_challenge(challenge)
        .url();
    let flow = Flow {
        state: state.secret().clone(),
        nonce: nonce.secret().clone(),
        verifier: verifier.secret().clone(),
        next,
    };
    let mut response = Redirect::to(url.as_str()).into_response();
    set_cookie(
        &mut response,
        &format!(
            "{FLOW_COOKIE}={}; Path=/ui/oidc; Max-Age={FLOW_SECONDS}; HttpOnly; SameSite=Lax{}",
            flow.cookie_value(),
            secure(&ui)
        ),
    );
    response
}

/// `GET /ui/oidc/callback?code=&state=` (or `?error=`): the provider's answer.
pub async fn callback(
    State(ui): State<Arc<Ui>>,
    uri: Uri,
    headers: HeaderMap,
    params: Params,
) -> Response {
    let mut response = finish(&ui, &uri, &headers, &params).await;
    // The flow's cookie is spent whatever happened.
    set_cookie(
        &mut response,
        &format!(
            "{FLOW_COOKIE}=; Path=/ui/oidc; Max-Age=0; HttpOnly; SameSite=Lax{}",
            secure(&ui)
        ),
    );
    response
}

async fn finish(ui: &Ui, uri: &Uri, headers: &HeaderMap, params: &Params) -> Response {
    let auth = ui.auth.current();
    let Some(oidc) = auth.oidc() else {
        return Redirect::to("/ui/sign-in").into_response();
    };
    let Some(flow) = Flow::from_headers(headers) else {
        return problem(
            ui,
            uri,
            "/ui/fleet",
            "This sign-in was not started here, or took longer than ten minutes. Sign in again.",
            StatusCode::BAD_REQUEST,
        );
    };
    if let Some(error) = params.get("error") {
        let shown = if KNOWN_ERRORS.contains(&error) {
            format!("The identity provider did not sign you in ({error}).")
        } else {
            "The identity provider did not sign you in.".to_owned()
        };
        tracing::info!(error = %error.escape_debug(), "the identity provider refused a sign-in");
        return problem(ui, uri, &flow.next, &shown, StatusCode::UNAUTHORIZED);
    }
    if params.get("state") != Some(flow.state.as_str()) {
        tracing::info!("a sign-in came back with a state this browser did not start");
        return problem(
            ui,
            uri,
            &flow.next,
            "This sign-in did not come back to the browser that started it. Sign in again.",
            StatusCode::BAD_REQUEST,
        );
    }
    let Some(code) = params.get("code").filter(|c| !c.is_empty()) else {
        return problem(
            ui,
            uri,
            &flow.next,
            "The identity provider sent no sign-in code.",
            StatusCode::BAD_REQUEST,
        );
    };
    let (raw, verified) = match exchange(ui, uri, oidc, &flow, code).await {
        Ok(done) => done,
        Err(refused) => return refused,
    };
    if raw.len() > MAX_SESSION_TOKEN {
        return problem(
            ui,
            uri,
            &flow.next,
            &format!(
                "The identity provider's ID token is {} bytes, more than a browser keeps in a cookie ({MAX_SESSION_TOKEN}); ask for fewer scopes or claims.",
                raw.len()
            ),
            StatusCode::BAD_GATEWAY,
        );
    }
    let now = jsonwebtoken::get_current_timestamp();
    let seconds = verified
        .expires_at
        .saturating_sub(now)
        .clamp(1, u64::from(SESSION_SECONDS));
    tracing::info!(caller = %verified.principal.name, role = %verified.principal.role, "signed in with the identity provider");
    let page = Page::new("Signed in", None, uri)
        .signed_out()
        .going_to(&flow.next);
    let mut response = page
        .render(html! {
            p { "Signed in as " strong { (verified.principal.name) } ". " a href=(flow.next) { "Go on" } }
        })
        .into_response();
    set_cookie(
        &mut response,
        &format!(
            "{SESSION_COOKIE}={}; Path=/ui; Max-Age={seconds}; HttpOnly; SameSite=Strict{}",
            percent_encode(&raw),
            secure(ui)
        ),
    );
    response
}

/// The code exchanged for tokens, the ID token verified (the crate's verifier, with the
/// flow's nonce) and its caller found: the raw ID token and who it names, or the answer
/// that says why not.
async fn exchange(
    ui: &Ui,
    uri: &Uri,
    oidc: &Oidc,
    flow: &Flow,
    code: &str,
) -> Result<(String, Verified), Response> {
    let discovered = match oidc.provider.discovered(None).await {
        Ok(discovered) => discovered,
        Err(why) => {
            tracing::warn!(error = %why, "a sign-in could not finish: the identity provider is unreachable");
            return Err(problem(
                ui,
                uri,
                &flow.next,
                "The identity provider could not be reached. Try again in a moment.",
                StatusCode::SERVICE_UNAVAILABLE,
            ));
        }
    };
    let client = match client(oidc, &discovered) {
        Ok(client) => client,
        Err(why) => return Err(misconfigured(ui, uri, &flow.next, &why)),
    };
    let exchange = match client.exchange_code(AuthorizationCode::new(code.to_owned())) {
        Ok(request) => request,
        Err(err) => return Err(misconfigured(ui, uri, &flow.next, &err.to_string())),
    };
    let tokens = match exchange
        .set_pkce_verifier(PkceCodeVerifier::new(flow.verifier.clone()))
        .request_async(oidc.provider.http())
        .await
    {
        Ok(tokens) => tokens,
        Err(err) => {
            tracing::warn!(error = %chain(&err), "the identity provider did not exchange a sign-in code");
            return Err(problem(
                ui,
                uri,
                &flow.next,
                "The identity provider did not accept this sign-in's code. Sign in again.",
                StatusCode::BAD_GATEWAY,
            ));
        }
    };
    let Some(id_token) = tokens.id_token() else {
        return Err(problem(
            ui,
            uri,
            &flow.next,
            "The identity provider sent no ID token (is the openid scope allowed for this client?).",
            StatusCode::BAD_GATEWAY,
        ));
    };
    if let Err(err) = id_token.claims(&client.id_token_verifier(), &Nonce::new(flow.nonce.clone()))
    {
        tracing::warn!(error = %err, "an ID token did not verify");
        return Err(problem(
            ui,
            uri,
            &flow.next,
            "The identity provider's answer did not verify. Sign in again.",
            StatusCode::UNAUTHORIZED,
        ));
    }
    let raw = id_token.to_string();
    match oidc.verify(&raw).await {
        Ok(verified) => Ok((raw, verified)),
        Err(Refusal::NoRole) => Err(problem(
            ui,
            uri,
            &flow.next,
            "You are signed in at the identity provider, but none of your groups is given a role on this hub. Ask the hub's administrators to map one of your groups.",
            StatusCode::FORBIDDEN,
        )),
        Err(refusal) => Err(problem(
            ui,
            uri,
            &flow.next,
            &format!("The sign-in was refused: {refusal}."),
            StatusCode::UNAUTHORIZED,
        )),
    }
}

type Client = CoreClient<
    openidconnect::EndpointSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointMaybeSet,
    openidconnect::EndpointMaybeSet,
>;

fn client(oidc: &Oidc, discovered: &Discovered) -> Result<Client, String> {
    let redirect = RedirectUrl::new(oidc.config.redirect_url.clone())
        .map_err(|err| format!("oidc.redirectUrl: {err}"))?;
    Ok(CoreClient::from_provider_metadata(
        discovered.metadata.clone(),
        ClientId::new(oidc.config.client_id.clone()),
        oidc.config.client_secret.clone().map(ClientSecret::new),
    )
    .set_redirect_uri(redirect))
}

fn problem(ui: &Ui, uri: &Uri, next: &str, message: &str, status: StatusCode) -> Response {
    sign_in_page(ui, uri, next, Some(message), status)
}

fn misconfigured(ui: &Ui, uri: &Uri, next: &str, why: &str) -> Response {
    tracing::error!(error = %why, "the oidc section cannot be used with the provider's metadata");
    problem(
        ui,
        uri,
        next,
        "Signing in with the identity provider is not set up correctly on this hub; its log says why.",
        StatusCode::INTERNAL_SERVER_ERROR,
    )
}

fn secure(ui: &Ui) -> &'static str {
    if ui.secure_cookies {
        "; Secure"
    } else {
        ""
    }
}

fn set_cookie(response: &mut Response, cookie: &str) {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flow_cookie_round_trips_and_its_page_stays_under_ui() {
        let flow = Flow {
            state: "s-1_x".into(),
            nonce: "n-2".into(),
            verifier: "v-3".into(),
            next: "/ui/apps/checkout?at=2026-12-01T00:00:00Z".into(),
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=b; {FLOW_COOKIE}={}", flow.cookie_value())).unwrap(),
        );
        let back = Flow::from_headers(&headers).unwrap();
        assert_eq!(
            (
                back.state.as_str(),
                back.nonce.as_str(),
                back.verifier.as_str(),
                back.next.as_str()
            ),
            (
                "s-1_x",
                "n-2",
                "v-3",
                "/ui/apps/checkout?at=2026-12-01T00:00:00Z"
            )
        );
        // A cookie that names a page elsewhere goes to the fleet page instead.
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{FLOW_COOKIE}=s|n|v|%2Fui%2F..%2Fapi")).unwrap(),
        );
        assert_eq!(Flow::from_headers(&headers).unwrap().next, "/ui/fleet");
        for broken in ["", "s|n|v", "|n|v|%2Fui%2Ffleet", "s|n|v|x|y", "s|n|v|%zz"] {
            headers.insert(
                header::COOKIE,
                HeaderValue::from_str(&format!("{FLOW_COOKIE}={broken}")).unwrap(),
            );
            assert!(Flow::from_headers(&headers).is_none(), "{broken}");
        }
    }
}
