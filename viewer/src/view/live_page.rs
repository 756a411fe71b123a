//! The live page: a run followed while it is measured (`speedmatrix run --serve`, `speedmatrix
//! serve --watch RUN.json`). The server marks the page with
//! `<meta name="speedmatrix-live" content="live.json">`; the page then polls that document at
//! most once a second with `If-None-Match` (an unchanged run answers `304` with no body) and
//! draws the whole plan from the start — unmeasured cells as "Not run", the plan's over-capacity
//! cells, the cell being measured marked with its phase — above a banner that says where the
//! run stands ([`speedmatrix_schema::progress`], the same words as the terminal bar). Polling
//! stops once the run's status is final; a run that failed or was interrupted says why.
//! docs/ARCHITECTURE.md, "The live path", says why polling rather than server-sent events.

use crate::model::live_feed::{parse, LiveDoc};
use crate::view::browser::js_error_text;
use crate::view::run_report::Report;
use crate::view::view_state::{metric_from_url, page_view_state};
use leptos::prelude::*;
use leptos::task::spawn_local;
use speedmatrix_schema::progress::{progress, Current, Measuring};
use speedmatrix_schema::{Results, RunStatus};
use std::sync::Arc;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// How long the page waits between two polls, ms (at most one redraw a second).
const POLL_MS: i32 = 1000;

/// The live document's address when the server marked this page live, else `None`.
pub fn live_url() -> Option<String> {
    let doc = web_sys::window()?.document()?;
    let meta = doc.query_selector("meta[name=\"speedmatrix-live\"]").ok()??;
    meta.get_attribute("content").filter(|c| !c.is_empty())
}

/// What one poll gave.
enum Polled {
    /// A new state and its ETag.
    Changed(Vec<u8>, Option<String>),
    /// The same state as last time (`304`).
    Same,
    /// Nothing: the reason in one line.
    Failed(String),
}

/// GET `url` with `If-None-Match: etag`, past the HTTP cache (so a `304` reaches the page).
async fn poll_once(url: &str, etag: Option<&str>) -> Polled {
    match poll_inner(url, etag).await {
        Ok(p) => p,
        Err(e) => Polled::Failed(js_error_text(&e)),
    }
}

async fn poll_inner(url: &str, etag: Option<&str>) -> Result<Polled, JsValue> {
    let init = web_sys::RequestInit::new();
    init.set_cache(web_sys::RequestCache::NoStore);
    let request = web_sys::Request::new_with_str_and_init(url, &init)?;
    if let Some(tag) = etag {
        request.headers().set("If-None-Match", tag)?;
    }
    let window = web_sys::window().ok_or("no window")?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_request(&request)).await?.dyn_into()?;
    if response.status() == 304 {
        return Ok(Polled::Same);
    }
    if !response.ok() {
        return Ok(Polled::Failed(format!("HTTP {} {}", response.status(), response.status_text())));
    }
    let tag = response.headers().get("etag").ok().flatten();
    let buffer = JsFuture::from(response.array_buffer()?).await?;
    Ok(Polled::Changed(js_sys::Uint8Array::new(&buffer).to_vec(), tag))
}

/// Wait `ms` milliseconds.
async fn sleep_ms(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = JsFuture::from(promise).await;
}

/// Poll `url` until the run's status is final: `doc` gets every new state, `results` only a
/// changed results file (the report below the banner is redrawn only then), `problem` why the
/// last poll failed.
async fn follow(
    url: String,
    doc: RwSignal<Option<LiveDoc>>,
    results: RwSignal<Option<Arc<Results>>>,
    problem: RwSignal<Option<String>>,
) {
    let mut etag: Option<String> = None;
    loop {
        match poll_once(&url, etag.as_deref()).await {
            Polled::Same => problem.set(None),
            Polled::Changed(bytes, tag) => match parse(&bytes) {
                Ok(d) => {
                    etag = tag;
                    problem.set(None);
                    if results.with_untracked(|r| r.as_deref() != Some(&*d.results)) {
                        results.set(Some(d.results.clone()));
                    }
                    let over = d.results.run.status != RunStatus::Running;
                    doc.set(Some(d));
                    if over {
                        return;
                    }
                }
                Err(e) => problem.set(Some(e)),
            },
            Polled::Failed(e) => problem.set(Some(format!("the run's server does not answer ({e}); trying again"))),
        }
        sleep_ms(POLL_MS).await;
    }
}

/// The live page: the banner and the report of the run so far.
#[component]
pub fn LivePage(
    /// The live document's address (from the page's marker).
    url: String,
) -> impl IntoView {
    let (view_state, _theme) = page_view_state();
    let metric = RwSignal::new(metric_from_url());
    let doc = RwSignal::new(None::<LiveDoc>);
    let results = RwSignal::new(None::<Arc<Results>>);
    let problem = RwSignal::new(None::<String>);
    spawn_local(follow(url, doc, results, problem));
    mark_current_cell(doc, results);
    Effect::new(move |_| {
        let title = match doc.get() {
            Some(d) => {
                format!(
                    "{} — {}",
                    progress(&d.results, Some(&d.live)).time_text(),
                    crate::model::run_report::title(&d.results)
                )
            }
            None => "speedmatrix live".into(),
        };
        document().set_title(&title);
    });
    // While the run goes on, a cell not measured is one not measured yet (live.css).
    let running = move || doc.with(|d| d.as_ref().is_some_and(|d| d.results.run.status == RunStatus::Running));
    view! {
        <main id="main" class:live-running=running>
            <LiveBanner doc=doc problem=problem />
            {move || match results.get() {
                Some(r) => view! { <Report r=r metric=metric view=view_state /> }.into_any(),
                None => view! { <p class="loading">"Loading the live run…"</p> }.into_any(),
            }}
        </main>
        <footer class="footer">
            "speedmatrix viewer · live: this page follows the run and updates itself at most once a second"
        </footer>
    }
}

/// Where the run stands: status, rows and cells done, the one being measured and its phase,
/// the time left; why a run failed or was interrupted.
#[component]
fn LiveBanner(doc: RwSignal<Option<LiveDoc>>, problem: RwSignal<Option<String>>) -> impl IntoView {
    let state = move || {
        doc.with(|d| {
            d.as_ref().map(|d| {
                let p = progress(&d.results, Some(&d.live));
                (p, d.results.run.status, d.results.run.reason.clone(), d.measuring)
            })
        })
    };
    view! {
        <section class="live-banner" id="live" aria-live="polite">
            {move || match state() {
                None => view! { <p class="live-status" id="live-status">"Connecting to the live run…"</p> }.into_any(),
                Some((p, status, reason, measuring)) => {
                    let (class, head) = match status {
                        RunStatus::Running => ("live-status running", "Live: measuring".to_string()),
                        RunStatus::Complete => ("live-status complete", "Run complete".to_string()),
                        RunStatus::Interrupted => ("live-status stopped", "Run interrupted".to_string()),
                        RunStatus::Failed => ("live-status stopped", "Run failed".to_string()),
                    };
                    let source = (status == RunStatus::Running && !measuring)
                        .then_some("following a results file: updated whenever the collector saves it");
                    view! {
                        <p class=class id="live-status" data-status=format!("{status:?}").to_lowercase()>
                            {head}
                            {reason.map(|r| view! { ": " <span id="live-reason">{r}</span> })}
                        </p>
                        <p class="live-line" id="live-line">{p.line()}</p>
                        <dl class="live-facts">
                            <dt>"Rows and cells"</dt>
                            <dd id="live-count">{format!("{} of {}", p.done, p.planned)}</dd>
                            <dt>"Measuring"</dt>
                            <dd id="live-current">{p.current.clone().unwrap_or_else(|| "—".into())}</dd>
                            <dt>"Phase"</dt>
                            <dd id="live-phase">{p.phase.clone().unwrap_or_else(|| "—".into())}</dd>
                            <dt>"Time left"</dt>
                            <dd id="live-eta">{p.time_text()}</dd>
                        </dl>
                        {source.map(|s| view! { <p class="live-source">{s}</p> })}
                    }
                    .into_any()
                }
            }}
            {move || problem.get().map(|e| view! { <p class="notice live-problem" role="alert">{e}</p> })}
        </section>
    }
}

/// Mark the heatmap cell being measured (`hm-current`, its phase in `data-live-phase`) after
/// every new state and every redraw of the report.
fn mark_current_cell(doc: RwSignal<Option<LiveDoc>>, results: RwSignal<Option<Arc<Results>>>) {
    Effect::new(move |_| {
        results.track();
        let current: Option<Current> = doc.with(|d| {
            d.as_ref().filter(|d| d.results.run.status == RunStatus::Running).and_then(|d| d.live.current.clone())
        });
        let window_s = doc.with(|d| d.as_ref().and_then(|d| d.results.config.window_s));
        // After the report below has been redrawn from the same change.
        request_animation_frame(move || {
            let Some(page) = web_sys::window().and_then(|w| w.document()) else { return };
            // One cell is marked at a time; the bound only guards against a class that sticks.
            for _ in 0..4 {
                let Ok(Some(e)) = page.query_selector("#heatmap td.hm-current") else { break };
                let _ = e.class_list().remove_1("hm-current");
                let _ = e.remove_attribute("data-live-phase");
            }
            let Some(Current {
                measuring: Measuring::Decode { context, concurrency }, phase, window_elapsed_s, ..
            }) = current
            else {
                return;
            };
            let css = format!(
                "#heatmap td[data-context=\"{}\"][data-concurrency=\"{concurrency}\"]",
                context.label.replace('"', "")
            );
            if let Ok(Some(cell)) = page.query_selector(&css) {
                let _ = cell.class_list().add_1("hm-current");
                let text = match (window_elapsed_s, window_s) {
                    (Some(e), Some(w)) => format!("{} {:.0} / {:.0} s", phase.label(), e.floor(), w),
                    _ => phase.label().to_string(),
                };
                let _ = cell.set_attribute("data-live-phase", &text);
            }
        });
    });
}
