//! A front: a proxy's stand-in between the collector and a scripted server, for connection
//! shapes the scripted server (axum, which keeps HTTP/1.1 connections as hyper does) never
//! writes — a keep-alive connection reset while idle, a connection closed right after a request
//! was read, answers in HTTP/1.0 delimited by closing the connection, `Connection: close` on
//! every answer. See [`Front`].
//!
//! It reads each request from the collector itself (head and `Content-Length` body), logs it,
//! then either does what its [`Front`] says to the connection or forwards the request to the
//! scripted server on a connection of its own (`Connection: close`, so the server's answer ends
//! where that connection does) and writes the answer back, its head rewritten as the front
//! says. What it saw and did is in its [`FrontLog`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// What the front does to the collector's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// Keep-alive, and a server's keep-alive timeout shorter than the collector's pause before
    /// a cell: the first `GET /metrics` after a warm-up (`GET /v1/models` as a connection's
    /// first request) waits until it is the only request being answered, then every connection
    /// idle at that moment is reset (`SO_LINGER` 0: an RST, not a FIN) before `/metrics` is
    /// answered. That `/metrics` is the counters the collector reads, and waits for, after it
    /// warmed a cell's connections and before the cell's streams open: the warm connections and
    /// those of finished streams (the prefill probes, the warm-up request) are gone before the
    /// cell. Triggered by that moment, not by a timer, so that a busy CPU can neither reset a
    /// connection the collector is writing to nor leave the warm ones open.
    ResetIdle,
    /// Read a decode request (`max_tokens` > 1), then close the connection without any answer:
    /// on the first decode request of each connection only, or (`every`) on every one.
    CloseOnDecode {
        /// Every decode request, not only each connection's first.
        every: bool,
    },
    /// A keep-alive timeout that crosses a request: on a connection that carried a request
    /// before (a warm one), the first decode request is read and the connection closed without
    /// an answer, as a server closing a connection it found idle does just as a request arrives;
    /// every request on a connection's first use is answered.
    CloseWarmOnDecode,
    /// An HTTP/1.0 proxy: every answer `HTTP/1.0`, `Connection: close`, no `Transfer-Encoding`,
    /// its body (an event stream too) delimited by closing the connection.
    Http10,
    /// An HTTP/1.1 proxy that answers every request with `Connection: close` and then closes.
    Close11,
}

/// One request the front read.
#[derive(Debug, Clone)]
pub struct FrontRequest {
    /// The collector's port: its connection.
    pub port: u16,
    /// Requests this connection carried before this one.
    pub nth: usize,
    /// `GET /v1/models`, `POST /v1/completions` …
    pub line: String,
    /// A completion with `max_tokens` > 1.
    pub decode: bool,
}

/// What the front saw and did.
#[derive(Debug, Clone, Default)]
pub struct FrontLog {
    /// Every request read, in order.
    pub requests: Vec<FrontRequest>,
    /// Connections reset while idle ([`Front::ResetIdle`]), with the last request each carried.
    pub resets: Vec<(u16, String)>,
    /// Connections closed after a decode request was read ([`Front::CloseOnDecode`],
    /// [`Front::CloseWarmOnDecode`]).
    pub closed: Vec<u16>,
    /// What the front could not do as scripted (a test fails on any).
    pub problems: Vec<String>,
}

/// The front's shared state.
pub(super) struct FrontState {
    front: Front,
    upstream: SocketAddr,
    log: Mutex<FrontLog>,
    /// Requests being answered now.
    busy: AtomicI64,
    /// Connections idle now ([`Front::ResetIdle`]): each waits on its sender for the ack to
    /// send once it has been reset.
    idle: Mutex<HashMap<u64, oneshot::Sender<oneshot::Sender<()>>>>,
    /// A warm-up came since the last reset ([`Front::ResetIdle`]).
    armed: std::sync::atomic::AtomicBool,
    next_id: AtomicU64,
}

impl FrontState {
    pub(super) fn log(&self) -> FrontLog {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn note(&self, f: impl FnOnce(&mut FrontLog)) {
        if let Ok(mut l) = self.log.lock() {
            f(&mut l);
        }
    }
}

/// Start `front` on a free loopback port in front of `upstream`; returns its address and state.
pub(super) async fn start(front: Front, upstream: SocketAddr) -> (SocketAddr, Arc<FrontState>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the front");
    let addr = listener.local_addr().expect("the front's address");
    let state = Arc::new(FrontState {
        front,
        upstream,
        log: Mutex::default(),
        busy: AtomicI64::new(0),
        idle: Mutex::default(),
        armed: Default::default(),
        next_id: AtomicU64::new(0),
    });
    let st = state.clone();
    tokio::spawn(async move {
        while let Ok((client, peer)) = listener.accept().await {
            let id = st.next_id.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(client, peer.port(), id, st.clone()));
        }
    });
    (addr, state)
}

/// A request as read: its head's lines and its body.
struct Request {
    line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// One connection from the collector, request after request.
async fn serve(mut client: TcpStream, port: u16, id: u64, st: Arc<FrontState>) {
    let _ = client.set_nodelay(true);
    let mut buf = Vec::new();
    let mut last = String::new();
    let mut decodes = 0;
    for nth in 0.. {
        if st.front == Front::ResetIdle && buf.is_empty() && wait_idle(&mut client, port, id, &last, &st).await {
            return;
        }
        let Some(req) = read_request(&mut client, &mut buf).await else { return };
        let line = req.line.rsplit_once(' ').map_or(req.line.clone(), |(l, _)| l.to_string());
        let decode = line.starts_with("POST ")
            && line.ends_with("completions")
            && serde_json::from_slice::<serde_json::Value>(&req.body)
                .is_ok_and(|v| v["max_tokens"].as_u64().unwrap_or(16) > 1);
        st.note(|l| l.requests.push(FrontRequest { port, nth, line: line.clone(), decode }));
        let close = match st.front {
            Front::CloseOnDecode { every } => every || decodes == 0,
            Front::CloseWarmOnDecode => decodes == 0 && nth > 0,
            _ => false,
        };
        if decode && close {
            st.note(|l| l.closed.push(port));
            let _ = client.shutdown().await;
            return;
        }
        decodes += usize::from(decode);
        st.busy.fetch_add(1, Ordering::SeqCst);
        if st.front == Front::ResetIdle {
            if line == "GET /v1/models" && nth == 0 {
                st.armed.store(true, Ordering::SeqCst);
            }
            if line == "GET /metrics" && st.armed.swap(false, Ordering::SeqCst) {
                reset_idle(&st).await;
            }
        }
        let answered = forward(&mut client, &req, &st).await;
        st.busy.fetch_sub(1, Ordering::SeqCst);
        if let Err(e) = answered {
            if !matches!(e.kind(), std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset) {
                st.note(|l| l.problems.push(format!("{line}: {e}")));
            }
            return;
        }
        if matches!(st.front, Front::Http10 | Front::Close11) {
            let _ = client.shutdown().await;
            return;
        }
        last = line;
    }
}

/// Wait idle for the connection's next request ([`Front::ResetIdle`]); `true` when it was
/// reset (or the collector closed it) meanwhile.
async fn wait_idle(client: &mut TcpStream, port: u16, id: u64, last: &str, st: &FrontState) -> bool {
    let (tx, mut kick) = oneshot::channel();
    st.idle.lock().expect("the idle list").insert(id, tx);
    let mut byte = [0u8; 1];
    let ack = tokio::select! {
        biased;
        peeked = client.peek(&mut byte) => {
            if st.idle.lock().expect("the idle list").remove(&id).is_some() {
                return !matches!(peeked, Ok(n) if n > 0);
            }
            // Taken for a reset as a request began: reset it anyway, and say so.
            st.note(|l| l.problems.push(format!("port {port}: reset as a request began on it")));
            match kick.await {
                Ok(ack) => ack,
                Err(_) => return true,
            }
        }
        ack = &mut kick => match ack {
            Ok(ack) => ack,
            Err(_) => return true,
        },
    };
    // tokio deprecates SO_LINGER because a close may then block until the data is sent; with
    // a linger of 0 nothing waits: the close discards what is unsent and sends the RST.
    #[allow(deprecated)]
    let _ = client.set_linger(Some(std::time::Duration::ZERO));
    st.note(|l| l.resets.push((port, last.to_string())));
    // Dropped by the caller's return: with SO_LINGER 0 the close sends an RST.
    let _ = ack.send(());
    true
}

/// Once the request being answered is the only one (the others' answers ended: their
/// connections are idle), reset every idle connection and wait until each has been.
async fn reset_idle(st: &FrontState) {
    let quiet = async {
        while st.busy.load(Ordering::SeqCst) > 1 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    };
    if tokio::time::timeout(std::time::Duration::from_secs(10), quiet).await.is_err() {
        st.note(|l| {
            l.problems.push("other requests were still being answered 10 s after the /metrics that resets".into())
        });
        return;
    }
    let idle: Vec<_> = st.idle.lock().expect("the idle list").drain().map(|(_, tx)| tx).collect();
    let mut acks = vec![];
    for tx in idle {
        let (ack, acked) = oneshot::channel();
        if tx.send(ack).is_ok() {
            acks.push(acked);
        }
    }
    for acked in acks {
        let _ = acked.await;
    }
    // The connections' tasks dropped their sockets just after acking: let them run.
    tokio::task::yield_now().await;
}

/// The next request on `client` (its head up to the blank line, then `Content-Length` bytes),
/// `buf` holding what was read beyond it; `None` when the connection ends first.
async fn read_request(client: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut piece = [0u8; 8192];
        match client.read(&mut piece).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&piece[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end + 4);
    let mut lines = head.split("\r\n");
    let line = lines.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    while buf.len() < len {
        let mut piece = [0u8; 65536];
        match client.read(&mut piece).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&piece[..n]),
        }
    }
    let body = buf.drain(..len).collect();
    Some(Request { line, headers, body })
}

/// Send `req` to the scripted server on a new connection (`Connection: close`; HTTP/1.0 for
/// [`Front::Http10`]) and copy its answer to `client`, the head rewritten for the front, until
/// the server closes.
async fn forward(client: &mut TcpStream, req: &Request, st: &FrontState) -> std::io::Result<()> {
    let mut up = TcpStream::connect(st.upstream).await?;
    let line = match st.front {
        Front::Http10 => req.line.replace("HTTP/1.1", "HTTP/1.0"),
        _ => req.line.clone(),
    };
    let mut head = format!("{line}\r\n");
    for (k, v) in req.headers.iter().filter(|(k, _)| k != "connection" && k != "keep-alive") {
        head += &format!("{k}: {v}\r\n");
    }
    head += "connection: close\r\n\r\n";
    up.write_all(head.as_bytes()).await?;
    up.write_all(&req.body).await?;
    let mut buf = Vec::new();
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut piece = [0u8; 8192];
        match up.read(&mut piece).await? {
            0 => return Err(std::io::Error::other("the scripted server closed before its answer's head")),
            n => buf.extend_from_slice(&piece[..n]),
        }
    };
    let answer = String::from_utf8_lossy(&buf[..end]).into_owned();
    let rewritten = rewrite(&answer, st)?;
    client.write_all(rewritten.as_bytes()).await?;
    client.write_all(&buf[end + 4..]).await?;
    tokio::io::copy(&mut up, client).await?;
    client.flush().await
}

/// The server's answer head as the front writes it.
fn rewrite(head: &str, st: &FrontState) -> std::io::Result<String> {
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let headers: Vec<(&str, &str)> = lines.filter_map(|l| l.split_once(':')).collect();
    let has = |name: &str| headers.iter().any(|(k, _)| k.trim().eq_ignore_ascii_case(name));
    let keep = |name: &str| !["connection", "keep-alive"].iter().any(|h| name.trim().eq_ignore_ascii_case(h));
    let (status, extra) = match st.front {
        Front::Http10 => {
            if has("transfer-encoding") {
                return Err(std::io::Error::other(format!(
                    "the scripted server answered HTTP/1.0 with Transfer-Encoding: {head}"
                )));
            }
            (status.replacen("HTTP/1.1", "HTTP/1.0", 1), "Connection: close\r\n")
        }
        Front::Close11 => (status.to_string(), "Connection: close\r\n"),
        Front::ResetIdle | Front::CloseOnDecode { .. } | Front::CloseWarmOnDecode => {
            if !has("transfer-encoding") && !has("content-length") {
                return Err(std::io::Error::other(format!("an answer the client cannot frame: {head}")));
            }
            (status.to_string(), "")
        }
    };
    let mut out = format!("{status}\r\n");
    for (k, v) in headers.into_iter().filter(|(k, _)| keep(k)) {
        out += &format!("{k}:{v}\r\n");
    }
    out += extra;
    out += "\r\n";
    Ok(out)
}
