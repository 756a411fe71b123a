//! The scripted server's small endpoints: `/v1/models`, `/metrics` (a fixed text, live vLLM
//! gauges or 404, as slow as the script says), `/tokenize`, the prefix-cache reset and `/props`;
//! and what every endpoint shares —
//! a revoked key's 401 and this server's prompt token count.

use super::{AppState, Seen};
use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Whether the key was revoked (see [`super::Script::revoke_after`]).
pub(super) fn revoked(s: &AppState) -> bool {
    s.script.revoke_after.is_some_and(|k| s.bodies.lock().map(|b| b.len()).unwrap_or(0) >= k)
}

/// A revoked key's answer.
pub(super) fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": "Unauthorized"}))).into_response()
}

/// `/v1/models`: the served model (and [`super::Script::more_models`]) with its `max_model_len`,
/// after [`super::Script::models_delay`], with `Connection: close` when
/// [`super::Script::models_close`].
pub(super) async fn models(State(s): State<Arc<AppState>>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> Response {
    s.saw(Seen { models: true, decode: false, port: peer.port() });
    let open = super::Counted::new(&s.models_open);
    s.models_most.fetch_max(s.models_open.load(Ordering::SeqCst), Ordering::SeqCst);
    tokio::time::sleep(s.script.models_delay).await;
    drop(open);
    if revoked(&s) {
        return unauthorized();
    }
    let m = &s.script;
    let names = std::iter::once(m.model.as_str()).chain(m.more_models.iter().copied());
    let data: Vec<Value> =
        names.map(|id| json!({"id": id, "object": "model", "max_model_len": m.max_model_len})).collect();
    let mut answer = axum::Json(json!({"object": "list", "data": data})).into_response();
    if m.models_close {
        answer.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    }
    answer
}

/// `/metrics` after [`super::Script::metrics_delay`] (only while streams are open, when
/// [`super::Script::metrics_slow_while_streaming`]): live vLLM gauges, the script's text, or 404.
pub(super) async fn metrics(State(s): State<Arc<AppState>>) -> Response {
    let asked = s.metrics_asked.fetch_add(1, Ordering::SeqCst);
    if s.script.metrics_hang_after.is_some_and(|k| asked >= k) {
        // Accepted, read, never answered (see `Script::metrics_hang_after`).
        std::future::pending::<()>().await;
    }
    if !s.script.metrics_slow_while_streaming || s.streaming.load(Ordering::SeqCst) > 0 {
        tokio::time::sleep(s.script.metrics_delay).await;
    }
    if s.script.live_gauges || s.script.generation_counter || s.script.restart_at.is_some() {
        return live_gauges(&s);
    }
    match &s.script.metrics {
        Some(text) => ([(header::CONTENT_TYPE, s.script.metrics_content_type)], text.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

/// vLLM's running gauge (the streams admitted and not yet ended) and its queue gauge, always 0
/// (see [`super::Script::live_gauges`]), and its output-token counter (see
/// [`super::Script::generation_counter`]), each as the script says.
fn live_gauges(s: &AppState) -> Response {
    let running = s.admitted.load(Ordering::SeqCst);
    let m = &s.script.model;
    let mut text = String::new();
    if s.script.live_gauges {
        text += &format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"{m}\"}} {running}\n\
             # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"{m}\"}} 0\n"
        );
    }
    if s.script.generation_counter {
        let generated = s.generated.load(Ordering::SeqCst);
        text += &format!(
            "# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{{model_name=\"{m}\"}} {generated}\n"
        );
    }
    if let Some(n) = s.script.restart_at {
        text += &restarting_counters(s, n);
    }
    ([(header::CONTENT_TYPE, s.script.metrics_content_type)], text).into_response()
}

/// The prefix-cache and speculative-decoding counters of a server that restarts as its `n`-th
/// completion request arrives (see [`super::Script::restart_at`]).
fn restarting_counters(s: &AppState, n: usize) -> String {
    let bodies = s.bodies.lock().map(|b| b.clone()).unwrap_or_default();
    let (base, counted) = match bodies.len() >= n {
        true => (0, &bodies[n - 1..]),
        false => (super::RESTART_BASE, &bodies[..]),
    };
    let queries: u64 = counted.iter().map(prompt_tokens).sum();
    let k = counted.len() as u64;
    let m = &s.script.model;
    let line = |name: &str, v: u64| {
        format!("# TYPE vllm:{name}_total counter\nvllm:{name}_total{{model_name=\"{m}\"}} {}\n", base + v)
    };
    [
        line("prefix_cache_queries", queries),
        line("prefix_cache_hits", queries * 9 / 10),
        line("spec_decode_num_drafts", 10 * k),
        line("spec_decode_num_draft_tokens", 30 * k),
        line("spec_decode_num_accepted_tokens", 15 * k),
    ]
    .concat()
}

/// Tokens of a prompt, as this server counts them: one per 4 characters (rounded up) plus a
/// small chat-template overhead.
pub(super) fn prompt_tokens(body: &Value) -> u64 {
    let text = match body.get("messages") {
        Some(m) => m.as_array().into_iter().flatten().filter_map(|x| x["content"].as_str()).collect::<String>(),
        None => body["prompt"].as_str().unwrap_or_default().to_string(),
    };
    (text.chars().count() as u64).div_ceil(4) + if body.get("messages").is_some() { 5 } else { 0 }
}

/// `/tokenize`: the prompt's [`prompt_tokens`], or 404 (see [`super::Script::no_tokenize`]).
pub(super) async fn tokenize(State(s): State<Arc<AppState>>, body: Bytes) -> Response {
    if s.script.no_tokenize {
        return (StatusCode::NOT_FOUND, axum::Json(json!({"detail": "Not Found"}))).into_response();
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    axum::Json(json!({"count": prompt_tokens(&v)})).into_response()
}

/// `POST /reset_prefix_cache` and `POST /slots/{id}`: the script's answer (see
/// [`super::Script::reset_answer`]), or 404. Every call is kept, by path, with the bodies.
pub(super) async fn reset(State(s): State<Arc<AppState>>) -> Response {
    s.resets.fetch_add(1, Ordering::SeqCst);
    match s.script.reset_answer {
        Some((status, body)) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, axum::Json(json!({"detail": "Not Found"}))).into_response(),
    }
}

/// `GET /props`: the script's (see [`super::Script::props`]), or 404.
pub(super) async fn props(State(s): State<Arc<AppState>>) -> Response {
    match &s.script.props {
        Some(v) => axum::Json(v.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}
