//! `speedmatrix import`: llm-inference-bench's `benchmark_results.json` and `vllm bench serve
//! --save-result` files (small samples written from the documented fields, in
//! tests/fixtures/import/) → a results file, opened by `show` and by the viewer in headless
//! Chromium. The summary line and the imported file are snapshots
//! (`tests/tests/snapshots/import_cli__*.snap`).

use support::dom;

use speedmatrix_schema::{load_results, CellStatus, Results};
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/import").join(name)
}

fn speedmatrix(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(support::bin()).args(args).output().unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Import `files` into `out`; the line the CLI prints and the file it wrote are snapshots
/// (`import_cli__FROM-summary.snap`, `import_cli__FROM-file.snap`).
fn import(from: &str, files: &[&str], out: &Path) -> Results {
    let paths: Vec<String> = files.iter().map(|f| fixture(f).display().to_string()).collect();
    let mut args = vec!["import", "--from", from, "-o", out.to_str().unwrap()];
    args.extend(paths.iter().map(String::as_str));
    let (code, stdout, err) = speedmatrix(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("source fields not mapped"), "{err}");
    let written = std::fs::read_to_string(out).unwrap();
    let summary = format!("stdout:\n{stdout}stderr:\n{err}");
    support::snap::with_tmp(out.parent().unwrap()).bind(|| {
        insta::assert_snapshot!(format!("{from}-summary"), summary);
        insta::assert_snapshot!(format!("{from}-file"), written);
    });
    load_results(written.as_bytes()).expect("the imported file loads like any results file")
}

#[test]
fn llm_inference_bench_file_rebuilds_skipped_cells_and_lists_unmapped_fields() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lib.json");
    let r = import("llm-inference-bench", &["benchmark_results.json"], &out);
    assert_eq!(r.tool.name, "llm-inference-bench");
    assert_eq!(r.tool.version.as_deref(), Some("0.4.29"));
    assert!(r.tool.converted_by.as_deref().unwrap().starts_with("speedmatrix "));
    assert_eq!(r.engine.name.as_deref(), Some("vllm"));
    assert_eq!(r.run.started_at, None, "a local timestamp without offset is not invented into RFC 3339");
    // 2 contexts × 3 concurrencies: all six cells, the two skipped ones rebuilt as planned.
    assert_eq!(r.decode.len(), 6);
    let cell = |t: u64, n: u32| r.decode.iter().find(|c| c.context.tokens == t && c.concurrency == n).unwrap();
    let c = cell(8192, 1);
    assert_eq!(c.status, CellStatus::Valid);
    assert_eq!(c.total_tps, Some(117.0));
    let ttft = c.ttft_ms.unwrap();
    assert_eq!((ttft.p50, ttft.mean, ttft.p90), (Some(70.0), Some(71.0), None), "s → ms; 0 means not measured");
    assert_eq!(c.itl_ms.unwrap().p50, Some(8.4));
    assert_eq!(cell(8192, 64).status, CellStatus::RequestsQueued, "the source saw a queue");
    // 8 × (65536 + 4096) = 557,056 > 300,000: over capacity; 64 × … likewise.
    for n in [8, 64] {
        let c = cell(65536, n);
        assert_eq!(c.status, CellStatus::OverCapacity, "65536 × {n}");
        assert_eq!(c.capacity.unwrap().budget_tokens, 300_000);
        assert!(c.reason.as_deref().unwrap().contains("rebuilt"), "{:?}", c.reason);
    }
    assert_eq!(r.prefill.len(), 2);
    assert_eq!((r.prefill[0].ttft_ms, r.prefill[0].prompt_tps), (Some(610.0), Some(13430.0)));
    let unmapped = &r.import.as_ref().unwrap().unmapped;
    let has = |f: &str| unmapped.iter().any(|u| u.field == f);
    for f in [
        "$.metadata.server",
        "$.metadata.timestamp",
        "$.results[0].time_to_second_token_p50",
        "$.results[0].server_gen_throughput",
        "$.prefill.8192.server_validation",
        "$.event_log",
        "$.methodology",
    ] {
        assert!(has(f), "{f} is listed as unmapped: {unmapped:?}");
    }
    assert!(!has("$.results[0].aggregate_tps") && !has("$.summary_table"), "mapped fields are not listed");
    show_and_view(&out, &["Over capacity", "Requests queued", "llm-inference-bench", "Not imported", "$.event_log"]);
}

#[test]
fn vllm_bench_files_become_one_column_each() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("vb.json");
    let r = import("vllm-bench", &["vllm-bench-c1.json", "vllm-bench-c4.json"], &out);
    assert_eq!(r.config.concurrency, [1, 4]);
    assert_eq!(r.decode.len(), 2, "one row (1,024-token inputs) × two columns");
    let (c1, c4) = (&r.decode[0], &r.decode[1]);
    assert_eq!((c1.context.tokens, c1.concurrency, c4.concurrency), (1024, 1, 4));
    assert_eq!(c1.total_tps, Some(104.49));
    let t = c1.ttft_ms.unwrap();
    assert_eq!((t.p50, t.p99, t.min, t.max, t.count), (Some(48.5), Some(51.93), Some(46.0), Some(52.0), Some(8)));
    assert_eq!(c4.tpot_ms.unwrap().p90, Some(11.8));
    assert_eq!(c4.e2e_ms.unwrap().p50, Some(1522.0));
    let unmapped = &r.import.as_ref().unwrap().unmapped;
    assert!(unmapped.iter().any(|u| u.field == "vllm-bench-c1.json: $.request_throughput"), "{unmapped:?}");
    assert!(unmapped.iter().any(|u| u.field == "vllm-bench-c4.json: $.date"), "{unmapped:?}");
    assert!(r.missing.iter().any(|m| m.figure == "window"));
    show_and_view(&out, &["Qwen/Qwen3-8B", "104.5", "Missing figures", "vllm-bench-c4.json: $.date"]);
}

#[test]
fn wrong_format_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.json");
    let f = fixture("vllm-bench-c1.json");
    let (code, _, err) =
        speedmatrix(&["import", "--from", "llm-inference-bench", "-o", out.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.starts_with("error: vllm-bench-c1.json: no .metadata"), "{err}");
    assert!(err.contains("--from llm-inference-bench") && err.lines().count() == 1, "{err}");
    assert!(!out.exists());
}

/// vllm-bench-c1.json with `edit` applied, written to `dir/name`.
fn vllm_copy(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("vllm-bench-c1.json")).unwrap()).unwrap();
    edit(&mut v);
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    p
}

#[test]
fn vllm_bench_file_where_every_request_failed_is_an_error_cell() {
    let dir = tempfile::tempdir().unwrap();
    let src = vllm_copy(dir.path(), "all-failed.json", |v| {
        v["completed"] = 0.into();
        v["failed"] = 8.into();
        v["errors"][0] = "Bad Request: context length exceeded".into();
    });
    let out = dir.path().join("x.json");
    let (code, _, err) =
        speedmatrix(&["import", src.to_str().unwrap(), "--from", "vllm-bench", "-o", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let r = load_results(&std::fs::read(&out).unwrap()).expect("the imported file loads");
    let c = &r.decode[0];
    assert_eq!(c.status, CellStatus::Error);
    assert_eq!(c.reason.as_deref(), Some("all 8 requests failed: Bad Request: context length exceeded"));
    assert!(c.total_tps.is_none() && c.ttft_ms.is_none() && c.tpot_ms.is_none() && c.itl_ms.is_none());
    assert!(c.e2e_ms.is_none() && c.output_tokens.is_none() && c.completed_requests.is_none());
}

#[test]
fn inconsistent_vllm_bench_figures_are_bad_input_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.json");
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str); 3] = [
        (
            "median-above-p99.json",
            |v| v["median_ttft_ms"] = 60.0.into(),
            "median-above-p99.json: median_ttft_ms (60) is above p99_ttft_ms (51.93)",
        ),
        (
            "negative-tps.json",
            |v| v["output_throughput"] = (-104.49).into(),
            "negative-tps.json: output_throughput is -104.49; durations, throughputs and counts cannot be negative",
        ),
        (
            "ttft-outside.json",
            |v| v["p99_ttft_ms"] = 60.0.into(),
            "ttft-outside.json: p99_ttft_ms (60) is above the largest of ttfts (52)",
        ),
    ];
    for (name, edit, want) in cases {
        let src = vllm_copy(dir.path(), name, edit);
        let (code, _, err) =
            speedmatrix(&["import", src.to_str().unwrap(), "--from", "vllm-bench", "-o", out.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.starts_with(&format!("error: {want}")), "{name}: {err}");
        assert!(!err.contains("a bug") && err.lines().count() == 1, "{err}");
        assert!(!out.exists());
    }
}

/// `show` prints the file and the served viewer renders it (headless Chromium's DOM).
fn show_and_view(file: &Path, needles: &[&str]) {
    let (code, text, err) = speedmatrix(&["show", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    for n in needles {
        assert!(text.contains(n) || text.contains(&n.to_lowercase()), "show lacks {n:?}:\n{text}");
    }
    let Some(dom) = dom::rendered_dom(file) else { return };
    for n in needles {
        assert!(dom.contains(n), "the page lacks {n:?}:\n{}", &dom[..dom.len().min(3000)]);
    }
}

/// llm-inference-bench's decode test without context (`context_tokens: 0`) is a row like any
/// other, not dropped; a result that cannot be placed is listed as not imported; metadata the
/// file lacks (engine, version, max_tokens, window) stays null and is listed in `missing`; run
/// ids come from the inputs, so two different files of one name get different ids.
#[test]
fn llm_inference_bench_context_0_row_is_kept_and_nothing_is_invented() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("benchmark_results.json")).unwrap()).unwrap();
    let first = v["results"][0].clone();
    let mut zero = first.clone();
    zero["context_tokens"] = 0.into();
    let mut loose = first.clone();
    loose.as_object_mut().unwrap().remove("context_tokens");
    v["results"].as_array_mut().unwrap().extend([zero, loose]);
    v["metadata"]["context_lengths"] = serde_json::json!([0, 8192, 65536]);
    for k in ["engine", "version", "max_tokens", "duration_per_test"] {
        v["metadata"].as_object_mut().unwrap().remove(k);
    }
    let src = dir.path().join("benchmark_results.json");
    std::fs::write(&src, v.to_string()).unwrap();
    let out = dir.path().join("lib0.json");
    let (code, _, err) =
        speedmatrix(&["import", "--from", "llm-inference-bench", "-o", out.to_str().unwrap(), src.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let r = load_results(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r.config.contexts.first().map(|c| c.tokens), Some(0), "{:?}", r.config.contexts);
    let row0: Vec<_> = r.decode.iter().filter(|c| c.context.tokens == 0).collect();
    assert_eq!(row0.len(), 3, "one cell per concurrency level in the context-0 row");
    assert!(row0.iter().any(|c| c.status.is_measured()), "the measured context-0 cell is kept");
    let unmapped = &r.import.as_ref().unwrap().unmapped;
    assert!(unmapped.iter().any(|u| u.note.contains("to place it in the matrix")), "{unmapped:?}");
    assert_eq!((r.engine.name.as_deref(), r.tool.version.as_deref()), (None, None));
    assert_eq!((r.config.max_tokens, r.config.window_s), (None, None));
    for figure in ["engine.name", "tool.version", "config.max_tokens", "config.window_s"] {
        assert!(r.missing.iter().any(|m| m.figure == figure), "{figure}: {:?}", r.missing);
    }
    let plain = dir.path().join("plain.json");
    let (code, _, err) = speedmatrix(&[
        "import",
        "--from",
        "llm-inference-bench",
        "-o",
        plain.to_str().unwrap(),
        fixture("benchmark_results.json").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let p = load_results(&std::fs::read(&plain).unwrap()).unwrap();
    assert!(p.run.id.starts_with("import-") && p.run.id != r.run.id, "{} vs {}", p.run.id, r.run.id);
}

/// Newcomer trial: another tool's file given to `show`, `simulate --fit` or `diff` read "not a
/// speedmatrix results file" with no way forward. It names the `import` command instead.
#[test]
fn another_tools_file_where_a_results_file_belongs_names_the_import_command() {
    for (file, from) in [("benchmark_results.json", "llm-inference-bench"), ("vllm-bench-c1.json", "vllm-bench")] {
        let path = fixture(file).display().to_string();
        let want = format!(
            "not a speedmatrix results file; convert it first: speedmatrix import {path} --from {from} -o RUN.json"
        );
        for args in [vec!["show", path.as_str()], vec!["simulate", "--fit", path.as_str(), "--residuals"]] {
            let (code, _, err) = speedmatrix(&args);
            assert_eq!(code, Some(2), "{args:?}: {err}");
            assert!(err.contains(&want), "{args:?}: {err}");
        }
    }
    // A JSON file of no known shape keeps the plain message.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"completed": 3}"#).unwrap();
    let (code, _, err) = speedmatrix(&["show", other.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("not a speedmatrix results file: no \"schema\"") && !err.contains("speedmatrix import"),
        "{err}"
    );
}
