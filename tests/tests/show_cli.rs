//! `speedmatrix show` end to end: the real binary on the seed fixture, the round-1 results files
//! and malformed files. Every format's output (text, Markdown, with and without `--all`; CSV,
//! JSON) is a snapshot (`tests/tests/snapshots/show_cli__*.snap`). Bad input must give one line
//! `error: FILE: problem at PLACE`, exit code 2, and never a panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FIXTURE: &str = "tests/fixtures/h200-qwen3.5-122b-vllm.json";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn show(args: &[&str]) -> Output {
    Command::new(support::bin()).current_dir(root()).arg("show").args(args).output().expect("run speedmatrix")
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}, stderr: {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("UTF-8 output")
}

/// The files every format is snapshotted on: the seed fixture and the round-1 results files
/// (twin runs, faults, an interrupted run, both imports), as (snapshot name, path from the root).
fn snapshot_files() -> Vec<(String, String)> {
    let mut files = vec![("seed".to_string(), FIXTURE.to_string())];
    let dir = root().join("tests/fixtures/round1");
    let mut round1: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/round1")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    round1.sort();
    assert!(round1.len() >= 5, "{round1:?}");
    for p in round1 {
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        files.push((format!("round1-{stem}"), format!("tests/fixtures/round1/{stem}.json")));
    }
    files
}

/// `show FILE ARGS…` on every snapshot file, each output a snapshot named `KIND-FILE`.
fn snapshot_every_file(kind: &str, args: &[&str]) {
    for (name, file) in snapshot_files() {
        let mut all = vec![file.as_str()];
        all.extend_from_slice(args);
        let out = stdout(&show(&all));
        support::snap::settings().bind(|| insta::assert_snapshot!(format!("{kind}-{name}"), out));
    }
}

#[test]
fn text_report_snapshots() {
    snapshot_every_file("text", &[]);
    // The full measurement table only comes with --all.
    assert!(!stdout(&show(&[FIXTURE])).contains("All measurements"));
}

#[test]
fn text_report_with_all_snapshots() {
    snapshot_every_file("text-all", &["--all"]);
}

#[test]
fn markdown_report_snapshots() {
    snapshot_every_file("markdown", &["--format", "markdown"]);
    snapshot_every_file("markdown-all", &["--format", "markdown", "--all"]);
}

#[test]
fn csv_and_json_table_snapshots() {
    snapshot_every_file("csv", &["--format", "csv"]);
    snapshot_every_file("json", &["--format", "json"]);
}

#[test]
fn markdown_matrix_has_over_capacity_at_251k_x_32() {
    let out = stdout(&show(&[FIXTURE, "--format", "markdown"]));
    let header: Vec<&str> = out.lines().find(|l| l.starts_with("| Context | 1 |")).unwrap().split(" | ").collect();
    let row: Vec<&str> = out.lines().find(|l| l.starts_with("| 251K |")).unwrap().split(" | ").collect();
    let col = header.iter().position(|h| *h == "32").unwrap();
    assert_eq!(row[col], "Over capacity");
    let row8k: Vec<&str> = out.lines().find(|l| l.starts_with("| 8K |")).unwrap().split(" | ").collect();
    assert_eq!(
        row8k[header.iter().position(|h| h.trim_end_matches(" |") == "128").unwrap()].trim_end_matches(" |"),
        "6,342.6<br>10,187 ms TTFT"
    );
    assert!(out.contains("## Prefill"));
}

#[test]
fn all_csv_has_a_header_and_55_rows() {
    let out = stdout(&show(&[FIXTURE, "--all", "--format", "csv"]));
    let mut reader = csv::Reader::from_reader(out.as_bytes());
    let headers = reader.headers().unwrap().clone();
    assert_eq!(&headers[0], "phase");
    for id in ["total_tps", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "prompt_tps", "window_s"] {
        assert!(headers.iter().any(|h| h == id), "header lacks {id}");
    }
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 55);
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let cell = rows
        .iter()
        .find(|r| &r[col("context")] == "8K" && &r[col("concurrency")] == "128" && &r[col("phase")] == "decode")
        .unwrap();
    assert_eq!(&cell[col("total_tps")], "6342.6");
    assert_eq!(&cell[col("ttft_ms_p50")], "10187");
    assert_eq!(&cell[col("ttft_ms_p99")], "", "figures the page lacks are empty, not invented");
    assert_eq!(rows.iter().filter(|r| &r[col("status")] == "over_capacity").count(), 6);
    assert_eq!(rows.iter().filter(|r| &r[col("status")] == "requests_queued").count(), 1);
    // Same table without --all: csv always gives the full table.
    assert_eq!(stdout(&show(&[FIXTURE, "--format", "csv"])), out);
}

#[test]
fn json_rows_match_csv() {
    let out = stdout(&show(&[FIXTURE, "--format", "json"]));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 55);
    let prefill = &rows[0];
    assert_eq!(prefill["phase"], "prefill");
    assert_eq!(prefill["prompt_tps"], 22500.0);
    assert!(prefill["total_tps"].is_null());
}

/// A real twin run with rate cells (tests/fixtures/rates-twin.json): valid, saturated, and
/// rates not run after the saturated one.
const RATES_FIXTURE: &str = "tests/fixtures/rates-twin.json";

#[test]
fn rates_csv_and_json_give_one_row_per_rate_cell_as_the_file_has_it() {
    let r = speedmatrix_schema::load_results(&std::fs::read(root().join(RATES_FIXTURE)).unwrap()).unwrap();
    let out = stdout(&show(&[RATES_FIXTURE, "--rates", "--format", "csv"]));
    let mut reader = csv::Reader::from_reader(out.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), r.rates.len());
    for (row, cell) in rows.iter().zip(&r.rates) {
        assert_eq!(&row[col("context")], cell.context.label);
        assert_eq!(&row[col("rate_rps")], format!("{}", cell.rate_rps));
        assert_eq!(&row[col("status")], cell.status.id());
        assert_eq!(&row[col("achieved_rps")], cell.achieved_rps.map(|v| format!("{v}")).unwrap_or_default());
        let ttft_p90 = cell.ttft_ms.and_then(|d| d.p90).map(|v| format!("{v}")).unwrap_or_default();
        assert_eq!(&row[col("ttft_ms_p90")], ttft_p90);
        let unfinished = cell.saturation.as_ref().map(|s| s.unfinished.to_string()).unwrap_or_default();
        assert_eq!(&row[col("unfinished")], unfinished);
    }
    let statuses: Vec<&str> = rows.iter().map(|row| &row[col("status")]).collect();
    for s in ["valid", "saturated", "not_run"] {
        assert!(statuses.contains(&s), "the fixture has a {s} rate cell: {statuses:?}");
    }
    let skipped = rows.iter().find(|row| &row[col("status")] == "not_run").unwrap();
    assert_eq!(&skipped[col("achieved_rps")], "", "a rate not run has no figures, not zeros");
    assert!(skipped[col("reason")].contains("saturated"), "{:?}", &skipped[col("reason")]);

    let json: Vec<serde_json::Value> =
        serde_json::from_str(&stdout(&show(&[RATES_FIXTURE, "--rates", "--format", "json"]))).unwrap();
    assert_eq!(json.len(), rows.len());
    let sat = json.iter().find(|o| o["status"] == "saturated").unwrap();
    assert!(sat["scheduled_requests"].is_u64() && sat["in_flight_end"].is_u64(), "counts are integers: {sat}");
    assert!(sat["achieved_rps"].is_f64(), "{sat}");
    assert_eq!(json.iter().find(|o| o["status"] == "not_run").unwrap()["achieved_rps"], serde_json::Value::Null);

    // The measurement table is unchanged by rate cells, and a run without any gives the header only.
    let table = stdout(&show(&[RATES_FIXTURE, "--format", "csv"]));
    assert_eq!(table.lines().count(), 1 + r.prefill.len() + r.decode.len(), "{table}");
    let none = stdout(&show(&[FIXTURE, "--rates", "--format", "csv"]));
    assert_eq!(none.lines().count(), 1, "{none}");
    assert!(none.starts_with("context,context_tokens,rate_rps,"), "{none}");
    // The text report already shows the rate table: --rates there is a usage error.
    let o = show(&[RATES_FIXTURE, "--rates"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("-f csv or -f json"));
}

#[test]
fn all_text_table_and_stdin() {
    let bytes = std::fs::read(root().join(FIXTURE)).unwrap();
    let mut child = Command::new(support::bin())
        .args(["show", "-", "--all"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = stdout(&child.wait_with_output().unwrap());
    assert!(out.contains("All measurements"));
    let queued: Vec<&str> =
        out.lines().filter(|l| l.starts_with("│ Sustained decode") && l.contains("Requests queued")).collect();
    assert_eq!(queued.len(), 1, "{out}");
    let cells: Vec<&str> =
        queued[0].split('┆').map(|c| c.trim_matches(|c: char| c == '│' || c.is_whitespace())).collect();
    assert_eq!(&cells[..5], ["Sustained decode", "64K", "8", "Requests queued", "1,202.3"]);
}

/// Write `content` to a temp file, run `show` on it, and check the one-line error.
fn bad(name: &str, content: &[u8], expect: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    check_error(&path, expect);
}

fn check_error(path: &Path, expect: &[&str]) {
    let o = show(&[path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "exit code for {}: stderr {err}", path.display());
    assert!(o.stdout.is_empty(), "nothing on stdout for bad input");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with(&format!("error: {}: ", path.display())), "{err}");
    for e in expect {
        assert!(err.contains(e), "error {err:?} lacks {e:?}");
    }
}

fn fixture_json() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root().join(FIXTURE)).unwrap()).unwrap()
}

#[test]
fn truncated_json() {
    let bytes = std::fs::read(root().join(FIXTURE)).unwrap();
    bad("truncated.json", &bytes[..bytes.len() / 2], &["invalid JSON at line", "ends early"]);
}

#[test]
fn wrong_type() {
    let mut v = fixture_json();
    v["decode"][3]["total_tps"] = serde_json::json!("fast");
    bad(
        "wrong-type.json",
        v.to_string().as_bytes(),
        &["at decode[3].total_tps:", "invalid type: string \"fast\"", "expected f64"],
    );
}

#[test]
fn missing_field() {
    let mut v = fixture_json();
    v["decode"][5].as_object_mut().unwrap().remove("status");
    bad("missing.json", v.to_string().as_bytes(), &["at decode[5]", "missing field `status`"]);
    let mut v = fixture_json();
    v.as_object_mut().unwrap().remove("schema");
    bad("no-schema.json", v.to_string().as_bytes(), &["not a speedmatrix results file", "\"schema\""]);
}

#[test]
fn unknown_field_is_named() {
    let mut v = fixture_json();
    v["config"]["window_seconds"] = serde_json::json!(30);
    bad("unknown.json", v.to_string().as_bytes(), &["at config.window_seconds", "unknown field `window_seconds`"]);
}

#[test]
fn newer_version() {
    let mut v = fixture_json();
    let newer = speedmatrix_schema::SCHEMA_VERSION + 1;
    v["schema_version"] = serde_json::json!(newer);
    bad(
        "newer.json",
        v.to_string().as_bytes(),
        &[&format!("written by a newer speedmatrix (v{newer}); upgrade speedmatrix")],
    );
}

#[test]
fn fifty_megabytes_of_garbage() {
    // Deterministic pseudo-random bytes (xorshift), 50 MB.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let garbage: Vec<u8> = (0..50 * 1024 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    bad("garbage.bin", &garbage, &["invalid JSON at line 1, column"]);
    // 50 MB of one deeply nested array: the parser's depth limit, not a stack overflow.
    bad("deep.json", &vec![b'['; 50 * 1024 * 1024], &["invalid JSON", "recursion limit"]);
}

#[test]
fn nan_and_negative_durations() {
    let text = serde_json::to_string_pretty(&fixture_json()).unwrap().replacen(
        "\"total_tps\": 237.1",
        "\"total_tps\": NaN",
        1,
    );
    bad("nan.json", text.as_bytes(), &["invalid JSON at line", "NaN is not a JSON number"]);
    let mut v = fixture_json();
    v["decode"][0]["ttft_ms"]["p50"] = serde_json::json!(-196);
    bad("negative.json", v.to_string().as_bytes(), &["at decode[0].ttft_ms.p50: -196 is negative"]);
    let mut v = fixture_json();
    v["config"]["window_s"] = serde_json::json!(-30.0);
    bad("negative-window.json", v.to_string().as_bytes(), &["at config.window_s: -30.0 is negative"]);
}

#[test]
fn impossible_values() {
    let mut v = fixture_json();
    v["decode"][0]["ttft_ms"] = serde_json::json!({"p50": 300, "max": 200});
    bad("order.json", v.to_string().as_bytes(), &["at decode[0].ttft_ms:", "p50 (300) is above max (200)"]);
    let mut v = fixture_json();
    v["run"]["started_at"] = serde_json::json!("yesterday");
    bad("time.json", v.to_string().as_bytes(), &["at run.started_at:", "not an RFC 3339 time"]);
    let mut v = fixture_json();
    v["decode"][1] = v["decode"][0].clone();
    bad("dup.json", v.to_string().as_bytes(), &["at decode[1]:", "a second cell for context 8K × concurrency 1"]);
    let mut v = fixture_json();
    v["decode"][47].as_object_mut().unwrap().remove("reason");
    bad("reason.json", v.to_string().as_bytes(), &["at decode[47].reason:", "over_capacity cell must say why"]);
}

#[test]
fn empty_and_missing_files() {
    bad("empty.json", b"", &["the file is empty"]);
    check_error(Path::new("/nonexistent/run.json"), &["cannot read", "No such file"]);
    check_error(Path::new("/tmp"), &["cannot read"]);
}

#[test]
fn oversized_input_is_refused_without_reading_it_all() {
    // /dev/zero never ends: the reader stops after the size limit.
    check_error(Path::new("/dev/zero"), &["larger than any results file"]);
}

#[test]
fn duplicate_keys_are_refused() {
    let text = fixture_text().replacen("\"total_tps\": 237.1,", "\"total_tps\": 237.1, \"total_tps\": 99999,", 1);
    bad("dup-key.json", text.as_bytes(), &["at decode[0].total_tps: the key \"total_tps\" appears twice"]);
}

#[test]
fn control_characters_never_reach_the_terminal() {
    let mut v = fixture_json();
    v["config"]["\u{1b}[31mKEY\nX"] = serde_json::json!(1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("esc.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let o = show(&[path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(!err.contains('\u{1b}'), "raw escape in {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    assert!(err.contains("\\u{1b}[31mKEY\\nX"), "{err:?}");
    // In the text report, labels from the file are cleaned as well.
    let mut v = fixture_json();
    v["run"]["label"] = serde_json::json!("evil\u{1b}[2Jlabel");
    std::fs::write(&path, v.to_string()).unwrap();
    let out = stdout(&show(&[path.to_str().unwrap()]));
    assert!(out.contains("evil\u{fffd}[2Jlabel") && !out.contains('\u{1b}'));
}

#[test]
fn cells_must_belong_to_the_plan() {
    let mut v = fixture_json();
    v["decode"][0]["concurrency"] = serde_json::json!(3);
    bad("off-plan.json", v.to_string().as_bytes(), &["at decode[0].concurrency: 3 is not in config.concurrency"]);
    let mut v = fixture_json();
    v["decode"][1]["context"] = serde_json::json!({"label": "EIGHT", "tokens": 8192});
    bad("label.json", v.to_string().as_bytes(), &["at decode[1].context: label \"EIGHT\" differs"]);
    let mut v = fixture_json();
    v["decode"].as_array_mut().unwrap().remove(10);
    bad("missing-cell.json", v.to_string().as_bytes(), &["at decode: the planned cell 16K × 4 is missing"]);
    let mut v = fixture_json();
    v["config"]["contexts"][1] = v["config"]["contexts"][0].clone();
    bad("twice.json", v.to_string().as_bytes(), &["at config.contexts[1]: context 8K (8192 tokens) is listed twice"]);
}

#[test]
fn closed_stdout_is_not_a_panic() {
    use std::io::Read;
    for args in [vec!["schema"], vec!["show", FIXTURE, "--all"]] {
        let mut child = Command::new(support::bin())
            .current_dir(root())
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Read one byte, then close the pipe, as `| head -c1` does.
        let mut one = [0u8; 1];
        child.stdout.take().unwrap().read_exact(&mut one).unwrap();
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    }
}

fn fixture_text() -> String {
    std::fs::read_to_string(root().join(FIXTURE)).unwrap()
}

/// The rows of a box-drawn table in text output: each line starting with `│`, split on its
/// column separators, cells trimmed.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| l.starts_with('│'))
        .map(|l| l.trim_matches('│').split('┆').map(|c| c.trim().to_string()).collect())
        .collect()
}

#[test]
fn slo_prints_the_largest_concurrency_meeting_it_per_context() {
    let out = stdout(&show(&[FIXTURE, "--slo", "ttft=2s,tps=20"]));
    assert!(out.contains("Capacity at your SLO — TTFT ≤ 2 s, per-user ≥ 20 tok/s (medians)"), "{out}");
    // By hand from the seed fixture (decode cells' median TTFT and median per-request tok/s):
    // at every context the TTFT limit binds first (each cell's per-user speed is far above 20).
    // 8K: 16 streams 532 ms, 32 streams 2,716 ms. 16K: 595 / 2,674 ms. 32K: 726 / 2,552 ms.
    // 64K: 8 streams are "requests queued" (not counted), 16 → 1,824 ms, 32 → 3,556 ms.
    // 128K: 8 → 1,299 ms, 16 → 3,375 ms. 251K: 4 → 1,310 ms, 8 → 2,007 ms, 7 ms over.
    // Per GPU: the hardware card says 2 GPUs.
    let want = [
        ["8K", "16", "532 ms", "125.1", "2,023.2", "1,011.6"],
        ["16K", "16", "595 ms", "123.1", "1,995.5", "997.8"],
        ["32K", "16", "726 ms", "121.8", "1,966.8", "983.4"],
        ["64K", "16", "1,824 ms", "117.4", "1,923.6", "961.8"],
        ["128K", "8", "1,299 ms", "132.7", "1,066.2", "533.1"],
        ["251K", "4", "1,310 ms", "153.2", "596.0", "298.0"],
    ];
    let rows = table_rows(&out);
    assert_eq!(
        rows[0],
        ["Context", "Requests at once", "TTFT", "Per request tok/s", "Total tok/s", "Total tok/s per GPU"]
    );
    assert_eq!(rows[1..], want.map(|r| r.map(String::from).to_vec()), "{out}");
    // A per-user floor that binds: 8K keeps 163.1 tok/s per user at 8 streams, 125.1 at 16
    // (16K and 32K alike); 64K's 8 is queued, so 4 (184.2); 128K has 164.5 at 4, 132.7 at 8;
    // 251K 153.2 at 4, 119.6 at 8.
    let rows = table_rows(&stdout(&show(&[FIXTURE, "--slo", "tps=150"])));
    let by_context: Vec<(&str, &str)> = rows[1..].iter().map(|r| (r[0].as_str(), r[1].as_str())).collect();
    assert_eq!(by_context, [("8K", "8"), ("16K", "8"), ("32K", "8"), ("64K", "4"), ("128K", "4"), ("251K", "4")]);
    // Nothing meets a 150 ms TTFT: each context says so, with the smallest cell's miss.
    let out = stdout(&show(&[FIXTURE, "--slo", "ttft=150ms"]));
    assert!(table_rows(&out)[1..].iter().all(|r| r[1] == "none"), "{out}");
    assert!(out.contains("8K: 1 at once: TTFT 196 ms > 150 ms"), "{out}");
    // Markdown, and a run without a GPU count says why it has no per-GPU figure.
    let md = stdout(&show(&["tests/fixtures/round1/import-vllm-bench.json", "--slo", "ttft=1s", "-f", "markdown"]));
    assert!(md.contains("| 1K | 4 | 90 ms |"), "{md}");
    assert!(md.contains("Total tok/s per GPU: — because the hardware card has no GPU count"), "{md}");
}

#[test]
fn a_bad_slo_is_refused_with_the_expected_form() {
    for (slo, why) in [
        ("ttft=2", "not a duration with a unit"),
        ("ttft=2s,ttft=3s", "ttft is given twice"),
        ("tps=fast", "not a number of tok/s"),
        ("tps=-1", "must be a number ≥ 0"),
        ("latency=2s", "unknown key \"latency\""),
        ("", "give ttft, tps or both"),
        ("ttft", "is not KEY=VALUE"),
    ] {
        let out = show(&[FIXTURE, "--slo", slo]);
        assert_eq!(out.status.code(), Some(2), "{slo}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error: --slo") && err.contains(why) && err.contains("--slo ttft=2s,tps=20"),
            "{slo}: {err}"
        );
    }
    let out = show(&[FIXTURE, "--slo", "ttft=2s", "-f", "csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("text or markdown"));
}

#[test]
fn a_run_of_the_twin_says_simulated() {
    let real = stdout(&show(&[FIXTURE]));
    assert!(!real.contains("Simulated"), "the seed measured a real server");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("twin.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(root().join(FIXTURE)).unwrap()).unwrap();
    v["engine"]["simulated"] = serde_json::json!({"by": "speedmatrix twin", "profile": "h200-qwen3.5-122b", "evidence": "x-speedmatrix-twin header"});
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let text = stdout(&show(&[path.to_str().unwrap()]));
    let line = "Simulated: this run measured the speedmatrix twin (profile h200-qwen3.5-122b), a model of a server";
    assert!(text.lines().take(8).any(|l| l.starts_with(line)), "near the top: {text}");
    assert!(text.contains("yes — speedmatrix twin, profile h200-qwen3.5-122b"), "in the Engine card");
    let md = stdout(&show(&[path.to_str().unwrap(), "--format", "markdown"]));
    assert!(md.contains("> **Simulated: this run measured the speedmatrix twin"), "{md}");
}

/// Every `missing` entry is listed under "Missing figures", in file order, in text and Markdown
/// (a newcomer's file of four, one of them `spec_accept_rate`, read as listing three).
#[test]
fn every_missing_entry_is_listed() {
    let entries = [
        ("engine.launch_command", "the server is not on this machine; give --launch-command"),
        ("kv_budget", "a plain OpenAI-compatible endpoint does not report its KV cache"),
        ("spec_accept_rate", "speculative-decoding counters come only from an engine's /metrics"),
        ("engine.version", "/version answered HTTP 404"),
    ];
    let mut v = fixture_json();
    v["missing"] = entries.iter().map(|(f, r)| serde_json::json!({"figure": f, "reason": r})).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("four-missing.json");
    std::fs::write(&path, v.to_string()).unwrap();
    for format in ["text", "markdown"] {
        let out = stdout(&show(&[path.to_str().unwrap(), "-f", format]));
        let (_, section) = out.split_once("Missing figures").expect("a Missing figures section");
        let section = section.split("Launch command").next().unwrap();
        let listed: Vec<&str> = section
            .lines()
            .filter_map(|l| entries.iter().find(|(f, r)| l.contains(f) && l.contains(r)).map(|(f, _)| *f))
            .collect();
        assert_eq!(listed, entries.map(|(f, _)| f), "{format}:\n{section}");
    }
}

#[test]
fn slo_judges_rate_cells_in_rate_order_with_the_order_they_were_measured() {
    // As `--rates auto` would have measured 8K: 1 req/s, then 8, then 0.5.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(root().join(RATES_FIXTURE)).unwrap()).unwrap();
    let rank = |c: &serde_json::Value| {
        let half_rps = (c["rate_rps"].as_f64().unwrap() * 2.0) as u64;
        match (c["context"]["tokens"].as_u64(), half_rps) {
            (Some(8192), 2) => 0,
            (Some(8192), 16) => 1,
            (Some(8192), 1) => 2,
            _ => 3,
        }
    };
    v["rates"].as_array_mut().unwrap().sort_by_key(rank);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auto.json");
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    // TTFT p90 ≤ 700 ms: 8K at 0.5 (366 ms) and 1 req/s (639 ms) meet it, 8 req/s is
    // saturated; at 32K even 0.5 req/s has 1,755 ms.
    let out = stdout(&show(&[path.to_str().unwrap(), "--slo", "ttft=700ms,p=90"]));
    assert!(out.contains("Rate cells at your SLO — TTFT p90 ≤ 700 ms"), "{out}");
    let rows = table_rows(&out);
    let rate_rows: Vec<Vec<String>> = rows.iter().filter(|r| r.len() == 9).cloned().collect();
    assert_eq!(
        rate_rows[0],
        [
            "Context",
            "Rate",
            "Measured",
            "Status",
            "Achieved req/s",
            "TTFT p90",
            "TPOT p90",
            "Goodput req/s",
            "Meets the SLO"
        ]
    );
    let got: Vec<[&str; 4]> =
        rate_rows[1..].iter().map(|r| [r[0].as_str(), r[1].as_str(), r[2].as_str(), r[8].as_str()]).collect();
    assert_eq!(
        got,
        [
            ["8K", "0.5 req/s", "#3", "yes"],
            ["8K", "1 req/s", "#1", "yes"],
            ["8K", "8 req/s", "#2", "no"],
            ["32K", "0.5 req/s", "#1", "no"],
            ["32K", "1 req/s", "#2", "no"],
            ["32K", "8 req/s", "#3", "no"],
        ],
        "{out}"
    );
    assert!(out.contains("Highest rate meeting the SLO at 8K: 1 req/s (8 req/s did not)."), "{out}");
    assert!(out.contains("Highest rate meeting the SLO at 32K: none (0.5 req/s did not)."), "{out}");
    // The report's rate table: rates ascending too, with the order measured beside them.
    let report = stdout(&show(&[path.to_str().unwrap()]));
    let rows = table_rows(&report);
    let measured: Vec<[&str; 3]> =
        rows.iter().filter(|r| r.len() == 12).map(|r| [r[0].as_str(), r[1].as_str(), r[2].as_str()]).take(4).collect();
    assert_eq!(
        measured,
        [["Context", "Rate", "Measured"], ["8K", "0.5 req/s", "#3"], ["8K", "1 req/s", "#1"], ["8K", "8 req/s", "#2"]],
        "{report}"
    );
    // tpot= is the per-request limit of rate cells; tps and tpot together are refused.
    let out = stdout(&show(&[RATES_FIXTURE, "--slo", "tpot=20ms"]));
    assert!(out.contains("Rate cells at your SLO — TPOT p50 ≤ 20 ms"), "{out}");
    let o = show(&[RATES_FIXTURE, "--slo", "tps=20,tpot=50ms"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give tps or tpot, not both"));
}
