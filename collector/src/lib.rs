//! # speedmatrix (collector)
//!
//! The native side of speedmatrix. `main.rs` only parses the command line; [`run`] dispatches
//! to one module per job:
//!
//! - [`cli`]: the command-line surface (clap), raw flags only;
//! - [`run`]: `speedmatrix run` — sequences discovery, plan, prefill rows and decode cells;
//!   - [`discovery`]: what server this is (`/v1/models`, `/version`, `/metrics`, …);
//!   - [`engine`]: engine adapters (vLLM, SGLang, llama.cpp, plain OpenAI): detection, KV
//!     budget, metric names, stream options, missing figures;
//!   - [`plan`]: flags + server → the cells to measure (pure);
//!   - [`prompt`]: prompts of exact token counts (`/tokenize`, varied prose);
//!   - [`client`]: HTTP and SSE, one record per streamed request;
//!   - [`measure`]: records → figures of a window (pure);
//!   - [`output`]: the atomic results-file writer;
//!   - [`launch`]: the server's launch command (secrets redacted) and the host's CPU, OS, name;
//!   - [`selfcheck`]: the collector's own CPU use (is the client the bottleneck?);
//!   - [`gpu`]: NVML GPU inventory and per-window power, energy, utilization, clocks;
//! - [`show`]: `speedmatrix show FILE` — print a results file (text, markdown, csv, json);
//! - [`diff`]: `speedmatrix diff A.json B.json` — what changed between two runs (text, markdown, json);
//! - [`demo`]: `speedmatrix demo` — twin + run + publish + serve, about a minute, no GPU;
//! - [`publish`]: `speedmatrix publish RUN.json… --out SITE/` — a static site with the embedded viewer;
//! - [`serve`]: `speedmatrix serve [SITE/ | RUN.json…]` — that site (or a folder) on 127.0.0.1;
//! - [`twin`]: `speedmatrix simulate` — a vLLM-shaped server whose timing follows a measured run;
//! - [`import`]: `speedmatrix import FILE… --from llm-inference-bench|vllm-bench` — other tools' results;
//! - [`files`]: reading results files from disk (the I/O edge; parsing is in `speedmatrix-schema`).
//!
//! Exit codes: 0 success, 1 failure while working (and `diff --fail-on-regression` finding a
//! regression), 2 bad input (unreadable or invalid file, bad flag).

#![warn(missing_docs)]

pub mod cli;
pub mod client;
pub mod demo;
pub mod diff;
pub mod discovery;
pub mod engine;
pub mod files;
pub mod gpu;
pub mod import;
pub mod launch;
pub mod measure;
pub mod output;
pub mod plan;
pub mod prompt;
pub mod publish;
pub mod run;
pub mod selfcheck;
pub mod serve;
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
        cli::Command::Run(args) => run::run(&args),
        cli::Command::Show(args) => show::run(&args).map(|()| 0),
        cli::Command::Diff(args) => diff::run(&args),
        cli::Command::Publish(args) => publish::run(&args).map(|()| 0),
        cli::Command::Serve(args) => serve::run(&args).map(|()| 0),
        cli::Command::Schema => print_out(&format!("{:#}\n", speedmatrix_schema::json_schema())).map(|()| 0),
        cli::Command::Simulate(args) => twin::run_cli(&args).map(|()| 0),
        cli::Command::Demo(args) => demo::run(&args),
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
