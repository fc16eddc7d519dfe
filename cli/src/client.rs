//! Where the hub is and how to ask it: the connection flags every command shares, the token,
//! and one GET that returns the answer's text or the error the hub gave.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::answers::ErrorBody;
use crate::CliError;

/// The hub to ask, and how to print its answer. Every command flattens this.
#[derive(Debug, Clone, Args)]
pub struct HubConnection {
    /// The hub's base URL (`https://hub.example.org`; a path prefix is kept).
    #[arg(long, env = "FLEETSCOPE_HUB_URL")]
    pub hub_url: String,
    /// Bearer token for the hub's API; none for a hub started with `--insecure`. Without it
    /// and `--token-file`, the token `fleetscope login` saved, if any.
    #[arg(
        long,
        env = "FLEETSCOPE_HUB_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// Read the bearer token from this file (surrounding whitespace is ignored).
    #[arg(long, env = "FLEETSCOPE_HUB_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Give up on a request after this many seconds.
    #[arg(long, env = "FLEETSCOPE_HUB_TIMEOUT", default_value_t = 30)]
    pub timeout: u64,
    /// `table` for people, `json` for scripts (the hub's answer as it sent it).
    #[arg(short, long, env = "FLEETSCOPE_OUTPUT_FORMAT", value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// How a command prints its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

/// A connection to one hub.
#[derive(Debug)]
pub struct HubClient {
    base: reqwest::Url,
    token: Option<String>,
    http: reqwest::Client,
}

impl HubClient {
    pub fn new(connection: &HubConnection) -> Result<HubClient, CliError> {
        let bad_url = |reason: String| CliError::HubUrl {
            url: connection.hub_url.clone(),
            reason,
        };
        let base = reqwest::Url::parse(&connection.hub_url).map_err(|e| bad_url(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(bad_url("not an http or https URL".to_owned()));
        }
        let token = match (&connection.token, &connection.token_file) {
            (Some(token), _) => Some(token.trim().to_owned()),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|source| CliError::TokenFile {
                    path: path.clone(),
                    reason: source.to_string(),
                })?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(CliError::TokenFile {
                        path: path.clone(),
                        reason: "the file is empty".to_owned(),
                    });
                }
                Some(token.to_owned())
            }
            // The token `fleetscope login` saved, when there is one.
            (None, None) => default_token_path()
                .and_then(|path| std::fs::read_to_string(path).ok())
                .map(|text| text.trim().to_owned())
                .filter(|token| !token.is_empty()),
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(connection.timeout.max(1)))
            .user_agent(concat!("fleetscope-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CliError::Unreachable {
                url: connection.hub_url.clone(),
                reason: chain(&e),
            })?;
        Ok(HubClient { base, token, http })
    }

    /// GETs `/api/v1/<segments…>` with `query` and returns the answer's text; a status other
    /// than 200 is the hub's error, with the message of its body.
    pub async fn get(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<String, CliError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("checked to be a base URL")
            .pop_if_empty()
            .extend(["api", "v1"])
            .extend(segments);
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in query {
                pairs.append_pair(key, value);
            }
        }
        let mut request = self.http.get(url.clone());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let unreachable = |e: reqwest::Error| CliError::Unreachable {
            url: self.base.to_string(),
            reason: chain(&e),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let body = response.text().await.map_err(unreachable)?;
        if status != reqwest::StatusCode::OK {
            let message = serde_json::from_str::<ErrorBody>(&body)
                .map(|b| b.error)
                .unwrap_or_else(|_| body.trim().chars().take(200).collect());
            return Err(CliError::Hub {
                status: status.as_u16(),
                path: url.path().to_owned(),
                message,
            });
        }
        Ok(body)
    }
}

/// Where `login` saves the token when `--save` is not given, and where the other commands look
/// for it: `$XDG_CONFIG_HOME/fleetscope/token`, else `~/.config/fleetscope/token`.
pub fn default_token_path() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("fleetscope").join("token"))
}

/// An error with its causes, `outer: inner: …`, as reqwest's own message names only the first.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
