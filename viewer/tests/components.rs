//! Component tests of the report in a real browser (wasm-bindgen-test-runner + chromedriver):
//! `CHROMEDRIVER=$(command -v chromedriver) cargo test -p speedmatrix-viewer --target
//! wasm32-unknown-unknown`. Native builds compile nothing here.
#![cfg(target_arch = "wasm32")]

use leptos::prelude::*;
use speedmatrix_viewer::view::run_report::Report;
use std::sync::Arc;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

const SEED: &[u8] = include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json");

/// Mount the seed report in a fresh container; returns the container.
async fn mount_seed(metric: RwSignal<String>) -> web_sys::HtmlElement {
    mount(speedmatrix_schema::load_results(SEED).unwrap(), metric).await
}

/// Mount the report of `r` in a fresh container; returns the container.
async fn mount(r: speedmatrix_schema::Results, metric: RwSignal<String>) -> web_sys::HtmlElement {
    let doc = document();
    let host: web_sys::HtmlElement = doc.create_element("div").unwrap().unchecked_into();
    doc.body().unwrap().append_child(&host).unwrap();
    let r = Arc::new(r);
    leptos::mount::mount_to(host.clone(), move || view! { <Report r=r metric=metric /> }).forget();
    leptos::task::tick().await;
    host
}

fn text(host: &web_sys::HtmlElement, css: &str) -> String {
    host.query_selector(css).unwrap().unwrap_or_else(|| panic!("{css} missing")).text_content().unwrap_or_default()
}

fn cell(context: &str, n: u32) -> String {
    format!("#heatmap td[data-context=\"{context}\"][data-concurrency=\"{n}\"]")
}

#[wasm_bindgen_test]
async fn heatmap_shows_value_ttft_and_status_marks() {
    let host = mount_seed(RwSignal::new("total_tps".into())).await;
    let c = text(&host, &cell("8K", 128));
    assert!(c.contains("6,342.6") && c.contains("10,187 ms TTFT"), "{c}");
    let over = host.query_selector(&cell("251K", 32)).unwrap().unwrap();
    assert!(over.class_list().contains("st-over_capacity"));
    assert_eq!(over.get_attribute("tabindex").as_deref(), Some("0"), "reasons are reachable by keyboard");
    assert!(over.text_content().unwrap().contains("exceed the server's KV cache"));
    let queued = text(&host, &cell("64K", 8));
    assert!(queued.contains("Requests queued") && queued.contains("811 ms TTFT"), "{queued}");
    let style = host.query_selector(&cell("8K", 128)).unwrap().unwrap().get_attribute("style").unwrap_or_default();
    assert!(style.contains("background-color: rgb(8, 69, 148)"), "the best cell is the darkest: {style}");
}

#[wasm_bindgen_test]
async fn metric_signal_redraws_the_heatmap() {
    let metric = RwSignal::new("total_tps".to_string());
    let host = mount_seed(metric).await;
    metric.set("ttft_ms_p50".into());
    leptos::task::tick().await;
    let c = text(&host, &cell("8K", 128));
    assert!(c.contains("10,187 ms") && !c.contains("6,342.6"), "{c}");
    assert!(text(&host, "#heatmap-legend").contains("10,187 ms"));
}

#[wasm_bindgen_test]
async fn header_click_sorts_and_shift_click_adds_a_key() {
    let host = mount_seed(RwSignal::new("total_tps".into())).await;
    let click = |col: &str, shift: bool| {
        let init = web_sys::MouseEventInit::new();
        init.set_bubbles(true);
        init.set_shift_key(shift);
        let ev = web_sys::MouseEvent::new_with_mouse_event_init_dict("click", &init).unwrap();
        let button = host.query_selector(&format!("#measurements th[data-col={col}] button")).unwrap().unwrap();
        button.dispatch_event(&ev).unwrap();
    };
    click("status", false);
    click("status", false);
    leptos::task::tick().await;
    click("context", true);
    leptos::task::tick().await;
    let first = host.query_selector("#measurements tbody tr").unwrap().unwrap().text_content().unwrap();
    assert!(first.contains("Over capacity") && first.contains("64K"), "status descending, then context: {first}");
    let th = host.query_selector("#measurements th[data-col=context]").unwrap().unwrap();
    assert_eq!(th.get_attribute("aria-sort").as_deref(), Some("ascending"));
    assert!(th.text_content().unwrap().contains("▲2"));
}

#[wasm_bindgen_test]
async fn charts_are_drawn_with_table_mirrors() {
    let host = mount_seed(RwSignal::new("total_tps".into())).await;
    // Effects draw after mount: give them a frame.
    leptos::task::tick().await;
    let ids = ["chart-prefill-tps", "chart-prefill-ttft", "chart-decode-total", "chart-decode-ttft", "chart-pareto"];
    for id in &ids {
        let canvas: web_sys::HtmlCanvasElement =
            host.query_selector(&format!("#charts #{id}")).unwrap().unwrap_or_else(|| panic!("{id}")).unchecked_into();
        assert_drawn(&canvas, id);
        assert_eq!(canvas.get_attribute("tabindex").as_deref(), Some("0"), "{id} is reachable by keyboard");
    }
    let rows = host.query_selector("#table-decode-total tbody").unwrap().unwrap().child_element_count();
    assert_eq!(rows, 42, "one mirror row per decode cell with a total tok/s");
}

/// The chart was drawn: its bitmap covers the canvas' CSS box at the device pixel ratio (an
/// undrawn canvas keeps the default 300 × 150 bitmap; a chart is 340 CSS pixels of plot plus
/// the band of its legend below), the background fills it (no transparent pixel) and more than
/// the background is on it.
fn assert_drawn(canvas: &web_sys::HtmlCanvasElement, id: &str) {
    let dpr = window().device_pixel_ratio();
    let css_height = f64::from(canvas.client_height());
    assert!(
        (340.0..=340.0 + 200.0).contains(&css_height),
        "{id}: the chart's CSS height {css_height}: 340 of plot and a legend band"
    );
    assert_eq!(canvas.height(), (css_height * dpr).round() as u32, "{id}: bitmap height = CSS height × {dpr}");
    assert!(f64::from(canvas.width()) >= (280.0 * dpr).round(), "{id}: bitmap width {}", canvas.width());
    let ctx: web_sys::CanvasRenderingContext2d = canvas.get_context("2d").unwrap().unwrap().unchecked_into();
    let (w, h) = (canvas.width(), canvas.height());
    let pixels = ctx.get_image_data(0.0, 0.0, f64::from(w), f64::from(h)).unwrap().data();
    assert!(pixels.chunks_exact(4).all(|p| p[3] == 255), "{id}: the background covers the canvas");
    let colours: std::collections::BTreeSet<&[u8]> = pixels.chunks_exact(4).collect();
    assert!(colours.len() > 2, "{id}: lines, marks and text drawn over the background ({} colours)", colours.len());
}

/// Click the heatmap cell (`context` label, `n`) and let the panel draw.
async fn open_cell(host: &web_sys::HtmlElement, context: &str, n: u32) {
    let td: web_sys::HtmlElement = host.query_selector(&cell(context, n)).unwrap().unwrap().unchecked_into();
    td.click();
    leptos::task::tick().await;
    leptos::task::tick().await;
}

#[wasm_bindgen_test]
async fn a_seed_cell_opens_a_panel_that_says_its_series_and_intervals_are_unavailable() {
    let host = mount_seed(RwSignal::new("total_tps".into())).await;
    assert!(host.query_selector("#cell-panel").unwrap().is_none(), "no panel before a click");
    open_cell(&host, "8K", 128).await;
    assert_eq!(text(&host, "#cell-panel-title"), "8K context · 128 at once");
    use speedmatrix_viewer::model::cell_detail::{NO_NOISE, NO_REQUESTS, NO_SERIES};
    assert_eq!(text(&host, "#cell-series-missing"), NO_SERIES);
    assert_eq!(text(&host, "#cell-intervals-missing"), NO_NOISE);
    assert_eq!(text(&host, "#cell-ttft-missing"), NO_REQUESTS);
    assert!(host.query_selector("#cell-panel canvas").unwrap().is_none(), "no chart without samples");
    assert!(host.query_selector("#cell-repeats").unwrap().is_none(), "measured once: no repeats table");
    let close: web_sys::HtmlElement = host.query_selector("#cell-close").unwrap().unwrap().unchecked_into();
    close.click();
    leptos::task::tick().await;
    assert!(host.query_selector("#cell-panel").unwrap().is_none(), "closed");
}

/// The seed with a 6-second series (a `null` running gauge in bucket 3) and a total tok/s
/// interval on its 8K × 128 cell.
fn seed_with_series() -> speedmatrix_schema::Results {
    let mut r = speedmatrix_schema::load_results(SEED).unwrap();
    let c = r.decode.iter_mut().find(|c| c.context.tokens == 8192 && c.concurrency == 128).unwrap();
    c.series = Some(speedmatrix_schema::WindowSeries {
        bucket_s: 1.0,
        output_tokens: vec![6300.0, 6350.0, 6340.0, 6360.0, 6330.0, 6370.0],
        streams_decoding: vec![127.0, 128.0, 128.0, 128.0, 128.0, 128.0],
        running: vec![Some(128.0), Some(128.0), None, Some(128.0), Some(127.0), Some(128.0)],
        waiting: vec![],
    });
    let iv = speedmatrix_schema::Interval {
        estimate: 6342.6,
        low: 6300.0,
        high: 6385.2,
        level: 0.95,
        method: speedmatrix_schema::IntervalMethod::BatchMeans,
        evidence: 6,
        std_error: 16.6,
        df: Some(5.0),
    };
    c.intervals = Some(speedmatrix_schema::CellIntervals { total_tps: Some(iv), ..Default::default() });
    r
}

#[wasm_bindgen_test]
async fn a_cell_with_a_series_draws_one_point_per_bucket_and_its_interval_everywhere() {
    let host = mount(seed_with_series(), RwSignal::new("total_tps".into())).await;
    open_cell(&host, "8K", 128).await;
    leptos::task::tick().await;
    let canvas = host.query_selector("#cell-panel #chart-cell-window").unwrap().expect("the window chart");
    let points = canvas.get_attribute("data-points").unwrap_or_default();
    assert_eq!(points.split_whitespace().count(), 6, "one point per bucket: {points}");
    let streams = host.query_selector("#cell-panel #chart-cell-streams").unwrap().expect("the streams chart");
    assert_eq!(streams.get_attribute("data-series").as_deref(), Some("3"), "decoding, and running split at its gap");
    assert_eq!(streams.get_attribute("data-points").unwrap_or_default().split_whitespace().count(), 11);
    let tps = text(&host, "#cell-intervals li[data-figure=total_tps]");
    assert!(tps.contains("6,342.6 ± 0.7 % (95 % interval, batch means over 6 batches)"), "{tps}");
    let ttft = text(&host, "#cell-intervals li[data-figure=ttft_ms_p50]");
    assert!(ttft.contains("no interval"), "{ttft}");
    // The same interval as an error bar on the chart and ± in the table.
    let total = host.query_selector("#charts #chart-decode-total").unwrap().unwrap();
    assert_eq!(total.get_attribute("data-intervals").as_deref(), Some("1"));
    let table = text(&host, "#measurements tbody");
    assert!(table.contains("6,342.6 ± 0.7 %"), "{table}");
    assert_eq!(table.matches('±').count(), 1, "only the cell with an interval has a ±");
}
