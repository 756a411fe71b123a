//! `speedmatrix diff` end to end: the real binary on the seed fixture (A) against a copy (B)
//! made here with some cells changed, one cell made over capacity, the 128K context removed, a
//! newer engine and two changed launch flags. Text, Markdown and JSON outputs are snapshots
//! (`tests/tests/snapshots/diff_cli__*.snap`); the printed numbers are also checked against
//! values computed from the fixture; `--fail-on-regression` and bad input exit as documented.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FIXTURE: &str = "tests/fixtures/h200-qwen3.5-122b-vllm.json";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn seed() -> Value {
    serde_json::from_slice(&std::fs::read(root().join(FIXTURE)).unwrap()).unwrap()
}

fn cell(v: &mut Value, ctx: u64, n: u64) -> &mut Value {
    v["decode"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["context"]["tokens"] == ctx && c["concurrency"] == n)
        .unwrap()
}

/// The candidate: 8K × 128 total tok/s +20 %, 8K × 1 −20 %, 64K × 64 over capacity, no 128K.
fn modified() -> Value {
    let mut b = seed();
    b["engine"]["version"] = "0.27.0".into();
    let cmd = b["engine"]["launch_command"].as_str().unwrap().to_string();
    b["engine"]["launch_command"] = format!(
        "{} --max-num-seqs 256",
        cmd.replace("--gpu-memory-utilization 0.862690", "--gpu-memory-utilization 0.9")
    )
    .into();
    let tps = |b: &mut Value, ctx, n| cell(b, ctx, n)["total_tps"].as_f64().unwrap();
    let v = tps(&mut b, 8192, 128) * 1.2;
    cell(&mut b, 8192, 128)["total_tps"] = v.into();
    let v = tps(&mut b, 8192, 1) * 0.8;
    cell(&mut b, 8192, 1)["total_tps"] = v.into();
    let c = cell(&mut b, 65536, 64).as_object_mut().unwrap();
    for f in ["total_tps", "per_request_tps", "ttft_ms", "itl_ms", "output_tokens", "completed_requests"] {
        c.remove(f);
    }
    for f in ["avg_active_requests", "window_s", "token_count_source"] {
        c.remove(f);
    }
    c.insert("status".into(), "over_capacity".into());
    c.insert("reason".into(), "needs 1,000,000 KV-cache tokens, the server holds 900,000; not run".into());
    let not_128k = |x: &Value| x["tokens"] != 131072 && x["context"]["tokens"] != 131072;
    for list in ["contexts", "prefill_contexts"] {
        b["config"][list].as_array_mut().unwrap().retain(not_128k);
    }
    for list in ["decode", "prefill"] {
        b[list].as_array_mut().unwrap().retain(not_128k);
    }
    b
}

struct Pair {
    dir: tempfile::TempDir,
    a: PathBuf,
    b: PathBuf,
}

fn pair() -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("candidate.json");
    std::fs::write(&b, serde_json::to_vec_pretty(&modified()).unwrap()).unwrap();
    Pair { a: root().join(FIXTURE), b, dir }
}

fn diff(a: &Path, b: &Path, args: &[&str]) -> Output {
    Command::new(support::bin())
        .current_dir(root())
        .arg("diff")
        .arg(a)
        .arg(b)
        .args(args)
        .output()
        .expect("run speedmatrix")
}

fn ok(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// `diff` output as a snapshot: stdout, then stderr and the exit code when either says more.
fn snapshot(name: &str, p: &Pair, o: &Output) {
    let mut text = String::from_utf8(o.stdout.clone()).unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if !err.is_empty() || o.status.code() != Some(0) {
        text.push_str(&format!("--- stderr (exit {:?}) ---\n{err}", o.status.code()));
    }
    support::snap::with_tmp(p.dir.path()).bind(|| insta::assert_snapshot!(name, text));
}

#[test]
fn text_shows_header_changes_deltas_status_changes_and_one_run_only_cells() {
    let p = pair();
    let o = diff(&p.a, &p.b, &[]);
    ok(&o);
    snapshot("text", &p, &o);
    // Another metric and threshold, and the gate's verdict under the matrix.
    snapshot("text-ttft-threshold-3", &p, &diff(&p.a, &p.b, &["--metric", "ttft_ms_p50", "--threshold", "3%"]));
    snapshot("text-gate-5", &p, &diff(&p.a, &p.b, &["--fail-on-regression", "5%"]));
    snapshot("text-identical-gate-0", &p, &diff(&p.a, &p.a, &["--fail-on-regression", "0"]));
}

#[test]
fn markdown_and_json_snapshots() {
    let p = pair();
    snapshot("markdown", &p, &diff(&p.a, &p.b, &["--format", "markdown"]));
    snapshot("markdown-gate-5", &p, &diff(&p.a, &p.b, &["--format", "markdown", "--fail-on-regression", "5"]));
    let plain = diff(&p.a, &p.b, &["--format", "json"]);
    snapshot("json", &p, &plain);
    // With the gate, the same document plus `gate`: only that part is a snapshot of its own.
    let gated = diff(&p.a, &p.b, &["--format", "json", "--fail-on-regression", "5"]);
    let mut v: Value = serde_json::from_slice(&gated.stdout).unwrap();
    let gate = v.as_object_mut().unwrap().remove("gate").expect("a gate with --fail-on-regression");
    assert_eq!(v, serde_json::from_slice::<Value>(&plain.stdout).unwrap(), "the gate adds `gate` only");
    let text = format!(
        "{:#}\n--- stderr (exit {:?}) ---\n{}",
        gate,
        gated.status.code(),
        String::from_utf8_lossy(&gated.stderr)
    );
    support::snap::with_tmp(p.dir.path()).bind(|| insta::assert_snapshot!("json-gate-5-gate", text));
}

/// The Markdown matrix row of `label`, cells by concurrency header.
fn md_row(out: &str, label: &str) -> Vec<(String, String)> {
    let split = |l: &str| l.trim().trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect::<Vec<_>>();
    let header = split(out.lines().find(|l| l.starts_with("| Context | 1 |")).expect("matrix header"));
    let row = split(out.lines().find(|l| l.starts_with(&format!("| {label} |"))).expect("matrix row"));
    header.into_iter().zip(row).collect()
}

#[test]
fn markdown_delta_matrix_has_the_right_numbers() {
    let p = pair();
    let out = ok(&diff(&p.a, &p.b, &["--format", "markdown"]));
    assert!(out.starts_with("# Speed test diff"));
    assert!(
        out.contains("## Header differences")
            && out.contains("| Engine | Version | 0.26.1rc1.dev638+g52be12cfa | 0.27.0 |")
    );
    let r8k = md_row(&out, "8K");
    let get = |row: &[(String, String)], n: &str| row.iter().find(|(h, _)| h == n).unwrap().1.clone();
    assert_eq!(get(&r8k, "128"), "6,342.6 → 7,611.1<br>+20.0 % better");
    assert_eq!(get(&r8k, "1"), "237.1 → 189.7<br>-20.0 % worse");
    assert_eq!(get(&r8k, "2"), "431.6 → 431.6<br>0.0 % same");
    let r64k = md_row(&out, "64K");
    assert_eq!(get(&r64k, "64"), "Valid → Over capacity<br>3,592.5 → —");
    assert_eq!(get(&r64k, "128"), "Over capacity", "over capacity in both: nothing compared");
    let r128k = md_row(&out, "128K");
    assert!(r128k[1..].iter().all(|(_, c)| c == "only in A"), "{r128k:?}");
    // Another metric: TTFT (less is better) did not change anywhere it was measured in both.
    let out = ok(&diff(&p.a, &p.b, &["--format", "markdown", "--metric", "ttft_ms_p50"]));
    assert_eq!(get(&md_row(&out, "8K"), "128"), "10,187 ms → 10,187 ms<br>0.0 % same");
    assert!(out.contains("TTFT (ms) of the cells in both runs: 35 same, 1 status changed."), "{out}");
}

#[test]
fn json_is_the_whole_comparison() {
    let p = pair();
    let v: Value = serde_json::from_str(&ok(&diff(&p.a, &p.b, &["-f", "json", "--threshold", "10%"]))).unwrap();
    assert_eq!(v["threshold"], 0.1);
    let rows = v["rows"].as_array().unwrap();
    let row = |ctx: u64, n: u64| {
        rows.iter().find(|r| r["phase"] == "decode" && r["context"]["tokens"] == ctx && r["concurrency"] == n).unwrap()
    };
    let delta =
        |r: &Value, id: &str| r["deltas"].as_array().unwrap().iter().find(|d| d["column"] == id).unwrap().clone();
    let d = delta(row(8192, 128), "total_tps");
    assert_eq!(d["a"], 6342.6);
    assert!((d["b"].as_f64().unwrap() - 7611.12).abs() < 1e-9);
    assert!((d["abs"].as_f64().unwrap() - 1268.52).abs() < 1e-9);
    assert!((d["rel"].as_f64().unwrap() - 0.2).abs() < 1e-12);
    assert_eq!(d["verdict"], "better");
    assert_eq!(delta(row(8192, 1), "total_tps")["verdict"], "worse");
    assert_eq!(delta(row(8192, 1), "ttft_ms_p50")["verdict"], "same");
    assert_eq!(row(131072, 1)["status_b"], Value::Null);
    assert_eq!(v["status_changes"].as_array().unwrap().len(), 1);
    assert_eq!(v["status_changes"][0]["a"], "valid");
    assert_eq!(v["status_changes"][0]["b"], "over_capacity");
    assert_eq!(v["only_in_a"].as_array().unwrap().len(), 9);
    assert_eq!(v["only_in_b"].as_array().unwrap().len(), 0);
    let fields: Vec<&str> = v["header"].as_array().unwrap().iter().map(|h| h["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["Version", "Contexts", "Prefill contexts", "--gpu-memory-utilization", "--max-num-seqs"]);
}

#[test]
fn fail_on_regression_exits_as_documented() {
    let p = pair();
    // 8K × 1 is 20 % worse and 64K × 64 went over capacity.
    for pct in ["5", "5%", "25"] {
        let o = diff(&p.a, &p.b, &["--fail-on-regression", pct]);
        assert_eq!(o.status.code(), Some(1), "--fail-on-regression {pct}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("- 64K × 64: Valid → Over capacity (B's server could not hold it)"), "{out}");
        assert!(out.contains("- 128K × 32: only in A (B has no such cell)"), "B lacks the 128K row: {out}");
        assert_eq!(out.contains("- 8K × 1: Total tok/s 237.1 → 189.7 (20.0 % worse)"), pct != "25", "{out}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("beyond"), "the reason goes to stderr too");
    }
    // Identical runs pass the strictest gate.
    let out = ok(&diff(&p.a, &p.a, &["--fail-on-regression", "0"]));
    assert!(out.contains("Passed: 41 cells compared; none got worse by more than 0.0 %"), "{out}");
    assert!(out.contains("None: same hardware"));
    // The other way round, 8K × 128 is 16.7 % worse; 64K × 64 over capacity → valid is no regression.
    assert_eq!(diff(&p.b, &p.a, &["--fail-on-regression", "10%"]).status.code(), Some(1));
    ok(&diff(&p.b, &p.a, &["--fail-on-regression", "20%"]));
    // A gate on TTFT: nothing measured in both got slower, but the status change still counts.
    assert_eq!(diff(&p.a, &p.b, &["--metric", "ttft_ms", "--fail-on-regression", "1"]).status.code(), Some(1));
    // Markdown and JSON keep the exit code.
    assert_eq!(diff(&p.a, &p.b, &["-f", "json", "--fail-on-regression", "5"]).status.code(), Some(1));
}

/// Write `v` as a run file in `dir`.
fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

/// The gate fails (exit 1) and its text says `needles`.
fn gate_fails(a: &Path, b: &Path, needles: &[&str]) {
    let o = diff(a, b, &["--fail-on-regression", "5%"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.contains("Passed"), "{out}");
    for n in needles {
        assert!(out.contains(n), "lacks {n:?}:\n{out}");
    }
}

#[test]
fn the_gate_fails_when_b_lacks_or_did_not_run_cells() {
    let dir = tempfile::tempdir().unwrap();
    let a = root().join(FIXTURE);
    // Interrupted: every cell from 16K on became not_run, figures gone.
    let mut b = seed();
    b["run"]["status"] = "interrupted".into();
    for c in b["decode"].as_array_mut().unwrap().iter_mut().filter(|c| c["context"]["tokens"].as_u64() >= Some(16384)) {
        let keep = serde_json::json!({"context": c["context"], "concurrency": c["concurrency"],
            "status": "not_run", "reason": "stopped by the user (Ctrl-C)"});
        *c = keep;
    }
    let interrupted = write(dir.path(), "interrupted.json", &b);
    gate_fails(
        &a,
        &interrupted,
        &["- 16K × 1: Valid → Not run (B did not measure it)", "- 128K × 32: Valid → Not run"],
    );
    let o = diff(&a, &interrupted, &["--fail-on-regression", "5%"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("33 regressions beyond 5.0 % or not measured in B"), "{o:?}");

    // Valid but the metric is null.
    let mut b = seed();
    cell(&mut b, 8192, 4).as_object_mut().unwrap().remove("total_tps");
    let no_figure = write(dir.path(), "no-figure.json", &b);
    gate_fails(&a, &no_figure, &["- 8K × 4: Valid → Valid without Total tok/s (B has no figure)"]);

    // No matrix at all: every cell missing and nothing compared.
    let mut b = seed();
    b["decode"] = serde_json::json!([]);
    b["config"]["contexts"] = serde_json::json!([]);
    let empty = write(dir.path(), "empty.json", &b);
    gate_fails(
        &a,
        &empty,
        &[
            "- no figure to compare: B has total_tps for none of the cells valid in A, so each counts as a regression:",
            "- 8K × 1: only in A",
        ],
    );
    let o = diff(&a, &empty, &["--fail-on-regression", "5%"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("41 regressions beyond 5.0 % or not measured in B, no figure to compare in B"), "{o:?}");
    // Neither has a matrix: no regression, but a gate that compared nothing cannot pass.
    gate_fails(&empty, &empty, &["- nothing to compare"]);

    // No shared context: B measured other context lengths.
    let mut b = seed();
    let shift = |ctx: &mut Value| {
        let t = ctx["tokens"].as_u64().unwrap() + 1000;
        ctx["tokens"] = t.into();
        ctx["label"] = format!("{t}").into();
    };
    b["decode"].as_array_mut().unwrap().iter_mut().for_each(|c| shift(&mut c["context"]));
    b["config"]["contexts"].as_array_mut().unwrap().iter_mut().for_each(shift);
    let other = write(dir.path(), "other-contexts.json", &b);
    gate_fails(
        &a,
        &other,
        &["- no figure to compare: B has total_tps for none of the cells valid in A", "- 8K × 1: only in A"],
    );
}

#[test]
fn a_status_change_with_unchanged_figures_is_tallied_as_status_changed() {
    let dir = tempfile::tempdir().unwrap();
    let a = root().join(FIXTURE);
    let mut b = seed();
    let v = cell(&mut b, 8192, 1)["total_tps"].as_f64().unwrap() * 0.8;
    cell(&mut b, 8192, 1)["total_tps"] = v.into();
    let c = cell(&mut b, 8192, 2);
    c["status"] = "error".into();
    c["reason"] = "stream 2: HTTP 500".into();
    let b = write(dir.path(), "error.json", &b);
    let out = ok(&diff(&a, &b, &[]));
    assert!(out.contains("Total tok/s of the cells in both runs: 1 worse, 40 same, 1 status changed."), "{out}");
    assert!(out.contains("- 8K × 2: Valid → Error"), "{out}");
    let out = ok(&diff(&a, &b, &["-f", "markdown"]));
    assert!(out.contains("1 worse, 40 same, 1 status changed."), "{out}");
    let v: Value = serde_json::from_str(&ok(&diff(&a, &b, &["-f", "json"]))).unwrap();
    assert_eq!(v["metric"], "total_tps");
    assert_eq!(v["tally"], serde_json::json!({"worse": 1, "same": 40, "status changed": 1}));
    assert!(v.get("gate").is_none(), "no gate without --fail-on-regression");
    let o = diff(&a, &b, &["-f", "json", "--fail-on-regression", "5"]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["gate"]["compared"].as_u64(), v["gate"]["regressions"][1]["kind"].as_str()),
        (Some(40), Some("status"))
    );
}

fn bad(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(2), "stdout: {}", String::from_utf8_lossy(&o.stdout));
    let err = String::from_utf8(o.stderr.clone()).unwrap();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let p = pair();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json");
    let err = bad(&diff(&p.a, &missing, &[]));
    assert!(err.contains("nope.json: cannot read"), "{err}");
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, b"{\"schema\": ").unwrap();
    let err = bad(&diff(&broken, &p.b, &[]));
    assert!(err.contains("broken.json: invalid JSON at line 1"), "{err}");
    assert!(bad(&diff(&p.a, &p.b, &["--threshold", "abc"])).contains("--threshold"));
    assert!(bad(&diff(&p.a, &p.b, &["--fail-on-regression=-3"])).contains("--fail-on-regression"));
    assert!(bad(&diff(&p.a, &p.b, &["--metric", "tokens_per_minute"])).contains("--metric tokens_per_minute"));
    let err = bad(&diff(&p.a, &p.b, &["--metric", "prompt_tokens", "--fail-on-regression", "5"]));
    assert!(err.contains("no better/worse direction"), "{err}");
}

#[test]
fn a_simulated_run_is_marked_in_the_diff_header() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.json", &seed());
    let mut twin = seed();
    twin["engine"]["simulated"] = serde_json::json!({"by": "speedmatrix twin", "profile": "h200-qwen3.5-122b"});
    let b = write(dir.path(), "b.json", &twin);
    let out = ok(&diff(&a, &b, &[]));
    let line = |side: &str| out.lines().find(|l| l.starts_with(side)).unwrap_or_default().to_string();
    assert!(!line("A (baseline)").contains("Simulated"), "{out}");
    assert!(line("B (candidate)").ends_with(" · Simulated (speedmatrix twin, profile h200-qwen3.5-122b)"), "{out}");
    // …and listed as a header difference, never compared silently.
    assert!(out.contains("Simulated") && out.contains("yes — speedmatrix twin, profile h200-qwen3.5-122b"), "{out}");
    let md = ok(&diff(&a, &b, &["-f", "markdown"]));
    assert!(md.contains("- B (candidate): ") && md.contains("· Simulated (speedmatrix twin"), "{md}");
    let json: Value = serde_json::from_str(&ok(&diff(&a, &b, &["-f", "json"]))).unwrap();
    assert_eq!(json["b"]["simulated"], "speedmatrix twin, profile h200-qwen3.5-122b");
    assert!(json["a"].get("simulated").is_none());
}

/// `v` with noise data: every measured decode cell gets a total tok/s interval whose standard
/// error is 1 % of the figure (batch means, 9 df) and no TTFT / TPOT interval (the reason in
/// `intervals.missing`), as a run with per-second samples carries them.
fn with_noise(mut v: Value) -> Value {
    for c in v["decode"].as_array_mut().unwrap() {
        let Some(tps) = c["total_tps"].as_f64() else { continue };
        let half = 2.262_157 * 0.01 * tps;
        c["intervals"] = serde_json::json!({
            "total_tps": {
                "estimate": tps, "low": tps - half, "high": tps + half, "level": 0.95,
                "method": "batch_means", "evidence": 10, "std_error": 0.01 * tps, "df": 9.0
            },
            "ttft_ms_p50": null,
            "tpot_ms_p50": null,
            "missing": [{"figure": "ttft_ms_p50", "reason": "1 request(s); the bootstrap over requests needs at least 10"}]
        });
    }
    v
}

fn scaled(mut v: Value, k: f64) -> Value {
    for c in v["decode"].as_array_mut().unwrap() {
        let Some(tps) = c["total_tps"].as_f64() else { continue };
        c["total_tps"] = (tps * k).into();
        if let Some(iv) = c["intervals"]["total_tps"].as_object_mut() {
            for f in ["estimate", "low", "high", "std_error"] {
                let x = iv[f].as_f64().unwrap() * k;
                iv[f] = x.into();
            }
        }
    }
    v
}

#[test]
fn with_noise_data_the_diff_shows_intervals_and_tells_noise_from_change() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, v: &Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
        p
    };
    let a = write("a.json", &with_noise(seed()));
    let noisy = write("noisy.json", &scaled(with_noise(seed()), 0.997));
    let slower = write("slower.json", &scaled(with_noise(seed()), 0.95));
    let plain_slightly_slower = write("plain.json", &scaled(seed(), 0.997));

    // 0.3 % slower everywhere: within noise, and the gate at 0 % passes.
    let out = ok(&diff(&a, &noisy, &["--fail-on-regression", "0"]));
    assert!(out.contains("-0.3 % ± 3.0 % within noise"), "{out}");
    assert!(out.contains("± is the 95 % interval of B − A"), "{out}");
    assert!(out.contains("Passed:"), "{out}");
    // A figure without intervals says why, once for all its cells.
    let ttft = ok(&diff(&a, &noisy, &["--metric", "ttft_ms_p50"]));
    let why = "cells): A: 1 request(s); the bootstrap over requests needs at least 10; B: 1 request(s)";
    assert!(ttft.contains("Not enough data (") && ttft.contains(why), "{ttft}");
    assert!(out.contains("(and worse beyond noise, where both runs have an interval)"), "{out}");
    // Without noise data the same change at 0 % fails the gate, and the diff says why.
    let o = diff(&root().join(FIXTURE), &plain_slightly_slower, &["--fail-on-regression", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("no noise data"));

    // 5 % slower everywhere: worse in every valid cell, the gate fails, Markdown shows ±.
    let o = diff(&a, &slower, &["--format", "markdown", "--fail-on-regression", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(md.contains("-5.0 % ± 2.9 % worse"), "{md}");
    let v: Value = serde_json::from_str(&ok(&diff(&a, &slower, &["-f", "json", "--metric", "ttft_ms_p50"]))).unwrap();
    assert_eq!(v["noise"]["control"], "benjamini_hochberg");
    assert_eq!(v["noise"]["min_change"], 0.0);
    let json = ok(&diff(&a, &slower, &["-f", "json"]));
    let v: Value = serde_json::from_str(&json).unwrap();
    let worse = v["tally"]["worse"].as_u64().unwrap();
    let measured = seed()["decode"].as_array().unwrap().iter().filter(|c| c["total_tps"].is_number()).count() as u64;
    assert_eq!(worse, measured, "{}", v["tally"]);
    let cell = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["phase"] == "decode" && r["context"]["tokens"] == 8192 && r["concurrency"] == 1)
        .unwrap();
    let tps = cell["deltas"].as_array().unwrap().iter().find(|d| d["column"] == "total_tps").unwrap();
    assert!(tps["interval"]["high"].as_f64().unwrap() < 0.0 && tps["interval"]["discovery"] == true, "{tps}");
    let ttft = cell["deltas"].as_array().unwrap().iter().find(|d| d["column"] == "ttft_ms_p50").unwrap();
    assert_eq!(ttft["verdict"], "not_enough_data");
    assert!(ttft["noise_note"].as_str().unwrap().starts_with("A: 1 request(s)"), "{ttft}");
    // --threshold above the change: significant, but under the least change: within noise.
    let out = ok(&diff(&a, &slower, &["--threshold", "6%"]));
    assert!(out.contains("-5.0 % ± 2.9 % within noise") && !out.contains(" worse\n"), "{out}");
}

/// A real twin run with rate cells: 8K and 32K at 0.5, 1, 8 and 16 req/s.
const RATES_FIXTURE: &str = "tests/fixtures/rates-twin.json";

fn rate_cell(v: &mut Value, ctx: u64, rate: f64) -> &mut Value {
    v["rates"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["context"]["tokens"] == ctx && c["rate_rps"] == rate)
        .unwrap()
}

/// The rate fixture's candidate: 8K at 0.5 req/s with every TTFT 1.5 × (its requests and its
/// distribution), 32K at 1 req/s saturated, 32K at 0.5 req/s gone, 8K at 2 req/s new.
fn rates_modified() -> Value {
    let mut b: Value = serde_json::from_slice(&std::fs::read(root().join(RATES_FIXTURE)).unwrap()).unwrap();
    let c = rate_cell(&mut b, 8192, 0.5);
    for p in ["p50", "p90", "p99", "mean", "min", "max"] {
        if let Some(v) = c["ttft_ms"][p].as_f64() {
            c["ttft_ms"][p] = (v * 1.5).into();
        }
    }
    for q in c["requests"].as_array_mut().unwrap() {
        if let Some(v) = q["ttft_ms"].as_f64() {
            q["ttft_ms"] = (v * 1.5).into();
        }
    }
    let mut two = rate_cell(&mut b, 8192, 1.0).clone();
    two["rate_rps"] = 2.0.into();
    b["rates"].as_array_mut().unwrap().push(two);
    rate_cell(&mut b, 32768, 1.0)["status"] = "saturated".into();
    b["rates"].as_array_mut().unwrap().retain(|c| !(c["context"]["tokens"] == 32768 && c["rate_rps"] == 0.5));
    b
}

#[test]
fn rate_cells_are_matched_judged_and_their_changes_listed() {
    let dir = tempfile::tempdir().unwrap();
    let a = root().join(RATES_FIXTURE);
    let b = write(dir.path(), "rates-b.json", &rates_modified());
    let d = support::cli::json_diff(&a, &b, "total_tps");
    let rates = &d["rates"];
    let row = rates["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["context"]["tokens"] == 8192 && r["rate_rps"] == 0.5)
        .unwrap();
    let delta = |col: &str| row["deltas"].as_array().unwrap().iter().find(|x| x["column"] == col).unwrap().clone();
    // TTFT p90 has no interval: +50 % by the threshold is worse. TTFT p50 would have one, but
    // the 5 s window holds too few requests for the bootstrap: not enough data, with why.
    let p90 = delta("ttft_ms_p90");
    assert_eq!(p90["verdict"], "worse", "{p90}");
    assert!((p90["rel"].as_f64().unwrap() - 0.5).abs() < 1e-9, "{p90}");
    let p50 = delta("ttft_ms_p50");
    assert_eq!(p50["verdict"], "not_enough_data", "{p50}");
    assert!(p50["noise_note"].as_str().unwrap().contains("request(s)"), "{p50}");
    assert_eq!(delta("achieved_rps")["b"], delta("achieved_rps")["a"]);
    assert_eq!(delta("total_tps")["verdict"], "same");
    let listed = |key: &str| -> Vec<(u64, f64)> {
        rates[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["context"]["tokens"].as_u64().unwrap(), c["rate_rps"].as_f64().unwrap()))
            .collect()
    };
    assert_eq!(listed("only_in_a"), [(32768, 0.5)]);
    assert_eq!(listed("only_in_b"), [(8192, 2.0)]);
    let changes = rates["status_changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (&changes[0]["rate_rps"], &changes[0]["a"], &changes[0]["b"]),
        (&1.0.into(), &"valid".into(), &"saturated".into())
    );

    let text = ok(&diff(&a, &b, &[]));
    for needle in [
        "Request rates — open-loop rate cells: A → B",
        "Rate cells whose status changed:\n- 32K at 1 req/s: Valid → Saturated",
        "Rate cells only in A:\n- 32K at 0.5 req/s",
        "Rate cells only in B:\n- 8K at 2 req/s",
        "Not enough data (",
    ] {
        assert!(text.contains(needle), "no {needle:?} in\n{text}");
    }
    // A run without rate cells has no rate section, and its JSON no `rates`.
    let seed = diff(&root().join(FIXTURE), &root().join(FIXTURE), &["-f", "json"]);
    let v: Value = serde_json::from_slice(&seed.stdout).unwrap();
    assert!(v.get("rates").is_none());
}
