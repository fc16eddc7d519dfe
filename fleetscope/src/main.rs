//! The `fleetscope` binary: parses the command line and hands over to a component.

#![forbid(unsafe_code)]

mod args;

use clap::Parser;

/// jemalloc instead of the C library's allocator: the hub replaces parts of its in-memory fleet
/// many times a second while answers are built beside it, and glibc's allocator kept the pages
/// it freed (docs/benchmarks.md has the load test's figures for both).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The environment variable jemalloc (as built here, with its symbols prefixed) reads its
/// settings from when the process starts.
const MALLOC_CONF: &str = "_RJEM_MALLOC_CONF";

/// The hub's allocator settings: one arena instead of four per core, because the hub's threads
/// (the runtime's workers, and the threads a refresh moves to) free each other's copies of
/// cells and records as snapshots are replaced, and memory freed in one arena was not reused by
/// the others; and pages left free are given back after about a second instead of ten, because
/// a refresh that recounts the fleet frees a snapshot's worth of copies at once. The figures are
/// in docs/benchmarks.md. The collector keeps the defaults: its many concurrent inserts are
/// what several arenas are for.
const HUB_MALLOC_CONF: &str = "narenas:1,dirty_decay_ms:1000";

/// jemalloc reads its settings only as the process starts, so the hub restarts itself once,
/// the same process (its pid kept), with them set. Settings given by the caller win: with
/// `_RJEM_MALLOC_CONF` set, nothing is changed.
#[cfg(unix)]
fn restart_with_hub_allocator_settings() {
    use std::os::unix::process::CommandExt as _;
    if std::env::var_os(MALLOC_CONF).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(MALLOC_CONF, HUB_MALLOC_CONF)
        .exec();
    eprintln!("warning: the hub runs with the default allocator settings: restarting with {MALLOC_CONF}={HUB_MALLOC_CONF} failed: {err}");
}

#[cfg(not(unix))]
fn restart_with_hub_allocator_settings() {}

fn main() -> std::process::ExitCode {
    let cli = args::Cli::parse();
    if matches!(cli.command, args::Command::Hub { .. }) {
        restart_with_hub_allocator_settings();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        args::init_tracing(&cli.log);
        match args::dispatch(cli.command).await {
            Ok(code) => code,
            Err(err) => {
                eprintln!("error: {err:#}");
                std::process::ExitCode::FAILURE
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// `demo` and `loadtest` are there exactly when the `dev-tools` feature is: a binary built
    /// without it (the release image) neither offers them nor links what they need.
    #[test]
    fn the_dev_tools_subcommands_follow_the_feature() {
        let mut cli = super::args::Cli::command();
        let help = cli.render_help().to_string();
        for name in ["demo", "loadtest"] {
            let listed = help
                .lines()
                .any(|line| line.trim_start().starts_with(&format!("{name} ")));
            assert_eq!(
                (cli.find_subcommand(name).is_some(), listed),
                (cfg!(feature = "dev-tools"), cfg!(feature = "dev-tools")),
                "{name} in:\n{help}"
            );
        }
        for name in [
            "migrate",
            "render",
            "import",
            "agent",
            "hub",
            "collector",
            "status",
            "versions",
            "drift",
            "gate",
        ] {
            assert!(cli.find_subcommand(name).is_some(), "{name}");
        }
    }
}
