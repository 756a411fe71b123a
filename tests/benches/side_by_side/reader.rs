//! The bare reader: the physical reference client. Raw HTTP/1.1 over tokio's `TcpStream` on one
//! thread, N connections opened first, then N streams sent at once and each replaced on its
//! connection as soon as it ends, for a fixed window (TTFT counts from the request's send, not
//! from a TCP connect, as a client with a warm connection pool sees it). It parses nothing: a token is an occurrence of `"text":"` in the bytes, the end
//! of a response is the chunked terminator, and every read is stamped the moment it returns.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What one reader run measured (printed as one JSON line).
pub struct Report {
    /// TTFT of each stream's first request (the N sent at once).
    pub opening_ttft_ms: Vec<f64>,
    /// TTFT of every request.
    pub ttft_ms: Vec<f64>,
    /// When each stream's first request was about to be written, ms after the streams started.
    pub opening_sent_ms: Vec<f64>,
    /// Every request's response id number and when its first token was read (µs since the Unix
    /// epoch): the digits after `"id":"cmpl-` in the first token's bytes, the only thing parsed.
    pub first_reads: Vec<(u64, u64)>,
    pub tokens: u64,
    pub window_s: f64,
    pub start_unix_us: u64,
    pub end_unix_us: u64,
}

impl Report {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"opening_ttft_ms": self.opening_ttft_ms, "ttft_ms": self.ttft_ms, "opening_sent_ms": self.opening_sent_ms, "first_reads": self.first_reads, "tokens": self.tokens, "window_s": self.window_s,
                           "start_unix_us": self.start_unix_us, "end_unix_us": self.end_unix_us})
    }
}

fn unix_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// Occurrences of a byte pattern across reads (a match may straddle two reads).
struct Needle {
    pat: &'static [u8],
    carry: Vec<u8>,
}

impl Needle {
    fn new(pat: &'static [u8]) -> Needle {
        Needle { pat, carry: Vec::with_capacity(pat.len()) }
    }

    fn count(&mut self, bytes: &[u8]) -> u64 {
        let k = self.pat.len() - 1;
        let mut n = memchr::memmem::find_iter(bytes, self.pat).count() as u64;
        if !self.carry.is_empty() {
            let head = &bytes[..bytes.len().min(k)];
            let mut joint = self.carry.clone();
            joint.extend_from_slice(head);
            n += memchr::memmem::find_iter(&joint, self.pat).count() as u64;
        }
        let keep = bytes.len().min(k);
        if keep == k {
            self.carry.clear();
        } else {
            let drop = (self.carry.len() + keep).saturating_sub(k);
            self.carry.drain(..drop);
        }
        self.carry.extend_from_slice(&bytes[bytes.len() - keep..]);
        n
    }

    fn reset(&mut self) {
        self.carry.clear();
    }
}

/// One request's body: the collector's own (128-word prompt, `ignore_eos`, usage on every chunk).
pub fn request(addr: SocketAddr, max_tokens: u32) -> Vec<u8> {
    let prompt = vec!["w"; 128].join(" ");
    let body = serde_json::json!({"model": "fixed", "prompt": prompt, "max_tokens": max_tokens, "stream": true,
        "ignore_eos": true, "temperature": 0.0,
        "stream_options": {"include_usage": true, "continuous_usage_stats": true}})
    .to_string();
    format!(
        "POST /v1/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Run `streams` streams for `seconds` against `addr`.
pub fn run(addr: SocketAddr, streams: usize, seconds: f64, max_tokens: u32) -> Report {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let req: &'static [u8] = Box::leak(request(addr, max_tokens).into_boxed_slice());
        let mut conns = Vec::with_capacity(streams);
        for _ in 0..streams {
            let c = TcpStream::connect(addr).await.expect("reader: connect");
            let _ = c.set_nodelay(true);
            conns.push(c);
        }
        // One `GET /v1/models` on each, answered: the server has taken every connection (as the
        // collector's warm-up does), so no first request waits for an accept.
        let warm = conns.into_iter().map(|c| tokio::spawn(warm_up(c, addr)));
        let mut conns = Vec::with_capacity(streams);
        for w in warm {
            conns.push(w.await.unwrap());
        }
        let (start, start_unix_us) = (Instant::now(), unix_us());
        let deadline = start + Duration::from_secs_f64(seconds);
        let clock = (start, start_unix_us);
        let tasks: Vec<_> =
            conns.into_iter().map(|c| tokio::spawn(one_stream(addr, c, req, deadline, clock))).collect();
        let (mut opening_ttft_ms, mut ttft_ms, mut first_reads, mut tokens) = (Vec::new(), Vec::new(), Vec::new(), 0);
        let mut opening_sent_ms = Vec::new();
        for t in tasks {
            let (mut t_ms, mut reads, n, sent) = t.await.unwrap();
            opening_sent_ms.extend(sent);
            opening_ttft_ms.extend(t_ms.first());
            ttft_ms.append(&mut t_ms);
            first_reads.append(&mut reads);
            tokens += n;
        }
        let window_s = deadline.duration_since(start).as_secs_f64();
        Report {
            opening_ttft_ms,
            ttft_ms,
            opening_sent_ms,
            first_reads,
            tokens,
            window_s,
            start_unix_us,
            end_unix_us: start_unix_us + (window_s * 1e6) as u64,
        }
    })
}

/// Send `GET /v1/models` on `c` and read its whole answer (`content-length`).
async fn warm_up(mut c: TcpStream, addr: SocketAddr) -> TcpStream {
    let get = format!("GET /v1/models HTTP/1.1\r\nhost: {addr}\r\n\r\n");
    c.write_all(get.as_bytes()).await.expect("reader: warm-up request");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = c.read(&mut buf).await.expect("reader: warm-up answer");
        assert!(n > 0, "reader: the server closed during the warm-up");
        got.extend_from_slice(&buf[..n]);
        let Some(head_end) = memchr::memmem::find(&got, b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("reader: warm-up answer has a content-length");
        if got.len() >= head_end + 4 + length {
            return c;
        }
    }
}

/// One stream until the deadline: its requests' TTFTs, first reads and the tokens it read in the
/// window, and when its first request was about to be written (ms after `start`).
async fn one_stream(
    addr: SocketAddr,
    c: TcpStream,
    req: &'static [u8],
    deadline: Instant,
    (start, start_unix_us): (Instant, u64),
) -> (Vec<f64>, Vec<(u64, u64)>, u64, Option<f64>) {
    let (mut ttfts, mut reads, mut tokens) = (Vec::new(), Vec::new(), 0u64);
    let mut first_sent = None;
    let mut buf = vec![0u8; 16 * 1024];
    let (mut token, mut end) = (Needle::new(b"\"text\":\""), Needle::new(b"\r\n0\r\n\r\n"));
    let mut conn = Some(c);
    'requests: while Instant::now() < deadline {
        let sent = Instant::now();
        let mut c = match conn.take() {
            Some(c) => c,
            None => match TcpStream::connect(addr).await {
                Ok(c) => {
                    let _ = c.set_nodelay(true);
                    c
                }
                Err(_) => return (ttfts, reads, tokens, first_sent),
            },
        };
        first_sent.get_or_insert(sent.duration_since(start).as_secs_f64() * 1e3);
        if c.write_all(req).await.is_err() {
            continue;
        }
        let mut first = None::<Instant>;
        token.reset();
        end.reset();
        loop {
            let read = tokio::time::timeout_at(deadline.into(), c.read(&mut buf)).await;
            let Ok(Ok(n)) = read else { break 'requests };
            if n == 0 {
                continue 'requests;
            }
            let at = Instant::now();
            let got = token.count(&buf[..n]);
            if got > 0 && first.is_none() {
                first = Some(at);
                ttfts.push(at.duration_since(sent).as_secs_f64() * 1e3);
                if let Some(id) = response_id(&buf[..n]) {
                    reads.push((id, start_unix_us + at.duration_since(start).as_micros() as u64));
                }
            }
            tokens += got;
            if end.count(&buf[..n]) > 0 {
                break;
            }
        }
        conn = Some(c);
    }
    (ttfts, reads, tokens, first_sent)
}

/// The number in the first `"id":"cmpl-N"` of `bytes`.
fn response_id(bytes: &[u8]) -> Option<u64> {
    let pat = b"\"id\":\"cmpl-";
    let at = memchr::memmem::find(bytes, pat)? + pat.len();
    let digits = bytes[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&bytes[at..at + digits]).ok()?.parse().ok()
}
