//! The prefill section: one row per context with prompt tok/s (and a bar scaled to the best
//! cold row), TTFT, and the prompt length when the file records it; with `--prefix-share`, each
//! context's warm rows right after its cold one, labelled by share, with the measured hit rate
//! beside the plan and the TTFT against the cold row's.

use crate::model::run_report;
use leptos::prelude::*;
use speedmatrix_schema::Results;
use std::sync::Arc;

/// Prefill: context, prompt tok/s (with a bar), TTFT.
#[component]
pub(super) fn PrefillTable(r: Arc<Results>) -> impl IntoView {
    let lines = run_report::prefill_lines(&r);
    let with_tokens = r.prefill.iter().any(|p| p.prompt_tokens.is_some());
    let warm = lines.iter().any(|l| l.share_key.is_some());
    (!lines.is_empty()).then(|| {
        view! {
            <section class="section" id="prefill">
                <h2>"Prefill"</h2>
                <p class="section-sub">
                    "prompt tok/s by context length"
                    {warm.then_some(" · warm rows: the prompt's prefix share was cached before the measured request")}
                </p>
                <table class="prefill">
                    <thead>
                        <tr>
                            <th scope="col">"Context"</th>
                            <th scope="col" class="num">"Prompt tok/s"</th>
                            <th scope="col" class="num">"TTFT"</th>
                            {with_tokens.then(|| view! { <th scope="col" class="num">"Prompt tokens"</th> })}
                            {warm.then(|| view! {
                                <th scope="col">"Prefix cache"</th>
                                <th scope="col" class="num">"TTFT vs cold"</th>
                            })}
                        </tr>
                    </thead>
                    <tbody>
                        {lines
                            .into_iter()
                            .map(|l| {
                                let width = format!("{:.1}%", l.share * 100.0);
                                view! {
                                    <tr
                                        class=format!("st-{}", l.status.id())
                                        class:warm=l.share_key.is_some()
                                        data-share=l.share_key.map(|k| k.to_string())
                                        title=l.reason.clone().unwrap_or_default()
                                    >
                                        <th scope="row">{l.context}</th>
                                        <td class="num bar-cell">
                                            <span class="bar" style:width=width></span>
                                            <span class="bar-value">{l.prompt_tps}</span>
                                            {l.note.map(|n| view! { <span class="cell-note">{n}</span> })}
                                        </td>
                                        <td class="num">{l.ttft} " TTFT"</td>
                                        {with_tokens.then(|| view! { <td class="num">{l.prompt_tokens.clone()}</td> })}
                                        {warm.then(|| view! {
                                            <td data-col="prefix-cache">{l.cache.clone()}</td>
                                            <td class="num" data-col="vs-cold">{l.vs_cold.clone().unwrap_or_else(|| run_report::DASH.into())}</td>
                                        })}
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
