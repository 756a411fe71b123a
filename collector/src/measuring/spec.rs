//! `speedmatrix run`'s flags, checked once: [`RunSpec::from_args`] turns the raw [`RunArgs`]
//! into values ready to use (durations, contexts, the server's URL, the results path, the API
//! key, the live page's port) or the first bad flag as a [`RunError`] (bad input, exit 2) that
//! names it. With `--resume FILE`, the flags the command line leaves out take FILE's values,
//! merged as values ([`FromFile`]), never as flag text read again. Nothing downstream parses a
//! flag again.

use crate::cli::RunArgs;
use crate::measuring::engine::EngineKind;
use crate::measuring::error::RunError;
use speedmatrix_schema::context::{parse_context, ContextArg, ContextError, K};
use speedmatrix_schema::registry::{format_number, Style};
use speedmatrix_schema::{ContextSize, Endpoint, KvBudgetSource, PromptSharing, Results};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A validated `speedmatrix run`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    /// `--url`: the base URL without a trailing `/v1` or `/`.
    pub url: ServerUrl,
    /// `--api-key` / `SPEEDMATRIX_API_KEY`, else `OPENAI_API_KEY`; never empty.
    pub api_key: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--contexts` (empty for `none`).
    pub contexts: Vec<ContextArg>,
    /// `--prefill-contexts` (empty for `none`).
    pub prefill_contexts: Vec<ContextArg>,
    /// `--concurrency`: each at least 1; empty when only `--rates` was given.
    pub concurrency: Vec<u32>,
    /// `--rates`: positive request rates, requests/s (empty: no rate cells).
    pub rates: Vec<f64>,
    /// `--arrival` with the schedule's seed (`--seed`, else 0).
    pub arrival: speedmatrix_schema::Arrival,
    /// `--max-in-flight` (rate cells and the trace).
    pub max_in_flight: Option<u32>,
    /// `--trace` (with `--trace-speed`, `--trace-from`, `--trace-to`): the file read, checked
    /// and sliced.
    pub trace: Option<std::sync::Arc<crate::measuring::trace::LoadedTrace>>,
    /// `--prompts`: the user's prompts, read and checked; `None`: the built-in prose.
    pub prompts: Option<std::sync::Arc<crate::measuring::user_prompts::UserPrompts>>,
    /// `--keep-going`.
    pub keep_going: bool,
    /// `--rates auto`: search each context for the highest rate meeting `slo`.
    pub rate_search: bool,
    /// `--slo` of rate cells.
    pub slo: Option<speedmatrix_schema::RateSlo>,
    /// `--duration`: 1 s … 24 h.
    pub window: Duration,
    /// `--stall-timeout`: longer than 0.
    pub stall: Duration,
    /// `--server-wait`: 0 (fail at once) or how long to wait for a server that stopped
    /// answering.
    pub server_wait: Duration,
    /// `--max-tokens` (≥ 1, clap checks).
    pub max_tokens: u32,
    /// `--repeat`: measurements of each decode cell (1 to 1,000, clap checks).
    pub repeat: u32,
    /// `--endpoint`.
    pub endpoint: Endpoint,
    /// `--distinct-prompts`.
    pub distinct_prompts: bool,
    /// `--prefix-share`: shares 0–0.99, ascending (empty without).
    pub prefix_shares: Vec<f64>,
    /// `--temperature`: finite, ≥ 0.
    pub temperature: Option<f64>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--turns` with `--think-time` (0 s when not given): conversations instead of decode
    /// cells.
    pub turns: Option<(u32, Duration)>,
    /// `--kv-budget`.
    pub kv_budget: Option<u64>,
    /// `--engine`.
    pub engine: Option<EngineKind>,
    /// `-o`, else the `--resume` file, else `results.json`; never an existing file that is not
    /// the resumed one unless `--force`, always in a folder it can be written to (with
    /// `--dry-run`, which writes nothing, a note says what the run would refuse).
    pub out: PathBuf,
    /// `--resume`.
    pub resume: Option<PathBuf>,
    /// The `--resume` file as it was read for the flags it fills in (so it is read once);
    /// `None` without `--resume`, or when which flags were given is not known.
    pub resumed: Option<Results>,
    /// `--accept-change`: header fields (keys of `speedmatrix_schema::resume::keys`) that may
    /// differ on `--resume`; empty without `--resume`.
    pub accept_change: Vec<String>,
    /// The run is the demo's (see `RunArgs::from_demo`).
    pub from_demo: bool,
    /// `--dry-run`.
    pub dry_run: bool,
    /// `--serve`: the port of the live page (0: the system picks one).
    pub serve: Option<u16>,
    /// `--label`.
    pub label: Option<String>,
    /// `--notes`.
    pub notes: Option<String>,
    /// `--quiet`.
    pub quiet: bool,
    /// `--launch-command`, which a shell can split.
    pub launch_command: Option<String>,
    /// `--redact-host`.
    pub redact_host: bool,
    /// `--no-gpu`.
    pub no_gpu: bool,
    /// `--gpu-count`: the GPUs serving the model, for per-GPU figures.
    pub gpu_count: Option<u32>,
}

/// The server's base URL: the text as given (without a trailing `/v1` or `/`; the results
/// file and the HTTP client use it as it is), and the URL it parses to (its host and port, for
/// finding the server's socket and redacting the host).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerUrl {
    text: String,
    parsed: reqwest::Url,
}

impl ServerUrl {
    /// The base URL as given, e.g. `http://127.0.0.1:8000`.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed URL (scheme `http` or `https`, no credentials).
    pub fn url(&self) -> &reqwest::Url {
        &self.parsed
    }

    /// Its host (`127.0.0.1`, `gpu-box`, `[::1]`), if it names one.
    pub fn host(&self) -> Option<&str> {
        self.parsed.host_str()
    }
}

impl std::fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl RunSpec {
    /// Check every flag of `args` (with `--resume`, those it leaves out take the file's values).
    ///
    /// # Errors
    /// [`RunError`] naming the first bad flag and what to write instead; the `--resume` file
    /// cannot be read.
    pub fn from_args(args: &RunArgs) -> Result<RunSpec, RunError> {
        let (file, resumed) = FromFile::read(args)?;
        let window = window(args, &file)?;
        let rate_search = file.rate_search.unwrap_or_else(|| args.rates.iter().any(|r| r.trim() == "auto"));
        if rate_search && file.rate_search.is_none() && args.rates.len() > 1 {
            return Err(RunError::Rate { value: args.rates.join(",") });
        }
        let rates = match &file.rates {
            Some(r) => r.clone(),
            None if rate_search => vec![],
            None => rates(&args.rates)?,
        };
        let slo = match (&file.slo, &args.slo) {
            (Some(s), _) => Some(*s),
            (None, Some(text)) => Some(slo(text)?),
            (None, None) => None,
        };
        if let Some(&rate) = rates.first().filter(|r| **r * window.as_secs_f64() < 1.0) {
            let window_s = window.as_secs_f64();
            return Err(RunError::RateWindow {
                rate,
                window_s,
                expected: rate * window_s,
                needed_s: (10.0 / rate).ceil() as u64,
            });
        }
        if rate_search && slo.is_none() {
            return Err(RunError::AutoWithoutSlo);
        }
        let trace = trace(args, file.trace.as_ref())?;
        let prompts = match &args.prompts {
            Some(path) => Some(std::sync::Arc::new(crate::measuring::user_prompts::load(path)?)),
            None => None,
        };
        // A resumed file without a recorded corpus (older files) was measured on the prose.
        let prose = crate::measuring::prompt::corpus();
        let file_corpus = resumed.as_ref().map(|r| r.config.prompt_corpus.as_ref().unwrap_or(&prose));
        crate::measuring::user_prompts::same_on_resume(file_corpus, prompts.as_deref().map(|p| &p.corpus))?;
        let mut concurrency = file.concurrency.clone().unwrap_or_else(|| args.concurrency.clone());
        if concurrency.contains(&0) {
            return Err(RunError::ZeroConcurrency);
        }
        if file.concurrency.is_none() {
            let texts: Vec<String> = args.concurrency.iter().map(u32::to_string).collect();
            let given: Vec<(&str, u32)> =
                texts.iter().map(String::as_str).zip(args.concurrency.iter().copied()).collect();
            if let Some(note) = duplicates_note("--concurrency", &given) {
                say!("{note}");
            }
        }
        // `--rates` instead of `--concurrency`: only rate cells (both flags: both kinds).
        let concurrency_given = args.given.as_ref().is_some_and(|g| g.iter().any(|f| f == "concurrency"));
        if (!rates.is_empty() || rate_search || trace.is_some()) && file.concurrency.is_none() && !concurrency_given {
            concurrency.clear();
        }
        // `--trace` alone: only the trace (no decode rows, no prefill rows) unless asked.
        let given = |id: &str| args.given.as_ref().is_some_and(|g| g.iter().any(|f| f == id));
        let trace_only = |id: &str, from_file: bool| trace.is_some() && !from_file && !given(id);
        let no_contexts = trace_only("contexts", file.contexts.is_some());
        let no_prefill = trace_only("prefill_contexts", file.prefill_contexts.is_some());
        let (process, cv) = match file.arrival {
            Some(a) => (a.process, a.cv),
            None => speedmatrix_schema::arrivals::parse_process(&args.arrival).map_err(RunError::Arrival)?,
        };
        if rates.is_empty() && !rate_search {
            if args.max_in_flight.is_some() && trace.is_none() {
                return Err(RunError::RateFlagWithoutRates { flag: "--max-in-flight" });
            }
            if args.keep_going {
                return Err(RunError::RateFlagWithoutRates { flag: "--keep-going" });
            }
        }
        let prefix_shares = match (&file.prefix_shares, &args.prefix_share) {
            (Some(v), _) => v.clone(),
            (None, Some(text)) => speedmatrix_schema::prefix::parse_shares(text).map_err(RunError::PrefixShare)?,
            (None, None) => vec![],
        };
        if !prefix_shares.is_empty() && (rate_search || trace.is_some()) {
            return Err(RunError::PrefixShareOpenLoop);
        }
        let turns = turns(args, (!rates.is_empty() || rate_search, trace.is_some(), !prefix_shares.is_empty()))?;
        let temperature = file.temperature.unwrap_or(args.temperature);
        if let Some(t) = temperature.filter(|t| !t.is_finite() || *t < 0.0) {
            return Err(RunError::Temperature { value: t });
        }
        if args.launch_command.as_deref().is_some_and(|l| shlex::split(l).is_none()) {
            return Err(RunError::LaunchCommand);
        }
        let accept_change = accept_change(args)?;
        let out = out_path(args);
        if let Err(refused) = out_usable(args, &out) {
            if !args.dry_run {
                return Err(refused);
            }
            // The dry run writes nothing, so it succeeds; the run it previews would not start.
            say!("note: without --dry-run the run would stop here: {}", crate::command::error_line(refused));
        }
        Ok(RunSpec {
            url: base_url(file.url.as_deref().unwrap_or(&args.url))?,
            api_key: args.api_key.clone().or_else(|| std::env::var("OPENAI_API_KEY").ok()).filter(|k| !k.is_empty()),
            model: file.model.clone().or_else(|| args.model.clone()),
            contexts: match no_contexts {
                true => vec![],
                false => contexts("--contexts", file.contexts.as_deref(), &args.contexts)?,
            },
            prefill_contexts: match no_prefill {
                true => vec![],
                false => contexts("--prefill-contexts", file.prefill_contexts.as_deref(), &args.prefill_contexts)?,
            },
            concurrency,
            arrival: speedmatrix_schema::Arrival { process, cv, seed: file.seed.unwrap_or(args.seed).unwrap_or(0) },
            rates,
            max_in_flight: file.max_in_flight.unwrap_or(args.max_in_flight),
            trace,
            prompts,
            keep_going: file.keep_going.unwrap_or(args.keep_going),
            rate_search,
            slo,
            window,
            stall: match file.stall_timeout_s {
                Some(s) => file_duration("--stall-timeout", s)?,
                None => duration_flag("--stall-timeout", &args.stall_timeout)?,
            },
            server_wait: humantime::parse_duration(args.server_wait.trim())
                .map_err(|_| RunError::NotADuration { flag: "--server-wait", value: args.server_wait.clone() })?,
            max_tokens: file.max_tokens.unwrap_or(args.max_tokens),
            repeat: file.repeat.unwrap_or(args.repeat),
            endpoint: file.endpoint.unwrap_or_else(|| args.endpoint.into()),
            distinct_prompts: file.distinct_prompts.unwrap_or(args.distinct_prompts),
            prefix_shares,
            temperature,
            seed: file.seed.unwrap_or(args.seed),
            turns,
            kv_budget: file.kv_budget.or(args.kv_budget),
            engine: args.engine.map(Into::into),
            out,
            resume: args.resume.clone(),
            resumed,
            accept_change,
            from_demo: args.from_demo,
            dry_run: args.dry_run,
            serve: args.serve,
            label: args.label.clone(),
            notes: args.notes.clone(),
            quiet: args.quiet,
            launch_command: args.launch_command.clone(),
            redact_host: args.redact_host,
            no_gpu: args.no_gpu,
            gpu_count: args.gpu_count,
        })
    }

    /// The largest concurrency of the plan (the connection pool's size).
    pub fn max_concurrency(&self) -> usize {
        // Rate cells open as many requests as are due: --max-in-flight, else room for 256.
        let open_loop = !self.rates.is_empty() || self.rate_search || self.trace.is_some();
        let rates = if open_loop { self.max_in_flight.unwrap_or(256) } else { 0 };
        self.concurrency.iter().copied().max().unwrap_or(1).max(rates) as usize
    }
}

/// `run --resume FILE`: the values FILE's header gives for the flags the command line does not
/// — contexts, concurrency, prefill contexts, window, max tokens, repeats, endpoint, prompt
/// sharing, temperature, seed, stall timeout, the served model, the server's URL and a KV
/// budget that came from `--kv-budget` — so `--resume FILE` alone continues the run. A flag
/// given explicitly stays (its field here is `None`), and the resume check decides whether it
/// may differ from the file. Without `--resume`, or when which flags were given is not known
/// (arguments built in code), every field is `None`. The values are the file's, checked as the
/// flags are by [`RunSpec::from_args`].
#[derive(Debug, Default)]
struct FromFile {
    contexts: Option<Vec<ContextSize>>,
    concurrency: Option<Vec<u32>>,
    rates: Option<Vec<f64>>,
    rate_search: Option<bool>,
    keep_going: Option<bool>,
    slo: Option<speedmatrix_schema::RateSlo>,
    arrival: Option<speedmatrix_schema::Arrival>,
    max_in_flight: Option<Option<u32>>,
    trace: Option<speedmatrix_schema::TraceSource>,
    prefill_contexts: Option<Vec<ContextSize>>,
    window_s: Option<f64>,
    max_tokens: Option<u32>,
    repeat: Option<u32>,
    endpoint: Option<Endpoint>,
    distinct_prompts: Option<bool>,
    prefix_shares: Option<Vec<f64>>,
    temperature: Option<Option<f64>>,
    seed: Option<Option<u64>>,
    stall_timeout_s: Option<f64>,
    model: Option<String>,
    url: Option<String>,
    kv_budget: Option<u64>,
}

impl FromFile {
    /// The values of the `--resume` file for the flags `args` leaves out (a note names them),
    /// and the file as read.
    ///
    /// # Errors
    /// The file cannot be read as a results file.
    fn read(args: &RunArgs) -> Result<(FromFile, Option<Results>), RunError> {
        let (Some(path), Some(given)) = (&args.resume, &args.given) else { return Ok((FromFile::default(), None)) };
        let r = crate::files::read_results(path)?;
        // Its sessions' histories are not in the file: nothing to continue them from.
        if !r.conversations.is_empty() {
            return Err(RunError::ResumeConversations(path.clone()));
        }
        let (c, e) = (&r.config, &r.engine);
        let mut taken: Vec<&str> = vec![];
        // Whether flag `id` (`flag` on the command line) is taken from the file.
        let mut take = |id: &str, flag: &'static str| {
            let unset = !given.iter().any(|g| g == id);
            if unset {
                taken.push(flag);
            }
            unset
        };
        // In the order the note names them; `filter` asks only where the file has a value.
        let file = FromFile {
            contexts: take("contexts", "--contexts").then(|| c.contexts.clone()),
            concurrency: take("concurrency", "--concurrency").then(|| c.concurrency.clone()),
            rates: take("rates", "--rates").then(|| c.rates.clone()),
            rate_search: c.rate_search.then_some(true).filter(|_| take("rates", "--rates")),
            keep_going: c.rate_keep_going.then_some(true).filter(|_| take("keep_going", "--keep-going")),
            slo: c.rate_slo.filter(|_| take("slo", "--slo")),
            arrival: r.rates.first().map(|x| x.arrival).filter(|_| take("arrival", "--arrival")),
            max_in_flight: r
                .rates
                .first()
                .or(r.traces.first().map(|t| &t.cell))
                .map(|x| x.max_in_flight)
                .filter(|_| take("max_in_flight", "--max-in-flight")),
            trace: c.trace.clone().filter(|_| take("trace", "--trace")),
            prefill_contexts: take("prefill_contexts", "--prefill-contexts").then(|| c.prefill_contexts.clone()),
            window_s: c.window_s.filter(|_| take("duration", "--duration")),
            max_tokens: c.max_tokens.filter(|_| take("max_tokens", "--max-tokens")),
            repeat: c.repeats.filter(|_| take("repeat", "--repeat")),
            endpoint: c.endpoint.filter(|_| take("endpoint", "--endpoint")),
            distinct_prompts: c
                .prompt_sharing
                .map(|s| s == PromptSharing::Distinct)
                .filter(|_| take("distinct_prompts", "--distinct-prompts")),
            prefix_shares: (!c.prefix_shares.is_empty())
                .then(|| c.prefix_shares.clone())
                .filter(|_| take("prefix_share", "--prefix-share")),
            temperature: take("temperature", "--temperature").then_some(c.temperature),
            seed: take("seed", "--seed").then_some(c.seed),
            stall_timeout_s: c.stall_timeout_s.filter(|_| take("stall_timeout", "--stall-timeout")),
            model: e.served_model_name.clone().filter(|_| take("model", "--model")),
            url: c.server_url.clone().filter(|_| take("url", "--url")),
            // A budget the user gave (the server did not): the plan's over-capacity cells depend
            // on it.
            kv_budget: match (e.kv_budget_tokens, e.kv_budget_source) {
                (Some(budget), Some(KvBudgetSource::Flag)) => Some(budget).filter(|_| take("kv_budget", "--kv-budget")),
                _ => None,
            },
        };
        if !taken.is_empty() {
            say!("note: --resume {}: {} from the file", path.display(), taken.join(", "));
        }
        Ok((file, Some(r)))
    }
}

/// `--trace` with its speed and slice, read and checked (the `--resume` file's trace when the
/// command line names none); `None` without.
fn trace(
    args: &RunArgs,
    from_file: Option<&speedmatrix_schema::TraceSource>,
) -> Result<Option<std::sync::Arc<crate::measuring::trace::LoadedTrace>>, RunError> {
    if let Some(src) = from_file {
        let t = crate::measuring::trace::load(Path::new(&src.file), src.speed, src.from_s, src.to_s)?;
        return Ok(Some(std::sync::Arc::new(t)));
    }
    let seconds = |flag: &'static str, value: &Option<String>| -> Result<Option<f64>, RunError> {
        let Some(text) = value else { return Ok(None) };
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
            _ => Err(RunError::TraceFlag {
                flag,
                value: text.clone(),
                why: "give seconds of trace time ≥ 0, e.g. 600 (10 minutes from the trace's start)",
            }),
        }
    };
    let (from_s, to_s) = (seconds("--trace-from", &args.trace_from)?, seconds("--trace-to", &args.trace_to)?);
    let speed = match args.trace_speed.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1000.0 => v,
        _ => {
            return Err(RunError::TraceFlag {
                flag: "--trace-speed",
                value: args.trace_speed.clone(),
                why: "give a speed above 0 and at most 1000, e.g. 2 for twice as fast",
            })
        }
    };
    let Some(path) = &args.trace else {
        let flag = match (from_s, to_s) {
            (Some(_), _) => Some(("--trace-from", args.trace_from.clone())),
            (_, Some(_)) => Some(("--trace-to", args.trace_to.clone())),
            _ if speed != 1.0 => Some(("--trace-speed", Some(args.trace_speed.clone()))),
            _ => None,
        };
        return match flag {
            Some((flag, value)) => Err(RunError::TraceFlag {
                flag,
                value: value.unwrap_or_default(),
                why: "applies to a trace replay only; give --trace FILE.jsonl too",
            }),
            None => Ok(None),
        };
    };
    if let (Some(f), Some(t)) = (from_s, to_s) {
        if t <= f {
            return Err(RunError::TraceFlag {
                flag: "--trace-to",
                value: args.trace_to.clone().unwrap_or_default(),
                why: "must be later than --trace-from",
            });
        }
    }
    Ok(Some(std::sync::Arc::new(crate::measuring::trace::load(path, speed, from_s, to_s)?)))
}

/// `--rates`: each a positive, finite number of requests per second; sorted, without repeats.
fn rates(given: &[String]) -> Result<Vec<f64>, RunError> {
    let mut rates = Vec::with_capacity(given.len());
    for text in given {
        match text.trim().parse::<f64>() {
            Ok(r) if (0.001..=1e6).contains(&r) => rates.push(r),
            _ => return Err(RunError::Rate { value: text.clone() }),
        }
    }
    if let Some(note) =
        duplicates_note("--rates", &given.iter().map(|t| t.trim()).zip(rates.iter().copied()).collect::<Vec<_>>())
    {
        say!("{note}");
    }
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    Ok(rates)
}

/// `--slo ttft=2s,tpot=50ms[,p=90]`: at least one limit, each more than 0, p one of 50, 90, 99.
fn slo(value: &str) -> Result<speedmatrix_schema::RateSlo, RunError> {
    let bad = |why: String| RunError::Slo { value: value.to_string(), why };
    let mut slo = speedmatrix_schema::RateSlo { ttft_ms: None, tpot_ms: None, percentile: 50 };
    for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, v) = part.split_once('=').ok_or_else(|| bad(format!("{part:?} is not KEY=VALUE")))?;
        let ms = || -> Result<f64, RunError> {
            let d = humantime::parse_duration(v.trim())
                .map_err(|_| bad(format!("{key}={v}: not a duration with a unit (2s, 50ms)")))?;
            let ms = d.as_secs_f64() * 1000.0;
            if ms <= 0.0 {
                return Err(bad(format!("{key} must be more than 0")));
            }
            Ok(ms)
        };
        match key.trim() {
            "ttft" if slo.ttft_ms.is_none() => slo.ttft_ms = Some(ms()?),
            "tpot" if slo.tpot_ms.is_none() => slo.tpot_ms = Some(ms()?),
            "p" => {
                slo.percentile = match v.trim() {
                    "50" => 50,
                    "90" => 90,
                    "99" => 99,
                    other => return Err(bad(format!("p={other}: use 50, 90 or 99"))),
                }
            }
            "ttft" | "tpot" => return Err(bad(format!("{key} is given twice"))),
            other => return Err(bad(format!("unknown key {other:?} (ttft, tpot, p)"))),
        }
    }
    if slo.ttft_ms.is_none() && slo.tpot_ms.is_none() {
        return Err(bad("give ttft, tpot or both".into()));
    }
    Ok(slo)
}

/// `--duration`, or the `--resume` file's window: 1 s … 24 h.
fn window(args: &RunArgs, file: &FromFile) -> Result<Duration, RunError> {
    let (window, value) = match file.window_s {
        Some(s) => (file_duration("--duration", s)?, file_millis(s)),
        None => (duration_flag("--duration", &args.duration)?, args.duration.clone()),
    };
    if !(Duration::from_secs(1)..=Duration::from_secs(86_400)).contains(&window) {
        return Err(RunError::Window { value });
    }
    Ok(window)
}

/// `--accept-change`: only with `--resume`, and only keys of compared header fields.
fn accept_change(args: &RunArgs) -> Result<Vec<String>, RunError> {
    if !args.accept_change.is_empty() && args.resume.is_none() {
        return Err(RunError::AcceptChangeWithoutResume);
    }
    let keys = speedmatrix_schema::resume::keys();
    if let Some(bad) = args.accept_change.iter().find(|k| !keys.contains(&k.as_str())) {
        return Err(RunError::AcceptChangeKey { key: bad.clone(), keys });
    }
    Ok(args.accept_change.clone())
}

/// A duration of the `--resume` file, in seconds, as the flag `flag`: whole milliseconds, more
/// than 0.
fn file_duration(flag: &'static str, secs: f64) -> Result<Duration, RunError> {
    let ms = (secs * 1000.0).round();
    if !(0.0..=u64::MAX as f64).contains(&ms) || ms.is_sign_negative() {
        return Err(RunError::NotADuration { flag, value: file_millis(secs) });
    }
    let d = Duration::from_millis(ms as u64);
    if d.is_zero() {
        return Err(RunError::ZeroDuration { flag });
    }
    Ok(d)
}

/// How an error names a duration of the `--resume` file: its whole milliseconds, `30000ms`.
fn file_millis(secs: f64) -> String {
    format!("{}ms", (secs * 1000.0).round())
}

/// `--contexts` or `--prefill-contexts` (`flag`): the `--resume` file's contexts when it gives
/// them, else the flag's values.
fn contexts(flag: &'static str, file: Option<&[ContextSize]>, values: &[String]) -> Result<Vec<ContextArg>, RunError> {
    let Some(sizes) = file else { return context_flags(flag, values) };
    for n in sizes.iter().map(|c| c.tokens).filter(|n| (1..100).contains(n)) {
        small_context_note(flag, n);
    }
    let zero = |c: &ContextSize| c.tokens == 0;
    if let Some(c) = sizes.iter().find(|c| zero(c)) {
        return Err(RunError::Context { flag, source: ContextError::Zero(c.tokens.to_string()) });
    }
    Ok(sizes.iter().map(|c| ContextArg::Tokens(c.tokens)).collect())
}

/// `--url` without credentials (they would not be sent) and without a trailing `/v1` (people
/// paste the OpenAI base URL), parsed once.
fn base_url(url: &str) -> Result<ServerUrl, RunError> {
    // `scheme://…` names a scheme; `localhost:8000` parses as one too, but means a host.
    if let Some((scheme, _)) = url.split_once("://") {
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(RunError::UrlUnsupportedScheme { url: url.to_string(), scheme: scheme.to_string() });
        }
    }
    let parsed = reqwest::Url::parse(url).ok().filter(|u| matches!(u.scheme(), "http" | "https"));
    let Some(parsed) = parsed else {
        return Err(RunError::UrlScheme { url: url.to_string() });
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Written by hand: the URL type would percent-encode the marker.
        let rest = url.split_once('@').map_or("", |(_, rest)| rest);
        return Err(RunError::UrlCredentials { url: format!("{}://<redacted>@{rest}", parsed.scheme()) });
    }
    let url = url.trim_end_matches('/');
    let text = match url.strip_suffix("/v1") {
        Some(base) => {
            say!("note: --url {url}: using {base} (speedmatrix adds /v1 itself)");
            base.to_string()
        }
        None => url.to_string(),
    };
    Ok(ServerUrl { text, parsed })
}

/// The results file: `-o`, else the `--resume` file, else `results.json`.
fn out_path(args: &RunArgs) -> PathBuf {
    args.out.clone().or_else(|| args.resume.clone()).unwrap_or_else(|| "results.json".into())
}

/// Whether the run may write its results file `out`: an existing file other than the resumed
/// one is refused without `--force`, and the folder must take a file (the first save comes
/// after discovery and the prompts; this fails before them).
fn out_usable(args: &RunArgs, out: &Path) -> Result<(), RunError> {
    if out.is_dir() {
        return Err(RunError::OutIsFolder { path: out.to_path_buf() });
    }
    let resuming_it = args.resume.as_ref().is_some_and(|r| same_file(r, out));
    if out.exists() && !resuming_it && !args.force {
        let what = match crate::files::read_results(out) {
            Ok(r) => format!("holds run {} ({:?})", r.run.id, r.run.status).to_lowercase(),
            Err(_) => "exists".to_string(),
        };
        return Err(RunError::WouldOverwrite { path: out.to_path_buf(), what });
    }
    Ok(crate::files::check_writable(out)?)
}

/// Whether two paths name the same file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// A duration flag through humantime (`30s`, `2m`, `500ms`), more than 0.
/// `--turns N` with `--think-time DUR`, checked against the flags they do not combine with:
/// `(rates, trace, prefix_share)` say which of those were given.
fn turns(
    args: &RunArgs,
    (rates, trace, prefix_share): (bool, bool, bool),
) -> Result<Option<(u32, Duration)>, RunError> {
    let refuse = |flag: &'static str, why: &str| Err(RunError::Turns { flag, why: why.to_string() });
    let Some(text) = &args.turns else {
        return match args.think_time {
            Some(_) => refuse("--think-time", "applies to conversations only; give --turns N too"),
            None => Ok(None),
        };
    };
    let n = parse_turns(text).map_err(|why| RunError::Turns { flag: "--turns", why })?;
    let open_loop = "conversations run closed loop, --concurrency sessions at once; open-loop sessions (--rates) are not built yet: drop --rates or --turns";
    let conflicts: [(bool, &'static str, &str); 6] = [
        (rates, "--rates", open_loop),
        (trace, "--trace", "a trace replays its own requests; run --turns without --trace"),
        (
            prefix_share,
            "--prefix-share",
            "a conversation's later turns share their history already; run --turns without --prefix-share",
        ),
        (
            args.distinct_prompts,
            "--distinct-prompts",
            "every session has a prompt of its own already; drop --distinct-prompts",
        ),
        (args.repeat > 1, "--repeat", "conversations are measured once; drop --repeat"),
        (args.resume.is_some(), "--resume", "a conversation run is not resumed yet; start it again"),
    ];
    if let Some((_, flag, why)) = conflicts.iter().find(|(on, _, _)| *on) {
        return refuse(flag, &format!("does not combine with --turns: {why}"));
    }
    if matches!(args.endpoint, crate::cli::EndpointArg::Completions) {
        return refuse("--endpoint completions", "--turns sends the history as chat messages: use --endpoint chat");
    }
    let think = match &args.think_time {
        None => Duration::ZERO,
        Some(v) => humantime::parse_duration(v.trim())
            .map_err(|_| RunError::NotADuration { flag: "--think-time", value: v.clone() })?,
    };
    Ok(Some((n, think)))
}

/// `--turns N`: 2 to [`speedmatrix_schema::conversation::MAX_TURNS`] turns per session; else
/// what was given and what is allowed, for one line after the flag.
fn parse_turns(s: &str) -> Result<u32, String> {
    let max = speedmatrix_schema::conversation::MAX_TURNS;
    match s.trim().parse::<u32>() {
        Ok(n) if (2..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{}` is not a number of turns: give 2 to {max} turns per session (turn 1 and at least one follow-up), e.g. --turns 5",
            s.trim()
        )),
    }
}

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
    for n in values.iter().filter_map(|v| bare_under_100(v)) {
        small_context_note(flag, n);
    }
    let parsed: Vec<ContextArg> = values
        .iter()
        .map(|v| parse_context(v).map_err(|source| RunError::Context { flag, source }))
        .collect::<Result<_, _>>()?;
    if let Some(note) = duplicates_note(flag, &values.iter().map(|v| v.trim()).zip(&parsed).collect::<Vec<_>>()) {
        say!("{note}");
    }
    Ok(parsed)
}

/// The note on a list flag that names a value more than once (`--contexts 8k,8k`, or `8k` and
/// `8192`, or the flag given twice: its values add up): the value is measured once. `given`
/// pairs each value as written with its parsed value; `None` without a repeat.
fn duplicates_note<T: PartialEq>(flag: &str, given: &[(&str, T)]) -> Option<String> {
    let mut repeats = vec![];
    for (i, (text, value)) in given.iter().enumerate() {
        let Some((first, _)) = given[..i].iter().find(|(_, v)| v == value) else { continue };
        let said = match first == text {
            true => format!("`{text}` more than once"),
            false => format!("`{first}` again as `{text}`"),
        };
        if !repeats.contains(&said) {
            repeats.push(said);
        }
    }
    (!repeats.is_empty()).then(|| format!("note: {flag} lists {}: each value is measured once", repeats.join(" and ")))
}

/// The note on a context of `n` tokens under 100: measured as written, but most likely meant
/// as thousands.
fn small_context_note(flag: &str, n: u64) {
    let thousands = format_number((n * K) as f64, Style::Fixed(0));
    say!("note: {flag} {n} is {n} tokens; for {thousands} tokens write {n}k");
}

/// A bare number under 100 (`8`, `64`): too short a prompt for a speed test, so most likely
/// meant as thousands (`8k`). It is taken as written, with a note.
fn bare_under_100(v: &str) -> Option<u64> {
    v.trim().parse::<u64>().ok().filter(|n| (1..100).contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn a_value_listed_twice_is_noted_once_with_how_it_was_written() {
        assert_eq!(duplicates_note("--concurrency", &[("1", 1), ("4", 4)]), None);
        assert_eq!(
            duplicates_note("--contexts", &[("8k", 8192), ("16k", 16384), ("8k", 8192), ("8k", 8192)]).as_deref(),
            Some("note: --contexts lists `8k` more than once: each value is measured once")
        );
        assert_eq!(
            duplicates_note("--contexts", &[("8k", 8192), ("8192", 8192), ("1", 1), ("1", 1)]).as_deref(),
            Some("note: --contexts lists `8k` again as `8192` and `1` more than once: each value is measured once")
        );
    }

    fn spec(extra: &[&str]) -> Result<RunSpec, RunError> {
        let cli = crate::cli::Cli::try_parse_from([&["speedmatrix", "run", "--dry-run"][..], extra].concat()).unwrap();
        match cli.command {
            crate::cli::Command::Run(a) => RunSpec::from_args(&a),
            _ => unreachable!("a run command"),
        }
    }

    #[test]
    fn a_url_needs_its_scheme_and_never_echoes_credentials() {
        for bare in ["127.0.0.1:8000", "localhost:8000", "gpu-box/v1"] {
            let e = spec(&["--url", bare]).err().unwrap();
            assert_eq!(e.to_string(), format!("--url {bare}: give the scheme too, e.g. --url http://{bare}"));
            assert_eq!(crate::command::CommandError::failure(&e), crate::command::Failure::BadInput);
        }
        for other in ["ftp://x/", "ws://gpu-box:8000", "HTTPX://h:1"] {
            let e = spec(&["--url", other]).err().unwrap();
            let scheme = other.split("://").next().unwrap();
            assert_eq!(
                e.to_string(),
                format!("--url {other}: only http:// and https:// are supported, not {scheme}://")
            );
            assert_eq!(crate::command::CommandError::failure(&e), crate::command::Failure::BadInput);
        }
        assert!(spec(&["--url", "HTTP://h:1"]).is_ok(), "the scheme's case does not matter");
        let e = spec(&["--url", "https://me:s3cret-pw@gpu-box:8000/v1"]).err().unwrap().to_string();
        assert!(e.starts_with("--url https://<redacted>@gpu-box:8000/v1: credentials"), "{e}");
        assert!(!e.contains("s3cret") && !e.contains("me:") && !e.contains("%3C"), "{e}");
    }

    #[test]
    fn flags_become_values_once() {
        let s = spec(&["--url", "http://h:1/v1/", "--duration", "10s", "--prefill-contexts", "none"]).unwrap();
        assert_eq!(s.url.as_str(), "http://h:1");
        assert_eq!((s.window, s.stall), (Duration::from_secs(10), Duration::from_secs(120)));
        assert!(s.prefill_contexts.is_empty());
        assert_eq!(s.contexts.len(), 6);
        assert_eq!(s.out, PathBuf::from("results.json"));
    }

    #[test]
    fn a_resumed_file_gives_the_flags_left_out_as_values() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/round1/twin-tiny.json");
        let argv =
            ["speedmatrix", "run", "--dry-run", "--resume", path, "--max-tokens", "7", "-o", "/nonexistent/r.json"];
        let crate::cli::Command::Run(mut a) = crate::cli::Cli::try_parse_from(argv).unwrap().command else {
            unreachable!("a run command")
        };
        a.given = Some(["dry_run", "resume", "max_tokens", "out"].map(String::from).to_vec());
        let s = RunSpec::from_args(&a).unwrap();
        let r = crate::files::read_results(Path::new(path)).unwrap();
        assert_eq!(s.window, Duration::from_secs(2), "window_s 2.0");
        assert_eq!(s.stall, Duration::from_secs(120));
        assert_eq!(s.max_tokens, 7, "a flag given stays");
        assert_eq!(s.concurrency, r.config.concurrency);
        let tokens = |v: &[ContextSize]| v.iter().map(|c| ContextArg::Tokens(c.tokens)).collect::<Vec<_>>();
        assert_eq!((s.contexts, s.prefill_contexts), (tokens(&r.config.contexts), tokens(&r.config.prefill_contexts)));
        assert_eq!(s.model.as_deref(), Some("tiny"));
        assert_eq!(s.url.as_str(), "http://127.0.0.1:8000", "the file has no URL: the flag's default");
        // Without knowing which flags were given (arguments built in code), nothing is taken.
        a.given = None;
        assert_eq!(RunSpec::from_args(&a).unwrap().window, Duration::from_secs(30));
    }

    #[test]
    fn bad_flags_are_named() {
        // As the edge prints it: the error and its causes.
        let e = |a: &[&str]| crate::command::error_line(spec(a).unwrap_err());
        assert!(e(&["--duration", "0.5s"]).contains("--duration"));
        assert!(e(&["--stall-timeout", "0s"]).contains("--stall-timeout must be longer than 0"));
        assert!(e(&["--contexts", "8k,huge"]).contains("--contexts: 'huge'"));
        assert_eq!(e(&["--concurrency", "1,0"]), "--concurrency values must be at least 1");
        assert!(e(&["--temperature=-1"]).contains("--temperature"));
        assert!(e(&["--temperature", "-1"]).contains("--temperature -1: give a finite number ≥ 0"));
        assert!(e(&["--temperature", "-0.5"]).contains("--temperature -0.5: give a finite number ≥ 0"));
        assert!(!e(&["--url", "http://u:sekrit@h:1"]).contains("sekrit"));
    }
}
