//! Benchmark (not a test): speedmatrix's client cost and TTFT error beside the physical floor and
//! a peer, against one fixed-timing emitter, in one run.
//!
//! The emitter (`side_by_side/emitter.rs`: vLLM's SSE shape, usage on every chunk, first token
//! 50 ms after the request arrives, then one token per ITL, each connection on its own OS thread
//! and timer) runs in this process, pinned to CPU 1. Each client runs in turn as its own process
//! pinned to CPU 0 (`taskset -c 0`), with 128-token prompts and 512-token outputs, N streams
//! opened at once and replaced as they end:
//! - **reader**: a bare Rust SSE reader (`side_by_side/reader.rs`, this binary run as
//!   `side_by_side reader …`): raw TCP, no parsing — the physical reference;
//! - **speedmatrix**: `speedmatrix run`, one decode cell (`--duration`);
//! - the peers, vLLM's benchmark client in two languages with the same flags and results file,
//!   `--max-concurrency N`, N × 4 prompts of 512 tokens; from 2,048 streams one prompt per stream
//!   of 20 s of tokens (they have no fixed window: [`vllm_load`]); each skipped with a note when
//!   it is not there:
//!   - **vllm bench serve** (Python) from the CPU vLLM that `scripts/setup.sh` installs;
//!   - **vllm-bench** (Rust: tokio + reqwest + mimalloc), built from its source at a pinned commit
//!     by `side_by_side/setup-vllm-bench.sh` (not part of `scripts/setup.sh`), with
//!     `--prompt-token-ids` (the emitter counts prompt tokens as words; token ids skip its
//!     `/tokenize` check of every prompt).
//!
//!   A peer killed by SIGILL (the CPU vLLM wheel's code assumes instructions an AVX2-only CPU
//!   lacks) is reported as unable to run on this CPU, with the reason, and left out of the rows
//!   after.
//!
//! Figures, the same way for every client:
//! - **CPU µs per token**: the client process's user + system time (`/proc/PID/stat`, sampled
//!   every 50 ms) ÷ the token chunks the emitter wrote, over the samples between 10 % and 90 % of
//!   the client's tokens (the steady part, without start-up and the tail);
//! - **TTFT p50 / p99** of the N streams opened at once (the burst; speedmatrix reports them
//!   apart, the reader and vllm's per-request results give the first N): what the client
//!   reported; the error column is client − reader at the same row. For speedmatrix the note adds
//!   how late it stamped each first token after the emitter wrote it (matched by response id);
//!   
//! - **reported vs delivered tok/s**: the client's own figure against the token chunks the
//!   emitter wrote in the client's window (speedmatrix: the cell's window, mapped onto the
//!   emitter's clock through the request that arrived fastest; vllm: every chunk the emitter
//!   wrote while it ran, over its `duration`).
//!
//! Run: `cargo bench -p speedmatrix-tests --bench side_by_side` (needs `taskset`; ROWS=1,32,128L
//! picks rows, `L` for lock-step; SECONDS=N the window, default 20; PEERS=0 skips both peers,
//! PEERS=vllm-bench or PEERS=python one of them; VLLM_PYTHON=PATH another Python for vllm bench
//! serve, VLLM_BENCH=PATH another vllm-bench binary; CLIENT_CPUS=0,1 gives the clients both
//! CPUs; KEEP_FILES=1 keeps their results files; BACKLOG=N the emitter's listen backlog, default
//! 16,384 — a row's note counts the kernel's listen-queue overflows while its client ran; RUNS=N
//! measures every row N times, the clients in turn within each run, and prints the medians). `side_by_side serve [ITL_MS] [lockstep]` runs
//! the emitter alone (for `perf`).

#[path = "side_by_side/emitter.rs"]
mod emitter;
#[path = "side_by_side/reader.rs"]
mod reader;
// Its `command` serves vllm_rates; this bench builds its own command lines.
#[allow(dead_code)]
#[path = "side_by_side/python_peer.rs"]
mod python_peer;
#[path = "side_by_side/vllm_bench.rs"]
mod vllm_bench;

#[path = "side_by_side/machine.rs"]
mod machine;
use emitter::{Emitted, Served, Timing};
use machine::{load_average, pin_to_cpu};
use serde_json::Value;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MAX_TOKENS: u32 = 512;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("reader") {
        let addr: SocketAddr = args[2].parse().expect("reader ADDR");
        let streams: usize = args[3].parse().expect("reader STREAMS");
        let seconds: f64 = args[4].parse().expect("reader SECONDS");
        println!("{}", reader::run(addr, streams, seconds, MAX_TOKENS).to_json());
        return;
    }
    if args.get(1).map(String::as_str) == Some("serve") {
        // The emitter alone, for profiling a client by hand: `side_by_side serve [ITL_MS] [lockstep]`.
        let itl = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(10);
        let listener = listen();
        println!("listening on http://{}", listener.local_addr().unwrap());
        let timing = Timing {
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(itl),
            lockstep: args.get(3).is_some(),
        };
        let _e = emitter::start(listener, timing);
        std::thread::park();
        return;
    }
    harness();
}

/// One row of the table: streams, the emitter's ITL, lock-step or not.
#[derive(Clone, Copy)]
struct Row {
    streams: usize,
    itl_ms: u64,
    lockstep: bool,
}

/// What one client measured at one row.
#[derive(Clone)]
struct Measured {
    cpu_us_per_token: Option<f64>,
    ttft_p50: Option<f64>,
    ttft_p99: Option<f64>,
    reported_tps: Option<f64>,
    delivered_tps: Option<f64>,
    rss_mb: Option<f64>,
    note: String,
    /// The client was killed by SIGILL: it cannot run on this CPU.
    sigill: bool,
}

fn harness() {
    pin_to_cpu(1);
    let seconds: f64 = env_or("SECONDS", 20.0);
    let rows = rows();
    let listener = listen();
    let addr = listener.local_addr().unwrap();
    let e = emitter::start(
        listener,
        Timing { ttft: Duration::from_millis(50), itl: Duration::from_millis(10), lockstep: false },
    );
    let dir = std::env::temp_dir().join(format!("side-by-side-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "emitter on CPU 1 (TTFT 50 ms, vLLM SSE shape, usage on every chunk), each client on CPU {}; 128-token prompts, {MAX_TOKENS}-token outputs, {seconds} s windows; load average {}",
        client_cpus(),
        load_average()
    );
    let mut peers = peers();
    println!("| streams | ITL | client | CPU µs per token | × reader | TTFT p50 ms | p50 error | TTFT p99 ms | p99 error | reported tok/s | delivered tok/s | reported vs delivered | RSS MB | note |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let runs: usize = env_or("RUNS", 1).max(1);
    let mut medians = Vec::new();
    for row in rows {
        e.set_timing(Timing {
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(row.itl_ms),
            lockstep: row.lockstep,
        });
        // Every run of a row measures each client once, in the same order, so a slow spell of
        // the machine falls on every client of one run rather than on one client's runs.
        let mut row_runs: Vec<Vec<(&'static str, Measured, Measured)>> = Vec::new();
        for run in 1..=runs {
            if runs > 1 {
                println!("| {} | | run {run} of {runs} | load average {} |", row.streams, load_average());
            }
            // Each run's clients write their results files in a folder of its own (speedmatrix
            // refuses to overwrite a finished run's file).
            let run_dir = if runs > 1 { dir.join(format!("run-{run}")) } else { dir.clone() };
            std::fs::create_dir_all(&run_dir).unwrap();
            row_runs.push(measure_row(&e, addr, row, seconds, &run_dir, &mut peers));
        }
        if runs > 1 {
            medians.extend(median_rows(row, &row_runs));
        }
    }
    if runs > 1 {
        println!("\nMedians of {runs} runs per row (each run's CPU and TTFT taken against the bare reader of the same run):\n");
        println!("| streams | ITL | client | CPU µs per token | × reader | TTFT p50 error ms | \\|TTFT p50 error\\| ms | TTFT p99 error ms | reported vs delivered | RSS MB | runs |");
        println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for line in medians {
            println!("{line}");
        }
    }
    if std::env::var_os("KEEP_FILES").is_some() {
        println!("clients' files kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Each client once at `row`: the bare reader, speedmatrix, then the peers (a peer killed by
/// SIGILL is left out of the rows after). Returns (client, its figures, the reader's figures).
fn measure_row(
    e: &Emitted,
    addr: SocketAddr,
    row: Row,
    seconds: f64,
    dir: &Path,
    peers: &mut Vec<Peer>,
) -> Vec<(&'static str, Measured, Measured)> {
    let floor = measure(e, || reader_command(addr, row, seconds), |out, started, _| reader_figures(e, out, started));
    print_row(row, "bare reader", &floor, &floor);
    let dir_sm = dir.join(format!("sm-{}-{}", row.streams, row.lockstep));
    let sm = measure(
        e,
        || speedmatrix_command(addr, row, seconds, &dir_sm),
        |_, started, _| speedmatrix_figures(e, &dir_sm, started),
    );
    print_row(row, "speedmatrix", &sm, &floor);
    let mut out = vec![("bare reader", floor.clone(), floor.clone()), ("speedmatrix", sm, floor.clone())];
    let mut unable = Vec::new();
    for (k, p) in peers.iter().enumerate() {
        let file = dir.join(format!("{}-{}-{}.json", p.name.replace(' ', "-"), row.streams, row.lockstep));
        let m = measure(e, || peer_command(p, addr, row, &file), |_, _, sent| vllm_figures(&file, row, sent));
        print_row(row, p.name, &m, &floor);
        if m.sigill {
            unable.push(k);
        }
        out.push((p.name, m, floor.clone()));
    }
    for k in unable.into_iter().rev() {
        let p = peers.remove(k);
        println!("| {} | | {} | left out of the rows below: it cannot run on this CPU (SIGILL) |", row.streams, p.name);
    }
    out
}

/// One line per client of the medians over a row's runs: CPU per token, its ratio to the same
/// run's reader, the TTFT p50 / p99 error against the same run's reader, the reported-vs-delivered
/// gap and the peak RSS (each the median of the runs that gave it).
fn median_rows(row: Row, runs: &[Vec<(&'static str, Measured, Measured)>]) -> Vec<String> {
    let f = |x: Option<f64>, d: usize| x.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "—".into());
    let itl = format!("{} ms{}", row.itl_ms, if row.lockstep { " lock-step" } else { "" });
    let mut clients: Vec<&'static str> = Vec::new();
    for run in runs {
        for (c, _, _) in run {
            if !clients.contains(c) {
                clients.push(c);
            }
        }
    }
    clients
        .into_iter()
        .map(|client| {
            let of = |pick: &dyn Fn(&Measured, &Measured) -> Option<f64>| {
                let mut v: Vec<f64> = runs
                    .iter()
                    .flat_map(|r| r.iter().filter(|(c, _, _)| *c == client))
                    .filter_map(|(_, m, floor)| pick(m, floor))
                    .collect();
                let n = v.len();
                (percentile(&mut v, 50.0), n)
            };
            let (cpu, n) = of(&|m, _| m.cpu_us_per_token);
            let (ratio, _) = of(&|m, fl| m.cpu_us_per_token.zip(fl.cpu_us_per_token).map(|(a, b)| a / b));
            let (p50, _) = of(&|m, fl| m.ttft_p50.zip(fl.ttft_p50).map(|(a, b)| a - b));
            let (abs50, _) = of(&|m, fl| m.ttft_p50.zip(fl.ttft_p50).map(|(a, b)| (a - b).abs()));
            let (p99, _) = of(&|m, fl| m.ttft_p99.zip(fl.ttft_p99).map(|(a, b)| a - b));
            let (gap, _) = of(&|m, _| m.reported_tps.zip(m.delivered_tps).map(|(r, d)| (r / d - 1.0) * 100.0));
            let (rss, _) = of(&|m, _| m.rss_mb);
            format!(
                "| {} | {itl} | {client} | {} | {} | {} | {} | {} | {} | {} | {n} |",
                row.streams,
                f(cpu, 2),
                f(ratio, 2),
                p50.map(|x| format!("{x:+.2}")).unwrap_or_else(|| "—".into()),
                f(abs50, 2),
                p99.map(|x| format!("{x:+.2}")).unwrap_or_else(|| "—".into()),
                gap.map(|x| format!("{x:+.2} %")).unwrap_or_else(|| "—".into()),
                f(rss, 1),
            )
        })
        .collect()
}

/// The CPUs every client is pinned to: `CLIENT_CPUS` (a `taskset` list), default CPU 0. With
/// `CLIENT_CPUS=0,1` the collector's runtime has two workers (it shares CPU 1 with the emitter).
fn client_cpus() -> String {
    std::env::var("CLIENT_CPUS").unwrap_or_else(|_| "0".into())
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The rows: 1, 32, 128 streams at 10 ms ITL; 512 at 25 ms, 1,024 at 50 ms, 2,048 at 100 ms and 8,192 at 400 ms
/// (≈ 20,000 tok/s, what one emitter core writes on time); then 128 streams in lock-step.
fn rows() -> Vec<Row> {
    let all = [
        (1, 10, false),
        (32, 10, false),
        (128, 10, false),
        (512, 25, false),
        (1024, 50, false),
        (2048, 100, false),
        (8192, 400, false),
        (128, 10, true),
    ];
    let want: Option<Vec<String>> =
        std::env::var("ROWS").ok().map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    all.iter()
        .map(|&(streams, itl_ms, lockstep)| Row { streams, itl_ms, lockstep })
        .filter(|r| {
            let name = if r.lockstep { format!("{}L", r.streams) } else { r.streams.to_string() };
            want.as_ref().is_none_or(|w| w.contains(&name))
        })
        .collect()
}

/// A listener with a backlog for 8,192 connections opened at once (std's is 128), or `BACKLOG`
/// (uvicorn's default is 2,048; the kernel caps any at `net.core.somaxconn`).
fn listen() -> std::net::TcpListener {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    s.listen(env_or("BACKLOG", 16_384)).unwrap();
    s.into()
}

/// The kernel's count of connections dropped because a listen queue was full
/// (`TcpExtListenOverflows` in `/proc/net/netstat`; the whole machine's, so a client's row
/// counts only while it alone connects to this emitter).
fn listen_overflows() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let at = names.split_whitespace().position(|n| n == "ListenOverflows")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Run a client to its end while sampling its CPU time and the emitter's token count, then read
/// its figures (`figures(stdout, started, token chunks the emitter wrote meanwhile)`).
fn measure(e: &Emitted, command: impl Fn() -> Command, figures: impl Fn(&str, Instant, u64) -> Measured) -> Measured {
    let started = Instant::now();
    let overflows_before = listen_overflows();
    let mut child =
        command().stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start a client under taskset");
    let pid = child.id();
    // Read its output as it comes: a client that writes more than a pipe holds would block.
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut out = String::new();
            let _ = pipe.read_to_string(&mut out);
            out
        })
    };
    let reading = drain(Box::new(child.stdout.take().unwrap()));
    let errors = drain(Box::new(child.stderr.take().unwrap()));
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let mut rss_kb = 0u64;
    let base = e.total();
    while child.try_wait().ok().flatten().is_none() {
        if let Some((cpu, rss)) = proc_stat(pid) {
            samples.push((cpu, e.total() - base));
            rss_kb = rss_kb.max(rss);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let stdout = reading.join().unwrap_or_default();
    let stderr = errors.join().unwrap_or_default();
    let mut m = figures(&stdout, started, e.total() - base);
    let last_line = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    if status.signal() == Some(libc::SIGILL) {
        m.sigill = true;
        m.note = format!(
            "cannot run on this CPU: {status} (an instruction this CPU lacks; {}){}",
            cpu_isa(),
            if last_line.is_empty() { String::new() } else { format!("; last line: {last_line}") }
        );
    } else if !status.success() {
        m.note = format!("{status}: {last_line}");
    }
    if let (Some(a), Some(b)) = (overflows_before, listen_overflows()) {
        if b > a {
            let sep = if m.note.is_empty() { "" } else { "; " };
            m.note += &format!("{sep}{} listen-queue overflows (TcpExtListenOverflows)", b - a);
        }
    }
    if let Ok(path) = std::env::var("CLIENT_STDERR") {
        let _ = std::fs::write(path, &stderr);
    }
    // A client that died at start has no figures (its process was a launcher or a few kB).
    if !m.sigill {
        m.cpu_us_per_token = cpu_per_token(&samples);
        m.rss_mb = (rss_kb > 0).then(|| rss_kb as f64 / 1024.0);
    }
    m
}

/// The vector extensions this CPU has, in words (for a client killed by SIGILL).
fn cpu_isa() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> =
        info.lines().find(|l| l.starts_with("flags")).map(|l| l.split_whitespace().collect()).unwrap_or_default();
    let has = |f: &str| flags.contains(&f);
    match (has("avx512f"), has("avx2")) {
        (true, _) => "this CPU has AVX-512".into(),
        (false, true) => "this CPU has AVX2, no AVX-512".into(),
        (false, false) => "this CPU has neither AVX2 nor AVX-512".into(),
    }
}

/// CPU s and RSS kB of a process (all its threads), from /proc.
fn proc_stat(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (user, system): (f64, f64) = (fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(((user + system) / ticks, rss))
}

/// µs of client CPU per token between the samples at 10 % and 90 % of its tokens.
fn cpu_per_token(samples: &[(f64, u64)]) -> Option<f64> {
    let total = samples.last()?.1;
    let a = samples.iter().find(|s| s.1 * 10 >= total)?;
    let b = samples.iter().find(|s| s.1 * 10 >= total * 9)?;
    (b.1 > a.1).then(|| (b.0 - a.0) / (b.1 - a.1) as f64 * 1e6)
}

fn percentile(v: &mut [f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank - 1])
}

fn reader_command(addr: SocketAddr, row: Row, seconds: f64) -> Command {
    let mut c = Command::new("taskset");
    c.args(["-c", &client_cpus()]).arg(std::env::current_exe().unwrap());
    c.args(["reader", &addr.to_string(), &row.streams.to_string(), &seconds.to_string()]);
    c
}

fn reader_figures(e: &Emitted, stdout: &str, started: Instant) -> Measured {
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    let mut ttft: Vec<f64> = v["opening_ttft_ms"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
    let window = v["window_s"].as_f64().unwrap_or(f64::NAN);
    let mut sent: Vec<f64> = v["opening_sent_ms"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
    sent.sort_by(f64::total_cmp);
    let (from, to) = (v["start_unix_us"].as_u64().unwrap_or(0), v["end_unix_us"].as_u64().unwrap_or(0));
    Measured {
        cpu_us_per_token: None,
        ttft_p50: percentile(&mut ttft, 50.0),
        ttft_p99: percentile(&mut ttft, 99.0),
        reported_tps: v["tokens"].as_f64().map(|t| t / window),
        delivered_tps: Some(e.between_unix_us(from, to) as f64 / window),
        rss_mb: None,
        note: format!(
            "{}{}{}{}",
            burst_words(e, started, ttft.len()),
            spread_words("its own send stamps", &sent),
            server_ttft_words(e, started),
            reader_lateness(e, &v, started)
        ),
        sigill: false,
    }
}

/// The reader's opening burst as the emitter read it: the first `n` requests' arrivals (the N
/// streams' first requests; a replacement comes after a whole stream) after the first one's.
fn burst_words(e: &Emitted, started: Instant, n: usize) -> String {
    let mut arrivals: Vec<f64> = e.served_since(started).values().map(|s| s.arrival_ms).collect();
    arrivals.sort_by(f64::total_cmp);
    arrivals.truncate(n);
    spread_words("the emitter's reads", &arrivals)
}

/// The spread of sorted instants (ms) after the first: p50 / max in words, for `n` > 1.
fn spread_words(whose: &str, sorted: &[f64]) -> String {
    let Some(&first) = sorted.first().filter(|_| sorted.len() > 1) else { return String::new() };
    let mut after: Vec<f64> = sorted.iter().map(|t| t - first).collect();
    let max = after.last().copied().unwrap_or(0.0);
    percentile(&mut after, 50.0)
        .map(|p50| format!("opening burst spread {p50:.3} / {max:.3} ms (p50 / max, {whose}); "))
        .unwrap_or_default()
}

/// The emitter's own TTFT p50 (first token written − request read) over a client's requests:
/// above 50 ms where a burst of requests kept its threads waiting for the CPU.
fn server_ttft_words(e: &Emitted, started: Instant) -> String {
    let mut ttfts: Vec<f64> = e.served_since(started).values().map(emitter::Served::ttft_ms).collect();
    percentile(&mut ttfts, 50.0).map(|t| format!("server-side TTFT p50 {t:.2} ms; ")).unwrap_or_default()
}

/// How late the reader read each first token after the emitter wrote it (matched by id).
fn reader_lateness(e: &Emitted, v: &Value, started: Instant) -> String {
    let served = e.served_since(started);
    let mut late: Vec<f64> = v["first_reads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some(r[1].as_f64()? / 1000.0 - served.get(&r[0].as_u64()?)?.first_ms))
        .collect();
    lateness_words(&mut late)
}

fn lateness_words(late: &mut [f64]) -> String {
    match (percentile(late, 50.0), percentile(late, 99.0)) {
        (Some(a), Some(b)) => format!("first token read {a:.2} / {b:.2} ms (p50 / p99) after the emitter wrote it"),
        _ => String::new(),
    }
}

/// The collector measured: `SPEEDMATRIX=PATH` (another build, e.g. an earlier commit's, for a
/// before/after), else the one built with this bench.
fn speedmatrix_binary() -> String {
    std::env::var("SPEEDMATRIX").unwrap_or_else(|_| env!("CARGO_BIN_EXE_speedmatrix-under-test").to_string())
}

fn speedmatrix_command(addr: SocketAddr, row: Row, seconds: f64, dir: &Path) -> Command {
    std::fs::create_dir_all(dir).unwrap();
    let mut c = Command::new("taskset");
    c.args(["-c", &client_cpus(), &speedmatrix_binary(), "run", "--url", &format!("http://{addr}")]);
    c.args(["--contexts", "128", "--prefill-contexts", "none", "--concurrency", &row.streams.to_string()]);
    c.args(["--duration", &format!("{seconds}s"), "--max-tokens", &MAX_TOKENS.to_string(), "--quiet", "-o"]);
    c.arg(dir.join("run.json"));
    c
}

fn speedmatrix_figures(e: &Emitted, dir: &Path, started: Instant) -> Measured {
    let r: Value =
        std::fs::read(dir.join("run.json")).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(Value::Null);
    let c = &r["decode"][0];
    let (start, end) = (c["window_start_ms"].as_f64(), c["window_end_ms"].as_f64());
    let served = e.served_since(started);
    let offset = speedmatrix_clock(&served, c);
    let delivered = offset.zip(start.zip(end)).map(|(offset_ms, (s, t))| {
        let to_unix = |ms: f64| ((ms + offset_ms) * 1000.0) as u64;
        e.between_unix_us(to_unix(s), to_unix(t)) as f64 / ((t - s) / 1000.0)
    });
    let status =
        c["status"].as_str().map(|s| if s == "valid" { String::new() } else { format!("{s}: {}; ", c["reason"]) });
    let late = offset.map(|offset| read_lateness(&served, c, offset)).unwrap_or_default();
    let opening: Vec<&Value> =
        c["requests"].as_array().into_iter().flatten().filter(|q| q["opening"].as_bool() == Some(true)).collect();
    let mut sent: Vec<f64> = opening.iter().filter_map(|q| q["start_ms"].as_f64()).collect();
    sent.sort_by(f64::total_cmp);
    // The emitter's reads of the same requests (by response id: the warm-up requests before them
    // are not part of the burst).
    let mut read: Vec<f64> =
        opening.iter().filter_map(|q| Some(served.get(&response_number(q)?)?.arrival_ms)).collect();
    read.sort_by(f64::total_cmp);
    let burst = format!("{}{}", spread_words("the emitter's reads", &read), spread_words("its own send stamps", &sent));
    Measured {
        cpu_us_per_token: None,
        ttft_p50: c["ttft_ms"]["p50"].as_f64(),
        ttft_p99: c["ttft_ms"]["p99"].as_f64(),
        reported_tps: c["total_tps"].as_f64(),
        delivered_tps: delivered,
        rss_mb: None,
        note: format!("{}{burst}{}{late}", status.unwrap_or_default(), server_ttft_words(e, started)),
        sigill: false,
    }
}

/// How late the collector stamped each opening stream's first token after the emitter wrote it
/// (per request, matched by response id, on the emitter's clock): p50 / p99 in words.
fn read_lateness(served: &HashMap<u64, Served>, cell: &Value, offset_ms: f64) -> String {
    let mut late: Vec<f64> = cell["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|q| {
            let stamped = q["start_ms"].as_f64()? + q["ttft_ms"].as_f64()? + offset_ms;
            Some(stamped - served.get(&response_number(q)?)?.first_ms)
        })
        .collect();
    lateness_words(&mut late)
}

/// The run clock's offset onto the Unix clock, in ms: each request's `start_ms` against the
/// emitter's arrival of the same response id; the fastest request bounds the transit.
fn speedmatrix_clock(served: &HashMap<u64, Served>, cell: &Value) -> Option<f64> {
    cell["requests"]
        .as_array()?
        .iter()
        .filter_map(|q| Some(served.get(&response_number(q)?)?.arrival_ms - q["start_ms"].as_f64()?))
        .reduce(f64::min)
}

/// The emitter's id number of a request sample's `response_id` (`cmpl-N`).
fn response_number(q: &Value) -> Option<u64> {
    q["response_id"].as_str()?.strip_prefix("cmpl-")?.parse().ok()
}

/// A peer: vLLM's benchmark client, in Python (`vllm bench serve`) or in Rust (`vllm-bench`),
/// with the same flags and the same results file.
struct Peer {
    name: &'static str,
    /// The command line before the flags.
    program: Vec<OsString>,
    tokenizer: PathBuf,
    /// Flags of this peer only.
    extra: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

/// The peers `PEERS` asks for (default both; `0` none; `python`, `vllm-bench`), each with a line
/// saying which build it is or why it is left out.
fn peers() -> Vec<Peer> {
    let want = std::env::var("PEERS").unwrap_or_else(|_| "python,vllm-bench".into());
    let wants = |name: &str| want.split(',').any(|w| w.trim() == name);
    let mut peers = Vec::new();
    if wants("python") {
        match python_peer() {
            Ok(p) => peers.push(p),
            Err(why) => println!("vllm bench serve: {why}, its rows are left out"),
        }
    } else {
        println!("vllm bench serve: left out (PEERS={want})");
    }
    if wants("vllm-bench") {
        match vllm_bench::locate() {
            Ok(v) => {
                println!("{}", v.describe());
                peers.push(Peer {
                    name: "vllm-bench",
                    program: vec![v.bin.into()],
                    tokenizer: v.tokenizer,
                    extra: &["--prompt-token-ids"],
                    env: &[],
                });
            }
            Err(why) => println!("vllm-bench: {why}, its rows are left out"),
        }
    } else {
        println!("vllm-bench: left out (PEERS={want})");
    }
    peers
}

fn python_peer() -> Result<Peer, String> {
    let p = python_peer::locate()?;
    Ok(Peer { name: "vllm bench serve", program: p.program, tokenizer: p.tokenizer, extra: &[], env: python_peer::ENV })
}

fn peer_command(p: &Peer, addr: SocketAddr, row: Row, file: &Path) -> Command {
    let (prompts, output) = vllm_load(row);
    let mut c = Command::new("taskset");
    c.args(["-c", &client_cpus()]).args(&p.program).args([
        "--backend",
        "openai",
        "--base-url",
        &format!("http://{addr}"),
    ]);
    c.args(["--endpoint", "/v1/completions", "--model", "fixed", "--tokenizer"]).arg(&p.tokenizer);
    c.args(["--dataset-name", "random", "--random-input-len", "128", "--random-output-len", &output.to_string()]);
    c.args(["--ignore-eos", "--num-prompts", &prompts.to_string(), "--max-concurrency", &row.streams.to_string()]);
    c.args([
        "--percentile-metrics",
        "ttft,tpot,itl",
        "--metric-percentiles",
        "50,99",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
    ]);
    c.args(p.extra);
    c.arg("--result-dir").arg(file.parent().unwrap()).arg("--result-filename").arg(file.file_name().unwrap());
    c.envs(p.env.iter().copied());
    c
}

/// vllm bench serve has no fixed window, only a number of prompts: 4 per stream of 512 tokens
/// (≈ 21 s at 10 ms ITL); from 2,048 streams one per stream, as long as 20 s of its ITL
/// (200 tokens at 100 ms, 50 at 400 ms), so the row ends in about the same time as the others'.
fn vllm_load(row: Row) -> (usize, u32) {
    if row.streams >= 2048 {
        (row.streams, (20_000 / row.itl_ms) as u32)
    } else {
        (row.streams * 4, MAX_TOKENS)
    }
}

fn vllm_figures(file: &Path, row: Row, sent: u64) -> Measured {
    let streams = row.streams;
    let v = python_peer::read_results(file).unwrap_or(Value::Null);
    let duration = v["duration"].as_f64();
    // Per-request TTFTs (s) in the order the requests were issued: the first N opened at once.
    let mut opening: Vec<f64> =
        v["ttfts"].as_array().into_iter().flatten().take(streams).filter_map(Value::as_f64).map(|s| s * 1e3).collect();
    // Every chunk the emitter wrote while it ran belongs to its requests (no warm-up request).
    let delivered = duration.map(|d| sent as f64 / d);
    Measured {
        cpu_us_per_token: None,
        ttft_p50: percentile(&mut opening, 50.0),
        ttft_p99: percentile(&mut opening, 99.0),
        reported_tps: v["output_throughput"].as_f64(),
        delivered_tps: delivered,
        rss_mb: None,
        note: String::new(),
        sigill: false,
    }
}

fn print_row(row: Row, client: &str, m: &Measured, floor: &Measured) {
    let f = |x: Option<f64>, d: usize| x.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "—".into());
    let err =
        |x: Option<f64>, r: Option<f64>| x.zip(r).map(|(x, r)| format!("{:+.2}", x - r)).unwrap_or_else(|| "—".into());
    let ratio = m.cpu_us_per_token.zip(floor.cpu_us_per_token).map(|(a, b)| a / b);
    let vs = m
        .reported_tps
        .zip(m.delivered_tps)
        .map(|(r, d)| format!("{:+.2} %", (r / d - 1.0) * 100.0))
        .unwrap_or_else(|| "—".into());
    let itl = format!("{} ms{}", row.itl_ms, if row.lockstep { " lock-step" } else { "" });
    println!(
        "| {} | {itl} | {client} | {} | {} | {} | {} | {} | {} | {} | {} | {vs} | {} | {} |",
        row.streams,
        f(m.cpu_us_per_token, 2),
        f(ratio, 2),
        f(m.ttft_p50, 2),
        err(m.ttft_p50, floor.ttft_p50),
        f(m.ttft_p99, 2),
        err(m.ttft_p99, floor.ttft_p99),
        f(m.reported_tps, 0),
        f(m.delivered_tps, 0),
        f(m.rss_mb, 1),
        m.note
    );
}
