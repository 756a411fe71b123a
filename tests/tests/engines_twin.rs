//! Engines other than vLLM, against the twin over real sockets: `simulate --flavor sglang`
//! (SGLang's `/get_server_info`, `sglang:*` metrics, `reasoning_content`, flat error bodies)
//! and the plain OpenAI-compatible mode (`--fault metrics-404 --fault version-404`: a hosted
//! endpoint or proxy). Each must give a complete results file with the right engine name and
//! statuses, and list what it could not measure.

use support::collect;

use collect::{collect, read};
use speedmatrix_schema::{CellStatus, KvBudgetSource, Results, RunStatus, TokenCountSource};
use speedmatrix_twin::{self as twin, Flavor, Profile, ReasoningField, TwinConfig};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn cell(r: &Results, ctx: u64, n: u32) -> &speedmatrix_schema::DecodeCell {
    r.decode.iter().find(|c| c.context.tokens == ctx && c.concurrency == n).expect("every planned cell is in the file")
}

/// A tiny twin that runs at most 2 requests at once and holds 8,192 KV tokens.
fn small_profile() -> Profile {
    let mut p = Profile::tiny();
    p.max_num_seqs = 2;
    p.kv_tokens = 8192;
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_flavor_gives_a_complete_sglang_file() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = TwinConfig::new(small_profile());
    cfg.flavor = Flavor::Sglang;
    cfg.reasoning = Some(ReasoningField::ReasoningContent);
    cfg.reasoning_tokens = 8;
    let handle = twin::start(cfg, "127.0.0.1:0").await.unwrap();

    // The wire: flat error bodies, /get_server_info, no /version.
    let http = reqwest::Client::new();
    let bad = http
        .post(format!("{}/v1/chat/completions", handle.url()))
        .json(&serde_json::json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert!(bad.status().is_client_error());
    let body: serde_json::Value = bad.json().await.unwrap();
    assert_eq!(body["object"], "error", "SGLang's flat error body: {body}");
    assert!(body["message"].as_str().unwrap().contains("nope"), "{body}");
    let info: serde_json::Value =
        http.get(format!("{}/get_server_info", handle.url())).send().await.unwrap().json().await.unwrap();
    assert_eq!(info["max_total_num_tokens"], 8192);
    assert_eq!(http.get(format!("{}/version", handle.url())).send().await.unwrap().status(), 404);

    let out = dir.path().join("sglang.json");
    let args = [
        "--endpoint",
        "chat",
        "--contexts",
        "256,2048",
        "--concurrency",
        "1,4",
        "--prefill-contexts",
        "256",
        "--duration",
        "2s",
        "--max-tokens",
        "256",
    ];
    let (code, err) = collect(&handle.url(), &out, &args).await;
    handle.shutdown().await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("server: sglang"), "detected from /get_server_info: {err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_eq!(r.engine.name.as_deref(), Some("sglang"));
    // An SGLang version (not the vLLM one of the profile), from /get_server_info.
    assert_eq!(r.engine.version.as_deref(), Some(twin::SGLANG_VERSION), "from /get_server_info");
    assert_eq!((r.engine.kv_budget_tokens, r.engine.kv_budget_source), (Some(8192), Some(KvBudgetSource::ServerInfo)));
    assert_eq!(r.engine.max_running_requests, Some(2));
    assert!(r.missing.is_empty(), "SGLang reports everything the run needs: {:?}", r.missing);
    assert_eq!(r.prefill[0].status, CellStatus::Valid);

    let one = cell(&r, 256, 1);
    assert_eq!(one.status, CellStatus::Valid, "{:?}", one.reason);
    assert!(one.total_tps.unwrap() > 0.0);
    assert!(one.server.as_ref().and_then(|s| s.running_avg).is_some(), "sglang:num_running_reqs was read");
    let (ttft, content) = (one.ttft_ms.unwrap().p50.unwrap(), one.ttft_content_ms.unwrap().p50.unwrap());
    assert!(content > ttft, "reasoning_content counts for TTFT, content comes later: {ttft} vs {content}");

    let four = cell(&r, 256, 4);
    assert_eq!(four.status, CellStatus::RequestsQueued, "4 streams, 2 running at most: {:?}", four.reason);
    assert!(four.reason.as_deref().unwrap().contains("at most 2"), "{:?}", four.reason);
    let over = cell(&r, 2048, 4);
    assert_eq!(over.status, CellStatus::OverCapacity, "4 × (2048 + 256) > 8192");
    assert_eq!(cell(&r, 2048, 1).status, CellStatus::Valid);
}

/// More streams than the server runs at once (SGLang `max_running_requests` 2, 4 streams): the
/// cell is ready once the 2 it runs produce, whatever its queue gauge reads meanwhile. Slow
/// prefill (no prefix cache, 400 prompt tok/s) makes a `/metrics` reading of 2 waiting arrive
/// before the first tokens; readiness once took that reading as "queue not empty yet" and
/// waited out its limit (the stall timeout, 120 s by default; 10 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_streams_than_the_server_runs_are_ready_when_the_ones_it_runs_produce() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = small_profile();
    p.prefix_cache = false;
    p.cost.prefill_knots = vec![(1, 400.0)];
    let mut cfg = TwinConfig::new(p);
    cfg.flavor = Flavor::Sglang;
    let handle = twin::start(cfg, "127.0.0.1:0").await.unwrap();
    let out = dir.path().join("queued.json");
    let args = [
        "--contexts",
        "256",
        "--concurrency",
        "4",
        "--prefill-contexts",
        "none",
        "--duration",
        "2s",
        "--max-tokens",
        "64",
        "--stall-timeout",
        "10s",
    ];
    let (code, err) = collect(&handle.url(), &out, &args).await;
    handle.shutdown().await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    let c = cell(&r, 256, 4);
    assert_eq!(c.status, CellStatus::RequestsQueued, "{:?}", c.reason);
    let reason = c.reason.as_deref().unwrap();
    assert!(reason.contains("at most 2"), "{reason}");
    assert!(!reason.contains("readiness timed out"), "ready once 2 streams produce: {reason}");
    assert!(!err.contains("not every stream was decoding"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_openai_mode_measures_from_the_stream_and_lists_what_is_missing() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = TwinConfig::new(small_profile());
    cfg.faults = vec!["metrics-404".parse().unwrap(), "version-404".parse().unwrap()];
    let handle = twin::start(cfg, "127.0.0.1:0").await.unwrap();
    let out = dir.path().join("openai.json");
    let args = [
        "--contexts",
        "256",
        "--concurrency",
        "1,4",
        "--prefill-contexts",
        "256",
        "--duration",
        "2s",
        "--max-tokens",
        "4096",
    ];
    let (code, err) = collect(&handle.url(), &out, &args).await;
    handle.shutdown().await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_eq!(r.engine.name.as_deref(), Some("openai"));
    assert_eq!(r.engine.version, None);
    let missing = |figure: &str| r.missing.iter().find(|m| m.figure == figure).map(|m| m.reason.as_str());
    assert!(missing("server").is_some_and(|w| w.contains("/metrics answered HTTP 404")), "{:?}", r.missing);
    assert!(missing("engine.version").is_some_and(|w| w.contains("HTTP 404")), "{:?}", r.missing);
    assert!(missing("kv_budget").is_some(), "{:?}", r.missing);

    let one = cell(&r, 256, 1);
    assert_eq!(one.status, CellStatus::Valid, "{:?}", one.reason);
    assert!(one.server.is_none(), "no server figures without /metrics");
    assert!(one.total_tps.unwrap() > 0.0);
    // Tokens from the stream alone: usage on every chunk is asked of every server.
    assert_eq!(one.token_count_source, Some(TokenCountSource::ContinuousUsage));
    let window_tokens: u64 = one.requests.iter().filter_map(|q| q.window_output_tokens).sum();
    assert_eq!(one.output_tokens, Some(window_tokens));
    // Queue evidence from the client (no server gauges): the server runs at most 2 of 4, so
    // streams wait beyond the start allowance for their first tokens.
    let four = cell(&r, 256, 4);
    assert_eq!(four.status, CellStatus::RequestsQueued, "{:?}", four.reason);
    let why = four.reason.as_deref().unwrap();
    assert!(why.contains("of 4 streams were running (client view: a stream waiting longer than"), "{why}");
}
