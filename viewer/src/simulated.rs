//! "Simulated": the banner on the report of a run that measured the speedmatrix twin, and the
//! mark beside such a run in the diff header and the run picker. The words come from
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

/// The run picker's label of an index entry: marked when the run is simulated.
pub fn picker_label(label: &str, started_at: Option<&str>, simulated: bool) -> String {
    let mut out = label.to_string();
    if let Some(s) = started_at {
        out.push_str(&format!(" · {}", crate::report::short_time(s)));
    }
    if simulated {
        out.push_str(" · Simulated");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn picker_marks_simulated_runs() {
        assert_eq!(picker_label("H200", Some("2026-01-01T00:00:00Z"), false), "H200 · 2026-01-01 00:00 UTC");
        assert_eq!(picker_label("twin", None, true), "twin · Simulated");
    }
}
