//! The `fleetscope` binary: parses the command line and hands over to a component.

#![forbid(unsafe_code)]

mod args;

use clap::Parser;

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
