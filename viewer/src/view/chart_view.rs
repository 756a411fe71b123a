//! The charts section: each chart of [`chart_spec::charts`] drawn on a canvas by
//! [`crate::view::chart_canvas`] (redrawn on theme, width or devicePixelRatio change), with a readout that
//! follows the pointer or the arrow keys, a table mirror of its points and a PNG download.

use crate::model::chart_spec::{self, ChartSpec, RunRef};
use crate::model::run_report;
use crate::view::browser;
use crate::view::chart_canvas;
use crate::view::view_state::ViewState;
use leptos::prelude::*;
use speedmatrix_schema::{CellStatus, Results};
use std::sync::Arc;

/// The charts of the run (see [`chart_spec::charts`]), each with a hover and keyboard readout,
/// a table mirror and a PNG download.
#[component]
pub(crate) fn Charts(r: Arc<Results>, view: ViewState) -> impl IntoView {
    let specs = chart_spec::charts(&[RunRef::single(&r)]);
    charts_section("charts", "Charts", "", specs, view, run_report::file_stem(&r))
}

/// A section of charts: title, a line saying how to read them (`lead`, then the marks of the
/// statuses drawn), and each chart with its readout, table mirror and PNG (file name `stem`).
/// Nothing when there is no chart.
pub(crate) fn charts_section(
    id: &'static str,
    title: &'static str,
    lead: &'static str,
    specs: Vec<ChartSpec>,
    view: ViewState,
    stem: String,
) -> impl IntoView {
    let statuses: Vec<CellStatus> = CellStatus::ALL
        .into_iter()
        .filter(|s| {
            *s != CellStatus::Valid
                && specs.iter().flat_map(|c| &c.series).flat_map(|x| &x.points).any(|p| p.status == *s)
        })
        .collect();
    (!specs.is_empty()).then(|| {
        view! {
            <section class="section" id=id>
                <h2>{title}</h2>
                <p class="section-sub">
                    {lead}
                    "Lines join valid cells. "
                    {statuses
                        .iter()
                        .map(|s| {
                            let mark = if *s == CellStatus::RequestsQueued { "△" } else { "✕" };
                            format!("{mark} {}. ", s.label())
                        })
                        .collect::<String>()}
                    "Hover a point, or focus a chart and use the arrow keys, to read it."
                </p>
                <div class="charts">
                    {specs
                        .into_iter()
                        .map(|spec| view! { <ChartView spec=spec view=view stem=stem.clone() /> })
                        .collect_view()}
                </div>
            </section>
        }
    })
}

/// The CSS height of a chart without its legend (the legend's rows go below it).
const CHART_HEIGHT: f64 = 340.0;

/// What a chart's readout needs: where the points were drawn, the text shown, and the point
/// the keyboard is on.
#[derive(Clone, Copy)]
struct Readout {
    hits: StoredValue<Vec<chart_canvas::Hit>>,
    text: RwSignal<String>,
    cursor: StoredValue<Option<usize>>,
}

impl Readout {
    fn new() -> Readout {
        Readout {
            hits: StoredValue::new(Vec::new()),
            text: RwSignal::new(String::new()),
            cursor: StoredValue::new(None),
        }
    }

    /// Show point `i` (in drawing order): its series, label, value, x and status.
    fn say(self, spec: &ChartSpec, i: usize) {
        let Some(h) = self.hits.with_value(|h| h.get(i).copied()) else { return };
        let s = &spec.series[h.series];
        let p = &s.points[h.point];
        let who = if p.label.starts_with(&s.name) { p.label.clone() } else { format!("{} — {}", s.name, p.label) };
        let (x_label, y_label) = (&spec.x.label, &spec.y.label);
        self.text.set(format!("{who}: {y_label} {}, {x_label} {} ({})", p.y_text, p.x_text, p.status.label()));
        self.cursor.set_value(Some(i));
    }

    /// The point the arrow, Home and End keys move to, from the current one; None for other
    /// keys or a chart without points.
    fn step(self, key: &str) -> Option<usize> {
        let n = self.hits.with_value(Vec::len);
        if n == 0 {
            return None;
        }
        let now = self.cursor.get_value();
        match key {
            "ArrowRight" | "ArrowDown" => Some(now.map_or(0, |i| (i + 1) % n)),
            "ArrowLeft" | "ArrowUp" => Some(now.map_or(n - 1, |i| (i + n - 1) % n)),
            "Home" => Some(0),
            "End" => Some(n - 1),
            _ => None,
        }
    }
}

/// Draw the chart on its canvas now and whenever the theme or the viewport changes; the points'
/// positions go to the readout. The canvas records what went where (CSS pixels) in
/// `data-plot` and `data-legend` ("left top right bottom") and `data-points` ("x,y" each),
/// so a test in the browser can check that the legend leaves every point in view, and how many
/// series, frontiers and markers it drew (`data-series`, `data-frontiers`, `data-markers`) and
/// how many points have an error bar (`data-intervals`).
fn draw_on_change(spec: Arc<ChartSpec>, canvas: NodeRef<leptos::html::Canvas>, view: ViewState, readout: Readout) {
    Effect::new(move |_| {
        let dark = view.dark.get();
        let (_, dpr) = view.viewport.get();
        let Some(c) = canvas.get() else { return };
        // The bitmap covers the canvas' content box exactly (CSS pixels × ratio): no resampling.
        let width = f64::from(c.client_width()).max(280.0);
        let palette = chart_canvas::palette(dark);
        match chart_canvas::draw(&c, &spec, &palette, width, CHART_HEIGHT, dpr) {
            Ok(d) => {
                let points: Vec<String> = d.hits.iter().map(|h| format!("{:.1},{:.1}", h.x, h.y)).collect();
                let legend = d.legend.map(|l| l.attr()).unwrap_or_default();
                let counts = [spec.series.len(), spec.frontiers.len(), spec.markers.len(), spec.intervals()];
                let [series, frontiers, markers, intervals] = counts.map(|n| n.to_string());
                for (name, value) in [
                    ("data-plot", d.plot.attr()),
                    ("data-legend", legend),
                    ("data-points", points.join(" ")),
                    ("data-series", series),
                    ("data-frontiers", frontiers),
                    ("data-markers", markers),
                    ("data-intervals", intervals),
                ] {
                    let _ = c.set_attribute(name, &value);
                }
                readout.hits.set_value(d.hits);
                browser::mark("speedmatrix-chart");
            }
            Err(e) => readout.text.set(format!("The chart could not be drawn: {e}")),
        }
    });
}

/// One chart: canvas (redrawn on theme, width or devicePixelRatio change), readout, table
/// mirror, PNG download.
#[component]
pub(crate) fn ChartView(spec: ChartSpec, view: ViewState, stem: String) -> impl IntoView {
    let spec = Arc::new(spec);
    let canvas: NodeRef<leptos::html::Canvas> = NodeRef::new();
    let readout = Readout::new();
    draw_on_change(spec.clone(), canvas, view, readout);
    let s_move = spec.clone();
    let on_move = move |ev: web_sys::MouseEvent| {
        // Canvas CSS pixels: from the client position, less the canvas' box and border.
        let Some(c) = canvas.get_untracked() else { return };
        let rect = c.get_bounding_client_rect();
        let x = f64::from(ev.client_x()) - rect.left() - f64::from(c.client_left());
        let y = f64::from(ev.client_y()) - rect.top() - f64::from(c.client_top());
        let pts: Vec<(f64, f64)> = readout.hits.with_value(|h| h.iter().map(|h| (h.x, h.y)).collect());
        if let Some(i) = chart_spec::nearest(&pts, x, y, 24.0) {
            readout.say(&s_move, i);
        }
    };
    let s_key = spec.clone();
    let on_key = move |ev: web_sys::KeyboardEvent| {
        if let Some(next) = readout.step(ev.key().as_str()) {
            ev.prevent_default();
            readout.say(&s_key, next);
        }
    };
    let png_name = format!("{stem}-{}.png", spec.id);
    let png = move |_| {
        if let Some(c) = canvas.get_untracked() {
            if let Ok(url) = c.to_data_url() {
                browser::download_url(&png_name, &url);
            }
        }
    };
    let id = spec.id;
    let described = format!("{}. {} Table below.", spec.title, spec.caption);
    view! {
        <figure class="chart" id=format!("fig-{id}") data-chart=id>
            <figcaption>
                <span class="chart-title">{spec.title.clone()}</span>
                <button type="button" class="png" id=format!("png-{id}") on:click=png>"PNG"</button>
            </figcaption>
            <p class="chart-caption">{spec.caption.clone()}</p>
            <canvas
                node_ref=canvas
                id=format!("chart-{id}")
                class="chart-canvas"
                style:height=format!("{CHART_HEIGHT}px")
                tabindex="0"
                role="img"
                aria-label=described
                on:mousemove=on_move
                on:keydown=on_key
            ></canvas>
            <p class="readout" id=format!("readout-{id}") aria-live="polite">{move || readout.text.get()}</p>
            {mirror_table(&spec)}
        </figure>
    }
}

/// The chart's points as a table (series, x, y, status), folded under "Table".
fn mirror_table(spec: &ChartSpec) -> impl IntoView {
    let id = spec.id;
    let rows = spec.mirror_rows();
    let x_head = spec.x.label.clone();
    let y_head = spec.y.label.clone();
    view! {
        <details class="chart-table">
            <summary>"Table"</summary>
            <table id=format!("table-{id}")>
                <thead>
                    <tr>
                        <th scope="col">"Series"</th>
                        <th scope="col" class="num">{x_head}</th>
                        <th scope="col" class="num">{y_head}</th>
                        <th scope="col">"Status"</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|[a, b, c, d]| {
                            view! {
                                <tr>
                                    <td>{a}</td>
                                    <td class="num">{b}</td>
                                    <td class="num">{c}</td>
                                    <td>{d}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </details>
    }
}
