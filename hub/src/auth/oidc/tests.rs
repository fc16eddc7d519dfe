//! The verification of JWTs against a provider served by the test itself: a discovery
//! document and a key set it can change (a rotation), tokens it signs with its own keys.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::*;
use crate::auth::Role;

/// An ECDSA P-256 key of the test provider.
struct Key {
    kid: String,
    encoding: EncodingKey,
    public: Jwk,
}

impl Key {
    fn new(kid: &str) -> Key {
        let pair = rcgen::KeyPair::generate().unwrap();
        let encoding = EncodingKey::from_ec_der(&pair.serialize_der());
        let mut public = Jwk::from_encoding_key(&encoding, Algorithm::ES256).unwrap();
        public.common.key_id = Some(kid.to_owned());
        Key {
            kid: kid.to_owned(),
            encoding,
            public,
        }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

#[derive(Clone)]
struct Served {
    issuer: String,
    keys: Arc<Mutex<Vec<Jwk>>>,
    fetches: Arc<AtomicUsize>,
}

async fn discovery(State(served): State<Served>) -> Json<Value> {
    Json(json!({
        "issuer": served.issuer,
        "authorization_endpoint": format!("{}/auth", served.issuer),
        "token_endpoint": format!("{}/token", served.issuer),
        "jwks_uri": format!("{}/jwks", served.issuer),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    }))
}

async fn jwks(State(served): State<Served>) -> Json<Value> {
    served.fetches.fetch_add(1, Ordering::SeqCst);
    Json(json!({ "keys": *served.keys.lock().unwrap() }))
}

/// A provider on a free loopback port with `keys` published.
async fn serve(keys: &[&Key]) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let served = Served {
        issuer: format!("http://{}", listener.local_addr().unwrap()),
        keys: Arc::new(Mutex::new(keys.iter().map(|k| k.public.clone()).collect())),
        fetches: Arc::new(AtomicUsize::new(0)),
    };
    let app = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .with_state(served.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    served
}

fn oidc(issuer: &str) -> Oidc {
    let text = format!(
        "issuer: {issuer}
clientId: fleetscope
redirectUrl: http://127.0.0.1:1/ui/oidc/callback
audiences: [fleetscope-api]
clockSkewSeconds: 0
groups:
  - {{group: fleet-admins, role: admin}}
  - {{group: team-de, role: read, scope: emea/de}}
"
    );
    let mut problems = Vec::new();
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let config = config::parse(&value, &mut problems).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    Oidc::new(config)
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

fn claims(issuer: &str, groups: &[&str]) -> Value {
    json!({
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
async fn a_signed_token_gives_the_role_and_scope_of_its_first_mapped_group() {
    let key = Key::new("k1");
    let served = serve(&[&key]).await;
    let oidc = oidc(&served.issuer);

    let verified = oidc
        .verify(&key.sign(&claims(&served.issuer, &["other", "team-de"])))
        .await
        .unwrap();
    assert_eq!(verified.principal.name, "dora@example.test");
    assert_eq!(verified.principal.role, Role::Read);
    assert_eq!(
        verified.principal.scope.as_ref().map(|s| s.to_string()),
        Some("emea/de".to_owned())
    );
    assert!(verified.expires_at > now());

    // The first entry of the file decides; an access token for the API's audience is accepted.
    let mut admin = claims(&served.issuer, &["team-de", "fleet-admins"]);
    admin["aud"] = json!(["fleetscope-api", "other"]);
    let verified = oidc.verify(&key.sign(&admin)).await.unwrap();
    assert_eq!(verified.principal.role, Role::Admin);
    assert_eq!(verified.principal.scope, None);
    assert_eq!(
        served.fetches.load(Ordering::SeqCst),
        1,
        "keys fetched once"
    );
}

#[tokio::test]
async fn each_wrong_token_is_refused_with_its_reason() {
    let key = Key::new("k1");
    let stranger = Key::new("k1");
    let served = serve(&[&key]).await;
    let oidc = oidc(&served.issuer);
    let good = claims(&served.issuer, &["team-de"]);
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
    let cases = [
        (
            key.sign(&with("iss", json!("http://127.0.0.1:9/other"))),
            Refusal::WrongIssuer,
        ),
        (
            key.sign(&with("aud", json!("someone-else"))),
            Refusal::WrongAudience,
        ),
        (key.sign(&with("exp", json!(now() - 5))), Refusal::Expired),
        (
            key.sign(&with("nbf", json!(now() + 600))),
            Refusal::NotYetValid,
        ),
        (
            key.sign(&without("exp")),
            Refusal::MissingClaim("exp".into()),
        ),
        (
            key.sign(&without("aud")),
            Refusal::MissingClaim("aud".into()),
        ),
        (
            key.sign(&without("iss")),
            Refusal::MissingClaim("iss".into()),
        ),
        (
            key.sign(&with("groups", json!(["nobody"]))),
            Refusal::NoRole,
        ),
        (key.sign(&without("groups")), Refusal::NoRole),
        // Same key id, another key: the signature does not verify.
        (stranger.sign(&good), Refusal::BadSignature),
    ];
    for (token, refusal) in cases {
        assert_eq!(oidc.verify(&token).await.unwrap_err(), refusal);
    }

    // A token signed with a shared secret (HS256) or none at all is never accepted.
    let hs = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &good,
        &EncodingKey::from_secret(b"guessable").unwrap(),
    )
    .unwrap();
    assert_eq!(oidc.verify(&hs).await.unwrap_err(), Refusal::Algorithm);
    let signed = key.sign(&good);
    let (_, rest) = signed.split_once('.').unwrap();
    let none_header = "eyJhbGciOiJub25lIn0"; // {"alg":"none"}
    let unsigned = format!("{none_header}.{}.", rest.split_once('.').unwrap().0);
    assert_eq!(
        oidc.verify(&unsigned).await.unwrap_err(),
        Refusal::Malformed
    );
    // A tampered payload fails the signature.
    let mut parts: Vec<&str> = signed.split('.').collect();
    let forged = key.sign(&with("groups", json!(["fleet-admins"])));
    parts[1] = forged.split('.').nth(1).unwrap();
    assert_eq!(
        oidc.verify(&parts.join(".")).await.unwrap_err(),
        Refusal::BadSignature
    );
    assert!(!looks_like_jwt("a-static-token-0123456789"));
    assert!(looks_like_jwt(&signed));

    let messages: Vec<String> = [Refusal::Expired, Refusal::NoRole, Refusal::WrongAudience]
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        messages,
        [
            "the token has expired",
            "none of the caller's groups is given a role on this hub",
            "the token is not meant for this hub (its audience is not accepted)",
        ]
    );
}

#[tokio::test]
async fn a_rotated_key_is_fetched_and_a_flood_of_unknown_keys_costs_one_fetch() {
    let old = Key::new("old");
    let new = Key::new("new");
    let served = serve(&[&old]).await;
    let oidc = oidc(&served.issuer);
    let good = claims(&served.issuer, &["team-de"]);
    oidc.verify(&old.sign(&good)).await.unwrap();
    assert_eq!(served.fetches.load(Ordering::SeqCst), 1);

    // The provider rotates: a token signed with the new key makes the hub fetch again.
    *served.keys.lock().unwrap() = vec![new.public.clone(), old.public.clone()];
    tokio::time::sleep(provider::MIN_REFETCH).await;
    oidc.verify(&new.sign(&good)).await.unwrap();
    assert_eq!(served.fetches.load(Ordering::SeqCst), 2);

    // Tokens naming keys nobody published: one fetch at most per interval.
    for i in 0..20 {
        let made_up = Key::new(&format!("made-up-{i}"));
        assert_eq!(
            oidc.verify(&made_up.sign(&good)).await.unwrap_err(),
            Refusal::BadSignature
        );
    }
    assert!(
        served.fetches.load(Ordering::SeqCst) <= 3,
        "{:?}",
        served.fetches
    );
    // The known keys go on being accepted meanwhile.
    oidc.verify(&old.sign(&good)).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_provider_is_told_apart_from_a_bad_token() {
    let key = Key::new("k1");
    // Nothing listens on this port once the listener is dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let issuer = format!("http://127.0.0.1:{port}");
    let oidc = oidc(&issuer);
    assert_eq!(
        oidc.verify(&key.sign(&claims(&issuer, &["team-de"])))
            .await
            .unwrap_err(),
        Refusal::Unavailable
    );
}

#[test]
fn names_come_from_the_name_claim_and_dotted_groups_claims_reach_into_objects() {
    let mut oidc = oidc("http://127.0.0.1:1");
    let principal = oidc
        .principal(
            json!({"sub": "u-1", "preferred_username": "dora\u{1b}[31m", "groups": "team-de"})
                .as_object()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(principal.name, "dora[31m", "control characters are dropped");
    oidc.config.groups_claim = "realm_access.roles".into();
    oidc.config.name_claim = Some("email".into());
    let principal = oidc
        .principal(
            json!({"sub": "u-1", "email": "a@example.test", "realm_access": {"roles": ["fleet-admins"]}})
                .as_object()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(
        (principal.name.as_str(), principal.role),
        ("a@example.test", Role::Admin)
    );
    // Without the name claim, the subject names the caller.
    let principal = oidc
        .principal(
            json!({"sub": "u-1", "realm_access": {"roles": ["fleet-admins"]}})
                .as_object()
                .unwrap(),
        )
        .unwrap();
    assert_eq!(principal.name, "u-1");
}
