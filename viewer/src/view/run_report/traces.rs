//! The "Trace replay" section: each replayed trace of the run as a line of a rate cell's
//! figures (its status mark, the reason on hover and focus), the trace it replayed in words,
//! its prefix cache (the trace's ideal reuse beside the hit rate the server measured) and its
//! timeline — offered and completed requests, requests in flight, each request's TTFT
//! ([`crate::model::trace_report`] decides what). Nothing when the run replayed no trace.

use crate::model::{run_report, trace_report};
use crate::view::chart_view::ChartView;
use crate::view::run_report::rates::status_cell;
use crate::view::view_state::ViewState;
use leptos::prelude::*;
use speedmatrix_schema::Results;
use std::sync::Arc;

/// The table of the run's trace rows: the trace, its requests, its status, a rate cell's
/// figures.
fn trace_table(r: &Results) -> impl IntoView {
    view! {
        <table class="measurements rates" id="traces-table">
            <thead>
                <tr>
                    <th scope="col">"Trace"</th>
                    <th scope="col" class="num">"Requests"</th>
                    {trace_report::HEADERS
                        .iter()
                        .skip(2)
                        .enumerate()
                        .map(|(i, h)| {
                            let class = if i >= 1 { "num" } else { "" };
                            view! { <th scope="col" class=class>{*h}</th> }
                        })
                        .collect_view()}
                </tr>
            </thead>
            <tbody>
                {r
                    .traces
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let l = trace_report::line(t);
                        let status = status_cell(&l);
                        let figures: Vec<(&'static str, String)> =
                            l.figures().into_iter().map(|(col, v)| (col, v.to_string())).collect();
                        view! {
                            <tr class=format!("st-{}", l.status.id()) data-trace=i.to_string()>
                                <th scope="row" data-col="trace">{trace_report::title(r, i)}</th>
                                <td class="num" data-col="requests">{t.requests.len().to_string()}</td>
                                {status}
                                {figures
                                    .into_iter()
                                    .map(|(col, v)| view! { <td class="num" data-col=col>{v}</td> })
                                    .collect_view()}
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

/// One trace row's timeline: its charts and notes, or why it has none.
fn timeline(r: &Results, i: usize, view: ViewState, stem: String) -> impl IntoView {
    let notes = trace_report::timeline_notes(r, i);
    let body = match trace_report::charts(r, i) {
        Ok(charts) => view! {
            <div class="charts">
                {charts
                    .into_iter()
                    .map(|spec| view! { <ChartView spec=spec view=view stem=stem.clone() /> })
                    .collect_view()}
            </div>
        }
        .into_any(),
        Err(why) => view! { <p class="section-sub trace-no-timeline">{why}</p> }.into_any(),
    };
    view! {
        <div class="trace-timeline" data-trace=i.to_string()>
            <h3>"Timeline · " {trace_report::title(r, i)}</h3>
            {r.traces.get(i).and_then(speedmatrix_schema::prefix::trace_cache_text).map(|t| view! {
                <p class="section-sub trace-prefix-cache" data-trace=i.to_string()>{t}</p>
            })}
            {body}
            {(!notes.is_empty())
                .then(|| {
                    view! {
                        <ul class="diff-notes trace-notes">
                            {notes.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}
                        </ul>
                    }
                })}
        </div>
    }
}

/// The section, when the run replayed a trace.
#[component]
pub(super) fn TraceSection(r: Arc<Results>, view: ViewState) -> impl IntoView {
    if r.traces.is_empty() {
        return None;
    }
    let stem = run_report::file_stem(&r);
    let source = trace_report::source_text(&r);
    Some(view! {
        <section class="section" id="traces">
            <h2>"Trace replay"</h2>
            <p class="section-sub">
                "Each request of the trace sent at its timestamp, open loop; every latency counts from the request's \
                 scheduled instant. Hover or focus a status for its reason."
            </p>
            {source.map(|s| view! { <p class="section-sub" id="trace-source">{s}</p> })}
            <div class="rates-wrap">{trace_table(&r)}</div>
            {(0..r.traces.len()).map(|i| timeline(&r, i, view, stem.clone())).collect_view()}
        </section>
    })
}
