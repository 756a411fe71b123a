//! Fuzzing the results loader (property tests): any bytes give a value or one error line, never
//! a panic; any file it accepts survives a write → load round trip unchanged.
//!
//! Case counts are bounded for the normal test run (see `cases`); `PROPTEST_CASES=N` raises
//! them for the long form (docs/ARCHITECTURE.md, "Tests"). Native only: it reads the fixtures from disk.
#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use serde_json::Value;
use speedmatrix_schema::load_results;
use std::path::PathBuf;

#[path = "common/json_paths.rs"]
mod json_paths;
use json_paths::{at_mut, paths};

/// The committed results files: the seed run and every round-1 fixture (real shapes: prefill
/// rows, decode cells of every status, imports, an interrupted run, fault cells).
fn fixtures() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut paths = vec![root.join("h200-qwen3.5-122b-vllm.json")];
    let mut round1: Vec<PathBuf> = std::fs::read_dir(root.join("round1"))
        .expect("tests/fixtures/round1")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    round1.sort();
    paths.extend(round1);
    paths.into_iter().map(|p| (p.display().to_string(), std::fs::read(&p).expect("fixture"))).collect()
}

/// `PROPTEST_CASES` if set (the long form), else `default`.
fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    ProptestConfig { cases: n, failure_persistence: None, ..ProptestConfig::default() }
}

/// Load `bytes`; on failure the message must be one non-empty line. On success the value must
/// round-trip (write → load gives the same value).
fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
    match load_results(bytes) {
        Ok(r) => {
            let written = serde_json::to_vec_pretty(&r).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let again = load_results(&written).map_err(|e| TestCaseError::fail(format!("reload: {e}")))?;
            prop_assert_eq!(again, r);
        }
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(!msg.trim().is_empty(), "empty error");
            prop_assert!(!msg.contains('\n'), "error of several lines: {msg}");
        }
    }
    Ok(())
}

/// A byte-level edit of a file: overwrite, insert, delete or truncate at a position (a fraction
/// of the length, so the same edit fits every file).
#[derive(Debug, Clone)]
enum Edit {
    Set(f64, u8),
    Insert(f64, Vec<u8>),
    Delete(f64, usize),
    Truncate(f64),
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = 0.0..1.0f64;
    prop_oneof![
        (at.clone(), any::<u8>()).prop_map(|(a, b)| Edit::Set(a, b)),
        (at.clone(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(a, b)| Edit::Insert(a, b)),
        (at.clone(), 1..64usize).prop_map(|(a, n)| Edit::Delete(a, n)),
        at.prop_map(Edit::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, e: &Edit) {
    let pos = |f: f64, len: usize| ((f * len as f64) as usize).min(len);
    match e {
        Edit::Set(f, b) => {
            if !bytes.is_empty() {
                let i = pos(*f, bytes.len() - 1);
                bytes[i] = *b;
            }
        }
        Edit::Insert(f, b) => {
            let i = pos(*f, bytes.len());
            bytes.splice(i..i, b.iter().copied());
        }
        Edit::Delete(f, n) => {
            let i = pos(*f, bytes.len());
            let j = (i + n).min(bytes.len());
            bytes.drain(i..j);
        }
        Edit::Truncate(f) => bytes.truncate(pos(*f, bytes.len())),
    }
}

/// A JSON value that stresses the typed decode and the validation: wrong types, negative and
/// huge numbers, floats where integers go, odd strings.
fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("JSON has no NaN or infinities", |f| f.is_finite()).prop_map(Value::from),
        Just(Value::from(-0.0)),
        Just(Value::from(1e308)),
        ".{0,12}".prop_map(Value::from),
        Just(Value::from("2026-13-45T25:61:61Z")),
        Just(Value::Array(vec![])),
        Just(Value::Object(serde_json::Map::new())),
    ]
}

/// What a JSON-level mutation does at the chosen path.
#[derive(Debug, Clone)]
enum JsonEdit {
    Replace(Value),
    Remove,
    AddKey(String, Value),
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    prop_oneof![
        4 => json_leaf().prop_map(JsonEdit::Replace),
        2 => Just(JsonEdit::Remove),
        1 => ("[a-z_]{1,10}", json_leaf()).prop_map(|(k, v)| JsonEdit::AddKey(k, v)),
    ]
}

fn apply_json(root: &mut Value, path: &[String], e: &JsonEdit) {
    match e {
        JsonEdit::Replace(x) => {
            if let Some(v) = at_mut(root, path) {
                *v = x.clone();
            }
        }
        JsonEdit::Remove => {
            if let Some((last, parent)) = path.split_last() {
                match at_mut(root, parent) {
                    Some(Value::Object(m)) => {
                        m.remove(last);
                    }
                    Some(Value::Array(a)) => {
                        if let Some(i) = last.parse::<usize>().ok().filter(|i| *i < a.len()) {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        JsonEdit::AddKey(k, x) => {
            if let Some(Value::Object(m)) = at_mut(root, path) {
                m.insert(k.clone(), x.clone());
            }
        }
    }
}

#[test]
fn every_fixture_loads_and_round_trips() {
    for (name, bytes) in fixtures() {
        let r = load_results(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let again = load_results(&serde_json::to_vec_pretty(&r).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(again, r, "{name}");
    }
}

proptest! {
    #![proptest_config(cases(2000))]

    /// Raw bytes, mostly not JSON at all.
    #[test]
    fn any_bytes_give_a_value_or_one_error_line(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes)?;
    }

    /// JSON-ish text: braces, quotes, numbers and the header's words, so the scanner and the
    /// header check see something like a results file.
    #[test]
    fn json_like_text_never_panics(
        text in r#"[{}\[\]":,0-9eE.+\- \n\\a-z_]{0,200}"#,
        version in prop::option::of(any::<i64>()),
    ) {
        check(text.as_bytes())?;
        if let Some(v) = version {
            let doc = format!(r#"{{"schema":"speedmatrix-results","schema_version":{v},{text}"#);
            check(doc.as_bytes())?;
        }
    }
}

proptest! {
    #![proptest_config(cases(300))]

    /// A real file with a few byte edits (a truncated write, a flipped byte, an insertion).
    #[test]
    fn edited_fixture_bytes_never_panic(which in 0..16usize, edits in prop::collection::vec(edit(), 1..4)) {
        let all = fixtures();
        let mut bytes = all[which % all.len()].1.clone();
        for e in &edits {
            apply(&mut bytes, e);
        }
        check(&bytes)?;
    }

    /// A real file with values replaced, removed or added anywhere in its tree: the typed decode
    /// and the validation see every wrong type and impossible value; what they accept round-trips.
    #[test]
    fn edited_fixture_values_never_panic(
        which in 0..16usize,
        picks in prop::collection::vec((any::<prop::sample::Index>(), json_edit()), 1..4),
    ) {
        let all = fixtures();
        let mut root: Value = serde_json::from_slice(&all[which % all.len()].1).unwrap();
        for (pick, e) in &picks {
            let mut found = Vec::new();
            paths(&root, &mut Vec::new(), &mut found);
            let path = pick.get(&found).clone();
            apply_json(&mut root, &path, e);
        }
        check(&serde_json::to_vec(&root).unwrap())?;
    }
}
