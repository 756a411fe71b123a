//! The diff view: two runs, A (baseline) and B (candidate), compared. Reached with
//! `?a=URL&b=URL` (either may be missing, or `?compare` alone), where each side can also be
//! picked from the site's `runs/index.json` or opened from a local file. It shows the header
//! differences, what was not compared (status changes, one-run-only cells, prompt-length
//! mismatches), the two decode matrices side by side on one colour scale, the delta heatmap
//! and a sortable table of every matched measurement with A, B, Δ and Δ %. The pair, the
//! metric (`?metric=`) and the threshold (`?threshold=5`) live in the URL.
//!
//! The comparison is `speedmatrix_schema::diff` (the same as `speedmatrix diff`); what the
//! view shows is computed by [`crate::model::run_diff`] (pure). Every string from a file is inserted as
//! text, never as HTML.

use crate::model::chart_spec::{self, RunRef, Stroke};
use crate::model::rate_diff;
use crate::model::run_diff::{self, DeltaCell, LINE_COLUMNS};
use crate::model::run_index::index_runs;
use crate::model::run_report;
use crate::model::trace_diff;
use crate::view::browser::{self, Fetched};
use crate::view::chart_view::charts_section;
use crate::view::run_report::{heat_cell, matrix_table, metric_options};
use crate::view::simulated_marks::SimulatedMark;
use crate::view::site_digests;
use crate::view::view_state::{metric_from_url, page_view_state, ViewState};
use leptos::prelude::*;
use leptos::task::spawn_local;
use speedmatrix_schema::diff::{diff_with, parse_percent, percent, turns, HeaderChange, RunDiff, TALLY_KEYS};
use speedmatrix_schema::registry::{column, Column};
use speedmatrix_schema::site::load_index;
use speedmatrix_schema::{load_results, registry, Results};
use std::sync::Arc;

/// Whether the page URL asks for the diff view (`?a=`, `?b=` or `?compare`).
pub fn requested() -> bool {
    ["a", "b", "compare"].iter().any(|p| browser::query(p).is_some())
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq)]
enum Side {
    /// Nothing picked yet.
    Empty,
    /// Being fetched from this URL.
    Loading(String),
    /// Loaded: where from, and the run.
    Loaded(String, Arc<Results>),
    /// Could not be read: where from, and the one-line reason.
    Failed(String, String),
}

fn side_from(name: String, bytes: Result<Vec<u8>, String>) -> Side {
    match bytes {
        Ok(b) => match load_results(&b) {
            Ok(r) => Side::Loaded(name, Arc::new(r)),
            Err(e) => Side::Failed(name, e.to_string()),
        },
        Err(e) => Side::Failed(name, e),
    }
}

/// Fetch side `name`'s run from `url`; a file of the site whose bytes no longer have the
/// index's digest gets a warning in `changed`.
fn load_url(side: RwSignal<Side>, url: String, name: &'static str, changed: RwSignal<Vec<(&'static str, String)>>) {
    side.set(Side::Loading(url.clone()));
    changed.update(|c| c.retain(|(n, _)| *n != name));
    spawn_local(async move {
        let digests = site_digests::index_digests().await;
        let state = match browser::fetch_bytes(&url).await {
            Fetched::Body(bytes) => {
                if let Some(w) = site_digests::changed(&digests, &url, &bytes) {
                    changed.update(|c| c.push((name, w)));
                }
                side_from(url.clone(), Ok(bytes))
            }
            Fetched::NotFound => Side::Failed(url.clone(), "HTTP 404 Not Found".into()),
            Fetched::Failed(e) => Side::Failed(url.clone(), e),
        };
        side.set(state);
    });
}

/// The diff page (instead of the report page).
#[component]
pub fn DiffPage() -> impl IntoView {
    // The report page's theme (remembered choice or the system's) and viewport, for the charts.
    let (view, _theme) = page_view_state();
    let a = RwSignal::new(Side::Empty);
    let b = RwSignal::new(Side::Empty);
    let changed: RwSignal<Vec<(&'static str, String)>> = RwSignal::new(Vec::new());
    let index: RwSignal<Vec<(String, String)>> = RwSignal::new(Vec::new());
    let metric = RwSignal::new(metric_from_url());
    let threshold = RwSignal::new(browser::query("threshold").and_then(|t| parse_percent(&t).ok()));
    let embedded = browser::embedded_runs();
    if let [(name_a, bytes_a), (name_b, bytes_b)] = embedded.as_slice() {
        // A one-file report of two runs: both are in the page.
        a.set(side_from(name_a.clone(), Ok(bytes_a.clone())));
        b.set(side_from(name_b.clone(), Ok(bytes_b.clone())));
    } else {
        if let Some(u) = browser::query("a") {
            load_url(a, u, "A", changed);
        }
        if let Some(u) = browser::query("b") {
            load_url(b, u, "B", changed);
        }
    }
    let protocol = web_sys::window().and_then(|w| w.location().protocol().ok()).unwrap_or_default();
    if protocol != "file:" && embedded.is_empty() {
        spawn_local(async move {
            if let Fetched::Body(bytes) = browser::fetch_bytes("runs/index.json").await {
                if let Ok(ix) = load_index(&bytes) {
                    index
                        .set(index_runs(ix).into_iter().map(|(label, file)| (label, format!("runs/{file}"))).collect());
                }
            }
        });
    }
    Effect::new(move |_| {
        let title = match (a.get(), b.get()) {
            (Side::Loaded(_, x), Side::Loaded(_, y)) => {
                format!("{} vs {} — speedmatrix diff", run_report::title(&x), run_report::title(&y))
            }
            _ => "speedmatrix diff".to_string(),
        };
        document().set_title(&title);
    });

    view! {
        <header class="topbar">
            <a class="brand" href="./">"speedmatrix"</a>
            <span class="diff-mode">"Compare two runs"</span>
            <SidePicker name="A" param="a" side=a index=index changed=changed />
            <SidePicker name="B" param="b" side=b index=index changed=changed />
        </header>
        <main id="main">
            <ChangedFiles changed=changed />
            {move || match (a.get(), b.get()) {
                (Side::Loaded(_, ra), Side::Loaded(_, rb)) => {
                    view! { <DiffView a=ra b=rb metric=metric threshold=threshold view=view /> }.into_any()
                }
                (sa, sb) => {
                    view! {
                        <section class="welcome diff-waiting">
                            <h1>"Compare two runs"</h1>
                            <p>
                                "Pick A (the baseline) and B (the candidate) above — from this site's runs or as local files "
                                "(read in your browser; nothing is uploaded) — or link them as ?a=URL&b=URL."
                            </p>
                            <ul class="diff-sides">
                                {side_status("A", sa)}
                                {side_status("B", sb)}
                            </ul>
                        </section>
                    }
                        .into_any()
                }
            }}
        </main>
        <footer class="footer">
            "speedmatrix viewer · files are read in your browser; nothing is uploaded · results schema v"
            {speedmatrix_schema::SCHEMA_VERSION}
        </footer>
    }
}

/// The warnings of the sides whose files changed after the site published them.
#[component]
fn ChangedFiles(changed: RwSignal<Vec<(&'static str, String)>>) -> impl IntoView {
    move || {
        changed
            .get()
            .into_iter()
            .map(|(name, w)| {
                view! {
                    <p class="notice integrity" role="alert" data-side=name>
                        <b>{name} ": "</b>
                        {w}
                    </p>
                }
            })
            .collect_view()
    }
}

fn side_status(name: &'static str, s: Side) -> impl IntoView {
    let (class, text) = match s {
        Side::Empty => ("empty", "not picked yet".to_string()),
        Side::Loading(u) => ("loading", format!("loading {u}…")),
        Side::Loaded(u, r) => ("loaded", format!("{} ({u})", run_report::title(&r))),
        Side::Failed(u, e) => ("failed", format!("could not load {u}: {e}")),
    };
    view! {
        <li class=format!("side side-{class}") id=format!("side-{}", name.to_lowercase())>
            <b>{name} ": "</b>
            {text}
        </li>
    }
}

/// The picker of one side: a run of the site's index, or a local file.
#[component]
fn SidePicker(
    name: &'static str,
    param: &'static str,
    side: RwSignal<Side>,
    index: RwSignal<Vec<(String, String)>>,
    changed: RwSignal<Vec<(&'static str, String)>>,
) -> impl IntoView {
    let on_file = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        let Some(file) = input.files().and_then(|f| f.get(0)) else { return };
        input.set_value("");
        browser::set_query(param, None);
        changed.update(|c| c.retain(|(n, _)| *n != name));
        spawn_local(async move {
            let bytes = browser::file_bytes(&file).await;
            side.set(side_from(file.name(), bytes.map_err(|e| format!("cannot read the file: {e}"))));
        });
    };
    let current = move || match side.get() {
        Side::Loading(u) | Side::Loaded(u, _) | Side::Failed(u, _) => Some(u),
        Side::Empty => None,
    };
    view! {
        <span class="side-picker">
            <b>{name}</b>
            {move || {
                let runs = index.get();
                (!runs.is_empty())
                    .then(|| {
                        let now = current();
                        view! {
                            <select
                                id=format!("pick-{param}")
                                on:change=move |ev| {
                                    let url = event_target_value(&ev);
                                    if !url.is_empty() {
                                        browser::set_query(param, Some(&url));
                                        load_url(side, url, name, changed);
                                    }
                                }
                            >
                                <option value="">"Run…"</option>
                                {runs
                                    .into_iter()
                                    .map(|(label, url)| {
                                        let selected = now.as_deref() == Some(url.as_str());
                                        view! { <option value=url selected=selected>{label}</option> }
                                    })
                                    .collect_view()}
                            </select>
                        }
                    })
            }}
            <label class="file-button">
                "Open file…"
                <input id=format!("file-{param}") type="file" accept=".json,application/json" on:change=on_file />
            </label>
        </span>
    }
}

/// The comparison of two loaded runs.
#[component]
pub fn DiffView(
    /// The baseline.
    a: Arc<Results>,
    /// The candidate.
    b: Arc<Results>,
    /// The metric of the matrices (a registry column id), kept in the URL as `?metric=`.
    metric: RwSignal<String>,
    /// The least change called better or worse, fraction, kept in the URL as `?threshold=`
    /// (percent); `None`: the defaults (5 %, or 0 % for figures with an interval).
    threshold: RwSignal<Option<f64>>,
    /// Theme and viewport for the overlaid charts (default: [`ViewState::detached`]).
    #[prop(optional)]
    view: Option<ViewState>,
) -> impl IntoView {
    let view = view.unwrap_or_else(ViewState::detached);
    let (a2, b2) = (a.clone(), b.clone());
    let d = Memo::new(move |_| diff_with(&a2, &b2, threshold.get()));
    let total = column(run_report::DEFAULT_METRIC).expect("total_tps is in the registry");
    let options = run_report::heatmap_metrics();
    let selected =
        Memo::new(move |_| run_report::heatmap_column(&metric.get()).filter(|c| options.contains(c)).unwrap_or(total));
    let choices: Vec<(String, String, bool)> = run_report::heatmap_metrics()
        .iter()
        .map(|c| {
            (
                c.id(),
                run_report::metric_option_label(c),
                run_report::has_decode_data(&a, c) || run_report::has_decode_data(&b, c),
            )
        })
        .collect();
    let (ta, tb) = (run_report::title(&a), run_report::title(&b));
    let (ida, idb) = (a.run.id.clone(), b.run.id.clone());
    view! {
        <article class="report diff-report">
            <p class="eyebrow">"Speed test diff"</p>
            <h1 id="diff-title">{ta.clone()} " vs " {tb.clone()}</h1>
            <p class="subtitle" id="diff-runs">
                <span class="run-a">"A (baseline): " {ta} " · " {ida} <SimulatedMark r=a.clone() /></span>
                <br />
                <span class="run-b">"B (candidate): " {tb} " · " {idb} <SimulatedMark r=b.clone() /></span>
            </p>
            {controls(metric, threshold, choices, selected, d)}
            {move || d.with(|d| header_panel(&d.header))}
            {move || d.with(not_compared)}
            {side_by_side(a.clone(), b.clone(), d, selected)}
            {what_changed(d, selected)}
            {move || d.with(rate_changes)}
            {move || d.with(trace_changes)}
            {move || d.with(turn_changes)}
            <OverlaidCharts a=a.clone() b=b.clone() view=view />
            <MatchedTable d=d selected=selected />
        </article>
    }
}

/// The metric picker, the noise threshold and the tally of verdicts for the metric.
fn controls(
    metric: RwSignal<String>,
    threshold: RwSignal<Option<f64>>,
    choices: Vec<(String, String, bool)>,
    selected: Memo<Column>,
    d: Memo<RunDiff>,
) -> impl IntoView {
    view! {
        <div class="section-bar diff-controls">
            <label class="metric-picker">
                "Metric "
                <select
                    id="diff-metric"
                    on:change=move |ev| {
                        let id = event_target_value(&ev);
                        browser::set_query("metric", (id != run_report::DEFAULT_METRIC).then_some(id.as_str()));
                        metric.set(id);
                    }
                >
                    {metric_options(choices, selected, "no data")}
                </select>
            </label>
            <label class="metric-picker">
                "Least change "
                <input
                    id="diff-threshold"
                    type="number"
                    min="0"
                    step="0.5"
                    placeholder="auto"
                    prop:value=move || {
                        threshold.get().map(|t| format!("{}", (t * 1000.0).round() / 10.0)).unwrap_or_default()
                    }
                    on:change=move |ev| {
                        let text = event_target_value(&ev);
                        if text.trim().is_empty() {
                            browser::set_query("threshold", None);
                            threshold.set(None);
                        } else if let Ok(t) = parse_percent(&text) {
                            let pct = format!("{}", (t * 1000.0).round() / 10.0);
                            browser::set_query("threshold", Some(pct.as_str()));
                            threshold.set(Some(t));
                        }
                    }
                />
                " %"
            </label>
            <span class="tally" id="diff-tally">
                {move || {
                    let t = d.with(|d| d.tally(&selected.get().id()));
                    let parts: Vec<String> =
                        TALLY_KEYS.iter().filter_map(|k| t.get(k).map(|n| format!("{n} {k}"))).collect();
                    if parts.is_empty() { "no cell measured in both runs".to_string() } else { parts.join(" · ") }
                }}
            </span>
        </div>
    }
}

/// A and B side by side: the metric's two matrices on one colour scale, over the contexts and
/// concurrency levels of both runs.
fn side_by_side(a: Arc<Results>, b: Arc<Results>, d: Memo<RunDiff>, selected: Memo<Column>) -> impl IntoView {
    move || {
        let col = selected.get();
        let range = run_report::value_range(&[&a, &b], &col);
        let (contexts, levels) = d.with(|d| (d.contexts.clone(), d.concurrency.clone()));
        // With prefix-share cells, each side shows its cold cells (share 0), as its report does
        // by default; "What changed" has a row per share.
        let cold = |r: &Results| run_report::at_share(r, run_report::heatmap_share(r, None));
        let ha = run_report::heatmap_on(&cold(&a), &col, range, &contexts, &levels);
        let hb = run_report::heatmap_on(&cold(&b), &col, range, &contexts, &levels);
        let (lo, hi) = ha.scale_ends.clone().unwrap_or_else(|| (run_report::DASH.into(), run_report::DASH.into()));
        view! {
            <section class="section" id="diff-side">
                <h2>"A and B side by side"</h2>
                <p class="section-sub">
                    {run_report::metric_option_label(&col)}
                    " · one colour scale for both runs · rows are context length, columns are simultaneous requests"
                </p>
                <div class="side-by-side">
                    <div>
                        <h3>"A (baseline)"</h3>
                        {matrix("heatmap-a", ha)}
                    </div>
                    <div>
                        <h3>"B (candidate)"</h3>
                        {matrix("heatmap-b", hb)}
                    </div>
                </div>
                <div class="legend">
                    <div class="scale">
                        <span class="scale-lo">{lo}</span>
                        <span class="scale-bar" style:background=run_report::scale_gradient()></span>
                        <span class="scale-hi">{hi}</span>
                        <span class="scale-dir">"darker is better (or higher)"</span>
                    </div>
                </div>
            </section>
        }
    }
}

/// What changed: the delta heatmap of B against A for the metric, and its legend.
fn what_changed(d: Memo<RunDiff>, selected: Memo<Column>) -> impl IntoView {
    move || {
        let col = selected.get();
        let grid = d.with(|d| run_diff::delta_grid(d, &col));
        let concurrency = d.with(|d| d.concurrency.clone());
        let rule = d.with(run_diff::verdict_rule);
        let kinds = d.with(|d| run_diff::legend_kinds(d.noise.is_some()));
        view! {
            <section class="section" id="delta">
                <h2>"What changed"</h2>
                <p class="section-sub">
                    {run_report::metric_option_label(&col)}
                    " · B against A · "
                    <span id="delta-rule">{rule}</span>
                </p>
                {matrix_table("delta-heatmap", "heatmap delta", &concurrency, grid, delta_td)}
                <ul class="marks" id="delta-legend">
                    {kinds
                        .into_iter()
                        .map(|k| {
                            view! {
                                <li>
                                    <span class=format!("swatch d-{}", k.id())>{k.mark()}</span>
                                    {k.meaning()}
                                </li>
                            }
                        })
                        .collect_view()}
                </ul>
            </section>
        }
    }
}

/// The report's charts with both runs drawn on the same axes: A solid, B dashed, one colour per
/// context (see [`chart_spec::charts`]); each with its readout, table mirror and PNG.
#[component]
fn OverlaidCharts(a: Arc<Results>, b: Arc<Results>, view: ViewState) -> impl IntoView {
    let specs = chart_spec::charts(&[
        RunRef { name: "A", results: &a, stroke: Stroke::Solid },
        RunRef { name: "B", results: &b, stroke: Stroke::Dashed },
    ]);
    let stem = format!("{}-vs-{}", run_report::file_stem(&a), run_report::file_stem(&b));
    let lead = "A (baseline) solid, B (candidate) dashed; one colour per context. ";
    charts_section("diff-charts", "Charts, A and B overlaid", lead, specs, view, stem)
}

fn matrix(id: &'static str, h: run_report::Heatmap) -> impl IntoView {
    matrix_table(id, "heatmap compact", &h.concurrency, h.rows, heat_cell)
}

fn delta_td(c: DeltaCell) -> impl IntoView {
    let tip = format!("{} × {}: {}", c.context, c.concurrency, c.kind.meaning());
    view! {
        <td
            class=format!("dm-cell d-{}", c.kind.id())
            class:light=c.light
            data-context=c.context
            data-concurrency=c.concurrency.to_string()
            data-kind=c.kind.id()
            style:background-color=c.background
            title=tip
        >
            <span class="dm-main">
                {(!c.kind.mark().is_empty()).then(|| view! { <span class="dm-mark">{c.kind.mark()} " "</span> })}
                {c.main}
            </span>
            {c.detail.map(|t| view! { <span class="dm-detail">{t}</span> })}
        </td>
    }
}

fn header_panel(changes: &[HeaderChange]) -> impl IntoView {
    let body = if changes.is_empty() {
        view! { <p class="note">"None: same hardware, engine, model, launch command and plan."</p> }.into_any()
    } else {
        let none = || run_report::DASH.to_string();
        view! {
            <div class="table-wrap">
                <table class="measurements header-diff">
                    <thead>
                        <tr><th>"Section"</th><th>"Field"</th><th>"A"</th><th>"B"</th></tr>
                    </thead>
                    <tbody>
                        {changes
                            .iter()
                            .map(|h| {
                                view! {
                                    <tr>
                                        <td>{h.section.clone()}</td>
                                        <td class="field">{h.field.clone()}</td>
                                        <td class="val-a">{h.a.clone().unwrap_or_else(none)}</td>
                                        <td class="val-b">{h.b.clone().unwrap_or_else(none)}</td>
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
        }
        .into_any()
    };
    view! {
        <section class="section" id="diff-header">
            <h2>"Header differences"</h2>
            {body}
        </section>
    }
}

/// Status changes, one-run-only cells and prompt-length mismatches: what was not compared.
fn not_compared(d: &RunDiff) -> impl IntoView {
    let mut items: Vec<String> = Vec::new();
    for s in &d.status_changes {
        items.push(format!("Status changed at {}: {} → {}", s.cell.describe(), s.a.label(), s.b.label()));
    }
    for (who, cells) in [("A", &d.only_in_a), ("B", &d.only_in_b)] {
        if !cells.is_empty() {
            let list: Vec<String> = cells.iter().map(|c| c.describe()).collect();
            items.push(format!("Only in {who} ({}): {}", cells.len(), list.join(", ")));
        }
    }
    for m in &d.prompt_mismatches {
        items.push(format!(
            "Prompt lengths differ at {}: {} → {} tokens ({}); the runs did not send the same prompts",
            m.context.label,
            registry::format_int(m.a),
            registry::format_int(m.b),
            percent(m.rel, true)
        ));
    }
    (!items.is_empty()).then(|| {
        view! {
            <section class="section" id="diff-notes">
                <h2>"Not compared"</h2>
                <ul class="diff-notes">{items.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul>
            </section>
        }
    })
}

/// "Request rates": every rate cell of either run, B against A on the figures of
/// [`rate_diff::columns`], and what was not compared; nothing when neither run has rate
/// cells.
fn rate_changes(d: &RunDiff) -> Option<impl IntoView> {
    if d.rates.is_empty() {
        return None;
    }
    let lines = rate_diff::rate_lines(&d.rates, d.threshold);
    let notes = rate_diff::rate_notes(&d.rates);
    let rule = match &d.rates.noise {
        Some(n) => format!(
            "TTFT, TPOT and E2E p50 (block bootstrap over each window's requests), achieved rate and goodput (batch means over its per-second completions): ± is the 95 % interval of B − A, better or worse when it leaves out 0, the false-alarm control keeps it and the change is at least {} · other figures: changes under {} are the same",
            percent(n.min_change, false),
            percent(d.threshold, false)
        ),
        None => format!("no per-request samples on a side · changes under {} are the same", percent(d.threshold, false)),
    };
    Some(view! {
        <section class="section" id="diff-rates">
            <h2>"Request rates"</h2>
            <p class="section-sub">"Open-loop rate cells matched by context, prefix share, rate and arrival process · B against A · " {rule}</p>
            <div class="table-wrap">
                <table class="measurements rate-diff" id="rate-diff-table">
                    <thead>
                        <tr>{rate_diff::headers(&d.rates).into_iter().map(|h| view! { <th scope="col">{h}</th> }).collect_view()}</tr>
                    </thead>
                    <tbody>
                        {lines
                            .into_iter()
                            .map(|l| {
                                let (context, rate) = (l.context.clone(), l.rate.clone());
                                view! {
                                    <tr data-context=context data-rate=rate data-kind=l.kind.id()>
                                        <th scope="row">{l.context}</th>
                                        <td>{l.rate}</td>
                                        <td class=format!("d-{}", l.kind.id()) data-col="status">{l.status}</td>
                                        {l.cells.into_iter().map(rate_delta_td).collect_view()}
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            {(!notes.is_empty())
                .then(|| view! { <ul class="diff-notes" id="rate-diff-notes">{notes.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul> })}
        </section>
    })
}

/// "Trace replay": which trace each run replayed, and its row B against A on the figures of
/// [`trace_diff::TRACE_COLUMNS`] — or, for replays of another trace, slice or speed, why they
/// are not compared, with both runs' figures side by side; nothing when neither run replayed a
/// trace.
fn trace_changes(d: &RunDiff) -> Option<impl IntoView> {
    if d.traces.is_empty() {
        return None;
    }
    let lines = trace_diff::trace_lines(&d.traces, d.threshold);
    let notes = trace_diff::trace_notes(&d.traces);
    let rule = match &d.traces.noise {
        Some(n) => format!(
            "TTFT, TPOT and E2E p50 (block bootstrap over the replay's requests) and achieved rate (batch means over its per-second completions): ± is the 95 % interval of B − A, better or worse when it leaves out 0 and the change is at least {} · other figures: changes under {} are the same",
            percent(n.min_change, false),
            percent(d.threshold, false)
        ),
        None if d.traces.comparable() => {
            format!("no per-request samples on a side · changes under {} are the same", percent(d.threshold, false))
        }
        None => "not compared".to_string(),
    };
    Some(view! {
        <section class="section" id="diff-traces">
            <h2>"Trace replay"</h2>
            <p class="section-sub">"Replays of the same trace, slice and speed compared request for request · B against A · " {rule}</p>
            <ul class="diff-notes" id="trace-diff-notes">{notes.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul>
            <div class="table-wrap">
                <table class="measurements rate-diff" id="trace-diff-table">
                    <thead>
                        <tr>{trace_diff::headers().into_iter().map(|h| view! { <th scope="col">{h}</th> }).collect_view()}</tr>
                    </thead>
                    <tbody>
                        {lines
                            .into_iter()
                            .map(|l| {
                                view! {
                                    <tr data-trace=l.index.to_string() data-kind=l.kind.id()>
                                        <th scope="row">{format!("#{}", l.index + 1)}</th>
                                        <td class="num" data-col="requests">{l.requests}</td>
                                        <td class=format!("d-{}", l.kind.id()) data-col="status">{l.status}</td>
                                        {l.cells.into_iter().map(rate_delta_td).collect_view()}
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    })
}

/// "Conversations": every turn of either run's conversation cells, B against A on TTFT p50,
/// ITL p50, TTFT vs turn 1 and the cache hit rate (the threshold's verdicts); nothing when
/// neither run has conversations.
fn turn_changes(d: &RunDiff) -> Option<impl IntoView> {
    if d.turns.is_empty() {
        return None;
    }
    let rule = format!("no per-turn samples: changes under {} are the same", percent(d.threshold, false));
    Some(view! {
        <section class="section" id="diff-turns">
            <h2>"Conversations"</h2>
            <p class="section-sub">"Turns matched by context, sessions and turn number · B against A · " {rule}</p>
            <div class="table-wrap">
                <table class="measurements rate-diff" id="turn-diff-table">
                    <thead>
                        <tr>
                            <th scope="col">"Turn"</th>
                            {turns::TURN_FIGURES
                                .iter()
                                .map(|f| view! { <th scope="col">{turns::figure_label(f.0)}</th> })
                                .collect_view()}
                        </tr>
                    </thead>
                    <tbody>
                        {d.turns
                            .iter()
                            .map(|t| {
                                let both = t.in_a && t.in_b;
                                let side = match (t.in_a, t.in_b) {
                                    (true, false) => " (only in A)",
                                    (false, true) => " (only in B)",
                                    _ => "",
                                };
                                view! {
                                    <tr data-turn=t.turn.to_string()>
                                        <th scope="row">{format!("{}{side}", t.describe())}</th>
                                        {turns::TURN_FIGURES
                                            .iter()
                                            .map(|f| {
                                                rate_delta_td(rate_diff::delta_cell_with(
                                                    t.delta(f.0),
                                                    both,
                                                    f.0,
                                                    d.threshold,
                                                    turns::figure_text,
                                                ))
                                            })
                                            .collect_view()}
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    })
}

fn rate_delta_td(c: rate_diff::RateDeltaCell) -> impl IntoView {
    view! {
        <td
            class=format!("dm-cell d-{}", c.kind.id())
            class:light=c.light
            data-col=c.column
            data-kind=c.kind.id()
            style:background-color=c.background
            title=c.note.unwrap_or_else(|| c.kind.meaning().to_string())
        >
            <span class="dm-main">
                {(!c.kind.mark().is_empty()).then(|| view! { <span class="dm-mark">{c.kind.mark()} " "</span> })}
                {c.main}
            </span>
            {c.detail.map(|t| view! { <span class="dm-detail">{t}</span> })}
        </td>
    }
}

/// Every matched measurement, sortable by any column.
#[component]
fn MatchedTable(d: Memo<RunDiff>, selected: Memo<Column>) -> impl IntoView {
    let lines = Memo::new(move |_| d.with(run_diff::diff_lines));
    let sort: RwSignal<Option<(&'static str, bool)>> = RwSignal::new(None);
    let changes_only = RwSignal::new(false);
    let this_metric = RwSignal::new(false);
    let order = Signal::derive(move || {
        let col = this_metric.get().then(|| selected.get().id());
        lines.with(|l| run_diff::line_order(l, sort.get(), changes_only.get(), col.as_deref()))
    });
    view! {
        <section class="section" id="diff-all">
            <h2>"Every matched measurement"</h2>
            <div class="filters">
                <label class="filter">
                    <input type="checkbox" id="diff-changes-only" on:change=move |ev| changes_only.set(event_target_checked(&ev)) />
                    " changes only"
                </label>
                <label class="filter">
                    <input type="checkbox" id="diff-this-metric" on:change=move |ev| this_metric.set(event_target_checked(&ev)) />
                    " the selected metric only"
                </label>
                <span class="row-count" id="diff-row-count">
                    {move || format!("{} of {} figures", order.get().len(), lines.with(Vec::len))}
                </span>
            </div>
            <p class="hint">"Click a column header to sort by it; click again to reverse."</p>
            <div class="table-wrap">
                <table class="measurements" id="diff-table">
                    <thead>
                        <tr>{line_headers(sort)}</tr>
                    </thead>
                    <tbody>{line_rows(lines, order)}</tbody>
                </table>
            </div>
        </section>
    }
}

/// Whether a column of the matched-measurement table holds numbers.
fn numeric_line_column(id: &str) -> bool {
    !matches!(id, "phase" | "context" | "metric" | "verdict")
}

/// The header cells of the matched-measurement table: a click sorts by the column, a second
/// click reverses.
fn line_headers(sort: RwSignal<Option<(&'static str, bool)>>) -> impl IntoView {
    LINE_COLUMNS
        .iter()
        .map(|&(id, label)| {
            let aria = move || match sort.get() {
                Some((k, true)) if k == id => "ascending",
                Some((k, false)) if k == id => "descending",
                _ => "none",
            };
            view! {
                <th scope="col" class:num=numeric_line_column(id) data-col=id aria-sort=aria>
                    <button
                        type="button"
                        class="sort"
                        on:click=move |_| {
                            sort.update(|s| {
                                *s = match *s {
                                    Some((k, asc)) if k == id => Some((id, !asc)),
                                    _ => Some((id, true)),
                                }
                            })
                        }
                    >
                        {label}
                        <span class="sort-ind">
                            {move || match sort.get() {
                                Some((k, true)) if k == id => "▲",
                                Some((k, false)) if k == id => "▼",
                                _ => "",
                            }}
                        </span>
                    </button>
                </th>
            }
        })
        .collect_view()
}

/// The rows of the matched-measurement table, in `order`, each classed by its verdict.
fn line_rows(lines: Memo<Vec<run_diff::DiffLine>>, order: Signal<Vec<usize>>) -> impl IntoView {
    move || {
        lines.with(|ls| {
            order
                .get()
                .into_iter()
                .map(|i| {
                    let l = &ls[i];
                    view! {
                        <tr class=format!("v-{}", l.verdict.label())>
                            {LINE_COLUMNS
                                .iter()
                                .map(|&(id, _)| {
                                    view! { <td class:num=numeric_line_column(id) data-col=id>{run_diff::line_text(l, id)}</td> }
                                })
                                .collect_view()}
                        </tr>
                    }
                })
                .collect_view()
        })
    }
}
