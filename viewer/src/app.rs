//! The Leptos components of the page. Loading decides which runs exist ([`App`]); a loaded run
//! is drawn by [`Report`]: title, cards, launch command, prefill table, heatmap and the
//! all-measurements table.
//!
//! Every string from a results file is inserted as text (`{value}` in `view!`), never as HTML:
//! this module has no `inner_html`.

use crate::report::{self, Filters, HeatCell, SortKey, TableColumn};
use crate::sources::{self, Fetched};
use leptos::prelude::*;
use leptos::task::spawn_local;
use speedmatrix_schema::registry::column;
use speedmatrix_schema::site::load_index;
use speedmatrix_schema::table::{rows, Phase};
use speedmatrix_schema::{load_results, CellStatus, PrefillMode, Results};
use std::sync::Arc;

/// Where a run of the picker stands.
#[derive(Debug, Clone, PartialEq)]
enum EntryState {
    /// Known (from `?run=` or the index), not fetched yet.
    Pending,
    /// Being fetched.
    Loading,
    /// Loaded and valid.
    Loaded(Arc<Results>),
    /// Could not be fetched or is not a valid results file: the one-line reason.
    Failed(String),
}

/// One run the page can show.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    /// What the picker shows.
    label: String,
    /// Where it came from: a URL as written, or a local file name.
    source: String,
    /// The URL to fetch (`None` for local files).
    url: Option<String>,
    /// Its state.
    state: EntryState,
}

/// The page's state (all `Copy` signal handles).
#[derive(Clone, Copy)]
struct State {
    entries: RwSignal<Vec<Entry>>,
    selected: RwSignal<Option<usize>>,
    /// Problems that are not one run's: a broken index, an unreadable `results.json`.
    notices: RwSignal<Vec<String>>,
    booting: RwSignal<bool>,
    dragging: RwSignal<bool>,
    /// The heatmap metric (a registry column id), kept in the URL as `?metric=`.
    metric: RwSignal<String>,
}

fn entry_state(bytes: &[u8]) -> EntryState {
    match load_results(bytes) {
        Ok(r) => EntryState::Loaded(Arc::new(r)),
        Err(e) => EntryState::Failed(e.to_string()),
    }
}

impl State {
    fn select(self, i: usize) {
        self.selected.set(Some(i));
        let pending =
            self.entries.with_untracked(|e| e.get(i).map(|x| (x.state == EntryState::Pending, x.url.clone())));
        let Some((true, Some(url))) = pending else { return };
        self.entries.update(|e| e[i].state = EntryState::Loading);
        spawn_local(async move {
            let state = match sources::fetch_bytes(&url).await {
                Fetched::Body(bytes) => entry_state(&bytes),
                Fetched::NotFound => EntryState::Failed("HTTP 404 Not Found".into()),
                Fetched::Failed(e) => EntryState::Failed(e),
            };
            self.entries.update(|e| {
                if let EntryState::Loaded(r) = &state {
                    if e[i].label == e[i].source {
                        e[i].label = report::title(r);
                    }
                }
                e[i].state = state;
            });
        });
    }

    /// Add a run read from a local file and show it.
    fn add_local(self, name: String, bytes: Result<Vec<u8>, String>) {
        let state = match bytes {
            Ok(b) => entry_state(&b),
            Err(e) => EntryState::Failed(format!("cannot read the file: {e}")),
        };
        let label = match &state {
            EntryState::Loaded(r) => format!("{} ({name})", report::title(r)),
            _ => name.clone(),
        };
        let mut index = 0;
        self.entries.update(|e| {
            e.push(Entry { label, source: name, url: None, state });
            index = e.len() - 1;
        });
        self.selected.set(Some(index));
    }

    fn open_files(self, files: Option<web_sys::FileList>) {
        let Some(files) = files else { return };
        for i in 0..files.length() {
            if let Some(file) = files.get(i) {
                spawn_local(async move {
                    let bytes = sources::file_bytes(&file).await;
                    self.add_local(file.name(), bytes);
                });
            }
        }
    }

    fn notice(self, text: String) {
        self.notices.update(|n| n.push(text));
    }
}

/// Find the runs: `?run=URL` (repeatable), else `runs/index.json`, else `results.json`.
async fn boot(state: State) {
    let runs = sources::query_all("run");
    let protocol = web_sys::window().and_then(|w| w.location().protocol().ok()).unwrap_or_default();
    if !runs.is_empty() {
        let entries = runs
            .into_iter()
            .map(|u| Entry { label: u.clone(), source: u.clone(), url: Some(u), state: EntryState::Pending })
            .collect();
        state.entries.set(entries);
        state.select(0);
    } else if protocol != "file:" {
        let mut found_index = false;
        match sources::fetch_bytes("runs/index.json").await {
            Fetched::Body(bytes) => match load_index(&bytes) {
                Ok(index) if !index.runs.is_empty() => {
                    found_index = true;
                    let entries = index
                        .runs
                        .into_iter()
                        .map(|r| {
                            let mut label = r.label.clone();
                            if let Some(s) = r.started_at.as_deref() {
                                label.push_str(&format!(" · {s}"));
                            }
                            let source = format!("runs/{}", r.file);
                            Entry {
                                label,
                                url: Some(sources::resolve(&r.file, "runs/index.json")),
                                source,
                                state: EntryState::Pending,
                            }
                        })
                        .collect();
                    state.entries.set(entries);
                    state.select(0);
                }
                Ok(_) => state.notice("runs/index.json lists no runs".into()),
                Err(e) => state.notice(e.to_string()),
            },
            Fetched::NotFound => {}
            Fetched::Failed(e) => state.notice(format!("runs/index.json: {e}")),
        }
        if !found_index {
            match sources::fetch_bytes("results.json").await {
                Fetched::Body(bytes) => state.add_local("results.json".into(), Ok(bytes)),
                Fetched::NotFound => {}
                Fetched::Failed(e) => state.notice(format!("results.json: {e}")),
            }
        }
    }
    state.booting.set(false);
}

/// The whole page.
#[component]
pub fn App() -> impl IntoView {
    let metric = sources::query("metric")
        .filter(|m| report::heatmap_metrics().iter().any(|c| c.id() == *m || c.metric.id == m))
        .unwrap_or_else(|| report::DEFAULT_METRIC.to_string());
    let state = State {
        entries: RwSignal::new(Vec::new()),
        selected: RwSignal::new(None),
        notices: RwSignal::new(Vec::new()),
        booting: RwSignal::new(true),
        dragging: RwSignal::new(false),
        metric: RwSignal::new(metric),
    };
    spawn_local(boot(state));

    // Drag and drop anywhere on the page.
    let _ = window_event_listener(leptos::ev::dragover, move |ev| {
        ev.prevent_default();
        state.dragging.set(true);
    });
    let _ = window_event_listener(leptos::ev::dragleave, move |ev| {
        if ev.related_target().is_none() {
            state.dragging.set(false);
        }
    });
    let _ = window_event_listener(leptos::ev::drop, move |ev| {
        ev.prevent_default();
        state.dragging.set(false);
        state.open_files(ev.data_transfer().and_then(|d| d.files()));
    });

    let current = move || {
        let i = state.selected.get()?;
        state.entries.with(|e| e.get(i).cloned())
    };
    Effect::new(move |_| {
        let title = match current().map(|e| e.state) {
            Some(EntryState::Loaded(r)) => format!("{} — speedmatrix", report::title(&r)),
            _ => "speedmatrix report".to_string(),
        };
        document().set_title(&title);
    });

    let on_file = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        state.open_files(input.files());
        input.set_value("");
    };

    view! {
        <header class="topbar">
            <span class="brand">"speedmatrix"</span>
            <RunPicker state=state />
            <a class="compare-link" id="compare-link" href="?compare">"Compare two runs"</a>
            <label class="file-button">
                "Open results file…"
                <input id="file-input" type="file" accept=".json,application/json" multiple on:change=on_file />
            </label>
        </header>
        <main id="main">
            <ul class="notices" role="alert">
                {move || {
                    state
                        .notices
                        .get()
                        .into_iter()
                        .map(|n| view! { <li class="notice">{n}</li> })
                        .collect_view()
                }}
            </ul>
            {move || {
                if state.booting.get() && state.entries.with(Vec::is_empty) {
                    return view! { <p class="loading">"Loading…"</p> }.into_any();
                }
                match current() {
                    None => view! { <Welcome /> }.into_any(),
                    Some(Entry { state: EntryState::Pending | EntryState::Loading, source, .. }) => {
                        view! { <p class="loading">"Loading " {source} "…"</p> }.into_any()
                    }
                    Some(Entry { state: EntryState::Failed(message), source, .. }) => {
                        view! {
                            <section class="load-error" role="alert">
                                <h1>"Could not load " <span class="source">{source}</span></h1>
                                <p class="error-message">{message}</p>
                                <p>"Open another results file with the button above, or drop one on this page."</p>
                            </section>
                        }
                            .into_any()
                    }
                    Some(Entry { state: EntryState::Loaded(r), .. }) => {
                        view! { <Report r=r metric=state.metric /> }.into_any()
                    }
                }
            }}
        </main>
        <div class="drop-overlay" class:show=move || state.dragging.get()>
            <p>"Drop a results file to open it"</p>
        </div>
        <footer class="footer">
            "speedmatrix viewer · files are read in your browser; nothing is uploaded · results schema v"
            {speedmatrix_schema::SCHEMA_VERSION}
        </footer>
    }
}

/// The run selector, when there is more than one run.
#[component]
fn RunPicker(state: State) -> impl IntoView {
    move || {
        let entries = state.entries.get();
        (entries.len() > 1).then(|| {
            let selected = state.selected.get();
            view! {
                <label class="run-picker">
                    "Run "
                    <select
                        id="run-select"
                        on:change=move |ev| {
                            if let Ok(i) = event_target_value(&ev).parse::<usize>() {
                                state.select(i);
                            }
                        }
                    >
                        {entries
                            .into_iter()
                            .enumerate()
                            .map(|(i, e)| {
                                view! {
                                    <option value=i.to_string() selected=selected == Some(i)>
                                        {e.label}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
            }
        })
    }
}

/// What the page shows before any run is loaded.
#[component]
fn Welcome() -> impl IntoView {
    view! {
        <section class="welcome">
            <h1>"speedmatrix report viewer"</h1>
            <p>
                "Open a speedmatrix results file (JSON) with the button above, or drop it anywhere on this page. "
                "The file is read in your browser; nothing is uploaded."
            </p>
            <p>
                "A published site lists its runs in runs/index.json; a results.json beside this page opens by itself; "
                "add ?run=URL to open a results file by its address."
            </p>
        </section>
    }
}

/// The report of one run: title, cards, launch command, prefill table, heatmap and the
/// all-measurements table.
#[component]
pub fn Report(
    /// The run.
    r: Arc<Results>,
    /// The heatmap's metric, a registry column id (`total_tps`, `ttft_ms_p50`).
    metric: RwSignal<String>,
) -> impl IntoView {
    let notes = r.run.notes.clone();
    let cards = report::cards(&r);
    // A link to a section (`#decode`, `#all`) scrolls there once the report is drawn.
    request_animation_frame(|| {
        let hash = window().location().hash().unwrap_or_default();
        if let Some(el) =
            hash.strip_prefix('#').filter(|h| !h.is_empty()).and_then(|id| document().get_element_by_id(id))
        {
            el.scroll_into_view();
        }
    });
    view! {
        <article class="report">
            <p class="eyebrow">"Speed test matrix"</p>
            <h1 id="run-title">{report::title(&r)}</h1>
            <p class="subtitle" id="run-subtitle">{report::subtitle(&r)}</p>
            {notes.map(|n| view! {
                <details class="run-notes">
                    <summary>"Notes"</summary>
                    <p>{n}</p>
                </details>
            })}
            <div class="cards">
                {cards
                    .into_iter()
                    .map(|c| {
                        view! {
                            <section class="card" data-card=c.title>
                                <h2>{c.title}</h2>
                                <dl>
                                    {c
                                        .items
                                        .into_iter()
                                        .map(|(k, v)| view! { <div class="item"><dt>{k}</dt><dd>{v}</dd></div> })
                                        .collect_view()}
                                </dl>
                            </section>
                        }
                    })
                    .collect_view()}
            </div>
            {r.engine.launch_command.clone().map(|cmd| view! { <LaunchCommand cmd=cmd /> })}
            <PrefillTable r=r.clone() />
            <DecodeHeatmap r=r.clone() metric=metric />
            <AllMeasurements r=r />
        </article>
    }
}

/// The launch command with a copy button.
#[component]
fn LaunchCommand(cmd: String) -> impl IntoView {
    let label = RwSignal::new("Copy".to_string());
    let pre: NodeRef<leptos::html::Pre> = NodeRef::new();
    let text = cmd.clone();
    let copy = move |_| {
        let text = text.clone();
        let el: Option<web_sys::Element> = pre.get().map(Into::into);
        spawn_local(async move {
            label.set(sources::copy_text(&text, el).await);
        });
    };
    view! {
        <section class="card launch" data-card="Launch command">
            <div class="card-head">
                <h2>"Launch command"</h2>
                <button type="button" class="copy" id="copy-launch" on:click=copy>{move || label.get()}</button>
            </div>
            <pre id="launch-command" node_ref=pre><code>{cmd}</code></pre>
        </section>
    }
}

/// Prefill: context, prompt tok/s (with a bar), TTFT.
#[component]
fn PrefillTable(r: Arc<Results>) -> impl IntoView {
    let lines = report::prefill_lines(&r);
    let with_tokens = r.prefill.iter().any(|p| p.prompt_tokens.is_some());
    (!lines.is_empty()).then(|| {
        view! {
            <section class="section" id="prefill">
                <h2>"Prefill"</h2>
                <p class="section-sub">"prompt tok/s by context length"</p>
                <table class="prefill">
                    <thead>
                        <tr>
                            <th scope="col">"Context"</th>
                            <th scope="col" class="num">"Prompt tok/s"</th>
                            <th scope="col" class="num">"TTFT"</th>
                            {with_tokens.then(|| view! { <th scope="col" class="num">"Prompt tokens"</th> })}
                        </tr>
                    </thead>
                    <tbody>
                        {lines
                            .into_iter()
                            .map(|l| {
                                let width = format!("{:.1}%", l.share * 100.0);
                                view! {
                                    <tr class=format!("st-{}", l.status.id()) title=l.reason.clone().unwrap_or_default()>
                                        <th scope="row">{l.context}</th>
                                        <td class="num bar-cell">
                                            <span class="bar" style:width=width></span>
                                            <span class="bar-value">{l.prompt_tps}</span>
                                        </td>
                                        <td class="num">{l.ttft} " TTFT"</td>
                                        {with_tokens.then(|| view! { <td class="num">{l.prompt_tokens.clone()}</td> })}
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </section>
        }
    })
}

/// One heatmap cell (also drawn by the diff view's side-by-side matrices).
pub(crate) fn heat_cell(c: HeatCell) -> impl IntoView {
    let status = c.status;
    let class = match status {
        None => "hm-cell st-none".to_string(),
        Some(s) => format!("hm-cell st-{}", s.id()),
    };
    let light = c.light_text();
    let background = c.background();
    let tip = match (status, &c.reason) {
        (Some(s), Some(why)) => Some(format!("{}: {why}", s.label())),
        (Some(s), None) if s != CellStatus::Valid => Some(format!("{}: {}", s.label(), report::status_meaning(s))),
        _ => None,
    };
    let focusable = tip.is_some();
    let main = match (status, c.value) {
        (_, Some(v)) => v,
        (None, None) => report::DASH.to_string(),
        (Some(s), None) if s.is_measured() => report::DASH.to_string(),
        (Some(s), None) => format!("{} {}", report::status_mark(s), s.label()),
    };
    let status_line = status.filter(|s| *s != CellStatus::Valid && s.is_measured());
    view! {
        <td
            class=class
            class:light=light
            data-context=c.context
            data-concurrency=c.concurrency.to_string()
            style:background-color=background
            tabindex=focusable.then_some("0")
        >
            <span class="hm-value">{main}</span>
            {status_line.map(|s| view! { <span class="hm-status">{report::status_mark(s)} " " {s.label()}</span> })}
            {c.ttft.map(|t| view! { <span class="hm-ttft">{t}</span> })}
            {tip.map(|t| view! { <span class="hm-tip" role="tooltip">{t}</span> })}
        </td>
    }
}

/// Sustained decode: the context × concurrency heatmap with a metric selector and a legend.
#[component]
fn DecodeHeatmap(r: Arc<Results>, metric: RwSignal<String>) -> impl IntoView {
    if r.decode.is_empty() {
        return None;
    }
    let total = column(report::DEFAULT_METRIC).expect("total_tps is in the registry");
    let options = report::heatmap_metrics();
    let selected = Memo::new(move |_| column(&metric.get()).filter(|c| options.contains(c)).unwrap_or(total));
    let choices: Vec<(String, String, bool)> = report::heatmap_metrics()
        .iter()
        .map(|c| (c.id(), report::metric_option_label(c), report::has_decode_data(&r, c)))
        .collect();
    let warmup_note = r.config.prefill_mode == Some(PrefillMode::DecodeWarmup);
    let r2 = r.clone();
    let statuses_present: Vec<CellStatus> =
        CellStatus::ALL.into_iter().filter(|s| r.decode.iter().any(|c| c.status == *s)).collect();
    Some(view! {
        <section class="section" id="decode">
            <h2>"Sustained decode"</h2>
            <div class="section-bar">
                <p class="section-sub">
                    {move || report::metric_option_label(&selected.get())}
                    " · rows are context length, columns are simultaneous requests"
                </p>
                <label class="metric-picker">
                    "Metric "
                    <select
                        id="heatmap-metric"
                        on:change=move |ev| {
                            let id = event_target_value(&ev);
                            sources::set_query("metric", (id != report::DEFAULT_METRIC).then_some(id.as_str()));
                            metric.set(id);
                        }
                    >
                        {choices
                            .into_iter()
                            .map(|(id, label, has)| {
                                let is_selected = {
                                    let id = id.clone();
                                    move || selected.get().id() == id
                                };
                                let text = if has { label } else { format!("{label} — no data in this run") };
                                view! {
                                    <option value=id selected=is_selected disabled=!has>
                                        {text}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
            </div>
            {move || {
                let h = report::heatmap(&r2, &selected.get());
                let (lo, hi) = h.scale_ends.clone().unwrap_or_else(|| (report::DASH.into(), report::DASH.into()));
                let direction = match (h.darker_is_better, h.log_scale) {
                    (Some(_), true) => "darker is better · logarithmic scale",
                    (Some(_), false) => "darker is better",
                    (None, true) => "darker is higher · logarithmic scale",
                    (None, false) => "darker is higher",
                };
                view! {
                    <div class="heatmap-wrap">
                        <table class="heatmap" id="heatmap">
                            <thead>
                                <tr>
                                    <th scope="col" class="corner">"Context"</th>
                                    {h
                                        .concurrency
                                        .iter()
                                        .map(|n| view! { <th scope="col" class="num">{n.to_string()}</th> })
                                        .collect_view()}
                                </tr>
                            </thead>
                            <tbody>
                                {h
                                    .rows
                                    .into_iter()
                                    .map(|(label, cells)| {
                                        view! {
                                            <tr>
                                                <th scope="row">{label}</th>
                                                {cells.into_iter().map(heat_cell).collect_view()}
                                            </tr>
                                        }
                                    })
                                    .collect_view()}
                            </tbody>
                        </table>
                    </div>
                    <div class="legend" id="heatmap-legend">
                        <div class="scale">
                            <span class="scale-lo">{lo}</span>
                            <span class="scale-bar" style:background=report::scale_gradient()></span>
                            <span class="scale-hi">{hi}</span>
                            <span class="scale-dir">{direction}</span>
                        </div>
                    </div>
                }
            }}
            <ul class="marks">
                {[CellStatus::RequestsQueued, CellStatus::OverCapacity, CellStatus::Error, CellStatus::NotRun]
                    .into_iter()
                    .map(|s| {
                        let present = statuses_present.contains(&s);
                        view! {
                            <li class:absent=!present>
                                <span class=format!("swatch st-{}", s.id())>{report::status_mark(s)}</span>
                                <b>{s.label()} ":"</b>
                                " "
                                {report::status_meaning(s)}
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
            {warmup_note
                .then(|| {
                    view! {
                        <p class="note">
                            "TTFT is measured after the benchmark warms the server's prompt cache, so it mostly excludes prefill."
                        </p>
                    }
                })}
        </section>
    })
}

/// All measurements: sortable on every column, filterable.
#[component]
fn AllMeasurements(r: Arc<Results>) -> impl IntoView {
    let all_columns = RwSignal::new(false);
    let keys: RwSignal<Vec<SortKey>> = RwSignal::new(Vec::new());
    let filters: RwSignal<Filters> = RwSignal::new(Filters::default());
    let total = rows(&r).len();
    let (contexts, levels, statuses) = report::filter_choices(&r);
    let r_cols = r.clone();
    let cols = Memo::new(move |_| report::table_columns(&r_cols, all_columns.get()));
    let r_order = r.clone();
    let order = move || cols.with(|cs| report::table_order(&r_order, cs, &keys.get(), &filters.get()));
    let order2 = order.clone();
    let r_body = r.clone();

    let select =
        |id: &'static str, label: &'static str, choices: Vec<(String, String)>, set: fn(&mut Filters, &str)| {
            view! {
                <label class="filter">
                    {label} " "
                    <select id=id on:change=move |ev| {
                        let v = event_target_value(&ev);
                        filters.update(|f| set(f, &v));
                    }>
                        <option value="">"All"</option>
                        {choices.into_iter().map(|(v, t)| view! { <option value=v>{t}</option> }).collect_view()}
                    </select>
                </label>
            }
        };
    let phase_choices = vec![
        (Phase::Prefill.id().to_string(), Phase::Prefill.label().to_string()),
        (Phase::Decode.id().to_string(), Phase::Decode.label().to_string()),
    ];
    let context_choices = contexts.iter().map(|(t, l)| (t.to_string(), l.clone())).collect();
    let level_choices = levels.iter().map(|n| (n.to_string(), n.to_string())).collect();
    let status_choices = statuses.iter().map(|s| (s.id().to_string(), s.label().to_string())).collect();

    view! {
        <section class="section" id="all">
            <h2>"All measurements"</h2>
            <p class="section-sub">
                "Latencies are medians. Total tok/s is output across all simultaneous requests (prompt tok/s on prefill rows)."
            </p>
            <div class="filters">
                {select("filter-phase", "Phase", phase_choices, |f, v| {
                    f.phase = [Phase::Prefill, Phase::Decode].into_iter().find(|p| p.id() == v);
                })}
                {select("filter-context", "Context", context_choices, |f, v| f.context = v.parse().ok())}
                {select("filter-concurrency", "Requests at once", level_choices, |f, v| f.concurrency = v.parse().ok())}
                {select("filter-status", "Status", status_choices, |f, v| {
                    f.status = CellStatus::ALL.into_iter().find(|s| s.id() == v);
                })}
                <label class="filter">
                    <input
                        type="checkbox"
                        id="all-columns"
                        on:change=move |ev| {
                            keys.set(Vec::new());
                            all_columns.set(event_target_checked(&ev));
                        }
                    />
                    " every column"
                </label>
                <span class="row-count" id="row-count">{move || format!("{} of {total} rows", order2().len())}</span>
            </div>
            <p class="hint">"Click a column header to sort by it; shift-click adds it as the next sort key."</p>
            <div class="table-wrap">
                <table class="measurements" id="measurements">
                    <thead>
                        <tr>
                            {move || {
                                let k = keys.get();
                                cols.get()
                                    .into_iter()
                                    .enumerate()
                                    .map(|(i, c)| {
                                        let pos = k.iter().position(|x| x.column == i);
                                        let sort = pos.map(|p| (p, k[p].ascending));
                                        let aria = match sort {
                                            Some((_, true)) => "ascending",
                                            Some((_, false)) => "descending",
                                            None => "none",
                                        };
                                        let indicator = match sort {
                                            Some((p, asc)) if k.len() > 1 => {
                                                format!("{}{}", if asc { "▲" } else { "▼" }, p + 1)
                                            }
                                            Some((_, asc)) => (if asc { "▲" } else { "▼" }).to_string(),
                                            None => String::new(),
                                        };
                                        view! {
                                            <th scope="col" class:num=c.numeric() data-col=c.id() aria-sort=aria>
                                                <button
                                                    type="button"
                                                    class="sort"
                                                    on:click=move |ev: web_sys::MouseEvent| {
                                                        let shift = ev.shift_key();
                                                        keys.update(|k| report::click_sort(k, i, shift));
                                                    }
                                                >
                                                    {c.header()}
                                                    <span class="sort-ind">{indicator}</span>
                                                </button>
                                            </th>
                                        }
                                    })
                                    .collect_view()
                            }}
                        </tr>
                    </thead>
                    <tbody>
                        {move || {
                            let cs = cols.get();
                            let rs = rows(&r_body);
                            order()
                                .into_iter()
                                .map(|i| {
                                    let row = rs[i];
                                    let reason = row.reason().map(str::to_string);
                                    view! {
                                        <tr class=format!("st-{}", row.status().id())>
                                            {cs
                                                .iter()
                                                .map(|c| {
                                                    let title = match c {
                                                        TableColumn::Status => reason.clone(),
                                                        _ => None,
                                                    };
                                                    view! {
                                                        <td class:num=c.numeric() data-col=c.id() title=title>
                                                            {c.text(&row)}
                                                        </td>
                                                    }
                                                })
                                                .collect_view()}
                                        </tr>
                                    }
                                })
                                .collect_view()
                        }}
                    </tbody>
                </table>
            </div>
        </section>
    }
}
