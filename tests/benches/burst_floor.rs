//! Benchmark (not a test): the floor of an opening burst on this machine — how closely N
//! requests can leave over N loopback TCP connections when nothing but their writes stands
//! between them.
//!
//! N connections are opened to a listener in this process (its thread on CPU 1, as the
//! side-by-side emitter); a ~600-byte HTTP request is built for each beforehand; then one thread
//! on CPU 0 writes them all in one tight loop, one non-blocking `write` per socket, stamping the
//! instant before each. The burst's spread is the last write's stamp after the first one's; the
//! note gives the within-burst p50 (the instants after the first, as `side_by_side` reports a
//! client's burst). Each N is written `REPS` times (after one write not counted) on the same
//! connections, in two set-ups:
//! - **held**: the listener accepts and holds the connections, nothing reads them (the bytes wait
//!   in the receive queues): the write alone, with the receiver's TCP processing, which on
//!   loopback runs inside the sender's `write` (softirq);
//! - **read**: one OS thread per accepted connection blocked in `read` (the emitter's shape): each
//!   write also wakes a thread on the other CPU.
//!
//! Run: `cargo bench -p speedmatrix-tests --bench burst_floor` (ROWS=32,128,1024 picks N; REPS=N
//! the counted bursts per row, default 9; CPUS=0 puts the listener on CPU 0 too).

#[path = "side_by_side/machine.rs"]
mod machine;
use machine::{load_average, pin_to_cpu};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn main() {
    let rows: Vec<usize> = std::env::var("ROWS")
        .unwrap_or_else(|_| "32,128,1024".into())
        .split(',')
        .map(|s| s.trim().parse().expect("ROWS: comma-separated stream counts"))
        .collect();
    let reps: usize = std::env::var("REPS").map(|s| s.parse().expect("REPS: a count")).unwrap_or(9);
    let listener_cpu = if std::env::var("CPUS").as_deref() == Ok("0") { 0 } else { 1 };
    println!("burst floor: load average {} at the start; {reps} bursts per row", load_average());
    println!("| N | receiver | spread first→last, median / max of {reps} bursts, ms | µs per write (median burst) | within-burst p50 (median burst), ms |");
    println!("|---:|---|---:|---:|---:|");
    for &n in &rows {
        for reading in [false, true] {
            let r = row(n, reps, reading, listener_cpu);
            println!(
                "| {n} | {} | {:.3} / {:.3} | {:.2} | {:.3} |",
                if reading { "a thread per connection reads" } else { "held, not read" },
                r.median_spread_ms,
                r.max_spread_ms,
                r.median_spread_ms * 1000.0 / (n.max(2) - 1) as f64,
                r.median_p50_ms
            );
        }
    }
    println!("load average {} at the end", load_average());
}

struct Row {
    median_spread_ms: f64,
    max_spread_ms: f64,
    median_p50_ms: f64,
}

/// N connections to a fresh listener, then `reps` + 1 bursts over them (the first not counted).
fn row(n: usize, reps: usize, reading: bool, listener_cpu: usize) -> Row {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepting = std::thread::spawn(move || {
        pin_to_cpu(listener_cpu);
        let mut held = Vec::with_capacity(n);
        for _ in 0..n {
            let (mut s, _) = listener.accept().unwrap();
            if reading {
                std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        pin_to_cpu(listener_cpu);
                        let mut buf = [0u8; 4096];
                        while matches!(s.read(&mut buf), Ok(k) if k > 0) {}
                    })
                    .unwrap();
            } else {
                held.push(s);
            }
        }
        held
    });
    pin_to_cpu(0);
    let socks: Vec<TcpStream> = (0..n)
        .map(|_| {
            let s = TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect();
    let held = accepting.join().unwrap();
    let requests: Vec<Vec<u8>> = (0..n).map(request).collect();
    let mut spreads = Vec::with_capacity(reps);
    let mut p50s = Vec::with_capacity(reps);
    for rep in 0..=reps {
        std::thread::sleep(Duration::from_millis(50));
        let stamps = burst(&socks, &requests);
        if rep == 0 {
            continue;
        }
        let first = stamps[0];
        let mut after: Vec<f64> = stamps.iter().map(|t| t.duration_since(first).as_secs_f64() * 1000.0).collect();
        spreads.push(*after.last().unwrap());
        p50s.push(percentile(&mut after, 50.0));
    }
    drop(socks);
    drop(held);
    let max_spread_ms = spreads.iter().copied().fold(0.0, f64::max);
    // The burst whose spread is the median one gives the within-burst p50.
    let mut order: Vec<usize> = (0..spreads.len()).collect();
    order.sort_by(|&a, &b| spreads[a].total_cmp(&spreads[b]));
    let mid = order[(order.len() - 1) / 2];
    Row { median_spread_ms: spreads[mid], max_spread_ms, median_p50_ms: p50s[mid] }
}

/// One write of each request, in one loop; the instant before each write.
fn burst(socks: &[TcpStream], requests: &[Vec<u8>]) -> Vec<Instant> {
    let mut stamps = Vec::with_capacity(socks.len());
    for (mut s, r) in socks.iter().zip(requests) {
        stamps.push(Instant::now());
        let written = s.write(r).expect("a non-blocking write to a fresh connection");
        assert_eq!(written, r.len(), "a 600-byte request fits an empty send buffer");
    }
    stamps
}

/// A streamed completion request of a 128-word prompt, about 600 bytes, as the collector sends.
fn request(i: usize) -> Vec<u8> {
    let prompt = (0..128).map(|k| ["the", "a", "of", "to"][(k + i) % 4]).collect::<Vec<_>>().join(" ");
    let body = format!(
        r#"{{"model":"m","prompt":"{prompt}","max_tokens":512,"stream":true,"ignore_eos":true,"stream_options":{{"include_usage":true,"continuous_usage_stats":true}}}}"#
    );
    format!(
        "POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank - 1]
}
