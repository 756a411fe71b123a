//! What the live page follows, as plain data: one state of a run being measured, parsed from
//! `/live.json` (the run so far and where it stands, [`speedmatrix_schema::progress::Live`]).
//! Pure and unit-tested (on wasm32 in headless Chromium by CI); the live page
//! (`view::live_page`) polls the document and draws it.

use speedmatrix_schema::progress::Live;
use speedmatrix_schema::{load_results, Results};
use std::sync::Arc;

/// One state of the run as `/live.json` gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveDoc {
    /// Whether the measuring process itself serves the page (`run --serve`), rather than a
    /// file being followed (`serve --watch`).
    pub measuring: bool,
    /// Where the run stands: the cell being measured and its phase, the contexts warmed.
    pub live: Live,
    /// The run so far, through the schema crate's loader.
    pub results: Arc<Results>,
}

/// Parse `/live.json`: its `results` go through the schema crate's loader like any file.
pub fn parse(bytes: &[u8]) -> Result<LiveDoc, String> {
    let mut v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("live.json: {e}"))?;
    let results = v.get_mut("results").map(serde_json::Value::take).ok_or("live.json: no results")?;
    let text = serde_json::to_vec(&results).map_err(|e| e.to_string())?;
    let results = load_results(&text).map_err(|e| e.to_string())?;
    let live = match v.get_mut("live").map(serde_json::Value::take) {
        Some(l) => serde_json::from_value(l).map_err(|e| format!("live.json: live: {e}"))?,
        None => Live::default(),
    };
    let measuring = v.get("measuring").and_then(serde_json::Value::as_bool).unwrap_or(false);
    Ok(LiveDoc { measuring, live, results: Arc::new(results) })
}

#[cfg(test)]
mod tests {
    use super::*;
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const RUN: &str = include_str!("../../../tests/fixtures/round1/twin-tiny.json");

    #[test]
    fn a_live_document_goes_through_the_loader_and_keeps_its_live_state() {
        let text = format!(
            r#"{{"version":3,"measuring":true,"live":{{"current":{{"measuring":{{"kind":"decode","context":{{"label":"8K","tokens":8192}},"concurrency":8}},"phase":"window","window_elapsed_s":1.5,"live_tps":99.0,"streams_running":8}},"warm":[8192]}},"results":{RUN}}}"#
        );
        let d = parse(text.as_bytes()).unwrap();
        assert!(d.measuring);
        assert_eq!(d.live.warm, vec![8192]);
        let c = d.live.current.unwrap();
        assert_eq!((c.phase, c.streams_running), (speedmatrix_schema::progress::Phase::Window, Some(8)));
        assert_eq!(*d.results, load_results(RUN.as_bytes()).unwrap());
    }

    #[test]
    fn a_broken_live_document_says_what_is_wrong() {
        assert_eq!(parse(br#"{"version":1}"#).unwrap_err(), "live.json: no results");
        assert!(parse(b"not json").unwrap_err().starts_with("live.json: "));
        // Results the loader refuses give the loader's own message.
        let bad = parse(br#"{"version":1,"results":{"schema":"other"}}"#).unwrap_err();
        assert_eq!(bad, load_results(br#"{"schema":"other"}"#).unwrap_err().to_string());
    }
}
