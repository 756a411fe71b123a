//! The Leptos components of the page. Loading decides which runs exist ([`App`]); a loaded run
//! is drawn by [`Report`]: title, cards, launch command, prefill table, heatmap and the
//! all-measurements table.
//!
//! Every string from a results file is inserted as text (`{value}` in `view!`), never as HTML:
//! this module has no `inner_html`.

use crate::chart_model::{self, ChartSpec, RunRef};
use crate::charts;
use crate::report::{self, Filters, HeatCell, TableColumn};
use crate::sources::{self, Fetched};
use leptos::prelude::*;
use leptos::task::spawn_local;
use speedmatrix_schema::registry::column;
use speedmatrix_schema::site::load_index;
use speedmatrix_schema::table::{rows, Phase};
use speedmatrix_schema::{export, load_results, CellStatus, PrefillMode, Results};
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

/// The view besides the run and the heatmap metric: table sort and filters, the theme and the
/// viewport. Sort, filters and columns live in the URL query (permalinks; see
/// [`report::VIEW_PARAMS`]) and come back on back/forward.
#[derive(Clone, Copy)]
pub struct ViewState {
    /// Table sort keys by column id, with ascending (`?sort=total_tps,-ttft_ms_p50`).
    pub sort: RwSignal<Vec<(String, bool)>>,
    /// Table filters (`?phase=&context=&concurrency=&status=`).
    pub filters: RwSignal<Filters>,
    /// Every registry column in the table (`?columns=all`).
    pub all_columns: RwSignal<bool>,
    /// Whether the dark theme is in force (the toggle, else the system's preference).
    pub dark: Signal<bool>,
    /// (width changes counter, devicePixelRatio): charts redraw when it changes.
    pub viewport: RwSignal<(u32, f64)>,
}

impl ViewState {
    /// A light view with default table state, not tied to the URL (component tests).
    pub fn detached() -> Self {
        ViewState {
            sort: RwSignal::new(Vec::new()),
            filters: RwSignal::new(Filters::default()),
            all_columns: RwSignal::new(false),
            dark: Signal::stored(false),
            viewport: RwSignal::new((0, 1.0)),
        }
    }

    /// Read sort, filters and columns from the page URL.
    fn read_url(self) {
        self.sort.set(sources::query("sort").map(|v| report::parse_sort(&v)).unwrap_or_default());
        self.filters.set(report::filters_from(sources::query));
        self.all_columns.set(sources::query("columns").as_deref() == Some("all"));
    }
}

/// The heatmap metric named in the URL (`?metric=`), else total tok/s.
fn metric_from_url() -> String {
    sources::query("metric")
        .filter(|m| report::heatmap_metrics().iter().any(|c| c.id() == *m || c.metric.id == m))
        .unwrap_or_else(|| report::DEFAULT_METRIC.to_string())
}

/// The theme choice kept in localStorage under this key: `light` or `dark` (absent: system).
const THEME_KEY: &str = "speedmatrix-theme";

fn entry_state(bytes: &[u8]) -> EntryState {
    match load_results(bytes) {
        Ok(r) => EntryState::Loaded(Arc::new(r)),
        Err(e) => EntryState::Failed(e.to_string()),
    }
}

impl State {
    /// Show run `i` and record it in the URL (`?show=SOURCE`) as a new history entry.
    fn pick(self, i: usize) {
        let source = self.entries.with_untracked(|e| e.get(i).map(|x| x.source.clone()));
        sources::push_query(&[("show", source)]);
        self.select(i);
    }

    /// Show the run the URL names (`?show=`), else the first.
    fn select_from_url(self) {
        let want = sources::query("show");
        let i = self.entries.with_untracked(|e| e.iter().position(|x| Some(&x.source) == want.as_ref()).unwrap_or(0));
        if self.entries.with_untracked(|e| !e.is_empty()) {
            self.select(i);
        }
    }

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
        state.select_from_url();
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
                    state.select_from_url();
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

/// The page-wide view: the theme (the remembered choice, else the system's preference, followed
/// live; set on `<html data-theme>`), the viewport (charts redraw on resize and devicePixelRatio
/// changes) and default table state. Returns it with the theme choice (`""`, `light`, `dark`).
pub(crate) fn page_view_state() -> (ViewState, RwSignal<String>) {
    // Theme: the remembered choice, else the system's preference (followed live).
    let theme = RwSignal::new(sources::stored(THEME_KEY).filter(|t| t == "light" || t == "dark").unwrap_or_default());
    let system_dark = RwSignal::new(sources::media_matches("(prefers-color-scheme: dark)"));
    sources::on_media_change("(prefers-color-scheme: dark)", move |m| system_dark.set(m));
    let dark = Signal::derive(move || match theme.get().as_str() {
        "dark" => true,
        "light" => false,
        _ => system_dark.get(),
    });
    Effect::new(move |_| {
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-theme", if dark.get() { "dark" } else { "light" });
        }
    });
    let viewport = RwSignal::new((0_u32, sources::device_pixel_ratio()));
    sources::on_dpr_change(move |r| viewport.update(|v| *v = (v.0, r)));
    let _ = window_event_listener(leptos::ev::resize, move |_| {
        viewport.update(|v| *v = (v.0.wrapping_add(1), sources::device_pixel_ratio()));
    });
    let view_state = ViewState {
        sort: RwSignal::new(Vec::new()),
        filters: RwSignal::new(Filters::default()),
        all_columns: RwSignal::new(false),
        dark,
        viewport,
    };
    (view_state, theme)
}

/// The whole page.
#[component]
pub fn App() -> impl IntoView {
    let metric = metric_from_url();
    let state = State {
        entries: RwSignal::new(Vec::new()),
        selected: RwSignal::new(None),
        notices: RwSignal::new(Vec::new()),
        booting: RwSignal::new(true),
        dragging: RwSignal::new(false),
        metric: RwSignal::new(metric),
    };
    spawn_local(boot(state));

    let (view_state, theme) = page_view_state();
    view_state.read_url();
    // Back and forward: the URL is the view.
    let _ = window_event_listener(leptos::ev::popstate, move |_| {
        state.metric.set(metric_from_url());
        view_state.read_url();
        state.select_from_url();
    });
    let on_theme = move |ev: web_sys::Event| {
        let v = event_target_value(&ev);
        let v = if v == "light" || v == "dark" { v } else { String::new() };
        sources::store(THEME_KEY, (!v.is_empty()).then_some(v.as_str()));
        theme.set(v);
    };

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
            <label class="theme-picker">
                "Theme "
                <select id="theme-select" on:change=on_theme>
                    {[("", "System"), ("light", "Light"), ("dark", "Dark")]
                        .into_iter()
                        .map(|(v, t)| view! { <option value=v selected=move || theme.get() == v>{t}</option> })
                        .collect_view()}
                </select>
            </label>
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
                        view! { <Report r=r metric=state.metric view=view_state /> }.into_any()
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
                                state.pick(i);
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
    /// Table state, theme and viewport (default: [`ViewState::detached`]).
    #[prop(optional)]
    view: Option<ViewState>,
) -> impl IntoView {
    let view = view.unwrap_or_else(ViewState::detached);
    let notes = r.run.notes.clone();
    let cards = report::cards(&r);
    // A link to a section (`#decode`, `#all`) scrolls there once the report is drawn.
    request_animation_frame(|| {
        // For the render benchmark (tests/benches/viewer_render.rs): the report is in the DOM.
        sources::mark("speedmatrix-report");
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
            <Gaps r=r.clone() />
            <Exports r=r.clone() />
            {r.engine.launch_command.clone().map(|cmd| view! { <LaunchCommand cmd=cmd /> })}
            <PrefillTable r=r.clone() />
            <DecodeHeatmap r=r.clone() metric=metric />
            <Charts r=r.clone() view=view />
            <AllMeasurements r=r view=view />
        </article>
    }
}

/// What the file lacks and why (missing figures, fields an import left out); nothing when it
/// lacks nothing.
#[component]
fn Gaps(r: Arc<Results>) -> impl IntoView {
    speedmatrix_schema::summary::gaps(&r)
        .into_iter()
        .map(|g| {
            view! {
                <section class="card gaps" data-card=g.title>
                    <h2>{g.title}</h2>
                    <p class="section-sub">{g.note}</p>
                    <dl>
                        {g.rows
                            .into_iter()
                            .map(|(k, v)| view! { <div class="item"><dt><code>{k}</code></dt><dd>{v}</dd></div> })
                            .collect_view()}
                    </dl>
                </section>
            }
        })
        .collect_view()
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
                                            {l.note.map(|n| view! { <span class="cell-note">{n}</span> })}
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

/// A context × concurrency table (the heatmap, and the diff view's matrices): a header row of
/// concurrency levels, one row per context, each cell drawn by `cell`.
pub(crate) fn matrix_table<C: 'static, V: IntoView + 'static>(
    id: &'static str,
    class: &'static str,
    concurrency: &[u32],
    rows: Vec<(String, Vec<C>)>,
    cell: fn(C) -> V,
) -> impl IntoView {
    view! {
        <div class="heatmap-wrap">
            <table class=class id=id>
                <thead>
                    <tr>
                        <th scope="col" class="corner">"Context"</th>
                        {concurrency.iter().map(|n| view! { <th scope="col" class="num">{n.to_string()}</th> }).collect_view()}
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|(label, cells)| {
                            view! {
                                <tr>
                                    <th scope="row">{label}</th>
                                    {cells.into_iter().map(cell).collect_view()}
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}

/// The `<option>`s of a metric selector: (id, label, has data) each, the selected one marked,
/// those without data disabled with `no_data` after the label.
pub(crate) fn metric_options(
    choices: Vec<(String, String, bool)>,
    selected: Memo<speedmatrix_schema::registry::Column>,
    no_data: &'static str,
) -> impl IntoView {
    choices
        .into_iter()
        .map(|(id, label, has)| {
            let is_selected = {
                let id = id.clone();
                move || selected.get().id() == id
            };
            let text = if has { label } else { format!("{label} — {no_data}") };
            view! { <option value=id selected=is_selected disabled=!has>{text}</option> }
        })
        .collect_view()
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
    let spoken = c.spoken();
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
            tabindex="0"
            aria-label=spoken
        >
            <span class="hm-value">{main}</span>
            {status_line.map(|s| view! { <span class="hm-status">{report::status_mark(s)} " " {s.label()}</span> })}
            {c.note.map(|n| view! { <span class="hm-status cell-note">{n}</span> })}
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
                            sources::push_query(&[("metric", (id != report::DEFAULT_METRIC).then(|| id.clone()))]);
                            metric.set(id);
                        }
                    >
                        {metric_options(choices, selected, "no data in this run")}
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
                    {matrix_table("heatmap", "heatmap", &h.concurrency, h.rows, heat_cell)}
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
fn AllMeasurements(r: Arc<Results>, view: ViewState) -> impl IntoView {
    let all_columns = view.all_columns;
    let filters = view.filters;
    let total = rows(&r).len();
    let (contexts, levels, statuses) = report::filter_choices(&r);
    let r_cols = r.clone();
    let cols = Memo::new(move |_| report::table_columns(&r_cols, all_columns.get()));
    let keys = Memo::new(move |_| cols.with(|cs| report::sort_keys(cs, &view.sort.get())));
    let r_order = r.clone();
    let order = move || cols.with(|cs| report::table_order(&r_order, cs, &keys.get(), &filters.get()));
    let order2 = order.clone();
    let r_body = r.clone();

    let select = |id: &'static str,
                  label: &'static str,
                  choices: Vec<(String, String)>,
                  set: fn(&mut Filters, &str),
                  param: &'static str| {
        // The option shown as selected follows the filter (a permalink or back/forward sets it).
        let current = move || {
            filters.with(|f| report::filter_params(f).into_iter().find(|(k, _)| *k == param).and_then(|(_, v)| v))
        };
        view! {
            <label class="filter">
                {label} " "
                <select id=id on:change=move |ev| {
                    let v = event_target_value(&ev);
                    filters.update(|f| set(f, &v));
                    sources::push_query(&filters.with_untracked(report::filter_params));
                }>
                    <option value="" selected=move || current().is_none()>"All"</option>
                    {choices
                        .into_iter()
                        .map(|(v, t)| {
                            let v2 = v.clone();
                            view! { <option value=v selected=move || current().as_deref() == Some(v2.as_str())>{t}</option> }
                        })
                        .collect_view()}
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
                {select(
                    "filter-phase",
                    "Phase",
                    phase_choices,
                    |f, v| {
                        f.phase = [Phase::Prefill, Phase::Decode].into_iter().find(|p| p.id() == v);
                    },
                    "phase",
                )}
                {select("filter-context", "Context", context_choices, |f, v| f.context = v.parse().ok(), "context")}
                {select(
                    "filter-concurrency",
                    "Requests at once",
                    level_choices,
                    |f, v| f.concurrency = v.parse().ok(),
                    "concurrency",
                )}
                {select(
                    "filter-status",
                    "Status",
                    status_choices,
                    |f, v| {
                        f.status = CellStatus::ALL.into_iter().find(|s| s.id() == v);
                    },
                    "status",
                )}
                <label class="filter">
                    <input
                        type="checkbox"
                        id="all-columns"
                        prop:checked=move || all_columns.get()
                        on:change=move |ev| {
                            let all = event_target_checked(&ev);
                            view.sort.set(Vec::new());
                            all_columns.set(all);
                            sources::push_query(&[("sort", None), ("columns", all.then(|| "all".to_string()))]);
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
                                                        let mut k = keys.get_untracked();
                                                        report::click_sort(&mut k, i, shift);
                                                        let ids = cols.with_untracked(|cs| report::sort_ids(cs, &k));
                                                        sources::push_query(&[("sort", report::encode_sort(&ids))]);
                                                        view.sort.set(ids);
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

/// Downloads of the run: the measurement table as CSV (the writer of `speedmatrix show
/// --format csv`) and the run's JSON.
#[component]
fn Exports(r: Arc<Results>) -> impl IntoView {
    let stem = report::file_stem(&r);
    let (r_csv, stem_csv) = (r.clone(), stem.clone());
    let csv = move |_| sources::download_text(&format!("{stem_csv}.csv"), "text/csv", &export::to_csv(&r_csv));
    let json = move |_| {
        // Results serialize as the schema writes them; the file reads back with load_results.
        if let Ok(mut text) = serde_json::to_string_pretty(&*r) {
            text.push('\n');
            sources::download_text(&format!("{stem}.json"), "application/json", &text);
        }
    };
    view! {
        <nav class="exports" aria-label="Downloads">
            "Download: "
            <button type="button" id="export-csv" on:click=csv>"Measurements (CSV)"</button>
            <button type="button" id="export-json" on:click=json>"Run (JSON)"</button>
            <a href="#charts">"Charts (PNG, under each chart)"</a>
        </nav>
    }
}

/// The charts of the run (see [`chart_model::charts`]), each with a hover and keyboard readout,
/// a table mirror and a PNG download.
#[component]
fn Charts(r: Arc<Results>, view: ViewState) -> impl IntoView {
    let specs = chart_model::charts(&[RunRef::single(&r)]);
    charts_section("charts", "Charts", "", specs, view, report::file_stem(&r))
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

/// The CSS height of a chart.
const CHART_HEIGHT: f64 = 340.0;

/// One chart: canvas (redrawn on theme, width or devicePixelRatio change), readout, table
/// mirror, PNG download.
#[component]
pub(crate) fn ChartView(spec: ChartSpec, view: ViewState, stem: String) -> impl IntoView {
    let spec = Arc::new(spec);
    let canvas: NodeRef<leptos::html::Canvas> = NodeRef::new();
    let hits = StoredValue::new(Vec::<charts::Hit>::new());
    let readout = RwSignal::new(String::new());
    let cursor = StoredValue::new(None::<usize>);
    let s_draw = spec.clone();
    Effect::new(move |_| {
        let dark = view.dark.get();
        let (_, dpr) = view.viewport.get();
        let Some(c) = canvas.get() else { return };
        // The bitmap covers the canvas' content box exactly (CSS pixels × ratio): no resampling.
        let width = f64::from(c.client_width()).max(280.0);
        let height = f64::from(c.client_height()).max(120.0);
        let palette = charts::palette(dark);
        match charts::draw(&c, &s_draw, &palette, width, height, dpr) {
            Ok(h) => {
                hits.set_value(h);
                sources::mark("speedmatrix-chart");
            }
            Err(e) => readout.set(format!("The chart could not be drawn: {e}")),
        }
    });
    let s_read = spec.clone();
    let say = StoredValue::new(move |i: usize| {
        let Some(h) = hits.with_value(|h| h.get(i).copied()) else { return };
        let s = &s_read.series[h.series];
        let p = &s.points[h.point];
        let who = if p.label.starts_with(&s.name) { p.label.clone() } else { format!("{} — {}", s.name, p.label) };
        let (x_label, y_label) = (&s_read.x.label, &s_read.y.label);
        readout.set(format!("{who}: {y_label} {}, {x_label} {} ({})", p.y_text, p.x_text, p.status.label()));
        cursor.set_value(Some(i));
    });
    let on_move = move |ev: web_sys::MouseEvent| {
        // Canvas CSS pixels: from the client position, less the canvas' box and border.
        let Some(c) = canvas.get_untracked() else { return };
        let rect = c.get_bounding_client_rect();
        let x = f64::from(ev.client_x()) - rect.left() - f64::from(c.client_left());
        let y = f64::from(ev.client_y()) - rect.top() - f64::from(c.client_top());
        let pts: Vec<(f64, f64)> = hits.with_value(|h| h.iter().map(|h| (h.x, h.y)).collect());
        if let Some(i) = chart_model::nearest(&pts, x, y, 24.0) {
            say.with_value(|f| f(i));
        }
    };
    let on_key = move |ev: web_sys::KeyboardEvent| {
        let n = hits.with_value(Vec::len);
        if n == 0 {
            return;
        }
        let now = cursor.get_value();
        let next = match ev.key().as_str() {
            "ArrowRight" | "ArrowDown" => now.map_or(0, |i| (i + 1) % n),
            "ArrowLeft" | "ArrowUp" => now.map_or(n - 1, |i| (i + n - 1) % n),
            "Home" => 0,
            "End" => n - 1,
            _ => return,
        };
        ev.prevent_default();
        say.with_value(|f| f(next));
    };
    let png_name = format!("{stem}-{}.png", spec.id);
    let png = move |_| {
        if let Some(c) = canvas.get_untracked() {
            if let Ok(url) = c.to_data_url() {
                sources::download_url(&png_name, &url);
            }
        }
    };
    let id = spec.id;
    let rows = spec.mirror_rows();
    let described = format!("{}. {} Table below.", spec.title, spec.caption);
    let x_head = spec.x.label.clone();
    let y_head = spec.y.label.clone();
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
            <p class="readout" id=format!("readout-{id}") aria-live="polite">{move || readout.get()}</p>
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
        </figure>
    }
}
