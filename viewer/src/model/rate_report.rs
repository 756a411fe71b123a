//! What the "Request rates" section shows, as plain data: the open-loop rate cells of a run
//! (`results.rates`, docs/METHODOLOGY.md "Open-loop rate cells") as table lines, the statuses
//! its legend explains, and the chart of TTFT against the achieved rate, one line per context
//! and percentile, so the knee where latency climbs is visible. Pure functions of a
//! [`Results`], unit-tested natively and on wasm32; `view::run_report::rates` draws them.

use crate::model::chart_spec::{all_x, all_y, axis, ChartSpec, Point, Series, Stroke, TickStyle};
use crate::model::run_report::DASH;
use speedmatrix_schema::diff::rates::{figure_label, figure_text, RATE_FIGURES};
use speedmatrix_schema::registry;
use speedmatrix_schema::{rate_label, CellStatus, Distribution, RateCell, Results};

pub use speedmatrix_schema::export::{RateTableLine as RateLine, RATE_TABLE_HEADERS as HEADERS};

/// What a screen reader says for a rate line's status cell: "8K context at 8 req/s:
/// Saturated", then the reason when there is one.
pub fn spoken(l: &RateLine) -> String {
    let head = format!("{} context at {}: {}", l.context, l.rate, l.status.label());
    match &l.reason {
        Some(why) => format!("{head}, {why}"),
        None => head,
    }
}

fn metric(id: &str, v: Option<f64>) -> String {
    match (registry::metric(id), v) {
        (Some(m), Some(v)) if v.is_finite() => m.display(v),
        _ => DASH.to_string(),
    }
}

/// One statistic of a distribution.
type StatOf = fn(&Distribution) -> Option<f64>;

fn stat(d: &Option<Distribution>, p: StatOf) -> Option<f64> {
    d.as_ref().and_then(p)
}

/// The rate table: one line per rate cell ([`speedmatrix_schema::export::rate_table_line`],
/// the builder `show` uses too), contexts in plan order and rates ascending within a context.
pub fn rate_lines(r: &Results) -> Vec<RateLine> {
    speedmatrix_schema::export::rate_table_order(r)
        .into_iter()
        .map(|(i, _)| speedmatrix_schema::export::rate_table_line(&r.rates[i]))
        .collect()
}

/// The statuses the section's legend explains: those a rate cell can have besides valid
/// (saturated, client-limited, error, not run), each with whether a cell of this run has it.
pub fn legend(r: &Results) -> Vec<(CellStatus, bool)> {
    [CellStatus::Saturated, CellStatus::ClientLimited, CellStatus::Error, CellStatus::NotRun]
        .into_iter()
        .map(|s| (s, r.rates.iter().any(|c| c.status == s)))
        .collect()
}

/// The TTFT chart's id (canvas `chart-rate-ttft`, PNG `…-rate-ttft.png`).
pub const CHART_ID: &str = "rate-ttft";
/// The TPOT chart's id (canvas `chart-rate-tpot`).
pub const TPOT_CHART_ID: &str = "rate-tpot";

/// One line of a latency chart per context: its name, stroke and the statistic drawn.
type LineOf = (&'static str, Stroke, fn(&RateCell) -> Option<f64>);

/// A latency against the achieved rate, one line per context and entry of `lines` (a context
/// keeps one colour), over the measured rate cells that have both figures; `None` without a
/// point.
fn latency_chart(
    r: &Results,
    id: &'static str,
    metric_id: &str,
    lines: &[LineOf],
    title: &str,
    caption: &str,
    y_label: &str,
) -> Option<ChartSpec> {
    let contexts = rate_rows(r);
    let mut series = Vec::new();
    for (colour, row) in contexts.iter().enumerate() {
        let label = row.chart_name();
        for (name, stroke, figure) in lines {
            let mut points: Vec<Point> = r
                .rates
                .iter()
                .filter(|c| row_key(c) == row.key && c.status.is_measured())
                .filter_map(|c| {
                    let x = c.achieved_rps.filter(|v| v.is_finite())?;
                    let y = figure(c).filter(|v| v.is_finite())?;
                    Some(Point {
                        x,
                        y,
                        status: c.status,
                        label: format!("{label} · {name} · {} offered", c.rate_label()),
                        x_text: format!("{x:.2} req/s"),
                        y_text: metric(metric_id, Some(y)),
                        interval: None,
                    })
                })
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            series.push(Series { name: format!("{label} · {name}"), colour, stroke: *stroke, points });
        }
    }
    series.retain(|s| !s.points.is_empty());
    let spec = ChartSpec {
        id,
        title: title.into(),
        caption: caption.into(),
        x: axis("Achieved rate (req/s)".into(), all_x(&series), TickStyle::Compact, true),
        y: axis(y_label.into(), all_y(&series), TickStyle::Compact, true),
        series,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    };
    spec.has_points().then_some(spec)
}

/// TTFT p50 (solid) and p90 (dashed) against the achieved rate, one pair of lines per context
/// (a context keeps one colour), over the measured rate cells that have both figures. Lines
/// join valid cells; a saturated or client-limited cell is its own mark. `None` when no rate
/// cell has a point.
pub fn ttft_chart(r: &Results) -> Option<ChartSpec> {
    latency_chart(
        r,
        CHART_ID,
        "ttft_ms",
        &[
            ("TTFT p50", Stroke::Solid, |c| stat(&c.ttft_ms, |d| d.p50)),
            ("TTFT p90", Stroke::Dashed, |c| stat(&c.ttft_ms, |d| d.p90)),
        ],
        "Time to first token vs achieved request rate",
        "TTFT from each request's scheduled instant, median (solid) and p90 (dashed), one pair of lines \
         per context length: where the lines turn up, the server stops keeping up.",
        "TTFT (ms)",
    )
}

/// TPOT p50 against the achieved rate, one line per context: decode slows as more requests
/// share the batches, and climbs at the knee. `None` when no rate cell has a point.
pub fn tpot_chart(r: &Results) -> Option<ChartSpec> {
    latency_chart(
        r,
        TPOT_CHART_ID,
        "tpot_ms",
        &[("TPOT p50", Stroke::Solid, |c| stat(&c.tpot_ms, |d| d.p50))],
        "Time per output token vs achieved request rate",
        "TPOT median per context length: each request's decode speed as the rate (and the requests in flight) grows.",
        "TPOT (ms)",
    )
}

/// The figures the rate heatmap can show: the column ids of `show --rates` (and of the diff's
/// rate figures, `speedmatrix_schema::diff::rates::RATE_FIGURES`).
pub const HEATMAP_METRICS: [&str; 8] = [
    "achieved_rps",
    "goodput_rps",
    "total_tps",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "tpot_ms_p50",
    "e2e_ms_p50",
    "send_lag_ms_p99",
];

/// The rate heatmap's default figure.
pub const DEFAULT_HEATMAP_METRIC: &str = "achieved_rps";

/// A rate figure: whether higher is better, and the figure of a cell.
type RateFigure = (Option<bool>, fn(&RateCell) -> Option<f64>);

fn figure(id: &str) -> Option<RateFigure> {
    RATE_FIGURES.iter().find(|f| f.0 == id).map(|f| (f.1, f.2))
}

/// One cell of the rate heatmap.
#[derive(Debug, Clone, PartialEq)]
pub struct RateHeatCell {
    /// "8K".
    pub context: String,
    /// "0.5 req/s".
    pub rate: String,
    /// `None`: the run has no cell at this context and rate.
    pub status: Option<CellStatus>,
    /// The figure, written as the rate table writes it; `None` without one.
    pub value: Option<String>,
    /// Position on the colour scale, 0 (worst / lowest) – 1 (best / highest).
    pub level: Option<f64>,
    /// Why the status, if the file says.
    pub reason: Option<String>,
    /// The approximate-token-count mark ([`speedmatrix_schema::status::approximate_rate_note`]).
    pub note: Option<&'static str>,
}

impl RateHeatCell {
    /// What a screen reader says: "8K context at 2 req/s: 1.60 req/s, Valid", then the reason.
    pub fn spoken(&self) -> String {
        let mut rest = vec![self.value.clone().unwrap_or_else(|| "no value".into())];
        rest.push(self.status.map_or_else(|| "not planned".into(), |s| s.label().to_string()));
        rest.extend(self.note.map(str::to_string));
        rest.extend(self.reason.clone());
        format!("{} context at {}: {}", self.context, self.rate, rest.join(", "))
    }
}

/// The rate heatmap: rows are the contexts of the rate cells, columns their planned rates.
#[derive(Debug, Clone, PartialEq)]
pub struct RateHeatmap {
    /// Column headers: the rates, "0.5 req/s".
    pub rates: Vec<String>,
    /// (context label, cells).
    pub rows: Vec<(String, Vec<RateHeatCell>)>,
    /// The figures at the light and dark ends of the colour scale.
    pub scale_ends: Option<(String, String)>,
    /// Whether a darker cell is better (`Some(true)`), or only higher (`None`).
    pub darker_is_better: Option<bool>,
}

/// Where a rate cell sits among the rows of the heatmap and the lines of the charts: its
/// context, then its prefix share (none first).
fn row_key(c: &RateCell) -> (u64, Option<u32>) {
    (c.context.tokens, speedmatrix_schema::prefix::key(c.prefix_share))
}

/// A row of the heatmap (a colour of the charts): a context and prefix share of the run's rate
/// cells.
struct RateRow {
    key: (u64, Option<u32>),
    context: String,
    share: Option<f64>,
}

impl RateRow {
    /// The heatmap's row label: "8K", "8K · prefix 90%".
    fn label(&self) -> String {
        format!("{}{}", self.context, speedmatrix_schema::prefix::name_suffix(self.share))
    }

    /// The charts' words for it: "8K context", "8K context · prefix 90%".
    fn chart_name(&self) -> String {
        format!("{} context{}", self.context, speedmatrix_schema::prefix::name_suffix(self.share))
    }
}

/// The rows of the heatmap (colours of the charts): each context and prefix share of the run's
/// rate cells, contexts by tokens, shares ascending (none first).
fn rate_rows(r: &Results) -> Vec<RateRow> {
    let mut rows: Vec<RateRow> = r
        .rates
        .iter()
        .map(|c| RateRow { key: row_key(c), context: c.context.label.clone(), share: c.prefix_share })
        .collect();
    rows.sort_by_key(|a| a.key);
    rows.dedup_by(|a, b| a.key == b.key);
    rows
}

/// The heatmap of figure `id` (one of [`HEATMAP_METRICS`]; another gives the default's) over
/// the run's rate cells: contexts by tokens, rates ascending; cells not measured show their
/// status.
pub fn rate_heatmap(r: &Results, id: &str) -> RateHeatmap {
    let id = if HEATMAP_METRICS.contains(&id) { id } else { DEFAULT_HEATMAP_METRIC };
    let (higher_is_better, value_of) = figure(id).expect("HEATMAP_METRICS are rate figures");
    let contexts = rate_rows(r);
    let mut rates: Vec<f64> = r.rates.iter().map(|c| c.rate_rps).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let measured = |c: &&RateCell| c.status.is_measured();
    let values: Vec<f64> = r.rates.iter().filter(measured).filter_map(value_of).filter(|v| v.is_finite()).collect();
    let range = values.iter().fold(None, |acc: Option<(f64, f64)>, &v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    });
    let level = |v: f64| {
        let (lo, hi) = range.unwrap_or((v, v));
        let t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
        if higher_is_better == Some(false) {
            1.0 - t
        } else {
            t
        }
    };
    let rows = contexts
        .iter()
        .map(|row| {
            let label = row.label();
            let cells = rates
                .iter()
                .map(|&rate| match r.rates.iter().find(|c| row_key(c) == row.key && c.rate_rps == rate) {
                    None => RateHeatCell {
                        context: label.clone(),
                        rate: rate_label(rate),
                        status: None,
                        value: None,
                        level: None,
                        reason: None,
                        note: None,
                    },
                    Some(c) => {
                        let v = if c.status.is_measured() { value_of(c).filter(|v| v.is_finite()) } else { None };
                        RateHeatCell {
                            context: label.clone(),
                            rate: c.rate_label(),
                            status: Some(c.status),
                            value: v.map(|v| figure_text(id, v)),
                            level: v.map(level),
                            reason: c.reason.clone(),
                            note: speedmatrix_schema::status::approximate_rate_note(c),
                        }
                    }
                })
                .collect();
            (label, cells)
        })
        .collect();
    let scale_ends = range.map(|(lo, hi)| {
        let (lo, hi) = (figure_text(id, lo), figure_text(id, hi));
        if higher_is_better == Some(false) {
            (hi, lo)
        } else {
            (lo, hi)
        }
    });
    RateHeatmap {
        rates: rates.into_iter().map(rate_label).collect(),
        rows,
        scale_ends,
        darker_is_better: higher_is_better.map(|_| true),
    }
}

/// The heatmap's metric options: (id, label, whether a measured cell of the run has it).
pub fn heatmap_choices(r: &Results) -> Vec<(String, String, bool)> {
    HEATMAP_METRICS
        .iter()
        .map(|id| {
            let (_, value_of) = figure(id).expect("HEATMAP_METRICS are rate figures");
            let has = r.rates.iter().filter(|c| c.status.is_measured()).any(|c| value_of(c).is_some());
            (id.to_string(), figure_label(id), has)
        })
        .collect()
}

/// What the run says about its SLO of rate cells: the SLO in words, then per context the
/// highest rate meeting it that `--rates auto` found (or the measured cells' best when the run
/// has an SLO but no search). Empty without an SLO.
pub fn slo_lines(r: &Results) -> Vec<String> {
    let Some(slo) = &r.config.rate_slo else { return Vec::new() };
    let mut out = vec![format!(
        "SLO: {} · goodput counts the requests of a window that met it (their own TTFT and TPOT), per second",
        speedmatrix_schema::rate::slo_text(slo)
    )];
    if r.rate_at_slo.is_empty() {
        let judged = speedmatrix_schema::rate_slo::judge(r, slo);
        for cap in speedmatrix_schema::rate_slo::capacity(&judged) {
            out.push(format!(
                "Highest rate meeting the SLO at {}: {}{}",
                cap.context.label,
                cap.rate_rps.map_or("none".into(), rate_label),
                cap.failed_at_rps.map(|f| format!(" ({} did not)", rate_label(f))).unwrap_or_default()
            ));
        }
    }
    for found in &r.rate_at_slo {
        out.push(format!(
            "Highest rate meeting the SLO at {}: {}{} — {}",
            found.context.label,
            found.rate_rps.map_or("none".into(), rate_label),
            found.failed_at_rps.map(|f| format!(" ({} did not)", rate_label(f))).unwrap_or_default(),
            found.reason
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::load_results;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// A real twin run: 8K and 32K at 0.5, 1, 8 and 16 req/s; 8 req/s saturated at both, so
    /// 16 req/s was not run.
    fn twin() -> Results {
        load_results(include_bytes!("../../../tests/fixtures/rates-twin.json")).expect("valid rates fixture")
    }

    #[test]
    fn the_table_has_a_line_per_rate_cell_with_the_files_figures() {
        let lines = rate_lines(&twin());
        let keys: Vec<(&str, &str, CellStatus)> =
            lines.iter().map(|l| (l.context.as_str(), l.rate.as_str(), l.status)).collect();
        use CellStatus::*;
        assert_eq!(
            keys,
            [
                ("8K", "0.5 req/s", Valid),
                ("8K", "1 req/s", Valid),
                ("8K", "8 req/s", Saturated),
                ("8K", "16 req/s", NotRun),
                ("32K", "0.5 req/s", Valid),
                ("32K", "1 req/s", Valid),
                ("32K", "8 req/s", Saturated),
                ("32K", "16 req/s", NotRun),
            ]
        );
        let low = &lines[0];
        assert_eq!((low.offered.as_str(), low.achieved.as_str()), ("0.40", "0.40"));
        assert_eq!((low.ttft_p50.as_str(), low.ttft_p90.as_str()), ("365 ms", "366 ms"));
        assert_eq!(low.reason, None);
        let sat = &lines[2];
        assert_eq!((sat.offered.as_str(), sat.achieved.as_str()), ("10.80", "4.80"));
        assert_eq!((sat.ttft_p50.as_str(), sat.ttft_p90.as_str()), ("4,256 ms", "6,033 ms"));
        assert!(sat.reason.as_deref().unwrap().starts_with("saturated: requests in flight grew from 29 to 59"));
        assert!(spoken(sat).starts_with("8K context at 8 req/s: Saturated, saturated: "), "{}", spoken(sat));
        // Past the saturated rate: not run, every figure a dash, the reason kept.
        let skipped = &lines[3];
        assert!([&skipped.offered, &skipped.achieved, &skipped.total_tps, &skipped.ttft_p50, &skipped.send_lag_p99]
            .iter()
            .all(|v| v.as_str() == DASH));
        assert!(skipped.reason.as_deref().unwrap().contains("8 req/s was saturated at this context"));
        // A saturated cell whose requests mostly went unanswered has no median TTFT.
        assert_eq!((lines[6].achieved.as_str(), lines[6].ttft_p50.as_str()), ("0.60", DASH));
    }

    #[test]
    fn the_legend_marks_the_rate_statuses_this_run_has() {
        use CellStatus::*;
        assert_eq!(legend(&twin()), [(Saturated, true), (ClientLimited, false), (Error, false), (NotRun, true)]);
        let mut r = twin();
        r.rates[1].status = ClientLimited;
        assert_eq!(legend(&r)[1], (ClientLimited, true));
        r.rates.clear();
        assert!(legend(&r).iter().all(|(_, present)| !present));
        assert_eq!(ttft_chart(&r), None, "no rate cells, no chart");
    }

    #[test]
    fn the_chart_plots_ttft_p50_and_p90_against_the_achieved_rate_per_context() {
        let chart = ttft_chart(&twin()).expect("the run has measured rate cells");
        assert_eq!(chart.id, "rate-ttft");
        let names: Vec<(&str, usize, Stroke, usize)> =
            chart.series.iter().map(|s| (s.name.as_str(), s.colour, s.stroke, s.points.len())).collect();
        assert_eq!(
            names,
            [
                ("8K context · TTFT p50", 0, Stroke::Solid, 3),
                ("8K context · TTFT p90", 0, Stroke::Dashed, 3),
                // 32K at 8 req/s has no TTFT percentiles (most requests unanswered): two points.
                ("32K context · TTFT p50", 1, Stroke::Solid, 2),
                ("32K context · TTFT p90", 1, Stroke::Dashed, 2),
            ]
        );
        let p50: Vec<(f64, f64, CellStatus)> = chart.series[0].points.iter().map(|p| (p.x, p.y, p.status)).collect();
        assert_eq!(
            p50,
            [
                (0.4, 364.858, CellStatus::Valid),
                (1.6, 371.672, CellStatus::Valid),
                (4.8, 4256.416, CellStatus::Saturated)
            ]
        );
        let knee = &chart.series[0].points[2];
        assert_eq!((knee.x_text.as_str(), knee.y_text.as_str()), ("4.80 req/s", "4,256 ms"));
        assert_eq!(knee.label, "8K context · TTFT p50 · 8 req/s offered");
        // In x order: 32K at 1 req/s achieved less than at 0.5 req/s.
        let xs: Vec<f64> = chart.series[2].points.iter().map(|p| p.x).collect();
        assert_eq!(xs, [0.2, 0.6]);
        // 0.2 – 4.8 req/s spans 20× or more: a logarithmic x axis; 365 ms – 6 s (16×) stays
        // linear, so the knee reads as the climb it is.
        assert!(chart.x.log && !chart.y.log);
        assert_eq!(chart.x.label, "Achieved rate (req/s)");
        let rows = chart.mirror_rows();
        assert_eq!(rows.len(), 10);
        assert!(rows.contains(&[
            "8K context · TTFT p90".to_string(),
            "4.80 req/s".to_string(),
            "6,033 ms".to_string(),
            "Saturated".to_string()
        ]));
    }

    #[test]
    fn the_rate_heatmap_has_a_row_per_context_and_a_column_per_rate() {
        let r = twin();
        let h = rate_heatmap(&r, "ttft_ms_p50");
        assert_eq!(h.rates, ["0.5 req/s", "1 req/s", "8 req/s", "16 req/s"]);
        let labels: Vec<&str> = h.rows.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["8K", "32K"]);
        let low = &h.rows[0].1[0];
        assert_eq!((low.value.as_deref(), low.status), (Some("365 ms"), Some(CellStatus::Valid)));
        // Less TTFT is better: the fastest cell is darkest.
        assert_eq!(low.level, Some(1.0));
        assert_eq!(h.scale_ends, Some(("4,256 ms".to_string(), "365 ms".to_string())));
        assert!(h.rows[0].1[3].value.is_none() && h.rows[0].1[3].status == Some(CellStatus::NotRun));
        assert!(h.rows[0].1[2].spoken().starts_with("8K context at 8 req/s: 4,256 ms, Saturated, saturated: "));
        let achieved = rate_heatmap(&r, "no-such-figure");
        assert_eq!(achieved.rows[0].1[1].value.as_deref(), Some("1.60 req/s"), "the default figure: achieved rate");
        // Goodput needs an SLO: this run has none, so the option is offered without data.
        let choices = heatmap_choices(&r);
        assert!(choices.iter().any(|(id, _, has)| id == "goodput_rps" && !has));
        assert!(choices.iter().any(|(id, label, has)| id == "ttft_ms_p90" && label == "TTFT p90" && *has));
    }

    #[test]
    fn prefix_shares_are_rows_of_their_own_in_the_table_the_heatmap_and_the_charts() {
        // The twin at shares 0 and 90 % × 1 and 2 req/s (tests/fixtures/rates-share-spec-twin.json).
        let r = speedmatrix_schema::load_results(include_bytes!("../../../tests/fixtures/rates-share-spec-twin.json"))
            .expect("the rate-share fixture loads");
        let lines = rate_lines(&r);
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
        assert_eq!(lines[2].prefix_cache, "89.1% hit (plan 90%, Prometheus)");
        assert!(lines[2].spec_decode.ends_with("(Prometheus counters)"), "{}", lines[2].spec_decode);
        assert_eq!(
            lines[2].prefix_cache_detail.as_deref(),
            Some("6,384 of 7,168 prompt tokens served from the cache · cache reset (POST /reset_prefix_cache)")
        );
        assert_eq!(
            lines[2].spec_decode_detail.as_deref(),
            Some("780 draft tokens, 191 accepted · acceptance by position 0: 44.2% · 1: 20.0% · 2: 9.2%")
        );
        let h = rate_heatmap(&r, "ttft_ms_p50");
        let rows: Vec<&str> = h.rows.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(rows, ["1K · prefix 0%", "1K · prefix 90%"], "one row per share, never one cell for two");
        assert!(h.rows.iter().all(|(_, cells)| cells.iter().all(|c| c.status.is_some())));
        let chart = ttft_chart(&r).expect("a TTFT chart");
        let names: Vec<&str> = chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "1K context · prefix 0% · TTFT p50",
                "1K context · prefix 0% · TTFT p90",
                "1K context · prefix 90% · TTFT p50",
                "1K context · prefix 90% · TTFT p90"
            ]
        );
    }

    #[test]
    fn the_tpot_chart_and_the_slo_lines() {
        let mut r = twin();
        let tpot = tpot_chart(&r).expect("measured rate cells have TPOT");
        assert_eq!(tpot.id, "rate-tpot");
        assert_eq!(tpot.series.len(), 2, "one line per context");
        assert!(slo_lines(&r).is_empty(), "no SLO, no lines");
        r.config.rate_slo = Some(speedmatrix_schema::RateSlo { ttft_ms: Some(700.0), tpot_ms: None, percentile: 90 });
        let lines = slo_lines(&r);
        assert!(lines[0].starts_with("SLO: TTFT p90 ≤ 700 ms"), "{lines:?}");
        assert_eq!(
            lines[1..],
            [
                "Highest rate meeting the SLO at 8K: 1 req/s (8 req/s did not)",
                "Highest rate meeting the SLO at 32K: none (0.5 req/s did not)"
            ]
        );
        r.rates[0].token_count_source = Some(speedmatrix_schema::TokenCountSource::ChunkCount);
        assert_eq!(rate_lines(&r)[0].note, Some("≈ approximate: tokens counted from chunks"));
        assert_eq!(rate_heatmap(&r, "total_tps").rows[0].1[0].note, Some("≈ approximate: tokens counted from chunks"));
    }
}
