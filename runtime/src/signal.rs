//! The stop signal every long-running command waits for (collector, hub, agent, the renderer's
//! watch loop, the demo and the load test), so that all of them stop on the same signals.

use std::future::Future;

/// Resolves on Ctrl-C (SIGINT) or SIGTERM (what Kubernetes sends a pod it stops). The handlers
/// are installed when this is called, not when the future is first polled, so a signal that
/// comes in between is neither lost nor allowed to end the process the default way. Call it
/// inside the runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt()).expect("install SIGINT handler");
        let mut terminate = signal(SignalKind::terminate()).expect("install SIGTERM handler");
        async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
