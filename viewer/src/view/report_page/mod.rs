//! The report page: its shell ([`App`]: the top bar, notices, the run shown, the drop overlay,
//! the footer) and what it keeps while it runs; its view state is [`crate::view::view_state`]. A loaded run is drawn by
//! [`crate::view::run_report::Report`].
//!
//! - `runs`: which runs exist and where each stands (boot, fetch, local files);
//! - `topbar`: the run picker, the theme picker and the compare link;
//! - `run_table`: the site's runs as a sortable, filterable table with picks to compare (the
//!   front page of a site of two runs or more; the picked run's report follows it);
//! - `fleet`: the fleet view under the run table (every valid cell of the filtered runs, tok/s
//!   per GPU against per-user tok/s, each GPU type's frontier), from the site's `runs/cells.csv`;
//! - `files`: the file button and the drop zone.
//!
//! Every string from a results file is inserted as text (`{value}` in `view!`), never as HTML:
//! the page has no `inner_html`.

mod files;
mod fleet;
mod run_table;
mod runs;
mod topbar;

use crate::model::run_report;
use crate::view::run_report::Report;
use crate::view::view_state::{metric_from_url, page_view_state, ViewState};
use leptos::prelude::*;
use leptos::task::spawn_local;
use runs::{Entry, EntryState, State};

/// The whole page.
#[component]
pub fn App() -> impl IntoView {
    let state = State::new(metric_from_url());
    spawn_local(runs::boot(state));

    let (view_state, theme) = page_view_state();
    view_state.read_url();
    // Back and forward: the URL is the view.
    let _ = window_event_listener(leptos::ev::popstate, move |_| {
        state.metric.set(metric_from_url());
        view_state.read_url();
        state.select_from_url();
    });
    files::listen_for_drops(state);
    Effect::new(move |_| {
        let title = match state.current().map(|e| e.state) {
            Some(EntryState::Loaded(r)) => format!("{} — speedmatrix", run_report::title(&r)),
            _ => "speedmatrix report".to_string(),
        };
        document().set_title(&title);
    });

    view! {
        <topbar::TopBar state=state theme=theme />
        <main id="main">
            <Notices state=state />
            <run_table::RunTable state=state />
            <Shown state=state view_state=view_state />
        </main>
        <files::DropOverlay state=state />
        <footer class="footer">
            "speedmatrix viewer · files are read in your browser; nothing is uploaded · results schema v"
            {speedmatrix_schema::SCHEMA_VERSION}
        </footer>
    }
}

/// Problems that are not one run's (a broken index, an unreadable `results.json`).
#[component]
fn Notices(state: State) -> impl IntoView {
    view! {
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
    }
}

/// The run shown: loading, the welcome text when there is none, why it could not be loaded, or
/// its report.
#[component]
fn Shown(state: State, view_state: ViewState) -> impl IntoView {
    move || {
        if state.booting.get() && state.entries.with(Vec::is_empty) {
            return view! { <p class="loading">"Loading…"</p> }.into_any();
        }
        match state.current() {
            None if state.index.with(|ix| ix.len() > 1) => view! {
                <p class="hint" id="pick-hint">"Open a run's report by its name in the table, or pick 2 to compare."</p>
            }
            .into_any(),
            None => view! { <Welcome /> }.into_any(),
            Some(Entry { state: EntryState::Pending | EntryState::Loading, source, .. }) => {
                view! { <p class="loading">"Loading " {source} "…"</p> }.into_any()
            }
            Some(Entry { state: EntryState::Failed(message), source, .. }) => view! {
                <section class="load-error" role="alert">
                    <h1>"Could not load " <span class="source">{source}</span></h1>
                    <p class="error-message">{message}</p>
                    <p>"Open another results file with the button above, or drop one on this page."</p>
                </section>
            }
            .into_any(),
            Some(Entry { state: EntryState::Loaded(r), changed, .. }) => view! {
                {changed.map(|w| view! { <p class="notice integrity" id="integrity-warning" role="alert">{w}</p> })}
                <Report r=r metric=state.metric view=view_state />
            }
            .into_any(),
        }
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
