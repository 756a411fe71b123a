//! The HTTP side of the twin: axum routes shaped like vLLM's OpenAI-compatible server (and,
//! with `--flavor sglang`, SGLang's).
//!
//! This module owns what every handler shares: the state ([`AppState`]), the router, the
//! middleware (API key, SGLang's flat error bodies) and the JSON and error-body helpers. The
//! concerns live in their own files:
//!
//! - `engine_loop`: the real-time loop that runs the pure engine model on its own thread;
//! - `metrics`: `/metrics` in the vLLM and SGLang dialects, and the histograms behind them;
//! - `requests`: the checks of a request body and the plan of a generation request;
//! - `info`: health, version, models, tokenize and SGLang's server info;
//! - `generate`: the two generation routes, from arrival to the trace line;
//! - `guard`: what ends a generation request — abort in the engine, `/metrics`, trace line;
//! - `spec_lines`: each request's speculative-decoding count for its trace line;
//! - `chunks`: the JSON of each streamed chunk and of a full answer;
//! - `stream`: the SSE writer and the full response, with the faults applied.

mod chunks;
mod engine_loop;
mod generate;
mod guard;
mod info;
mod metrics;
mod requests;
mod spec_lines;
mod stream;

pub(crate) use engine_loop::engine_loop;

use super::faults::{self, FaultKind};
use super::trace::{Clock, TraceSink};
use super::{Flavor, TwinConfig};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use engine_loop::EngineCmd;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Everything the handlers share.
pub(crate) struct AppState {
    pub(crate) cfg: TwinConfig,
    pub(crate) clock: Clock,
    pub(crate) trace: TraceSink,
    engine_tx: std::sync::mpsc::Sender<EngineCmd>,
    metrics: Mutex<metrics::Metrics>,
    next_request: AtomicU64,
    next_call: AtomicU64,
    /// Generation requests whose guard has not written its trace line yet ([`guard::Guard`]).
    pub(crate) open_guards: AtomicU64,
    /// With speculative decoding on: the trace lines of aborted requests waiting for the
    /// engine's count of their drafts, and the counts of requests that left the engine
    /// ([`spec_lines::SpecLines`]).
    pub(crate) spec_lines: Mutex<spec_lines::SpecLines>,
}

impl AppState {
    pub(crate) fn new(
        cfg: TwinConfig,
        clock: Clock,
        trace: TraceSink,
    ) -> (Arc<AppState>, std::sync::mpsc::Receiver<EngineCmd>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let spec_positions = cfg.profile.spec_tokens as usize;
        let state = AppState {
            cfg,
            clock,
            trace,
            engine_tx: tx,
            metrics: Mutex::new({
                // The speculative-decoding counters exist from the start when it speculates.
                let mut m = metrics::Metrics::new();
                m.counters.spec_accepted_per_pos = vec![0; spec_positions];
                m
            }),
            next_request: AtomicU64::new(1),
            next_call: AtomicU64::new(1),
            open_guards: AtomicU64::new(0),
            spec_lines: Mutex::new(spec_lines::SpecLines::default()),
        };
        (Arc::new(state), rx)
    }

    /// Whether an endpoint fault of `kind` strikes this call (drawn per endpoint call).
    fn endpoint_fault(&self, kind: FaultKind) -> bool {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        let relevant: Vec<_> = self.cfg.faults.iter().filter(|f| f.kind == kind).cloned().collect();
        !faults::draw(&relevant, self.cfg.seed ^ 0xe7d, n).0.is_empty()
    }
}

pub(crate) use spec_lines::flush_spec_lines;

/// Ask the engine thread to stop.
pub(crate) fn stop_engine(state: &AppState) {
    let _ = state.engine_tx.send(EngineCmd::Shutdown);
}

/// The router with every route of the twin.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    let v1 = Router::new()
        .route("/v1/models", get(info::models))
        .route("/v1/completions", post(generate::completions))
        .route("/v1/chat/completions", post(generate::chat_completions))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/health", get(info::health))
        .route("/version", get(info::version))
        .route("/tokenize", post(info::tokenize))
        .route("/metrics", get(metrics::metrics))
        .route("/get_server_info", get(info::server_info))
        .route("/reset_prefix_cache", post(reset_prefix_cache))
        .route("/flush_cache", post(reset_prefix_cache).get(reset_prefix_cache))
        .merge(v1)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), flavor_errors))
        .layer(middleware::from_fn_with_state(state.clone(), says_it_is_a_twin))
        .layer(DefaultBodyLimit::max(256 * 1024 * 1024))
        .with_state(state)
}

/// vLLM's `POST /reset_prefix_cache` (served with `VLLM_SERVER_DEV_MODE=1`: 200, empty body)
/// and SGLang's `/flush_cache` (200, a line of text): the engine empties its prefix cache
/// before any later request reaches it (commands are applied in order). With the fault
/// `reset-404`, 404 as a vLLM without dev mode answers.
async fn reset_prefix_cache(State(state): State<Arc<AppState>>) -> Response {
    if state.endpoint_fault(FaultKind::Reset404) {
        return not_found().await;
    }
    let _ = state.engine_tx.send(EngineCmd::ResetPrefixCache);
    let body = match state.cfg.flavor {
        Flavor::Sglang => "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n",
        _ => "",
    };
    let mut r = Response::new(axum::body::Body::from(body));
    *r.status_mut() = StatusCode::OK;
    r
}

/// Which generation route a request came in on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Endpoint {
    Chat,
    Completions,
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut r = Response::new(axum::body::Body::from(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// vLLM's error body: `{"error": {"message", "type", "param", "code"}}`.
fn error_value(status: StatusCode, kind: &str, message: &str, param: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": param, "code": status.as_u16()}})
}

/// A response with vLLM's error body.
fn error(status: StatusCode, kind: &str, message: &str, param: Option<&str>) -> Response {
    json_response(status, &error_value(status, kind, message, param))
}

/// FastAPI's 404 body, which vLLM answers for unknown paths.
async fn not_found() -> Response {
    json_response(StatusCode::NOT_FOUND, &json!({"detail": "Not Found"}))
}

/// With `--api-key`, `/v1/*` needs `Authorization: Bearer KEY`.
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

/// Every answer says it comes from the twin (and which profile): vLLM's shapes stay, but no
/// client can take the twin for a real server.
async fn says_it_is_a_twin(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    if let Ok(v) = HeaderValue::from_str(&state.cfg.profile.name) {
        resp.headers_mut().insert(speedmatrix_schema::simulation::TWIN_HEADER, v);
    }
    resp
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
    json_response(status, &flat_error(status, &bytes))
}

/// An error body (vLLM's shape, the auth middleware's or FastAPI's) in SGLang's flat shape.
fn flat_error(status: StatusCode, bytes: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(bytes) {
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
        _ => json!({"object": "error", "message": String::from_utf8_lossy(bytes), "code": status.as_u16()}),
    }
}

/// Seconds since the Unix epoch (the `created` field).
fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A 32-hex-digit id, deterministic in the seed and `n` (response and permission ids).
fn hex_id(seed: u64, n: u64) -> String {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ n.wrapping_mul(0x2545_f491_4f6c_dd1d));
    format!("{:016x}{:016x}", r.random::<u64>(), r.random::<u64>())
}
