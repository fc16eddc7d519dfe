//! Agent credentials: a file maps each agent's bearer token (or its SHA-256) to the one cluster
//! it may report for.
//!
//! ```yaml
//! agents:
//!   - cluster: store-0001
//!     tokenSha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//!   - cluster: store-0002
//!     token: a-long-random-secret
//! ```
//!
//! Reading the file, hashing tokens and reporting a bad file at start or on reload are shared
//! with the hub's API tokens (`fleetscope_runtime::tokens`); binding a token to one cluster is
//! the collector's own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::header::AUTHORIZATION;
use axum::http::HeaderMap;
use fleetscope_model::ClusterId;
use fleetscope_runtime::tokens::{self, TokenDigest};
use fleetscope_serve::reload::ReloadMetrics;
use serde::Deserialize;

pub use fleetscope_runtime::tokens::MIN_TOKEN_LEN;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    agents: Vec<AgentEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AgentEntry {
    cluster: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    token_sha256: Option<String>,
}

/// Who may report for which cluster.
#[derive(Debug, Clone)]
pub enum AgentAuth {
    /// Local use only: every request is accepted for the cluster it names.
    Insecure,
    Tokens(HashMap<TokenDigest, ClusterId>),
}

/// Why a request was not allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token (send Authorization: Bearer <token>)")]
    Missing,
    /// Two `Authorization` headers are ambiguous: which one counts would depend on the proxy.
    #[error("more than one Authorization header")]
    MoreThanOne,
    #[error("unknown token")]
    Unknown,
    #[error("this token may report only for cluster {allowed:?}, not {claimed:?}")]
    WrongCluster { allowed: String, claimed: String },
}

impl AgentAuth {
    /// Reads a token file, reporting every problem in it at once.
    pub fn load(path: &Path) -> Result<AgentAuth, String> {
        tokens::load(path, AgentAuth::parse).map_err(|err| err.to_string())
    }

    /// Like [`AgentAuth::load`], with the version of the file read (see
    /// `fleetscope_serve::reload`), for [`AgentAuth::watch`]ing it from there on.
    pub fn load_versioned(path: &Path) -> Result<(AgentAuth, String), String> {
        tokens::load_versioned(path, AgentAuth::parse)
    }

    /// Reloads the token file at `path` when it changes or on SIGHUP, starting from `version`
    /// (what [`AgentAuth::load_versioned`] returned at start); `apply` puts a valid new file
    /// in force.
    pub fn watch(
        path: PathBuf,
        version: String,
        interval: Duration,
        metrics: ReloadMetrics,
        apply: impl Fn(AgentAuth) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokens::watch(
            "agent token file",
            path,
            version,
            interval,
            metrics,
            AgentAuth::parse,
            apply,
        )
    }

    pub fn parse(text: &str) -> Result<AgentAuth, Vec<String>> {
        let file: TokenFile = serde_yaml_ng::from_str(text).map_err(|err| vec![err.to_string()])?;
        let mut errors = Vec::new();
        let mut by_digest = HashMap::new();
        for (index, entry) in file.agents.iter().enumerate() {
            let at = format!("agents[{index}]");
            let cluster = match ClusterId::parse(&entry.cluster) {
                Ok(cluster) => cluster,
                Err(err) => {
                    errors.push(format!("{at}.cluster: {err}"));
                    continue;
                }
            };
            let hash = match (&entry.token, &entry.token_sha256) {
                (Some(token), None) if token.len() >= MIN_TOKEN_LEN => tokens::digest(token),
                (Some(_), None) => {
                    errors.push(format!(
                        "{at}.token: shorter than {MIN_TOKEN_LEN} characters"
                    ));
                    continue;
                }
                (None, Some(hex)) => match tokens::parse_hex_digest(hex) {
                    Ok(hash) => hash,
                    Err(_) => {
                        errors.push(format!("{at}.tokenSha256: {hex:?} is not 64 hex digits"));
                        continue;
                    }
                },
                _ => {
                    errors.push(format!("{at}: give exactly one of token and tokenSha256"));
                    continue;
                }
            };
            if let Some(other) = by_digest.insert(hash, cluster.clone()) {
                errors.push(format!(
                    "{at}: the same token is already given to cluster {other}"
                ));
            }
        }
        if errors.is_empty() {
            Ok(AgentAuth::Tokens(by_digest))
        } else {
            Err(errors)
        }
    }

    /// The cluster the `Authorization` header's token may report for, known before the body is
    /// read; `None` in insecure mode (any cluster). The scheme is matched without regard to case.
    pub fn authenticate(
        &self,
        authorization: Option<&str>,
    ) -> Result<Option<&ClusterId>, AuthError> {
        let AgentAuth::Tokens(by_digest) = self else {
            return Ok(None);
        };
        let token = authorization
            .and_then(|value| value.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .ok_or(AuthError::Missing)?;
        by_digest
            .get(&tokens::digest(token))
            .map(Some)
            .ok_or(AuthError::Unknown)
    }

    /// Like [`AgentAuth::authenticate`], from the request's headers: more than one
    /// `Authorization` header is refused, whichever of them is valid.
    pub fn authenticate_headers(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<&ClusterId>, AuthError> {
        if matches!(self, AgentAuth::Insecure) {
            return Ok(None);
        }
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let first = values.next();
        if values.next().is_some() {
            return Err(AuthError::MoreThanOne);
        }
        self.authenticate(first.and_then(|value| value.to_str().ok()))
    }

    /// Whether a report that claims to be from `claimed` may come with this authentication.
    pub fn allows(allowed: Option<&ClusterId>, claimed: &str) -> Result<(), AuthError> {
        match allowed {
            Some(allowed) if allowed.as_str() != claimed => Err(AuthError::WrongCluster {
                allowed: allowed.to_string(),
                claimed: claimed.to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// Checks the `Authorization` header value against the cluster a report claims to be from.
    pub fn check(&self, authorization: Option<&str>, claimed: &str) -> Result<(), AuthError> {
        AgentAuth::allows(self.authenticate(authorization)?, claimed)
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    #[test]
    fn tokens_bind_to_one_cluster() {
        let hashed = format!("{:x}", Sha256::digest(b"secret-for-store-2-xyz"));
        let auth = AgentAuth::parse(&format!(
            "agents:\n  - cluster: store-1\n    token: secret-for-store-1-xyz\n  - cluster: store-2\n    tokenSha256: {hashed}\n"
        ))
        .unwrap();
        assert_eq!(
            auth.check(Some("Bearer secret-for-store-1-xyz"), "store-1"),
            Ok(())
        );
        assert_eq!(
            auth.check(Some("Bearer secret-for-store-2-xyz"), "store-2"),
            Ok(())
        );
        assert_eq!(
            auth.check(Some("Bearer secret-for-store-1-xyz"), "store-2"),
            Err(AuthError::WrongCluster {
                allowed: "store-1".into(),
                claimed: "store-2".into()
            })
        );
        assert_eq!(
            auth.check(Some("Bearer nope"), "store-1"),
            Err(AuthError::Unknown)
        );
        assert_eq!(auth.check(None, "store-1"), Err(AuthError::Missing));
        assert_eq!(
            auth.check(Some("Basic abc"), "store-1"),
            Err(AuthError::Missing)
        );
        assert_eq!(AgentAuth::Insecure.check(None, "anything"), Ok(()));
        // The scheme is case-insensitive; the token is not.
        assert_eq!(
            auth.check(Some("BEARER secret-for-store-1-xyz"), "store-1"),
            Ok(())
        );
        assert_eq!(
            auth.check(Some("Bearer SECRET-for-store-1-xyz"), "store-1"),
            Err(AuthError::Unknown)
        );
        assert_eq!(
            auth.check(Some("Bearer "), "store-1"),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn more_than_one_authorization_header_is_refused_in_either_order() {
        let auth =
            AgentAuth::parse("agents:\n  - cluster: store-1\n    token: secret-for-store-1-xyz\n")
                .unwrap();
        let headers = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(AUTHORIZATION, value.parse().unwrap());
            }
            headers
        };
        let valid = "Bearer secret-for-store-1-xyz";
        let bogus = "Bearer not-a-known-token-at-all";
        assert_eq!(
            auth.authenticate_headers(&headers(&[valid]))
                .map(|c| c.map(ClusterId::to_string)),
            Ok(Some("store-1".to_owned()))
        );
        for pair in [[valid, bogus], [bogus, valid], [valid, valid]] {
            assert_eq!(
                auth.authenticate_headers(&headers(&pair)),
                Err(AuthError::MoreThanOne),
                "{pair:?}"
            );
        }
        assert_eq!(
            AuthError::MoreThanOne.to_string(),
            "more than one Authorization header"
        );
        assert_eq!(
            auth.authenticate_headers(&headers(&[])),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn every_problem_in_the_file_is_reported() {
        let errors = AgentAuth::parse(
            "agents:\n  - cluster: Store-1\n    token: abcdefghijklmnopq\n  - cluster: s2\n    token: short\n  - cluster: s3\n    tokenSha256: xyz\n  - cluster: s4\n  - cluster: s5\n    token: abcdefghijklmnopq\n  - cluster: s6\n    token: abcdefghijklmnopq\n",
        )
        .unwrap_err();
        assert_eq!(errors.len(), 5, "{errors:#?}");
        assert!(
            errors[0].starts_with("agents[0].cluster: cluster id \"Store-1\""),
            "{}",
            errors[0]
        );
        assert_eq!(errors[1], "agents[1].token: shorter than 16 characters");
        assert_eq!(
            errors[2],
            "agents[2].tokenSha256: \"xyz\" is not 64 hex digits"
        );
        assert_eq!(
            errors[3],
            "agents[3]: give exactly one of token and tokenSha256"
        );
        assert_eq!(
            errors[4],
            "agents[5]: the same token is already given to cluster s5"
        );
        let unknown = AgentAuth::parse("agents: []\nextra: 1\n").unwrap_err();
        assert!(unknown[0].contains("unknown field `extra`"), "{unknown:?}");
    }
}
