//! Writes a generated platform repo: `cargo run -p fleetscope-renderer --example generate -- DIR CLUSTERS APPS`.

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: generate DIR CLUSTERS APPS");
    let clusters = args.next().and_then(|v| v.parse().ok()).unwrap_or(30_000);
    let apps = args.next().and_then(|v| v.parse().ok()).unwrap_or(100);
    fleetscope_renderer::generate::generate(std::path::Path::new(&dir), clusters, apps)
        .expect("write the platform repo");
}
