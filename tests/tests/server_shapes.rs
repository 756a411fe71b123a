//! `speedmatrix run` against servers unlike the twin — each a scripted server on a loopback
//! socket (`support::scripted`): keep-alive comments during a long prefill, `/metrics` written
//! by other exporters, an HTML chat endpoint, streams without `[DONE]` or without any token, a
//! server that queues with no gauge to say so, a context limit below the asked contexts,
//! usage that reports cached prompt tokens. The figures must match what the server really
//! sent.
//!
//! The suite is a table: each row (a function in [`table`]) is one server shape — its script,
//! the collector's flags, the rule it guards and the verdict expected (`support::shape::Shape`)
//! — and [`shapes!`] gives every row a test of its own name, which `support::shape::run` runs
//! (start → collect → read → check). To add a shape, write its row in [`table`] and add its name
//! to the list in [`shapes!`].
//!
//! Timing. The rows run the collector in real time, side by side and beside whatever else the
//! machine runs, so no verdict may hang on how soon a busy CPU wakes a timer: every row whose
//! verdict depends on time says under "Load:" which pause would change it — 0.75 s or more,
//! 2.4 s for the stall timeouts — or why none can. One rule cannot be shielded that way: the
//! client view of the queue counts the collector's own turnaround between a stream's end and
//! its replacement's send as not running, so the row whose streams must end often holds while
//! turnarounds average under 5 % of a stream. On a 2-core machine with both cores hogged and
//! other suites running, the worst seen: a close 340 ms late, a stream silent for 2 s, a
//! turnaround of 125 ms (780 ms once, with all rows at once in one `cargo test` process).

use support::shape::run;

/// The exit code of a complete run in which some cells are errors (docs/CLI.md, "Exit codes").
const EXIT_CELL_ERRORS: i32 = 3;

/// One test per row of [`table`], named after it: nextest lists and runs each shape on its own.
/// No lock holds them one at a time (plain `cargo test` runs them side by side too): their
/// verdicts do not depend on having the machine to themselves (see "Timing" above).
macro_rules! shapes {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            run(stringify!($name), table::$name()).await;
        }
    )*};
}

shapes! {
    a_server_that_slows_down_mid_cell_is_saturated_at_a_rate_it_kept_up_with_before,
    keepalive_comments_during_a_long_prefill_are_not_a_stall,
    prometheus_text_as_specified_gives_the_kv_budget_untyped,
    prometheus_text_as_specified_gives_the_kv_budget_with_timestamps,
    prometheus_text_as_specified_gives_the_kv_budget_openmetrics,
    unparsable_metrics_are_reported_with_the_parsers_reason,
    an_html_chat_endpoint_gives_error_cells_and_a_distinct_exit_code,
    streams_without_done_give_the_distinct_exit_code,
    every_engine_asks_for_usage_on_every_chunk,
    short_streams_on_a_server_without_a_queue_are_valid,
    a_server_that_runs_k_of_n_without_gauges_is_requests_queued,
    a_running_gauge_below_n_with_the_queue_gauge_at_0_is_no_queue,
    a_queue_in_front_of_the_engine_is_requests_queued_though_its_queue_gauge_reads_0,
    empty_streams_are_errors_not_a_queue,
    contexts_that_do_not_fit_stay_in_the_file_as_not_run,
    a_prefill_row_served_from_cache_says_so,
    a_readiness_timeout_is_recorded_on_the_cell,
    a_slow_metrics_endpoint_delays_neither_replacements_nor_the_close,
    a_prefill_row_without_a_prompt_count_says_why_its_rate_is_null,
    keepalive_comments_after_the_first_tokens_do_not_hide_a_stuck_stream,
    a_server_that_ignores_ignore_eos_is_named_in_the_cells_reason,
    requests_the_server_aborts_are_no_completed_requests,
    requests_that_end_with_finish_reason_error_are_no_completed_requests,
    a_server_that_ends_requests_before_max_tokens_with_length_is_named,
    a_server_that_runs_past_max_tokens_is_named_and_counted_for_capacity,
    a_metrics_endpoint_that_never_answers_holds_nothing,
    a_gzip_encoded_event_stream_is_decoded,
    an_error_object_with_http_200_keeps_the_servers_message,
    the_openai_engine_does_not_read_metrics,
    the_model_chosen_among_several_is_named,
    a_prompt_length_off_its_target_is_written_into_the_file,
    final_usage_stuck_at_1_gives_way_to_the_token_counter,
    usage_stuck_at_1_on_every_chunk_gives_way_to_the_token_counter,
    usage_stuck_at_1_without_a_counter_is_no_valid_figure,
    per_chunk_usage_holding_each_chunks_own_count_gives_way_to_the_final_usage,
    speculative_chunks_with_final_usage_only_have_no_itl_percentiles,
    speculative_chunks_with_only_a_token_counter_have_no_itl_percentiles,
    a_server_restarted_mid_cell_gives_no_hit_rate_and_no_acceptance,
    a_hit_rate_two_sources_disagree_on_names_both,
    a_proxy_refusing_id_slot_gets_warm_ups_without_it_and_the_cell_says_so,
    a_reset_answering_success_false_is_no_reset_and_the_cell_is_salted,
    a_llamacpp_slot_erase_answering_501_salts_the_cell_and_names_the_flag,
    warm_connections_open_in_batches_one_per_stream,
    a_warm_connection_the_server_closed_is_replaced_not_failed,
    idle_connections_the_server_resets_are_never_written_to,
    a_server_that_closes_every_decode_request_unanswered_gives_error_cells_that_say_so,
    a_server_that_closes_each_connections_first_decode_request_gives_error_cells_that_say_so,
    a_keep_alive_close_crossing_a_request_on_a_warm_connection_is_sent_again_on_a_new_one,
    an_http_1_0_proxy_closing_every_stream_is_read_to_its_close,
    a_proxy_answering_connection_close_every_time_gets_a_new_connection_per_stream,
    a_hung_metrics_with_a_prefix_share_cell_keeps_the_estimate_and_says_why_no_hit_rate,
    streams_whose_usage_counts_0_prompt_tokens_get_the_tokenize_count,
    streams_whose_usage_counts_0_prompt_tokens_without_tokenize_leave_the_count_null_saying_so,
}

/// A server that counts no prompt tokens — no `/tokenize`, no `usage` in a non-streamed answer
/// (a proxy that strips it): no prompt can be cut to a planned length, so the run stops before
/// measuring (exit 2, docs/CLI.md "Exit codes"), naming what the server would need. Not a row
/// of [`table`]: a row's verdict reads a results file, and this run measures nothing to write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_counts_no_prompt_tokens_is_refused_saying_what_it_needs() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let script = support::scripted::Script { no_tokenize: true, no_probe_usage: true, ..Default::default() };
    let server = support::scripted::start(script).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1", "--prefill-contexts", "none", "--duration", "1s"];
    let (code, stderr) = support::collect::collect(&server.url, &out, &args).await;
    assert_eq!(code, Some(2), "{stderr}");
    for words in ["usage.prompt_tokens", "/tokenize", "send `usage` in non-streamed answers"] {
        assert!(stderr.contains(words), "the error names {words:?}: {stderr}");
    }
    let streamed = server.bodies().iter().filter(|b| b["stream"].as_bool() == Some(true)).count();
    assert_eq!(streamed, 0, "nothing is measured with prompts of unknown length");
}

/// A server that counts every prompt as 0 tokens — no `/tokenize`, `usage.prompt_tokens: 0` in
/// its non-streamed answers (a proxy that fills `usage` with zeros): 0 for a non-empty prompt is
/// no count. Calibrating on it (0 tokens for 50 words and for 400, so the floor of 1 token per
/// 350 words) built prompts hundreds of times too long, whose cells then failed on the context
/// limit without naming the cause; now the run stops as above, saying the server reported 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_counts_every_prompt_as_0_tokens_is_refused_saying_so() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let script = support::scripted::Script {
        no_tokenize: true,
        zero_probe_usage: true,
        zero_stream_usage: true,
        context_limit: Some(4096),
        ..Default::default()
    };
    let server = support::scripted::start(script).await;
    let out = dir.path().join("run.json");
    let args = ["--contexts", "256", "--concurrency", "1", "--prefill-contexts", "none", "--duration", "1s"];
    let (code, stderr) = support::collect::collect(&server.url, &out, &args).await;
    assert_eq!(code, Some(2), "{stderr}");
    for words in ["reported 0 prompt tokens", "non-empty prompt", "/tokenize", "send `usage` in non-streamed answers"] {
        assert!(stderr.contains(words), "the error names {words:?}: {stderr}");
    }
    let streamed = server.bodies().iter().filter(|b| b["stream"].as_bool() == Some(true)).count();
    assert_eq!(streamed, 0, "nothing is measured with prompts of unknown length");
}

/// The shapes, one function per row.
mod table {
    use super::EXIT_CELL_ERRORS;
    use speedmatrix_schema::{CachedTokensSource, CellStatus, KvBudgetSource, PlanPhase, TokenCountSource};
    use std::time::Duration;
    use support::scripted::{Answer, Front, Script, Seen, StreamScript, UsageCount};
    use support::shape::{is, measured, valid_without_reason, with, Cell, Checks, Outcome, Reason, Shape, Status};

    /// SSE comments (`: ping`) are bytes from the server: during a prefill longer than
    /// `--stall-timeout` they keep the stream alive, as SGLang and many proxies send them.
    /// Load: a ping every 100 ms against a 2.5-s stall timeout, so a false stall needs a pause
    /// of 2.4 s; the 3-s prefill outlasts the timeout, and a busy CPU only makes it longer.
    pub fn keepalive_comments_during_a_long_prefill_are_not_a_stall() -> Shape {
        Shape {
            rule: "keep-alive comments during a prefill longer than --stall-timeout keep the stream alive",
            script: Script {
                stream: StreamScript {
                    prefill: Duration::from_millis(3000),
                    keepalive_every: Some(Duration::from_millis(100)),
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 1 --prefill-contexts 256 --duration 1s --max-tokens 400 --stall-timeout 2.5s",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured()],
            check: Some(|o, c| {
                let ttft = o.results.prefill[0].ttft_ms.unwrap();
                c.that(ttft >= 3000.0, || format!("TTFT is the prefill behind the keep-alives: {ttft}"));
                let cell = &o.results.decode[0];
                let p50 = cell.ttft_ms.as_ref().unwrap().p50.unwrap();
                c.that(p50 >= 3000.0, || format!("the decode cell's TTFT p50 is the prefill: {p50}"));
            }),
        }
    }

    /// vLLM's names in the text other exporters write: Prometheus 0.0.4 without `# TYPE`/`# HELP`
    /// (untyped samples). It gives the KV budget, so the over-capacity rule applies.
    pub fn prometheus_text_as_specified_gives_the_kv_budget_untyped() -> Shape {
        let untyped = "vllm:num_requests_running{model_name=\"scripted\"} 0\n\
                       vllm:num_requests_waiting{model_name=\"scripted\"} 0\n\
                       vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"256\",engine=\"0\"} 1\n\
                       vllm:generation_tokens_total{model_name=\"scripted\"} 12\n";
        prometheus(untyped, "text/plain; version=0.0.4")
    }

    /// The same names with timestamps after the values (Prometheus 0.0.4, `# HELP` only).
    pub fn prometheus_text_as_specified_gives_the_kv_budget_with_timestamps() -> Shape {
        let timestamps = "# HELP vllm:num_requests_running Running.\n\
                          vllm:num_requests_running{model_name=\"scripted\"} 0 1700000000000\n\
                          vllm:num_requests_waiting{model_name=\"scripted\"} 0 1700000000000\n\
                          vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"256\"} 1.0 1700000000000\n";
        prometheus(timestamps, "text/plain; version=0.0.4")
    }

    /// The same names as OpenMetrics: `_total` under a `counter` family, `_created`, `# EOF`.
    pub fn prometheus_text_as_specified_gives_the_kv_budget_openmetrics() -> Shape {
        let openmetrics = "# TYPE vllm:num_requests_running gauge\n\
                           vllm:num_requests_running{model_name=\"scripted\"} 0.0\n\
                           # TYPE vllm:generation_tokens counter\n\
                           # HELP vllm:generation_tokens Generation tokens.\n\
                           vllm:generation_tokens_total{model_name=\"scripted\"} 12.0\n\
                           vllm:generation_tokens_created{model_name=\"scripted\"} 1.7e9\n\
                           # TYPE vllm:cache_config_info gauge\n\
                           vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"256\"} 1.0\n\
                           # EOF\n";
        prometheus(openmetrics, "application/openmetrics-text; version=1.0.0; charset=utf-8")
    }

    /// A server whose `/metrics` answers `text` as `content_type`: vLLM detected, the KV budget
    /// of 256 blocks of 16 read, and the 32-stream cell over capacity (32 × (256 + 64) = 10,240 >
    /// 4,096).
    fn prometheus(text: &str, content_type: &'static str) -> Shape {
        Shape {
            rule: "vLLM's metrics in any exporter's text give the engine and the KV budget",
            script: Script { metrics: Some(text.into()), metrics_content_type: content_type, ..Script::default() },
            args: "--contexts 256 --concurrency 1,32 --prefill-contexts none --duration 1s --max-tokens 64",
            exit: 0,
            prefill: vec![],
            decode: vec![measured(), is(CellStatus::OverCapacity)],
            check: Some(|o, c| {
                let r = &o.results;
                c.eq("engine (detected from the metric names)", r.engine.name.as_deref(), Some("vllm"));
                c.eq(
                    "KV budget",
                    (r.engine.kv_budget_tokens, r.engine.kv_budget_source),
                    (Some(4096), Some(KvBudgetSource::NumGpuBlocks)),
                );
                c.that(!r.missing.iter().any(|m| m.figure == "kv_budget"), || format!("missing: {:?}", r.missing));
                c.that(r.decode[0].server.is_some(), || "the window's scrapes were read".into());
            }),
        }
    }

    /// When `/metrics` really is not Prometheus text, `missing` says so with the parser's reason
    /// instead of claiming the server lacks a metric.
    pub fn unparsable_metrics_are_reported_with_the_parsers_reason() -> Shape {
        let broken =
            "vllm:num_requests_running{model_name=\"scripted\"} 0\nvllm:cache_config_info{block_size=\"16\" 1\n";
        Shape {
            rule: "an unparsable /metrics is reported in missing with the parser's reason and line",
            script: Script { metrics: Some(broken.into()), ..Script::default() },
            args: "--contexts 256 --concurrency 1 --prefill-contexts none --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                let Some(kv) = o.results.missing.iter().find(|m| m.figure == "kv_budget") else {
                    return c.that(false, || format!("the KV budget is not in missing: {:?}", o.results.missing));
                };
                c.that(kv.reason.contains("could not be parsed"), || format!("{kv:?}"));
                c.that(kv.reason.contains("line 2"), || format!("the parser's reason names the place: {kv:?}"));
                c.that(!kv.reason.contains("has no vllm:cache_config_info"), || format!("{kv:?}"));
            }),
        }
    }

    /// A proxy whose chat endpoint answers an HTML page with HTTP 200: every cell is an error;
    /// the file is complete and the exit code says that cells failed.
    pub fn an_html_chat_endpoint_gives_error_cells_and_a_distinct_exit_code() -> Shape {
        Shape {
            rule: "an HTML answer with HTTP 200 is an error in every cell, exit 3, the file complete",
            script: Script { answer: Answer::Html, ..Script::default() },
            args: "--contexts 256 --concurrency 1,2 --prefill-contexts 256 --duration 1s",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![is(CellStatus::Error)],
            decode: vec![with(CellStatus::Error, &["text/html"]), with(CellStatus::Error, &["text/html"])],
            check: None,
        }
    }

    /// Streams that end without `data: [DONE]` (a proxy that drops the terminator): error
    /// cells, complete file, the distinct exit code.
    pub fn streams_without_done_give_the_distinct_exit_code() -> Shape {
        Shape {
            rule: "a stream that ends without [DONE] is an error, exit 3, the file complete",
            script: Script { stream: StreamScript { done: false, ..StreamScript::default() }, ..Script::default() },
            args: "--contexts 256 --concurrency 1 --prefill-contexts none --duration 1s --max-tokens 16",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![],
            decode: vec![with(CellStatus::Error, &["[DONE]"])],
            check: None,
        }
    }

    /// Usage on every chunk is asked of every engine, the plain OpenAI one too: servers that do
    /// not know `continuous_usage_stats` ignore it, and those that do count multi-token chunks
    /// right.
    pub fn every_engine_asks_for_usage_on_every_chunk() -> Shape {
        Shape {
            rule: "every request asks include_usage and continuous_usage_stats, whatever the engine",
            script: Script::default(),
            args: "--contexts 256 --concurrency 1 --prefill-contexts 256 --duration 1s --max-tokens 32 --engine openai",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured()],
            check: Some(|o, c| {
                c.that(!o.bodies.is_empty(), || "the server received requests".into());
                for b in &o.bodies {
                    c.eq("include_usage", &b["stream_options"]["include_usage"], &serde_json::json!(true));
                    c.eq(
                        "continuous_usage_stats",
                        &b["stream_options"]["continuous_usage_stats"],
                        &serde_json::json!(true),
                    );
                }
                c.eq(
                    "token count source",
                    o.results.decode[0].token_count_source,
                    Some(TokenCountSource::ContinuousUsage),
                );
            }),
        }
    }

    /// No queue, streams that end often (short answers): each replacement's own start (its
    /// TTFT) is no queue, so the cells are valid — at one stream and at four.
    /// Load: one timer wait per stream (a 400-ms prefill, then the 16 tokens in one chunk), so a
    /// busy CPU stretches a stream by one late wake-up: the 3-s window holds 5 completions unless
    /// streams take 600 ms on average, and a replacement's TTFT counts as queued only past the
    /// 1.2-s start allowance (3 × the cold TTFT). The rule counts the collector's own turnaround
    /// (a stream's end → its replacement's send) as not running, and these streams must end
    /// often: the cells stay valid while turnarounds average under 20 ms (5 % of a stream). On a
    /// 2-core machine with both cores hogged: ≤ 3 ms a turnaround with nextest's 6 tests at once;
    /// with all 20 rows at once in one process (`cargo test -- --test-threads 20`) 14 ms, and
    /// once a single stall of 780 ms that no window this short absorbs.
    pub fn short_streams_on_a_server_without_a_queue_are_valid() -> Shape {
        Shape {
            rule: "a replacement stream's own start (its TTFT) is no queue",
            script: Script {
                stream: StreamScript {
                    prefill: Duration::from_millis(400),
                    tokens_per_chunk: vec![16],
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 1,4 --prefill-contexts 256 --duration 3s --max-tokens 16",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![is(CellStatus::Valid), is(CellStatus::Valid)],
            check: Some(|o, c| {
                for cell in &o.results.decode {
                    let n = cell.concurrency;
                    let done = cell.completed_requests.unwrap_or(0);
                    c.that(done >= 5, || format!("{n} streams: streams ended often: {done} completed"));
                    let started = cell.ttft_in_window_ms.as_ref().and_then(|d| d.count).unwrap_or(0);
                    c.that(started > 0, || format!("{n} streams: replacements started in the window"));
                }
            }),
        }
    }

    /// A server without gauges that runs only 2 of 4 streams at once: the other two wait for a
    /// free place before their first token. The client sees the queue.
    /// Load: a stream lasts 3 s (300 tokens), longer than the 2.5-s window, and a busy CPU only
    /// makes it longer: no stream of the 2-stream cell ends inside its window (no turnaround to
    /// count). In the 4-stream cell the two held streams wait through the whole window, queued
    /// from the start allowance on (1 s, or 3 × the cold TTFT): the cell reads 2.8 of 4, and
    /// would reach 3.8 only if the cold TTFT (~20 ms) were stretched past 750 ms.
    pub fn a_server_that_runs_k_of_n_without_gauges_is_requests_queued() -> Shape {
        Shape {
            rule: "streams waiting for a place before their first token are a queue (client view)",
            script: Script { max_running: Some(2), ..Script::default() },
            args: "--contexts 256 --concurrency 2,4 --prefill-contexts 256 --duration 2.5s --max-tokens 300",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![
                is(CellStatus::Valid),
                with(CellStatus::RequestsQueued, &["of 4 streams were running (client view"]),
            ],
            check: None,
        }
    }

    /// vLLM's running gauge counts a request only while its engine runs it: a request in the
    /// front end — tokenized before the engine admits it, or streamed out after the engine is
    /// done with it — is not counted. Here each stream spends 300 ms in the front end, is in the
    /// engine for its first token only, and the front end streams the other 29 over 2.9 s: the
    /// gauge reads well below N while the engine's queue reads 0 and every stream runs all
    /// along. That is no queue: the cells are valid.
    /// Load: this row failed on loaded machines while its streams were short (90 ms, then 250 ms
    /// of front end before ~13 ms in the engine): timer waits stretched until the gauge read 3.4
    /// of 4, and the collector's turnaround between streams — not running in the client view —
    /// passed 5 % of the window (0.9 of 1, 2.7 of 4). Now the streams outlast the 2-s window, and
    /// a busy CPU only makes them longer: no stream ends or starts inside it, so neither a late
    /// first token nor a slow turnaround can be in it; the gauge leaves a stream as its first
    /// chunk is written, so it reads 0.8 × N only if 4 in 5 scrapes catch that instant.
    pub fn a_running_gauge_below_n_with_the_queue_gauge_at_0_is_no_queue() -> Shape {
        Shape {
            rule: "a running gauge below N with the queue gauge at 0 in every scrape is no queue",
            script: Script {
                live_gauges: true,
                admit_delay: Duration::from_millis(300),
                engine_tokens: Some(1),
                stream: StreamScript {
                    prefill: Duration::ZERO,
                    gap: Duration::from_millis(100),
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 1,4 --prefill-contexts none --duration 2s --max-tokens 30",
            exit: 0,
            prefill: vec![],
            decode: vec![valid_without_reason(), valid_without_reason()],
            check: Some(|o, c| {
                for cell in &o.results.decode {
                    let n = f64::from(cell.concurrency);
                    let Some(running) = cell.server.as_ref().and_then(|s| s.running_avg) else {
                        c.that(false, || format!("{n} streams: the live gauge was not read"));
                        continue;
                    };
                    c.that(running < 0.8 * n, || {
                        format!("the shape: the gauge leaves out the front end ({running} of {n})")
                    });
                }
            }),
        }
    }

    /// The other side of that rule: a gateway in front of the engine runs 2 of 4 streams and
    /// holds the rest, so the engine's gauges read running 2, waiting 0. The client sees the
    /// queue (the held streams wait long for their first token).
    /// Load: as in the 4-stream cell of `a_server_that_runs_k_of_n_without_gauges…`: the held
    /// streams wait through the whole 2.5-s window; the cold TTFT would have to pass 750 ms.
    pub fn a_queue_in_front_of_the_engine_is_requests_queued_though_its_queue_gauge_reads_0() -> Shape {
        Shape {
            rule: "a queue in front of the engine is a queue though the engine's queue gauge reads 0",
            script: Script { live_gauges: true, max_running: Some(2), ..Script::default() },
            args: "--contexts 256 --concurrency 4 --prefill-contexts 256 --duration 2.5s --max-tokens 300",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![with(CellStatus::RequestsQueued, &["of 4 streams were running (client view"])],
            check: Some(|o, c| {
                let waiting = o.results.decode[0].server.as_ref().and_then(|s| s.waiting_max);
                c.eq("the engine's queue gauge (max)", waiting, Some(0.0));
            }),
        }
    }

    /// A server that answers every request with an empty stream (finish_reason, usage 0,
    /// [DONE]): nothing was measured, so the cell is an error, not a queue at 0 tok/s.
    pub fn empty_streams_are_errors_not_a_queue() -> Shape {
        Shape {
            rule: "streams that finish without a token are an error, not a queue at 0 tok/s",
            script: Script { stream: StreamScript { empty: true, ..StreamScript::default() }, ..Script::default() },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 1s",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![],
            decode: vec![with(CellStatus::Error, &["finished without a token"])],
            check: Some(|o, c| {
                let tps = o.results.decode[0].total_tps;
                c.eq("total tok/s", tps, None);
            }),
        }
    }

    /// Contexts that do not fit the server's `max_model_len` are in the results file as not
    /// run, with the reason, and `show` lists them.
    pub fn contexts_that_do_not_fit_stay_in_the_file_as_not_run() -> Shape {
        Shape {
            rule: "contexts over max_model_len stay in the file as not run, with the reason, and show lists them",
            script: Script { max_model_len: 4096, ..Script::default() },
            args: "--contexts 1k,8k --concurrency 1 --prefill-contexts 1k,16k --duration 1s --max-tokens 64",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured()],
            check: Some(|o, c| {
                let r = &o.results;
                let not_run: Vec<(PlanPhase, &str, Option<u64>)> =
                    r.config.not_run_contexts.iter().map(|n| (n.phase, n.label.as_str(), n.tokens)).collect();
                let want = [(PlanPhase::Decode, "8K", Some(8192)), (PlanPhase::Prefill, "16K", Some(16384))];
                c.eq("contexts not run", not_run.as_slice(), want.as_slice());
                let why = r.config.not_run_contexts.iter().all(|n| n.reason.contains("max_model_len 4096"));
                c.that(why, || format!("each says why: {:?}", r.config.not_run_contexts));
                let text = show(o);
                c.that(text.contains("Contexts not run") && text.contains("decode context 8K"), || text.clone());
                c.that(text.contains("prefill context 16K"), || text.clone());
                if let Some(dom) = support::dom::rendered_dom(&o.out) {
                    let listed = dom.contains("Contexts not run") && dom.contains("decode context 8K");
                    c.that(listed, || "the page lists them too".into());
                }
            }),
        }
    }

    /// A prefill row the server served from its prefix cache (a proxy's cache, a server that
    /// caches across runs) says so: `cached_tokens` from the usage details, a warning on the
    /// row, in `show` and on the page.
    pub fn a_prefill_row_served_from_cache_says_so() -> Shape {
        Shape {
            rule: "a prefill row served from the prefix cache says so (file, warning, show, page)",
            script: Script {
                stream: StreamScript { cached_tokens: Some(1000), ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 1k --concurrency 1 --prefill-contexts 1k --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![Cell {
                status: Status::Is(CellStatus::Valid),
                reason: Reason::StartsWith("served from cache: 1,000 of 1,024 prompt tokens"),
            }],
            decode: vec![measured()],
            check: Some(|o, c| {
                let warned = o.stderr.contains("warning: prefill 1K: served from cache");
                c.that(warned, || "stderr warns: warning: prefill 1K: served from cache".into());
                let row = &o.results.prefill[0];
                c.eq(
                    "cached tokens",
                    (row.cached_tokens, row.cached_tokens_source),
                    (Some(1000), Some(CachedTokensSource::Usage)),
                );
                let text = show(o);
                c.that(text.contains("⚠ served from cache"), || format!("show says so: {text}"));
                if let Some(dom) = support::dom::rendered_dom(&o.out) {
                    c.that(dom.contains("served from cache"), || "the page says so too".into());
                }
            }),
        }
    }

    /// A server that gets not all streams decoding within the readiness limit: the cell
    /// records how readiness ended and says why it is queued, instead of passing as valid.
    /// One place; the second stream waits behind keep-alives (alive, never stalled).
    /// Load: the waiting stream pings every 100 ms against the 2.5-s stall timeout (the readiness
    /// limit too), so a false stall needs a 2.4-s pause; the running stream (600 tokens, 6 s)
    /// outlasts the limit and the 1-s window by 2.5 s, and a busy CPU only makes it longer.
    pub fn a_readiness_timeout_is_recorded_on_the_cell() -> Shape {
        Shape {
            rule: "a readiness timeout is recorded on the cell and makes it requests queued",
            script: Script {
                max_running: Some(1),
                stream: StreamScript { keepalive_every: Some(Duration::from_millis(100)), ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts 256 --duration 1s --max-tokens 600 --stall-timeout 2.5s",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![with(CellStatus::RequestsQueued, &["readiness timed out"])],
            check: Some(|o, c| {
                let readiness = &o.raw["decode"][0]["readiness"];
                c.eq("readiness outcome", &readiness["outcome"], &serde_json::json!("timed_out"));
                c.eq("streams producing at the timeout", &readiness["streams_producing"], &serde_json::json!(1));
            }),
        }
    }

    /// A `/metrics` that is slow while streams run (6 s an answer; an exporter on the busy
    /// streams' event loop): scrapes run on their own, so replacement streams still start as
    /// soon as one ends and the window closes at its deadline.
    /// Load: the bounds come from the scrape, not from the CPU. The scrape sent as the streams
    /// open answers 6 s later, about 2 s after the window's close (readiness waits 2 s for a
    /// fresh reading, the window is 2 s): a collector that waited for it would close about 2 s
    /// late and start no replacement inside the window, where ~90 start (16 tokens in one
    /// chunk, ~20 ms a stream). So a close under 1 s late and replacements under 1 s after
    /// their predecessor's end pass on any machine that does not stall the collector for 1 s.
    pub fn a_slow_metrics_endpoint_delays_neither_replacements_nor_the_close() -> Shape {
        Shape {
            rule: "a slow /metrics delays neither replacement streams nor the window's close",
            script: Script {
                metrics: Some("vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n".into()),
                metrics_delay: Duration::from_secs(6),
                metrics_slow_while_streaming: true,
                stream: StreamScript { tokens_per_chunk: vec![16], ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 1 --prefill-contexts none --duration 2s --max-tokens 16",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                let cell = &o.raw["decode"][0];
                let (Some(start), Some(end)) = (cell["window_start_ms"].as_f64(), cell["window_end_ms"].as_f64())
                else {
                    return c.that(false, || format!("the window's open and close are recorded: {cell}"));
                };
                let late = end - start - 2000.0;
                c.that((0.0..1000.0).contains(&late), || format!("the window closed {late:.1} ms after its deadline"));
                // Each replacement was sent right after the stream before it ended ([DONE]
                // follows the last token within a millisecond here).
                let requests = &o.results.decode[0].requests;
                let ends: Vec<f64> = requests.iter().filter_map(|q| q.e2e_ms.map(|e| q.start_ms + e)).collect();
                let mut worst: f64 = 0.0;
                for q in requests.iter().filter(|q| q.opening == Some(false)) {
                    let before = ends.iter().copied().filter(|e| *e <= q.start_ms).fold(f64::MIN, f64::max);
                    worst = worst.max(q.start_ms - before);
                }
                c.that(requests.len() > 10, || format!("streams ended and were replaced: {}", requests.len()));
                c.that(worst < 1000.0, || {
                    format!("a replacement started {worst:.1} ms after the stream it replaced ended")
                });
            }),
        }
    }

    /// A plain OpenAI-compatible server with no `/tokenize` and no usage in its streams (usage
    /// only in non-streamed answers, which size the prompts): the prefill row's prompt length
    /// is not known, so its prompt tok/s is null and the row says why — never a guess from the
    /// estimate; the decode cell is counted from chunks and marked so.
    pub fn a_prefill_row_without_a_prompt_count_says_why_its_rate_is_null() -> Shape {
        Shape {
            rule: "a prefill row without a prompt count has no prompt tok/s and says why; a decode cell's null count is in its missing",
            script: Script {
                no_tokenize: true,
                stream: StreamScript { per_chunk_usage: false, final_usage: false, ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 1k --concurrency 1 --prefill-contexts 1k --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![with(CellStatus::Valid, &["prompt tok/s unknown", "/tokenize"])],
            decode: vec![measured()],
            check: Some(|o, c| {
                let row = &o.results.prefill[0];
                c.that(row.ttft_ms.is_some(), || format!("TTFT is the client's clock: {row:?}"));
                c.eq("prompt tokens and tok/s (no count, no rate)", (row.prompt_tokens, row.prompt_tps), (None, None));
                c.eq("token count source", o.results.decode[0].token_count_source, Some(TokenCountSource::ChunkCount));
                // The decode cell's prompt count is null too, and its `missing` says why.
                let cell = &o.results.decode[0];
                c.eq("the decode cell's prompt tokens", cell.prompt_tokens, None);
                let why = cell.missing.iter().find(|m| m.figure == "prompt_tokens");
                c.that(why.is_some_and(|m| m.reason.contains("/tokenize") && m.reason.contains("usage.prompt_tokens")), || {
                    format!("the decode cell's missing says why its prompt tokens are null: {:?}", cell.missing)
                });
            }),
        }
    }

    /// A proxy that fills the streams' usage with zeros (`usage.prompt_tokens: 0`) in front of a
    /// server with `/tokenize`: 0 for a non-empty prompt is no count, so the prefill row and the
    /// decode cell keep `/tokenize`'s count (the prompt's real length), never 0 tokens and 0
    /// prompt tok/s. Load: counts only, no time.
    pub fn streams_whose_usage_counts_0_prompt_tokens_get_the_tokenize_count() -> Shape {
        Shape {
            rule: "a stream's usage of 0 prompt tokens is no count: the prompt's /tokenize count stands",
            script: Script { zero_stream_usage: true, ..Script::default() },
            args: "--contexts 1k --concurrency 1 --prefill-contexts 1k --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured()],
            check: Some(|o, c| {
                let row = &o.results.prefill[0];
                let counted = row.prompt_tokens.is_some_and(|t| (1000..=1024).contains(&t));
                c.that(counted, || format!("the prefill row's prompt tokens are /tokenize's: {row:?}"));
                c.that(row.prompt_tps.is_some_and(|v| v > 0.0), || format!("a prompt rate, not 0: {row:?}"));
                c.eq("the decode cell's prompt tokens", o.results.decode[0].prompt_tokens, row.prompt_tokens);
                let missing = &o.results.decode[0].missing;
                c.that(!missing.iter().any(|m| m.figure == "prompt_tokens"), || format!("counted: {missing:?}"));
            }),
        }
    }

    /// The same proxy in front of a server without `/tokenize` whose non-streamed answers count
    /// (the prompts are cut by tokens per word): nothing counted the streamed prompts, so the
    /// prefill row's prompt tokens and tok/s are null and the decode cell's too, each saying the
    /// server reported 0 — not 0, and not "no usage". Load: counts only, no time.
    pub fn streams_whose_usage_counts_0_prompt_tokens_without_tokenize_leave_the_count_null_saying_so() -> Shape {
        Shape {
            rule: "a stream's usage of 0 prompt tokens without /tokenize leaves the count null, saying the server reported 0",
            script: Script { no_tokenize: true, zero_stream_usage: true, ..Script::default() },
            args: "--contexts 1k --concurrency 1 --prefill-contexts 1k --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![with(CellStatus::Valid, &["reported 0 prompt tokens", "/tokenize"])],
            decode: vec![measured()],
            check: Some(|o, c| {
                let row = &o.results.prefill[0];
                c.eq("prompt tokens and tok/s (no count, no rate)", (row.prompt_tokens, row.prompt_tps), (None, None));
                let cell = &o.results.decode[0];
                c.eq("the decode cell's prompt tokens", cell.prompt_tokens, None);
                let why = cell.missing.iter().find(|m| m.figure == "prompt_tokens");
                c.that(why.is_some_and(|m| m.reason.contains("reported 0 prompt tokens")), || {
                    format!("the decode cell's missing says the server reported 0: {:?}", cell.missing)
                });
                let zeros = row.requests.iter().chain(&cell.requests).filter(|q| q.prompt_tokens == Some(0)).count();
                c.eq("requests whose prompt tokens read 0", zeros, 0);
            }),
        }
    }

    /// Open loop against a server that slows down: 10 requests/s of 16-token streams (0.2 s
    /// each) is far below what it serves at first (any number at once); from its 30th request
    /// on it runs one at a time (5 requests/s at most). The rate cell's requests pile up in
    /// flight and the cell is saturated with that evidence, not valid at a low rate.
    /// Load: the evidence is a count (growth of tens against a noise bound of about 8), not a
    /// time; a busy machine only delays every request alike.
    pub fn a_server_that_slows_down_mid_cell_is_saturated_at_a_rate_it_kept_up_with_before() -> Shape {
        Shape {
            rule: "an open-loop cell whose server stops keeping up is saturated, with the evidence",
            script: Script {
                stream: StreamScript { gap: Duration::from_millis(10), ..StreamScript::default() },
                slow_after: Some((30, 1)),
                ..Script::default()
            },
            args: "--contexts 256 --rates 10 --arrival constant --prefill-contexts none --duration 6s --max-tokens 16",
            exit: 0,
            prefill: vec![],
            decode: vec![],
            check: Some(|o, c| {
                let cell = &o.results.rates[0];
                c.eq("status", cell.status, CellStatus::Saturated);
                let reason = cell.reason.clone().unwrap_or_default();
                c.that(reason.contains("requests in flight grew from"), || {
                    format!("the reason names the growth: {reason}")
                });
                let s = cell.saturation.clone().unwrap_or_else(|| panic!("no saturation evidence: {cell:?}"));
                c.that(s.achieved_share.is_some_and(|a| a < 0.8), || {
                    format!("completions fall short of arrivals: {s:?}")
                });
            }),
        }
    }

    /// A proxy in front of a stuck engine: 5 tokens, then nothing but `: ping` comments.
    /// Keep-alives keep a stream alive before its first token (a long prefill), not once tokens
    /// flow: the cell is an error that says no token came for the stall timeout, not a valid
    /// cell at a trickle.
    /// Load: pings every 100 ms, so the byte stall (2.5 s, another error) cannot come before the
    /// token stall unless the first ping is 2.4 s late; the token stall comes ~2.6 s after the
    /// window opened, 2.4 s before its 5-s close (a close first would cancel the stream and hide
    /// the error).
    pub fn keepalive_comments_after_the_first_tokens_do_not_hide_a_stuck_stream() -> Shape {
        Shape {
            rule: "once tokens flowed, keep-alives alone are a stall",
            script: Script {
                stream: StreamScript {
                    pings_after: Some(5),
                    keepalive_every: Some(Duration::from_millis(100)),
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 1 --prefill-contexts none --duration 5s --max-tokens 64 --stall-timeout 2.5s",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![],
            decode: vec![with(CellStatus::Error, &["no token for 2.5s"])],
            check: None,
        }
    }

    /// A server that ignores `ignore_eos` (a hosted API, a proxy): every request ends after 4
    /// of the 32 asked tokens with `finish_reason: "stop"`. The cell is measured as what it is,
    /// and its reason says the figures are not sustained decode and why.
    pub fn a_server_that_ignores_ignore_eos_is_named_in_the_cells_reason() -> Shape {
        Shape {
            rule: "early stops despite ignore_eos are named in the cell's reason",
            script: Script {
                stream: StreamScript { stop_after: Some(4), ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![],
            decode: vec![Cell {
                status: Status::Measured,
                reason: Reason::Has(&[
                    "stopped before max_tokens (32)",
                    "after 4 tokens (median)",
                    "does not honour ignore_eos",
                ]),
            }],
            check: None,
        }
    }

    /// A server that aborts every request after 30 of the 128 tokens asked (vLLM's
    /// `finish_reason: "abort"`): those are no completed requests, so the cell is an error that
    /// names them, with no throughput — not a valid cell of "completed" requests.
    /// Load: the verdict counts how requests ended, not when: it needs one stream to end before
    /// the 2-s window closes (30 tokens 10 ms apart, 0.3 s), which only a 1.7-s pause prevents.
    pub fn requests_the_server_aborts_are_no_completed_requests() -> Shape {
        cut_short("abort")
    }

    /// The same with `finish_reason: "error"`.
    /// Load: as the row above.
    pub fn requests_that_end_with_finish_reason_error_are_no_completed_requests() -> Shape {
        cut_short("error")
    }

    /// Every request ends after 30 tokens with `finish_reason` `why`.
    fn cut_short(why: &'static str) -> Shape {
        Shape {
            rule: "requests the server cut short (abort, error) are counted apart; most of them make the cell an error",
            script: Script {
                stream: StreamScript { end_after: Some((30, why)), ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 2s --max-tokens 128",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![],
            decode: vec![with(CellStatus::Error, &["were cut short", "after 30 tokens (median) of max_tokens 128"])],
            check: Some(|o, c| {
                let cell = &o.results.decode[0];
                let why = cell.reason.clone().unwrap_or_default();
                let reason = o.results.decode[0].requests.iter().find_map(|q| q.finish_reason);
                c.that(why.contains("finish_reason \""), || format!("the reason names the finish reason: {why}"));
                c.eq("total tok/s (none claimed)", cell.total_tps, None);
                c.eq("completed requests (none claimed)", cell.completed_requests, None);
                c.eq("a request's finish reason", reason, Some(speedmatrix_schema::FinishReason::Other));
            }),
        }
    }

    /// A server that ends every request at 16 tokens with `finish_reason: "length"` though 128
    /// were asked (it ignores `max_tokens` in favour of its own limit): measured as what it is,
    /// and the reason says the figures are not sustained decode at the asked length.
    /// Load: as the aborted row: one stream must end inside the 2-s window (0.16 s a stream).
    pub fn a_server_that_ends_requests_before_max_tokens_with_length_is_named() -> Shape {
        Shape {
            rule: "requests that end with length before max_tokens are named with their count and median length",
            script: Script {
                stream: StreamScript { end_after: Some((16, "length")), ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 2s --max-tokens 128",
            exit: 0,
            prefill: vec![],
            decode: vec![Cell {
                status: Status::Measured,
                reason: Reason::Has(&[
                    "ended with finish_reason \"length\" before max_tokens (128), after 16 tokens (median)",
                    "does not honour max_tokens",
                ]),
            }],
            check: None,
        }
    }

    /// A server that runs every request to 300 tokens, whatever `max_tokens` asks (128 for
    /// decode, 1 for the prefill probe): the prefill row and the decode cell say so, and the
    /// over-capacity rule counts 300 tokens a stream from then on — with `--kv-budget 2000`,
    /// 4 × (256 + 128) = 1,536 fits the plan but 4 × (256 + 300) = 2,224 does not.
    /// Load: a stream lasts 0.6 s (300 tokens 2 ms apart); one must end inside the 2-s window,
    /// which only a 1.4-s pause prevents.
    pub fn a_server_that_runs_past_max_tokens_is_named_and_counted_for_capacity() -> Shape {
        Shape {
            rule: "requests that run past max_tokens are named, and the over-capacity rule counts their length",
            script: Script {
                stream: StreamScript { run_to: Some(300), gap: Duration::from_millis(2), ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 1,4 --prefill-contexts 256 --duration 2s --max-tokens 128 --kv-budget 2000",
            exit: 0,
            prefill: vec![with(CellStatus::Valid, &["ran past max_tokens (1) to 300 tokens"])],
            decode: vec![
                Cell { status: Status::Measured, reason: Reason::Has(&["ran past max_tokens (128) to 300 tokens"]) },
                with(CellStatus::OverCapacity, &["2,224", "300 tokens"]),
            ],
            check: Some(|o, c| {
                let cap = o.results.decode[1].capacity.as_ref().map(|c| c.required_tokens);
                c.eq("the capacity needed with the measured length", cap, Some(2224));
            }),
        }
    }

    /// A `/metrics` that answers discovery, then accepts every connection and never answers
    /// (round 2: a 12-s plan took 5 min, 30 s a wait, and the server figures went null with no
    /// reason). Nothing waits for it: the run keeps its estimate, and `missing` says once why
    /// the server figures are null.
    /// Load: the run's wall time (the collector's closing "done in …") against the plan's
    /// estimate (printed "≈ 11 s": three 3-s windows with their assumed readiness, one prefill
    /// row). Measured on 2 cores: 10.3 s
    /// with other suites running, 10.6 s beside two `yes` hogs and the other suites (the 1-s
    /// wait for the first unanswered reading included; round 2's collector took minutes). The
    /// bound is the issue's 20 % (8.8–13.2 s), which a busy machine would have to stretch the
    /// run by 2.6 s to break.
    pub fn a_metrics_endpoint_that_never_answers_holds_nothing() -> Shape {
        Shape {
            rule: "a /metrics that accepts and never answers holds nothing: the run keeps its estimate and says why",
            script: Script {
                metrics: Some("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n".into()),
                metrics_hang_after: Some(1),
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 1,2,4 --prefill-contexts 256 --duration 3s --max-tokens 2000",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured(), measured(), measured()],
            check: Some(|o, c| {
                within_estimate(o, c, "hung /metrics");
                let noted: Vec<_> =
                    o.results.missing.iter().filter(|m| m.reason.starts_with("/metrics failed")).collect();
                c.eq("one missing entry for the failing /metrics", noted.len(), 1);
                let why = noted.first().map(|m| (m.figure.as_str(), m.reason.as_str()));
                c.that(why.is_some_and(|(f, r)| f == "server" && r.contains("no answer within 1s")), || {
                    format!("it names the figures and why: {why:?}")
                });
                c.eq("the engine (discovery read /metrics)", o.results.engine.name.as_deref(), Some("vllm"));
            }),
        }
    }

    /// The run took its plan's estimate, to 20 %, by the collector's own clock of what the
    /// estimate covers (its closing line "done in 11 s"), not the process's: at a load average
    /// of 1,700 (a helper's bench of thousands of threads beside the hogged suites) the process
    /// took 14.4 s to start, run and exit while its run took 11 s.
    fn within_estimate(o: &Outcome, c: &mut Checks, what: &str) {
        let estimate = support::estimate::estimate_in(&o.stderr, "plan: estimated wall time");
        let done = o.stderr.lines().find_map(|l| l.strip_prefix("done in "));
        let wall = done.and_then(|d| d.split(" (").next()).map(support::estimate::seconds);
        eprintln!("{what}: the run took {wall:?} s against its estimate of {estimate:?} s");
        c.that(wall.zip(estimate).is_some_and(|(w, e)| (w - e).abs() <= 0.2 * e), || {
            format!("the run took {wall:?} s (its closing line) against its estimate of {estimate:?} s (20 % allowed)")
        });
    }

    /// A proxy that compresses the event stream with gzip: decoded as it arrives, measured as
    /// usual (round 2: "UTF8 error").
    pub fn a_gzip_encoded_event_stream_is_decoded() -> Shape {
        Shape {
            rule: "a gzip-encoded event stream is decoded, not an error",
            script: Script { stream: StreamScript { gzip: true, ..StreamScript::default() }, ..Script::default() },
            args: "--contexts 256 --concurrency 2 --prefill-contexts 256 --duration 1s --max-tokens 64",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured()],
            check: Some(|o, c| {
                let cell = &o.results.decode[0];
                c.eq("token count source", cell.token_count_source, Some(TokenCountSource::ContinuousUsage));
                c.that(cell.output_tokens.unwrap_or(0) > 0, || format!("tokens counted: {:?}", cell.output_tokens));
            }),
        }
    }

    /// A server that answers decode requests with HTTP 200 and an OpenAI error object: the
    /// cell is an error quoting the server's own message.
    pub fn an_error_object_with_http_200_keeps_the_servers_message() -> Shape {
        Shape {
            rule: "an error object with HTTP 200 is an error quoting the server's message",
            script: Script { answer: Answer::JsonError, ..Script::default() },
            args: "--contexts 256 --concurrency 1 --prefill-contexts 256 --duration 1s --max-tokens 64",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![with(CellStatus::Error, &["model overloaded", "instead of a stream"])],
            check: None,
        }
    }

    /// `--engine openai` measures "from the stream alone": its `/metrics` is not read (a
    /// vLLM-shaped one is there), `missing` says so, and the cells have no server figures.
    pub fn the_openai_engine_does_not_read_metrics() -> Shape {
        Shape {
            rule: "--engine openai does not read /metrics",
            script: Script {
                metrics: Some("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n".into()),
                metrics_hang_after: Some(0),
                ..Script::default()
            },
            args:
                "--contexts 256 --concurrency 1 --prefill-contexts none --duration 1s --max-tokens 32 --engine openai",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                let server = o.results.missing.iter().find(|m| m.figure == "server").map(|m| m.reason.as_str());
                c.that(server.is_some_and(|r| r.contains("not read: --engine openai")), || {
                    format!("missing: {server:?}")
                });
                c.that(o.results.decode[0].server.is_none(), || "no server figures".into());
            }),
        }
    }

    /// A server that lists two models: the run takes the first, and says which and why, on
    /// the terminal and in the file (`run.notes`).
    pub fn the_model_chosen_among_several_is_named() -> Shape {
        Shape {
            rule: "with several models listed, the one chosen is named with the reason",
            script: Script { more_models: &["other-model"], ..Script::default() },
            args: "--contexts 256 --concurrency 1 --prefill-contexts none --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                let said = "/v1/models lists 2 models (scripted, other-model); measured scripted, the first listed";
                c.that(o.stderr.contains(said), || "stderr names the choice".into());
                let notes = o.results.run.notes.as_deref().unwrap_or_default();
                c.that(notes.contains(said), || format!("run.notes names the choice: {notes:?}"));
            }),
        }
    }

    /// A server whose `/tokenize` counts 300 tokens fewer than its own usage: the prompts are
    /// sized to the target by `/tokenize`, the server serves 300 more, and the prefill row, the
    /// decode cell and `show --all` say so with both counts (round 2: only the terminal did).
    pub fn a_prompt_length_off_its_target_is_written_into_the_file() -> Shape {
        Shape {
            rule:
                "a prompt more than 1 % off its target is noted in the file and by show --all, with /tokenize's count",
            script: Script { usage_prompt_extra: 300, ..Script::default() },
            args: "--contexts 1k --concurrency 1 --prefill-contexts 1k --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![with(CellStatus::Valid, &["the prompt has 1,324 tokens", "/tokenize counted 1,024"])],
            decode: vec![Cell {
                status: Status::Measured,
                reason: Reason::Has(&["the prompt has 1,324 tokens, 29.3 % off the target 1,024"]),
            }],
            check: Some(|o, c| {
                let text = show_args(o, &["--all"]);
                c.that(text.contains("the prompt has 1,324 tokens"), || format!("show --all says so: {text}"));
            }),
        }
    }

    /// Output tokens per in-window chunk of the decode cell: the tokens each chunk carried on
    /// average. The chunks are the gaps (a chunk after its stream's previous one) and the first
    /// chunks of the replacement streams started inside the window (their TTFTs; one whose
    /// first chunk came after the close is counted too, within a chunk or two). `None` without
    /// figures.
    fn tokens_per_chunk(o: &Outcome) -> Option<f64> {
        let cell = &o.results.decode[0];
        let gaps = cell.chunk_gap_ms.as_ref()?.count?;
        let firsts = cell.ttft_in_window_ms.as_ref().and_then(|d| d.count).unwrap_or(0);
        Some(cell.output_tokens? as f64 / (gaps + firsts) as f64)
    }

    /// The decode cell counted from `source` at `truth` tokens per chunk (± `tolerance`), its
    /// check in the file with every `rejected` source set aside, and what it says of ITL: with
    /// `itl_percentiles` false, only the mean (with `missing` saying why) and the chunk gaps.
    fn counted(
        o: &Outcome,
        c: &mut support::shape::Checks,
        source: TokenCountSource,
        truth: f64,
        tolerance: f64,
        rejected: &[TokenCountSource],
        itl_percentiles: bool,
    ) {
        let cell = &o.results.decode[0];
        c.eq("token count source", cell.token_count_source, Some(source));
        let per_chunk = tokens_per_chunk(o);
        eprintln!(
            "total tok/s {:?}, output tokens {:?}, tokens per chunk {per_chunk:?} (truth {truth}), check {:?}",
            cell.total_tps, cell.output_tokens, cell.token_count_check
        );
        let near = per_chunk.is_some_and(|t| (t - truth).abs() <= tolerance * truth);
        c.that(near, || format!("tokens per chunk {per_chunk:?}, the truth {truth} (± {:.0} %)", tolerance * 100.0));
        let check = cell.token_count_check.as_ref();
        let set_aside: Vec<TokenCountSource> = check
            .map(|k| k.disagreements.iter().filter(|d| d.rejected).map(|d| d.source).collect())
            .unwrap_or_default();
        c.eq("sources set aside (token_count_check)", set_aside.as_slice(), rejected);
        let itl = cell.itl_ms.as_ref();
        c.that(itl.and_then(|d| d.mean).is_some(), || format!("ITL keeps its mean: {itl:?}"));
        c.that(cell.chunk_gap_ms.as_ref().and_then(|d| d.p50).is_some(), || "chunk gaps are given".into());
        let p50 = itl.and_then(|d| d.p50);
        let named = cell.missing.iter().any(|m| m.figure == "itl_ms" && m.reason.contains("chunk_gap_ms"));
        if itl_percentiles {
            c.that(p50.is_some() && !named, || format!("ITL per token is known: {itl:?}, {:?}", cell.missing));
        } else {
            c.that(p50.is_none(), || format!("no ITL percentile made up by spreading: {itl:?}"));
            c.that(named, || format!("missing says why ITL has no percentiles: {:?}", cell.missing));
            let rows: serde_json::Value =
                serde_json::from_str(&show_args(o, &["--format", "json"])).unwrap_or_default();
            let decode = rows.as_array().and_then(|r| r.iter().find(|x| x["phase"] == "decode"));
            let shown = decode.and_then(|r| r.get("itl_ms_p50")).cloned();
            c.eq("show's ITL p50 (--format json)", shown, Some(serde_json::Value::Null));
        }
    }

    /// Usage stuck at 1 in the final usage only (the shape of sglang#7084 without per-chunk
    /// usage): 1 token for 64 text chunks cannot be, so the final usage is set aside and the
    /// server's own token counter counts (one token a chunk here). Before, the cell read about a
    /// token per request: a valid cell at 1–2 % of the real tok/s.
    /// Load: none on the verdict; the counter is read between scrapes, so tokens per chunk are
    /// compared within 20 % of 1 (set-aside usage gave ~0.03).
    pub fn final_usage_stuck_at_1_gives_way_to_the_token_counter() -> Shape {
        Shape {
            rule: "a final usage below the text chunks is set aside; the token counter counts",
            script: Script {
                generation_counter: true,
                stream: StreamScript {
                    per_chunk_usage: false,
                    final_usage_count: UsageCount::One,
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 2s --max-tokens 64",
            exit: 0,
            prefill: vec![],
            decode: vec![Cell {
                status: Status::Measured,
                reason: Reason::Has(&["final usage below the text chunks", "counted from the server's token counter"]),
            }],
            check: Some(|o, c| {
                let rejected = [TokenCountSource::FinalUsage];
                counted(o, c, TokenCountSource::ServerCounter, 1.0, 0.2, &rejected, false);
            }),
        }
    }

    /// Usage stuck at 1 on every chunk and in the final usage (sglang#7084: a
    /// prefill/decode-disaggregated server; a benchmark counted 10 output tokens for 10
    /// requests): a running total that does not grow on a text chunk is none, so both usages
    /// are set aside and the token counter counts. Before, the cell was valid at about a
    /// token per request.
    /// Load: as `final_usage_stuck_at_1_gives_way_to_the_token_counter`.
    pub fn usage_stuck_at_1_on_every_chunk_gives_way_to_the_token_counter() -> Shape {
        Shape {
            rule: "per-chunk usage that does not grow on a text chunk is set aside; the token counter counts",
            script: Script {
                generation_counter: true,
                stream: StreamScript {
                    chunk_usage_count: UsageCount::One,
                    final_usage_count: UsageCount::One,
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 2s --max-tokens 64",
            exit: 0,
            prefill: vec![],
            decode: vec![Cell {
                status: Status::Measured,
                reason: Reason::Has(&["per-chunk usage did not grow", "counted from the server's token counter"]),
            }],
            check: Some(|o, c| {
                let rejected = [TokenCountSource::ContinuousUsage, TokenCountSource::FinalUsage];
                counted(o, c, TokenCountSource::ServerCounter, 1.0, 0.2, &rejected, false);
            }),
        }
    }

    /// The same server without `/metrics`: every count it reports contradicts its stream and
    /// nothing else counts, so the cell claims no figure — an error that says why and what the
    /// text chunks give as a lower bound.
    pub fn usage_stuck_at_1_without_a_counter_is_no_valid_figure() -> Shape {
        Shape {
            rule: "where every reported count contradicts the stream and nothing else counts, the cell is not valid",
            script: Script {
                stream: StreamScript {
                    chunk_usage_count: UsageCount::One,
                    final_usage_count: UsageCount::One,
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 1s --max-tokens 64",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![],
            decode: vec![with(
                CellStatus::Error,
                &["no token count to trust", "per-chunk usage did not grow", "at least"],
            )],
            check: Some(|o, c| {
                let cell = &o.results.decode[0];
                c.eq("total tok/s", cell.total_tps, None);
                let check = cell.token_count_check.as_ref();
                c.that(check.is_some_and(|k| k.text_chunks > 64), || format!("the file keeps the check: {check:?}"));
            }),
        }
    }

    /// Per-chunk usage that holds each chunk's own count (1 or 3 tokens, MTP) instead of the
    /// running total, and a true final usage: the per-chunk usage is set aside, the final usage
    /// counts (2 tokens a chunk), and with no chunk's own count known ITL keeps only its mean.
    /// Before, the cell was valid at about half the real tok/s.
    /// Load: the final usage counts only once a request finished in the cell: a request is 8
    /// chunks (16 tokens) 10 ms apart, so the 2-s window holds many unless a busy CPU stretches
    /// each gap past 200 ms (with 64-token requests one run beside two hogs and other suites
    /// finished none, and the cell rightly said no count could be trusted). The final usage is
    /// exact (16 tokens in 8 chunks), so tokens per chunk are within 10 % of 2 (the first
    /// chunk of each stream in the window has no gap).
    pub fn per_chunk_usage_holding_each_chunks_own_count_gives_way_to_the_final_usage() -> Shape {
        Shape {
            rule: "per-chunk usage that is each chunk's own count is set aside; the final usage counts",
            script: Script {
                stream: StreamScript {
                    tokens_per_chunk: vec![1, 3],
                    chunk_usage_count: UsageCount::Own,
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 2s --max-tokens 16",
            exit: 0,
            prefill: vec![],
            decode: vec![Cell {
                status: Status::Measured,
                reason: Reason::Has(&["per-chunk usage did not grow", "counted from each request's final usage"]),
            }],
            check: Some(|o, c| {
                let rejected = [TokenCountSource::ContinuousUsage];
                counted(o, c, TokenCountSource::FinalUsage, 2.0, 0.1, &rejected, false);
            }),
        }
    }

    /// Speculative chunks (1 and 3 tokens, sglang#12064's shape) with usage in the final chunk
    /// only: tok/s, TPOT and ITL's mean follow the final usage, but no chunk's own count is
    /// known, so ITL has no percentiles (spreading the mean over the chunks made a 3-token
    /// step three gaps of step ÷ 2: p50 +36 %), and `show` prints none.
    /// Load: as `per_chunk_usage_holding_each_chunks_own_count_gives_way_to_the_final_usage`
    /// (16-token requests, so requests finish inside the window).
    pub fn speculative_chunks_with_final_usage_only_have_no_itl_percentiles() -> Shape {
        Shape {
            rule: "ITL percentiles only where each chunk's tokens are known",
            script: Script {
                stream: StreamScript {
                    tokens_per_chunk: vec![1, 3],
                    per_chunk_usage: false,
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 2s --max-tokens 16",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                counted(o, c, TokenCountSource::FinalUsage, 2.0, 0.1, &[], false);
                // The mean is exact: the gaps over the tokens, half a chunk gap at 2 tokens a chunk.
                let cell = &o.results.decode[0];
                let itl = cell.itl_ms.as_ref().and_then(|d| d.mean).unwrap_or(f64::NAN);
                let gap = cell.chunk_gap_ms.as_ref().and_then(|d| d.mean).unwrap_or(f64::NAN);
                c.that((2.0 * itl / gap - 1.0).abs() <= 0.1, || format!("ITL mean {itl} is half the chunk gap {gap}"));
            }),
        }
    }

    /// Speculative chunks with no usage at all and the server's token counter: the counter
    /// counts, and ITL keeps only its mean.
    /// Load: the counter is read between scrapes: tokens per chunk within 20 % of 2.
    pub fn speculative_chunks_with_only_a_token_counter_have_no_itl_percentiles() -> Shape {
        Shape {
            rule: "ITL percentiles only where each chunk's tokens are known (counter only)",
            script: Script {
                generation_counter: true,
                stream: StreamScript {
                    tokens_per_chunk: vec![1, 3],
                    per_chunk_usage: false,
                    final_usage: false,
                    ..StreamScript::default()
                },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --duration 2s --max-tokens 64",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| counted(o, c, TokenCountSource::ServerCounter, 2.0, 0.2, &[], false)),
        }
    }

    /// `speedmatrix show` of the run's results file with `args`.
    fn show_args(o: &Outcome, args: &[&str]) -> String {
        let shown = std::process::Command::new(support::bin()).arg("show").arg(&o.out).args(args).output().unwrap();
        String::from_utf8_lossy(&shown.stdout).into_owned()
    }

    /// `speedmatrix show` of the run's results file.
    fn show(o: &Outcome) -> String {
        show_args(o, &[])
    }

    /// A server restarted mid-cell (its counters began again from 0): the prefix-share cell's
    /// hit rate and its speculative-decoding counts are null with the reason in `missing` —
    /// never a negative, zero or wrong rate from a difference across the restart. The server
    /// restarts as its 3rd completion request arrives: the 1st is the cell's warm-up, the 2nd
    /// its first measured stream, so the reading before the cell's first request holds the
    /// long run's counts (a million each) and every reading after the restart a few thousand.
    /// Load: none can change it — whenever the readings fall, the first is before the restart
    /// and the last after it.
    pub fn a_server_restarted_mid_cell_gives_no_hit_rate_and_no_acceptance() -> Shape {
        Shape {
            rule: "counters that went down mid-cell (a restart) give null figures with the reason, never a wrong rate",
            script: Script { restart_at: Some(3), generation_counter: true, ..Script::default() },
            args:
                "--contexts 1k --concurrency 1 --prefill-contexts none --prefix-share 90% --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                c.that(o.bodies.len() >= 3, || format!("the restart happened: {} requests", o.bodies.len()));
                let cell = &o.results.decode[0];
                let pc = cell.prefix_cache.as_ref();
                c.eq(
                    "measured hit rate",
                    pc.map(|p| (p.measured_hit_rate, p.hit_tokens, p.query_tokens)),
                    Some((None, None, None)),
                );
                let missing = |figure: &str| cell.missing.iter().find(|m| m.figure == figure).map(|m| m.reason.clone());
                let hit = missing("prefix_cache.measured_hit_rate").unwrap_or_default();
                c.that(hit.starts_with("the server's prefix-cache counters went down during it (a restart?)"), || {
                    format!("missing names the restart for the hit rate: {:?}", cell.missing)
                });
                c.eq("spec_decode", cell.spec_decode.as_ref(), None);
                let spec = missing("spec_decode").unwrap_or_default();
                c.that(spec.contains("speculative-decoding counters went down during the cell (a restart?)"), || {
                    format!("missing names the restart for speculative decoding: {:?}", cell.missing)
                });
                c.eq("acceptance rate", cell.spec_accept_rate, None);
                let server = cell.server.as_ref();
                c.eq(
                    "window prefix-cache counts",
                    server.map(|s| (s.prefix_cache_hit_tokens, s.prefix_cache_query_tokens, s.spec_mean_accepted_len)),
                    Some((None, None, None)),
                );
            }),
        }
    }

    /// The responses' count of cached prompt tokens (`usage.prompt_tokens_details.cached_tokens`)
    /// and the server's Prometheus counters disagree: the file keeps the responses' rate and the
    /// cell's reason names both figures. The usage says 90 of each request's ~1,029 prompt
    /// tokens (8.7 %); the counters (those of [`Script::restart_at`], never reached here) count
    /// nine tenths of every prompt hit (90 %).
    /// Load: none can change it — both are token counts.
    pub fn a_hit_rate_two_sources_disagree_on_names_both() -> Shape {
        Shape {
            rule: "a hit rate two sources disagree on names both in the reason",
            script: Script {
                restart_at: Some(1_000_000),
                stream: StreamScript { cached_tokens: Some(90), ..StreamScript::default() },
                ..Script::default()
            },
            args:
                "--contexts 1k --concurrency 1 --prefill-contexts none --prefix-share 90% --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![],
            decode: vec![with(
                CellStatus::Valid,
                &["from server usage (8.", "and from the server's Prometheus counters (90", "disagree by 8"],
            )],
            check: Some(|o, c| {
                let pc = o.results.decode[0].prefix_cache.as_ref();
                c.eq(
                    "hit-rate source",
                    pc.and_then(|p| p.hit_rate_source),
                    Some(speedmatrix_schema::HitRateSource::Usage),
                );
            }),
        }
    }

    /// The text of the first completion request the server got (the cell's warm-up): its
    /// prompt, or its messages' contents.
    fn first_prompt(o: &Outcome) -> String {
        let Some(b) = o.bodies.first() else { return String::new() };
        match b.get("messages").and_then(|m| m.as_array()) {
            Some(m) => m.iter().filter_map(|x| x["content"].as_str()).collect(),
            None => b["prompt"].as_str().unwrap_or_default().to_string(),
        }
    }

    /// vLLM's `POST /reset_prefix_cache` answering HTTP 200 with `{"success": false}`: the
    /// reset did not happen (vLLM refuses it while running requests hold cache blocks), so the
    /// cell must not say `reset`: its prompts are salted and the file says why, quoting the
    /// answer. Before, a 2xx was taken as a reset whatever its body said.
    /// Load: none can change it — the answer is the server's, whenever it comes.
    pub fn a_reset_answering_success_false_is_no_reset_and_the_cell_is_salted() -> Shape {
        Shape {
            rule: "a reset answered 200 {\"success\": false} did not happen: the cell is salted and says why",
            script: Script {
                live_gauges: true,
                reset_answer: Some((200, r#"{"success": false}"#)),
                ..Script::default()
            },
            args:
                "--contexts 1k --concurrency 1 --prefill-contexts none --prefix-share 50% --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                c.eq("resets asked", o.resets, 1);
                let pc = o.results.decode[0].prefix_cache.as_ref();
                c.eq("cache start", pc.map(|p| p.cache_start), Some(speedmatrix_schema::CacheStart::Salted));
                let why = pc.map(|p| p.cache_start_detail.clone()).unwrap_or_default();
                c.that(
                    why.starts_with(r#"POST /reset_prefix_cache failed (answered HTTP 200 with {"success": false}: the server says the reset did not happen)"#),
                    || format!("the detail quotes the answer: {why}"),
                );
                c.that(!why.contains("VLLM_SERVER_DEV_MODE"), || format!("the endpoint exists; no launch hint: {why}"));
                let prompt = first_prompt(o);
                c.that(prompt.starts_with("[cell 0 repeat 1]"), || {
                    format!("the warm-up's prompt is salted: {prompt:.80}")
                });
                c.that(o.stderr.contains("note: prefix cache: POST /reset_prefix_cache failed"), || {
                    "the terminal says it once".to_string()
                });
            }),
        }
    }

    /// What llama.cpp's `/props` says of a server of 2 slots of 8,192 tokens each (discovery
    /// then calls it llama.cpp).
    fn llamacpp_props() -> serde_json::Value {
        serde_json::json!({"total_slots": 2, "default_generation_settings": {"n_ctx": 8192}})
    }

    /// llama.cpp's slot erase (`POST /slots/{id}?action=erase`) answering 501, as llama-server
    /// does when started without `--slot-save-path`: the cell is salted, and its detail names
    /// the 501 and the flag that enables the erase.
    /// Load: none can change it — the answer is the server's, whenever it comes.
    pub fn a_llamacpp_slot_erase_answering_501_salts_the_cell_and_names_the_flag() -> Shape {
        Shape {
            rule: "a llama.cpp slot erase answered 501 salts the cell and names --slot-save-path",
            script: Script {
                props: Some(llamacpp_props()),
                reset_answer: Some((
                    501,
                    r#"{"error":{"code":501,"message":"This server does not support slots action. Start it with `--slot-save-path`","type":"not_supported_error"}}"#,
                )),
                ..Script::default()
            },
            args:
                "--contexts 1k --concurrency 1 --prefill-contexts none --prefix-share 50% --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                c.eq("engine", o.raw["engine"]["name"].as_str(), Some("llamacpp"));
                c.eq("resets asked (the first slot's answer stops them)", o.resets, 1);
                let pc = o.results.decode[0].prefix_cache.as_ref();
                c.eq("cache start", pc.map(|p| p.cache_start), Some(speedmatrix_schema::CacheStart::Salted));
                let why = pc.map(|p| p.cache_start_detail.clone()).unwrap_or_default();
                c.that(why.starts_with("POST /slots/{id}?action=erase for each of 2 slots failed ("), || {
                    format!("the detail names the erase: {why}")
                });
                c.that(why.contains("501") && why.contains("--slot-save-path"), || {
                    format!("the detail names the 501 and the flag: {why}")
                });
                let prompt = first_prompt(o);
                c.that(prompt.starts_with("[cell 0 repeat 1]"), || {
                    format!("the warm-up's prompt is salted: {prompt:.80}")
                });
            }),
        }
    }

    /// A proxy in front of llama.cpp that rejects body fields it does not know answers HTTP 400
    /// to the per-slot warm-up's `id_slot`: the warm-up is sent again without it (and no later
    /// request carries it), the cell is measured, and its reason says the slots were not pinned.
    /// Load: none can change it — the refusal is the server's answer, whenever it comes.
    pub fn a_proxy_refusing_id_slot_gets_warm_ups_without_it_and_the_cell_says_so() -> Shape {
        Shape {
            rule: "a 400 to id_slot: the warm-up goes again without it, the cell is measured and says its slots were not pinned",
            script: Script {
                props: Some(llamacpp_props()),
                refuse_fields: &["id_slot"],
                ..Script::default()
            },
            args: "--contexts 1k --concurrency 2 --prefill-contexts none --duration 1s --max-tokens 32",
            exit: 0,
            prefill: vec![],
            decode: vec![Cell {
                status: Status::Measured,
                reason: Reason::Has(&[
                    "slots not pinned: the server refused llama.cpp's id_slot (",
                    "answered HTTP 400",
                    "Unrecognized request argument supplied: id_slot",
                    "the warm-up of 2 slots was sent without it",
                ]),
            }],
            check: Some(|o, c| {
                c.eq("engine", o.raw["engine"]["name"].as_str(), Some("llamacpp"));
                let pinned: Vec<&serde_json::Value> = o.bodies.iter().filter(|b| b.get("id_slot").is_some()).collect();
                // The two slots' warm-ups go at once: one or both are refused before either answer is in.
                c.that((1..=2).contains(&pinned.len()), || format!("{} requests carried id_slot", pinned.len()));
                c.that(pinned.iter().all(|b| b["max_tokens"] == 1), || "only warm-ups carry id_slot".into());
                let decode = o.bodies.iter().filter(|b| b["max_tokens"].as_u64() > Some(1)).count();
                c.that(decode >= 2, || format!("the cell's streams were sent: {decode}"));
                let said = o.stderr.matches("note: the server refused llama.cpp's id_slot").count();
                c.eq("terminal notes of the refusal", said, 1);
            }),
        }
    }

    /// Requests that came on a connection no earlier request had used: a stream that paid for
    /// its own connect (ports are unique among open connections on loopback).
    fn on_new_connections(seen: &[Seen]) -> usize {
        let mut used = std::collections::HashSet::new();
        seen.iter().filter(|s| used.insert(s.port) && s.decode).count()
    }

    /// 300 streams, more than one warm-up batch (`WARM_BATCH`, 256), against a listen backlog of
    /// one batch and a `/v1/models` that answers after 200 ms: the collector opens its warm
    /// connections a batch at a time (the server never answers more than a batch of warm-ups
    /// at once) and every stream's request comes on a connection of its own that was opened
    /// before the cell (none pays a connect inside its TTFT).
    /// Load: counts only. The bound is the client's — it connects the next batch once the last
    /// one's answers arrived, however late — and no stream ends inside the 2-s window (each
    /// would run 200 s), so every decode request is an opening one.
    pub fn warm_connections_open_in_batches_one_per_stream() -> Shape {
        Shape {
            rule: "warm-up connections open in batches, one held connection per stream",
            script: Script {
                backlog: Some(speedmatrix::measuring::held::WARM_BATCH as u32),
                models_delay: Duration::from_millis(200),
                stream: StreamScript { gap: Duration::from_millis(200), ..StreamScript::default() },
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 300 --prefill-contexts none --duration 2s --max-tokens 1000",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                let batch = speedmatrix::measuring::held::WARM_BATCH as i64;
                let most = o.models_most_at_once;
                c.that(most <= batch, || format!("{most} warm-ups answered at once, more than a batch of {batch}"));
                let decodes: Vec<&Seen> = o.seen.iter().filter(|s| s.decode).collect();
                c.eq("decode requests (300 opening streams, none replaced)", decodes.len(), 300);
                let ports: std::collections::HashSet<u16> = decodes.iter().map(|s| s.port).collect();
                c.eq("connections the 300 streams came on", ports.len(), 300);
                c.eq("streams that opened their own connection", on_new_connections(&o.seen), 0);
            }),
        }
    }

    /// The server closes every connection after its `/v1/models` answer (`Connection: close`,
    /// as a keep-alive timeout or a proxy does to an idle connection): the warm connections are
    /// gone before the cell, and each stream opens a new one instead of failing.
    /// Load: none — whenever the closes arrive, a closed connection is never used.
    pub fn a_warm_connection_the_server_closed_is_replaced_not_failed() -> Shape {
        Shape {
            rule: "a warm connection the server closed is replaced, the stream does not fail",
            script: Script { models_close: true, ..Script::default() },
            args: "--contexts 256 --concurrency 4 --prefill-contexts none --duration 2s --max-tokens 16",
            exit: 0,
            prefill: vec![],
            decode: vec![measured()],
            check: Some(|o, c| {
                let models: std::collections::HashSet<u16> =
                    o.seen.iter().filter(|s| s.models).map(|s| s.port).collect();
                c.that(models.len() >= 4, || format!("{} connections warmed, 4 streams", models.len()));
                let on_closed = o.seen.iter().filter(|s| s.decode && models.contains(&s.port)).count();
                c.eq("decode requests on a connection the server had closed", on_closed, 0);
                let decodes = o.seen.iter().filter(|s| s.decode).count();
                c.that(decodes >= 4, || format!("{decodes} decode requests, 4 streams"));
            }),
        }
    }

    /// vLLM's queue gauges with its prefix-cache counters (for a server whose `/metrics` then
    /// hangs).
    const GAUGES_AND_PREFIX_COUNTERS: &str = "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n\
        vllm:prefix_cache_queries_total 1000\nvllm:prefix_cache_hits_total 900\n";

    /// A server whose keep-alive timeout is shorter than the collector's pause before a cell:
    /// every connection idle when the collector reads `/metrics` after warming the cell's
    /// connections (and before its streams open) is reset (RST) — the warm connections answered
    /// on `GET /v1/models`, and that of the finished prefill probe (`Front::ResetIdle`). Each
    /// stream finds its connection gone and opens a new one: no stream is written to a reset
    /// connection, none fails.
    /// Load: the resets happen while the collector waits for that `/metrics` answer (1-s limit)
    /// and are delivered (loopback) before it, a few milliseconds of the front's work; the
    /// streams (2,000 tokens, 20 s) outlast the 1-s window, so no connection goes idle inside
    /// the cell.
    pub fn idle_connections_the_server_resets_are_never_written_to() -> Shape {
        Shape {
            rule: "connections the server reset while idle are never written to: each stream opens a new one",
            script: Script {
                front: Some(Front::ResetIdle),
                metrics: Some("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n".into()),
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 4 --prefill-contexts 256 --duration 1s --max-tokens 2000",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![is(CellStatus::Valid)],
            check: Some(|o, c| {
                let f = &o.front;
                // The 4 streams' idle connections: the finished probe's and 3 warmed beside it.
                let warm = f.resets.iter().filter(|(_, last)| last == "GET /v1/models").count();
                let probes = f.resets.iter().filter(|(_, last)| last.starts_with("POST /v1/")).count();
                c.that(warm + probes >= 4 && probes >= 1, || {
                    format!("{warm} warm and {probes} finished streams' connections reset, 4 streams: {:?}", f.resets)
                });
                let decodes: Vec<_> = f.requests.iter().filter(|r| r.decode).collect();
                c.eq("decode requests (4 opening streams, none replaced)", decodes.len(), 4);
                let reused: Vec<_> = decodes.iter().filter(|r| r.nth > 0).collect();
                c.that(reused.is_empty(), || format!("streams written to a connection used before: {reused:?}"));
                let cell = &o.results.decode[0];
                let errors: Vec<_> = cell.requests.iter().filter_map(|r| r.error.as_deref()).collect();
                c.that(errors.is_empty(), || format!("stream errors: {errors:?}"));
            }),
        }
    }

    /// The check of a cell whose decode requests the server closed unanswered: each such
    /// stream failed with the plain words (not "cannot reach", not hyper's own), none stalled,
    /// and the prefill row measured before stays in the file.
    fn closed_unanswered(o: &Outcome, c: &mut Checks) {
        let f = &o.front;
        c.that(!f.closed.is_empty(), || "no connection was closed on a decode request".into());
        c.that(o.results.prefill[0].ttft_ms.is_some(), || "the prefill row's TTFT is in the file".into());
        let cell = &o.results.decode[0];
        // The first failed stream fails the cell; the others are cancelled then.
        let errors: Vec<&str> = cell.requests.iter().filter_map(|r| r.error.as_deref()).collect();
        c.that(!errors.is_empty(), || "no request has an error".into());
        let plain = "closed the connection after the request without answering";
        let odd: Vec<&&str> = errors.iter().filter(|e| !e.contains(plain) || e.contains("cannot reach")).collect();
        c.that(odd.is_empty(), || format!("errors that do not say the server closed unanswered: {odd:?}"));
    }

    /// A server (or proxy) that reads every decode request and closes the connection without a
    /// byte of answer: each stream fails at once with that said in plain words (no hang, no
    /// panic), the cell is an error that says why, the run goes on to its end and the prefill
    /// row measured before stays in the file.
    /// Load: none — the closes are answers to the requests; the 30-s stall timeout is far off.
    pub fn a_server_that_closes_every_decode_request_unanswered_gives_error_cells_that_say_so() -> Shape {
        Shape {
            rule: "a decode request closed unanswered is an error that says so; the run and its earlier rows stand",
            script: Script { front: Some(Front::CloseOnDecode { every: true }), ..Script::default() },
            args: "--contexts 256 --concurrency 2 --prefill-contexts 256 --duration 1s --max-tokens 64 --stall-timeout 30s",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![with(CellStatus::Error, &["closed the connection after the request without answering"])],
            check: Some(closed_unanswered),
        }
    }

    /// The same on the first decode request of each connection only (a proxy that drops a
    /// connection's first request): every stream's request is its connection's first decode
    /// request — its warm connection's, or a new one's — so every one fails the same way.
    /// Load: none (as the row above).
    pub fn a_server_that_closes_each_connections_first_decode_request_gives_error_cells_that_say_so() -> Shape {
        Shape {
            rule: "a decode request closed unanswered is an error that says so; the run and its earlier rows stand",
            script: Script { front: Some(Front::CloseOnDecode { every: false }), ..Script::default() },
            args: "--contexts 256 --concurrency 2 --prefill-contexts 256 --duration 1s --max-tokens 64 --stall-timeout 30s",
            exit: EXIT_CELL_ERRORS,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![with(CellStatus::Error, &["closed the connection after the request without answering"])],
            check: Some(|o, c| {
                closed_unanswered(o, c);
                let warm: std::collections::HashSet<u16> =
                    o.front.requests.iter().filter(|r| r.line == "GET /v1/models").map(|r| r.port).collect();
                let on_warm = o.front.closed.iter().filter(|p| warm.contains(p)).count();
                c.that(on_warm >= 1, || "no warm connection carried a decode request".into());
            }),
        }
    }

    /// The check of a cell behind a proxy that closes every connection after one answer: every
    /// request came on a connection of its own, the streams that ended were replaced, and each
    /// completed stream counted the 24 tokens the script sent it.
    fn one_answer_per_connection(o: &Outcome, c: &mut Checks) {
        let f = &o.front;
        let again: Vec<_> = f.requests.iter().filter(|r| r.nth > 0).collect();
        c.that(again.is_empty(), || format!("requests on a connection that had answered before: {again:?}"));
        let decodes = f.requests.iter().filter(|r| r.decode).count();
        c.that(decodes > 2, || format!("{decodes} decode requests: the 2 streams were never replaced"));
        let cell = &o.results.decode[0];
        let errors: Vec<_> = cell.requests.iter().filter_map(|r| r.error.as_deref()).collect();
        c.that(errors.is_empty(), || format!("stream errors: {errors:?}"));
        let done: Vec<_> = cell.requests.iter().filter(|r| r.e2e_ms.is_some()).collect();
        c.that(done.len() >= 2, || format!("{} streams completed", done.len()));
        let miscounted: Vec<_> = done.iter().filter(|r| r.output_tokens != Some(24)).map(|r| r.output_tokens).collect();
        c.that(miscounted.is_empty(), || format!("completed streams whose count is not the 24 sent: {miscounted:?}"));
        c.eq("token count source", cell.token_count_source, Some(TokenCountSource::ContinuousUsage));
    }

    /// A server whose keep-alive timeout closes a warm connection just as a decode request
    /// arrives on it (llama.cpp's closes one idle for 5 s; a loaded machine can hold a warm
    /// connection that long): the request, closed on unanswered on a connection that had sat
    /// idle, is sent once more on a new connection, which is answered, so the cell is measured
    /// and no request has an error. A client that gave up on it (or one that sent it again on
    /// another warm connection) would fail the cell.
    /// Load: none — the closes are answers to the requests; counts only, the cell measured (not
    /// necessarily valid: 2 streams for 1 s).
    pub fn a_keep_alive_close_crossing_a_request_on_a_warm_connection_is_sent_again_on_a_new_one() -> Shape {
        Shape {
            rule: "a request closed unanswered on a connection that sat idle is sent once more, on a new connection",
            script: Script { front: Some(Front::CloseWarmOnDecode), ..Script::default() },
            args: "--contexts 256 --concurrency 2 --prefill-contexts 256 --duration 1s --max-tokens 64 --stall-timeout 30s",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured()],
            check: Some(|o, c| {
                let warm: std::collections::HashSet<u16> =
                    o.front.requests.iter().filter(|r| r.nth > 0 && r.decode).map(|r| r.port).collect();
                c.that(!o.front.closed.is_empty(), || "no warm connection was closed on a decode request".into());
                c.that(o.front.closed.iter().all(|p| warm.contains(p)), || {
                    format!("a connection was closed on its first request: {:?}", o.front.closed)
                });
                let cell = &o.results.decode[0];
                let errors: Vec<&str> = cell.requests.iter().filter_map(|r| r.error.as_deref()).collect();
                c.that(errors.is_empty(), || format!("requests with errors: {errors:?}"));
                let answered = cell.requests.iter().filter(|r| r.ttft_ms.is_some()).count();
                c.that(answered >= 2, || format!("{answered} requests answered in the cell"));
            }),
        }
    }

    /// An HTTP/1.0 proxy in front: every answer is `HTTP/1.0 200 OK`, `Connection: close`, no
    /// `Transfer-Encoding`, the event stream's end is the connection's close. Each stream is
    /// read to the close and counts the tokens sent; its connection is not used again (the next
    /// stream opens its own); the cell is measured (valid on a quiet machine).
    /// Load: the checks are counts; each 24-token stream (0.3 s) ends well inside its stall
    /// time. The status may be requests queued on a busy machine: the client view counts a
    /// replacement's turnaround (here with a connect in it) as not running, and short streams
    /// make it a large share — at load average 25 on 2 cores, 120 ms between a stream's end and
    /// its replacement's send (274 ms in a 2-s window) read as 1.9 of 2 streams running.
    pub fn an_http_1_0_proxy_closing_every_stream_is_read_to_its_close() -> Shape {
        Shape {
            rule: "HTTP/1.0 event streams delimited by a close are read to the close, one connection each",
            script: Script { front: Some(Front::Http10), ..Script::default() },
            args: "--contexts 256 --concurrency 2 --prefill-contexts 256 --duration 2s --max-tokens 24",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured()],
            check: Some(one_answer_per_connection),
        }
    }

    /// An HTTP/1.1 proxy that answers every request with `Connection: close` (chunked, then the
    /// close): as the row above.
    /// Load: as the row above (this row was the one seen requests queued at load average 25).
    pub fn a_proxy_answering_connection_close_every_time_gets_a_new_connection_per_stream() -> Shape {
        Shape {
            rule: "answers with Connection: close are read to their end; the next stream opens a new connection",
            script: Script { front: Some(Front::Close11), ..Script::default() },
            args: "--contexts 256 --concurrency 2 --prefill-contexts 256 --duration 2s --max-tokens 24",
            exit: 0,
            prefill: vec![is(CellStatus::Valid)],
            decode: vec![measured()],
            check: Some(one_answer_per_connection),
        }
    }

    /// A `/metrics` that answers discovery, then accepts and never answers, with prefix-share
    /// cells (`--prefix-share 0,90%`): the run keeps its plan's estimate (no wait on `/metrics`
    /// beyond its 1-s limit per reading), both cells are measured, and the 90 % cell's hit rate
    /// is null — no count at all, not 0 — with the reason in `missing`.
    /// Load: the estimate holds to 20 % by the collector's own clock (as the hung-`/metrics`
    /// row above).
    pub fn a_hung_metrics_with_a_prefix_share_cell_keeps_the_estimate_and_says_why_no_hit_rate() -> Shape {
        Shape {
            rule: "a hung /metrics holds no prefix-share cell: the estimate holds and the hit rate is null with why",
            script: Script {
                metrics: Some(GAUGES_AND_PREFIX_COUNTERS.into()),
                metrics_hang_after: Some(1),
                ..Script::default()
            },
            args: "--contexts 256 --concurrency 2 --prefill-contexts none --prefix-share 0,90% --duration 3s --max-tokens 2000",
            exit: 0,
            prefill: vec![],
            decode: vec![measured(), measured()],
            check: Some(|o, c| {
                within_estimate(o, c, "hung /metrics, prefix share");
                let shared: Vec<_> = o.results.decode.iter().filter(|d| d.prefix_share == Some(0.9)).collect();
                c.eq("cells at 90 %", shared.len(), 1);
                let Some(cell) = shared.first() else { return };
                let pc = cell.prefix_cache.as_ref();
                c.eq(
                    "hit rate and counts",
                    pc.map(|p| (p.measured_hit_rate, p.hit_rate_source, p.hit_tokens, p.query_tokens)),
                    Some((None, None, None, None)),
                );
                let why = cell.missing.iter().find(|m| m.figure == "prefix_cache.measured_hit_rate");
                let why = why.map(|m| m.reason.as_str()).unwrap_or_default();
                c.that(why.starts_with("no reading of the server's /metrics came during it"), || {
                    format!("missing says why the hit rate is null: {:?}", cell.missing)
                });
            }),
        }
    }
}
