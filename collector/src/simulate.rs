//! `speedmatrix simulate`: the command-line glue of the twin (crate `speedmatrix-twin`) —
//! flags → [`TwinConfig`] (a named profile, or the fit of `--fit RUN.json`), the residual table
//! (`--residuals`, and before serving a fit), then serve until Ctrl-C or SIGTERM.

use crate::cli::{FlavorArg, ReasoningFieldArg, SimulateArgs};
use speedmatrix_schema::Results;
use speedmatrix_twin::{self as twin, Fault, Flavor, Profile, ReasoningField, TwinConfig};

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
pub fn fitted_profile(args: &SimulateArgs) -> Result<Fitted, crate::Error> {
    if let Some(path) = &args.fit {
        let run = crate::files::read_results(path)?;
        let fit = twin::fit::fit(&run).map_err(|e| crate::Error::Input(format!("--fit {}: {e}", path.display())))?;
        let mut profile = fit.profile;
        profile.name = format!(
            "fit:{}",
            path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
        );
        return Ok(Fitted { profile, run: Some(run), notes: fit.notes });
    }
    let profile = Profile::by_name(&args.profile).map_err(|e| crate::Error::Input(e.to_string()))?;
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
    out.push_str(&twin::replay::residuals(profile, run, &[1, 2, 3]).to_string());
    out
}

/// Build the configuration from `speedmatrix simulate` flags.
pub fn config_from_args(args: &SimulateArgs) -> Result<TwinConfig, crate::Error> {
    config_for(args, fitted_profile(args)?.profile)
}

/// The configuration for `profile` with the flags applied.
fn config_for(args: &SimulateArgs, profile: Profile) -> Result<TwinConfig, crate::Error> {
    let mut profile = profile;
    if let Some(k) = args.speculative_tokens {
        profile.spec_tokens = k;
    }
    if args.no_prefix_cache {
        profile.prefix_cache = false;
    }
    if let Some(v) = &args.engine_version {
        profile.engine_version = v.clone();
    }
    if let Some(n) = &args.served_model_name {
        profile.served_name = n.clone();
    }
    if let Some(l) = args.max_model_len {
        if l < 2 {
            return Err(crate::Error::Input("--max-model-len must be at least 2".into()));
        }
        profile.max_model_len = l;
    }
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        return Err(crate::Error::Input("--time-scale must be a positive number".into()));
    }
    let faults = args
        .fault
        .iter()
        .map(|f| f.parse::<Fault>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| crate::Error::Input(e.to_string()))?;
    let mut cfg = TwinConfig::new(profile);
    cfg.seed = args.seed;
    cfg.api_key = args.api_key.clone();
    cfg.faults = faults;
    cfg.trace = args.trace.clone();
    cfg.flavor = match args.flavor {
        FlavorArg::Vllm => Flavor::Vllm,
        FlavorArg::Sglang => Flavor::Sglang,
    };
    cfg.reasoning = (args.reasoning || args.reasoning_field.is_some()).then_some(match args.reasoning_field {
        Some(ReasoningFieldArg::ReasoningContent) => ReasoningField::ReasoningContent,
        Some(ReasoningFieldArg::Reasoning) => ReasoningField::Reasoning,
        // SGLang's reasoning parser writes `reasoning_content`.
        None if cfg.flavor == Flavor::Sglang => ReasoningField::ReasoningContent,
        None => ReasoningField::Reasoning,
    });
    cfg.reasoning_tokens = args.reasoning_tokens;
    cfg.time_scale = args.time_scale;
    Ok(cfg)
}

/// `speedmatrix simulate`: start the twin, print `listening on http://HOST:PORT`, serve until
/// Ctrl-C, then stop cleanly.
pub fn run(args: &SimulateArgs) -> Result<(), crate::Error> {
    let fitted = fitted_profile(args)?;
    let cfg = config_for(args, fitted.profile.clone())?;
    if args.residuals || args.fit.is_some() {
        let Some(run) = &fitted.run else {
            return Err(crate::Error::Input(format!(
                "--residuals: profile {} is not fitted to a run; give one with --fit RUN.json",
                cfg.profile.name
            )));
        };
        let report = residual_report(&cfg.profile, run, &fitted.notes);
        if args.residuals {
            print!("{report}");
            return Ok(());
        }
        eprint!("{report}");
    }
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| crate::Error::Other(e.into()))?;
    rt.block_on(async {
        let addr = format!("{}:{}", args.host, args.port);
        let twin =
            twin::start(cfg, &addr).await.map_err(|e| crate::Error::Input(format!("cannot listen on {addr}: {e}")))?;
        // Install the signal handlers before announcing the address, so a Ctrl-C sent right
        // after the line is seen always stops cleanly.
        #[cfg(unix)]
        let (mut int, mut term) = {
            use tokio::signal::unix::{signal, SignalKind};
            let int = signal(SignalKind::interrupt()).map_err(|e| crate::Error::Other(e.into()))?;
            let term = signal(SignalKind::terminate()).map_err(|e| crate::Error::Other(e.into()))?;
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
        assert_eq!(tiny.exit_code(), 2);
        assert!(tiny.to_string().contains("--fit RUN.json"), "{tiny}");
        let missing = fitted_profile(&args(&["--fit", "/nonexistent/run.json"])).err().unwrap();
        assert_eq!(missing.exit_code(), 2);
        assert!(missing.to_string().contains("/nonexistent/run.json"), "{missing}");
        let path = std::env::temp_dir().join(format!("speedmatrix-no-prefill-{}.json", std::process::id()));
        let mut run = speedmatrix_schema::load_results(twin::profile::SEED_RESULTS.as_bytes()).unwrap();
        run.prefill.clear();
        run.config.prefill_contexts.clear();
        std::fs::write(&path, serde_json::to_vec(&run).unwrap()).unwrap();
        let e = fitted_profile(&args(&["--fit", path.to_str().unwrap()])).err().unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--prefill-contexts"), "{e}");
    }

    #[test]
    fn bad_flags_are_input_errors() {
        for bad in [
            &["--profile", "h100"][..],
            &["--fault", "boom"][..],
            &["--max-model-len", "1"][..],
            &["--time-scale", "0"][..],
        ] {
            let e = config_from_args(&args(bad)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
    }
}
