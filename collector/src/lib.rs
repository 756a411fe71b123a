//! # speedmatrix (collector)
//!
//! The native side of speedmatrix. `main.rs` only parses the command line; [`run`] dispatches
//! to one module per job:
//!
//! - [`cli`]: the command-line surface (clap), raw flags only;
//! - [`measuring`]: `speedmatrix run` — discovery, engine adapters, plan, prompts, client,
//!   window maths, GPU telemetry, launch command (one module each);
//! - [`terminal`]: `show` and `diff` — renderings of results files;
//! - [`site`]: `publish`, `serve`, `report` and `demo` — the static results site and the one-file report;
//! - [`import`]: `speedmatrix import FILE… --from llm-inference-bench|vllm-bench` — other tools' results;
//! - [`simulate`]: `speedmatrix simulate` — the flags of the twin (crate `speedmatrix-twin`);
//! - [`files`]: files on disk: size-capped reading of every user file, atomic writing of
//!   results files (parsing is in `speedmatrix-schema`);
//! - [`text`]: text from files and servers made safe for one terminal line.
//!
//! Errors: each module has its own error enum (`thiserror`) whose variants name the file, URL,
//! field or flag involved, and says which [`Failure`] it is. Only [`run`], the binary's edge,
//! turns one into the printed line (with `anyhow`, causes included) and the exit code: 0
//! success, 1 failure while working (and `diff --fail-on-regression` finding a regression), 2 bad
//! input (unreadable or invalid file, bad flag); `run` adds the codes of [`exit`].

#![warn(missing_docs)]

pub mod cli;
pub mod files;
#[cfg(test)]
mod fuzz;
pub mod import;
pub mod measuring;
pub mod simulate;
pub mod site;
pub mod terminal;
pub mod text;

use std::io::Write;
use std::process::ExitCode;

/// Exit codes of `speedmatrix run` besides 0 (done), 1 ([`Failure::Working`]) and 2
/// ([`Failure::BadInput`]); docs/CLI.md lists them all.
pub mod exit {
    /// The run is complete and its file valid, but some prefill rows or decode cells are
    /// errors (their `reason` says why): a script can tell that from a clean run.
    pub const CELL_ERRORS: u8 = 3;
    /// Stopped by Ctrl-C; the file is complete (`interrupted`) and can be resumed.
    pub const INTERRUPTED: u8 = 130;
    /// Stopped by SIGTERM, like Ctrl-C.
    pub const TERMINATED: u8 = 143;
}

/// How a command failed, which decides the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Bad input from the user: an unreadable or invalid file, a bad flag value. Exit code 2.
    BadInput,
    /// Anything else that stopped the command while working. Exit code 1.
    Working,
}

impl Failure {
    /// The process exit code of this kind of failure.
    pub fn exit_code(self) -> u8 {
        match self {
            Failure::BadInput => 2,
            Failure::Working => 1,
        }
    }
}

/// An error a command can end with: a module's error enum, which knows what kind of failure
/// each of its variants is.
pub trait CommandError: std::error::Error + Send + Sync + 'static {
    /// Bad input or a failure while working.
    fn failure(&self) -> Failure;
}

/// Run one command line to completion and return the process exit code. An error is printed
/// to stderr as one line, `error: what: why` (its causes joined with `: `).
pub fn run(cli: cli::Cli) -> ExitCode {
    use cli::Command;
    match cli.command {
        Command::Run(args) => finish(measuring::run::run(&args)),
        Command::Show(args) => finish(terminal::show::run(&args).map(|()| 0)),
        Command::Diff(args) => finish(terminal::compare::run(&args)),
        Command::Publish(args) => finish(site::publish::run(&args).map(|()| 0)),
        Command::Report(args) => finish(site::single_file::run(&args).map(|()| 0)),
        Command::Serve(args) => finish(
            match &args.watch {
                Some(path) => site::live_page::serve_watch(path, args.port),
                None => site::serve::run(&args),
            }
            .map(|()| 0),
        ),
        Command::Schema => finish(print_json(&speedmatrix_schema::json_schema()).map(|()| 0)),
        Command::Simulate(args) => finish(simulate::run(&args).map(|()| 0)),
        Command::Demo(args) => finish(site::demo::run(&args)),
        Command::Import(args) => finish(import::run(&args).map(|()| 0)),
    }
}

/// The edge: an exit code, or the error as one line on stderr and its kind's exit code.
fn finish<E: CommandError>(result: Result<u8, E>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let code = e.failure().exit_code();
            let _ = writeln!(std::io::stderr(), "error: {}", error_line(e));
            ExitCode::from(code)
        }
    }
}

/// An error as the one line the edge prints after `error: `: the error and each of its causes,
/// joined with `: `, control characters escaped.
pub fn error_line(e: impl CommandError) -> String {
    text::escaped(&format!("{:#}", anyhow::Error::new(e)))
}

/// Standard output could not be written for another reason than a closed pipe (a full disk).
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Writing failed.
    #[error("cannot write the output")]
    Write(#[source] std::io::Error),
    /// The value could not be encoded as JSON.
    #[error("cannot encode the output as JSON")]
    Json(#[source] serde_json::Error),
}

impl CommandError for OutputError {
    fn failure(&self) -> Failure {
        Failure::Working
    }
}

/// Write a command's output to stdout. A closed pipe (`speedmatrix show … | head`) ends quietly.
///
/// # Errors
/// [`OutputError::Write`] when stdout cannot be written for another reason.
pub fn print_out(text: &str) -> Result<(), OutputError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(OutputError::Write(e)),
        _ => Ok(()),
    }
}

/// Write `value` to stdout as pretty JSON and a final newline (`show -f json`, `diff -f json`,
/// `schema`).
///
/// # Errors
/// As [`print_out`]; [`OutputError::Json`] when it cannot be encoded.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), OutputError> {
    let mut s = serde_json::to_string_pretty(value).map_err(OutputError::Json)?;
    s.push('\n');
    print_out(&s)
}

/// A multi-threaded tokio runtime for one command (run, serve, simulate, demo).
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}
