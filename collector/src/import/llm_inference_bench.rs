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

use super::{dist, leftovers, non_negative, pos, run_id, s_to_ms, ImportError, Source};
use crate::cli::ImportFrom;
use serde_json::Value;
use speedmatrix_schema::context::{label, size};
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
    let max_tokens = meta.get("max_tokens").and_then(Value::as_u64).filter(|&m| m > 0);
    let budget = meta.get("max_total_tokens").and_then(Value::as_u64).filter(|&b| b > 0);
    let mut decode = Vec::new();
    let mut used = vec![false; cells.len()];
    for &c in &contexts {
        for &n in &concurrency {
            let found = cells.iter().enumerate().find(|(_, x)| {
                x.get("context_tokens").and_then(Value::as_u64) == Some(c)
                    && x.get("concurrency").and_then(Value::as_u64) == Some(u64::from(n))
            });
            decode.push(match found {
                Some((i, x)) => {
                    used[i] = true;
                    leftovers("", &format!("$.results[{i}]"), x, CELL_MAPPED, &mut unmapped);
                    measured_cell(name, size(c), n, x)?
                }
                None => planned_cell(size(c), n, max_tokens, budget),
            });
        }
    }
    unplaced(cells, &used, &mut unmapped);
    let prefill = prefill_rows(j, &mut unmapped);
    leftovers("", "$.metadata", meta, META_MAPPED, &mut unmapped);
    leftovers("", "$", j, &["metadata", "results", "prefill", "summary_table"], &mut unmapped);
    if let Some(ts) = meta.get("timestamp").and_then(Value::as_str) {
        // `datetime.now().isoformat()`: local time without an offset, so not RFC 3339.
        if let Some(u) = unmapped.iter_mut().find(|u| u.field == "$.metadata.timestamp") {
            u.note = format!("{ts:?}: local time without a UTC offset, so not stored as started_at");
        }
    }
    let config = config(meta, &contexts, concurrency, &prefill);
    let engine = Engine {
        name: engine_name(meta),
        served_model_name: meta.get("model").and_then(Value::as_str).map(str::to_string),
        kv_budget_tokens: budget,
        ..Engine::default()
    };
    let tool_version = meta.get("version").and_then(Value::as_str).map(str::to_string);
    let missing = missing(&engine, tool_version.is_some(), &config);
    Ok(Results {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "llm-inference-bench".into(),
            version: tool_version,
            converted_by: Some(converted_by.into()),
        },
        run: RunInfo {
            id: run_id("llm-inference-bench", std::slice::from_ref(src)),
            started_at: None,
            finished_at: None,
            status: RunStatus::Complete,
            reason: None,
            label: None,
            notes: Some(format!("imported from llm-inference-bench's {name}")),
        },
        hardware: Hardware::default(),
        engine,
        config,
        prefill,
        decode,
        rates: vec![],
        rate_at_slo: vec![],
        traces: vec![],
        conversations: vec![],
        client: None,
        missing,
        import: Some(ImportInfo { format: "llm-inference-bench".into(), files: vec![name.clone()], unmapped }),
    })
}

/// What the import lacks: per-request samples and hardware always, and the engine, the tool's
/// version, the window and `max_tokens` when the metadata does not give them.
fn missing(engine: &Engine, has_version: bool, config: &Config) -> Vec<MissingFigure> {
    let mut missing = vec![
        MissingFigure {
            figure: "requests".into(),
            reason: "llm-inference-bench stores summaries, not per-request samples in this layout".into(),
        },
        MissingFigure { figure: "hardware".into(), reason: "not in benchmark_results.json".into() },
    ];
    for (gone, figure, what) in [
        (engine.name.is_none(), "engine.name", "metadata.engine"),
        (!has_version, "tool.version", "metadata.version"),
        (config.window_s.is_none(), "config.window_s", "metadata.duration_per_test"),
        (config.max_tokens.is_none(), "config.max_tokens", "metadata.max_tokens"),
    ] {
        if gone {
            missing
                .push(MissingFigure { figure: figure.into(), reason: format!("no {what} in the source's metadata") });
        }
    }
    missing
}

/// Nothing vanishes silently: a result without its cell's keys, or a second one for a cell, is
/// listed as not imported.
fn unplaced(cells: &[Value], used: &[bool], unmapped: &mut Vec<UnmappedField>) {
    for (i, x) in cells.iter().enumerate().filter(|(i, _)| !used[*i]) {
        let key = |k: &str| x.get(k).and_then(Value::as_u64);
        let note = match (key("context_tokens"), key("concurrency")) {
            (Some(c), Some(n)) => format!("not imported: a second result for {} × {n}; the first is kept", label(c)),
            _ => "not imported: no context_tokens and concurrency (integers) to place it in the matrix".to_string(),
        };
        unmapped.push(UnmappedField { field: format!("$.results[{i}]"), note });
    }
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
    // A context of 0 tokens is the tool's decode test without context: a row like any other.
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

/// `engine.name` from `metadata.engine`; `None` when the metadata does not say.
fn engine_name(meta: &Value) -> Option<String> {
    match meta.get("engine").and_then(Value::as_str).map(str::to_ascii_lowercase) {
        Some(e) if e.contains("sglang") => Some("sglang".to_string()),
        Some(e) if e.contains("llama") => Some("llamacpp".to_string()),
        Some(e) if e.contains("vllm") => Some("vllm".to_string()),
        Some(e) if !e.is_empty() => Some(e),
        _ => None,
    }
}

/// The run's `config` from the metadata and the matrix.
fn config(meta: &Value, contexts: &[u64], concurrency: Vec<u32>, prefill: &[PrefillRow]) -> Config {
    let max_tokens = meta.get("max_tokens").and_then(Value::as_u64).filter(|&m| m > 0);
    Config {
        contexts: contexts.iter().map(|&t| size(t)).collect(),
        concurrency,
        prefill_contexts: prefill.iter().map(|p| p.context.clone()).collect(),
        window_s: pos(meta.get("duration_per_test")),
        max_tokens: max_tokens.map(|m| u32::try_from(m).unwrap_or(u32::MAX)),
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
        repeats: None,
        rates: vec![],
        rate_slo: None,
        rate_search: false,
        rate_keep_going: false,
        trace: None,
        prefix_shares: vec![],
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
    // The tool summarises per-request figures over its requests; ITL and chunk gaps are over
    // tokens and chunks, whose number it does not give.
    let d = |base: &str, to_ms: bool, count: Option<u64>| {
        let g = |s: &str| f(&format!("{base}_{s}")).map(|v| if to_ms { s_to_ms(v) } else { round3(v) });
        dist(g("avg"), g("p50"), g("p90"), g("p99"), count)
    };
    let mut cell = DecodeCell::new(context, n, status, reason);
    cell.prompt_tokens = f("input_seq_len_avg").map(|v| v.round() as u64);
    cell.window_s = f("measurement_seconds");
    cell.total_tps = f("aggregate_tps").filter(|_| measured);
    cell.output_tokens = x.get("client_output_tokens").and_then(Value::as_u64).filter(|_| measured);
    cell.token_count_source = Some(TokenCountSource::Reported);
    cell.ttft_ms = d("ttft", true, n_values);
    cell.itl_ms = d("inter_token_latency", true, None);
    cell.chunk_gap_ms = d("chunk_inter_token_latency", true, None);
    cell.e2e_ms = d("request_latency", true, n_values);
    cell.per_request_tps = d("output_tps_per_user", false, n_values);
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
/// exceeds its budget, else not run (and without max_tokens its KV need is unknown).
fn planned_cell(context: ContextSize, n: u32, max_tokens: Option<u64>, budget: Option<u64>) -> DecodeCell {
    match budget.zip(max_tokens).and_then(|(b, m)| over_capacity(n, context.tokens, m, b)) {
        Some(cap) => {
            let why = format!("{} (rebuilt: llm-inference-bench leaves skipped cells out)", over_capacity_reason(&cap));
            let mut cell = DecodeCell::new(context, n, CellStatus::OverCapacity, Some(why));
            cell.capacity = Some(cap);
            cell
        }
        None if budget.is_some() && max_tokens.is_none() => DecodeCell::new(
            context,
            n,
            CellStatus::NotRun,
            Some(
                "not in the source's results: llm-inference-bench skipped it (without max_tokens its KV need is unknown)"
                    .into(),
            ),
        ),
        None => DecodeCell::new(
            context,
            n,
            CellStatus::NotRun,
            Some("not in the source's results: llm-inference-bench skipped it".into()),
        ),
    }
}
