//! Held connections: the HTTP/1.1 connections that carry the streamed requests, opened and kept
//! by the collector itself (hyper's low-level client, `hyper::client::conn::http1`, over tokio's
//! `TcpStream`), not by a pooled client.
//!
//! Why not reqwest's pool for the streams: a pooled client decides itself which connection a
//! request takes — it hands a small answer's connection back at once, so warming N connections
//! in batches through it reuses the first batch's, and it races every checkout against a new
//! connect. Here a connection is an object the collector holds:
//! - **Bounded warm-up** ([`Held::warm`]): connections are opened in batches of
//!   [`WARM_BATCH`], each answered once on `GET /v1/models` (so the server has accepted it)
//!   before the next batch connects. At most a batch of handshakes waits in the server's accept
//!   queue, so a listen backlog smaller than the streams (uvicorn's default 2,048, `somaxconn`
//!   4,096) resets none of them.
//! - **A burst that is a burst**: each stream takes an idle connection ([`Held::take`]) and its
//!   request is the cell's serialized body behind a fixed head, so N opening requests leave one
//!   after another with nothing between them but their writes.
//! - A stream whose body ended hands its connection back ([`Held::give_back`]) for the stream
//!   that replaces it.
//! - The request's send: its body ([`StampedBody`]) notes when it is written ([`SendStamp`]),
//!   and a cell's opening streams wait at a [`Gate`], each with its connection ready and its
//!   request built, until all are ready, then leave together.
//!
//! A connection the server closed or reset while it sat idle is noticed when a stream takes it (its
//! I/O driven once: [`Conn::is_closed`], or `ready()` failing), and the stream opens a new one
//! instead; a request that the connection could not take (it closed as the request was handed over,
//! before any byte was written) goes out on a new connection. A request that was written and then
//! closed on without a byte of answer is not sent again ([`SendFailed::unanswered`]: the server may
//! have read it; the stream fails saying so), unless it went out on a connection that had sat idle
//! ([`Reused`]): once more, on a new connection. An answer whose end is the connection's close
//! (HTTP/1.0) or that says `Connection: close` closes its connection, and the stream after it opens
//! a new one. Only plain `http://` URLs with no proxy configured take this path
//! ([`Held::for_base`]); `https://`, a proxy from the environment and everything that is not a
//! streamed request (discovery, `/metrics`, probes) stay with reqwest.

use crate::text::error_chain;
use http_body_util::BodyExt;
use hyper::client::conn::http1::SendRequest;
use std::future::Future as _;
use std::sync::Mutex;
use std::time::Duration;

/// A held connection: hyper's handle to send requests on it, and the connection's I/O, which
/// the task using the connection drives ([`Conn::drive`]) — no task of its own, so a chunk that
/// arrives wakes one task (the stream's), not the connection's and then the stream's.
pub(crate) struct Conn {
    send: SendRequest<StampedBody>,
    /// The connection's I/O (hyper's dispatcher: it writes the requests, reads the answers into
    /// their bodies); `None` once it ended (closed, reset, broken).
    io: Option<Io>,
}

/// hyper's HTTP/1.1 connection over a tokio `TcpStream`: a future that does the connection's
/// reads and writes each time it is polled.
type Io = hyper::client::conn::http1::Connection<hyper_util::rt::TokioIo<tokio::net::TcpStream>, StampedBody>;

impl Conn {
    /// Do the connection's pending I/O (write what is queued, read what came into the answer's
    /// body), registering `cx` for what it waits on. `false` once the connection ended.
    pub(crate) fn drive(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        if let Some(io) = &mut self.io {
            if std::pin::Pin::new(io).poll(cx).is_ready() {
                // Dropped: a request still waiting for its answer gets hyper's error now.
                self.io = None;
            }
        }
        self.io.is_some()
    }

    /// Whether the connection ended (its I/O driven once first, so a close or reset the server
    /// made while it sat idle is seen).
    pub(crate) fn is_closed(&mut self) -> bool {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        !self.drive(&mut cx) || self.send.is_closed()
    }

    /// Wait until the connection can take a request.
    pub(crate) async fn ready(&mut self) -> hyper::Result<()> {
        std::future::poll_fn(|cx| {
            self.drive(cx);
            self.send.poll_ready(cx)
        })
        .await
    }

    /// `f` (a request's answer, a body), driving the connection's I/O while it waits.
    async fn run<F: std::future::Future>(&mut self, f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        std::future::poll_fn(|cx| {
            self.drive(cx);
            f.as_mut().poll(cx)
        })
        .await
    }

    /// Send `req` and wait for its answer's head; the request back when the connection could
    /// not take it (it closed as it was handed over, before a byte was written).
    async fn send(
        &mut self,
        req: http::Request<StampedBody>,
    ) -> Result<http::Response<hyper::body::Incoming>, hyper::client::conn::TrySendError<http::Request<StampedBody>>>
    {
        let answer = self.send.try_send_request(req);
        self.run(answer).await
    }
}

/// Connections opened at once by [`Held::warm`]: each batch is answered before the next
/// connects, so at most this many handshakes wait in a server's accept queue (an eighth of
/// uvicorn's default backlog of 2,048; 8,192 streams take 32 batches, one round trip each).
pub const WARM_BATCH: usize = 256;

/// How long one connect, or one warm-up answer, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The collector's own connections to one server (`http://host:port[/prefix]`).
pub(crate) struct Held {
    /// `host:port`, as connected to.
    addr: String,
    /// The `Host` header.
    host: http::HeaderValue,
    /// The base URL's path ("" or "/prefix"), put before every request's path.
    prefix: String,
    /// `Authorization: Bearer KEY`, when the run has an API key.
    auth: Option<http::HeaderValue>,
    /// Open connections no stream is using.
    idle: Mutex<Vec<Conn>>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").field("addr", &self.addr).field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

/// Why a base URL's streams go through reqwest instead ([`Held::for_base`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotHeld {
    /// Not a plain `http://` URL (`https://`: TLS stays with reqwest).
    Scheme(String),
    /// A proxy is set in the environment (reqwest honours it; held connections would not).
    Proxy(&'static str),
    /// The URL or the API key cannot be put into a request head as they are.
    Unusable(String),
}

impl std::fmt::Display for NotHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotHeld::Scheme(s) => write!(f, "the URL's scheme is {s:?}, not http"),
            NotHeld::Proxy(v) => write!(f, "the environment sets a proxy ({v})"),
            NotHeld::Unusable(why) => f.write_str(why),
        }
    }
}

/// The proxy variables reqwest reads from the environment for an `http://` URL.
const PROXY_VARS: [&str; 4] = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

impl Held {
    /// Held connections for `base` (`http://host:port`, maybe a path after it), or why its
    /// streams stay with reqwest. `proxy_var` reads an environment variable (the process's in
    /// the collector; a map in tests).
    pub fn for_base(
        base: &str,
        api_key: Option<&str>,
        proxy_var: impl Fn(&str) -> Option<String>,
    ) -> Result<Held, NotHeld> {
        let uri: http::Uri = base.parse().map_err(|e| NotHeld::Unusable(format!("the URL does not parse: {e}")))?;
        match uri.scheme_str() {
            Some("http") => {}
            other => return Err(NotHeld::Scheme(other.unwrap_or("").to_string())),
        }
        if let Some(var) = PROXY_VARS.into_iter().find(|v| proxy_var(v).is_some_and(|x| !x.trim().is_empty())) {
            return Err(NotHeld::Proxy(var));
        }
        let authority = uri.authority().ok_or_else(|| NotHeld::Unusable("the URL has no host".into()))?;
        let port = authority.port_u16().unwrap_or(80);
        let addr = format!("{}:{port}", authority.host());
        let host = http::HeaderValue::from_str(authority.as_str())
            .map_err(|e| NotHeld::Unusable(format!("the host is no header value: {e}")))?;
        let auth = api_key
            .map(|k| http::HeaderValue::from_str(&format!("Bearer {k}")))
            .transpose()
            .map_err(|_| NotHeld::Unusable("the API key is no header value".into()))?;
        let prefix = uri.path().trim_end_matches('/').to_string();
        Ok(Held { addr, host, prefix, auth, idle: Mutex::new(vec![]) })
    }

    /// An idle connection that is still open, if there is one.
    pub fn take(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(mut c) = idle.pop() {
            if !c.is_closed() {
                return Some(c);
            }
        }
        None
    }

    /// Keep `conn` for the next stream (unless it closed).
    pub fn give_back(&self, mut conn: Conn) {
        if !conn.is_closed() {
            self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(conn);
        }
    }

    /// Idle connections still open (closed ones are dropped).
    pub fn idle(&self) -> usize {
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        idle.retain_mut(|c| !c.is_closed());
        idle.len()
    }

    /// Open a connection: TCP connect (at most [`CONNECT_TIMEOUT`]) and hyper's HTTP/1.1
    /// handshake; its I/O is driven by whoever uses it ([`Conn::drive`]).
    pub async fn open(&self) -> Result<Conn, String> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&self.addr))
            .await
            .map_err(|_| format!("no connection within {}", humantime::format_duration(CONNECT_TIMEOUT)))?
            .map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        let (send, io) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|e| error_chain(&e))?;
        Ok(Conn { send, io: Some(io) })
    }

    /// Have `n` idle connections, each answered once by the server: the missing ones opened in
    /// batches of [`WARM_BATCH`], a batch's `GET /v1/models` answered (or failed) before the next
    /// batch connects. Each missing one is tried once: a connection that fails, or that the
    /// server closes after its answer, is left out (the stream that finds none opens its own).
    /// Returns how many are idle now.
    pub async fn warm(&self, n: usize) -> usize {
        let mut missing = n.saturating_sub(self.idle());
        while missing > 0 {
            let batch = missing.min(WARM_BATCH);
            let opened = futures_util::future::join_all((0..batch).map(|_| self.warm_one())).await;
            for c in opened.into_iter().flatten() {
                self.give_back(c);
            }
            missing -= batch;
        }
        self.idle()
    }

    /// One new connection, answered once on `GET /v1/models` (body read to its end).
    async fn warm_one(&self) -> Option<Conn> {
        let mut conn = self.open().await.ok()?;
        let req = self.request(http::Method::GET, "/v1/models", StampedBody::empty()).ok()?;
        let answered = async {
            conn.ready().await.ok()?;
            let resp = conn.send(req).await.ok()?;
            conn.run(resp.into_body().collect()).await.ok()
        };
        tokio::time::timeout(CONNECT_TIMEOUT, answered).await.ok().flatten()?;
        Some(conn)
    }

    /// A request for `path` (after the base URL's own path) with the run's headers: `Host`,
    /// the API key, and for a body `Content-Type: application/json` and
    /// `Accept: text/event-stream`.
    pub fn request(
        &self,
        method: http::Method,
        path: &str,
        body: StampedBody,
    ) -> Result<http::Request<StampedBody>, String> {
        let mut b = http::Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.prefix))
            .header(http::header::HOST, self.host.clone());
        if let Some(a) = &self.auth {
            b = b.header(http::header::AUTHORIZATION, a.clone());
        }
        if method == http::Method::POST {
            b = b
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::ACCEPT, "text/event-stream");
        }
        b.body(body).map_err(|e| e.to_string())
    }

    /// A connection ready for a request: an idle one, else (none idle, or the idle one closed
    /// or was reset while idle: a server's keep-alive timeout) a new one; and whether it is one
    /// that sat idle ([`Reused`]).
    pub async fn ready(&self) -> Result<(Conn, Reused), String> {
        if let Some(mut conn) = self.take() {
            if conn.ready().await.is_ok() {
                return Ok((conn, Reused(true)));
            }
        }
        Ok((self.ready_new().await?, Reused(false)))
    }

    /// A new connection, ready for a request.
    pub async fn ready_new(&self) -> Result<Conn, String> {
        let mut conn = self.open().await?;
        conn.ready().await.map_err(|e| error_chain(&e))?;
        Ok(conn)
    }

    /// Send `req` on `conn` ([`Held::ready`]; on a new connection when `conn` closed before it
    /// took the request) and wait for the response head.
    pub async fn send(
        &self,
        conn: Conn,
        req: http::Request<StampedBody>,
    ) -> Result<(http::Response<hyper::body::Incoming>, Conn), SendFailed> {
        let mut conn = conn;
        match conn.send(req).await {
            Ok(resp) => Ok((resp, conn)),
            Err(mut e) => match e.take_message() {
                // The connection closed as it was handed the request, before writing it.
                Some(req) => {
                    let mut fresh = self.open().await.map_err(SendFailed::unreachable)?;
                    fresh.ready().await.map_err(|e| SendFailed::of(&e))?;
                    let resp = fresh.send(req).await.map_err(|e| SendFailed::of(e.error()))?;
                    Ok((resp, fresh))
                }
                None => Err(SendFailed::of(e.error())),
            },
        }
    }
}

/// Whether a connection came from the idle ones ([`Held::ready`]). A server may close an idle
/// connection (its keep-alive timeout: llama.cpp's HTTP server closes one after 5 s) just as
/// the collector writes a request on it; that request, closed on unanswered, is sent again once
/// on a new connection. One on a new connection is not: that server did not answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reused(pub bool);

/// Why a request sent on a held connection got no response head ([`Held::send`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SendFailed {
    /// The transport's words (hyper's error chain).
    pub message: String,
    /// The request was written and the server closed the connection without a byte of answer
    /// (hyper: "connection closed before message completed") — it was reached; it did not
    /// answer.
    pub unanswered: bool,
}

impl SendFailed {
    fn of(e: &hyper::Error) -> SendFailed {
        SendFailed { message: error_chain(e), unanswered: closed_unanswered(e) }
    }

    pub(crate) fn unreachable(message: String) -> SendFailed {
        SendFailed { message, unanswered: false }
    }
}

/// Whether `e`, or an error it wraps (reqwest wraps hyper's), is hyper's "connection closed
/// before message completed": the request went out and the server closed the connection
/// before a whole answer head came back.
pub(crate) fn closed_unanswered(e: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(e), |e| e.source())
        .any(|e| e.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_incomplete_message))
}

/// When a request's bytes were written: the instant the HTTP client first asked its body for
/// data, which it does as it writes the request (head and body in one flush) — after pool
/// checkout and any connection set-up, before the server can answer. Shared between the body
/// (polled where the connection's I/O runs: the stream's own task on a held connection,
/// reqwest's connection task on a pooled one) and the stream's task.
#[derive(Clone)]
pub(crate) struct SendStamp {
    /// The run clock's zero (`Clock::zero` of the client module).
    zero: std::time::Instant,
    /// `f64` bits of the run-clock ms; NaN until written.
    ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SendStamp {
    pub(crate) fn new(zero: std::time::Instant) -> Self {
        SendStamp { zero, ms: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(f64::NAN.to_bits())) }
    }

    /// The write instant, once the body was asked for.
    pub(crate) fn ms(&self) -> Option<f64> {
        Some(f64::from_bits(self.ms.load(std::sync::atomic::Ordering::Acquire))).filter(|v| v.is_finite())
    }

    /// A request body of `bytes` that stamps this on its first poll.
    pub(crate) fn body(&self, bytes: bytes::Bytes) -> StampedBody {
        StampedBody { len: bytes.len() as u64, bytes: Some(bytes), stamp: Some(self.clone()) }
    }
}

/// A whole request body that notes, in its [`SendStamp`], when it was first polled. Its exact
/// size hint makes the client send `Content-Length` (not chunked), as for a plain body.
pub(crate) struct StampedBody {
    bytes: Option<bytes::Bytes>,
    len: u64,
    stamp: Option<SendStamp>,
}

impl StampedBody {
    /// No body, nothing stamped (a `GET`).
    pub(crate) fn empty() -> StampedBody {
        StampedBody { bytes: None, len: 0, stamp: None }
    }
}

impl http_body::Body for StampedBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let frame = self.bytes.take().map(|b| {
            if let Some(stamp) = &self.stamp {
                let ms = stamp.zero.elapsed().as_secs_f64() * 1000.0;
                stamp.ms.store(ms.to_bits(), std::sync::atomic::Ordering::Release);
            }
            Ok(http_body::Frame::data(b))
        });
        std::task::Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(if self.bytes.is_some() { self.len } else { 0 })
    }
}

/// A cell's opening streams meet here: each arrives with its request ready on its connection
/// (or having failed before that), and once all have arrived they are released together, so
/// their requests are written one right after another, with no stream's set-up in between.
#[derive(Debug, Clone)]
pub struct Gate {
    inner: std::sync::Arc<GateInner>,
}

#[derive(Debug)]
struct GateInner {
    /// Streams yet to arrive.
    left: std::sync::atomic::AtomicUsize,
    /// `true` once every stream arrived.
    open: tokio::sync::watch::Sender<bool>,
}

impl Gate {
    /// A gate for `n` streams (open at once for none).
    pub fn new(n: usize) -> Gate {
        Gate {
            inner: std::sync::Arc::new(GateInner {
                left: std::sync::atomic::AtomicUsize::new(n),
                open: tokio::sync::watch::channel(n == 0).0,
            }),
        }
    }

    fn arrive(&self) {
        if self.inner.left.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            self.inner.open.send_replace(true);
        }
    }
}

/// One stream's arrival at its [`Gate`]: made at [`Arrival::pass`], or when dropped unmade (a
/// stream that failed or was cancelled before its request was ready holds no one up).
pub(crate) struct Arrival(Option<Gate>);

impl Arrival {
    pub(crate) fn new(gate: Gate) -> Arrival {
        Arrival(Some(gate))
    }

    /// Arrive and wait until every stream has.
    pub(crate) async fn pass(mut self) {
        if let Some(gate) = self.0.take() {
            let mut open = gate.inner.open.subscribe();
            gate.arrive();
            let _ = open.wait_for(|o| *o).await;
        }
    }
}

impl Drop for Arrival {
    fn drop(&mut self) {
        if let Some(gate) = self.0.take() {
            gate.arrive();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn plain_http_is_held_and_keeps_its_path_and_key() {
        let h = Held::for_base("http://127.0.0.1:8000/proxy/", Some("sk-1"), no_env).unwrap();
        assert_eq!(h.addr, "127.0.0.1:8000");
        assert_eq!(h.prefix, "/proxy");
        let req = h.request(http::Method::POST, "/v1/completions", StampedBody::empty()).unwrap();
        assert_eq!(req.uri(), "/proxy/v1/completions");
        assert_eq!(req.headers()[http::header::HOST], "127.0.0.1:8000");
        assert_eq!(req.headers()[http::header::AUTHORIZATION], "Bearer sk-1");
        assert_eq!(req.headers()[http::header::ACCEPT], "text/event-stream");
        let h = Held::for_base("http://server", None, no_env).unwrap();
        assert_eq!(h.addr, "server:80");
        let get = h.request(http::Method::GET, "/v1/models", StampedBody::empty()).unwrap();
        assert!(get.headers().get(http::header::AUTHORIZATION).is_none());
        assert!(get.headers().get(http::header::CONTENT_TYPE).is_none());
        assert_eq!(Held::for_base("http://[::1]:9/", None, no_env).unwrap().addr, "[::1]:9");
    }

    #[test]
    fn https_and_proxies_stay_with_reqwest() {
        let e = Held::for_base("https://api.example.com", None, no_env).unwrap_err();
        assert_eq!(e, NotHeld::Scheme("https".into()));
        let proxied = |v: &str| (v == "http_proxy").then(|| "http://proxy:3128".to_string());
        let e = Held::for_base("http://127.0.0.1:8000", None, proxied).unwrap_err();
        assert_eq!(e.to_string(), "the environment sets a proxy (http_proxy)");
        let empty = |_: &str| Some(" ".to_string());
        assert!(Held::for_base("http://127.0.0.1:8000", None, empty).is_ok(), "an empty variable sets no proxy");
        let e = Held::for_base("http://127.0.0.1:8000", Some("bad\nkey"), no_env).unwrap_err();
        assert!(matches!(e, NotHeld::Unusable(_)), "{e}");
    }
}
