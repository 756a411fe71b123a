//! The top bar of the report page: the brand, the run picker (when there is more than one
//! run), the link to the diff view, the theme picker and the file button.

use super::files::FileButton;
use super::runs::State;
use crate::view::browser;
use crate::view::view_state::THEME_KEY;
use leptos::prelude::*;

/// The bar; `theme` is the theme choice (`""` = the system's, `light`, `dark`).
#[component]
pub(super) fn TopBar(state: State, theme: RwSignal<String>) -> impl IntoView {
    view! {
        <header class="topbar">
            <span class="brand">"speedmatrix"</span>
            <RunPicker state=state />
            <a class="compare-link" id="compare-link" href="?compare">"Compare two runs"</a>
            <ThemePicker theme=theme />
            <FileButton state=state />
        </header>
    }
}

/// The theme selector: system, light or dark; the choice is remembered.
#[component]
fn ThemePicker(theme: RwSignal<String>) -> impl IntoView {
    let on_theme = move |ev: web_sys::Event| {
        let v = event_target_value(&ev);
        let v = if v == "light" || v == "dark" { v } else { String::new() };
        browser::store(THEME_KEY, (!v.is_empty()).then_some(v.as_str()));
        theme.set(v);
    };
    view! {
        <label class="theme-picker">
            "Theme "
            <select id="theme-select" on:change=on_theme>
                {[("", "System"), ("light", "Light"), ("dark", "Dark")]
                    .into_iter()
                    .map(|(v, t)| view! { <option value=v selected=move || theme.get() == v>{t}</option> })
                    .collect_view()}
            </select>
        </label>
    }
}

/// The run selector, when there is more than one run.
#[component]
fn RunPicker(state: State) -> impl IntoView {
    move || {
        let entries = state.entries.get();
        (entries.len() > 1).then(|| {
            let selected = state.selected.get();
            view! {
                <label class="run-picker">
                    "Run "
                    <select
                        id="run-select"
                        on:change=move |ev| {
                            if let Ok(i) = event_target_value(&ev).parse::<usize>() {
                                state.pick(i);
                            }
                        }
                    >
                        {selected.is_none().then(|| view! { <option value="" selected=true disabled=true>"Pick a run…"</option> })}
                        {entries
                            .into_iter()
                            .enumerate()
                            .map(|(i, e)| {
                                view! {
                                    <option value=i.to_string() selected=selected == Some(i)>
                                        {e.label}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
            }
        })
    }
}
