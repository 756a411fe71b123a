//! `speedmatrix simulate`: the command-line glue of the twin (crate `speedmatrix-twin`) —
//! flags → [`TwinConfig`] (a named profile, or the fit of `--fit RUN.json`), the residual table
//! (`--residuals`, and before serving a fit), then serve until Ctrl-C or SIGTERM.

use crate::cli::{FlavorArg, ReasoningFieldArg, SimulateArgs};
use crate::command::{CommandError, Failure};
use speedmatrix_schema::Results;
use speedmatrix_twin::faults::FaultError;
use speedmatrix_twin::fit::FitError;
use speedmatrix_twin::profile::UnknownProfile;
use speedmatrix_twin::{self as twin, Fault, Flavor, Profile, ReasoningField, StartError, TwinConfig};

/// The `--time-scale` values the twin accepts: beyond them its clock's arithmetic (twin ms ↔
/// real instants) leaves what `Duration` and `Instant` can hold, and no test needs more.
pub const TIME_SCALE: std::ops::RangeInclusive<f64> = 0.001..=1000.0;

/// Why `speedmatrix simulate` could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// `--profile` names no profile.
    #[error("--profile")]
    Profile(#[source] UnknownProfile),
    /// A `--fault` that does not parse (its message names the flag).
    #[error(transparent)]
    Fault(FaultError),
    /// The `--fit` file cannot be read or is not a valid results file.
    #[error("--fit")]
    FitFile(#[source] crate::files::FileError),
    /// The `--fit` file holds too little to fit a profile to.
    #[error("--fit {path}")]
    Fit {
        /// The file given.
        path: String,
        /// What it lacks.
        #[source]
        source: FitError,
    },
    /// `--residuals` for a profile that is not the fit of any run.
    #[error("--residuals: profile {0} is not fitted to a run; give one with --fit RUN.json")]
    NotFitted(String),
    /// `--spec-decode` that is not `ngram:K` with K from 1 to 16.
    #[error("--spec-decode {0:?}: give ngram:K with K from 1 to 16 draft tokens per step, e.g. ngram:3")]
    SpecDecode(String),
    /// `--max-model-len` below 2.
    #[error("--max-model-len must be at least 2")]
    MaxModelLen,
    /// `--kv-tokens` below one request of the longest length.
    #[error("--kv-tokens {kv}: the KV cache must hold one request of the longest length, --max-model-len {max} tokens (give a larger --kv-tokens or a smaller --max-model-len)")]
    KvTokens {
        /// `--kv-tokens` in whole blocks.
        kv: u64,
        /// The longest prompt + output.
        max: u32,
    },
    /// `--time-scale` outside what the twin's clock can keep.
    #[error(
        "--time-scale {0}: give a number from {min} to {max} (1 = real time, 10 = ten times faster)",
        min = TIME_SCALE.start(),
        max = TIME_SCALE.end()
    )]
    TimeScale(f64),
    /// The twin cannot start: `--host`/`--port` cannot be bound, the `--trace` file cannot be
    /// created (its message names which), or its engine thread cannot start.
    #[error(transparent)]
    Start(StartError),
    /// The async runtime or the signal handlers cannot be set up.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

impl CommandError for SimulateError {
    fn failure(&self) -> Failure {
        match self {
            SimulateError::Runtime(_) | SimulateError::Start(StartError::EngineThread { .. }) => Failure::Working,
            // A port in use is a failure while working, as for `serve` and `demo` (exit 1).
            SimulateError::Start(StartError::Listen { error, .. }) if error.kind() == std::io::ErrorKind::AddrInUse => {
                Failure::Working
            }
            _ => Failure::BadInput,
        }
    }
}

/// A profile and the run it is fitted to, if any.
pub struct Fitted {
    /// The profile (before the flags that override parts of it).
    pub profile: Profile,
    /// The run it is the fit of: the `--fit` file, or the seed for `h200-qwen3.5-122b`.
    pub run: Option<Results>,
    /// What the fit assumed (values the file did not give).
    pub notes: Vec<String>,
}

/// The profile of `--fit RUN.json` (fitted now) or `--profile NAME`.
pub fn fitted_profile(args: &SimulateArgs) -> Result<Fitted, SimulateError> {
    if let Some(path) = &args.fit {
        let run = crate::files::read_results(path).map_err(SimulateError::FitFile)?;
        let fit =
            twin::fit::fit(&run).map_err(|source| SimulateError::Fit { path: path.display().to_string(), source })?;
        let mut profile = fit.profile;
        profile.name = format!(
            "fit:{}",
            path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
        );
        return Ok(Fitted { profile, run: Some(run), notes: fit.notes });
    }
    let profile = Profile::by_name(&args.profile).map_err(SimulateError::Profile)?;
    let run = (profile.name == Profile::h200_qwen().name)
        .then(|| speedmatrix_schema::load_results(twin::profile::SEED_RESULTS.as_bytes()).ok())
        .flatten();
    Ok(Fitted { profile, run, notes: vec![] })
}

/// The residual table of `profile` against `run`, with the fit's notes first.
pub fn residual_report(profile: &Profile, run: &Results, notes: &[String]) -> String {
    let mut out = String::new();
    for n in notes {
        out.push_str(&format!("fit: {n}\n"));
    }
    out.push_str(&twin::replay::residuals(profile, run, &twin::replay::residual_seeds()).to_string());
    out.push_str(&twin::rate_replay::rate_residual_table(&twin::rate_replay::rate_residuals(profile, run)));
    out
}

/// Build the configuration from `speedmatrix simulate` flags.
///
/// # Errors
/// [`SimulateError`] naming the bad flag.
pub fn config_from_args(args: &SimulateArgs) -> Result<TwinConfig, SimulateError> {
    config_for(args, fitted_profile(args)?.profile)
}

/// The configuration for `profile` with the flags applied.
fn config_for(args: &SimulateArgs, profile: Profile) -> Result<TwinConfig, SimulateError> {
    let mut profile = profile;
    if let Some(k) = args.speculative_tokens {
        profile.spec_tokens = k;
    }
    let ngram = match &args.spec_decode {
        Some(v) => {
            profile.spec_tokens = ngram_tokens(v).ok_or_else(|| SimulateError::SpecDecode(v.clone()))?;
            true
        }
        None => false,
    };
    if args.no_prefix_cache {
        profile.prefix_cache = false;
    }
    if let Some(n) = &args.served_model_name {
        profile.served_name = n.clone();
    }
    if let Some(l) = args.max_model_len {
        if l < 2 {
            return Err(SimulateError::MaxModelLen);
        }
        profile.max_model_len = l;
    }
    if let Some(kv) = args.kv_tokens {
        let block = u64::from(profile.block_size.max(1));
        let kv = kv / block * block;
        if kv < u64::from(profile.max_model_len) {
            return Err(SimulateError::KvTokens { kv, max: profile.max_model_len });
        }
        profile.kv_tokens = kv;
    }
    if !TIME_SCALE.contains(&args.time_scale) {
        return Err(SimulateError::TimeScale(args.time_scale));
    }
    let faults =
        args.fault.iter().map(|f| f.parse::<Fault>()).collect::<Result<Vec<_>, _>>().map_err(SimulateError::Fault)?;
    let mut cfg = TwinConfig::new(profile);
    cfg.seed = args.seed;
    cfg.api_key = args.api_key.clone();
    cfg.faults = faults;
    cfg.trace = args.trace.clone();
    cfg.flavor = match args.flavor {
        FlavorArg::Vllm => Flavor::Vllm,
        FlavorArg::Sglang => Flavor::Sglang,
    };
    // The version of the server the twin imitates on the wire.
    if let Some(v) = &args.engine_version {
        match cfg.flavor {
            Flavor::Vllm => cfg.profile.engine_version = v.clone(),
            Flavor::Sglang => cfg.sglang_version = v.clone(),
        }
    }
    cfg.reasoning = (args.reasoning || args.reasoning_field.is_some()).then_some(match args.reasoning_field {
        Some(ReasoningFieldArg::ReasoningContent) => ReasoningField::ReasoningContent,
        Some(ReasoningFieldArg::Reasoning) => ReasoningField::Reasoning,
        // SGLang's reasoning parser writes `reasoning_content`.
        None if cfg.flavor == Flavor::Sglang => ReasoningField::ReasoningContent,
        None => ReasoningField::Reasoning,
    });
    cfg.reasoning_tokens = args.reasoning_tokens;
    cfg.time_scale = args.time_scale;
    cfg.spec_ngram = ngram;
    Ok(cfg)
}

/// `ngram:K` → K (1…16).
fn ngram_tokens(v: &str) -> Option<u32> {
    let k: u32 = v.strip_prefix("ngram:")?.trim().parse().ok()?;
    (1..=16).contains(&k).then_some(k)
}

/// `speedmatrix simulate`: start the twin, print `listening on http://HOST:PORT`, serve until
/// Ctrl-C, then stop cleanly.
///
/// # Errors
/// [`SimulateError`] for a bad flag or `--fit` file, an address the twin cannot listen on, or
/// no runtime.
pub fn run(args: &SimulateArgs) -> Result<(), SimulateError> {
    let fitted = fitted_profile(args)?;
    let cfg = config_for(args, fitted.profile.clone())?;
    if args.residuals || args.fit.is_some() {
        let Some(run) = &fitted.run else {
            return Err(SimulateError::NotFitted(cfg.profile.name.clone()));
        };
        let report = residual_report(&cfg.profile, run, &fitted.notes);
        if args.residuals {
            print!("{report}");
            return Ok(());
        }
        eprint!("{report}");
    }
    crate::command::runtime().map_err(SimulateError::Runtime)?.block_on(async {
        let addr = format!("{}:{}", args.host, args.port);
        let twin = twin::start(cfg, &addr).await.map_err(SimulateError::Start)?;
        // Install the signal handlers before announcing the address, so a Ctrl-C sent right
        // after the line is seen always stops cleanly.
        #[cfg(unix)]
        let (mut int, mut term) = {
            use tokio::signal::unix::{signal, SignalKind};
            let int = signal(SignalKind::interrupt()).map_err(SimulateError::Runtime)?;
            let term = signal(SignalKind::terminate()).map_err(SimulateError::Runtime)?;
            (int, term)
        };
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening on {}", twin.url());
            let _ = out.flush();
        }
        #[cfg(unix)]
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        twin.shutdown().await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> SimulateArgs {
        let mut v = vec!["speedmatrix", "simulate"];
        v.extend_from_slice(extra);
        match crate::cli::Cli::parse_from(v).command {
            crate::cli::Command::Simulate(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn spec_decode_ngram_sets_the_draft_tokens_and_bad_values_name_the_flag() {
        let c = config_from_args(&args(&["--profile", "tiny", "--spec-decode", "ngram:3"])).unwrap();
        assert_eq!((c.profile.spec_tokens, c.spec_ngram), (3, true));
        assert!(!config_from_args(&args(&["--profile", "tiny"])).unwrap().spec_ngram);
        for bad in ["ngram:0", "ngram:17", "mtp:2", "ngram", "ngram:x"] {
            let e = config_from_args(&args(&["--spec-decode", bad])).unwrap_err();
            assert!(e.to_string().starts_with("--spec-decode"), "{e}");
            assert_eq!(e.failure(), Failure::BadInput);
        }
    }

    #[test]
    fn defaults_are_the_seed_server() {
        let c = config_from_args(&args(&[])).unwrap();
        assert_eq!(c.profile.name, "h200-qwen3.5-122b");
        assert_eq!(c.profile.served_name, "qwen");
        assert_eq!(c.profile.spec_tokens, 2);
        assert!(c.profile.prefix_cache);
        assert_eq!(c.reasoning, None);
        assert!(c.faults.is_empty());
    }

    #[test]
    fn kv_tokens_shrink_the_cache_in_whole_blocks_and_hold_the_longest_request() {
        let c = config_from_args(&args(&["--max-model-len", "8192", "--kv-tokens", "20010"])).unwrap();
        assert_eq!(c.profile.kv_tokens, 20_000, "whole blocks of 16");
        let e = config_from_args(&args(&["--max-model-len", "8192", "--kv-tokens", "4096"])).unwrap_err();
        assert!(e.to_string().starts_with("--kv-tokens 4096: the KV cache must hold"), "{e}");
        assert_eq!(e.failure(), Failure::BadInput);
    }

    #[test]
    fn flags_override_the_profile() {
        let c = config_from_args(&args(&[
            "--profile",
            "tiny",
            "--speculative-tokens",
            "0",
            "--no-prefix-cache",
            "--engine-version",
            "0.11.0",
            "--served-model-name",
            "m",
            "--max-model-len",
            "4096",
            "--reasoning-field",
            "reasoning_content",
            "--fault",
            "split",
            "--fault",
            "status=429@0.1",
            "--seed",
            "7",
            "--api-key",
            "k",
        ]))
        .unwrap();
        assert_eq!(c.profile.spec_tokens, 0);
        assert!(!c.profile.prefix_cache);
        assert_eq!(c.profile.engine_version, "0.11.0");
        assert_eq!(c.profile.served_name, "m");
        assert_eq!(c.profile.max_model_len, 4096);
        assert_eq!(c.reasoning, Some(ReasoningField::ReasoningContent));
        assert_eq!(c.faults.len(), 2);
        assert_eq!(c.seed, 7);
        assert_eq!(c.api_key.as_deref(), Some("k"));
        let c = config_from_args(&args(&["--reasoning"])).unwrap();
        assert_eq!(c.reasoning, Some(ReasoningField::Reasoning));
    }

    #[test]
    fn the_sglang_flavour_reports_an_sglang_version() {
        let c = config_from_args(&args(&["--flavor", "sglang"])).unwrap();
        assert_eq!(c.sglang_version, twin::SGLANG_VERSION);
        let c = config_from_args(&args(&["--flavor", "sglang", "--engine-version", "0.5.9"])).unwrap();
        assert_eq!(
            (c.sglang_version.as_str(), c.profile.engine_version.as_str()),
            ("0.5.9", "0.26.1rc1.dev638+g52be12cfa")
        );
    }

    fn fixture() -> String {
        format!("{}/../tests/fixtures/h200-qwen3.5-122b-vllm.json", env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn fitting_the_seed_fixture_gives_the_h200_profile() {
        let f = fitted_profile(&args(&["--fit", &fixture()])).unwrap();
        assert_eq!(f.profile.name, "fit:h200-qwen3.5-122b-vllm.json");
        assert_eq!(Profile { name: "h200-qwen3.5-122b".into(), ..f.profile }, Profile::h200_qwen());
        assert!(f.run.is_some() && !f.notes.is_empty());
        // Flags still apply on top of a fit.
        let c = config_from_args(&args(&["--fit", &fixture(), "--speculative-tokens", "0"])).unwrap();
        assert_eq!(c.profile.spec_tokens, 0);
    }

    #[test]
    fn residuals_need_a_fitted_profile_and_a_readable_run() {
        let tiny = run(&args(&["--profile", "tiny", "--residuals"])).unwrap_err();
        assert_eq!(tiny.failure(), Failure::BadInput);
        assert!(tiny.to_string().contains("--fit RUN.json"), "{tiny}");
        let missing = fitted_profile(&args(&["--fit", "/nonexistent/run.json"])).err().unwrap();
        assert_eq!(missing.failure(), Failure::BadInput);
        let line = crate::command::error_line(missing);
        assert!(line.starts_with("--fit: ") && line.contains("/nonexistent/run.json"), "{line}");
        let path = std::env::temp_dir().join(format!("speedmatrix-no-prefill-{}.json", std::process::id()));
        let mut run = speedmatrix_schema::load_results(twin::profile::SEED_RESULTS.as_bytes()).unwrap();
        run.prefill.clear();
        run.config.prefill_contexts.clear();
        std::fs::write(&path, serde_json::to_vec(&run).unwrap()).unwrap();
        let e = fitted_profile(&args(&["--fit", path.to_str().unwrap()])).err().unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(e.failure(), Failure::BadInput);
        let line = crate::command::error_line(e);
        assert!(line.contains("--prefill-contexts"), "{line}");
    }

    #[test]
    fn bad_flags_are_input_errors() {
        for bad in [
            &["--profile", "h100"][..],
            &["--fault", "boom"][..],
            &["--max-model-len", "1"][..],
            &["--time-scale", "0"][..],
            // Each reached `Duration::from_secs_f64` and panicked before the range check.
            &["--time-scale", "1e-300"][..],
            &["--time-scale", "1e300"][..],
            &["--time-scale", "NaN"][..],
            &["--time-scale", "inf"][..],
        ] {
            let e = config_from_args(&args(bad)).unwrap_err();
            assert_eq!(e.failure(), Failure::BadInput, "{bad:?}");
            let text = crate::command::error_line(e);
            assert!(text.contains(bad[0]), "the message names the flag {}: {text}", bad[0]);
        }
    }
}
