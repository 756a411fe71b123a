//! The "Conversations" section: a run's multi-turn conversation cells (`run --turns N`) as the
//! per-turn table `show` prints (prompt, TTFT, ITL, E2E, TTFT vs turn 1, cache hit rate), each
//! cell's status and missing figures, and the per-turn charts (TTFT and ITL by turn)
//! ([`crate::model::conversation_report`] decides what). Nothing when the run has none.

use crate::model::{conversation_report, run_report};
use crate::view::chart_view::ChartView;
use crate::view::view_state::ViewState;
use leptos::prelude::*;
use speedmatrix_schema::Results;
use std::sync::Arc;

/// The section, when the run measured conversations.
#[component]
pub(super) fn ConversationSection(r: Arc<Results>, view: ViewState) -> impl IntoView {
    if r.conversations.is_empty() {
        return None;
    }
    let stem = run_report::file_stem(&r);
    let rows = conversation_report::rows(&r);
    let notes = conversation_report::notes(&r);
    let charts = conversation_report::charts(&r);
    Some(view! {
        <section class="section" id="conversations">
            <h2>"Conversations"</h2>
            <p class="section-sub">
                "Sessions that send their whole history each turn, as a chat client does: per turn, what the server \
                 counted, the latencies, what turn k costs against turn 1, and how much of its prompt the server's \
                 prefix cache served."
            </p>
            <div class="rates-wrap">
                <table class="measurements rates" id="turns-table">
                    <thead>
                        <tr>
                            {conversation_report::HEADERS
                                .iter()
                                .enumerate()
                                .map(|(i, h)| {
                                    let class = if i >= 1 { "num" } else { "" };
                                    view! { <th scope="col" class=class>{*h}</th> }
                                })
                                .collect_view()}
                        </tr>
                    </thead>
                    <tbody>
                        {rows
                            .into_iter()
                            .map(|row| {
                                let turn = row.get(1).cloned().unwrap_or_default();
                                view! {
                                    <tr data-turn=turn>
                                        {row
                                            .into_iter()
                                            .enumerate()
                                            .map(|(i, v)| match i {
                                                0 => view! { <th scope="row">{v}</th> }.into_any(),
                                                _ => view! { <td class="num">{v}</td> }.into_any(),
                                            })
                                            .collect_view()}
                                    </tr>
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
            <ul class="diff-notes" id="turns-notes">
                {notes.into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}
            </ul>
            <div class="charts">
                {charts.into_iter().map(|spec| view! { <ChartView spec=spec view=view stem=stem.clone() /> }).collect_view()}
            </div>
        </section>
    })
}
