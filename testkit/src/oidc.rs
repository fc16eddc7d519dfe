//! Identity providers for the sign-in tests.
//!
//! [`TestProvider`] is a real, certified OpenID Connect provider: the npm package
//! `oidc-provider` (installed by `scripts/install-prereqs --tests`), run by Node.js from
//! `testkit/oidc-provider/provider.mjs` on a free loopback port with a private directory. It
//! knows the hub as the confidential client [`HUB_CLIENT`], the command line as the public
//! client [`CLI_CLIENT`] of the device authorization grant, people by login name (the
//! development login form takes any password) with the groups the test gives them, and
//! clients of the client-credentials grant whose JWT access tokens carry groups too.
//!
//! [`LocalIssuer`] is an issuer served by the test itself: a discovery document and a key set
//! it can change, and tokens it signs with claims of the test's choosing (the ones a real
//! provider will not mint: expired, of another audience, with made-up keys).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};

use fleetscope_local_process::{log_tail, ChildProcess, StartFailure};
use serde_json::{json, Value};

/// The hub's client id at the provider.
pub const HUB_CLIENT: &str = "fleetscope";
/// The hub's client secret.
pub const HUB_SECRET: &str = "hub-client-secret-0123456789";
/// The command line's client id: a public client of the device authorization grant.
pub const CLI_CLIENT: &str = "fleetscope-cli";
/// The resource indicator whose access tokens are for the hub's API, and their audience.
pub const API_RESOURCE: &str = "urn:fleetscope:api";
const API_AUDIENCE: &str = "fleetscope-api";
/// A resource for the hub's API whose access tokens expire after one second.
pub const SHORT_RESOURCE: &str = "urn:fleetscope:short";
/// A resource whose access tokens are for some other service.
pub const OTHER_RESOURCE: &str = "urn:elsewhere";
const OTHER_AUDIENCE: &str = "elsewhere-api";

/// What the provider is started with.
#[derive(Debug, Clone)]
pub struct ProviderSpec {
    /// The hub's base URL (`http://127.0.0.1:PORT`): its callback and sign-in page are the
    /// client's redirect URIs.
    pub hub: String,
    /// People: login name and groups.
    pub people: Vec<(String, Vec<String>)>,
    /// Clients of the client-credentials grant: client id and the groups of its tokens.
    pub machines: Vec<(String, Vec<String>)>,
    pub id_token_seconds: u64,
    pub access_token_seconds: u64,
}

/// A running provider. Dropping it stops it.
#[derive(Debug)]
pub struct TestProvider {
    dir: tempfile::TempDir,
    port: u16,
    process: Option<ChildProcess>,
}

/// The installed package's directory: `FLEETSCOPE_OIDC_PROVIDER_DIR`, else the cache the
/// install script fills. Panics with what to run when it is missing.
pub fn provider_package() -> PathBuf {
    let base = std::env::var_os("FLEETSCOPE_OIDC_PROVIDER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/fleetscope/oidc-provider")
        });
    let package = base.join("node_modules/oidc-provider");
    assert!(
        package.join("lib/index.js").is_file(),
        "the sign-in tests need the npm package oidc-provider and Node.js: run `scripts/install-prereqs --tests` (looked in {})",
        package.display()
    );
    package
}

/// The secret of a client-credentials client.
pub fn machine_secret(client: &str) -> String {
    format!("{client}-secret-0123456789")
}

impl TestProvider {
    /// Starts a provider for `spec` on a free port and waits until its discovery document
    /// answers.
    pub fn start(spec: &ProviderSpec) -> TestProvider {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = crate::faults::free_port();
        let mut clients = vec![json!({
            "client_id": HUB_CLIENT,
            "client_secret": HUB_SECRET,
            "redirect_uris": [format!("{}/ui/oidc/callback", spec.hub)],
            "post_logout_redirect_uris": [format!("{}/ui/sign-in", spec.hub)],
            "grant_types": ["authorization_code"],
        })];
        clients.push(json!({
            "client_id": CLI_CLIENT,
            "grant_types": ["urn:ietf:params:oauth:grant-type:device_code"],
            "token_endpoint_auth_method": "none",
        }));
        for (client, groups) in &spec.machines {
            clients.push(json!({
                "client_id": client,
                "client_secret": machine_secret(client),
                "grant_types": ["client_credentials"],
                "groups": groups,
            }));
        }
        let config = json!({
            "module": provider_package(),
            "port": port,
            "keysFile": dir.path().join("keys.json"),
            "idTokenSeconds": spec.id_token_seconds,
            "accessTokenSeconds": spec.access_token_seconds,
            "clients": clients,
            "accounts": spec
                .people
                .iter()
                .map(|(login, groups)| (login.clone(), json!(groups)))
                .collect::<serde_json::Map<String, Value>>(),
            "resources": {
                API_RESOURCE: API_AUDIENCE,
                SHORT_RESOURCE: API_AUDIENCE,
                OTHER_RESOURCE: OTHER_AUDIENCE,
            },
            "shortResources": { SHORT_RESOURCE: 1 },
        });
        std::fs::write(dir.path().join("config.json"), config.to_string())
            .expect("write the provider's config");
        let mut provider = TestProvider {
            dir,
            port,
            process: None,
        };
        provider.launch();
        provider
    }

    /// The issuer: `http://127.0.0.1:PORT`.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The provider's log.
    pub fn log(&self) -> String {
        log_tail(&[&self.dir.path().join("provider.log")], 60)
    }

    /// Stops it and starts it again on the same port; with `rotate` its signing key is
    /// replaced by a new one (the old one is no longer published).
    pub fn restart(&mut self, rotate: bool) {
        if let Some(mut process) = self.process.take() {
            process.terminate(Duration::from_secs(5));
        }
        if rotate {
            std::fs::remove_file(self.dir.path().join("keys.json")).expect("remove the keys");
        }
        self.launch();
    }

    /// A JWT access token of the client-credentials grant for `client` and `resource`.
    pub async fn machine_token(&self, client: &str, resource: &str) -> String {
        let response = reqwest::Client::new()
            .post(format!("{}/token", self.issuer()))
            .basic_auth(client, Some(machine_secret(client)))
            .form(&[("grant_type", "client_credentials"), ("resource", resource)])
            .send()
            .await
            .expect("the provider answers");
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON answer");
        assert!(status.is_success(), "token for {client}: {status} {body}");
        body["access_token"]
            .as_str()
            .expect("an access token")
            .to_owned()
    }

    fn launch(&mut self) {
        let mut command = Command::new("node");
        command
            .arg(script())
            .arg(self.dir.path().join("config.json"));
        let log = self.dir.path().join("provider.log");
        let mut process = ChildProcess::spawn(command, self.dir.path(), &log, &log)
            .unwrap_or_else(|err| panic!("the sign-in tests need Node.js (`node`): {err:?}"));
        let url = format!("{}/.well-known/openid-configuration", self.issuer());
        let ready = || {
            Command::new("curl")
                .args(["-sf", "-o", "/dev/null", "--max-time", "2", &url])
                .status()
                .is_ok_and(|s| s.success())
        };
        match process.wait_until_serving(Duration::from_secs(60), self.port, ready) {
            Ok(()) => {}
            Err(StartFailure::Exited(status)) => {
                panic!(
                    "oidc-provider exited while starting ({status}):\n{}",
                    self.log()
                )
            }
            Err(StartFailure::NotReady(waited)) => {
                panic!(
                    "oidc-provider did not answer within {waited:?}:\n{}",
                    self.log()
                )
            }
        }
        self.process = Some(process);
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("oidc-provider/provider.mjs")
}

/// An ECDSA P-256 signing key of a [`LocalIssuer`], named by its `kid`.
pub struct IssuerKey {
    kid: String,
    encoding: EncodingKey,
    public: Jwk,
}

impl std::fmt::Debug for IssuerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuerKey").field("kid", &self.kid).finish()
    }
}

impl IssuerKey {
    /// A new key named `kid`.
    pub fn new(kid: &str) -> IssuerKey {
        let pair = rcgen::KeyPair::generate().expect("an EC key");
        let encoding = EncodingKey::from_ec_der(&pair.serialize_der());
        let mut public =
            Jwk::from_encoding_key(&encoding, Algorithm::ES256).expect("the key's public JWK");
        public.common.key_id = Some(kid.to_owned());
        IssuerKey {
            kid: kid.to_owned(),
            encoding,
            public,
        }
    }

    /// `claims` signed with this key (ES256, the header naming its `kid`).
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("a signed token")
    }
}

/// An issuer on a free loopback port: `/.well-known/openid-configuration` and `/jwks`, the
/// published keys changeable, the fetches of the keys counted. It stops with the runtime.
#[derive(Debug, Clone)]
pub struct LocalIssuer {
    /// `http://127.0.0.1:PORT`.
    pub issuer: String,
    keys: Arc<Mutex<Vec<Jwk>>>,
    fetches: Arc<AtomicUsize>,
}

impl LocalIssuer {
    /// Serves an issuer publishing `keys`.
    pub async fn start(keys: &[&IssuerKey]) -> LocalIssuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let served = LocalIssuer {
            issuer: format!("http://{}", listener.local_addr().expect("bound address")),
            keys: Arc::new(Mutex::new(Vec::new())),
            fetches: Arc::new(AtomicUsize::new(0)),
        };
        served.publish(keys);
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .with_state(served.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.expect("the issuer serves") });
        served
    }

    /// Publishes `keys` instead of those before.
    pub fn publish(&self, keys: &[&IssuerKey]) {
        *self.keys.lock().expect("keys lock") = keys.iter().map(|k| k.public.clone()).collect();
    }

    /// How many times the key set was fetched.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

async fn discovery(State(served): State<LocalIssuer>) -> Json<Value> {
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

async fn jwks(State(served): State<LocalIssuer>) -> Json<Value> {
    served.fetches.fetch_add(1, Ordering::SeqCst);
    Json(json!({ "keys": *served.keys.lock().expect("keys lock") }))
}
