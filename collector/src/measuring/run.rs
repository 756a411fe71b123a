//! `speedmatrix run`: discovery → plan → prefill rows → decode cells, writing the results file
//! after every row and cell (`docs/ARCHITECTURE.md`; the method: `docs/METHODOLOGY.md`). This
//! module sequences the work; the figures come from
//! [`crate::measuring::measure`], the HTTP from [`crate::measuring::client`].

use crate::cli::RunArgs;
use crate::files::FileError;
use crate::measuring::client::{request_body, Client, Clock, HttpError, StreamCtl, StreamRecord};
use crate::measuring::discovery::{discover, DiscoverError, Metrics, ServerInfo};
use crate::measuring::measure::{sample, window_figures, CellStream};
use crate::measuring::plan::{estimate_s, plan, Plan, PlanError, PlanInput};
use crate::measuring::prompt::{corpus, prompt_fields, Prompt, PromptBuilder};
use crate::{CommandError, Failure};
use serde_json::{json, Value};
use speedmatrix_schema::context::{parse_context, ContextArg, ContextError};
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::status::{decode_status, over_capacity_reason, Evidence};
use speedmatrix_schema::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// `eprintln!` that never panics: a closed stderr (`run … 2>&1 | head`) must not stop a run
/// half-way and leave its file `running`; the lines are lost, the measurements are not.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// How often `/metrics` is sampled during a window (at least once a second: queue evidence needs
/// two consecutive samples, and the running average should not hinge on one unlucky sample).
const SAMPLE_EVERY: Duration = Duration::from_millis(500);

/// Why `speedmatrix run` could not start, or stopped. Bad flags, an unusable server and a
/// `--resume` file of another plan are bad input (exit 2); errors while measuring become cell
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
        /// The URL with its password redacted.
        url: String,
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
        "--resume {}: {what} differs from the file's; repeat the run's flags ({flags}), or start a new run with another -o",
        .path.display()
    )]
    ResumeMismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
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
}

impl CommandError for RunError {
    fn failure(&self) -> Failure {
        match self {
            RunError::File(e) => e.failure(),
            RunError::Client(_) | RunError::Runtime(_) => Failure::Working,
            _ => Failure::BadInput,
        }
    }
}

/// Why a prefill row or decode cell could not start; its text becomes the row's `reason`.
#[derive(Debug, thiserror::Error)]
enum CellError {
    /// The prompt of the context could not be built.
    #[error("could not build the prompt: {0}")]
    Prompt(HttpError),
    /// The request that warms the prefix cache failed.
    #[error("warm-up request failed: {0}")]
    WarmUp(String),
}

/// After a failed cell, the server no longer answers: the run stops (`run.reason`).
#[derive(Debug, thiserror::Error)]
#[error("the server stopped answering: {last}")]
struct ServerGone {
    /// The last of the tries.
    last: HttpError,
}

/// Run `speedmatrix run` to completion and return the exit code (0 done, 130 interrupted by
/// Ctrl-C, 143 by SIGTERM, 1 when the server died).
///
/// # Errors
/// [`RunError`] when the run cannot start or its file cannot be written.
pub fn run(args: &RunArgs) -> Result<u8, RunError> {
    crate::runtime().map_err(RunError::Runtime)?.block_on(measure(args))
}

/// A duration flag through humantime (`30s`, `2m`, `500ms`), more than 0.
fn duration_flag(flag: &'static str, v: &str) -> Result<Duration, RunError> {
    let d = humantime::parse_duration(v.trim()).map_err(|_| RunError::NotADuration { flag, value: v.to_string() })?;
    if d.is_zero() {
        return Err(RunError::ZeroDuration { flag });
    }
    Ok(d)
}

fn context_flags(flag: &'static str, values: &[String]) -> Result<Vec<ContextArg>, RunError> {
    if values.len() == 1 && values[0].trim().eq_ignore_ascii_case("none") {
        return Ok(vec![]);
    }
    values.iter().map(|v| parse_context(v).map_err(|source| RunError::Context { flag, source })).collect()
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// The flags of a run, read and checked before anything is asked of the server.
struct Flags {
    /// The flags as given, with `--url` without a trailing `/v1` and `-o` resolved.
    args: RunArgs,
    /// `--duration`.
    window: Duration,
    /// `--stall-timeout`.
    stall: Duration,
    /// `--contexts`.
    contexts: Vec<ContextArg>,
    /// `--prefill-contexts`.
    prefill_contexts: Vec<ContextArg>,
}

impl Flags {
    /// Every flag checked, or the first bad one as [`RunError`] naming it.
    fn read(args: &RunArgs) -> Result<Flags, RunError> {
        let args = checked(args)?;
        let window = duration_flag("--duration", &args.duration)?;
        if !(Duration::from_secs(1)..=Duration::from_secs(86_400)).contains(&window) {
            return Err(RunError::Window { value: args.duration.clone() });
        }
        Ok(Flags {
            window,
            stall: duration_flag("--stall-timeout", &args.stall_timeout)?,
            contexts: context_flags("--contexts", &args.contexts)?,
            prefill_contexts: context_flags("--prefill-contexts", &args.prefill_contexts)?,
            args,
        })
    }
}

/// The flags made ready to use, or the first bad one as an input error: `--url` without a
/// trailing `/v1` (people paste the OpenAI base URL), `-o` resolved (default `results.json`,
/// or the `--resume` file) and not overwriting an existing file without `--force`, a finite
/// `--temperature`, a `--launch-command` a shell can split.
fn checked(args: &RunArgs) -> Result<RunArgs, RunError> {
    let mut a = args.clone();
    if let Ok(mut u) = reqwest::Url::parse(&a.url) {
        if !u.username().is_empty() || u.password().is_some() {
            let _ = u.set_password(u.password().map(|_| "<redacted>"));
            return Err(RunError::UrlCredentials { url: u.to_string() });
        }
    }
    let url = a.url.trim_end_matches('/');
    if let Some(base) = url.strip_suffix("/v1") {
        say!("note: --url {url}: using {base} (speedmatrix adds /v1 itself)");
        a.url = base.to_string();
    }
    if !a.accept_change.is_empty() && a.resume.is_none() {
        return Err(RunError::AcceptChangeWithoutResume);
    }
    let keys = speedmatrix_schema::resume::keys();
    if let Some(bad) = a.accept_change.iter().find(|k| !keys.contains(&k.as_str())) {
        return Err(RunError::AcceptChangeKey { key: bad.clone(), keys });
    }
    if let Some(t) = a.temperature.filter(|t| !t.is_finite() || *t < 0.0) {
        return Err(RunError::Temperature { value: t });
    }
    if a.launch_command.as_deref().is_some_and(|l| shlex::split(l).is_none()) {
        return Err(RunError::LaunchCommand);
    }
    let out = a.out.clone().or_else(|| a.resume.clone()).unwrap_or_else(|| "results.json".into());
    let resuming_it = a.resume.as_ref().is_some_and(|r| same_file(r, &out));
    if out.exists() && !resuming_it && !a.force && !a.dry_run {
        let what = match crate::files::read_results(&out) {
            Ok(r) => format!("holds run {} ({:?})", r.run.id, r.run.status).to_lowercase(),
            Err(_) => "exists".to_string(),
        };
        return Err(RunError::WouldOverwrite { path: out, what });
    }
    a.out = Some(out);
    Ok(a)
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The results file this run writes (set by [`checked`]).
fn out_path(args: &RunArgs) -> PathBuf {
    args.out.clone().unwrap_or_else(|| "results.json".into())
}

/// The API key: `--api-key` / `SPEEDMATRIX_API_KEY`, else `OPENAI_API_KEY`.
fn api_key(args: &RunArgs) -> Option<String> {
    args.api_key.clone().or_else(|| std::env::var("OPENAI_API_KEY").ok()).filter(|k| !k.is_empty())
}

/// A run-unique id: start time in ns and the process id, base 36.
fn new_run_id() -> String {
    let ns = time::OffsetDateTime::now_utc().unix_timestamp_nanos() as u128;
    let mut n = ns ^ (u128::from(std::process::id()) << 64);
    let mut s = String::new();
    while n > 0 {
        s.push(char::from_digit((n % 36) as u32, 36).unwrap_or('0'));
        n /= 36;
    }
    s.chars().rev().collect()
}

/// Everything a measurement step needs.
struct Session {
    client: Client,
    clock: Clock,
    info: ServerInfo,
    has_metrics: bool,
    prompts: PromptBuilder,
    results: Results,
    out: PathBuf,
    path: &'static str,
    stall: Duration,
    window: Duration,
    args: RunArgs,
    progress: indicatif::ProgressBar,
    /// Warmed prompts by context tokens (stream index for distinct prompts).
    warm: HashMap<(u64, usize), Prompt>,
    /// NVML readings on their own thread; `None` without GPUs (`hardware.gpu_telemetry_note`).
    gpu: Option<crate::measuring::gpu::Sampler>,
    /// Header differences accepted on `--resume` (`--accept-change`), recorded on every row and
    /// cell measured now.
    accepted: Vec<AcceptedDifference>,
}

impl Session {
    /// The results file (fresh, or the `--resume` one), the prompt builder, the GPU sampler and
    /// the progress bar of a run about to measure `plan`.
    async fn open(
        flags: Flags,
        client: Client,
        info: ServerInfo,
        has_metrics: bool,
        plan: &Plan,
    ) -> Result<Session, RunError> {
        let endpoint: Endpoint = flags.args.endpoint.into();
        let host = host_facts(&flags.args);
        // The header the server gives now: the new file's, or what `--resume` compares with.
        let fresh = fresh_results(&info, plan, &flags, endpoint, &host);
        let (mut results, accepted) = match &flags.args.resume {
            Some(path) => resume(path, &info, plan, &flags.args, flags.window, &fresh)?,
            None => (fresh, vec![]),
        };
        let args = flags.args;
        results.run.status = RunStatus::Running;
        results.run.reason = None;
        let clock = Clock::start();
        let gpu = host.gpus.map(|g| crate::measuring::gpu::Sampler::start(g, clock));
        let seed = args.seed.unwrap_or(0x5eed);
        let prompts = PromptBuilder::new(client.clone(), info.model.clone(), endpoint, results.run.id.clone(), seed)
            .await
            .map_err(RunError::Prompts)?;
        let steps = results.prefill.iter().filter(|p| p.status == CellStatus::NotRun).count()
            + results.decode.iter().filter(|c| c.status == CellStatus::NotRun).count();
        Ok(Session {
            path: match endpoint {
                Endpoint::Chat => "/v1/chat/completions",
                Endpoint::Completions => "/v1/completions",
            },
            has_metrics,
            client,
            clock,
            info,
            prompts,
            results,
            out: out_path(&args),
            stall: flags.stall,
            window: flags.window,
            progress: progress_bar(args.quiet, steps as u64),
            args,
            warm: HashMap::new(),
            gpu,
            accepted,
        })
    }

    fn log(&self, line: String) {
        if self.progress.is_hidden() {
            say!("{line}");
        } else {
            self.progress.println(line);
        }
    }

    fn save(&self) -> Result<(), FileError> {
        crate::files::write_atomic(&self.out, &self.results)
    }

    fn body(&self, prompt: &str, max_tokens: u32) -> Value {
        let mut b = json!({
            "model": self.info.model,
            "stream": true,
            "stream_options": self.info.stream_options(),
            "max_tokens": max_tokens,
            "ignore_eos": true,
        });
        if let (Some(obj), Value::Object(p)) = (b.as_object_mut(), prompt_fields(self.prompts.endpoint, prompt)) {
            obj.extend(p);
            if let Some(t) = self.args.temperature {
                obj.insert("temperature".into(), json!(t));
            }
            if let Some(s) = self.args.seed {
                obj.insert("seed".into(), json!(s));
            }
        }
        b
    }

    fn ctl(&self, id: usize, cancel: watch::Receiver<bool>) -> StreamCtl {
        StreamCtl { clock: self.clock, stall: self.stall, cancel, id, events: None, live_tokens: None }
    }

    /// One request to completion (prefill rows, warm-ups).
    async fn single(&self, prompt: &str, max_tokens: u32) -> StreamRecord {
        let (_keep, rx) = watch::channel(false);
        self.client.stream(self.path, &request_body(&self.body(prompt, max_tokens)), self.ctl(0, rx)).await
    }

    async fn scrape(&self) -> Option<Metrics> {
        if !self.has_metrics {
            return None;
        }
        let text = self.client.get_text("/metrics").await.ok()?;
        Metrics::parse(&text).ok()
    }

    /// End the run: rows and cells left unmeasured say why, the run's status and reason (`stopped`:
    /// how it stopped early, with its exit code), the file written a last time, a closing line.
    /// Returns the exit code.
    fn finish(&mut self, stopped: Option<(RunStatus, String, u8)>) -> Result<u8, FileError> {
        self.progress.finish_and_clear();
        let unmeasured = match &stopped {
            Some((_, cause, _)) => format!("not measured: {cause}"),
            None => "not measured".into(),
        };
        for p in self.results.prefill.iter_mut().filter(|p| p.status == CellStatus::NotRun) {
            p.reason = Some(unmeasured.clone());
        }
        for c in self.results.decode.iter_mut().filter(|c| c.status == CellStatus::NotRun) {
            c.reason = Some(unmeasured.clone());
        }
        self.results.run.status = stopped.as_ref().map_or(RunStatus::Complete, |(st, _, _)| *st);
        self.results.run.reason = stopped.as_ref().map(|(_, cause, _)| cause.clone());
        self.results.run.finished_at = Some(now_rfc3339());
        self.save()?;
        let errors = self.results.decode.iter().filter(|c| c.status == CellStatus::Error).count()
            + self.results.prefill.iter().filter(|c| c.status == CellStatus::Error).count();
        let detail = match errors {
            0 => String::new(),
            1 => " (1 error cell — see `speedmatrix show --all` for the reason)".into(),
            n => format!(" ({n} error cells — see `speedmatrix show --all` for the reasons)"),
        };
        let out = self.out.display();
        match &stopped {
            None => say!("done; results in {out}{detail}"),
            Some((status, cause, _)) => say!(
                "{}{cause}; what was measured is in {out}{detail}; continue with --resume {out}",
                if *status == RunStatus::Failed { "run failed: " } else { "" },
            ),
        }
        Ok(stopped.map_or(0, |(_, _, code)| code))
    }
}

fn progress_bar(quiet: bool, steps: u64) -> indicatif::ProgressBar {
    let progress = if quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(steps) };
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} cells · ETA {eta} · {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    progress
}

/// The whole run inside an existing tokio runtime (what [`run`] and `demo` call): discovery,
/// plan, prefill rows, decode cells, the results file. Returns the exit code (0, 130 / 143 when
/// interrupted by Ctrl-C / SIGTERM, 1 when the server died).
///
/// # Errors
/// As [`run`].
pub async fn measure(args: &RunArgs) -> Result<u8, RunError> {
    let flags = Flags::read(args)?;
    let args = &flags.args;
    let max_n = args.concurrency.iter().copied().max().unwrap_or(1) as usize;
    let client = Client::new(&args.url, api_key(args), max_n + 8).map_err(RunError::Client)?;
    let (info, metrics) = discover(&client, args.model.as_deref(), args.kv_budget, args.engine.map(Into::into)).await?;
    let plan = plan(&PlanInput {
        contexts: flags.contexts.clone(),
        concurrency: args.concurrency.clone(),
        prefill_contexts: flags.prefill_contexts.clone(),
        max_tokens: args.max_tokens,
        window_s: flags.window.as_secs_f64(),
        max_model_len: info.facts.max_model_len,
        kv_budget: info.plan_kv_budget(),
        slot_context: info.facts.slot_context,
    })?;
    print_plan(&info, &plan, flags.window, args);
    if args.dry_run {
        return Ok(0);
    }
    let mut s = Session::open(flags, client, info, metrics.is_some(), &plan).await?;
    s.save()?;
    let stopped = tokio::select! {
        r = measure_all(&mut s) => r?.map(|cause| (RunStatus::Failed, cause, 1)),
        _ = tokio::signal::ctrl_c() => Some((RunStatus::Interrupted, "interrupted by Ctrl-C".to_string(), 130)),
        _ = terminated() => Some((RunStatus::Interrupted, "stopped by SIGTERM".to_string(), 143)),
    };
    Ok(s.finish(stopped)?)
}

/// Resolves when the process gets SIGTERM (`timeout`, `docker stop`, a cancelled CI job): the
/// run then ends like Ctrl-C, with a complete file. Never resolves where there is no SIGTERM.
async fn terminated() {
    #[cfg(unix)]
    {
        if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            term.recv().await;
            return;
        }
    }
    std::future::pending::<()>().await;
}

fn print_plan(info: &ServerInfo, plan: &Plan, window: Duration, args: &RunArgs) {
    let mml = info.facts.max_model_len.map_or("unknown".into(), |m| m.to_string());
    let kv = info.facts.kv_budget.map_or("unknown".into(), |(b, src)| {
        let src = serde_json::to_value(src).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        format!("{b} tokens (from {src})")
    });
    say!(
        "server: {} {} · model {} · max_model_len {mml} · KV budget {kv}",
        info.kind.id(),
        info.facts.version.as_deref().unwrap_or("(version unknown)"),
        info.model
    );
    if let Some(sim) = &info.simulated {
        say!(
            "note: the server is the {}{}: the run is recorded as simulated",
            sim.by,
            sim.profile.as_deref().map(|p| format!(" (profile {p})")).unwrap_or_default()
        );
    }
    if let Some(note) = &info.metrics_note {
        say!("note: {note}");
    }
    for w in &plan.warnings {
        say!("warning: {w}");
    }
    let labels = |v: &[ContextSize]| {
        v.iter().map(|c| format!("{} ({} tokens)", c.label, c.tokens)).collect::<Vec<_>>().join(", ")
    };
    say!("plan: prefill at {}", if plan.prefill.is_empty() { "none".into() } else { labels(&plan.prefill) });
    say!(
        "plan: decode {} contexts [{}] × concurrency {:?}, {} s windows, max_tokens {}",
        plan.contexts.len(),
        labels(&plan.contexts),
        plan.concurrency,
        window.as_secs_f64(),
        args.max_tokens
    );
    for c in plan.cells.iter().filter(|c| c.over_capacity.is_some()) {
        say!("plan: over capacity (not run): {} × {}", c.context.label, c.concurrency);
    }
    let secs = estimate_s(plan, window.as_secs_f64(), 5_000.0);
    say!("plan: estimated wall time ≈ {:.0} min (assuming 5,000 prompt tok/s)", (secs / 60.0).ceil());
}

/// A new results file for `plan`: every prefill row and decode cell planned (`not_run`, or
/// `over_capacity` with the shortfall), the header from discovery and the host.
fn fresh_results(info: &ServerInfo, plan: &Plan, flags: &Flags, endpoint: Endpoint, host: &Host) -> Results {
    let prefill =
        plan.prefill.iter().map(|c| PrefillRow::new(c.clone(), CellStatus::NotRun, Some("pending".into()))).collect();
    let decode = plan
        .cells
        .iter()
        .map(|p| {
            let mut c = empty_cell(&p.context, p.concurrency);
            if let Some(cap) = p.over_capacity {
                c.status = CellStatus::OverCapacity;
                c.reason = Some(p.reason.clone().unwrap_or_else(|| over_capacity_reason(&cap)));
                c.capacity = Some(cap);
            }
            c
        })
        .collect();
    Results {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        tool: Tool { name: "speedmatrix".into(), version: Some(env!("CARGO_PKG_VERSION").into()), converted_by: None },
        run: RunInfo {
            id: new_run_id(),
            started_at: Some(now_rfc3339()),
            finished_at: None,
            status: RunStatus::Running,
            reason: None,
            label: flags.args.label.clone(),
            notes: flags.args.notes.clone(),
        },
        hardware: host.hardware.clone(),
        engine: engine_header(info, host),
        config: run_config(plan, flags, endpoint),
        prefill,
        decode,
        client: Some(host.client.clone()),
        missing: info.facts.missing.clone(),
        import: None,
    }
}

/// The results file's `engine`: what discovery found, and the launch command the host gave.
fn engine_header(info: &ServerInfo, host: &Host) -> Engine {
    Engine {
        name: Some(info.kind.id().to_string()),
        version: info.facts.version.clone(),
        served_model_name: Some(info.model.clone()),
        model: info.root.clone(),
        max_model_len: info.facts.max_model_len,
        kv_budget_tokens: info.facts.kv_budget.map(|(b, _)| b),
        kv_budget_source: info.facts.kv_budget.map(|(_, s)| s),
        launch_command: host.launch_command.clone(),
        speculative_decoding: host.launch_command.as_deref().and_then(crate::measuring::launch::speculative_decoding),
        slots: info.facts.slots,
        slot_context_tokens: info.facts.slot_context,
        max_running_requests: info.facts.max_running,
        simulated: info.simulated.clone(),
        ..Engine::default()
    }
}

/// The results file's `config`: the plan and how it is measured.
fn run_config(plan: &Plan, flags: &Flags, endpoint: Endpoint) -> Config {
    let args = &flags.args;
    Config {
        contexts: plan.contexts.clone(),
        concurrency: plan.concurrency.clone(),
        prefill_contexts: plan.prefill.clone(),
        window_s: Some(flags.window.as_secs_f64()),
        max_tokens: Some(args.max_tokens),
        endpoint: Some(endpoint),
        ignore_eos: Some(true),
        temperature: args.temperature,
        seed: args.seed,
        prompt_corpus: Some(corpus()),
        prompt_sharing: Some(if args.distinct_prompts { PromptSharing::Distinct } else { PromptSharing::Shared }),
        prefill_mode: Some(PrefillMode::DecodeWarmup),
        decode_test: Some(DecodeTest::FixedDuration),
        stall_timeout_s: Some(flags.stall.as_secs_f64()),
    }
}

/// What this machine can tell about the server: the hardware card (CPU, OS, host name and the
/// NVML GPU inventory when the server runs here), the launch command, the GPU sampler, and the
/// client machine (always).
struct Host {
    hardware: Hardware,
    launch_command: Option<String>,
    gpus: Option<crate::measuring::gpu::Gpus>,
    client: ClientMachine,
}

/// This machine, as the client: CPU, cores, OS, host name (not with `--redact-host`).
fn client_machine(args: &RunArgs) -> ClientMachine {
    ClientMachine {
        cpu: crate::measuring::launch::cpu_model(),
        cores: u32::try_from(crate::measuring::selfcheck::cores()).ok(),
        os: Some(std::env::consts::OS.into()),
        host: if args.redact_host { None } else { crate::measuring::launch::host_name() },
    }
}

/// Look at the host: where the server runs (the owner of the URL's listening socket, see
/// [`crate::measuring::locate`]); `--launch-command` or the local server's own (secrets
/// redacted, home paths too with `--redact-host`); this machine's CPU, OS and name on the
/// hardware card only when the server runs here; NVML unless `--no-gpu` or the server is not
/// here, in which case `hardware.gpu_telemetry_note` says why there are no GPU figures.
fn host_facts(args: &RunArgs) -> Host {
    use crate::measuring::launch;
    use crate::measuring::locate::{locate, Found};
    let found = locate(&args.url);
    let server = match &found {
        Found::Local { root, argv, pids, .. } => Some(launch::local_server(*root, argv, pids)),
        _ => None,
    };
    let launch = match &args.launch_command {
        // `checked` made sure a shell can split it.
        Some(line) => shlex::split(line).map(|words| launch::redact_argv(&words)),
        None => server.as_ref().map(|s| s.command.clone()),
    };
    let redact = |c: String| if args.redact_host { launch::redact_home(&c) } else { c };
    let launch_command = launch.map(|c| redact(launch::scrub(&c, api_key(args).as_deref())));
    let client = client_machine(args);
    let local = server.is_some();
    let mut hardware = if local {
        Hardware { os: client.os.clone(), cpu: client.cpu.clone(), host: client.host.clone(), ..Hardware::default() }
    } else {
        Hardware::default()
    };
    let mut evidence = found.evidence().to_string();
    if args.redact_host {
        if let Some(h) = reqwest::Url::parse(&args.url).ok().and_then(|u| u.host_str().map(str::to_string)) {
            evidence = redact(evidence.replace(&h, "<host>"));
        }
    }
    hardware.server_location = Some(ServerLocation { place: found.place(), evidence: evidence.clone() });
    if local {
        say!("server: on this machine — {evidence}");
    } else {
        say!("server: not on this machine — {evidence}; its hardware is not recorded (this machine is recorded as the client)");
    }
    let none = |detail: &str| GpuSelection { method: GpuSelectionMethod::None, detail: detail.into() };
    let selection = if args.no_gpu {
        Err(none("skipped (--no-gpu)"))
    } else if let Some(s) = &server {
        crate::measuring::gpu::open(&s.pids).map_err(|e| e.selection())
    } else {
        Err(none("the server is not on this host: NVML here cannot see its GPUs (no GPU figures)"))
    };
    let gpus = match selection {
        Ok(g) => {
            hardware.gpus = g.inventory();
            hardware.gpu_count = Some(hardware.gpus.len() as u32);
            hardware.vram_total_bytes = hardware.gpus.iter().map(|g| g.memory_bytes).sum();
            hardware.accelerator_type = Some("NVIDIA GPU".into());
            let assumed = if g.selection.method == GpuSelectionMethod::AllAssumed { " (assumed)" } else { "" };
            say!(
                "GPUs{assumed}: {} — {}",
                g.selection.detail,
                hardware.gpus.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ")
            );
            hardware.gpu_selection = Some(g.selection.clone());
            Some(g)
        }
        Err(s) => {
            hardware.gpu_telemetry_note = Some(s.detail.clone());
            hardware.gpu_selection = Some(s);
            None
        }
    };
    Host { hardware, launch_command, gpus, client }
}

/// A decode cell still to measure.
fn empty_cell(context: &ContextSize, concurrency: u32) -> DecodeCell {
    DecodeCell::new(context.clone(), concurrency, CellStatus::NotRun, Some("pending".into()))
}

/// The matrix flags that made a results file's plan, to repeat with `--resume`.
fn plan_flags(c: &Config) -> String {
    let join = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(",") };
    // Whole seconds as `30s`, anything finer in ms: both read back by humantime.
    let window =
        c.window_s.map(|w| if w.fract() == 0.0 { format!("{w}s") } else { format!("{}ms", (w * 1000.0).round()) });
    format!(
        "--contexts {} --concurrency {} --prefill-contexts {}{}{}",
        join(c.contexts.iter().map(|x| x.tokens.to_string()).collect()),
        join(c.concurrency.iter().map(u32::to_string).collect()),
        join(c.prefill_contexts.iter().map(|x| x.tokens.to_string()).collect()),
        window.map(|w| format!(" --duration {w}")).unwrap_or_default(),
        c.max_tokens.map(|m| format!(" --max-tokens {m}")).unwrap_or_default()
    )
}

/// Load a results file to continue: same model, same plan; unmeasured cells run again. The
/// server must be the one the header describes (`now` is the header made from the server
/// reached now); a difference is refused unless `--accept-change` names it, and accepted ones
/// are returned to be recorded on every row and cell measured now.
fn resume(
    path: &Path,
    info: &ServerInfo,
    plan: &Plan,
    args: &RunArgs,
    window: Duration,
    now: &Results,
) -> Result<(Results, Vec<AcceptedDifference>), RunError> {
    let mut r = crate::files::read_results(path)?;
    let differs =
        |what: &'static str| RunError::ResumeMismatch { path: path.to_path_buf(), what, flags: plan_flags(&r.config) };
    if r.engine.served_model_name.as_deref() != Some(info.model.as_str()) {
        return Err(differs("the served model"));
    }
    if r.config.contexts != plan.contexts
        || r.config.concurrency != plan.concurrency
        || r.config.prefill_contexts != plan.prefill
    {
        return Err(differs("the plan (contexts, concurrency or prefill contexts)"));
    }
    let same_window = r.config.window_s.is_some_and(|w| (w - window.as_secs_f64()).abs() <= 1e-9);
    if r.config.max_tokens != Some(args.max_tokens) || !same_window {
        return Err(differs("--max-tokens or --duration"));
    }
    let accepted = resume_differences(path, &r, now, &args.accept_change)?;
    let out = out_path(args);
    if !same_file(&out, path) {
        say!("note: resuming {} and writing to {}", path.display(), out.display());
    }
    // A failed run stopped because the server died: its error cells are measured again.
    if r.run.status == RunStatus::Failed {
        let mut again = 0;
        for c in r.decode.iter_mut().filter(|c| c.status == CellStatus::Error) {
            *c = empty_cell(&c.context, c.concurrency);
            again += 1;
        }
        for p in r.prefill.iter_mut().filter(|p| p.status == CellStatus::Error) {
            p.status = CellStatus::NotRun;
            p.reason = Some("pending".into());
            (p.prompt_tokens, p.prompt_tps, p.ttft_ms, p.requests) = (None, None, None, vec![]);
            (p.completed_requests, p.cached_tokens) = (None, None);
            again += 1;
        }
        if again > 0 {
            say!("note: the run had failed; its {again} error row(s)/cell(s) are measured again");
        }
    }
    Ok((r, accepted))
}

/// The header differences between the file being resumed and the server now: an error naming
/// each one not accepted (and the flag that accepts it), else the accepted ones.
fn resume_differences(
    path: &Path,
    file: &Results,
    now: &Results,
    accept: &[String],
) -> Result<Vec<AcceptedDifference>, RunError> {
    use speedmatrix_schema::resume::{differences, refused};
    let diffs = differences(file, now);
    let refused = refused(&diffs, accept);
    if !refused.is_empty() {
        return Err(RunError::ServerChanged {
            path: path.to_path_buf(),
            what: refused.iter().map(|d| d.describe()).collect(),
            keys: refused.iter().map(|d| d.key).collect(),
        });
    }
    for d in &diffs {
        say!("note: --resume: accepted: {}", d.describe());
    }
    Ok(diffs.into_iter().map(|d| d.recorded).collect())
}

/// Whether the server still answers after a cell failed: `GET /v1/models`, three tries a second
/// apart. [`ServerGone`] when nothing answers (connection refused, reset, timeout) or every
/// answer is a 5xx — the run then stops rather than fill every remaining cell with the same
/// error.
async fn server_alive(s: &Session) -> Result<(), ServerGone> {
    const TRIES: usize = 3;
    for attempt in 1..=TRIES {
        match s.client.get_text("/v1/models").await {
            Ok(_) => return Ok(()),
            Err(HttpError::Status { status, .. }) if status < 500 => return Ok(()),
            Err(last) if attempt == TRIES => return Err(ServerGone { last }),
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    Ok(())
}

/// Measure every row and cell still `not_run`, saving after each. Returns `Some(cause)` when the
/// server died on the way (the remaining cells stay `not_run`).
async fn measure_all(s: &mut Session) -> Result<Option<String>, FileError> {
    for i in 0..s.results.prefill.len() {
        if s.results.prefill[i].status != CellStatus::NotRun {
            continue;
        }
        let ctx = s.results.prefill[i].context.clone();
        s.progress.set_message(format!("prefill {}", ctx.label));
        let mut row = measure_prefill(s, &ctx).await;
        row.accepted_differences = s.accepted.clone();
        s.log(format!(
            "prefill {:>6}: {} · prompt {} tok/s · TTFT {} ms{}",
            ctx.label,
            row.status.label(),
            row.prompt_tps.map_or("—".into(), |v| format!("{v:.0}")),
            row.ttft_ms.map_or("—".into(), |v| format!("{v:.0}")),
            row.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        ));
        let failed = row.status == CellStatus::Error;
        s.results.prefill[i] = row;
        s.progress.inc(1);
        s.save()?;
        if failed {
            if let Err(cause) = server_alive(s).await {
                return Ok(Some(format!("{cause} (after prefill {})", ctx.label)));
            }
        }
    }
    for i in 0..s.results.decode.len() {
        if s.results.decode[i].status != CellStatus::NotRun {
            continue;
        }
        let (ctx, n) = (s.results.decode[i].context.clone(), s.results.decode[i].concurrency);
        s.progress.set_message(format!("decode {} × {n}", ctx.label));
        let mut cell = measure_cell(s, &ctx, n).await;
        cell.accepted_differences = s.accepted.clone();
        s.log(format!(
            "decode {:>6} × {:>3}: {} · {} tok/s · TTFT p50 {} ms{}",
            ctx.label,
            n,
            cell.status.label(),
            cell.total_tps.map_or("—".into(), |v| format!("{v:.1}")),
            cell.ttft_ms.and_then(|d| d.p50).map_or("—".into(), |v| format!("{v:.0}")),
            cell.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        ));
        let failed = cell.status == CellStatus::Error;
        s.results.decode[i] = cell;
        s.progress.inc(1);
        s.save()?;
        if failed {
            if let Err(cause) = server_alive(s).await {
                return Ok(Some(format!("{cause} (after decode {} × {n})", ctx.label)));
            }
        }
    }
    Ok(None)
}

fn prompt_check(s: &Session, ctx: &ContextSize, real: Option<u64>) {
    if let Some(real) = real {
        let off = (real as f64 - ctx.tokens as f64).abs() / ctx.tokens as f64;
        if off > 0.01 {
            s.log(format!(
                "warning: context {} prompt has {real} tokens, {:.1} % off the target {}",
                ctx.label,
                off * 100.0,
                ctx.tokens
            ));
        }
    }
}

async fn measure_prefill(s: &mut Session, ctx: &ContextSize) -> PrefillRow {
    let mut row = PrefillRow {
        context: ctx.clone(),
        prompt_tokens: None,
        status: CellStatus::Error,
        reason: None,
        prompt_tps: None,
        ttft_ms: None,
        completed_requests: Some(0),
        cached_tokens: None,
        accepted_differences: vec![],
        requests: vec![],
    };
    let prompt = match s.prompts.build(&format!("context {}", ctx.label), ctx.tokens).await {
        Ok(p) => p,
        Err(e) => {
            row.reason = Some(CellError::Prompt(e).to_string());
            return row;
        }
    };
    let rec = s.single(&prompt.text, 1).await;
    row.requests.push(sample(&rec, true, None, None));
    row.prompt_tokens = rec.prompt_tokens.or(prompt.tokens);
    prompt_check(s, ctx, row.prompt_tokens);
    match (&rec.error, rec.ttft_ms()) {
        (Some(e), _) => row.reason = Some(e.clone()),
        (None, None) => row.reason = Some("the stream produced no token".into()),
        (None, Some(ttft)) => {
            row.status = CellStatus::Valid;
            row.ttft_ms = Some(round3(ttft));
            row.completed_requests = Some(u64::from(rec.finished()));
            row.prompt_tps = row.prompt_tokens.map(|t| round3(t as f64 / (ttft / 1000.0)));
            // This request warmed the prefix cache for the decode cells of this context.
            s.warm.insert((ctx.tokens, 0), prompt);
        }
    }
    row
}

/// The warmed prompt of stream `i` of a context (stream 0 is the shared one).
async fn warm_prompt(s: &mut Session, ctx: &ContextSize, i: usize) -> Result<Prompt, CellError> {
    if let Some(p) = s.warm.get(&(ctx.tokens, i)) {
        return Ok(p.clone());
    }
    let tag = if i == 0 { format!("context {}", ctx.label) } else { format!("context {} stream {i}", ctx.label) };
    let p = s.prompts.build(&tag, ctx.tokens).await.map_err(CellError::Prompt)?;
    let rec = s.single(&p.text, 1).await;
    if let Some(e) = rec.error {
        return Err(CellError::WarmUp(e));
    }
    let p = Prompt { tokens: rec.prompt_tokens.or(p.tokens), ..p };
    s.warm.insert((ctx.tokens, i), p.clone());
    Ok(p)
}

/// One decode cell: warm prompts, open N streams, wait until they all decode with an empty
/// queue, the fixed window (finished streams replaced, metrics sampled), then the figures.
// long: the cell is one timeline whose stages share the live streams, the event channel and the
// clock; it is due to be rebuilt as typed stages, and until then it stays one body.
async fn measure_cell(s: &mut Session, ctx: &ContextSize, n: u32) -> DecodeCell {
    let mut cell = empty_cell(ctx, n);
    cell.status = CellStatus::Error;
    let n_prompts = if s.args.distinct_prompts { n as usize } else { 1 };
    let mut prompts = Vec::with_capacity(n_prompts);
    for i in 0..n_prompts {
        match warm_prompt(s, ctx, i).await {
            Ok(p) => prompts.push(p),
            Err(e) => {
                cell.reason = Some(e.to_string());
                return cell;
            }
        }
    }
    cell.prompt_tokens = prompts[0].tokens;
    prompt_check(s, ctx, cell.prompt_tokens);
    let bodies: Vec<bytes::Bytes> = prompts.iter().map(|p| request_body(&s.body(&p.text, s.args.max_tokens))).collect();
    // One idle connection per stream, so no stream pays connection set-up inside its TTFT.
    s.client.warm_connections(n as usize).await;
    // The server's token counter before any stream of the cell opens: with the scrape after the
    // last one ends, the server's count of every token the cell's requests were sent.
    let before = s.scrape().await;

    let (cancel_tx, cancel_rx) = watch::channel(false);
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    let live = Arc::new(AtomicU64::new(0));
    let mut set: JoinSet<(StreamRecord, bool)> = JoinSet::new();
    let mut next_id = 0usize;
    let spawn = |set: &mut JoinSet<(StreamRecord, bool)>, id: usize, opening: bool| {
        let client = s.client.clone();
        let body = bodies[id % bodies.len()].clone();
        let ctl = StreamCtl {
            clock: s.clock,
            stall: s.stall,
            cancel: cancel_rx.clone(),
            id,
            events: Some(ev_tx.clone()),
            live_tokens: Some(live.clone()),
        };
        let path = s.path;
        set.spawn(async move { (client.stream(path, &body, ctl).await, opening) });
    };
    for _ in 0..n {
        spawn(&mut set, next_id, true);
        next_id += 1;
    }
    let mut done: Vec<CellStream> = Vec::new();
    let mut failures: Vec<String> = Vec::new();

    // Readiness: every opening stream producing and the server queue empty (`docs/METHODOLOGY.md`).
    let ready_by = tokio::time::Instant::now() + s.stall;
    let mut producing = std::collections::HashSet::new();
    // More streams than the server runs at once never all decode, nor does its queue empty.
    let queued = s.info.queued_by_construction(n);
    let ready_n = s.info.decoding_at_once(n) as usize;
    let mut queue_empty = !s.has_metrics || queued.is_some();
    let mut poll = tokio::time::interval(Duration::from_millis(500));
    while (producing.len() < ready_n || !queue_empty) && !set.is_empty() {
        tokio::select! {
            Some(first) = ev_rx.recv() => { producing.insert(first.id); },
            Some(joined) = set.join_next() => {
                if let Ok((rec, opening)) = joined {
                    if let Some(e) = &rec.error { failures.push(format!("stream {}: {e}", rec.id)); }
                    else { producing.insert(rec.id); spawn(&mut set, next_id, false); next_id += 1; }
                    done.push(CellStream { record: rec, opening });
                }
            }
            _ = poll.tick() => if s.has_metrics && queued.is_none() {
                queue_empty = s.scrape().await.and_then(|m| m.waiting).is_none_or(|w| w == 0.0);
            },
            _ = tokio::time::sleep_until(ready_by) => {
                s.log(format!("note: {} × {n}: not every stream was decoding with an empty queue after {:?}; measuring anyway", ctx.label, s.stall));
                break;
            }
        }
        if !failures.is_empty() {
            break;
        }
    }

    // The window: fixed length, finished streams replaced at once, metrics sampled at 2 Hz.
    let mut samples: Vec<(f64, Metrics)> = Vec::new();
    let mut w0 = s.clock.now_ms();
    let mut cpu0 = None;
    if failures.is_empty() && !set.is_empty() {
        if let Some(m) = s.scrape().await {
            samples.push((s.clock.now_ms(), m));
        }
        w0 = s.clock.now_ms();
        cpu0 = crate::measuring::selfcheck::process_cpu_s();
        if let Some(g) = &s.gpu {
            g.take(); // readings before the window do not count
        }
        let w1_instant = tokio::time::Instant::from_std(s.clock.instant_at(w0 + s.window.as_secs_f64() * 1000.0));
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        tick.tick().await;
        let live_at_start = live.load(Ordering::Relaxed);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(w1_instant) => break,
                Some(joined) = set.join_next() => {
                    if let Ok((rec, opening)) = joined {
                        if let Some(e) = &rec.error { failures.push(format!("stream {}: {e}", rec.id)); }
                        else { spawn(&mut set, next_id, false); next_id += 1; }
                        done.push(CellStream { record: rec, opening });
                    }
                }
                _ = tick.tick() => {
                    if let Some(m) = s.scrape().await { samples.push((s.clock.now_ms(), m)); }
                    let secs = (s.clock.now_ms() - w0) / 1000.0;
                    let tokens = live.load(Ordering::Relaxed) - live_at_start;
                    s.progress.set_message(format!("decode {} × {n}: {:.0} tok/s", ctx.label, tokens as f64 / secs.max(1e-3)));
                }
                Some(_) = ev_rx.recv() => {}
            }
        }
    }
    let w1 = w0 + s.window.as_secs_f64() * 1000.0;
    let cpu1 = crate::measuring::selfcheck::process_cpu_s();
    let _ = cancel_tx.send(true);
    while let Some(joined) = set.join_next().await {
        if let Ok((rec, opening)) = joined {
            if let Some(e) = &rec.error {
                failures.push(format!("stream {}: {e}", rec.id));
            }
            done.push(CellStream { record: rec, opening });
        }
    }
    if let Some(m) = s.scrape().await {
        samples.push((s.clock.now_ms(), m));
    }
    done.sort_by_key(|c| c.record.id);
    cell.requests = done.iter().map(|c| sample(&c.record, c.opening, Some(w0), Some(w1))).collect();
    if !failures.is_empty() {
        cell.reason = Some(
            decode_status(&Evidence { concurrency: n, failures: &failures, ..Evidence::default() })
                .1
                .unwrap_or_default(),
        );
        cell.ttft_ms = window_figures(&done, w0, w1).ttft_ms;
        return cell;
    }
    let f = window_figures(&done, w0, w1);
    let mut server = server_figures(&samples, w0, w1);
    if !s.info.kind.adapter().live_token_counter() {
        // llama.cpp adds a request's tokens when it ends: the window's delta is no window count.
        if let Some(sv) = server.as_mut() {
            sv.generation_tokens = None;
        }
    }
    let waiting: Vec<f64> =
        samples.iter().filter(|(t, _)| *t >= w0 && *t <= w1).filter_map(|(_, m)| m.waiting).collect();
    let (mut status, mut reason) = decode_status(&Evidence {
        concurrency: n,
        failures: &[],
        waiting_samples: &waiting,
        // Without server gauges: the streams that were decoding, as the client saw them.
        avg_running: server.as_ref().and_then(|sv| sv.running_avg).or(Some(f.avg_decoding)),
    });
    if let (CellStatus::Valid | CellStatus::RequestsQueued, Some(why)) = (status, queued) {
        (status, reason) = (CellStatus::RequestsQueued, Some(reason.map_or(why.clone(), |r| format!("{why}; {r}"))));
    }
    let window_generated = delta(&samples, |m| m.generation_tokens).map(|v| v as u64);
    let (output_tokens, source) = if f.continuous_usage {
        (f.output_tokens, TokenCountSource::ContinuousUsage)
    } else if let Some(g) = window_generated.filter(|_| s.info.kind.adapter().live_token_counter()) {
        (g, TokenCountSource::ServerCounter)
    } else {
        (f.output_tokens, TokenCountSource::ChunkCount)
    };
    cell.status = status;
    cell.reason = reason;
    cell.window_s = Some(round3(f.window_s));
    cell.window_start_ms = Some(round3(w0));
    cell.output_tokens = Some(output_tokens);
    cell.token_count_source = Some(source);
    cell.total_tps = Some(round3(output_tokens as f64 / f.window_s));
    cell.per_request_tps = f.per_request_tps;
    cell.ttft_ms = f.ttft_ms;
    cell.ttft_in_window_ms = f.ttft_in_window_ms;
    cell.ttft_content_ms = f.ttft_content_ms;
    cell.tpot_ms = f.tpot_ms;
    cell.itl_ms = f.itl_ms;
    cell.chunk_gap_ms = f.chunk_gap_ms;
    cell.e2e_ms = f.e2e_ms;
    cell.completed_requests = Some(f.completed_requests);
    // One figure, one meaning: requests being served (the count the status rules use), from the
    // server's gauge when it has one.
    cell.avg_active_requests = Some(server.as_ref().and_then(|sv| sv.running_avg).unwrap_or(round3(f.avg_decoding)));
    cell.max_active_requests = Some(f.max_in_flight as f64);
    cell.spec_accept_rate = spec_rate(&samples);
    if let (Some(a), Some(b)) = (cpu0, cpu1) {
        let pct = round3(100.0 * (b - a) / f.window_s);
        cell.client_cpu_pct = Some(pct);
        let cores = crate::measuring::selfcheck::cores();
        if crate::measuring::selfcheck::near_saturation(pct, cores) {
            let note = format!(
                "the collector used {pct:.0} % CPU of its {cores} core(s) in this window: the figures may show the client's limit, not the server's"
            );
            s.log(format!("warning: {} × {n}: {note}", ctx.label));
            cell.reason = Some(match cell.reason.take() {
                Some(r) => format!("{r}; {note}"),
                None => note,
            });
        }
    }
    let live_counter = s.info.kind.adapter().live_token_counter();
    cell.server = server.map(|mut sv| {
        let after = samples.last().and_then(|(_, m)| m.generation_tokens);
        // A counter that grows only when a request ends (llama.cpp) says nothing per cell.
        sv.generation_tokens = match (before.as_ref().and_then(|m| m.generation_tokens), after) {
            (Some(a), Some(b)) if live_counter => Some((b - a).max(0.0) as u64),
            _ => None,
        };
        sv
    });
    if let Some(g) = &s.gpu {
        if let Some((figures, power, per_token)) =
            crate::measuring::gpu::window_figures(&g.take(), w0, w1, cell.output_tokens)
        {
            cell.gpu_power_w = power;
            cell.energy_j_per_token = per_token;
            cell.gpu = Some(figures);
        }
    }
    cell
}

fn delta(samples: &[(f64, Metrics)], get: impl Fn(&Metrics) -> Option<f64>) -> Option<f64> {
    let first = samples.iter().find_map(|(_, m)| get(m))?;
    let last = samples.iter().rev().find_map(|(_, m)| get(m))?;
    Some((last - first).max(0.0))
}

fn spec_rate(samples: &[(f64, Metrics)]) -> Option<f64> {
    let drafted = delta(samples, |m| m.spec_draft_tokens)?;
    let accepted = delta(samples, |m| m.spec_accepted_tokens)?;
    (drafted > 0.0).then(|| round3(accepted / drafted))
}

/// Server figures from the window's Prometheus samples (gauges inside the window; counter
/// deltas from the scrape just before the window to the one just after).
fn server_figures(samples: &[(f64, Metrics)], w0: f64, w1: f64) -> Option<ServerFigures> {
    if samples.is_empty() {
        return None;
    }
    let inside: Vec<&Metrics> = samples.iter().filter(|(t, _)| *t >= w0 && *t <= w1).map(|(_, m)| m).collect();
    let mean = |get: &dyn Fn(&Metrics) -> Option<f64>| {
        let v: Vec<f64> = inside.iter().filter_map(|m| get(m)).collect();
        (!v.is_empty()).then(|| round3(v.iter().sum::<f64>() / v.len() as f64))
    };
    let max = |get: &dyn Fn(&Metrics) -> Option<f64>| inside.iter().filter_map(|m| get(m)).reduce(f64::max);
    let drafts = delta(samples, |m| m.spec_drafts);
    let accepted = delta(samples, |m| m.spec_accepted_tokens);
    Some(ServerFigures {
        running_avg: mean(&|m| m.running),
        waiting_max: max(&|m| m.waiting),
        kv_cache_usage_avg: mean(&|m| m.kv_usage).map(|v| v.min(1.0)),
        kv_cache_usage_max: max(&|m| m.kv_usage).map(|v| v.min(1.0)),
        preemptions: delta(samples, |m| m.preemptions).map(|v| v as u64),
        generation_tokens: delta(samples, |m| m.generation_tokens).map(|v| v as u64),
        prefix_cache_hit_tokens: delta(samples, |m| m.prefix_hits).map(|v| v as u64),
        prefix_cache_query_tokens: delta(samples, |m| m.prefix_queries).map(|v| v as u64),
        spec_mean_accepted_len: match (drafts, accepted) {
            (Some(d), Some(a)) if d > 0.0 => Some(round3(1.0 + a / d)),
            _ => None,
        },
    })
}
