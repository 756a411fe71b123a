//! `speedmatrix run`: discovery → plan → prefill rows → decode cells, writing the results file
//! after every row and cell (`docs/ARCHITECTURE.md`; the method: `docs/METHODOLOGY.md`). This
//! module sequences the work; the figures come from
//! [`crate::measuring::measure`], the HTTP from [`crate::measuring::client`].

use crate::cli::RunArgs;
use crate::measuring::client::{request_body, Client, Clock, StreamCtl, StreamEvent, StreamRecord};
use crate::measuring::discovery::{discover, Metrics, ServerInfo};
use crate::measuring::measure::{round3, sample, window_figures, CellStream};
use crate::measuring::plan::{estimate_s, plan, Plan, PlanInput};
use crate::measuring::prompt::{corpus, prompt_fields, Prompt, PromptBuilder};
use crate::Error;
use serde_json::{json, Value};
use speedmatrix_schema::context::{parse_context, ContextArg};
use speedmatrix_schema::status::{decode_status, over_capacity_reason, Evidence};
use speedmatrix_schema::*;
use std::collections::HashMap;
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

/// Run `speedmatrix run` to completion and return the exit code (0 done, 130 interrupted).
///
/// # Errors
/// [`Error::Input`] (exit 2) when the run cannot start: bad flags, unreachable server, 401,
/// unknown model, a `--resume` file of another plan. Errors while measuring become cell
/// statuses, not process errors.
pub fn run(args: &RunArgs) -> Result<u8, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(anyhow::Error::from)?;
    rt.block_on(measure(args))
}

fn duration_flag(flag: &str, v: &str) -> Result<Duration, Error> {
    let d = humantime::parse_duration(v)
        .or_else(|_| v.parse::<f64>().map_err(|_| ()).and_then(|x| Duration::try_from_secs_f64(x).map_err(|_| ())))
        .map_err(|_| Error::Input(format!("{flag} {v:?} is not a duration; write e.g. 30s, 2m or 500ms")))?;
    if d.is_zero() {
        return Err(Error::Input(format!("{flag} must be longer than 0")));
    }
    Ok(d)
}

fn context_flags(flag: &str, values: &[String]) -> Result<Vec<ContextArg>, Error> {
    if values.len() == 1 && values[0].trim().eq_ignore_ascii_case("none") {
        return Ok(vec![]);
    }
    values.iter().map(|v| parse_context(v).map_err(|e| Error::Input(format!("{flag}: {e}")))).collect()
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// A run-unique id: start time in ns and the process id, base 36.
/// The flags made ready to use, or the first bad one as an input error: `--url` without a
/// trailing `/v1` (people paste the OpenAI base URL), `-o` resolved (default `results.json`,
/// or the `--resume` file) and not overwriting an existing file without `--force`, a finite
/// `--temperature`.
fn checked(args: &RunArgs) -> Result<RunArgs, Error> {
    let mut a = args.clone();
    if let Ok(mut u) = reqwest::Url::parse(&a.url) {
        if !u.username().is_empty() || u.password().is_some() {
            let _ = u.set_password(u.password().map(|_| "<redacted>"));
            return Err(Error::Input(format!(
                "--url {u}: credentials in the URL are not sent; give the API key with --api-key or SPEEDMATRIX_API_KEY"
            )));
        }
    }
    let url = a.url.trim_end_matches('/');
    if let Some(base) = url.strip_suffix("/v1") {
        say!("note: --url {url}: using {base} (speedmatrix adds /v1 itself)");
        a.url = base.to_string();
    }
    if let Some(t) = a.temperature.filter(|t| !t.is_finite() || *t < 0.0) {
        return Err(Error::Input(format!("--temperature {t}: give a finite number ≥ 0, e.g. 0 or 0.7")));
    }
    let out = a.out.clone().or_else(|| a.resume.clone()).unwrap_or_else(|| "results.json".into());
    let resuming_it = a.resume.as_ref().is_some_and(|r| same_file(r, &out));
    if out.exists() && !resuming_it && !a.force && !a.dry_run {
        let what = match crate::files::read_results(&out) {
            Ok(r) => format!("holds run {} ({:?})", r.run.id, r.run.status).to_lowercase(),
            Err(_) => "exists".to_string(),
        };
        return Err(Error::Input(format!(
            "-o {}: the file {what}; continue it with --resume {}, overwrite it with --force, or pick another -o",
            out.display(),
            out.display()
        )));
    }
    a.out = Some(out);
    Ok(a)
}

fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// The results file this run writes (set by [`checked`]).
fn out_path(args: &RunArgs) -> std::path::PathBuf {
    args.out.clone().unwrap_or_else(|| "results.json".into())
}

/// The API key: `--api-key` / `SPEEDMATRIX_API_KEY`, else `OPENAI_API_KEY`.
fn api_key(args: &RunArgs) -> Option<String> {
    args.api_key.clone().or_else(|| std::env::var("OPENAI_API_KEY").ok()).filter(|k| !k.is_empty())
}

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
    out: std::path::PathBuf,
    path: &'static str,
    stall: Duration,
    window: Duration,
    args: RunArgs,
    progress: indicatif::ProgressBar,
    /// Warmed prompts by context tokens (stream index for distinct prompts).
    warm: HashMap<(u64, usize), Prompt>,
    /// NVML readings on their own thread; `None` without GPUs (`hardware.gpu_telemetry_note`).
    gpu: Option<crate::measuring::gpu::Sampler>,
}

impl Session {
    fn log(&self, line: String) {
        if self.progress.is_hidden() {
            say!("{line}");
        } else {
            self.progress.println(line);
        }
    }

    fn save(&self) -> Result<(), Error> {
        crate::files::write_atomic(&self.out, &self.results).map_err(Error::Other)
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
}

/// The whole run inside an existing tokio runtime (what [`run`] and `demo` call): discovery,
/// plan, prefill rows, decode cells, the results file. Returns the exit code (0, or 130 when
/// interrupted by Ctrl-C).
///
/// # Errors
/// As [`run`].
pub async fn measure(args: &RunArgs) -> Result<u8, Error> {
    let args = &checked(args)?;
    let window = duration_flag("--duration", &args.duration)?;
    if !(Duration::from_secs(1)..=Duration::from_secs(86_400)).contains(&window) {
        return Err(Error::Input(format!(
            "--duration {:?}: a window must last from 1s to 24h (a shorter one measures mostly noise)",
            args.duration
        )));
    }
    let stall = duration_flag("--stall-timeout", &args.stall_timeout)?;
    let contexts = context_flags("--contexts", &args.contexts)?;
    let prefill_contexts = context_flags("--prefill-contexts", &args.prefill_contexts)?;
    let api_key = api_key(args);
    let max_n = args.concurrency.iter().copied().max().unwrap_or(1) as usize;
    let client = Client::new(&args.url, api_key, max_n + 8)?;

    let (info, metrics) = discover(&client, args.model.as_deref(), args.kv_budget, args.engine.map(Into::into))
        .await
        .map_err(|e| Error::Input(e.to_string()))?;
    let plan = plan(&PlanInput {
        contexts,
        concurrency: args.concurrency.clone(),
        prefill_contexts,
        max_tokens: args.max_tokens,
        window_s: window.as_secs_f64(),
        max_model_len: info.facts.max_model_len,
        kv_budget: info.plan_kv_budget(),
        slot_context: info.facts.slot_context,
    })
    .map_err(|e| Error::Input(e.to_string()))?;
    print_plan(&info, &plan, window, args);
    if args.dry_run {
        return Ok(0);
    }

    let endpoint: Endpoint = args.endpoint.into();
    let host = host_facts(args);
    let mut results = match &args.resume {
        Some(path) => resume(path, &info, &plan, args, window)?,
        None => fresh_results(&info, &plan, args, window, endpoint, &host),
    };
    results.run.status = RunStatus::Running;
    results.run.reason = None;
    let clock = Clock::start();
    let gpu = host.gpus.map(|g| crate::measuring::gpu::Sampler::start(g, clock));
    let seed = args.seed.unwrap_or(0x5eed);
    let prompts = PromptBuilder::new(client.clone(), info.model.clone(), endpoint, results.run.id.clone(), seed)
        .await
        .map_err(|e| Error::Input(format!("cannot build prompts: {e}")))?;
    let steps = results.prefill.iter().filter(|p| p.status == CellStatus::NotRun).count()
        + results.decode.iter().filter(|c| c.status == CellStatus::NotRun).count();
    let progress =
        if args.quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(steps as u64) };
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} cells · ETA {eta} · {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut s = Session {
        path: match endpoint {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
        },
        has_metrics: metrics.is_some(),
        client,
        clock,
        info,
        prompts,
        results,
        out: out_path(args),
        stall,
        window,
        args: args.clone(),
        progress,
        warm: HashMap::new(),
        gpu,
    };
    s.save()?;

    let stopped = tokio::select! {
        r = measure_all(&mut s) => r?.map(|cause| (RunStatus::Failed, cause, 1)),
        _ = tokio::signal::ctrl_c() => Some((RunStatus::Interrupted, "interrupted by Ctrl-C".to_string(), 130)),
        _ = terminated() => Some((RunStatus::Interrupted, "stopped by SIGTERM".to_string(), 143)),
    };
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
    s.results.run.status = stopped.as_ref().map_or(RunStatus::Complete, |(st, _, _)| *st);
    s.results.run.reason = stopped.as_ref().map(|(_, cause, _)| cause.clone());
    s.results.run.finished_at = Some(now_rfc3339());
    s.save()?;
    let errors = s.results.decode.iter().filter(|c| c.status == CellStatus::Error).count()
        + s.results.prefill.iter().filter(|c| c.status == CellStatus::Error).count();
    let detail = match errors {
        0 => String::new(),
        1 => " (1 error cell — see `speedmatrix show --all` for the reason)".into(),
        n => format!(" ({n} error cells — see `speedmatrix show --all` for the reasons)"),
    };
    match &stopped {
        None => say!("done; results in {}{detail}", s.out.display()),
        Some((status, cause, _)) => say!(
            "{}{cause}; what was measured is in {}{detail}; continue with --resume {}",
            if *status == RunStatus::Failed { "run failed: " } else { "" },
            s.out.display(),
            s.out.display()
        ),
    }
    Ok(stopped.map_or(0, |(_, _, code)| code))
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
        info.engine,
        info.facts.version.as_deref().unwrap_or("(version unknown)"),
        info.model
    );
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

fn fresh_results(
    info: &ServerInfo,
    plan: &Plan,
    args: &RunArgs,
    window: Duration,
    endpoint: Endpoint,
    host: &Host,
) -> Results {
    let prefill = plan
        .prefill
        .iter()
        .map(|c| PrefillRow {
            context: c.clone(),
            prompt_tokens: None,
            status: CellStatus::NotRun,
            reason: Some("pending".into()),
            prompt_tps: None,
            ttft_ms: None,
            completed_requests: None,
            cached_tokens: None,
            requests: vec![],
        })
        .collect();
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
        tool: Tool { name: "speedmatrix".into(), version: env!("CARGO_PKG_VERSION").into(), converted_by: None },
        run: RunInfo {
            id: new_run_id(),
            started_at: Some(now_rfc3339()),
            finished_at: None,
            status: RunStatus::Running,
            reason: None,
            label: args.label.clone(),
            notes: args.notes.clone(),
        },
        hardware: host.hardware.clone(),
        engine: Engine {
            name: info.engine.clone(),
            version: info.facts.version.clone(),
            served_model_name: Some(info.model.clone()),
            model: info.root.clone(),
            max_model_len: info.facts.max_model_len,
            kv_budget_tokens: info.facts.kv_budget.map(|(b, _)| b),
            kv_budget_source: info.facts.kv_budget.map(|(_, s)| s),
            launch_command: host.launch_command.clone(),
            speculative_decoding: host
                .launch_command
                .as_deref()
                .and_then(crate::measuring::launch::speculative_decoding),
            slots: info.facts.slots,
            slot_context_tokens: info.facts.slot_context,
            max_running_requests: info.facts.max_running,
            ..Engine::default()
        },
        config: Config {
            contexts: plan.contexts.clone(),
            concurrency: plan.concurrency.clone(),
            prefill_contexts: plan.prefill.clone(),
            window_s: window.as_secs_f64(),
            max_tokens: args.max_tokens,
            endpoint: Some(endpoint),
            ignore_eos: Some(true),
            temperature: args.temperature,
            seed: args.seed,
            prompt_corpus: Some(corpus()),
            prompt_sharing: Some(if args.distinct_prompts { PromptSharing::Distinct } else { PromptSharing::Shared }),
            prefill_mode: Some(PrefillMode::DecodeWarmup),
            decode_test: Some(DecodeTest::FixedDuration),
            stall_timeout_s: duration_flag("--stall-timeout", &args.stall_timeout).ok().map(|d| d.as_secs_f64()),
        },
        prefill,
        decode,
        telemetry: None,
        missing: info.facts.missing.clone(),
        import: None,
    }
}

/// The server's host and port from `--url`, and whether it is this machine (loopback).
fn server_address(url: &str) -> (bool, Option<u16>) {
    match reqwest::Url::parse(url) {
        Ok(u) => {
            let local = matches!(u.host_str(), Some("localhost" | "127.0.0.1" | "::1" | "[::1]"))
                || u.host_str().is_some_and(|h| h.starts_with("127."));
            (local, u.port_or_known_default())
        }
        Err(_) => (false, None),
    }
}

/// What this machine can tell about the server: the hardware card (CPU, OS, host name and the
/// NVML GPU inventory when the server runs here), the launch command, and the GPU sampler.
struct Host {
    hardware: Hardware,
    launch_command: Option<String>,
    gpus: Option<crate::measuring::gpu::Gpus>,
}

/// Look at the host: `--launch-command` or the local server process (secrets redacted, home
/// paths too with `--redact-host`); NVML unless `--no-gpu` or the server is remote, in which
/// case `hardware.gpu_telemetry_note` says why there are no GPU figures.
fn host_facts(args: &RunArgs) -> Host {
    let (local, port) = server_address(&args.url);
    let server = match (local, port) {
        (true, Some(port)) => crate::measuring::launch::local_server(port),
        _ => None,
    };
    let launch = match &args.launch_command {
        Some(line) => Some(crate::measuring::launch::redact_argv(&crate::measuring::launch::split_words(line))),
        None => server.as_ref().map(|s| s.command.clone()),
    };
    let launch_command = launch.map(|c| crate::measuring::launch::scrub(&c, api_key(args).as_deref())).map(|c| {
        if args.redact_host {
            crate::measuring::launch::redact_home(&c)
        } else {
            c
        }
    });
    let mut hardware = if local {
        Hardware {
            os: Some(std::env::consts::OS.into()),
            cpu: crate::measuring::launch::cpu_model(),
            host: if args.redact_host { None } else { crate::measuring::launch::host_name() },
            ..Hardware::default()
        }
    } else {
        Hardware::default()
    };
    let gpus = if args.no_gpu {
        hardware.gpu_telemetry_note = Some("skipped (--no-gpu)".into());
        None
    } else if !local {
        hardware.gpu_telemetry_note =
            Some("the server is not on this host: NVML here cannot see its GPUs (no GPU figures)".into());
        None
    } else {
        let pids = server.as_ref().map(|s| s.pids.clone()).unwrap_or_default();
        match crate::measuring::gpu::open(&pids) {
            Ok(g) => {
                hardware.gpus = g.inventory();
                hardware.gpu_count = Some(hardware.gpus.len() as u32);
                hardware.vram_total_bytes = hardware.gpus.iter().map(|g| g.memory_bytes).sum();
                hardware.accelerator_type = Some("NVIDIA GPU".into());
                say!(
                    "GPUs: {} — {}",
                    g.selection,
                    hardware.gpus.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ")
                );
                Some(g)
            }
            Err(note) => {
                hardware.gpu_telemetry_note = Some(note);
                None
            }
        }
    };
    if let Some(n) = args.gpu_count {
        if hardware.gpu_count.is_some_and(|seen| seen != n) {
            say!("GPUs: {n} serve the model (--gpu-count), of the {} NVML sees", hardware.gpus.len());
        }
        hardware.gpu_count = Some(n);
    }
    Host { hardware, launch_command, gpus }
}

fn empty_cell(context: &ContextSize, concurrency: u32) -> DecodeCell {
    DecodeCell {
        context: context.clone(),
        prompt_tokens: None,
        concurrency,
        status: CellStatus::NotRun,
        reason: Some("pending".into()),
        capacity: None,
        window_s: None,
        window_start_ms: None,
        total_tps: None,
        per_request_tps: None,
        ttft_ms: None,
        ttft_in_window_ms: None,
        ttft_content_ms: None,
        tpot_ms: None,
        itl_ms: None,
        chunk_gap_ms: None,
        e2e_ms: None,
        output_tokens: None,
        token_count_source: None,
        completed_requests: None,
        avg_active_requests: None,
        max_active_requests: None,
        spec_accept_rate: None,
        gpu_power_w: None,
        energy_j_per_token: None,
        server: None,
        gpu: None,
        client_cpu_pct: None,
        requests: vec![],
    }
}

/// Load a results file to continue: same model, same plan; unmeasured cells run again.
fn resume(
    path: &std::path::Path,
    info: &ServerInfo,
    plan: &Plan,
    args: &RunArgs,
    window: Duration,
) -> Result<Results, Error> {
    let mut r = crate::files::read_results(path)?;
    let c = &r.config;
    let join = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(",") };
    let flags = format!(
        "--contexts {} --concurrency {} --prefill-contexts {} --duration {}s --max-tokens {}",
        join(c.contexts.iter().map(|x| x.tokens.to_string()).collect()),
        join(c.concurrency.iter().map(u32::to_string).collect()),
        join(c.prefill_contexts.iter().map(|x| x.tokens.to_string()).collect()),
        c.window_s,
        c.max_tokens
    );
    let differs = |what: &str| {
        Error::Input(format!(
            "--resume {}: {what} differs from the file's; repeat the run's flags ({flags}), or start a new run with another -o",
            path.display()
        ))
    };
    if r.engine.served_model_name.as_deref() != Some(info.model.as_str()) {
        return Err(differs("the served model"));
    }
    if r.config.contexts != plan.contexts
        || r.config.concurrency != plan.concurrency
        || r.config.prefill_contexts != plan.prefill
    {
        return Err(differs("the plan (contexts, concurrency or prefill contexts)"));
    }
    if r.config.max_tokens != args.max_tokens || (r.config.window_s - window.as_secs_f64()).abs() > 1e-9 {
        return Err(differs("--max-tokens or --duration"));
    }
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
    Ok(r)
}

/// Whether the server still answers after a cell failed: `GET /v1/models`, three tries a second
/// apart. `Err(cause)` when nothing answers (connection refused, reset, timeout) or every answer
/// is a 5xx — the run then stops rather than fill every remaining cell with the same error.
async fn server_alive(s: &Session) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        match s.client.get_text("/v1/models").await {
            Ok(_) => return Ok(()),
            Err(crate::measuring::client::HttpError::Status { status, .. }) if status < 500 => return Ok(()),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!("the server stopped answering: {last}"))
}

/// Measure every row and cell still `not_run`, saving after each. Returns `Some(cause)` when the
/// server died on the way (the remaining cells stay `not_run`).
async fn measure_all(s: &mut Session) -> Result<Option<String>, Error> {
    for i in 0..s.results.prefill.len() {
        if s.results.prefill[i].status != CellStatus::NotRun {
            continue;
        }
        let ctx = s.results.prefill[i].context.clone();
        s.progress.set_message(format!("prefill {}", ctx.label));
        let row = measure_prefill(s, &ctx).await;
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
        let cell = measure_cell(s, &ctx, n).await;
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
        requests: vec![],
    };
    let prompt = match s.prompts.build(&format!("context {}", ctx.label), ctx.tokens).await {
        Ok(p) => p,
        Err(e) => {
            row.reason = Some(format!("could not build the prompt: {e}"));
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
async fn warm_prompt(s: &mut Session, ctx: &ContextSize, i: usize) -> Result<Prompt, String> {
    if let Some(p) = s.warm.get(&(ctx.tokens, i)) {
        return Ok(p.clone());
    }
    let tag = if i == 0 { format!("context {}", ctx.label) } else { format!("context {} stream {i}", ctx.label) };
    let p = s.prompts.build(&tag, ctx.tokens).await.map_err(|e| format!("could not build the prompt: {e}"))?;
    let rec = s.single(&p.text, 1).await;
    if let Some(e) = rec.error {
        return Err(format!("warm-up request failed: {e}"));
    }
    let p = Prompt { tokens: rec.prompt_tokens.or(p.tokens), ..p };
    s.warm.insert((ctx.tokens, i), p.clone());
    Ok(p)
}

async fn measure_cell(s: &mut Session, ctx: &ContextSize, n: u32) -> DecodeCell {
    let mut cell = empty_cell(ctx, n);
    cell.status = CellStatus::Error;
    let n_prompts = if s.args.distinct_prompts { n as usize } else { 1 };
    let mut prompts = Vec::with_capacity(n_prompts);
    for i in 0..n_prompts {
        match warm_prompt(s, ctx, i).await {
            Ok(p) => prompts.push(p),
            Err(e) => {
                cell.reason = Some(e);
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
            Some(ev) = ev_rx.recv() => if let StreamEvent::FirstToken { id, .. } = ev { producing.insert(id); },
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
    cell.avg_active_requests = Some(server.as_ref().and_then(|sv| sv.running_avg).unwrap_or(f.avg_in_flight));
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
        note: None,
    })
}
