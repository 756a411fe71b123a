//! The cells table: every measured row of many runs in one flat, typed table, for pandas,
//! Polars, DuckDB or a spreadsheet — `speedmatrix export RUN.json… -o cells.parquet|csv` and
//! the `runs/cells.csv` / `runs/cells.parquet` that `publish` writes beside the site's index.
//!
//! One row per prefill row, decode cell, rate cell (`results.rates`) and replayed trace
//! (`results.traces`) of each run, in file order; `phase` tells them apart. Every row carries its
//! run's header (file, id, GPU and count, engine and version, model, date, label, simulated,
//! schema version), the cell's key (context, concurrency or rate), its status and reason, where
//! its figures came from, every figure of the registry ([`crate::registry::columns`]), the
//! decode cells' confidence intervals and the rate cells' own figures. A figure a row does not
//! have is null (an empty CSV field) — never 0.
//!
//! The column list is [`columns`], versioned by [`CELLS_VERSION`] and documented column by
//! column in `docs/EXPORT.md` (a test checks that the two agree). The version is the first
//! column of every row (`cells_version`) and, in Parquet, also the file's key-value metadata
//! [`VERSION_KEY`]. This module builds the rows and writes the CSV; the collector writes the
//! Parquet file from the same rows (I/O stays out of this crate).

use crate::derived::{gpu_count, per_gpu};
use crate::model::{DecodeCell, Distribution, Interval, PrefillRow, RateCell, Results};
use crate::registry::{self, Column, Stat, Unit, INTERVAL_FIGURES};
use crate::site::{hardware_summary, model_name};
use crate::table::Row;

/// The version of the column list. Raised whenever a column is added, removed, renamed or
/// changes type or meaning; `docs/EXPORT.md` says what each version changed.
pub const CELLS_VERSION: i64 = 1;

/// The Parquet key-value metadata key that holds [`CELLS_VERSION`].
pub const VERSION_KEY: &str = "speedmatrix.cells_version";

/// The type of a column's values. Every column may be null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellType {
    /// UTF-8 text (Parquet `BYTE_ARRAY` annotated `STRING`).
    Text,
    /// A 64-bit float (Parquet `DOUBLE`).
    Float,
    /// A 64-bit signed integer (Parquet `INT64`): counts of tokens, requests, values.
    Int,
    /// `true` / `false` (Parquet `BOOLEAN`).
    Bool,
}

impl CellType {
    /// The type as `docs/EXPORT.md` writes it: `STRING`, `DOUBLE`, `INT64`, `BOOLEAN`.
    pub fn id(self) -> &'static str {
        match self {
            CellType::Text => "STRING",
            CellType::Float => "DOUBLE",
            CellType::Int => "INT64",
            CellType::Bool => "BOOLEAN",
        }
    }
}

/// One value of the table; `None` is null.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Of a [`CellType::Text`] column.
    Text(Option<String>),
    /// Of a [`CellType::Float`] column.
    Float(Option<f64>),
    /// Of a [`CellType::Int`] column.
    Int(Option<i64>),
    /// Of a [`CellType::Bool`] column.
    Bool(Option<bool>),
}

impl Value {
    /// The type of this value.
    pub fn kind(&self) -> CellType {
        match self {
            Value::Text(_) => CellType::Text,
            Value::Float(_) => CellType::Float,
            Value::Int(_) => CellType::Int,
            Value::Bool(_) => CellType::Bool,
        }
    }

    /// The value as a CSV field: raw numbers (the shortest text that reads back as the same
    /// f64), `true`/`false`, and an empty field for null.
    pub fn csv_field(&self) -> String {
        match self {
            Value::Text(v) => v.clone().unwrap_or_default(),
            Value::Float(v) => v.map(|v| format!("{v}")).unwrap_or_default(),
            Value::Int(v) => v.map(|v| v.to_string()).unwrap_or_default(),
            Value::Bool(v) => v.map(|v| v.to_string()).unwrap_or_default(),
        }
    }
}

/// A run as the table reads it: the name of its file and what it holds.
#[derive(Debug, Clone, Copy)]
pub struct RunOf<'a> {
    /// The file's name: its name under `runs/` in a site, the file name given to `export`.
    pub file: &'a str,
    /// The run.
    pub results: &'a Results,
}

/// What one row of the table is.
#[derive(Debug, Clone, Copy)]
enum Item<'a> {
    Prefill(&'a PrefillRow),
    Decode(&'a DecodeCell),
    Rate(&'a RateCell),
    Trace(&'a RateCell),
}

/// One row being built: its run and its item.
struct Ctx<'a> {
    run: RunOf<'a>,
    item: Item<'a>,
}

impl<'a> Ctx<'a> {
    fn rate(&self) -> Option<&'a RateCell> {
        match self.item {
            Item::Rate(c) | Item::Trace(c) => Some(c),
            _ => None,
        }
    }

    /// A warm prefill row's or a prefix-share cell's prefix-cache figures.
    fn prefix_cache(&self) -> Option<&'a crate::model::PrefixCacheFigures> {
        match self.item {
            Item::Prefill(p) => p.prefix_cache.as_ref(),
            Item::Decode(d) => d.prefix_cache.as_ref(),
            Item::Rate(r) => r.prefix_cache.as_ref(),
            Item::Trace(_) => None,
        }
    }

    fn decode(&self) -> Option<&'a DecodeCell> {
        match self.item {
            Item::Decode(c) => Some(c),
            _ => None,
        }
    }

    fn table_row(&self) -> Option<Row<'a>> {
        match self.item {
            Item::Prefill(p) => Some(Row::Prefill(p)),
            Item::Decode(d) => Some(Row::Decode(d)),
            _ => None,
        }
    }
}

/// How a column gets its value from a row.
#[derive(Clone, Copy)]
enum Get {
    /// A fixed function of the row.
    Fn(fn(&Ctx<'_>) -> Value),
    /// A registry column.
    Registry(Column),
    /// A part of a decode cell's interval of this registry column id.
    Interval(&'static str, Part),
    /// A statistic of a rate cell's send lag.
    SendLag(Stat),
}

/// The parts of an interval the table carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Low,
    High,
    Level,
    Method,
}

/// One column of the table.
#[derive(Clone)]
pub struct CellColumn {
    /// Its name (the CSV header, the Parquet field), snake_case.
    pub name: String,
    /// The type of its values.
    pub kind: CellType,
    /// The unit of its values (`tok/s`, `ms`, `fraction`); empty for text, flags and ids.
    pub unit: &'static str,
    /// Where its values come from: the results file's header, the plan, or the measurement's
    /// source (client clock, server usage, Prometheus, NVML); every figure of an imported run
    /// comes from the import (`imported_from`).
    pub source: &'static str,
    /// What it is, in a sentence.
    pub meaning: String,
    get: Get,
}

impl std::fmt::Debug for CellColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellColumn").field("name", &self.name).field("kind", &self.kind).finish_non_exhaustive()
    }
}

fn col(
    name: &str,
    kind: CellType,
    unit: &'static str,
    source: &'static str,
    meaning: &str,
    get: fn(&Ctx<'_>) -> Value,
) -> CellColumn {
    CellColumn { name: name.into(), kind, unit, source, meaning: meaning.into(), get: Get::Fn(get) }
}

fn text(v: Option<&str>) -> Value {
    Value::Text(v.map(str::to_string))
}

fn int(v: Option<u64>) -> Value {
    Value::Int(v.and_then(|v| i64::try_from(v).ok()))
}

/// The snake_case id serde writes for an enum value (`complete`, `final_usage`).
fn id_of<T: serde::Serialize>(v: &T) -> Option<String> {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_string))
}

/// The unit of a registry metric as the table's values carry it (raw: fractions 0–1, not %).
fn unit_of(unit: Unit) -> &'static str {
    match unit {
        Unit::TokPerS => "tok/s",
        Unit::Ms => "ms",
        Unit::S => "s",
        Unit::Tokens => "tokens",
        Unit::Requests => "requests",
        Unit::Fraction => "fraction",
        Unit::Watts => "W",
        Unit::JoulesPerToken => "J/token",
        Unit::Count => "count",
        Unit::TokPerSPerGpu => "tok/s per GPU",
        Unit::TokensPerJoule => "tokens/J",
        Unit::CostPerMillionTokens => "per 1M output tokens",
    }
}

/// Where a registry metric's figures come from (docs/METHODOLOGY.md, "Metrics", says how).
fn source_of(metric: &str) -> &'static str {
    match metric {
        "total_tps" | "per_request_tps" | "tpot_ms" | "itl_ms" | "prompt_tps" => "client clock, server usage",
        "ttft_ms" | "ttft_in_window_ms" | "ttft_content_ms" | "chunk_gap_ms" | "e2e_ms" | "window_s" => "client clock",
        "prompt_tokens" | "output_tokens" => "server usage",
        "completed_requests" => "client",
        "avg_active_requests" | "max_active_requests" => "Prometheus, else client",
        "spec_accept_rate" => "Prometheus",
        "gpu_power_w" | "energy_j_per_token" => "NVML",
        _ => "",
    }
}

/// Whether a registry column holds whole counts (INT64): a distribution's `_count`, and the
/// tokens and requests the results file stores as integers.
fn is_count(c: &Column) -> bool {
    c.stat == Some(Stat::Count)
        || (c.stat.is_none() && matches!(c.metric.id, "prompt_tokens" | "output_tokens" | "completed_requests"))
}

fn stat_words(s: Stat) -> &'static str {
    match s {
        Stat::P50 => "median",
        Stat::P90 => "90th percentile",
        Stat::P99 => "99th percentile",
        Stat::Mean => "mean",
        Stat::Min => "minimum",
        Stat::Max => "maximum",
        Stat::Count => "number of values",
    }
}

/// A registry column's value in a rate cell or trace row (the figures they share with decode
/// cells: throughput, latencies, tokens, completions, the window).
fn rate_value(c: &RateCell, column: &Column) -> Option<f64> {
    let dist = |d: &Option<Distribution>| d.as_ref().and_then(|d| column.stat.and_then(|s| s.of(d)));
    match column.metric.id {
        "total_tps" => c.total_tps,
        "ttft_ms" => dist(&c.ttft_ms),
        "tpot_ms" => dist(&c.tpot_ms),
        "itl_ms" => dist(&c.itl_ms),
        "e2e_ms" => dist(&c.e2e_ms),
        "prompt_tokens" => c.prompt_tokens.map(|v| v as f64),
        "output_tokens" => c.output_tokens.map(|v| v as f64),
        "completed_requests" => c.completed_requests.map(|v| v as f64),
        "window_s" => c.window_s,
        "spec_accept_rate" => c.spec_decode.as_ref().and_then(|s| s.acceptance_rate),
        _ => None,
    }
}

fn registry_value(ctx: &Ctx<'_>, c: &Column) -> Value {
    let v = match (ctx.table_row(), ctx.rate()) {
        (Some(row), _) => row.value(c),
        (None, Some(rate)) => rate_value(rate, c),
        (None, None) => None,
    };
    let v = v.filter(|v| v.is_finite());
    if is_count(c) {
        Value::Int(v.filter(|v| v.fract() == 0.0 && v.abs() < 9.0e15).map(|v| v as i64))
    } else {
        Value::Float(v)
    }
}

fn interval_of(cell: &DecodeCell, column: &str) -> Option<Interval> {
    let i = cell.intervals.as_ref()?;
    match column {
        "total_tps" => i.total_tps,
        "ttft_ms_p50" => i.ttft_ms_p50,
        "tpot_ms_p50" => i.tpot_ms_p50,
        _ => None,
    }
}

fn value(ctx: &Ctx<'_>, get: &Get) -> Value {
    match get {
        Get::Fn(f) => f(ctx),
        Get::Registry(c) => registry_value(ctx, c),
        Get::Interval(id, part) => {
            let i = ctx.decode().and_then(|d| interval_of(d, id));
            match part {
                Part::Low => Value::Float(i.map(|i| i.low)),
                Part::High => Value::Float(i.map(|i| i.high)),
                Part::Level => Value::Float(i.map(|i| i.level)),
                Part::Method => Value::Text(i.and_then(|i| id_of(&i.method))),
            }
        }
        Get::SendLag(s) => {
            let v = ctx.rate().and_then(|c| c.send_lag_ms.as_ref()).and_then(|d| s.of(d));
            if *s == Stat::Count {
                Value::Int(v.map(|v| v as i64))
            } else {
                Value::Float(v)
            }
        }
    }
}

use CellType::{Bool, Float, Int, Text};

/// The run header's columns (the same on every row of a run).
// long: one entry per column, in the table's order — the column list reads top to bottom
// like docs/EXPORT.md; split, it would be spread over functions.
fn header_columns() -> Vec<CellColumn> {
    const HEADER: &str = "results file header";
    vec![
        col(
            "cells_version",
            Int,
            "",
            "speedmatrix",
            "The version of this column list (docs/EXPORT.md).",
            |_| Value::Int(Some(CELLS_VERSION)),
        ),
        col(
            "run_file",
            Text,
            "",
            "site or export",
            "The run's results file: its name under runs/ in a site, its file name given to `export`.",
            |c| text(Some(c.run.file)),
        ),
        col("run_id", Text, "", HEADER, "The run's id (`run.id`).", |c| text(Some(&c.run.results.run.id))),
        col("run_label", Text, "", HEADER, "The run's label (`run --label`).", |c| {
            text(c.run.results.run.label.as_deref())
        }),
        col("run_status", Text, "", HEADER, "The run's state: complete, interrupted, failed or running.", |c| {
            Value::Text(id_of(&c.run.results.run.status))
        }),
        col("started_at", Text, "", HEADER, "When the run started, RFC 3339 (UTC).", |c| {
            text(c.run.results.run.started_at.as_deref())
        }),
        col("gpu", Text, "", HEADER, "The GPU model (the first GPU of the inventory), e.g. H200 NVL.", |c| {
            text(c.run.results.hardware.gpus.first().map(|g| g.name.as_str()))
        }),
        col(
            "gpu_count",
            Int,
            "GPUs",
            HEADER,
            "GPUs serving the model: `hardware.gpu_count`, else the inventory's length.",
            |c| Value::Int(gpu_count(c.run.results).ok().map(i64::from)),
        ),
        col("hardware", Text, "", HEADER, "The hardware in a few words, e.g. 2 × H200 NVL.", |c| {
            Value::Text(hardware_summary(c.run.results))
        }),
        col("engine", Text, "", HEADER, "The engine: vllm, sglang, llamacpp, openai.", |c| {
            text(c.run.results.engine.name.as_deref())
        }),
        col("engine_version", Text, "", HEADER, "The engine's version.", |c| {
            text(c.run.results.engine.version.as_deref())
        }),
        col("model", Text, "", HEADER, "The model measured (the loaded model, else the served name).", |c| {
            Value::Text(model_name(c.run.results))
        }),
        col("quantization", Text, "", HEADER, "Weight quantization, e.g. FP8.", |c| {
            text(c.run.results.engine.quantization.as_deref())
        }),
        col("speculative_decoding", Text, "", HEADER, "Speculative decoding, e.g. MTP with 2 tokens.", |c| {
            text(c.run.results.engine.speculative_decoding.as_deref())
        }),
        col("simulated", Bool, "", HEADER, "The run measured a simulation (the speedmatrix twin), not a real server.", |c| {
            Value::Bool(Some(c.run.results.engine.simulated.is_some()))
        }),
        col("schema_version", Int, "", HEADER, "The results file's schema version as written (before migration).", |c| {
            Value::Int(Some(i64::from(c.run.results.schema_version)))
        }),
        col("tool_version", Text, "", HEADER, "The version of the program that measured or converted the run.", |c| {
            text(c.run.results.tool.version.as_deref())
        }),
        col(
            "imported_from",
            Text,
            "",
            HEADER,
            "For an imported run, the source format (llm-inference-bench, vllm-bench): its figures come from that import.",
            |c| text(c.run.results.import.as_ref().map(|i| i.format.as_str())),
        ),
    ]
}

/// The columns that say which cell a row is, its status, and its sources.
// long: one entry per column, in the table's order — the column list reads top to bottom
// like docs/EXPORT.md; split, it would be spread over functions.
fn key_columns() -> Vec<CellColumn> {
    vec![
        col("phase", Text, "", "plan", "What the row is: prefill, decode, rate or trace.", |c| {
            text(Some(match c.item {
                Item::Prefill(_) => "prefill",
                Item::Decode(_) => "decode",
                Item::Rate(_) => "rate",
                Item::Trace(_) => "trace",
            }))
        }),
        col("context", Text, "", "plan", "The target context's label, e.g. 8K.", |c| {
            text(Some(match c.item {
                Item::Prefill(p) => p.context.label.as_str(),
                Item::Decode(d) => d.context.label.as_str(),
                Item::Rate(r) | Item::Trace(r) => r.context.label.as_str(),
            }))
        }),
        col("context_tokens", Int, "tokens", "plan", "The target context, tokens.", |c| {
            int(Some(match c.item {
                Item::Prefill(p) => p.context.tokens,
                Item::Decode(d) => d.context.tokens,
                Item::Rate(r) | Item::Trace(r) => r.context.tokens,
            }))
        }),
        col(
            "concurrency",
            Int,
            "requests",
            "plan",
            "Simultaneous requests of a decode cell (1 for prefill); null for rate and trace rows.",
            |c| match c.item {
                Item::Prefill(_) => Value::Int(Some(1)),
                Item::Decode(d) => Value::Int(Some(i64::from(d.concurrency))),
                _ => Value::Int(None),
            },
        ),
        col(
            "rate_rps",
            Float,
            "requests/s",
            "plan",
            "The offered request rate of a rate cell; a trace's mean rate as replayed.",
            |c| Value::Float(c.rate().map(|r| r.rate_rps)),
        ),
        col("arrival", Text, "", "plan", "How a rate cell's arrivals are spaced: poisson, constant, gamma, trace.", |c| {
            Value::Text(c.rate().and_then(|r| id_of(&r.arrival.process)))
        }),
        col("arrival_cv", Float, "", "plan", "Coefficient of variation of gamma arrival gaps.", |c| {
            Value::Float(c.rate().and_then(|r| r.arrival.cv))
        }),
        col("max_in_flight", Int, "requests", "plan", "`--max-in-flight`: the most requests the client kept open.", |c| {
            Value::Int(c.rate().and_then(|r| r.max_in_flight).map(i64::from))
        }),
        col(
            "prefix_share",
            Float,
            "fraction",
            "plan",
            "`--prefix-share`: the share of each prompt that is a prefix shared by the cell's requests (a warm prefill row's or a prefix-share cell's); null for cold rows and runs without shares.",
            |c| Value::Float(c.prefix_cache().map(|p| p.planned_share)),
        ),
        col(
            "prefix_cache_hit_rate",
            Float,
            "fraction",
            "prefix_cache_hit_rate_source",
            "The share of prompt tokens the server served from its prefix cache over the row or cell, as its source counts it.",
            |c| Value::Float(c.prefix_cache().and_then(|p| p.measured_hit_rate)),
        ),
        col(
            "prefix_cache_hit_rate_source",
            Text,
            "",
            "speedmatrix",
            "Where prefix_cache_hit_rate came from: prometheus, usage or server_timings.",
            |c| Value::Text(c.prefix_cache().and_then(|p| p.hit_rate_source.as_ref()).and_then(id_of)),
        ),
        col(
            "prefix_cache_start",
            Text,
            "",
            "speedmatrix",
            "How a prefix-share row's or cell's cache began: reset (the server's own reset answered) or salted (its prompts carry text unique to it; the file's cache_start_detail says why).",
            |c| Value::Text(c.prefix_cache().and_then(|p| id_of(&p.cache_start))),
        ),
        col(
            "status",
            Text,
            "",
            "speedmatrix",
            "valid, requests_queued, saturated, client_limited, over_capacity, error or not_run (docs/METHODOLOGY.md, \"Statuses\").",
            |c| {
                text(Some(match c.item {
                    Item::Prefill(p) => p.status.id(),
                    Item::Decode(d) => d.status.id(),
                    Item::Rate(r) | Item::Trace(r) => r.status.id(),
                }))
            },
        ),
        col("reason", Text, "", "speedmatrix", "Why the status, and notes.", |c| {
            text(match c.item {
                Item::Prefill(p) => p.reason.as_deref(),
                Item::Decode(d) => d.reason.as_deref(),
                Item::Rate(r) | Item::Trace(r) => r.reason.as_deref(),
            })
        }),
        col(
            "token_count_source",
            Text,
            "",
            "speedmatrix",
            "Where the output-token count came from: continuous_usage, final_usage, server_counter, chunk_count, reported.",
            |c| {
                let s = match c.item {
                    Item::Decode(d) => d.token_count_source,
                    Item::Rate(r) | Item::Trace(r) => r.token_count_source,
                    Item::Prefill(_) => None,
                };
                Value::Text(s.and_then(|s| id_of(&s)))
            },
        ),
        col(
            "active_requests_source",
            Text,
            "",
            "speedmatrix",
            "Where avg_active_requests and max_active_requests came from: prometheus (the running gauge), client, or import.",
            |c| {
                let Some(d) = c.decode().filter(|d| d.avg_active_requests.is_some() || d.max_active_requests.is_some())
                else {
                    return Value::Text(None);
                };
                let source = if c.run.results.import.is_some() {
                    "import"
                } else if d.server.as_ref().and_then(|s| s.running_avg).is_some() {
                    "prometheus"
                } else {
                    "client"
                };
                text(Some(source))
            },
        ),
    ]
}

/// Every registry column ([`registry::columns`]), typed.
fn figure_columns() -> Vec<CellColumn> {
    registry::columns()
        .into_iter()
        .map(|c| {
            let (unit, meaning) = match c.stat {
                Some(Stat::Count) => ("count", format!("{}: number of values summarised.", c.metric.label)),
                Some(s) => {
                    (unit_of(c.metric.unit), format!("{}: {} (`{}`).", c.metric.label, stat_words(s), c.metric.id))
                }
                None => (unit_of(c.metric.unit), c.metric.description.to_string()),
            };
            CellColumn {
                name: c.id(),
                kind: if is_count(&c) { Int } else { Float },
                unit,
                source: source_of(c.metric.id),
                meaning,
                get: Get::Registry(c),
            }
        })
        .collect()
}

/// The speculative-decoding figure beside `spec_accept_rate` (a decode or rate cell's
/// `spec_decode`): the mean accepted length.
fn spec_columns() -> Vec<CellColumn> {
    vec![col(
        "spec_mean_accepted_len",
        Float,
        "tokens",
        "Prometheus",
        "Speculative decoding: 1 + accepted ÷ drafts, the tokens each verification step produced (decode and rate cells; SGLang's accept-length gauge).",
        |c| {
            let spec = match c.item {
                Item::Decode(d) => d.spec_decode.as_ref(),
                Item::Rate(r) | Item::Trace(r) => r.spec_decode.as_ref(),
                Item::Prefill(_) => None,
            };
            Value::Float(spec.and_then(|s| s.mean_accepted_length).filter(|v| v.is_finite()))
        },
    )]
}

/// The figures derived from a row and its run's header.
fn derived_columns() -> Vec<CellColumn> {
    vec![col(
        "total_tps_per_gpu",
        Float,
        "tok/s per GPU",
        "client clock, server usage; GPU count from the header",
        "total_tps ÷ gpu_count (decode, rate and trace rows); null without a GPU count.",
        |c| {
            let total = match c.item {
                Item::Decode(d) => d.total_tps,
                Item::Rate(r) | Item::Trace(r) => r.total_tps,
                Item::Prefill(_) => None,
            };
            let gpus = gpu_count(c.run.results).ok();
            Value::Float(total.filter(|v| v.is_finite()).zip(gpus).map(|(v, n)| per_gpu(v, n)))
        },
    )]
}

/// The decode cells' confidence intervals ([`INTERVAL_FIGURES`]): low, high, level, method.
fn interval_columns() -> Vec<CellColumn> {
    let mut out = Vec::new();
    for f in INTERVAL_FIGURES {
        let unit = registry::column(f.column).map_or("", |c| unit_of(c.metric.unit));
        let parts = [
            ("low", Part::Low, Float, unit, "lower bound"),
            ("high", Part::High, Float, unit, "upper bound"),
            ("level", Part::Level, Float, "fraction", "confidence level (0.95)"),
            ("method", Part::Method, Text, "", "how it was computed: batch_means, bootstrap_requests, between_repeats"),
        ];
        for (suffix, part, kind, unit, words) in parts {
            out.push(CellColumn {
                name: format!("{}_ci_{suffix}", f.column),
                kind,
                unit,
                source: "speedmatrix (docs/METHODOLOGY.md, \"Noise\")",
                meaning: format!("Confidence interval of {} in a decode cell: {words}.", f.column),
                get: Get::Interval(f.column, part),
            });
        }
    }
    out
}

/// The figures of rate cells and trace rows that decode cells do not have.
// long: one entry per column, in the table's order — the column list reads top to bottom
// like docs/EXPORT.md; split, it would be spread over functions.
fn rate_columns() -> Vec<CellColumn> {
    let mut out = vec![
        col(
            "offered_rps",
            Float,
            "requests/s",
            "plan, client clock",
            "Requests scheduled inside the window ÷ its length.",
            |c| Value::Float(c.rate().and_then(|r| r.offered_rps)),
        ),
        col(
            "achieved_rps",
            Float,
            "requests/s",
            "client clock",
            "Requests that finished inside the window ÷ its length.",
            |c| Value::Float(c.rate().and_then(|r| r.achieved_rps)),
        ),
        col("scheduled_requests", Int, "requests", "plan", "Requests scheduled inside the window.", |c| {
            int(c.rate().and_then(|r| r.scheduled_requests))
        }),
    ];
    for s in Stat::ALL {
        let (kind, unit, meaning) = match s {
            Stat::Count => (Int, "count", "Send lag: number of values summarised.".to_string()),
            s => (Float, "ms", format!("Send lag (scheduled instant → request sent): {}.", stat_words(s))),
        };
        out.push(CellColumn {
            name: format!("send_lag_ms_{}", s.suffix()),
            kind,
            unit,
            source: "client clock",
            meaning,
            get: Get::SendLag(s),
        });
    }
    out.extend([
        col("held_back", Int, "requests", "client", "Requests of the window that --max-in-flight held back.", |c| {
            int(c.rate().and_then(|r| r.held_back))
        }),
        col(
            "avg_in_flight",
            Float,
            "requests",
            "client clock",
            "Time-weighted mean of requests in flight in the window.",
            |c| Value::Float(c.rate().and_then(|r| r.avg_in_flight)),
        ),
        col(
            "max_in_flight_seen",
            Int,
            "requests",
            "client clock",
            "Most requests in flight at once in the window.",
            |c| int(c.rate().and_then(|r| r.max_in_flight_seen)),
        ),
        col(
            "in_flight_start",
            Int,
            "requests",
            "client clock",
            "Saturation evidence: requests in flight when the window opened.",
            |c| int(c.rate().and_then(|r| r.saturation.as_ref()).map(|s| s.in_flight_start)),
        ),
        col(
            "in_flight_end",
            Int,
            "requests",
            "client clock",
            "Saturation evidence: requests in flight when the window closed.",
            |c| int(c.rate().and_then(|r| r.saturation.as_ref()).map(|s| s.in_flight_end)),
        ),
        col(
            "growth_allowed",
            Float,
            "requests",
            "speedmatrix",
            "Saturation evidence: the growth of requests in flight the rule allows as noise.",
            |c| Value::Float(c.rate().and_then(|r| r.saturation.as_ref()).map(|s| s.growth_allowed)),
        ),
        col(
            "unfinished",
            Int,
            "requests",
            "client clock",
            "Saturation evidence: requests of the window not finished when the drain ended.",
            |c| int(c.rate().and_then(|r| r.saturation.as_ref()).map(|s| s.unfinished)),
        ),
        col(
            "warmup_s",
            Float,
            "s",
            "client clock",
            "Warm-up before the window: from the first scheduled request until it finished.",
            |c| Value::Float(c.rate().and_then(|r| r.warmup_s)),
        ),
        col(
            "goodput_rps",
            Float,
            "requests/s",
            "client clock",
            "With --slo: requests of the window that met it ÷ the window's length.",
            |c| Value::Float(c.rate().and_then(|r| r.goodput_rps)),
        ),
        col("meets_slo", Bool, "", "speedmatrix", "With --slo: whether the rate cell meets it.", |c| {
            Value::Bool(c.rate().and_then(|r| r.meets_slo))
        }),
    ]);
    out
}

/// Every column of the table, in order: the run header, the cell's key, status and sources,
/// the registry's figures, the derived figure, the intervals, then the rate cells' figures.
pub fn columns() -> Vec<CellColumn> {
    let mut out = header_columns();
    out.extend(key_columns());
    out.extend(figure_columns());
    out.extend(spec_columns());
    out.extend(derived_columns());
    out.extend(interval_columns());
    out.extend(rate_columns());
    out
}

/// How many rows a run gives: its prefill rows, decode cells, rate cells and traces.
pub fn row_count(r: &Results) -> usize {
    r.prefill.len() + r.decode.len() + r.rates.len() + r.traces.len()
}

/// The rows of one run, each a value per column of `columns`, in file order: prefill rows,
/// decode cells, rate cells, then traces.
pub fn run_rows(columns: &[CellColumn], run: RunOf<'_>) -> Vec<Vec<Value>> {
    let r = run.results;
    let items = r
        .prefill
        .iter()
        .map(Item::Prefill)
        .chain(r.decode.iter().map(Item::Decode))
        .chain(r.rates.iter().map(Item::Rate))
        .chain(r.traces.iter().map(|t| Item::Trace(&t.cell)));
    items
        .map(|item| {
            let ctx = Ctx { run, item };
            columns.iter().map(|c| value(&ctx, &c.get)).collect()
        })
        .collect()
}

/// The table of these runs as CSV (RFC 4180, `\n` line ends): the header line of the column
/// names, then one line per row ([`Value::csv_field`]).
pub fn to_csv(runs: &[RunOf<'_>]) -> String {
    let cols = columns();
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    // Writing into a Vec cannot fail, and every record has the header's length.
    w.write_record(cols.iter().map(|c| c.name.as_str())).expect("in-memory CSV write");
    for run in runs {
        for row in run_rows(&cols, *run) {
            w.write_record(row.iter().map(Value::csv_field)).expect("in-memory CSV write");
        }
    }
    let bytes = w.into_inner().expect("in-memory CSV flush");
    String::from_utf8(bytes).expect("CSV of UTF-8 strings is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TraceRow;

    fn fixture(name: &str) -> Results {
        let path = format!("{}/../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        crate::load_results(&std::fs::read(&path).unwrap()).unwrap()
    }

    #[test]
    fn names_are_unique_snake_case_and_every_figure_has_a_source() {
        let cols = columns();
        let mut names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
        assert!(names.iter().all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')));
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "column names are unique");
        assert!(cols.iter().all(|c| !c.source.is_empty() && !c.meaning.is_empty()), "{cols:?}");
        for c in registry::columns() {
            assert!(cols.iter().any(|x| x.name == c.id()), "registry column {} missing", c.id());
        }
        assert_eq!(cols[0].name, "cells_version");
    }

    #[test]
    fn every_value_has_its_columns_type() {
        let cols = columns();
        let mut r = fixture("rates-twin.json");
        // A replayed trace is a rate cell's figures under `traces`: the first rate cell as one.
        r.traces.push(TraceRow { cell: r.rates[0].clone(), requests: vec![], prefix_cache: None });
        for name in ["h200-qwen3.5-122b-vllm.json", "vllm-cpu-smollm2-135m.json"] {
            let other = fixture(name);
            for row in run_rows(&cols, RunOf { file: name, results: &other }) {
                assert_eq!(row.len(), cols.len());
                for (v, c) in row.iter().zip(&cols) {
                    assert_eq!(v.kind(), c.kind, "{}", c.name);
                }
            }
        }
        let rows = run_rows(&cols, RunOf { file: "rates.json", results: &r });
        assert_eq!(rows.len(), r.prefill.len() + r.decode.len() + r.rates.len() + 1);
        for row in &rows {
            for (v, c) in row.iter().zip(&cols) {
                assert_eq!(v.kind(), c.kind, "{}", c.name);
            }
        }
    }

    fn at<'a>(cols: &[CellColumn], row: &'a [Value], name: &str) -> &'a Value {
        &row[cols.iter().position(|c| c.name == name).unwrap_or_else(|| panic!("no column {name}"))]
    }

    #[test]
    fn rows_carry_the_files_figures_and_nulls_where_a_row_has_none() {
        let cols = columns();
        let h200 = fixture("h200-qwen3.5-122b-vllm.json");
        let rows = run_rows(&cols, RunOf { file: "h200.json", results: &h200 });
        assert_eq!(rows.len(), 7 + 48);
        let decode = rows.iter().find(|r| at(&cols, r, "phase") == &text(Some("decode"))).unwrap();
        assert_eq!(at(&cols, decode, "total_tps"), &Value::Float(Some(237.1)));
        assert_eq!(at(&cols, decode, "output_tokens"), &Value::Int(Some(7113)));
        assert_eq!(at(&cols, decode, "concurrency"), &Value::Int(Some(1)));
        assert_eq!(at(&cols, decode, "rate_rps"), &Value::Float(None), "a decode cell has no rate");
        assert_eq!(at(&cols, decode, "run_file"), &text(Some("h200.json")));
        assert_eq!(at(&cols, decode, "simulated"), &Value::Bool(Some(false)));
        assert_eq!(at(&cols, decode, "cells_version"), &Value::Int(Some(CELLS_VERSION)));
        let prefill = &rows[0];
        assert_eq!(at(&cols, prefill, "phase"), &text(Some("prefill")));
        assert_eq!(at(&cols, prefill, "total_tps"), &Value::Float(None));

        // No committed fixture has a window long enough for an interval: one set by hand.
        let mut noisy = fixture("vllm-cpu-smollm2-135m.json");
        let i = Interval {
            estimate: 100.0,
            low: 95.5,
            high: 104.5,
            level: 0.95,
            method: crate::model::IntervalMethod::BatchMeans,
            evidence: 6,
            std_error: 1.7,
            df: Some(5.0),
        };
        noisy.decode[1].intervals.get_or_insert_with(Default::default).total_tps = Some(i);
        let rows = run_rows(&cols, RunOf { file: "cpu.json", results: &noisy });
        let row = &rows[noisy.prefill.len() + 1];
        assert_eq!(at(&cols, row, "total_tps_ci_low"), &Value::Float(Some(95.5)));
        assert_eq!(at(&cols, row, "total_tps_ci_high"), &Value::Float(Some(104.5)));
        assert_eq!(at(&cols, row, "total_tps_ci_level"), &Value::Float(Some(0.95)));
        assert_eq!(at(&cols, row, "total_tps_ci_method"), &text(Some("batch_means")));
        assert_eq!(at(&cols, row, "tpot_ms_p50_ci_low"), &Value::Float(None), "the file has none");
        assert_eq!(at(&cols, &rows[noisy.prefill.len()], "total_tps_ci_low"), &Value::Float(None));

        let rates = fixture("rates-twin.json");
        let rows = run_rows(&cols, RunOf { file: "rates.json", results: &rates });
        let sat = &rows[rates.prefill.len() + 2];
        assert_eq!(at(&cols, sat, "phase"), &text(Some("rate")));
        assert_eq!(at(&cols, sat, "status"), &text(Some("saturated")));
        assert_eq!(at(&cols, sat, "rate_rps"), &Value::Float(Some(8.0)));
        assert_eq!(at(&cols, sat, "achieved_rps"), &Value::Float(Some(4.8)));
        assert_eq!(at(&cols, sat, "ttft_ms_p50"), &Value::Float(Some(4256.416)));
        assert_eq!(at(&cols, sat, "scheduled_requests"), &Value::Int(Some(54)));
        assert_eq!(at(&cols, sat, "in_flight_end"), &Value::Int(Some(59)));
        assert_eq!(at(&cols, sat, "concurrency"), &Value::Int(None));
        assert_eq!(at(&cols, sat, "simulated"), &Value::Bool(Some(true)));
    }

    #[test]
    fn csv_has_a_header_and_a_line_per_row() {
        let a = fixture("h200-qwen3.5-122b-vllm.json");
        let b = fixture("rates-twin.json");
        let csv = to_csv(&[RunOf { file: "a.json", results: &a }, RunOf { file: "b.json", results: &b }]);
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let headers = reader.headers().unwrap().clone();
        assert_eq!(headers.len(), columns().len());
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 55 + 9);
        let col = |n: &str| headers.iter().position(|h| h == n).unwrap();
        assert_eq!(&rows[7][col("total_tps")], "237.1");
        assert_eq!(&rows[7][col("rate_rps")], "", "null is an empty field");
        assert_eq!(&rows[7][col("simulated")], "false");
        assert_eq!(&rows[60][col("run_file")], "b.json");
        assert!(rows.iter().all(|r| &r[col("cells_version")] == "1"));
    }
}
