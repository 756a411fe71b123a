//! Benchmark (not a test): speedmatrix's rate cells beside `vllm bench serve --request-rate` on
//! the same real server — the CPU vLLM (SmolLM2-135M, float32) that `scripts/setup.sh`
//! installs — at the same rates, prompt and output lengths: TTFT p50 and TPOT p50 of each
//! client and their ratio (issue 34 asks for both within 10 %).
//!
//! Each client runs alone against the server, one rate after the other (speedmatrix, then the
//! peer, at each rate): 128-token prompts, OUTPUT-token answers with ignore-EOS, Poisson arrivals
//! (each client draws its own schedule from its own generator: with tens of requests per window
//! the TTFT median moves with the schedule's bursts) or constant gaps (ARRIVAL=constant; the
//! peer's gamma gaps of shape 10⁶, a CV of 0.1 %, as it has no constant process of its own).
//! speedmatrix counts TTFT from each request's scheduled instant over the requests of its
//! measured window (after its warm-up); `vllm bench serve` counts from the send over all its
//! rate × SECONDS requests. Below saturation, with no send lag, the two should agree; the server
//! and both clients share this machine's cores, so a busy machine moves both.
//!
//! Run: `cargo bench -p speedmatrix-tests --bench vllm_rates` (RATES=0.5,1 the rates, SECONDS=30
//! the window, OUTPUT=32 the answer length, ARRIVAL=poisson|constant; VLLM_PYTHON=PATH another
//! Python with vLLM).

#[allow(dead_code)]
#[path = "side_by_side/python_peer.rs"]
mod python_peer;
#[allow(dead_code)]
#[path = "../tests/support/server.rs"]
mod server;

// This bench does not use its `pin_to_cpu`.
#[allow(dead_code)]
#[path = "side_by_side/machine.rs"]
mod machine;
use machine::load_average;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// One client's figures at one rate.
struct Figures {
    requests: Option<u64>,
    achieved: Option<f64>,
    ttft_p50: Option<f64>,
    tpot_p50: Option<f64>,
    note: String,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let seconds: f64 = env_or("SECONDS", 30.0);
    let output: u32 = env_or("OUTPUT", 32);
    let rates: Vec<f64> = std::env::var("RATES")
        .unwrap_or_else(|_| "0.5,1".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let arrival = std::env::var("ARRIVAL").unwrap_or_else(|_| "poisson".into());
    let Some(burstiness) = (match arrival.as_str() {
        "poisson" => Some("1"),
        "constant" => Some("1000000"),
        _ => None,
    }) else {
        return println!("ARRIVAL: poisson or constant, not {arrival}");
    };
    let peer = match python_peer::locate() {
        Ok(p) => p,
        Err(why) => return println!("vllm bench serve: {why}; nothing to compare"),
    };
    let dir = std::env::temp_dir().join(format!("vllm-rates-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(vllm) = start_vllm(&dir) else { return };
    println!(
        "CPU vLLM (SmolLM2-135M, float32, 2,048 max model length) on {}; 128-token prompts, {output}-token answers, {arrival} arrivals, {seconds} s; load average at the start {}",
        vllm.url,
        load_average()
    );
    println!("| rate req/s | client | requests | achieved req/s | TTFT p50 ms | TPOT p50 ms | TTFT from | note |");
    println!("|---:|---|---:|---:|---:|---:|---|---|");
    let mut pairs = Vec::new();
    for rate in rates {
        let ours = speedmatrix(&vllm.url, rate, seconds, output, &arrival, &dir.join(format!("sm-{rate}.json")));
        print_row(rate, "speedmatrix", &ours, "schedule");
        let theirs = vllm_bench_serve(
            &peer,
            &vllm.url,
            rate,
            seconds,
            output,
            burstiness,
            &dir.join(format!("vbs-{rate}.json")),
        );
        print_row(rate, "vllm bench serve", &theirs, "send");
        pairs.push((rate, ours, theirs));
    }
    println!("\n| rate req/s | TTFT p50 speedmatrix ÷ vllm bench serve | TPOT p50 speedmatrix ÷ vllm bench serve |");
    println!("|---:|---:|---:|");
    for (rate, a, b) in &pairs {
        let ratio = |x: Option<f64>, y: Option<f64>| x.zip(y).map_or("—".into(), |(x, y)| format!("{:.3}", x / y));
        println!("| {rate} | {} | {} |", ratio(a.ttft_p50, b.ttft_p50), ratio(a.tpot_p50, b.tpot_p50));
    }
    println!("load average at the end {}", load_average());
    drop(vllm);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CPU vLLM as the vllm_cpu suite starts it (float32: emulated bfloat16 is 4× slower on
/// AVX2), or None with the reason printed.
fn start_vllm(dir: &Path) -> Option<server::ServerProcess> {
    let w = server::cache();
    let python = w.join("vllm-venv/bin/python");
    let model = w.join("model/smollm2-135m-hf");
    if !python.exists() || !model.join("model.safetensors").exists() {
        println!("vLLM CPU not installed in {} (scripts/setup.sh installs it); nothing to compare", w.display());
        return None;
    }
    let port = server::free_port();
    let mut cmd = Command::new(python);
    cmd.args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
        .arg(&model)
        .args(["--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--max-model-len", "2048", "--dtype", "float32", "--enforce-eager"])
        .env("VLLM_CPU_KVCACHE_SPACE", "1")
        .env("HF_HUB_OFFLINE", "1")
        .env("VLLM_HOST_IP", "127.0.0.1");
    let mut s = server::ServerProcess::spawn("vLLM", cmd, port, &dir.join("vllm.log"));
    s.wait_ready(Duration::from_secs(300), |url| {
        Command::new("curl").args(["-sf", &format!("{url}/health")]).output().is_ok_and(|o| o.status.success())
    });
    Some(s)
}

fn speedmatrix(url: &str, rate: f64, seconds: f64, output: u32, arrival: &str, out: &Path) -> Figures {
    let o = Command::new(env!("CARGO_BIN_EXE_speedmatrix-under-test"))
        .args(["run", "--url", url, "--contexts", "128", "--prefill-contexts", "none", "--rates", &rate.to_string()])
        .args(["--arrival", arrival, "--seed", "0", "--duration", &format!("{seconds}s")])
        .args(["--max-tokens", &output.to_string(), "--quiet", "--force", "-o"])
        .arg(out)
        .output()
        .expect("run speedmatrix");
    let v: Value = std::fs::read(out).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(Value::Null);
    let c = &v["rates"][0];
    if c.is_null() {
        return failed(&o);
    }
    Figures {
        requests: c["completed_requests"].as_u64(),
        achieved: c["achieved_rps"].as_f64(),
        ttft_p50: c["ttft_ms"]["p50"].as_f64(),
        tpot_p50: c["tpot_ms"]["p50"].as_f64(),
        note: format!(
            "{}{}",
            c["status"].as_str().unwrap_or("?"),
            c["reason"].as_str().map(|r| format!(": {r}")).unwrap_or_default()
        ),
    }
}

fn vllm_bench_serve(
    peer: &python_peer::PythonPeer,
    url: &str,
    rate: f64,
    seconds: f64,
    output: u32,
    burstiness: &str,
    file: &Path,
) -> Figures {
    let prompts = ((rate * seconds).round() as u64).max(1).to_string();
    let mut c = peer.command(&["--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions"]);
    c.args(["--model", "smollm2", "--tokenizer"]).arg(&peer.tokenizer);
    c.args(["--dataset-name", "random", "--random-input-len", "128", "--random-output-len", &output.to_string()]);
    c.args(["--ignore-eos", "--num-prompts", &prompts, "--request-rate", &rate.to_string(), "--seed", "0"]);
    c.args(["--burstiness", burstiness]);
    c.args(["--percentile-metrics", "ttft,tpot", "--metric-percentiles", "50", "--disable-tqdm", "--save-result"]);
    c.arg("--result-dir").arg(file.parent().unwrap()).arg("--result-filename").arg(file.file_name().unwrap());
    let o = c.output().expect("run vllm bench serve");
    let Some(v) = python_peer::read_results(file) else {
        return failed(&o);
    };
    Figures {
        requests: v["completed"].as_u64(),
        achieved: v["request_throughput"].as_f64(),
        ttft_p50: v["median_ttft_ms"].as_f64(),
        tpot_p50: v["median_tpot_ms"].as_f64(),
        note: format!("{} failed", v["failed"].as_u64().unwrap_or(0)),
    }
}

fn failed(o: &std::process::Output) -> Figures {
    let err = String::from_utf8_lossy(&o.stderr);
    let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
    Figures {
        requests: None,
        achieved: None,
        ttft_p50: None,
        tpot_p50: None,
        note: format!("no result ({}): {last}", o.status),
    }
}

fn print_row(rate: f64, client: &str, f: &Figures, from: &str) {
    let n = |x: Option<f64>| x.map_or("—".into(), |v| format!("{v:.2}"));
    let req = f.requests.map_or("—".into(), |r| r.to_string());
    println!(
        "| {rate} | {client} | {req} | {} | {} | {} | {from} | {} |",
        n(f.achieved),
        n(f.ttft_p50),
        n(f.tpot_p50),
        f.note
    );
}
