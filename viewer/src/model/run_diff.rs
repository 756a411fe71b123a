//! What the diff view shows, as plain data: the delta heatmap's cells and the table of every
//! matched measurement with its sorting. Pure functions of a
//! [`RunDiff`](speedmatrix_schema::diff::RunDiff) (the comparison itself is
//! `speedmatrix_schema::diff`, the same as `speedmatrix diff`), unit-tested (in the browser by CI);
//! `view::diff_page` turns them into elements.

use speedmatrix_schema::diff::{percent, signed_delta, Delta, DeltaInterval, RowDiff, RunDiff, Verdict};
use speedmatrix_schema::registry::Column;
use speedmatrix_schema::table::Phase;
use speedmatrix_schema::CellStatus;
use std::cmp::Ordering;

/// The placeholder for a figure that is not there.
pub const DASH: &str = "—";

/// What a delta-heatmap cell says: the [`Verdict`] on its figure (shared's, the same as
/// `speedmatrix diff`), or why its figures are not compared. The cases besides a verdict are
/// facts about the cell, not about a figure (shared lists them in [`RunDiff::only_in_a`],
/// [`RunDiff::only_in_b`] and [`RunDiff::status_changes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellKind {
    /// Both runs have the figure, with the same status: its verdict.
    Verdict(Verdict),
    /// Both runs have the cell with different statuses.
    StatusChange,
    /// Only A has the cell.
    OnlyA,
    /// Only B has the cell.
    OnlyB,
    /// Both have it, with the same status, but not both a figure (e.g. over capacity in both).
    NoFigure,
    /// Neither run has the cell.
    Absent,
}

impl CellKind {
    /// The CSS class suffix and test id: `better`, `worse`, `same`, `changed`, `noise`,
    /// `no-data`, `status`, `only-a`, `only-b`, `none`, `absent`.
    pub fn id(self) -> &'static str {
        match self {
            CellKind::Verdict(Verdict::Better) => "better",
            CellKind::Verdict(Verdict::Worse) => "worse",
            CellKind::Verdict(Verdict::Same) => "same",
            CellKind::Verdict(Verdict::Changed) => "changed",
            CellKind::Verdict(Verdict::WithinNoise) => "noise",
            CellKind::Verdict(Verdict::NotEnoughData) => "no-data",
            CellKind::StatusChange => "status",
            CellKind::OnlyA => "only-a",
            CellKind::OnlyB => "only-b",
            CellKind::NoFigure => "none",
            CellKind::Absent => "absent",
        }
    }

    /// The mark shown before the words (colour is never the only cue): ▲ better, ▼ worse, = same,
    /// ≠ changed, ⇄ status change, A / B for one run only.
    pub fn mark(self) -> &'static str {
        match self {
            CellKind::Verdict(Verdict::Better) => "▲",
            CellKind::Verdict(Verdict::Worse) => "▼",
            CellKind::Verdict(Verdict::Same) => "=",
            CellKind::Verdict(Verdict::Changed) => "≠",
            CellKind::Verdict(Verdict::WithinNoise) => "≈",
            CellKind::Verdict(Verdict::NotEnoughData) => "?",
            CellKind::StatusChange => "⇄",
            CellKind::OnlyA => "A",
            CellKind::OnlyB => "B",
            CellKind::NoFigure | CellKind::Absent => "",
        }
    }

    /// What it means, for the legend.
    pub fn meaning(self) -> &'static str {
        match self {
            CellKind::Verdict(Verdict::Better) => "better than A by at least the threshold",
            CellKind::Verdict(Verdict::Worse) => "worse than A by at least the threshold",
            CellKind::Verdict(Verdict::Same) => "within the threshold (noise)",
            CellKind::Verdict(Verdict::Changed) => "changed; this metric is neither better nor worse when higher",
            CellKind::Verdict(Verdict::WithinNoise) => {
                "within noise: the 95 % interval of B − A holds no change, or the false-alarm control did not keep it"
            }
            CellKind::Verdict(Verdict::NotEnoughData) => {
                "not enough data: a run has too few requests or too short a window for an interval"
            }
            CellKind::StatusChange => "the status differs (e.g. valid → over capacity); the figures are not compared",
            CellKind::OnlyA => "only in A (the baseline)",
            CellKind::OnlyB => "only in B (the candidate)",
            CellKind::NoFigure => "no figure in one of the runs",
            CellKind::Absent => "in neither run",
        }
    }
}

/// One cell of the delta heatmap.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaCell {
    /// Context label of the row.
    pub context: String,
    /// Concurrency of the column.
    pub concurrency: u32,
    /// What it says.
    pub kind: CellKind,
    /// The big line: `+20.0 %`, `Valid → Over capacity`, `only in A`, a status word, or `—`.
    pub main: String,
    /// The small line: `6,342.6 → 7,611.1` when both figures exist.
    pub detail: Option<String>,
    /// Background colour (CSS) for better / worse, deeper for bigger changes; `None`: the
    /// kind's style decides.
    pub background: Option<String>,
    /// Whether text on the background should be light.
    pub light: bool,
}

/// The relative change at which the colour is deepest (50 %).
pub const FULL_SCALE: f64 = 0.5;

/// The colour of a better (green) or worse (red) change of `rel` (fraction): light at the
/// threshold, deepest at [`FULL_SCALE`] and beyond.
pub fn delta_colour(better: bool, rel: f64, threshold: f64) -> (String, bool) {
    let span = (FULL_SCALE - threshold).max(1e-9);
    let t = ((rel.abs() - threshold) / span).clamp(0.0, 1.0);
    let t = if t.is_nan() { 0.0 } else { t };
    let (lo, hi) = if better { ((209, 240, 218), (22, 122, 60)) } else { ((253, 219, 212), (178, 34, 24)) };
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * t).round() as u8;
    (format!("rgb({}, {}, {})", mix(lo.0, hi.0), mix(lo.1, hi.1), mix(lo.2, hi.2)), t > 0.45)
}

/// The interval of B − A as " ± 1.2 %" (of A; in the metric's unit when A is 0); empty
/// without one.
pub fn plus_minus(d: &Delta, col: &Column) -> String {
    let Some(iv) = d.interval else { return String::new() };
    match d.a.filter(|a| *a != 0.0 && d.rel.is_some()) {
        Some(a) => format!(" ± {}", percent(iv.half_width() / a.abs(), false)),
        None => format!(" ± {}", col.display(iv.half_width())),
    }
}

/// What the verdicts mean in this diff, one line (the delta heatmap's subtitle).
pub fn verdict_rule(d: &RunDiff) -> String {
    let plain = format!("changes under {} are the same", percent(d.threshold, false));
    match &d.noise {
        None => format!("{plain} · no noise data (a run has no per-second samples)"),
        Some(n) => format!(
            "total tok/s, TTFT p50, TPOT p50: ± is the 95 % interval of B − A; better or worse when it leaves out 0, \
             the false-alarm control over the cells keeps it and the change is at least {}, else within noise \
             (greyed) · other figures: {plain}",
            percent(n.min_change, false)
        ),
    }
}

/// The kinds the delta heatmap's legend explains.
pub fn legend_kinds(noise: bool) -> Vec<CellKind> {
    let mut k: Vec<CellKind> = [Verdict::Better, Verdict::Worse, Verdict::Same].map(CellKind::Verdict).into();
    if noise {
        k.extend([Verdict::WithinNoise, Verdict::NotEnoughData].map(CellKind::Verdict));
    }
    k.extend([CellKind::StatusChange, CellKind::OnlyA, CellKind::OnlyB]);
    k
}

fn status_words(s: Option<CellStatus>) -> &'static str {
    s.map(CellStatus::label).unwrap_or("absent")
}

/// The delta-heatmap cell of a row (or of no row).
pub fn delta_cell(r: Option<&RowDiff>, col: &Column, threshold: f64, context: &str, concurrency: u32) -> DeltaCell {
    let mut cell = DeltaCell {
        context: context.to_string(),
        concurrency,
        kind: CellKind::Absent,
        main: DASH.into(),
        detail: None,
        background: None,
        light: false,
    };
    let Some(r) = r else { return cell };
    let delta = r.deltas.iter().find(|d| d.column == col.id());
    let ab = delta.map(|d| {
        let show = |v: Option<f64>| v.map(|v| col.display(v)).unwrap_or_else(|| DASH.into());
        let (a, b) = match (d.a, d.b) {
            (Some(a), Some(b)) => col.display_pair(a, b),
            _ => (show(d.a), show(d.b)),
        };
        format!("{a} → {b}")
    });
    match (r.status_a, r.status_b) {
        (Some(_), None) => {
            cell.kind = CellKind::OnlyA;
            cell.main = "only in A".into();
            cell.detail = ab;
        }
        (None, Some(_)) => {
            cell.kind = CellKind::OnlyB;
            cell.main = "only in B".into();
            cell.detail = ab;
        }
        _ if r.status_changed() => {
            cell.kind = CellKind::StatusChange;
            cell.main = format!("{} → {}", status_words(r.status_a), status_words(r.status_b));
            cell.detail = ab;
        }
        _ => match delta.and_then(|d| Some((d, d.verdict?, d.abs?))) {
            Some((d, verdict, abs)) => {
                cell.main = d.rel.map(|x| percent(x, true)).unwrap_or_else(|| signed_delta(col, abs));
                cell.main.push_str(&plus_minus(d, col));
                cell.detail = ab;
                cell.kind = CellKind::Verdict(verdict);
                if let (Verdict::Better | Verdict::Worse, Some(rel)) = (verdict, d.rel) {
                    let (bg, light) = delta_colour(verdict == Verdict::Better, rel, threshold);
                    cell.background = Some(bg);
                    cell.light = light;
                }
            }
            None => {
                cell.kind = CellKind::NoFigure;
                cell.main = match (r.status_a, delta.and_then(|d| d.not_comparable.as_ref())) {
                    (_, Some(_)) => "not comparable".into(),
                    (Some(s), None) if !s.is_measured() => s.label().to_string(),
                    _ => DASH.into(),
                };
                cell.detail = ab;
            }
        },
    }
    cell
}

/// The delta heatmap: rows are the contexts of either run, columns their concurrency levels.
/// With prefix-share cells (`--prefix-share`), each context has a row per share above 0 too
/// (`8K · prefix 90%`, [`RunDiff::matrix_rows`]).
pub fn delta_grid(d: &RunDiff, col: &Column) -> Vec<(String, Vec<DeltaCell>)> {
    d.matrix_rows()
        .into_iter()
        .map(|(ctx, share, label)| {
            let cells = d
                .concurrency
                .iter()
                .map(|&n| delta_cell(d.decode_cell_at(ctx.tokens, n, share), col, d.threshold, &label, n))
                .collect();
            (label, cells)
        })
        .collect()
}

/// One matched measurement: a figure both runs have for the same row.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffLine {
    /// Prefill or decode.
    pub phase: Phase,
    /// Context label.
    pub context: String,
    /// Context tokens (for sorting).
    pub context_tokens: u64,
    /// Concurrency (1 for prefill).
    pub concurrency: u32,
    /// The registry column.
    pub column: Column,
    /// A's figure.
    pub a: f64,
    /// B's figure.
    pub b: f64,
    /// B − A.
    pub abs: f64,
    /// (B − A) ÷ |A|, when A ≠ 0.
    pub rel: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// The interval of B − A, when both runs have one.
    pub interval: Option<DeltaInterval>,
}

impl DiffLine {
    /// The metric as the table names it: "TTFT (ms) p50", "Total tok/s".
    pub fn metric_label(&self) -> String {
        match self.column.stat {
            Some(s) => format!("{} {}", self.column.metric.header(), s.suffix()),
            None => self.column.metric.header(),
        }
    }
}

/// Every matched measurement (both runs have the figure), in row order then registry order.
pub fn diff_lines(d: &RunDiff) -> Vec<DiffLine> {
    let mut out = Vec::new();
    for r in &d.rows {
        for x in &r.deltas {
            let (Some(a), Some(b), Some(abs), Some(verdict)) = (x.a, x.b, x.abs, x.verdict) else { continue };
            let Some(column) = crate::model::run_report::heatmap_column(&x.column) else { continue };
            out.push(DiffLine {
                phase: r.cell.phase,
                context: format!(
                    "{}{}",
                    r.cell.context.label,
                    speedmatrix_schema::prefix::name_suffix(r.cell.prefix_share)
                ),
                context_tokens: r.cell.context.tokens,
                concurrency: r.cell.concurrency,
                column,
                a,
                b,
                abs,
                rel: x.rel,
                verdict,
                interval: x.interval,
            });
        }
    }
    out
}

/// The columns of the matched-measurements table.
pub const LINE_COLUMNS: [(&str, &str); 9] = [
    ("phase", "Phase"),
    ("context", "Context"),
    ("concurrency", "Requests at once"),
    ("metric", "Metric"),
    ("a", "A"),
    ("b", "B"),
    ("delta", "Δ"),
    ("delta_pct", "Δ %"),
    ("verdict", "Change"),
];

/// The text of column `id` of a line (numbers written by the registry).
pub fn line_text(l: &DiffLine, id: &str) -> String {
    match id {
        "phase" => l.phase.label().into(),
        "context" => l.context.clone(),
        "concurrency" => l.concurrency.to_string(),
        "metric" => l.metric_label(),
        "a" => l.column.display_pair(l.a, l.b).0,
        "b" => l.column.display_pair(l.a, l.b).1,
        "delta" => match l.interval {
            Some(iv) => format!("{} ± {}", signed_delta(&l.column, l.abs), l.column.display(iv.half_width())),
            None => signed_delta(&l.column, l.abs),
        },
        "delta_pct" => match (l.rel, l.interval) {
            (Some(r), Some(iv)) if l.a != 0.0 => {
                format!("{} ± {}", percent(r, true), percent(iv.half_width() / l.a.abs(), false))
            }
            (Some(r), _) => percent(r, true),
            (None, _) => DASH.into(),
        },
        "verdict" => l.verdict.label().into(),
        _ => String::new(),
    }
}

fn verdict_rank(v: Verdict) -> u8 {
    match v {
        Verdict::Worse => 0,
        Verdict::Better => 1,
        Verdict::Changed => 2,
        Verdict::NotEnoughData => 3,
        Verdict::WithinNoise => 4,
        Verdict::Same => 5,
    }
}

/// Compare two lines on column `id`. Δ % sorts by size of the change (a missing Δ % last);
/// "Change" sorts worse, better, changed, same.
pub fn compare_lines(x: &DiffLine, y: &DiffLine, id: &str) -> Ordering {
    match id {
        "phase" => x.phase.cmp(&y.phase),
        "context" => x.context_tokens.cmp(&y.context_tokens),
        "concurrency" => x.concurrency.cmp(&y.concurrency),
        "metric" => x.metric_label().cmp(&y.metric_label()),
        "a" => x.a.total_cmp(&y.a),
        "b" => x.b.total_cmp(&y.b),
        "delta" => x.abs.total_cmp(&y.abs),
        "delta_pct" => match (x.rel, y.rel) {
            (Some(p), Some(q)) => p.total_cmp(&q),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        },
        "verdict" => verdict_rank(x.verdict).cmp(&verdict_rank(y.verdict)),
        _ => Ordering::Equal,
    }
}

/// The lines to show, as indexes into `lines`: filtered (changes only; one column id or all)
/// and sorted by `sort` (column id, ascending); ties keep row order.
pub fn line_order(
    lines: &[DiffLine],
    sort: Option<(&str, bool)>,
    changes_only: bool,
    column: Option<&str>,
) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..lines.len())
        .filter(|&i| !changes_only || !matches!(lines[i].verdict, Verdict::Same | Verdict::WithinNoise))
        .filter(|&i| column.is_none_or(|c| lines[i].column.id() == c))
        .collect();
    if let Some((id, asc)) = sort {
        idx.sort_by(|&p, &q| {
            let o = compare_lines(&lines[p], &lines[q], id);
            if asc {
                o
            } else {
                o.reverse()
            }
        });
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::diff::{diff, DEFAULT_THRESHOLD};
    use speedmatrix_schema::registry::column;
    use speedmatrix_schema::Results;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn seed() -> Results {
        let bytes = include_bytes!("../../../tests/fixtures/h200-qwen3.5-122b-vllm.json");
        speedmatrix_schema::load_results(bytes).expect("the seed fixture loads")
    }

    fn modified() -> Results {
        let mut b = seed();
        let at = |b: &Results, ctx: u64, n: u32| {
            b.decode.iter().position(|c| c.context.tokens == ctx && c.concurrency == n).unwrap()
        };
        let i = at(&b, 8192, 128);
        b.decode[i].total_tps = Some(6342.6 * 1.2);
        let i = at(&b, 8192, 1);
        b.decode[i].total_tps = Some(237.1 * 0.6);
        let i = at(&b, 65536, 64);
        b.decode[i].status = CellStatus::OverCapacity;
        b.decode[i].total_tps = None;
        b.config.contexts.retain(|c| c.tokens != 131072);
        b.decode.retain(|c| c.context.tokens != 131072);
        b
    }

    #[test]
    fn delta_grid_marks_better_worse_status_and_one_run_only() {
        let d = diff(&seed(), &modified(), DEFAULT_THRESHOLD);
        let g = delta_grid(&d, &column("total_tps").unwrap());
        assert_eq!(g.len(), 6);
        let at =
            |ctx: &str, n: u32| g.iter().find(|r| r.0 == ctx).unwrap().1.iter().find(|c| c.concurrency == n).unwrap();
        let c = at("8K", 128);
        assert_eq!(
            (c.kind, c.main.as_str(), c.detail.as_deref()),
            (CellKind::Verdict(Verdict::Better), "+20.0 %", Some("6,342.6 → 7,611.1"))
        );
        assert!(c.background.as_deref().unwrap().starts_with("rgb("));
        let w = at("8K", 1);
        assert_eq!((w.kind, w.main.as_str()), (CellKind::Verdict(Verdict::Worse), "-40.0 %"));
        assert_ne!(w.background, c.background);
        assert_eq!(at("8K", 2).kind, CellKind::Verdict(Verdict::Same));
        assert_eq!(at("8K", 2).background, None, "no colour within the threshold");
        let s = at("64K", 64);
        assert_eq!((s.kind, s.main.as_str()), (CellKind::StatusChange, "Valid → Over capacity"));
        assert_eq!((at("64K", 128).kind, at("64K", 128).main.as_str()), (CellKind::NoFigure, "Over capacity"));
        assert!(g.iter().find(|r| r.0 == "128K").unwrap().1.iter().all(|c| c.kind == CellKind::OnlyA));
        let marks: Vec<&str> = [
            CellKind::Verdict(Verdict::Better),
            CellKind::Verdict(Verdict::Worse),
            CellKind::StatusChange,
            CellKind::OnlyA,
            CellKind::OnlyB,
        ]
        .iter()
        .map(|k| k.mark())
        .collect();
        assert_eq!(marks, ["▲", "▼", "⇄", "A", "B"]);
    }

    #[test]
    fn counts_of_runs_with_different_windows_say_not_comparable() {
        let mut b = seed();
        b.config.window_s = Some(5.0);
        let d = diff(&seed(), &b, DEFAULT_THRESHOLD);
        let g = delta_grid(&d, &column("output_tokens").unwrap());
        let c = g.iter().find(|r| r.0 == "8K").unwrap().1.iter().find(|c| c.concurrency == 128).unwrap();
        assert_eq!((c.kind, c.main.as_str()), (CellKind::NoFigure, "not comparable"));
        let t = delta_grid(&d, &column("total_tps").unwrap());
        let c = t.iter().find(|r| r.0 == "8K").unwrap().1.iter().find(|c| c.concurrency == 128).unwrap();
        assert_eq!(c.kind, CellKind::Verdict(Verdict::Same), "rates still compare");
    }

    /// `r` with a total tok/s interval (standard error 1 %, 9 df) on every measured cell.
    fn with_noise(mut r: Results) -> Results {
        for c in r.decode.iter_mut().filter(|c| c.status.is_measured()) {
            let v = c.total_tps.unwrap();
            let iv = speedmatrix_schema::Interval {
                estimate: v,
                low: v * 0.977,
                high: v * 1.023,
                level: 0.95,
                method: speedmatrix_schema::IntervalMethod::BatchMeans,
                evidence: 10,
                std_error: 0.01 * v,
                df: Some(9.0),
            };
            c.intervals = Some(speedmatrix_schema::CellIntervals { total_tps: Some(iv), ..Default::default() });
        }
        r
    }

    #[test]
    fn with_noise_data_cells_show_their_interval_and_noise_is_greyed() {
        let a = with_noise(seed());
        let b = with_noise(modified());
        let d = speedmatrix_schema::diff::diff_with(&a, &b, None);
        let g = delta_grid(&d, &column("total_tps").unwrap());
        let at =
            |ctx: &str, n: u32| g.iter().find(|r| r.0 == ctx).unwrap().1.iter().find(|c| c.concurrency == n).unwrap();
        // +20 %, ± √(1 + 1.2²) · 1 % · t(~17 df) ≈ 3.3 % of A: better.
        let c = at("8K", 128);
        assert_eq!((c.kind, c.main.as_str()), (CellKind::Verdict(Verdict::Better), "+20.0 % ± 3.3 %"));
        // Unchanged cells (± √2 · 1 % · t(18 df) ≈ 3.0 %): within noise, no colour, ± shown.
        let same = at("8K", 2);
        assert_eq!(
            (same.kind, same.main.as_str(), same.background.as_deref()),
            (CellKind::Verdict(Verdict::WithinNoise), "0.0 % ± 3.0 %", None)
        );
        assert_eq!(same.kind.id(), "noise");
        assert!(verdict_rule(&d).contains("± is the 95 % interval of B − A"), "{}", verdict_rule(&d));
        assert!(legend_kinds(true).contains(&CellKind::Verdict(Verdict::WithinNoise)));
        // The table: Δ and Δ % with ±.
        let lines = diff_lines(&d);
        let l =
            lines.iter().find(|l| l.column.id() == "total_tps" && l.context == "8K" && l.concurrency == 128).unwrap();
        assert_eq!(line_text(l, "delta_pct"), "+20.0 % ± 3.3 %");
        // Without noise data: as before, and the rule says so.
        let plain = diff(&seed(), &modified(), DEFAULT_THRESHOLD);
        assert!(verdict_rule(&plain).ends_with("no noise data (a run has no per-second samples)"));
    }

    #[test]
    fn colour_deepens_with_the_change() {
        let (light, _) = delta_colour(true, 0.05, 0.05);
        let (deep, light_text) = delta_colour(true, 0.8, 0.05);
        assert_eq!(light, "rgb(209, 240, 218)");
        assert_eq!(deep, "rgb(22, 122, 60)");
        assert!(light_text);
        assert_eq!(delta_colour(false, -0.5, 0.05).0, "rgb(178, 34, 24)");
    }

    #[test]
    fn lines_sort_and_filter() {
        let d = diff(&seed(), &modified(), DEFAULT_THRESHOLD);
        let lines = diff_lines(&d);
        assert!(lines.iter().all(|l| l.context != "128K" || l.phase == Phase::Prefill));
        let changed = line_order(&lines, None, true, None);
        assert_eq!(changed.len(), 2);
        let order = line_order(&lines, Some(("delta_pct", true)), false, Some("total_tps"));
        let first = &lines[order[0]];
        assert_eq!((first.context.as_str(), first.concurrency), ("8K", 1));
        assert_eq!(line_text(first, "delta_pct"), "-40.0 %");
        assert_eq!(line_text(first, "delta"), "-94.8");
        assert_eq!(line_text(first, "verdict"), "worse");
        let last = &lines[*order.last().unwrap()];
        assert_eq!((line_text(last, "a"), line_text(last, "b")), ("6,342.6".into(), "7,611.1".into()));
        let by_verdict = line_order(&lines, Some(("verdict", true)), false, None);
        assert_eq!(lines[by_verdict[0]].verdict, Verdict::Worse);
        assert_eq!(line_text(&lines[0], "metric"), "TTFT (ms) p50", "registry order: TTFT before prompt tok/s");
    }
}
