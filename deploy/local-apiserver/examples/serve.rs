//! Starts a private API server with the CRDs of a directory and keeps it running until Ctrl-C,
//! for trying the agent by hand:
//! `cargo run -p fleetscope-local-apiserver --example serve -- collector/testdata/crds`.

fn main() {
    let crds = std::env::args().nth(1).map(std::path::PathBuf::from);
    let server =
        fleetscope_local_apiserver::LocalApiServer::start(crds.as_deref()).unwrap_or_else(|err| {
            eprintln!("error: {err}");
            std::process::exit(1);
        });
    println!("api server: {}", server.server_url());
    println!("kubeconfig: {}", server.kubeconfig_path().display());
    println!("stop with Ctrl-C");
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let _ = std::thread::spawn(move || {
        let mut line = String::new();
        // Also stops when stdin closes, so a background run ends with its shell.
        let _ = std::io::stdin().read_line(&mut line);
        let _ = tx.send(());
    });
    let _ = rx.recv();
    server.stop();
}
