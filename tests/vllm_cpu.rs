//! `speedmatrix run` against a real vLLM (the CPU build, SmolLM2-135M) on loopback.
//!
//! The server is installed by `scripts/setup.sh` into `$SPEEDMATRIX_CACHE/servers` (default
//! `~/.cache/speedmatrix/servers`). Where it is missing the test prints SKIPPED — and fails
//! under `CI=true`. These machines are noisy and share 2 cores between server and client, so the
//! test checks consistency (client vs server counters, exact prompt lengths, statuses), not
//! absolute speeds.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn cache() -> PathBuf {
    std::env::var_os("SPEEDMATRIX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/speedmatrix"))
        .join("servers")
}

/// The vLLM server process; killed when dropped.
struct Server {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Drop for Server {
    /// vLLM forks an engine-core and a worker process that outlive a killed API server (each
    /// holding GBs): kill the server's whole process tree.
    fn drop(&mut self) {
        let tree = descendants(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        for pid in tree {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// Every process below `root`, from the parent pid in `/proc/PID/stat`.
fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "PID (comm) STATE PPID …"; comm may hold spaces, so split after the last ')'.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut out = vec![];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parents {
            if parent == p && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

fn start_vllm(dir: &std::path::Path) -> Option<Server> {
    let w = cache();
    let python = w.join("vllm-venv/bin/python");
    let model = w.join("model/smollm2-135m-hf");
    if !python.exists() || !model.join("model.safetensors").exists() {
        let msg = format!("vLLM CPU not installed in {} (run scripts/setup.sh)", w.display());
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = dir.join("vllm.log");
    let child = Command::new(python)
        .args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
        .arg(&model)
        .args(["--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--max-model-len", "2048", "--dtype", "bfloat16", "--enforce-eager"])
        .env("VLLM_CPU_KVCACHE_SPACE", "1")
        .env("HF_HUB_OFFLINE", "1")
        .env("VLLM_HOST_IP", "127.0.0.1")
        .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(dir.join("vllm.err")).unwrap()))
        .spawn()
        .expect("start vLLM");
    let server = Server { child, url: format!("http://127.0.0.1:{port}"), log };
    let deadline = Instant::now() + Duration::from_secs(240);
    while Instant::now() < deadline {
        let up = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && Command::new("curl")
                .args(["-sf", &format!("{}/v1/models", server.url)])
                .output()
                .is_ok_and(|o| o.status.success());
        if up {
            return Some(server);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let err = std::fs::read_to_string(dir.join("vllm.err")).unwrap_or_default();
    panic!(
        "vLLM did not come up within 240 s; log {}:\n{}",
        server.log.display(),
        &err[err.len().saturating_sub(3000)..]
    );
}

#[test]
fn run_against_real_vllm_on_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start_vllm(dir.path()) else { return };
    let out = dir.path().join("run.json");
    let o = Command::new(env!("CARGO_BIN_EXE_speedmatrix"))
        .args(["run", "--url", &server.url, "--contexts", "256,1k", "--concurrency", "1,4"])
        .args(["--prefill-contexts", "512,max", "--duration", "4s", "--max-tokens", "512", "--quiet", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let r = speedmatrix_schema::load_results(&std::fs::read(&out).unwrap()).expect("a valid results file");
    // The launch command is read from the local vLLM process (/proc/PID/cmdline).
    let launch = r.engine.launch_command.as_deref().expect("launch command of the local server");
    assert!(
        launch.contains("vllm.entrypoints.openai.api_server") && launch.contains("--max-model-len 2048"),
        "{launch}"
    );
    assert!(r.hardware.cpu.is_some() && r.hardware.os.as_deref() == Some("linux"));
    assert_eq!(r.run.status, speedmatrix_schema::RunStatus::Complete);
    assert_eq!(r.engine.name, "vllm");
    assert_eq!(r.engine.version.as_deref(), Some("0.32.0"));
    assert_eq!(r.engine.max_model_len, Some(2048));
    assert!(r.engine.kv_budget_tokens.is_some(), "KV budget from cache_config_info");

    // Prefill: exact prompt lengths via /tokenize, max = max_model_len − 1; prompt tok/s = tokens ÷ TTFT.
    assert_eq!(r.prefill.len(), 2);
    for (p, want) in r.prefill.iter().zip([512, 2047]) {
        assert_eq!(p.status, speedmatrix_schema::CellStatus::Valid, "{:?}", p.reason);
        assert_eq!(p.prompt_tokens, Some(want), "prefill {}", p.context.label);
        let (tps, ttft) = (p.prompt_tps.unwrap(), p.ttft_ms.unwrap());
        assert!((tps - want as f64 / (ttft / 1000.0)).abs() / tps < 1e-3);
    }
    // Decode: every cell valid, exact prompts, client token count agrees with the server's counter.
    assert_eq!(r.decode.len(), 4);
    for c in &r.decode {
        let name = format!("{} × {}", c.context.label, c.concurrency);
        assert_eq!(c.status, speedmatrix_schema::CellStatus::Valid, "{name}: {:?}", c.reason);
        assert_eq!(c.prompt_tokens, Some(c.context.tokens), "{name}");
        assert_eq!(c.token_count_source, Some(speedmatrix_schema::TokenCountSource::ContinuousUsage));
        let client = c.output_tokens.unwrap() as f64;
        let server_tokens = c.server.as_ref().and_then(|s| s.generation_tokens).unwrap() as f64;
        // The server counter is read just before and after the window, so it may hold a few more.
        assert!(
            client > 0.0 && server_tokens >= client * 0.98 && server_tokens <= client * 1.25 + 10.0,
            "{name}: client {client}, server {server_tokens}"
        );
        assert!((c.total_tps.unwrap() - client / c.window_s.unwrap()).abs() < 0.01);
        assert_eq!(c.ttft_ms.unwrap().count, Some(u64::from(c.concurrency)), "{name}: one TTFT per opening stream");
        let running = c.server.as_ref().and_then(|s| s.running_avg).unwrap();
        assert!(running > 0.9 * f64::from(c.concurrency), "{name}: running {running}");
        assert!(c.requests.len() >= c.concurrency as usize);
        assert!((c.window_s.unwrap() - 4.0).abs() < 0.05, "window closed at its deadline");
    }
    // The viewer-side table has every row.
    assert_eq!(speedmatrix_schema::table::rows(&r).len(), 6);
}
