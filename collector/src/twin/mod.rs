//! The twin: `speedmatrix simulate`, a vLLM-shaped HTTP server on loopback whose timing
//! follows a measured run (issue 3).
//!
//! - [`profile`]: the profiles (`h200-qwen3.5-122b` fitted to the seed page, `tiny`) and the
//!   fit's residual table;
//! - [`engine`]: the continuous-batching engine model, pure and deterministic (simulated time);
//! - `server` (private): axum routes, the real-time engine loop, SSE writing, `/metrics`;
//! - [`tokenizer`]: the filler-word tokenizer that `/tokenize`, `usage` and the stream agree on;
//! - [`faults`]: `--fault` injection;
//! - [`trace`]: the twin's clock and its JSON Lines ground truth.
//!
//! In-process use (tests):
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use speedmatrix::twin::{self, Profile, TwinConfig};
//! let twin = twin::start(TwinConfig::new(Profile::tiny()), "127.0.0.1:0").await?;
//! let base = twin.url(); // http://127.0.0.1:PORT
//! # let _ = base;
//! twin.shutdown().await;
//! # Ok(()) }
//! ```

pub mod engine;
pub mod faults;
pub mod profile;
mod server;
pub mod tokenizer;
pub mod trace;

pub use faults::{Fault, FaultKind};
pub use profile::Profile;

use crate::cli::{ReasoningFieldArg, SimulateArgs};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Which delta field carries reasoning text (`--reasoning-field`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningField {
    /// `delta.reasoning` (vLLM 0.16+).
    Reasoning,
    /// `delta.reasoning_content` (vLLM ≤ 0.11).
    ReasoningContent,
}

/// Which server the twin imitates on the wire (`--flavor`); the timing model is the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavor {
    /// vLLM: `/version`, `vllm:*` metrics with `cache_config_info`, `{"error": {…}}` bodies.
    #[default]
    Vllm,
    /// SGLang: `/get_server_info` (`max_total_num_tokens`, `max_running_requests`, `version`),
    /// no `/version`, `sglang:*` metrics, `reasoning_content` deltas, flat error bodies
    /// (`{"object": "error", "message": …}`), `owned_by: "sglang"`.
    Sglang,
}

/// Everything a twin needs to start.
#[derive(Debug, Clone)]
pub struct TwinConfig {
    /// The engine profile, with any overrides (served name, max_model_len, speculative
    /// tokens, prefix cache, engine version) already applied.
    pub profile: Profile,
    /// Seed of every random choice (speculative acceptance, answer lengths, text, faults).
    pub seed: u64,
    /// When set, `/v1/*` needs `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// Faults to inject.
    pub faults: Vec<Fault>,
    /// Where to write the JSON Lines trace.
    pub trace: Option<PathBuf>,
    /// Stream the first part of each chat answer as reasoning (None = no reasoning parser).
    pub reasoning: Option<ReasoningField>,
    /// Length of the reasoning part (tokens).
    pub reasoning_tokens: u32,
    /// Range of answer lengths (tokens) when `ignore_eos` is off; drawn per request.
    pub answer_tokens: (u32, u32),
    /// Speed of the twin clock relative to real time (1 = real time; 10 = the schedule runs ten
    /// times faster, trace times stay in twin ms). For tests of long schedules.
    pub time_scale: f64,
    /// The server the twin imitates on the wire.
    pub flavor: Flavor,
}

impl TwinConfig {
    /// Defaults for `profile`: seed 0, no key, no faults, no trace, no reasoning, answers of
    /// 16…512 tokens, real time.
    pub fn new(profile: Profile) -> TwinConfig {
        TwinConfig {
            profile,
            seed: 0,
            api_key: None,
            faults: Vec::new(),
            trace: None,
            reasoning: None,
            reasoning_tokens: 64,
            answer_tokens: (16, 512),
            time_scale: 1.0,
            flavor: Flavor::Vllm,
        }
    }
}

/// A running twin. Dropping it without [`TwinHandle::shutdown`] leaves the server running
/// until the runtime ends.
pub struct TwinHandle {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: JoinHandle<()>,
    engine: Option<std::thread::JoinHandle<()>>,
    state: Arc<server::AppState>,
    trace: trace::TraceSink,
}

impl std::fmt::Debug for TwinHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwinHandle").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl TwinHandle {
    /// The bound address (the real port when started on port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT` without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stop accepting, end open streams (they are cut: the engine stops), wait up to 2 s for
    /// connections to close, and flush the trace.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        server::stop_engine(&self.state);
        if let Some(engine) = self.engine.take() {
            let _ = tokio::task::spawn_blocking(move || engine.join()).await;
        }
        if tokio::time::timeout(Duration::from_secs(2), &mut self.server).await.is_err() {
            self.server.abort();
        }
        // Give dropped streams a moment to write their trace lines.
        tokio::task::yield_now().await;
        self.trace.flush();
    }

    /// Flush the trace file now (lines of requests that have ended).
    pub fn flush_trace(&self) {
        self.trace.flush();
    }
}

/// Start a twin on `addr` (e.g. `127.0.0.1:0`). Must be called inside a tokio runtime.
pub async fn start(config: TwinConfig, addr: &str) -> std::io::Result<TwinHandle> {
    let trace = match &config.trace {
        Some(p) => trace::TraceSink::create(p)?,
        None => trace::TraceSink::none(),
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let clock = trace::Clock::start(config.time_scale);
    let (state, rx) = server::AppState::new(config, clock, trace.clone());
    let engine = {
        let state = Arc::clone(&state);
        std::thread::Builder::new().name("twin-engine".into()).spawn(move || server::engine_loop(state, rx))?
    };
    let app = server::router(Arc::clone(&state));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        // vLLM's server (uvicorn) sends with TCP_NODELAY; without it, Nagle's algorithm holds the
        // first chunk after the headers until the client's delayed ACK (~40 ms on Linux).
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .await;
    });
    Ok(TwinHandle { addr: local, stop: Some(stop_tx), server, engine: Some(engine), state, trace })
}

/// Build the configuration from `speedmatrix simulate` flags.
pub fn config_from_args(args: &SimulateArgs) -> Result<TwinConfig, crate::Error> {
    let mut profile = Profile::by_name(&args.profile).map_err(|e| crate::Error::Input(e.to_string()))?;
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
        crate::cli::FlavorArg::Vllm => Flavor::Vllm,
        crate::cli::FlavorArg::Sglang => Flavor::Sglang,
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
pub fn run_cli(args: &SimulateArgs) -> Result<(), crate::Error> {
    let cfg = config_from_args(args)?;
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| crate::Error::Other(e.into()))?;
    rt.block_on(async {
        let addr = format!("{}:{}", args.host, args.port);
        let twin = start(cfg, &addr).await.map_err(|e| crate::Error::Input(format!("cannot listen on {addr}: {e}")))?;
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
