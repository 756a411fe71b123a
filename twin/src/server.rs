//! The HTTP side of the twin: axum routes shaped like vLLM's OpenAI-compatible server
//! (DESIGN §3), the real-time engine loop, SSE writing and `/metrics`.

use super::engine::{block_hashes, Counters, Engine, Submit};
use super::faults::{self, FaultKind, Struck};
use super::tokenizer::{self, Message};
use super::trace::{ChunkRecord, Clock, RequestRecord, TraceSink};
use super::{Flavor, ReasoningField, TwinConfig};
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// A step's output for one request, as the engine loop hands it to the request's writer.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    tokens: u32,
    planned_ms: f64,
    first: bool,
    finished: bool,
    cached: u32,
}

/// What the handlers tell the engine thread.
pub(crate) enum EngineCmd {
    /// A new request and where its outputs go.
    Submit(Submit, mpsc::UnboundedSender<Delivery>),
    /// The client is gone: drop the request.
    Abort(u64),
    /// Stop the engine (twin shutdown); open streams are cut.
    Shutdown,
}

/// Prometheus histogram with fixed buckets (seconds).
#[derive(Debug, Clone)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram { bounds, counts: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }
    fn observe(&mut self, v: f64) {
        for (i, b) in self.bounds.iter().enumerate() {
            if v <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }
}

const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];
const ITL_BUCKETS: &[f64] =
    &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
const E2E_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
];

#[derive(Debug, Clone)]
struct Metrics {
    counters: Counters,
    running: usize,
    waiting: usize,
    kv_usage: f64,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    success: HashMap<&'static str, u64>,
}

/// Everything the handlers share.
pub(crate) struct AppState {
    pub(crate) cfg: TwinConfig,
    pub(crate) clock: Clock,
    pub(crate) trace: TraceSink,
    engine_tx: std::sync::mpsc::Sender<EngineCmd>,
    metrics: Mutex<Metrics>,
    next_request: AtomicU64,
    next_call: AtomicU64,
}

impl AppState {
    pub(crate) fn new(
        cfg: TwinConfig,
        clock: Clock,
        trace: TraceSink,
    ) -> (Arc<AppState>, std::sync::mpsc::Receiver<EngineCmd>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let state = AppState {
            cfg,
            clock,
            trace,
            engine_tx: tx,
            metrics: Mutex::new(Metrics {
                counters: Counters::default(),
                running: 0,
                waiting: 0,
                kv_usage: 0.0,
                ttft: Histogram::new(TTFT_BUCKETS),
                itl: Histogram::new(ITL_BUCKETS),
                e2e: Histogram::new(E2E_BUCKETS),
                success: HashMap::new(),
            }),
            next_request: AtomicU64::new(1),
            next_call: AtomicU64::new(1),
        };
        (Arc::new(state), rx)
    }

    fn endpoint_fault(&self, kind: FaultKind) -> bool {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        let relevant: Vec<_> = self.cfg.faults.iter().filter(|f| f.kind == kind).cloned().collect();
        !faults::draw(&relevant, self.cfg.seed ^ 0xe7d, n).0.is_empty()
    }
}

/// Ask the engine thread to stop.
pub(crate) fn stop_engine(state: &AppState) {
    let _ = state.engine_tx.send(EngineCmd::Shutdown);
}

/// The engine loop, on its own OS thread: runs the pure [`Engine`] in real time. Steps run
/// back to back while there is work. A step's outputs leave one after another, as vLLM's API
/// server hands them out: the i-th output of a step is planned at
/// `step end + i × output_ms_per_request` and is handed to its request's writer when the twin
/// clock reaches that time (while the next step already runs). Waiting is a channel receive
/// with a deadline, so commands (new requests, aborts) are applied as they come and deadlines
/// are met to within the OS timer's precision (tens of µs), not a 1 ms timer tick.
pub(crate) fn engine_loop(state: Arc<AppState>, rx: std::sync::mpsc::Receiver<EngineCmd>) {
    use std::sync::mpsc::RecvTimeoutError;
    let profile = &state.cfg.profile;
    let per_output_ms = profile.output_ms_per_request.max(0.0);
    let mut engine = Engine::new(profile, state.cfg.seed);
    let mut senders: HashMap<u64, mpsc::UnboundedSender<Delivery>> = HashMap::new();
    // id → (arrival ms, last output ms)
    let mut times: HashMap<u64, (f64, f64)> = HashMap::new();
    // Outputs planned but not yet handed to their writers, in planned order.
    let mut pending: VecDeque<(u64, Delivery)> = VecDeque::new();
    let mut current: Option<super::engine::Step> = None;
    let mut prev_end: Option<f64> = None;
    // Apply a command; false on shutdown.
    let apply = |cmd: EngineCmd,
                 engine: &mut Engine,
                 senders: &mut HashMap<u64, mpsc::UnboundedSender<Delivery>>,
                 times: &mut HashMap<u64, (f64, f64)>|
     -> bool {
        match cmd {
            EngineCmd::Submit(s, tx) => {
                times.insert(s.id, (s.arrival_ms, s.arrival_ms));
                senders.insert(s.id, tx);
                engine.submit(s);
                true
            }
            EngineCmd::Abort(id) => {
                engine.abort(id);
                senders.remove(&id);
                times.remove(&id);
                true
            }
            EngineCmd::Shutdown => false,
        }
    };
    let publish = |engine: &Engine, state: &AppState| {
        let mut m = state.metrics.lock().expect("metrics lock");
        m.running = engine.num_running();
        m.waiting = engine.num_waiting();
        m.kv_usage = engine.kv_usage();
        m.counters = engine.counters.clone();
    };
    loop {
        if current.is_none() && !engine.is_idle() {
            let start = prev_end.unwrap_or_else(|| state.clock.now_ms());
            current = engine.step(start);
            publish(&engine, &state);
            if current.is_none() {
                prev_end = None;
            }
        }
        let next_wake = match (&current, pending.front()) {
            (Some(s), Some((_, d))) => Some(s.end_ms.min(d.planned_ms)),
            (Some(s), None) => Some(s.end_ms),
            (None, Some((_, d))) => Some(d.planned_ms),
            (None, None) => None,
        };
        // Wait for the deadline, applying commands as they come.
        match next_wake {
            None => {
                prev_end = None;
                publish(&engine, &state);
                match rx.recv() {
                    Ok(cmd) => {
                        if !apply(cmd, &mut engine, &mut senders, &mut times) {
                            return;
                        }
                    }
                    Err(_) => return,
                }
                continue;
            }
            Some(wake) => {
                let deadline = state.clock.instant_at(wake);
                let now = std::time::Instant::now();
                if deadline > now {
                    match rx.recv_timeout(deadline - now) {
                        Ok(cmd) => {
                            if !apply(cmd, &mut engine, &mut senders, &mut times) {
                                return;
                            }
                            continue;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            }
        }
        let now = state.clock.now_ms();
        if current.as_ref().is_some_and(|s| s.end_ms <= now) {
            let step = current.take().expect("checked");
            let t = step.end_ms;
            let mut m = state.metrics.lock().expect("metrics lock");
            for (i, o) in step.outputs.into_iter().enumerate() {
                let planned = t + i as f64 * per_output_ms;
                if let Some((arrival, last)) = times.get_mut(&o.id) {
                    if o.first {
                        m.ttft.observe((planned - *arrival) / 1000.0);
                    } else {
                        m.itl.observe((planned - *last) / 1000.0 / o.tokens.max(1) as f64);
                    }
                    *last = planned;
                    if o.finished {
                        m.e2e.observe((planned - *arrival) / 1000.0);
                    }
                }
                if o.finished {
                    times.remove(&o.id);
                }
                pending.push_back((
                    o.id,
                    Delivery {
                        tokens: o.tokens,
                        planned_ms: planned,
                        first: o.first,
                        finished: o.finished,
                        cached: o.cached_tokens,
                    },
                ));
            }
            m.counters = engine.counters.clone();
            m.running = engine.num_running();
            m.waiting = engine.num_waiting();
            m.kv_usage = engine.kv_usage();
            drop(m);
            prev_end = Some(t);
        }
        while pending.front().is_some_and(|(_, d)| d.planned_ms <= now) {
            let (id, d) = pending.pop_front().expect("checked");
            if d.finished {
                if let Some(tx) = senders.remove(&id) {
                    let _ = tx.send(d);
                }
            } else if let Some(tx) = senders.get(&id) {
                let _ = tx.send(d);
            }
        }
    }
}

/// The router with every route of the twin.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let v1 = Router::new()
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/health", get(health))
        .route("/version", get(version))
        .route("/tokenize", post(tokenize))
        .route("/metrics", get(metrics))
        .route("/get_server_info", get(server_info))
        .merge(v1)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), flavor_errors))
        .layer(DefaultBodyLimit::max(256 * 1024 * 1024))
        .with_state(state)
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut r = Response::new(Body::from(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// vLLM's error body: `{"error": {"message", "type", "param", "code"}}`.
fn error_value(status: StatusCode, kind: &str, message: &str, param: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": param, "code": status.as_u16()}})
}

fn error(status: StatusCode, kind: &str, message: &str, param: Option<&str>) -> Response {
    json_response(status, &error_value(status, kind, message, param))
}

/// A request error in vLLM's shape (kept small; becomes a [`Response`] at the edge).
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    param: Option<&'static str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error(self.status, self.kind, &self.message, self.param)
    }
}

fn bad_request(message: &str) -> ApiError {
    ApiError { status: StatusCode::BAD_REQUEST, kind: "BadRequestError", message: message.to_string(), param: None }
}

async fn not_found() -> Response {
    json_response(StatusCode::NOT_FOUND, &json!({"detail": "Not Found"}))
}

async fn auth(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(key) = &state.cfg.api_key {
        let ok = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|k| k.trim() == key);
        if !ok {
            return json_response(StatusCode::UNAUTHORIZED, &json!({"error": "Unauthorized"}));
        }
    }
    next.run(req).await
}

async fn health() -> StatusCode {
    StatusCode::OK
}

/// SGLang answers errors flat: `{"object": "error", "message", "type", "param", "code"}`.
/// The handlers write vLLM's `{"error": {…}}`; this rewrites it for `--flavor sglang`.
async fn flavor_errors(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    if state.cfg.flavor != Flavor::Sglang || !(resp.status().is_client_error() || resp.status().is_server_error()) {
        return resp;
    }
    let status = resp.status();
    let Ok(bytes) = axum::body::to_bytes(resp.into_body(), 1 << 20).await else {
        return error(status, "InternalServerError", "error body unreadable", None);
    };
    let flat = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(mut m)) => match m.remove("error") {
            Some(Value::Object(e)) => {
                let mut out = serde_json::Map::new();
                out.insert("object".into(), Value::from("error"));
                out.extend(e);
                Value::Object(out)
            }
            Some(Value::String(msg)) => json!({"object": "error", "message": msg, "code": status.as_u16()}),
            _ => {
                json!({"object": "error", "message": m.get("detail").cloned().unwrap_or(Value::Null), "code": status.as_u16()})
            }
        },
        _ => json!({"object": "error", "message": String::from_utf8_lossy(&bytes), "code": status.as_u16()}),
    };
    json_response(status, &flat)
}

/// SGLang's `/get_server_info`: its server arguments, the KV pool size and the version.
async fn server_info(State(state): State<Arc<AppState>>) -> Response {
    if state.cfg.flavor != Flavor::Sglang {
        return not_found().await;
    }
    let p = &state.cfg.profile;
    json_response(
        StatusCode::OK,
        &json!({
            "model_path": p.root,
            "served_model_name": p.served_name,
            "context_length": p.max_model_len,
            "max_running_requests": p.max_num_seqs,
            "max_total_num_tokens": p.kv_tokens,
            "page_size": p.block_size,
            "chunked_prefill_size": p.max_batched_tokens,
            "disable_radix_cache": !p.prefix_cache,
            "tp_size": 1,
            "version": p.engine_version,
        }),
    )
}

async fn version(State(state): State<Arc<AppState>>) -> Response {
    if state.cfg.flavor == Flavor::Sglang || state.endpoint_fault(FaultKind::Version404) {
        return not_found().await;
    }
    json_response(StatusCode::OK, &json!({"version": state.cfg.profile.engine_version}))
}

async fn models(State(state): State<Arc<AppState>>) -> Response {
    let p = &state.cfg.profile;
    json_response(
        StatusCode::OK,
        &json!({
            "object": "list",
            "data": [{
                "id": p.served_name,
                "object": "model",
                "created": unix_now(),
                "owned_by": match state.cfg.flavor { Flavor::Vllm => "vllm", Flavor::Sglang => "sglang" },
                "root": p.root,
                "parent": null,
                "max_model_len": p.max_model_len,
                "permission": [{
                    "id": format!("modelperm-{}", hex_id(state.cfg.seed, 0)),
                    "object": "model_permission",
                    "created": unix_now(),
                    "allow_create_engine": false,
                    "allow_sampling": true,
                    "allow_logprobs": true,
                    "allow_search_indices": false,
                    "allow_view": true,
                    "allow_fine_tuning": false,
                    "organization": "*",
                    "group": null,
                    "is_blocking": false
                }]
            }]
        }),
    )
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn hex_id(seed: u64, n: u64) -> String {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ n.wrapping_mul(0x2545_f491_4f6c_dd1d));
    format!("{:016x}{:016x}", r.random::<u64>(), r.random::<u64>())
}

fn parse_body(body: &Bytes) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(bad_request("The request body must be a JSON object.")),
        Err(e) => Err(bad_request(&format!("Invalid JSON in request body: {e}"))),
    }
}

fn parse_messages(v: &Value) -> Result<Vec<Message>, ApiError> {
    let arr = v.as_array().ok_or_else(|| bad_request("`messages` must be a list of messages."))?;
    let mut out = Vec::with_capacity(arr.len());
    for m in arr {
        let role =
            m.get("role").and_then(Value::as_str).ok_or_else(|| bad_request("Each message needs a string `role`."))?;
        let content = match m.get("content") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => {
                let mut s = String::new();
                for p in parts {
                    if let Some(t) = p.get("text").and_then(Value::as_str) {
                        s.push_str(t);
                    }
                }
                s
            }
            Some(_) => return Err(bad_request("Message `content` must be a string or a list of parts.")),
        };
        out.push(Message { role: role.to_string(), content });
    }
    Ok(out)
}

/// Prompt tokens of a completions `prompt`: a string, a list with one string, or token ids.
fn completion_prompt_tokens(v: Option<&Value>) -> Result<Vec<u32>, ApiError> {
    match v {
        Some(Value::String(s)) => Ok(tokenizer::encode(s)),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => Ok(tokenizer::encode(a[0].as_str().unwrap_or(""))),
        Some(Value::Array(a)) if a.iter().all(Value::is_u64) => {
            let ids: Vec<u64> = a.iter().filter_map(Value::as_u64).collect();
            if let Some(bad) = ids.iter().find(|&&t| t >= tokenizer::VOCAB as u64) {
                return Err(bad_request(&format!("Token id {bad} is out of vocabulary")));
            }
            Ok(ids.into_iter().map(|t| t as u32).collect())
        }
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_array() => completion_prompt_tokens(Some(&a[0])),
        _ => Err(bad_request("`prompt` must be a string or a list of token ids (one prompt per request).")),
    }
}

async fn tokenize(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    if state.endpoint_fault(FaultKind::Tokenize404) {
        return not_found().await;
    }
    let m = match parse_body(&body) {
        Ok(m) => m,
        Err(r) => return r.into_response(),
    };
    if let Err(r) = check_model(&state, &m) {
        return r.into_response();
    }
    let tokens = if let Some(msgs) = m.get("messages") {
        let msgs = match parse_messages(msgs) {
            Ok(x) => x,
            Err(r) => return r.into_response(),
        };
        let gen = m.get("add_generation_prompt").and_then(Value::as_bool).unwrap_or(true);
        tokenizer::encode(&tokenizer::chat_template(&msgs, gen))
    } else {
        match completion_prompt_tokens(m.get("prompt")) {
            Ok(t) => t,
            Err(r) => return r.into_response(),
        }
    };
    json_response(
        StatusCode::OK,
        &json!({
            "count": tokens.len(),
            "max_model_len": state.cfg.profile.max_model_len,
            "tokens": tokens,
            "token_strs": null,
        }),
    )
}

fn check_model(state: &AppState, m: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    match m.get("model") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if *s == state.cfg.profile.served_name => Ok(()),
        Some(v) => {
            let name = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            Err(ApiError {
                status: StatusCode::NOT_FOUND,
                kind: "NotFoundError",
                message: format!("The model `{name}` does not exist."),
                param: Some("model"),
            })
        }
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    if state.endpoint_fault(FaultKind::Metrics404) {
        return not_found().await;
    }
    let m = state.metrics.lock().expect("metrics lock").clone();
    let p = &state.cfg.profile;
    if state.cfg.flavor == Flavor::Sglang {
        return sglang_metrics(&m, &p.served_name);
    }
    let labels = format!("engine=\"0\",model_name=\"{}\"", p.served_name);
    let mut s = String::with_capacity(8192);
    let gauge = |s: &mut String, name: &str, help: &str, v: f64| {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {v:?}");
    };
    gauge(&mut s, "vllm:num_requests_running", "Number of requests in model execution batches.", m.running as f64);
    gauge(&mut s, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", m.waiting as f64);
    gauge(&mut s, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", m.kv_usage);
    let _ = writeln!(
        s,
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
         # TYPE vllm:cache_config_info gauge\n\
         vllm:cache_config_info{{block_size=\"{}\",cache_dtype=\"auto\",enable_prefix_caching=\"{}\",engine=\"0\",gpu_memory_utilization=\"0.86269\",kv_cache_size_tokens=\"{}\",num_gpu_blocks=\"{}\",num_cpu_blocks=\"None\"}} 1.0",
        p.block_size,
        if p.prefix_cache { "True" } else { "False" },
        p.kv_tokens,
        p.kv_blocks()
    );
    let c = &m.counters;
    let counter = |s: &mut String, name: &str, help: &str, v: u64| {
        let _ = writeln!(
            s,
            "# HELP {name}_total {help}\n# TYPE {name}_total counter\n{name}_total{{{labels}}} {:?}",
            v as f64
        );
    };
    counter(&mut s, "vllm:prompt_tokens", "Number of prefill tokens processed.", c.prompt_tokens);
    counter(&mut s, "vllm:generation_tokens", "Number of generation tokens processed.", c.generation_tokens);
    counter(
        &mut s,
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        c.prefix_cache_queries,
    );
    counter(
        &mut s,
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        c.prefix_cache_hits,
    );
    counter(&mut s, "vllm:num_preemptions", "Cumulative number of preemption from the engine.", c.preemptions);
    counter(&mut s, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", c.spec_drafts);
    counter(&mut s, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", c.spec_draft_tokens);
    counter(&mut s, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", c.spec_accepted_tokens);
    let _ = writeln!(s, "# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter");
    for reason in ["stop", "length", "abort"] {
        let _ = writeln!(
            s,
            "vllm:request_success_total{{{labels},finished_reason=\"{reason}\"}} {:?}",
            *m.success.get(reason).unwrap_or(&0) as f64
        );
    }
    for (name, help, h) in [
        ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &m.ttft),
        ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &m.itl),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &m.e2e),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, n) in h.bounds.iter().zip(&h.counts) {
            let _ = writeln!(s, "{name}_bucket{{{labels},le=\"{b:?}\"}} {:?}", *n as f64);
        }
        let _ = writeln!(s, "{name}_bucket{{{labels},le=\"+Inf\"}} {:?}", h.count as f64);
        let _ = writeln!(s, "{name}_count{{{labels}}} {:?}", h.count as f64);
        let _ = writeln!(s, "{name}_sum{{{labels}}} {:?}", h.sum);
    }
    let mut r = Response::new(Body::from(s));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}

/// `/metrics` with SGLang's names (`sglang:num_running_reqs`, `sglang:num_queue_reqs`,
/// `sglang:token_usage`, counters of prompt, generation and cached tokens).
fn sglang_metrics(m: &Metrics, model: &str) -> Response {
    let labels = format!("model_name=\"{model}\"");
    let mut s = String::with_capacity(2048);
    for (name, help, v) in [
        ("sglang:num_running_reqs", "The number of running requests.", m.running as f64),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", m.waiting as f64),
        ("sglang:token_usage", "The token usage.", m.kv_usage),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{labels}}} {v:?}");
    }
    let c = &m.counters;
    for (name, help, v) in [
        ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", c.prompt_tokens),
        ("sglang:generation_tokens_total", "Number of generation tokens processed.", c.generation_tokens),
        ("sglang:cached_tokens_total", "Number of cached prompt tokens.", c.prefix_cache_hits),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{{labels}}} {:?}", v as f64);
    }
    let mut r = Response::new(Body::from(s));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    r
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Endpoint {
    Chat,
    Completions,
}

async fn chat_completions(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    generate(state, Endpoint::Chat, body).await
}

async fn completions(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    generate(state, Endpoint::Completions, body).await
}

fn opt_u32(m: &serde_json::Map<String, Value>, key: &str) -> Result<Option<u32>, ApiError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n <= u32::MAX as u64 => Ok(Some(n as u32)),
            _ => Err(bad_request(&format!("`{key}` must be a non-negative integer."))),
        },
    }
}

fn opt_bool(m: &serde_json::Map<String, Value>, key: &str) -> Result<bool, ApiError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad_request(&format!("`{key}` must be a boolean."))),
    }
}

/// A validated generation request.
struct Plan {
    stream: bool,
    include_usage: bool,
    continuous_usage: bool,
    prompt_tokens: Vec<u32>,
    max_tokens: u32,
    output_len: u32,
    finish_reason: &'static str,
    text_key: u64,
}

fn plan(state: &AppState, ep: Endpoint, body: &Bytes, n: u64) -> Result<Plan, ApiError> {
    let m = parse_body(body)?;
    check_model(state, &m)?;
    let p = &state.cfg.profile;
    let prompt_tokens = match ep {
        Endpoint::Chat => {
            let msgs = parse_messages(m.get("messages").ok_or_else(|| bad_request("Field `messages` is required."))?)?;
            let gen = match m.get("add_generation_prompt") {
                Some(Value::Bool(b)) => *b,
                _ => true,
            };
            tokenizer::encode(&tokenizer::chat_template(&msgs, gen))
        }
        Endpoint::Completions => completion_prompt_tokens(m.get("prompt"))?,
    };
    if let Some(n) = m.get("n").filter(|v| !v.is_null()) {
        if n.as_u64() != Some(1) {
            return Err(bad_request("The twin serves one choice per request: `n` must be 1."));
        }
    }
    let stream = opt_bool(&m, "stream")?;
    let (mut include_usage, mut continuous_usage) = (false, false);
    if let Some(so) = m.get("stream_options").filter(|v| !v.is_null()) {
        if !stream {
            return Err(bad_request("Stream options can only be defined when `stream=True`."));
        }
        let so = so.as_object().ok_or_else(|| bad_request("`stream_options` must be an object."))?;
        include_usage = so.get("include_usage").and_then(Value::as_bool).unwrap_or(false);
        continuous_usage = so.get("continuous_usage_stats").and_then(Value::as_bool).unwrap_or(false);
    }
    if let Some(t) = m.get("temperature").filter(|v| !v.is_null()) {
        match t.as_f64() {
            Some(x) if (0.0..=2.0).contains(&x) => {}
            _ => return Err(bad_request("`temperature` must be a number between 0 and 2.")),
        }
    }
    let seed = match m.get("seed") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_i64().ok_or_else(|| bad_request("`seed` must be an integer."))?),
    };
    let ignore_eos = opt_bool(&m, "ignore_eos")?;
    let min_tokens = opt_u32(&m, "min_tokens")?.unwrap_or(0);
    let requested = match ep {
        Endpoint::Chat => opt_u32(&m, "max_completion_tokens")?.or(opt_u32(&m, "max_tokens")?),
        Endpoint::Completions => opt_u32(&m, "max_tokens")?,
    };
    let plen = prompt_tokens.len() as u64;
    let limit = p.max_model_len as u64;
    if plen >= limit {
        return Err(bad_request(&format!(
            "This model's maximum context length is {limit} tokens. However, your request has \
             {plen} input tokens. Please reduce the length of the input messages."
        )));
    }
    if plen == 0 {
        return Err(bad_request("The prompt is empty."));
    }
    let max_tokens = match requested {
        Some(0) => return Err(bad_request("`max_tokens` must be at least 1, got 0.")),
        Some(mt) if plen + mt as u64 > limit => {
            return Err(bad_request(&format!(
                "'max_tokens' or 'max_completion_tokens' is too large: {mt}. This model's \
                 maximum context length is {limit} tokens and your request has {plen} input \
                 tokens ({mt} > {limit} - {plen})."
            )))
        }
        Some(mt) => mt,
        None => (limit - plen) as u32,
    };
    if min_tokens > max_tokens {
        return Err(bad_request(&format!(
            "min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}."
        )));
    }
    let text_key = seed.map(|s| s as u64).unwrap_or(n) ^ state.cfg.seed.rotate_left(17);
    let (output_len, finish_reason) = if ignore_eos {
        (max_tokens, "length")
    } else {
        let (lo, hi) = state.cfg.answer_tokens;
        let mut r = ChaCha8Rng::seed_from_u64(text_key ^ 0xa115);
        let natural = r.random_range(lo.max(1)..=hi.max(lo.max(1))).max(min_tokens);
        if natural >= max_tokens {
            (max_tokens, "length")
        } else {
            (natural, "stop")
        }
    };
    Ok(Plan { stream, include_usage, continuous_usage, prompt_tokens, max_tokens, output_len, finish_reason, text_key })
}

/// Aborts the engine request and writes the trace line when the response ends or is dropped
/// (client gone).
struct Guard {
    state: Arc<AppState>,
    record: RequestRecord,
    engine_id: Option<u64>,
    finished: bool,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(id) = self.engine_id {
            if !self.finished {
                let _ = self.state.engine_tx.send(EngineCmd::Abort(id));
                if self.record.outcome == "complete" {
                    self.record.outcome = "disconnected";
                }
            }
        }
        if self.record.status == 200 {
            let reason = if self.finished && self.record.outcome == "complete" {
                self.record.finish_reason.unwrap_or("stop")
            } else {
                "abort"
            };
            if let Ok(mut m) = self.state.metrics.lock() {
                *m.success.entry(reason).or_insert(0) += 1;
            }
        }
        self.state.trace.write(&self.record);
    }
}

async fn generate(state: Arc<AppState>, ep: Endpoint, body: Bytes) -> Response {
    let arrival_ms = state.clock.now_ms();
    let n = state.next_request.fetch_add(1, Ordering::Relaxed);
    let id = match ep {
        Endpoint::Chat => format!("chatcmpl-{}", hex_id(state.cfg.seed, n)),
        Endpoint::Completions => format!("cmpl-{}", hex_id(state.cfg.seed, n)),
    };
    let mut guard = Guard {
        state: state.clone(),
        record: RequestRecord {
            request: n,
            id: id.clone(),
            endpoint: match ep {
                Endpoint::Chat => "chat",
                Endpoint::Completions => "completions",
            },
            arrival_ms,
            status: 200,
            outcome: "complete",
            ..Default::default()
        },
        engine_id: None,
        finished: false,
    };
    let plan = match plan(&state, ep, &body, n) {
        Ok(p) => p,
        Err(r) => {
            guard.record.status = r.status.as_u16();
            guard.record.outcome = "rejected";
            return r.into_response();
        }
    };
    let struck = faults::draw(&state.cfg.faults, state.cfg.seed, n);
    guard.record.faults = struck.names();
    guard.record.stream = plan.stream;
    guard.record.prompt_tokens = plan.prompt_tokens.len() as u32;
    guard.record.max_tokens = plan.max_tokens;
    if let Some(code) = struck.status() {
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        guard.record.status = code;
        guard.record.outcome = "fault";
        let (kind, msg) = match code {
            429 => ("RateLimitError", "Too many requests."),
            503 => ("ServiceUnavailableError", "The server is temporarily unavailable."),
            _ => ("InternalServerError", "Internal server error (injected fault)."),
        };
        return error(status, kind, msg, None);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let hashes = Arc::new(block_hashes(&plan.prompt_tokens, state.cfg.profile.block_size));
    let engine_ms = state.clock.now_ms();
    guard.record.engine_ms = Some(engine_ms);
    let submit = Submit {
        id: n,
        arrival_ms: engine_ms,
        prompt_len: plan.prompt_tokens.len() as u32,
        block_hashes: hashes,
        output_len: plan.output_len,
    };
    if state.engine_tx.send(EngineCmd::Submit(submit, tx)).is_err() {
        guard.record.status = 503;
        guard.record.outcome = "rejected";
        return error(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailableError", "The engine is shutting down.", None);
    }
    guard.engine_id = Some(n);
    let created = unix_now();
    let writer = Writer {
        ep,
        id,
        created,
        model: state.cfg.profile.served_name.clone(),
        reasoning: match (ep, state.cfg.reasoning) {
            (Endpoint::Chat, Some(f)) => Some((f, state.cfg.reasoning_tokens)),
            _ => None,
        },
        prompt_tokens: plan.prompt_tokens.len() as u32,
        text_key: plan.text_key,
        finish_reason: plan.finish_reason,
        // A server that does not know `continuous_usage_stats`, or a proxy that drops usage.
        include_usage: plan.include_usage && !struck.has(|k| *k == FaultKind::NoUsage),
        continuous_usage: plan.continuous_usage
            && !struck.has(|k| matches!(k, FaultKind::NoChunkUsage | FaultKind::NoUsage)),
        sent: 0,
    };
    if plan.stream {
        stream_response(state, guard, writer, rx, struck, plan.output_len)
    } else {
        full_response(state, guard, writer, rx).await
    }
}

/// Builds the JSON of one response.
struct Writer {
    ep: Endpoint,
    id: String,
    created: u64,
    model: String,
    reasoning: Option<(ReasoningField, u32)>,
    prompt_tokens: u32,
    text_key: u64,
    finish_reason: &'static str,
    include_usage: bool,
    continuous_usage: bool,
    /// Output tokens already put into chunks.
    sent: u32,
}

impl Writer {
    fn usage(&self, completion: u32) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + completion,
            "completion_tokens": completion,
        })
    }

    fn object(&self) -> &'static str {
        match self.ep {
            Endpoint::Chat => "chat.completion.chunk",
            Endpoint::Completions => "text_completion",
        }
    }

    /// `{"id":…,"object":…,"created":…,"model":…,"choices":[` — the same for every chunk.
    fn prefix(&self) -> String {
        format!(
            "{{\"id\":{},\"object\":\"{}\",\"created\":{},\"model\":{},\"choices\":[",
            Value::from(self.id.as_str()),
            self.object(),
            self.created,
            Value::from(self.model.as_str())
        )
    }

    /// One chunk's JSON: the shared prefix, one choice, and usage with continuous usage stats.
    ///
    /// vLLM writes chat chunks with `exclude_unset=True` (only the fields it set) and
    /// completions chunks with `exclude_unset=False` (every field, `null` when unset: `usage`,
    /// and the choice's `stop_reason`, `prompt_token_ids`, `token_ids`).
    fn chunk(&self, choice: Value, completion: u32) -> String {
        let completions = self.ep == Endpoint::Completions;
        let mut choice = choice;
        if completions {
            for key in ["stop_reason", "prompt_token_ids", "token_ids"] {
                if choice.get(key).is_none() {
                    choice[key] = Value::Null;
                }
            }
        }
        let mut out = self.prefix();
        out.push_str(&choice.to_string());
        out.push(']');
        if self.continuous_usage {
            let _ = write!(
                out,
                ",\"usage\":{{\"prompt_tokens\":{},\"total_tokens\":{},\"completion_tokens\":{}{}}}",
                self.prompt_tokens,
                self.prompt_tokens + completion,
                completion,
                if completions { ",\"prompt_tokens_details\":null" } else { "" }
            );
        } else if completions {
            out.push_str(",\"usage\":null");
        }
        out.push('}');
        out
    }

    fn role_chunk(&self) -> String {
        self.chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}),
            0,
        )
    }

    /// Split `n` new tokens into (reasoning, content) counts.
    fn split(&self, n: u32) -> (u32, u32) {
        match self.reasoning {
            Some((_, r)) => {
                let reasoning = r.saturating_sub(self.sent).min(n);
                (reasoning, n - reasoning)
            }
            None => (0, n),
        }
    }

    /// The frames for `n` new tokens: (json, tokens, kind). `last` adds `finish_reason`.
    fn token_chunks(&mut self, n: u32, last: bool) -> Vec<(String, u32, &'static str)> {
        let (r, c) = self.split(n);
        let mut out = Vec::new();
        if r > 0 {
            // Reasoning tokens are the first `reasoning_tokens` of the answer; their text
            // starts at token 0 of the reasoning channel.
            let text = tokenizer::filler(self.text_key ^ 0x7ea5, self.sent, r);
            self.sent += r;
            let field = match self.reasoning {
                Some((ReasoningField::ReasoningContent, _)) => "reasoning_content",
                _ => "reasoning",
            };
            let finish = last && c == 0;
            let choice = json!({
                "index": 0,
                "delta": {field: text},
                "logprobs": null,
                "finish_reason": if finish { Value::from(self.finish_reason) } else { Value::Null },
            });
            let mut choice = choice;
            if finish {
                choice["stop_reason"] = Value::Null;
            }
            out.push((self.chunk(choice, self.sent), r, if finish { "finish" } else { "reasoning" }));
        }
        if c > 0 {
            let start = self.sent - self.reasoning.map_or(0, |(_, r)| r.min(self.sent));
            let text = tokenizer::filler(self.text_key, start, c);
            self.sent += c;
            let mut choice = match self.ep {
                Endpoint::Chat => json!({"index": 0, "delta": {"content": text}, "logprobs": null}),
                Endpoint::Completions => json!({"index": 0, "text": text, "logprobs": null}),
            };
            if last {
                choice["finish_reason"] = Value::from(self.finish_reason);
                choice["stop_reason"] = Value::Null;
            } else {
                choice["finish_reason"] = Value::Null;
                if self.ep == Endpoint::Completions {
                    choice["stop_reason"] = Value::Null;
                }
            }
            out.push((self.chunk(choice, self.sent), c, if last { "finish" } else { "content" }));
        }
        out
    }

    fn usage_chunk(&self) -> String {
        let mut out = self.prefix();
        let _ = write!(out, "],\"usage\":{}}}", self.usage(self.sent));
        out
    }

    /// The whole (non-streamed) reasoning and content text of `n` tokens.
    fn full_text(&self, n: u32) -> (Option<String>, String) {
        match self.reasoning {
            Some((_, r)) => {
                let rn = r.min(n);
                let reasoning = (rn > 0).then(|| tokenizer::filler(self.text_key ^ 0x7ea5, 0, rn));
                (reasoning, tokenizer::filler(self.text_key, 0, n - rn))
            }
            None => (None, tokenizer::filler(self.text_key, 0, n)),
        }
    }
}

async fn full_response(
    state: Arc<AppState>,
    mut guard: Guard,
    w: Writer,
    mut rx: mpsc::UnboundedReceiver<Delivery>,
) -> Response {
    let mut total = 0;
    let mut last_planned = 0.0;
    while let Some(d) = rx.recv().await {
        total += d.tokens;
        last_planned = d.planned_ms;
        if d.first {
            guard.record.cached_tokens = d.cached;
        }
        if d.finished {
            guard.finished = true;
            break;
        }
    }
    if !guard.finished {
        guard.record.status = 500;
        guard.record.outcome = "fault";
        return error(StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError", "The engine stopped.", None);
    }
    guard.record.output_tokens = total;
    guard.record.finish_reason = Some(w.finish_reason);
    let (reasoning, content) = w.full_text(total);
    let usage = json!({
        "prompt_tokens": w.prompt_tokens,
        "total_tokens": w.prompt_tokens + total,
        "completion_tokens": total,
        "prompt_tokens_details": null,
    });
    let v = match w.ep {
        Endpoint::Chat => {
            let mut message = json!({"role": "assistant", "content": content, "tool_calls": []});
            if let Some((field, _)) = w.reasoning {
                let key = match field {
                    ReasoningField::Reasoning => "reasoning",
                    ReasoningField::ReasoningContent => "reasoning_content",
                };
                message[key] = reasoning.map(Value::from).unwrap_or(Value::Null);
            }
            json!({
                "id": w.id, "object": "chat.completion", "created": w.created, "model": w.model,
                "choices": [{"index": 0, "message": message, "logprobs": null,
                             "finish_reason": w.finish_reason, "stop_reason": null}],
                "usage": usage,
            })
        }
        Endpoint::Completions => json!({
            "id": w.id, "object": "text_completion", "created": w.created, "model": w.model,
            "choices": [{"index": 0, "text": content, "logprobs": null,
                         "finish_reason": w.finish_reason, "stop_reason": null, "prompt_logprobs": null}],
            "usage": usage,
        }),
    };
    guard.record.chunks.push(ChunkRecord {
        i: 0,
        planned_ms: last_planned,
        written_ms: state.clock.now_ms(),
        tokens: total,
        kind: "finish",
    });
    json_response(StatusCode::OK, &v)
}

/// One piece of bytes to write, and the chunk record it completes (if any).
struct Piece {
    bytes: Bytes,
    delay: Option<Duration>,
    record: Option<ChunkRecord>,
}

struct StreamState {
    state: Arc<AppState>,
    guard: Guard,
    w: Writer,
    rx: mpsc::UnboundedReceiver<Delivery>,
    struck: Struck,
    pending: VecDeque<Piece>,
    next_chunk: u32,
    /// Tokens after which the mid-stream fault strikes.
    fault_at: u32,
    fault_done: bool,
    /// A stall to put before the next frame.
    stall_next: Option<Duration>,
    ended: bool,
    /// End the body with an error after the pending pieces (drop fault / engine gone).
    abort_after: bool,
    rng: ChaCha8Rng,
}

impl StreamState {
    fn frame(&mut self, data: String, planned_ms: f64, tokens: u32, kind: &'static str) {
        if let Some(stall) = self.stall_next.take() {
            self.pending.push_back(Piece { bytes: Bytes::new(), delay: Some(stall), record: None });
        }
        if self.struck.has(|k| *k == FaultKind::Keepalive) {
            let i = self.next_chunk;
            self.next_chunk += 1;
            self.pending.push_back(Piece {
                bytes: Bytes::from_static(b": keepalive\n\n"),
                delay: None,
                record: Some(ChunkRecord { i, planned_ms, written_ms: 0.0, tokens: 0, kind: "keepalive" }),
            });
        }
        let bytes = format!("data: {data}\n\n").into_bytes();
        let i = self.next_chunk;
        self.next_chunk += 1;
        let record = ChunkRecord { i, planned_ms, written_ms: 0.0, tokens, kind };
        if self.struck.has(|k| *k == FaultKind::Split) && bytes.len() > 2 {
            let pieces = self.rng.random_range(2..=3usize);
            let mut cuts: Vec<usize> = (1..pieces).map(|_| self.rng.random_range(1..bytes.len())).collect();
            // Half the time, one cut falls inside a multi-byte character when the frame has one.
            let inside: Vec<usize> = (1..bytes.len()).filter(|&i| bytes[i] & 0xC0 == 0x80).collect();
            if !inside.is_empty() && self.rng.random_bool(0.5) {
                cuts[0] = inside[self.rng.random_range(0..inside.len())];
            }
            cuts.sort_unstable();
            cuts.dedup();
            let mut start = 0;
            let all = Bytes::from(bytes);
            for (j, &cut) in cuts.iter().chain(std::iter::once(&all.len())).enumerate() {
                let last = cut == all.len();
                self.pending.push_back(Piece {
                    bytes: all.slice(start..cut),
                    delay: (j > 0).then(|| Duration::from_millis(1)),
                    record: last.then(|| record.clone()),
                });
                start = cut;
            }
        } else {
            self.pending.push_back(Piece { bytes: Bytes::from(bytes), delay: None, record: Some(record) });
        }
    }

    /// Turn the next delivery into pieces; false when the stream has nothing more.
    async fn produce(&mut self) -> bool {
        if self.ended {
            return false;
        }
        let Some(d) = self.rx.recv().await else {
            // Engine gone (shutdown): truncate.
            self.ended = true;
            self.abort_after = true;
            self.guard.record.outcome = "fault";
            return true;
        };
        let t = d.planned_ms;
        if d.first {
            self.guard.record.cached_tokens = d.cached;
            if self.w.ep == Endpoint::Chat {
                let role = self.w.role_chunk();
                self.frame(role, t, 0, "role");
            }
        }
        // Mid-stream faults strike once `fault_at` tokens have been sent.
        if !self.fault_done && self.w.sent >= self.fault_at {
            self.fault_done = true;
            if self.struck.has(|k| *k == FaultKind::Drop) {
                self.ended = true;
                self.abort_after = true;
                self.guard.record.outcome = "fault";
                return true;
            }
            if self.struck.has(|k| *k == FaultKind::InbandError) {
                let err = error_value(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalServerError",
                    "Injected in-band error: the engine failed while generating.",
                    None,
                );
                self.frame(err.to_string(), t, 0, "error");
                self.frame("[DONE]".into(), t, 0, "done");
                self.ended = true;
                self.guard.record.outcome = "fault";
                return true;
            }
            // Stall: the next frame waits (real time) before it is written.
            self.stall_next = self.struck.stall();
        }
        let frames = self.w.token_chunks(d.tokens, d.finished);
        for (v, tokens, kind) in frames {
            self.frame(v, t, tokens, kind);
        }
        self.guard.record.output_tokens = self.w.sent;
        if d.finished {
            self.guard.finished = true;
            self.guard.record.finish_reason = Some(self.w.finish_reason);
            if self.w.include_usage {
                let u = self.w.usage_chunk();
                self.frame(u, t, 0, "usage");
            }
            if self.struck.has(|k| *k == FaultKind::NoDone) {
                self.guard.record.outcome = "fault";
            } else {
                self.frame("[DONE]".into(), t, 0, "done");
            }
            self.ended = true;
        }
        true
    }
}

fn stream_response(
    state: Arc<AppState>,
    guard: Guard,
    w: Writer,
    rx: mpsc::UnboundedReceiver<Delivery>,
    struck: Struck,
    output_len: u32,
) -> Response {
    let rng = ChaCha8Rng::seed_from_u64(state.cfg.seed ^ guard.record.request.rotate_left(7));
    let st = StreamState {
        state,
        guard,
        w,
        rx,
        struck,
        pending: VecDeque::new(),
        next_chunk: 0,
        fault_at: (output_len / 2).max(1),
        fault_done: false,
        stall_next: None,
        ended: false,
        abort_after: false,
        rng,
    };
    let body = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(p) = st.pending.pop_front() {
                if let Some(d) = p.delay {
                    tokio::time::sleep(d).await;
                }
                if let Some(mut rec) = p.record {
                    rec.written_ms = st.state.clock.now_ms();
                    st.guard.record.chunks.push(rec);
                }
                if p.bytes.is_empty() {
                    continue;
                }
                return Some((Ok::<Bytes, std::io::Error>(p.bytes), st));
            }
            if st.abort_after {
                st.abort_after = false;
                st.ended = true;
                return Some((Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "stream dropped")), st));
            }
            if !st.produce().await {
                return None;
            }
        }
    });
    let mut r = Response::new(Body::from_stream(body));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r.into_response()
}
