//! Drawing a [`ChartSpec`] on a `<canvas>` with plotters + plotters-canvas.
//!
//! The canvas is sized in device pixels (CSS size × `devicePixelRatio`) and everything drawn
//! (fonts, strokes, marks, margins) is scaled by the same ratio, so charts stay crisp on HiDPI
//! screens; the component redraws when the ratio or the width changes.
//!
//! Call [`draw`] with a spec from [`crate::model::chart_spec::charts`]; to overlay a second run, build
//! the spec from two [`crate::model::chart_spec::RunRef`]s (A solid, B dashed): the drawing code
//! follows each series' [`Stroke`] and colour index, nothing else changes.

use crate::model::chart_spec::{
    compact, legend_layout, tokens_text, Axis, ChartSpec, Frontier, Guide, LegendEntry, Marker, Series, Stroke,
    TickStyle, DASH_PATTERNS,
};
use plotters::coord::combinators::{BindKeyPoints, WithKeyPoints};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_canvas::CanvasBackend;
use speedmatrix_schema::CellStatus;

/// Colours of a chart in one theme. The first seven series colours are the Okabe–Ito palette,
/// which stays distinguishable with the common colour-vision deficiencies (Okabe & Ito, "Color
/// Universal Design", 2008); dark mode swaps in lighter members first. Five more from Paul Tol's
/// "muted" scheme give a comparison of up to twelve runs a colour each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Palette {
    /// The canvas background (also the PNG's).
    pub background: RGBColor,
    /// Titles, tick labels, the frontier.
    pub text: RGBColor,
    /// Grid lines.
    pub grid: RGBColor,
    /// Axis lines.
    pub axis: RGBColor,
    /// Series colours, indexed by [`crate::model::chart_spec::Series::colour`] (modulo the length).
    pub series: [RGBColor; 12],
}

/// The palette of the light or the dark theme.
pub fn palette(dark: bool) -> Palette {
    if dark {
        Palette {
            background: RGBColor(0x17, 0x1c, 0x24),
            text: RGBColor(0xe3, 0xe8, 0xef),
            grid: RGBColor(0x2c, 0x34, 0x40),
            axis: RGBColor(0x8a, 0x96, 0xa6),
            series: [
                RGBColor(0x56, 0xb4, 0xe9),
                RGBColor(0xe6, 0x9f, 0x00),
                RGBColor(0x00, 0x9e, 0x73),
                RGBColor(0xcc, 0x79, 0xa7),
                RGBColor(0xf0, 0xe4, 0x42),
                RGBColor(0xd5, 0x5e, 0x00),
                RGBColor(0xd0, 0xd0, 0xd0),
                RGBColor(0xcc, 0x66, 0x77),
                RGBColor(0x44, 0xaa, 0x99),
                RGBColor(0xaa, 0x44, 0x99),
                RGBColor(0xbb, 0xcc, 0x33),
                RGBColor(0x99, 0xdd, 0xff),
            ],
        }
    } else {
        Palette {
            background: RGBColor(0xff, 0xff, 0xff),
            text: RGBColor(0x1b, 0x24, 0x30),
            grid: RGBColor(0xe6, 0xe9, 0xee),
            axis: RGBColor(0x5b, 0x66, 0x75),
            series: [
                RGBColor(0x00, 0x72, 0xb2),
                RGBColor(0xd5, 0x5e, 0x00),
                RGBColor(0x00, 0x9e, 0x73),
                RGBColor(0xcc, 0x79, 0xa7),
                RGBColor(0xe6, 0x9f, 0x00),
                RGBColor(0x56, 0xb4, 0xe9),
                RGBColor(0x00, 0x00, 0x00),
                RGBColor(0x88, 0x22, 0x55),
                RGBColor(0x99, 0x99, 0x33),
                RGBColor(0x33, 0x22, 0x88),
                RGBColor(0x44, 0xaa, 0x99),
                RGBColor(0xcc, 0x66, 0x77),
            ],
        }
    }
}

/// The CSS colour of a series in a palette (for the HTML legend of the table mirror).
pub fn css_colour(p: &Palette, colour: usize) -> String {
    let c = p.series[colour % p.series.len()];
    format!("rgb({}, {}, {})", c.0, c.1, c.2)
}

/// A drawn point: where it landed in CSS pixels of the canvas, and which point of which series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// CSS pixels from the canvas' left edge.
    pub x: f64,
    /// CSS pixels from the canvas' top edge.
    pub y: f64,
    /// Index into [`ChartSpec::series`].
    pub series: usize,
    /// Index into that series' points.
    pub point: usize,
}

/// A rectangle in CSS pixels of the canvas.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    /// Left edge.
    pub left: f64,
    /// Top edge.
    pub top: f64,
    /// Right edge.
    pub right: f64,
    /// Bottom edge.
    pub bottom: f64,
}

impl Rect {
    /// "left top right bottom", rounded to 0.1 px (the canvas' `data-plot` / `data-legend`).
    pub fn attr(&self) -> String {
        format!("{:.1} {:.1} {:.1} {:.1}", self.left, self.top, self.right, self.bottom)
    }
}

/// What [`draw`] drew, in CSS pixels: where each point landed (the hover readout), the plot
/// area and the legend's box (below the plot area; `None` without entries).
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    /// The points.
    pub hits: Vec<Hit>,
    /// The plot area (inside the axes).
    pub plot: Rect,
    /// The legend entries' bounding box.
    pub legend: Option<Rect>,
    /// The canvas' CSS height: the chart, then the legend's rows.
    pub height: f64,
}

/// Legend metrics, CSS pixels: a row's height, the gap between entries, the sample line's
/// length and the gap between sample and text.
const LEGEND_ROW: f64 = 20.0;
const LEGEND_GAP: f64 = 16.0;
const LEGEND_SAMPLE: f64 = 22.0;
const LEGEND_TEXT_GAP: f64 = 6.0;
/// The chart's margin and y-label area, CSS pixels (the legend starts under the plot's left).
const MARGIN: f64 = 12.0;
const Y_LABELS: f64 = 64.0;

/// Draw `spec` on `canvas`, `css_width` CSS pixels wide and `dpr` device pixels per CSS pixel:
/// the chart `chart_height` CSS pixels tall, then its legend in rows below it (the canvas'
/// bitmap and CSS height are set to hold both). Returns what was drawn where.
///
/// # Errors
/// The canvas has no 2D context, or plotters failed to draw (its message).
pub fn draw(
    canvas: &web_sys::HtmlCanvasElement,
    spec: &ChartSpec,
    palette: &Palette,
    css_width: f64,
    chart_height: f64,
    dpr: f64,
) -> Result<Drawn, String> {
    let dpr = if dpr.is_finite() && dpr > 0.0 { dpr } else { 1.0 };
    canvas.set_width((css_width * dpr).round().max(1.0) as u32);
    let entries = spec.legend_entries();
    let widths = {
        let backend = CanvasBackend::with_canvas_object(canvas.clone()).ok_or("the canvas has no 2D context")?;
        let root = backend.into_drawing_area();
        let f = font(palette, dpr, 12.0);
        let mut w = Vec::with_capacity(entries.len());
        for e in &entries {
            let (tw, _) = root.estimate_text_size(&e.text, &f).map_err(err)?;
            w.push(LEGEND_SAMPLE + LEGEND_TEXT_GAP + f64::from(tw) / dpr);
        }
        w
    };
    let legend_left = MARGIN + Y_LABELS;
    let layout = legend_layout(&widths, (css_width - legend_left - MARGIN).max(1.0), LEGEND_ROW, LEGEND_GAP);
    let legend_height = if entries.is_empty() { 0.0 } else { layout.height + MARGIN };
    let height = chart_height + legend_height;
    canvas.set_height((height * dpr).round().max(1.0) as u32);
    // The page sizes boxes border-box: the CSS height holds the border too.
    let border = f64::from((canvas.offset_height() - canvas.client_height()).max(0));
    if let Err(e) = canvas.style().set_property("height", &format!("{}px", height + border)) {
        return Err(format!("the canvas could not be resized: {e:?}"));
    }

    let backend = CanvasBackend::with_canvas_object(canvas.clone()).ok_or("the canvas has no 2D context")?;
    let root = backend.into_drawing_area();
    root.fill(&palette.background).map_err(|e| e.to_string())?;
    let (chart_area, legend_area) = root.split_vertically(px(dpr, chart_height));
    let (x, y) = (&spec.x, &spec.y);
    let (hits, plot) = match (x.log, y.log) {
        (false, false) => draw_in(&chart_area, spec, palette, dpr, lin(x), lin(y)),
        (false, true) => draw_in(&chart_area, spec, palette, dpr, lin(x), log(y)),
        (true, false) => draw_in(&chart_area, spec, palette, dpr, log(x), lin(y)),
        (true, true) => draw_in(&chart_area, spec, palette, dpr, log(x), log(y)),
    }?;
    let at: Vec<(f64, f64)> = layout.at.iter().map(|(x, y)| (x + legend_left, y + MARGIN / 2.0)).collect();
    draw_legend(&legend_area, &entries, &at, palette, dpr)?;
    root.present().map_err(err)?;
    let legend = (!entries.is_empty()).then(|| {
        let right = at.iter().zip(&widths).map(|((x, _), w)| x + w).fold(legend_left, f64::max);
        let bottom = at.iter().map(|(_, y)| y + LEGEND_ROW).fold(0.0, f64::max);
        Rect { left: legend_left, top: chart_height + MARGIN / 2.0, right, bottom: chart_height + bottom }
    });
    Ok(Drawn { hits, plot, legend, height })
}

fn lin(a: &Axis) -> Ticked<RangedCoordf64> {
    Ticked((a.range.0..a.range.1).with_key_points(a.ticks_at.clone()))
}

fn log(a: &Axis) -> Ticked<LogCoord<f64>> {
    Ticked((a.range.0..a.range.1).log_scale().with_key_points(a.ticks_at.clone()))
}

/// An axis with the ticks of [`Axis::ticks_at`] (plotters' `WithKeyPoints`) that still accepts
/// the mesh's label formatters (`WithKeyPoints` opts out of default formatting).
struct Ticked<R: Ranged<ValueType = f64>>(WithKeyPoints<R>);

impl<R: Ranged<ValueType = f64>> Ranged for Ticked<R> {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.0.map(value, limit)
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        self.0.key_points(hint)
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.0.range()
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.0.axis_pixel_range(limit)
    }
}

fn tick(style: TickStyle, v: f64) -> String {
    match style {
        TickStyle::Tokens => tokens_text(v),
        TickStyle::Compact => compact(v),
    }
}

/// The chart area a spec is drawn in (canvas pixels).
type Chart<'a, X, Y> = ChartContext<'a, CanvasBackend, Cartesian2d<X, Y>>;

/// Canvas pixels for `css` CSS pixels at ratio `dpr`.
fn px(dpr: f64, css: f64) -> u32 {
    (css * dpr).round() as u32
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn draw_in<X, Y>(
    area: &DrawingArea<CanvasBackend, plotters::coord::Shift>,
    spec: &ChartSpec,
    palette: &Palette,
    dpr: f64,
    xr: X,
    yr: Y,
) -> Result<(Vec<Hit>, Rect), String>
where
    X: Ranged<ValueType = f64, FormatOption = plotters::coord::ranged1d::DefaultFormatting>,
    Y: Ranged<ValueType = f64, FormatOption = plotters::coord::ranged1d::DefaultFormatting>,
{
    let px = |v: f64| px(dpr, v);
    let mut chart = ChartBuilder::on(area)
        .margin(px(MARGIN))
        .x_label_area_size(px(44.0))
        .y_label_area_size(px(Y_LABELS))
        .build_cartesian_2d(xr, yr)
        .map_err(err)?;
    draw_mesh(&mut chart, spec, palette, dpr)?;
    for s in &spec.series {
        draw_whiskers(&mut chart, s, spec.y.log, palette, dpr)?;
        draw_series(&mut chart, s, palette, dpr)?;
    }
    for g in &spec.guides {
        draw_guide(&mut chart, g, &spec.x, palette, dpr)?;
    }
    for f in &spec.frontiers {
        draw_frontier(&mut chart, f, palette, dpr)?;
    }
    for m in &spec.markers {
        draw_marker(&mut chart, m, palette, dpr)?;
    }

    let mut hits = Vec::new();
    for (si, s) in spec.series.iter().enumerate() {
        for (pi, p) in s.points.iter().enumerate() {
            let (bx, by) = chart.backend_coord(&(p.x, p.y));
            hits.push(Hit { x: f64::from(bx) / dpr, y: f64::from(by) / dpr, series: si, point: pi });
        }
    }
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let css = |v: i32| f64::from(v) / dpr;
    let plot = Rect { left: css(xs.start), top: css(ys.start), right: css(xs.end), bottom: css(ys.end) };
    Ok((hits, plot))
}

/// The font of labels, `size` CSS pixels.
fn font(palette: &Palette, dpr: f64, size: f64) -> TextStyle<'static> {
    ("sans-serif", size * dpr).into_font().color(&palette.text)
}

/// Axes, grid, tick labels and axis titles.
fn draw_mesh<X, Y>(chart: &mut Chart<'_, X, Y>, spec: &ChartSpec, palette: &Palette, dpr: f64) -> Result<(), String>
where
    X: Ranged<ValueType = f64, FormatOption = plotters::coord::ranged1d::DefaultFormatting>,
    Y: Ranged<ValueType = f64, FormatOption = plotters::coord::ranged1d::DefaultFormatting>,
{
    let px = |v: f64| px(dpr, v);
    let x_fmt = |v: &f64| tick(spec.x.ticks, *v);
    let y_fmt = |v: &f64| tick(spec.y.ticks, *v);
    chart
        .configure_mesh()
        .x_desc(spec.x.label.as_str())
        .y_desc(spec.y.label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .x_labels(8)
        .y_labels(7)
        .label_style(font(palette, dpr, 12.0))
        .axis_desc_style(font(palette, dpr, 13.0))
        .bold_line_style(palette.grid.stroke_width(px(1.0).max(1)))
        .light_line_style(palette.background)
        .axis_style(palette.axis.stroke_width(px(1.0).max(1)))
        .draw()
        .map_err(err)
}

/// One series: the line through its valid points (solid or dashed) and a mark per point — valid points filled circles, every other status its own unconnected mark.
fn draw_series<X, Y>(chart: &mut Chart<'_, X, Y>, s: &Series, palette: &Palette, dpr: f64) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let px = |v: f64| px(dpr, v);
    let line_w = px(2.0).max(1);
    let mark = px(3.5).max(2);
    let colour = palette.series[s.colour % palette.series.len()];
    let style = colour.stroke_width(line_w);
    let valid: Vec<(f64, f64)> =
        s.points.iter().filter(|p| p.status == CellStatus::Valid).map(|p| (p.x, p.y)).collect();
    match dash_pattern(s.stroke, dpr) {
        _ if s.stroke == Stroke::Marks => {}
        None => {
            chart.draw_series(LineSeries::new(valid.iter().copied(), style)).map_err(err)?;
        }
        Some((dash, gap)) => {
            chart.draw_series(DashedLineSeries::new(valid.iter().copied(), dash, gap, style)).map_err(err)?;
        }
    }
    for p in &s.points {
        let at = (p.x, p.y);
        match p.status {
            CellStatus::Valid => {
                chart.draw_series(std::iter::once(Circle::new(at, mark, colour.filled()))).map_err(err)?;
            }
            CellStatus::RequestsQueued => {
                chart
                    .draw_series(std::iter::once(TriangleMarker::new(at, mark + px(1.5), colour.stroke_width(line_w))))
                    .map_err(err)?;
            }
            _ => {
                chart
                    .draw_series(std::iter::once(Cross::new(at, mark + px(1.0), colour.stroke_width(line_w))))
                    .map_err(err)?;
            }
        }
    }
    Ok(())
}

/// The error bars of a series: a vertical whisker with caps from each point's interval low to
/// high (points without an interval get none; on a log axis a bound at or below 0 cannot be
/// drawn, so that whisker is left out rather than cut).
fn draw_whiskers<X, Y>(
    chart: &mut Chart<'_, X, Y>,
    s: &Series,
    y_log: bool,
    palette: &Palette,
    dpr: f64,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let colour = palette.series[s.colour % palette.series.len()];
    let style = colour.stroke_width(px(dpr, 1.5).max(1));
    let cap = px(dpr, 4.0).max(2) as i32;
    let bars: Vec<(f64, f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| p.interval.map(|(lo, hi)| (p.x, lo, hi)))
        .filter(|(_, lo, hi)| lo.is_finite() && hi.is_finite() && (!y_log || *lo > 0.0))
        .collect();
    for (x, lo, hi) in bars {
        chart.draw_series(std::iter::once(PathElement::new(vec![(x, lo), (x, hi)], style))).map_err(err)?;
        let caps = [lo, hi].map(|y| EmptyElement::at((x, y)) + PathElement::new(vec![(-cap, 0), (cap, 0)], style));
        chart.draw_series(caps).map_err(err)?;
    }
    Ok(())
}

/// A Pareto frontier: a dashed line and a ring around each of its points, in its run's colour
/// (or the text colour for a single run).
fn draw_frontier<X, Y>(chart: &mut Chart<'_, X, Y>, f: &Frontier, palette: &Palette, dpr: f64) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let px = |v: f64| px(dpr, v);
    let mark = px(3.5).max(2);
    let colour = f.colour.map_or(palette.text, |c| palette.series[c % palette.series.len()]);
    let style = colour.stroke_width(px(1.5).max(1));
    chart
        .draw_series(DashedLineSeries::new(f.points.iter().copied(), px(2.0).max(1), px(4.0).max(2), style))
        .map_err(err)?;
    chart
        .draw_series(f.points.iter().map(|&at| Circle::new(at, mark + px(3.0), colour.stroke_width(px(1.0).max(1)))))
        .map_err(err)?;
    Ok(())
}

/// A marked point (a run's capacity at the SLO): a wide ring in the run's colour, outlined in
/// the text colour so it stands out from the series marks.
fn draw_marker<X, Y>(chart: &mut Chart<'_, X, Y>, m: &Marker, palette: &Palette, dpr: f64) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let px = |v: f64| px(dpr, v);
    let colour = palette.series[m.colour % palette.series.len()];
    let at = (m.x, m.y);
    chart
        .draw_series([
            Circle::new(at, px(9.0), palette.text.stroke_width(px(1.0).max(1))),
            Circle::new(at, px(7.5), colour.stroke_width(px(2.5).max(1))),
        ])
        .map_err(err)?;
    Ok(())
}

/// A horizontal guide (an SLO bound) across the whole x range: a long-dashed line in the text
/// colour.
fn draw_guide<X, Y>(chart: &mut Chart<'_, X, Y>, g: &Guide, x: &Axis, palette: &Palette, dpr: f64) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let px = |v: f64| px(dpr, v);
    let style = palette.axis.stroke_width(px(1.5).max(1));
    let ends = [(x.range.0, g.y), (x.range.1, g.y)];
    chart.draw_series(DashedLineSeries::new(ends, px(10.0).max(2), px(6.0).max(2), style)).map_err(err)?;
    // Its name sits just above the line at the left edge (the legend band names the lines).
    let label = font(palette, dpr, 11.0).pos(Pos::new(HPos::Left, VPos::Bottom));
    chart.draw_series(std::iter::once(Text::new(g.label.clone(), (x.range.0, g.y), label))).map_err(err)?;
    Ok(())
}

/// Canvas pixels of a stroke's (dash, gap), `None` for a continuous line.
fn dash_pattern(stroke: Stroke, dpr: f64) -> Option<(u32, u32)> {
    let (dash, gap) = match stroke {
        Stroke::Solid | Stroke::Marks => return None,
        Stroke::Dashed => (7, 5),
        Stroke::Pattern(n) => DASH_PATTERNS[n % DASH_PATTERNS.len()],
    };
    (dash != 0).then(|| (px(dpr, f64::from(dash)).max(1), px(dpr, f64::from(gap)).max(2)))
}

/// The pieces of a legend sample line from `x0` to `x1` (canvas pixels): one for a solid line,
/// the stroke's dashes for a dashed one, none for marks only.
fn legend_segments(stroke: Stroke, x0: i32, x1: i32, dpr: f64) -> Vec<(i32, i32)> {
    match (stroke, dash_pattern(stroke, dpr)) {
        (Stroke::Marks, _) => vec![],
        (Stroke::Dashed, _) => {
            let third = (x1 - x0) / 3;
            vec![(x0, x0 + third), (x1 - third, x1)]
        }
        (_, None) => vec![(x0, x1)],
        (_, Some((dash, gap))) => {
            let (dash, step) = (dash as i32, (dash + gap) as i32);
            (0..).map(|i| x0 + i * step).take_while(|a| *a < x1).map(|a| (a, (a + dash).min(x1))).collect()
        }
    }
}

/// The legend in its band below the chart: each entry's sample (the series' line, solid or
/// dashed, with its point mark; the frontier's dotted line and ring) and its text, the entry's
/// top-left corner at `at` (CSS pixels from the band's top-left).
fn draw_legend(
    area: &DrawingArea<CanvasBackend, plotters::coord::Shift>,
    entries: &[LegendEntry],
    at: &[(f64, f64)],
    palette: &Palette,
    dpr: f64,
) -> Result<(), String> {
    let px = |v: f64| px(dpr, v) as i32;
    let text_style = font(palette, dpr, 12.0).pos(Pos::new(HPos::Left, VPos::Center));
    let (mark, ring) = (px(3.5).max(2), px(6.5).max(3));
    for (e, &(x, y)) in entries.iter().zip(at) {
        let (x0, mid) = (px(x), px(y + LEGEND_ROW / 2.0));
        let x1 = px(x + LEGEND_SAMPLE);
        let centre = (x0 + x1) / 2;
        let (colour, width) = match e.colour {
            Some(c) => (palette.series[c % palette.series.len()], px(2.0).max(1) as u32),
            None => (palette.text, px(1.5).max(1) as u32),
        };
        let style = colour.stroke_width(width);
        for (a, b) in legend_segments(e.stroke, x0, x1, dpr) {
            area.draw(&PathElement::new(vec![(a, mid), (b, mid)], style)).map_err(err)?;
        }
        match (e.colour, e.stroke) {
            (Some(_), _) => area.draw(&Circle::new((centre, mid), mark as u32, colour.filled())).map_err(err)?,
            // A context's dash pattern in a comparison of many runs: the line alone.
            (None, Stroke::Pattern(_)) => {}
            (None, _) => area.draw(&Circle::new((centre, mid), ring as u32, style)).map_err(err)?,
        }
        area.draw_text(&e.text, &text_style, (px(x + LEGEND_SAMPLE + LEGEND_TEXT_GAP), mid)).map_err(err)?;
    }
    Ok(())
}
