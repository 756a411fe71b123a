//! Comparing two runs: A (the baseline) against B (the candidate). Pure; `speedmatrix diff` and
//! the viewer's diff view both print a [`RunDiff`], and `diff --format json` is its serde form.
//!
//! - Prefill rows are matched by context (nominal tokens), decode cells by (context,
//!   concurrency).
//! - For every registry column ([`crate::registry::columns`]) a matched row has in either run:
//!   A, B, the absolute change B − A, the relative change (B − A) ÷ |A| and a [`Verdict`]:
//!   better / worse by the registry's `higher_is_better`, `same` when the relative change is
//!   below the noise threshold (default 5 %, [`DEFAULT_THRESHOLD`]).
//! - Nothing is compared silently: cells in one run only, cells whose status differs
//!   (e.g. valid → over capacity) and contexts whose real `prompt_tokens` differ by more than
//!   2 % ([`PROMPT_TOKENS_TOLERANCE`]) are listed, and so is every header difference
//!   (hardware, engine version, model, quantization, launch-command flags, config).
//! - When both runs carry noise data (decode cells with intervals, [`crate::noise`]), the
//!   figures with an interval ([`NOISE_COLUMNS`]) get the verdict of a test instead: each
//!   delta carries the interval of B − A ([`DeltaInterval`]); better / worse only when that
//!   interval leaves out 0, the cell is a discovery of Benjamini–Hochberg over the decode cells
//!   of that figure, and the change is at least the threshold (default 0 %); "within noise"
//!   otherwise; "not enough data" when a side has no interval. Files without samples compare as
//!   before ([`RunDiff::noise`] is `None`: "no noise data").

use crate::command_line::CommandLine;
use crate::model::{CellStatus, ContextSize, DecodeCell, Interval, Results};
use crate::noise;
use crate::registry::{self, columns, Column, Stat};
use crate::site::run_title;
use crate::summary;
use crate::table::{rows, Phase, Row};
use serde::Serialize;
use std::collections::BTreeMap;

pub mod rates;
pub mod traces;
pub mod turns;

/// The tally's key for a decode cell whose status differs between the runs
/// ([`RunDiff::tally`]).
pub const STATUS_CHANGED: &str = "status changed";

/// The keys of [`RunDiff::tally`] in the order people read them.
pub const TALLY_KEYS: [&str; 7] =
    ["better", "worse", "same", "within noise", "not enough data", "changed", STATUS_CHANGED];

/// The figures of a decode cell that carry an interval ([`crate::model::CellIntervals`]).
pub const NOISE_COLUMNS: [&str; 3] = ["total_tps", "ttft_ms_p50", "tpot_ms_p50"];

/// The default noise threshold: a relative change below 5 % is "same".
pub const DEFAULT_THRESHOLD: f64 = 0.05;

/// Real prompt lengths of a context may differ by this fraction (2 %) before the diff warns
/// that the two runs did not send the same prompts.
pub const PROMPT_TOKENS_TOLERANCE: f64 = 0.02;

/// How one figure changed from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Better by the registry's direction, by at least the threshold.
    Better,
    /// Worse by the registry's direction, by at least the threshold.
    Worse,
    /// The relative change is below the noise threshold.
    Same,
    /// Changed by at least the threshold, but the metric has no better/worse direction
    /// (e.g. `prompt_tokens`, a distribution's `_count`).
    Changed,
    /// Both runs have an interval and the change is not told apart from noise (the interval of
    /// the difference holds 0, the false-alarm control did not keep it, or it is under the
    /// threshold).
    WithinNoise,
    /// Both runs carry noise data, but a side has no interval for this figure (too few
    /// requests, too short a window): no verdict either way.
    NotEnoughData,
}

impl Verdict {
    /// Words for people: "better", "worse", "same", "changed".
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Same => "same",
            Verdict::Changed => "changed",
            Verdict::WithinNoise => "within noise",
            Verdict::NotEnoughData => "not enough data",
        }
    }
}

/// One column of one matched row: A, B and the change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delta {
    /// Registry column id, e.g. `total_tps`, `ttft_ms_p50`.
    pub column: String,
    /// A's figure, in the metric's unit.
    pub a: Option<f64>,
    /// B's figure, in the metric's unit.
    pub b: Option<f64>,
    /// B − A, in the metric's unit; `None` unless both runs have the figure.
    pub abs: Option<f64>,
    /// (B − A) ÷ |A| as a fraction (0.1 = +10 %); `None` unless both have it and A ≠ 0
    /// (0 → 0 is 0).
    pub rel: Option<f64>,
    /// The verdict; `None` unless both runs have the figure and it can be compared.
    pub verdict: Option<Verdict>,
    /// Why the two figures are not compared (no change, no verdict), e.g. a count that grows
    /// with the window when the runs' windows differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_comparable: Option<String>,
    /// The interval of B − A, when both runs have an interval of this figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<DeltaInterval>,
    /// Why there is no interval of B − A (the verdict is then "not enough data"), e.g.
    /// "B: 8 request(s); the bootstrap over requests needs at least 10".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_note: Option<String>,
}

/// The interval of a difference B − A ([`noise::difference`]: Welch, at [`noise::LEVEL`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DeltaInterval {
    /// Lower bound of B − A, in the metric's unit.
    pub low: f64,
    /// Upper bound of B − A, in the metric's unit.
    pub high: f64,
    /// Two-sided p-value of "no change".
    pub p_value: f64,
    /// Kept by Benjamini–Hochberg over the decode cells of this figure.
    pub discovery: bool,
}

impl DeltaInterval {
    /// Half the interval's width, in the metric's unit (the ± people read).
    pub fn half_width(&self) -> f64 {
        (self.high - self.low) / 2.0
    }
}

/// How the diff tells change from noise, when both runs carry noise data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseRule {
    /// Confidence level of every interval, fraction ([`noise::LEVEL`]).
    pub level: f64,
    /// False discovery rate allowed over the decode cells of one figure
    /// ([`noise::FALSE_DISCOVERY_RATE`]).
    pub false_discovery_rate: f64,
    /// The false-alarm control: `benjamini_hochberg`.
    pub control: &'static str,
    /// The least relative change called better or worse, fraction (`--threshold`; 0 by
    /// default: significance alone).
    pub min_change: f64,
}
/// Which way is better for a column: the metric's direction, none for a `_count`.
pub fn direction(col: &Column) -> Option<bool> {
    if col.stat == Some(Stat::Count) {
        None
    } else {
        col.metric.higher_is_better
    }
}

/// Compare one figure. `threshold` is a fraction (0.05 = 5 %): a relative change strictly
/// below it is [`Verdict::Same`].
pub fn compare(col: &Column, a: Option<f64>, b: Option<f64>, threshold: f64) -> Delta {
    compare_figure(col.id(), direction(col), a, b, threshold)
}

/// Compare one figure named `column` whose better way is `direction` (higher is better:
/// `Some(true)`; `None`: only "changed"), as [`compare`] does for a registry column.
pub fn compare_figure(
    column: String,
    direction: Option<bool>,
    a: Option<f64>,
    b: Option<f64>,
    threshold: f64,
) -> Delta {
    let (abs, rel, verdict) = match (a, b) {
        (Some(a), Some(b)) => {
            let abs = b - a;
            let rel = if a != 0.0 {
                Some(abs / a.abs())
            } else if b == a {
                Some(0.0)
            } else {
                None
            };
            let verdict = if abs == 0.0 || rel.is_some_and(|r| r.abs() < threshold) {
                Verdict::Same
            } else {
                match direction {
                    Some(true) if b > a => Verdict::Better,
                    Some(false) if b < a => Verdict::Better,
                    Some(_) => Verdict::Worse,
                    None => Verdict::Changed,
                }
            };
            (Some(abs), rel, Some(verdict))
        }
        _ => (None, None, None),
    };
    Delta { column, a, b, abs, rel, verdict, not_comparable: None, interval: None, noise_note: None }
}

/// Metrics whose figure is a count over the window (it grows with the window's length): they
/// compare only between runs with the same window.
pub const WINDOW_SCALED: [&str; 2] = ["output_tokens", "completed_requests"];

/// The two runs' planned windows (s) when they differ by more than 1 % or either is not
/// recorded (an import whose source has no window: nothing says the windows match), else
/// `None`.
pub fn window_difference(a: &Results, b: &Results) -> Option<(Option<f64>, Option<f64>)> {
    let (wa, wb) = (a.config.window_s, b.config.window_s);
    match (wa, wb) {
        (Some(x), Some(y)) if (x - y).abs() <= 0.01 * x.abs().max(y.abs()) => None,
        _ => Some((wa, wb)),
    }
}

/// Where a row or cell is: phase, context and concurrency (1 for prefill rows), and a prefix
/// share above 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellRef {
    /// `prefill` or `decode`.
    pub phase: Phase,
    /// The context (label and nominal tokens).
    pub context: ContextSize,
    /// Simultaneous streams (1 for prefill rows).
    pub concurrency: u32,
    /// A warm prefill row's or a prefix-share cell's share above 0 (`--prefix-share`, plan,
    /// fraction 0–1); absent for a cold row and for cells at share 0, which pair with the cells
    /// of a run without shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_share: Option<f64>,
}

impl CellRef {
    /// "8K × 128" for a decode cell, "prefill 8K" for a prefill row, then ` · prefix 90%` for
    /// a share above 0.
    pub fn describe(&self) -> String {
        let share = crate::prefix::name_suffix(self.prefix_share);
        match self.phase {
            Phase::Prefill => format!("prefill {}{share}", self.context.label),
            Phase::Decode => format!("{} × {}{share}", self.context.label, self.concurrency),
        }
    }
}

/// Where a gated figure is: a prefill row or decode cell, or an open-loop rate cell. Its JSON is
/// the place's own fields (`phase`, `context`, `concurrency`, or `context`, `rate_rps`,
/// `arrival`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Place {
    /// A prefill row or decode cell.
    Matrix(CellRef),
    /// A rate cell.
    Rate(rates::RateRef),
}

impl Place {
    /// "8K × 128", "prefill 8K", "8K at 2 req/s".
    pub fn describe(&self) -> String {
        match self {
            Place::Matrix(c) => c.describe(),
            Place::Rate(r) => r.describe(),
        }
    }
}

/// A row the gate reads: where it is, both statuses and its figures' deltas.
trait GateRow {
    fn place(&self) -> Place;
    fn statuses(&self) -> (Option<CellStatus>, Option<CellStatus>);
    fn deltas(&self) -> &[Delta];
}

impl GateRow for RowDiff {
    fn place(&self) -> Place {
        Place::Matrix(self.cell.clone())
    }
    fn statuses(&self) -> (Option<CellStatus>, Option<CellStatus>) {
        (self.status_a, self.status_b)
    }
    fn deltas(&self) -> &[Delta] {
        &self.deltas
    }
}

impl GateRow for rates::RateRowDiff {
    fn place(&self) -> Place {
        Place::Rate(self.cell.clone())
    }
    fn statuses(&self) -> (Option<CellStatus>, Option<CellStatus>) {
        (self.status_a, self.status_b)
    }
    fn deltas(&self) -> &[Delta] {
        &self.deltas
    }
}

/// The rows the gate reads: every prefill row and decode cell, then every rate cell.
fn gate_rows(diff: &RunDiff) -> impl Iterator<Item = &dyn GateRow> {
    diff.rows.iter().map(|r| r as &dyn GateRow).chain(diff.rates.rows.iter().map(|r| r as &dyn GateRow))
}

/// Whether B's status lets the gate compare the figure: valid or requests queued. A rate cell
/// that B's server did not keep up with (saturated) or that B's client did not send on
/// schedule (client-limited) is a regression of its own ([`Regression::Status`]).
fn gate_compares(to: CellStatus) -> bool {
    matches!(to, CellStatus::Valid | CellStatus::RequestsQueued)
}

/// A prefill row or decode cell of either run, matched with its partner when it has one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowDiff {
    /// Where it is.
    #[serde(flatten)]
    pub cell: CellRef,
    /// A's status; `None` when A has no such row (only in B).
    pub status_a: Option<CellStatus>,
    /// B's status; `None` when B has no such row (only in A).
    pub status_b: Option<CellStatus>,
    /// Real prompt length A's server counted, tokens.
    pub prompt_tokens_a: Option<u64>,
    /// Real prompt length B's server counted, tokens.
    pub prompt_tokens_b: Option<u64>,
    /// Every registry column either side has a figure for, in registry order.
    pub deltas: Vec<Delta>,
}

impl RowDiff {
    /// Whether both runs have this row.
    pub fn matched(&self) -> bool {
        self.status_a.is_some() && self.status_b.is_some()
    }

    /// Whether both runs have it with different statuses.
    pub fn status_changed(&self) -> bool {
        self.matched() && self.status_a != self.status_b
    }

    /// The change of one column (`total_tps`, `ttft_ms_p50`; a bare distribution id means p50).
    pub fn delta(&self, column_id: &str) -> Option<&Delta> {
        let id = registry::column(column_id)?.id();
        self.deltas.iter().find(|d| d.column == id)
    }
}

/// One header field that differs: a card item, a config field or a launch-command flag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderChange {
    /// "Hardware", "Engine", "Run", "Config" or "Launch command".
    pub section: String,
    /// The field, e.g. "Version", "Contexts", or a flag such as `--max-num-seqs`.
    pub field: String,
    /// A's value (`None`: A does not say / lacks the flag). A flag without value is
    /// [`crate::command_line::FLAG_SET`].
    pub a: Option<String>,
    /// B's value.
    pub b: Option<String>,
}

/// A context whose real prompt lengths differ between the runs by more than
/// [`PROMPT_TOKENS_TOLERANCE`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptMismatch {
    /// The context.
    pub context: ContextSize,
    /// A's prompt tokens (server usage).
    pub a: u64,
    /// B's prompt tokens.
    pub b: u64,
    /// (B − A) ÷ A, fraction.
    pub rel: f64,
}

/// A status change of a matched row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusChange {
    /// Where.
    #[serde(flatten)]
    pub cell: CellRef,
    /// A's status.
    pub a: CellStatus,
    /// B's status.
    pub b: CellStatus,
}

/// Which run a side of the diff is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRef {
    /// The run's title (its label, else "model on hardware").
    pub title: String,
    /// The run id.
    pub id: String,
    /// What simulated the run's server, when it measured the twin
    /// ([`crate::simulation::short`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated: Option<String>,
}

/// The comparison of two runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    /// The noise threshold used, fraction (0.05 = 5 %), for figures compared without an
    /// interval.
    pub threshold: f64,
    /// How figures with an interval are judged; `null` when a run has no noise data (files
    /// without samples: every figure is judged by `threshold`, "no noise data").
    pub noise: Option<NoiseRule>,
    /// The baseline.
    pub a: RunRef,
    /// The candidate.
    pub b: RunRef,
    /// Header fields that differ (hardware, engine, run, config, launch-command flags).
    pub header: Vec<HeaderChange>,
    /// Decode-matrix rows: the contexts of either run, by tokens.
    pub contexts: Vec<ContextSize>,
    /// Decode-matrix columns: the concurrency levels of either run, ascending.
    pub concurrency: Vec<u32>,
    /// Every prefill row (by context) then every decode cell (by context, then concurrency).
    pub rows: Vec<RowDiff>,
    /// Rows and cells only A has.
    pub only_in_a: Vec<CellRef>,
    /// Rows and cells only B has.
    pub only_in_b: Vec<CellRef>,
    /// Matched rows and cells whose status differs.
    pub status_changes: Vec<StatusChange>,
    /// Contexts whose real prompt lengths differ by more than 2 % (the first row of each).
    pub prompt_mismatches: Vec<PromptMismatch>,
    /// The open-loop rate cells of both runs compared ([`rates::rate_diff`]); left out of the
    /// JSON when neither run has a rate cell.
    #[serde(skip_serializing_if = "rates::RateDiff::is_empty")]
    pub rates: rates::RateDiff,
    /// The replayed traces of both runs compared ([`traces::trace_diff`]), or why they cannot
    /// be; left out of the JSON when neither run replayed a trace.
    #[serde(skip_serializing_if = "traces::TraceDiff::is_empty")]
    pub traces: traces::TraceDiff,
    /// The conversations' turns of both runs compared ([`turns::turn_diff`]); left out of the
    /// JSON when neither run has conversations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<turns::TurnDiff>,
}

/// A row's or cell's prefix share as the diff keys it: basis points above 0
/// ([`crate::prefix::key`]); `None` for a cold row and for share 0, which pairs with a run
/// without shares.
fn share_key(r: &Row<'_>) -> Option<u32> {
    crate::prefix::key(r.prefix_share()).filter(|k| *k > 0)
}

impl RunDiff {
    /// The decode cell at (context tokens, concurrency), if either run has it.
    pub fn decode_cell(&self, context_tokens: u64, concurrency: u32) -> Option<&RowDiff> {
        self.decode_cell_at(context_tokens, concurrency, None)
    }

    /// The decode cell at (context tokens, concurrency, prefix share above 0 in basis points;
    /// `None`: share 0 or none), if either run has it.
    pub fn decode_cell_at(&self, context_tokens: u64, concurrency: u32, share: Option<u32>) -> Option<&RowDiff> {
        self.rows.iter().find(|r| {
            r.cell.phase == Phase::Decode
                && r.cell.context.tokens == context_tokens
                && r.cell.concurrency == concurrency
                && crate::prefix::key(r.cell.prefix_share) == share
        })
    }

    /// The rows of the decode matrix: each context of either run, then one row per prefix share
    /// above 0 (basis points) that either run measured at that context — with its label,
    /// `8K`, `8K · prefix 90%`.
    pub fn matrix_rows(&self) -> Vec<(&ContextSize, Option<u32>, String)> {
        let mut shares: Vec<u32> = self
            .rows
            .iter()
            .filter(|r| r.cell.phase == Phase::Decode)
            .filter_map(|r| crate::prefix::key(r.cell.prefix_share))
            .collect();
        shares.sort_unstable();
        shares.dedup();
        let mut out = Vec::new();
        for ctx in &self.contexts {
            out.push((ctx, None, ctx.label.clone()));
            for &k in &shares {
                let has = self.rows.iter().any(|r| {
                    r.cell.phase == Phase::Decode
                        && r.cell.context.tokens == ctx.tokens
                        && crate::prefix::key(r.cell.prefix_share) == Some(k)
                });
                if has {
                    let suffix = crate::prefix::name_suffix(Some(f64::from(k) / 10_000.0));
                    out.push((ctx, Some(k), format!("{}{suffix}", ctx.label)));
                }
            }
        }
        out
    }

    /// The prefill rows.
    pub fn prefill(&self) -> impl Iterator<Item = &RowDiff> {
        self.rows.iter().filter(|r| r.cell.phase == Phase::Prefill)
    }

    /// How many decode cells in both runs are better, worse, same and changed on `column_id`
    /// (by [`Verdict::label`], counting cells with the figure in both runs and the same status),
    /// and how many changed status ([`STATUS_CHANGED`], whatever their figures). Keys in
    /// [`TALLY_KEYS`] order when read through it; absent keys are zero.
    pub fn tally(&self, column_id: &str) -> BTreeMap<&'static str, usize> {
        let mut t = BTreeMap::new();
        for r in self.rows.iter().filter(|r| r.cell.phase == Phase::Decode) {
            let key = if r.status_changed() {
                Some(STATUS_CHANGED)
            } else {
                r.delta(column_id).and_then(|d| d.verdict).map(Verdict::label)
            };
            if let Some(k) = key {
                *t.entry(k).or_insert(0) += 1;
            }
        }
        t
    }
}

/// Compare `a` (baseline) with `b` (candidate) with `threshold` given (a fraction, 0.05 = 5 %):
/// [`diff_with`]`(a, b, Some(threshold))`.
pub fn diff(a: &Results, b: &Results, threshold: f64) -> RunDiff {
    diff_with(a, b, Some(threshold))
}

/// Whether a run carries noise data: a decode cell with intervals.
pub fn has_noise_data(r: &Results) -> bool {
    r.decode.iter().any(|c| c.intervals.is_some())
}

/// Compare `a` (baseline) with `b` (candidate). `threshold` (a fraction) is the least change
/// called better or worse; `None` means [`DEFAULT_THRESHOLD`] for figures without an interval
/// and 0 for figures with one (when both runs carry noise data).
pub fn diff_with(a: &Results, b: &Results, threshold: Option<f64>) -> RunDiff {
    let noise_rule = (has_noise_data(a) && has_noise_data(b)).then(|| NoiseRule {
        level: noise::LEVEL,
        false_discovery_rate: noise::FALSE_DISCOVERY_RATE,
        control: "benjamini_hochberg",
        min_change: threshold.unwrap_or(0.0),
    });
    let given_threshold = threshold;
    let threshold = threshold.unwrap_or(DEFAULT_THRESHOLD);
    let mut cols = columns();
    cols.extend(crate::registry::cell_figures());
    // Rows and cells pair by phase, context, concurrency and prefix share (a warm row with the
    // warm row of the same share, never with a cold one).
    type Key = (Phase, u64, u32, Option<u32>);
    let key = |r: &Row<'_>| (r.phase(), r.context().tokens, r.concurrency(), share_key(r));
    let mut pairs: BTreeMap<Key, (Option<Row<'_>>, Option<Row<'_>>)> = BTreeMap::new();
    for r in rows(a) {
        pairs.entry(key(&r)).or_default().0.get_or_insert(r);
    }
    for r in rows(b) {
        pairs.entry(key(&r)).or_default().1.get_or_insert(r);
    }
    let mut out_rows = Vec::new();
    let (mut only_in_a, mut only_in_b, mut status_changes, mut prompt_mismatches) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::<PromptMismatch>::new());
    for ((phase, _, concurrency, share), (ra, rb)) in pairs {
        let context = ra.or(rb).map(|r| r.context().clone()).expect("a pair holds at least one row");
        let prefix_share = share.and_then(|_| ra.or(rb).and_then(|r| r.prefix_share()));
        let cell = CellRef { phase, context, concurrency, prefix_share };
        let mut row = row_diff(&cell, ra, rb, &cols, threshold);
        if let (true, Some(Row::Decode(ca)), Some(Row::Decode(cb))) = (noise_rule.is_some(), ra, rb) {
            attach_intervals(&mut row, ca, cb);
        }
        if let Some((wa, wb)) = window_difference(a, b) {
            set_not_comparable(&mut row, wa, wb);
        }
        match (row.status_a, row.status_b) {
            (Some(_), None) => only_in_a.push(cell.clone()),
            (None, Some(_)) => only_in_b.push(cell.clone()),
            (Some(x), Some(y)) if x != y => status_changes.push(StatusChange { cell: cell.clone(), a: x, b: y }),
            _ => {}
        }
        if let (Some(pa), Some(pb)) = (row.prompt_tokens_a, row.prompt_tokens_b) {
            let rel = if pa == 0 { f64::from(u8::from(pb != 0)) } else { (pb as f64 - pa as f64) / pa as f64 };
            if rel.abs() > PROMPT_TOKENS_TOLERANCE
                && !prompt_mismatches.iter().any(|m| m.context.tokens == cell.context.tokens)
            {
                prompt_mismatches.push(PromptMismatch { context: cell.context.clone(), a: pa, b: pb, rel });
            }
        }
        out_rows.push(row);
    }
    // Prefill rows first (Phase orders Prefill < Decode), then decode cells.
    let (contexts, concurrency) = matrix_axes(a, b);
    prompt_mismatches.sort_by_key(|m| m.context.tokens);
    if let Some(rule) = &noise_rule {
        noise_verdicts(&mut out_rows, rule, &cols);
    }
    RunDiff {
        threshold,
        noise: noise_rule,
        a: RunRef { title: run_title(a), id: a.run.id.clone(), simulated: crate::simulation::short(a) },
        b: RunRef { title: run_title(b), id: b.run.id.clone(), simulated: crate::simulation::short(b) },
        header: header_changes(a, b),
        contexts,
        concurrency,
        rows: out_rows,
        only_in_a,
        only_in_b,
        status_changes,
        prompt_mismatches,
        rates: rates::rate_diff(a, b, given_threshold),
        traces: traces::trace_diff(a, b, given_threshold),
        turns: turns::turn_diff(a, b, given_threshold),
    }
}

/// One row or cell of either run against its partner: both statuses, both prompt lengths and
/// the delta of every column either side has.
fn row_diff(cell: &CellRef, ra: Option<Row<'_>>, rb: Option<Row<'_>>, cols: &[Column], threshold: f64) -> RowDiff {
    let prompt_tokens = |r: Option<Row<'_>>| match r {
        Some(Row::Prefill(p)) => p.prompt_tokens,
        Some(Row::Decode(d)) => d.prompt_tokens,
        None => None,
    };
    let deltas = cols
        .iter()
        .filter_map(|c| {
            let (va, vb) = (ra.and_then(|r| r.value(c)), rb.and_then(|r| r.value(c)));
            (va.is_some() || vb.is_some()).then(|| compare(c, va, vb, threshold))
        })
        .collect();
    RowDiff {
        cell: cell.clone(),
        status_a: ra.map(|r| r.status()),
        status_b: rb.map(|r| r.status()),
        prompt_tokens_a: prompt_tokens(ra),
        prompt_tokens_b: prompt_tokens(rb),
        deltas,
    }
}

/// A decode cell's interval of `column` (a [`NOISE_COLUMNS`] id), or why it has none: "no
/// noise data" for a cell without `intervals`, else the reason its `missing` gives.
pub fn cell_interval<'c>(cell: &'c DecodeCell, column: &str) -> Result<&'c Interval, String> {
    let Some(iv) = &cell.intervals else { return Err("no noise data".into()) };
    let got = match column {
        "total_tps" => iv.total_tps.as_ref(),
        "ttft_ms_p50" => iv.ttft_ms_p50.as_ref(),
        "tpot_ms_p50" => iv.tpot_ms_p50.as_ref(),
        _ => None,
    };
    got.ok_or_else(|| {
        iv.missing.iter().find(|m| m.figure == column).map_or("no interval".to_string(), |m| m.reason.clone())
    })
}

/// The interval of B − A on each figure of [`NOISE_COLUMNS`] both cells have, centred on the
/// figures' own change; "not enough data" (with why) where a side has no interval.
fn attach_intervals(row: &mut RowDiff, ca: &DecodeCell, cb: &DecodeCell) {
    for d in row.deltas.iter_mut().filter(|d| NOISE_COLUMNS.contains(&d.column.as_str())) {
        let (Some(va), Some(vb)) = (d.a, d.b) else { continue };
        match (cell_interval(ca, &d.column), cell_interval(cb, &d.column)) {
            (Ok(ia), Ok(ib)) => {
                let x = noise::difference(&Interval { estimate: va, ..*ia }, &Interval { estimate: vb, ..*ib });
                d.interval = Some(DeltaInterval { low: x.low, high: x.high, p_value: x.p_value, discovery: false });
            }
            (ra, rb) => {
                let why: Vec<String> = [("A", ra.err()), ("B", rb.err())]
                    .into_iter()
                    .filter_map(|(side, e)| e.map(|e| format!("{side}: {e}")))
                    .collect();
                d.verdict = Some(Verdict::NotEnoughData);
                d.noise_note = Some(why.join("; "));
            }
        }
    }
}

/// The verdicts of the figures with an interval: Benjamini–Hochberg over the decode cells of
/// each figure, then better / worse for a discovery whose interval leaves out 0 and whose
/// change is at least `rule.min_change`; within noise for the rest.
fn noise_verdicts(rows: &mut [RowDiff], rule: &NoiseRule, cols: &[Column]) {
    for column in NOISE_COLUMNS {
        let Some(col) = cols.iter().find(|c| c.id() == column) else { continue };
        let mut at: Vec<(usize, usize)> = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            if let Some(j) = r.deltas.iter().position(|d| d.column == column && d.interval.is_some()) {
                at.push((i, j));
            }
        }
        let p: Vec<f64> = at.iter().map(|&(i, j)| rows[i].deltas[j].interval.map_or(1.0, |x| x.p_value)).collect();
        let kept = noise::benjamini_hochberg(&p, rule.false_discovery_rate);
        for (&(i, j), keep) in at.iter().zip(kept) {
            let d = &mut rows[i].deltas[j];
            let Some(iv) = d.interval.as_mut() else { continue };
            iv.discovery = keep;
            let excludes_zero = iv.low > 0.0 || iv.high < 0.0;
            let big_enough = d.rel.is_none_or(|r| r.abs() >= rule.min_change);
            let up = d.abs.is_some_and(|x| x > 0.0);
            d.verdict = Some(match (keep && excludes_zero && big_enough, direction(col)) {
                (true, Some(higher_is_better)) if up == higher_is_better => Verdict::Better,
                (true, Some(_)) => Verdict::Worse,
                (true, None) => Verdict::Changed,
                (false, _) => Verdict::WithinNoise,
            });
        }
    }
}

/// Counts over the window are not compared between runs of different windows.
fn set_not_comparable(row: &mut RowDiff, wa: Option<f64>, wb: Option<f64>) {
    let secs = |w: Option<f64>| {
        w.map_or("not recorded".to_string(), |w| format!("{} s", registry::format_number(w, registry::Style::Fixed(0))))
    };
    let what = if wa.is_some() && wb.is_some() { "different length" } else { "different or unknown length" };
    for d in &mut row.deltas {
        let metric = registry::column(&d.column).map(|c| c.metric.id);
        if metric.is_some_and(|m| WINDOW_SCALED.contains(&m)) {
            d.abs = None;
            d.rel = None;
            d.verdict = None;
            d.not_comparable = Some(format!("counted over windows of {what} ({} and {})", secs(wa), secs(wb)));
        }
    }
}

/// The decode matrix of both runs: the contexts of either (planned or measured), by tokens, and
/// the concurrency levels of either, ascending.
fn matrix_axes(a: &Results, b: &Results) -> (Vec<ContextSize>, Vec<u32>) {
    let mut contexts: Vec<ContextSize> = Vec::new();
    for c in
        a.config.contexts.iter().chain(&b.config.contexts).chain(a.decode.iter().chain(&b.decode).map(|d| &d.context))
    {
        if !contexts.iter().any(|x| x.tokens == c.tokens) {
            contexts.push(c.clone());
        }
    }
    contexts.sort_by_key(|c| c.tokens);
    let mut concurrency: Vec<u32> = a.config.concurrency.iter().chain(&b.config.concurrency).copied().collect();
    concurrency.sort_unstable();
    concurrency.dedup();
    (contexts, concurrency)
}

/// Card items that are expected to differ between any two runs and say nothing about the setup.
const IGNORED_ITEMS: [(&str, &str); 3] = [("Run", "Started"), ("Run", "Finished"), ("Run", "Run id")];

/// Every header difference: the Hardware, Engine and Run cards (as the page shows them, minus
/// start/finish time and run id), config fields the cards do not show, and the launch command
/// flag by flag.
pub fn header_changes(a: &Results, b: &Results) -> Vec<HeaderChange> {
    let mut out = Vec::new();
    let (ca, cb) = (summary::cards(a), summary::cards(b));
    for (x, y) in ca.iter().zip(&cb) {
        let mut keys: Vec<&'static str> = x.items.iter().map(|i| i.0).collect();
        for (k, _) in &y.items {
            if !keys.contains(k) {
                keys.push(k);
            }
        }
        let get = |c: &summary::Card, k: &str| c.items.iter().find(|i| i.0 == k).map(|i| i.1.clone());
        for k in keys {
            if IGNORED_ITEMS.contains(&(x.title, k)) {
                continue;
            }
            let (va, vb) = (get(x, k), get(y, k));
            if va != vb {
                out.push(HeaderChange { section: x.title.into(), field: k.into(), a: va, b: vb });
            }
        }
    }
    for (field, va, vb) in config_fields(a).into_iter().zip(config_fields(b)).map(|((f, va), (_, vb))| (f, va, vb)) {
        if va != vb {
            out.push(HeaderChange { section: "Config".into(), field: field.into(), a: va, b: vb });
        }
    }
    out.extend(launch_changes(a.engine.launch_command.as_deref(), b.engine.launch_command.as_deref()));
    // A different window heads the list: it changes what every count in the diff means.
    out.sort_by_key(|c| c.field != WINDOW_FIELD);
    out
}

/// The card item of the window's length.
const WINDOW_FIELD: &str = "Time per measurement";

fn config_fields(r: &Results) -> Vec<(&'static str, Option<String>)> {
    let c = &r.config;
    let labels = |v: &[ContextSize]| Some(v.iter().map(|x| x.label.clone()).collect::<Vec<_>>().join(", "));
    // An enum as the results file spells it (`kv_cache_size_tokens`, `distinct`), so the header
    // difference names the value a reader finds in the file.
    let name = |v: Option<serde_json::Value>| v.and_then(|v| v.as_str().map(str::to_string));
    vec![
        ("Contexts", labels(&c.contexts)),
        ("Concurrency", Some(c.concurrency.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))),
        ("Prefill contexts", labels(&c.prefill_contexts)),
        ("Ignore EOS", c.ignore_eos.map(|v| v.to_string())),
        ("Temperature", c.temperature.map(|v| v.to_string())),
        ("Seed", c.seed.map(|v| v.to_string())),
        (
            "Prompt corpus",
            c.prompt_corpus
                .as_ref()
                .map(|p| format!("{} {}", p.name, p.sha256.as_deref().unwrap_or("")).trim_end().to_string()),
        ),
        ("Prompt sharing", name(c.prompt_sharing.and_then(|p| serde_json::to_value(p).ok()))),
        ("Stall timeout", c.stall_timeout_s.map(|v| format!("{v} s"))),
        ("KV budget source", name(r.engine.kv_budget_source.and_then(|k| serde_json::to_value(k).ok()))),
    ]
}

/// The launch commands' differences: the command and its arguments as one field, then each
/// flag that is added, removed or has another value. A launch command one run does not know is
/// a difference ("unknown in A", "unknown in B", "unknown in A and B"), never "same": nothing
/// says the servers were launched alike.
fn launch_changes(a: Option<&str>, b: Option<&str>) -> Vec<HeaderChange> {
    let change = |field: &str, a: Option<String>, b: Option<String>| HeaderChange {
        section: "Launch command".into(),
        field: field.into(),
        a,
        b,
    };
    match (a, b) {
        (None, None) => vec![change("unknown in A and B", None, None)],
        (Some(x), None) => vec![change("unknown in B", Some(x.into()), None)],
        (None, Some(y)) => vec![change("unknown in A", None, Some(y.into()))],
        (Some(x), Some(y)) if x == y => vec![],
        (Some(x), Some(y)) => match (CommandLine::parse(x), CommandLine::parse(y)) {
            (Some(CommandLine { positional: pa, flags: fa }), Some(CommandLine { positional: pb, flags: fb })) => {
                let mut out = Vec::new();
                if pa != pb {
                    out.push(change("command", Some(pa.join(" ")), Some(pb.join(" "))));
                }
                let mut names: Vec<&String> = fa.iter().map(|f| &f.0).collect();
                for (f, _) in &fb {
                    if !names.contains(&f) {
                        names.push(f);
                    }
                }
                let get = |fl: &[(String, String)], n: &str| {
                    let v: Vec<&str> = fl.iter().filter(|f| f.0 == n).map(|f| f.1.as_str()).collect();
                    (!v.is_empty()).then(|| v.join(" "))
                };
                for n in names {
                    let (va, vb) = (get(&fa, n), get(&fb, n));
                    if va != vb {
                        out.push(change(n, va, vb));
                    }
                }
                if out.is_empty() {
                    // Same words, other quoting or spacing.
                    out.push(change("command line", Some(x.into()), Some(y.into())));
                }
                out
            }
            _ => vec![change("command line", Some(x.into()), Some(y.into()))],
        },
    }
}

/// Why `--fail-on-regression` fails: one cell that was valid in A and had the gated figure
/// there, and that got worse or was not measured (the same way) in B.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Regression {
    /// A cell valid in A whose figure got worse by more than the allowed share.
    Worse {
        /// Where.
        #[serde(flatten)]
        cell: Place,
        /// The column compared.
        column: String,
        /// A's figure.
        a: f64,
        /// B's figure.
        b: f64,
        /// How much worse, fraction of A (0.12 = 12 % worse).
        worse_by: f64,
    },
    /// A cell valid in A that is `error`, `over_capacity` or `not_run` in B (a rate cell also
    /// `saturated` or `client_limited`).
    Status {
        /// Where.
        #[serde(flatten)]
        cell: Place,
        /// B's status.
        to: CellStatus,
    },
    /// A cell valid in A that B does not have at all (B's plan left it out, or B stopped early).
    Missing {
        /// Where.
        #[serde(flatten)]
        cell: Place,
    },
    /// A cell valid in A that B measured (valid or requests queued) without the gated figure.
    NoFigure {
        /// Where.
        #[serde(flatten)]
        cell: Place,
        /// The column gated on.
        column: String,
        /// B's status.
        to: CellStatus,
    },
}

impl Regression {
    /// One line for people, saying which cell and why, e.g.
    /// "8K × 128: Total tok/s 6,342.6 → 5,000.0 (21.2 % worse)",
    /// "8K × 64: Valid → Not run (B did not measure it)".
    pub fn describe(&self) -> String {
        let label = |column: &str| registry::column(column).map(|c| c.metric.label).unwrap_or(column).to_string();
        match self {
            Regression::Worse { cell, column, a, b, worse_by } => {
                let col = registry::column(column);
                let show = |v: f64| col.map(|c| c.display(v)).unwrap_or_else(|| v.to_string());
                format!(
                    "{}: {} {} → {} ({} worse)",
                    cell.describe(),
                    label(column),
                    show(*a),
                    show(*b),
                    percent(*worse_by, false)
                )
            }
            Regression::Status { cell, to } => {
                let why = match to {
                    CellStatus::Error => "B's measurement failed",
                    CellStatus::OverCapacity => "B's server could not hold it",
                    CellStatus::NotRun => "B did not measure it",
                    CellStatus::Saturated => "B's server did not keep up with the rate",
                    CellStatus::ClientLimited => "B's client did not send on schedule",
                    CellStatus::Valid | CellStatus::RequestsQueued => "B measured it",
                };
                format!("{}: Valid → {} ({why})", cell.describe(), to.label())
            }
            Regression::Missing { cell } => format!("{}: only in A (B has no such cell)", cell.describe()),
            Regression::NoFigure { cell, column, to } => {
                format!("{}: Valid → {} without {} (B has no figure)", cell.describe(), to.label(), label(column))
            }
        }
    }
}

/// The outcome of `--fail-on-regression` on one column.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    /// The column gated on, e.g. `total_tps`.
    pub column: String,
    /// The largest allowed worsening, fraction (0.05 = 5 %).
    pub max_worse: f64,
    /// How many rows valid in A had the figure in both runs (the cells actually compared).
    pub compared: usize,
    /// Every regression found, in row order.
    pub regressions: Vec<Regression>,
}

impl Gate {
    /// Passed: at least one figure was compared and nothing regressed. A gate that compared
    /// nothing fails ("nothing to compare"): it cannot vouch for B.
    pub fn passed(&self) -> bool {
        self.compared > 0 && self.regressions.is_empty()
    }
}

/// The gate on `col` with `max_worse` (fraction, 0.05 = 5 %), see [`regressions`]; also counts
/// the rows compared so that a gate with nothing to compare fails.
pub fn gate(diff: &RunDiff, col: &Column, max_worse: f64) -> Gate {
    let id = col.id();
    let compared = gate_rows(diff)
        .filter(|r| {
            let (a, b) = r.statuses();
            a == Some(CellStatus::Valid) && b.is_some_and(gate_compares)
        })
        .filter_map(|r| r.deltas().iter().find(|d| d.column == id))
        .filter(|d| d.a.is_some() && d.b.is_some())
        .count();
    Gate { column: id, max_worse, compared, regressions: regressions(diff, col, max_worse) }
}

/// The regressions of `diff` for the gate, over every row, decode cell and rate cell valid in A
/// that has the `col` figure in A:
/// - B measured it (valid or requests queued) and the figure is worse by more than `max_worse`
///   (fraction, 0.05 = 5 %) by the registry's direction: [`Regression::Worse`];
/// - B measured it but has no such figure: [`Regression::NoFigure`];
/// - B's cell is `error`, `over_capacity` or `not_run` (a rate cell also `saturated` or
///   `client_limited`): [`Regression::Status`];
/// - B has no such cell: [`Regression::Missing`].
///
/// A column without a direction (e.g. `prompt_tokens`) yields no [`Regression::Worse`]. When
/// the figure has an interval of B − A ([`Delta::interval`]), only a "worse" verdict counts: a
/// change within noise is no regression however large.
pub fn regressions(diff: &RunDiff, col: &Column, max_worse: f64) -> Vec<Regression> {
    let id = col.id();
    let dir = direction(col);
    let mut out = Vec::new();
    for r in gate_rows(diff).filter(|r| r.statuses().0 == Some(CellStatus::Valid)) {
        let Some(d) = r.deltas().iter().find(|d| d.column == id) else { continue };
        let Some(a) = d.a else { continue };
        let cell = r.place();
        match r.statuses().1 {
            None => out.push(Regression::Missing { cell }),
            Some(to) if !gate_compares(to) => out.push(Regression::Status { cell, to }),
            Some(to) => {
                let Some(b) = d.b else {
                    out.push(Regression::NoFigure { cell, column: id.clone(), to });
                    continue;
                };
                let (Some(up), true) = (dir, a != 0.0) else { continue };
                let worse_by = if up { (a - b) / a.abs() } else { (b - a) / a.abs() };
                // With noise data the verdict decides: a change within noise is no regression.
                // Without an interval ("not enough data", no noise data) the share alone does.
                let noise_says_no = d.interval.is_some() && d.verdict != Some(Verdict::Worse);
                if worse_by > max_worse && !noise_says_no {
                    out.push(Regression::Worse { cell, column: id.clone(), a, b, worse_by });
                }
            }
        }
    }
    out
}

/// A fraction as a percentage with one decimal: `0.1` → `+10.0 %` (with `signed`), `10.0 %`.
pub fn percent(f: f64, signed: bool) -> String {
    let v = f * 100.0;
    let v = if v == 0.0 { 0.0 } else { v };
    if signed {
        format!("{}{} %", if v > 0.0 { "+" } else { "" }, registry::format_number(v, registry::Style::Fixed(1)))
    } else {
        format!("{} %", registry::format_number(v, registry::Style::Fixed(1)))
    }
}

/// B − A in the column's style with a sign: `+637.4`, `−12 ms` (ASCII minus: `-12 ms`).
pub fn signed_delta(col: &Column, abs: f64) -> String {
    let s = col.display(abs);
    if abs > 0.0 {
        format!("+{s}")
    } else {
        s
    }
}

/// A value that is not a percentage (`--threshold abc`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a percentage; give a number ≥ 0 such as 5 or 5%")]
pub struct PercentError(pub String);

/// Parse a percentage as `--threshold` and `--fail-on-regression` take it: `5`, `5%`, `2.5 %`
/// → a fraction (0.05). Must be a finite number ≥ 0.
///
/// # Errors
/// [`PercentError`] naming the value.
pub fn parse_percent(s: &str) -> Result<f64, PercentError> {
    let t = s.trim();
    let t = t.strip_suffix('%').unwrap_or(t).trim_end();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v / 100.0),
        _ => Err(PercentError(s.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{KvBudgetSource, PromptSharing};
    use crate::registry::column;

    fn seed() -> Results {
        let bytes = include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json");
        crate::load_results(bytes).expect("the seed fixture loads")
    }

    fn col(id: &str) -> Column {
        column(id).unwrap()
    }

    #[test]
    fn verdicts_follow_the_registry_direction_and_threshold() {
        let t = DEFAULT_THRESHOLD;
        let d = compare(&col("total_tps"), Some(100.0), Some(110.0), t);
        assert_eq!((d.abs, d.verdict), (Some(10.0), Some(Verdict::Better)));
        assert!((d.rel.unwrap() - 0.1).abs() < 1e-12);
        assert_eq!(compare(&col("total_tps"), Some(100.0), Some(90.0), t).verdict, Some(Verdict::Worse));
        assert_eq!(compare(&col("total_tps"), Some(100.0), Some(104.9), t).verdict, Some(Verdict::Same));
        assert_eq!(compare(&col("total_tps"), Some(100.0), Some(95.1), t).verdict, Some(Verdict::Same));
        // Less is better for latencies.
        assert_eq!(compare(&col("ttft_ms"), Some(200.0), Some(150.0), t).verdict, Some(Verdict::Better));
        assert_eq!(compare(&col("ttft_ms_p99"), Some(200.0), Some(250.0), t).verdict, Some(Verdict::Worse));
        // No direction: "changed"; counts have none either.
        assert_eq!(compare(&col("prompt_tokens"), Some(100.0), Some(200.0), t).verdict, Some(Verdict::Changed));
        assert_eq!(compare(&col("ttft_ms_count"), Some(1.0), Some(4.0), t).verdict, Some(Verdict::Changed));
        // One side missing: no change claimed.
        let d = compare(&col("total_tps"), Some(100.0), None, t);
        assert_eq!((d.abs, d.rel, d.verdict), (None, None, None));
        // From zero: no relative change, still a verdict.
        let d = compare(&col("output_tokens"), Some(0.0), Some(5.0), t);
        assert_eq!((d.rel, d.verdict), (None, Some(Verdict::Better)));
        assert_eq!(compare(&col("output_tokens"), Some(0.0), Some(0.0), t).verdict, Some(Verdict::Same));
        // A zero threshold calls every change.
        assert_eq!(compare(&col("total_tps"), Some(100.0), Some(100.1), 0.0).verdict, Some(Verdict::Better));
    }

    #[test]
    fn enum_header_fields_read_as_the_file_spells_them() {
        let a = seed();
        let mut b = seed();
        b.engine.kv_budget_source = Some(KvBudgetSource::KvCacheSizeTokens);
        b.config.prompt_sharing = Some(PromptSharing::Distinct);
        let d = diff(&a, &b, DEFAULT_THRESHOLD);
        let field = |f: &str| d.header.iter().find(|h| h.field == f).and_then(|h| h.b.clone());
        assert_eq!(field("KV budget source").as_deref(), Some("kv_cache_size_tokens"), "{:?}", d.header);
        assert_eq!(field("Prompt sharing").as_deref(), Some("distinct"), "{:?}", d.header);
    }

    #[test]
    fn identical_runs_have_no_differences() {
        let r = seed();
        let d = diff(&r, &r, DEFAULT_THRESHOLD);
        assert!(d.header.is_empty(), "{:?}", d.header);
        assert!(d.only_in_a.is_empty() && d.only_in_b.is_empty() && d.status_changes.is_empty());
        assert_eq!(d.rows.len(), 55);
        assert_eq!(d.prefill().count(), 7);
        assert!(d.rows.iter().all(|r| r.deltas.iter().all(|x| x.verdict.is_none_or(|v| v == Verdict::Same))));
        assert_eq!(
            d.tally("total_tps").get("same"),
            Some(&42),
            "42 measured decode cells (48 − 6 over capacity) have total tok/s"
        );
        assert!(regressions(&d, &col("total_tps"), 0.0).is_empty());
    }

    /// The seed against a copy with some cells changed, one made over capacity, one context
    /// removed and a newer engine.
    fn modified() -> Results {
        let mut b = seed();
        b.engine.version = Some("0.27.0".into());
        b.engine.launch_command = Some(
            b.engine
                .launch_command
                .clone()
                .unwrap()
                .replace("--gpu-memory-utilization 0.862690", "--gpu-memory-utilization 0.9")
                + " --max-num-seqs 256",
        );
        let at = |b: &Results, ctx: u64, n: u32| {
            b.decode.iter().position(|c| c.context.tokens == ctx && c.concurrency == n).unwrap()
        };
        let i = at(&b, 8192, 128);
        b.decode[i].total_tps = Some(6342.6 * 1.2); // +20 % better
        let i = at(&b, 8192, 1);
        b.decode[i].total_tps = Some(237.1 * 0.8); // −20 % worse
        b.decode[i].ttft_ms.as_mut().unwrap().p50 = Some(196.0 * 1.02); // +2 %: same
        let i = at(&b, 65536, 64);
        let cell = &mut b.decode[i];
        cell.status = CellStatus::OverCapacity;
        cell.reason = Some("needs more KV cache".into());
        cell.total_tps = None;
        cell.per_request_tps = None;
        cell.ttft_ms = None;
        cell.itl_ms = None;
        cell.output_tokens = None;
        cell.completed_requests = None;
        cell.avg_active_requests = None;
        cell.window_s = None;
        // Remove the 128K context from decode and prefill.
        b.config.contexts.retain(|c| c.tokens != 131072);
        b.config.prefill_contexts.retain(|c| c.tokens != 131072);
        b.decode.retain(|c| c.context.tokens != 131072);
        b.prefill.retain(|c| c.context.tokens != 131072);
        b
    }

    #[test]
    fn seed_against_a_modified_copy() {
        let a = seed();
        let b = modified();
        crate::load::validate(&b).expect("the modified copy is a valid run");
        let d = diff(&a, &b, DEFAULT_THRESHOLD);
        let c = d.decode_cell(8192, 128).unwrap();
        let t = c.delta("total_tps").unwrap();
        assert_eq!(t.verdict, Some(Verdict::Better));
        assert!((t.rel.unwrap() - 0.2).abs() < 1e-9);
        assert!((t.abs.unwrap() - 1268.52).abs() < 1e-6);
        let c = d.decode_cell(8192, 1).unwrap();
        assert_eq!(c.delta("total_tps").unwrap().verdict, Some(Verdict::Worse));
        assert_eq!(c.delta("ttft_ms").unwrap().verdict, Some(Verdict::Same), "2 % is noise");
        let c = d.decode_cell(65536, 64).unwrap();
        assert!(c.status_changed());
        let tally = d.tally("total_tps");
        let want: BTreeMap<&str, usize> = [("better", 1), ("worse", 1), ("same", 33), (STATUS_CHANGED, 1)].into();
        assert_eq!(tally, want);
        let t = c.delta("total_tps").unwrap();
        assert_eq!((t.b, t.verdict), (None, None), "no figure is compared against an over-capacity cell");
        assert_eq!(
            d.status_changes,
            vec![StatusChange { cell: c.cell.clone(), a: CellStatus::Valid, b: CellStatus::OverCapacity }]
        );
        // 128K: 8 decode cells (2 of them over capacity in A) and one prefill row, only in A.
        assert_eq!(d.only_in_a.len(), 9);
        assert!(d.only_in_a.iter().all(|c| c.context.label == "128K"));
        assert!(d.only_in_b.is_empty());
        assert_eq!(d.contexts.len(), 6, "the removed context stays a row of the matrix");
        let r = d.decode_cell(131072, 1).unwrap();
        assert!(!r.matched() && r.status_b.is_none());
        assert_eq!(r.delta("total_tps").unwrap().verdict, None);
        // Every other matched figure is the same.
        let changed: Vec<String> = d
            .rows
            .iter()
            .flat_map(|r| {
                r.deltas
                    .iter()
                    .filter(|x| x.verdict.is_some_and(|v| v != Verdict::Same))
                    .map(|x| format!("{} {}", r.cell.describe(), x.column))
            })
            .collect();
        assert_eq!(changed, ["8K × 1 total_tps", "8K × 128 total_tps"]);
    }

    #[test]
    fn seed_against_a_modified_copy_header_and_gate() {
        let d = diff(&seed(), &modified(), DEFAULT_THRESHOLD);
        // Header: version, config lists, two launch flags.
        let fields: Vec<(&str, &str)> = d.header.iter().map(|h| (h.section.as_str(), h.field.as_str())).collect();
        assert_eq!(
            fields,
            [
                ("Engine", "Version"),
                ("Config", "Contexts"),
                ("Config", "Prefill contexts"),
                ("Launch command", "--gpu-memory-utilization"),
                ("Launch command", "--max-num-seqs")
            ]
        );
        let flag = &d.header[4];
        assert_eq!((flag.a.as_deref(), flag.b.as_deref()), (None, Some("256")));
        assert_eq!(d.header[0].b.as_deref(), Some("0.27.0"));
        // The gate.
        let g = gate(&d, &col("total_tps"), 0.05);
        assert!(!g.passed());
        assert_eq!(g.compared, 34, "41 cells valid in A minus six at 128K and 64K × 64");
        let lines: Vec<String> = g.regressions.iter().map(Regression::describe).collect();
        let missing_128k = [1, 2, 4, 8, 16, 32].map(|n| format!("128K × {n}: only in A (B has no such cell)"));
        let mut want = vec![
            "8K × 1: Total tok/s 237.1 → 189.7 (20.0 % worse)".to_string(),
            "64K × 64: Valid → Over capacity (B's server could not hold it)".to_string(),
        ];
        want.extend(missing_128k.iter().cloned());
        assert_eq!(lines, want, "the 128K cells valid in A that B lacks count too");
        let g = regressions(&d, &col("total_tps"), 0.25);
        assert_eq!(g.len(), 7, "beyond 25 %: the status change and the six missing cells");
        // Prefill TTFT: the 128K prefill row is missing in B.
        let g = regressions(&d, &col("ttft_ms"), 0.25);
        assert!(g.contains(&Regression::Missing { cell: Place::Matrix(d.only_in_a[0].clone()) }), "{g:?}");
        // The diff serialises (diff --format json).
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["status_changes"][0]["b"], "over_capacity");
        assert_eq!(json["only_in_a"][0]["phase"], "prefill");
    }

    #[test]
    fn status_and_prompt_token_mismatches_are_reported() {
        let a = seed();
        let mut b = seed();
        let mut a2 = a.clone();
        a2.prefill[0].prompt_tokens = Some(8192);
        b.prefill[0].prompt_tokens = Some(8192 + 200); // +2.4 %
        b.prefill[1].prompt_tokens = Some(16384); // A does not know: nothing to compare
        b.decode[0].prompt_tokens = Some(8192 + 300);
        b.decode[1].status = CellStatus::Error;
        b.decode[1].reason = Some("stream 1: HTTP 500".into());
        b.decode[1].total_tps = None;
        let d = diff(&a2, &b, DEFAULT_THRESHOLD);
        assert_eq!(d.prompt_mismatches.len(), 1, "one entry per context");
        let m = &d.prompt_mismatches[0];
        assert_eq!((m.context.label.as_str(), m.a, m.b), ("8K", 8192, 8392));
        assert_eq!(d.status_changes.len(), 1);
        let g = regressions(&d, &col("ttft_ms"), 0.5);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].describe(), "8K × 2: Valid → Error (B's measurement failed)");
        // Within 2 %: no warning.
        b.prefill[0].prompt_tokens = Some(8192 + 100);
        b.decode[0].prompt_tokens = None;
        assert!(diff(&a2, &b, DEFAULT_THRESHOLD).prompt_mismatches.is_empty());
    }

    /// Every cell in `b` that matches `pick` becomes `not_run` without figures, as an
    /// interrupted run writes it.
    fn not_run(b: &mut Results, pick: impl Fn(&crate::model::DecodeCell) -> bool) {
        for c in b.decode.iter_mut().filter(|c| pick(c)) {
            let (context, concurrency, prompt_tokens) = (c.context.clone(), c.concurrency, c.prompt_tokens);
            let mut fresh: crate::model::DecodeCell =
                serde_json::from_value(serde_json::json!({"context": context, "concurrency": concurrency,
                    "status": "not_run", "reason": "stopped by the user"}))
                .unwrap();
            fresh.prompt_tokens = prompt_tokens;
            *c = fresh;
        }
    }

    #[test]
    fn the_gate_fails_when_b_did_not_measure_what_a_did() {
        let a = seed();
        let tps = col("total_tps");
        // Identical runs pass, having compared every cell valid in A.
        let g = gate(&diff(&a, &a, DEFAULT_THRESHOLD), &tps, 0.05);
        assert!(g.passed() && g.compared == 41, "{g:?}");

        // Interrupted: everything from 16K on not run.
        let mut b = a.clone();
        not_run(&mut b, |c| c.context.tokens >= 16384);
        crate::load::validate(&b).expect("an interrupted run is valid");
        let g = gate(&diff(&a, &b, DEFAULT_THRESHOLD), &tps, 0.05);
        assert!(!g.passed());
        let valid_a_16k_up = a
            .decode
            .iter()
            .filter(|c| c.context.tokens >= 16384 && c.status == CellStatus::Valid && c.total_tps.is_some())
            .count();
        assert_eq!(g.regressions.len(), valid_a_16k_up);
        assert!(g.regressions.iter().all(|r| matches!(r, Regression::Status { to: CellStatus::NotRun, .. })));
        assert_eq!(g.regressions[0].describe(), "16K × 1: Valid → Not run (B did not measure it)");
        assert_eq!(g.compared, 41 - valid_a_16k_up);

        // Valid in B but without the figure.
        let mut b = a.clone();
        let i = b.decode.iter().position(|c| c.context.tokens == 8192 && c.concurrency == 4).unwrap();
        b.decode[i].total_tps = None;
        let g = gate(&diff(&a, &b, DEFAULT_THRESHOLD), &tps, 0.05);
        let lines: Vec<String> = g.regressions.iter().map(Regression::describe).collect();
        assert_eq!(lines, ["8K × 4: Valid → Valid without Total tok/s (B has no figure)"]);

        // B has no matrix: every cell is missing, nothing was compared.
        let mut b = a.clone();
        b.decode.clear();
        let g = gate(&diff(&a, &b, DEFAULT_THRESHOLD), &tps, 0.05);
        assert_eq!((g.compared, g.regressions.len()), (0, 41));
        assert!(g.regressions.iter().all(|r| matches!(r, Regression::Missing { .. })));

        // No shared context: A's cells are missing in B; B's own cells are no excuse.
        let mut b = a.clone();
        for c in &mut b.decode {
            c.context = crate::context::size(c.context.tokens * 3);
        }
        let g = gate(&diff(&a, &b, DEFAULT_THRESHOLD), &tps, 0.05);
        assert_eq!((g.compared, g.regressions.len(), g.passed()), (0, 41, false));

        // Neither run has a matrix: no regression, but nothing to compare, so the gate fails.
        let mut a0 = a.clone();
        a0.decode.clear();
        let g = gate(&diff(&a0, &b, DEFAULT_THRESHOLD), &tps, 0.05);
        assert!(g.regressions.is_empty() && g.compared == 0 && !g.passed());
    }

    #[test]
    fn a_status_change_with_the_same_figures_is_tallied_as_status_changed() {
        let a = seed();
        let mut b = a.clone();
        let i = b.decode.iter().position(|c| c.context.tokens == 8192 && c.concurrency == 2).unwrap();
        b.decode[i].status = CellStatus::Error;
        b.decode[i].reason = Some("stream 2: HTTP 500 after the window".into());
        let d = diff(&a, &b, DEFAULT_THRESHOLD);
        let t = d.tally("total_tps");
        assert_eq!((t.get(STATUS_CHANGED), t.get("same")), (Some(&1), Some(&41)), "{t:?}");
        assert_eq!(t.values().sum::<usize>(), 42, "every measured cell counted once");
    }

    #[test]
    fn counts_over_windows_of_different_length_are_not_compared() {
        let a = seed();
        let mut b = seed();
        b.config.window_s = Some(5.0);
        for c in &mut b.decode {
            c.output_tokens = c.output_tokens.map(|t| t / 6);
            c.completed_requests = c.completed_requests.map(|n| n / 6);
        }
        let d = diff(&a, &b, 0.05);
        assert_eq!(d.header[0].field, "Time per measurement", "the window heads the header: {:?}", d.header);
        assert_eq!((d.header[0].a.as_deref(), d.header[0].b.as_deref()), (Some("30 s"), Some("5 s")));
        let cell = d.decode_cell(8192, 128).unwrap();
        for id in WINDOW_SCALED {
            let x = cell.delta(id).unwrap();
            assert_eq!((x.verdict, x.rel, x.abs), (None, None, None), "{id}");
            assert_eq!(x.not_comparable.as_deref(), Some("counted over windows of different length (30 s and 5 s)"));
        }
        // Rates still compare: the same tok/s in both.
        assert_eq!(cell.delta("total_tps").unwrap().verdict, Some(Verdict::Same));
        assert_eq!(d.tally("output_tokens").get("worse"), None, "no count is called worse");
        // Same windows: counts compare as before.
        let c = diff(&a, &seed(), 0.05);
        assert_eq!(c.decode_cell(8192, 128).unwrap().delta("output_tokens").unwrap().verdict, Some(Verdict::Same));
    }

    /// The seed with noise data: every measured decode cell gets a total tok/s interval with a
    /// standard error of 1 % (batch means, 9 df) and no TTFT / TPOT interval (too few requests).
    fn with_noise(mut r: Results) -> Results {
        for c in r.decode.iter_mut().filter(|c| c.status.is_measured()) {
            let v = c.total_tps.unwrap();
            let se = 0.01 * v;
            let half = noise::critical_value(Some(9.0)) * se;
            let iv = Interval {
                estimate: v,
                low: v - half,
                high: v + half,
                level: noise::LEVEL,
                method: crate::IntervalMethod::BatchMeans,
                evidence: 10,
                std_error: se,
                df: Some(9.0),
            };
            let why = |f: &str| crate::MissingFigure { figure: f.into(), reason: "3 request(s)".into() };
            c.intervals = Some(crate::CellIntervals {
                total_tps: Some(iv),
                ttft_ms_p50: None,
                tpot_ms_p50: None,
                missing: vec![why("ttft_ms_p50"), why("tpot_ms_p50")],
            });
        }
        r
    }

    fn scale_tps(r: &mut Results, f: impl Fn(&DecodeCell) -> f64) {
        for c in r.decode.iter_mut().filter(|c| c.status.is_measured()) {
            let k = f(c);
            c.total_tps = c.total_tps.map(|v| v * k);
            if let Some(iv) = c.intervals.as_mut().and_then(|i| i.total_tps.as_mut()) {
                *iv = Interval {
                    estimate: iv.estimate * k,
                    low: iv.low * k,
                    high: iv.high * k,
                    std_error: iv.std_error * k,
                    ..*iv
                };
            }
        }
    }

    fn verdicts(d: &RunDiff, column: &str) -> Vec<Verdict> {
        d.rows
            .iter()
            .filter(|r| r.cell.phase == Phase::Decode && r.matched() && !r.status_changed())
            .filter_map(|r| r.delta(column).and_then(|x| x.verdict))
            .collect()
    }

    #[test]
    fn without_noise_data_on_either_side_the_threshold_decides() {
        let a = with_noise(seed());
        let d = diff_with(&a, &seed(), None);
        assert_eq!(d.noise, None, "B has no samples: no noise data");
        assert_eq!(d.threshold, DEFAULT_THRESHOLD);
        assert!(d.rows.iter().flat_map(|r| &r.deltas).all(|x| x.interval.is_none()));
    }

    #[test]
    fn a_uniform_slowdown_beyond_the_noise_is_worse_everywhere() {
        let a = with_noise(seed());
        let mut b = a.clone();
        scale_tps(&mut b, |_| 0.95);
        let d = diff_with(&a, &b, None);
        let rule = d.noise.clone().unwrap();
        assert_eq!((rule.level, rule.min_change, rule.control), (0.95, 0.0, "benjamini_hochberg"));
        let v = verdicts(&d, "total_tps");
        assert!(v.len() > 20 && v.iter().all(|x| *x == Verdict::Worse), "{v:?}");
        let cell = d.decode_cell(8192, 1).unwrap().delta("total_tps").unwrap();
        let iv = cell.interval.unwrap();
        // se of the difference: 1 % of A and of B; Welch df 9 (1 + k²)² ÷ (1 + k⁴), k = 0.95.
        let a_tps = cell.a.unwrap();
        let k2 = 0.95f64 * 0.95;
        let df = 9.0 * (1.0 + k2) * (1.0 + k2) / (1.0 + k2 * k2);
        let half = noise::critical_value(Some(df)) * 0.01 * a_tps * (1.0 + k2).sqrt();
        assert!((iv.half_width() - half).abs() < 1e-9 * a_tps, "{iv:?} vs ±{half}");
        assert!(iv.discovery && iv.high < 0.0);
        // TTFT has no interval on either side: not enough data, with why.
        let ttft = d.decode_cell(8192, 1).unwrap().delta("ttft_ms_p50").unwrap();
        assert_eq!(ttft.verdict, Some(Verdict::NotEnoughData));
        assert_eq!(ttft.noise_note.as_deref(), Some("A: 3 request(s); B: 3 request(s)"));
        // A --threshold above the change: within noise, though significant.
        let high = verdicts(&diff_with(&a, &b, Some(0.06)), "total_tps");
        assert!(high.iter().all(|x| *x == Verdict::WithinNoise), "{high:?}");
        // The gate fails on every cell valid in A at 0 %, and the tally says why.
        let g = gate(&d, &col("total_tps"), 0.0);
        assert_eq!(g.regressions.len(), a.decode.iter().filter(|c| c.status == CellStatus::Valid).count());
        assert_eq!(d.tally("total_tps").get("worse"), Some(&v.len()));
    }

    #[test]
    fn a_change_inside_the_noise_or_a_lone_borderline_one_is_within_noise() {
        let a = with_noise(seed());
        let mut b = a.clone();
        // Every cell 0.3 % faster (a third of one se): within noise. One cell 3.2 % faster:
        // its own 95 % interval leaves out 0 (t ≈ 2.26 · … ), but among ~30 cells
        // Benjamini–Hochberg does not keep a lone p ≈ 0.03.
        scale_tps(&mut b, |c| if (c.context.tokens, c.concurrency) == (8192, 8) { 1.032 } else { 1.003 });
        let d = diff_with(&a, &b, None);
        let lone = d.decode_cell(8192, 8).unwrap().delta("total_tps").unwrap();
        let iv = lone.interval.unwrap();
        assert!(iv.low > 0.0 && iv.p_value > 0.01 && iv.p_value < 0.05, "{iv:?}");
        assert!(!iv.discovery);
        assert_eq!(lone.verdict, Some(Verdict::WithinNoise));
        let v = verdicts(&d, "total_tps");
        assert!(v.iter().all(|x| *x == Verdict::WithinNoise), "{v:?}");
        // The gate passes: nothing got worse beyond noise.
        let mut slower = a.clone();
        scale_tps(&mut slower, |_| 0.997);
        assert!(gate(&diff_with(&a, &slower, None), &col("total_tps"), 0.0).passed());
        // Without noise data the same 0.3 % at a 0 % threshold is a regression everywhere.
        let plain = diff(
            &seed(),
            &{
                let mut s = seed();
                scale_tps(&mut s, |_| 0.997);
                s
            },
            0.0,
        );
        assert!(!gate(&plain, &col("total_tps"), 0.0).passed());
    }

    #[test]
    fn launch_command_flags() {
        let ch = launch_changes(
            Some("vllm serve m --tp 2 --enforce-eager --x=1 --api-key '<redacted>'"),
            Some("vllm serve m --tp 4 --x=1 --api-key '<redacted>' --quantization fp8"),
        );
        let got: Vec<(String, Option<String>, Option<String>)> = ch.into_iter().map(|c| (c.field, c.a, c.b)).collect();
        assert_eq!(
            got,
            vec![
                ("--tp".into(), Some("2".into()), Some("4".into())),
                ("--enforce-eager".into(), Some("(set)".into()), None),
                ("--quantization".into(), None, Some("fp8".into())),
            ]
        );
        let ch = launch_changes(Some("vllm serve a"), Some("vllm serve b"));
        assert_eq!((ch[0].field.as_str(), ch[0].b.as_deref()), ("command", Some("vllm serve b")));
        let ch = launch_changes(Some("vllm 'unbalanced"), Some("vllm x"));
        assert_eq!(ch[0].field, "command line");
        assert_eq!(launch_changes(None, Some("x"))[0].a, None);
        // An unknown launch command is a difference, never "same".
        let unknown =
            |a: Option<&str>, b: Option<&str>| launch_changes(a, b).into_iter().map(|c| c.field).collect::<Vec<_>>();
        assert_eq!(unknown(None, None), ["unknown in A and B"]);
        assert_eq!(unknown(Some("vllm serve m"), None), ["unknown in B"]);
        assert_eq!(unknown(None, Some("vllm serve m")), ["unknown in A"]);
        assert!(launch_changes(Some("a  b"), Some("a  b")).is_empty());
        assert_eq!(launch_changes(Some("a  b"), Some("a b"))[0].field, "command line");
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("5"), Ok(0.05));
        assert_eq!(parse_percent("5%"), Ok(0.05));
        assert_eq!(parse_percent(" 2.5 %"), Ok(0.025));
        assert!(parse_percent("-1").is_err() && parse_percent("x%").is_err() && parse_percent("inf").is_err());
        assert_eq!(
            parse_percent("abc").unwrap_err().to_string(),
            "\"abc\" is not a percentage; give a number ≥ 0 such as 5 or 5%"
        );
        assert_eq!(percent(0.1, true), "+10.0 %");
        assert_eq!(percent(-0.2, true), "-20.0 %");
        assert_eq!(percent(0.0, true), "0.0 %");
        assert_eq!(signed_delta(&col("total_tps"), 637.4), "+637.4");
        assert_eq!(signed_delta(&col("ttft_ms"), -12.0), "-12 ms");
    }
}
