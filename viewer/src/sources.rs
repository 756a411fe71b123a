//! The browser edge: fetching files beside the page, reading local files, the page's query
//! string and the clipboard. Bytes go to `speedmatrix_schema::load_results` unchanged (so a
//! byte-order mark or UTF-16 file gets the loader's own message).

use js_sys::Uint8Array;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// What fetching a URL gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The body.
    Body(Vec<u8>),
    /// HTTP 404 (a site without `results.json` or `runs/index.json` is normal).
    NotFound,
    /// Anything else, in one line: a network error, another HTTP status.
    Failed(String),
}

/// A JavaScript error as one line of text.
pub fn js_error_text(e: &JsValue) -> String {
    if let Some(err) = e.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    e.as_string().unwrap_or_else(|| format!("{e:?}"))
}

fn window() -> web_sys::Window {
    web_sys::window().expect("the viewer runs in a browser window")
}

/// GET `url` (relative URLs resolve against the page, so a site works from a sub-path),
/// bypassing the HTTP cache so a re-published run is seen at once.
pub async fn fetch_bytes(url: &str) -> Fetched {
    match fetch_inner(url).await {
        Ok(f) => f,
        Err(e) => Fetched::Failed(js_error_text(&e)),
    }
}

async fn fetch_inner(url: &str) -> Result<Fetched, JsValue> {
    let init = web_sys::RequestInit::new();
    init.set_cache(web_sys::RequestCache::NoCache);
    let request = web_sys::Request::new_with_str_and_init(url, &init)?;
    let response: web_sys::Response = JsFuture::from(window().fetch_with_request(&request)).await?.dyn_into()?;
    if response.status() == 404 {
        return Ok(Fetched::NotFound);
    }
    if !response.ok() {
        let text = response.status_text();
        return Ok(Fetched::Failed(format!("HTTP {} {}", response.status(), text).trim_end().to_string()));
    }
    let buffer = JsFuture::from(response.array_buffer()?).await?;
    Ok(Fetched::Body(Uint8Array::new(&buffer).to_vec()))
}

/// The bytes of a file the user picked or dropped (read in the browser; nothing is uploaded).
///
/// # Errors
/// The browser's message when the file cannot be read.
pub async fn file_bytes(file: &web_sys::File) -> Result<Vec<u8>, String> {
    let buffer = JsFuture::from(file.array_buffer()).await.map_err(|e| js_error_text(&e))?;
    Ok(Uint8Array::new(&buffer).to_vec())
}

/// Every value of a query parameter of the page URL, in order (`?run=a&run=b`).
pub fn query_all(name: &str) -> Vec<String> {
    let search = window().location().search().unwrap_or_default();
    match web_sys::UrlSearchParams::new_with_str(&search) {
        Ok(params) => params.get_all(name).iter().filter_map(|v| v.as_string()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The first value of a query parameter.
pub fn query(name: &str) -> Option<String> {
    query_all(name).into_iter().next()
}

/// Set (or with `None` remove) a query parameter in the address bar without reloading, so the
/// view can be shared as a link.
pub fn set_query(name: &str, value: Option<&str>) {
    let w = window();
    let Ok(href) = w.location().href() else { return };
    let Ok(url) = web_sys::Url::new(&href) else { return };
    match value {
        Some(v) => url.search_params().set(name, v),
        None => url.search_params().delete(name),
    }
    if let Ok(history) = w.history() {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&url.href()));
    }
}

/// `url` resolved against `base` (itself resolved against the page).
pub fn resolve(url: &str, base: &str) -> String {
    let page = window().location().href().unwrap_or_default();
    let base = web_sys::Url::new_with_base(base, &page).map(|u| u.href()).unwrap_or_else(|_| base.to_string());
    web_sys::Url::new_with_base(url, &base).map(|u| u.href()).unwrap_or_else(|_| url.to_string())
}

/// Copy `text` to the clipboard. Without the Clipboard API (a page served over plain HTTP from
/// another host) the text of `fallback` is selected instead so Ctrl+C copies it.
///
/// Returns a short message for the button: "Copied", "Selected — press Ctrl+C" or the error.
pub async fn copy_text(text: &str, fallback: Option<web_sys::Element>) -> String {
    let navigator = window().navigator();
    let has_clipboard = js_sys::Reflect::get(&navigator, &JsValue::from_str("clipboard"))
        .map(|v| !v.is_undefined() && !v.is_null())
        .unwrap_or(false);
    if has_clipboard && JsFuture::from(navigator.clipboard().write_text(text)).await.is_ok() {
        return "Copied".into();
    }
    if let (Some(el), Ok(Some(selection))) = (fallback, window().get_selection()) {
        if selection.select_all_children(&el).is_ok() {
            return "Selected — press Ctrl+C".into();
        }
    }
    "Copy failed: select the text by hand".into()
}
