//! The identity provider as the hub knows it: its discovery document and its signing keys,
//! fetched when first needed and kept. The keys are fetched again when a token names a key
//! the hub does not have (a rotation) and when they are older than [`KEYS_MAX_AGE`] (so that
//! a key the provider withdrew stops being accepted); while the provider cannot be reached,
//! the keys last fetched stay in use.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::DecodingKey;
use openidconnect::core::CoreJsonWebKeySet;
use openidconnect::{IssuerUrl, ProviderMetadataWithLogout};

use super::config::OidcConfig;

/// How long fetched keys are used before they are fetched again.
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(300);

/// The least time between two fetches, however many unknown keys are presented: a flood of
/// made-up key ids costs the provider at most one request per this interval.
pub const MIN_REFETCH: Duration = Duration::from_secs(5);

/// How long one request to the provider may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest key set read.
const KEYS_LIMIT: usize = 1 << 20;

/// What was discovered and fetched.
#[derive(Debug)]
pub struct Discovered {
    /// The provider's metadata, its key set the one last fetched.
    pub metadata: ProviderMetadataWithLogout,
    /// The same keys, as the API's verification reads them, each read into a decoding key
    /// once per fetch; keys of a kind it cannot use (and keys not for signatures) are left out.
    pub keys: Vec<SigningKey>,
    fetched_at: Instant,
}

/// One of the provider's signing keys: as published, and ready to verify with.
pub struct SigningKey {
    pub jwk: Jwk,
    pub decoding: DecodingKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.jwk.common.key_id)
            .finish_non_exhaustive()
    }
}

impl Discovered {
    /// The key a token's header names: by `kid`, or, for a token without one, the only key
    /// the provider publishes.
    pub fn key(&self, kid: Option<&str>) -> Option<&SigningKey> {
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .find(|key| key.jwk.common.key_id.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
    }
}

/// Why the provider could not be asked.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Unreachable(pub String);

/// The provider of one `oidc` section, shared by every request (and carried over a reload of
/// the token file that keeps the same issuer and client).
#[derive(Debug)]
pub struct Provider {
    issuer: String,
    http: reqwest::Client,
    current: RwLock<Option<Arc<Discovered>>>,
    /// One fetch at a time; the time of the last attempt, successful or not.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

impl Provider {
    /// The provider `config` names; nothing is fetched yet.
    pub fn new(config: &OidcConfig) -> Provider {
        let http = reqwest::Client::builder()
            // The provider's answers are never followed elsewhere (as the OAuth 2 crates
            // advise: a redirect could point the hub at an internal address).
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("an HTTP client with rustls");
        Provider {
            issuer: config.issuer.clone(),
            http,
            current: RwLock::new(None),
            fetching: tokio::sync::Mutex::new(None),
        }
    }

    /// The HTTP client the provider is asked with.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// What is known of the provider, fetched first when nothing is, when it is older than
    /// [`KEYS_MAX_AGE`], or when `kid` names a key it does not have (at most once per
    /// [`MIN_REFETCH`]).
    pub async fn discovered(&self, kid: Option<&str>) -> Result<Arc<Discovered>, Unreachable> {
        if let Some(current) = self.fresh(kid) {
            return Ok(current);
        }
        let mut last_attempt = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        if let Some(current) = self.fresh(kid) {
            return Ok(current);
        }
        let held = self.current.read().expect("provider lock").clone();
        if let (Some(held), Some(at)) = (&held, *last_attempt) {
            if at.elapsed() < MIN_REFETCH {
                return Ok(held.clone());
            }
        }
        *last_attempt = Some(Instant::now());
        match self.fetch(held.as_deref()).await {
            Ok(fetched) => {
                let fetched = Arc::new(fetched);
                *self.current.write().expect("provider lock") = Some(fetched.clone());
                Ok(fetched)
            }
            Err(why) => {
                tracing::warn!(issuer = %self.issuer, error = %why, "the identity provider could not be asked");
                // The keys last fetched stay in use while the provider is away.
                held.ok_or(why)
            }
        }
    }

    fn fresh(&self, kid: Option<&str>) -> Option<Arc<Discovered>> {
        let current = self.current.read().expect("provider lock").clone()?;
        let has_key = kid.is_none_or(|kid| current.key(Some(kid)).is_some());
        (current.fetched_at.elapsed() < KEYS_MAX_AGE && has_key).then_some(current)
    }

    /// The discovery document (the first time) and the keys.
    async fn fetch(&self, held: Option<&Discovered>) -> Result<Discovered, Unreachable> {
        let mut metadata = match held {
            Some(held) => held.metadata.clone(),
            None => {
                let issuer = IssuerUrl::new(self.issuer.clone())
                    .map_err(|err| Unreachable(format!("the issuer is not a URL: {err}")))?;
                // Discovery checks that the document names this issuer, and fetches the keys.
                return ProviderMetadataWithLogout::discover_async(issuer, &self.http)
                    .await
                    .map_err(|err| Unreachable(format!("discovery failed: {}", chain(&err))))
                    .and_then(|metadata| {
                        let text = serde_json::to_vec(metadata.jwks())
                            .map_err(|err| Unreachable(err.to_string()))?;
                        Ok(Discovered {
                            keys: usable_keys(&text)?,
                            metadata,
                            fetched_at: Instant::now(),
                        })
                    });
            }
        };
        let url = metadata.jwks_uri().url().clone();
        let response = self
            .http
            .get(url.clone())
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|err| Unreachable(format!("fetching the keys at {url}: {}", chain(&err))))?;
        if !response.status().is_success() {
            return Err(Unreachable(format!(
                "fetching the keys at {url}: HTTP {}",
                response.status()
            )));
        }
        let body = response
            .bytes()
            .await
            .map_err(|err| Unreachable(format!("reading the keys at {url}: {err}")))?;
        if body.len() > KEYS_LIMIT {
            return Err(Unreachable(format!(
                "the keys at {url} are larger than {KEYS_LIMIT} bytes"
            )));
        }
        let core: CoreJsonWebKeySet = serde_json::from_slice(&body).map_err(|err| {
            Unreachable(format!("the keys at {url} do not read as a key set: {err}"))
        })?;
        let keys = usable_keys(&body)?;
        metadata = metadata.set_jwks(core);
        Ok(Discovered {
            metadata,
            keys,
            fetched_at: Instant::now(),
        })
    }
}

/// The signing keys of a JSON key set that the API's verification can use.
fn usable_keys(text: &[u8]) -> Result<Vec<SigningKey>, Unreachable> {
    #[derive(serde::Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let set: Set = serde_json::from_slice(text).map_err(|err| {
        Unreachable(format!(
            "the provider's keys do not read as a key set: {err}"
        ))
    })?;
    Ok(set
        .keys
        .into_iter()
        .filter_map(|key| serde_json::from_value::<Jwk>(key).ok())
        .filter(|key| {
            key.is_supported()
                && !matches!(
                    key.common.public_key_use,
                    Some(jsonwebtoken::jwk::PublicKeyUse::Encryption)
                )
        })
        .filter_map(|jwk| {
            let decoding = DecodingKey::from_jwk(&jwk).ok()?;
            Some(SigningKey { jwk, decoding })
        })
        .collect())
}

/// An error with its sources, for a log line.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
