//! People signed in with an OpenID Connect provider: the `oidc` section of the token file
//! (`config`), the provider's discovery document and keys (`provider`), and the verification
//! of its JWTs into a [`Principal`] (here).
//!
//! A JWT is accepted when it is signed by a key the issuer publishes (by the `kid` of its
//! header; RSA, RSA-PSS, ECDSA or EdDSA, never a shared secret or `none`), its `iss` is the
//! issuer, its `aud` names the client id or one of `audiences`, and `exp` (and `nbf` when
//! present) hold within the clock skew. The groups claim then decides the role and scope:
//! the first entry of `groups` whose group the token carries. A valid token whose groups
//! give no role is refused with 403.

use std::sync::Arc;

use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::Principal;

pub mod config;
pub mod provider;

pub use config::OidcConfig;
use provider::{Provider, Unreachable};

/// The algorithms a token may be signed with: those of public keys.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The longest name a person is given in logs and on the pages.
const MAX_NAME_CHARS: usize = 128;

/// The identity provider in force: its section of the token file, and what is known of it.
#[derive(Debug)]
pub struct Oidc {
    pub config: OidcConfig,
    pub provider: Arc<Provider>,
}

/// A token the provider signed, and who it says the caller is.
#[derive(Debug, Clone)]
pub struct Verified {
    pub principal: Principal,
    /// The token's `exp`, in seconds since the epoch.
    pub expires_at: u64,
}

/// Why a JWT was refused: the status and what the caller is told (never the token, a claim's
/// value or the groups it carries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token was not issued by the identity provider this hub trusts")]
    WrongIssuer,
    #[error("the token is not meant for this hub (its audience is not accepted)")]
    WrongAudience,
    #[error("the token's signature does not verify with the identity provider's keys")]
    BadSignature,
    #[error("the token is signed with an algorithm this hub does not accept")]
    Algorithm,
    #[error("the token lacks the claim {0}")]
    MissingClaim(String),
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("none of the caller's groups is given a role on this hub")]
    NoRole,
    #[error("the identity provider could not be reached to check the token; try again")]
    Unavailable,
}

impl Oidc {
    /// The provider `config` names, not yet asked.
    pub fn new(config: OidcConfig) -> Oidc {
        let provider = Arc::new(Provider::new(&config));
        Oidc { config, provider }
    }

    /// Keeps what `previous` discovered and fetched when it names the same provider and
    /// client (a reload of the token file that changed, say, only the groups).
    pub fn carry_over(&mut self, previous: &Oidc) {
        if self.config.same_provider(&previous.config) {
            self.provider = previous.provider.clone();
        }
    }

    /// Verifies a JWT and finds its caller.
    pub async fn verify(&self, token: &str) -> Result<Verified, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Malformed)?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refusal::Algorithm);
        }
        // The issuer is looked at before any key: a token of another provider is told so,
        // and costs no fetch of this provider's keys.
        #[derive(serde::Deserialize)]
        struct Peek {
            iss: Option<Value>,
        }
        let peek: Peek = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|_| Refusal::Malformed)?;
        match peek.iss {
            Some(Value::String(iss)) if iss == self.config.issuer => {}
            Some(_) => return Err(Refusal::WrongIssuer),
            None => return Err(Refusal::MissingClaim("iss".into())),
        }
        let discovered = self
            .provider
            .discovered(header.kid.as_deref())
            .await
            .map_err(|Unreachable(why)| {
                tracing::debug!(%why, "a token could not be checked");
                Refusal::Unavailable
            })?;
        let key = discovered
            .key(header.kid.as_deref())
            .ok_or(Refusal::BadSignature)?;
        if let Some(alg) = key.jwk.common.key_algorithm {
            if format!("{alg:?}") != format!("{:?}", header.alg) {
                return Err(Refusal::BadSignature);
            }
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&self.config.accepted_audiences());
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = self.config.clock_skew_seconds;
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
            .map_err(|err| refusal(err.kind()))?;
        let expires_at = data.claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let principal = self.principal(&data.claims)?;
        Ok(Verified {
            principal,
            expires_at,
        })
    }

    /// The caller a verified token's claims name: its name claim, and the role and scope of
    /// the first entry of `groups` it holds.
    pub fn principal(&self, claims: &Map<String, Value>) -> Result<Principal, Refusal> {
        let name = self
            .name(claims)
            .ok_or(Refusal::MissingClaim("sub".into()))?;
        let groups = claim(claims, &self.config.groups_claim);
        let held: Vec<&str> = match groups {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(one)) => vec![one.as_str()],
            _ => Vec::new(),
        };
        let Some(rule) = self.config.rule_for(held.iter().copied()) else {
            tracing::info!(
                caller = %name,
                groups = held.len(),
                "a signed-in caller's groups give no role on this hub"
            );
            return Err(Refusal::NoRole);
        };
        Ok(Principal {
            name,
            role: rule.role,
            scope: rule.scope.clone(),
        })
    }

    fn name(&self, claims: &Map<String, Value>) -> Option<String> {
        let named = match &self.config.name_claim {
            Some(field) => claim(claims, field).and_then(Value::as_str),
            None => ["preferred_username", "email", "sub"]
                .iter()
                .find_map(|field| claims.get(*field).and_then(Value::as_str)),
        };
        let name = named.or_else(|| claims.get("sub").and_then(Value::as_str))?;
        let printable: String = name
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_NAME_CHARS)
            .collect();
        (!printable.trim().is_empty()).then_some(printable)
    }
}

/// Whether `token` has the shape of a JWT (three base64url parts, the first a JSON header):
/// such tokens go to the identity provider's verification, others to the token file.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && jsonwebtoken::decode_header(token).is_ok()
}

/// A claim by name, a dotted name reaching into objects when no claim has the whole name.
fn claim<'a>(claims: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if let Some(value) = claims.get(name) {
        return Some(value);
    }
    let mut parts = name.split('.');
    let mut value = claims.get(parts.next()?)?;
    for part in parts {
        value = value.as_object()?.get(part)?;
    }
    Some(value)
}

fn refusal(kind: &jsonwebtoken::errors::ErrorKind) -> Refusal {
    use jsonwebtoken::errors::ErrorKind;
    match kind {
        ErrorKind::ExpiredSignature => Refusal::Expired,
        ErrorKind::ImmatureSignature => Refusal::NotYetValid,
        ErrorKind::InvalidIssuer => Refusal::WrongIssuer,
        ErrorKind::InvalidAudience => Refusal::WrongAudience,
        ErrorKind::MissingRequiredClaim(claim) => Refusal::MissingClaim(claim.clone()),
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => Refusal::Algorithm,
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_)
        | ErrorKind::InvalidClaimFormat(_) => Refusal::Malformed,
        _ => Refusal::BadSignature,
    }
}

#[cfg(test)]
mod tests;
