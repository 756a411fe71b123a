//! The fleet view of a site (under its run table): every valid decode cell of the runs the
//! table's facets keep, as a point of total tok/s per GPU against per-user tok/s, one colour per
//! GPU type with its frontier drawn as a line; a click on a point (or a link in the frontier
//! table) opens its run's report at that cell. The points are read from the site's
//! `runs/cells.csv` (one fetch, when the view is first opened; `?fleet=1` opens it) —
//! [`speedmatrix_schema::fleet`] (pure) computes what is drawn.

use super::runs::State;
use crate::model::run_index::{self, IndexFilters};
use crate::view::browser::{self, Fetched};
use leptos::prelude::*;
use leptos::task::spawn_local;
use speedmatrix_schema::fleet::{self, Fleet, FleetPoint};
use std::collections::HashSet;
use std::sync::Arc;

/// The chart's size in its own units (the SVG scales to the page's width).
const W: f64 = 900.0;
const H: f64 = 460.0;
/// Margins: left, right, top, bottom.
const ML: f64 = 72.0;
const MR: f64 = 16.0;
const MT: f64 = 16.0;
const MB: f64 = 48.0;
/// How near (in chart units) a click must be to a point to open it.
const NEAR: f64 = 12.0;

/// One colour per GPU type, in series order (repeating past eight).
const COLOURS: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

/// Where the cells table stands.
#[derive(Debug, Clone, PartialEq)]
enum Cells {
    /// Not asked for yet (the view is closed).
    NotLoaded,
    /// Being fetched.
    Loading,
    /// Read: every valid decode cell of the site.
    Loaded(Arc<Vec<FleetPoint>>),
    /// Could not be fetched or read: why.
    Failed(String),
}

/// The scales of a drawn fleet: the axes' largest values.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scale {
    x_max: f64,
    y_max: f64,
}

impl Scale {
    fn of(f: &Fleet) -> Scale {
        let (x, y) = f.extent();
        let top = |v: f64| fleet::ticks(v).last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
        Scale { x_max: top(x), y_max: top(y) }
    }

    fn x(self, v: f64) -> f64 {
        ML + v / self.x_max * (W - ML - MR)
    }

    fn y(self, v: f64) -> f64 {
        MT + (1.0 - v / self.y_max) * (H - MT - MB)
    }

    /// Where a point is drawn.
    fn at(self, p: &FleetPoint) -> (f64, f64) {
        (self.x(p.per_user_tps), self.y(p.total_tps_per_gpu.unwrap_or(0.0)))
    }
}

/// The view, open when the URL says `fleet=1`.
#[component]
pub(super) fn FleetView(state: State, filters: RwSignal<IndexFilters>) -> impl IntoView {
    let cells = RwSignal::new(Cells::NotLoaded);
    let load = move || {
        if cells.get_untracked() != Cells::NotLoaded {
            return;
        }
        cells.set(Cells::Loading);
        spawn_local(async move {
            let url = browser::resolve("cells.csv", "runs/index.json");
            let next = match browser::fetch_bytes(&url).await {
                Fetched::Body(bytes) => match fleet::points_from_csv(&String::from_utf8_lossy(&bytes)) {
                    Ok(points) => Cells::Loaded(Arc::new(points)),
                    Err(e) => Cells::Failed(e.to_string()),
                },
                Fetched::NotFound => {
                    Cells::Failed("runs/cells.csv is not on this site: publish it with this speedmatrix".into())
                }
                Fetched::Failed(e) => Cells::Failed(format!("runs/cells.csv: {e}")),
            };
            cells.set(next);
        });
    };
    let open = browser::query("fleet").is_some();
    if open {
        load();
    }
    let on_toggle = move |ev: web_sys::Event| {
        let el: web_sys::Element = event_target(&ev);
        let is_open = el.has_attribute("open");
        browser::set_query("fleet", is_open.then_some("1"));
        if is_open {
            load();
        }
    };
    view! {
        <details class="section fleet" id="fleet" open=open on:toggle=on_toggle>
            <summary><h2>"Fleet view: throughput per GPU against interactivity"</h2></summary>
            <p class="hint">
                "Every valid decode cell of the runs the table keeps: total tok/s per GPU against the median per-request tok/s "
                "(the speed one user sees). The line of each GPU type is its frontier: the cells no other cell on that GPU "
                "beats on both. Click a point to open its run at that cell."
            </p>
            {move || match cells.get() {
                Cells::NotLoaded | Cells::Loading => view! { <p class="loading">"Loading runs/cells.csv…"</p> }.into_any(),
                Cells::Failed(e) => view! { <p class="notice" role="alert" id="fleet-error">{e}</p> }.into_any(),
                Cells::Loaded(points) => {
                    let entries = state.index.get();
                    let kept: HashSet<String> = run_index::order(&entries, None, &filters.get())
                        .into_iter()
                        .map(|i| entries[i].file.clone())
                        .collect();
                    let f = fleet::fleet(&points, |file| kept.contains(file));
                    // For the site bench (tests/benches/site_scale.rs): the fleet is in the DOM.
                    request_animation_frame(|| browser::mark("speedmatrix-fleet"));
                    view! { <FleetChart f=Arc::new(f) /> }.into_any()
                }
            }}
        </details>
    }
}

/// The chart, its key, what was left out and the frontier table.
#[component]
fn FleetChart(f: Arc<Fleet>) -> impl IntoView {
    let scale = Scale::of(&f);
    let hover: RwSignal<Option<(usize, usize)>> = RwSignal::new(None);
    let near = {
        let f = f.clone();
        move |ev: &web_sys::MouseEvent| -> Option<(usize, usize)> {
            let svg: web_sys::Element = event_target(ev);
            let svg = svg.closest("svg").ok().flatten()?;
            let rect = svg.get_bounding_client_rect();
            if rect.width() <= 0.0 || rect.height() <= 0.0 {
                return None;
            }
            let vx = (f64::from(ev.client_x()) - rect.left()) * W / rect.width();
            let vy = (f64::from(ev.client_y()) - rect.top()) * H / rect.height();
            let mut best: Option<((usize, usize), f64)> = None;
            for (s, series) in f.series.iter().enumerate() {
                for (i, p) in series.points.iter().enumerate() {
                    let (x, y) = scale.at(p);
                    let d = (x - vx).hypot(y - vy);
                    if d <= NEAR && best.is_none_or(|(_, b)| d < b) {
                        best = Some(((s, i), d));
                    }
                }
            }
            best.map(|(k, _)| k)
        }
    };
    let point = {
        let f = f.clone();
        move |(s, i): (usize, usize)| f.series.get(s).and_then(|x| x.points.get(i)).cloned()
    };
    let on_move = {
        let near = near.clone();
        move |ev: web_sys::MouseEvent| hover.set(near(&ev))
    };
    let on_click = {
        let point = point.clone();
        move |ev: web_sys::MouseEvent| {
            if let Some(p) = near(&ev).and_then(&point) {
                let _ = window().location().set_href(&p.href());
            }
        }
    };
    let x_ticks = fleet::ticks(scale.x_max);
    let y_ticks = fleet::ticks(scale.y_max);
    let grid = x_ticks
        .iter()
        .map(|&v| {
            let x = scale.x(v);
            view! {
                <line x1=x y1=MT x2=x y2=H - MB class="grid" />
                <text x=x y=H - MB + 16.0 text-anchor="middle" class="tick">{number(v)}</text>
            }
        })
        .collect_view();
    let y_grid = y_ticks
        .iter()
        .map(|&v| {
            let y = scale.y(v);
            view! {
                <line x1=ML y1=y x2=W - MR y2=y class="grid" />
                <text x=ML - 6.0 y=y + 4.0 text-anchor="end" class="tick">{number(v)}</text>
            }
        })
        .collect_view();
    let series = f
        .series
        .iter()
        .enumerate()
        .map(|(s, series)| {
            let colour = COLOURS[s % COLOURS.len()];
            let mut d = String::with_capacity(series.points.len() * 16);
            for p in &series.points {
                let (x, y) = scale.at(p);
                d.push_str(&format!("M{x:.1} {y:.1}h0"));
            }
            let line: Vec<String> = series
                .frontier
                .iter()
                .map(|&i| {
                    let (x, y) = scale.at(&series.points[i]);
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            let marks = series
                .frontier
                .iter()
                .map(|&i| {
                    let p = &series.points[i];
                    let (x, y) = scale.at(p);
                    view! {
                        <circle
                            cx=x
                            cy=y
                            r="5"
                            fill=colour
                            class="frontier-point"
                            data-href=p.href()
                            aria-label=point_text(&series.gpu, p)
                        />
                    }
                })
                .collect_view();
            view! {
                <g class="fleet-series" data-gpu=series.gpu.clone()>
                    <path d=d stroke=colour class="fleet-points" data-count=series.points.len().to_string() />
                    <polyline points=line.join(" ") stroke=colour class="fleet-frontier" fill="none" />
                    {marks}
                </g>
            }
        })
        .collect_view();
    let hovered = {
        let f = f.clone();
        move || {
            let (s, i) = hover.get()?;
            let series = f.series.get(s)?;
            let p = series.points.get(i)?;
            Some(view! { <a href=p.href()>{point_text(&series.gpu, p)}</a> })
        }
    };
    let key = f
        .series
        .iter()
        .enumerate()
        .map(|(s, series)| {
            view! {
                <li data-gpu=series.gpu.clone()>
                    <span class="swatch" style=format!("background:{}", COLOURS[s % COLOURS.len()])></span>
                    {format!(
                        "{}: {} cells, {} on the frontier",
                        series.gpu,
                        series.points.len(),
                        series.frontier.len(),
                    )}
                </li>
            }
        })
        .collect_view();
    let left_out = (f.without_gpu_count > 0).then(|| {
        view! {
            <p class="hint" id="fleet-left-out">
                {format!(
                    "{} valid cells are not drawn: their runs have no GPU count, so no tok/s per GPU (measure with run --gpu-count N).",
                    f.without_gpu_count,
                )}
            </p>
        }
    });
    let rows = f
        .series
        .iter()
        .flat_map(|series| series.frontier.iter().map(move |&i| (series.gpu.clone(), series.points[i].clone())))
        .map(|(gpu, p)| {
            let shown = gpu.clone();
            view! {
                <tr data-gpu=gpu>
                    <td>{shown}</td>
                    <th scope="row"><a href=p.href()>{p.name()}</a></th>
                    <td class="num">{number(p.per_user_tps)}</td>
                    <td class="num">{p.total_tps_per_gpu.map(number).unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <p id="fleet-summary">
            {format!("{} cells of {} runs, {} GPU types.", f.point_count(), f.runs, f.series.len())}
        </p>
        <svg
            id="fleet-chart"
            class="fleet-chart"
            viewBox=format!("0 0 {W} {H}")
            role="img"
            aria-label="Total tok/s per GPU against per-user tok/s, one colour per GPU type"
            data-points=f.point_count().to_string()
            on:mousemove=on_move
            on:click=on_click
        >
            {grid}
            {y_grid}
            <text x=(ML + W - MR) / 2.0 y=H - 8.0 text-anchor="middle" class="axis-title">
                "Per-user tok/s (median per request)"
            </text>
            <text x="14" y=(MT + H - MB) / 2.0 text-anchor="middle" class="axis-title"
                transform=format!("rotate(-90 14 {})", (MT + H - MB) / 2.0)>
                "Total tok/s per GPU"
            </text>
            {series}
        </svg>
        <p id="fleet-hover" class="hint">{hovered}</p>
        <ul class="fleet-key" id="fleet-key">{key}</ul>
        {left_out}
        <div class="table-wrap">
            <table class="data" id="fleet-frontier">
                <caption>"The frontier of each GPU type"</caption>
                <thead>
                    <tr>
                        <th scope="col">"GPU"</th>
                        <th scope="col">"Run · context × requests at once"</th>
                        <th scope="col" class="num">"Per-user tok/s"</th>
                        <th scope="col" class="num">"Total tok/s per GPU"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}

/// A figure as the chart writes it: thousands separated, one decimal under 100.
fn number(v: f64) -> String {
    let digits = if v.abs() < 100.0 && v.fract() != 0.0 { 1 } else { 0 };
    let s = format!("{v:.digits$}");
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(a, b)| (a, Some(b)));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 && c != '-' && !out.ends_with('-') {
            out.push(',');
        }
        out.push(c);
    }
    match frac {
        Some(f) => format!("{out}.{f}"),
        None => out,
    }
}

/// What a point is, for its tooltip and the hover line.
fn point_text(gpu: &str, p: &FleetPoint) -> String {
    format!(
        "{} on {gpu}: {} per-user tok/s, {} total tok/s per GPU",
        p.name(),
        number(p.per_user_tps),
        p.total_tps_per_gpu.map(number).unwrap_or_default()
    )
}
