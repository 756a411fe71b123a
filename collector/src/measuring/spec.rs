//! `speedmatrix run`'s flags, checked once: [`RunSpec::from_args`] turns the raw [`RunArgs`]
//! into values ready to use (durations, contexts, the results path, the API key) or the first
//! bad flag as a [`RunError`] (bad input, exit 2) that names it. Nothing downstream parses a
//! flag again.

use crate::cli::RunArgs;
use crate::measuring::engine::EngineKind;
use crate::measuring::run::RunError;
use speedmatrix_schema::context::{parse_context, ContextArg, K};
use speedmatrix_schema::registry::{format_number, Style};
use speedmatrix_schema::{Endpoint, KvBudgetSource};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A validated `speedmatrix run`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    /// Base URL without a trailing `/v1` or `/`.
    pub url: String,
    /// `--api-key` / `SPEEDMATRIX_API_KEY`, else `OPENAI_API_KEY`; never empty.
    pub api_key: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--contexts` (empty for `none`).
    pub contexts: Vec<ContextArg>,
    /// `--prefill-contexts` (empty for `none`).
    pub prefill_contexts: Vec<ContextArg>,
    /// `--concurrency`: each at least 1.
    pub concurrency: Vec<u32>,
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
    /// `--temperature`: finite, ≥ 0.
    pub temperature: Option<f64>,
    /// `--seed`.
    pub seed: Option<u64>,
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
    /// `--accept-change`: header fields (keys of `speedmatrix_schema::resume::keys`) that may
    /// differ on `--resume`; empty without `--resume`.
    pub accept_change: Vec<String>,
    /// The run is the demo's (see `RunArgs::from_demo`).
    pub from_demo: bool,
    /// `--dry-run`.
    pub dry_run: bool,
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

impl RunSpec {
    /// Check every flag of `args`.
    ///
    /// # Errors
    /// [`RunError`] naming the first bad flag and what to write instead.
    pub fn from_args(args: &RunArgs) -> Result<RunSpec, RunError> {
        let window = duration_flag("--duration", &args.duration)?;
        if !(Duration::from_secs(1)..=Duration::from_secs(86_400)).contains(&window) {
            return Err(RunError::Window { value: args.duration.clone() });
        }
        if args.concurrency.contains(&0) {
            return Err(RunError::ZeroConcurrency);
        }
        if let Some(t) = args.temperature.filter(|t| !t.is_finite() || *t < 0.0) {
            return Err(RunError::Temperature { value: t });
        }
        if args.launch_command.as_deref().is_some_and(|l| shlex::split(l).is_none()) {
            return Err(RunError::LaunchCommand);
        }
        if !args.accept_change.is_empty() && args.resume.is_none() {
            return Err(RunError::AcceptChangeWithoutResume);
        }
        let keys = speedmatrix_schema::resume::keys();
        if let Some(bad) = args.accept_change.iter().find(|k| !keys.contains(&k.as_str())) {
            return Err(RunError::AcceptChangeKey { key: bad.clone(), keys });
        }
        let out = out_path(args);
        if let Err(refused) = out_usable(args, &out) {
            if !args.dry_run {
                return Err(refused);
            }
            // The dry run writes nothing, so it succeeds; the run it previews would not start.
            note(&format!("note: without --dry-run the run would stop here: {}", crate::error_line(refused)));
        }
        Ok(RunSpec {
            url: base_url(&args.url)?,
            api_key: args.api_key.clone().or_else(|| std::env::var("OPENAI_API_KEY").ok()).filter(|k| !k.is_empty()),
            model: args.model.clone(),
            contexts: context_flags("--contexts", &args.contexts)?,
            prefill_contexts: context_flags("--prefill-contexts", &args.prefill_contexts)?,
            concurrency: args.concurrency.clone(),
            window,
            stall: duration_flag("--stall-timeout", &args.stall_timeout)?,
            server_wait: humantime::parse_duration(args.server_wait.trim())
                .map_err(|_| RunError::NotADuration { flag: "--server-wait", value: args.server_wait.clone() })?,
            max_tokens: args.max_tokens,
            repeat: args.repeat,
            endpoint: args.endpoint.into(),
            distinct_prompts: args.distinct_prompts,
            temperature: args.temperature,
            seed: args.seed,
            kv_budget: args.kv_budget,
            engine: args.engine.map(Into::into),
            out,
            resume: args.resume.clone(),
            accept_change: args.accept_change.clone(),
            from_demo: args.from_demo,
            dry_run: args.dry_run,
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
        self.concurrency.iter().copied().max().unwrap_or(1) as usize
    }
}

/// `run --resume FILE`: the flags of the file's plan that the command line does not give are
/// taken from FILE — contexts, concurrency, prefill contexts, window, max tokens, repeats, endpoint,
/// prompt sharing, temperature, seed, stall timeout, the served model, the server's URL and a
/// KV budget that came from `--kv-budget` —
/// so `--resume FILE` alone continues the run. A flag given explicitly stays, and the resume
/// check decides whether it may differ from the file. Without `--resume`, or when which flags
/// were given is not known, the arguments stay as they are.
///
/// # Errors
/// The file cannot be read as a results file.
pub fn with_resumed_plan(args: &RunArgs) -> Result<RunArgs, RunError> {
    let mut a = args.clone();
    let (Some(path), Some(given)) = (&args.resume, &args.given) else { return Ok(a) };
    let r = crate::files::read_results(path)?;
    let c = &r.config;
    let unset = |id: &str| !given.iter().any(|g| g == id);
    let tokens = |v: &[speedmatrix_schema::ContextSize]| match v.is_empty() {
        true => vec!["none".to_string()],
        false => v.iter().map(|x| x.tokens.to_string()).collect(),
    };
    let ms = |s: f64| format!("{}ms", (s * 1000.0).round());
    let mut taken: Vec<&str> = vec![];
    let mut take = |id: &'static str, flag: &'static str, set: &mut dyn FnMut()| {
        if unset(id) {
            set();
            taken.push(flag);
        }
    };
    take("contexts", "--contexts", &mut || a.contexts = tokens(&c.contexts));
    take("concurrency", "--concurrency", &mut || a.concurrency = c.concurrency.clone());
    take("prefill_contexts", "--prefill-contexts", &mut || a.prefill_contexts = tokens(&c.prefill_contexts));
    if let Some(window) = c.window_s {
        take("duration", "--duration", &mut || a.duration = ms(window));
    }
    if let Some(max_tokens) = c.max_tokens {
        take("max_tokens", "--max-tokens", &mut || a.max_tokens = max_tokens);
    }
    if let Some(n) = c.repeats {
        take("repeat", "--repeat", &mut || a.repeat = n);
    }
    if let Some(e) = c.endpoint {
        let arg = match e {
            Endpoint::Chat => crate::cli::EndpointArg::Chat,
            Endpoint::Completions => crate::cli::EndpointArg::Completions,
        };
        take("endpoint", "--endpoint", &mut || a.endpoint = arg);
    }
    if let Some(sharing) = c.prompt_sharing {
        let distinct = sharing == speedmatrix_schema::PromptSharing::Distinct;
        take("distinct_prompts", "--distinct-prompts", &mut || a.distinct_prompts = distinct);
    }
    take("temperature", "--temperature", &mut || a.temperature = c.temperature);
    take("seed", "--seed", &mut || a.seed = c.seed);
    if let Some(stall) = c.stall_timeout_s {
        take("stall_timeout", "--stall-timeout", &mut || a.stall_timeout = ms(stall));
    }
    if let Some(model) = &r.engine.served_model_name {
        take("model", "--model", &mut || a.model = Some(model.clone()));
    }
    if let Some(url) = &c.server_url {
        take("url", "--url", &mut || a.url = url.clone());
    }
    // A budget the user gave (the server did not): the plan's over-capacity cells depend on it.
    if let (Some(budget), Some(KvBudgetSource::Flag)) = (r.engine.kv_budget_tokens, r.engine.kv_budget_source) {
        take("kv_budget", "--kv-budget", &mut || a.kv_budget = Some(budget));
    }
    if !taken.is_empty() {
        note(&format!("note: --resume {}: {} from the file", path.display(), taken.join(", ")));
    }
    Ok(a)
}

/// `eprintln!` that never panics on a closed stderr (see `run`).
fn note(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// `--url` without credentials (they would not be sent) and without a trailing `/v1` (people
/// paste the OpenAI base URL).
fn base_url(url: &str) -> Result<String, RunError> {
    // `scheme://…` names a scheme; `localhost:8000` parses as one too, but means a host.
    if let Some((scheme, _)) = url.split_once("://") {
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(RunError::UrlUnsupportedScheme { url: url.to_string(), scheme: scheme.to_string() });
        }
    }
    let parsed = reqwest::Url::parse(url).ok().filter(|u| matches!(u.scheme(), "http" | "https"));
    let Some(u) = parsed else {
        return Err(RunError::UrlScheme { url: url.to_string() });
    };
    if !u.username().is_empty() || u.password().is_some() {
        // Written by hand: the URL type would percent-encode the marker.
        let rest = url.split_once('@').map_or("", |(_, rest)| rest);
        return Err(RunError::UrlCredentials { url: format!("{}://<redacted>@{rest}", u.scheme()) });
    }
    let url = url.trim_end_matches('/');
    Ok(match url.strip_suffix("/v1") {
        Some(base) => {
            note(&format!("note: --url {url}: using {base} (speedmatrix adds /v1 itself)"));
            base.to_string()
        }
        None => url.to_string(),
    })
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
        let thousands = format_number((n * K) as f64, Style::Fixed(0));
        note(&format!("note: {flag} {n} is {n} tokens; for {thousands} tokens write {n}k"));
    }
    values.iter().map(|v| parse_context(v).map_err(|source| RunError::Context { flag, source })).collect()
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
            assert_eq!(crate::CommandError::failure(&e), crate::Failure::BadInput);
        }
        for other in ["ftp://x/", "ws://gpu-box:8000", "HTTPX://h:1"] {
            let e = spec(&["--url", other]).err().unwrap();
            let scheme = other.split("://").next().unwrap();
            assert_eq!(
                e.to_string(),
                format!("--url {other}: only http:// and https:// are supported, not {scheme}://")
            );
            assert_eq!(crate::CommandError::failure(&e), crate::Failure::BadInput);
        }
        assert!(spec(&["--url", "HTTP://h:1"]).is_ok(), "the scheme's case does not matter");
        let e = spec(&["--url", "https://me:s3cret-pw@gpu-box:8000/v1"]).err().unwrap().to_string();
        assert!(e.starts_with("--url https://<redacted>@gpu-box:8000/v1: credentials"), "{e}");
        assert!(!e.contains("s3cret") && !e.contains("me:") && !e.contains("%3C"), "{e}");
    }

    #[test]
    fn flags_become_values_once() {
        let s = spec(&["--url", "http://h:1/v1/", "--duration", "10s", "--prefill-contexts", "none"]).unwrap();
        assert_eq!(s.url, "http://h:1");
        assert_eq!((s.window, s.stall), (Duration::from_secs(10), Duration::from_secs(120)));
        assert!(s.prefill_contexts.is_empty());
        assert_eq!(s.contexts.len(), 6);
        assert_eq!(s.out, PathBuf::from("results.json"));
    }

    #[test]
    fn bad_flags_are_named() {
        // As the edge prints it: the error and its causes.
        let e = |a: &[&str]| crate::error_line(spec(a).unwrap_err());
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
