//! The completion endpoints (`/v1/chat/completions`, `/v1/completions`) of the scripted
//! server, one job per function: [`complete`] answers at once what the script refuses (a revoked
//! key, a request over the real context limit, a failing decode request), an HTML page or a
//! non-streamed answer; a streamed answer is written by a task of its own ([`write`]) that waits
//! for a place among [`super::Script::max_running`], spends the front end's
//! [`super::Script::admit_delay`], prefills, writes the token chunks and ends (usage, `[DONE]`),
//! each stage as the [`super::StreamScript`] says.

use super::routes::{prompt_tokens, revoked, unauthorized};
use super::{Answer, AppState, Counted, StreamScript, UsageCount};
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// A keep-alive comment.
const PING: &[u8] = b": ping\n\n";

enum Refused {
    No,
    Answer(Response),
    ResetMidStream,
}

fn refused(s: &AppState, v: &Value) -> Refused {
    if let Some(field) = s.script.refuse_fields.iter().find(|f| v.get(**f).is_some()) {
        // The words and shape of a proxy that rejects fields it does not know (OpenAI's error object).
        let body = json!({"error": {"message": format!("Unrecognized request argument supplied: {field}"), "type": "invalid_request_error", "code": 400}});
        return Refused::Answer((StatusCode::BAD_REQUEST, axum::Json(body)).into_response());
    }
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
    let n = s.decodes.fetch_add(1, Ordering::SeqCst) + 1;
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
    /// Every frame gzip-compressed with a sync flush (see `StreamScript::gzip`).
    gzip: Option<flate2::write::GzEncoder<Vec<u8>>>,
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
        let b = match self.gzip.as_mut() {
            Some(z) => {
                use std::io::Write;
                z.write_all(&b).and_then(|_| z.flush()).map_err(|_| ())?;
                Bytes::from(std::mem::take(z.get_mut()))
            }
            None => b,
        };
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
    /// What each chunk's usage holds.
    chunk_count: UsageCount,
}

/// `completion_tokens` as `count` says, after `sent` tokens of which the last chunk carried
/// `own`.
fn reported(count: UsageCount, sent: u64, own: u64) -> u64 {
    match count {
        UsageCount::Total => sent,
        UsageCount::One => 1,
        UsageCount::Own => own,
    }
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

    /// A chunk with `text` (and `own` tokens) after `sent` tokens in all.
    fn chunk(&self, text: Option<&str>, finish: Option<&str>, sent: u64, own: u64) -> Bytes {
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
            v["usage"] = self.usage(reported(self.chunk_count, sent, own));
        }
        Bytes::from(format!("data: {v}\n\n"))
    }
}

/// The request's answer: a refusal, an HTML page, a non-streamed completion, or a stream.
pub(super) async fn complete(
    State(s): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    uri: Uri,
    body: Bytes,
) -> Response {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let decode = v["max_tokens"].as_u64().unwrap_or(16) > 1;
    s.saw(super::Seen { models: false, decode, port: peer.port() });
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
    if s.script.answer == Answer::JsonError && v["max_tokens"].as_u64().unwrap_or(16) > 1 {
        let body = json!({"error": {"message": "model overloaded", "type": "server_error", "code": 503}});
        return axum::Json(body).into_response();
    }
    if s.script.answer == Answer::Html {
        let page = "<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please sign in.</body></html>";
        return ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response();
    }
    if v["stream"].as_bool() != Some(true) {
        return non_streamed(&v, !s.script.no_probe_usage, s.script.zero_probe_usage);
    }
    stream(&s, uri.path().contains("chat"), &v, reset)
}

/// A non-streamed completion (the prompt builder's probes): `max_tokens` words, and the usage
/// when `with_usage` (counting 0 prompt tokens when `zero`).
fn non_streamed(v: &Value, with_usage: bool, zero: bool) -> Response {
    let max_tokens = v["max_tokens"].as_u64().unwrap_or(16);
    let prompt = if zero { 0 } else { prompt_tokens(v) };
    let text = "w ".repeat(max_tokens as usize);
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": max_tokens, "total_tokens": prompt + max_tokens});
    let choice =
        json!({"index": 0, "message": {"role": "assistant", "content": text}, "text": text, "finish_reason": "length"});
    let mut answer = json!({"id": "scripted", "object": "chat.completion", "choices": [choice]});
    if with_usage {
        answer["usage"] = usage;
    }
    axum::Json(answer).into_response()
}

/// What one streamed answer writes, fixed when its request arrives.
struct Plan {
    writer: Writer,
    script: StreamScript,
    max_tokens: u64,
    /// The stream leaves the live running gauge after this many tokens ([`super::Script::engine_tokens`]).
    engine_tokens: Option<u64>,
    /// A final usage chunk (the script has one and the request asked `include_usage`).
    final_usage: bool,
    /// The server's output-token counter ([`super::Script::generation_counter`]).
    generated: Arc<AtomicU64>,
}

/// What a stream waits for before it counts as running: a place among `max_running`, the
/// front end's delay; and the live running gauge it then counts in.
struct Gate {
    places: Option<Arc<Semaphore>>,
    admit_delay: Duration,
    admitted: Arc<AtomicI64>,
}

/// An SSE response whose body a task of its own writes ([`write`]).
fn stream(s: &AppState, chat: bool, v: &Value, reset: bool) -> Response {
    let so = &v["stream_options"];
    let n = s.bodies.lock().map(|b| b.len()).unwrap_or(0);
    let st = &s.script.stream;
    let writer = Writer {
        chat,
        id: format!("scripted-{n}"),
        prompt: if s.script.zero_stream_usage { 0 } else { prompt_tokens(v) + s.script.usage_prompt_extra },
        cached: st.cached_tokens,
        per_chunk_usage: st.per_chunk_usage && so["continuous_usage_stats"].as_bool() == Some(true),
        chunk_count: st.chunk_usage_count,
    };
    let plan = Plan {
        writer,
        script: st.clone(),
        max_tokens: v["max_tokens"].as_u64().unwrap_or(16),
        engine_tokens: s.script.engine_tokens,
        final_usage: st.final_usage && so["include_usage"].as_bool() == Some(true),
        generated: s.generated.clone(),
    };
    let slowed = s.script.slow_after.is_some_and(|(after, _)| n >= after);
    let places = if slowed { s.slowed.clone() } else { s.running.clone() };
    let gate = Gate { places, admit_delay: s.script.admit_delay, admitted: s.admitted.clone() };
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let gzip = st.gzip.then(|| flate2::write::GzEncoder::new(vec![], flate2::Compression::fast()));
    let tx = Sender { tx, reset, sent: 0, gzip };
    let open = Counted::new(&s.streaming);
    tokio::spawn(async move {
        let _ = write(tx, plan, gate).await;
        drop(open);
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
    let mut r =
        ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(body))
            .into_response();
    if st.gzip {
        r.headers_mut().insert(header::CONTENT_ENCODING, header::HeaderValue::from_static("gzip"));
    }
    r
}

/// One stream, start to end: a free place, the front end, the prefill, the tokens, the end.
/// `Err` when the client went away (or the script cut the connection).
async fn write(mut tx: Sender, plan: Plan, gate: Gate) -> Result<(), ()> {
    let st = &plan.script;
    let _place = wait_for_place(&mut tx, gate.places, st.keepalive_every).await?;
    tokio::time::sleep(gate.admit_delay).await;
    let mut running = Some(Counted::new(&gate.admitted));
    prefill(&mut tx, st).await?;
    let w = &plan.writer;
    if w.chat {
        let role = json!({"id": w.id, "object": "chat.completion.chunk",
                          "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]});
        tx.send(Bytes::from(format!("data: {role}\n\n"))).await?;
    }
    let (sent, last) = tokens(&mut tx, &plan, &mut running).await?;
    end(&mut tx, &plan, sent, last).await
}

/// Wait for a free place when the server runs only so many at once (no gauge says so), with
/// keep-alives while waiting when the script sends them: a queued request on a server that
/// pings is alive, not stalled. The place is held until the stream ends.
async fn wait_for_place(
    tx: &mut Sender,
    places: Option<Arc<Semaphore>>,
    keepalive_every: Option<Duration>,
) -> Result<Option<OwnedSemaphorePermit>, ()> {
    let Some(sem) = places else { return Ok(None) };
    let acquire = sem.acquire_owned();
    tokio::pin!(acquire);
    loop {
        let Some(every) = keepalive_every else { return Ok((&mut acquire).await.ok()) };
        tokio::select! {
            p = &mut acquire => return Ok(p.ok()),
            _ = tokio::time::sleep(every) => tx.send(Bytes::from_static(PING)).await?,
        }
    }
}

/// The prefill: [`StreamScript::prefill`] before the first token, with keep-alives every
/// [`StreamScript::keepalive_every`] when set.
async fn prefill(tx: &mut Sender, st: &StreamScript) -> Result<(), ()> {
    let mut left = st.prefill;
    while let Some(every) = st.keepalive_every.filter(|_| !left.is_zero()) {
        let step = every.min(left);
        tokio::time::sleep(step).await;
        left -= step;
        tx.send(Bytes::from_static(PING)).await?;
    }
    tokio::time::sleep(left).await;
    Ok(())
}

/// The token chunks, [`StreamScript::gap`] apart, until `max_tokens` (or the script's early
/// stop); none for an empty stream. Returns the tokens sent and the last chunk's. After
/// [`StreamScript::pings_after`] tokens, only keep-alives until the client gives up. `running`
/// (the stream's place in the live running gauge) is let go after the engine's tokens.
async fn tokens(tx: &mut Sender, plan: &Plan, running: &mut Option<Counted>) -> Result<(u64, u64), ()> {
    let st = &plan.script;
    let (end, why) = match (st.end_after, st.run_to, st.stop_after) {
        (Some((k, why)), _, _) => (k, why),
        (None, Some(k), _) => (k, "length"),
        (None, None, Some(k)) if k < plan.max_tokens => (k, "stop"),
        _ => (plan.max_tokens, "length"),
    };
    let (mut sent, mut i, mut last) = (0u64, 0usize, 0u64);
    while !st.empty && sent < end {
        if st.pings_after.is_some_and(|p| sent >= p) {
            return pings_forever(tx, st.keepalive_every.unwrap_or(Duration::from_millis(200))).await;
        }
        let k = u64::from(st.tokens_per_chunk[i % st.tokens_per_chunk.len()]).min(end - sent).max(1);
        i += 1;
        sent += k;
        last = k;
        let text = "w ".repeat(k as usize);
        let finish = (sent >= end).then_some(why);
        plan.generated.fetch_add(k, Ordering::SeqCst);
        tx.send(plan.writer.chunk(Some(&text), finish, sent, k)).await?;
        if plan.engine_tokens.is_some_and(|k| sent >= k) {
            running.take();
        }
        if sent < end {
            tokio::time::sleep(st.gap).await;
        }
    }
    Ok((sent, last))
}

/// Keep-alives every `every`, and nothing else, until the client goes away (a proxy in front
/// of a stuck engine).
async fn pings_forever(tx: &mut Sender, every: Duration) -> Result<(u64, u64), ()> {
    loop {
        tokio::time::sleep(every).await;
        tx.send(Bytes::from_static(PING)).await?;
    }
}

/// The end of a stream after `sent` tokens (`last` in its last chunk): an empty stream's
/// `finish_reason` chunk, the final usage chunk, `data: [DONE]` — each as the script says.
async fn end(tx: &mut Sender, plan: &Plan, sent: u64, last: u64) -> Result<(), ()> {
    let (st, w) = (&plan.script, &plan.writer);
    if st.empty {
        tx.send(w.chunk(None, Some("length"), 0, 0)).await?;
    }
    if plan.final_usage {
        let usage = w.usage(reported(st.final_usage_count, sent, last));
        let u = json!({"id": w.id, "object": "chat.completion.chunk", "choices": [], "usage": usage});
        tx.send(Bytes::from(format!("data: {u}\n\n"))).await?;
    }
    if st.done {
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
    }
    Ok(())
}
