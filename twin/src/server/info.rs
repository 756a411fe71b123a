//! The routes that describe the server rather than generate: `/health`, `/version`,
//! `/v1/models`, `/tokenize` and SGLang's `/get_server_info` — each in the shape of the server
//! the twin imitates (`--flavor`), with the endpoint faults (`version-404`, `tokenize-404`)
//! applied.

use super::requests::tokenize_request;
use super::{hex_id, json_response, not_found, unix_now, AppState};
use crate::faults::FaultKind;
use crate::Flavor;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;

/// `GET /health`: 200 with an empty body.
pub(super) async fn health() -> StatusCode {
    StatusCode::OK
}

/// SGLang's `/get_server_info`: its server arguments, the KV pool size and the version.
pub(super) async fn server_info(State(state): State<Arc<AppState>>) -> Response {
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
            "version": speedmatrix_schema::simulation::tag_version(&state.cfg.sglang_version),
        }),
    )
}

/// vLLM's `GET /version` (SGLang has none).
pub(super) async fn version(State(state): State<Arc<AppState>>) -> Response {
    if state.cfg.flavor == Flavor::Sglang || state.endpoint_fault(FaultKind::Version404) {
        return not_found().await;
    }
    json_response(
        StatusCode::OK,
        &json!({"version": speedmatrix_schema::simulation::tag_version(&state.cfg.profile.engine_version)}),
    )
}

/// `GET /v1/models`: the one served model, with vLLM's permission object.
pub(super) async fn models(State(state): State<Arc<AppState>>) -> Response {
    let p = &state.cfg.profile;
    json_response(
        StatusCode::OK,
        &json!({
            "object": "list",
            "data": [{
                "id": p.served_name,
                "object": "model",
                "created": unix_now(),
                "owned_by": "speedmatrix-twin",
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

/// vLLM's `POST /tokenize`: chat `messages` or a completions `prompt` → token ids.
pub(super) async fn tokenize(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    if state.endpoint_fault(FaultKind::Tokenize404) {
        return not_found().await;
    }
    let tokens = match tokenize_request(&state, &body) {
        Ok(t) => t,
        Err(e) => return e.into_response(),
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
