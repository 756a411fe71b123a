//! `speedmatrix simulate`: the command-line glue of the twin (crate `speedmatrix-twin`) —
//! flags → [`TwinConfig`], then serve until Ctrl-C or SIGTERM.

use crate::cli::{FlavorArg, ReasoningFieldArg, SimulateArgs};
use crate::{CommandError, Failure};
use speedmatrix_twin::faults::FaultError;
use speedmatrix_twin::profile::UnknownProfile;
use speedmatrix_twin::{self as twin, Fault, Flavor, Profile, ReasoningField, StartError, TwinConfig};

/// Why `speedmatrix simulate` could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// `--profile` names no profile.
    #[error("--profile")]
    Profile(#[source] UnknownProfile),
    /// A `--fault` that does not parse (its message names the flag).
    #[error(transparent)]
    Fault(FaultError),
    /// `--max-model-len` below 2.
    #[error("--max-model-len must be at least 2")]
    MaxModelLen,
    /// `--time-scale` not a positive number.
    #[error("--time-scale must be a positive number")]
    TimeScale,
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
            _ => Failure::BadInput,
        }
    }
}

/// Build the configuration from `speedmatrix simulate` flags.
///
/// # Errors
/// [`SimulateError`] naming the bad flag.
pub fn config_from_args(args: &SimulateArgs) -> Result<TwinConfig, SimulateError> {
    let mut profile = Profile::by_name(&args.profile).map_err(SimulateError::Profile)?;
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
            return Err(SimulateError::MaxModelLen);
        }
        profile.max_model_len = l;
    }
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        return Err(SimulateError::TimeScale);
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
///
/// # Errors
/// [`SimulateError`] for a bad flag, an address the twin cannot listen on, or no runtime.
pub fn run(args: &SimulateArgs) -> Result<(), SimulateError> {
    let cfg = config_from_args(args)?;
    crate::runtime().map_err(SimulateError::Runtime)?.block_on(async {
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

    #[test]
    fn bad_flags_are_input_errors() {
        for bad in [
            &["--profile", "h100"][..],
            &["--fault", "boom"][..],
            &["--max-model-len", "1"][..],
            &["--time-scale", "0"][..],
        ] {
            let e = config_from_args(&args(bad)).unwrap_err();
            assert_eq!(e.failure(), Failure::BadInput, "{bad:?}");
            let text = crate::error_line(e);
            assert!(text.contains(bad[0]), "the message names the flag {}: {text}", bad[0]);
        }
    }
}
