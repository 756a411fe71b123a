//! "Simulated": the banner on the report of a run that measured the speedmatrix twin, and the
//! mark beside such a run in the diff and comparison headers (the run picker's label is
//! [`crate::model::run_index::picker_label`]). The words come from
//! `speedmatrix_schema::simulation`, the same as `speedmatrix show` prints.

use leptos::prelude::*;
use speedmatrix_schema::simulation;
use speedmatrix_schema::Results;
use std::sync::Arc;

/// The banner of a simulated run (nothing for a real one).
#[component]
pub fn SimulatedBanner(
    /// The run.
    r: Arc<Results>,
) -> impl IntoView {
    simulation::notice(&r).map(|text| {
        view! {
            <p class="simulated-banner" id="simulated-banner" role="note">
                <strong>"Simulated"</strong>
                {text.strip_prefix("Simulated").map(str::to_string).unwrap_or(text)}
            </p>
        }
    })
}

/// ` · Simulated (speedmatrix twin, profile …)` beside a run's name, for a simulated run.
#[component]
pub fn SimulatedMark(
    /// The run.
    r: Arc<Results>,
) -> impl IntoView {
    simulation::short(&r).map(|what| {
        view! { <span class="simulated-mark">" · Simulated (" {what} ")"</span> }
    })
}
