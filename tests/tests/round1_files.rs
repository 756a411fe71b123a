//! Results files of round-1 builds (schema v1, `tests/fixtures/round1/`) and the seed fixture
//! load through the migration, keep every planned cell, prefill row and request, and still
//! render with `show`.

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
        let out = Command::new(support::bin()).arg("show").arg(&f).output().unwrap();
        assert!(out.status.success(), "{}: {}", f.display(), String::from_utf8_lossy(&out.stderr));
    }
}

fn round1(name: &str) -> (PathBuf, speedmatrix_schema::Results) {
    let f = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/round1").join(name);
    let r = load_results(&std::fs::read(&f).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
    (f, r)
}

fn missing_reason<'a>(r: &'a speedmatrix_schema::Results, figure: &str) -> Option<&'a str> {
    r.missing.iter().find(|m| m.figure == figure).map(|m| m.reason.as_str())
}

/// What a round-1 import invented becomes null with its reason in `missing`: the vllm-bench
/// import's `tool.version "unknown"`, its hard-coded engine `vllm`, the `max_tokens` it took
/// from the longest output and the window it took from the benchmark's duration; ITL counts
/// that held requests. What the source did give stays. `show` lists what is missing instead of
/// printing "vunknown".
#[test]
fn the_migration_nulls_what_round1_imports_invented_and_says_why() {
    let (file, r) = round1("import-vllm-bench.json");
    assert_eq!(r.tool.version, None);
    assert!(missing_reason(&r, "tool.version").is_some(), "{:?}", r.missing);
    assert_eq!(r.engine.name, None, "vllm bench serve does not record the server's engine");
    assert!(missing_reason(&r, "engine.name").is_some_and(|w| w.contains("\"vllm\"")), "{:?}", r.missing);
    assert_eq!((r.config.max_tokens, r.config.window_s), (None, None));
    assert!(missing_reason(&r, "config.max_tokens").is_some(), "{:?}", r.missing);
    assert!(r.decode.iter().filter_map(|c| c.itl_ms.as_ref()).all(|d| d.count.is_none()), "ITL counts held requests");
    assert!(
        r.decode.iter().any(|c| c.ttft_ms.as_ref().is_some_and(|d| d.count.is_some())),
        "TTFT counts requests: kept"
    );
    let show = Command::new(support::bin()).arg("show").arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "{}", String::from_utf8_lossy(&show.stderr));
    assert!(!text.contains("vunknown"), "{text}");
    assert!(text.contains("version not recorded") && text.contains("tool.version"), "{text}");

    // llm-inference-bench's metadata gave the engine, version, window and max_tokens: all kept.
    let (_, r) = round1("import-llm-inference-bench.json");
    assert_eq!((r.tool.version.as_deref(), r.engine.name.as_deref()), (Some("0.4.29"), Some("vllm")));
    assert_eq!((r.config.window_s, r.config.max_tokens), (Some(30.0), Some(4096)));
    assert!(r.decode.iter().filter_map(|c| c.itl_ms.as_ref()).all(|d| d.count.is_none()));
}

/// A round-1 run of the collector keeps what it claimed: its host hardware, its version, the
/// twin's engine and its plan; v2's fields it could not hold (where the server ran, how the
/// GPUs were chosen, the client machine) stay unrecorded rather than guessed.
#[test]
fn the_migration_keeps_what_a_round1_run_claimed() {
    for name in ["twin-tiny.json", "twin-interrupted.json", "twin-h200-faults.json"] {
        let raw: Value = serde_json::from_slice(
            &std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/round1").join(name)).unwrap(),
        )
        .unwrap();
        let (_, r) = round1(name);
        let h = &r.hardware;
        assert_eq!(h.cpu.as_deref(), raw["hardware"]["cpu"].as_str(), "{name}");
        assert_eq!(h.os.as_deref(), raw["hardware"]["os"].as_str(), "{name}");
        assert_eq!(h.host.as_deref(), raw["hardware"]["host"].as_str(), "{name}");
        assert_eq!(h.gpu_telemetry_note.as_deref(), raw["hardware"]["gpu_telemetry_note"].as_str(), "{name}");
        assert!(h.server_location.is_none() && h.gpu_selection.is_none() && r.client.is_none(), "{name}: not guessed");
        assert_eq!(r.tool.version.as_deref(), raw["tool"]["version"].as_str(), "{name}");
        assert_eq!(r.engine.name.as_deref(), raw["engine"]["name"].as_str(), "{name}");
        assert_eq!(r.config.max_tokens.map(u64::from), raw["config"]["max_tokens"].as_u64(), "{name}");
        assert_eq!(r.config.window_s, raw["config"]["window_s"].as_f64(), "{name}");
        // Where the server's running gauge was read, the figure meant streams being served then too.
        for (c, rc) in r.decode.iter().zip(raw["decode"].as_array().unwrap()) {
            if rc["server"]["running_avg"].is_number() {
                assert_eq!(c.avg_active_requests, rc["avg_active_requests"].as_f64(), "{name}");
            }
        }
    }
}
