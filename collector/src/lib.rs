//! # speedmatrix (collector)
//!
//! The native side of speedmatrix. `main.rs` only parses the command line; [`run`] dispatches
//! to one module per job:
//!
//! - [`cli`]: the command-line surface (clap), raw flags only;
//! - [`command`]: what every command shares: its failure kinds and exit codes, its output, its
//!   runtime;
//! - [`measuring`]: `speedmatrix run` — discovery, engine adapters, plan, prompts, client,
//!   window maths, GPU telemetry, launch command (one module each);
//! - [`terminal`]: `show` and `diff` — renderings of results files;
//! - [`site`]: `publish`, `serve`, `report` and `demo` — the static results site and the
//!   one-file report;
//! - [`export`]: `speedmatrix export RUN.json… -o cells.parquet|csv` — every row of many runs
//!   as one typed table (the Parquet writer is [`export::parquet`]; the columns are
//!   `speedmatrix_schema::cells`);
//! - [`import`]: `speedmatrix import FILE… --from llm-inference-bench|vllm-bench` — other
//!   tools' results;
//! - [`simulate`]: `speedmatrix simulate` — the flags of the twin (crate `speedmatrix-twin`);
//! - [`files`]: files on disk: size-capped reading of every user file, atomic writing of
//!   results files (parsing is in `speedmatrix-schema`);
//! - [`text`]: text from files and servers made safe for one terminal line.
//!
//! Errors: each module has its own error enum (`thiserror`) whose variants name the file, URL,
//! field or flag involved, and says which [`command::Failure`] it is. Only [`run`], the
//! binary's edge, turns one into the printed line (with `anyhow`, causes included) and the exit
//! code: 0 success, 1 failure while working (and `diff --fail-on-regression` finding a
//! regression), 2 bad input (unreadable or invalid file, bad flag); `run` adds the codes of
//! [`command::exit`].

#![warn(missing_docs)]

pub mod cli;
pub mod command;
pub mod export;
pub mod files;
#[cfg(test)]
mod fuzz;
pub mod import;
pub mod measuring;
pub mod simulate;
pub mod site;
pub mod terminal;
pub mod text;

use command::{error_line, print_json, CommandError};
use std::io::Write;
use std::process::ExitCode;

/// Run one command line to completion and return the process exit code. An error is printed
/// to stderr as one line, `error: what: why` (its causes joined with `: `).
pub fn run(cli: cli::Cli) -> ExitCode {
    use cli::Command;
    match cli.command {
        Command::Run(args) => finish(measuring::run::run(&args)),
        Command::Show(args) => finish(terminal::show::run(&args).map(|()| 0)),
        Command::Diff(args) => finish(terminal::compare::run(&args)),
        Command::Publish(args) => finish(site::publish::run(&args).map(|()| 0)),
        Command::Export(args) => finish(export::run(&args).map(|()| 0)),
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
