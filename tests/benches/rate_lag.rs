//! Benchmark (not a test): how closely `speedmatrix run --rates` keeps its schedule — the send
//! lag (scheduled instant → request sent) and the client's share of TTFT — at request rates up to
//! 2,000 requests/s of short streams, against the fixed-timing emitter of `side_by_side`
//! (first token 50 ms after the request was read, then one token per 10 ms; in this process,
//! pinned to CPU 1). The collector runs as its own process pinned to CPU 0 (`taskset -c 0`).
//!
//! Per rate: the cell's status, offered and achieved req/s, send lag p50 / p99 / max, TTFT p50
//! from the scheduled instant, the emitter's own TTFT p50 (its first write − the request read,
//! over the cell's requests), and their difference (send lag + transit + the client's read: what
//! the client adds to the TTFT it reports). `vllm bench serve --request-rate` is the peer the
//! issue names; the CPU vLLM wheel's benchmark dies with SIGILL on AVX2-only machines (issue
//! 37), so it is not run here.
//!
//! Run: `cargo bench -p speedmatrix-tests --bench rate_lag` (needs `taskset`; RATES=100,500,2000
//! picks rates, SECONDS=N the window, default 10).

// Shared with side_by_side, which also changes the timing between rows; this bench does not.
#[allow(dead_code)]
#[path = "side_by_side/emitter.rs"]
mod emitter;

use emitter::Timing;
use serde_json::Value;
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    pin_to_cpu(1);
    let seconds: f64 = std::env::var("SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10.0);
    let rates: Vec<f64> = std::env::var("RATES")
        .unwrap_or_else(|_| "100,500,2000".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let e = emitter::start(
        listener,
        Timing { ttft: Duration::from_millis(50), itl: Duration::from_millis(10), lockstep: false },
    );
    let dir = std::env::temp_dir().join(format!("rate-lag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "emitter on CPU 1 (TTFT 50 ms, ITL 10 ms), speedmatrix on CPU 0; 128-token prompts, 4-token outputs, Poisson arrivals, {seconds} s windows; load average {}",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!("| rate req/s | status | offered | achieved | send lag p50 ms | p99 ms | max ms | TTFT p50 ms (from schedule) | emitter TTFT p50 ms | client share ms |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for rate in rates {
        let out = dir.join(format!("rate-{rate}.json"));
        let started = Instant::now();
        let o = run(addr, rate, seconds, &out);
        let v: Value = std::fs::read(&out).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(Value::Null);
        let c = &v["rates"][0];
        if c.is_null() {
            println!(
                "| {rate} | no result: {} | | | | | | | | |",
                String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("")
            );
            continue;
        }
        let mut server: Vec<f64> = e.served_since(started).values().map(emitter::Served::ttft_ms).collect();
        server.sort_by(f64::total_cmp);
        let server_p50 = server.get(server.len().saturating_sub(1) / 2).copied();
        let f = |x: &Value| x.as_f64().map_or("—".into(), |v| format!("{v:.3}"));
        let ttft = c["ttft_ms"]["p50"].as_f64();
        println!(
            "| {rate} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c["status"].as_str().unwrap_or("?"),
            f(&c["offered_rps"]),
            f(&c["achieved_rps"]),
            f(&c["send_lag_ms"]["p50"]),
            f(&c["send_lag_ms"]["p99"]),
            f(&c["send_lag_ms"]["max"]),
            ttft.map_or("—".into(), |v| format!("{v:.3}")),
            server_p50.map_or("—".into(), |v| format!("{v:.3}")),
            ttft.zip(server_p50).map_or("—".into(), |(a, b)| format!("{:+.3}", a - b)),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn run(addr: SocketAddr, rate: f64, seconds: f64, out: &std::path::Path) -> std::process::Output {
    Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_speedmatrix-under-test"), "run", "--url", &format!("http://{addr}")])
        .args(["--contexts", "128", "--prefill-contexts", "none", "--rates", &rate.to_string(), "--max-tokens", "4"])
        .args(["--duration", &format!("{seconds}s"), "--quiet", "--force", "-o"])
        .arg(out)
        .output()
        .expect("run speedmatrix under taskset")
}

fn pin_to_cpu(cpu: usize) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}
