//! HTTP and SSE against an OpenAI-compatible server (the I/O edge of measuring).
//!
//! [`Client`] wraps one `reqwest::Client` whose connection pool is sized to the largest
//! concurrency of the plan (a pool smaller than the concurrency queues requests in the client).
//! There is no overall request timeout — a 256K-token prefill may take minutes — only a
//! *stall* timeout: a stream that sends no bytes at all for that long fails (an SSE comment
//! such as a `: ping` keep-alive is bytes, so a long prefill behind keep-alives is alive), and
//! once its tokens flow, a stream that sends no event for that long fails too (keep-alives
//! alone then mean a stuck engine behind a proxy).
//!
//! [`Client::stream`] runs one streamed completion and returns a [`StreamRecord`]: the time of
//! every token-carrying chunk on the run's monotonic [`Clock`], how many tokens it carried
//! (from cumulative `usage.completion_tokens`, else 1 per chunk until the measurement reconciles
//! it with the request's final usage), and how the stream ended. SSE framing (comments, CRLF,
//! frames split across reads) is handled by the `sseer` crate (its events borrow the bytes as
//! they arrived: no copy per event); each payload is read by [`ChunkParser`]
//! ([`crate::measuring::wire`]).

use crate::measuring::held::{Arrival, Conn, Gate, Held, NotHeld, Reused, SendFailed, SendStamp};
use crate::measuring::wire::{excerpt, ChunkError, ChunkParser, ParsedChunk};
use crate::text::error_chain;
use futures_util::{FutureExt, StreamExt};
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// The run's monotonic clock: every time in a results file is ms since [`Clock::start`].
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Self {
        Clock { start: Instant::now() }
    }

    /// Milliseconds since the clock's zero (monotonic).
    pub fn now_ms(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1000.0
    }

    /// The clock's zero.
    pub fn zero(&self) -> Instant {
        self.start
    }

    /// The instant `ms` after the clock's zero.
    pub fn instant_at(&self, ms: f64) -> Instant {
        self.start + Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    }
}

/// A failed HTTP exchange, in words a user can act on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HttpError {
    /// Nothing answered (connection refused, DNS, TLS).
    #[error("cannot reach {url}: {message}")]
    Unreachable {
        /// The URL requested.
        url: String,
        /// The transport error.
        message: String,
    },
    /// The request was written and the server closed the connection without answering it
    /// (hyper's "connection closed before message completed"): a server or proxy that drops
    /// requests, a restart, a keep-alive timeout that closed the connection as it was used.
    #[error("{url}: the server closed the connection after the request without answering ({message})")]
    Unanswered {
        /// The URL requested.
        url: String,
        /// The transport's words.
        message: String,
    },
    /// The server answered with a non-success status.
    #[error("{url} answered HTTP {status}: {body}")]
    Status {
        /// The URL requested.
        url: String,
        /// HTTP status code.
        status: u16,
        /// The start of the body (≤ 300 chars).
        body: String,
        /// `Retry-After` in seconds, when the answer had one (429, 503).
        retry_after: Option<u64>,
    },
    /// The body was not what we expected (e.g. not JSON).
    #[error("{url}: {message}")]
    Body {
        /// The URL requested.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The HTTP client could not be set up (TLS backend).
    #[error("cannot set up an HTTP client for {url}: {message}")]
    Setup {
        /// The base URL it was for.
        url: String,
        /// What reqwest said.
        message: String,
    },
}

impl HttpError {
    /// The HTTP status, if the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// An OpenAI-compatible server at one base URL (`http://host:8000`, no `/v1`).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
    /// The streams' own connections ([`crate::measuring::held`]), or why the streams go through
    /// `http` instead (`https://`, a proxy).
    held: Result<std::sync::Arc<Held>, NotHeld>,
}

impl Client {
    /// A client for `base_url` with `pool_size` idle connections kept per host.
    ///
    /// # Errors
    /// [`HttpError::Setup`] when the TLS backend cannot be initialised.
    pub fn new(base_url: &str, api_key: Option<String>, pool_size: usize) -> Result<Self, HttpError> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(pool_size.max(1))
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| HttpError::Setup { url: base_url.to_string(), message: error_chain(&e) })?;
        let base = base_url.trim_end_matches('/').to_string();
        let held = Held::for_base(&base, api_key.as_deref(), |v| std::env::var(v).ok()).map(std::sync::Arc::new);
        Ok(Client { http, base, api_key, held })
    }

    /// Why streamed requests go through the pooled client, not held connections (no bounded
    /// warm-up, no burst); `None` when they are held.
    pub fn not_held(&self) -> Option<&NotHeld> {
        self.held.as_ref().err()
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn auth(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    async fn send(
        &self,
        rb: reqwest::RequestBuilder,
        url: &str,
        limit: Option<Duration>,
    ) -> Result<reqwest::Response, HttpError> {
        let rb = match limit {
            Some(l) => rb.timeout(l),
            None => rb,
        };
        let resp = self.auth(rb).send().await.map_err(|e| {
            let message = match limit.filter(|_| e.is_timeout()) {
                // Say how long it waited: "operation timed out" alone does not.
                Some(l) => format!("no answer within {}: {}", humantime::format_duration(l), error_chain(&e)),
                None => error_chain(&e),
            };
            match crate::measuring::held::closed_unanswered(&e) {
                true => HttpError::Unanswered { url: url.to_string(), message },
                false => HttpError::Unreachable { url: url.to_string(), message },
            }
        })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after_secs(v, std::time::SystemTime::now()));
        let body = resp.text().await.unwrap_or_default();
        Err(HttpError::Status { url: url.to_string(), status, body: excerpt(&body), retry_after })
    }

    /// `GET path` → body text, with a short timeout (discovery and metrics, never generation).
    ///
    /// # Errors
    /// [`HttpError`] for transport failures and non-2xx statuses.
    pub async fn get_text(&self, path: &str) -> Result<String, HttpError> {
        self.get_text_within(path, GET_TIMEOUT).await
    }

    /// `GET path` → body text, answered in full within `limit` (`/metrics`).
    ///
    /// # Errors
    /// [`HttpError`] for transport failures, no answer within `limit` and non-2xx statuses.
    pub async fn get_text_within(&self, path: &str, limit: Duration) -> Result<String, HttpError> {
        let url = self.url(path);
        let resp = self.send(self.http.get(&url), &url, Some(limit)).await?;
        resp.text().await.map_err(|e| HttpError::Body { url, message: error_chain(&e) })
    }

    /// `GET path` → JSON and the value of the response header `header`, if it has one.
    ///
    /// # Errors
    /// [`HttpError`]; `Body` when the answer is not JSON.
    pub async fn get_json_and_header(&self, path: &str, header: &str) -> Result<(Value, Option<String>), HttpError> {
        let url = self.url(path);
        let resp = self.send(self.http.get(&url), &url, Some(GET_TIMEOUT)).await?;
        let value = resp.headers().get(header).and_then(|v| v.to_str().ok()).map(str::to_string);
        let text = resp.text().await.map_err(|e| HttpError::Body { url: url.clone(), message: error_chain(&e) })?;
        let json = serde_json::from_str(&text)
            .map_err(|e| HttpError::Body { url, message: format!("not JSON ({e}): {}", excerpt(&text)) })?;
        Ok((json, value))
    }

    /// `GET path` → JSON.
    ///
    /// # Errors
    /// [`HttpError`]; `Body` when the answer is not JSON.
    pub async fn get_json(&self, path: &str) -> Result<Value, HttpError> {
        let text = self.get_text(path).await?;
        serde_json::from_str(&text).map_err(|e| HttpError::Body {
            url: self.url(path),
            message: format!("not JSON ({e}): {}", excerpt(&text)),
        })
    }

    /// Have `n` idle connections to the server, so the streams of a cell do not pay TCP (and
    /// TLS) set-up inside their TTFT, each answered once on `GET /v1/models`. Held connections
    /// ([`Held::warm`]) are opened in batches of [`crate::measuring::held::WARM_BATCH`]; through
    /// the pooled client (`https://`, a proxy) all at once.
    pub async fn warm_connections(&self, n: usize) {
        if let Ok(held) = &self.held {
            held.warm(n).await;
            return;
        }
        let url = self.url("/v1/models");
        let gets = (0..n).map(|_| {
            let rb = self.auth(self.http.get(&url).timeout(Duration::from_secs(10)));
            async move {
                if let Ok(resp) = rb.send().await {
                    let _ = resp.bytes().await;
                }
            }
        });
        futures_util::future::join_all(gets).await;
    }

    /// `POST path` with a JSON body → JSON (tokenize, non-streamed probes). No overall timeout
    /// beyond `timeout`.
    ///
    /// # Errors
    /// [`HttpError`]; `Body` when the answer is not JSON.
    pub async fn post_json(&self, path: &str, body: &Value, timeout: Duration) -> Result<Value, HttpError> {
        let url = self.url(path);
        let resp = self.send(self.http.post(&url).json(body), &url, Some(timeout)).await?;
        let text = resp.text().await.map_err(|e| HttpError::Body { url: url.clone(), message: error_chain(&e) })?;
        serde_json::from_str(&text)
            .map_err(|e| HttpError::Body { url, message: format!("not JSON ({e}): {}", excerpt(&text)) })
    }

    /// `POST path` without a body (a prefix-cache reset) → the answer's body text (empty when
    /// it could not be read); `Ok` on 2xx.
    ///
    /// # Errors
    /// [`HttpError`] for transport failures and non-2xx statuses.
    pub async fn post_empty(&self, path: &str, timeout: Duration) -> Result<String, HttpError> {
        let url = self.url(path);
        let resp = self.send(self.http.post(&url), &url, Some(timeout)).await?;
        Ok(resp.text().await.unwrap_or_default())
    }

    /// Run one streamed completion (`POST path` with `body`, which must set `"stream": true`)
    /// and record it. Never fails: every problem is written into [`StreamRecord::error`].
    ///
    /// See [`StreamCtl`] for the stall timeout, cancellation and live events.
    ///
    /// `body` is the serialized JSON request (serialize once with [`request_body`] and share it
    /// across streams: serializing a 256K-token prompt inside the timed path would add to TTFT).
    pub async fn stream(&self, path: &str, body: &bytes::Bytes, ctl: StreamCtl) -> StreamRecord {
        let StreamCtl { clock, stall, mut cancel, id, events, live_tokens, keep_text, gate } = ctl;
        let mut rec = StreamRecord { id, sent_ms: clock.now_ms(), ..StreamRecord::default() };
        let arrival = gate.map(Arrival::new);
        let answer = match self.answered(path, body, (clock, stall), &mut cancel, &mut rec, arrival).await {
            Some(r) => r,
            None => return rec,
        };
        let decoding = match Decoding::of(&answer.headers) {
            Ok(d) => d,
            Err(e) => return rec.fail(clock, e),
        };
        let last_bytes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(clock.now_ms().to_bits()));
        let body = Pieces { body: answer.body, decoding, clock, last: last_bytes.clone() };
        let mut sse = Box::pin(sseer::EventStream::new(body));
        let mut parser = ChunkParser::default();
        // One stall timer for the whole stream, moved on only when it fires: before the first
        // token any bytes are life (an SSE comment such as `: ping` during a long prefill);
        // once tokens flow only events are (a proxy's keep-alives in front of a stuck engine
        // stall like silence). Each chunk stamps its time; the timer reads the stamps when it
        // fires instead of being set again at every chunk.
        let mut last_event_ms = clock.now_ms();
        let stall_timer = tokio::time::sleep(stall);
        tokio::pin!(stall_timer);
        // One wait for cancellation for the whole stream (not a new one at every event).
        let mut cancel_wait = std::pin::pin!(cancelled(&mut cancel));
        loop {
            let next = tokio::select! {
                n = sse.next() => n,
                _ = &mut cancel_wait => { rec.cancelled = true; break; }
                _ = &mut stall_timer => {
                    let bytes_ms = f64::from_bits(last_bytes.load(std::sync::atomic::Ordering::Relaxed));
                    let flowing = !rec.chunks.is_empty();
                    let alive_ms = if flowing { last_event_ms } else { bytes_ms };
                    let at = clock.instant_at(alive_ms) + stall;
                    if at > std::time::Instant::now() {
                        stall_timer.as_mut().reset(tokio::time::Instant::from_std(at));
                        continue;
                    }
                    return rec.fail(clock, if flowing && clock.instant_at(bytes_ms) + stall > std::time::Instant::now() {
                        StreamError::NoTokens { stall }
                    } else {
                        StreamError::Stalled { stall }
                    });
                }
            };
            // An event's time is its last bytes' arrival (stamped as they were read, under the
            // SSE parser): events read together share it.
            let t_ms = f64::from_bits(last_bytes.load(std::sync::atomic::Ordering::Relaxed));
            last_event_ms = t_ms;
            let event = match next {
                None => {
                    let why = rec.ended_early();
                    return rec.fail(clock, why);
                }
                Some(Err(e)) => return rec.fail(clock, StreamError::broke(&e)),
                Some(Ok(ev)) => ev,
            };
            if event.data.trim() == "[DONE]" {
                rec.done = true;
                rec.ended_ms = Some(t_ms);
                // The body's end (the chunked terminator) usually came with `[DONE]`: read, it
                // hands a held connection back for the stream that replaces this one; not yet
                // here, it is read in the background (never inside a stream's time).
                if !matches!(sse.as_mut().next().now_or_never(), Some(None)) {
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(stall, async { while sse.next().await.is_some() {} }).await;
                    });
                }
                break;
            }
            if keep_text {
                if let Some(text) = crate::measuring::wire::content_text(&event.data) {
                    rec.content.get_or_insert_with(String::new).push_str(&text);
                }
            }
            match parser.parse(&event.data) {
                Err(e) => return rec.fail(clock, StreamError::Chunk(e)),
                Ok(p) => {
                    let tokens = p.tokens;
                    if rec.add(p, t_ms) {
                        if let Some(tx) = &events {
                            let _ = tx.send(FirstToken { id });
                        }
                    }
                    if let Some(live) = &live_tokens {
                        live.fetch_add(u64::from(tokens), std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        }
        rec.continuous_usage = parser.continuous_usage;
        rec.ended_ms = rec.ended_ms.or_else(|| Some(clock.now_ms()));
        rec
    }

    /// Send the request until it is answered with an event stream: again after a short
    /// `Retry-After` (HTTP 429), at most [`RATE_LIMIT_RETRIES`] times, with `rec.sent_ms` the
    /// last send's write. `None` when it was cancelled or failed; `rec` then says which.
    async fn answered(
        &self,
        path: &str,
        body: &bytes::Bytes,
        (clock, stall): (Clock, Duration),
        cancel: &mut watch::Receiver<bool>,
        rec: &mut StreamRecord,
        mut arrival: Option<Arrival>,
    ) -> Option<Answer> {
        loop {
            let written = SendStamp::new(clock.zero());
            let resp = tokio::select! {
                r = self.open_stream(path, body.clone(), &written, stall, arrival.take()) => r,
                _ = cancelled(cancel) => return rec.cancel_in_place(clock),
            };
            // The request's time counts from when its bytes were written, not from when this
            // task asked for it: with many streams opening at once, the others' requests are
            // encoded and written in between.
            rec.sent_ms = written.ms().unwrap_or(rec.sent_ms);
            match resp {
                Ok(r) => return Some(r),
                Err(e) => match short_retry_after(&e).filter(|_| rec.rate_limited.len() < RATE_LIMIT_RETRIES) {
                    // Rate limited with a short `Retry-After`: wait as asked, then send the
                    // request again; its times count from the new send.
                    Some(wait) => {
                        rec.rate_limited.push(wait);
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(wait)) => {}
                            _ = cancelled(cancel) => return rec.cancel_in_place(clock),
                        }
                        rec.sent_ms = clock.now_ms();
                    }
                    None => {
                        rec.fail_in_place(clock, e);
                        return None;
                    }
                },
            }
        }
    }

    /// POST a streamed request and wait, at most `stall`, for its response headers: an SSE
    /// response, or why not. On a held connection when the client has them, else through the
    /// pooled client.
    async fn open_stream(
        &self,
        path: &str,
        body: bytes::Bytes,
        written: &SendStamp,
        stall: Duration,
        arrival: Option<Arrival>,
    ) -> Result<Answer, StreamError> {
        match &self.held {
            Ok(held) => self.open_held(held, path, body, written, (stall, arrival)).await,
            Err(_) => {
                if let Some(a) = arrival {
                    a.pass().await;
                }
                self.open_pooled(path, body, written, stall).await
            }
        }
    }

    /// [`Client::open_stream`] on a held connection; the connection goes back to `held` when
    /// the body ends.
    async fn open_held(
        &self,
        held: &std::sync::Arc<Held>,
        path: &str,
        body: bytes::Bytes,
        written: &SendStamp,
        (stall, arrival): (Duration, Option<Arrival>),
    ) -> Result<Answer, StreamError> {
        let url = self.url(path);
        let unreachable = |message: String| StreamError::Http(HttpError::Unreachable { url: url.clone(), message });
        // The request, built again for a second send (its body stamps the same `written`).
        let request = || held.request(http::Method::POST, path, written.body(body.clone()));
        let req = request().map_err(unreachable)?;
        let (conn, reused) = tokio::time::timeout(stall, held.ready())
            .await
            .map_err(|_| StreamError::NoHeaders { stall })?
            .map_err(unreachable)?;
        // The wait at the gate is the client's own: the stall timeout counts the server's time.
        if let Some(a) = arrival {
            a.pass().await;
        }
        let unanswered = |e: SendFailed| match e.unanswered {
            true => StreamError::Http(HttpError::Unanswered { url: url.clone(), message: e.message }),
            false => unreachable(e.message),
        };
        let sent =
            tokio::time::timeout(stall, held.send(conn, req)).await.map_err(|_| StreamError::NoHeaders { stall })?;
        let (resp, conn) = match sent {
            // An idle connection the server closed as the request went out (its keep-alive
            // timeout): once more on a new connection, its times from the new send.
            Err(e) if e.unanswered && reused == Reused(true) => {
                let again = async {
                    let conn = held.ready_new().await.map_err(SendFailed::unreachable)?;
                    held.send(conn, request().map_err(SendFailed::unreachable)?).await
                };
                tokio::time::timeout(stall, again).await.map_err(|_| StreamError::NoHeaders { stall })?
            }
            sent => sent,
        }
        .map_err(unanswered)?;
        let (head, incoming) = resp.into_parts();
        let body = held_body(incoming, conn, held.clone());
        let status = head.status;
        let content_type =
            head.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        if status.is_success() && content_type.contains("event-stream") {
            return Ok(Answer { headers: head.headers, body });
        }
        let text = tokio::time::timeout(stall, whole_text(body)).await.unwrap_or_default();
        if !status.is_success() {
            let retry_after = head
                .headers
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after_secs(v, std::time::SystemTime::now()));
            let status = status.as_u16();
            return Err(StreamError::Http(HttpError::Status { url, status, body: excerpt(&text), retry_after }));
        }
        // A success status with an error body ("model overloaded"): the server's own words.
        Err(match crate::measuring::wire::error_message(&text) {
            Some(message) => StreamError::ErrorBody { content_type, message },
            None => StreamError::NotSse { content_type },
        })
    }

    /// [`Client::open_stream`] through the pooled client (`https://`, a proxy).
    async fn open_pooled(
        &self,
        path: &str,
        body: bytes::Bytes,
        written: &SendStamp,
        stall: Duration,
    ) -> Result<Answer, StreamError> {
        let url = self.url(path);
        let request = self
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(reqwest::Body::wrap(written.body(body)));
        let resp = tokio::time::timeout(stall, self.send(request, &url, None))
            .await
            .map_err(|_| StreamError::NoHeaders { stall })?
            .map_err(StreamError::Http)?;
        let content_type =
            resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        if !content_type.contains("event-stream") {
            // A success status with an error body ("model overloaded"): the server's own words.
            let body = tokio::time::timeout(stall, resp.text()).await.ok().and_then(Result::ok).unwrap_or_default();
            return Err(match crate::measuring::wire::error_message(&body) {
                Some(message) => StreamError::ErrorBody { content_type, message },
                None => StreamError::NotSse { content_type },
            });
        }
        let headers = resp.headers().clone();
        let body = resp.bytes_stream().map(|piece| piece.map_err(|e| BodyError::Transport(error_chain(&e))));
        Ok(Answer { headers, body: Box::pin(body) })
    }
}

/// A streamed answer's head and its body's bytes, whichever connection carried it.
struct Answer {
    headers: http::HeaderMap,
    body: BodyBytes,
}

/// A response body as its bytes arrive.
type BodyBytes = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<bytes::Bytes, BodyError>> + Send>>;

/// The bytes of a body that came on a held connection; when the body ends, the connection goes
/// back to `held` (dropped before its end, it closes: a cancelled stream's server sees it go).
fn held_body(incoming: hyper::body::Incoming, conn: Conn, held: std::sync::Arc<Held>) -> BodyBytes {
    Box::pin(HeldBody { incoming, conn: Some(conn), held, waited: true })
}

/// [`held_body`]'s stream: the body's data frames, one poll each (trailers skipped). It drives
/// its connection's I/O itself ([`Conn::drive`]), so a chunk wakes this task alone.
struct HeldBody {
    incoming: hyper::body::Incoming,
    /// Until the body's end hands it back.
    /// `None` once the body ended or broke: nothing more comes.
    conn: Option<Conn>,
    held: std::sync::Arc<Held>,
    /// The last poll found nothing (so this one is most likely a wake for what came since).
    waited: bool,
}

/// What one poll of a held body's frames gave.
enum Polled {
    Item(Option<Result<bytes::Bytes, BodyError>>),
    Nothing,
}

impl HeldBody {
    /// The next frame already read into the body, if any: the connection's I/O driven with `io`,
    /// the body polled without a waker (only that I/O, driven in this task, puts data in it).
    fn next_frame(&mut self, io: &mut std::task::Context<'_>) -> Polled {
        use hyper::body::Body as _;
        use std::task::Poll;
        let mut none = std::task::Context::from_waker(std::task::Waker::noop());
        while let Some(conn) = &mut self.conn {
            conn.drive(io);
            match std::pin::Pin::new(&mut self.incoming).poll_frame(&mut none) {
                Poll::Pending => return Polled::Nothing,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => return Polled::Item(Some(Ok(data))),
                    Err(_) => continue, // trailers
                },
                Poll::Ready(Some(Err(e))) => {
                    self.conn = None;
                    return Polled::Item(Some(Err(BodyError::Transport(error_chain(&e)))));
                }
                Poll::Ready(None) => {
                    if let Some(conn) = self.conn.take() {
                        self.held.give_back(conn);
                    }
                }
            }
        }
        Polled::Item(None)
    }
}

impl futures_util::Stream for HeldBody {
    type Item = Result<bytes::Bytes, BodyError>;

    /// After a wake, what came is taken with the I/O driven without a waker; the I/O registers
    /// this task (for the socket) on the poll after a frame, or when the wake brought nothing. A
    /// frame taken after that registration wakes this task for nothing (hyper's body channel
    /// holds one frame; taking it wakes the waker its I/O registered while the channel was
    /// full), so the registration is left for when the socket has most likely been drained.
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let mut none = std::task::Context::from_waker(std::task::Waker::noop());
        let polled = if self.waited {
            match self.next_frame(&mut none) {
                Polled::Nothing => self.next_frame(cx),
                item => item,
            }
        } else {
            self.next_frame(cx)
        };
        match polled {
            Polled::Item(item) => {
                self.waited = false;
                std::task::Poll::Ready(item)
            }
            Polled::Nothing => {
                self.waited = true;
                std::task::Poll::Pending
            }
        }
    }
}

/// A whole (short) body as text; what arrived before an error when it breaks.
async fn whole_text(mut body: BodyBytes) -> String {
    let mut bytes = Vec::new();
    while let Some(Ok(piece)) = body.next().await {
        bytes.extend_from_slice(&piece);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The longest `Retry-After` a rate-limited request waits before it is sent again, s: a short
/// limit is honoured (a proxy smoothing bursts); a longer one fails the request as before.
pub const RATE_LIMIT_MAX_WAIT_S: u64 = 10;

/// How often one request is sent again after HTTP 429.
pub const RATE_LIMIT_RETRIES: usize = 3;

/// The wait a `Retry-After` value asks for, whole seconds from `now`: delay-seconds (`5`), or an
/// HTTP date (`Wed, 21 Oct 2026 07:28:00 GMT`, as gateways and CDNs send it; RFC 9110 allows
/// both), rounded up, 0 when it has passed. `None` when it is neither.
fn retry_after_secs(value: &str, now: std::time::SystemTime) -> Option<u64> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0)))
}

/// The wait an HTTP 429 with a short `Retry-After` asks for, s.
fn short_retry_after(e: &StreamError) -> Option<u64> {
    match e {
        StreamError::Http(HttpError::Status { status: 429, retry_after: Some(s), .. })
            if *s <= RATE_LIMIT_MAX_WAIT_S =>
        {
            Some(*s)
        }
        _ => None,
    }
}

/// Why a stream failed; its text is the request's `error` in the results file (and, for the
/// first failed stream, the cell's reason).
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The request failed or the server answered an error status.
    #[error(transparent)]
    Http(HttpError),
    /// No response headers within the stall timeout.
    #[error("no response headers within the stall timeout ({stall:?})")]
    NoHeaders {
        /// `--stall-timeout`.
        stall: Duration,
    },
    /// The answer is not an event stream.
    #[error("the server answered without streaming (content-type {content_type:?}); speedmatrix needs SSE (\"stream\": true)")]
    NotSse {
        /// The answer's `Content-Type`.
        content_type: String,
    },
    /// A success status whose body is an error object instead of a stream.
    #[error("the server answered with an error instead of a stream (content-type {content_type:?}): {message}")]
    ErrorBody {
        /// The answer's `Content-Type`.
        content_type: String,
        /// The server's own message.
        message: String,
    },
    /// A body compressed in a way the collector does not decode.
    #[error("the server compressed the stream with Content-Encoding {encoding:?}, which speedmatrix does not decode (it decodes gzip and deflate); turn compression off for event streams at the server or proxy")]
    Encoding {
        /// The `Content-Encoding`.
        encoding: String,
    },
    /// Nothing arrived for the stall timeout.
    #[error("stalled: no data for {stall:?}")]
    Stalled {
        /// `--stall-timeout`.
        stall: Duration,
    },
    /// Tokens had flowed, then no event arrived for the stall timeout (keep-alive comments at
    /// most).
    #[error(
        "stalled: no token for {stall:?} after the first ones (keep-alive comments do not count once tokens flow)"
    )]
    NoTokens {
        /// `--stall-timeout`.
        stall: Duration,
    },
    /// The stream ended after its `finish_reason` but without `data: [DONE]`.
    #[error("stream ended without data: [DONE]")]
    NoDone,
    /// The stream ended before its `finish_reason`.
    #[error("stream ended early: no finish_reason and no data: [DONE] (truncated)")]
    Truncated,
    /// The connection broke mid-stream.
    #[error("stream broke: {0}")]
    Broke(String),
    /// A payload that is not JSON, or an error sent inside the stream.
    #[error(transparent)]
    Chunk(ChunkError),
}

impl StreamError {
    /// A broken event stream: the transport's own causes say what broke (e.g. the connection
    /// closed before the body's end); the SSE wrapper alone would hide them.
    fn broke(e: &sseer::errors::EventStreamError<BodyError>) -> StreamError {
        StreamError::Broke(match e {
            sseer::errors::EventStreamError::Transport(BodyError::Transport(t)) => t.clone(),
            sseer::errors::EventStreamError::Utf8Error(u) => format!("the event stream is not UTF-8: {u}"),
            other => other.to_string(),
        })
    }
}

/// Why a response body stopped giving bytes.
#[derive(Debug, thiserror::Error)]
enum BodyError {
    /// The connection failed (the transport's own causes, in words).
    #[error("{0}")]
    Transport(String),
    /// A compressed body that does not decode.
    #[error("the compressed body does not decode: {0}")]
    Decode(String),
}

/// A streamed body's bytes as the SSE parser reads them: decoded as its `Content-Encoding`
/// says (a piece that decodes to nothing yet is skipped; one that does not decode ends the body
/// with [`BodyError::Decode`]), and each piece's arrival stamped (run-clock ms, `f64` bits) into
/// `last`: the time [`Client::stream`] gives the events those bytes complete, and what its stall
/// timer reads when it fires — any bytes, an SSE
/// comment (`: ping`, sent by SGLang and proxies during a long prefill) as much as a token, keep
/// a stream that has no token yet alive. The stamp sits under the SSE parser, which swallows
/// comments.
struct Pieces {
    body: BodyBytes,
    decoding: Decoding,
    clock: Clock,
    last: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl futures_util::Stream for Pieces {
    type Item = Result<bytes::Bytes, BodyError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = &mut *self;
        loop {
            match this.body.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(piece))) => {
                    this.last.store(this.clock.now_ms().to_bits(), std::sync::atomic::Ordering::Relaxed);
                    match this.decoding.feed(piece) {
                        Ok(b) if b.is_empty() => continue,
                        decoded => return Poll::Ready(Some(decoded)),
                    }
                }
                other => return other,
            }
        }
    }
}

/// How a streamed body is encoded (`Content-Encoding`), and its decoder: gzip and deflate are
/// decoded as the bytes arrive (a proxy may compress an event stream unasked).
enum Decoding {
    Identity,
    Gzip(Box<flate2::write::GzDecoder<Vec<u8>>>),
    Deflate(Box<flate2::write::ZlibDecoder<Vec<u8>>>),
}

impl Decoding {
    /// The decoding of `resp`'s body; [`StreamError::Encoding`] for one not decoded here.
    fn of(headers: &http::HeaderMap) -> Result<Decoding, StreamError> {
        let encoding = headers.get(http::header::CONTENT_ENCODING).and_then(|v| v.to_str().ok());
        match encoding.map(|e| e.trim().to_ascii_lowercase()).as_deref() {
            None | Some("" | "identity") => Ok(Decoding::Identity),
            Some("gzip" | "x-gzip") => Ok(Decoding::Gzip(Box::new(flate2::write::GzDecoder::new(vec![])))),
            Some("deflate") => Ok(Decoding::Deflate(Box::new(flate2::write::ZlibDecoder::new(vec![])))),
            Some(other) => Err(StreamError::Encoding { encoding: other.to_string() }),
        }
    }

    /// The decoded bytes of the next piece of the body (possibly none yet).
    fn feed(&mut self, b: bytes::Bytes) -> Result<bytes::Bytes, BodyError> {
        use std::io::Write;
        fn run<W: Write>(d: &mut W, b: &[u8], out: impl FnOnce(&mut W) -> Vec<u8>) -> std::io::Result<Vec<u8>> {
            d.write_all(b)?;
            d.flush()?;
            Ok(out(d))
        }
        let decoded = match self {
            Decoding::Identity => return Ok(b),
            Decoding::Gzip(d) => run(d.as_mut(), &b, |d| std::mem::take(d.get_mut())),
            Decoding::Deflate(d) => run(d.as_mut(), &b, |d| std::mem::take(d.get_mut())),
        };
        decoded.map(bytes::Bytes::from).map_err(|e| BodyError::Decode(e.to_string()))
    }
}

async fn cancelled(rx: &mut watch::Receiver<bool>) {
    // A dropped sender means nobody can cancel any more: wait forever.
    if rx.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// `stream_options` of every request: usage on every chunk (`continuous_usage_stats`, a vLLM
/// extension that other servers ignore) and a final usage chunk. Asked of every engine: a
/// server that sends several tokens per chunk is counted right only with it, or with the final
/// usage the collector reconciles its chunk counts with.
pub fn stream_options() -> Value {
    serde_json::json!({ "include_usage": true, "continuous_usage_stats": true })
}

/// Serialize a request body once, to share across the streams of a cell.
pub fn request_body(v: &Value) -> bytes::Bytes {
    bytes::Bytes::from(serde_json::to_vec(v).expect("a JSON value always serializes"))
}

/// How one stream is run and watched.
#[derive(Debug)]
pub struct StreamCtl {
    /// The run clock all times are read from.
    pub clock: Clock,
    /// The longest silence (no bytes) before the stream counts as stalled.
    pub stall: Duration,
    /// When it turns `true` the stream is dropped and its record returned as `cancelled` (the
    /// collector closes a window this way).
    pub cancel: watch::Receiver<bool>,
    /// Stream id within its cell.
    pub id: usize,
    /// Told when the first token arrives.
    pub events: Option<mpsc::UnboundedSender<FirstToken>>,
    /// Incremented by every chunk's tokens (live tok/s for the progress bar).
    pub live_tokens: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// Keep the answer's content text in the record (`StreamRecord::content`: a conversation
    /// sends it back); off on every measuring path that needs only the timing.
    pub keep_text: bool,
    /// A cell's opening streams: wait at this gate, request ready, until all are ready.
    pub gate: Option<Gate>,
}

/// What a stream tells its coordinator while it runs: its first token arrived (its record, with
/// the time, comes from its task when it ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstToken {
    /// Stream id.
    pub id: usize,
}

/// One token-carrying SSE chunk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Chunk {
    /// Arrival time, ms since the run start (client clock).
    pub t_ms: f64,
    /// Tokens it carried (usage delta; 1 when the server sends no per-chunk usage).
    pub tokens: u32,
}

/// Everything recorded about one streamed request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamRecord {
    /// Stream id within its cell.
    pub id: usize,
    /// When the request was sent, ms since the run start.
    pub sent_ms: f64,
    /// Token-carrying chunks in arrival order.
    pub chunks: Vec<Chunk>,
    /// First content (not reasoning) token, ms since the run start.
    pub first_content_ms: Option<f64>,
    /// Prompt tokens (server usage).
    pub prompt_tokens: Option<u64>,
    /// Completion tokens, last cumulative value seen (server usage).
    pub completion_tokens: Option<u64>,
    /// Whether every token chunk carried cumulative usage (`continuous_usage_stats`).
    pub continuous_usage: bool,
    /// Chunks that carried text (content, reasoning or a tool call): at least one token each.
    pub text_chunks: u64,
    /// Text chunks whose usage did not grow (usage that is not a running total).
    pub usage_stalls: u64,
    /// `finish_reason` of the choice, when sent.
    pub finish_reason: Option<String>,
    /// The completion's `id` as the server sent it.
    pub response_id: Option<String>,
    /// Whether `data: [DONE]` arrived.
    pub done: bool,
    /// Dropped by the collector (window closed).
    pub cancelled: bool,
    /// Why the stream failed, if it did.
    pub error: Option<String>,
    /// When the stream ended, ms since the run start.
    pub ended_ms: Option<f64>,
    /// The server's own timing of the request (llama.cpp `timings`), last one seen.
    pub server_timings: Option<speedmatrix_schema::ServerTimings>,
    /// Prompt tokens the server served from its prefix cache (`usage.prompt_tokens_details`).
    pub cached_tokens: Option<u64>,
    /// The answer's content text, when its `StreamCtl` asked to keep it.
    pub content: Option<String>,
    /// The `Retry-After` waits (s) of each HTTP 429 this request got before it was sent again.
    pub rate_limited: Vec<u64>,
}

/// A record plus whether its stream opened the cell (vs. replaced a finished one).
#[derive(Debug, Clone)]
pub struct CellStream {
    /// What the stream saw.
    pub record: StreamRecord,
    /// True for the N streams that opened the cell.
    pub opening: bool,
}

/// A request's `usage.prompt_tokens` as a count of its prompt. Every prompt the collector sends
/// has text, so 0 is no count (a proxy that fills `usage` with zeros): `None`, as if absent.
pub fn served_count(usage: Option<u64>) -> Option<u64> {
    usage.filter(|&t| t > 0)
}

impl StreamRecord {
    /// The prompt tokens its answer's usage counted, a 0 being no count
    /// ([`served_count`]).
    pub fn served_prompt_tokens(&self) -> Option<u64> {
        served_count(self.prompt_tokens)
    }

    fn fail(mut self, clock: Clock, why: StreamError) -> StreamRecord {
        self.fail_in_place(clock, why);
        self
    }

    /// Cancelled before it was answered (`None`: no response to read).
    fn cancel_in_place<T>(&mut self, clock: Clock) -> Option<T> {
        self.cancelled = true;
        self.ended_ms = Some(clock.now_ms());
        None
    }

    /// [`StreamRecord::fail`] on a borrowed record.
    fn fail_in_place(&mut self, clock: Clock, why: StreamError) {
        self.error = Some(why.to_string());
        self.ended_ms = Some(clock.now_ms());
    }

    /// Why a stream that ended without `data: [DONE]` failed.
    fn ended_early(&self) -> StreamError {
        if self.finish_reason.is_some() {
            StreamError::NoDone
        } else {
            StreamError::Truncated
        }
    }

    /// Take in one parsed chunk that arrived at `t_ms`. Returns whether it carried the stream's
    /// first token.
    fn add(&mut self, p: ParsedChunk, t_ms: f64) -> bool {
        if self.response_id.is_none() {
            self.response_id = p.id;
        }
        if p.prompt_tokens.is_some() {
            self.prompt_tokens = p.prompt_tokens;
        }
        if p.timings.is_some() {
            self.server_timings = p.timings;
        }
        if p.cached_tokens.is_some() {
            self.cached_tokens = p.cached_tokens;
        }
        if p.finish_reason.is_some() {
            self.finish_reason = p.finish_reason;
        }
        if p.completion_tokens.is_some() {
            self.completion_tokens = p.completion_tokens;
        }
        if p.tokens == 0 {
            return false;
        }
        self.text_chunks += u64::from(p.text);
        self.usage_stalls += u64::from(p.stalled);
        let first = self.chunks.is_empty();
        if p.content && self.first_content_ms.is_none() {
            self.first_content_ms = Some(t_ms);
        }
        self.chunks.push(Chunk { t_ms, tokens: p.tokens });
        first
    }

    /// Time to first token, ms.
    pub fn ttft_ms(&self) -> Option<f64> {
        self.chunks.first().map(|c| c.t_ms - self.sent_ms)
    }

    /// Whether the request finished normally: the server ended it ([`StreamRecord::ended_by_server`])
    /// as a completed request (`stop`, `length` or an engine's equivalent,
    /// [`speedmatrix_schema::endings::completes`]). A request the server cut short (`abort`,
    /// `error`, no finish reason) is no completed request.
    pub fn finished(&self) -> bool {
        self.ended_by_server() && self.finish_reason.as_deref().is_some_and(speedmatrix_schema::endings::completes)
    }

    /// Whether the server ended the request: `data: [DONE]` arrived, no error, not cancelled by
    /// the collector (whatever its finish reason, or none).
    pub fn ended_by_server(&self) -> bool {
        self.error.is_none() && !self.cancelled && self.done
    }

    /// Output tokens: the server's usage, else the counted chunks.
    pub fn output_tokens(&self) -> u64 {
        self.completion_tokens.unwrap_or_else(|| self.chunk_tokens())
    }

    /// Output tokens counted from the chunks.
    pub fn chunk_tokens(&self) -> u64 {
        self.chunks.iter().map(|c| u64::from(c.tokens)).sum()
    }
}

/// How long a discovery or `/metrics` GET may take before it counts as unanswered.
const GET_TIMEOUT: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that accepts the connection and never answers: the error says how long it waited.
    #[tokio::test]
    async fn a_request_that_gets_no_answer_says_how_long_it_waited() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let _held = tokio::spawn(async move {
            let (_socket, _) = listener.accept().await.unwrap();
            std::future::pending::<()>().await;
        });
        let client = Client::new(&url, None, 4).unwrap();
        let e = client.post_json("/tokenize", &serde_json::json!({}), Duration::from_millis(300)).await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains("no answer within 300ms"), "{text}");
    }

    #[test]
    fn retry_after_is_read_as_seconds_or_as_an_http_date() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_796_155_000);
        assert_eq!(retry_after_secs(" 7 ", now), Some(7));
        let soon = httpdate::fmt_http_date(now + Duration::from_secs(3));
        assert_eq!(retry_after_secs(&soon, now), Some(3), "{soon}");
        let soon = httpdate::fmt_http_date(now + Duration::from_secs(3));
        assert_eq!(retry_after_secs(&soon, now - Duration::from_millis(400)), Some(4), "rounded up");
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(retry_after_secs(&past, now), Some(0), "a date that has passed: send again at once");
        assert_eq!(retry_after_secs("soon", now), None);
        assert_eq!(retry_after_secs("-1", now), None);
    }
}
