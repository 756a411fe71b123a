//! The two generation routes, `/v1/chat/completions` and `/v1/completions`: a request's life
//! from arrival to its trace line — checked into a plan, faults drawn, handed to the engine,
//! answered as a stream or in full, and, when it ends or the client leaves ([`Guard`]), aborted
//! in the engine, counted in `/metrics` and written to the trace.

use super::chunks::Writer;
use super::engine_loop::{Delivery, EngineCmd};
use super::guard::Guard;
use super::requests::{plan, Plan};
use super::stream::{full_response, stream_response};
use super::{error, hex_id, unix_now, AppState, Endpoint};
use crate::engine::{block_hashes, ngram_acceptance, text_seed, SeqSpec, Submit};
use crate::faults;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;

/// `POST /v1/chat/completions`.
pub(super) async fn chat_completions(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    generate(state, Endpoint::Chat, body).await
}

/// `POST /v1/completions`.
pub(super) async fn completions(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    generate(state, Endpoint::Completions, body).await
}

async fn generate(state: Arc<AppState>, ep: Endpoint, body: Bytes) -> Response {
    let arrival_ms = state.clock.now_ms();
    let n = state.next_request.fetch_add(1, Ordering::Relaxed);
    let id = match ep {
        Endpoint::Chat => format!("chatcmpl-{}", hex_id(state.cfg.seed, n)),
        Endpoint::Completions => format!("cmpl-{}", hex_id(state.cfg.seed, n)),
    };
    let mut guard = Guard::new(state.clone(), ep, n, id.clone(), arrival_ms);
    let plan = match plan(&state, ep, &body, n) {
        Ok(p) => p,
        Err(e) => {
            guard.record.status = e.status().as_u16();
            guard.record.outcome = "rejected";
            return e.into_response();
        }
    };
    let struck = faults::draw(&state.cfg.faults, state.cfg.seed, n);
    guard.record.faults = struck.names();
    guard.record.stream = plan.stream;
    guard.record.prompt_tokens = plan.prompt_tokens.len() as u32;
    guard.record.prompt_blocks = crate::trace::block_digests(&plan.prompt_tokens);
    guard.record.max_tokens = plan.max_tokens;
    if let Some(code) = struck.status() {
        guard.record.status = code;
        guard.record.outcome = "fault";
        return status_fault(code);
    }
    let Some(rx) = submit(&state, &plan, &mut guard) else {
        guard.record.status = 503;
        guard.record.outcome = "rejected";
        return error(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailableError", "The engine is shutting down.", None);
    };
    let writer = writer(&state, ep, id, &plan, &struck);
    if plan.stream {
        stream_response(state, guard, writer, rx, struck, plan.output_len)
    } else {
        full_response(state, guard, writer, rx).await
    }
}

/// The answer of a `status=CODE` fault, in vLLM's error shape.
fn status_fault(code: u16) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (kind, msg) = match code {
        429 => ("RateLimitError", "Too many requests."),
        503 => ("ServiceUnavailableError", "The server is temporarily unavailable."),
        _ => ("InternalServerError", "Internal server error (injected fault)."),
    };
    error(status, kind, msg, None)
}

/// Hand the request to the engine; its outputs come on the returned channel. None when the
/// engine is shutting down.
fn submit(state: &AppState, plan: &Plan, guard: &mut Guard) -> Option<mpsc::UnboundedReceiver<Delivery>> {
    let (tx, rx) = mpsc::unbounded_channel();
    let n = guard.record.request;
    let hashes = Arc::new(block_hashes(&plan.prompt_tokens, state.cfg.profile.block_size));
    let engine_ms = state.clock.now_ms();
    guard.record.engine_ms = Some(engine_ms);
    let submit = Submit {
        id: n,
        arrival_ms: engine_ms,
        prompt_len: plan.prompt_tokens.len() as u32,
        block_hashes: hashes,
        output_len: plan.output_len,
        spec: (state.cfg.spec_ngram && state.cfg.profile.spec_tokens > 0).then(|| SeqSpec {
            accept: ngram_acceptance(&plan.prompt_tokens),
            seed: text_seed(state.cfg.seed, &plan.prompt_tokens),
        }),
    };
    state.engine_tx.send(EngineCmd::Submit(submit, tx)).ok()?;
    guard.engine_id = Some(n);
    Some(rx)
}

/// The JSON writer of the response to `plan` (reasoning only on chat, when configured; usage
/// as asked, less what the `no-chunk-usage` / `no-usage` faults take away).
fn writer(state: &AppState, ep: Endpoint, id: String, plan: &Plan, struck: &faults::Struck) -> Writer {
    Writer {
        ep,
        id,
        created: unix_now(),
        model: state.cfg.profile.served_name.clone(),
        reasoning: match (ep, state.cfg.reasoning) {
            (Endpoint::Chat, Some(f)) => Some((f, state.cfg.reasoning_tokens)),
            _ => None,
        },
        prompt_tokens: plan.prompt_tokens.len() as u32,
        text_key: plan.text_key,
        finish_reason: plan.finish_reason,
        // A server that does not know `continuous_usage_stats`, or a proxy that drops usage.
        include_usage: plan.include_usage && !struck.has(|k| *k == faults::FaultKind::NoUsage),
        continuous_usage: plan.continuous_usage
            && !struck.has(|k| matches!(k, faults::FaultKind::NoChunkUsage | faults::FaultKind::NoUsage)),
        sent: 0,
    }
}
