//! The head of a report: the summary cards (server, model, hardware, best figures…), the
//! cards of what the file lacks and why, the downloads (CSV, JSON) and the launch command with
//! its copy button.

use crate::model::run_report;
use crate::view::browser;
use leptos::prelude::*;
use leptos::task::spawn_local;
use speedmatrix_schema::{export, Results};
use std::sync::Arc;

/// The summary cards ([`run_report::cards`]), each a titled list of items.
#[component]
pub(super) fn Cards(r: Arc<Results>) -> impl IntoView {
    let cards = run_report::cards(&r);
    view! {
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
                                    .map(|(k, v)| {
                                        // Times read short, to the minute; the full value on hover.
                                        let (shown, full) = if matches!(k, "Started" | "Finished") {
                                            (run_report::short_time(&v), Some(v))
                                        } else {
                                            (v, None)
                                        };
                                        view! { <div class="item"><dt>{k}</dt><dd title=full>{shown}</dd></div> }
                                    })
                                    .collect_view()}
                            </dl>
                        </section>
                    }
                })
                .collect_view()}
        </div>
    }
}

/// What the file lacks and why (missing figures, fields an import left out); nothing when it
/// lacks nothing.
#[component]
pub(super) fn Gaps(r: Arc<Results>) -> impl IntoView {
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
pub(super) fn LaunchCommand(cmd: String) -> impl IntoView {
    let label = RwSignal::new("Copy".to_string());
    let pre: NodeRef<leptos::html::Pre> = NodeRef::new();
    let text = cmd.clone();
    let copy = move |_| {
        let text = text.clone();
        let el: Option<web_sys::Element> = pre.get().map(Into::into);
        spawn_local(async move {
            label.set(browser::copy_text(&text, el).await);
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

/// Downloads of the run: the measurement table as CSV (the writer of `speedmatrix show
/// --format csv`), the rate cells as CSV when the run has any (`show --rates --format csv`),
/// and the run's JSON.
#[component]
pub(super) fn Exports(r: Arc<Results>) -> impl IntoView {
    let stem = run_report::file_stem(&r);
    let (r_csv, stem_csv) = (r.clone(), stem.clone());
    let csv = move |_| browser::download_text(&format!("{stem_csv}.csv"), "text/csv", &export::to_csv(&r_csv));
    let rates_csv = (!r.rates.is_empty()).then(|| {
        let (r_rates, stem_rates) = (r.clone(), stem.clone());
        move |_| {
            let text = export::rates_to_csv(&r_rates);
            browser::download_text(&format!("{stem_rates}-rates.csv"), "text/csv", &text);
        }
    });
    let json = move |_| {
        // Results serialize as the schema writes them; the file reads back with load_results.
        if let Ok(mut text) = serde_json::to_string_pretty(&*r) {
            text.push('\n');
            browser::download_text(&format!("{stem}.json"), "application/json", &text);
        }
    };
    view! {
        <nav class="exports" aria-label="Downloads">
            "Download: "
            <button type="button" id="export-csv" on:click=csv>"Measurements (CSV)"</button>
            {rates_csv.map(|f| view! { <button type="button" id="export-rates-csv" on:click=f>"Request rates (CSV)"</button> })}
            <button type="button" id="export-json" on:click=json>"Run (JSON)"</button>
            <a href="#charts">"Charts (PNG, under each chart)"</a>
        </nav>
    }
}
