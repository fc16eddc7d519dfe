//! Signing in with an API token and out again. The token arrives in a form's body, is checked
//! against the token file in force, and is kept in the session cookie; it never appears in a
//! URL or a log line. A sign-in from another site's page (its `Origin` not this host) is
//! refused. When the token file names an identity provider, the page offers it too (`oidc`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;

use super::lists::Params;
use super::view::Page;
use super::{percent_encode, Ui, SESSION_COOKIE, SESSION_SECONDS};

/// The sign-in form's fields.
#[derive(Debug, Deserialize)]
pub struct SignIn {
    token: String,
    #[serde(default)]
    next: String,
}

/// Where to go after signing in: a page of the hub's own (`/ui/…`), else the fleet page.
pub(super) fn next_page(next: Option<&str>) -> String {
    match next {
        Some(n) if stays_under_ui(n) => n.to_owned(),
        _ => "/ui/fleet".to_owned(),
    }
}

/// Whether a browser sent to `next` stays on one of the hub's pages: a path under `/ui/`
/// whose segments, percent-decoded, are none of `.`, `..` or empty, with no backslash or
/// control character anywhere (browsers resolve `/ui/../api` and `/ui/%2e%2e/api` to `/api`).
fn stays_under_ui(next: &str) -> bool {
    if next.chars().any(|c| c == '\\' || c.is_control()) {
        return false;
    }
    let path = next.split(['?', '#']).next().unwrap_or_default();
    let Some(decoded) = percent_decoded(path) else {
        return false;
    };
    let Some(rest) = decoded.strip_prefix("/ui/") else {
        return false;
    };
    !decoded.chars().any(|c| c == '\\' || c.is_control())
        && rest
            .split('/')
            .enumerate()
            .all(|(i, segment)| !matches!(segment, "." | "..") && (i == 0 || !segment.is_empty()))
        && !rest.starts_with('/')
        && !rest.is_empty()
}

/// `%XX` escapes decoded repeatedly (so that `%252e` is no way around); `None` when an escape
/// is broken or the bytes are not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let mut current = text.to_owned();
    for _ in 0..3 {
        let next = super::percent_decode(&current)?;
        if next == current {
            break;
        }
        current = next;
    }
    Some(current)
}

/// `GET /ui/sign-in?next=`.
pub async fn form(State(ui): State<Arc<Ui>>, uri: Uri, params: Params) -> Response {
    let next = next_page(params.get("next"));
    if ui.auth.current().is_insecure() {
        return Redirect::to(&next).into_response();
    }
    sign_in_page(&ui, &uri, &next, None, StatusCode::OK)
}

/// The sign-in page: the identity provider when the token file names one, the token form
/// when it gives tokens, and what went wrong, if anything.
pub(super) fn sign_in_page(
    ui: &Ui,
    uri: &Uri,
    next: &str,
    problem: Option<&str>,
    status: StatusCode,
) -> Response {
    let auth = ui.auth.current();
    let provider = auth.oidc().map(|oidc| provider_name(&oidc.config.issuer));
    let page = Page::new("Sign in", None, uri).signed_out();
    let content = html! {
        @if let Some(problem) = problem {
            p class="error" role="alert" id="sign-in-problem" { (problem) }
        }
        @if let Some(provider) = &provider {
            p class="sign-in-provider" {
                a class="button" id="sign-in-oidc" href=(super::Query::new("/ui/oidc/start").with("next", Some(next)).build()) {
                    "Sign in with " (provider)
                }
            }
        }
        @if auth.has_tokens() || provider.is_none() {
            (token_form(next, provider.is_some()))
        }
    };
    (status, page.render(content)).into_response()
}

/// The host of an issuer, as the sign-in button names it.
fn provider_name(issuer: &str) -> String {
    openidconnect::url::Url::parse(issuer)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_else(|| "your identity provider".to_owned())
}

fn token_form(next: &str, beside_provider: bool) -> Markup {
    html! {
        form class="sign-in" method="post" action="/ui/sign-in" {
            p {
                @if beside_provider { "Or sign in with an API token of this hub" } @else { "Sign in with an API token of this hub" }
                " (read role or above). A token scoped to a group shows that group only."
            }
            input type="hidden" name="next" value=(next);
            div class="field" {
                label for="token" { "API token" }
                input id="token" name="token" type="password" autocomplete="current-password" required autofocus[!beside_provider];
            }
            button type="submit" { "Sign in" }
        }
    }
}

/// `POST /ui/sign-in`: checks the token and sets the session cookie.
pub async fn submit(
    State(ui): State<Arc<Ui>>,
    uri: Uri,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    let next = next_page(Some(&form.next));
    if !same_origin(&headers) {
        return sign_in_page(
            &ui,
            &uri,
            &next,
            Some("This sign-in came from another site's page and was refused."),
            StatusCode::FORBIDDEN,
        );
    }
    let token = form.token.trim();
    let mut bearer = HeaderMap::new();
    let admitted = match HeaderValue::from_str(&format!("Bearer {token}")) {
        Ok(value) => {
            bearer.insert(header::AUTHORIZATION, value);
            ui.auth.current().authenticate(&bearer).await.is_ok()
        }
        Err(_) => false,
    };
    if token.is_empty() || !admitted {
        tracing::info!("a sign-in to the pages was refused: unknown token");
        return sign_in_page(
            &ui,
            &uri,
            &next,
            Some("This token is not admitted by the hub's token file."),
            // The form again, with what went wrong: a page like any other.
            StatusCode::OK,
        );
    }
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/ui; Max-Age={SESSION_SECONDS}; HttpOnly; SameSite=Strict{}",
        percent_encode(token),
        if ui.secure_cookies { "; Secure" } else { "" }
    );
    session_response(&next, &cookie)
}

/// `POST /ui/sign-out`: clears the session cookie. A session of the identity provider is
/// told where to sign out there too (a link: the provider's own page asks).
pub async fn sign_out(State(ui): State<Arc<Ui>>, uri: Uri, headers: HeaderMap) -> Response {
    let cookie = format!(
        "{SESSION_COOKIE}=; Path=/ui; Max-Age=0; HttpOnly; SameSite=Strict{}",
        if ui.secure_cookies { "; Secure" } else { "" }
    );
    let at_provider = match super::session_token(&headers) {
        Some(token) => provider_sign_out(&ui, &token).await,
        None => None,
    };
    let Some(at_provider) = at_provider else {
        return session_response("/ui/sign-in", &cookie);
    };
    let page = Page::new("Signed out", None, &uri).signed_out();
    let mut response = page
        .render(html! {
            p { "You are signed out of this hub." }
            p { a class="button" id="sign-out-provider" href=(at_provider) { "Sign out at the identity provider too" } }
            p { a href="/ui/sign-in" { "Sign in again" } }
        })
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Where a person signing out of the hub may also sign out at the provider: its
/// `end_session_endpoint` with the session's ID token as the hint, coming back to the
/// sign-in page.
pub async fn provider_sign_out(ui: &Ui, id_token: &str) -> Option<String> {
    let auth = ui.auth.current();
    let oidc = auth.oidc()?;
    if !crate::auth::oidc::looks_like_jwt(id_token) {
        return None;
    }
    let discovered = oidc.provider.discovered(None).await.ok()?;
    let end = discovered
        .metadata
        .additional_metadata()
        .end_session_endpoint
        .as_ref()?;
    let mut back = openidconnect::url::Url::parse(&oidc.config.redirect_url).ok()?;
    back.set_path("/ui/sign-in");
    let mut url = end.url().clone();
    url.query_pairs_mut()
        .append_pair("id_token_hint", id_token)
        .append_pair("client_id", &oidc.config.client_id)
        .append_pair("post_logout_redirect_uri", back.as_str());
    Some(url.to_string())
}

fn session_response(to: &str, cookie: &str) -> Response {
    let mut response = Redirect::to(to).into_response();
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Whether a form post came from this host's own pages: no `Origin` (not a browser's
/// cross-site post), or one whose host and port are the `Host` asked.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    matches!((origin_host, host), (Some(o), Some(h)) if o == h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hubs_own_pages_are_gone_to_after_signing_in() {
        assert_eq!(
            next_page(Some("/ui/apps/checkout?at=1")),
            "/ui/apps/checkout?at=1"
        );
        for elsewhere in [
            "https://evil.example/",
            "//evil.example",
            "/ui//evil",
            "/api/v1/summary",
            "/ui/\\x",
            "/ui/../api/v1/summary",
            "/ui/%2e%2e/api/v1/summary",
            "/ui/%2E%2E/api",
            "/ui/%252e%252e/api",
            "/ui/apps/../../api/v1/summary",
            "/ui/./../api",
            "/ui/%2f%2fevil.example",
            "/ui/%5c%5cevil.example",
            "/ui/x\n",
            "/ui/",
        ] {
            assert_eq!(next_page(Some(elsewhere)), "/ui/fleet", "{elsewhere}");
        }
        assert_eq!(next_page(None), "/ui/fleet");
        for own in [
            "/ui/fleet",
            "/ui/clusters/berlin-01.eu?at=1#top",
            "/ui/groups/emea/de",
            "/ui/apps/a..b",
        ] {
            assert_eq!(next_page(Some(own)), own);
        }
    }

    #[test]
    fn a_sign_in_from_another_sites_page_is_told_apart() {
        let headers = |origin: Option<&'static str>| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static("hub.example:8080"));
            if let Some(o) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_static(o));
            }
            h
        };
        assert!(same_origin(&headers(None)));
        assert!(same_origin(&headers(Some("http://hub.example:8080"))));
        assert!(same_origin(&headers(Some("https://hub.example:8080"))));
        assert!(!same_origin(&headers(Some("http://evil.example"))));
        assert!(!same_origin(&headers(Some("null"))));
    }
}
