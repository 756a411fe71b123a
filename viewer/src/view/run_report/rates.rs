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
/// status means) as a tooltip on hover and focus. The trace table uses it too.
pub(super) fn status_cell(l: &rate_report::RateLine) -> impl IntoView {
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
            {l.note.map(|n| view! { <span class="hm-status cell-note">{n}</span> })}
            {tip.map(|t| view! { <span class="hm-tip" role="tooltip">{t}</span> })}
        </td>
    }
}

/// A figure of a rate line with its detail (the counts behind it) as a tooltip on hover and
/// focus, when it has one.
fn detail_cell(col: &'static str, text: String, detail: Option<String>) -> impl IntoView {
    let focusable = detail.is_some().then_some("0");
    view! {
        <td class="rate-detail" data-col=col tabindex=focusable>
            {text}
            {detail.map(|t| view! { <span class="hm-tip" role="tooltip">{t}</span> })}
        </td>
    }
}

fn rate_table(r: &Results) -> impl IntoView {
    let lines = rate_report::rate_lines(r);
    let with_slo = r.config.rate_slo.is_some();
    let with_prefix = speedmatrix_schema::export::rates_have_shares(r);
    let with_spec = speedmatrix_schema::export::rates_have_spec(r);
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
                    {with_slo.then(|| view! { <th scope="col" class="num">{speedmatrix_schema::export::RATE_GOODPUT_HEADER}</th> })}
                    {with_prefix.then(|| view! { <th scope="col">{speedmatrix_schema::export::RATE_PREFIX_HEADER}</th> })}
                    {with_spec.then(|| view! { <th scope="col">{speedmatrix_schema::export::RATE_SPEC_HEADER}</th> })}
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
                                {with_slo.then(|| view! { <td class="num" data-col="goodput_rps">{l.goodput.clone()}</td> })}
                                {with_prefix.then(|| detail_cell("prefix_cache", l.prefix_cache.clone(), l.prefix_cache_detail.clone()))}
                                {with_spec.then(|| detail_cell("spec_decode", l.spec_decode.clone(), l.spec_decode_detail.clone()))}
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

/// One cell of the rate heatmap.
fn rate_heat_cell(c: rate_report::RateHeatCell) -> impl IntoView {
    let class = c.status.map_or_else(|| "hm-cell st-none".to_string(), |s| format!("hm-cell st-{}", s.id()));
    let light = c.level.is_some_and(|l| l > 0.55);
    let background = c.level.map(run_report::scale_colour);
    let spoken = c.spoken();
    let main = match (c.status, c.value) {
        (_, Some(v)) => v,
        (Some(s), None) if !s.is_measured() => format!("{} {}", run_report::status_mark(s), s.label()),
        _ => run_report::DASH.to_string(),
    };
    let status_line = c.status.filter(|s| *s != CellStatus::Valid && s.is_measured());
    let tip = match (c.status, c.reason) {
        (Some(s), Some(why)) => Some(format!("{}: {why}", s.label())),
        _ => None,
    };
    view! {
        <td
            class=class
            class:light=light
            data-context=c.context
            data-rate=c.rate
            style:background-color=background
            tabindex="0"
            aria-label=spoken
        >
            <span class="hm-value">{main}</span>
            {status_line.map(|s| view! { <span class="hm-status">{run_report::status_mark(s)} " " {s.label()}</span> })}
            {c.note.map(|n| view! { <span class="hm-status cell-note">{n}</span> })}
            {tip.map(|t| view! { <span class="hm-tip" role="tooltip">{t}</span> })}
        </td>
    }
}

/// The context × rate heatmap of one figure, with its selector and colour scale.
fn rate_heatmap(r: Arc<Results>) -> impl IntoView {
    let metric = RwSignal::new(rate_report::DEFAULT_HEATMAP_METRIC.to_string());
    let choices = rate_report::heatmap_choices(&r);
    view! {
        <div class="section-bar">
            <p class="section-sub">"Rate heatmap · rows are context length, columns are offered request rates"</p>
            <label class="metric-picker">
                "Metric "
                <select id="rate-heatmap-metric" on:change=move |ev| metric.set(event_target_value(&ev))>
                    {choices
                        .into_iter()
                        .map(|(id, label, has)| {
                            let selected = id == rate_report::DEFAULT_HEATMAP_METRIC;
                            let text = if has { label } else { format!("{label} — no data in this run") };
                            view! { <option value=id selected=selected disabled=!has>{text}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
        </div>
        {move || {
            let h = rate_report::rate_heatmap(&r, &metric.get());
            let (lo, hi) = h.scale_ends.clone().unwrap_or_else(|| (run_report::DASH.into(), run_report::DASH.into()));
            let direction = if h.darker_is_better.is_some() { "darker is better" } else { "darker is higher" };
            view! {
                <div class="heatmap-wrap">
                    <table class="heatmap" id="rate-heatmap">
                        <thead>
                            <tr>
                                <th scope="col" class="corner">"Context"</th>
                                {h.rates.iter().map(|x| view! { <th scope="col" class="num">{x.clone()}</th> }).collect_view()}
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
                                            {cells.into_iter().map(rate_heat_cell).collect_view()}
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
                <div class="legend" id="rate-heatmap-legend">
                    <div class="scale">
                        <span class="scale-lo">{lo}</span>
                        <span class="scale-bar" style:background=run_report::scale_gradient()></span>
                        <span class="scale-hi">{hi}</span>
                        <span class="scale-dir">{direction}</span>
                    </div>
                </div>
            }
        }}
    }
}

/// The section, when the run has rate cells.
#[component]
pub(super) fn RateSection(r: Arc<Results>, view: ViewState) -> impl IntoView {
    if r.rates.is_empty() {
        return None;
    }
    let charts: Vec<_> = [rate_report::ttft_chart(&r), rate_report::tpot_chart(&r)].into_iter().flatten().collect();
    let stem = run_report::file_stem(&r);
    let slo_lines = rate_report::slo_lines(&r);
    Some(view! {
        <section class="section" id="rates">
            <h2>"Request rates"</h2>
            <p class="section-sub">
                "Open-loop arrivals at a set rate per context; every latency counts from the request's scheduled instant. "
                "Hover or focus a status for its reason."
            </p>
            <div class="rates-wrap">{rate_table(&r)}</div>
            {rate_marks(&r)}
            {(!slo_lines.is_empty())
                .then(|| {
                    view! {
                        <ul class="diff-notes" id="rates-slo">
                            {slo_lines.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}
                        </ul>
                    }
                })}
            {rate_heatmap(r.clone())}
            {(!charts.is_empty())
                .then(|| {
                    view! {
                        <p class="section-sub">
                            "Lines join valid cells; ✕ marks a saturated or client-limited one. "
                            "Hover a point, or focus the chart and use the arrow keys, to read it."
                        </p>
                        <div class="charts">
                            {charts
                                .into_iter()
                                .map(|spec| view! { <ChartView spec=spec view=view stem=stem.clone() /> })
                                .collect_view()}
                        </div>
                    }
                })}
        </section>
    })
}
