//! Sign-in with a real OpenID Connect provider (the npm package `oidc-provider`, run by the
//! test), and JWTs the tests sign themselves against an issuer they serve: the API takes the
//! provider's JWT access tokens and refuses wrong ones with their reason; a
//! person whose groups scope them to one subtree is confined on every route and page; the
//! pages sign people in with the authorization code flow, keep the ID token as the session
//! until it expires, refuse a person whose groups give no role, and sign out.

use std::time::Duration;

use fleetscope_hub::{Auth, MetricsConfig};
use fleetscope_testkit::browser::Browser;
use fleetscope_testkit::oidc::{
    IssuerKey, LocalIssuer, ProviderSpec, TestProvider, API_RESOURCE, HUB_CLIENT, HUB_SECRET,
    OTHER_RESOURCE, SHORT_RESOURCE,
};
use serde_json::Value;

use crate::api::{confined_on_every_route, Hub, ADMIN, SCOPE};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn spec(hub: &str, id_token_seconds: u64) -> ProviderSpec {
    ProviderSpec {
        hub: hub.to_owned(),
        people: vec![
            ("alice".into(), strings(&["staff", "fleet-admins"])),
            ("dora".into(), strings(&["staff", "team-de"])),
            ("eve".into(), strings(&["staff"])),
        ],
        machines: vec![
            ("ci-admin".into(), strings(&["fleet-admins"])),
            ("ci-dora".into(), strings(&["team-de"])),
            ("ci-eve".into(), strings(&["staff"])),
        ],
        id_token_seconds,
        access_token_seconds: 300,
    }
}

/// The hub's token file: its admin token, and the provider at `issuer`.
fn token_file(hub: &str, issuer: &str) -> Auth {
    Auth::parse(&format!(
        "tokens:
  - name: admins
    token: {ADMIN}
    role: admin
oidc:
  issuer: {issuer}
  clientId: {HUB_CLIENT}
  clientSecret: {HUB_SECRET}
  redirectUrl: {hub}/ui/oidc/callback
  audiences: [fleetscope-api]
  scopes: [openid, profile, email, groups]
  clockSkewSeconds: 0
  groups:
    - group: fleet-admins
      role: admin
    - group: team-de
      role: read
      scope: {SCOPE}
"
    ))
    .unwrap()
}

/// The status and `error` of an API answer to `token`.
async fn refusal(hub: &Hub, token: &str) -> (u16, String) {
    let (status, _, body) = hub.get(Some(token), "/api/v1/summary").await;
    let error = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or(body);
    (status, error)
}

#[tokio::test]
async fn the_api_takes_the_providers_access_tokens_and_refuses_wrong_ones_with_their_reason() {
    let hub = Hub::start(600, 6, MetricsConfig::default()).await;
    let mut provider = TestProvider::start(&spec(&hub.base, 60));
    let stranger = TestProvider::start(&spec(&hub.base, 60));
    hub.auth.replace(token_file(&hub.base, &provider.issuer()));

    let admin = provider.machine_token("ci-admin", API_RESOURCE).await;
    let summary = hub.json(&admin, "/api/v1/summary").await;
    assert_eq!(summary["scope"], Value::Null);
    assert!(summary["total"]["clusters"].as_u64().unwrap() > 0);
    // The token file's own tokens go on working beside the provider's.
    assert_eq!(
        hub.json(ADMIN, "/api/v1/summary").await["total"],
        summary["total"]
    );

    // A person scoped by their groups sees their subtree only, on every route.
    let dora = provider.machine_token("ci-dora", API_RESOURCE).await;
    confined_on_every_route(&hub, &dora).await;

    let eve = provider.machine_token("ci-eve", API_RESOURCE).await;
    let elsewhere = provider.machine_token("ci-admin", OTHER_RESOURCE).await;
    let foreign = stranger.machine_token("ci-admin", API_RESOURCE).await;
    let short = provider.machine_token("ci-admin", SHORT_RESOURCE).await;
    let mut tampered: Vec<String> = admin.split('.').map(str::to_owned).collect();
    tampered[1] = dora.split('.').nth(1).unwrap().to_owned();
    let tampered = {
        // dora's claims under the admin token's signature: the signature does not cover them.
        let mut parts = tampered;
        parts[2] = admin.split('.').nth(2).unwrap().to_owned();
        parts.join(".")
    };
    tokio::time::sleep(Duration::from_millis(2100)).await;
    for (token, status, error) in [
        (
            &eve,
            403,
            "none of the caller's groups is given a role on this hub",
        ),
        (
            &elsewhere,
            401,
            "the token is not meant for this hub (its audience is not accepted)",
        ),
        (
            &foreign,
            401,
            "the token was not issued by the identity provider this hub trusts",
        ),
        (&short, 401, "the token has expired"),
        (
            &tampered,
            401,
            "the token's signature does not verify with the identity provider's keys",
        ),
    ] {
        assert_eq!(refusal(&hub, token).await, (status, error.to_owned()));
    }
    // The challenge says why too, and the token is never repeated.
    let response = reqwest::Client::new()
        .get(format!("{}/api/v1/summary", hub.base))
        .bearer_auth(&short)
        .send()
        .await
        .unwrap();
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        challenge,
        "Bearer error=\"invalid_token\", error_description=\"the token has expired\""
    );
    assert!(!response.text().await.unwrap().contains(&short));

    // The provider rotates its key: its new tokens are taken (the hub fetches the keys again),
    // tokens of the withdrawn key are refused from then on.
    provider.restart(true);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rotated = provider.machine_token("ci-admin", API_RESOURCE).await;
    assert_ne!(
        jsonwebtoken_kid(&rotated),
        jsonwebtoken_kid(&admin),
        "the provider signs with a new key"
    );
    assert_eq!(
        hub.json(&rotated, "/api/v1/summary").await["scope"],
        Value::Null
    );
    assert_eq!(
        refusal(&hub, &admin).await,
        (
            401,
            "the token's signature does not verify with the identity provider's keys".to_owned()
        )
    );
}

/// The `kid` of a JWT's header.
fn jsonwebtoken_kid(token: &str) -> String {
    jsonwebtoken::decode_header(token).unwrap().kid.unwrap()
}

/// Signs `login` in at the provider's development form from the hub's sign-in page.
async fn sign_in(browser: &Browser, hub: &str, next: &str, login: &str) {
    browser.goto(&format!("{hub}{next}")).await;
    assert!(
        browser.current_url().await.contains("/ui/sign-in?next="),
        "{}",
        browser.current_url().await
    );
    browser.click("#sign-in-oidc").await;
    browser
        .wait_for("input[name=login]", Duration::from_secs(10))
        .await;
    browser.fill("input[name=login]", login).await;
    browser.fill("input[name=password]", "any password").await;
    browser.click("button[type=submit]").await;
    // The development provider asks for consent the first time; then it sends the browser
    // back to the hub.
    for _ in 0..100 {
        if browser.count("input[name=prompt][value=consent]").await > 0 {
            browser.click("button[type=submit]").await;
            return;
        }
        if browser.current_url().await.starts_with(hub) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the provider did not come back: {}",
        browser.page_source().await
    );
}

async fn until_url(browser: &Browser, ending: &str) {
    for _ in 0..100 {
        if browser.current_url().await.ends_with(ending) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the browser did not reach {ending}: at {}\n{}",
        browser.current_url().await,
        browser.page_source().await
    );
}

#[tokio::test]
async fn people_sign_in_to_the_pages_with_the_provider_and_out_again() {
    let hub = Hub::start(600, 6, MetricsConfig::default()).await;
    let provider = TestProvider::start(&spec(&hub.base, 60));
    hub.auth.replace(token_file(&hub.base, &provider.issuer()));
    let browser = Browser::start().await;

    // The sign-in page offers the provider and the token form, and fits a phone's width.
    browser.set_window_size(390, 800).await;
    browser.goto(&format!("{}/ui/sign-in", hub.base)).await;
    assert_eq!(
        browser.text("#sign-in-oidc").await,
        "Sign in with 127.0.0.1"
    );
    assert_eq!(browser.count("form.sign-in #token").await, 1);
    let overflow = browser
        .execute(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
            &[],
        )
        .await;
    assert_eq!(
        overflow,
        serde_json::json!(0),
        "the sign-in page is wider than a phone"
    );
    browser.set_window_size(1280, 900).await;

    // dora, scoped to emea/de by her groups, signs in and comes back to the page she asked.
    sign_in(&browser, &hub.base, "/ui/fleet", "dora").await;
    until_url(&browser, "/ui/fleet").await;
    browser
        .wait_for("#total-clusters", Duration::from_secs(10))
        .await;
    let mine = hub
        .json(ADMIN, &format!("/api/v1/summary?group={SCOPE}"))
        .await;
    let everyone = hub.json(ADMIN, "/api/v1/summary").await;
    assert_ne!(mine["total"]["clusters"], everyone["total"]["clusters"]);
    assert_eq!(
        browser.text("#total-clusters").await,
        mine["total"]["clusters"].to_string(),
        "the fleet page counts dora's subtree only"
    );
    let session = browser
        .cookies()
        .await
        .into_iter()
        .find(|c| c.name == "fleetscope_session")
        .expect("a session cookie");
    assert!(session.http_only);
    // Her stale clusters are those of her subtree, and a cluster outside it is not found.
    browser.goto(&format!("{}/ui/stale", hub.base)).await;
    browser
        .wait_for("#stale-total", Duration::from_secs(10))
        .await;
    assert_eq!(
        browser.text("#stale-total").await,
        hub.json(ADMIN, &format!("/api/v1/stale?limit=1000&group={SCOPE}"))
            .await["total"]
            .to_string()
    );
    for group in browser.texts("table.stale tbody td:nth-child(2)").await {
        assert!(group.starts_with(SCOPE), "{group}");
    }
    let outside = hub
        .json(
            ADMIN,
            "/api/v1/drift?state=in_sync,failed,stale,missing,out_of_sync&limit=1000",
        )
        .await["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| !p["group"].as_str().unwrap_or("").starts_with(SCOPE))
        .map(|p| p["cluster"].as_str().unwrap().to_owned())
        .expect("a cluster outside the scope");
    browser
        .goto(&format!("{}/ui/clusters/{outside}", hub.base))
        .await;
    assert!(browser.text("div.error").await.contains("404"));
    // Asking for a group outside her subtree does not widen it.
    browser
        .goto(&format!("{}/ui/fleet?group=amer", hub.base))
        .await;
    let page = browser.page_source().await;
    assert!(!page.contains("amer/"), "{page}");
    if browser.count("#total-clusters").await > 0 {
        assert_ne!(
            browser.text("#total-clusters").await,
            hub.json(ADMIN, "/api/v1/summary?group=amer").await["total"]["clusters"].to_string()
        );
    }

    // Signing out ends the session and offers the provider's sign-out.
    browser.goto(&format!("{}/ui/fleet", hub.base)).await;
    browser.click(".sign-out button").await;
    browser
        .wait_for("#sign-out-provider", Duration::from_secs(10))
        .await;
    let at_provider = browser
        .attribute("#sign-out-provider", "href")
        .await
        .unwrap();
    assert!(
        at_provider.starts_with(&format!("{}/session/end?id_token_hint=", provider.issuer())),
        "{at_provider}"
    );
    browser.goto(&format!("{}/ui/fleet", hub.base)).await;
    assert!(browser.current_url().await.contains("/ui/sign-in"));

    // eve's groups give no role: she is told so and gets no session.
    browser.delete_cookies().await;
    sign_in(&browser, &hub.base, "/ui/fleet", "eve").await;
    browser
        .wait_for("#sign-in-problem", Duration::from_secs(10))
        .await;
    assert!(
        browser
            .text("#sign-in-problem")
            .await
            .contains("none of your groups is given a role on this hub"),
        "{}",
        browser.page_source().await
    );
    assert!(browser
        .cookies()
        .await
        .iter()
        .all(|c| c.name != "fleetscope_session" || c.value.is_empty()));

    // The callback refuses a state this browser did not start, and a visit without a flow.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = client
        .get(format!("{}/ui/oidc/callback?code=x&state=y", hub.base))
        .header("cookie", "fleetscope_oidc=a|b|c|%2Fui%2Ffleet")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    assert!(answer
        .text()
        .await
        .unwrap()
        .contains("did not come back to the browser that started it"));
    let answer = client
        .get(format!("{}/ui/oidc/callback?code=x&state=y", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    browser.quit().await;
}

#[tokio::test]
async fn a_page_session_ends_when_the_providers_id_token_does() {
    let hub = Hub::start(200, 3, MetricsConfig::default()).await;
    let provider = TestProvider::start(&spec(&hub.base, 4));
    hub.auth.replace(token_file(&hub.base, &provider.issuer()));
    let browser = Browser::start().await;
    sign_in(&browser, &hub.base, "/ui/stale", "alice").await;
    until_url(&browser, "/ui/stale").await;
    let session = browser
        .cookies()
        .await
        .into_iter()
        .find(|c| c.name == "fleetscope_session")
        .expect("a session cookie");
    browser.quit().await;

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let ask = || async {
        client
            .get(format!("{}/ui/stale", hub.base))
            .header("cookie", format!("fleetscope_session={}", session.value))
            .send()
            .await
            .unwrap()
    };
    assert_eq!(
        ask().await.status(),
        200,
        "the session works while the token lasts"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Even a cookie kept past its Max-Age is refused once the ID token has expired.
    let answer = ask().await;
    assert_eq!(answer.status(), 303);
    assert!(answer.headers()["location"]
        .to_str()
        .unwrap()
        .starts_with("/ui/sign-in?next="));
}

// JWTs the tests sign themselves, against an issuer they serve (`LocalIssuer`): the kinds a
// real provider will not mint (expired at a chosen moment, without a claim, signed with a
// made-up key or a shared secret).

/// The token file of [`local`]: the issuer at `issuer`, no clock skew.
fn local_file(issuer: &str) -> Auth {
    Auth::parse(&format!(
        "oidc:
  issuer: {issuer}
  clientId: fleetscope
  redirectUrl: http://127.0.0.1:1/ui/oidc/callback
  audiences: [fleetscope-api]
  clockSkewSeconds: 0
  groups:
    - {{group: fleet-admins, role: admin}}
    - {{group: team-de, role: read, scope: {SCOPE}}}
"
    ))
    .unwrap()
}

/// Who `auth` takes `token` for (name, role, scope), or its refusal's status and message.
async fn caller(
    auth: &Auth,
    token: &str,
) -> Result<(String, String, Option<String>), (u16, String)> {
    use axum::response::IntoResponse as _;
    let mut headers = axum::http::HeaderMap::new();
    headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    match auth.authenticate(&headers).await {
        Ok(p) => Ok((p.name, p.role.to_string(), p.scope.map(|s| s.to_string()))),
        Err(refusal) => {
            let message = refusal.to_string();
            Err((refusal.into_response().status().as_u16(), message))
        }
    }
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn claims(issuer: &str, groups: &[&str]) -> Value {
    serde_json::json!({
        "iss": issuer,
        "sub": "u-123",
        "email": "dora@example.test",
        "aud": "fleetscope",
        "iat": now(),
        "exp": now() + 600,
        "groups": groups,
    })
}

#[tokio::test]
async fn each_jwt_is_checked_against_the_issuers_keys_and_refused_with_its_reason() {
    let key = IssuerKey::new("k1");
    let impostor = IssuerKey::new("k1");
    let issuer = LocalIssuer::start(&[&key]).await;
    let auth = local_file(&issuer.issuer);
    let good = claims(&issuer.issuer, &["other", "team-de"]);

    assert_eq!(
        caller(&auth, &key.sign(&good)).await,
        Ok((
            "dora@example.test".into(),
            "read".into(),
            Some(SCOPE.into())
        ))
    );
    // The first entry of the file decides; an access token for the API's audience is taken.
    let mut admin = claims(&issuer.issuer, &["team-de", "fleet-admins"]);
    admin["aud"] = serde_json::json!(["fleetscope-api", "other"]);
    assert_eq!(
        caller(&auth, &key.sign(&admin)).await,
        Ok(("dora@example.test".into(), "admin".into(), None))
    );
    assert_eq!(issuer.fetches(), 1, "the keys are fetched once");

    let with = |field: &str, value: Value| {
        let mut claims = good.clone();
        claims[field] = value;
        claims
    };
    let without = |field: &str| {
        let mut claims = good.clone();
        claims.as_object_mut().unwrap().remove(field);
        claims
    };
    let secret = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &good,
        &jsonwebtoken::EncodingKey::from_secret(b"guessable").unwrap(),
    )
    .unwrap();
    let signed = key.sign(&good);
    let payload = signed.split('.').nth(1).unwrap();
    let unsigned = format!("eyJhbGciOiJub25lIn0.{payload}."); // {"alg":"none"}
                                                              // Another payload (the admins' group) under this token's signature.
    let forged = {
        let admin = key.sign(&with("groups", serde_json::json!(["fleet-admins"])));
        let mut parts: Vec<String> = signed.split('.').map(str::to_owned).collect();
        parts[1] = admin.split('.').nth(1).unwrap().to_owned();
        parts.join(".")
    };
    for (token, status, message) in [
        (
            key.sign(&with("iss", "http://127.0.0.1:9/other".into())),
            401,
            "the token was not issued by the identity provider this hub trusts",
        ),
        (
            key.sign(&with("aud", "someone-else".into())),
            401,
            "the token is not meant for this hub (its audience is not accepted)",
        ),
        (
            key.sign(&with("exp", (now() - 5).into())),
            401,
            "the token has expired",
        ),
        (
            key.sign(&with("nbf", (now() + 600).into())),
            401,
            "the token is not valid yet (nbf)",
        ),
        (
            key.sign(&without("exp")),
            401,
            "the token lacks the claim exp",
        ),
        (
            key.sign(&without("aud")),
            401,
            "the token lacks the claim aud",
        ),
        (
            key.sign(&without("iss")),
            401,
            "the token lacks the claim iss",
        ),
        (
            impostor.sign(&good),
            401,
            "the token's signature does not verify with the identity provider's keys",
        ),
        (
            forged,
            401,
            "the token's signature does not verify with the identity provider's keys",
        ),
        (
            secret,
            401,
            "the token is signed with an algorithm this hub does not accept",
        ),
        (unsigned, 401, "unknown token"),
        (
            key.sign(&with("groups", serde_json::json!(["nobody"]))),
            403,
            "none of the caller's groups is given a role on this hub",
        ),
        (
            key.sign(&without("groups")),
            403,
            "none of the caller's groups is given a role on this hub",
        ),
    ] {
        assert_eq!(
            caller(&auth, &token).await,
            Err((status, message.to_owned())),
            "{message}"
        );
    }
}

#[tokio::test]
async fn a_rotated_key_is_fetched_and_a_flood_of_made_up_keys_costs_one_fetch() {
    let old = IssuerKey::new("old");
    let new = IssuerKey::new("new");
    let issuer = LocalIssuer::start(&[&old]).await;
    let auth = local_file(&issuer.issuer);
    let good = claims(&issuer.issuer, &["team-de"]);
    assert!(caller(&auth, &old.sign(&good)).await.is_ok());
    assert_eq!(issuer.fetches(), 1);

    // The issuer publishes a new key: a token signed with it makes the hub fetch again.
    issuer.publish(&[&new, &old]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(caller(&auth, &new.sign(&good)).await.is_ok());
    assert_eq!(issuer.fetches(), 2);

    // Tokens naming keys nobody published: at most one fetch per five seconds.
    for i in 0..20 {
        let made_up = IssuerKey::new(&format!("made-up-{i}"));
        assert_eq!(
            caller(&auth, &made_up.sign(&good)).await.unwrap_err().0,
            401
        );
    }
    assert!(issuer.fetches() <= 3, "{}", issuer.fetches());
    assert!(
        caller(&auth, &old.sign(&good)).await.is_ok(),
        "known keys stay usable"
    );

    // A reload of the file naming the same provider keeps what was fetched.
    let live = fleetscope_hub::LiveAuth::new(local_file(&issuer.issuer));
    assert!(caller(&live.current(), &old.sign(&good)).await.is_ok());
    let before = issuer.fetches();
    live.replace(local_file(&issuer.issuer));
    assert!(caller(&live.current(), &old.sign(&good)).await.is_ok());
    assert_eq!(issuer.fetches(), before, "no fetch after the reload");
}

#[tokio::test]
async fn an_issuer_that_cannot_be_reached_is_a_503_not_a_bad_token() {
    let key = IssuerKey::new("k1");
    let port = fleetscope_testkit::faults::free_port();
    let issuer = format!("http://127.0.0.1:{port}");
    let auth = local_file(&issuer);
    assert_eq!(
        caller(&auth, &key.sign(&claims(&issuer, &["team-de"]))).await,
        Err((
            503,
            "the identity provider could not be reached to check the token; try again".to_owned()
        ))
    );
}
