//! `speedmatrix run` against a real vLLM (the CPU build, SmolLM2-135M) on loopback.
//!
//! The server is installed by `scripts/setup.sh` into `$SPEEDMATRIX_CACHE/servers` (default
//! `~/.cache/speedmatrix/servers`). Where it is missing the test says SKIPPED — and fails
//! under `CI=true`. These machines are noisy and share 2 cores between server and client, so the
//! test checks consistency (client vs server counters, exact prompt lengths, statuses), not
//! absolute speeds.

use support::server::{self, ServerProcess};

use std::process::Command;
use std::time::Duration;

/// One vLLM at a time: two CPU servers on two cores would measure each other.
static ONE_SERVER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Start vLLM with `extra` flags (`dev_mode`: with `VLLM_SERVER_DEV_MODE=1`, which serves `POST
/// /reset_prefix_cache`); ready when `/health` answers (it needs no API key, while
/// `/v1/models` answers 401 when the server has one).
fn start_vllm(dir: &std::path::Path, extra: &[&str], dev_mode: bool) -> Option<ServerProcess> {
    let w = server::cache();
    let python = w.join("vllm-venv/bin/python");
    let model = w.join("model/smollm2-135m-hf");
    if !python.exists() || !model.join("model.safetensors").exists() {
        support::skip(&format!("vLLM CPU not installed in {} (run scripts/setup.sh)", w.display()));
        return None;
    }
    let port = server::free_port();
    let mut cmd = Command::new(python);
    cmd.args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
        .arg(&model)
        .args(["--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", &port.to_string()])
        // float32, not the weights' bfloat16: on a CPU without AVX-512 BF16 (CI's AVX2 machines)
        // vLLM emulates bfloat16 and prefills at ~50 tok/s; in float32 the same matrix ran in
        // 49 s instead of 135 s (prefill 266 vs 60 tok/s at 512 tokens, quiet 2-core AVX2 box).
        .args(["--max-model-len", "2048", "--dtype", "float32", "--enforce-eager"])
        .args(extra)
        .env("VLLM_CPU_KVCACHE_SPACE", "1")
        .env("HF_HUB_OFFLINE", "1")
        .env("VLLM_HOST_IP", "127.0.0.1");
    if dev_mode {
        cmd.env("VLLM_SERVER_DEV_MODE", "1");
    }
    let mut server = ServerProcess::spawn("vLLM", cmd, port, &dir.join("vllm.log"));
    server.wait_ready(Duration::from_secs(240), |url| {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && Command::new("curl").args(["-sf", &format!("{url}/health")]).output().is_ok_and(|o| o.status.success())
    });
    Some(server)
}

/// The client's count of every token the cell's requests received (server usage in the stream)
/// against the server's `vllm:generation_tokens_total` over the same span: within 2 %, or one
/// engine step's tokens (`step_tokens`: 1 + speculative tokens) per stream, whichever is more.
/// The server may count a few more: streams cancelled at the window's end had tokens generated
/// but not yet sent (CI: 128 × 1 with ngram, 179 tokens in the window, the server 4 more).
fn counts_agree(r: &speedmatrix_schema::Results, step_tokens: u64) {
    for c in &r.decode {
        let name = format!("{} × {}", c.context.label, c.concurrency);
        let client: u64 = c.requests.iter().filter_map(|q| q.output_tokens).sum();
        let server = c.server.as_ref().and_then(|s| s.generation_tokens).expect("server token counter");
        let diff = server as f64 - client as f64;
        eprintln!(
            "{name}: client {client} tokens, server {server} tokens, difference {diff:+} ({:+.2} %)",
            100.0 * diff / client as f64
        );
        let allowed = (0.02 * client as f64).max((u64::from(c.concurrency) * step_tokens) as f64);
        assert!(diff.abs() <= allowed, "{name}: client {client}, server {server}, allowed ±{allowed}");
        if c.status == speedmatrix_schema::CellStatus::Valid {
            assert!(client > 0, "{name}: a valid cell received tokens");
        }
    }
}

fn show(out: &std::path::Path) {
    let o = Command::new(support::bin()).arg("show").arg(out).output().unwrap();
    eprintln!("{}", String::from_utf8_lossy(&o.stdout));
}

/// The CPU matrix: `run` flags after `--url` (and before `--duration`).
const CPU_MATRIX: [&str; 10] = [
    "--contexts",
    "128,1536",
    "--concurrency",
    "1,8",
    "--prefill-contexts",
    "512,max",
    "--max-tokens",
    "512",
    "--quiet",
    "-o",
];

/// The real server's window, s.
const WINDOW_S: f64 = 4.0;

/// How much faster than real time the twin of the run plays it (`TwinConfig::time_scale`): the
/// twin imitates a server that spends a minute or more on this matrix (quiet, in float32: a 2K
/// prefill of 12 s and 8-stream TTFTs of 3–7 s; several times that beside other work); at 4× its
/// run takes a quarter of that. Its window is a quarter as long in real time, 4 s of twin time as the real run's, and
/// its figures are read back in twin time.
const TWIN_SPEED: f64 = 4.0;

/// Run the CPU matrix with windows of `window_s` against `url` into `out`; for a real server
/// (`real`), `SPEEDMATRIX_KEEP_RUN=FILE` keeps a copy of the results file (e.g. to try
/// `speedmatrix simulate --fit FILE` on a real run).
fn run_cpu_matrix(url: &str, out: &std::path::Path, real: bool, window_s: f64) -> speedmatrix_schema::Results {
    let o = Command::new(support::bin())
        .args(["run", "--url", url, "--duration", &format!("{}ms", window_s * 1000.0)])
        .args(CPU_MATRIX)
        .arg(out)
        .env_remove("OPENAI_API_KEY")
        .env_remove("SPEEDMATRIX_API_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    if let Some(keep) = std::env::var_os("SPEEDMATRIX_KEEP_RUN").filter(|_| real) {
        std::fs::copy(out, &keep).expect("copy the run to SPEEDMATRIX_KEEP_RUN");
    }
    speedmatrix_schema::load_results(&std::fs::read(out).unwrap()).expect("a valid results file")
}

#[test]
fn run_against_real_vllm_on_cpu() {
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start_vllm(dir.path(), &[], false) else { return };
    let out = dir.path().join("run.json");
    let r = run_cpu_matrix(&server.url, &out, true, WINDOW_S);
    show(&out);
    // The launch command is read from the local vLLM process (/proc/PID/cmdline and environ).
    let launch = r.engine.launch_command.as_deref().expect("launch command of the local server");
    assert!(
        launch.contains("vllm.entrypoints.openai.api_server") && launch.contains("--max-model-len 2048"),
        "{launch}"
    );
    assert!(launch.starts_with("HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_HOST_IP=127.0.0.1 "), "{launch}");
    assert!(r.hardware.cpu.is_some() && r.hardware.os.as_deref() == Some("linux"));
    assert!(r.hardware.gpu_telemetry_note.is_some(), "no NVML here, and the file says why");
    assert_eq!(r.run.status, speedmatrix_schema::RunStatus::Complete);
    assert_eq!(r.engine.name.as_deref(), Some("vllm"));
    assert_eq!(r.engine.version.as_deref(), Some("0.32.0"));
    assert_eq!(r.engine.max_model_len, Some(2048));
    assert_eq!(r.engine.speculative_decoding, None);
    assert!(r.engine.kv_budget_tokens.is_some(), "KV budget from cache_config_info");

    // Prefill: exact prompt lengths via /tokenize, max = max_model_len − 1; prompt tok/s = tokens ÷ TTFT.
    assert_eq!(r.prefill.len(), 2);
    for (p, want) in r.prefill.iter().zip([512, 2047]) {
        assert_eq!(p.status, speedmatrix_schema::CellStatus::Valid, "{:?}", p.reason);
        assert_eq!(p.prompt_tokens, Some(want), "prefill {}", p.context.label);
        let (tps, ttft) = (p.prompt_tps.unwrap(), p.ttft_ms.unwrap());
        assert!((tps - want as f64 / (ttft / 1000.0)).abs() / tps < 1e-3);
    }
    // Decode: every cell measured with exact prompts; client and server token counts agree.
    assert_eq!(r.decode.len(), 4);
    for c in &r.decode {
        let name = format!("{} × {}", c.context.label, c.concurrency);
        assert!(
            matches!(c.status, speedmatrix_schema::CellStatus::Valid | speedmatrix_schema::CellStatus::RequestsQueued),
            "{name}: {:?} {:?}",
            c.status,
            c.reason
        );
        assert_eq!(c.prompt_tokens, Some(c.context.tokens), "{name}");
        assert_eq!(c.token_count_source, Some(speedmatrix_schema::TokenCountSource::ContinuousUsage));
        // total tok/s = window tokens ÷ window; the file's window_s (the measured close − open)
        // is rounded to the ms, so compare to 0.1 %.
        let per_window = c.output_tokens.unwrap() as f64 / c.window_s.unwrap();
        assert!(
            (c.total_tps.unwrap() - per_window).abs() / per_window < 1e-3,
            "{name}: {:?} vs {per_window}",
            c.total_tps
        );
        assert_eq!(c.ttft_ms.unwrap().count, Some(u64::from(c.concurrency)), "{name}: one TTFT per opening stream");
        assert!(c.requests.len() >= c.concurrency as usize);
        // The window closes at its deadline, never early, late only by the client's wake-up: the
        // tokens are counted inside the measured window (close − open), so a late close moves no
        // figure. A stream's end is what a window that waited for it would show — seconds at
        // this server's ~10 tok/s per stream — so 0.5 s tells the two apart. Measured closes:
        // within 50 ms on a quiet machine; CI failed a ±50 ms bound beside two `yes` hogs.
        let late = c.window_s.unwrap() - WINDOW_S;
        assert!((-0.001..0.5).contains(&late), "{name}: window closed {late:+.3} s from its deadline");
        if c.concurrency == 1 {
            assert_eq!(c.status, speedmatrix_schema::CellStatus::Valid, "{name}: {:?}", c.reason);
            let running = c.server.as_ref().and_then(|s| s.running_avg).unwrap();
            assert!(running > 0.9, "{name}: running {running}");
        }
    }
    counts_agree(&r, 1);
    // The viewer-side table has every row.
    assert_eq!(speedmatrix_schema::table::rows(&r).len(), 6);
    two_rates(&server.url, dir.path());
    prefix_cache_hit_as_planned(&server.url, dir.path());
    drop(server);
    the_twin_of_the_run_reproduces_it(&r, dir.path());
}

/// Two open-loop rates against the same server (`--rates 1,6 --keep-going`, 8-token answers,
/// 5-s windows: 1 req/s holds about 5 requests per window and ends each in about 1 s; 6 req/s is
/// past what this server serves on 2 cores): each cell is measured (valid, saturated or
/// client-limited), its latencies count from the scheduled instants (TTFT ≥ send lag for every
/// request), and the tokens the client received match the server's own counter
/// (`vllm:generation_tokens_total` over the cell) within 2 % or one token per request in
/// flight at most (requests cancelled when the drain ends may have a token generated and not
/// yet sent). Its TTFT and TPOT beside `vllm bench serve --request-rate` on this server are a
/// bench, not a check here (a 10 % bound on a CPU server shared with both clients fails on a busy
/// machine): `cargo bench -p speedmatrix-tests --bench vllm_rates`, figures in BENCHMARKS.md.
fn two_rates(url: &str, dir: &std::path::Path) {
    let out = dir.join("rates.json");
    let o = Command::new(support::bin())
        .args(["run", "--url", url, "--contexts", "128", "--rates", "1,6", "--keep-going"])
        .args(["--prefill-contexts", "none", "--duration", "5s", "--max-tokens", "8", "--quiet", "-o"])
        .arg(&out)
        .env_remove("OPENAI_API_KEY")
        .env_remove("SPEEDMATRIX_API_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let r = speedmatrix_schema::load_results(&std::fs::read(&out).unwrap()).expect("a valid results file");
    show(&out);
    assert_eq!(r.rates.len(), 2);
    for c in &r.rates {
        let name = format!("{} at {}", c.context.label, c.rate_label());
        assert!(c.status.is_measured(), "{name}: {:?} {:?}", c.status, c.reason);
        // A saturated cell may see no token in its window: CI saw 6 req/s queue 34 requests on
        // this server with none answered inside the window (vLLM prefills the queue first).
        assert!(c.scheduled_requests.unwrap() > 0 && c.total_tps.is_some(), "{name}");
        for q in c.requests.iter().filter(|q| q.ttft_ms.is_some()) {
            assert!(q.ttft_ms.unwrap() >= q.send_lag_ms.unwrap(), "{name}: {q:?}");
        }
        let client: u64 = c.requests.iter().filter_map(|q| q.output_tokens).sum();
        let server = c.server.as_ref().and_then(|s| s.generation_tokens).expect("server token counter");
        let diff = server as f64 - client as f64;
        let allowed = (0.02 * client as f64).max(c.max_in_flight_seen.unwrap_or(1).max(1) as f64);
        eprintln!("{name}: {:?}, client {client} tokens, server {server} ({diff:+})", c.status);
        assert!(diff.abs() <= allowed, "{name}: client {client}, server {server}, allowed ±{allowed}");
        if c.status == speedmatrix_schema::CellStatus::Valid {
            assert!(client > 0, "{name}: a valid cell received tokens");
        }
    }
}

/// ngram speculative decoding, an API key and prefix caching off (`--no-enable-prefix-caching`,
/// with `VLLM_SERVER_DEV_MODE=1`) on the server, in two runs: the matrix's short context
/// (128 × 1 and 8, the 512 prefill row) and its long one as a 90 % prefix-share cell (1,536 × 1).
/// Chunks carry up to 4 tokens (some with empty text), the client counts tokens by usage, not by
/// chunk, and the counts still agree with the server's; every cell's acceptance from the
/// counters is consistent ([`acceptance_is_consistent`]); the prefix-share cell starts from a
/// reset cache and says its planned share was not hit, and why; the key appears nowhere in the
/// files or the output. (Without prefix caching every stream prefills its whole prompt: 1,536
/// × 8 alone took 35 s to start its streams, so the long context runs one stream.)
#[test]
fn run_against_real_vllm_with_ngram_speculative_decoding_and_an_api_key() {
    let _one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let key = "sk-vllm-cpu-test-4b1d9e0c5a7f";
    let dir = tempfile::tempdir().unwrap();
    let spec = r#"{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4,"prompt_lookup_min":2}"#;
    let flags = ["--api-key", key, "--speculative-config", spec, "--no-enable-prefix-caching"];
    let Some(server) = start_vllm(dir.path(), &flags, true) else { return };
    let short = ["--contexts", "128", "--concurrency", "1,8", "--prefill-contexts", "512"];
    let r = ngram_run(&server.url, &dir.path().join("run.json"), key, &short);
    let long = ["--contexts", "1536", "--concurrency", "1", "--prefill-contexts", "none", "--prefix-share", "90%"];
    let shared = ngram_run(&server.url, &dir.path().join("prefix.json"), key, &long);
    let launch = r.engine.launch_command.as_deref().unwrap();
    assert!(launch.contains("--api-key <redacted>"), "{launch}");
    assert_eq!(r.engine.speculative_decoding.as_deref(), Some("ngram, 3 tokens"));
    let mut multi_token_chunks = false;
    for c in r.decode.iter().chain(&shared.decode) {
        let name = format!("{} × {}", c.context.label, c.concurrency);
        assert!(
            matches!(c.status, speedmatrix_schema::CellStatus::Valid | speedmatrix_schema::CellStatus::RequestsQueued),
            "{name}: {:?} {:?}",
            c.status,
            c.reason
        );
        assert_eq!(c.token_count_source, Some(speedmatrix_schema::TokenCountSource::ContinuousUsage));
        // More tokens than token-carrying chunks: some chunks carried several tokens.
        multi_token_chunks |= c.requests.iter().any(|q| q.output_tokens.unwrap_or(0) > q.chunks.unwrap_or(0) + 1);
        let rate = c.spec_accept_rate.expect("spec-decode acceptance rate from /metrics");
        assert!((0.0..=1.0).contains(&rate), "{name}: {rate}");
        let len = c.server.as_ref().and_then(|s| s.spec_mean_accepted_len).unwrap();
        assert!((1.0..=4.0).contains(&len), "{name}: mean accepted length {len}");
        eprintln!("{name}: acceptance {rate}, mean accepted length {len}");
        acceptance_is_consistent(&name, c, 3);
    }
    assert!(multi_token_chunks, "ngram speculative decoding sends multi-token chunks");
    assert_eq!(r.decode.len() + shared.decode.len(), 3);
    counts_agree(&r, 4);
    counts_agree(&shared, 4);
    caching_off_misses_the_plan(&shared);
}

/// `run` against the ngram server (key `key`) with `matrix` (`--duration 4s --max-tokens 512
/// --temperature 0` beside it) into `out`; the key in no output.
fn ngram_run(url: &str, out: &std::path::Path, key: &str, matrix: &[&str]) -> speedmatrix_schema::Results {
    let o = Command::new(support::bin())
        .args(["run", "--url", url])
        .args(matrix)
        .args(["--duration", "4s", "--max-tokens", "512", "--temperature", "0", "--quiet", "-o"])
        .arg(out)
        .env("OPENAI_API_KEY", key)
        .env_remove("SPEEDMATRIX_API_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let text = std::fs::read_to_string(out).unwrap();
    assert!(!text.contains(key) && !stderr.contains(key) && !String::from_utf8_lossy(&o.stdout).contains(key));
    show(out);
    speedmatrix_schema::load_results(text.as_bytes()).expect("a valid results file")
}

/// A cell's `spec_decode` block against itself and the cell: counts from the counters
/// (Prometheus), accepted ≤ draft tokens ≤ `k` × drafts (ngram proposes at most `k` tokens per
/// draft), the acceptance rate accepted ÷ draft tokens and the mean accepted length 1 +
/// accepted ÷ drafts (rounded to 3 decimals as written), the per-position counts summing to the
/// accepted tokens, each position accepting no more than the one before (a token is accepted
/// only after its predecessor), the cell's `spec_accept_rate` the same figure, and the server
/// generating at least one token per draft plus every accepted one.
fn acceptance_is_consistent(name: &str, c: &speedmatrix_schema::DecodeCell, k: u64) {
    let f = c.spec_decode.as_ref().unwrap_or_else(|| panic!("{name}: a spec_decode block"));
    assert_eq!(f.source, speedmatrix_schema::SpecDecodeSource::PrometheusCounters, "{name}");
    let (drafts, draft, accepted) = (f.drafts.unwrap(), f.draft_tokens.unwrap(), f.accepted_tokens.unwrap());
    eprintln!(
        "{name}: {drafts} drafts, {draft} draft tokens, {accepted} accepted, by position {:?}",
        f.accepted_per_position
    );
    assert!(drafts > 0 && drafts <= draft && draft <= k * drafts && accepted <= draft, "{name}: {f:?}");
    let round3 = |v: f64| (v * 1000.0).round() / 1000.0;
    assert_eq!(f.acceptance_rate, Some(round3(accepted as f64 / draft as f64)), "{name}");
    assert_eq!(f.mean_accepted_length, Some(round3(1.0 + accepted as f64 / drafts as f64)), "{name}");
    assert_eq!(c.spec_accept_rate, f.acceptance_rate, "{name}: one acceptance rate");
    assert_eq!(f.accepted_per_position.len() as u64, k, "{name}: vLLM counts each of the {k} positions");
    assert_eq!(f.accepted_per_position.iter().sum::<u64>(), accepted, "{name}: positions sum to the accepted");
    assert!(f.accepted_per_position.windows(2).all(|w| w[1] <= w[0]), "{name}: {:?}", f.accepted_per_position);
    let by_pos: Vec<f64> = f.accepted_per_position.iter().map(|&n| round3(n as f64 / drafts as f64)).collect();
    assert_eq!(f.acceptance_by_position, by_pos, "{name}");
    let generated = c.server.as_ref().and_then(|s| s.generation_tokens).unwrap();
    assert!(
        generated >= drafts + accepted,
        "{name}: {generated} tokens generated, {drafts} drafts + {accepted} accepted"
    );
}

/// `run --prefix-share 90%` on a 1K context: a decode cell (one stream, 8-token answers, a 2-s
/// window) and the prefill rows (the cold one, and a warm one whose 90 % prefix was sent just
/// before).
fn prefix_share_run(url: &str, dir: &std::path::Path) -> speedmatrix_schema::Results {
    let out = dir.join("prefix.json");
    let o = Command::new(support::bin())
        .args(["run", "--url", url, "--contexts", "1k", "--concurrency", "1", "--prefix-share", "90%"])
        .args(["--prefill-contexts", "1k", "--duration", "2s", "--max-tokens", "8", "--quiet", "-o"])
        .arg(&out)
        .env_remove("OPENAI_API_KEY")
        .env_remove("SPEEDMATRIX_API_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    show(&out);
    speedmatrix_schema::load_results(&std::fs::read(&out).unwrap()).expect("a valid results file")
}

/// Prefix caching on (vLLM's default), the server without `VLLM_SERVER_DEV_MODE`: its `POST
/// /reset_prefix_cache` answers 404, so the file says the prompts were salted and why; the
/// 90 % cell's and the warm row's hit rates from the `vllm:prefix_cache_hits` / `_queries`
/// growth (Prometheus) are within 10 points of the plan (the CPU backend caches whole blocks:
/// 7 of the 1K prompt's 8 blocks of 128 tokens hold the 921-token prefix, 87.5 %), no reason
/// says otherwise, and the warm row's TTFT is below the cold row's (about a tenth of the prompt
/// to prefill: 0.4 s against 4 s quiet; the bound holds unless a load spike stalls the warm
/// request alone for seconds).
fn prefix_cache_hit_as_planned(url: &str, dir: &std::path::Path) {
    let r = prefix_share_run(url, dir);
    assert_eq!(r.config.prefix_shares, [0.9]);
    let near = |pc: &speedmatrix_schema::PrefixCacheFigures, what: &str| {
        assert_eq!(pc.cache_start, speedmatrix_schema::CacheStart::Salted, "{what}: {pc:?}");
        assert!(pc.cache_start_detail.contains("VLLM_SERVER_DEV_MODE=1"), "{what}: {}", pc.cache_start_detail);
        assert_eq!(pc.hit_rate_source, Some(speedmatrix_schema::HitRateSource::Prometheus), "{what}: {pc:?}");
        let m = pc.measured_hit_rate.unwrap_or_else(|| panic!("{what}: a measured hit rate: {pc:?}"));
        eprintln!(
            "{what}: measured hit rate {m} ({} of {} tokens), planned 0.9",
            pc.hit_tokens.unwrap(),
            pc.query_tokens.unwrap()
        );
        assert!((m - 0.9).abs() <= 0.10, "{what}: measured {m}, planned 0.9");
    };
    assert_eq!(r.decode.len(), 1);
    let c = &r.decode[0];
    assert!(c.status.is_measured(), "{:?} {:?}", c.status, c.reason);
    assert_eq!(c.prefix_share, Some(0.9));
    near(c.prefix_cache.as_ref().expect("the cell's prefix cache"), "1K × 1 prefix 90%");
    assert!(!c.reason.as_deref().unwrap_or("").contains("prefix cache:"), "{:?}", c.reason);
    assert_eq!(r.prefill.len(), 2, "the cold row and the warm one");
    let (cold, warm) = (&r.prefill[0], &r.prefill[1]);
    assert_eq!((cold.prefix_share, warm.prefix_share), (None, Some(0.9)));
    assert_eq!(warm.status, speedmatrix_schema::CellStatus::Valid, "{:?}", warm.reason);
    near(warm.prefix_cache.as_ref().expect("the warm row's prefix cache"), "prefill 1K warm");
    let (cold_ms, warm_ms) = (cold.ttft_ms.unwrap(), warm.ttft_ms.unwrap());
    eprintln!("prefill 1K: cold TTFT {cold_ms} ms, warm (90 % cached) {warm_ms} ms");
    assert!(warm_ms < cold_ms, "warm TTFT {warm_ms} ms not below cold {cold_ms} ms");
}

/// `--no-enable-prefix-caching` (and `VLLM_SERVER_DEV_MODE=1`): the 90 % cell starts from a
/// reset cache (`POST /reset_prefix_cache`, recorded); the server looks up no prompt token in
/// a cache it does not keep (its counters stay put), so the hit rate is null with the reason in
/// `missing`, and the cell's reason says the planned share was not hit and why — never a
/// silent valid cell.
fn caching_off_misses_the_plan(r: &speedmatrix_schema::Results) {
    assert_eq!(r.decode.len(), 1);
    let c = &r.decode[0];
    assert_eq!(c.prefix_share, Some(0.9));
    let pc = c.prefix_cache.as_ref().expect("the cell's prefix cache");
    eprintln!("caching off: {pc:?}, reason {:?}, missing {:?}", c.reason, c.missing);
    assert_eq!(pc.cache_start, speedmatrix_schema::CacheStart::Reset, "{pc:?}");
    assert_eq!(pc.cache_start_detail, "POST /reset_prefix_cache");
    assert_eq!((pc.measured_hit_rate, pc.hit_tokens, pc.query_tokens), (None, Some(0), Some(0)), "{pc:?}");
    assert!(c.missing.iter().any(|m| m.figure == "prefix_cache.measured_hit_rate"), "{:?}", c.missing);
    let reason = c.reason.as_deref().unwrap_or("");
    assert!(
        reason.contains("the planned share 90% was not hit")
            && reason.contains("the server reports its prefix caching off"),
        "{reason}"
    );
}

/// A twin of any run: the fit of a real vLLM CPU run (`speedmatrix simulate --fit`), served by
/// the twin and measured by the collector with the same matrix. Called by
/// [`run_against_real_vllm_on_cpu`] with its run, so CI starts one vLLM for both.
///
/// - Every valid cell of the real run is valid when the twin serves the fit.
/// - Total tok/s against the fit's own replay (±5 % and one token per stream) is printed, not
///   asserted. On a loaded machine the live fit's 8-stream cell came out +13.3 % of its replay in
///   CI (twin 31.7 vs replay 28.0 tok/s, real 26.0) and +5.8 % in a loaded pass (31.7 vs 30.0):
///   the same twin figure against replays of different fits, a disagreement between the replay
///   and the twin over TCP for 8 streams that is not understood yet. That the twin server does
///   what its model says is asserted where load cannot move it: `collector_twin.rs` (the
///   collector against the twin's own trace) and `twin/tests/residuals.rs`.
/// - How near the fit comes to this run (prefill TTFT, TTFT p50, total tok/s; ±20 % is the
///   issue's bar for a twin of any run) is printed, not asserted: that residual is a property of
///   the real run as much as of the fit, and the real run shares 2 cores with whatever else the
///   machine runs. CI once failed it at `1,536 × 1 total tok/s vs real: twin 8.2 vs 6.7 (+22.2 %,
///   ±20 %)` — other processes took the cores during that one cell, a slowdown no step model
///   fitted to the four cells together follows. The bar is asserted where it is deterministic:
///   `twin/tests/residuals.rs` (`the_fit_of_a_real_cpu_run_replays_its_cells`) fits a real run
///   of this matrix kept as `tests/fixtures/vllm-cpu-smollm2-135m.json` and replays it in
///   simulated time: TTFT within ±5 %, total tok/s ±10 %, prefill ±1 % (`SPEEDMATRIX_KEEP_RUN`
///   keeps a new one). Three runs on a quiet 2-core machine: tok/s −4.3 … +6.2 % of the real run,
///   TTFT p50 −2.7 … +3.9 %.
fn the_twin_of_the_run_reproduces_it(real: &speedmatrix_schema::Results, dir: &std::path::Path) {
    let fit = speedmatrix_twin::fit::fit(real).expect("the run has prefill rows and decode cells");
    eprintln!("fit assumed: {:?}", fit.notes);
    let replay = speedmatrix_twin::replay::residuals(&fit.profile, real, &[1, 2, 3]);
    eprintln!("{replay}");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut cfg = speedmatrix_twin::TwinConfig::new(fit.profile);
    cfg.time_scale = TWIN_SPEED;
    let twin = rt.block_on(speedmatrix_twin::start(cfg, "127.0.0.1:0")).unwrap();
    let measured = run_cpu_matrix(&twin.url(), &dir.join("twin.json"), false, WINDOW_S / TWIN_SPEED);
    rt.block_on(twin.shutdown());
    assert!(measured.engine.simulated.is_some(), "the twin's run is recorded as simulated");
    assert_eq!(measured.engine.version, real.engine.version, "it imitates the real server's version");
    let mut lines = vec![];
    // A line for the log: `twin` against `reference` and the bar `tolerance` (none is asserted
    // on a live run; see the doc above).
    let mut check = |what: String, twin: f64, reference: f64, tolerance: f64| {
        let r = twin / reference - 1.0;
        let mark = if r.abs() <= tolerance { "" } else { "  (beyond the bar; not asserted on a live run)" };
        lines.push(format!(
            "{what}: twin {twin:.1} vs {reference:.1} ({:+.1} %, ±{:.0} %){mark}",
            100.0 * r,
            100.0 * tolerance
        ));
    };
    for (t, r) in measured.prefill.iter().zip(&real.prefill) {
        let what = format!("prefill {} TTFT ms vs real", r.context.label);
        check(what, t.ttft_ms.unwrap() * TWIN_SPEED, r.ttft_ms.unwrap(), 0.20);
    }
    // The twin's figures in twin time (its clock runs TWIN_SPEED times faster than real time).
    let twin_tps = |c: &speedmatrix_schema::DecodeCell| c.total_tps.unwrap() / TWIN_SPEED;
    let valid = speedmatrix_schema::CellStatus::Valid;
    for r in real.decode.iter().filter(|c| c.status == valid) {
        let t = measured.decode.iter().find(|t| t.context == r.context && t.concurrency == r.concurrency).unwrap();
        let name = format!("{} × {}", r.context.label, r.concurrency);
        assert_eq!(t.status, valid, "{name}: {:?}", t.reason);
        let p50 = |c: &speedmatrix_schema::DecodeCell| c.ttft_ms.as_ref().and_then(|d| d.p50).unwrap();
        check(format!("{name} TTFT p50 ms vs real"), p50(t) * TWIN_SPEED, p50(r), 0.20);
        let replayed = replay
            .decode
            .iter()
            .find(|c| c.tokens as u64 == r.context.tokens && c.concurrency == r.concurrency)
            .and_then(|c| c.total_tps)
            .expect("the replay has the cell");
        // ±5 %, and one token per stream (where each stream's tokens fall against the window's
        // edges moves the count by up to one token a stream). Printed, not asserted: see the
        // function's doc.
        let slack = 0.05 + f64::from(r.concurrency) / (replayed.twin * WINDOW_S);
        check(format!("{name} total tok/s vs the replay"), twin_tps(t), replayed.twin, slack);
        let what = format!("{name} total tok/s vs real (the fit's replay {:+.1} %)", 100.0 * replayed.residual());
        check(what, twin_tps(t), r.total_tps.unwrap(), 0.20);
    }
    eprintln!("{}", lines.join("\n"));
    assert!(real.decode.iter().any(|c| c.status == valid), "no valid cell to compare");
}
