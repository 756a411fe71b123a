//! What the charts show, as plain data: series of points with a status and a readout, axis
//! ranges, the Pareto frontier, the table mirror and the hover hit test. Pure functions of one
//! or more [`Results`] (no DOM, no canvas), unit-tested (in the browser by CI);
//! `view::chart_canvas` draws them and `view::chart_view` puts them on the page.
//!
//! Every chart is built from a list of runs, each with a [`Stroke`], so a second run can be
//! overlaid on the first (run A solid, run B dashed): see [`charts`].

use speedmatrix_schema::prefix;
use speedmatrix_schema::registry::{self, column, Column};
use speedmatrix_schema::table::Row;
use speedmatrix_schema::{CellStatus, Results};

/// How a series' line is drawn: one run solid, an overlaid second run dashed; in a comparison of
/// many runs (one colour per run), one dash pattern per context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stroke {
    /// A continuous line (the run on its own, or run A of a comparison).
    Solid,
    /// A dashed line (run B of a comparison).
    Dashed,
    /// Dash pattern `n` of [`DASH_PATTERNS`] (0 is solid), for the n-th context.
    Pattern(usize),
    /// No line, the points' marks only (a scatter of cells of several contexts).
    Marks,
}

/// The dash patterns of [`Stroke::Pattern`]: (dash, gap) in CSS pixels; (0, 0) is a solid line.
/// The SVG legend of the page uses the same numbers.
pub const DASH_PATTERNS: [(u32, u32); 6] = [(0, 0), (8, 5), (2, 4), (14, 5), (5, 9), (1, 8)];

/// A line through one run's Pareto frontier.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontier {
    /// The run's palette colour; `None` draws it in the text colour (a single run's chart).
    pub colour: Option<usize>,
    /// The frontier's points, in increasing x.
    pub points: Vec<(f64, f64)>,
}

/// A marked point: a run's capacity at the SLO (its goodput cell), drawn as a ring.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// x in the axis unit.
    pub x: f64,
    /// y in the axis unit.
    pub y: f64,
    /// The run's palette colour.
    pub colour: usize,
}

/// A horizontal line across the chart: an SLO bound on the y axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Guide {
    /// y in the axis unit.
    pub y: f64,
    /// What it is, for the legend: "TTFT limit 2 s".
    pub label: String,
}

/// One point of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Position on the x axis, in the axis unit (tokens, requests, tok/s).
    pub x: f64,
    /// Position on the y axis, in the axis unit (tok/s, ms).
    pub y: f64,
    /// The cell's status: only [`CellStatus::Valid`] points are joined by the line; others are
    /// drawn as their own unconnected marks.
    pub status: CellStatus,
    /// What the hover readout and the table mirror say: "64K context · 16 requests".
    pub label: String,
    /// The x value as the registry writes it ("8,192 tokens", "16").
    pub x_text: String,
    /// The y value as the registry writes it ("6,343 tok/s", "811 ms"), then its interval
    /// when it has one ("6,343 ± 1.2 %").
    pub y_text: String,
    /// The confidence interval of y (low, high), in the axis unit, when the file has one (a
    /// decode cell's `intervals`): drawn as an error bar. `None` draws none.
    pub interval: Option<(f64, f64)>,
}

/// A line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend entry: "64K context", or "A · 64K context" when runs are overlaid.
    pub name: String,
    /// Index into the theme's colour-blind-safe palette (the same context keeps its colour
    /// across overlaid runs).
    pub colour: usize,
    /// Solid or dashed.
    pub stroke: Stroke,
    /// The points, in x order.
    pub points: Vec<Point>,
}

/// One axis of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The axis title with its unit: "Simultaneous requests", "TTFT (ms)".
    pub label: String,
    /// Whether the axis is logarithmic (values spanning 20× or more).
    pub log: bool,
    /// The drawn range, `lo < hi` (both > 0 on a log axis).
    pub range: (f64, f64),
    /// How tick labels are written.
    pub ticks: TickStyle,
    /// Where the labelled ticks go, inside `range`: the matrix's own levels for concurrency and
    /// contexts, else round numbers (1-2-5 per decade on a log axis).
    pub ticks_at: Vec<f64>,
}

/// How an axis writes its tick labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickStyle {
    /// Token counts as the matrix names them: 8K, 128K, 1M.
    Tokens,
    /// Short numbers: 1, 16, 1.2K, 6K.
    Compact,
}

/// One entry of a chart's legend (drawn below the plot, never over it: see [`legend_layout`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LegendEntry {
    /// The text: the series name, or "Pareto frontier".
    pub text: String,
    /// The series' palette index; `None` for the frontier (drawn in the text colour).
    pub colour: Option<usize>,
    /// Solid or dashed sample line.
    pub stroke: Stroke,
}

/// Where legend entries go, in CSS pixels from the top-left of the legend area.
#[derive(Debug, Clone, PartialEq)]
pub struct LegendLayout {
    /// The top-left corner of each entry, in entry order.
    pub at: Vec<(f64, f64)>,
    /// The height the rows take (0 without entries).
    pub height: f64,
}

/// Lay legend entries of the given widths out in rows `avail` wide, left to right, a new row
/// when the next entry would pass the right edge (an entry wider than a row gets a row of its
/// own). Rows are `row_height` tall; entries in a row are `gap` apart. The legend sits in its
/// own band below the plot area, so no entry can cover a data point however many lines the
/// chart has (eight contexts, or sixteen when two runs are overlaid).
pub fn legend_layout(widths: &[f64], avail: f64, row_height: f64, gap: f64) -> LegendLayout {
    let mut at = Vec::with_capacity(widths.len());
    let (mut x, mut row) = (0.0_f64, 0_usize);
    for w in widths {
        if x > 0.0 && x + w > avail {
            x = 0.0;
            row += 1;
        }
        at.push((x, row as f64 * row_height));
        x += w + gap;
    }
    let rows = if widths.is_empty() { 0 } else { row + 1 };
    LegendLayout { at, height: rows as f64 * row_height }
}

/// Everything a chart draws.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartSpec {
    /// Stable id, used for the canvas element (`chart-{id}`), the PNG file name and tests.
    pub id: &'static str,
    /// The heading.
    pub title: String,
    /// One sentence under the heading.
    pub caption: String,
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// The lines.
    pub series: Vec<Series>,
    /// Pareto frontiers of the valid points, when marked: one for a single run's chart, one per
    /// run (in its colour) when runs are compared.
    pub frontiers: Vec<Frontier>,
    /// Marked points (capacity at the SLO).
    pub markers: Vec<Marker>,
    /// Horizontal lines (SLO bounds).
    pub guides: Vec<Guide>,
    /// The legend's entries when the chart names them itself (a comparison of many runs: one
    /// entry per run and one per context's dash pattern, not one per line); `None` derives them
    /// from the series ([`ChartSpec::legend_entries`]).
    pub legend: Option<Vec<LegendEntry>>,
}

impl ChartSpec {
    /// Whether the chart has any point to draw.
    pub fn has_points(&self) -> bool {
        self.series.iter().any(|s| !s.points.is_empty())
    }

    /// The legend: [`ChartSpec::legend`] when set, else one entry per series, then the
    /// frontier when marked (one entry for all frontiers: they share the dotted line).
    pub fn legend_entries(&self) -> Vec<LegendEntry> {
        if let Some(entries) = &self.legend {
            return entries.clone();
        }
        let series =
            self.series.iter().map(|s| LegendEntry { text: s.name.clone(), colour: Some(s.colour), stroke: s.stroke });
        let frontier = (!self.frontiers.is_empty()).then(|| LegendEntry {
            text: if self.frontiers.len() == 1 { "Pareto frontier" } else { "Pareto frontiers" }.into(),
            colour: None,
            stroke: Stroke::Dashed,
        });
        series.chain(frontier).collect()
    }

    /// How many points carry an interval (drawn as error bars).
    pub fn intervals(&self) -> usize {
        self.series.iter().flat_map(|s| &s.points).filter(|p| p.interval.is_some()).count()
    }

    /// The table mirror (accessible fallback): one row per point, `[series, x, y, status]`.
    pub fn mirror_rows(&self) -> Vec<[String; 4]> {
        self.series
            .iter()
            .flat_map(|s| {
                s.points
                    .iter()
                    .map(move |p| [s.name.clone(), p.x_text.clone(), p.y_text.clone(), p.status.label().into()])
            })
            .collect()
    }
}

/// One run to chart: its name (for legends when overlaid), the run, and its stroke.
#[derive(Debug, Clone, Copy)]
pub struct RunRef<'a> {
    /// A short name ("A", "B"), or `""` for a single run (legends then name only the context).
    pub name: &'a str,
    /// The run.
    pub results: &'a Results,
    /// How its lines are drawn.
    pub stroke: Stroke,
}

impl<'a> RunRef<'a> {
    /// A single run, drawn solid, without a name.
    pub fn single(results: &'a Results) -> Self {
        RunRef { name: "", results, stroke: Stroke::Solid }
    }

    fn series_name(&self, what: &str) -> String {
        if self.name.is_empty() {
            what.to_string()
        } else {
            format!("{} · {what}", self.name)
        }
    }
}

pub(crate) fn col(id: &str) -> Column {
    column(id).unwrap_or_else(|| panic!("{id} is in the registry"))
}

fn metric_text(id: &str, v: f64) -> String {
    registry::metric(id).map(|m| m.display(v)).unwrap_or_else(|| v.to_string())
}

/// A token count as the matrix names contexts: 8192 → "8K", 1048576 → "1M", 1000 → "1000".
pub fn tokens_text(v: f64) -> String {
    const K: f64 = 1024.0;
    let short = |x: f64| {
        if (x - x.round()).abs() < 1e-9 {
            format!("{}", x.round())
        } else {
            format!("{x:.1}")
        }
    };
    if v >= K * K {
        format!("{}M", short(v / (K * K)))
    } else if v >= K && ((v / K) - (v / K).round()).abs() < 0.05 {
        format!("{}K", short(v / K))
    } else {
        registry::format_int(v.round().max(0.0) as u64)
    }
}

/// A short number for tick labels: 0.5, 16, 950, 1.2K, 12K, 1.5M.
pub fn compact(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.1}", v / 1e6)))
    } else if a >= 1e3 {
        format!("{}K", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        trim(format!("{v:.2}"))
    }
}

/// Whether a logarithmic axis helps: every value positive and the largest at least 20× the
/// smallest (concurrency 1–128, contexts 8K–256K, TTFT from 50 ms to a minute).
pub fn log_helps(values: &[f64]) -> bool {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    min > 0.0 && max.is_finite() && max / min >= 20.0
}

/// The drawn range of an axis holding `values`: a linear axis starts at zero (throughput and
/// latency are ratios to zero) and leaves 8% headroom; a log axis pads by a factor of 1.25 on
/// both sides. Empty or degenerate data still gives a valid range (`lo < hi`, positive on log).
pub fn axis_range(values: &[f64], log: bool) -> (f64, f64) {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite() && (!log || *v > 0.0)).collect();
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if finite.is_empty() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        let (lo, hi) = (min / 1.25, max * 1.25);
        if hi > lo {
            (lo, hi)
        } else {
            (lo / 2.0, hi * 2.0)
        }
    } else {
        let lo = min.min(0.0);
        let hi = if max > lo { max + (max - lo) * 0.08 } else { lo + 1.0 };
        (lo, hi)
    }
}

pub use speedmatrix_schema::frontier::pareto_frontier;

/// The index of the point of `hits` nearest to (`x`, `y`) within `radius` (all in the same
/// pixels), for the hover readout.
pub fn nearest(hits: &[(f64, f64)], x: f64, y: f64, radius: f64) -> Option<usize> {
    hits.iter()
        .enumerate()
        .map(|(i, (hx, hy))| (i, (hx - x).powi(2) + (hy - y).powi(2)))
        .filter(|(_, d2)| *d2 <= radius * radius)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// Round tick positions in `lo..=hi`: about `n` multiples of 1, 2 or 5 × 10^k on a linear axis;
/// on a log axis 1-2-5 per decade (only powers of ten when that gives more than 9, 1-2-3-5-7
/// when it gives fewer than 4).
pub fn round_ticks(lo: f64, hi: f64, log: bool, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && hi > lo) || (log && lo <= 0.0) {
        return Vec::new();
    }
    if log {
        let in_range = |mantissas: &[f64]| {
            let mut out = Vec::new();
            for e in (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32) {
                for m in mantissas {
                    let v = m * 10f64.powi(e);
                    if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                        out.push(v);
                    }
                }
            }
            out
        };
        let t = in_range(&[1.0, 2.0, 5.0]);
        return if t.len() > 9 {
            in_range(&[1.0])
        } else if t.len() < 4 {
            in_range(&[1.0, 2.0, 3.0, 5.0, 7.0])
        } else {
            t
        };
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// Ticks at the data's own x values (concurrency levels, context sizes), skipping one closer
/// than 15% (log) or 4% of the range (linear) to the previous, so labels do not collide.
pub fn level_ticks(values: &[f64], log: bool, range: (f64, f64)) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite() && *x >= range.0 && *x <= range.1).collect();
    v.sort_by(f64::total_cmp);
    let mut out: Vec<f64> = Vec::new();
    for x in v {
        let far = match out.last() {
            None => true,
            Some(&p) if log => x / p >= 1.15,
            Some(&p) => x - p >= (range.1 - range.0) * 0.04,
        };
        if far {
            out.push(x);
        }
    }
    out
}

pub(crate) fn axis(label: String, values: Vec<f64>, ticks: TickStyle, allow_log: bool) -> Axis {
    let log = allow_log && log_helps(&values);
    let range = axis_range(&values, log);
    let ticks_at = round_ticks(range.0, range.1, log, 6);
    Axis { label, log, range, ticks, ticks_at }
}

/// An axis whose ticks are the data's own levels (concurrency, context tokens).
pub(crate) fn level_axis(label: String, values: Vec<f64>, ticks: TickStyle) -> Axis {
    let mut a = axis(label, values.clone(), ticks, true);
    a.ticks_at = level_ticks(&values, a.log, a.range);
    a
}

pub(crate) fn all_x(series: &[Series]) -> Vec<f64> {
    series.iter().flat_map(|s| s.points.iter().map(|p| p.x)).collect()
}

/// Every y value of the series, with the ends of their intervals (so error bars stay in view).
pub(crate) fn all_y(series: &[Series]) -> Vec<f64> {
    let ends = |p: &Point| p.interval.map(|(lo, hi)| [lo, hi]).into_iter().flatten();
    series.iter().flat_map(|s| s.points.iter().flat_map(move |p| std::iter::once(p.y).chain(ends(p)))).collect()
}

/// Prefill rows as a series of `field` (`prompt_tps` or `ttft_ms`) against context tokens: the
/// cold rows (`share` `None`), or the warm rows of one prefix share (basis points,
/// [`prefix::key`]).
fn prefill_series(run: &RunRef<'_>, id: &str, share: Option<u32>) -> Series {
    let r = run.results;
    let mut points = r
        .prefill
        .iter()
        .filter(|p| prefix::key(p.prefix_share) == share)
        .filter_map(|p| {
            let y = match id {
                "prompt_tps" => p.prompt_tps,
                _ => p.ttft_ms,
            }?;
            (y.is_finite()).then(|| Point {
                x: p.context.tokens as f64,
                y,
                status: p.status,
                label: format!("{} context{}", p.context.label, crate::model::run_report::warm_words(p.prefix_share)),
                x_text: format!("{} tokens", registry::format_int(p.context.tokens)),
                y_text: metric_text(id, y),
                interval: None,
            })
        })
        .collect::<Vec<_>>();
    points.sort_by(|a, b| a.x.total_cmp(&b.x));
    let (name, colour) = match share {
        None => ("Prefill".to_string(), 0),
        Some(k) => {
            let label = prefix::share_label(f64::from(k) / 10_000.0);
            let place = warm_shares(run.results).iter().position(|s| *s == k).unwrap_or(0);
            (format!("Warm, prefix {label}"), place + 1)
        }
    };
    Series { name: run.series_name(&name), colour, stroke: run.stroke, points }
}

/// The prefix shares of a run's warm prefill rows (`--prefix-share`), basis points, ascending.
fn warm_shares(r: &Results) -> Vec<u32> {
    let mut v: Vec<u32> = r.prefill.iter().filter_map(|p| prefix::key(p.prefix_share)).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The prefill TTFT series of a run: the cold rows, then one series per warm share.
fn prefill_ttft_series(run: &RunRef<'_>) -> Vec<Series> {
    std::iter::once(None)
        .chain(warm_shares(run.results).into_iter().map(Some))
        .map(|share| prefill_series(run, "ttft_ms", share))
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// One series per planned context of decode cells: `y` (a registry column) against `x`
/// (`None`: concurrency; `Some(column)`: that column's value).
/// The contexts (tokens) of all runs, sorted: a context's colour is its place here, so it keeps
/// its colour in every run even when one run lacks a context another has.
fn context_palette(runs: &[RunRef<'_>]) -> Vec<u64> {
    let mut all: Vec<u64> = runs.iter().flat_map(|r| r.results.config.contexts.iter().map(|c| c.tokens)).collect();
    all.sort_unstable();
    all.dedup();
    all
}

fn decode_series(run: &RunRef<'_>, palette: &[u64], x: Option<&Column>, y: &Column) -> Vec<Series> {
    let r = run.results;
    r.config
        .contexts
        .iter()
        .map(|ctx| {
            let ci = palette.iter().position(|t| *t == ctx.tokens).unwrap_or(0);
            let mut points: Vec<Point> = r
                .decode
                .iter()
                .filter(|c| c.context.tokens == ctx.tokens)
                .filter_map(|c| {
                    let row = Row::Decode(c);
                    let yv = row.value(y).filter(|v| v.is_finite())?;
                    let (xv, x_text) = match x {
                        None => (f64::from(c.concurrency), c.concurrency.to_string()),
                        Some(xc) => {
                            let v = row.value(xc).filter(|v| v.is_finite())?;
                            (v, xc.display(v))
                        }
                    };
                    let iv = crate::model::run_report::interval_of(c, y);
                    let y_text = match iv {
                        Some(iv) => format!("{} {}", y.display(yv), crate::model::run_report::plus_minus(iv, y)),
                        None => y.display(yv),
                    };
                    Some(Point {
                        x: xv,
                        y: yv,
                        status: c.status,
                        label: format!("{} context · {} at once", ctx.label, c.concurrency),
                        x_text,
                        y_text,
                        interval: iv.map(|iv| (iv.low, iv.high)),
                    })
                })
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            Series { name: run.series_name(&format!("{} context", ctx.label)), colour: ci, stroke: run.stroke, points }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// The charts of one run, or of several overlaid (each [`RunRef`] with its own stroke; series
/// of the same context share a colour). Charts without any point are left out.
///
/// In order: `prefill-tps` (prompt tok/s by context), `prefill-ttft` (TTFT by context),
/// `decode-total` (total tok/s vs concurrency, one line per context), `decode-ttft` (TTFT vs
/// concurrency), `pareto` (per-request vs total tok/s, frontier marked).
// long: the five charts of the page, each one literal spec in page order; split up, a chart's
// series, axes and caption would no longer read together.
pub fn charts(runs: &[RunRef<'_>]) -> Vec<ChartSpec> {
    let prompt = registry::metric("prompt_tps").map(|m| m.header()).unwrap_or_else(|| "Prompt tok/s".into());
    let ttft = col("ttft_ms");
    let total = col("total_tps");
    let per_request = col("per_request_tps");
    let tokens_axis = "Context length (tokens)".to_string();
    let requests_axis = "Simultaneous requests".to_string();

    let mut out = Vec::new();
    let palette = context_palette(runs);

    let s: Vec<Series> =
        runs.iter().map(|r| prefill_series(r, "prompt_tps", None)).filter(|s| !s.points.is_empty()).collect();
    out.push(ChartSpec {
        id: "prefill-tps",
        title: "Prefill throughput by context".into(),
        caption: "Prompt tokens processed per second for one request with a cold prompt at each context length.".into(),
        x: level_axis(tokens_axis.clone(), all_x(&s), TickStyle::Tokens),
        y: axis(prompt, all_y(&s), TickStyle::Compact, false),
        series: s,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    });

    let s: Vec<Series> = runs.iter().flat_map(prefill_ttft_series).collect();
    let warm = runs.iter().any(|r| !warm_shares(r.results).is_empty());
    out.push(ChartSpec {
        id: "prefill-ttft",
        title: "Time to first token by context".into(),
        caption: match warm {
            false => "TTFT of one request with a cold prompt: the prefill time a user waits.".into(),
            true => "TTFT of one request with a cold prompt (the prefill time a user waits), and warm: with the prompt's prefix share already in the server's prefix cache (--prefix-share).".into(),
        },
        x: level_axis(tokens_axis, all_x(&s), TickStyle::Tokens),
        y: axis(ttft.metric.header(), all_y(&s), TickStyle::Compact, true),
        series: s,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    });

    let s: Vec<Series> = runs.iter().flat_map(|r| decode_series(r, &palette, None, &total)).collect();
    out.push(ChartSpec {
        id: "decode-total",
        title: "Total throughput vs simultaneous requests".into(),
        caption: "Output tok/s across all requests, one line per context length.".into(),
        x: level_axis(requests_axis.clone(), all_x(&s), TickStyle::Compact),
        y: axis(total.metric.header(), all_y(&s), TickStyle::Compact, true),
        series: s,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    });

    let s: Vec<Series> = runs.iter().flat_map(|r| decode_series(r, &palette, None, &ttft)).collect();
    out.push(ChartSpec {
        id: "decode-ttft",
        title: "Time to first token vs simultaneous requests".into(),
        caption: "Median TTFT in the sustained-decode window, one line per context length.".into(),
        x: level_axis(requests_axis, all_x(&s), TickStyle::Compact),
        y: axis(format!("{} (median)", ttft.metric.header()), all_y(&s), TickStyle::Compact, true),
        series: s,
        frontiers: Vec::new(),
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    });

    let s: Vec<Series> = runs.iter().flat_map(|r| decode_series(r, &palette, Some(&total), &per_request)).collect();
    let valid: Vec<(f64, f64)> =
        s.iter().flat_map(|s| s.points.iter().filter(|p| p.status == CellStatus::Valid).map(|p| (p.x, p.y))).collect();
    let frontiers: Vec<Frontier> =
        (!valid.is_empty()).then(|| Frontier { colour: None, points: pareto_frontier(&valid) }).into_iter().collect();
    out.push(ChartSpec {
        id: "pareto",
        title: "Per-request speed vs total throughput".into(),
        caption: "Each point is a cell; the dotted line joins the Pareto frontier (no valid cell is faster on both)."
            .into(),
        x: axis(total.metric.header(), all_x(&s), TickStyle::Compact, true),
        y: axis(format!("{} (median)", per_request.metric.header()), all_y(&s), TickStyle::Compact, true),
        series: s,
        frontiers,
        markers: Vec::new(),
        guides: Vec::new(),
        legend: None,
    });

    out.retain(ChartSpec::has_points);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::load_results;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn seed() -> Results {
        load_results(include_bytes!("../../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).expect("valid seed fixture")
    }

    #[test]
    fn ranges_are_valid_for_any_data() {
        assert_eq!(axis_range(&[], false), (0.0, 1.0));
        assert_eq!(axis_range(&[], true), (1.0, 10.0));
        assert_eq!(axis_range(&[0.0], false), (0.0, 1.0));
        let (lo, hi) = axis_range(&[100.0, 200.0], false);
        assert_eq!(lo, 0.0);
        assert!((hi - 216.0).abs() < 1e-9);
        let (lo, hi) = axis_range(&[1.0, 128.0], true);
        assert!((lo - 0.8).abs() < 1e-9 && (hi - 160.0).abs() < 1e-9);
        let (lo, hi) = axis_range(&[5.0, 5.0, -1.0, f64::NAN], true);
        assert!(lo > 0.0 && lo < 5.0 && hi > 5.0);
        assert!(log_helps(&[1.0, 128.0]) && !log_helps(&[1.0, 8.0]) && !log_helps(&[0.0, 100.0]));
    }

    #[test]
    fn tick_texts() {
        assert_eq!(tokens_text(8192.0), "8K");
        assert_eq!(tokens_text(131072.0), "128K");
        assert_eq!(tokens_text(1048576.0), "1M");
        assert_eq!(tokens_text(10000.0), "10,000");
        assert_eq!(round_ticks(0.0, 216.0, false, 6), vec![0.0, 50.0, 100.0, 150.0, 200.0]);
        assert_eq!(round_ticks(0.8, 160.0, true, 6), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        assert_eq!(round_ticks(160.0, 7900.0, true, 6), vec![200.0, 500.0, 1000.0, 2000.0, 5000.0]);
        assert_eq!(round_ticks(300.0, 1200.0, true, 6), vec![300.0, 500.0, 700.0, 1000.0]);
        assert!(round_ticks(1.0, 1.0, false, 6).is_empty());
        let levels = [8192.0, 16384.0, 257024.0, 262144.0, 8192.0];
        assert_eq!(level_ticks(&levels, true, (6000.0, 330000.0)), vec![8192.0, 16384.0, 257024.0]);
        assert_eq!(compact(6343.0), "6.3K");
        assert_eq!(compact(16.0), "16");
        assert_eq!(compact(0.5), "0.5");
        assert_eq!(compact(2_000_000.0), "2M");
    }

    #[test]
    fn legend_rows_wrap_at_the_width_and_never_overlap() {
        let l = legend_layout(&[100.0, 100.0, 100.0, 250.0, 40.0], 230.0, 20.0, 10.0);
        assert_eq!(l.at, vec![(0.0, 0.0), (110.0, 0.0), (0.0, 20.0), (0.0, 40.0), (0.0, 60.0)]);
        assert_eq!(l.height, 80.0, "an entry wider than a row gets its own row");
        assert_eq!(legend_layout(&[], 230.0, 20.0, 10.0), LegendLayout { at: vec![], height: 0.0 });
        // The seed's TTFT chart: one entry per context line, none of them dropped.
        let r = seed();
        let ttft = charts(&[RunRef::single(&r)]).into_iter().find(|c| c.id == "decode-ttft").expect("decode-ttft");
        let entries = ttft.legend_entries();
        assert_eq!(entries.len(), ttft.series.len());
        assert!(entries.len() > 1, "{} entries", entries.len());
        let pareto = charts(&[RunRef::single(&r)]).into_iter().find(|c| c.id == "pareto").expect("pareto");
        assert_eq!(
            pareto.legend_entries().last().map(|e| (e.text.as_str(), e.colour)),
            Some(("Pareto frontier", None))
        );
    }

    #[test]
    fn hover_hits_the_nearest_point_within_the_radius() {
        let hits = [(10.0, 10.0), (20.0, 10.0), (100.0, 100.0)];
        assert_eq!(nearest(&hits, 14.0, 10.0, 12.0), Some(0));
        assert_eq!(nearest(&hits, 16.0, 11.0, 12.0), Some(1));
        assert_eq!(nearest(&hits, 60.0, 60.0, 12.0), None);
    }

    #[test]
    fn seed_charts_follow_the_file() {
        let r = seed();
        let charts = charts(&[RunRef::single(&r)]);
        let ids: Vec<&str> = charts.iter().map(|c| c.id).collect();
        assert_eq!(ids, ["prefill-tps", "prefill-ttft", "decode-total", "decode-ttft", "pareto"]);
        // One line per context with decode cells, points in x order, values from the file.
        let total = &charts[2];
        let with_cells = r.config.contexts.iter().filter(|c| r.decode.iter().any(|d| d.context.tokens == c.tokens));
        assert_eq!(total.series.len(), with_cells.count());
        for s in &total.series {
            assert!(s.points.windows(2).all(|w| w[0].x <= w[1].x), "{} not sorted", s.name);
            for p in &s.points {
                let cell = r
                    .decode
                    .iter()
                    .find(|c| format!("{} context · {} at once", c.context.label, c.concurrency) == p.label)
                    .expect("a point is a cell");
                assert_eq!(Some(p.y), cell.total_tps);
                assert_eq!(p.status, cell.status);
            }
        }
        assert!(total.x.log, "concurrency 1–128 is drawn on a log axis");
        assert!(total.x.label.contains("requests") && total.y.label.contains("tok/s"), "{:?}", total.y.label);
        // Prefill: one point per measured context.
        let measured = r.prefill.iter().filter(|p| p.prompt_tps.is_some()).count();
        assert_eq!(charts[0].series[0].points.len(), measured);
        assert!(charts[1].y.label.contains("ms"));
        // The frontier is made of valid points of the chart, undominated.
        let pareto = &charts[4];
        let f = &pareto.frontiers.first().expect("a frontier").points;
        assert!(!f.is_empty());
        for (x, y) in f {
            assert!(pareto.series.iter().flat_map(|s| &s.points).any(|p| p.x == *x && p.y == *y));
        }
        assert_eq!(pareto.mirror_rows().len(), pareto.series.iter().map(|s| s.points.len()).sum::<usize>());
    }

    #[test]
    fn a_cell_with_an_interval_gets_an_error_bar_and_others_none() {
        let mut r = seed();
        let iv = speedmatrix_schema::Interval {
            estimate: 6342.6,
            low: 6300.0,
            high: 6385.2,
            level: 0.95,
            method: speedmatrix_schema::IntervalMethod::BatchMeans,
            evidence: 30,
            std_error: 21.0,
            df: Some(29.0),
        };
        let c = r.decode.iter_mut().find(|c| c.context.tokens == 8192 && c.concurrency == 128).unwrap();
        c.intervals = Some(speedmatrix_schema::CellIntervals { total_tps: Some(iv), ..Default::default() });
        let all = charts(&[RunRef::single(&r)]);
        let total = all.iter().find(|c| c.id == "decode-total").expect("decode-total");
        assert_eq!(total.intervals(), 1, "one cell has an interval");
        let p = total.series.iter().flat_map(|s| &s.points).find(|p| p.interval.is_some()).unwrap();
        assert_eq!((p.interval, p.y_text.as_str()), (Some((6300.0, 6385.2)), "6,342.6 ± 0.7 %"));
        assert!(total.y.range.1 >= 6385.2, "the error bar stays in view");
        let ttft = all.iter().find(|c| c.id == "decode-ttft").expect("decode-ttft");
        assert_eq!(ttft.intervals(), 0, "no TTFT interval in the file: no error bar");
    }

    #[test]
    fn a_second_run_overlays_dashed_with_the_same_colours() {
        let r = seed();
        let charts = charts(&[
            RunRef { name: "A", results: &r, stroke: Stroke::Solid },
            RunRef { name: "B", results: &r, stroke: Stroke::Dashed },
        ]);
        let total = charts.iter().find(|c| c.id == "decode-total").expect("decode-total");
        let n = total.series.len() / 2;
        for (a, b) in total.series[..n].iter().zip(&total.series[n..]) {
            assert_eq!((a.stroke, b.stroke), (Stroke::Solid, Stroke::Dashed));
            assert_eq!(a.colour, b.colour);
            assert!(a.name.starts_with("A · ") && b.name.starts_with("B · "));
        }
    }

    #[test]
    fn a_context_keeps_its_colour_when_the_other_run_lacks_one() {
        let a = seed();
        let mut b = seed();
        b.config.contexts.retain(|c| c.label != "128K");
        b.decode.retain(|c| c.context.label != "128K");
        let charts = charts(&[
            RunRef { name: "A", results: &a, stroke: Stroke::Solid },
            RunRef { name: "B", results: &b, stroke: Stroke::Dashed },
        ]);
        let total = charts.iter().find(|c| c.id == "decode-total").expect("decode-total");
        let colour = |name: &str| total.series.iter().find(|s| s.name == name).map(|s| s.colour);
        assert_eq!(colour("A · 251K context"), colour("B · 251K context"));
        assert_ne!(colour("A · 128K context"), colour("B · 251K context"));
        assert_eq!(colour("B · 128K context"), None);
    }
}
