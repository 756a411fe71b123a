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

/// The runs a one-file report carries (`speedmatrix report`): (file name, JSON bytes) of the
/// `<script type="application/json" id="speedmatrix-run-a">` (and `-b`) elements, in order.
/// Empty on an ordinary page.
pub fn embedded_runs() -> Vec<(String, Vec<u8>)> {
    let Some(doc) = window().document() else { return vec![] };
    ["speedmatrix-run-a", "speedmatrix-run-b"]
        .iter()
        .filter_map(|id| doc.get_element_by_id(id))
        .map(|e| {
            let name = e.get_attribute("data-name").unwrap_or_else(|| "report".into());
            (name, e.text_content().unwrap_or_default().into_bytes())
        })
        .collect()
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

/// Set every value of a repeated query parameter (`?pick=a&pick=b`; none removes it) in the
/// address bar without reloading.
pub fn set_query_all(name: &str, values: &[String]) {
    let w = window();
    let Ok(href) = w.location().href() else { return };
    let Ok(url) = web_sys::Url::new(&href) else { return };
    let sp = url.search_params();
    sp.delete(name);
    for v in values {
        sp.append(name, v);
    }
    if url.href() == href {
        return;
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

/// Set or remove several query parameters at once and push a history entry (so back/forward
/// step through views); nothing is pushed when the URL would not change.
pub fn push_query(params: &[(&str, Option<String>)]) {
    let w = window();
    let Ok(href) = w.location().href() else { return };
    let Ok(url) = web_sys::Url::new(&href) else { return };
    let sp = url.search_params();
    for (name, value) in params {
        match value {
            Some(v) => sp.set(name, v),
            None => sp.delete(name),
        }
    }
    if url.href() == href {
        return;
    }
    if let Ok(history) = w.history() {
        let _ = history.push_state_with_url(&JsValue::NULL, "", Some(&url.href()));
    }
}

/// Offer `text` as a file download named `name` (a Blob URL on a temporary link).
pub fn download_text(name: &str, mime: &str, text: &str) {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options) else { return };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else { return };
    download_url(name, &url);
    let _ = web_sys::Url::revoke_object_url(&url);
}

/// Offer the resource at `url` (a Blob or data URL) as a download named `name`.
pub fn download_url(name: &str, url: &str) {
    let Some(doc) = window().document() else { return };
    let Ok(a) = doc.create_element("a") else { return };
    let a: web_sys::HtmlAnchorElement = a.unchecked_into();
    a.set_href(url);
    a.set_download(name);
    a.click();
}

/// A value kept in the browser's localStorage (`None` when storage is unavailable).
pub fn stored(key: &str) -> Option<String> {
    window().local_storage().ok().flatten()?.get_item(key).ok().flatten()
}

/// Keep (or with `None` forget) a value in localStorage; silently nothing without storage.
pub fn store(key: &str, value: Option<&str>) {
    if let Some(s) = window().local_storage().ok().flatten() {
        let _ = match value {
            Some(v) => s.set_item(key, v),
            None => s.remove_item(key),
        };
    }
}

/// Whether a CSS media query matches now (`(prefers-color-scheme: dark)`).
pub fn media_matches(query: &str) -> bool {
    window().match_media(query).ok().flatten().is_some_and(|m| m.matches())
}

/// Call `f(matches)` whenever the media query's match changes (for the page's lifetime).
pub fn on_media_change(query: &str, f: impl Fn(bool) + 'static) {
    let Some(mql) = window().match_media(query).ok().flatten() else { return };
    let m2 = mql.clone();
    let cb = wasm_bindgen::closure::Closure::<dyn Fn()>::new(move || f(m2.matches()));
    let _ = mql.add_event_listener_with_callback("change", cb.as_ref().unchecked_ref());
    cb.forget();
}

/// The device pixels per CSS pixel now (1 when unknown).
pub fn device_pixel_ratio() -> f64 {
    let r = window().device_pixel_ratio();
    if r.is_finite() && r > 0.0 {
        r
    } else {
        1.0
    }
}

/// Call `f(ratio)` whenever `devicePixelRatio` changes (browser zoom, moving the window to
/// another screen): a `(resolution: Xdppx)` media query for the current ratio, re-armed after
/// each change.
pub fn on_dpr_change(f: impl Fn(f64) + 'static) {
    fn arm(f: std::rc::Rc<dyn Fn(f64)>) {
        let query = format!("(resolution: {}dppx)", device_pixel_ratio());
        let Some(mql) = window().match_media(&query).ok().flatten() else { return };
        let f2 = f.clone();
        let cb = wasm_bindgen::closure::Closure::once_into_js(move || {
            f2(device_pixel_ratio());
            arm(f2);
        });
        let options = web_sys::AddEventListenerOptions::new();
        options.set_once(true);
        let _ =
            mql.add_event_listener_with_callback_and_add_event_listener_options("change", cb.unchecked_ref(), &options);
    }
    arm(std::rc::Rc::new(f));
}

/// Add a `performance.mark(name)` (milliseconds since navigation start, read by the render
/// benchmark); nothing without the Performance API.
pub fn mark(name: &str) {
    if let Some(p) = window().performance() {
        let _ = p.mark(name);
    }
}
