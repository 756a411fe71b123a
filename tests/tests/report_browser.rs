//! The one-file report end to end: `speedmatrix report` writes one HTML file, real headless
//! Chromium opens it from `file://` (no server: nothing listens, nothing is fetched), and the
//! page is the whole viewer — the run's cards, heatmap, charts and table; with two files, the
//! diff view. Harness as in viewer_browser.rs (a test skips without the tools, except under
//! `CI=true`).

use browser::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::browser;

const SEED_LABEL: &str = "Qwen3.5-122B-A10B-GPTQ-Int4 on H200 NVL 141GB ×2";

/// `speedmatrix report FILES -o OUT`, which must succeed.
fn report(files: &[&Path], out: &Path) -> String {
    let o = Command::new(support::bin()).arg("report").args(files).arg("-o").arg(out).output().expect("run report");
    assert!(o.status.success(), "report failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn file_url(p: &Path) -> String {
    format!("file://{}", p.canonicalize().expect("the report exists").display())
}

/// Resources the page fetched (files, network): none for a self-contained report.
async fn fetched(c: &fantoccini::Client) -> Value {
    c.execute("return performance.getEntriesByType('resource').map(e => e.name);", vec![]).await.unwrap()
}

/// A copy of the seed with another label and 8K × 128 20 % faster.
fn candidate(dir: &Path) -> PathBuf {
    let mut b: Value = serde_json::from_slice(&std::fs::read(fixture()).unwrap()).unwrap();
    b["run"]["label"] = json!("candidate </script><b>x</b>");
    b["run"]["id"] = json!("candidate-1");
    for c in b["decode"].as_array_mut().unwrap() {
        if c["context"]["tokens"] == 8192 && c["concurrency"] == 128 {
            c["total_tps"] = json!(6342.6 * 1.2);
        }
    }
    let path = dir.join("candidate.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&b).unwrap()).unwrap();
    path
}

#[test]
fn a_report_of_one_run_opens_from_file_with_every_part_of_the_page() {
    scenario(|c| async move {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report.html");
        let said = report(&[&fixture()], &out);
        assert!(said.contains("one run") && said.contains("report.html"), "{said}");
        let size = std::fs::metadata(&out).unwrap().len();
        assert!(size <= 1_500_000, "the seed's report is {size} bytes, over the 1.5 MB budget");
        c.goto(&file_url(&out)).await.unwrap();
        assert_eq!(text(&c, "#run-title").await, SEED_LABEL);
        let cell = "#heatmap td[data-context=\"8K\"][data-concurrency=\"128\"]";
        assert!(wait_text(&c, cell, "6,342.6").await.contains("10,187 ms TTFT"));
        wait_text(&c, "section[data-card=Engine]", "vllm").await;
        let rows = until(
            &c,
            "the measurement table",
            "const r = document.querySelectorAll('#measurements tbody tr'); return r.length || null;",
        )
        .await;
        assert_eq!(rows, json!(55), "7 prefill rows and 48 decode cells (42 measured, 6 over capacity)");
        let over = "#heatmap td[data-context=\"251K\"][data-concurrency=\"32\"]";
        wait_text(&c, over, "Over capacity").await;
        // Every chart drawn: each canvas has pixels of more than one colour.
        let drawn = until(
            &c,
            "every chart drawn",
            "const cs = [...document.querySelectorAll('canvas')]; if (cs.length < 3) return null; \
             const inked = cs.map(c => { if (!c.width) return false; const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; \
               for (let i = 4; i < d.length; i += 4) if (d[i] != d[0] || d[i+1] != d[1] || d[i+2] != d[2]) return true; return false; }); \
             return inked.every(x => x) ? inked.length : null;",
        )
        .await;
        assert!(drawn.as_u64().unwrap() >= 3, "{drawn}");
        // The CSV export is `show --format csv` of the same file.
        c.execute(
            "window.__blobs = []; const make = URL.createObjectURL.bind(URL); \
             URL.createObjectURL = (b) => { window.__blobs.push(b); return make(b); }; \
             document.getElementById('export-csv').click(); return true;",
            vec![],
        )
        .await
        .unwrap();
        let csv =
            until(&c, "the CSV download", "return window.__blobs.length ? window.__blobs[0].text() : null;").await;
        let show = Command::new(support::bin()).args(["show", "--format", "csv"]).arg(fixture()).output().unwrap();
        assert!(show.status.success());
        assert_eq!(csv.as_str().unwrap().trim_end(), String::from_utf8_lossy(&show.stdout).trim_end());
        assert_eq!(fetched(&c).await, json!([]), "a self-contained report fetches nothing");
    });
}

#[test]
fn a_report_of_two_runs_opens_as_the_diff_and_file_text_stays_text() {
    scenario(|c| async move {
        let dir = tempfile::tempdir().unwrap();
        let b = candidate(dir.path());
        let out = dir.path().join("diff.html");
        assert!(report(&[&fixture(), &b], &out).contains("a diff of two runs"));
        c.goto(&file_url(&out)).await.unwrap();
        wait_text(&c, "#diff-title", "candidate </script><b>x</b>").await;
        let delta = "#delta-heatmap td[data-context=\"8K\"][data-concurrency=\"128\"]";
        assert!(wait_text(&c, delta, "+20.0 %").await.contains("6,342.6 → 7,611.1"));
        let probe = c.execute("return document.querySelectorAll('main b').length;", vec![]).await.unwrap();
        assert_eq!(probe, json!(0), "the label's markup is text, not an element");
        assert_eq!(fetched(&c).await, json!([]));
    });
}

#[test]
fn report_refuses_three_files_and_an_output_that_is_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed.json");
    std::fs::copy(fixture(), &seed).unwrap();
    let o = Command::new(support::bin()).arg("report").arg(&seed).arg("-o").arg(&seed).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("that is one of the results files"));
    assert_eq!(std::fs::read(&seed).unwrap(), std::fs::read(fixture()).unwrap(), "the input is untouched");
    let o = Command::new(support::bin()).args(["report"]).args([&seed, &seed, &seed]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "clap refuses a third file");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, b"{\"schema\": 1}").unwrap();
    let o =
        Command::new(support::bin()).arg("report").arg(&bad).arg("-o").arg(dir.path().join("r.html")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.json"), "the error names the file");
    assert!(!dir.path().join("r.html").exists(), "nothing written");
}
