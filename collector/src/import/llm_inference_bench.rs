//! llm-inference-bench's `benchmark_results.json` (the tool behind the seed run): `metadata`
//! (version, engine, model, timestamp, duration_per_test, max_tokens, max_total_tokens,
//! concurrency_levels, context_lengths, …), `prefill` (per context: ttft_seconds,
//! tok_per_sec, prompt_tokens, samples, …), `results` (one object per measured decode cell:
//! concurrency, context_tokens, aggregate_tps, ttft_*/inter_token_latency_*/request_latency_*
//! in seconds, output_tps_per_user_*, queue figures, …) and `summary_table` (context →
//! concurrency → aggregate tok/s, a copy of `results`).
//!
//! The tool leaves out the cells it skipped (over its KV budget): they are rebuilt from
//! `metadata.context_lengths × concurrency_levels` as planned, not measured — over capacity
//! when N × (C + max_tokens) exceeds `max_total_tokens`, else not run.

use super::{dist, leftovers, non_negative, pos, s_to_ms, ImportError, Source};
use crate::cli::ImportFrom;
use serde_json::Value;
use speedmatrix_schema::context::size;
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::status::{over_capacity, over_capacity_reason};
use speedmatrix_schema::*;

/// Fields of a `results[]` cell that map (the rest is listed as unmapped).
const CELL_MAPPED: &[&str] = &[
    "concurrency",
    "context_tokens",
    "benchmark_mode",
    "measurement_seconds",
    "client_output_tokens",
    "aggregate_tps",
    "ttft_avg",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "request_latency_avg",
    "request_latency_p50",
    "request_latency_p90",
    "request_latency_p99",
    "inter_token_latency_avg",
    "inter_token_latency_p50",
    "inter_token_latency_p90",
    "inter_token_latency_p99",
    "chunk_inter_token_latency_avg",
    "chunk_inter_token_latency_p50",
    "chunk_inter_token_latency_p90",
    "chunk_inter_token_latency_p99",
    "output_tps_per_user_avg",
    "output_tps_per_user_p50",
    "output_tps_per_user_p90",
    "output_tps_per_user_p99",
    "input_seq_len_avg",
    "request_count",
    "completed_request_count",
    "num_errors",
    "server_spec_accept_rate",
    "avg_running_reqs",
    "max_running_reqs",
    "max_queue_reqs",
    "avg_queue_reqs",
    "queue_fraction",
    "underfilled",
    "capacity_limited",
    "server_output_tokens",
];

const META_MAPPED: &[&str] = &[
    "version",
    "engine",
    "model",
    "duration_per_test",
    "max_tokens",
    "ignore_eos",
    "max_total_tokens",
    "concurrency_levels",
    "context_lengths",
    "prefill_mode",
    "decode_mode",
];

const PREFILL_MAPPED: &[&str] =
    &["ttft_seconds", "tok_per_sec", "prompt_tokens", "samples", "client_ttft_seconds", "client_tok_per_sec"];

/// The value at `path` (`/metadata`), or the error saying the file is of another format.
fn need<'a>(v: &'a Value, name: &str, path: &str) -> Result<&'a Value, ImportError> {
    v.pointer(path).ok_or_else(|| ImportError::NotTheFormat {
        name: name.to_string(),
        field: path.replace('/', "."),
        from: ImportFrom::LlmInferenceBench,
    })
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}

/// Convert one `benchmark_results.json`.
///
/// # Errors
/// [`ImportError`] naming the file and the field when the layout is not llm-inference-bench's
/// or a figure is damaged.
pub fn convert(src: &Source, converted_by: &str) -> Result<Results, ImportError> {
    let name = &src.name;
    let j = &src.json;
    let meta = need(j, name, "/metadata")?;
    let cells = need(j, name, "/results")?.as_array().ok_or_else(|| ImportError::WrongType {
        name: name.clone(),
        field: "results".into(),
        expected: "a list",
    })?;
    let mut unmapped = Vec::new();
    let (contexts, concurrency) = matrix_shape(j, name, cells)?;
    let max_tokens = meta.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    let budget = meta.get("max_total_tokens").and_then(Value::as_u64).filter(|&b| b > 0);
    let mut decode = Vec::new();
    for &c in &contexts {
        for &n in &concurrency {
            let found = cells.iter().enumerate().find(|(_, x)| {
                x.get("context_tokens").and_then(Value::as_u64) == Some(c)
                    && x.get("concurrency").and_then(Value::as_u64) == Some(u64::from(n))
            });
            decode.push(match found {
                Some((i, x)) => {
                    leftovers("", &format!("$.results[{i}]"), x, CELL_MAPPED, &mut unmapped);
                    measured_cell(name, size(c), n, x)?
                }
                None => planned_cell(size(c), n, max_tokens, budget),
            });
        }
    }
    let prefill = prefill_rows(j, &mut unmapped);
    leftovers("", "$.metadata", meta, META_MAPPED, &mut unmapped);
    leftovers("", "$", j, &["metadata", "results", "prefill", "summary_table"], &mut unmapped);
    if let Some(ts) = meta.get("timestamp").and_then(Value::as_str) {
        // `datetime.now().isoformat()`: local time without an offset, so not RFC 3339.
        if let Some(u) = unmapped.iter_mut().find(|u| u.field == "$.metadata.timestamp") {
            u.note = format!("{ts:?}: local time without a UTC offset, so not stored as started_at");
        }
    }
    Ok(Results {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "llm-inference-bench".into(),
            version: meta.get("version").and_then(Value::as_str).unwrap_or("unknown").into(),
            converted_by: Some(converted_by.into()),
        },
        run: RunInfo {
            id: format!("import-{}", name.trim_end_matches(".json")),
            started_at: None,
            finished_at: None,
            status: RunStatus::Complete,
            reason: None,
            label: None,
            notes: Some(format!("imported from llm-inference-bench's {name}")),
        },
        hardware: Hardware::default(),
        engine: Engine {
            name: engine_name(meta),
            served_model_name: meta.get("model").and_then(Value::as_str).map(str::to_string),
            kv_budget_tokens: budget,
            ..Engine::default()
        },
        config: config(meta, &contexts, concurrency, &prefill),
        prefill,
        decode,
        telemetry: None,
        missing: vec![
            MissingFigure {
                figure: "requests".into(),
                reason: "llm-inference-bench stores summaries, not per-request samples in this layout".into(),
            },
            MissingFigure { figure: "hardware".into(), reason: "not in benchmark_results.json".into() },
        ],
        import: Some(ImportInfo { format: "llm-inference-bench".into(), files: vec![name.clone()], unmapped }),
    })
}

/// The matrix's contexts and concurrency levels: the metadata's lists and any cell outside them
/// (cells outside the lists still belong in the matrix), sorted.
fn matrix_shape(j: &Value, name: &str, cells: &[Value]) -> Result<(Vec<u64>, Vec<u32>), ImportError> {
    let mut contexts = u64s(need(j, name, "/metadata/context_lengths")?);
    let mut concurrency: Vec<u32> = u64s(need(j, name, "/metadata/concurrency_levels")?)
        .into_iter()
        .filter_map(|n| u32::try_from(n).ok())
        .collect();
    for c in cells {
        contexts.extend(c.get("context_tokens").and_then(Value::as_u64));
        concurrency.extend(c.get("concurrency").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()));
    }
    contexts.retain(|&c| c > 0);
    contexts.sort_unstable();
    contexts.dedup();
    concurrency.retain(|&n| n > 0);
    concurrency.sort_unstable();
    concurrency.dedup();
    Ok((contexts, concurrency))
}

/// The `prefill` rows (by context, ascending); a row without a TTFT is `not_run`.
fn prefill_rows(j: &Value, unmapped: &mut Vec<UnmappedField>) -> Vec<PrefillRow> {
    let Some(p) = j.get("prefill").and_then(Value::as_object) else { return vec![] };
    let mut rows: Vec<(u64, &Value)> = p.iter().filter_map(|(k, v)| Some((k.parse().ok()?, v))).collect();
    rows.sort_by_key(|r| r.0);
    rows.into_iter()
        .map(|(t, v)| {
            leftovers("", &format!("$.prefill.{t}"), v, PREFILL_MAPPED, unmapped);
            let ttft = pos(v.get("ttft_seconds")).or_else(|| pos(v.get("client_ttft_seconds"))).map(s_to_ms);
            let mut row = match ttft {
                Some(_) => PrefillRow::new(size(t), CellStatus::Valid, None),
                None => PrefillRow::new(size(t), CellStatus::NotRun, Some("no TTFT in the source".into())),
            };
            row.prompt_tokens = v.get("prompt_tokens").and_then(Value::as_u64);
            row.prompt_tps = pos(v.get("tok_per_sec")).or_else(|| pos(v.get("client_tok_per_sec")));
            row.ttft_ms = ttft;
            row.completed_requests = v.get("samples").and_then(Value::as_u64);
            row
        })
        .collect()
}

/// `engine.name` from `metadata.engine`.
fn engine_name(meta: &Value) -> String {
    match meta.get("engine").and_then(Value::as_str).map(str::to_ascii_lowercase) {
        Some(e) if e.contains("sglang") => "sglang".to_string(),
        Some(e) if e.contains("llama") => "llamacpp".to_string(),
        Some(e) if e.contains("vllm") => "vllm".to_string(),
        Some(e) if !e.is_empty() => e,
        _ => "openai".to_string(),
    }
}

/// The run's `config` from the metadata and the matrix.
fn config(meta: &Value, contexts: &[u64], concurrency: Vec<u32>, prefill: &[PrefillRow]) -> Config {
    let max_tokens = meta.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    Config {
        contexts: contexts.iter().map(|&t| size(t)).collect(),
        concurrency,
        prefill_contexts: prefill.iter().map(|p| p.context.clone()).collect(),
        window_s: pos(meta.get("duration_per_test")).unwrap_or(0.0),
        max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
        endpoint: None,
        ignore_eos: meta.get("ignore_eos").and_then(Value::as_bool),
        temperature: None,
        seed: None,
        prompt_corpus: None,
        prompt_sharing: None,
        prefill_mode: match meta.get("prefill_mode").and_then(Value::as_str) {
            Some("standalone_cold") => Some(PrefillMode::Separate),
            Some("integrated_decode_scout") => Some(PrefillMode::DecodeWarmup),
            _ => None,
        },
        decode_test: match meta.get("decode_mode").and_then(Value::as_str) {
            Some("duration") => Some(DecodeTest::FixedDuration),
            Some("request-count") => Some(DecodeTest::FixedRequests),
            _ => None,
        },
        stall_timeout_s: None,
        not_run_contexts: vec![],
        server_url: None,
    }
}

/// The status of a measured cell: error when requests failed, requests queued when the tool saw
/// a queue or an underfilled batch, else valid.
fn measured_status(x: &Value) -> (CellStatus, Option<String>) {
    let errors = x.get("num_errors").and_then(Value::as_u64).unwrap_or(0);
    let queued = pos(x.get("max_queue_reqs")).is_some()
        || pos(x.get("queue_fraction")).is_some()
        || x.get("underfilled").and_then(Value::as_bool) == Some(true)
        || x.get("capacity_limited").and_then(Value::as_bool) == Some(true);
    if errors > 0 {
        (CellStatus::Error, Some(format!("{errors} failed requests (llm-inference-bench num_errors)")))
    } else if queued {
        (
            CellStatus::RequestsQueued,
            Some("the source saw a server queue or an underfilled batch during the cell".to_string()),
        )
    } else {
        (CellStatus::Valid, None)
    }
}

/// A `results[]` cell. Figures in seconds become ms; 0 means "not measured".
fn measured_cell(name: &str, context: ContextSize, n: u32, x: &Value) -> Result<DecodeCell, ImportError> {
    let f = |k: &str| pos(x.get(k));
    let (status, reason) = measured_status(x);
    let measured = status != CellStatus::Error;
    // Values per distribution: the requests the tool summarised, when it says (never 0).
    let n_values = x.get("request_count").and_then(Value::as_u64).filter(|&c| c > 0);
    let d = |base: &str, to_ms: bool| {
        let g = |s: &str| f(&format!("{base}_{s}")).map(|v| if to_ms { s_to_ms(v) } else { round3(v) });
        dist(g("avg"), g("p50"), g("p90"), g("p99"), n_values)
    };
    let mut cell = DecodeCell::new(context, n, status, reason);
    cell.prompt_tokens = f("input_seq_len_avg").map(|v| v.round() as u64);
    cell.window_s = f("measurement_seconds");
    cell.total_tps = f("aggregate_tps").filter(|_| measured);
    cell.output_tokens = x.get("client_output_tokens").and_then(Value::as_u64).filter(|_| measured);
    cell.token_count_source = Some(TokenCountSource::Reported);
    cell.ttft_ms = d("ttft", true);
    cell.itl_ms = d("inter_token_latency", true);
    cell.chunk_gap_ms = d("chunk_inter_token_latency", true);
    cell.e2e_ms = d("request_latency", true);
    cell.per_request_tps = d("output_tps_per_user", false);
    cell.completed_requests = x.get("completed_request_count").and_then(Value::as_u64);
    cell.avg_active_requests = f("avg_running_reqs");
    cell.max_active_requests = f("max_running_reqs");
    cell.spec_accept_rate = f("server_spec_accept_rate").filter(|r| *r <= 1.0);
    let server = ServerFigures {
        running_avg: f("avg_running_reqs"),
        waiting_max: non_negative(name, x, "max_queue_reqs")?,
        generation_tokens: x.get("server_output_tokens").and_then(Value::as_u64).filter(|&t| t > 0),
        ..ServerFigures::default()
    };
    cell.server = (server != ServerFigures::default()).then_some(server);
    Ok(cell)
}

/// A cell the tool left out, rebuilt as planned: over capacity when N × (C + max_tokens)
/// exceeds its budget, else not run.
fn planned_cell(context: ContextSize, n: u32, max_tokens: u64, budget: Option<u64>) -> DecodeCell {
    match budget.and_then(|b| over_capacity(n, context.tokens, max_tokens, b)) {
        Some(cap) => {
            let why = format!("{} (rebuilt: llm-inference-bench leaves skipped cells out)", over_capacity_reason(&cap));
            let mut cell = DecodeCell::new(context, n, CellStatus::OverCapacity, Some(why));
            cell.capacity = Some(cap);
            cell
        }
        None => DecodeCell::new(
            context,
            n,
            CellStatus::NotRun,
            Some("not in the source's results: llm-inference-bench skipped it".into()),
        ),
    }
}
