//! `vllm bench serve --save-result` files (vllm/benchmarks/serve.py): one file per run of the
//! client at one `--max-concurrency`, so each file becomes one matrix column. Fields used:
//! `date`, `backend`, `label`, `model_id`, `max_concurrency`, `duration` (s), `completed`,
//! `failed`, `total_input_tokens`, `total_output_tokens`, `output_throughput` (tok/s over the
//! whole benchmark), `max_concurrent_requests`, `input_lens`, `output_lens`, `ttfts` (s),
//! `errors`, and the summaries `mean_/median_/std_/pNN_{ttft,tpot,itl,e2el}_ms`.
//!
//! The row (context) is the requests' mean input length. `vllm bench serve` has no
//! measurement window (its throughput includes ramp-up and drain) and no queue evidence: both
//! are listed in `missing`.
//!
//! A file in which no request completed (`completed: 0`) becomes an `error` cell ("all 8
//! requests failed: …") without figures. A negative figure or percentiles out of order
//! (`median_ttft_ms` above `p99_ttft_ms`, a percentile outside the `ttfts`) make the file bad
//! input, named with the field: such a file is damaged, and dropping one figure would hide it.

use super::{leftovers, round3, s_to_ms, Source};
use serde_json::{json, Value};
use speedmatrix_schema::context::label;
use speedmatrix_schema::*;

const MAPPED: &[&str] = &[
    "backend",
    "label",
    "model_id",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "output_throughput",
    "max_concurrent_requests",
    "input_lens",
    "output_lens",
    "ttfts",
    "errors",
];

const METRICS: [(&str, &str); 4] = [("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2el", "e2e_ms")];

/// The number at `k` of the file `name`: `None` when absent or not a number; an error naming
/// the file and field when it is negative (durations, rates and counts are ≥ 0).
fn num(name: &str, v: &Value, k: &str) -> Result<Option<f64>, String> {
    match v.get(k).and_then(Value::as_f64) {
        Some(x) if x < 0.0 || x.is_sign_negative() => Err(format!(
            "{name}: {k} is {x}; durations, throughputs and counts cannot be negative — the file is damaged"
        )),
        x => Ok(x.filter(|x| x.is_finite())),
    }
}

/// The summary of one latency metric: `mean_X_ms`, `median_X_ms`, `p90_X_ms`, `p99_X_ms`
/// (whichever `--metric-percentiles` wrote), and for TTFT the exact min/max of the per-request
/// `ttfts` (s). Returns the distribution and the keys used.
///
/// # Errors
/// A negative figure or percentiles out of order (e.g. `median_ttft_ms` above `p99_ttft_ms`),
/// naming the file and the fields.
fn summary(
    name: &str,
    v: &Value,
    metric: &str,
    count: Option<u64>,
) -> Result<(Option<Distribution>, Vec<String>), String> {
    let key = |p: &str| format!("{p}_{metric}_ms");
    let mut used = vec![key("mean"), key("median"), key("std")];
    let p = |n: &str| num(name, v, &key(n)).map(|x| x.map(round3));
    let median_key = if p("median")?.is_some() { key("median") } else { key("p50") };
    let mut d = Distribution {
        mean: p("mean")?,
        p50: p("median")?.or(p("p50")?),
        p90: p("p90")?,
        p99: p("p99")?,
        min: None,
        max: None,
        count,
    };
    for n in ["p50", "p90", "p99"] {
        used.push(key(n));
    }
    if d.mean.is_none() && d.p50.is_none() {
        return Ok((None, used));
    }
    if metric == "ttft" {
        // Exact extremes from the per-request TTFTs when the file has them.
        let t: Vec<f64> = v
            .get("ttfts")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        if let Some(x) = t.iter().find(|x| **x < 0.0) {
            return Err(format!("{name}: ttfts holds {x}; a time to first token cannot be negative"));
        }
        if !t.is_empty() {
            d.min = t.iter().copied().reduce(f64::min).map(s_to_ms);
            d.max = t.iter().copied().reduce(f64::max).map(s_to_ms);
        }
    }
    let ordered = [
        ("the smallest of ttfts".to_string(), d.min),
        (median_key, d.p50),
        (key("p90"), d.p90),
        (key("p99"), d.p99),
        ("the largest of ttfts".to_string(), d.max),
    ];
    let present: Vec<(&String, f64)> = ordered.iter().filter_map(|(k, x)| x.map(|x| (k, x))).collect();
    for w in present.windows(2) {
        if w[0].1 > w[1].1 {
            return Err(format!(
                "{name}: {} ({}) is above {} ({}); percentiles must rise — the file is inconsistent",
                w[0].0, w[0].1, w[1].0, w[1].1
            ));
        }
    }
    if let (Some(mean), Some(lo), Some(hi)) = (d.mean, d.min, d.max) {
        if mean < lo || mean > hi {
            return Err(format!("{name}: {} ({mean}) lies outside the ttfts ({lo}…{hi} ms)", key("mean")));
        }
    }
    Ok((Some(d), used))
}

/// Convert one or more `--save-result` files (one per concurrency).
///
/// # Errors
/// One line naming the file and what is missing when a file is not `vllm bench serve`'s.
pub fn convert(sources: &[Source], converted_by: &str) -> Result<Results, String> {
    if sources.is_empty() {
        return Err("no files to import".into());
    }
    let mut cells = Vec::new();
    let mut unmapped = Vec::new();
    let mut model = None;
    let mut label_ = None;
    let mut max_out = 0u64;
    let mut window: f64 = 0.0;
    for s in sources {
        let v = &s.json;
        let name = &s.name;
        let completed = v.get("completed").and_then(Value::as_u64).ok_or_else(|| {
            format!("{name}: no completed — is this a `vllm bench serve --save-result` file? (--from vllm-bench)")
        })?;
        let n = v
            .get("max_concurrency")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                format!("{name}: max_concurrency is null — the benchmark ran without --max-concurrency, so it has no matrix column")
            })?;
        let input_lens: Vec<u64> = v
            .get("input_lens")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let mean_in = if input_lens.is_empty() {
            v.get("total_input_tokens").and_then(Value::as_u64).map(|t| t / completed.max(1))
        } else {
            Some(input_lens.iter().sum::<u64>() / input_lens.len() as u64)
        }
        .filter(|&t| t > 0)
        .ok_or_else(|| format!("{name}: neither input_lens nor total_input_tokens: no context for the row"))?;
        let outs: Vec<u64> = v
            .get("output_lens")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        max_out = max_out.max(outs.iter().copied().max().unwrap_or_else(|| {
            v.get("total_output_tokens").and_then(Value::as_u64).map_or(0, |t| t / completed.max(1))
        }));
        let duration = num(name, v, "duration")?;
        window = window.max(duration.unwrap_or(0.0));
        model = model.or_else(|| v.get("model_id").and_then(Value::as_str).map(str::to_string));
        label_ =
            label_.or_else(|| v.get("label").and_then(Value::as_str).filter(|l| !l.is_empty()).map(str::to_string));

        let mut used: Vec<String> = MAPPED.iter().map(|s| s.to_string()).collect();
        let mut figures = serde_json::Map::new();
        for (metric, field) in METRICS {
            let (d, keys) = summary(name, v, metric, Some(completed))?;
            used.extend(keys);
            // With no request completed there is nothing to summarise (vllm writes 0s).
            if let Some(d) = d.filter(|_| completed > 0) {
                figures.insert(field.into(), serde_json::to_value(d).map_err(|e| e.to_string())?);
            }
        }
        let failed = v.get("failed").and_then(Value::as_u64).unwrap_or(0);
        let first_error = v
            .get("errors")
            .and_then(Value::as_array)
            .and_then(|e| e.iter().filter_map(Value::as_str).find(|s| !s.is_empty()))
            .map(|e| e.chars().take(200).collect::<String>());
        let (status, reason) = if completed == 0 {
            let why = if failed > 0 { format!("all {failed} requests failed") } else { "no request completed".into() };
            ("error", Some(format!("{why}{}", first_error.map(|e| format!(": {e}")).unwrap_or_default())))
        } else if failed > 0 {
            (
                "error",
                Some(format!(
                    "{failed} of {} requests failed{}",
                    failed + completed,
                    first_error.map(|e| format!(": {e}")).unwrap_or_default()
                )),
            )
        } else {
            ("valid", None)
        };
        let ok = failed == 0;
        let total_tps = num(name, v, "output_throughput")?;
        let max_active = num(name, v, "max_concurrent_requests")?;
        let mut cell = json!({
            "context": ContextSize { label: label(mean_in), tokens: mean_in },
            "prompt_tokens": mean_in,
            "concurrency": n,
            "status": status,
            "reason": reason,
            "window_s": if completed > 0 { duration } else { None },
            "total_tps": if ok { total_tps.map(round3) } else { None },
            "output_tokens": if ok { v.get("total_output_tokens").and_then(Value::as_u64) } else { None },
            "token_count_source": "reported",
            "completed_requests": (completed > 0).then_some(completed),
            "max_active_requests": if completed > 0 { max_active } else { None },
        });
        if let Some(obj) = cell.as_object_mut() {
            obj.extend(figures);
        }
        let cell: DecodeCell = serde_json::from_value(cell).map_err(|e| format!("{name}: {e}"))?;
        if cells.iter().any(|c: &DecodeCell| c.concurrency == n && c.context.tokens == mean_in) {
            return Err(format!("{name}: a second file for {} × {n}; give one file per cell", label(mean_in)));
        }
        let used: Vec<&str> = used.iter().map(String::as_str).collect();
        let prefix = if sources.len() > 1 { format!("{name}: ") } else { String::new() };
        leftovers(&prefix, "$", v, &used, &mut unmapped);
        cells.push(cell);
    }
    // A full matrix: every (context, concurrency) pair, the ones without a file not run.
    let mut contexts: Vec<u64> = cells.iter().map(|c| c.context.tokens).collect();
    contexts.sort_unstable();
    contexts.dedup();
    let mut concurrency: Vec<u32> = cells.iter().map(|c| c.concurrency).collect();
    concurrency.sort_unstable();
    concurrency.dedup();
    let mut decode = Vec::new();
    for &t in &contexts {
        for &n in &concurrency {
            match cells.iter().position(|c| c.context.tokens == t && c.concurrency == n) {
                Some(i) => decode.push(cells[i].clone()),
                None => decode.push(
                    serde_json::from_value(json!({
                        "context": ContextSize { label: label(t), tokens: t },
                        "concurrency": n,
                        "status": "not_run",
                        "reason": "no vllm bench serve file for this cell",
                    }))
                    .map_err(|e| e.to_string())?,
                ),
            }
        }
    }
    let files: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    Ok(Results {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        tool: Tool { name: "vllm bench serve".into(), version: "unknown".into(), converted_by: Some(converted_by.into()) },
        run: RunInfo {
            id: format!("import-{}", files[0].trim_end_matches(".json")),
            started_at: None,
            finished_at: None,
            status: RunStatus::Complete,
            reason: None,
            label: label_,
            notes: Some(format!("imported from vllm bench serve: {}", files.join(", "))),
        },
        hardware: Hardware::default(),
        engine: Engine { name: "vllm".into(), model: model.clone(), served_model_name: model, ..Engine::default() },
        config: Config {
            contexts: contexts.iter().map(|&t| ContextSize { label: label(t), tokens: t }).collect(),
            concurrency,
            prefill_contexts: vec![],
            window_s: round3(window),
            max_tokens: u32::try_from(max_out).unwrap_or(u32::MAX),
            endpoint: None,
            ignore_eos: None,
            temperature: None,
            seed: None,
            prompt_corpus: None,
            prompt_sharing: None,
            prefill_mode: None,
            decode_test: Some(DecodeTest::FixedRequests),
            stall_timeout_s: None,
            not_run_contexts: vec![],
        },
        prefill: vec![],
        decode,
        telemetry: None,
        missing: vec![
            MissingFigure {
                figure: "window".into(),
                reason: "vllm bench serve sends a fixed number of requests: total tok/s (output_throughput) covers ramp-up and drain, not a steady window".into(),
            },
            MissingFigure { figure: "status.requests_queued".into(), reason: "vllm bench serve records no server queue evidence".into() },
            MissingFigure { figure: "prefill".into(), reason: "vllm bench serve has no cold-prefill rows".into() },
            MissingFigure { figure: "engine.version".into(), reason: "not in --save-result files".into() },
        ],
        import: Some(ImportInfo { format: "vllm-bench".into(), files, unmapped }),
    })
}
