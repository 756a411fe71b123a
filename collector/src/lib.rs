//! # speedmatrix (collector)
//!
//! The native side of speedmatrix. `main.rs` only parses the command line; [`run`] dispatches
//! to one module per job:
//!
//! - [`cli`]: the command-line surface (clap), raw flags only;
//! - [`measuring`]: `speedmatrix run` — discovery, engine adapters, plan, prompts, client,
//!   window maths, GPU telemetry, launch command (one module each);
//! - [`terminal`]: `show` and `diff` — renderings of results files;
//! - [`site`]: `publish`, `serve` and `demo` — the static results site;
//! - [`import`]: `speedmatrix import FILE… --from llm-inference-bench|vllm-bench` — other tools' results;
//! - [`simulate`]: `speedmatrix simulate` — the flags of the twin (crate `speedmatrix-twin`);
//! - [`files`]: results files on disk: size-capped reading, atomic writing (parsing is in
//!   `speedmatrix-schema`).
//!
//! Exit codes: 0 success, 1 failure while working (and `diff --fail-on-regression` finding a
//! regression), 2 bad input (unreadable or invalid file, bad flag).

#![warn(missing_docs)]

pub mod cli;
pub mod files;
pub mod import;
pub mod measuring;
pub mod simulate;
pub mod site;
pub mod terminal;

use std::process::ExitCode;

/// Exit codes of `speedmatrix run` besides 0 (done), 1 ([`Error::Other`]) and 2
/// ([`Error::Input`]); README lists them all.
pub mod exit {
    /// The run is complete and its file valid, but some prefill rows or decode cells are
    /// errors (their `reason` says why): a script can tell that from a clean run.
    pub const CELL_ERRORS: u8 = 3;
    /// Stopped by Ctrl-C; the file is complete (`interrupted`) and can be resumed.
    pub const INTERRUPTED: u8 = 130;
    /// Stopped by SIGTERM, like Ctrl-C.
    pub const TERMINATED: u8 = 143;
}

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
        cli::Command::Run(args) => measuring::run::run(&args),
        cli::Command::Show(args) => terminal::show::run(&args).map(|()| 0),
        cli::Command::Diff(args) => terminal::diff::run(&args),
        cli::Command::Publish(args) => site::publish::run(&args).map(|()| 0),
        cli::Command::Serve(args) => site::serve::run(&args).map(|()| 0),
        cli::Command::Schema => print_out(&format!("{:#}\n", speedmatrix_schema::json_schema())).map(|()| 0),
        cli::Command::Simulate(args) => simulate::run(&args).map(|()| 0),
        cli::Command::Demo(args) => site::demo::run(&args),
        cli::Command::Import(args) => import::run(&args).map(|()| 0),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {}", one_line(&e.to_string()));
            ExitCode::from(e.exit_code())
        }
    }
}

/// Write a command's output to stdout. A closed pipe (`speedmatrix show … | head`) ends quietly;
/// other write errors (a full disk) are reported.
///
/// # Errors
/// [`Error::Other`] when stdout cannot be written for another reason than a closed pipe.
pub fn print_out(text: &str) -> Result<(), Error> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Error::Other(anyhow::anyhow!("cannot write the output: {e}")))
        }
        _ => Ok(()),
    }
}

/// An error message made safe for one terminal line: control characters (newlines, ANSI
/// escapes from a file's contents or name) are written as escapes such as `\u{1b}`.
pub fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}
