//! Scripted OpenAI-compatible servers on 127.0.0.1 for server shapes the twin does not have:
//! keep-alive comments during a long prefill, `/metrics` in other exporters' text or slow to
//! answer (always, or while streams are open), an HTML chat endpoint, empty streams, streams
//! without `[DONE]`, a server that runs only K requests at once and lets the rest wait with no
//! gauge to say so, usage that reports cached prompt tokens; and faults: error answers for some
//! decode requests (429 with `Retry-After`, a proxy's HTML 502), a key revoked mid-run, response
//! headers that come late, a context limit below the advertised `max_model_len`; live vLLM
//! gauges whose running count leaves out requests still in the server's front end (or held by
//! a gateway in front of it) while its own queue reads 0; finish reasons that cut requests short
//! (`abort`, `error`), a server that ignores `max_tokens` either way, a `/metrics` that accepts
//! and never answers, gzip-encoded event streams, an error object with HTTP 200.
//! a gateway in front of it) while its own queue reads 0; usage that is not a running total
//! (stuck at 1, each chunk's own count) beside a true output-token counter; prefix-cache and
//! speculative-decoding counters of a server that restarts mid-run (they begin again from 0);
//! a small listen backlog and a slow `/v1/models` (the collector's warm-up in batches), and a
//! `/v1/models` that closes its connection (a warm connection gone before the cell).
//! a prefix-cache reset that answers HTTP 200 `{"success": false}` (vLLM: the reset did not
//! happen) and llama.cpp's slot erase answering 501 (no `--slot-save-path`), behind a `/props`
//! that says llama.cpp; a strict proxy in front of llama.cpp answering HTTP 400 to a body field
//! it does not know (`id_slot`).
//!
//! Each is a real axum server on a loopback socket, answering what discovery and the prompt
//! builder ask (`/v1/models`, `/tokenize`, `/metrics`, `/version` → 404) and streaming
//! completions as its [`Script`] says. It keeps every request body it received, so a test can
//! check what the collector asked for.
//!
//! Connection shapes (an idle keep-alive connection reset, a connection closed as a request
//! arrives, HTTP/1.0 answers delimited by a close, `Connection: close` on every answer) come
//! from a [`Front`] between the collector and the server ([`Script::front`]).
//!
//! Here: the script ([`Script`], [`StreamScript`], [`Failing`]) and [`start`]; `routes.rs`
//! answers `/v1/models`, `/metrics` and `/tokenize`; `stream.rs` the completion endpoints;
//! `front.rs` the [`Front`].

mod front;
mod routes;
mod stream;

pub use front::{Front, FrontLog, FrontRequest};

use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// What the chat and completions endpoints answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// An SSE stream shaped by [`Script::stream`].
    Stream,
    /// A proxy's HTML page with HTTP 200 (a login page, an error page served as success).
    Html,
    /// An OpenAI error object with HTTP 200 (`{"error": {"message": "model overloaded"}}`), to
    /// decode requests (`max_tokens` > 1) only.
    JsonError,
}

/// How every stream is written.
#[derive(Debug, Clone)]
pub struct StreamScript {
    /// Tokens per SSE chunk, cycled (`[1, 3]`: one, three, one, three … as under MTP).
    pub tokens_per_chunk: Vec<u32>,
    /// Time between chunks.
    pub gap: Duration,
    /// Before the first token (the prefill).
    pub prefill: Duration,
    /// `: ping` comments at this interval during the prefill (SGLang, proxies).
    pub keepalive_every: Option<Duration>,
    /// Cumulative `usage` on every chunk when the request asks `continuous_usage_stats`.
    pub per_chunk_usage: bool,
    /// A final usage chunk when the request asks `include_usage`.
    pub final_usage: bool,
    /// `usage.prompt_tokens_details.cached_tokens` in every usage object, when set.
    pub cached_tokens: Option<u64>,
    /// No token at all: a role chunk, a `finish_reason` chunk, usage with 0 completion tokens.
    pub empty: bool,
    /// End with `data: [DONE]`.
    pub done: bool,
    /// After this many tokens, nothing but `: ping` comments (every `keepalive_every`, else
    /// every 200 ms) until the client gives up: a proxy in front of a stuck engine.
    pub pings_after: Option<u64>,
    /// End every request after this many tokens with `finish_reason: "stop"`, whatever
    /// `max_tokens` and `ignore_eos` say (a server that ignores `ignore_eos`).
    pub stop_after: Option<u64>,
    /// End every request after this many tokens with this `finish_reason` (`"abort"`,
    /// `"error"`, `"length"`), whatever `max_tokens` says.
    pub end_after: Option<(u64, &'static str)>,
    /// Run every request to this many tokens (`finish_reason: "length"`), whatever `max_tokens`
    /// says, the prefill probe's `max_tokens: 1` included (a server that ignores it).
    pub run_to: Option<u64>,
    /// Compress the event stream with gzip (`Content-Encoding: gzip`, a sync flush per frame),
    /// as a proxy may do unasked.
    pub gzip: bool,
    /// What `usage.completion_tokens` holds on each chunk ([`StreamScript::per_chunk_usage`]).
    pub chunk_usage_count: UsageCount,
    /// What `usage.completion_tokens` holds in the final usage chunk.
    pub final_usage_count: UsageCount,
}

/// What a usage object's `completion_tokens` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageCount {
    /// The running total: every token sent so far (what OpenAI's API means).
    Total,
    /// 1, whatever was sent (the shape of sglang#7084: a prefill/decode-disaggregated server).
    One,
    /// The tokens of this chunk only (of the last chunk, in the final usage).
    Own,
}

impl Default for StreamScript {
    fn default() -> Self {
        StreamScript {
            tokens_per_chunk: vec![1],
            gap: Duration::from_millis(10),
            prefill: Duration::from_millis(20),
            keepalive_every: None,
            per_chunk_usage: true,
            final_usage: true,
            cached_tokens: None,
            empty: false,
            done: true,
            pings_after: None,
            stop_after: None,
            end_after: None,
            run_to: None,
            gzip: false,
            chunk_usage_count: UsageCount::Total,
            final_usage_count: UsageCount::Total,
        }
    }
}

/// Decode requests (`max_tokens` > 1, numbered from 1 in order of arrival) `from ..
/// from + count` answer `status` with `body` instead of a stream.
#[derive(Debug, Clone)]
pub struct Failing {
    /// The first decode request that fails (1-based).
    pub from: usize,
    /// How many fail.
    pub count: usize,
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type` of the body.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
    /// A `Retry-After` header (seconds), when set.
    pub retry_after: Option<u64>,
    /// A `Retry-After` header as an HTTP date this far after the answer, when set (gateways and
    /// CDNs write the date form).
    pub retry_after_date: Option<Duration>,
    /// Instead of `status`: stream normally, then cut the connection after 3 chunks (a reset
    /// mid-stream: no `finish_reason`, no `[DONE]`).
    pub reset_mid_stream: bool,
}

impl Default for Failing {
    fn default() -> Self {
        Failing {
            from: 1,
            count: 1,
            status: 500,
            content_type: "application/json",
            body: json!({"object": "error", "message": "Internal Server Error", "type": "InternalServerError", "code": 500})
                .to_string(),
            retry_after: None,
            retry_after_date: None,
            reset_mid_stream: false,
        }
    }
}

/// A scripted server.
#[derive(Debug, Clone)]
pub struct Script {
    /// The served model name.
    pub model: String,
    /// `max_model_len` in `/v1/models`.
    pub max_model_len: u64,
    /// The `/metrics` body; `None` answers 404.
    pub metrics: Option<String>,
    /// The `/metrics` content type.
    pub metrics_content_type: &'static str,
    /// How long `/metrics` takes to answer (a slow exporter).
    pub metrics_delay: Duration,
    /// [`Script::metrics_delay`] only while a completion stream is open (an exporter on the
    /// event loop of busy streams): `/metrics` answers at once before and after the streams.
    pub metrics_slow_while_streaming: bool,
    /// What completions answer.
    pub answer: Answer,
    /// How streams are written.
    pub stream: StreamScript,
    /// Requests beyond this many wait (before their first token) until one ends; no gauge says
    /// so (a server without `/metrics` that queues).
    pub max_running: Option<usize>,
    /// Some decode requests fail (see [`Failing`]).
    pub failing: Option<Failing>,
    /// After this many completion requests the API key is revoked: every endpoint answers 401.
    pub revoke_after: Option<usize>,
    /// Completions wait this long before their response headers (a slow proxy or gateway).
    pub header_delay: Duration,
    /// The real context limit: a prompt + `max_tokens` above it gets vLLM's 400 "maximum
    /// context length" answer, whatever `/v1/models` advertises.
    pub context_limit: Option<u64>,
    /// `/tokenize` answers 404 (a plain OpenAI-compatible server): the collector sizes prompts
    /// with non-streamed probe requests, which this server answers with their usage.
    pub no_tokenize: bool,
    /// Non-streamed answers (the prompt builder's probes) carry no `usage` (a proxy that strips
    /// it, a plain server that leaves it out): with [`Script::no_tokenize`], nothing counts a
    /// prompt's tokens.
    pub no_probe_usage: bool,
    /// Non-streamed answers' `usage` counts 0 prompt tokens for every prompt (a proxy that fills
    /// `usage` with zeros): with [`Script::no_tokenize`], nothing counts a prompt's tokens.
    pub zero_probe_usage: bool,
    /// Streamed answers' `usage.prompt_tokens` is 0 for every prompt (the same proxy's streams).
    pub zero_stream_usage: bool,
    /// `/metrics` answers live vLLM gauges (instead of [`Script::metrics`]):
    /// `vllm:num_requests_running` counts the streams admitted and not yet ended, and
    /// `vllm:num_requests_waiting` is always 0 — the engine's own queue is empty; requests held
    /// by [`Script::max_running`] wait in front of it, as behind a gateway.
    pub live_gauges: bool,
    /// A streamed request spends this long in the front end (tokenizing, routing) before it is
    /// admitted and counts as running.
    pub admit_delay: Duration,
    /// The engine runs a stream only until it has sent this many tokens and the front end
    /// streams the rest (output processing behind a finished engine): the live running gauge
    /// counts the stream only until then. `None`: until the stream ends.
    pub engine_tokens: Option<u64>,
    /// `/metrics` answers this many requests (discovery's), then accepts every later one and
    /// never answers (an exporter stuck behind a lock).
    pub metrics_hang_after: Option<usize>,
    /// Models `/v1/models` lists after [`Script::model`] (a server that serves several).
    pub more_models: &'static [&'static str],
    /// Tokens the stream's `usage.prompt_tokens` counts beyond `/tokenize`'s count (a server
    /// whose tokenizer endpoint disagrees with its own usage).
    pub usage_prompt_extra: u64,
    /// `/metrics` answers vLLM's output-token counter, `vllm:generation_tokens_total`: every
    /// token this server wrote in a stream, as it wrote it (with the live gauges when
    /// [`Script::live_gauges`]; alone otherwise).
    pub generation_counter: bool,
    /// `(n, k)`: from the `n`-th completion request on, at most `k` streams run at once and the
    /// rest wait before their first token (a server that slows down: thermal throttling, a
    /// neighbour taking the GPU, a cache that stopped hitting). No gauge says so.
    pub slow_after: Option<(usize, usize)>,
    /// `n`: `/metrics` answers vLLM's prefix-cache and speculative-decoding counters of a
    /// server that restarts as its `n`-th completion request arrives. Before, they hold what a
    /// long run counted ([`RESTART_BASE`] each) plus every request's share; from then on, only
    /// the `n`-th request's and later ones' (a restarted server's counters begin again from 0).
    /// Each request adds, as it arrives: its prompt tokens to the queries and nine tenths of them
    /// to the hits; 10 drafts, 30 draft tokens, 15 accepted.
    pub restart_at: Option<usize>,
    /// The listen backlog (the kernel's accept queue); `None`: tokio's default (1,024).
    pub backlog: Option<u32>,
    /// How long `/v1/models` takes to answer (the collector warms its connections with it).
    pub models_delay: Duration,
    /// `/v1/models` answers with `Connection: close`, so the connection it came on closes (a
    /// warm connection the server drops before the cell: a keep-alive timeout, a proxy).
    pub models_close: bool,
    /// What `POST /reset_prefix_cache` and `POST /slots/{id}` (llama.cpp's slot erase) answer:
    /// HTTP status and JSON body; `None`: 404.
    pub reset_answer: Option<(u16, &'static str)>,
    /// What `GET /props` answers (llama.cpp: `total_slots`, `default_generation_settings`);
    /// `None`: 404.
    pub props: Option<Value>,
    /// A proxy's stand-in in front of the server, doing to the collector's connections what
    /// the [`Front`] says; `None`: the collector talks to the server itself.
    pub front: Option<Front>,
    /// Body fields a completion may not carry: one that does gets HTTP 400 with an OpenAI error
    /// object naming it (a proxy in front of llama.cpp that rejects unknown fields, e.g. `id_slot`).
    pub refuse_fields: &'static [&'static str],
}

/// One request as the server saw it: which endpoint, on which connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// `GET /v1/models`.
    pub models: bool,
    /// A completion with `max_tokens` > 1 (a decode stream, not a probe or a warm-up).
    pub decode: bool,
    /// The client's port: one connection each (on loopback, while it is open).
    pub port: u16,
}

/// What each counter of [`Script::restart_at`] holds before the restart.
pub const RESTART_BASE: u64 = 1_000_000;

impl Default for Script {
    fn default() -> Self {
        Script {
            model: "scripted".into(),
            max_model_len: 32_768,
            metrics: None,
            metrics_content_type: "text/plain; version=0.0.4; charset=utf-8",
            metrics_delay: Duration::ZERO,
            metrics_slow_while_streaming: false,
            answer: Answer::Stream,
            stream: StreamScript::default(),
            max_running: None,
            failing: None,
            revoke_after: None,
            header_delay: Duration::ZERO,
            context_limit: None,
            no_tokenize: false,
            no_probe_usage: false,
            zero_probe_usage: false,
            zero_stream_usage: false,
            live_gauges: false,
            admit_delay: Duration::ZERO,
            engine_tokens: None,
            metrics_hang_after: None,
            more_models: &[],
            usage_prompt_extra: 0,
            generation_counter: false,
            slow_after: None,
            restart_at: None,
            backlog: None,
            models_delay: Duration::ZERO,
            models_close: false,
            reset_answer: None,
            props: None,
            front: None,
            refuse_fields: &[],
        }
    }
}

/// What every handler of one server shares.
struct AppState {
    script: Script,
    /// Every completion request's JSON body, in order of arrival.
    bodies: Mutex<Vec<Value>>,
    /// Decode requests (`max_tokens` > 1) received.
    decodes: std::sync::atomic::AtomicUsize,
    running: Option<Arc<Semaphore>>,
    /// The places of [`Script::slow_after`], for requests from its `n`-th on.
    slowed: Option<Arc<Semaphore>>,
    /// `/metrics` requests received.
    metrics_asked: std::sync::atomic::AtomicUsize,
    /// Streams admitted and not yet ended (the live running gauge).
    admitted: Arc<std::sync::atomic::AtomicI64>,
    /// Streamed answers being written: from their response headers until their task wrote the
    /// last chunk (or found the client gone).
    streaming: Arc<std::sync::atomic::AtomicI64>,
    /// Tokens written in streams so far (the generation counter).
    generated: Arc<std::sync::atomic::AtomicU64>,
    /// `/v1/models`, completions: every request, in order of arrival.
    seen: Mutex<Vec<Seen>>,
    /// `/v1/models` requests being answered now, and the most at once.
    models_open: Arc<std::sync::atomic::AtomicI64>,
    models_most: std::sync::atomic::AtomicI64,
    /// Prefix-cache resets asked for (`POST /reset_prefix_cache`, `POST /slots/{id}`).
    resets: std::sync::atomic::AtomicUsize,
}

impl AppState {
    /// Note a request on the connection from `port`.
    fn saw(&self, seen: Seen) {
        if let Ok(mut s) = self.seen.lock() {
            s.push(seen);
        }
    }
}

/// Counts one stream in a count (admitted, open) until dropped.
struct Counted(Arc<std::sync::atomic::AtomicI64>);

impl Counted {
    fn new(count: &Arc<std::sync::atomic::AtomicI64>) -> Counted {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Counted(count.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A running scripted server; stops when dropped.
pub struct Scripted {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<AppState>,
    front: Option<Arc<front::FrontState>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Scripted {
    /// The JSON bodies of every completion request received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.state.bodies.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// Every `/v1/models` and completion request so far, with its connection's port.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// The most `/v1/models` requests the server was answering at once.
    pub fn models_most_at_once(&self) -> i64 {
        self.state.models_most.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Prefix-cache resets asked for so far.
    pub fn resets(&self) -> usize {
        self.state.resets.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// What the [`Front`] saw and did (empty without one).
    pub fn front_log(&self) -> FrontLog {
        self.front.as_ref().map(|f| f.log()).unwrap_or_default()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Start `script` on a free loopback port (inside the caller's tokio runtime).
pub async fn start(script: Script) -> Scripted {
    let running = script.max_running.map(|k| Arc::new(Semaphore::new(k)));
    let script_slowed = script.slow_after.map(|(_, k)| Arc::new(Semaphore::new(k)));
    let state = Arc::new(AppState {
        script,
        bodies: Mutex::new(vec![]),
        decodes: Default::default(),
        metrics_asked: Default::default(),
        running,
        slowed: script_slowed,
        admitted: Default::default(),
        streaming: Default::default(),
        generated: Default::default(),
        seen: Default::default(),
        models_open: Default::default(),
        models_most: Default::default(),
        resets: Default::default(),
    });
    let app = Router::new()
        .route("/v1/models", get(routes::models))
        .route("/metrics", get(routes::metrics))
        .route("/tokenize", post(routes::tokenize))
        .route("/reset_prefix_cache", post(routes::reset))
        .route("/slots/{id}", post(routes::reset))
        .route("/props", get(routes::props))
        .route("/v1/chat/completions", post(stream::complete))
        .route("/v1/completions", post(stream::complete))
        .with_state(state.clone());
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket.bind("127.0.0.1:0".parse().expect("an address")).expect("bind 127.0.0.1:0");
    let listener = socket.listen(state.script.backlog.unwrap_or(1024)).expect("listen");
    let addr = listener.local_addr().expect("a local address");
    let (url, front) = match state.script.front {
        Some(f) => {
            let (at, front) = front::start(f, addr).await;
            (format!("http://{at}"), Some(front))
        }
        None => (format!("http://{addr}"), None),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
    });
    Scripted { url, state, front, stop: Some(stop) }
}
