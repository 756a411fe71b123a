//! Benchmark (not a test): the collector's own CPU cost per streamed token, and its TTFT error
//! against the twin's ground truth.
//!
//! The twin (`speedmatrix simulate --profile tiny`) runs pinned to CPU 1 and the collector
//! (`speedmatrix run`) to CPU 0 (`taskset`), with 128-token prompts and 512-token outputs
//! (`ignore_eos`, finished streams replaced), one decode cell per concurrency level (1, 32,
//! 128) with a `SECONDS`-long window (default 10). CPU time comes from the collector's own
//! self-check (`client_cpu_pct`, getrusage over the window), so per-token cost =
//! CPU s in the window ÷ output tokens in the window. At 128 streams it also compares the
//! collector's TTFT p50 with the truth from the twin's trace (first token chunk written −
//! request arrival).
//!
//! `PROFILE=h200` runs the same against the h200-shaped twin, whose engine answers all running
//! streams in lock-step steps (every stream's chunk of a step leaves in one burst): the TTFT
//! error under a burst.
//!
//! Run: `cargo bench -p speedmatrix-tests --bench collector_cpu` (needs `taskset`, util-linux).

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn main() {
    let exe = env!("CARGO_BIN_EXE_speedmatrix-under-test");
    let seconds = std::env::var("SECONDS").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(10);
    let dir = std::env::temp_dir().join(format!("collector-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let trace = dir.join("trace.jsonl");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "tiny".into());
    let mut twin = Command::new("taskset")
        .args(["-c", "1", exe, "simulate", "--profile", &profile, "--port", "0", "--trace"])
        .arg(&trace)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the twin under taskset (util-linux)");
    let mut line = String::new();
    BufReader::new(twin.stdout.take().unwrap()).read_line(&mut line).expect("listening line");
    let url = line.trim().strip_prefix("listening on ").expect("`listening on URL`").to_string();

    println!(
        "collector on CPU 0, twin on CPU 1; {profile} profile, 128-token prompts, 512-token outputs, {seconds} s windows"
    );
    println!("| streams | output tokens | tok/s | collector CPU (% of a core) | µs CPU per token | TTFT p50 (ms) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut last = None;
    for n in [1u32, 32, 128] {
        let out = dir.join(format!("run-{n}.json"));
        let status = Command::new("taskset")
            .args(["-c", "0", exe, "run", "--url", &url, "--contexts", "128", "--prefill-contexts", "none"])
            .args([
                "--concurrency",
                &n.to_string(),
                "--duration",
                &format!("{seconds}s"),
                "--max-tokens",
                "512",
                "--quiet",
                "-o",
            ])
            .arg(&out)
            .stderr(Stdio::null())
            .status()
            .expect("run the collector");
        assert!(status.success(), "collector failed at {n} streams");
        let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        let c = &r["decode"][0];
        let tokens = c["output_tokens"].as_f64().unwrap();
        let window = c["window_s"].as_f64().unwrap();
        let cpu_pct = c["client_cpu_pct"].as_f64().unwrap();
        let us_per_token = cpu_pct / 100.0 * window / tokens * 1e6;
        println!(
            "| {n} | {tokens:.0} | {:.0} | {cpu_pct:.1} | {us_per_token:.2} | {:.2} |",
            c["total_tps"].as_f64().unwrap(),
            c["ttft_ms"]["p50"].as_f64().unwrap()
        );
        last = Some(c.clone());
    }
    let _ = twin.kill();
    let _ = twin.wait();

    // TTFT p50 error at 128 streams against the trace. The clocks differ: send − arrival =
    // offset − transit with transit ≥ 0, so the fastest request gives the offset. The true TTFT
    // of a request is (first token written) − (sent, on the twin's clock); the collector's error
    // is how late it reads that first token.
    let cell = last.unwrap();
    let trace: std::collections::HashMap<String, (f64, f64)> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            let first = v["chunks"].as_array()?.iter().find(|c| c["tokens"].as_u64().unwrap_or(0) > 0)?;
            Some((v["id"].as_str()?.to_string(), (v["arrival_ms"].as_f64()?, first["written_ms"].as_f64()?)))
        })
        .collect();
    let opening: Vec<(f64, f64, f64)> = cell["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["opening"] == Value::Bool(true))
        .filter_map(|r| {
            let (arrival, first) = trace.get(r["response_id"].as_str()?)?;
            Some((r["start_ms"].as_f64()?, *arrival, *first))
        })
        .collect();
    let offset = opening.iter().map(|(start, arrival, _)| start - arrival).fold(f64::MIN, f64::max);
    let mut truth: Vec<f64> = opening.iter().map(|(start, _, first)| first - (start - offset)).collect();
    truth.sort_by(f64::total_cmp);
    let truth_p50 = truth[truth.len().div_ceil(2).max(1) - 1];
    let measured = cell["ttft_ms"]["p50"].as_f64().unwrap();
    let mut queue: Vec<f64> = opening.iter().map(|(start, arrival, _)| arrival - (start - offset)).collect();
    queue.sort_by(f64::total_cmp);
    println!(
        "TTFT p50 at 128 streams: collector {measured:.3} ms, truth {truth_p50:.3} ms, error {:+.3} ms \
         (of which the twin queued requests before its handler: p50 {:.3} ms)",
        measured - truth_p50,
        queue[queue.len().div_ceil(2) - 1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
