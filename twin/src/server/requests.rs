//! The checks of a request body, in vLLM's words, and what a valid generation request becomes:
//! its [`Plan`] (prompt tokens, stream options, `max_tokens`, the answer's length and finish
//! reason).
//!
//! A body that fails a check gets a [`RequestError`], answered with vLLM's error body (status,
//! `type`, `message`, `param`). The checks run in a fixed order, so a body with several
//! problems always gets the same error.

use super::{error, AppState, Endpoint};
use crate::tokenizer::{self, Message};
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};

/// A request the twin refuses; the message is vLLM's (or close to it) and goes on the wire.
#[derive(Debug, thiserror::Error)]
pub(super) enum RequestError {
    #[error("The request body must be a JSON object.")]
    NotAnObject,
    /// The parser's message is part of the answer (it says where the JSON breaks).
    #[error("Invalid JSON in request body: {0}")]
    BadJson(serde_json::Error),
    #[error("Field `{0}` is required.")]
    Missing(&'static str),
    #[error("`{field}` must be {expected}.")]
    BadField { field: &'static str, expected: &'static str },
    #[error("Each message needs a string `role`.")]
    MessageRole,
    #[error("Message `content` must be a string or a list of parts.")]
    MessageContent,
    #[error("Token id {0} is out of vocabulary")]
    OutOfVocabulary(u64),
    #[error("The model `{0}` does not exist.")]
    UnknownModel(String),
    #[error("The twin serves one choice per request: `n` must be 1.")]
    ChoicesNotOne,
    #[error("Stream options can only be defined when `stream=True`.")]
    StreamOptionsWithoutStream,
    #[error(
        "This model's maximum context length is {limit} tokens. However, your request has {prompt} input tokens. \
         Please reduce the length of the input messages."
    )]
    ContextTooLong { limit: u64, prompt: u64 },
    #[error("The prompt is empty.")]
    EmptyPrompt,
    #[error("`max_tokens` must be at least 1, got 0.")]
    ZeroMaxTokens,
    #[error(
        "'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context length \
         is {limit} tokens and your request has {prompt} input tokens ({max_tokens} > {limit} - {prompt})."
    )]
    MaxTokensTooLarge { max_tokens: u32, limit: u64, prompt: u64 },
    #[error("min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.")]
    MinOverMax { min_tokens: u32, max_tokens: u32 },
}

impl RequestError {
    /// The HTTP status: 404 for an unknown model, else 400.
    pub(super) fn status(&self) -> StatusCode {
        match self {
            RequestError::UnknownModel(_) => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            RequestError::UnknownModel(_) => "NotFoundError",
            _ => "BadRequestError",
        }
    }
    fn param(&self) -> Option<&'static str> {
        match self {
            RequestError::UnknownModel(_) => Some("model"),
            _ => None,
        }
    }
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        error(self.status(), self.kind(), &self.to_string(), self.param())
    }
}

fn bad_field(field: &'static str, expected: &'static str) -> RequestError {
    RequestError::BadField { field, expected }
}

type Body = Map<String, Value>;

/// The body as a JSON object.
fn parse_body(body: &Bytes) -> Result<Body, RequestError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(RequestError::NotAnObject),
        Err(e) => Err(RequestError::BadJson(e)),
    }
}

fn parse_messages(v: &Value) -> Result<Vec<Message>, RequestError> {
    let arr = v.as_array().ok_or(bad_field("messages", "a list of messages"))?;
    let mut out = Vec::with_capacity(arr.len());
    for m in arr {
        let role = m.get("role").and_then(Value::as_str).ok_or(RequestError::MessageRole)?;
        let content = match m.get("content") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
            Some(_) => return Err(RequestError::MessageContent),
        };
        out.push(Message { role: role.to_string(), content });
    }
    Ok(out)
}

/// Prompt tokens of chat `messages` through the chat template (`add_generation_prompt`
/// defaults to true).
fn chat_prompt_tokens(messages: &Value, m: &Body) -> Result<Vec<u32>, RequestError> {
    let msgs = parse_messages(messages)?;
    let gen = m.get("add_generation_prompt").and_then(Value::as_bool).unwrap_or(true);
    Ok(tokenizer::encode(&tokenizer::chat_template(&msgs, gen)))
}

/// Prompt tokens of a completions `prompt`: a string, a list with one string, or token ids.
fn completion_prompt_tokens(v: Option<&Value>) -> Result<Vec<u32>, RequestError> {
    match v {
        Some(Value::String(s)) => Ok(tokenizer::encode(s)),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => Ok(tokenizer::encode(a[0].as_str().unwrap_or(""))),
        Some(Value::Array(a)) if a.iter().all(Value::is_u64) => {
            let ids: Vec<u64> = a.iter().filter_map(Value::as_u64).collect();
            if let Some(&bad) = ids.iter().find(|&&t| t >= tokenizer::VOCAB as u64) {
                return Err(RequestError::OutOfVocabulary(bad));
            }
            Ok(ids.into_iter().map(|t| t as u32).collect())
        }
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_array() => completion_prompt_tokens(Some(&a[0])),
        _ => Err(bad_field("prompt", "a string or a list of token ids (one prompt per request)")),
    }
}

/// `model`, when given, must be the served name.
fn check_model(state: &AppState, m: &Body) -> Result<(), RequestError> {
    match m.get("model") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) if *s == state.cfg.profile.served_name => Ok(()),
        Some(v) => Err(RequestError::UnknownModel(v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))),
    }
}

/// The tokens of a `/tokenize` body: chat `messages` when present, else a completions `prompt`.
pub(super) fn tokenize_request(state: &AppState, body: &Bytes) -> Result<Vec<u32>, RequestError> {
    let m = parse_body(body)?;
    check_model(state, &m)?;
    match m.get("messages") {
        Some(msgs) => chat_prompt_tokens(msgs, &m),
        None => completion_prompt_tokens(m.get("prompt")),
    }
}

fn opt_u32(m: &Body, key: &'static str) -> Result<Option<u32>, RequestError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n <= u32::MAX as u64 => Ok(Some(n as u32)),
            _ => Err(bad_field(key, "a non-negative integer")),
        },
    }
}

fn opt_bool(m: &Body, key: &'static str) -> Result<bool, RequestError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad_field(key, "a boolean")),
    }
}

/// A validated generation request.
pub(super) struct Plan {
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) continuous_usage: bool,
    pub(super) prompt_tokens: Vec<u32>,
    /// Effective `max_tokens` (what is left of the context when the request gives none).
    pub(super) max_tokens: u32,
    /// Tokens the answer will have.
    pub(super) output_len: u32,
    /// `length` or `stop`.
    pub(super) finish_reason: &'static str,
    /// Key of the answer's text (the request's `seed`, else its number, mixed with the twin's).
    pub(super) text_key: u64,
}

/// `stream`, and `stream_options` (`include_usage`, `continuous_usage_stats`), which need
/// `stream: true`.
struct StreamOptions {
    stream: bool,
    include_usage: bool,
    continuous_usage: bool,
}

fn stream_options(m: &Body) -> Result<StreamOptions, RequestError> {
    let stream = opt_bool(m, "stream")?;
    let mut out = StreamOptions { stream, include_usage: false, continuous_usage: false };
    if let Some(so) = m.get("stream_options").filter(|v| !v.is_null()) {
        if !stream {
            return Err(RequestError::StreamOptionsWithoutStream);
        }
        let so = so.as_object().ok_or(bad_field("stream_options", "an object"))?;
        out.include_usage = so.get("include_usage").and_then(Value::as_bool).unwrap_or(false);
        out.continuous_usage = so.get("continuous_usage_stats").and_then(Value::as_bool).unwrap_or(false);
    }
    Ok(out)
}

/// `temperature` (0…2) and `seed` (an integer, returned).
fn sampling(m: &Body) -> Result<Option<i64>, RequestError> {
    if let Some(t) = m.get("temperature").filter(|v| !v.is_null()) {
        match t.as_f64() {
            Some(x) if (0.0..=2.0).contains(&x) => {}
            _ => return Err(bad_field("temperature", "a number between 0 and 2")),
        }
    }
    match m.get("seed") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => Ok(Some(v.as_i64().ok_or(bad_field("seed", "an integer"))?)),
    }
}

/// The effective `max_tokens`: the requested one if it fits the context with the prompt,
/// else what is left of the context.
fn max_tokens(requested: Option<u32>, prompt: usize, max_model_len: u32) -> Result<u32, RequestError> {
    let prompt = prompt as u64;
    let limit = max_model_len as u64;
    if prompt >= limit {
        return Err(RequestError::ContextTooLong { limit, prompt });
    }
    if prompt == 0 {
        return Err(RequestError::EmptyPrompt);
    }
    match requested {
        Some(0) => Err(RequestError::ZeroMaxTokens),
        Some(mt) if prompt + mt as u64 > limit => {
            Err(RequestError::MaxTokensTooLarge { max_tokens: mt, limit, prompt })
        }
        Some(mt) => Ok(mt),
        None => Ok((limit - prompt) as u32),
    }
}

/// The plan of a generation request numbered `n`, or the first check it fails.
pub(super) fn plan(state: &AppState, ep: Endpoint, body: &Bytes, n: u64) -> Result<Plan, RequestError> {
    let m = parse_body(body)?;
    check_model(state, &m)?;
    let prompt_tokens = match ep {
        Endpoint::Chat => chat_prompt_tokens(m.get("messages").ok_or(RequestError::Missing("messages"))?, &m)?,
        Endpoint::Completions => completion_prompt_tokens(m.get("prompt"))?,
    };
    if m.get("n").filter(|v| !v.is_null()).is_some_and(|n| n.as_u64() != Some(1)) {
        return Err(RequestError::ChoicesNotOne);
    }
    let so = stream_options(&m)?;
    let seed = sampling(&m)?;
    let ignore_eos = opt_bool(&m, "ignore_eos")?;
    let min_tokens = opt_u32(&m, "min_tokens")?.unwrap_or(0);
    let requested = match ep {
        Endpoint::Chat => opt_u32(&m, "max_completion_tokens")?.or(opt_u32(&m, "max_tokens")?),
        Endpoint::Completions => opt_u32(&m, "max_tokens")?,
    };
    let max_tokens = max_tokens(requested, prompt_tokens.len(), state.cfg.profile.max_model_len)?;
    if min_tokens > max_tokens {
        return Err(RequestError::MinOverMax { min_tokens, max_tokens });
    }
    let text_key = seed.map(|s| s as u64).unwrap_or(n) ^ state.cfg.seed.rotate_left(17);
    let (output_len, finish_reason) = if ignore_eos {
        (max_tokens, "length")
    } else {
        natural_length(state.cfg.answer_tokens, text_key, min_tokens, max_tokens)
    };
    Ok(Plan {
        stream: so.stream,
        include_usage: so.include_usage,
        continuous_usage: so.continuous_usage,
        prompt_tokens,
        max_tokens,
        output_len,
        finish_reason,
        text_key,
    })
}

/// Without `ignore_eos`: an answer length drawn from `range` (deterministic in `text_key`), at
/// least `min_tokens`; `stop` when it ends before `max_tokens`, else cut there (`length`).
fn natural_length(range: (u32, u32), text_key: u64, min_tokens: u32, max_tokens: u32) -> (u32, &'static str) {
    let (lo, hi) = range;
    let mut r = ChaCha8Rng::seed_from_u64(text_key ^ 0xa115);
    let natural = r.random_range(lo.max(1)..=hi.max(lo.max(1))).max(min_tokens);
    if natural >= max_tokens {
        (max_tokens, "length")
    } else {
        (natural, "stop")
    }
}
