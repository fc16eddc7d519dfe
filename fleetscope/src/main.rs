//! The `fleetscope` binary: parses the command line and hands over to a component.

#![forbid(unsafe_code)]

mod args;

use clap::Parser;

/// jemalloc instead of the C library's allocator. The hub replaces parts of its in-memory fleet
/// many times a second while answers are built beside it; under the 30,000-cluster load test
/// glibc's allocator kept the pages it freed (the hub grew to 1.4 GB); the same build on
/// jemalloc stayed under 800 MB and used 0.26 cores instead of 0.42 (docs/benchmarks.md).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = args::Cli::parse();
    args::init_tracing(&cli.log);
    match args::dispatch(cli.command).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
