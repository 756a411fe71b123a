//! What every command shares: how it fails ([`Failure`], [`CommandError`], the exit codes of
//! [`exit`]), the one line an error is printed as ([`error_line`]), its output on stdout
//! ([`print_out`], [`print_json`]) and its tokio runtime. `lib.rs` dispatches the commands and
//! turns their results into exit codes with these; every command module uses them.

use std::io::Write;

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

/// An error as the one line the edge prints after `error: `: the error and each of its causes,
/// joined with `: `, control characters escaped.
pub fn error_line(e: impl CommandError) -> String {
    crate::text::escaped(&format!("{:#}", anyhow::Error::new(e)))
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

/// The tokio runtime for one command (run, serve, simulate, demo): one worker per CPU this
/// process may use (`available_parallelism` follows `taskset` and cgroup limits); on one CPU a
/// single-threaded runtime, which does the same work without the multi-threaded scheduler's
/// cross-thread bookkeeping on every task wake-up (a stream's every chunk wakes its task).
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    if std::thread::available_parallelism().is_ok_and(|n| n.get() == 1) {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    }
}
