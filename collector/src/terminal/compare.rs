//! `speedmatrix diff A.json B.json`: what changed from A (baseline) to B (candidate) — the
//! header differences, the prefill rows and the decode matrix of one metric as deltas, status
//! changes, cells in one run only and prompt-length mismatches; as text, Markdown (ready for a
//! pull request) or JSON (the [`speedmatrix_schema::diff::RunDiff`] itself).
//!
//! The comparison is `speedmatrix_schema::diff` (pure); this module parses flags, reads the
//! files, renders and applies `--fail-on-regression`.

use crate::cli::{DiffArgs, DiffFormat};
use crate::command::{CommandError, Failure, OutputError};
use crate::files::FileError;
use crate::terminal::show::{heading, Grid, Markup};
use crate::text::clean;
use speedmatrix_schema::diff::{
    self, gate, percent, rates, signed_delta, traces, turns, CellRef, Gate, PercentError, RowDiff, RunDiff, TALLY_KEYS,
};
use speedmatrix_schema::prefix::share_label;
use speedmatrix_schema::registry::{self, Column};
use speedmatrix_schema::table::Phase;
use speedmatrix_schema::CellStatus;
use std::fmt::Write as _;

/// The validated flags of `diff`.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The matrix's metric.
    pub metric: Column,
    /// The least change called better or worse, fraction; `None`: the defaults
    /// ([`diff::diff_with`]).
    pub threshold: Option<f64>,
    /// The gate: the largest allowed worsening, fraction; `None` without the flag.
    pub fail_on_regression: Option<f64>,
}

/// Why `diff` could not compare two runs.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// `--metric` names no registry column.
    #[error("--metric {metric}: no such metric; use a registry id such as {ids} (a distribution takes _p50, _p90, …)")]
    UnknownMetric {
        /// What was given.
        metric: String,
        /// The registry's metric ids, comma-separated.
        ids: String,
    },
    /// `--threshold` or `--fail-on-regression` is not a percentage.
    #[error("{flag}")]
    Percent {
        /// The flag.
        flag: &'static str,
        /// The value.
        #[source]
        source: PercentError,
    },
    /// A gate on a metric that is neither better up nor down.
    #[error("--fail-on-regression: --metric {metric} has no better/worse direction; gate on a metric such as total_tps or ttft_ms_p50")]
    NoDirection {
        /// The column id.
        metric: String,
    },
    /// A file cannot be read or is no valid results file.
    #[error(transparent)]
    File(#[from] FileError),
    /// Standard output cannot be written.
    #[error(transparent)]
    Output(#[from] OutputError),
}

impl CommandError for DiffError {
    fn failure(&self) -> Failure {
        match self {
            DiffError::File(e) => e.failure(),
            DiffError::Output(e) => e.failure(),
            _ => Failure::BadInput,
        }
    }
}

/// A percentage flag.
fn percent_flag(flag: &'static str, value: &str) -> Result<f64, DiffError> {
    diff::parse_percent(value).map_err(|source| DiffError::Percent { flag, source })
}

/// Flags → [`Options`].
///
/// # Errors
/// [`DiffError`] naming the flag for an unknown metric, a bad percentage, or a gate on a
/// metric that has no better/worse direction.
pub fn options(args: &DiffArgs) -> Result<Options, DiffError> {
    let metric = registry::column(&args.metric).ok_or_else(|| DiffError::UnknownMetric {
        metric: args.metric.clone(),
        ids: registry::METRICS.iter().map(|m| m.id).collect::<Vec<_>>().join(", "),
    })?;
    let threshold = args.threshold.as_deref().map(|t| percent_flag("--threshold", t)).transpose()?;
    let fail_on_regression =
        args.fail_on_regression.as_deref().map(|p| percent_flag("--fail-on-regression", p)).transpose()?;
    if fail_on_regression.is_some() && diff::direction(&metric).is_none() {
        return Err(DiffError::NoDirection { metric: metric.id() });
    }
    Ok(Options { metric, threshold, fail_on_regression })
}

/// Run `diff`: read both files, print the comparison; with `--fail-on-regression` return exit
/// code 1 (after printing) when the gate finds a regression or had nothing to compare.
///
/// # Errors
/// [`DiffError`]: bad input (exit 2) for an unreadable or invalid file or a bad flag.
pub fn run(args: &DiffArgs) -> Result<u8, DiffError> {
    let opts = options(args)?;
    let a = crate::files::read_results(&args.a)?;
    let b = crate::files::read_results(&args.b)?;
    let d = diff::diff_with(&a, &b, opts.threshold);
    let gate = opts.fail_on_regression.map(|pct| gate(&d, &opts.metric, pct));
    match args.format {
        DiffFormat::Json => {
            let tally = d.tally(&opts.metric.id());
            crate::command::print_json(&JsonDiff { diff: &d, metric: opts.metric.id(), tally, gate: gate.as_ref() })?;
        }
        DiffFormat::Text => crate::command::print_out(&render(&d, &opts, gate.as_ref(), Markup::Text))?,
        DiffFormat::Markdown => crate::command::print_out(&render(&d, &opts, gate.as_ref(), Markup::Markdown))?,
    }
    match gate {
        Some(g) if !g.passed() => {
            let mut why = Vec::new();
            if !g.regressions.is_empty() {
                let n = g.regressions.len();
                why.push(format!(
                    "{n} regression{} beyond {} or not measured in B",
                    if n == 1 { "" } else { "s" },
                    percent(g.max_worse, false)
                ));
            }
            if g.compared == 0 {
                why.push(match g.regressions.is_empty() {
                    true => "nothing to compare".to_string(),
                    false => "no figure to compare in B".to_string(),
                });
            }
            eprintln!("speedmatrix diff: {} ({}); exit 1", why.join(", "), g.column);
            Ok(1)
        }
        _ => Ok(0),
    }
}

/// `diff -f json`: the [`RunDiff`] with the `--metric`'s tally and the gate's outcome added.
#[derive(serde::Serialize)]
struct JsonDiff<'a> {
    /// The comparison.
    #[serde(flatten)]
    diff: &'a RunDiff,
    /// The `--metric` column id, e.g. `total_tps`.
    metric: String,
    /// Decode cells in both runs by verdict on `metric`, plus `status changed` ([`RunDiff::tally`]).
    tally: std::collections::BTreeMap<&'static str, usize>,
    /// `--fail-on-regression`'s outcome; absent without the flag.
    #[serde(skip_serializing_if = "Option::is_none")]
    gate: Option<&'a Gate>,
}

fn status_words(s: Option<CellStatus>) -> String {
    s.map(|s| s.label().to_string()).unwrap_or_else(|| "absent".into())
}

/// One matrix cell (or prefill row) as lines: `A → B` and `Δ % verdict`; the statuses when they
/// changed; `only in A` / `only in B`; the status words when neither has a figure.
pub fn cell_text(r: Option<&RowDiff>, col: &Column) -> String {
    let Some(r) = r else { return "—".into() };
    match (r.status_a, r.status_b) {
        (Some(_), None) => return "only in A".into(),
        (None, Some(_)) => return "only in B".into(),
        _ => {}
    }
    let delta = r.deltas.iter().find(|d| d.column == col.id());
    let mut lines = Vec::new();
    if r.status_changed() {
        lines.push(format!("{} → {}", status_words(r.status_a), status_words(r.status_b)));
    }
    match delta {
        Some(d) => {
            let show = |v: Option<f64>| v.map(|v| col.display(v)).unwrap_or_else(|| "—".into());
            let (a, b) = match (d.a, d.b) {
                (Some(a), Some(b)) => col.display_pair(a, b),
                _ => (show(d.a), show(d.b)),
            };
            lines.push(format!("{a} → {b}"));
            if let (Some(v), Some(abs)) = (d.verdict, d.abs) {
                let change = d.rel.map(|x| percent(x, true)).unwrap_or_else(|| signed_delta(col, abs));
                lines.push(format!("{change}{} {}", plus_minus(d, col), v.label()));
            } else if d.not_comparable.is_some() {
                lines.push("not comparable (windows differ)".into());
            }
        }
        None if !r.status_changed() => lines.push(status_words(r.status_a)),
        None => {}
    }
    lines.join("\n")
}

/// The interval of B − A as " ± 1.2 %" (of A; in the metric's unit when A is 0); empty
/// without one.
pub fn plus_minus(d: &diff::Delta, col: &Column) -> String {
    let Some(iv) = d.interval else { return String::new() };
    let half = iv.half_width();
    match d.a.filter(|a| *a != 0.0 && d.rel.is_some()) {
        Some(a) => format!(" ± {}", percent(half / a.abs(), false)),
        None => format!(" ± {}", col.display(half)),
    }
}

/// What the verdicts mean in this diff, one line.
fn verdict_rule(d: &RunDiff) -> String {
    let plain = format!("changes under {} count as same", percent(d.threshold, false));
    match &d.noise {
        None => format!("{plain} · no noise data (a run has no per-second samples): no intervals"),
        Some(n) => format!(
            concat!(
            "total tok/s, TTFT p50 and TPOT p50: ± is the {} interval of B − A; better/worse when it leaves out 0, ",
            "Benjamini–Hochberg over the cells keeps it (false discovery rate {}) and the change is at least {}, ",
            "else within noise; not enough data when a side has no interval · other figures: {plain}"
        ),
            percent(n.level, false).replace(".0 %", " %"),
            percent(n.false_discovery_rate, false).replace(".0 %", " %"),
            percent(n.min_change, false),
            plain = plain
        ),
    }
}

/// Cells of one run only, a line per prefill row and per context of decode cells:
/// `prefill 128K`, `128K × 1, 2, 4, 8`.
fn grouped(cells: &[CellRef]) -> Vec<String> {
    type Group = Option<(u64, Option<u32>)>;
    let mut out: Vec<(Group, String)> = Vec::new();
    for c in cells {
        let group = Some((c.context.tokens, speedmatrix_schema::prefix::key(c.prefix_share)));
        match c.phase {
            Phase::Prefill => out.push((None, c.describe())),
            Phase::Decode => match out.last_mut() {
                // `8K × 1, 2, 4 · prefix 90%`: the share stays at the end of the line.
                Some((g, line)) if *g == group => {
                    let suffix = speedmatrix_schema::prefix::name_suffix(c.prefix_share);
                    line.truncate(line.len() - suffix.len());
                    let _ = write!(line, ", {}{suffix}", c.concurrency);
                }
                _ => out.push((group, c.describe())),
            },
        }
    }
    out.into_iter().map(|(_, l)| clean(&l)).collect()
}

/// Render the text or Markdown report.
pub fn render(d: &RunDiff, opts: &Options, gate: Option<&Gate>, markup: Markup) -> String {
    let col = &opts.metric;
    let mut out = String::new();
    heading(&mut out, markup, 1, "Speed test diff");
    let bullet = if markup == Markup::Markdown { "- " } else { "" };
    let sim = |r: &speedmatrix_schema::diff::RunRef| {
        r.simulated.as_deref().map(|s| format!(" · Simulated ({})", clean(s))).unwrap_or_default()
    };
    let _ = writeln!(out, "{bullet}A (baseline): {} · {}{}", clean(&d.a.title), clean(&d.a.id), sim(&d.a));
    let _ = writeln!(out, "{bullet}B (candidate): {} · {}{}", clean(&d.b.title), clean(&d.b.id), sim(&d.b));
    let _ = writeln!(out, "\n{} · {} · better/worse by the metric's direction\n", col.metric.header(), verdict_rule(d));
    header_section(&mut out, d, markup);
    prefill_section(&mut out, d, markup);
    decode_section(&mut out, d, col, markup);
    lists_section(&mut out, d, markup);
    rate_section(&mut out, &d.rates, markup);
    trace_section(&mut out, &d.traces, markup);
    turn_section(&mut out, &d.turns, markup);
    if let Some(g) = gate {
        gate_section(&mut out, g, d.noise.is_some(), markup);
    }
    out
}

/// "Header differences": every header field that differs, or that none does.
fn header_section(out: &mut String, d: &RunDiff, markup: Markup) {
    heading(out, markup, 2, "Header differences");
    if d.header.is_empty() {
        let _ = writeln!(out, "None: same hardware, engine, model, launch command and plan.\n");
        return;
    }
    let none = || "—".to_string();
    let rows = d
        .header
        .iter()
        .map(|h| {
            vec![
                h.section.clone(),
                clean(&h.field),
                h.a.as_deref().map(clean).unwrap_or_else(none),
                h.b.as_deref().map(clean).unwrap_or_else(none),
            ]
        })
        .collect();
    let headers = ["Section", "Field", "A", "B"].map(String::from).to_vec();
    out.push_str(&Grid { headers, rows, numeric_from: 4 }.render(markup));
    out.push('\n');
}

/// The prefill rows: prompt tok/s and TTFT, A → B.
fn prefill_section(out: &mut String, d: &RunDiff, markup: Markup) {
    let prefill: Vec<&RowDiff> = d.prefill().collect();
    if prefill.is_empty() {
        return;
    }
    let prompt = registry::column("prompt_tps").expect("prompt_tps is in the registry");
    let ttft = registry::column("ttft_ms").expect("ttft_ms is in the registry");
    heading(out, markup, 2, "Prefill — prompt tok/s and TTFT by context length");
    let rows = prefill
        .iter()
        .map(|r| {
            vec![
                format!(
                    "{} context{}",
                    clean(&r.cell.context.label),
                    r.cell.prefix_share.map(|s| format!(", warm: prefix {}", share_label(s))).unwrap_or_default()
                ),
                cell_text(Some(r), &prompt),
                cell_text(Some(r), &ttft),
            ]
        })
        .collect();
    let headers = ["Context", "Prompt tok/s", "TTFT"].map(String::from).to_vec();
    out.push_str(&Grid { headers, rows, numeric_from: 1 }.render(markup));
    out.push('\n');
}

/// The decode matrix of `col`, A → B per cell, and its tally.
fn decode_section(out: &mut String, d: &RunDiff, col: &Column, markup: Markup) {
    if !d.rows.iter().any(|r| r.cell.phase == Phase::Decode) {
        return;
    }
    heading(
        out,
        markup,
        2,
        &format!(
            "Sustained decode — {}: A → B · rows are context length, columns are simultaneous requests",
            col.metric.header()
        ),
    );
    let headers = std::iter::once("Context".to_string()).chain(d.concurrency.iter().map(u32::to_string)).collect();
    let rows = d
        .matrix_rows()
        .into_iter()
        .map(|(ctx, share, label)| {
            std::iter::once(clean(&label))
                .chain(d.concurrency.iter().map(|&n| cell_text(d.decode_cell_at(ctx.tokens, n, share), col)))
                .collect()
        })
        .collect();
    out.push_str(&Grid { headers, rows, numeric_from: 1 }.render(markup));
    out.push('\n');
    let tally = d.tally(&col.id());
    let counted: Vec<String> = TALLY_KEYS.iter().filter_map(|k| tally.get(k).map(|n| format!("{n} {k}"))).collect();
    if !counted.is_empty() {
        let _ = writeln!(out, "{} of the cells in both runs: {}.\n", col.metric.header(), counted.join(", "));
    }
    for (why, cells) in not_enough_reasons(d, &col.id()) {
        let s = if cells == 1 { "" } else { "s" };
        let _ = writeln!(out, "Not enough data ({cells} cell{s}): {}.\n", clean(&why));
    }
}

/// Why cells have "not enough data" on `column`, each distinct reason once with its count of
/// cells (e.g. windows too short for batch means, or TTFT without repeats).
fn not_enough_reasons(d: &RunDiff, column: &str) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    let notes = d.rows.iter().flat_map(|r| &r.deltas).filter(|x| x.column == column);
    for why in notes.filter(|x| x.verdict == Some(diff::Verdict::NotEnoughData)).filter_map(|x| x.noise_note.clone()) {
        match out.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => out.push((why, 1)),
        }
    }
    out
}

/// Status changes, cells of one run only, prompt-length mismatches: what was not compared.
fn lists_section(out: &mut String, d: &RunDiff, markup: Markup) {
    let list = |out: &mut String, title: &str, items: Vec<String>| {
        if items.is_empty() {
            return;
        }
        heading(out, markup, 2, title);
        for i in items {
            let _ = writeln!(out, "- {i}");
        }
        out.push('\n');
    };
    list(
        out,
        "Status changes",
        d.status_changes.iter().map(|s| format!("{}: {} → {}", s.cell.describe(), s.a.label(), s.b.label())).collect(),
    );
    list(out, "Only in A", grouped(&d.only_in_a));
    list(out, "Only in B", grouped(&d.only_in_b));
    list(
        out,
        "Prompt lengths differ by more than 2 % (the runs did not send the same prompts)",
        d.prompt_mismatches
            .iter()
            .map(|m| {
                format!(
                    "{}: {} → {} prompt tokens ({})",
                    clean(&m.context.label),
                    registry::format_int(m.a),
                    registry::format_int(m.b),
                    percent(m.rel, true)
                )
            })
            .collect(),
    );
}

/// The figures of a rate cell the diff's rate table shows, in column order.
const RATE_COLUMNS: [&str; 6] =
    ["achieved_rps", "goodput_rps", "total_tps", "ttft_ms_p50", "tpot_ms_p50", "e2e_ms_p50"];

/// One figure of a rate cell as lines: `A → B` and `Δ % ± verdict`, or the status words.
pub fn rate_cell_text(r: &rates::RateRowDiff, column: &str) -> String {
    figure_lines(r.delta(column), column)
}

/// One rate figure of a rate cell or trace row as lines: `A → B` and `Δ % ± verdict`, or why
/// it is not compared.
fn figure_lines(d: Option<&diff::Delta>, column: &str) -> String {
    let Some(d) = d else { return "—".into() };
    let show = |v: Option<f64>| v.map(|v| rates::figure_text(column, v)).unwrap_or_else(|| "—".into());
    let mut lines = vec![format!("{} → {}", show(d.a), show(d.b))];
    if let (Some(v), Some(abs)) = (d.verdict, d.abs) {
        let change = d.rel.map(|x| percent(x, true)).unwrap_or_else(|| rates::figure_text(column, abs));
        let pm = match (d.interval, d.a.filter(|a| *a != 0.0 && d.rel.is_some())) {
            (Some(iv), Some(a)) => format!(" ± {}", percent(iv.half_width() / a.abs(), false)),
            (Some(iv), None) => format!(" ± {}", rates::figure_text(column, iv.half_width())),
            (None, _) => String::new(),
        };
        lines.push(format!("{change}{pm} {}", v.label()));
    } else if let Some(why) = &d.not_comparable {
        lines.push(format!("not comparable ({})", clean(why)));
    }
    lines.join("\n")
}

/// "Conversations": every turn of either run's conversation cells, A → B on TTFT p50, ITL p50,
/// TTFT vs turn 1 and the cache hit rate, with the threshold's verdicts. Nothing when neither
/// run has conversations.
fn turn_section(out: &mut String, d: &[turns::TurnDiff], markup: Markup) {
    if d.is_empty() {
        return;
    }
    heading(out, markup, 2, "Conversations — per turn: A → B");
    let _ = writeln!(
        out,
        "Turns pair by context, sessions and turn; every figure by the threshold (no per-turn samples).\n"
    );
    let headers = std::iter::once("Turn".to_string())
        .chain(turns::TURN_FIGURES.iter().map(|f| turns::figure_label(f.0).to_string()))
        .collect();
    let rows = d
        .iter()
        .map(|t| {
            let side = match (t.in_a, t.in_b) {
                (true, false) => " (only in A)",
                (false, true) => " (only in B)",
                _ => "",
            };
            std::iter::once(format!("{}{side}", clean(&t.describe())))
                .chain(turns::TURN_FIGURES.iter().map(|f| turn_figure_lines(t.delta(f.0), f.0)))
                .collect()
        })
        .collect();
    out.push_str(&Grid { headers, rows, numeric_from: 1 }.render(markup));
    out.push('\n');
}

/// A turn figure as lines: `A → B` and `Δ % verdict`.
fn turn_figure_lines(d: Option<&diff::Delta>, id: &str) -> String {
    let Some(d) = d else { return "—".into() };
    let show = |v: Option<f64>| v.map(|v| turns::figure_text(id, v)).unwrap_or_else(|| "—".into());
    let mut lines = vec![format!("{} → {}", show(d.a), show(d.b))];
    if let (Some(v), Some(abs)) = (d.verdict, d.abs) {
        let change = d.rel.map(|x| percent(x, true)).unwrap_or_else(|| turns::figure_text(id, abs));
        lines.push(format!("{change} {}", v.label()));
    }
    lines.join("\n")
}

/// "Request rates": every rate cell of either run, A → B on the figures of [`RATE_COLUMNS`]
/// with their verdicts; the rate cells' status changes and cells in one run only; the highest
/// rate meeting the SLO per context. Nothing when neither run has rate cells.
fn rate_section(out: &mut String, d: &rates::RateDiff, markup: Markup) {
    if d.is_empty() {
        return;
    }
    heading(out, markup, 2, "Request rates — open-loop rate cells: A → B");
    let rule = match &d.noise {
        None => "no per-request samples on a side: every figure by the threshold".to_string(),
        Some(n) => format!(
            "TTFT, TPOT and E2E p50 (block bootstrap over each window's requests) and achieved rate and goodput \
             (batch means over its per-second completions): ± is the {} interval of B − A, better/worse when it \
             leaves out 0, Benjamini–Hochberg over the rate cells keeps it and the change is at least {}; other figures by the threshold",
            percent(n.level, false).replace(".0 %", " %"),
            percent(n.min_change, false)
        ),
    };
    let _ = writeln!(out, "Matched by context, prefix share, rate and arrival process · {rule}.\n");
    if !d.rows.is_empty() {
        // With the hit rate and speculative decoding where a cell has them.
        let columns: Vec<&str> = RATE_COLUMNS.into_iter().chain(rates::cache_spec_figures(d)).collect();
        let headers = ["Context", "Rate", "Status"]
            .into_iter()
            .map(String::from)
            .chain(columns.iter().map(|c| rates::figure_label(c)))
            .collect();
        let rows = d
            .rows
            .iter()
            .map(|r| {
                let status = match (r.status_a, r.status_b) {
                    (Some(_), None) => "only in A".to_string(),
                    (None, Some(_)) => "only in B".to_string(),
                    (a, b) if a == b => status_words(a),
                    (a, b) => format!("{} → {}", status_words(a), status_words(b)),
                };
                let mut row = vec![clean(&r.cell.row_label()), speedmatrix_schema::rate_label(r.cell.rate_rps), status];
                row.extend(columns.iter().map(|c| rate_cell_text(r, c)));
                row
            })
            .collect();
        out.push_str(&Grid { headers, rows, numeric_from: 3 }.render(markup));
        out.push('\n');
    }
    let mut reasons: Vec<(String, usize)> = Vec::new();
    let notes = d.rows.iter().flat_map(|r| &r.deltas).filter(|x| x.verdict == Some(diff::Verdict::NotEnoughData));
    for why in notes.filter_map(|x| x.noise_note.as_ref().map(|n| format!("{}: {n}", rates::figure_label(&x.column)))) {
        match reasons.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => reasons.push((why, 1)),
        }
    }
    for (why, n) in reasons {
        let _ = writeln!(out, "Not enough data ({n} cell{}): {}.", if n == 1 { "" } else { "s" }, clean(&why));
    }
    if d.slo_a != d.slo_b {
        let slo = |s: &Option<String>| s.as_deref().map(clean).unwrap_or_else(|| "none".into());
        let _ = writeln!(
            out,
            "The runs' SLOs differ (A: {}; B: {}): goodput is not compared.",
            slo(&d.slo_a),
            slo(&d.slo_b)
        );
    }
    let describe = |c: &rates::RateRef| clean(&c.describe());
    let list = |out: &mut String, title: &str, items: Vec<String>| {
        if !items.is_empty() {
            let _ = writeln!(out, "\n{title}:");
            for i in items {
                let _ = writeln!(out, "- {i}");
            }
        }
    };
    list(
        out,
        "Rate cells whose status changed",
        d.status_changes.iter().map(|s| format!("{}: {} → {}", describe(&s.cell), s.a.label(), s.b.label())).collect(),
    );
    list(out, "Rate cells only in A", d.only_in_a.iter().map(describe).collect());
    list(out, "Rate cells only in B", d.only_in_b.iter().map(describe).collect());
    let rate = |v: Option<f64>, searched: bool| match (v, searched) {
        (_, false) => "not searched".to_string(),
        (None, true) => "none".to_string(),
        (Some(v), true) => speedmatrix_schema::rate_label(v),
    };
    list(
        out,
        "Highest rate meeting the SLO (--rates auto)",
        d.rate_at_slo
            .iter()
            .map(|s| {
                let verdict = s.verdict.map_or_else(String::new, |v| format!(" — {}", v.label()));
                format!("{}: {} → {}{verdict}", clean(&s.context.label), rate(s.a, s.in_a), rate(s.b, s.in_b))
            })
            .collect(),
    );
    out.push('\n');
}

/// The figures of a trace row the diff's trace table shows, in column order.
const TRACE_COLUMNS: [&str; 8] = [
    "achieved_rps",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "tpot_ms_p50",
    "tpot_ms_p90",
    "e2e_ms_p50",
    "e2e_ms_p90",
    "send_lag_ms_p99",
];

/// "Trace replay": which trace each run replayed, and either why their rows cannot be compared
/// or each row A → B on the figures of [`TRACE_COLUMNS`] with their verdicts. Nothing when
/// neither run replayed a trace.
fn trace_section(out: &mut String, d: &traces::TraceDiff, markup: Markup) {
    if d.is_empty() {
        return;
    }
    heading(out, markup, 2, "Trace replay: A → B");
    let bullet = if markup == Markup::Markdown { "- " } else { "" };
    let which = |t: &Option<traces::TraceRef>| t.as_ref().map_or("no trace recorded".into(), |t| clean(&t.describe()));
    let _ = writeln!(out, "{bullet}A replayed: {}", which(&d.a));
    let _ = writeln!(out, "{bullet}B replayed: {}\n", which(&d.b));
    if !d.not_comparable.is_empty() {
        let _ = writeln!(
            out,
            "Not comparable: {}. Each run's figures are listed side by side, without a change or verdict.\n",
            clean(&d.not_comparable.join("; "))
        );
    } else if d.comparable() {
        let rule = match &d.noise {
            None => "no per-request samples on a side: every figure by the threshold".to_string(),
            Some(n) => format!(
                "TTFT, TPOT and E2E p50 (block bootstrap over the replay's requests in schedule order) and achieved \
                 rate (batch means over its per-second completions): ± is the {} interval of B − A, better/worse \
                 when it leaves out 0 and the change is at least {}; other figures by the threshold",
                percent(n.level, false).replace(".0 %", " %"),
                percent(n.min_change, false)
            ),
        };
        let _ = writeln!(out, "Same trace, slice and speed: compared request for request · {rule}.\n");
    }
    for n in &d.notes {
        let _ = writeln!(out, "Note: {}.", clean(n));
    }
    if d.rows.is_empty() {
        return;
    }
    let headers = ["Trace", "Requests", "Status"]
        .into_iter()
        .map(String::from)
        .chain(TRACE_COLUMNS.iter().map(|c| rates::figure_label(c)))
        .collect();
    let opt = |v: Option<usize>| v.map_or_else(|| "—".to_string(), |n| n.to_string());
    let rows = d
        .rows
        .iter()
        .map(|r| {
            let status = match (r.status_a, r.status_b) {
                (Some(_), None) => "only in A".to_string(),
                (None, Some(_)) => "only in B".to_string(),
                (a, b) if a == b => status_words(a),
                (a, b) => format!("{} → {}", status_words(a), status_words(b)),
            };
            let requests = format!("{} → {}", opt(r.requests_a), opt(r.requests_b));
            let mut row = vec![format!("#{}", r.index + 1), requests, status];
            row.extend(TRACE_COLUMNS.iter().map(|c| {
                let lines = figure_lines(r.delta(c), c);
                // The reason a row is not compared is said once, above the table.
                if d.not_comparable.is_empty() {
                    lines
                } else {
                    lines.lines().next().unwrap_or_default().to_string()
                }
            }));
            row
        })
        .collect();
    out.push_str(&Grid { headers, rows, numeric_from: 1 }.render(markup));
    out.push('\n');
    let notes = d.rows.iter().flat_map(|r| &r.deltas).filter(|x| x.verdict == Some(diff::Verdict::NotEnoughData));
    for why in notes.filter_map(|x| x.noise_note.as_ref().map(|n| format!("{}: {n}", rates::figure_label(&x.column)))) {
        let _ = writeln!(out, "Not enough data: {}.", clean(&why));
    }
    out.push('\n');
}

/// `--fail-on-regression`: passed, or each regression and why.
fn gate_section(out: &mut String, g: &Gate, noise: bool, markup: Markup) {
    let pct = percent(g.max_worse, false);
    let beyond = if noise && diff::NOISE_COLUMNS.contains(&g.column.as_str()) {
        " (and worse beyond noise, where both runs have an interval)"
    } else {
        ""
    };
    heading(out, markup, 2, &format!("Regression gate: {} worse than {pct}", g.column));
    if g.passed() {
        let _ = writeln!(
            out,
            "Passed: {} cell{} compared; none got worse by more than {pct}{beyond}, and B measured every cell valid in A.",
            g.compared,
            if g.compared == 1 { "" } else { "s" }
        );
    } else {
        let _ = writeln!(
            out,
            "Failed: a cell valid in A with {} counts as a regression when B's figure is worse by more than \
             {pct}{beyond}, or B lacks the cell, did not run it, failed it, could not hold it, or has no figure.",
            g.column
        );
        match (g.compared, g.regressions.is_empty()) {
            (0, true) => {
                let _ = writeln!(out, "- nothing to compare: no cell is valid in A and has {} in both runs", g.column);
            }
            (0, false) => {
                let _ = writeln!(
                    out,
                    "- no figure to compare: B has {} for none of the cells valid in A, so each counts as a regression:",
                    g.column
                );
            }
            _ => {}
        }
        for r in &g.regressions {
            let _ = writeln!(out, "- {}", clean(&r.describe()));
        }
    }
    out.push('\n');
}
