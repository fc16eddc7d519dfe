//! The operators' command line: `fleetscope login` signs in with the hub's identity provider;
//! `fleetscope status`, `versions`, `drift`, `gate`, `rollouts`, `rollout` and `delivery` ask a
//! hub
//! over its HTTP API and print the answer as aligned tables, or as the hub's JSON for scripts,
//! with exit codes a pipeline can act on (`EXIT_*`). This crate knows the hub only by its
//! JSON: it reads the few fields it prints (`answers`) and depends on no other part of
//! Fleetscope.

pub mod answers;
pub mod client;
pub mod commands;
pub mod login;
pub mod rollouts;
pub mod selection;
pub mod table;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

pub use client::{HubClient, HubConnection, Output};
pub use commands::{Command, DriftArgs, GateArgs, StatusArgs, VersionsArgs};
pub use login::LoginArgs;
pub use rollouts::{DeliveryArgs, RolloutArgs, RolloutsArgs};

/// The command did what was asked (and a gate passed).
pub const EXIT_OK: u8 = 0;
/// `gate`: the verdict is `fail`.
pub const EXIT_GATE_FAILED: u8 = 1;
/// The command line is wrong: a flag, a value, the hub URL or the token file (clap exits with
/// the same code for what it rejects itself).
pub const EXIT_USAGE: u8 = 2;
/// The hub could not be reached, answered an error, or sent an answer this client cannot read.
pub const EXIT_HUB: u8 = 3;

/// Why a command did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("hub url {url:?}: {reason}")]
    HubUrl { url: String, reason: String },
    #[error("token file {path:?}: {reason}")]
    TokenFile { path: PathBuf, reason: String },
    #[error("cannot reach the hub at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the hub answered {status} to {path}: {message}")]
    Hub {
        status: u16,
        path: String,
        message: String,
    },
    #[error("the hub's answer to {path} is not what this client reads: {reason}")]
    Answer { path: String, reason: String },
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
    #[error("login: {reason}")]
    Login { reason: String },
}

impl CliError {
    /// The process's exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::HubUrl { .. } | CliError::TokenFile { .. } => EXIT_USAGE,
            CliError::Unreachable { .. }
            | CliError::Hub { .. }
            | CliError::Answer { .. }
            | CliError::Output(_)
            | CliError::Login { .. } => EXIT_HUB,
        }
    }
}

/// What a finished command found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    GateFailed,
}

impl Outcome {
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Ok => EXIT_OK,
            Outcome::GateFailed => EXIT_GATE_FAILED,
        }
    }
}

/// Runs `command`, its output on stdout and an error on stderr, and returns the exit code.
pub async fn main(command: Command) -> ExitCode {
    let mut stdout = std::io::stdout();
    let code = match command.run(&mut stdout).await {
        Ok(outcome) => outcome.exit_code(),
        Err(err) => {
            let _ = stdout.flush();
            eprintln!("error: {}", table::printable(&err.to_string()));
            err.exit_code()
        }
    };
    let _ = stdout.flush();
    ExitCode::from(code)
}

/// `text` parsed as `T`, or the error naming the route it came from.
fn parse<T: serde::de::DeserializeOwned>(path: &str, text: &str) -> Result<T, CliError> {
    serde_json::from_str(text).map_err(|e| CliError::Answer {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Writes `text` and a line end to `out`.
fn write_line(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    writeln!(out, "{}", table::printable(text.trim_end()))?;
    Ok(())
}
