//! `speedmatrix run`: flags → [`RunSpec`] → discovery → plan → prefill rows → decode cells,
//! writing the results file after every row and cell (docs/METHODOLOGY.md). This module
//! sequences the work and keeps the file; a decode cell's stages are in
//! [`crate::measuring::cell`], a prefill row in [`crate::measuring::prefill`], the figures in
//! [`crate::measuring::measure`], the HTTP in [`crate::measuring::client`].

use crate::cli::RunArgs;
use crate::files::FileError;
use crate::measuring::client::{request_body, Client, Clock, HttpError, StreamCtl, StreamRecord};
use crate::measuring::discovery::{discover, DiscoverError, ServerInfo};
use crate::measuring::plan::{plan, Plan, PlanError, PlanInput};
use crate::measuring::prompt::{corpus, prompt_fields, Prompt, PromptBuilder};
use crate::measuring::spec::{same_file, RunSpec};
use crate::{CommandError, Failure};
use serde_json::{json, Value};
use speedmatrix_schema::context::ContextError;
use speedmatrix_schema::estimate::{duration_text, remaining, Basis, Estimate};
use speedmatrix_schema::progress::{Current, Measuring, Phase};
use speedmatrix_schema::registry::format_int;
use speedmatrix_schema::repeats;
use speedmatrix_schema::status::over_capacity_reason;
use speedmatrix_schema::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::watch;

/// `eprintln!` that never panics: a closed stderr (`run … 2>&1 | head`) must not stop a run
/// half-way and leave its file `running`; the lines are lost, the measurements are not.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// Why `speedmatrix run` could not start, or stopped. Bad flags (checked before any request:
/// [`RunSpec::from_args`]), an unusable server and a `--resume` file of another plan are bad
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

/// After a failed cell, the server no longer answers — or refuses the key: the run stops
/// (`run.reason`).
#[derive(Debug)]
struct ServerGone {
    /// The last of the tries.
    last: HttpError,
    /// How long the run waited for the server to answer again (`--server-wait`), if at all.
    waited: Option<Duration>,
}

impl ServerGone {
    /// The server answers, but refuses the API key (revoked or expired mid-run).
    fn key_refused(&self) -> bool {
        matches!(self.last.status(), Some(401 | 403))
    }
}

impl std::fmt::Display for ServerGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key_refused() {
            write!(f, "the server refused the API key (revoked or expired?): {}", self.last)?;
        } else {
            write!(f, "the server stopped answering: {}", self.last)?;
        }
        match self.waited {
            Some(w) => write!(f, " (waited {} for it to come back, --server-wait)", humantime::format_duration(w)),
            None => Ok(()),
        }
    }
}

/// Run `speedmatrix run` to completion and return the exit code: 0 done, 3 done with error
/// cells, 1 failed (the server died), 130 / 143 interrupted ([`crate::exit`]).
///
/// # Errors
/// [`RunError`] when the run cannot start (bad flags, unreachable server, 401, unknown model, a
/// `--resume` file of another plan) or its file cannot be written. Errors while measuring become
/// cell statuses, not process errors.
pub fn run(args: &RunArgs) -> Result<u8, RunError> {
    crate::runtime().map_err(RunError::Runtime)?.block_on(measure(args))
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
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
pub struct Session {
    pub(crate) client: Client,
    pub(crate) clock: Clock,
    pub(crate) info: ServerInfo,
    /// `/metrics` answered Prometheus text at discovery: scrape it during cells.
    pub(crate) has_metrics: bool,
    prompts: PromptBuilder,
    results: Results,
    /// `/v1/chat/completions` or `/v1/completions`.
    pub(crate) path: &'static str,
    pub(crate) spec: RunSpec,
    pub(crate) progress: indicatif::ProgressBar,
    /// The live state (results so far, the row or cell being measured), published for the
    /// terminal bar and the live page.
    pub(crate) live: crate::measuring::live::Publisher,
    /// Warmed prompts by context tokens (stream index for distinct prompts).
    warm: HashMap<(u64, usize), Prompt>,
    /// TTFT of each context's first (cold) request, ms.
    cold_ttft: HashMap<u64, f64>,
    /// Per context: how many of the server's slots hold its shared prompt (llama.cpp keeps a
    /// prompt cache per slot; absent means the one warm-up request's slot).
    slots_warmed: HashMap<u64, u32>,
    /// The server's speculative-decoding counters (drafts, draft tokens) when the run started.
    spec_start: Option<(f64, f64)>,
    /// The same counters as the last decode cell's last scrape read them.
    pub(crate) spec_latest: Option<(f64, f64)>,
    /// NVML readings on their own thread; `None` without GPUs (`hardware.gpu_telemetry_note`).
    pub(crate) gpu: Option<crate::measuring::gpu::Sampler>,
    /// Header differences accepted on `--resume` (`--accept-change`), recorded on every row and
    /// cell measured now.
    accepted: Vec<AcceptedDifference>,
    /// When measuring began, and the estimate of all of it then, s.
    started: (std::time::Instant, f64),
    /// Whether the estimate still rests on an assumed prompt rate / readiness (a line says so
    /// when a measurement replaces one).
    assumed: (bool, bool),
}

impl Session {
    /// The estimate of what is left, from what this run has measured so far.
    fn estimate_left(&self) -> Estimate {
        let warm: Vec<u64> = self.warm.keys().map(|(t, _)| *t).collect();
        remaining(&self.results, &warm)
    }

    /// Publish what is being measured now (`None` between rows and cells) and redraw the bar.
    pub(crate) fn show(&self, current: Option<Current>) {
        let warm: std::collections::BTreeSet<u64> = self.warm.keys().map(|(t, _)| *t).collect();
        self.live.current(current, warm.into_iter().collect());
        self.redraw();
    }

    /// The terminal bar, from the same progress model as the live page.
    fn redraw(&self) {
        let p = self.live.progress();
        self.progress.set_length(p.planned as u64);
        self.progress.set_position(p.done as u64);
        self.progress.set_message(p.line());
    }

    /// When a measurement has just replaced an assumption of the estimate (the first prefill
    /// row gives the prompt rate, the first decode cell the readiness), a line with the
    /// corrected estimate of the whole run.
    fn estimate_corrected(&mut self) {
        let e = self.estimate_left();
        let now = (e.prompt_tps.1 == Basis::Assumed, e.readiness.1 == Basis::Assumed);
        let mut learnt = vec![];
        if self.assumed.0 && !now.0 {
            learnt.push(format!("prompt {} tok/s measured", format_int(e.prompt_tps.0.round() as u64)));
        }
        if self.assumed.1 && !now.1 {
            let r = e.readiness.0;
            learnt.push(format!("readiness {:.1} s + {:.2} s per stream measured", r.base_s, r.per_stream_s));
        }
        self.assumed = (self.assumed.0 && now.0, self.assumed.1 && now.1);
        if !learnt.is_empty() {
            let spent = self.started.0.elapsed().as_secs_f64();
            self.log(format!(
                "estimate: wall time ≈ {} ({} so far + {} left; {})",
                duration_text(spent + e.total_s),
                duration_text(spent),
                duration_text(e.total_s),
                learnt.join(", ")
            ));
        }
    }

    /// A line for the user: above the progress bar, or on stderr when it is hidden.
    pub(crate) fn log(&self, line: String) {
        if self.progress.is_hidden() {
            say!("{line}");
        } else {
            self.progress.println(line);
        }
    }

    /// Write the results file, then publish what it holds.
    fn save(&self) -> Result<(), FileError> {
        crate::files::write_atomic(&self.spec.out, &self.results)?;
        self.live.results(&self.results);
        self.redraw();
        Ok(())
    }

    /// The streamed request for `prompt`.
    pub(crate) fn body(&self, prompt: &str, max_tokens: u32) -> Value {
        let mut b = json!({
            "model": self.info.model,
            "stream": true,
            "stream_options": crate::measuring::client::stream_options(),
            "max_tokens": max_tokens,
            "ignore_eos": true,
        });
        if let (Some(obj), Value::Object(p)) = (b.as_object_mut(), prompt_fields(self.prompts.endpoint, prompt)) {
            obj.extend(p);
            if let Some(t) = self.spec.temperature {
                obj.insert("temperature".into(), json!(t));
            }
            if let Some(s) = self.spec.seed {
                obj.insert("seed".into(), json!(s));
            }
        }
        b
    }

    /// One request to completion (prefill rows, warm-ups).
    pub(crate) async fn single(&self, prompt: &str, max_tokens: u32) -> StreamRecord {
        let (_keep, cancel) = watch::channel(false);
        let ctl =
            StreamCtl { clock: self.clock, stall: self.spec.stall, cancel, id: 0, events: None, live_tokens: None };
        self.client.stream(self.path, &request_body(&self.body(prompt, max_tokens)), ctl).await
    }

    /// One `/metrics` reading, awaited (only between measurements), when the server has one.
    pub(crate) async fn scrape(&self) -> Option<crate::measuring::scrape::Scrape> {
        match self.has_metrics {
            true => crate::measuring::scrape::scrape_once(&self.client, self.clock).await,
            false => None,
        }
    }

    /// A prompt of `ctx` for the stream `tag` describes, of exact length where the server can
    /// tell.
    pub(crate) async fn build_prompt(&self, tag: &str, ctx: &ContextSize) -> Result<Prompt, CellError> {
        self.prompts.build(tag, ctx.tokens).await.map_err(CellError::Prompt)
    }

    /// Remember a context's warmed prompt (stream `i`) and, for the context's first request,
    /// its cold TTFT.
    pub(crate) fn warmed(&mut self, ctx: &ContextSize, i: usize, prompt: Prompt, ttft_ms: Option<f64>) {
        self.warm.insert((ctx.tokens, i), prompt);
        if let Some(t) = ttft_ms {
            self.cold_ttft.entry(ctx.tokens).or_insert(t);
        }
    }

    /// TTFT of the context's first (cold) request, ms.
    pub(crate) fn cold_ttft(&self, ctx: &ContextSize) -> Option<f64> {
        self.cold_ttft.get(&ctx.tokens).copied()
    }

    /// The warmed prompt of stream `i` of a context (stream 0 is the shared one), warming it
    /// with one `max_tokens: 1` request first when no prefill row did.
    pub(crate) async fn warm_prompt(&mut self, ctx: &ContextSize, i: usize) -> Result<Prompt, CellError> {
        if let Some(p) = self.warm.get(&(ctx.tokens, i)) {
            return Ok(p.clone());
        }
        let tag = if i == 0 { format!("context {}", ctx.label) } else { format!("context {} stream {i}", ctx.label) };
        let p = self.build_prompt(&tag, ctx).await?;
        let rec = self.single(&p.text, 1).await;
        if let Some(e) = rec.error {
            return Err(CellError::WarmUp(e));
        }
        let p = Prompt { tokens: rec.prompt_tokens.or(p.tokens), ..p };
        self.warmed(ctx, i, p.clone(), rec.ttft_ms());
        Ok(p)
    }

    /// Put the shared prompt of `ctx` into the prompt cache of every slot that `n` streams will
    /// take (llama.cpp keeps one cache per slot, so one warm-up warms one slot and the other
    /// opening streams would prefill the whole prompt inside their TTFT): as many `max_tokens: 1`
    /// requests at once as slots are needed, each taking its own idle slot. Nothing for servers
    /// without slots (vLLM and SGLang share one prefix cache) or once enough slots hold it.
    pub(crate) async fn warm_slots(&mut self, ctx: &ContextSize, prompt: &Prompt, n: u32) -> Result<(), CellError> {
        let want = self.info.facts.slots.map_or(1, |slots| slots.min(n));
        if want <= self.slots_warmed.get(&ctx.tokens).copied().unwrap_or(1) {
            return Ok(());
        }
        let warm_ups = (0..want).map(|_| self.single(&prompt.text, 1));
        let records = futures_util::future::join_all(warm_ups).await;
        if let Some(e) = records.into_iter().find_map(|r| r.error) {
            return Err(CellError::WarmUp(e));
        }
        self.slots_warmed.insert(ctx.tokens, want);
        Ok(())
    }

    /// `engine.speculative_decoding` from the server's counters, where the launch command did
    /// not give it (a server in a container, behind a tunnel, or started some other way): the
    /// draft tokens proposed per draft since the run started
    /// ([`crate::measuring::launch::speculative_decoding_from_counters`]), read from the last
    /// cell's own scrapes (no request of its own).
    pub(crate) fn speculation_from_counters(&mut self) {
        let Some((drafts, tokens)) = self.spec_start.filter(|_| self.results.engine.speculative_decoding.is_none())
        else {
            return;
        };
        let Some((d, t)) = self.spec_latest else { return };
        self.results.engine.speculative_decoding =
            crate::measuring::launch::speculative_decoding_from_counters(d - drafts, t - tokens);
    }

    /// Warn when a prompt's real length is more than 1 % off its context.
    pub(crate) fn prompt_check(&self, ctx: &ContextSize, real: Option<u64>) {
        if let Some(real) = real {
            let off = (real as f64 - ctx.tokens as f64).abs() / ctx.tokens as f64;
            if off > 0.01 {
                self.log(format!(
                    "warning: context {} prompt has {real} tokens, {:.1} % off the target {}",
                    ctx.label,
                    off * 100.0,
                    ctx.tokens
                ));
            }
        }
    }
}

/// The whole run inside an existing tokio runtime (what [`run`] and `demo` call): discovery,
/// plan, prefill rows, decode cells, the results file. Returns the exit code (as [`run`]).
///
/// # Errors
/// As [`run`].
pub async fn measure(args: &RunArgs) -> Result<u8, RunError> {
    let spec = RunSpec::from_args(&crate::measuring::spec::with_resumed_plan(args)?)?;
    crate::measuring::fdlimit::ensure(spec.max_concurrency() as u64)?;
    let client = Client::new(&spec.url, spec.api_key.clone(), spec.max_concurrency() + 8).map_err(RunError::Client)?;
    let (info, metrics) = discover(&client, spec.model.as_deref(), spec.kv_budget, spec.engine).await?;
    let plan = plan(&PlanInput {
        contexts: spec.contexts.clone(),
        concurrency: spec.concurrency.clone(),
        prefill_contexts: spec.prefill_contexts.clone(),
        max_tokens: spec.max_tokens,
        window_s: spec.window.as_secs_f64(),
        max_model_len: info.facts.max_model_len,
        kv_budget: info.plan_kv_budget(),
        slot_context: info.facts.slot_context,
    })?;
    print_plan(&info, &plan, &spec);
    if spec.dry_run {
        let preview = fresh_results(&info, &plan, &spec, &Host::none());
        say!("plan: {}", estimate_line(&remaining(&preview, &[]), "estimated wall time"));
        if args.serve.is_some() {
            say!("note: --serve serves the live page of a run; a dry run measures nothing, so nothing is served");
        }
        return Ok(0);
    }
    let mut s = start_session(spec, client, info, metrics.is_some(), &plan).await?;
    s.spec_start = metrics.as_ref().and_then(|m| Some((m.spec_drafts?, m.spec_draft_tokens?)));
    // The URL first, then the measuring; the page is served off the measuring path.
    let server = match args.serve {
        Some(port) => Some(crate::site::live::serve_run(port, s.live.subscribe()).map_err(RunError::Serve)?),
        None => None,
    };
    let e = remaining(&s.results, &[]);
    let what = if s.spec.resume.is_some() { "estimated wall time of what is left" } else { "estimated wall time" };
    say!("plan: {}", estimate_line(&e, what));
    s.started = (std::time::Instant::now(), e.total_s);
    s.assumed = (e.prompt_tps.1 == Basis::Assumed, e.readiness.1 == Basis::Assumed);
    s.save()?;
    let stopped = tokio::select! {
        r = measure_all(&mut s) => r?.map(|cause| (RunStatus::Failed, cause, 1)),
        _ = tokio::signal::ctrl_c() => Some((RunStatus::Interrupted, "interrupted by Ctrl-C".to_string(), crate::exit::INTERRUPTED)),
        _ = terminated() => Some((RunStatus::Interrupted, "stopped by SIGTERM".to_string(), crate::exit::TERMINATED)),
    };
    let code = finish(&mut s, stopped)?;
    if let Some(server) = server {
        server.linger().await;
    }
    Ok(code)
}

/// The results file (fresh, or the `--resume` one) and everything the measuring needs.
async fn start_session(
    spec: RunSpec,
    client: Client,
    info: ServerInfo,
    has_metrics: bool,
    plan: &Plan,
) -> Result<Session, RunError> {
    let host = host_facts(&spec);
    // The header the server gives now: the new file's, or what `--resume` compares with.
    let fresh = fresh_results(&info, plan, &spec, &host);
    let (mut results, accepted) = match &spec.resume {
        Some(path) => resume(path, &info, plan, &spec, &fresh)?,
        None => (fresh, vec![]),
    };
    results.run.status = RunStatus::Running;
    results.run.reason = None;
    let clock = Clock::start();
    let gpu = host.gpus.map(|g| crate::measuring::gpu::Sampler::start(g, clock));
    let seed = spec.seed.unwrap_or(0x5eed);
    let prompts = PromptBuilder::new(client.clone(), info.model.clone(), spec.endpoint, results.run.id.clone(), seed)
        .await
        .map_err(RunError::Prompts)?;
    let (live, _) = crate::measuring::live::Publisher::new(&results);
    let planned = live.progress().planned as u64;
    let progress = if spec.quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(planned) };
    // The message is the progress model's whole line (count, row or cell, phase, time left).
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Ok(Session {
        path: match spec.endpoint {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
        },
        has_metrics,
        client,
        clock,
        info,
        prompts,
        results,
        spec,
        progress,
        live,
        warm: HashMap::new(),
        cold_ttft: HashMap::new(),
        slots_warmed: HashMap::new(),
        spec_start: None,
        spec_latest: None,
        gpu,
        accepted,
        started: (std::time::Instant::now(), 0.0),
        assumed: (true, true),
    })
}

/// Close the run: unmeasured rows and cells say why, the run's status and end, the last save,
/// the closing line; returns the exit code.
fn finish(s: &mut Session, stopped: Option<(RunStatus, String, u8)>) -> Result<u8, FileError> {
    s.progress.finish_and_clear();
    let unmeasured = match &stopped {
        Some((_, cause, _)) => format!("not measured: {cause}"),
        None => "not measured".into(),
    };
    for p in s.results.prefill.iter_mut().filter(|p| p.status == CellStatus::NotRun) {
        p.reason = Some(unmeasured.clone());
    }
    for c in s.results.decode.iter_mut().filter(|c| c.status == CellStatus::NotRun) {
        c.reason = Some(unmeasured.clone());
    }
    // A cell stopped between its repeats says how many it has (`--resume` measures the rest).
    let n = repeats::planned(&s.results);
    for c in s.results.decode.iter_mut().filter(|c| c.status.is_measured()) {
        if repeats::left(c, n) > 0 {
            let done = repeats::measured(c);
            crate::measuring::measure::add_note(
                &mut c.reason,
                format!("{done} of {n} repeats measured; the rest {unmeasured}"),
            );
        }
    }
    s.results.run.status = stopped.as_ref().map_or(RunStatus::Complete, |(st, _, _)| *st);
    s.results.run.reason = stopped.as_ref().map(|(_, cause, _)| cause.clone());
    s.results.run.finished_at = Some(now_rfc3339());
    s.save()?;
    s.live.ended();
    let errors = s.results.decode.iter().filter(|c| c.status == CellStatus::Error).count()
        + s.results.prefill.iter().filter(|c| c.status == CellStatus::Error).count();
    let detail = match errors {
        0 => String::new(),
        1 => " (1 error cell — see `speedmatrix show --all` for the reason)".into(),
        n => format!(" ({n} error cells — see `speedmatrix show --all` for the reasons)"),
    };
    let out = s.spec.out.display();
    let (since, estimated) = s.started;
    let took = format!("in {} (estimated {})", duration_text(since.elapsed().as_secs_f64()), duration_text(estimated));
    match &stopped {
        None => say!("done {took}; results in {out}{detail}"),
        Some((status, cause, _)) => say!(
            "{}{cause}; what was measured is in {out}{detail}; {}",
            if *status == RunStatus::Failed { "run failed: " } else { "" },
            if s.spec.from_demo {
                "the demo starts over when run again (`speedmatrix demo`)".to_string()
            } else {
                format!("continue with --resume {out}")
            },
        ),
    }
    Ok(match stopped {
        Some((_, _, code)) => code,
        None if errors > 0 => crate::exit::CELL_ERRORS,
        None => 0,
    })
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

fn print_plan(info: &ServerInfo, plan: &Plan, spec: &RunSpec) {
    let window = spec.window;
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
    let prefill_dropped = plan.not_run.iter().any(|n| n.phase == speedmatrix_schema::PlanPhase::Prefill);
    match (plan.prefill.is_empty(), prefill_dropped) {
        (false, _) => say!("plan: prefill at {}", labels(&plan.prefill)),
        (true, false) => say!("plan: no prefill rows (--prefill-contexts none)"),
        (true, true) => say!("plan: no prefill rows: every prefill context is over the server's limit (see below)"),
    }
    say!(
        "plan: decode {} context{} [{}] × concurrency {:?}, {} s windows, max_tokens {}",
        plan.contexts.len(),
        if plan.contexts.len() == 1 { "" } else { "s" },
        labels(&plan.contexts),
        plan.concurrency,
        window.as_secs_f64(),
        spec.max_tokens
    );
    if spec.repeat > 1 {
        say!("plan: every decode cell measured {} times, interleaved (every cell once, then again, …)", spec.repeat);
    }
    for c in plan.cells.iter().filter(|c| c.over_capacity.is_some()) {
        say!("plan: over capacity (not run): {} × {}", c.context.label, c.concurrency);
    }
}

/// "estimated wall time ≈ 52 s (assuming 10,000 prompt tok/s …)" for an estimate.
fn estimate_line(e: &Estimate, what: &str) -> String {
    let assumed = e.assumptions().map(|a| format!(" ({a}; corrected as rows and cells are measured)"));
    format!("{what} ≈ {}{}", duration_text(e.total_s), assumed.unwrap_or_default())
}

/// A new results file for `plan`: every prefill row and decode cell planned (`not_run`, or
/// `over_capacity` with the shortfall), the contexts that do not fit (`not_run_contexts`), the
/// header from discovery and the host.
fn fresh_results(info: &ServerInfo, plan: &Plan, spec: &RunSpec, host: &Host) -> Results {
    let prefill =
        plan.prefill.iter().map(|c| PrefillRow::new(c.clone(), CellStatus::NotRun, Some("pending".into()))).collect();
    let decode = plan
        .cells
        .iter()
        .map(|p| {
            let mut c = crate::measuring::measure::blank_cell(&p.context, p.concurrency);
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
            label: spec.label.clone(),
            notes: spec.notes.clone(),
        },
        hardware: host.hardware.clone(),
        engine: engine_header(info, host),
        config: run_config(plan, spec),
        prefill,
        decode,
        client: Some(host.client.clone()),
        missing: info.facts.missing.iter().chain(&host.missing).cloned().collect(),
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
fn run_config(plan: &Plan, spec: &RunSpec) -> Config {
    Config {
        contexts: plan.contexts.clone(),
        concurrency: plan.concurrency.clone(),
        prefill_contexts: plan.prefill.clone(),
        window_s: Some(spec.window.as_secs_f64()),
        max_tokens: Some(spec.max_tokens),
        endpoint: Some(spec.endpoint),
        ignore_eos: Some(true),
        temperature: spec.temperature,
        seed: spec.seed,
        prompt_corpus: Some(corpus()),
        prompt_sharing: Some(if spec.distinct_prompts { PromptSharing::Distinct } else { PromptSharing::Shared }),
        prefill_mode: Some(PrefillMode::DecodeWarmup),
        decode_test: Some(DecodeTest::FixedDuration),
        stall_timeout_s: Some(spec.stall.as_secs_f64()),
        not_run_contexts: plan.not_run.clone(),
        server_url: (!spec.redact_host).then(|| spec.url.clone()),
        repeats: (spec.repeat > 1).then_some(spec.repeat),
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
    /// Header figures the host could not give, with the reason (the launch command of a server
    /// that is not on this machine).
    missing: Vec<MissingFigure>,
}

impl Host {
    /// No host facts (the dry run's preview of the plan).
    fn none() -> Host {
        Host {
            hardware: Hardware::default(),
            launch_command: None,
            gpus: None,
            client: ClientMachine::default(),
            missing: vec![],
        }
    }
}

/// This machine, as the client: CPU, cores, OS, host name (not with `--redact-host`).
fn client_machine(spec: &RunSpec) -> ClientMachine {
    ClientMachine {
        cpu: crate::measuring::launch::cpu_model(),
        cores: u32::try_from(crate::measuring::selfcheck::cores()).ok(),
        os: Some(std::env::consts::OS.into()),
        host: if spec.redact_host { None } else { crate::measuring::launch::host_name() },
    }
}

/// Look at the host: where the server runs (the owner of the URL's listening socket, see
/// [`crate::measuring::locate`]); `--launch-command` or the local server's own (secrets
/// redacted, home paths too with `--redact-host`); this machine's CPU, OS and name on the
/// hardware card only when the server runs here; NVML unless `--no-gpu` or the server is not
/// here, in which case `hardware.gpu_telemetry_note` says why there are no GPU figures.
fn host_facts(spec: &RunSpec) -> Host {
    use crate::measuring::launch;
    use crate::measuring::locate::{locate, Found};
    let found = locate(&spec.url);
    let server = match &found {
        Found::Local { root, argv, pids, .. } => Some(launch::local_server(*root, argv, pids)),
        _ => None,
    };
    let launch = match &spec.launch_command {
        // `RunSpec::from_args` made sure a shell can split it.
        Some(line) => shlex::split(line).map(|words| launch::redact_argv(&words)),
        None => server.as_ref().map(|s| s.command.clone()),
    };
    let redact = |c: String| if spec.redact_host { launch::redact_home(&c) } else { c };
    let launch_command = launch.map(|c| redact(launch::scrub(&c, spec.api_key.as_deref())));
    let client = client_machine(spec);
    let local = server.is_some();
    let mut hardware = if local {
        Hardware { os: client.os.clone(), cpu: client.cpu.clone(), host: client.host.clone(), ..Hardware::default() }
    } else {
        Hardware::default()
    };
    let mut evidence = found.evidence().to_string();
    if spec.redact_host {
        if let Some(h) = reqwest::Url::parse(&spec.url).ok().and_then(|u| u.host_str().map(str::to_string)) {
            evidence = redact(evidence.replace(&h, "<host>"));
        }
    }
    hardware.server_location = Some(ServerLocation { place: found.place(), evidence: evidence.clone() });
    if local {
        say!("server: on this machine — {evidence}");
    } else {
        say!("server: not on this machine — {evidence}; its hardware is not recorded (this machine is recorded as the client)");
    }
    let (gpus, selection) = gpu_selection(spec, server.as_ref().map(|s| s.pids.as_slice()), &mut hardware);
    hardware.gpu_selection = Some(selection);
    if let Some(n) = spec.gpu_count {
        if hardware.gpu_count.is_some_and(|seen| seen != n) {
            say!("GPUs: {n} serve the model (--gpu-count), of the {} NVML sees", hardware.gpus.len());
        }
        hardware.gpu_count = Some(n);
    }
    // Only a server on this machine has a process to read its command from.
    let missing = if launch_command.is_none() {
        vec![MissingFigure {
            figure: "engine.launch_command".into(),
            reason: format!("the server is not on this machine ({evidence}), so its command line cannot be read; give --launch-command"),
        }]
    } else {
        vec![]
    };
    Host { hardware, launch_command, gpus, client, missing }
}

/// Choose the server's GPUs and fill the hardware card's GPU inventory: the local server's
/// processes on NVML (or all GPUs of the host, assumed), none with `--no-gpu` or a server not
/// here (then `hardware.gpu_telemetry_note` says why).
fn gpu_selection(
    spec: &RunSpec,
    server_pids: Option<&[u32]>,
    hardware: &mut Hardware,
) -> (Option<crate::measuring::gpu::Gpus>, GpuSelection) {
    let none = |detail: &str| GpuSelection { method: GpuSelectionMethod::None, detail: detail.into() };
    let opened = if spec.no_gpu {
        Err(none("skipped (--no-gpu)"))
    } else if let Some(pids) = server_pids {
        crate::measuring::gpu::open(pids).map_err(|e| e.selection())
    } else {
        Err(none("the server is not on this host: NVML here cannot see its GPUs (no GPU figures)"))
    };
    match opened {
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
            let selection = g.selection.clone();
            (Some(g), selection)
        }
        Err(s) => {
            hardware.gpu_telemetry_note = Some(s.detail.clone());
            (None, s)
        }
    }
}

/// The matrix flags that made a results file's plan, to repeat with `--resume`.
fn plan_flags(c: &Config) -> String {
    let join = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(",") };
    // Whole seconds as `30s`, anything finer in ms: both read back by humantime.
    let window =
        c.window_s.map(|w| if w.fract() == 0.0 { format!("{w}s") } else { format!("{}ms", (w * 1000.0).round()) });
    format!(
        "--contexts {} --concurrency {} --prefill-contexts {}{}{}{}",
        join(c.contexts.iter().map(|x| x.tokens.to_string()).collect()),
        join(c.concurrency.iter().map(u32::to_string).collect()),
        join(c.prefill_contexts.iter().map(|x| x.tokens.to_string()).collect()),
        window.map(|w| format!(" --duration {w}")).unwrap_or_default(),
        c.max_tokens.map(|m| format!(" --max-tokens {m}")).unwrap_or_default(),
        c.repeats.filter(|&n| n > 1).map(|n| format!(" --repeat {n}")).unwrap_or_default()
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
    spec: &RunSpec,
    now: &Results,
) -> Result<(Results, Vec<AcceptedDifference>), RunError> {
    let mut r = crate::files::read_results(path)?;
    let differs =
        |what: &'static str| RunError::ResumeMismatch { path: path.to_path_buf(), what, flags: plan_flags(&r.config) };
    if r.engine.served_model_name.as_deref() != Some(info.model.as_str()) {
        return Err(differs("the served model differs"));
    }
    if r.config.contexts != plan.contexts
        || r.config.concurrency != plan.concurrency
        || r.config.prefill_contexts != plan.prefill
    {
        return Err(differs("the plan (contexts, concurrency or prefill contexts) differs"));
    }
    let file = (r.config.max_tokens, r.config.window_s);
    if let Some(what) = tokens_or_window_differ(file, spec.max_tokens, spec.window) {
        return Err(differs(what));
    }
    if repeats::planned(&r) != spec.repeat {
        return Err(differs("--repeat differs"));
    }
    let mut accepted = resume_differences(path, &r, now, &spec.accept_change)?;
    accepted.extend(moved_url(&r, spec));
    let out = &spec.out;
    if !same_file(out, path) {
        say!("note: resuming {} and writing to {}", path.display(), out.display());
    }
    // A failed run stopped because the server died: its error cells are measured again.
    if r.run.status == RunStatus::Failed {
        let mut again = 0;
        for c in r.decode.iter_mut().filter(|c| c.status == CellStatus::Error) {
            // Its measured repeats are kept; only what failed is measured again.
            *c = repeats::without_failed(c)
                .unwrap_or_else(|| crate::measuring::measure::blank_cell(&c.context, c.concurrency));
            again += 1;
        }
        for p in r.prefill.iter_mut().filter(|p| p.status == CellStatus::Error) {
            p.status = CellStatus::NotRun;
            p.reason = Some("pending".into());
            (p.prompt_tokens, p.prompt_tps, p.ttft_ms, p.requests) = (None, None, None, vec![]);
            (p.completed_requests, p.cached_tokens, p.cached_tokens_source) = (None, None, None);
            again += 1;
        }
        if again > 0 {
            say!("note: the run had failed; its {again} error row(s)/cell(s) are measured again");
        }
    }
    Ok((r, accepted))
}

/// Which of `--max-tokens` and `--duration` differ from the file's (`max_tokens`, `window_s`),
/// named with the verb; `None` when both match.
fn tokens_or_window_differ(
    file: (Option<u32>, Option<f64>),
    max_tokens: u32,
    window: Duration,
) -> Option<&'static str> {
    let tokens = file.0 != Some(max_tokens);
    let window = !file.1.is_some_and(|w| (w - window.as_secs_f64()).abs() <= 1e-9);
    match (tokens, window) {
        (false, false) => None,
        (true, false) => Some("--max-tokens differs"),
        (false, true) => Some("--duration differs"),
        (true, true) => Some("--max-tokens and --duration differ"),
    }
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

/// The server URL, when `--url` moved it away from the file's (the server restarted on another
/// port, a tunnel changed): the file keeps the URL it started with, and every row and cell
/// measured now records where it was measured. Giving `--url` is the acceptance.
fn moved_url(file: &Results, spec: &RunSpec) -> Option<AcceptedDifference> {
    let stored = file.config.server_url.as_deref()?;
    if spec.redact_host || stored == spec.url {
        return None;
    }
    let moved = AcceptedDifference {
        field: "config.server_url".into(),
        header: Some(stored.into()),
        measured: Some(spec.url.clone()),
    };
    say!(
        "note: --resume: the file's server was {stored}; rows and cells measured now record {} (config.server_url)",
        spec.url
    );
    Some(moved)
}

/// Whether the server still answers after a cell failed: `GET /v1/models`, three tries a second
/// apart; `Ok(true)` when it answered only after a try that got nothing (down for a moment: a
/// restart). [`ServerGone`] when nothing answers (connection refused, reset, timeout), every
/// answer is a 5xx, or it refuses the key — the run then stops rather than fill every
/// remaining cell with the same error.
async fn server_alive(s: &Session) -> Result<bool, ServerGone> {
    const TRIES: usize = 3;
    for attempt in 1..=TRIES {
        match s.client.get_text("/v1/models").await {
            // After a try that got no answer, the server was down for a moment (a restart).
            Ok(_) => return Ok(attempt > 1),
            // A key revoked mid-run: every later cell would fail the same way.
            Err(last @ HttpError::Status { status: 401 | 403, .. }) => return Err(ServerGone { last, waited: None }),
            Err(HttpError::Status { status, .. }) if status < 500 => return Ok(attempt > 1),
            Err(last) if attempt == TRIES => return Err(ServerGone { last, waited: None }),
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    Ok(false)
}

/// After a failed row or cell whose reason is `first_try`: `Ok(Some(note))` when it is to be
/// measured again, with the note for its reason — the server had stopped answering and
/// answered again within `--server-wait` (a restart: its prefix cache is gone, so warmed
/// prompts are forgotten), or the first try's connections broke while the server still answers
/// (a restart faster than this check, a proxy, the network); `Ok(None)` when the server still
/// answers and the failure was its own answer; else why the run stops. Nothing is measured
/// again with `--server-wait 0`.
async fn after_failure(s: &mut Session, first_try: Option<&str>) -> Result<Option<String>, ServerGone> {
    let start = tokio::time::Instant::now();
    let retry = !s.spec.server_wait.is_zero();
    let gone = match server_alive(s).await {
        Ok(true) if retry => {
            s.warm.clear();
            return Ok(Some(measured_again(first_try, start.elapsed())));
        }
        Ok(false) if retry && first_try.is_some_and(connection_broke) => {
            s.warm.clear();
            return Ok(Some(format!(
                "measured again: the first try's connections broke ({}) while the server still answered (a restart faster than the check, a proxy or the network)",
                first_try.unwrap_or("error")
            )));
        }
        Ok(_) => return Ok(None),
        Err(g) if g.key_refused() || !retry => return Err(g),
        Err(g) => g,
    };
    s.log(format!(
        "the server stopped answering; waiting up to {} for it to come back (--server-wait)",
        humantime::format_duration(s.spec.server_wait)
    ));
    let mut last = gone.last;
    let waiting = tokio::time::Instant::now();
    while waiting.elapsed() < s.spec.server_wait {
        tokio::time::sleep(Duration::from_millis(500).min(s.spec.server_wait.saturating_sub(waiting.elapsed()))).await;
        match s.client.get_text("/v1/models").await {
            Ok(_) => {
                s.warm.clear();
                return Ok(Some(measured_again(first_try, start.elapsed())));
            }
            Err(e) => last = e,
        }
    }
    Err(ServerGone { last, waited: Some(s.spec.server_wait) })
}

/// Whether a failure's reason says the connection broke rather than that the server answered an
/// error: the words of `StreamError::Broke`, `StreamError::Truncated` and
/// `HttpError::Unreachable` (unit-tested against them).
fn connection_broke(reason: &str) -> bool {
    ["stream broke:", "stream ended early", "cannot reach "].iter().any(|w| reason.contains(w))
}

/// The reason of a row or cell measured again after the server came back.
fn measured_again(first_try: Option<&str>, after: Duration) -> String {
    format!(
        "measured again: the server stopped answering during the first try ({}) and answered again {:.1} s after the failure was seen",
        first_try.unwrap_or("error"),
        after.as_secs_f64()
    )
}

/// The log line of a measured prefill row.
fn prefill_line(row: &PrefillRow) -> String {
    format!(
        "prefill {:>6}: {} · prompt {} tok/s · TTFT {} ms{}",
        row.context.label,
        row.status.label(),
        row.prompt_tps.map_or("—".into(), |v| format!("{v:.0}")),
        row.ttft_ms.map_or("—".into(), |v| format!("{v:.0}")),
        row.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
    )
}

/// The log line of a measured decode cell (`repeat` of `n`).
fn decode_line(cell: &DecodeCell, (repeat, n): (u32, u32)) -> String {
    let which = if n > 1 { format!(" (repeat {repeat} of {n})") } else { String::new() };
    format!(
        "decode {:>6} × {:>3}{which}: {} · {} tok/s · TTFT p50 {} ms{}",
        cell.context.label,
        cell.concurrency,
        cell.status.label(),
        cell.total_tps.map_or("—".into(), |v| format!("{v:.1}")),
        cell.ttft_ms.and_then(|d| d.p50).map_or("—".into(), |v| format!("{v:.0}")),
        cell.reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
    )
}

/// Measure every row and cell still `not_run`, saving after each. Returns `Some(cause)` when the
/// server died on the way (the remaining cells stay `not_run`).
async fn measure_all(s: &mut Session) -> Result<Option<String>, FileError> {
    for i in 0..s.results.prefill.len() {
        if s.results.prefill[i].status != CellStatus::NotRun {
            continue;
        }
        let ctx = s.results.prefill[i].context.clone();
        s.show(Some(Current {
            measuring: Measuring::Prefill { context: ctx.clone() },
            phase: Phase::Prefill,
            window_elapsed_s: None,
            live_tps: None,
            streams_running: Some(1),
        }));
        let mut row = crate::measuring::prefill::measure_prefill(s, &ctx).await;
        row.accepted_differences = s.accepted.clone();
        s.log(prefill_line(&row));
        if row.status == CellStatus::Error {
            match after_failure(s, row.reason.as_deref()).await {
                Ok(None) => {}
                Ok(Some(note)) => {
                    row = crate::measuring::prefill::measure_prefill(s, &ctx).await;
                    row.accepted_differences = s.accepted.clone();
                    crate::measuring::measure::add_note(&mut row.reason, note);
                    s.log(prefill_line(&row));
                }
                Err(cause) => {
                    s.results.prefill[i] = row;
                    s.save()?;
                    return Ok(Some(format!("{cause} (after prefill {})", ctx.label)));
                }
            }
        }
        s.results.prefill[i] = row;
        s.estimate_corrected();
        s.save()?;
        s.show(None);
    }
    // Interleaved: pass k measures repeat k of every cell that still needs it, so a slow
    // drift of the server spreads over the matrix instead of landing on one cell.
    let n = repeats::planned(&s.results);
    for pass in 1..=n {
        for i in 0..s.results.decode.len() {
            let c = &s.results.decode[i];
            if repeats::measured(c) != pass - 1 || repeats::left(c, n) == 0 {
                continue;
            }
            if let Some(cause) = measure_decode(s, i, (pass, n)).await? {
                return Ok(Some(cause));
            }
        }
    }
    Ok(None)
}

/// Measure repeat `repeat` of `n` of decode cell `i` (measured again once when the server
/// stopped answering and came back), fold it into the cell when the run repeats cells, and
/// save. Returns `Some(cause)` when the server died on the way.
async fn measure_decode(s: &mut Session, i: usize, (repeat, n): (u32, u32)) -> Result<Option<String>, FileError> {
    let (ctx, c) = (s.results.decode[i].context.clone(), s.results.decode[i].concurrency);
    s.show(Some(Current {
        measuring: Measuring::Decode { context: ctx.clone(), concurrency: c },
        phase: Phase::WarmUp,
        window_elapsed_s: None,
        live_tps: None,
        streams_running: None,
    }));
    let mut cell = crate::measuring::cell::measure_cell(s, &ctx, c).await;
    cell.accepted_differences = s.accepted.clone();
    s.log(decode_line(&cell, (repeat, n)));
    let mut gone = None;
    if cell.status == CellStatus::Error {
        match after_failure(s, cell.reason.as_deref()).await {
            Ok(None) => {}
            Ok(Some(note)) => {
                cell = crate::measuring::cell::measure_cell(s, &ctx, c).await;
                cell.accepted_differences = s.accepted.clone();
                crate::measuring::measure::add_note(&mut cell.reason, note);
                s.log(decode_line(&cell, (repeat, n)));
            }
            Err(cause) => gone = Some(format!("{cause} (after decode {} × {c})", ctx.label)),
        }
    }
    let measured = cell.status.is_measured();
    match n {
        1 => s.results.decode[i] = cell,
        _ => repeats::fold_in_place(&mut s.results.decode[i], cell, repeat),
    }
    if measured {
        s.speculation_from_counters();
    }
    if gone.is_none() {
        s.estimate_corrected();
    }
    s.save()?;
    s.show(None);
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::{HttpError, StreamError};

    #[test]
    fn a_resume_names_which_of_max_tokens_and_duration_differs() {
        let file = (Some(256), Some(30.0));
        let secs = Duration::from_secs;
        assert_eq!(tokens_or_window_differ(file, 256, secs(30)), None);
        assert_eq!(tokens_or_window_differ(file, 256, secs(10)), Some("--duration differs"));
        assert_eq!(tokens_or_window_differ(file, 512, secs(30)), Some("--max-tokens differs"));
        assert_eq!(tokens_or_window_differ(file, 512, secs(10)), Some("--max-tokens and --duration differ"));
        // A file that does not record one (an import) cannot match it.
        assert_eq!(tokens_or_window_differ((Some(256), None), 256, secs(30)), Some("--duration differs"));
    }

    #[test]
    fn a_broken_connection_is_told_by_the_errors_own_words() {
        let unreachable = HttpError::Unreachable { url: "http://x/v1".into(), message: "connection refused".into() };
        for broke in [
            StreamError::Truncated.to_string(),
            StreamError::Broke("reset".into()).to_string(),
            unreachable.to_string(),
        ] {
            assert!(connection_broke(&format!("1 of 2 streams failed: {broke}")), "{broke}");
        }
        let answered =
            HttpError::Status { url: "http://x/v1".into(), status: 500, body: "oops".into(), retry_after: None };
        for own in [StreamError::NoDone.to_string(), answered.to_string()] {
            assert!(!connection_broke(&own), "{own}");
        }
    }
}
