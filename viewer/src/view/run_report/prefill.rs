//! The prefill section: one row per context with prompt tok/s (and a bar scaled to the best),
//! TTFT, and the prompt length when the file records it.

use crate::model::run_report;
use leptos::prelude::*;
use speedmatrix_schema::Results;
use std::sync::Arc;

/// Prefill: context, prompt tok/s (with a bar), TTFT.
#[component]
pub(super) fn PrefillTable(r: Arc<Results>) -> impl IntoView {
    let lines = run_report::prefill_lines(&r);
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
