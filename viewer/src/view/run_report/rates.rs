//! The "Request rates" section: the run's open-loop rate cells as a table (each status with its
//! mark and colour, the reason on hover and focus), the legend of the rate statuses, and the
//! chart of TTFT against the achieved rate ([`crate::model::rate_report`] decides what). Nothing
//! when the run has no rate cells.

use crate::model::{rate_report, run_report};
use crate::view::chart_view::ChartView;
use crate::view::view_state::ViewState;
use leptos::prelude::*;
use speedmatrix_schema::{CellStatus, Results};
use std::sync::Arc;

/// The status cell of a rate line: the mark and the status' words, the reason (or what the
/// status means) as a tooltip on hover and focus.
fn status_cell(l: &rate_report::RateLine) -> impl IntoView {
    let s = l.status;
    let tip = match &l.reason {
        Some(why) => Some(format!("{}: {why}", s.label())),
        None if s != CellStatus::Valid => Some(format!("{}: {}", s.label(), run_report::status_meaning(s))),
        None => None,
    };
    let mark = run_report::status_mark(s);
    view! {
        <td class=format!("rate-status st-{}", s.id()) data-col="status" tabindex="0" aria-label=rate_report::spoken(l)>
            {(!mark.is_empty()).then(|| view! { <span class=format!("swatch st-{}", s.id())>{mark}</span> })}
            <span class="rate-status-word">{s.label()}</span>
            {tip.map(|t| view! { <span class="hm-tip" role="tooltip">{t}</span> })}
        </td>
    }
}

fn rate_table(r: &Results) -> impl IntoView {
    let lines = rate_report::rate_lines(r);
    view! {
        <table class="measurements rates" id="rates-table">
            <thead>
                <tr>
                    {rate_report::HEADERS
                        .iter()
                        .enumerate()
                        .map(|(i, h)| {
                            let class = if i >= 3 { "num" } else { "" };
                            view! { <th scope="col" class=class>{*h}</th> }
                        })
                        .collect_view()}
                </tr>
            </thead>
            <tbody>
                {lines
                    .into_iter()
                    .map(|l| {
                        let status = status_cell(&l);
                        let (context, rate) = (l.context.clone(), l.rate.clone());
                        let figures: Vec<(&'static str, String)> =
                            l.figures().into_iter().map(|(col, v)| (col, v.to_string())).collect();
                        view! {
                            <tr class=format!("st-{}", l.status.id()) data-context=context data-rate=rate>
                                <th scope="row" data-col="context">{l.context}</th>
                                <td data-col="rate">{l.rate}</td>
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

/// The marks of the statuses a rate cell can have besides valid, those absent from this run
/// dimmed.
fn rate_marks(r: &Results) -> impl IntoView {
    view! {
        <ul class="marks" id="rates-legend">
            {rate_report::legend(r)
                .into_iter()
                .map(|(s, present)| {
                    view! {
                        <li class:absent=!present data-status=s.id()>
                            <span class=format!("swatch st-{}", s.id())>{run_report::status_mark(s)}</span>
                            <b>{s.label()} ":"</b>
                            " "
                            {run_report::status_meaning(s)}
                        </li>
                    }
                })
                .collect_view()}
        </ul>
    }
}

/// The section, when the run has rate cells.
#[component]
pub(super) fn RateSection(r: Arc<Results>, view: ViewState) -> impl IntoView {
    if r.rates.is_empty() {
        return None;
    }
    let chart = rate_report::ttft_chart(&r);
    let stem = run_report::file_stem(&r);
    Some(view! {
        <section class="section" id="rates">
            <h2>"Request rates"</h2>
            <p class="section-sub">
                "Open-loop arrivals at a set rate per context; every latency counts from the request's scheduled instant. "
                "Hover or focus a status for its reason."
            </p>
            <div class="rates-wrap">{rate_table(&r)}</div>
            {rate_marks(&r)}
            {chart
                .map(|spec| {
                    view! {
                        <p class="section-sub">
                            "Lines join valid cells; ✕ marks a saturated or client-limited one. "
                            "Hover a point, or focus the chart and use the arrow keys, to read it."
                        </p>
                        <div class="charts">
                            <ChartView spec=spec view=view stem=stem />
                        </div>
                    }
                })}
        </section>
    })
}
