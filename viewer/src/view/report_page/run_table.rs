//! The site's runs as a table (the front page of a site of two runs or more): one row per run of
//! `runs/index.json` with its GPU, engine, model, date, whether it was simulated and its
//! headline figures; sortable by any column, filtered by words, label, GPU, GPU count, engine
//! and its version, model, quantization, speculative decoding, simulated or not and a date
//! range (sort and facets kept in the URL: a permalink); a checkbox per run to pick 2 … 12 to
//! compare (the picks kept in the URL as `pick=FILE`); the rows the filters keep download as
//! CSV; the fleet view of the same rows follows ([`super::fleet`]). What it shows is
//! [`crate::model::run_index`] (pure); the picked run's report follows.

use super::fleet::FleetView;
use super::runs::State;
use crate::model::run_index::{self, IndexFilters, COLUMNS};
use crate::view::browser;
use leptos::prelude::*;

/// The table, when the site's index lists two runs or more.
#[component]
pub(super) fn RunTable(state: State) -> impl IntoView {
    let sort = RwSignal::new(browser::query("order").and_then(|v| run_index::parse_order(&v)));
    let filters = RwSignal::new(IndexFilters::from_query(browser::query));
    let picked: RwSignal<Vec<usize>> = RwSignal::new(Vec::new());
    // The picks go to the URL (`pick=FILE`, in pick order) so a comparison's choice is a link too.
    Effect::new(move |_| {
        let files: Vec<String> =
            state.index.with(|ix| picked.get().iter().filter_map(|&i| ix.get(i).map(|e| e.file.clone())).collect());
        if state.index.with(Vec::is_empty) {
            return;
        }
        browser::set_query_all("pick", &files);
    });
    let set_filters = move |f: IndexFilters| {
        for (k, v) in f.params() {
            browser::set_query(k, v.as_deref());
        }
        filters.set(f);
    };
    move || {
        let entries = state.index.get();
        (entries.len() > 1).then(|| {
            // For the render benchmark (tests/benches/viewer_render.rs): the table is in the DOM.
            request_animation_frame(|| browser::mark("speedmatrix-index"));
            let [gpus, engines, models, versions, quants, specs] = run_index::choices(&entries);
            let counts = run_index::gpu_counts(&entries);
            let wanted = browser::query_all("pick");
            let from_url: Vec<usize> =
                wanted.iter().filter_map(|f| entries.iter().position(|e| e.file == *f)).collect();
            if picked.get_untracked().is_empty() && !from_url.is_empty() {
                picked.set(from_url);
            }
            let choices = Choices { gpus, counts, engines, versions, models, quants, specs };
            view! {
                <details class="section run-index" id="runs" open=browser::query("show").is_none()>
                    <summary><h2>{heading(&entries)}</h2></summary>
                    <FilterBar filters=filters set_filters=set_filters choices=choices />
                    <ComparePicked state=state picked=picked />
                    <CsvLink state=state sort=sort filters=filters />
                    <div class="table-wrap">
                        <table class="data run-table" id="run-table">
                            <TableHead sort=sort />
                            <tbody>
                                {move || rows(state, sort.get(), &filters.get(), picked)}
                            </tbody>
                        </table>
                    </div>
                </details>
                <FleetView state=state filters=filters />
            }
        })
    }
}

/// The values each facet's picker offers.
struct Choices {
    gpus: Vec<String>,
    counts: Vec<u32>,
    engines: Vec<String>,
    versions: Vec<String>,
    models: Vec<String>,
    quants: Vec<String>,
    specs: Vec<String>,
}

/// The link that downloads the rows the filters keep, in the table's order, as CSV
/// ([`run_index::to_csv`]); the file is made when the link is clicked.
#[component]
fn CsvLink(
    state: State,
    sort: RwSignal<Option<(&'static str, bool)>>,
    filters: RwSignal<IndexFilters>,
) -> impl IntoView {
    let rows = move || state.index.with(|e| run_index::order(e, sort.get(), &filters.get()));
    let on_click = move |ev: web_sys::MouseEvent| {
        let csv = state.index.with_untracked(|e| {
            run_index::to_csv(e, &run_index::order(e, sort.get_untracked(), &filters.get_untracked()))
        });
        let a: web_sys::HtmlAnchorElement = event_target(&ev);
        a.set_href(&format!("data:text/csv;charset=utf-8,{}", String::from(js_sys::encode_uri_component(&csv))));
    };
    view! {
        <p class="csv-export">
            <a id="index-csv" href="#" download="runs.csv" on:click=on_click>
                {move || format!("Download these {} rows as CSV", rows().len())}
            </a>
        </p>
    }
}

/// "Runs of this site (N)", with how many names when a file is published under several.
fn heading(entries: &[speedmatrix_schema::site::RunIndexEntry]) -> String {
    let distinct = run_index::distinct_runs(entries);
    if distinct == entries.len() {
        format!("Runs of this site ({distinct})")
    } else {
        format!("Runs of this site ({distinct}, under {} names)", entries.len())
    }
}

/// The text filter and the GPU / engine / model / simulated pickers.
#[component]
fn FilterBar(
    filters: RwSignal<IndexFilters>,
    set_filters: impl Fn(IndexFilters) + Copy + Send + Sync + 'static,
    choices: Choices,
) -> impl IntoView {
    let Choices { gpus, counts, engines, versions, models, quants, specs } = choices;
    let now = filters.get_untracked();
    let picker = move |id: &'static str, label: &'static str, values: Vec<String>, current: Option<String>| {
        let on_change = move |ev: web_sys::Event| {
            let v = event_target_value(&ev);
            let v = (!v.is_empty()).then_some(v);
            let mut f = filters.get_untracked();
            match id {
                "gpu" => f.gpu = v,
                "gpus" => f.gpu_count = v.and_then(|n| n.parse().ok()),
                "engine" => f.engine = v,
                "version" => f.engine_version = v,
                "quant" => f.quantization = v,
                "spec" => f.speculative = v,
                _ => f.model = v,
            }
            set_filters(f);
        };
        view! {
            <label>
                {label} " "
                <select id=format!("index-{id}") on:change=on_change>
                    <option value="">"any"</option>
                    {values
                        .into_iter()
                        .map(|v| {
                            let selected = current.as_deref() == Some(v.as_str());
                            view! { <option value=v.clone() selected=selected>{v.clone()}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
        }
    };
    let on_q = move |ev: web_sys::Event| {
        let mut f = filters.get_untracked();
        f.q = event_target_value(&ev);
        set_filters(f);
    };
    let on_label = move |ev: web_sys::Event| {
        let mut f = filters.get_untracked();
        f.label = event_target_value(&ev);
        set_filters(f);
    };
    let on_date = move |end: &'static str| {
        move |ev: web_sys::Event| {
            let v = event_target_value(&ev);
            let v = (!v.is_empty()).then_some(v);
            let mut f = filters.get_untracked();
            if end == "from" {
                f.from = v;
            } else {
                f.to = v;
            }
            set_filters(f);
        }
    };
    let on_sim = move |ev: web_sys::Event| {
        let mut f = filters.get_untracked();
        f.simulated = match event_target_value(&ev).as_str() {
            "yes" => Some(true),
            "no" => Some(false),
            _ => None,
        };
        set_filters(f);
    };
    let sim = now.simulated;
    view! {
        <div class="filters" id="index-filters">
            <label>"Find " <input id="index-q" type="search" value=now.q.clone() on:input=on_q /></label>
            <label>"Label " <input id="index-label" type="search" value=now.label.clone() on:input=on_label /></label>
            {picker("gpu", "GPU", gpus, now.gpu.clone())}
            {picker("gpus", "GPUs", counts.iter().map(u32::to_string).collect(), now.gpu_count.map(|n| n.to_string()))}
            {picker("engine", "Engine", engines, now.engine.clone())}
            {picker("version", "Version", versions, now.engine_version.clone())}
            {picker("model", "Model", models, now.model.clone())}
            {picker("quant", "Quantization", quants, now.quantization.clone())}
            {picker("spec", "Speculative decoding", specs, now.speculative.clone())}
            <label>
                "Simulated "
                <select id="index-simulated" on:change=on_sim>
                    <option value="" selected=sim.is_none()>"either"</option>
                    <option value="no" selected=sim == Some(false)>"real servers only"</option>
                    <option value="yes" selected=sim == Some(true)>"simulated only"</option>
                </select>
            </label>
            <label>
                "From " <input id="index-from" type="date" value=now.from.clone().unwrap_or_default() on:change=on_date("from") />
            </label>
            <label>"to " <input id="index-to" type="date" value=now.to.clone().unwrap_or_default() on:change=on_date("to") /></label>
        </div>
    }
}

/// The header: a pick column, then each column's sort button (ascending first, then
/// descending; the order goes to the URL as `order=`).
#[component]
fn TableHead(sort: RwSignal<Option<(&'static str, bool)>>) -> impl IntoView {
    view! {
        <thead>
            <tr>
                <th scope="col"><span class="visually-hidden">"Compare"</span></th>
                {COLUMNS
                    .iter()
                    .map(|(id, header)| {
                        let id = *id;
                        let aria = move || match sort.get() {
                            Some((s, true)) if s == id => "ascending",
                            Some((s, false)) if s == id => "descending",
                            _ => "none",
                        };
                        let on_click = move |_| {
                            let next = match sort.get_untracked() {
                                Some((s, true)) if s == id => Some((id, false)),
                                _ => Some((id, true)),
                            };
                            browser::set_query("order", run_index::order_param(next).as_deref());
                            sort.set(next);
                        };
                        let class = if run_index::numeric(id) { "num" } else { "" };
                        view! {
                            <th scope="col" class=class aria-sort=aria>
                                <button type="button" class="sort" id=format!("sort-{id}") on:click=on_click>{*header}</button>
                            </th>
                        }
                    })
                    .collect_view()}
            </tr>
        </thead>
    }
}

/// The rows the filters keep, in the sort's order; the label opens the run's report below.
fn rows(
    state: State,
    sort: Option<(&'static str, bool)>,
    filters: &IndexFilters,
    picked: RwSignal<Vec<usize>>,
) -> impl IntoView {
    let entries = state.index.get_untracked();
    let also = run_index::other_names(&entries);
    run_index::order(&entries, sort, filters)
        .into_iter()
        .map(|i| {
            let e = entries[i].clone();
            let file = e.file.clone();
            let others = also[i].join(" ");
            let on_pick = move |ev: web_sys::Event| {
                let on = event_target_checked(&ev);
                picked.update(|p| {
                    p.retain(|x| *x != i);
                    if on {
                        p.push(i);
                    }
                });
            };
            let cells = COLUMNS
                .iter()
                .map(|(id, _)| {
                    let text = run_index::cell_text(&e, id);
                    let title = run_index::cell_reason(&e, id).unwrap_or_default();
                    let class = format!("col-{id}{}", if run_index::numeric(id) { " num" } else { "" });
                    if *id == "label" {
                        let note = (!also[i].is_empty()).then(|| {
                            let names = also[i].join(", ");
                            view! {
                                <span class="also" title="the same file (one SHA-256) is published under each name">
                                    {format!(" · also published as {names}")}
                                </span>
                            }
                        });
                        let open = move |ev: web_sys::MouseEvent| {
                            ev.prevent_default();
                            state.pick(i);
                            if let Some(el) = document().get_element_by_id("run-title") {
                                el.scroll_into_view();
                            }
                        };
                        view! {
                            <th scope="row" class=class>
                                <a href=format!("?show=runs/{file}") on:click=open>{text}</a>
                                {note}
                                {move || changed(state, i)}
                            </th>
                        }
                        .into_any()
                    } else {
                        view! { <td class=class title=title>{text}</td> }.into_any()
                    }
                })
                .collect_view();
            view! {
                <tr data-file=e.file.clone() data-also=others>
                    <td>
                        <input
                            type="checkbox"
                            class="pick"
                            aria-label=format!("Pick {} to compare", e.label)
                            prop:checked=move || picked.with(|p| p.contains(&i))
                            on:change=on_pick
                        />
                    </td>
                    {cells}
                </tr>
            }
        })
        .collect_view()
}

/// The mark of a run whose file, fetched when it was opened, changed after publishing (its
/// SHA-256 differs from the index's); nothing for the others and for runs not fetched.
fn changed(state: State, i: usize) -> Option<impl IntoView> {
    let warning = state.entries.with(|e| e.get(i).and_then(|x| x.changed.clone()))?;
    Some(view! { <span class="changed" title=warning>" · changed after publishing"</span> })
}

/// The link that compares the picked runs: the diff view for two, the comparison of many for
/// three to twelve; a hint otherwise.
#[component]
fn ComparePicked(state: State, picked: RwSignal<Vec<usize>>) -> impl IntoView {
    move || {
        let files: Vec<String> = state
            .index
            .with(|ix| picked.get().iter().filter_map(|&i| ix.get(i).map(|e| format!("runs/{}", e.file))).collect());
        match run_index::compare_href(&files) {
            Some(href) => {
                let text = if files.len() == 2 {
                    "Diff the 2 picked runs".to_string()
                } else {
                    format!("Compare the {} picked runs", files.len())
                };
                view! { <p class="compare-picked"><a id="compare-picked" href=href>{text}</a></p> }.into_any()
            }
            None => view! {
                <p class="compare-picked hint" id="compare-hint">
                    {format!("Pick 2 to {} runs to compare them ({} picked).", crate::model::multi_run::MAX_RUNS, files.len())}
                </p>
            }
            .into_any(),
        }
    }
}
