//! What the diff view shows of the rate cells, as plain data: one line per rate cell of either
//! run with the delta of each figure ([`RATE_COLUMNS`]) as the delta heatmap writes a cell, and
//! the rate cells' notes (status changes, one run only, the SLO rate per context). Pure
//! functions of a [`RateDiff`] (`speedmatrix_schema::diff::rates`, the same as `speedmatrix
//! diff`); `view::diff_page` draws them.

use crate::model::run_diff::{delta_colour, CellKind, DASH};
use speedmatrix_schema::diff::rates::{figure_label, figure_text, RateDiff, RateRowDiff};
use speedmatrix_schema::diff::{percent, Delta, Verdict};
use speedmatrix_schema::{rate_label, CellStatus};

/// The figures of a rate cell the diff view's rate table shows, in column order; then those of
/// [`speedmatrix_schema::diff::rates::CACHE_SPEC_FIGURES`] a cell has ([`columns`]).
pub const RATE_COLUMNS: [&str; 6] =
    ["achieved_rps", "goodput_rps", "total_tps", "ttft_ms_p50", "tpot_ms_p50", "e2e_ms_p50"];

/// The figures of the rate table of `d`: [`RATE_COLUMNS`], then the measured prefix-cache hit
/// rate and speculative decoding where a cell of either run has them.
pub fn columns(d: &RateDiff) -> Vec<&'static str> {
    RATE_COLUMNS.into_iter().chain(speedmatrix_schema::diff::rates::cache_spec_figures(d)).collect()
}

/// One figure of one rate cell in the diff view.
#[derive(Debug, Clone, PartialEq)]
pub struct RateDeltaCell {
    /// The figure's column id, `ttft_ms_p50`.
    pub column: &'static str,
    /// What it says.
    pub kind: CellKind,
    /// The big line: `+50.0 %`, or `—`.
    pub main: String,
    /// The small line: `365 ms → 547 ms`.
    pub detail: Option<String>,
    /// Why there is no verdict, or the interval's note (shown on hover).
    pub note: Option<String>,
    /// Background colour for better / worse.
    pub background: Option<String>,
    /// Whether text on the background should be light.
    pub light: bool,
}

/// One rate cell of either run in the diff view.
#[derive(Debug, Clone, PartialEq)]
pub struct RateDiffLine {
    /// "8K".
    pub context: String,
    /// "0.5 req/s".
    pub rate: String,
    /// What the cell is: a status change, one run only, or the statuses' verdicts.
    pub kind: CellKind,
    /// "Valid", "Valid → Saturated", "only in A".
    pub status: String,
    /// One per figure of [`columns`].
    pub cells: Vec<RateDeltaCell>,
}

fn words(s: Option<CellStatus>) -> &'static str {
    s.map(CellStatus::label).unwrap_or("absent")
}

fn cell(r: &RateRowDiff, column: &'static str, threshold: f64) -> RateDeltaCell {
    delta_cell(r.delta(column), r.matched() && !r.status_changed(), column, threshold)
}

/// One rate figure of a rate cell or trace row as the delta heatmap writes a cell: A → B, and
/// the change with its verdict when `compared` (both runs have the row, with one status);
/// otherwise only A → B, with why on hover (`Delta::not_comparable`, the noise note).
pub fn delta_cell(d: Option<&Delta>, compared: bool, column: &'static str, threshold: f64) -> RateDeltaCell {
    delta_cell_with(d, compared, column, threshold, figure_text)
}

/// [`delta_cell`] with the figures written by `figure_text` (a conversation turn's figures:
/// [`speedmatrix_schema::diff::turns::figure_text`]).
pub fn delta_cell_with(
    d: Option<&Delta>,
    compared: bool,
    column: &'static str,
    threshold: f64,
    figure_text: fn(&str, f64) -> String,
) -> RateDeltaCell {
    let mut c = RateDeltaCell {
        column,
        kind: CellKind::NoFigure,
        main: DASH.into(),
        detail: None,
        note: None,
        background: None,
        light: false,
    };
    let Some(d) = d else { return c };
    let show = |v: Option<f64>| v.map_or_else(|| DASH.to_string(), |v| figure_text(column, v));
    c.detail = Some(format!("{} → {}", show(d.a), show(d.b)));
    c.note = d.noise_note.clone().or_else(|| d.not_comparable.clone());
    if !compared {
        return c;
    }
    if let (Some(verdict), Some(abs)) = (d.verdict, d.abs) {
        c.kind = CellKind::Verdict(verdict);
        c.main = d.rel.map_or_else(|| figure_text(column, abs), |x| percent(x, true));
        if let (Some(iv), Some(a)) = (d.interval, d.a.filter(|a| *a != 0.0)) {
            c.main.push_str(&format!(" ± {}", percent(iv.half_width() / a.abs(), false)));
        }
        if let (Verdict::Better | Verdict::Worse, Some(rel)) = (verdict, d.rel) {
            let (bg, light) = delta_colour(verdict == Verdict::Better, rel, threshold);
            c.background = Some(bg);
            c.light = light;
        }
    } else if d.verdict == Some(Verdict::NotEnoughData) {
        c.kind = CellKind::Verdict(Verdict::NotEnoughData);
        c.main = "not enough data".into();
    }
    c
}

/// Every rate cell of either run, by context then rate, each figure as the delta heatmap
/// writes a cell (`threshold`: the diff's, for the colour scale).
pub fn rate_lines(d: &RateDiff, threshold: f64) -> Vec<RateDiffLine> {
    let figures = columns(d);
    d.rows
        .iter()
        .map(|r| {
            let (kind, status) = match (r.status_a, r.status_b) {
                (Some(_), None) => (CellKind::OnlyA, "only in A".to_string()),
                (None, Some(_)) => (CellKind::OnlyB, "only in B".to_string()),
                _ if r.status_changed() => {
                    (CellKind::StatusChange, format!("{} → {}", words(r.status_a), words(r.status_b)))
                }
                (a, _) => (CellKind::NoFigure, words(a).to_string()),
            };
            RateDiffLine {
                context: r.cell.row_label(),
                rate: rate_label(r.cell.rate_rps),
                kind,
                status,
                cells: figures.iter().map(|c| cell(r, c, threshold)).collect(),
            }
        })
        .collect()
}

/// The headers of the rate table of `d`: context, rate, status, then one per figure of
/// [`columns`].
pub fn headers(d: &RateDiff) -> Vec<String> {
    ["Context", "Rate", "Status"]
        .into_iter()
        .map(String::from)
        .chain(columns(d).iter().map(|c| figure_label(c)))
        .collect()
}

/// What the rate cells' comparison says besides the table: status changes, cells of one run
/// only, a difference of SLOs and the highest rate meeting the SLO per context.
pub fn rate_notes(d: &RateDiff) -> Vec<String> {
    let mut out = Vec::new();
    for s in &d.status_changes {
        out.push(format!("Status changed at {}: {} → {}", s.cell.describe(), s.a.label(), s.b.label()));
    }
    for (who, cells) in [("A", &d.only_in_a), ("B", &d.only_in_b)] {
        if !cells.is_empty() {
            let list: Vec<String> = cells.iter().map(|c| c.describe()).collect();
            out.push(format!("Rate cells only in {who} ({}): {}", cells.len(), list.join(", ")));
        }
    }
    if d.slo_a != d.slo_b {
        let slo = |s: &Option<String>| s.clone().unwrap_or_else(|| "none".into());
        out.push(format!(
            "The runs' SLOs differ (A: {}; B: {}): goodput is not compared",
            slo(&d.slo_a),
            slo(&d.slo_b)
        ));
    }
    for s in &d.rate_at_slo {
        let rate = |v: Option<f64>, searched: bool| match (v, searched) {
            (_, false) => "not searched".to_string(),
            (None, true) => "none".to_string(),
            (Some(v), true) => rate_label(v),
        };
        let verdict = s.verdict.map_or_else(String::new, |v| format!(" — {}", v.label()));
        out.push(format!(
            "Highest rate meeting the SLO at {}: {} → {}{verdict}",
            s.context.label,
            rate(s.a, s.in_a),
            rate(s.b, s.in_b)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::diff::diff;
    use speedmatrix_schema::load_results;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn share_cells_pair_by_share_and_add_the_hit_rate_and_acceptance_columns() {
        let a = load_results(include_bytes!("../../../tests/fixtures/rates-share-spec-twin.json"))
            .expect("valid rate-share fixture");
        let mut b = a.clone();
        let c = b.rates.iter_mut().find(|c| c.prefix_share == Some(0.9) && c.rate_rps == 1.0).unwrap();
        let pc = c.prefix_cache.as_mut().unwrap();
        pc.measured_hit_rate = pc.measured_hit_rate.map(|v| v / 2.0);
        let x = diff(&a, &b, 0.05);
        assert_eq!(columns(&x.rates)[6..], ["prefix_cache_hit_rate", "spec_accept_rate", "spec_mean_accepted_len"]);
        assert_eq!(headers(&x.rates)[9..], ["Prefix-cache hit rate", "Acceptance rate", "Mean accepted length"]);
        let lines = rate_lines(&x.rates, x.threshold);
        let keys: Vec<(&str, &str)> = lines.iter().map(|l| (l.context.as_str(), l.rate.as_str())).collect();
        assert_eq!(
            keys,
            [
                ("1K · prefix 0%", "1 req/s"),
                ("1K · prefix 0%", "2 req/s"),
                ("1K · prefix 90%", "1 req/s"),
                ("1K · prefix 90%", "2 req/s")
            ]
        );
        let hit = lines[2].cells.iter().find(|c| c.column == "prefix_cache_hit_rate").unwrap();
        assert_eq!(hit.kind, CellKind::Verdict(Verdict::Changed));
        assert_eq!(hit.detail.as_deref(), Some("89.1% → 44.5%"));
        let same = lines[3].cells.iter().find(|c| c.column == "prefix_cache_hit_rate").unwrap();
        assert_eq!(same.kind, CellKind::Verdict(Verdict::Same));
    }

    #[test]
    fn rate_lines_carry_each_figures_verdict_and_the_notes_list_what_is_not_compared() {
        let a = load_results(include_bytes!("../../../tests/fixtures/rates-twin.json")).expect("valid rates fixture");
        let mut b = a.clone();
        let c = b.rates.iter_mut().find(|c| c.context.tokens == 8192 && c.rate_rps == 0.5).unwrap();
        let d = c.ttft_ms.as_mut().unwrap();
        d.p50 = d.p50.map(|v| v * 1.5);
        b.rates.iter_mut().find(|c| c.context.tokens == 32768 && c.rate_rps == 1.0).unwrap().status =
            CellStatus::Saturated;
        b.rates.retain(|c| !(c.context.tokens == 32768 && c.rate_rps == 0.5));
        let x = diff(&a, &b, 0.05);
        let lines = rate_lines(&x.rates, x.threshold);
        assert_eq!(lines.len(), 8);
        assert_eq!(headers(&x.rates).len(), 3 + RATE_COLUMNS.len(), "no hit rate, no speculation: no more columns");
        let low = &lines[0];
        assert_eq!((low.context.as_str(), low.rate.as_str(), low.status.as_str()), ("8K", "0.5 req/s", "Valid"));
        let ttft = low.cells.iter().find(|c| c.column == "ttft_ms_p50").unwrap();
        // Too few requests in the 5 s window for an interval of the median.
        assert_eq!(ttft.kind, CellKind::Verdict(Verdict::NotEnoughData));
        assert!(ttft.note.as_deref().unwrap().contains("request(s)"));
        assert_eq!(ttft.detail.as_deref(), Some("365 ms → 547 ms"));
        let changed = lines.iter().find(|l| l.kind == CellKind::StatusChange).unwrap();
        assert_eq!((changed.context.as_str(), changed.status.as_str()), ("32K", "Valid → Saturated"));
        assert!(lines.iter().any(|l| l.kind == CellKind::OnlyA && l.rate == "0.5 req/s"));
        let notes = rate_notes(&x.rates);
        assert_eq!(notes[0], "Status changed at 32K at 1 req/s: Valid → Saturated");
        assert_eq!(notes[1], "Rate cells only in A (1): 32K at 0.5 req/s");
    }
}
