//! The comparison of many runs (`?compare=URL&compare=URL…`, 2 … [`multi_run::MAX_RUNS`]): each
//! run fetched and validated, then a key of the runs (one colour each), the controls kept in
//! the URL (the context drawn, the SLO's TTFT limit and per-user floor, a GPU-hour price, the
//! side-by-side table's figure), the overlaid charts with each run's capacity at the SLO marked,
//! the capacity table and every run's figure per cell side by side.
//!
//! What it shows is computed by [`crate::model::multi_run`] (pure); this module only turns it into
//! elements. Every string from a file is inserted as text, never as HTML.

use crate::model::multi_run::{self, ContextChoice, Run, CAPACITY_COLUMNS, MAX_RUNS, TABLE_METRICS};
use crate::model::run_report;
use crate::view::browser::{self, Fetched};
use crate::view::chart_view::charts_section;
use crate::view::simulated_marks::SimulatedMark;
use crate::view::site_digests;
use crate::view::view_state::{page_view_state, ViewState};
use leptos::prelude::*;
use leptos::task::spawn_local;
use speedmatrix_schema::slo::Slo;
use speedmatrix_schema::{load_results, Results};
use std::sync::Arc;

/// The runs the URL asks to compare (`compare`, non-empty values, in order); the page is this
/// view when there are at least two.
pub fn requested_runs() -> Vec<String> {
    browser::query_all("compare").into_iter().filter(|u| !u.trim().is_empty()).collect()
}

/// Whether the URL asks for the comparison of many runs.
pub fn requested() -> bool {
    requested_runs().len() >= 2
}

/// Where one run of the comparison stands.
#[derive(Debug, Clone, PartialEq)]
enum Slot {
    /// Being fetched.
    Loading,
    /// Loaded and valid.
    Loaded(Arc<Results>),
    /// Could not be fetched or read: the one-line reason.
    Failed(String),
}

/// Fetch and read one run; with the warning when it is a file of the site whose bytes no
/// longer have the index's digest.
async fn fetch_run(url: &str, digests: &[site_digests::Digest]) -> (Slot, Option<String>) {
    match browser::fetch_bytes(url).await {
        Fetched::Body(bytes) => {
            let changed = site_digests::changed(digests, url, &bytes);
            let slot = match load_results(&bytes) {
                Ok(r) => Slot::Loaded(Arc::new(r)),
                Err(e) => Slot::Failed(e.to_string()),
            };
            (slot, changed)
        }
        Fetched::NotFound => (Slot::Failed("HTTP 404 Not Found".into()), None),
        Fetched::Failed(e) => (Slot::Failed(e), None),
    }
}

/// The page of the comparison (instead of the report page).
#[component]
pub fn MultiPage() -> impl IntoView {
    let (view, _theme) = page_view_state();
    let mut urls = requested_runs();
    let dropped = urls.len().saturating_sub(MAX_RUNS);
    urls.truncate(MAX_RUNS);
    let slots = RwSignal::new(urls.iter().map(|u| (u.clone(), Slot::Loading)).collect::<Vec<_>>());
    let changed: RwSignal<Vec<(usize, String)>> = RwSignal::new(Vec::new());
    spawn_local(async move {
        let digests = std::sync::Arc::new(site_digests::index_digests().await);
        for (i, url) in urls.into_iter().enumerate() {
            let digests = digests.clone();
            spawn_local(async move {
                let (slot, warning) = fetch_run(&url, &digests).await;
                if let Some(w) = warning {
                    changed.update(|c| c.push((i, w)));
                }
                slots.update(|s| s[i].1 = slot);
            });
        }
    });
    let loaded = move || {
        slots.with(|s| {
            s.iter()
                .map(|(u, slot)| match slot {
                    Slot::Loaded(r) => Some((u.clone(), r.clone())),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
        })
    };
    document().set_title("speedmatrix — compare runs");
    view! {
        <header class="topbar">
            <a class="brand" href="./">"speedmatrix"</a>
            <span class="diff-mode">"Compare runs"</span>
        </header>
        <main id="main">
            {(dropped > 0).then(|| view! {
                <p class="notice" role="alert">
                    {format!("{dropped} more runs were asked for: a comparison draws at most {MAX_RUNS}.")}
                </p>
            })}
            {move || {
                let mut c = changed.get();
                c.sort();
                c.into_iter()
                    .map(|(i, w)| {
                        view! { <p class="notice integrity" role="alert" data-run=i.to_string()>{w}</p> }
                    })
                    .collect_view()
            }}
            {move || match loaded() {
                Some(runs) => view! { <MultiView runs=runs view=view /> }.into_any(),
                None => view! { <SlotList slots=slots /> }.into_any(),
            }}
        </main>
        <footer class="footer">
            "speedmatrix viewer · files are read in your browser; nothing is uploaded · results schema v"
            {speedmatrix_schema::SCHEMA_VERSION}
        </footer>
    }
}

/// The runs while any is loading or failed: each with where it stands.
#[component]
fn SlotList(slots: RwSignal<Vec<(String, Slot)>>) -> impl IntoView {
    view! {
        <section class="welcome diff-waiting">
            <h1>"Compare runs"</h1>
            <ul class="diff-sides" id="cmp-slots">
                {move || {
                    slots
                        .get()
                        .into_iter()
                        .map(|(u, s)| {
                            let (class, text) = match s {
                                Slot::Loading => ("loading", format!("loading {u}…")),
                                Slot::Loaded(r) => ("loaded", format!("{} ({u})", run_report::title(&r))),
                                Slot::Failed(e) => ("failed", format!("could not load {u}: {e}")),
                            };
                            view! { <li class=format!("side side-{class}")>{text}</li> }
                        })
                        .collect_view()
                }}
            </ul>
        </section>
    }
}

/// The controls' state, each kept in the URL (see [`multi_run::MULTI_PARAMS`]).
#[derive(Clone, Copy)]
struct Controls {
    context: RwSignal<ContextChoice>,
    slo: RwSignal<Slo>,
    price: RwSignal<Option<f64>>,
    figure: RwSignal<String>,
}

impl Controls {
    fn from_url(default_context: Option<u64>) -> Controls {
        let context = browser::query("context")
            .and_then(|v| ContextChoice::parse(&v))
            .or(default_context.map(ContextChoice::One))
            .unwrap_or(ContextChoice::All);
        let figure = browser::query("figure")
            .filter(|f| TABLE_METRICS.contains(&f.as_str()))
            .unwrap_or_else(|| "total_tps".into());
        Controls {
            context: RwSignal::new(context),
            slo: RwSignal::new(multi_run::slo_from_query(browser::query)),
            price: RwSignal::new(multi_run::price_from(browser::query("price"))),
            figure: RwSignal::new(figure),
        }
    }
}

/// The comparison of the loaded runs (URL, run), in the URL's order.
#[component]
pub fn MultiView(
    /// The runs.
    runs: Vec<(String, Arc<Results>)>,
    /// Theme and viewport, for the charts.
    #[prop(optional)]
    view: Option<ViewState>,
) -> impl IntoView {
    let view = view.unwrap_or_else(ViewState::detached);
    // For the render benchmark (tests/benches/viewer_render.rs): the comparison is in the DOM.
    request_animation_frame(|| browser::mark("speedmatrix-compare"));
    let names: Vec<String> = runs.iter().map(|(_, r)| run_report::title(r)).collect();
    let runs = Arc::new(runs);
    let names = Arc::new(names);
    let list = {
        let (runs, names) = (runs.clone(), names.clone());
        move || -> Vec<(String, Arc<Results>)> {
            runs.iter().zip(names.iter()).map(|((_, r), n)| (n.clone(), r.clone())).collect()
        }
    };
    let default = {
        let l = list();
        multi_run::default_context(&as_runs(&l))
    };
    let controls = Controls::from_url(default);
    let contexts: Vec<(String, String)> = {
        let l = list();
        multi_run::contexts(&as_runs(&l)).into_iter().map(|c| (c.tokens.to_string(), c.label)).collect()
    };
    let charts = {
        let list = list.clone();
        move || {
            let l = list();
            let specs = multi_run::charts(&as_runs(&l), controls.context.get(), &controls.slo.get());
            charts_section("cmp-charts", "Charts", "One colour per run. ", specs, view, "comparison".into())
        }
    };
    view! {
        <article class="report multi">
            <p class="eyebrow">"Speed test matrix · comparison"</p>
            <h1 id="cmp-title">{format!("{} runs compared", runs.len())}</h1>
            <RunKey runs=runs.clone() names=names.clone() dark=view.dark />
            <ControlsBar controls=controls contexts=contexts />
            {charts}
            <CapacityTable list=list.clone() controls=controls />
            <SideBySide list=list names=names controls=controls />
        </article>
    }
}

fn as_runs(list: &[(String, Arc<Results>)]) -> Vec<Run<'_>> {
    list.iter().map(|(n, r)| Run { name: n, results: r }).collect()
}

/// The runs, each with its colour, its report's link and its simulated mark.
#[component]
fn RunKey(runs: Arc<Vec<(String, Arc<Results>)>>, names: Arc<Vec<String>>, dark: Signal<bool>) -> impl IntoView {
    let items = runs
        .iter()
        .zip(names.iter())
        .enumerate()
        .map(|(i, ((url, r), name))| {
            let colour =
                move || crate::view::chart_canvas::css_colour(&crate::view::chart_canvas::palette(dark.get()), i);
            let href = format!("./?run={}", url);
            view! {
                <li class="cmp-run" data-run=i.to_string()>
                    <span class="swatch" aria-hidden="true" style:background-color=colour></span>
                    <a href=href>{name.clone()}</a>
                    " · "
                    <span class="cmp-id">{r.run.id.clone()}</span>
                    <SimulatedMark r=r.clone() />
                </li>
            }
        })
        .collect_view();
    view! { <ol class="cmp-runs" id="cmp-runs">{items}</ol> }
}

/// Context, SLO and price inputs; each change goes to the URL (replacing the entry).
#[component]
fn ControlsBar(controls: Controls, contexts: Vec<(String, String)>) -> impl IntoView {
    let Controls { context, slo, price, .. } = controls;
    let now = context.get_untracked().param();
    let on_context = move |ev: web_sys::Event| {
        if let Some(c) = ContextChoice::parse(&event_target_value(&ev)) {
            browser::set_query("context", Some(&c.param()));
            context.set(c);
        }
    };
    let on_bound = move |key: &'static str| {
        move |ev: web_sys::Event| {
            let text = event_target_value(&ev);
            browser::set_query(key, Some(text.trim()));
            slo.set(multi_run::with_bound(slo.get_untracked(), key, &text));
        }
    };
    let on_price = move |ev: web_sys::Event| {
        let text = event_target_value(&ev);
        let p = multi_run::price_from(Some(text.clone()));
        browser::set_query("price", p.map(|_| text.trim()));
        price.set(p);
    };
    let s = slo.get_untracked();
    view! {
        <section class="section controls" id="cmp-controls">
            <label>
                "Context "
                <select id="cmp-context" on:change=on_context>
                    {contexts
                        .into_iter()
                        .map(|(v, label)| {
                            let selected = v == now;
                            view! { <option value=v selected=selected>{label}</option> }
                        })
                        .collect_view()}
                    <option value="all" selected=now == "all">"Every context"</option>
                </select>
            </label>
            <fieldset class="slo">
                <legend>"Your SLO (medians; empty = no limit)"</legend>
                <label>
                    "TTFT ≤ (ms) "
                    <input id="slo-ttft" type="number" min="0" step="any" value=multi_run::bound_text(s.ttft_ms) on:change=on_bound("ttft") />
                </label>
                <label>
                    "Per-user ≥ (tok/s) "
                    <input id="slo-tps" type="number" min="0" step="any" value=multi_run::bound_text(s.per_user_tps) on:change=on_bound("tps") />
                </label>
            </fieldset>
            <label>
                "GPU-hour price "
                <input
                    id="gpu-price"
                    type="number"
                    min="0"
                    step="any"
                    placeholder="e.g. 2.50"
                    value=price.get_untracked().map(|p| p.to_string()).unwrap_or_default()
                    on:change=on_price
                />
                <span class="hint">" kept in this page's address, never in a file"</span>
            </label>
        </section>
    }
}

/// Each run's capacity at the SLO per context: the largest concurrency meeting it, its figures
/// (goodput, per GPU, cost with a price), or why none.
#[component]
fn CapacityTable(
    list: impl Fn() -> Vec<(String, Arc<Results>)> + Send + Sync + 'static,
    controls: Controls,
) -> impl IntoView {
    let rows = move || {
        let l = list();
        let runs = as_runs(&l);
        multi_run::capacity_rows(&runs, &controls.slo.get(), controls.price.get())
            .into_iter()
            .map(|row| {
                let name = l[row.run].0.clone();
                let note = row.note.clone().unwrap_or_default();
                let context = row.context.clone();
                view! {
                    <tr data-run=row.run.to_string() data-context=row.context.clone()>
                        <th scope="row">{name}</th>
                        <td>{context}</td>
                        {row.cells.into_iter().map(|c| view! { <td class="num">{c}</td> }).collect_view()}
                        <td class="why">{note}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    view! {
        <section class="section" id="capacity">
            <h2>"Capacity at your SLO"</h2>
            <p class="section-sub" id="capacity-slo">{move || controls.slo.get().describe()}</p>
            <div class="table-wrap">
                <table class="data capacity-table">
                    <thead>
                        <tr>
                            <th scope="col">"Run"</th>
                            <th scope="col">"Context"</th>
                            {CAPACITY_COLUMNS.iter().map(|(_, h)| view! { <th scope="col">{*h}</th> }).collect_view()}
                            <th scope="col">"Why none"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        </section>
    }
}

/// The side-by-side table's rows: per cell (context, then concurrency), each run's figure `id`
/// with its cell's status as a class.
fn side_rows(l: &[(String, Arc<Results>)], id: &str, price: Option<f64>) -> impl IntoView {
    multi_run::cell_table(&as_runs(l), id, price)
        .into_iter()
        .map(|row| {
            let figures = row
                .figures
                .into_iter()
                .map(|f| {
                    let class = match f.status {
                        Some(s) => format!("num status-{}", s.id()),
                        None => "num".into(),
                    };
                    view! { <td class=class>{f.text}</td> }
                })
                .collect_view();
            view! {
                <tr data-context=row.context.label.clone() data-concurrency=row.concurrency.to_string()>
                    <th scope="row">{row.context.label.clone()}</th>
                    <td class="num">{row.concurrency}</td>
                    {figures}
                </tr>
            }
        })
        .collect_view()
}

/// Every decode cell of any run with each run's figure side by side; the figure is picked.
#[component]
fn SideBySide(
    list: impl Fn() -> Vec<(String, Arc<Results>)> + Send + Sync + 'static,
    names: Arc<Vec<String>>,
    controls: Controls,
) -> impl IntoView {
    let figure = controls.figure;
    let list = Arc::new(list);
    let rows = {
        let list = list.clone();
        move || side_rows(&list(), &figure.get(), controls.price.get())
    };
    let gaps = move || {
        let l = list();
        multi_run::table_gaps(&as_runs(&l), &figure.get(), controls.price.get())
            .into_iter()
            .map(|(i, why)| view! { <li>{format!("{}: {why}", l[i].0)}</li> })
            .collect_view()
    };
    let on_figure = move |ev: web_sys::Event| {
        let v = event_target_value(&ev);
        if TABLE_METRICS.contains(&v.as_str()) {
            browser::set_query("figure", Some(&v));
            figure.set(v);
        }
    };
    let now = figure.get_untracked();
    view! {
        <section class="section" id="side-by-side">
            <h2>"Every cell, side by side"</h2>
            <label>
                "Figure "
                <select id="cmp-figure" on:change=on_figure>
                    {TABLE_METRICS
                        .iter()
                        .map(|id| {
                            let selected = *id == now;
                            view! { <option value=*id selected=selected>{multi_run::metric_label(id)}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <ul class="gaps" id="cmp-gaps">{gaps}</ul>
            <div class="table-wrap">
                <table class="data side-by-side">
                    <thead>
                        <tr>
                            <th scope="col">"Context"</th>
                            <th scope="col">"Requests at once"</th>
                            {names.iter().map(|n| view! { <th scope="col">{n.clone()}</th> }).collect_view()}
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        </section>
    }
}
