//! Opening local results files: the "Open results file…" button and the drop zone (a file
//! dropped anywhere on the page, with an overlay while one is dragged over it). Files are read
//! in the browser; nothing is uploaded.

use super::runs::State;
use leptos::prelude::*;

/// The file button (several files at once; each becomes a run of the picker).
#[component]
pub(super) fn FileButton(state: State) -> impl IntoView {
    let on_file = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        state.open_files(input.files());
        input.set_value("");
    };
    view! {
        <label class="file-button">
            "Open results file…"
            <input id="file-input" type="file" accept=".json,application/json" multiple on:change=on_file />
        </label>
    }
}

/// Drag and drop anywhere on the page: the overlay shows while a file is over the page, and a
/// dropped file opens.
pub(super) fn listen_for_drops(state: State) {
    let _ = window_event_listener(leptos::ev::dragover, move |ev| {
        ev.prevent_default();
        state.dragging.set(true);
    });
    let _ = window_event_listener(leptos::ev::dragleave, move |ev| {
        if ev.related_target().is_none() {
            state.dragging.set(false);
        }
    });
    let _ = window_event_listener(leptos::ev::drop, move |ev| {
        ev.prevent_default();
        state.dragging.set(false);
        state.open_files(ev.data_transfer().and_then(|d| d.files()));
    });
}

/// What shows while a file is dragged over the page.
#[component]
pub(super) fn DropOverlay(state: State) -> impl IntoView {
    view! {
        <div class="drop-overlay" class:show=move || state.dragging.get()>
            <p>"Drop a results file to open it"</p>
        </div>
    }
}
