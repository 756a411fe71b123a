//! What the page shows, as plain data: header cards, the prefill table, the heatmap grid and
//! the all-measurements table with its sorting and filters. Pure functions of a [`Results`]
//! (no DOM), so they are unit-tested without a page (CI runs them on wasm32 in headless Chromium); `view::run_report` turns them into elements.
//!
//! Numbers are always written by the registry ([`speedmatrix_schema::registry`]); status words
//! come from [`CellStatus::label`]; nothing here parses or validates a file.

use speedmatrix_schema::prefix;
use speedmatrix_schema::registry::{self, column, columns, Column, Kind, METRICS};
use speedmatrix_schema::site::run_title;
use speedmatrix_schema::status::{e2e_empty, over_capacity_reason, EmptyFigure};
use speedmatrix_schema::table::{rows, Phase, Row, SEED_COLUMNS};
use speedmatrix_schema::{CellStatus, ContextSize, DecodeCell, Interval, PrefillRow, Results};
use std::cmp::Ordering;

/// The placeholder written for a figure the file does not have.
pub const DASH: &str = "—";

/// The page title of a run (its label, else "model on hardware").
pub fn title(r: &Results) -> String {
    run_title(r)
}

pub use speedmatrix_schema::summary::{cards, subtitle, Card};

fn fmt(id: &str, v: Option<f64>) -> String {
    match (registry::metric(id), v) {
        (Some(m), Some(v)) => m.display(v),
        _ => DASH.to_string(),
    }
}

/// One row of the prefill table.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillLine {
    /// "8K context".
    pub context: String,
    /// Prompt tok/s as the registry writes it ("22.5K"), or the status words when not measured.
    pub prompt_tps: String,
    /// "363 ms".
    pub ttft: String,
    /// Real prompt tokens ("8,192") or a dash.
    pub prompt_tokens: String,
    /// Prompt tok/s ÷ the largest of the table, 0–1 (the bar behind the figure).
    pub share: f64,
    /// Status (valid unless the file says otherwise).
    pub status: CellStatus,
    /// The status reason, if any.
    pub reason: Option<String>,
    /// "⚠ served from cache" when the server served the prompt from its prefix cache.
    pub note: Option<&'static str>,
    /// A warm row's planned share (`--prefix-share`), basis points ([`prefix::key`]); `None`
    /// for a cold row.
    pub share_key: Option<u32>,
    /// A warm row's prefix cache: "89.6% hit (plan 90%, Prometheus)"; "cold" for a cold row
    /// of a run with warm rows; `None` when the run has none.
    pub cache: Option<String>,
    /// A warm row's TTFT against its context's cold one: "0.12× cold"; `None` when either is
    /// missing, and for a cold row.
    pub vs_cold: Option<String>,
}

/// An RFC 3339 time as a short line, `2026-11-30 14:19 UTC` (to the minute, in UTC); the value
/// as it is when it is not of that shape. The full value goes in the element's title.
pub fn short_time(rfc3339: &str) -> String {
    let parsed = (|| {
        let (date, rest) = rfc3339.split_once('T')?;
        let hm = rest.get(..5)?;
        let valid = date.len() == 10 && hm.as_bytes()[2] == b':';
        let utc = rest.ends_with('Z') || rest.ends_with("+00:00");
        (valid && utc).then(|| format!("{date} {hm} UTC"))
    })();
    parsed.unwrap_or_else(|| rfc3339.to_string())
}

/// An interval as "± 1.2 %": its half-width relative to its estimate (in `column`'s unit when
/// the estimate is 0), the way the diff view writes the interval of a change.
pub fn plus_minus(iv: &Interval, column: &Column) -> String {
    let half = (iv.high - iv.low).abs() / 2.0;
    if iv.estimate != 0.0 && iv.estimate.is_finite() {
        format!("± {}", speedmatrix_schema::diff::percent(half / iv.estimate.abs(), false))
    } else {
        format!("± {}", column.display(half))
    }
}

/// The interval of `column` in a decode cell, when the file has one (see
/// [`speedmatrix_schema::diff::cell_interval`]).
pub fn interval_of<'c>(c: &'c DecodeCell, column: &Column) -> Option<&'c Interval> {
    speedmatrix_schema::diff::cell_interval(c, &column.id()).ok()
}

/// The prefill table: context, prompt tok/s, TTFT (and prompt tokens when known); with
/// `--prefix-share`, each context's warm rows (by share) right after its cold one, with their
/// measured hit rate beside the plan and their TTFT against the cold row's.
pub fn prefill_lines(r: &Results) -> Vec<PrefillLine> {
    let top =
        r.prefill.iter().filter(|p| p.prefix_share.is_none()).filter_map(|p| p.prompt_tps).fold(0.0_f64, f64::max);
    let warm_rows = r.prefill.iter().any(|p| p.prefix_share.is_some());
    let mut rows: Vec<&PrefillRow> = r.prefill.iter().collect();
    rows.sort_by_key(|p| (p.context.tokens, prefix::key(p.prefix_share)));
    let cold_ttft = |tokens: u64| {
        r.prefill
            .iter()
            .find(|p| p.context.tokens == tokens && p.prefix_share.is_none() && p.status.is_measured())
            .and_then(|p| p.ttft_ms)
    };
    rows.into_iter()
        .map(|p| {
            let warm = p.prefix_share.is_some();
            PrefillLine {
                context: format!("{} context{}", p.context.label, warm_words(p.prefix_share)),
                prompt_tps: if p.status.is_measured() {
                    fmt("prompt_tps", p.prompt_tps)
                } else {
                    p.status.label().to_string()
                },
                ttft: fmt("ttft_ms", p.ttft_ms),
                prompt_tokens: p.prompt_tokens.map(registry::format_int).unwrap_or_else(|| DASH.into()),
                share: match p.prompt_tps {
                    Some(v) if top > 0.0 && p.status.is_measured() && !warm => (v / top).clamp(0.0, 1.0),
                    _ => 0.0,
                },
                status: p.status,
                reason: p.reason.clone(),
                note: speedmatrix_schema::status::prefill_cache_note(p),
                share_key: prefix::key(p.prefix_share),
                cache: match p.prefix_share {
                    Some(s) => Some(prefix::hit_rate_text(s, p.prefix_cache.as_ref())),
                    None => warm_rows.then(|| "cold".to_string()),
                },
                vs_cold: match (p.prefix_share, p.ttft_ms, cold_ttft(p.context.tokens)) {
                    (Some(_), Some(w), Some(c)) if c > 0.0 && p.status.is_measured() => {
                        Some(format!("{:.2}× cold", w / c))
                    }
                    _ => None,
                },
            }
        })
        .collect()
}

/// How a prefill row is named after its context: ` · warm, prefix 90%` for a warm row
/// (`--prefix-share`), nothing for a cold one.
pub fn warm_words(share: Option<f64>) -> String {
    share.map(|s| format!(" · warm, prefix {}", prefix::share_label(s))).unwrap_or_default()
}

/// Metrics the heatmap can show: every registry metric a decode cell can carry, as its
/// column (a distribution's median). `prompt_tps` belongs to prefill rows and is left out.
/// Then the cell figures beyond the table ([`registry::cell_figures`]: the measured prefix-cache
/// hit rate, the mean accepted length).
pub fn heatmap_metrics() -> Vec<Column> {
    let mut v: Vec<Column> = METRICS.iter().filter(|m| m.id != "prompt_tps").filter_map(|m| column(m.id)).collect();
    v.extend(registry::cell_figures());
    v
}

/// The heatmap metric with this id ([`heatmap_metrics`]; a bare distribution id means its p50).
pub fn heatmap_column(id: &str) -> Option<Column> {
    column(id).or_else(|| registry::cell_figures().into_iter().find(|c| c.id() == id))
}

/// The default heatmap metric (total tok/s).
pub const DEFAULT_METRIC: &str = "total_tps";

/// The label of a heatmap metric in the selector: "Total tok/s", "TTFT (ms, median)".
pub fn metric_option_label(c: &Column) -> String {
    let header = c.metric.header();
    if c.metric.kind == Kind::Distribution {
        match header.strip_suffix(')') {
            Some(h) => format!("{h}, median)"),
            None => format!("{header} (median)"),
        }
    } else {
        header
    }
}

/// Whether some decode cell of the run has a value for this column.
pub fn has_decode_data(r: &Results, c: &Column) -> bool {
    r.decode.iter().any(|d| Row::Decode(d).value(c).is_some())
}

/// One cell of the heatmap.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatCell {
    /// Context label of the row.
    pub context: String,
    /// Concurrency of the column.
    pub concurrency: u32,
    /// `None` when the file has no cell here (not planned).
    pub status: Option<CellStatus>,
    /// The selected metric, written by the registry; `None` when the cell has no value.
    pub value: Option<String>,
    /// "811 ms TTFT" (the cell's median TTFT), when known and not the selected metric.
    pub ttft: Option<String>,
    /// Position of the value on the colour scale, 0 (worst / lowest) – 1 (best / highest).
    pub level: Option<f64>,
    /// Why the status is what it is (shown on hover and focus).
    pub reason: Option<String>,
    /// "≈ approximate: tokens counted from chunks" when the cell's tokens could not be
    /// counted exactly (shown in the cell).
    pub note: Option<&'static str>,
    /// Why the selected metric is empty in a measured cell, when known ("none finished" in the
    /// cell, the reason on hover and focus).
    pub empty: Option<EmptyFigure>,
}

impl HeatCell {
    /// The background colour of the cell (`None`: the status style decides).
    pub fn background(&self) -> Option<String> {
        self.level.map(scale_colour)
    }

    /// What a screen reader says for the cell (its `aria-label`): "8K context, 128 at once:
    /// 6,342.6, Valid, 10,187 ms TTFT", then the reason when there is one.
    pub fn spoken(&self) -> String {
        let mut parts = vec![format!("{} context, {} at once", self.context, self.concurrency)];
        let mut rest = vec![self.value.clone().unwrap_or_else(|| "no value".into())];
        rest.push(self.status.map(|s| s.label().to_string()).unwrap_or_else(|| "not planned".into()));
        rest.extend(self.note.map(str::to_string));
        rest.extend(self.ttft.clone());
        rest.extend(self.reason.clone());
        rest.extend(self.empty.as_ref().map(|e| e.reason.clone()));
        parts.push(rest.join(", "));
        parts.join(": ")
    }

    /// Whether text on [`HeatCell::background`] should be light.
    pub fn light_text(&self) -> bool {
        self.level.is_some_and(|l| l > 0.55)
    }
}

/// The heatmap: rows are the planned contexts, columns the planned concurrency levels.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    /// Column headers: concurrency levels.
    pub concurrency: Vec<u32>,
    /// (context label, cells).
    pub rows: Vec<(String, Vec<HeatCell>)>,
    /// The values at the light and the dark end of the colour scale (smallest and largest, or
    /// the other way round when less is better), written by the registry.
    pub scale_ends: Option<(String, String)>,
    /// Whether the colour follows the logarithm of the value (values spanning 10× or more).
    pub log_scale: bool,
    /// Whether a darker cell is better (`Some(true)`), worse, or only higher (`None`).
    pub darker_is_better: Option<bool>,
    /// For a GPU figure of a run whose GPUs were assumed (all GPUs of the host, the server's
    /// processes not found on any): the words that mark it.
    pub assumed: Option<String>,
}

fn cell_at(r: &Results, tokens: u64, n: u32) -> Option<&DecodeCell> {
    r.decode.iter().find(|c| c.context.tokens == tokens && c.concurrency == n)
}

/// Why `column` is empty in decode cell `c` of run `r`, when a reason is known (its E2E
/// latency, see [`speedmatrix_schema::status::e2e_empty`]).
pub fn empty_why(c: &DecodeCell, column: &Column, r: &Results) -> Option<EmptyFigure> {
    (column.metric.id == "e2e_ms").then(|| e2e_empty(c, r.config.max_tokens, &r.missing)).flatten()
}

/// The reason shown for a cell: its own, else the over-capacity shortfall.
fn reason_of(c: &DecodeCell) -> Option<String> {
    c.reason.clone().or_else(|| c.capacity.as_ref().map(over_capacity_reason))
}

/// The smallest and largest value of `metric` over the measured decode cells of `runs`
/// (`None` when none has it): one colour scale for several runs side by side.
pub fn value_range(runs: &[&Results], metric: &Column) -> Option<(f64, f64)> {
    let values = runs
        .iter()
        .flat_map(|r| r.decode.iter())
        .filter(|c| c.status.is_measured())
        .filter_map(|c| Row::Decode(c).value(metric));
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
    })
}

/// Build the heatmap of `metric` (a registry column), its colour scale spanning this run.
pub fn heatmap(r: &Results, metric: &Column) -> Heatmap {
    heatmap_in(r, metric, value_range(&[r], metric))
}

/// Build the heatmap of `metric` on the colour scale `range` (smallest, largest), e.g. the
/// [`value_range`] of two runs compared side by side.
pub fn heatmap_in(r: &Results, metric: &Column, range: Option<(f64, f64)>) -> Heatmap {
    heatmap_on(r, metric, range, &r.config.contexts, &r.config.concurrency)
}

/// Build the heatmap of `metric` on the colour scale `range` with these rows (contexts) and
/// columns (concurrency levels), e.g. those of either of two runs, so both line up; a cell the
/// run lacks is empty.
pub fn heatmap_on(
    r: &Results,
    metric: &Column,
    range: Option<(f64, f64)>,
    contexts: &[ContextSize],
    concurrency: &[u32],
) -> Heatmap {
    let measured = |c: &DecodeCell| c.status.is_measured();
    let has_values = range.is_some();
    let (min, max) = range.unwrap_or((f64::INFINITY, f64::NEG_INFINITY));
    let higher_is_better = metric.metric.higher_is_better;
    let log_scale = min > 0.0 && max / min >= 10.0;
    let level = |v: f64| {
        let t = match (max > min, log_scale) {
            (false, _) => 1.0,
            (true, true) => (v.ln() - min.ln()) / (max.ln() - min.ln()),
            (true, false) => (v - min) / (max - min),
        };
        match higher_is_better {
            Some(false) => 1.0 - t,
            _ => t,
        }
    };
    let ttft_col = column("ttft_ms").expect("ttft_ms is in the registry");
    let show_ttft = metric.metric.id != "ttft_ms";
    let rows = contexts
        .iter()
        .map(|ctx| {
            let cells = concurrency
                .iter()
                .map(|&n| match cell_at(r, ctx.tokens, n) {
                    None => HeatCell {
                        context: ctx.label.clone(),
                        concurrency: n,
                        status: None,
                        value: None,
                        ttft: None,
                        level: None,
                        reason: None,
                        note: None,
                        empty: None,
                    },
                    Some(c) => {
                        let v = if measured(c) { Row::Decode(c).value(metric) } else { None };
                        let ttft = Row::Decode(c).value(&ttft_col).filter(|_| show_ttft);
                        HeatCell {
                            context: ctx.label.clone(),
                            concurrency: n,
                            status: Some(c.status),
                            value: v.map(|v| metric.display(v)),
                            ttft: ttft.map(|t| format!("{} TTFT", ttft_col.display(t))),
                            level: v.map(level),
                            reason: reason_of(c),
                            note: speedmatrix_schema::status::approximate_note(c),
                            empty: if v.is_none() && measured(c) { empty_why(c, metric, r) } else { None },
                        }
                    }
                })
                .collect();
            (ctx.label.clone(), cells)
        })
        .collect();
    Heatmap {
        concurrency: concurrency.to_vec(),
        rows,
        scale_ends: has_values.then(|| match higher_is_better {
            Some(false) => (metric.display(max), metric.display(min)),
            _ => (metric.display(min), metric.display(max)),
        }),
        log_scale,
        darker_is_better: higher_is_better.map(|_| true),
        assumed: speedmatrix_schema::summary::assumed_gpu_mark(r, &metric.id()),
    }
}

/// The colour scale: a sequential blue ramp, `level` 0 (light) → 1 (dark).
pub const SCALE: [(u8, u8, u8); 7] =
    [(239, 246, 255), (198, 219, 239), (158, 202, 225), (107, 174, 214), (66, 146, 198), (33, 113, 181), (8, 69, 148)];

/// The colour of `level` (0–1) on [`SCALE`], as CSS `rgb(…)`.
pub fn scale_colour(level: f64) -> String {
    let l = if level.is_finite() { level.clamp(0.0, 1.0) } else { 0.0 };
    let pos = l * (SCALE.len() - 1) as f64;
    let i = (pos.floor() as usize).min(SCALE.len() - 2);
    let f = pos - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (SCALE[i], SCALE[i + 1]);
    format!("rgb({}, {}, {})", mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The CSS gradient of the legend.
pub fn scale_gradient() -> String {
    let stops: Vec<String> = SCALE.iter().map(|(r, g, b)| format!("rgb({r}, {g}, {b})")).collect();
    format!("linear-gradient(to right, {})", stops.join(", "))
}

/// What a status means, for the legend (the seed page's words).
pub fn status_meaning(status: CellStatus) -> &'static str {
    match status {
        CellStatus::Valid => "measured; every request ran at once and none failed.",
        CellStatus::RequestsQueued => "the server could not run all requests at once, so some waited in a queue.",
        CellStatus::OverCapacity => {
            "not run because this many requests at this context would exceed the server's KV cache."
        }
        CellStatus::Error => "a request failed; no throughput is claimed (hover or focus the cell for the reason).",
        CellStatus::NotRun => "planned but not measured (the run was interrupted or the cell excluded).",
        CellStatus::Saturated => {
            "the server did not keep up with the offered request rate (the cell's reason gives the evidence)."
        }
        CellStatus::ClientLimited => {
            "the client did not send on schedule, so the server saw less than the planned load."
        }
    }
}

/// The mark drawn with each non-valid status, so statuses differ by more than colour.
pub fn status_mark(status: CellStatus) -> &'static str {
    match status {
        CellStatus::Valid => "",
        CellStatus::RequestsQueued => "◐",
        CellStatus::OverCapacity => "⊘",
        CellStatus::Error => "✕",
        CellStatus::NotRun => "○",
        CellStatus::Saturated => "▲",
        CellStatus::ClientLimited => "◇",
    }
}

// ---------------------------------------------------------------------------------------------
// All measurements

/// A column of the all-measurements table.
#[derive(Debug, Clone, PartialEq)]
pub enum TableColumn {
    /// "Phase".
    Phase,
    /// "Context" (sorted by tokens).
    Context,
    /// "Requests at once".
    Concurrency,
    /// "Status".
    Status,
    /// A registry column. `prefill_as` is the column prefill rows show instead (the seed's
    /// "Total tok/s" holds prompt tok/s on prefill rows).
    Metric {
        /// Header text.
        header: String,
        /// The registry column.
        column: Column,
        /// What prefill rows show in this column instead, if anything.
        prefill_as: Option<Column>,
    },
}

impl TableColumn {
    /// Header text.
    pub fn header(&self) -> String {
        match self {
            TableColumn::Phase => "Phase".into(),
            TableColumn::Context => "Context".into(),
            TableColumn::Concurrency => "Requests at once".into(),
            TableColumn::Status => "Status".into(),
            TableColumn::Metric { header, .. } => header.clone(),
        }
    }

    /// A stable id (for tests and `data-col`): `phase`, `context`, …, or the registry column id.
    pub fn id(&self) -> String {
        match self {
            TableColumn::Phase => "phase".into(),
            TableColumn::Context => "context".into(),
            TableColumn::Concurrency => "concurrency".into(),
            TableColumn::Status => "status".into(),
            TableColumn::Metric { column, .. } => column.id(),
        }
    }

    /// Whether the column holds numbers (right-aligned).
    pub fn numeric(&self) -> bool {
        matches!(self, TableColumn::Concurrency | TableColumn::Metric { .. })
    }

    fn metric_value(&self, row: &Row<'_>) -> Option<f64> {
        match self {
            TableColumn::Metric { column, prefill_as, .. } => match (row, prefill_as) {
                (Row::Prefill(_), Some(p)) => row.value(p),
                _ => row.value(column),
            },
            _ => None,
        }
    }

    /// The text of this column in `row`.
    pub fn text(&self, row: &Row<'_>) -> String {
        match self {
            TableColumn::Phase => row.phase().label().into(),
            TableColumn::Context => row.context().label.clone(),
            TableColumn::Concurrency => row.concurrency().to_string(),
            TableColumn::Status => row.status().label().into(),
            TableColumn::Metric { column, prefill_as, .. } => {
                let shown = match (row, prefill_as) {
                    (Row::Prefill(_), Some(p)) => p,
                    _ => column,
                };
                let Some(v) = self.metric_value(row) else { return DASH.into() };
                match row {
                    Row::Decode(c) => match interval_of(c, column) {
                        Some(iv) => format!("{} {}", shown.display(v), plus_minus(iv, column)),
                        None => shown.display(v),
                    },
                    _ => shown.display(v),
                }
            }
        }
    }

    /// Why this column is empty in `row` when a reason is known (today: a measured decode cell's
    /// E2E latency when no request finished in its window, or the file lacks it).
    pub fn empty_why(&self, row: &Row<'_>, r: &Results) -> Option<EmptyFigure> {
        match (self, row) {
            (TableColumn::Metric { column, .. }, Row::Decode(c)) if self.metric_value(row).is_none() => {
                empty_why(c, column, r)
            }
            _ => None,
        }
    }

    /// Compare two rows on this column; a missing figure sorts after every number.
    pub fn compare(&self, a: &Row<'_>, b: &Row<'_>) -> Ordering {
        let status_rank = |s: CellStatus| CellStatus::ALL.iter().position(|x| *x == s);
        match self {
            TableColumn::Phase => a.phase().cmp(&b.phase()),
            TableColumn::Context => a.context().tokens.cmp(&b.context().tokens),
            TableColumn::Concurrency => a.concurrency().cmp(&b.concurrency()),
            TableColumn::Status => status_rank(a.status()).cmp(&status_rank(b.status())),
            TableColumn::Metric { .. } => match (self.metric_value(a), self.metric_value(b)) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            },
        }
    }
}

/// The table's columns: the seed page's, or (with `all`) every registry column any row of the
/// run has a figure for.
pub fn table_columns(r: &Results, all: bool) -> Vec<TableColumn> {
    let mut cols = vec![TableColumn::Phase, TableColumn::Context, TableColumn::Concurrency, TableColumn::Status];
    if all {
        let rs = rows(r);
        cols.extend(columns().into_iter().filter(|c| rs.iter().any(|row| row.value(c).is_some())).map(|c| {
            let header = match c.stat {
                Some(s) => format!("{} {}", c.metric.header(), s.suffix()),
                None => c.metric.header(),
            };
            TableColumn::Metric {
                header: match speedmatrix_schema::summary::assumed_gpu_mark(r, &c.id()) {
                    Some(_) => format!("{header} (assumed GPUs)"),
                    None => header,
                },
                column: c,
                prefill_as: None,
            }
        }));
    } else {
        let prompt = column("prompt_tps").expect("prompt_tps is in the registry");
        cols.extend(SEED_COLUMNS.iter().map(|(header, id)| TableColumn::Metric {
            header: header.to_string(),
            column: column(id).expect("seed columns are registry columns"),
            prefill_as: (*id == "total_tps").then_some(prompt),
        }));
    }
    cols
}

/// One sort key: a column index and its direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    /// Index into the table's columns.
    pub column: usize,
    /// Ascending (true) or descending.
    pub ascending: bool,
}

/// Update the sort keys for a click on a header: a plain click sorts by that column alone
/// (a second click flips its direction); a shift-click adds it as the next key (or flips it
/// when already a key).
pub fn click_sort(keys: &mut Vec<SortKey>, column: usize, shift: bool) {
    let pos = keys.iter().position(|k| k.column == column);
    match (shift, pos) {
        (true, Some(i)) => keys[i].ascending = !keys[i].ascending,
        (true, None) => keys.push(SortKey { column, ascending: true }),
        (false, Some(i)) if keys.len() == 1 => keys[i].ascending = !keys[i].ascending,
        (false, _) => {
            keys.clear();
            keys.push(SortKey { column, ascending: true });
        }
    }
}

/// The table's filters; `None` shows every value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// Only this phase.
    pub phase: Option<Phase>,
    /// Only this context (tokens).
    pub context: Option<u64>,
    /// Only this concurrency.
    pub concurrency: Option<u32>,
    /// Only this status.
    pub status: Option<CellStatus>,
}

impl Filters {
    /// Whether `row` passes.
    pub fn keep(&self, row: &Row<'_>) -> bool {
        self.phase.is_none_or(|p| row.phase() == p)
            && self.context.is_none_or(|c| row.context().tokens == c)
            && self.concurrency.is_none_or(|n| row.concurrency() == n)
            && self.status.is_none_or(|s| row.status() == s)
    }
}

/// The choices of each filter that occur in the run: contexts (tokens, label), concurrency
/// levels and statuses, each sorted.
pub fn filter_choices(r: &Results) -> (Vec<(u64, String)>, Vec<u32>, Vec<CellStatus>) {
    let rs = rows(r);
    let mut ctx: Vec<(u64, String)> = rs.iter().map(|x| (x.context().tokens, x.context().label.clone())).collect();
    ctx.sort();
    ctx.dedup_by_key(|c| c.0);
    let mut conc: Vec<u32> = rs.iter().map(Row::concurrency).collect();
    conc.sort_unstable();
    conc.dedup();
    let statuses = CellStatus::ALL.into_iter().filter(|s| rs.iter().any(|x| x.status() == *s)).collect();
    (ctx, conc, statuses)
}

/// The rows of the table after filters and sorting, as indexes into [`rows`]. Ties keep file
/// order.
pub fn table_order(r: &Results, cols: &[TableColumn], keys: &[SortKey], filters: &Filters) -> Vec<usize> {
    let rs = rows(r);
    let mut idx: Vec<usize> = (0..rs.len()).filter(|&i| filters.keep(&rs[i])).collect();
    idx.sort_by(|&a, &b| {
        for k in keys {
            let Some(col) = cols.get(k.column) else { continue };
            let o = col.compare(&rs[a], &rs[b]);
            let o = if k.ascending { o } else { o.reverse() };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
    idx
}

/// The query parameters of the page's view (permalinks): `?metric=…&sort=…&phase=…&context=…
/// &concurrency=…&status=…&columns=all&show=…&cell=…&share=…`, beside the repeatable `?run=URL`.
pub const VIEW_PARAMS: [&str; 10] =
    ["metric", "sort", "phase", "context", "concurrency", "status", "columns", "show", "cell", "share"];

/// The prefix shares of a run's decode cells (`--prefix-share`), basis points
/// ([`prefix::key`]), ascending; empty for a run without them.
pub fn decode_shares(r: &Results) -> Vec<u32> {
    let mut v: Vec<u32> = r.decode.iter().filter_map(|c| prefix::key(c.prefix_share)).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The share the heatmap shows: `wanted` when the run has cells at it, else share 0 (the cold
/// cells) where the run has them, else its smallest; `None` for a run without shares.
pub fn heatmap_share(r: &Results, wanted: Option<u32>) -> Option<u32> {
    let shares = decode_shares(r);
    wanted.filter(|w| shares.contains(w)).or_else(|| shares.first().copied())
}

/// The run with only the decode cells at prefix share `key` (all of them for `None`): what the
/// heatmap and its cell panel show when the run has cells at several shares.
pub fn at_share(r: &Results, key: Option<u32>) -> Results {
    let mut out = r.clone();
    if key.is_some() {
        out.decode.retain(|c| prefix::key(c.prefix_share) == key);
    }
    out
}

/// A share as the URL keeps it (`?share=90`, percent of the prompt) and back; `None` for
/// anything [`prefix::parse_share`] refuses.
pub fn share_param(key: u32) -> String {
    prefix::share_label(f64::from(key) / 10_000.0).trim_end_matches('%').to_string()
}

/// What the heatmap says of its prefix share (`run --prefix-share`): what the share is, and
/// with cells at `shares` shares that the picker shows the others; `None` without shares.
pub fn share_note(shown: Option<u32>, shares: usize) -> Option<String> {
    let label = prefix::share_label(f64::from(shown?) / 10_000.0);
    let what = format!(
        "Prefix share {label}: each request's prompt is {label} of the context as a prefix shared by the cell's requests, then a rest of its own; the cell panel gives the server's measured prefix-cache hit rate beside it."
    );
    Some(match shares > 1 {
        true => format!("{what} The run measured {shares} shares: the picker above shows each one's cells."),
        false => what,
    })
}

/// The inverse of [`share_param`].
pub fn parse_share_param(v: &str) -> Option<u32> {
    prefix::key(prefix::parse_share(&format!("{}%", v.trim())).ok())
}

/// Sort keys as a query value: column ids in key order, `-` before a descending one
/// (`total_tps,-ttft_ms_p50`); `None` when unsorted.
pub fn encode_sort(keys: &[(String, bool)]) -> Option<String> {
    (!keys.is_empty()).then(|| {
        keys.iter().map(|(id, asc)| if *asc { id.clone() } else { format!("-{id}") }).collect::<Vec<_>>().join(",")
    })
}

/// The inverse of [`encode_sort`]; empty parts are skipped (ids are checked against the table's
/// columns by [`sort_keys`]).
pub fn parse_sort(value: &str) -> Vec<(String, bool)> {
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "-")
        .map(|p| match p.strip_prefix('-') {
            Some(id) => (id.to_string(), false),
            None => (p.to_string(), true),
        })
        .collect()
}

/// Sort keys by column id → [`SortKey`]s of `cols` (unknown ids are dropped, repeats kept once).
pub fn sort_keys(cols: &[TableColumn], keys: &[(String, bool)]) -> Vec<SortKey> {
    let mut out: Vec<SortKey> = Vec::new();
    for (id, ascending) in keys {
        if let Some(column) = cols.iter().position(|c| c.id() == *id) {
            if !out.iter().any(|k| k.column == column) {
                out.push(SortKey { column, ascending: *ascending });
            }
        }
    }
    out
}

/// [`SortKey`]s of `cols` → sort keys by column id.
pub fn sort_ids(cols: &[TableColumn], keys: &[SortKey]) -> Vec<(String, bool)> {
    keys.iter().filter_map(|k| cols.get(k.column).map(|c| (c.id(), k.ascending))).collect()
}

/// The filters as query parameters (`None`: remove the parameter).
pub fn filter_params(f: &Filters) -> [(&'static str, Option<String>); 4] {
    [
        ("phase", f.phase.map(|p| p.id().to_string())),
        ("context", f.context.map(|c| c.to_string())),
        ("concurrency", f.concurrency.map(|n| n.to_string())),
        ("status", f.status.map(|s| s.id().to_string())),
    ]
}

/// Filters read back from query parameters (`get(name)`); a value that names nothing is ignored.
pub fn filters_from(get: impl Fn(&str) -> Option<String>) -> Filters {
    Filters {
        phase: get("phase").and_then(|v| [Phase::Prefill, Phase::Decode].into_iter().find(|p| p.id() == v)),
        context: get("context").and_then(|v| v.parse().ok()),
        concurrency: get("concurrency").and_then(|v| v.parse().ok()),
        status: get("status").and_then(|v| CellStatus::ALL.into_iter().find(|s| s.id() == v)),
    }
}

/// A file name for a download: the run's title in lower case, letters and digits joined by
/// `-`, then `suffix` ("qwen3-5-122b-a10b-gptq-int4-on-h200-nvl-141gb-2" + "-charts.png").
pub fn file_stem(r: &Results) -> String {
    let mut out = String::new();
    for ch in title(r).chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').chars().take(80).collect::<String>();
    if out.is_empty() {
        "speedmatrix-run".into()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn times_read_short_in_utc_and_other_shapes_stay_whole() {
        assert_eq!(short_time("2026-11-30T14:19:39.016179452Z"), "2026-11-30 14:19 UTC");
        assert_eq!(short_time("2026-11-30T14:19:39+00:00"), "2026-11-30 14:19 UTC");
        assert_eq!(short_time("2026-11-30T14:19:39+02:00"), "2026-11-30T14:19:39+02:00");
        assert_eq!(short_time("yesterday"), "yesterday");
    }

    fn seed() -> Results {
        let bytes = include_bytes!("../../../tests/fixtures/h200-qwen3.5-122b-vllm.json");
        speedmatrix_schema::load_results(bytes).expect("the seed fixture loads")
    }

    #[test]
    fn header_matches_the_seed_page() {
        let r = seed();
        assert_eq!(title(&r), "Qwen3.5-122B-A10B-GPTQ-Int4 on H200 NVL 141GB ×2");
        assert_eq!(
            subtitle(&r),
            "vllm · 0.26.1rc1.dev638+g52be12cfa · INT4 · 6 contexts (8K–251K) × 8 concurrency levels (1–128) · \
             prefill at 8K, 16K, 32K, 64K, 128K, 251K, 256K"
        );
        let cards = cards(&r);
        let get = |t: &str, k: &str| {
            cards.iter().find(|c| c.title == t).and_then(|c| c.items.iter().find(|i| i.0 == k)).map(|i| i.1.clone())
        };
        assert_eq!(get("Hardware", "VRAM").as_deref(), Some("282 GB (2 × 141 GB)"));
        assert_eq!(get("Hardware", "GPU count").as_deref(), Some("2"));
        assert_eq!(get("Engine", "Commit").as_deref(), Some("52be12cfac0c"));
        assert_eq!(get("Run", "Benchmark tool").as_deref(), Some("llm-inference-bench v0.4.29"));
        assert_eq!(get("Run", "Time per measurement").as_deref(), Some("30 s"));
        assert_eq!(get("Run", "Max output").as_deref(), Some("4,096 tokens"));
        assert_eq!(get("Run", "Prefill mode").as_deref(), Some("Measured during decode warm-up"));
    }

    #[test]
    fn warm_rows_follow_their_cold_row_and_the_heatmap_shows_one_share() {
        let r = speedmatrix_schema::load_results(include_bytes!("../../../tests/fixtures/prefix-spec-twin.json"))
            .expect("the prefix-share fixture loads");
        let p = prefill_lines(&r);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].context.as_str(), p[0].cache.as_deref(), p[0].share_key), ("1K context", Some("cold"), None));
        assert_eq!(p[1].context, "1K context · warm, prefix 90%");
        assert_eq!(p[1].share_key, Some(9000));
        assert_eq!(p[1].cache.as_deref(), Some("89.1% hit (plan 90%, Prometheus)"));
        let (warm, cold) = (r.prefill[1].ttft_ms.unwrap(), r.prefill[0].ttft_ms.unwrap());
        assert_eq!(p[1].vs_cold, Some(format!("{:.2}× cold", warm / cold)));
        assert_eq!(p[1].share, 0.0, "the bar compares cold rows only");
        // The seed has no warm row: no cache column.
        assert!(prefill_lines(&seed()).iter().all(|l| l.cache.is_none()));

        assert_eq!(decode_shares(&r), [0, 9000]);
        assert_eq!(heatmap_share(&r, None), Some(0), "the cold cells by default");
        assert_eq!(heatmap_share(&r, Some(9000)), Some(9000));
        assert_eq!(heatmap_share(&r, Some(5000)), Some(0), "a share the run lacks falls back");
        let warm = at_share(&r, Some(9000));
        assert!(warm.decode.len() == 2 && warm.decode.iter().all(|c| c.prefix_share == Some(0.9)));
        let h = heatmap(&warm, &column("total_tps").unwrap());
        let want = column("total_tps").unwrap().display(warm.decode[1].total_tps.unwrap());
        assert_eq!(h.rows[0].1[1].value.as_deref(), Some(want.as_str()));
        assert_eq!((share_param(9000), parse_share_param("90")), ("90".to_string(), Some(9000)));
        assert_eq!((share_param(1250), parse_share_param("12.5")), ("12.5".to_string(), Some(1250)));
        assert_eq!(parse_share_param("x"), None);
        assert_eq!(decode_shares(&seed()), Vec::<u32>::new());
        assert_eq!(at_share(&seed(), None).decode.len(), seed().decode.len());
        assert!(share_note(Some(9000), 2).unwrap().contains("The run measured 2 shares"));
        assert_eq!(share_note(None, 0), None);
    }

    #[test]
    fn prefill_and_heatmap_use_registry_formats() {
        let r = seed();
        let p = prefill_lines(&r);
        assert_eq!(
            (p[0].context.as_str(), p[0].prompt_tps.as_str(), p[0].ttft.as_str()),
            ("8K context", "22.5K", "363 ms")
        );
        assert_eq!(p[6].prompt_tps, "12K");
        let h = heatmap(&r, &column("total_tps").unwrap());
        let c = &h.rows[0].1[7];
        assert_eq!((c.value.as_deref(), c.ttft.as_deref()), (Some("6,342.6"), Some("10,187 ms TTFT")));
        assert_eq!(c.level, Some(1.0));
        let q = &h.rows[3].1[3];
        assert_eq!(q.status, Some(CellStatus::RequestsQueued));
        assert_eq!((q.value.as_deref(), q.ttft.as_deref()), (Some("1,202.3"), Some("811 ms TTFT")));
        let o = &h.rows[5].1[5];
        assert_eq!((o.context.as_str(), o.concurrency, o.status), ("251K", 32, Some(CellStatus::OverCapacity)));
        assert!(o.value.is_none() && o.level.is_none() && o.reason.as_deref().unwrap().contains("KV cache"));
        assert_eq!(h.scale_ends, Some(("198.0".into(), "6,342.6".into())));
        assert!(h.log_scale, "198 … 6,342.6 spans more than 10×");
        // Lower TTFT is better: the fastest cell is the darkest.
        let t = heatmap(&r, &column("ttft_ms").unwrap());
        assert_eq!(t.rows[0].1[7].value.as_deref(), Some("10,187 ms"));
        assert_eq!(t.rows[0].1[7].level, Some(0.0));
        assert!(t.rows[0].1[7].ttft.is_none(), "no second TTFT line when TTFT is the metric");
        assert_eq!(t.scale_ends, Some(("10,187 ms".into(), "196 ms".into())), "the dark end is the best value");
    }

    #[test]
    fn gpu_figures_of_assumed_gpus_are_marked_in_the_heatmap_and_the_table() {
        let mut r = seed();
        r.decode[0].gpu_power_w = Some(650.0);
        let power = column("gpu_power_w").unwrap();
        let header =
            |r: &Results| table_columns(r, true).iter().find(|c| c.id() == "gpu_power_w").map(TableColumn::header);
        assert_eq!(heatmap(&r, &power).assumed, None, "the seed's GPUs were not assumed");
        assert_eq!(header(&r).as_deref(), Some("GPU power (W)"));
        r.hardware.gpu_selection = Some(speedmatrix_schema::GpuSelection {
            method: speedmatrix_schema::GpuSelectionMethod::AllAssumed,
            detail: "all 2 GPUs of the host".into(),
        });
        assert_eq!(heatmap(&r, &power).assumed.as_deref(), Some("assumed GPUs: all 2 GPUs of the host"));
        assert_eq!(header(&r).as_deref(), Some("GPU power (W) (assumed GPUs)"));
        assert_eq!(heatmap(&r, &column("total_tps").unwrap()).assumed, None, "only GPU figures are marked");
    }

    #[test]
    fn error_and_not_run_cells_show_their_status_and_reason() {
        let mut r = seed();
        r.decode[0].status = CellStatus::Error;
        r.decode[0].reason = Some("stream 3: HTTP 500".into());
        r.decode[0].total_tps = None;
        r.decode[1].status = CellStatus::NotRun;
        r.decode[1].reason = Some("interrupted".into());
        let h = heatmap(&r, &column("total_tps").unwrap());
        let (e, n) = (&h.rows[0].1[0], &h.rows[0].1[1]);
        assert_eq!((e.status, e.value.as_deref(), e.level), (Some(CellStatus::Error), None, None));
        assert_eq!(e.reason.as_deref(), Some("stream 3: HTTP 500"));
        assert_eq!(
            (n.status, n.value.as_deref(), n.level),
            (Some(CellStatus::NotRun), None, None),
            "no figure for a cell not run"
        );
        assert_eq!(n.reason.as_deref(), Some("interrupted"));
        let marks: Vec<&str> = CellStatus::ALL.iter().map(|s| status_mark(*s)).collect();
        let distinct: std::collections::HashSet<&&str> = marks.iter().filter(|m| !m.is_empty()).collect();
        assert_eq!(distinct.len(), CellStatus::ALL.len() - 1, "every non-valid status has its own mark");
    }

    #[test]
    fn an_empty_e2e_says_why_in_the_heatmap_and_the_table() {
        let mut r = seed();
        // The seed records no E2E; give its first cell one, as a collector run would.
        r.decode[0].e2e_ms = Some(speedmatrix_schema::Distribution { p50: Some(95_000.0), ..Default::default() });
        let e2e = column("e2e_ms").unwrap();
        let h = heatmap(&r, &e2e);
        let (has, none, not_recorded, over) = (&h.rows[0].1[0], &h.rows[0].1[5], &h.rows[0].1[1], &h.rows[5].1[5]);
        assert_eq!((has.value.as_deref(), has.empty.as_ref()), (Some("95,000 ms"), None));
        assert_eq!((none.concurrency, none.value.as_deref()), (32, None));
        let why = none.empty.as_ref().expect("the 8K × 32 cell says why it has no E2E");
        assert_eq!(why.short, "none finished");
        assert!(why.reason.starts_with("no request finished in the 30.0 s window: 4,096 output tokens at"), "{why:?}");
        assert!(none.spoken().contains(&why.reason), "{}", none.spoken());
        assert_eq!(
            not_recorded.empty.as_ref().map(|e| e.short),
            Some("not recorded"),
            "2 finished, no E2E in the file"
        );
        assert_eq!(over.empty, None, "an over-capacity cell says why with its status");
        // Another metric with a value has nothing to explain.
        assert!(heatmap(&r, &column("total_tps").unwrap()).rows[0].1[5].empty.is_none());
        // The table with every column: the E2E cell of 8K × 32 says why, the first has a figure.
        let cols = table_columns(&r, true);
        let e2e_col = cols.iter().find(|c| c.id() == "e2e_ms_p50").expect("an E2E column");
        let rs = rows(&r);
        let row_of = |n: u32| {
            rs.iter().find(|row| matches!(row, Row::Decode(c) if c.context.tokens == 8192 && c.concurrency == n))
        };
        let row32 = row_of(32).expect("8K × 32");
        assert_eq!(e2e_col.empty_why(row32, &r).map(|e| e.short), Some("none finished"));
        assert_eq!(e2e_col.empty_why(row_of(1).expect("8K × 1"), &r), None);
    }

    #[test]
    fn a_figure_with_an_interval_reads_plus_minus_in_the_table() {
        let mut r = seed();
        let iv = Interval {
            estimate: 10187.0,
            low: 10000.0,
            high: 10374.0,
            level: 0.95,
            method: speedmatrix_schema::IntervalMethod::BetweenRepeats,
            evidence: 3,
            std_error: 43.0,
            df: Some(2.0),
        };
        let c = r.decode.iter_mut().find(|c| c.context.tokens == 8192 && c.concurrency == 128).unwrap();
        c.intervals = Some(speedmatrix_schema::CellIntervals { ttft_ms_p50: Some(iv), ..Default::default() });
        let cols = table_columns(&r, false);
        let (ttft, total) = (
            cols.iter().find(|c| c.id() == "ttft_ms_p50").unwrap(),
            cols.iter().find(|c| c.id() == "total_tps").unwrap(),
        );
        let rs = rows(&r);
        let row = rs.iter().find(|x| matches!(x, Row::Decode(c) if c.context.tokens == 8192 && c.concurrency == 128));
        let row = row.expect("8K × 128");
        assert_eq!(ttft.text(row), "10,187 ms ± 1.8 %");
        assert_eq!(total.text(row), "6,342.6", "no interval of total tok/s: no ±");
        let zero = Interval { estimate: 0.0, low: -2.0, high: 2.0, ..iv };
        assert_eq!(plus_minus(&zero, &column("ttft_ms").unwrap()), "± 2 ms", "an estimate of 0 in the unit");
    }

    #[test]
    fn colour_scale_ends() {
        assert_eq!(scale_colour(0.0), "rgb(239, 246, 255)");
        assert_eq!(scale_colour(1.0), "rgb(8, 69, 148)");
        assert_eq!(scale_colour(f64::NAN), "rgb(239, 246, 255)");
        assert!(scale_gradient().starts_with("linear-gradient(to right, rgb(239, 246, 255)"));
    }

    #[test]
    fn metric_selector_covers_the_registry() {
        let ids: Vec<String> = heatmap_metrics().iter().map(|c| c.id()).collect();
        assert_eq!(ids.len(), METRICS.len() - 1 + 2, "and the hit rate and the mean accepted length");
        assert_eq!(ids[0], "total_tps");
        assert!(ids.ends_with(&["prefix_cache_hit_rate".to_string(), "spec_mean_accepted_len".to_string()]));
        // The prefix-share fixture's 90 % cells: the hit rate as the heatmap shows it.
        let r = speedmatrix_schema::load_results(include_bytes!("../../../tests/fixtures/prefix-spec-twin.json"))
            .expect("the prefix-share fixture loads");
        let hit = heatmap_column("prefix_cache_hit_rate").unwrap();
        let h = heatmap(&at_share(&r, Some(9000)), &hit);
        assert_eq!(h.rows[0].1[0].value.as_deref(), Some("89.1%"));
        assert!(has_decode_data(&r, &heatmap_column("spec_mean_accepted_len").unwrap()));
        assert!(!has_decode_data(&seed(), &hit));
        assert!(ids.contains(&"ttft_ms_p50".to_string()));
        assert_eq!(metric_option_label(&column("ttft_ms").unwrap()), "TTFT (ms, median)");
        assert_eq!(metric_option_label(&column("total_tps").unwrap()), "Total tok/s");
    }

    #[test]
    fn sorting_two_keys_and_filters() {
        let r = seed();
        let cols = table_columns(&r, false);
        let ttft = cols.iter().position(|c| c.id() == "ttft_ms_p50").unwrap();
        let conc = 2;
        let mut keys = Vec::new();
        click_sort(&mut keys, conc, false);
        click_sort(&mut keys, ttft, true);
        assert_eq!(keys, vec![SortKey { column: conc, ascending: true }, SortKey { column: ttft, ascending: true }]);
        click_sort(&mut keys, ttft, true);
        assert!(!keys[1].ascending, "shift-click on a key flips it");
        click_sort(&mut keys, conc, false);
        assert_eq!(keys, vec![SortKey { column: conc, ascending: true }], "a plain click sorts by one column");
        click_sort(&mut keys, conc, false);
        assert!(!keys[0].ascending);

        let keys = [SortKey { column: conc, ascending: false }, SortKey { column: ttft, ascending: true }];
        let order = table_order(&r, &cols, &keys, &Filters::default());
        let rs = rows(&r);
        let first: Vec<String> = order.iter().take(3).map(|&i| cols[ttft].text(&rs[i])).collect();
        assert_eq!(first, ["8,875 ms", "10,004 ms", "10,187 ms"].map(String::from));
        assert_eq!(cols[ttft].text(&rs[order[3]]), "—", "missing figures sort last");
        assert_eq!(cols[ttft].text(&rs[order[6]]), "4,657 ms", "then the next concurrency level");

        let f = Filters { phase: Some(Phase::Prefill), ..Default::default() };
        let order = table_order(&r, &cols, &[], &f);
        assert_eq!(order.len(), 7);
        assert_eq!(cols[4].text(&rs[order[0]]), "22.5K", "prefill rows show prompt tok/s as on the seed page");
        let f = Filters { status: Some(CellStatus::OverCapacity), context: Some(251 * 1024), ..Default::default() };
        assert_eq!(table_order(&r, &cols, &[], &f).len(), 3, "251K (257,024 tokens) × 32, 64, 128");
        let f = Filters { status: Some(CellStatus::OverCapacity), ..Default::default() };
        assert_eq!(table_order(&r, &cols, &[], &f).len(), 6);
        let (ctx, conc, st) = filter_choices(&r);
        assert_eq!(ctx.len(), 7);
        assert_eq!(conc, vec![1, 2, 4, 8, 16, 32, 64, 128]);
        assert_eq!(st, vec![CellStatus::Valid, CellStatus::RequestsQueued, CellStatus::OverCapacity]);
    }

    #[test]
    fn all_columns_add_registry_columns_with_data() {
        let r = seed();
        let cols = table_columns(&r, true);
        let ids: Vec<String> = cols.iter().map(TableColumn::id).collect();
        assert!(ids.contains(&"prompt_tps".to_string()));
        assert!(!ids.contains(&"tpot_ms_p50".to_string()), "the seed has no TPOT: no empty column");
        assert!(!ids.contains(&"ttft_ms_p99".to_string()), "the seed has no p99: no empty column");
    }
    #[test]
    fn view_state_round_trips_through_the_query() {
        let keys = vec![("total_tps".to_string(), true), ("ttft_ms_p50".to_string(), false)];
        let q = encode_sort(&keys).unwrap();
        assert_eq!(q, "total_tps,-ttft_ms_p50");
        assert_eq!(parse_sort(&q), keys);
        assert_eq!(encode_sort(&[]), None);
        assert_eq!(parse_sort(",-,context"), vec![("context".to_string(), true)]);
        let r = seed();
        let cols = table_columns(&r, false);
        let ks = sort_keys(&cols, &[("nope".into(), true), ("context".into(), false), ("context".into(), true)]);
        assert_eq!(ks, vec![SortKey { column: 1, ascending: false }]);
        assert_eq!(sort_ids(&cols, &ks), vec![("context".to_string(), false)]);
        let f = Filters { phase: Some(Phase::Decode), context: Some(8192), concurrency: Some(16), status: None };
        let params = filter_params(&f);
        let back = filters_from(|n| params.iter().find(|(k, _)| *k == n).and_then(|(_, v)| v.clone()));
        assert_eq!(back, f);
        assert_eq!(filters_from(|_| Some("bogus".into())), Filters::default());
        assert_eq!(file_stem(&r), "qwen3-5-122b-a10b-gptq-int4-on-h200-nvl-141gb-2");
        let h = heatmap(&r, &column("total_tps").unwrap());
        let cell = h.rows.iter().flat_map(|(_, c)| c).find(|c| c.context == "8K" && c.concurrency == 128).unwrap();
        assert_eq!(cell.spoken(), "8K context, 128 at once: 6,342.6, Valid, 10,187 ms TTFT");
    }
}
