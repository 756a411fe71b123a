//! `speedmatrix run` against servers unlike the twin — each a scripted server on a loopback
//! socket (`support::scripted`): keep-alive comments during a long prefill, `/metrics` written
//! by other exporters, an HTML chat endpoint, streams that carry no token. The figures must
//! match what the server really sent; each test is named after the shape it guards.

mod support;

use speedmatrix_schema::{CellStatus, KvBudgetSource, RunStatus};
use std::time::Duration;
use support::collect::{collect, read};
use support::scripted::{self, Answer, Script, StreamScript};

/// These run the collector in real time: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The exit code of a complete run in which some cells are errors (README, "Exit codes").
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
        assert_eq!(r.engine.name, "vllm", "{name}: detected from the metric names");
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
