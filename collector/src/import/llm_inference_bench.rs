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

use super::{dist, leftovers, pos, round3, s_to_ms, Source};
use serde_json::{json, Value};
use speedmatrix_schema::context::label;
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

fn need<'a>(v: &'a Value, name: &str, path: &str) -> Result<&'a Value, String> {
    v.pointer(path).ok_or_else(|| {
        format!(
            "{name}: no {} — is this llm-inference-bench's benchmark_results.json? (--from llm-inference-bench)",
            path.replace('/', ".")
        )
    })
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}

/// Convert one `benchmark_results.json`.
///
/// # Errors
/// One line naming the file and the missing field when the layout is not llm-inference-bench's.
pub fn convert(src: &Source, converted_by: &str) -> Result<Results, String> {
    let name = &src.name;
    let j = &src.json;
    let meta = need(j, name, "/metadata")?;
    let cells = need(j, name, "/results")?.as_array().ok_or(format!("{name}: results is not a list"))?;
    let mut contexts = u64s(need(j, name, "/metadata/context_lengths")?);
    let mut concurrency: Vec<u32> = u64s(need(j, name, "/metadata/concurrency_levels")?)
        .into_iter()
        .filter_map(|n| u32::try_from(n).ok())
        .collect();
    // Cells outside the metadata's lists still belong in the matrix.
    for c in cells {
        if let Some(t) = c.get("context_tokens").and_then(Value::as_u64) {
            contexts.push(t);
        }
        if let Some(n) = c.get("concurrency").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()) {
            concurrency.push(n);
        }
    }
    contexts.retain(|&c| c > 0);
    contexts.sort_unstable();
    contexts.dedup();
    concurrency.retain(|&n| n > 0);
    concurrency.sort_unstable();
    concurrency.dedup();
    let max_tokens = meta.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    let budget = meta.get("max_total_tokens").and_then(Value::as_u64).filter(|&b| b > 0);
    let ctx = |t: u64| ContextSize { label: label(t), tokens: t };
    let mut unmapped = Vec::new();
    let prefix = "";

    let mut decode = Vec::new();
    for &c in &contexts {
        for &n in &concurrency {
            let found = cells.iter().enumerate().find(|(_, x)| {
                x.get("context_tokens").and_then(Value::as_u64) == Some(c)
                    && x.get("concurrency").and_then(Value::as_u64) == Some(u64::from(n))
            });
            let cell = match found {
                Some((i, x)) => {
                    leftovers(prefix, &format!("$.results[{i}]"), x, CELL_MAPPED, &mut unmapped);
                    measured_cell(ctx(c), n, x)
                }
                None => planned_cell(ctx(c), n, max_tokens, budget),
            };
            decode.push(cell);
        }
    }

    let mut prefill = Vec::new();
    if let Some(p) = j.get("prefill").and_then(Value::as_object) {
        let mut rows: Vec<(u64, &Value)> = p.iter().filter_map(|(k, v)| Some((k.parse().ok()?, v))).collect();
        rows.sort_by_key(|r| r.0);
        for (t, v) in rows {
            leftovers(prefix, &format!("$.prefill.{t}"), v, PREFILL_MAPPED, &mut unmapped);
            let ttft = pos(v.get("ttft_seconds")).or_else(|| pos(v.get("client_ttft_seconds"))).map(s_to_ms);
            let tps = pos(v.get("tok_per_sec")).or_else(|| pos(v.get("client_tok_per_sec")));
            let row = json!({
                "context": ctx(t),
                "prompt_tokens": v.get("prompt_tokens").and_then(Value::as_u64),
                "status": if ttft.is_some() { "valid" } else { "not_run" },
                "reason": if ttft.is_some() { Value::Null } else { json!("no TTFT in the source") },
                "prompt_tps": tps,
                "ttft_ms": ttft,
                "completed_requests": v.get("samples").and_then(Value::as_u64),
            });
            prefill.push(serde_json::from_value::<PrefillRow>(row).map_err(|e| format!("{name}: prefill {t}: {e}"))?);
        }
    }

    leftovers(prefix, "$.metadata", meta, META_MAPPED, &mut unmapped);
    let top_mapped = ["metadata", "results", "prefill", "summary_table"];
    leftovers(prefix, "$", j, &top_mapped, &mut unmapped);
    if let Some(ts) = meta.get("timestamp").and_then(Value::as_str) {
        // `datetime.now().isoformat()`: local time without an offset, so not RFC 3339.
        if let Some(u) = unmapped.iter_mut().find(|u| u.field == "$.metadata.timestamp") {
            u.note = format!("{ts:?}: local time without a UTC offset, so not stored as started_at");
        }
    }

    let engine_name = match meta.get("engine").and_then(Value::as_str).map(str::to_ascii_lowercase) {
        Some(e) if e.contains("sglang") => "sglang".to_string(),
        Some(e) if e.contains("llama") => "llamacpp".to_string(),
        Some(e) if e.contains("vllm") => "vllm".to_string(),
        Some(e) if !e.is_empty() => e,
        _ => "openai".to_string(),
    };
    let prefill_mode = match meta.get("prefill_mode").and_then(Value::as_str) {
        Some("standalone_cold") => Some(PrefillMode::Separate),
        Some("integrated_decode_scout") => Some(PrefillMode::DecodeWarmup),
        _ => None,
    };
    let results = Results {
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
            name: engine_name,
            served_model_name: meta.get("model").and_then(Value::as_str).map(str::to_string),
            kv_budget_tokens: budget,
            ..Engine::default()
        },
        config: Config {
            contexts: contexts.iter().map(|&t| ctx(t)).collect(),
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
            prefill_mode,
            decode_test: match meta.get("decode_mode").and_then(Value::as_str) {
                Some("duration") => Some(DecodeTest::FixedDuration),
                Some("request-count") => Some(DecodeTest::FixedRequests),
                _ => None,
            },
            stall_timeout_s: None,
            not_run_contexts: vec![],
        },
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
    };
    Ok(results)
}

fn measured_cell(context: ContextSize, n: u32, x: &Value) -> DecodeCell {
    let f = |k: &str| pos(x.get(k));
    let ms = |k: &str| f(k).map(s_to_ms);
    let count = x.get("completed_request_count").and_then(Value::as_u64);
    // Values per distribution: the requests the tool summarised, when it says (never 0).
    let n_values = x.get("request_count").and_then(Value::as_u64).filter(|&c| c > 0);
    let errors = x.get("num_errors").and_then(Value::as_u64).unwrap_or(0);
    let queued = f("max_queue_reqs").is_some()
        || f("queue_fraction").is_some()
        || x.get("underfilled").and_then(Value::as_bool) == Some(true)
        || x.get("capacity_limited").and_then(Value::as_bool) == Some(true);
    let (status, reason) = if errors > 0 {
        ("error", Some(format!("{errors} failed requests (llm-inference-bench num_errors)")))
    } else if queued {
        ("requests_queued", Some("the source saw a server queue or an underfilled batch during the cell".to_string()))
    } else {
        ("valid", None)
    };
    let measured = status != "error";
    let d = |base: &str, to_ms: bool| {
        let g = |s: &str| if to_ms { ms(&format!("{base}_{s}")) } else { f(&format!("{base}_{s}")).map(round3) };
        dist(g("avg"), g("p50"), g("p90"), g("p99"), n_values)
    };
    let v = json!({
        "context": context,
        "prompt_tokens": f("input_seq_len_avg").map(|v| v.round() as u64),
        "concurrency": n,
        "status": status,
        "reason": reason,
        "window_s": f("measurement_seconds"),
        "total_tps": if measured { f("aggregate_tps") } else { None },
        "output_tokens": if measured { x.get("client_output_tokens").and_then(Value::as_u64) } else { None },
        "token_count_source": "reported",
        "ttft_ms": d("ttft", true),
        "itl_ms": d("inter_token_latency", true),
        "chunk_gap_ms": d("chunk_inter_token_latency", true),
        "e2e_ms": d("request_latency", true),
        "per_request_tps": d("output_tps_per_user", false),
        "completed_requests": count,
        "avg_active_requests": f("avg_running_reqs"),
        "max_active_requests": f("max_running_reqs"),
        "spec_accept_rate": f("server_spec_accept_rate").filter(|r| *r <= 1.0),
        "server": {
            "running_avg": f("avg_running_reqs"),
            "waiting_max": x.get("max_queue_reqs").and_then(Value::as_f64),
            "generation_tokens": x.get("server_output_tokens").and_then(Value::as_u64).filter(|&t| t > 0),
        },
    });
    serde_json::from_value(v).expect("the cell built above has the schema's shape")
}

fn planned_cell(context: ContextSize, n: u32, max_tokens: u64, budget: Option<u64>) -> DecodeCell {
    let cap = budget.and_then(|b| over_capacity(n, context.tokens, max_tokens, b));
    let (status, reason) = match &cap {
        Some(c) => (
            "over_capacity",
            format!("{} (rebuilt: llm-inference-bench leaves skipped cells out)", over_capacity_reason(c)),
        ),
        None => ("not_run", "not in the source's results: llm-inference-bench skipped it".to_string()),
    };
    let v = json!({ "context": context, "concurrency": n, "status": status, "reason": reason, "capacity": cap });
    serde_json::from_value(v).expect("the cell built above has the schema's shape")
}
