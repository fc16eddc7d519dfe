//! How the collector and the hub serve HTTP: over plain TCP or TLS (rustls, with the certificate
//! and key reloaded when their files change), with a deadline on every request, and with the
//! files they are configured from (token files, certificates) reloaded while they run.
//!
//! [`reload`] watches files (polling their contents and on SIGHUP) and swaps in a new version
//! only when it is valid; [`tls`] is the TLS listener; [`deadline`] the per-request time limit.

#![forbid(unsafe_code)]

pub mod deadline;
pub mod reload;
pub mod tls;

use std::future::Future;
use std::io;

use axum::Router;
use tokio::net::TcpListener;

/// Serves `router` on `listener` until `shutdown` completes, over TLS when `tls` is given.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<tls::TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    match tls {
        None => {
            axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Some(acceptor) => {
            axum::serve(acceptor.listen(listener), router)
                .with_graceful_shutdown(shutdown)
                .await
        }
    }
}
