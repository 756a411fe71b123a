//! `vllm bench serve --save-result` files (vllm/benchmarks/serve.py): one file per run of the
//! client at one `--max-concurrency`, so each file becomes one matrix column. Fields used:
//! `date`, `label`, `model_id`, `max_concurrency`, `duration` (s), `completed`,
//! `failed`, `total_input_tokens`, `total_output_tokens`, `output_throughput` (tok/s over the
//! whole benchmark), `max_concurrent_requests`, `input_lens`, `output_lens`, `ttfts` (s),
//! `errors`, and the summaries `mean_/median_/std_/pNN_{ttft,tpot,itl,e2el}_ms`.
//!
//! The row (context) is the requests' mean input length. `vllm bench serve` has no
//! measurement window (its throughput includes ramp-up and drain) and no queue evidence: both
//! are listed in `missing`, with the engine, its version, the tool's version and `max_tokens`,
//! which the files do not record (`backend` is the client's request API, not the server's
//! engine: it is listed as not imported).
//!
//! A file in which no request completed (`completed: 0`) becomes an `error` cell ("all 8
//! requests failed: …") without figures. A negative figure or percentiles out of order
//! (`median_ttft_ms` above `p99_ttft_ms`, a percentile outside the `ttfts`) make the file bad
//! input, named with the field: such a file is damaged, and dropping one figure would hide it.

use super::{leftovers, non_negative, run_id, s_to_ms, ImportError, Source};
use crate::cli::ImportFrom;
use serde_json::Value;
use speedmatrix_schema::context::{label, size};
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::*;

/// Keys read (or, for `backend`, listed as not imported with why); the rest is unmapped.
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

/// The latency summaries of a file by their name in its keys (`mean_ttft_ms`, …): TTFT, TPOT,
/// ITL and E2E latency, the order of [`file_cell`]'s fields.
const METRICS: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

/// The summary of one latency metric: `mean_X_ms`, `median_X_ms`, `p90_X_ms`, `p99_X_ms`
/// (whichever `--metric-percentiles` wrote), and for TTFT the exact min/max of the per-request
/// `ttfts` (s). Returns the distribution and the keys used.
///
/// # Errors
/// [`ImportError::Negative`] for a negative figure, [`ImportError::Inconsistent`] for
/// percentiles out of order (e.g. `median_ttft_ms` above `p99_ttft_ms`), naming the fields.
fn summary(
    name: &str,
    v: &Value,
    metric: &str,
    count: Option<u64>,
) -> Result<(Option<Distribution>, Vec<String>), ImportError> {
    let key = |p: &str| format!("{p}_{metric}_ms");
    let mut used = vec![key("mean"), key("median"), key("std")];
    let p = |n: &str| non_negative(name, v, &key(n)).map(|x| x.map(round3));
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
    let inconsistent = |problem: String| ImportError::Inconsistent { name: name.to_string(), problem };
    if metric == "ttft" {
        // Exact extremes from the per-request TTFTs when the file has them.
        let t: Vec<f64> = v
            .get("ttfts")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        if let Some(&x) = t.iter().find(|x| **x < 0.0) {
            return Err(ImportError::Negative { name: name.to_string(), field: "a value of ttfts".into(), value: x });
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
            return Err(inconsistent(format!(
                "{} ({}) is above {} ({}); percentiles must rise",
                w[0].0, w[0].1, w[1].0, w[1].1
            )));
        }
    }
    if let (Some(mean), Some(lo), Some(hi)) = (d.mean, d.min, d.max) {
        if mean < lo || mean > hi {
            return Err(inconsistent(format!("{} ({mean}) lies outside the ttfts ({lo}…{hi} ms)", key("mean"))));
        }
    }
    Ok((Some(d), used))
}

/// The unsigned integers of a list field (`input_lens`, `output_lens`).
fn u64s(v: &Value, field: &str) -> Vec<u64> {
    v.get(field).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}

/// What one file contributes besides its cell.
struct FileFacts {
    /// Its benchmark duration, s.
    duration: Option<f64>,
    /// `model_id`.
    model: Option<String>,
    /// `label`.
    label: Option<String>,
}

/// The status and reason of a file's cell: error when any request failed (with the first error
/// message), else valid.
fn cell_status(v: &Value, completed: u64) -> (CellStatus, Option<String>) {
    let failed = v.get("failed").and_then(Value::as_u64).unwrap_or(0);
    let first_error = v
        .get("errors")
        .and_then(Value::as_array)
        .and_then(|e| e.iter().filter_map(Value::as_str).find(|s| !s.is_empty()))
        .map(|e| format!(": {}", crate::text::excerpt(e, 200)))
        .unwrap_or_default();
    if completed == 0 {
        let why = if failed > 0 { format!("all {failed} requests failed") } else { "no request completed".into() };
        (CellStatus::Error, Some(format!("{why}{first_error}")))
    } else if failed > 0 {
        (CellStatus::Error, Some(format!("{failed} of {} requests failed{first_error}", failed + completed)))
    } else {
        (CellStatus::Valid, None)
    }
}

/// One file → its matrix cell (row: the mean input length; column: `max_concurrency`), the
/// keys it used and its facts for the run.
fn file_cell(s: &Source) -> Result<(DecodeCell, Vec<String>, FileFacts), ImportError> {
    let (v, name) = (&s.json, &s.name);
    let completed = v.get("completed").and_then(Value::as_u64).ok_or_else(|| ImportError::NotTheFormat {
        name: name.clone(),
        field: "completed".into(),
        from: ImportFrom::VllmBench,
    })?;
    let n = v
        .get("max_concurrency")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| ImportError::NoConcurrency { name: name.clone() })?;
    let input_lens = u64s(v, "input_lens");
    let mean_in = if input_lens.is_empty() {
        v.get("total_input_tokens").and_then(Value::as_u64).map(|t| t / completed.max(1))
    } else {
        Some(input_lens.iter().sum::<u64>() / input_lens.len() as u64)
    }
    .filter(|&t| t > 0)
    .ok_or_else(|| ImportError::NoContext { name: name.clone() })?;
    let outs = u64s(v, "output_lens");
    let facts = FileFacts {
        duration: non_negative(name, v, "duration")?,
        model: v.get("model_id").and_then(Value::as_str).map(str::to_string),
        label: v.get("label").and_then(Value::as_str).filter(|l| !l.is_empty()).map(str::to_string),
    };
    let (status, reason) = cell_status(v, completed);
    let mut cell = DecodeCell::new(size(mean_in), n, status, reason);
    let mut used: Vec<String> = MAPPED.iter().map(|s| s.to_string()).collect();
    let mut figures = [None; METRICS.len()];
    // Values per summary: requests for TTFT and E2E; TPOT leaves out one-token outputs; ITL is
    // over tokens, whose number the file does not give.
    let multi_token = (!outs.is_empty()).then(|| outs.iter().filter(|&&o| o > 1).count() as u64);
    for (figure, metric) in figures.iter_mut().zip(METRICS) {
        let count = match metric {
            "itl" => None,
            "tpot" => multi_token,
            _ => Some(completed),
        };
        let (d, keys) = summary(name, v, metric, count)?;
        used.extend(keys);
        // With no request completed there is nothing to summarise (vllm writes 0s).
        *figure = d.filter(|_| completed > 0);
    }
    [cell.ttft_ms, cell.tpot_ms, cell.itl_ms, cell.e2e_ms] = figures;
    let ok = cell.status == CellStatus::Valid;
    let total_tps = non_negative(name, v, "output_throughput")?;
    let max_active = non_negative(name, v, "max_concurrent_requests")?;
    cell.prompt_tokens = Some(mean_in);
    cell.window_s = facts.duration.filter(|_| completed > 0);
    cell.total_tps = total_tps.map(round3).filter(|_| ok);
    cell.output_tokens = v.get("total_output_tokens").and_then(Value::as_u64).filter(|_| ok);
    cell.token_count_source = Some(TokenCountSource::Reported);
    cell.completed_requests = (completed > 0).then_some(completed);
    cell.max_active_requests = max_active.filter(|_| completed > 0);
    Ok((cell, used, facts))
}

/// Every (context, concurrency) pair of the cells' rows and columns; pairs without a file are
/// `not_run`.
fn full_matrix(cells: &[DecodeCell]) -> (Vec<u64>, Vec<u32>, Vec<DecodeCell>) {
    let mut contexts: Vec<u64> = cells.iter().map(|c| c.context.tokens).collect();
    contexts.sort_unstable();
    contexts.dedup();
    let mut concurrency: Vec<u32> = cells.iter().map(|c| c.concurrency).collect();
    concurrency.sort_unstable();
    concurrency.dedup();
    let mut decode = Vec::new();
    for &t in &contexts {
        for &n in &concurrency {
            decode.push(match cells.iter().find(|c| c.context.tokens == t && c.concurrency == n) {
                Some(c) => c.clone(),
                None => DecodeCell::new(
                    size(t),
                    n,
                    CellStatus::NotRun,
                    Some("no vllm bench serve file for this cell".into()),
                ),
            });
        }
    }
    (contexts, concurrency, decode)
}

/// What every `vllm bench serve` import lacks.
fn missing() -> Vec<MissingFigure> {
    let miss = |figure: &str, reason: &str| MissingFigure { figure: figure.into(), reason: reason.into() };
    vec![
        miss(
            "window",
            "vllm bench serve sends a fixed number of requests: total tok/s (output_throughput) covers ramp-up and drain, not a steady window",
        ),
        miss("status.requests_queued", "vllm bench serve records no server queue evidence"),
        miss("prefill", "vllm bench serve has no cold-prefill rows"),
        miss(
            "engine.name",
            "vllm bench serve files do not record the server's engine (their backend is the client's request API)",
        ),
        miss("engine.version", "not in --save-result files"),
        miss("tool.version", "vllm bench serve does not write its version into --save-result files"),
        miss(
            "config.max_tokens",
            "not in --save-result files (output lengths are what the requests produced, not their limit)",
        ),
    ]
}

/// Convert one or more `--save-result` files (one per concurrency).
///
/// # Errors
/// [`ImportError`] naming the file and the field when a file is not `vllm bench serve`'s, is
/// damaged, or a second file has the same cell.
pub fn convert(sources: &[Source], converted_by: &str) -> Result<Results, ImportError> {
    let mut cells: Vec<DecodeCell> = Vec::new();
    let mut unmapped = Vec::new();
    let (mut model, mut label_) = (None, None);
    for s in sources {
        let (cell, used, facts) = file_cell(s)?;
        if cells.iter().any(|c| c.concurrency == cell.concurrency && c.context.tokens == cell.context.tokens) {
            return Err(ImportError::SecondFile {
                name: s.name.clone(),
                context: label(cell.context.tokens),
                concurrency: cell.concurrency,
            });
        }
        let used: Vec<&str> = used.iter().map(String::as_str).collect();
        let prefix = if sources.len() > 1 { format!("{}: ", s.name) } else { String::new() };
        leftovers(&prefix, "$", &s.json, &used, &mut unmapped);
        if let Some(b) = s.json.get("backend").and_then(Value::as_str) {
            unmapped.push(UnmappedField {
                field: format!("{prefix}$.backend"),
                note: format!(
                    "{b:?}: the request API the client used, not the server's engine (engine.name stays unknown)"
                ),
            });
        }
        model = model.or(facts.model);
        label_ = label_.or(facts.label);
        cells.push(cell);
    }
    let (contexts, concurrency, decode) = full_matrix(&cells);
    let files: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    Ok(Results {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        tool: Tool { name: "vllm bench serve".into(), version: None, converted_by: Some(converted_by.into()) },
        run: RunInfo {
            id: run_id("vllm-bench", sources),
            started_at: None,
            finished_at: None,
            status: RunStatus::Complete,
            reason: None,
            label: label_,
            notes: Some(format!("imported from vllm bench serve: {}", files.join(", "))),
        },
        hardware: Hardware::default(),
        engine: Engine { name: None, model: model.clone(), served_model_name: model, ..Engine::default() },
        config: Config {
            contexts: contexts.into_iter().map(size).collect(),
            concurrency,
            prefill_contexts: vec![],
            window_s: None,
            max_tokens: None,
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
            server_url: None,
            repeats: None,
            rates: vec![],
            rate_slo: None,
            rate_search: false,
            rate_keep_going: false,
            trace: None,
            prefix_shares: vec![],
        },
        prefill: vec![],
        decode,
        rates: vec![],
        rate_at_slo: vec![],
        traces: vec![],
        conversations: vec![],
        client: None,
        missing: missing(),
        import: Some(ImportInfo { format: "vllm-bench".into(), files, unmapped }),
    })
}
