//! # speedmatrix (collector)
//!
//! The native side of speedmatrix. `main.rs` only parses the command line; [`run`] dispatches
//! to one module per job:
//!
//! - [`cli`]: the command-line surface (clap), raw flags only;
//! - [`show`]: `speedmatrix show FILE` — print a results file (text, markdown, csv, json);
//! - [`files`]: reading results files from disk (the I/O edge; parsing is in `speedmatrix-schema`);
//! - [`twin`]: `speedmatrix simulate` — a vLLM-shaped server whose timing follows a measured run.
//!
//! Exit codes: 0 success, 1 failure while working, 2 bad input (unreadable or invalid file, bad
//! flag).

pub mod cli;
pub mod files;
pub mod show;
pub mod twin;

use std::process::ExitCode;

/// An error with the exit code it maps to. Its `Display` is one line meant for people.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the user: an unreadable or invalid file, a bad flag value. Exit code 2.
    #[error("{0}")]
    Input(String),
    /// Anything else that stopped the command. Exit code 1.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) => 2,
            Error::Other(_) => 1,
        }
    }
}

/// Run one command line to completion and return the process exit code. Errors are printed
/// to stderr as `error: …` (one line).
pub fn run(cli: cli::Cli) -> ExitCode {
    let result = match cli.command {
        cli::Command::Show(args) => show::run(&args),
        cli::Command::Schema => {
            println!("{:#}", speedmatrix_schema::json_schema());
            Ok(())
        }
        cli::Command::Simulate(args) => twin::run_cli(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
