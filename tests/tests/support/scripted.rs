//! Scripted OpenAI-compatible servers on 127.0.0.1 for server shapes the twin does not have:
//! keep-alive comments during a long prefill, `/metrics` in other exporters' text or slow to
//! answer, an HTML chat endpoint, empty streams, streams without `[DONE]`, a server that runs
//! only K requests at once and lets the rest wait with no gauge to say so, usage that reports
//! cached prompt tokens; and faults: error answers for some decode requests (429 with
//! `Retry-After`, a proxy's HTML 502), a key revoked mid-run, response headers that come late,
//! a context limit below the advertised `max_model_len`; live vLLM gauges whose running count
//! leaves out requests still in the server's front end (or held by a gateway in front of it)
//! while its own queue reads 0.
//!
//! Each is a real axum server on a loopback socket, answering what discovery and the prompt
//! builder ask (`/v1/models`, `/tokenize`, `/metrics`, `/version` → 404) and streaming
//! completions as its [`Script`] says. It keeps every request body it received, so a test can
//! check what the collector asked for.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};

/// What the chat and completions endpoints answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// An SSE stream shaped by [`Script::stream`].
    Stream,
    /// A proxy's HTML page with HTTP 200 (a login page, an error page served as success).
    Html,
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
    /// `/metrics` answers live vLLM gauges (instead of [`Script::metrics`]):
    /// `vllm:num_requests_running` counts the streams admitted and not yet ended, and
    /// `vllm:num_requests_waiting` is always 0 — the engine's own queue is empty; requests held
    /// by [`Script::max_running`] wait in front of it, as behind a gateway.
    pub live_gauges: bool,
    /// A streamed request spends this long in the front end (tokenizing, routing) before it is
    /// admitted and counts as running.
    pub admit_delay: Duration,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            model: "scripted".into(),
            max_model_len: 32_768,
            metrics: None,
            metrics_content_type: "text/plain; version=0.0.4; charset=utf-8",
            metrics_delay: Duration::ZERO,
            answer: Answer::Stream,
            stream: StreamScript::default(),
            max_running: None,
            failing: None,
            revoke_after: None,
            header_delay: Duration::ZERO,
            context_limit: None,
            no_tokenize: false,
            live_gauges: false,
            admit_delay: Duration::ZERO,
        }
    }
}

struct AppState {
    script: Script,
    bodies: Mutex<Vec<Value>>,
    /// Decode requests (`max_tokens` > 1) received.
    decodes: std::sync::atomic::AtomicUsize,
    running: Option<Arc<Semaphore>>,
    /// Streams admitted and not yet ended (the live running gauge).
    admitted: Arc<std::sync::atomic::AtomicI64>,
}

/// Counts one admitted stream in the live running gauge until dropped.
struct Admitted(Arc<std::sync::atomic::AtomicI64>);

impl Admitted {
    fn new(count: &Arc<std::sync::atomic::AtomicI64>) -> Admitted {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Admitted(count.clone())
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A running scripted server; stops when dropped.
pub struct Scripted {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<AppState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Scripted {
    /// The JSON bodies of every completion request received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.state.bodies.lock().map(|b| b.clone()).unwrap_or_default()
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
    let state = Arc::new(AppState {
        script,
        bodies: Mutex::new(vec![]),
        decodes: Default::default(),
        running,
        admitted: Default::default(),
    });
    let app = Router::new()
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route("/tokenize", post(tokenize))
        .route("/v1/chat/completions", post(complete))
        .route("/v1/completions", post(complete))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
    let url = format!("http://{}", listener.local_addr().expect("a local address"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
    });
    Scripted { url, state, stop: Some(stop) }
}

/// Whether the key was revoked (see [`Script::revoke_after`]).
fn revoked(s: &AppState) -> bool {
    s.script.revoke_after.is_some_and(|k| s.bodies.lock().map(|b| b.len()).unwrap_or(0) >= k)
}

fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": "Unauthorized"}))).into_response()
}

async fn models(State(s): State<Arc<AppState>>) -> Response {
    if revoked(&s) {
        return unauthorized();
    }
    let m = &s.script;
    axum::Json(
        json!({"object": "list", "data": [{"id": m.model, "object": "model", "max_model_len": m.max_model_len}]}),
    )
    .into_response()
}

async fn metrics(State(s): State<Arc<AppState>>) -> Response {
    tokio::time::sleep(s.script.metrics_delay).await;
    if s.script.live_gauges {
        let running = s.admitted.load(std::sync::atomic::Ordering::SeqCst);
        let m = &s.script.model;
        let text = format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"{m}\"}} {running}\n\
             # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"{m}\"}} 0\n"
        );
        return ([(header::CONTENT_TYPE, s.script.metrics_content_type)], text).into_response();
    }
    match &s.script.metrics {
        Some(text) => ([(header::CONTENT_TYPE, s.script.metrics_content_type)], text.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

/// Tokens of a prompt, as this server counts them: one per 4 characters (rounded up) plus a
/// small chat-template overhead.
fn prompt_tokens(body: &Value) -> u64 {
    let text = match body.get("messages") {
        Some(m) => m.as_array().into_iter().flatten().filter_map(|x| x["content"].as_str()).collect::<String>(),
        None => body["prompt"].as_str().unwrap_or_default().to_string(),
    };
    (text.chars().count() as u64).div_ceil(4) + if body.get("messages").is_some() { 5 } else { 0 }
}

async fn tokenize(State(s): State<Arc<AppState>>, body: Bytes) -> Response {
    if s.script.no_tokenize {
        return (StatusCode::NOT_FOUND, axum::Json(json!({"detail": "Not Found"}))).into_response();
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    axum::Json(json!({"count": prompt_tokens(&v)})).into_response()
}

/// The answer of a request the script refuses: over the real context limit, or a failing decode
/// request.
enum Refused {
    No,
    Answer(Response),
    ResetMidStream,
}

fn refused(s: &AppState, v: &Value) -> Refused {
    let max_tokens = v["max_tokens"].as_u64().unwrap_or(16);
    if let Some(limit) = s.script.context_limit {
        let prompt = prompt_tokens(v);
        if prompt + max_tokens > limit {
            // vLLM's words and shape (OpenAI's error object) for a request over max_model_len.
            let msg = format!(
                "This model's maximum context length is {limit} tokens. However, you requested {} tokens ({prompt} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.",
                prompt + max_tokens
            );
            let body =
                json!({"object": "error", "message": msg, "type": "BadRequestError", "param": null, "code": 400});
            return Refused::Answer((StatusCode::BAD_REQUEST, axum::Json(body)).into_response());
        }
    }
    if max_tokens <= 1 {
        return Refused::No;
    }
    let n = s.decodes.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    let Some(f) = s.script.failing.as_ref().filter(|f| (f.from..f.from + f.count).contains(&n)) else {
        return Refused::No;
    };
    if f.reset_mid_stream {
        return Refused::ResetMidStream;
    }
    let mut r = Response::new(Body::from(f.body.clone()));
    *r.status_mut() = StatusCode::from_u16(f.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(f.content_type));
    if let Some(secs) = f.retry_after {
        r.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
    }
    if let Some(after) = f.retry_after_date {
        let date = httpdate::fmt_http_date(std::time::SystemTime::now() + after);
        r.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_str(&date).expect("an HTTP date"));
    }
    Refused::Answer(r)
}

/// The body's sender; with `reset`, the body fails after 3 token chunks (hyper then cuts the
/// connection without ending the chunked body).
struct Sender {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    reset: bool,
    sent: usize,
}

impl Sender {
    async fn send(&mut self, b: Bytes) -> Result<(), ()> {
        if self.reset && self.sent >= 3 {
            let _ = self.tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "scripted reset"))).await;
            return Err(());
        }
        if b.starts_with(b"data: {") {
            self.sent += 1;
        }
        self.tx.send(Ok(b)).await.map_err(|_| ())
    }
}

/// One stream's frames, written as the script says.
struct Writer {
    chat: bool,
    id: String,
    prompt: u64,
    cached: Option<u64>,
    per_chunk_usage: bool,
}

impl Writer {
    fn usage(&self, completion: u64) -> Value {
        let mut u = json!({"prompt_tokens": self.prompt, "completion_tokens": completion,
                           "total_tokens": self.prompt + completion});
        if let Some(c) = self.cached {
            u["prompt_tokens_details"] = json!({"cached_tokens": c});
        }
        u
    }

    fn chunk(&self, text: Option<&str>, finish: Option<&str>, sent: u64) -> Bytes {
        let choice = if self.chat {
            let delta = match text {
                Some(t) => json!({"content": t}),
                None => json!({}),
            };
            json!({"index": 0, "delta": delta, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": text.unwrap_or(""), "finish_reason": finish})
        };
        let mut v = json!({"id": self.id, "object": "chat.completion.chunk", "choices": [choice]});
        if self.per_chunk_usage {
            v["usage"] = self.usage(sent);
        }
        Bytes::from(format!("data: {v}\n\n"))
    }
}

async fn complete(State(s): State<Arc<AppState>>, uri: axum::http::Uri, body: Bytes) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if revoked(&s) {
        return unauthorized();
    }
    if let Ok(mut b) = s.bodies.lock() {
        b.push(v.clone());
    }
    tokio::time::sleep(s.script.header_delay).await;
    let reset = match refused(&s, &v) {
        Refused::Answer(answer) => return answer,
        Refused::ResetMidStream => true,
        Refused::No => false,
    };
    if s.script.answer == Answer::Html {
        let page = "<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please sign in.</body></html>";
        return ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response();
    }
    let max_tokens = v["max_tokens"].as_u64().unwrap_or(16);
    if v["stream"].as_bool() != Some(true) {
        // A non-streamed completion (the prompt builder's probes): its usage, always.
        let (prompt, text) = (prompt_tokens(&v), "w ".repeat(max_tokens as usize));
        let usage =
            json!({"prompt_tokens": prompt, "completion_tokens": max_tokens, "total_tokens": prompt + max_tokens});
        let choice = json!({"index": 0, "message": {"role": "assistant", "content": text}, "text": text, "finish_reason": "length"});
        return axum::Json(json!({"id": "scripted", "object": "chat.completion", "choices": [choice], "usage": usage}))
            .into_response();
    }
    let so = &v["stream_options"];
    let n = s.bodies.lock().map(|b| b.len()).unwrap_or(0);
    let st = &s.script.stream;
    let w = Writer {
        chat: uri.path().contains("chat"),
        id: format!("scripted-{n}"),
        prompt: prompt_tokens(&v),
        cached: st.cached_tokens,
        per_chunk_usage: st.per_chunk_usage && so["continuous_usage_stats"].as_bool() == Some(true),
    };
    let final_usage = st.final_usage && so["include_usage"].as_bool() == Some(true);
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let mut tx = Sender { tx, reset, sent: 0 };
    let st = st.clone();
    let running = s.running.clone();
    let (admit_delay, admitted) = (s.script.admit_delay, s.admitted.clone());
    tokio::spawn(async move {
        // Waiting for a free place (no gauge says so), then the prefill, with keep-alives in both
        // (a queued request on a server that pings is alive, not stalled).
        let _permit = match &running {
            Some(sem) => {
                let acquire = sem.clone().acquire_owned();
                tokio::pin!(acquire);
                loop {
                    let Some(every) = st.keepalive_every else { break (&mut acquire).await.ok() };
                    tokio::select! {
                        p = &mut acquire => break p.ok(),
                        _ = tokio::time::sleep(every) => if tx.send(Bytes::from_static(b": ping\n\n")).await.is_err() {
                            return;
                        },
                    }
                }
            }
            None => None,
        };
        tokio::time::sleep(admit_delay).await;
        let _running = Admitted::new(&admitted);
        let mut left = st.prefill;
        while let Some(every) = st.keepalive_every.filter(|_| !left.is_zero()) {
            let step = every.min(left);
            tokio::time::sleep(step).await;
            left -= step;
            if tx.send(Bytes::from_static(b": ping\n\n")).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(left).await;
        if w.chat {
            let role = json!({"id": w.id, "object": "chat.completion.chunk",
                              "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]});
            if tx.send(Bytes::from(format!("data: {role}\n\n"))).await.is_err() {
                return;
            }
        }
        let mut sent = 0u64;
        let mut i = 0usize;
        let (end, why) = match st.stop_after {
            Some(k) if k < max_tokens => (k, "stop"),
            _ => (max_tokens, "length"),
        };
        while !st.empty && sent < end {
            if st.pings_after.is_some_and(|p| sent >= p) {
                let every = st.keepalive_every.unwrap_or(Duration::from_millis(200));
                loop {
                    tokio::time::sleep(every).await;
                    if tx.send(Bytes::from_static(b": ping\n\n")).await.is_err() {
                        return;
                    }
                }
            }
            let k = u64::from(st.tokens_per_chunk[i % st.tokens_per_chunk.len()]).min(end - sent).max(1);
            i += 1;
            sent += k;
            let text = "w ".repeat(k as usize);
            let finish = (sent >= end).then_some(why);
            if tx.send(w.chunk(Some(&text), finish, sent)).await.is_err() {
                return;
            }
            if sent < end {
                tokio::time::sleep(st.gap).await;
            }
        }
        if st.empty && tx.send(w.chunk(None, Some("length"), 0)).await.is_err() {
            return;
        }
        if final_usage {
            let u = json!({"id": w.id, "object": "chat.completion.chunk", "choices": [], "usage": w.usage(sent)});
            if tx.send(Bytes::from(format!("data: {u}\n\n"))).await.is_err() {
                return;
            }
        }
        if st.done {
            let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
        }
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(body))
        .into_response()
}
