//! TLS for the collector and the hub (rustls), as an option: the certificate chain and key come
//! from PEM files that are reloaded when they change (see [`crate::reload`]); connections already
//! open keep the certificate they started with, new ones get the new one.
//!
//! Handshakes run on their own tasks with [`HANDSHAKE_TIMEOUT`], so a client that connects and
//! sends nothing holds up no one.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;

use crate::reload::{self, ReloadMetrics, Watch};

/// How long a client may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the certificate chain and its key are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM: the server's certificate first, then any intermediates.
    pub cert: PathBuf,
    /// PEM: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// Both flags or neither: `--tls-cert` and `--tls-key`.
    pub fn from_flags(
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
    ) -> Result<Option<TlsFiles>, String> {
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
            (None, None) => Ok(None),
            (Some(_), None) => Err("--tls-cert needs --tls-key".into()),
            (None, Some(_)) => Err("--tls-key needs --tls-cert".into()),
        }
    }

    fn paths(&self) -> Vec<PathBuf> {
        vec![self.cert.clone(), self.key.clone()]
    }
}

/// A certificate chain and the key it belongs to, from PEM; every problem is returned.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, Vec<String>> {
    let mut problems = Vec::new();
    let certs: Vec<CertificateDer<'static>> =
        match CertificateDer::pem_slice_iter(cert_pem).collect::<Result<_, _>>() {
            Ok(certs) => certs,
            Err(err) => {
                problems.push(format!("certificate: not valid PEM: {err}"));
                Vec::new()
            }
        };
    if certs.is_empty() && problems.is_empty() {
        problems.push("certificate: no CERTIFICATE block in the file".into());
    }
    let key = match PrivateKeyDer::from_pem_slice(key_pem) {
        Ok(key) => match rustls::crypto::ring::sign::any_supported_type(&key) {
            Ok(key) => Some(key),
            Err(err) => {
                problems.push(format!("key: not a usable private key: {err}"));
                None
            }
        },
        Err(err) => {
            problems.push(format!("key: no private key found: {err}"));
            None
        }
    };
    let (Some(key), true) = (key, problems.is_empty()) else {
        return Err(problems);
    };
    let certified = CertifiedKey::new(certs, key);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            Ok(certified)
        }
        Err(_) => Err(vec![
            "key: it does not belong to the certificate (the first certificate must be the server's own)".into(),
        ]),
    }
}

/// The certificate in force, swapped when the files change.
struct CurrentCert(RwLock<Arc<CertifiedKey>>);

impl fmt::Debug for CurrentCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CurrentCert").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().expect("certificate lock").clone())
    }
}

/// Accepts TLS connections with the certificate in force.
#[derive(Clone)]
pub struct TlsAcceptor {
    config: Arc<ServerConfig>,
    current: Arc<CurrentCert>,
    files: TlsFiles,
    version: String,
}

impl fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("files", &self.files)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl TlsAcceptor {
    /// Reads the certificate and key; an error names the files and every problem.
    pub fn load(files: TlsFiles) -> Result<TlsAcceptor, String> {
        let contents = reload::read(&files.paths())?;
        let key = certified_key(&contents.files[0], &contents.files[1]).map_err(|problems| {
            format!(
                "tls certificate {} and key {}:\n  {}",
                files.cert.display(),
                files.key.display(),
                problems.join("\n  ")
            )
        })?;
        let current = Arc::new(CurrentCert(RwLock::new(Arc::new(key))));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| format!("tls configuration: {err}"))?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor {
            config: Arc::new(config),
            current,
            files,
            version: contents.version,
        })
    }

    /// The version of the certificate and key loaded at start.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Reloads the certificate and key when their files change or on SIGHUP.
    pub fn watch(&self, interval: Duration, metrics: ReloadMetrics) -> tokio::task::JoinHandle<()> {
        let current = self.current.clone();
        Watch {
            what: "tls certificate",
            paths: self.files.paths(),
            interval,
            metrics,
        }
        .spawn(
            self.version.clone(),
            |files| certified_key(&files[0], &files[1]),
            move |key| *current.0.write().expect("certificate lock") = Arc::new(key),
        )
    }

    /// Accepts connections on `listener`, handshaking each on its own task.
    pub fn listen(self, listener: TcpListener) -> TlsListener {
        let local_addr = listener.local_addr();
        let (sender, incoming) = mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    _ = sender.closed() => return,
                };
                let (tcp, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(%err, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = sender.send((stream, peer)).await;
                        }
                        Ok(Err(err)) => tracing::debug!(%peer, %err, "tls handshake failed"),
                        Err(_) => tracing::debug!(%peer, "tls handshake timed out"),
                    }
                });
            }
        });
        TlsListener {
            incoming,
            local_addr,
        }
    }
}

/// A listener whose connections completed their TLS handshake.
#[derive(Debug)]
pub struct TlsListener {
    incoming: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: io::Result<SocketAddr>,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(accepted) => accepted,
            // The accepting task never stops while this receiver lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.local_addr {
            Ok(addr) => Ok(*addr),
            Err(err) => Err(io::Error::new(err.kind(), err.to_string())),
        }
    }
}
