//! Results files of round-1 builds (schema v1, `tests/fixtures/round1/`) and the seed fixture
//! load through the migration, keep every planned cell, prefill row and request, and still
//! render with `show`.

mod support;

use serde_json::Value;
use speedmatrix_schema::load_results;
use std::path::PathBuf;
use std::process::Command;

fn round1_files() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("round1"))
        .expect("tests/fixtures/round1")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files.push(root.join("h200-qwen3.5-122b-vllm.json"));
    files
}

#[test]
fn every_round1_file_loads_with_all_it_holds() {
    let files = round1_files();
    assert!(files.len() >= 6, "{files:?}");
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let raw: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(raw["schema_version"], 1, "{}: a round-1 file", f.display());
        let r = load_results(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let n = |k: &str| raw[k].as_array().map_or(0, Vec::len);
        assert_eq!(r.decode.len(), n("decode"), "{}: decode cells", f.display());
        assert_eq!(r.prefill.len(), n("prefill"), "{}: prefill rows", f.display());
        let requests: usize =
            raw["decode"].as_array().unwrap().iter().map(|c| c["requests"].as_array().map_or(0, Vec::len)).sum();
        assert_eq!(r.decode.iter().map(|c| c.requests.len()).sum::<usize>(), requests, "{}", f.display());
        for (cell, rawc) in r.decode.iter().zip(raw["decode"].as_array().unwrap()) {
            assert_eq!(serde_json::to_value(cell.status).unwrap(), rawc["status"], "{}", f.display());
            assert_eq!(u64::from(cell.concurrency), rawc["concurrency"].as_u64().unwrap());
            assert_eq!(cell.context.tokens, rawc["context"]["tokens"].as_u64().unwrap());
        }
        let out = Command::new(support::BIN).arg("show").arg(&f).output().unwrap();
        assert!(out.status.success(), "{}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
    }
}
