//! `fleetscope login`: signs a person in with the identity provider the hub's token file names,
//! by the device authorization grant (RFC 8628: a code to enter in any browser, so it works
//! over SSH too), and saves the token for the other commands.
//!
//! The token saved is the ID token (its audience the command line's client id, which the hub's
//! `oidc.audiences` must then name) or, with `--keep access`, the access token (a JWT for
//! `--resource`, when the provider issues JWT access tokens). Either is checked by the hub like
//! any JWT of its provider: signature, issuer, audience, expiry, and the groups it carries.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use openidconnect::core::{
    CoreAuthDisplay, CoreClaimName, CoreClaimType, CoreClient, CoreClientAuthMethod,
    CoreDeviceAuthorizationResponse, CoreGrantType, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJweKeyManagementAlgorithm, CoreResponseMode,
    CoreResponseType, CoreSubjectIdentifierType,
};
use openidconnect::{
    AdditionalProviderMetadata, ClientId, DeviceAuthorizationUrl, IssuerUrl, Nonce,
    OAuth2TokenResponse as _, ProviderMetadata, Scope, TokenResponse as _,
};
use serde::{Deserialize, Serialize};

use crate::{CliError, Outcome};

/// `fleetscope login`.
#[derive(Debug, Clone, Args)]
pub struct LoginArgs {
    /// The identity provider's issuer URL, as the hub's token file names it.
    #[arg(long, env = "FLEETSCOPE_OIDC_ISSUER")]
    pub issuer: String,
    /// The command line's client id at the provider: a public client allowed the device
    /// authorization grant.
    #[arg(long, env = "FLEETSCOPE_OIDC_CLIENT_ID")]
    pub client_id: String,
    /// A scope to ask for besides `openid` (repeat the flag for more).
    #[arg(long = "scope", default_values_t = ["profile".to_owned(), "email".to_owned()])]
    pub scopes: Vec<String>,
    /// Which token to save: `id` (the ID token) or `access` (the access token, a JWT).
    #[arg(long, value_enum, default_value_t = Keep::Id)]
    pub keep: Keep,
    /// A resource indicator (RFC 8707) to ask the access token for.
    #[arg(long)]
    pub resource: Option<String>,
    /// Where to save the token (the file is written with mode 0600); the other commands read
    /// it from there when given neither `--token` nor `--token-file`.
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// Give up when the sign-in is not finished after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub wait: u64,
}

/// Which of the provider's tokens `login` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Keep {
    Id,
    Access,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
struct DeviceEndpoint {
    device_authorization_endpoint: Option<DeviceAuthorizationUrl>,
}
impl AdditionalProviderMetadata for DeviceEndpoint {}

type DeviceMetadata = ProviderMetadata<
    DeviceEndpoint,
    CoreAuthDisplay,
    CoreClientAuthMethod,
    CoreClaimName,
    CoreClaimType,
    CoreGrantType,
    CoreJweContentEncryptionAlgorithm,
    CoreJweKeyManagementAlgorithm,
    CoreJsonWebKey,
    CoreResponseMode,
    CoreResponseType,
    CoreSubjectIdentifierType,
>;

fn failed(reason: impl Into<String>) -> CliError {
    CliError::Login {
        reason: reason.into(),
    }
}

/// Signs in and saves the token; what to do and what happened go to `out`.
pub async fn login(args: &LoginArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let save = args
        .save
        .clone()
        .or_else(crate::client::default_token_path)
        .ok_or_else(|| failed("no --save path, and neither HOME nor XDG_CONFIG_HOME is set"))?;
    let issuer = IssuerUrl::new(args.issuer.clone())
        .map_err(|e| failed(format!("--issuer {:?}: {e}", args.issuer)))?;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| failed(crate::client::chain(&e)))?;
    let metadata = DeviceMetadata::discover_async(issuer, &http)
        .await
        .map_err(|e| {
            failed(format!(
                "discovering {}: {}",
                args.issuer,
                crate::client::chain(&e)
            ))
        })?;
    let device = metadata
        .additional_metadata()
        .device_authorization_endpoint
        .clone()
        .ok_or_else(|| {
            failed(format!(
                "{} offers no device authorization endpoint (the device grant is not enabled there)",
                args.issuer
            ))
        })?;
    let client =
        CoreClient::from_provider_metadata(metadata, ClientId::new(args.client_id.clone()), None)
            .set_device_authorization_url(device);
    let mut asked = client.exchange_device_code();
    for scope in args.scopes.iter().filter(|s| *s != "openid") {
        asked = asked.add_scope(Scope::new(scope.clone()));
    }
    if let Some(resource) = &args.resource {
        asked = asked.add_extra_param("resource", resource.clone());
    }
    let details: CoreDeviceAuthorizationResponse =
        asked.request_async(&http).await.map_err(|e| {
            failed(format!(
                "asking for a device code: {}",
                crate::client::chain(&e)
            ))
        })?;
    match details.verification_uri_complete() {
        Some(complete) => writeln!(
            out,
            "To sign in, open {}\n(or open {} and enter the code {})",
            complete.secret(),
            details.verification_uri().as_str(),
            details.user_code().secret()
        )?,
        None => writeln!(
            out,
            "To sign in, open {} and enter the code {}",
            details.verification_uri().as_str(),
            details.user_code().secret()
        )?,
    }
    out.flush()?;
    let mut polling = client
        .exchange_device_access_token(&details)
        .map_err(|e| failed(e.to_string()))?;
    if let Some(resource) = &args.resource {
        polling = polling.add_extra_param("resource", resource.clone());
    }
    let tokens = polling
        .request_async(
            &http,
            tokio::time::sleep,
            Some(Duration::from_secs(args.wait)),
        )
        .await
        .map_err(|e| {
            failed(format!(
                "waiting for the sign-in: {}",
                crate::client::chain(&e)
            ))
        })?;
    let id_token = tokens.id_token().ok_or_else(|| {
        failed("the provider sent no ID token (is the openid scope allowed for this client?)")
    })?;
    // The device grant has no nonce; the signature, issuer, audience and expiry are checked.
    let claims = id_token
        .claims(&client.id_token_verifier(), |_: Option<&Nonce>| Ok(()))
        .map_err(|e| failed(format!("the ID token did not verify: {e}")))?;
    let who = claims
        .preferred_username()
        .map(|n| n.as_str().to_owned())
        .or_else(|| claims.email().map(|e| e.as_str().to_owned()))
        .unwrap_or_else(|| claims.subject().as_str().to_owned());
    let expires = claims.expiration();
    let token = match args.keep {
        Keep::Id => id_token.to_string(),
        Keep::Access => {
            let access = tokens.access_token().secret().clone();
            if access.split('.').count() != 3 {
                return Err(failed(
                    "the provider's access token is not a JWT, which the hub cannot check; keep the ID token (--keep id) or ask for a resource whose access tokens are JWTs (--resource)",
                ));
            }
            access
        }
    };
    write_private(&save, &token)?;
    writeln!(
        out,
        "Signed in as {}; the token is saved in {} (the ID token expires at {}).",
        crate::table::printable(&who),
        save.display(),
        expires.format("%Y-%m-%d %H:%M:%S UTC")
    )?;
    Ok(Outcome::Ok)
}

/// Writes `token` to `path`, readable by its owner alone, creating its directory.
fn write_private(path: &Path, token: &str) -> Result<(), CliError> {
    let error = |e: std::io::Error| failed(format!("saving the token in {}: {e}", path.display()));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(error)?;
    }
    let scratch = path.with_extension("part");
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut file = options.open(&scratch).map_err(error)?;
        file.write_all(token.as_bytes()).map_err(error)?;
        file.sync_all().map_err(error)?;
    }
    std::fs::rename(&scratch, path).map_err(error)
}
