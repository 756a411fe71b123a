//! What the comparison of several runs shows (2 … [`MAX_RUNS`]), as plain data: one colour per
//! run, the overlaid charts (total tok/s and TTFT against concurrency at a chosen context — or
//! every context, one dash pattern each — and per-user tok/s against total tok/s per GPU with
//! each run's Pareto frontier), the capacity at the reader's SLO, and every run's figure per
//! cell side by side. Pure functions of the runs, unit-tested (on wasm32 in headless Chromium by
//! CI); `view::multi_run_page` turns them into elements. Per-GPU figures, the SLO and the frontiers are
//! `speedmatrix_schema`'s (`derived`, `slo`, `frontier`), as in `speedmatrix show --slo`.

use crate::model::chart_spec::{
    all_x, all_y, axis, col, level_axis, ChartSpec, Frontier, Guide, LegendEntry, Marker, Point, Series, Stroke,
    TickStyle,
};
use speedmatrix_schema::derived::{self, cost_per_million_tokens, Basis};
use speedmatrix_schema::frontier::{operating_points, pareto_frontier};
use speedmatrix_schema::registry::{self, Metric};
use speedmatrix_schema::slo::{capacity, limit_text, ContextCapacity, Slo, DEFAULT_SLO};
use speedmatrix_schema::{CellStatus, ContextSize, Results};

/// The most runs one comparison draws (one colour each).
pub const MAX_RUNS: usize = 12;

/// One run of the comparison: its name in legends and tables, and the run. Its colour is its
/// place in the list.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// The legend name (the run's title).
    pub name: &'a str,
    /// The run.
    pub results: &'a Results,
}

/// Which contexts the concurrency charts draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextChoice {
    /// One context (tokens): one line per run.
    One(u64),
    /// Every context: one line per run and context, each context its own dash pattern.
    All,
}

impl ContextChoice {
    /// The URL value: the context's tokens, or `all`.
    pub fn param(self) -> String {
        match self {
            ContextChoice::One(t) => t.to_string(),
            ContextChoice::All => "all".into(),
        }
    }

    /// Read a URL value; `None` when it is neither `all` nor a number.
    pub fn parse(v: &str) -> Option<ContextChoice> {
        if v == "all" {
            Some(ContextChoice::All)
        } else {
            v.parse().ok().map(ContextChoice::One)
        }
    }
}

/// The URL parameters of the comparison besides the runs (`compare`, repeated): the context
/// drawn, the SLO's bounds, the GPU-hour price and the side-by-side table's figure.
pub const MULTI_PARAMS: [&str; 5] = ["context", "ttft", "tps", "price", "figure"];

/// A bound of the SLO read from the URL: absent → `default`; empty → no bound; a number ≥ 0 →
/// that number; anything else → `default`.
fn bound(v: Option<String>, default: Option<f64>) -> Option<f64> {
    match v.as_deref().map(str::trim) {
        None => default,
        Some("") => None,
        Some(t) => t.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).or(default),
    }
}

/// The SLO of the URL: `ttft` (median TTFT limit, ms) and `tps` (median per-user tok/s floor),
/// each defaulting to [`DEFAULT_SLO`]'s, empty for no bound.
pub fn slo_from_query(get: impl Fn(&str) -> Option<String>) -> Slo {
    Slo { ttft_ms: bound(get("ttft"), DEFAULT_SLO.ttft_ms), per_user_tps: bound(get("tps"), DEFAULT_SLO.per_user_tps) }
}

/// `slo` with one bound (`ttft` or `tps`) set from its input's text: empty for no bound; text
/// that is no number ≥ 0 leaves the bound as it was.
pub fn with_bound(slo: Slo, key: &str, text: &str) -> Slo {
    match key {
        "ttft" => Slo { ttft_ms: bound(Some(text.to_string()), slo.ttft_ms), ..slo },
        "tps" => Slo { per_user_tps: bound(Some(text.to_string()), slo.per_user_tps), ..slo },
        _ => slo,
    }
}

/// A bound as its URL value and input text: the number, or empty for none.
pub fn bound_text(v: Option<f64>) -> String {
    v.map(|x| registry::format_number(x, registry::Style::Fixed(if x.fract() == 0.0 { 0 } else { 2 })).replace(',', ""))
        .unwrap_or_default()
}

/// The GPU-hour price typed into the page (`price`): a number > 0, else none.
pub fn price_from(v: Option<String>) -> Option<f64> {
    v?.trim().parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0)
}

/// Every decode context of the runs, by size.
pub fn contexts(runs: &[Run<'_>]) -> Vec<ContextSize> {
    let mut all: Vec<ContextSize> = runs.iter().flat_map(|r| r.results.config.contexts.iter().cloned()).collect();
    all.sort_by_key(|c| c.tokens);
    all.dedup_by_key(|c| c.tokens);
    all
}

/// The context drawn first: the smallest that every run measured, else the smallest of any.
pub fn default_context(runs: &[Run<'_>]) -> Option<u64> {
    let all = contexts(runs);
    let shared =
        all.iter().find(|c| runs.iter().all(|r| r.results.config.contexts.iter().any(|x| x.tokens == c.tokens)));
    shared.or(all.first()).map(|c| c.tokens)
}

/// The charts, in order: `cmp-total` (total tok/s vs concurrency), `cmp-ttft` (median TTFT vs
/// concurrency, with the SLO's TTFT limit), `cmp-pareto` (median per-user tok/s vs total tok/s
/// per GPU, each run's frontier, the SLO's floor). Each run's capacity at the SLO is marked.
/// Runs without a GPU count are left out of the Pareto chart (its caption says which).
pub fn charts(runs: &[Run<'_>], choice: ContextChoice, slo: &Slo) -> Vec<ChartSpec> {
    let all = contexts(runs);
    let drawn: Vec<&ContextSize> =
        all.iter().filter(|c| choice == ContextChoice::All || choice == ContextChoice::One(c.tokens)).collect();
    let caps: Vec<Vec<ContextCapacity>> = runs.iter().map(|r| capacity(r.results, slo)).collect();
    let at = match choice {
        ContextChoice::One(_) => drawn.first().map(|c| format!(" at {} context", c.label)).unwrap_or_default(),
        ContextChoice::All => ", every context".into(),
    };
    let dashes = if choice == ContextChoice::All {
        " One colour per run, one dash pattern per context."
    } else {
        " One colour per run."
    };
    let total = col("total_tps");
    let ttft = col("ttft_ms");
    let requests_axis = "Simultaneous requests".to_string();

    let legend = key_legend(runs, &drawn, &all, choice, Stroke::Solid, false);
    let s = concurrency_series(runs, &drawn, &all, choice, "total_tps");
    let mut markers = capacity_markers(&caps, &drawn, |g| Some((f64::from(g.concurrency), g.total_tps)));
    let spec_total = ChartSpec {
        id: "cmp-total",
        title: format!("Total throughput vs simultaneous requests{at}"),
        caption: format!("Output tok/s across all requests.{dashes} Rings mark each run's capacity at the SLO."),
        x: level_axis(requests_axis.clone(), all_x(&s), TickStyle::Compact),
        y: axis(total.metric.header(), all_y(&s), TickStyle::Compact, true),
        series: s,
        frontiers: Vec::new(),
        markers: std::mem::take(&mut markers),
        guides: Vec::new(),
        legend: Some(legend.clone()),
    };

    let s = concurrency_series(runs, &drawn, &all, choice, "ttft_ms_p50");
    let guides: Vec<Guide> =
        slo.ttft_ms.map(|t| Guide { y: t, label: format!("TTFT limit {}", limit_text(t)) }).into_iter().collect();
    let mut ys = all_y(&s);
    ys.extend(guides.iter().map(|g| g.y));
    let spec_ttft = ChartSpec {
        id: "cmp-ttft",
        title: format!("Time to first token vs simultaneous requests{at}"),
        caption: format!(
            "Median TTFT of the streams that opened each cell.{dashes} The dashed line is the SLO's limit."
        ),
        x: level_axis(requests_axis, all_x(&s), TickStyle::Compact),
        y: axis(format!("{} (median)", ttft.metric.header()), ys, TickStyle::Compact, true),
        series: s,
        frontiers: Vec::new(),
        markers: capacity_markers(&caps, &drawn, |g| Some((f64::from(g.concurrency), g.ttft_ms?))),
        guides,
        legend: Some(legend),
    };
    vec![spec_total, spec_ttft, pareto_chart(runs, &caps, slo)]
}

/// The legend of a comparison chart: one entry per run in its colour (`stroke`: its line, or
/// marks only), then — when every context is drawn — one per context in its dash pattern, and
/// the frontiers' entry when marked. One entry per line would be runs × contexts long.
fn key_legend<R: RunName>(
    runs: &[R],
    drawn: &[&ContextSize],
    all: &[ContextSize],
    choice: ContextChoice,
    stroke: Stroke,
    frontiers: bool,
) -> Vec<LegendEntry> {
    let mut out: Vec<LegendEntry> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| LegendEntry { text: r.name().to_string(), colour: Some(r.colour(i)), stroke })
        .collect();
    if choice == ContextChoice::All {
        out.extend(drawn.iter().map(|c| LegendEntry {
            text: format!("{} context", c.label),
            colour: None,
            stroke: Stroke::Pattern(all.iter().position(|x| x.tokens == c.tokens).unwrap_or(0)),
        }));
    }
    if frontiers {
        out.push(LegendEntry {
            text: "Pareto frontier (each run's colour)".into(),
            colour: None,
            stroke: Stroke::Dashed,
        });
    }
    out
}

/// A run as a legend names it: its name, and its colour given its place in the list.
trait RunName {
    fn name(&self) -> &str;
    fn colour(&self, place: usize) -> usize;
}

impl RunName for Run<'_> {
    fn name(&self) -> &str {
        self.name
    }
    fn colour(&self, place: usize) -> usize {
        place
    }
}

/// A run drawn on the Pareto chart: (its place in the comparison, its name).
impl RunName for (usize, &str) {
    fn name(&self) -> &str {
        self.1
    }
    fn colour(&self, _place: usize) -> usize {
        self.0
    }
}

/// One line per run (and per drawn context) of `y` (a column id) against concurrency; the
/// run's colour, the context's dash pattern when every context is drawn.
fn concurrency_series(
    runs: &[Run<'_>],
    drawn: &[&ContextSize],
    all: &[ContextSize],
    choice: ContextChoice,
    y: &str,
) -> Vec<Series> {
    let y_col = col(y);
    let mut out = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        for ctx in drawn {
            let mut points: Vec<Point> = run
                .results
                .decode
                .iter()
                .filter(|c| c.context.tokens == ctx.tokens)
                .filter_map(|c| {
                    let v = speedmatrix_schema::table::Row::Decode(c).value(&y_col).filter(|v| v.is_finite())?;
                    Some(Point {
                        x: f64::from(c.concurrency),
                        y: v,
                        status: c.status,
                        label: format!("{} · {} context · {} at once", run.name, ctx.label, c.concurrency),
                        x_text: c.concurrency.to_string(),
                        y_text: y_col.display(v),
                        interval: None,
                    })
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            let (name, stroke) = match choice {
                ContextChoice::One(_) => (run.name.to_string(), Stroke::Solid),
                ContextChoice::All => {
                    let di = all.iter().position(|c| c.tokens == ctx.tokens).unwrap_or(0);
                    (format!("{} · {} context", run.name, ctx.label), Stroke::Pattern(di))
                }
            };
            out.push(Series { name, colour: ri, stroke, points });
        }
    }
    out
}

/// A ring per run and drawn context at its capacity cell, placed by `at` (x, y).
fn capacity_markers(
    caps: &[Vec<ContextCapacity>],
    drawn: &[&ContextSize],
    at: impl Fn(&speedmatrix_schema::slo::Goodput) -> Option<(f64, f64)>,
) -> Vec<Marker> {
    caps.iter()
        .enumerate()
        .flat_map(|(ri, cs)| {
            cs.iter()
                .filter(|c| drawn.iter().any(|d| d.tokens == c.context.tokens))
                .filter_map(|c| c.best.as_ref().and_then(&at))
                .map(move |(x, y)| Marker { x, y, colour: ri })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Per-user tok/s against total tok/s per GPU: every valid cell of each run with a GPU count
/// (all contexts), the run's frontier in its colour, its capacity cells ringed, the SLO's
/// per-user floor as a line.
fn pareto_chart(runs: &[Run<'_>], caps: &[Vec<ContextCapacity>], slo: &Slo) -> ChartSpec {
    let mut series = Vec::new();
    let mut frontiers = Vec::new();
    let mut markers = Vec::new();
    let mut left_out = Vec::new();
    let mut drawn_runs = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        let Ok(gpus) = derived::gpu_count(run.results) else {
            left_out.push(run.name.to_string());
            continue;
        };
        drawn_runs.push((ri, run.name));
        let pts = operating_points(run.results);
        let mut points: Vec<Point> = pts
            .iter()
            .filter_map(|p| {
                let x = p.total_tps_per_gpu?;
                Some(Point {
                    x,
                    y: p.per_user_tps,
                    status: CellStatus::Valid,
                    label: format!("{} · {} context · {} at once", run.name, p.context.label, p.concurrency),
                    x_text: per_gpu_metric().display(x),
                    y_text: col("per_request_tps").display(p.per_user_tps),
                    interval: None,
                })
            })
            .collect();
        points.sort_by(|a, b| a.x.total_cmp(&b.x));
        let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.x, p.y)).collect();
        if !xy.is_empty() {
            frontiers.push(Frontier { colour: Some(ri), points: pareto_frontier(&xy) });
        }
        markers.extend(caps[ri].iter().filter_map(|c| {
            let g = c.best.as_ref()?;
            Some(Marker { x: derived::per_gpu(g.total_tps, gpus), y: g.per_user_tps?, colour: ri })
        }));
        // Points of different contexts do not make a curve: marks only, the frontier is the line.
        series.push(Series { name: run.name.to_string(), colour: ri, stroke: Stroke::Marks, points });
    }
    let guides: Vec<Guide> = slo
        .per_user_tps
        .map(|t| Guide {
            y: t,
            label: format!("per-user floor {} tok/s", registry::format_number(t, registry::Style::Fixed(0))),
        })
        .into_iter()
        .collect();
    let mut ys = all_y(&series);
    ys.extend(guides.iter().map(|g| g.y));
    let missing = if left_out.is_empty() {
        String::new()
    } else {
        format!(" Left out (no GPU count in the hardware card): {}.", left_out.join(", "))
    };
    ChartSpec {
        id: "cmp-pareto",
        title: "Per-user speed vs throughput per GPU".into(),
        caption: format!(
            "Each point is a valid cell of any context; each run's dotted line is its Pareto frontier, rings its capacity at the SLO, the dashed line the per-user floor.{missing}"
        ),
        x: axis(per_gpu_metric().header(), all_x(&series), TickStyle::Compact, true),
        y: axis(format!("{} (median)", col("per_request_tps").metric.header()), ys, TickStyle::Compact, true),
        legend: Some(key_legend(&drawn_runs, &[], &[], ContextChoice::All, Stroke::Marks, !frontiers.is_empty())),
        series,
        frontiers,
        markers,
        guides,
    }
}

fn per_gpu_metric() -> &'static Metric {
    registry::derived("total_tps_per_gpu").expect("total_tps_per_gpu is a derived metric")
}

/// The figures the side-by-side table offers: registry columns and derived metrics, by id.
pub const TABLE_METRICS: [&str; 9] = [
    "total_tps",
    "total_tps_per_gpu",
    "per_request_tps_p50",
    "ttft_ms_p50",
    "tpot_ms_p50",
    "itl_ms_p50",
    "e2e_ms_p50",
    "tokens_per_joule",
    "cost_per_million_tokens",
];

/// A figure's name for headers and pickers: "Total tok/s", "TTFT (ms) median".
pub fn metric_label(id: &str) -> String {
    if let Some(m) = registry::derived(id) {
        return m.header();
    }
    match registry::column(id) {
        Some(c) => match c.stat {
            Some(s) => format!("{} {}", c.metric.header(), if s.suffix() == "p50" { "median" } else { s.suffix() }),
            None => c.metric.header(),
        },
        None => id.to_string(),
    }
}

/// A figure written for people: the registry's format (derived metrics included).
pub fn metric_text(id: &str, v: f64) -> String {
    match (registry::derived(id), registry::column(id)) {
        (Some(m), _) => m.display(v),
        (None, Some(c)) => c.display(v),
        (None, None) => v.to_string(),
    }
}

/// One run's entry in a cell of the side-by-side table.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The figure as written, the status words when the cell has none (`Over capacity`), or
    /// `—` when the run has no such cell.
    pub text: String,
    /// The cell's status, when the run has the cell.
    pub status: Option<CellStatus>,
    /// The number, when there is one.
    pub value: Option<f64>,
}

/// One row of the side-by-side table: a context × concurrency cell of any run.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRow {
    /// The context.
    pub context: ContextSize,
    /// The concurrency.
    pub concurrency: u32,
    /// One entry per run, in run order.
    pub figures: Vec<Figure>,
}

/// Every decode cell of any run (context, then concurrency), with each run's figure `id`
/// (price: the GPU-hour price for `cost_per_million_tokens`).
pub fn cell_table(runs: &[Run<'_>], id: &str, price: Option<f64>) -> Vec<CellRow> {
    let mut keys: Vec<(u64, u32)> =
        runs.iter().flat_map(|r| r.results.decode.iter().map(|c| (c.context.tokens, c.concurrency))).collect();
    keys.sort_unstable();
    keys.dedup();
    let all = contexts(runs);
    let bases: Vec<Basis> = runs.iter().map(|r| Basis::of(r.results, price)).collect();
    keys.into_iter()
        .map(|(tokens, concurrency)| {
            let figures = runs
                .iter()
                .zip(&bases)
                .map(|(r, basis)| {
                    let cell =
                        r.results.decode.iter().find(|c| c.context.tokens == tokens && c.concurrency == concurrency);
                    let Some(c) = cell else {
                        return Figure { text: crate::model::run_report::DASH.into(), status: None, value: None };
                    };
                    let value = derived::cell_value(c, id, *basis).filter(|v| v.is_finite());
                    let text = match value {
                        Some(v) if c.status.is_measured() => metric_text(id, v),
                        _ if !c.status.is_measured() => c.status.label().to_string(),
                        _ => crate::model::run_report::DASH.into(),
                    };
                    Figure { text, status: Some(c.status), value }
                })
                .collect();
            let context = all
                .iter()
                .find(|c| c.tokens == tokens)
                .cloned()
                .unwrap_or_else(|| speedmatrix_schema::context::size(tokens));
            CellRow { context, concurrency, figures }
        })
        .collect()
}

/// Why runs lack figure `id` altogether (no GPU count, no energy, no price): (run index, why).
pub fn table_gaps(runs: &[Run<'_>], id: &str, price: Option<f64>) -> Vec<(usize, String)> {
    runs.iter().enumerate().filter_map(|(i, r)| derived::missing_reason(r.results, id, price).map(|w| (i, w))).collect()
}

/// One row of the capacity table: a run at one of its contexts.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityRow {
    /// The run's place (its colour).
    pub run: usize,
    /// The context label.
    pub context: String,
    /// The texts of [`CAPACITY_COLUMNS`] after run and context, in order.
    pub cells: Vec<String>,
    /// Why no concurrency meets the SLO, when none does.
    pub note: Option<String>,
}

/// The columns of the capacity table after run and context: (id, header).
pub const CAPACITY_COLUMNS: [(&str, &str); 6] = [
    ("concurrency", "Requests at once"),
    ("ttft", "TTFT (median)"),
    ("per_user", "Per-user tok/s (median)"),
    ("goodput", "Goodput: total tok/s"),
    ("per_gpu", "Total tok/s per GPU"),
    ("cost", "Cost per 1M output tokens"),
];

/// Each run's capacity at `slo`, one row per run and planned context ([`capacity`]); the cost
/// column needs `price` (per GPU-hour).
pub fn capacity_rows(runs: &[Run<'_>], slo: &Slo, price: Option<f64>) -> Vec<CapacityRow> {
    let dash = || crate::model::run_report::DASH.to_string();
    let mut out = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        let gpus = derived::gpu_count(run.results).ok();
        for c in capacity(run.results, slo) {
            let cells = match &c.best {
                Some(g) => vec![
                    g.concurrency.to_string(),
                    g.ttft_ms.map(|v| metric_text("ttft_ms_p50", v)).unwrap_or_else(dash),
                    g.per_user_tps.map(|v| metric_text("per_request_tps_p50", v)).unwrap_or_else(dash),
                    metric_text("total_tps", g.total_tps),
                    g.total_tps_per_gpu.map(|v| metric_text("total_tps_per_gpu", v)).unwrap_or_else(dash),
                    match (gpus, price) {
                        (Some(n), Some(p)) => cost_per_million_tokens(g.total_tps, n, p)
                            .map(|v| metric_text("cost_per_million_tokens", v))
                            .unwrap_or_else(dash),
                        _ => dash(),
                    },
                ],
                None => {
                    std::iter::once("none".to_string()).chain((1..CAPACITY_COLUMNS.len()).map(|_| dash())).collect()
                }
            };
            out.push(CapacityRow { run: ri, context: c.context.label.clone(), cells, note: c.note });
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn load(bytes: &[u8]) -> Results {
        speedmatrix_schema::load_results(bytes).expect("valid fixture")
    }

    pub(crate) fn seed() -> Results {
        load(include_bytes!("../../../tests/fixtures/h200-qwen3.5-122b-vllm.json"))
    }

    pub(crate) fn import() -> Results {
        load(include_bytes!("../../../tests/fixtures/round1/import-llm-inference-bench.json"))
    }

    pub(crate) fn tiny() -> Results {
        load(include_bytes!("../../../tests/fixtures/round1/twin-tiny.json"))
    }

    #[test]
    fn contexts_and_the_default_one() {
        let (a, b) = (seed(), import());
        let runs = [Run { name: "seed", results: &a }, Run { name: "import", results: &b }];
        let labels: Vec<String> = contexts(&runs).into_iter().map(|c| c.label).collect();
        assert_eq!(labels, ["8K", "16K", "32K", "64K", "128K", "251K"]);
        assert_eq!(default_context(&runs), Some(8192), "both have 8K");
        let tiny = tiny();
        let runs = [Run { name: "seed", results: &a }, Run { name: "tiny", results: &tiny }];
        assert_eq!(default_context(&runs), Some(256), "none shared: the smallest");
        assert_eq!(ContextChoice::parse("all"), Some(ContextChoice::All));
        assert_eq!(ContextChoice::parse("8192"), Some(ContextChoice::One(8192)));
        assert_eq!(ContextChoice::parse("8k"), None);
    }

    #[test]
    fn one_series_per_run_at_a_context_and_frontiers_per_gpu() {
        let (a, b, c) = (seed(), import(), seed());
        let runs = [
            Run { name: "seed", results: &a },
            Run { name: "import", results: &b },
            Run { name: "again", results: &c },
        ];
        let specs = charts(&runs, ContextChoice::One(8192), &DEFAULT_SLO);
        let ids: Vec<&str> = specs.iter().map(|s| s.id).collect();
        assert_eq!(ids, ["cmp-total", "cmp-ttft", "cmp-pareto"]);
        let total = &specs[0];
        assert_eq!(total.series.len(), 3);
        assert_eq!(total.series.iter().map(|s| s.colour).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(total.series.iter().all(|s| s.stroke == Stroke::Solid));
        assert_eq!(total.series[0].points.len(), 8);
        // Capacity at 2 s / 20 tok/s: the seed's 8K is 16 streams at 2,023.2 tok/s; the import's
        // 8K is 8 (390 ms) — its 64 is queued — but it has no per-request median at 8: only 1.
        let rings: Vec<(f64, f64, usize)> = total.markers.iter().map(|m| (m.x, m.y, m.colour)).collect();
        assert_eq!(rings, [(16.0, 2023.2, 0), (1.0, 117.0, 1), (16.0, 2023.2, 2)]);
        assert_eq!(specs[1].guides[0].y, 2000.0);
        assert!(specs[1].y.range.1 > 2000.0, "the limit is on the chart");
        // Per GPU: the import has no GPU count, so two frontiers, and the caption says why.
        let pareto = &specs[2];
        assert_eq!(pareto.series.len(), 2);
        assert_eq!(pareto.frontiers.len(), 2);
        assert_eq!(pareto.frontiers[0].points, speedmatrix_schema::frontier::per_gpu_frontier(&a).unwrap());
        assert_eq!(pareto.frontiers.iter().map(|f| f.colour).collect::<Vec<_>>(), [Some(0), Some(2)]);
        assert!(pareto.caption.contains("Left out (no GPU count in the hardware card): import."), "{}", pareto.caption);
        assert!(pareto.series.iter().all(|s| s.stroke == Stroke::Marks));
        assert_eq!(pareto.markers.len(), 12, "six contexts of two runs");
        // Every context: a dash pattern per context, the same pattern for a context in each run.
        let specs = charts(&runs, ContextChoice::All, &DEFAULT_SLO);
        let total = &specs[0];
        let pattern = |name: &str| total.series.iter().find(|s| s.name == name).map(|s| s.stroke);
        assert_eq!(pattern("seed · 8K context"), Some(Stroke::Pattern(0)));
        assert_eq!(pattern("seed · 64K context"), Some(Stroke::Pattern(3)));
        assert_eq!(pattern("import · 64K context"), Some(Stroke::Pattern(3)));
        assert_eq!(total.series.len(), 6 + 2 + 6);
    }

    #[test]
    fn the_side_by_side_table_and_capacity_rows() {
        let (a, b) = (seed(), import());
        let runs = [Run { name: "seed", results: &a }, Run { name: "import", results: &b }];
        let rows = cell_table(&runs, "total_tps_per_gpu", None);
        let r = rows.iter().find(|r| r.context.tokens == 8192 && r.concurrency == 128).unwrap();
        assert_eq!(r.figures[0].text, "3,171.3");
        assert_eq!((r.figures[1].text.as_str(), r.figures[1].status), ("—", None), "the import has no 8K × 128");
        let r = rows.iter().find(|r| r.context.tokens == 65536 && r.concurrency == 8).unwrap();
        assert_eq!(r.figures[1].text, "Over capacity");
        assert_eq!(r.figures[0].text, "601.1", "64K × 8 is queued in the seed: measured, shown");
        let r = rows.iter().find(|r| r.context.tokens == 8192 && r.concurrency == 8).unwrap();
        assert_eq!((r.figures[1].text.as_str(), r.figures[1].value), ("—", None), "no GPU count");
        let gaps = table_gaps(&runs, "total_tps_per_gpu", None);
        assert_eq!(gaps.len(), 1);
        assert_eq!(gaps[0].0, 1);
        // Cost at 2.50 per GPU-hour.
        let rows = cell_table(&runs, "cost_per_million_tokens", Some(2.5));
        let r = rows.iter().find(|r| r.context.tokens == 8192 && r.concurrency == 128).unwrap();
        assert_eq!(r.figures[0].text, "0.22");
        assert_eq!(metric_label("ttft_ms_p50"), "TTFT (ms) median");
        assert_eq!(metric_label("cost_per_million_tokens"), "Cost per 1M output tokens");

        let caps = capacity_rows(&runs, &DEFAULT_SLO, Some(2.5));
        assert_eq!(caps.len(), 6 + 2);
        assert_eq!(caps[0].cells, ["16", "532 ms", "125.1", "2,023.2", "1,011.6", "0.69"]);
        let imp64 = caps.iter().find(|c| c.run == 1 && c.context == "64K").unwrap();
        assert_eq!(imp64.cells[0], "none", "its only valid cell has no per-request median");
        assert_eq!(imp64.note.as_deref(), Some("1 at once: no median per-request tok/s"));
        let imp8 = caps.iter().find(|c| c.run == 1 && c.context == "8K").unwrap();
        assert_eq!((imp8.cells[0].as_str(), imp8.cells[4].as_str()), ("1", "—"), "no GPU count");
        let none = capacity_rows(&runs, &Slo { ttft_ms: Some(50.0), per_user_tps: None }, None);
        assert_eq!(none[0].cells[0], "none");
        assert_eq!(none[0].note.as_deref(), Some("1 at once: TTFT 196 ms > 50 ms"));
    }

    #[test]
    fn the_slo_and_the_price_from_the_url() {
        let q = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(p, _)| *p == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(slo_from_query(q(&[])), DEFAULT_SLO);
        assert_eq!(
            slo_from_query(q(&[("ttft", "1500"), ("tps", "")])),
            Slo { ttft_ms: Some(1500.0), per_user_tps: None }
        );
        assert_eq!(slo_from_query(q(&[("ttft", "fast"), ("tps", "-3")])), DEFAULT_SLO, "nonsense keeps the defaults");
        let s = with_bound(DEFAULT_SLO, "ttft", "800");
        assert_eq!(s, Slo { ttft_ms: Some(800.0), per_user_tps: Some(20.0) });
        assert_eq!(with_bound(s, "tps", "").per_user_tps, None);
        assert_eq!(with_bound(s, "tps", "lots"), s);
        assert_eq!(bound_text(Some(2000.0)), "2000");
        assert_eq!(bound_text(Some(12.5)), "12.50");
        assert_eq!(bound_text(None), "");
        assert_eq!(price_from(Some("2.5".into())), Some(2.5));
        assert_eq!(price_from(Some("0".into())), None);
        assert_eq!(price_from(Some("free".into())), None);
        assert_eq!(price_from(None), None);
    }

    #[test]
    fn a_comparison_legend_names_runs_and_contexts_not_every_line() {
        let (a, b) = (seed(), import());
        let runs = [Run { name: "seed", results: &a }, Run { name: "import", results: &b }];
        let specs = charts(&runs, ContextChoice::All, &DEFAULT_SLO);
        let texts = |i: usize| specs[i].legend_entries().into_iter().map(|e| e.text).collect::<Vec<_>>();
        assert_eq!(
            texts(0),
            [
                "seed",
                "import",
                "8K context",
                "16K context",
                "32K context",
                "64K context",
                "128K context",
                "251K context"
            ]
        );
        assert_eq!(specs[0].legend_entries()[5].stroke, Stroke::Pattern(3));
        // The Pareto chart draws only the seed (the import has no GPU count), and its frontier.
        assert_eq!(texts(2), ["seed", "Pareto frontier (each run's colour)"]);
        let one = charts(&runs, ContextChoice::One(8192), &DEFAULT_SLO);
        assert_eq!(one[0].legend_entries().len(), 2);
    }
}
