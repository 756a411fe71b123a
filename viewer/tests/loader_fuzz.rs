//! The viewer's loader fuzzed on wasm32, in the browser, where the page runs it: edited
//! results files (bytes and JSON values) give a run or one error line, never a panic (a panic
//! here is a trap that fails the test), and a file that loads renders as a report without one.
//! The edits are drawn from a fixed seed (no `getrandom` on wasm32), so a failure replays;
//! `shared/tests/fuzz_load.rs` fuzzes the same loader natively with proptest.
//!
//! `CHROMEDRIVER=$(command -v chromedriver) cargo test -p speedmatrix-viewer --target
//! wasm32-unknown-unknown --test loader_fuzz` (scripts/test.sh runs it).
#![cfg(target_arch = "wasm32")]

use leptos::prelude::*;
use serde_json::Value;
use speedmatrix_viewer::view::run_report::Report;
use std::sync::Arc;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[path = "../../shared/tests/common/json_paths.rs"]
mod json_paths;
use json_paths::{at_mut, paths};

/// The fixtures: the seed run and the round-1 files (twin, faults, interrupted, imports).
const FIXTURES: [(&str, &[u8]); 6] = [
    ("seed", include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")),
    ("twin-tiny", include_bytes!("../../tests/fixtures/round1/twin-tiny.json")),
    ("twin-h200-faults", include_bytes!("../../tests/fixtures/round1/twin-h200-faults.json")),
    ("twin-interrupted", include_bytes!("../../tests/fixtures/round1/twin-interrupted.json")),
    ("import-vllm-bench", include_bytes!("../../tests/fixtures/round1/import-vllm-bench.json")),
    ("import-llm-inference-bench", include_bytes!("../../tests/fixtures/round1/import-llm-inference-bench.json")),
];

/// Cases per fixture and kind of edit (bytes, JSON values).
const CASES: u64 = 150;

/// SplitMix64: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that change a JSON document's shape.
const TOKENS: [&[u8]; 12] =
    [b"{", b"}", b"[", b"]", b",", b":", b"\"", b"null", b"-1", b"1e999", b"\"\\u0000\"", b"\xff\xfe"];

/// One to three byte-level edits: flip a byte, cut a range, insert a token, repeat a range.
fn edit_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(bytes.len());
        match rng.below(4) {
            0 if !bytes.is_empty() => bytes[at] ^= 1 << rng.below(8),
            1 => {
                let end = (at + 1 + rng.below(64)).min(bytes.len());
                bytes.drain(at..end);
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                bytes.splice(at..at, t.iter().copied());
            }
            _ => {
                let end = (at + 1 + rng.below(64)).min(bytes.len());
                let piece = bytes[at..end].to_vec();
                bytes.splice(at..at, piece);
            }
        }
    }
}

/// Values a field should never hold, and some it may.
fn leaf(rng: &mut Rng) -> Value {
    let leaves = [
        Value::Null,
        serde_json::json!(-1),
        serde_json::json!(0),
        serde_json::json!(1.0e308),
        serde_json::json!(-1.0e-308),
        serde_json::json!(u64::MAX),
        serde_json::json!(""),
        serde_json::json!("x".repeat(300)),
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::json!(true),
        serde_json::json!("2026-13-45T99:99:99Z"),
    ];
    leaves[rng.below(leaves.len())].clone()
}

/// One to three value-level edits: replace a value at a random path, or remove it.
fn edit_json(rng: &mut Rng, root: &mut Value) {
    for _ in 0..1 + rng.below(3) {
        let mut all = vec![];
        paths(root, &mut vec![], &mut all);
        let path = all[rng.below(all.len())].clone();
        let remove = rng.below(3) == 0 && !path.is_empty();
        let new = leaf(rng);
        if remove {
            let (last, parent) = path.split_last().expect("not the root");
            match at_mut(root, parent) {
                Some(Value::Object(m)) => {
                    m.remove(last);
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = last.parse::<usize>() {
                        if i < a.len() {
                            a.remove(i);
                        }
                    }
                }
                _ => {}
            }
        } else if let Some(v) = at_mut(root, &path) {
            *v = new;
        }
    }
}

/// The loader's promise: a run or one error line. Returns the run.
fn load(what: &str, bytes: &[u8]) -> Option<speedmatrix_schema::Results> {
    match speedmatrix_schema::load_results(bytes) {
        Ok(r) => Some(r),
        Err(e) => {
            let line = e.to_string();
            assert!(!line.is_empty() && !line.contains('\n'), "{what}: the error is one line: {line:?}");
            None
        }
    }
}

/// Render `r` as the page's report in a fresh container, then remove it.
async fn render(r: speedmatrix_schema::Results) -> String {
    let doc = document();
    let host: web_sys::HtmlElement = wasm_bindgen::JsCast::unchecked_into(doc.create_element("div").unwrap());
    doc.body().unwrap().append_child(&host).unwrap();
    let r = Arc::new(r);
    let metric = RwSignal::new("total_tps".to_string());
    let handle = leptos::mount::mount_to(host.clone(), move || view! { <Report r=r metric=metric /> });
    leptos::task::tick().await;
    let text = host.text_content().unwrap_or_default();
    drop(handle);
    host.remove();
    text
}

#[wasm_bindgen_test]
fn every_fixture_loads() {
    for (name, bytes) in FIXTURES {
        assert!(load(name, bytes).is_some(), "{name} loads");
    }
}

#[wasm_bindgen_test]
async fn edited_bytes_load_or_say_why_and_what_loads_renders() {
    let (mut loaded, mut refused) = (0, 0);
    for (k, (name, bytes)) in FIXTURES.iter().enumerate() {
        let mut rng = Rng(0x5eed_0000 + k as u64);
        for case in 0..CASES {
            let mut b = bytes.to_vec();
            edit_bytes(&mut rng, &mut b);
            match load(&format!("{name} byte case {case}"), &b) {
                Some(r) => {
                    loaded += 1;
                    // Rendering is the slow part: every 10th loaded file.
                    if loaded % 10 == 1 {
                        assert!(!render(r).await.is_empty(), "{name} byte case {case} renders");
                    }
                }
                None => refused += 1,
            }
        }
    }
    // Both outcomes occur, or the edits test nothing.
    assert!(loaded > 0 && refused > 0, "loaded {loaded}, refused {refused}");
}

#[wasm_bindgen_test]
async fn edited_values_load_or_say_why_and_what_loads_renders() {
    let (mut loaded, mut refused) = (0, 0);
    for (k, (name, bytes)) in FIXTURES.iter().enumerate() {
        let mut rng = Rng(0xda7a_0000 + k as u64);
        let original: Value = serde_json::from_slice(bytes).expect("a fixture is JSON");
        for case in 0..CASES {
            let mut v = original.clone();
            edit_json(&mut rng, &mut v);
            let b = serde_json::to_vec(&v).expect("a value serializes");
            match load(&format!("{name} value case {case}"), &b) {
                Some(r) => {
                    loaded += 1;
                    if loaded % 5 == 1 {
                        assert!(!render(r).await.is_empty(), "{name} value case {case} renders");
                    }
                }
                None => refused += 1,
            }
        }
    }
    assert!(loaded > 0 && refused > 0, "loaded {loaded}, refused {refused}");
}
