//! The view besides the run: table sort, filters and columns (kept in the URL), the theme
//! (remembered in localStorage, else the system's, followed live) and the viewport that charts
//! redraw on; and the heatmap metric named in the URL.

use crate::model::cell_detail::CellKey;
use crate::model::run_report::{self, Filters};
use crate::view::browser;
use leptos::prelude::*;

/// The view besides the run and the heatmap metric: table sort and filters, the open cell, the
/// theme and the viewport. Sort, filters, columns and the open cell live in the URL query (permalinks; see
/// [`run_report::VIEW_PARAMS`]) and come back on back/forward.
#[derive(Clone, Copy)]
pub struct ViewState {
    /// Table sort keys by column id, with ascending (`?sort=total_tps,-ttft_ms_p50`).
    pub sort: RwSignal<Vec<(String, bool)>>,
    /// Table filters (`?phase=&context=&concurrency=&status=`).
    pub filters: RwSignal<Filters>,
    /// Every registry column in the table (`?columns=all`).
    pub all_columns: RwSignal<bool>,
    /// The decode cell whose detail panel is open under the heatmap (`?cell=8192x128`).
    pub cell: RwSignal<Option<CellKey>>,
    /// The prefix share whose cells the heatmap shows, basis points (`?share=90`); `None`: the
    /// default ([`run_report::heatmap_share`]).
    pub share: RwSignal<Option<u32>>,
    /// Whether the dark theme is in force (the toggle, else the system's preference).
    pub dark: Signal<bool>,
    /// (width changes counter, devicePixelRatio): charts redraw when it changes.
    pub viewport: RwSignal<(u32, f64)>,
}

impl ViewState {
    /// A light view with default table state, not tied to the URL (component tests).
    pub fn detached() -> Self {
        ViewState {
            sort: RwSignal::new(Vec::new()),
            filters: RwSignal::new(Filters::default()),
            all_columns: RwSignal::new(false),
            cell: RwSignal::new(None),
            share: RwSignal::new(None),
            dark: Signal::stored(false),
            viewport: RwSignal::new((0, 1.0)),
        }
    }

    /// Read sort, filters, columns, the open cell and the heatmap's share from the page URL.
    pub(super) fn read_url(self) {
        self.cell.set(browser::query("cell").and_then(|v| CellKey::parse(&v)));
        self.share.set(browser::query("share").and_then(|v| run_report::parse_share_param(&v)));
        self.sort.set(browser::query("sort").map(|v| run_report::parse_sort(&v)).unwrap_or_default());
        self.filters.set(run_report::filters_from(browser::query));
        self.all_columns.set(browser::query("columns").as_deref() == Some("all"));
    }
}

/// The heatmap metric named in the URL (`?metric=`), else total tok/s (the report page and the
/// diff view).
pub(crate) fn metric_from_url() -> String {
    browser::query("metric")
        .filter(|m| run_report::heatmap_metrics().iter().any(|c| c.id() == *m || c.metric.id == m))
        .unwrap_or_else(|| run_report::DEFAULT_METRIC.to_string())
}

/// The theme choice kept in localStorage under this key: `light` or `dark` (absent: system).
pub(crate) const THEME_KEY: &str = "speedmatrix-theme";

/// The page-wide view: the theme (the remembered choice, else the system's preference, followed
/// live; set on `<html data-theme>`), the viewport (charts redraw on resize and devicePixelRatio
/// changes) and default table state. Returns it with the theme choice (`""`, `light`, `dark`).
pub(crate) fn page_view_state() -> (ViewState, RwSignal<String>) {
    // Theme: the remembered choice, else the system's preference (followed live).
    let theme = RwSignal::new(browser::stored(THEME_KEY).filter(|t| t == "light" || t == "dark").unwrap_or_default());
    let system_dark = RwSignal::new(browser::media_matches("(prefers-color-scheme: dark)"));
    browser::on_media_change("(prefers-color-scheme: dark)", move |m| system_dark.set(m));
    let dark = Signal::derive(move || match theme.get().as_str() {
        "dark" => true,
        "light" => false,
        _ => system_dark.get(),
    });
    Effect::new(move |_| {
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-theme", if dark.get() { "dark" } else { "light" });
        }
    });
    let viewport = RwSignal::new((0_u32, browser::device_pixel_ratio()));
    browser::on_dpr_change(move |r| viewport.update(|v| *v = (v.0, r)));
    let _ = window_event_listener(leptos::ev::resize, move |_| {
        viewport.update(|v| *v = (v.0.wrapping_add(1), browser::device_pixel_ratio()));
    });
    let view_state = ViewState {
        sort: RwSignal::new(Vec::new()),
        filters: RwSignal::new(Filters::default()),
        all_columns: RwSignal::new(false),
        cell: RwSignal::new(None),
        share: RwSignal::new(None),
        dark,
        viewport,
    };
    (view_state, theme)
}
