//! Why a run could not start or stopped ([`RunError`]), and why one prefill row or decode cell
//! could not start ([`CellError`], its text becomes the row's `reason`). Most of `RunError`'s
//! variants are bad flags, raised by [`crate::measuring::spec`]; the `--resume` ones by
//! [`crate::measuring::resume`].

use crate::command::{CommandError, Failure};
use crate::files::FileError;
use crate::measuring::client::HttpError;
use crate::measuring::discovery::DiscoverError;
use crate::measuring::plan::PlanError;
use speedmatrix_schema::context::ContextError;
use std::path::PathBuf;

/// Why `speedmatrix run` could not start, or stopped. Bad flags (checked before any request:
/// [`crate::measuring::spec::RunSpec::from_args`]), an unusable server and a `--resume` file of another plan are bad
/// input (exit 2); errors while measuring become cell
/// statuses instead, and only a results file that cannot be written stops a run (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A duration flag that humantime cannot read.
    #[error("{flag} {value:?} is not a duration; write e.g. 30s, 2m or 500ms")]
    NotADuration {
        /// `--duration` or `--stall-timeout`.
        flag: &'static str,
        /// What was given.
        value: String,
    },
    /// A duration flag of 0.
    #[error("{flag} must be longer than 0")]
    ZeroDuration {
        /// `--duration` or `--stall-timeout`.
        flag: &'static str,
    },
    /// A window too short or too long to measure.
    #[error("--duration {value:?}: a window must last from 1s to 24h (a shorter one measures mostly noise)")]
    Window {
        /// What was given.
        value: String,
    },
    /// A context list with a bad entry.
    #[error("{flag}")]
    Context {
        /// `--contexts` or `--prefill-contexts`.
        flag: &'static str,
        /// The bad entry.
        #[source]
        source: ContextError,
    },
    /// `--url` with `user:password@` (never sent, never echoed).
    #[error(
        "--url {url}: credentials in the URL are not sent; give the API key with --api-key or SPEEDMATRIX_API_KEY"
    )]
    UrlCredentials {
        /// The URL with its user and password replaced by `<redacted>`.
        url: String,
    },
    /// `--url` without `http://` or `https://` (e.g. `127.0.0.1:8000`).
    #[error("--url {url}: give the scheme too, e.g. --url http://{url}")]
    UrlScheme {
        /// The URL given.
        url: String,
    },
    /// `--url` with a scheme other than `http://` or `https://` (e.g. `ftp://host/`).
    #[error("--url {url}: only http:// and https:// are supported, not {scheme}://")]
    UrlUnsupportedScheme {
        /// The URL given.
        url: String,
        /// Its scheme, as given.
        scheme: String,
    },
    /// A concurrency of 0.
    #[error("--concurrency values must be at least 1")]
    ZeroConcurrency,
    /// A `--rates` entry that is not a positive number of requests per second.
    #[error(
        "--rates {value:?}: give request rates from 0.001 to 1,000,000 requests per second, e.g. --rates 0.5,1,2,4, or auto alone (with --slo)"
    )]
    Rate {
        /// What was given.
        value: String,
    },
    /// A `--slo` that cannot be read.
    #[error("--slo {value:?}: {why}; write e.g. --slo ttft=2s,tpot=50ms or --slo ttft=500ms,p=90")]
    Slo {
        /// What was given.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// A rate whose window holds less than one request on average.
    #[error(
        "--rates {rate} with --duration {window_s}s schedules {expected:.2} requests per window, fewer than one: give --duration {needed_s}s or more (a window should hold at least 10 requests for figures worth reading), or a higher rate"
    )]
    RateWindow {
        /// The rate, requests/s.
        rate: f64,
        /// The window, s.
        window_s: f64,
        /// Requests one window holds on average.
        expected: f64,
        /// The shortest window for 10 requests, whole seconds.
        needed_s: u64,
    },
    /// A `--prefix-share` value that is not a share.
    #[error("--prefix-share: {0}")]
    PrefixShare(String),
    /// `--prefix-share` with `--rates auto` or a trace, which do not take it yet.
    #[error("--prefix-share applies to concurrency cells, rate cells of given rates and prefill rows; --rates auto and --trace do not take it yet (run them without --prefix-share)")]
    PrefixShareOpenLoop,
    /// `--turns` with a flag it does not combine with (yet), or `--think-time` without it.
    #[error("{flag}: {why}")]
    Turns {
        /// The flag refused.
        flag: &'static str,
        /// Why, and what to do.
        why: String,
    },
    /// `--rates auto` without `--slo`.
    #[error("--rates auto searches for the highest rate that meets an SLO: give one with --slo, e.g. --slo ttft=2s,tpot=50ms")]
    AutoWithoutSlo,
    /// An `--arrival` that is not a known process.
    #[error("--arrival: {0}")]
    Arrival(String),
    /// `--max-in-flight` or `--keep-going` without `--rates`.
    #[error("{flag} applies to rate cells only; give --rates too (e.g. --rates 1,2,4)")]
    RateFlagWithoutRates {
        /// The flag.
        flag: &'static str,
    },
    /// A `--trace` file that cannot be read, or a line of it that is not a request.
    #[error("--trace {}: {why}", .path.display())]
    Trace {
        /// The file.
        path: PathBuf,
        /// What is wrong (with the line, when it is one line's).
        why: String,
    },
    /// A `--prompts` file that cannot be read, or a line of it that holds no prompt.
    #[error("--prompts {}: {why}", .path.display())]
    UserPrompts {
        /// The file.
        path: PathBuf,
        /// What is wrong (with the line, when it is one line's).
        why: String,
    },
    /// `--resume` of a conversation run (`--turns`): not resumable yet, like `--resume --turns`.
    #[error(
        "--resume {}: it is a conversation run (--turns), which is not resumed yet; start it again with another -o",
        .0.display()
    )]
    ResumeConversations(PathBuf),
    /// `--resume` with other prompts than the run's (`--prompts` given or left out).
    #[error("--resume: {0}")]
    ResumePrompts(String),
    /// A `--trace-speed`, `--trace-from` or `--trace-to` out of range, or given without
    /// `--trace`.
    #[error("{flag} {value:?}: {why}")]
    TraceFlag {
        /// The flag.
        flag: &'static str,
        /// What was given.
        value: String,
        /// What it must be.
        why: &'static str,
    },
    /// A temperature that is not a finite number ≥ 0.
    #[error("--temperature {value}: give a finite number ≥ 0, e.g. 0 or 0.7")]
    Temperature {
        /// What was given.
        value: f64,
    },
    /// A `--launch-command` a shell could not split (not echoed: it may hold secrets).
    #[error("--launch-command: its quotes do not balance; give the command line as a shell would read it")]
    LaunchCommand,
    /// `-o` names a folder, not a file.
    #[error("-o {}: is a folder; give the results file's name, e.g. -o {}", .path.display(), .path.join("results.json").display())]
    OutIsFolder {
        /// The folder given.
        path: PathBuf,
    },
    /// `-o` names an existing file and neither `--resume` nor `--force` says what to do with it.
    #[error(
        "-o {}: the file {what}; continue it with --resume {}, overwrite it with --force, or pick another -o",
        .path.display(),
        .path.display()
    )]
    WouldOverwrite {
        /// The file.
        path: PathBuf,
        /// What it holds, e.g. "holds run abc (complete)".
        what: String,
    },
    /// `--resume` with a file of another model or plan.
    #[error(
        "--resume {}: {what} from the file's; repeat the run's flags ({flags}), or start a new run with another -o",
        .path.display()
    )]
    ResumeMismatch {
        /// The file.
        path: PathBuf,
        /// What differs, and that it does ("--duration differs").
        what: &'static str,
        /// The file's matrix flags, to repeat.
        flags: String,
    },
    /// `--accept-change` without `--resume`.
    #[error("--accept-change only applies to a run continued with --resume FILE")]
    AcceptChangeWithoutResume,
    /// `--accept-change` with a key that names no compared header field.
    #[error("--accept-change {key}: not a header field; use one of {}", .keys.join(", "))]
    AcceptChangeKey {
        /// What was given.
        key: String,
        /// The keys it takes.
        keys: Vec<&'static str>,
    },
    /// `--resume` against a server that is not the one the file's header describes.
    #[error(
        "--resume {}: the server is not the one the file describes: {}. Cells measured now would be merged under the file's header; \
         to continue anyway add --accept-change {} (every row and cell measured now records the difference), or start a new run with another -o",
        .path.display(),
        .what.join("; "),
        .keys.join(",")
    )]
    ServerChanged {
        /// The file.
        path: PathBuf,
        /// Each difference in words.
        what: Vec<String>,
        /// The `--accept-change` keys that would accept them.
        keys: Vec<&'static str>,
    },
    /// The server cannot be measured (unreachable, refuses the key, lacks the model, …).
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    /// No plan can be made from the flags and the server.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The plan's streams need more open files than this process may have.
    #[error(transparent)]
    OpenFiles(#[from] crate::measuring::fdlimit::TooFewFiles),
    /// Prompts of exact lengths cannot be made (`/tokenize` and the calibration probe failed).
    #[error("cannot build prompts")]
    Prompts(#[source] HttpError),
    /// The HTTP client cannot be set up.
    #[error(transparent)]
    Client(HttpError),
    /// The `--resume` file cannot be read, or the results file cannot be written.
    #[error(transparent)]
    File(#[from] FileError),
    /// The async runtime cannot start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// `--serve`: the live page cannot be served (the port is taken, no viewer).
    #[error("--serve: {0}")]
    Serve(#[source] crate::site::serve::ServeError),
}

impl CommandError for RunError {
    fn failure(&self) -> Failure {
        match self {
            RunError::File(e) => e.failure(),
            RunError::Serve(e) => e.failure(),
            RunError::Client(_) | RunError::Runtime(_) => Failure::Working,
            _ => Failure::BadInput,
        }
    }
}

/// Why a prefill row or decode cell could not start; its text becomes the row's `reason`.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    /// The prompt of the context could not be built.
    #[error("could not build the prompt: {0}")]
    Prompt(HttpError),
    /// The request that warms the prefix cache failed.
    #[error("warm-up request failed: {0}")]
    WarmUp(String),
}
