//! Benchmark (not a test): the twin's lag behind its own schedule under a fixed load.
//!
//! 1,024 concurrent streams on the `tiny` profile with short contexts (a 32-token prompt,
//! 64…191 output tokens, `ignore_eos`), each restarted as soon as it ends, for `BENCH_SECONDS` (default
//! 20). The client runs in the same process: raw HTTP/1.1 over loopback, reading each
//! response to EOF without parsing it. From the trace: lag = `written_ms − planned_ms`
//! of every token-carrying chunk planned after the first 3 s (ramp-up excluded); prints p50,
//! p90, p99, p99.9 and max (ms). Goal: p99 ≤ 5 ms.
//!
//! Run: `cargo bench -p speedmatrix-twin --bench twin_lag` (env `STREAMS`, `BENCH_SECONDS` override;
//! `KEEP_TRACE=FILE` keeps the trace).

use serde_json::{json, Value};
use speedmatrix_schema::stats::percentile_sorted;
use speedmatrix_twin::{self as twin, Profile, TwinConfig};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Nearest-rank percentile `p` (0…100) of sorted values, the method of every figure of a run
/// (NaN when there are none).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    percentile_sorted(sorted, p).unwrap_or(f64::NAN)
}

/// Counts of the load generator.
#[derive(Default)]
struct Load {
    stop: AtomicBool,
    done: AtomicU64,
    errors: AtomicU64,
}

/// One request over raw HTTP/1.1 (one connection, read to EOF without parsing — the twin's
/// trace is the measurement); whether the stream ended with `[DONE]`.
async fn one_request(addr: SocketAddr, body: &str, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut sock = TcpStream::connect(addr).await?;
    let req = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(req.as_bytes()).await?;
    let mut tail = Vec::new();
    loop {
        let n = sock.read(buf).await?;
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[n.saturating_sub(64)..n]);
        if tail.len() > 128 {
            tail.drain(..tail.len() - 64);
        }
    }
    Ok(String::from_utf8_lossy(&tail).contains("[DONE]"))
}

/// Stream number `i`: requests back to back until told to stop.
async fn stream_loop(addr: SocketAddr, i: usize, load: Arc<Load>) {
    let prompt: Vec<u32> = (0..32).map(|k| (i as u32 * 7919 + k) % 150_000).collect();
    let mut round = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    while !load.stop.load(Ordering::Relaxed) {
        // 64…191 output tokens (mean 128), so streams do not all restart at once.
        round += 1;
        let max_tokens = 64 + (i as u64 * 37 + round * 53) % 128;
        let body = json!({"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": true,
                          "stream": true, "stream_options": {"include_usage": true}})
        .to_string();
        match one_request(addr, &body, &mut buf).await {
            Ok(true) => {
                load.done.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                load.errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// `streams` concurrent streams for `seconds`, on a single-threaded runtime of this thread;
/// (requests completed, client errors).
fn generate_load(addr: SocketAddr, streams: usize, seconds: u64) -> (u64, u64) {
    let crt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("client runtime");
    crt.block_on(async {
        let load = Arc::new(Load::default());
        let tasks: Vec<_> = (0..streams).map(|i| tokio::spawn(stream_loop(addr, i, load.clone()))).collect();
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        load.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        (load.done.load(Ordering::Relaxed), load.errors.load(Ordering::Relaxed))
    })
}

/// From the trace: the lag of every token-carrying chunk planned after the first 3 s, sorted;
/// the tokens they carry; the first and last planned times.
fn lags(trace: &str) -> (Vec<f64>, u64, f64, f64) {
    let mut lags = Vec::new();
    let mut tokens = 0u64;
    let (mut first, mut last) = (f64::INFINITY, 0.0f64);
    for line in trace.lines() {
        let r: Value = serde_json::from_str(line).expect("trace line");
        for c in r["chunks"].as_array().into_iter().flatten() {
            let n = c["tokens"].as_u64().unwrap_or(0);
            let p = c["planned_ms"].as_f64().unwrap_or(0.0);
            let w = c["written_ms"].as_f64().unwrap_or(0.0);
            if n == 0 || p < 3000.0 {
                continue;
            }
            lags.push(w - p);
            tokens += n;
            first = first.min(p);
            last = last.max(p);
        }
    }
    lags.sort_by(|a, b| a.total_cmp(b));
    (lags, tokens, first, last)
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let streams = env_or("STREAMS", 1024) as usize;
    let loadavg = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load_before = loadavg();
    let seconds = env_or("BENCH_SECONDS", 20);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let dir = std::env::temp_dir().join(format!("twin-lag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let trace_path = dir.join("trace.jsonl");
    let mut cfg = TwinConfig::new(Profile::tiny());
    cfg.trace = Some(trace_path.clone());
    // The twin runs on its own runtime; the load generator on another thread with a
    // single-threaded runtime, so the two share the CPUs the way two processes would.
    let t = rt.block_on(twin::start(cfg, "127.0.0.1:0")).expect("twin");
    let addr = t.addr();
    let stats = std::thread::spawn(move || generate_load(addr, streams, seconds)).join().expect("load generator");
    rt.block_on(t.shutdown());
    let text = std::fs::read_to_string(&trace_path).expect("trace");
    let (lags, tokens, first, last) = lags(&text);
    println!("load average before: {}  after: {}", load_before.trim(), loadavg().trim());
    println!("twin lag benchmark: {streams} concurrent streams, tiny profile, 32-token prompts, 64-191 output tokens, {seconds} s");
    println!(
        "requests completed {}, client errors {}, chunks measured {}, tokens/s {:.0}",
        stats.0,
        stats.1,
        lags.len(),
        tokens as f64 / ((last - first) / 1000.0)
    );
    println!(
        "lag (written − planned, ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
        percentile(&lags, 50.0),
        percentile(&lags, 90.0),
        percentile(&lags, 99.0),
        percentile(&lags, 99.9),
        lags.last().copied().unwrap_or(f64::NAN)
    );
    if let Ok(keep) = std::env::var("KEEP_TRACE") {
        let _ = std::fs::copy(&trace_path, keep);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
