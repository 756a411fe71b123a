//! # speedmatrix-twin
//!
//! The twin behind `speedmatrix simulate`: a vLLM-shaped HTTP server on loopback whose timing
//! follows a measured run, so the collector, the viewer and every test run without a GPU. It
//! depends on nothing of the collector; the command-line glue lives in the `speedmatrix`
//! binary (`collector/src/simulate.rs`).
//!
//! - [`profile`]: the profiles (`h200-qwen3.5-122b`, the fit of the seed run; `tiny`);
//! - [`engine`]: the front end and the continuous-batching engine model, pure and deterministic
//!   (simulated time);
//! - [`fit`]: a profile from any results file (`speedmatrix simulate --fit RUN.json`);
//! - [`replay`]: a run's cells replayed on a profile in simulated time, measured the way the
//!   run was measured — the residual table;
//! - `server` (private): axum routes, the real-time engine loop, SSE writing, `/metrics`;
//! - [`tokenizer`]: the filler-word tokenizer that `/tokenize`, `usage` and the stream agree on;
//! - [`faults`]: `--fault` injection;
//! - [`trace`]: the twin's clock and its JSON Lines ground truth.
//!
//! In-process use (tests):
//!
//! ```no_run
//! # async fn demo() -> Result<(), speedmatrix_twin::StartError> {
//! use speedmatrix_twin::{self as twin, Profile, TwinConfig};
//! let twin = twin::start(TwinConfig::new(Profile::tiny()), "127.0.0.1:0").await?;
//! let base = twin.url(); // http://127.0.0.1:PORT
//! # let _ = base;
//! twin.shutdown().await;
//! # Ok(()) }
//! ```

pub mod engine;
pub mod faults;
pub mod fit;
pub mod profile;
pub mod rate_fit;
pub mod rate_replay;
pub mod replay;
mod server;
pub mod tokenizer;
pub mod trace;

pub use faults::{Fault, FaultKind};
pub use profile::Profile;

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
    /// (`{"object": "error", "message": …}`); `/v1/models` says `owned_by: "speedmatrix-twin"` in every flavor.
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
    /// Ngram speculation (`simulate --spec-decode ngram:K`): each request's drafts are accepted
    /// with a probability that grows with how repetitive its prompt is
    /// ([`engine::ngram_acceptance`]), drawn from a generator seeded by the seed and the
    /// prompt's tokens; off: the profile's `accept_rate` for every request (MTP).
    pub spec_ngram: bool,
    /// The SGLang version the twin reports as `--flavor sglang` (`/get_server_info` `version`,
    /// with the twin's label); the vLLM flavour reports the profile's `engine_version`.
    pub sglang_version: String,
}

/// The SGLang version a twin of the SGLang flavour imitates unless told another.
pub const SGLANG_VERSION: &str = "0.5.4";

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
            sglang_version: SGLANG_VERSION.to_string(),
            spec_ngram: false,
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
        // Let every request's guard write its trace line: the streams the engine's stop ended
        // (or the client left) drop their guards on their connections' tasks, which may run
        // after this one — a single yield lost a line of a request the client had cancelled at
        // its window's close on a busy machine (collector_twin's trace lookup, CI of 1a26422).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while self.state.open_guards.load(std::sync::atomic::Ordering::SeqCst) > 0
            && std::time::Instant::now() < deadline
        {
            // Lines an aborted request left for the engine (speculative decoding) are written
            // with what the engine counted: it has stopped.
            server::flush_spec_lines(&self.state);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.trace.flush();
    }
}

/// Why a twin did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The trace file (`--trace`) cannot be created.
    #[error("cannot create the trace file {}: {error}", path.display())]
    Trace {
        /// The path given.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The address cannot be bound (in use, not an address, not ours).
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        /// The address given.
        addr: String,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The engine's thread cannot be started.
    #[error("cannot start the twin's engine thread: {error}")]
    EngineThread {
        /// What the OS said.
        error: std::io::Error,
    },
}

/// Start a twin on `addr` (e.g. `127.0.0.1:0`). Must be called inside a tokio runtime.
pub async fn start(config: TwinConfig, addr: &str) -> Result<TwinHandle, StartError> {
    let trace = match &config.trace {
        Some(p) => trace::TraceSink::create(p).map_err(|error| StartError::Trace { path: p.clone(), error })?,
        None => trace::TraceSink::none(),
    };
    let listen = |error| StartError::Listen { addr: addr.to_string(), error };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(listen)?;
    let local = listener.local_addr().map_err(listen)?;
    let clock = trace::Clock::start(config.time_scale);
    let (state, rx) = server::AppState::new(config, clock, trace.clone());
    let engine = {
        let state = Arc::clone(&state);
        std::thread::Builder::new()
            .name("twin-engine".into())
            .spawn(move || server::engine_loop(state, rx))
            .map_err(|error| StartError::EngineThread { error })?
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
