//! `speedmatrix run` against servers unlike the twin — each a scripted server on a loopback
//! socket (`support::scripted`): keep-alive comments during a long prefill, `/metrics` written
//! by other exporters, an HTML chat endpoint, streams without `[DONE]` or without any token, a
//! server that queues with no gauge to say so, a context limit below the asked contexts,
//! usage that reports cached prompt tokens. The figures must match what the server really
//! sent; each test is named after the shape it guards.

mod support;

use speedmatrix_schema::{CachedTokensSource, CellStatus, KvBudgetSource, PlanPhase, RunStatus, TokenCountSource};
use std::time::Duration;
use support::collect::{collect, read};
use support::scripted::{self, Answer, Script, StreamScript};

/// These run the collector in real time: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The exit code of a complete run in which some cells are errors (docs/CLI.md, "Exit codes").
const EXIT_CELL_ERRORS: i32 = 3;

/// SSE comments (`: ping`) are bytes from the server: during a prefill longer than
/// `--stall-timeout` they keep the stream alive, as SGLang and many proxies send them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_comments_during_a_long_prefill_are_not_a_stall() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        stream: StreamScript {
            prefill: Duration::from_millis(2500),
            keepalive_every: Some(Duration::from_millis(200)),
            ..StreamScript::default()
        },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1", "--prefill-contexts", "256", "--duration", "1s"];
    let (code, err) =
        collect(&server.url, &out, &[&args[..], &["--max-tokens", "400", "--stall-timeout", "1s"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    let row = &r.prefill[0];
    assert_eq!(row.status, CellStatus::Valid, "{:?}", row.reason);
    assert!(row.ttft_ms.unwrap() >= 2500.0, "TTFT is the prefill behind the keep-alives: {:?}", row.ttft_ms);
    let cell = &r.decode[0];
    assert!(cell.status.is_measured(), "{:?}: {:?}", cell.status, cell.reason);
    assert!(cell.ttft_ms.unwrap().p50.unwrap() >= 2500.0, "{cell:?}");
}

/// vLLM's names in the text other exporters write: Prometheus 0.0.4 without `# TYPE`/`# HELP`
/// (untyped samples), with timestamps, and OpenMetrics (`_total` under a `counter` family,
/// `# EOF`). Each gives the KV budget, so the over-capacity rule applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_text_as_specified_gives_the_kv_budget() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let untyped = "vllm:num_requests_running{model_name=\"scripted\"} 0\n\
                   vllm:num_requests_waiting{model_name=\"scripted\"} 0\n\
                   vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"256\",engine=\"0\"} 1\n\
                   vllm:generation_tokens_total{model_name=\"scripted\"} 12\n";
    let timestamps = "# HELP vllm:num_requests_running Running.\n\
                      vllm:num_requests_running{model_name=\"scripted\"} 0 1700000000000\n\
                      vllm:num_requests_waiting{model_name=\"scripted\"} 0 1700000000000\n\
                      vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"256\"} 1.0 1700000000000\n";
    let openmetrics = "# TYPE vllm:num_requests_running gauge\n\
                       vllm:num_requests_running{model_name=\"scripted\"} 0.0\n\
                       # TYPE vllm:generation_tokens counter\n\
                       # HELP vllm:generation_tokens Generation tokens.\n\
                       vllm:generation_tokens_total{model_name=\"scripted\"} 12.0\n\
                       vllm:generation_tokens_created{model_name=\"scripted\"} 1.7e9\n\
                       # TYPE vllm:cache_config_info gauge\n\
                       vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"256\"} 1.0\n\
                       # EOF\n";
    let shapes = [
        ("untyped", untyped, "text/plain; version=0.0.4"),
        ("timestamps", timestamps, "text/plain; version=0.0.4"),
        ("openmetrics", openmetrics, "application/openmetrics-text; version=1.0.0; charset=utf-8"),
    ];
    for (name, text, content_type) in shapes {
        let server = scripted::start(Script {
            metrics: Some(text.into()),
            metrics_content_type: content_type,
            ..Script::default()
        })
        .await;
        let out = dir.path().join(format!("{name}.json"));
        let args = ["--contexts", "256", "--concurrency", "1,32", "--prefill-contexts", "none", "--duration", "1s"];
        let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "64"]].concat()).await;
        assert_eq!(code, Some(0), "{name}: {err}");
        let r = read(&out);
        assert_eq!(r.engine.name.as_deref(), Some("vllm"), "{name}: detected from the metric names");
        assert_eq!(
            (r.engine.kv_budget_tokens, r.engine.kv_budget_source),
            (Some(4096), Some(KvBudgetSource::NumGpuBlocks)),
            "{name}: {:?}",
            r.missing
        );
        assert!(!r.missing.iter().any(|m| m.figure == "kv_budget"), "{name}: {:?}", r.missing);
        // 32 × (256 + 64) = 10,240 > 4,096.
        assert_eq!(r.decode[1].status, CellStatus::OverCapacity, "{name}");
        assert!(r.decode[0].status.is_measured(), "{name}: {:?}", r.decode[0].reason);
        assert!(r.decode[0].server.is_some(), "{name}: the window's scrapes were read");
    }
}

/// When `/metrics` really is not Prometheus text, `missing` says so with the parser's reason
/// instead of claiming the server lacks a metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unparsable_metrics_are_reported_with_the_parsers_reason() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let broken = "vllm:num_requests_running{model_name=\"scripted\"} 0\nvllm:cache_config_info{block_size=\"16\" 1\n";
    let server = scripted::start(Script { metrics: Some(broken.into()), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1", "--prefill-contexts", "none", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "32"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    let kv = r.missing.iter().find(|m| m.figure == "kv_budget").expect("the KV budget is missing");
    assert!(kv.reason.contains("could not be parsed"), "{kv:?}");
    assert!(kv.reason.contains("line 2"), "the parser's reason names the place: {kv:?}");
    assert!(!kv.reason.contains("has no vllm:cache_config_info"), "{kv:?}");
}

/// A proxy whose chat endpoint answers an HTML page with HTTP 200: every cell is an error; the
/// file is complete and the exit code says that cells failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_chat_endpoint_gives_error_cells_and_a_distinct_exit_code() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script { answer: Answer::Html, ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1,2", "--prefill-contexts", "256", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &args).await;
    assert_eq!(code, Some(EXIT_CELL_ERRORS), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert!(r.prefill.iter().all(|p| p.status == CellStatus::Error), "{:?}", r.prefill);
    for c in &r.decode {
        assert_eq!(c.status, CellStatus::Error, "{:?}", c.reason);
        assert!(c.reason.as_deref().unwrap_or_default().contains("text/html"), "{:?}", c.reason);
    }
}

/// Streams that end without `data: [DONE]` (a proxy that drops the terminator): error cells,
/// complete file, the distinct exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_without_done_give_the_distinct_exit_code() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        stream: StreamScript { done: false, ..StreamScript::default() },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1", "--prefill-contexts", "none", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "16"]].concat()).await;
    assert_eq!(code, Some(EXIT_CELL_ERRORS), "{err}");
    let r = read(&out);
    assert_eq!(r.run.status, RunStatus::Complete);
    assert_eq!(r.decode[0].status, CellStatus::Error);
    assert!(r.decode[0].reason.as_deref().unwrap_or_default().contains("[DONE]"), "{:?}", r.decode[0].reason);
}

/// Usage on every chunk is asked of every engine, the plain OpenAI one too: servers that do not
/// know `continuous_usage_stats` ignore it, and those that do count multi-token chunks right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_engine_asks_for_usage_on_every_chunk() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script::default()).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1", "--prefill-contexts", "256", "--duration", "1s"];
    let (code, err) =
        collect(&server.url, &out, &[&args[..], &["--max-tokens", "32", "--engine", "openai"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let bodies = server.bodies();
    assert!(!bodies.is_empty());
    for b in &bodies {
        assert_eq!(b["stream_options"]["include_usage"], true, "{b}");
        assert_eq!(b["stream_options"]["continuous_usage_stats"], true, "{b}");
    }
    let r = read(&out);
    assert_eq!(r.decode[0].token_count_source, Some(TokenCountSource::ContinuousUsage));
}

/// No queue, streams that end often (short answers): each replacement's own start (its TTFT) is
/// no queue, so the cells are valid — at one stream and at four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_streams_on_a_server_without_a_queue_are_valid() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        stream: StreamScript { prefill: Duration::from_millis(60), ..StreamScript::default() },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1,4", "--prefill-contexts", "256", "--duration", "2s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "16"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    for c in &r.decode {
        assert_eq!(c.status, CellStatus::Valid, "{} streams: {:?}", c.concurrency, c.reason);
        assert!(c.completed_requests.unwrap() >= 5, "streams ended often: {:?}", c.completed_requests);
        assert!(c.ttft_in_window_ms.is_some_and(|d| d.count.unwrap() > 0), "replacements started in the window");
    }
}

/// A server without gauges that runs only 2 of 4 streams at once: the other two wait for a
/// free place before their first token. The client sees the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_runs_k_of_n_without_gauges_is_requests_queued() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script { max_running: Some(2), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "2,4", "--prefill-contexts", "256", "--duration", "4s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "300"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    assert_eq!(r.decode[0].status, CellStatus::Valid, "2 of 2 run at once: {:?}", r.decode[0].reason);
    let four = &r.decode[1];
    assert_eq!(four.status, CellStatus::RequestsQueued, "{:?}", four.reason);
    assert!(four.reason.as_deref().unwrap().contains("of 4 streams were running (client view"), "{:?}", four.reason);
}

/// vLLM's running gauge counts a request only once the engine admits it: with short outputs a
/// good share of every request is spent in the front end (here 250 ms of tokenizing before a
/// ~13 ms stream), so the gauge reads well below N while the engine's queue reads 0 and every
/// stream starts at once. That is no queue: the cells are valid. (With 90 ms before a 25 ms
/// stream of five timer waits, a CI machine loaded by the real-vLLM test stretched each wait
/// enough that the gauge read 3.4 of 4: the shape was gone, not the rule broken. At 30 ms the
/// gauge read running in about half the 2-Hz samples.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_gauge_below_n_with_the_queue_gauge_at_0_is_no_queue() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        live_gauges: true,
        admit_delay: Duration::from_millis(250),
        stream: StreamScript {
            prefill: Duration::from_millis(5),
            gap: Duration::from_millis(2),
            ..StreamScript::default()
        },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1,4", "--prefill-contexts", "none", "--duration", "3s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "5"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    for c in &read(&out).decode {
        let running = c.server.as_ref().and_then(|s| s.running_avg).expect("the live gauge was read");
        let n = f64::from(c.concurrency);
        assert!(running < 0.8 * n, "the shape: the gauge leaves out the front end ({running} of {n})");
        assert_eq!((c.status, c.reason.as_deref()), (CellStatus::Valid, None), "{} streams", c.concurrency);
    }
}

/// The other side of that rule: a gateway in front of the engine runs 2 of 4 streams and holds
/// the rest, so the engine's gauges read running 2, waiting 0. The client sees the queue (the
/// held streams wait long for their first token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_in_front_of_the_engine_is_requests_queued_though_its_queue_gauge_reads_0() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script { live_gauges: true, max_running: Some(2), ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "4", "--prefill-contexts", "256", "--duration", "4s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "300"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let c = &read(&out).decode[0];
    assert_eq!(c.server.as_ref().and_then(|s| s.waiting_max), Some(0.0), "the engine's queue gauge read 0");
    assert_eq!(c.status, CellStatus::RequestsQueued, "{:?}", c.reason);
    assert!(c.reason.as_deref().unwrap().contains("of 4 streams were running (client view"), "{:?}", c.reason);
}

/// A server that answers every request with an empty stream (finish_reason, usage 0, [DONE]):
/// nothing was measured, so the cell is an error, not a queue at 0 tok/s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_streams_are_errors_not_a_queue() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        stream: StreamScript { empty: true, ..StreamScript::default() },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "2", "--prefill-contexts", "none", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &args).await;
    assert_eq!(code, Some(EXIT_CELL_ERRORS), "{err}");
    let r = read(&out);
    let c = &r.decode[0];
    assert_eq!(c.status, CellStatus::Error, "{:?}", c.reason);
    assert!(c.reason.as_deref().unwrap().contains("finished without a token"), "{:?}", c.reason);
    assert!(c.total_tps.is_none());
}

/// Contexts that do not fit the server's `max_model_len` are in the results file as not run,
/// with the reason, and `show` lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_that_do_not_fit_stay_in_the_file_as_not_run() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script { max_model_len: 4096, ..Script::default() }).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "1k,8k", "--concurrency", "1", "--prefill-contexts", "1k,16k", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "64"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    let not_run: Vec<(PlanPhase, &str, Option<u64>)> =
        r.config.not_run_contexts.iter().map(|n| (n.phase, n.label.as_str(), n.tokens)).collect();
    assert_eq!(not_run, [(PlanPhase::Decode, "8K", Some(8192)), (PlanPhase::Prefill, "16K", Some(16384))]);
    assert!(r.config.not_run_contexts.iter().all(|n| n.reason.contains("max_model_len 4096")), "{:?}", r.config);
    let shown = std::process::Command::new(support::BIN).arg("show").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("Contexts not run") && text.contains("decode context 8K"), "{text}");
    assert!(text.contains("prefill context 16K"), "{text}");
    if let Some(dom) = support::dom::rendered_dom(&out) {
        assert!(dom.contains("Contexts not run") && dom.contains("decode context 8K"), "the page lists them too");
    }
}

/// A prefill row the server served from its prefix cache (a proxy's cache, a server that
/// caches across runs) says so: `cached_tokens` from the usage details, a warning on the row,
/// in `show` and on the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefill_row_served_from_cache_says_so() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        stream: StreamScript { cached_tokens: Some(1000), ..StreamScript::default() },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "1k", "--concurrency", "1", "--prefill-contexts", "1k", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "32"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: prefill 1K: served from cache"), "{err}");
    let r = read(&out);
    let row = &r.prefill[0];
    assert_eq!(row.status, CellStatus::Valid);
    assert_eq!((row.cached_tokens, row.cached_tokens_source), (Some(1000), Some(CachedTokensSource::Usage)));
    assert!(row.reason.as_deref().unwrap().starts_with("served from cache: 1,000 of 1,024 prompt tokens"), "{row:?}");
    let shown = std::process::Command::new(support::BIN).arg("show").arg(&out).output().unwrap();
    assert!(String::from_utf8_lossy(&shown.stdout).contains("⚠ served from cache"));
    if let Some(dom) = support::dom::rendered_dom(&out) {
        assert!(dom.contains("served from cache"), "the page says so too");
    }
}

/// A server that gets not all streams decoding within the readiness limit: the cell records
/// how readiness ended and says why it is queued, instead of passing as valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readiness_timeout_is_recorded_on_the_cell() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // One place; the second stream waits behind keep-alives (alive, never stalled).
    let server = scripted::start(Script {
        max_running: Some(1),
        stream: StreamScript { keepalive_every: Some(Duration::from_millis(200)), ..StreamScript::default() },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "2", "--prefill-contexts", "256", "--duration", "1s"];
    let (code, err) =
        collect(&server.url, &out, &[&args[..], &["--max-tokens", "600", "--stall-timeout", "2s"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(raw["decode"][0]["readiness"]["outcome"], "timed_out", "{}", raw["decode"][0]);
    assert_eq!(raw["decode"][0]["readiness"]["streams_producing"], 1);
    let c = &read(&out).decode[0];
    assert_eq!(c.status, CellStatus::RequestsQueued, "{:?}", c.reason);
    assert!(c.reason.as_deref().unwrap().contains("readiness timed out"), "{:?}", c.reason);
}

/// A `/metrics` that takes 700 ms to answer: scrapes run on their own, so replacement streams
/// still start as soon as one ends and the window closes at its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_metrics_endpoint_delays_neither_replacements_nor_the_close() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let gauges = "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n";
    let server = scripted::start(Script {
        metrics: Some(gauges.into()),
        metrics_delay: Duration::from_millis(700),
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1", "--prefill-contexts", "none", "--duration", "3s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "16"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let cell = &raw["decode"][0];
    let late = cell["window_end_ms"].as_f64().expect("the close instant is recorded")
        - cell["window_start_ms"].as_f64().unwrap()
        - 3000.0;
    assert!((0.0..25.0).contains(&late), "the window closed {late:.1} ms after its deadline");
    // Each replacement was sent right after the stream before it ended ([DONE] follows the
    // last token within a millisecond here).
    let requests = read(&out).decode[0].requests.clone();
    let ends: Vec<f64> = requests.iter().filter_map(|q| q.e2e_ms.map(|e| q.start_ms + e)).collect();
    let mut worst: f64 = 0.0;
    for q in requests.iter().filter(|q| q.opening == Some(false)) {
        let before = ends.iter().copied().filter(|e| *e <= q.start_ms).fold(f64::MIN, f64::max);
        worst = worst.max(q.start_ms - before);
    }
    assert!(requests.len() > 10, "streams ended and were replaced: {}", requests.len());
    assert!(worst < 50.0, "a replacement started {worst:.1} ms after the stream it replaced ended");
}

/// A plain OpenAI-compatible server with no `/tokenize` and no usage in its streams (usage only
/// in non-streamed answers, which size the prompts): the prefill row's prompt length is not
/// known, so its prompt tok/s is null and the row says why — never a guess from the estimate;
/// the decode cell is counted from chunks and marked so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefill_row_without_a_prompt_count_says_why_its_rate_is_null() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        no_tokenize: true,
        stream: StreamScript { per_chunk_usage: false, final_usage: false, ..StreamScript::default() },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "1k", "--concurrency", "1", "--prefill-contexts", "1k", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "32"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let r = read(&out);
    let row = &r.prefill[0];
    assert_eq!(row.status, CellStatus::Valid, "{:?}", row.reason);
    assert!(row.ttft_ms.is_some(), "TTFT is the client's clock: {row:?}");
    assert_eq!((row.prompt_tokens, row.prompt_tps), (None, None), "no count, no rate: {row:?}");
    let why = row.reason.as_deref().unwrap_or_default();
    assert!(why.contains("prompt tok/s unknown") && why.contains("/tokenize"), "{row:?}");
    assert_eq!(r.decode[0].token_count_source, Some(TokenCountSource::ChunkCount), "{:?}", r.decode[0]);
}

/// A proxy in front of a stuck engine: 5 tokens, then nothing but `: ping` comments. Keep-alives
/// keep a stream alive before its first token (a long prefill), not once tokens flow: the cell
/// is an error that says no token came for the stall timeout, not a valid cell at a trickle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_comments_after_the_first_tokens_do_not_hide_a_stuck_stream() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        stream: StreamScript { pings_after: Some(5), ..StreamScript::default() },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1", "--prefill-contexts", "none", "--duration", "3s"];
    let (code, err) =
        collect(&server.url, &out, &[&args[..], &["--max-tokens", "64", "--stall-timeout", "1s"]].concat()).await;
    assert_eq!(code, Some(EXIT_CELL_ERRORS), "{err}");
    let c = &read(&out).decode[0];
    assert_eq!(c.status, CellStatus::Error, "{:?}", c.reason);
    assert!(c.reason.as_deref().unwrap_or("").contains("no token for 1s"), "{:?}", c.reason);
}

/// A server that ignores `ignore_eos` (a hosted API, a proxy): every request ends after 4 of
/// the 32 asked tokens with `finish_reason: "stop"`. The cell is measured as what it is, and its
/// reason says the figures are not sustained decode and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_ignore_eos_is_named_in_the_cells_reason() {
    let _one = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = scripted::start(Script {
        stream: StreamScript { stop_after: Some(4), ..StreamScript::default() },
        ..Script::default()
    })
    .await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "2", "--prefill-contexts", "none", "--duration", "1s"];
    let (code, err) = collect(&server.url, &out, &[&args[..], &["--max-tokens", "32"]].concat()).await;
    assert_eq!(code, Some(0), "{err}");
    let c = &read(&out).decode[0];
    assert!(c.status.is_measured(), "{:?}", c.reason);
    let reason = c.reason.as_deref().unwrap_or("");
    assert!(reason.contains("stopped before max_tokens (32)"), "{reason}");
    assert!(reason.contains("after 4 tokens (median)"), "{reason}");
    assert!(reason.contains("does not honour ignore_eos"), "{reason}");
}
