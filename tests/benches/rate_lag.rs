//! Benchmark (not a test): how closely `speedmatrix run --rates` keeps its schedule — the send
//! lag (scheduled instant → request sent) and the client's share of TTFT — at request rates up to
//! 2,000 requests/s of short streams, against the fixed-timing emitter of `side_by_side`
//! (first token 50 ms after the request was read, then one token per 10 ms; in this process,
//! pinned to CPU 1). Each client runs as its own process pinned to CPU 0 (`taskset -c 0`).
//!
//! Per rate and client: the status, offered and achieved req/s, send lag p50 / p99 / max, TTFT
//! p50 as the client reports it and what it counts from, the emitter's own TTFT p50 (its first
//! write − the request read, over the client's requests), and their difference (what the client
//! adds to the TTFT it reports).
//!
//! The peer: the Rust `vllm-bench --request-rate` (built by `side_by_side/setup-vllm-bench.sh`;
//! left out with a note when it is not there), rate × SECONDS prompts, 128 prompt token ids,
//! 4-token outputs, no `--max-concurrency`. How it schedules (its `rate_control.rs` and
//! `benchmark.rs` at the pinned commit): the whole schedule is drawn before the start (gaps from
//! a gamma distribution of shape `--burstiness`, 1 = Poisson, `inf` = constant gaps of 1/rate;
//! the cumulative instants rescaled so the last is N / rate), one tokio task per request is
//! spawned up front and sleeps on tokio's timer (1-ms granularity) to its instant, then sends;
//! its TTFT counts from the moment the task calls the HTTP client, not from the scheduled
//! instant, and it reports no send lag. Its results hold each request's `start_times` (the send,
//! s since its start): with constant arrivals the schedule is known ((i + 1) / rate), so the
//! bench derives its send lag and its TTFT from the scheduled instant; with Poisson arrivals
//! the instants come from its own seeded generator, which it does not write out, so its send
//! lag is "—".
//!
//! The Python `vllm bench serve --request-rate` (from the CPU vLLM `scripts/setup.sh` installs)
//! runs with the same flags and writes the same results file, so its rows are read the same way
//! (issue 37 saw the CPU wheel's benchmark die with SIGILL on one AVX2-only machine; a peer that
//! cannot start gets a row saying why).
//!
//! Run: `cargo bench -p speedmatrix-tests --bench rate_lag` (needs `taskset`; RATES=100,500,2000
//! picks rates, SECONDS=N the window, default 10; ARRIVAL=poisson|constant, default poisson;
//! PEERS=vllm-bench,python picks the peers, default both, 0 none; VLLM_BENCH=PATH another
//! binary of vllm-bench, VLLM_PYTHON=PATH another Python with vLLM).

// Shared with side_by_side, which also changes the timing between rows; this bench does not.
#[allow(dead_code)]
#[path = "side_by_side/emitter.rs"]
mod emitter;
// Its `command` serves vllm_rates; this bench builds its own command lines.
#[allow(dead_code)]
#[path = "side_by_side/python_peer.rs"]
mod python_peer;
#[path = "side_by_side/vllm_bench.rs"]
mod vllm_bench;

// This bench does not use its `load_average`.
#[allow(dead_code)]
#[path = "side_by_side/machine.rs"]
mod machine;
use emitter::{Emitted, Timing};
use machine::pin_to_cpu;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// One client's figures at one rate (ms; None where the client does not give it).
struct Row {
    status: String,
    offered: Option<f64>,
    achieved: Option<f64>,
    lag: [Option<f64>; 3],
    ttft_p50: Option<f64>,
    counted_from: &'static str,
    /// TTFT p50 from the scheduled instant, where the client counts from the send but the
    /// schedule is known (the peer with constant arrivals).
    ttft_from_schedule: Option<f64>,
}

fn main() {
    pin_to_cpu(1);
    let seconds: f64 = std::env::var("SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10.0);
    let rates: Vec<f64> = std::env::var("RATES")
        .unwrap_or_else(|_| "100,500,2000".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let arrival = std::env::var("ARRIVAL").unwrap_or_else(|_| "poisson".into());
    assert!(arrival == "poisson" || arrival == "constant", "ARRIVAL: poisson or constant, not {arrival}");
    let listener = listen();
    let addr = listener.local_addr().unwrap();
    let e = emitter::start(
        listener,
        Timing { ttft: Duration::from_millis(50), itl: Duration::from_millis(10), lockstep: false },
    );
    let dir = std::env::temp_dir().join(format!("rate-lag-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "emitter on CPU 1 (TTFT 50 ms, ITL 10 ms), each client on CPU 0; 128-token prompts, 4-token outputs, {arrival} arrivals, {seconds} s windows; load average {}",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let peers = peers();
    println!("| rate req/s | client | status | offered | achieved | send lag p50 ms | p99 ms | max ms | TTFT p50 ms | counted from | emitter TTFT p50 ms | reported − emitter ms | TTFT p50 from the schedule ms |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|");
    for rate in rates {
        let out = dir.join(format!("rate-{rate}.json"));
        let started = Instant::now();
        let o = run(addr, rate, seconds, &arrival, &out);
        print_row(rate, "speedmatrix", speedmatrix_row(&out, &o), &e, started);
        for p in &peers {
            let file = dir.join(format!("{}-{rate}.json", p.name.replace(' ', "-")));
            let started = Instant::now();
            let o = peer_run(p, addr, rate, seconds, &arrival, &file);
            print_row(rate, p.name, peer_row(&file, &o, rate, &arrival), &e, started);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn print_row(rate: f64, client: &str, row: Result<Row, String>, e: &Emitted, started: Instant) {
    let row = match row {
        Ok(r) => r,
        Err(why) => return println!("| {rate} | {client} | no result: {why} | | | | | | | | | | |"),
    };
    let mut server: Vec<f64> = e.served_since(started).values().map(emitter::Served::ttft_ms).collect();
    server.sort_by(f64::total_cmp);
    let server_p50 = server.get(server.len().saturating_sub(1) / 2).copied();
    let f = |x: Option<f64>| x.map_or("—".into(), |v| format!("{v:.3}"));
    println!(
        "| {rate} | {client} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        row.status,
        f(row.offered),
        f(row.achieved),
        f(row.lag[0]),
        f(row.lag[1]),
        f(row.lag[2]),
        f(row.ttft_p50),
        row.counted_from,
        f(server_p50),
        row.ttft_p50.zip(server_p50).map_or("—".into(), |(a, b)| format!("{:+.3}", a - b)),
        f(row.ttft_from_schedule),
    );
}

fn last_line(o: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    format!("{}: {}", o.status, err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(""))
}

fn speedmatrix_row(out: &Path, o: &std::process::Output) -> Result<Row, String> {
    let v: Value = std::fs::read(out).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(Value::Null);
    let c = &v["rates"][0];
    if c.is_null() {
        return Err(last_line(o));
    }
    Ok(Row {
        status: c["status"].as_str().unwrap_or("?").to_string(),
        offered: c["offered_rps"].as_f64(),
        achieved: c["achieved_rps"].as_f64(),
        lag: ["p50", "p99", "max"].map(|k| c["send_lag_ms"][k].as_f64()),
        ttft_p50: c["ttft_ms"]["p50"].as_f64(),
        counted_from: "schedule",
        ttft_from_schedule: c["ttft_ms"]["p50"].as_f64(),
    })
}

fn run(addr: SocketAddr, rate: f64, seconds: f64, arrival: &str, out: &Path) -> std::process::Output {
    Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_speedmatrix-under-test"), "run", "--url", &format!("http://{addr}")])
        .args(["--contexts", "128", "--prefill-contexts", "none", "--rates", &rate.to_string(), "--max-tokens", "4"])
        .args(["--arrival", arrival, "--duration", &format!("{seconds}s"), "--quiet", "--force", "-o"])
        .arg(out)
        .output()
        .expect("run speedmatrix under taskset")
}

/// A peer with vLLM's benchmark flags and results file: the Rust `vllm-bench` or the Python
/// `vllm bench serve`.
struct Peer {
    name: &'static str,
    /// The command line before the flags.
    program: Vec<std::ffi::OsString>,
    tokenizer: std::path::PathBuf,
    /// Flags of this peer only.
    extra: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

/// The peers `PEERS` asks for (default both), each with a line saying which build it is or why
/// it is left out.
fn peers() -> Vec<Peer> {
    let want = std::env::var("PEERS").unwrap_or_else(|_| "vllm-bench,python".into());
    let wants = |name: &str| want.split(',').any(|w| w.trim() == name);
    let mut peers = Vec::new();
    match vllm_bench::locate() {
        _ if !wants("vllm-bench") => println!("vllm-bench: left out (PEERS={want})"),
        Ok(v) => {
            println!("{}", v.describe());
            let extra = &["--prompt-token-ids"];
            peers.push(Peer {
                name: "vllm-bench",
                program: vec![v.bin.into()],
                tokenizer: v.tokenizer,
                extra,
                env: &[],
            });
        }
        Err(why) => println!("vllm-bench: {why}, its rows are left out"),
    }
    match python_peer::locate() {
        _ if !wants("python") => println!("vllm bench serve: left out (PEERS={want})"),
        Ok(p) => {
            let (program, tokenizer, env) = (p.program, p.tokenizer, python_peer::ENV);
            peers.push(Peer { name: "vllm bench serve", program, tokenizer, extra: &[], env });
        }
        Err(why) => println!("vllm bench serve: {why}, its rows are left out"),
    }
    peers
}

/// A peer's `--request-rate` run: rate × seconds prompts; `--burstiness 1` is Poisson, `inf`
/// constant gaps.
fn peer_run(p: &Peer, addr: SocketAddr, rate: f64, seconds: f64, arrival: &str, file: &Path) -> std::process::Output {
    let prompts = (rate * seconds).round().max(1.0) as usize;
    let burstiness = if arrival == "constant" { "inf" } else { "1" };
    Command::new("taskset")
        .args(["-c", "0"])
        .args(&p.program)
        .args(["--backend", "openai", "--base-url", &format!("http://{addr}"), "--endpoint", "/v1/completions"])
        .args(["--model", "fixed", "--tokenizer"])
        .arg(&p.tokenizer)
        .args(["--dataset-name", "random", "--random-input-len", "128", "--random-output-len", "4"])
        .args(["--ignore-eos", "--num-prompts", &prompts.to_string()])
        .args(["--request-rate", &rate.to_string(), "--burstiness", burstiness, "--seed", "0"])
        .args(["--percentile-metrics", "ttft", "--metric-percentiles", "50,99", "--disable-tqdm"])
        .args(["--save-result", "--save-detailed", "--result-dir"])
        .arg(file.parent().unwrap())
        .arg("--result-filename")
        .arg(file.file_name().unwrap())
        .args(p.extra)
        .envs(p.env.iter().copied())
        .output()
        .expect("run the peer under taskset")
}

fn peer_row(file: &Path, o: &std::process::Output, rate: f64, arrival: &str) -> Result<Row, String> {
    let v = python_peer::read_results(file).ok_or_else(|| last_line(o))?;
    let list = |k: &str| -> Vec<f64> {
        v[k].as_array().into_iter().flatten().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect()
    };
    let (starts, ttfts) = (list("start_times"), list("ttfts"));
    let n = starts.len();
    // Constant gaps: request i is due (i + 1) / rate s after its start (its schedule, rescaled
    // so the last is N / rate, which constant gaps already are). vllm-bench's start_times count
    // from its start; the Python peer's are its process clock (perf_counter) with the start not
    // in the file, so its first request is taken as on time and its lags are a lower bound.
    let origin = match starts.first() {
        Some(&s0) if s0 > 1e3 => s0 - 1.0 / rate,
        _ => 0.0,
    };
    let lags: Vec<f64> = if arrival == "constant" {
        starts.iter().enumerate().map(|(i, s)| (s - origin - (i + 1) as f64 / rate) * 1e3).collect()
    } else {
        Vec::new()
    };
    let from_schedule: Vec<f64> =
        lags.iter().zip(&ttfts).filter(|(_, t)| **t > 0.0).map(|(l, t)| l + t * 1e3).collect();
    let ok: Vec<f64> = ttfts.iter().filter(|t| **t > 0.0).map(|t| t * 1e3).collect();
    Ok(Row {
        status: format!("{} / {n} completed", v["completed"].as_u64().unwrap_or(0)),
        // Its schedule is rescaled so the last request is due at N / rate: offered = rate.
        offered: Some(rate),
        achieved: v["request_throughput"].as_f64(),
        lag: [percentile(&lags, 50.0), percentile(&lags, 99.0), percentile(&lags, 100.0)],
        ttft_p50: percentile(&ok, 50.0),
        counted_from: "send",
        ttft_from_schedule: percentile(&from_schedule, 50.0),
    })
}

fn percentile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank - 1])
}

/// A listener with the backlog of side_by_side's (std's is 128): vllm-bench opens a connection
/// per request in flight beyond its idle pool, and when it falls behind at 2,000 req/s a
/// backlog of 128 overflowed and the kernel's SYN retries (1 s, 3 s, 7 s …) landed in its TTFT.
fn listen() -> std::net::TcpListener {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    s.listen(16_384).unwrap();
    s.into()
}
