//! The viewer end to end in real headless Chromium: the `speedmatrix` binary publishes and
//! serves the embedded viewer on 127.0.0.1, chromedriver drives Chromium, fantoccini talks to
//! chromedriver. Leptos updates the DOM asynchronously, so every check polls.
//!
//! Needs `chromium` and `chromedriver` (scripts/setup.d/web.sh). Without them each test prints
//! why it skips, except under `CI=true`, where that is a failure.

use browser::*;
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::{Client, Locator};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::browser;
use support::cli::publish;

const SEED_LABEL: &str = "Qwen3.5-122B-A10B-GPTQ-Int4 on H200 NVL 141GB ×2";

fn heat(context: &str, concurrency: u32) -> String {
    format!("#heatmap td[data-context=\"{context}\"][data-concurrency=\"{concurrency}\"]")
}

/// The visible rows of the measurement table, each as its cells' texts.
async fn table_rows(c: &Client) -> Vec<Vec<String>> {
    let v = c
        .execute(
            "return [...document.querySelectorAll('#measurements tbody tr')].map(r => [...r.cells].map(td => td.innerText.trim()));",
            vec![],
        )
        .await
        .expect("read the table");
    serde_json::from_value(v).expect("rows of strings")
}

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temp folder")
}

/// A copy of the seed fixture with some fields changed.
fn variant(dir: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut v: Value = serde_json::from_slice(&std::fs::read(fixture()).expect("fixture")).expect("JSON");
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).expect("JSON")).expect("write variant");
    path
}

/// Everything the seed page shows (its transcription beside the repository,
/// `../shared/seed/000_9ca01d13c50de007.txt`): the matrix cell by cell, every row of the full
/// table, the prefill rows, the cards' labels and values, the notes under the matrix.
async fn check_seed_page(c: &Client) {
    wait_text(c, &heat("8K", 128), "6,342.6").await;
    // No focused cell: its reason would show.
    c.execute("document.activeElement && document.activeElement.blur(); return true;", vec![]).await.unwrap();
    let seed_path = root().join("../shared/seed/000_9ca01d13c50de007.txt");
    let seed_text = match std::fs::read_to_string(&seed_path) {
        Ok(s) => Some(s),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("seed page {} missing under CI: {e}", seed_path.display())
        }
        Err(_) => None,
    };
    // textContent: the words as written (innerText would give the CSS upper-casing of headings).
    let page: String = until(c, "page text", "return document.body.textContent;").await.as_str().unwrap().into();
    let page_flat: String = page.split_whitespace().collect::<Vec<_>>().join(" ");
    for label in [
        "Speed test matrix",
        SEED_LABEL,
        "Hardware",
        "Type",
        "Discrete GPU",
        "GPU count",
        "VRAM",
        "282 GB (2 × 141 GB)",
        "OS",
        "linux",
        "Engine",
        "vllm",
        "Version",
        "0.26.1rc1.dev638+g52be12cfa",
        "Quantization",
        "INT4",
        "Backend",
        "cuda",
        "Repository",
        "github.com/vllm-project/vllm",
        "Build",
        "cuda-13.2",
        "Commit",
        "52be12cfac0c",
        "Served model",
        "qwen",
        "Revision",
        "main",
        "Benchmark tool",
        "llm-inference-bench v0.4.29",
        "Decode test",
        "Fixed duration",
        "Prefill mode",
        "Measured during decode warm-up",
        "Time per measurement",
        "30 s",
        "Max output",
        "4,096 tokens",
        "Launch command",
        "--api-key <redacted>",
        "Prefill",
        "prompt tok/s by context length",
        "Sustained decode",
        "rows are context length, columns are simultaneous requests",
        "Requests queued: the server could not run all requests at once, so some waited in a queue.",
        "Over capacity: not run because this many requests at this context would exceed the server's KV cache.",
        "TTFT is measured after the benchmark warms the server's prompt cache, so it mostly excludes prefill.",
        "All measurements",
        "Latencies are medians. Total tok/s is output across all simultaneous requests",
        "6 contexts (8K–251K) × 8 concurrency levels (1–128) · prefill at 8K, 16K, 32K, 64K, 128K, 251K, 256K",
    ] {
        assert!(page_flat.contains(label), "the page lacks {label:?}");
    }
    let Some(seed) = seed_text else {
        support::skip(&format!(
            "seed page {} not found (it sits beside the repository in the team's checkout); \
             cell-by-cell comparison skipped",
            seed_path.display()
        ));
        return;
    };
    let squash = |s: &str| s.chars().filter(|ch| !ch.is_whitespace() && !"◐⊘✕○".contains(*ch)).collect::<String>();
    // The matrix: "| 8K | 237.1196 ms TTFT | … |" against each heatmap cell's visible text.
    let cells: Vec<Vec<String>> = serde_json::from_value(
        c.execute(
            "return [...document.querySelectorAll('#heatmap tbody tr')].map(r => [...r.cells].map(x => x.innerText));",
            vec![],
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let seed_matrix: Vec<Vec<String>> = seed
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains(" ms TTFT") && !l.starts_with("| Sustained"))
        .map(|l| l.trim_matches('|').split(" | ").map(&squash).collect())
        .collect();
    assert_eq!(seed_matrix.len(), 6, "six matrix rows in the seed page");
    let ours: Vec<Vec<String>> = cells.iter().map(|r| r.iter().map(|x| squash(x)).collect()).collect();
    assert_eq!(ours, seed_matrix, "heatmap cells differ from the seed page");
    // The full table, row by row.
    let seed_rows: Vec<String> = seed
        .lines()
        .filter(|l| l.starts_with("| Prefill |") || l.starts_with("| Sustained decode |"))
        .map(|l| l.trim_matches('|').split(" | ").map(|x| x.trim()).collect::<Vec<_>>().join("|"))
        .collect();
    assert_eq!(seed_rows.len(), 55);
    let ours: Vec<String> = table_rows(c).await.iter().map(|r| r.join("|")).collect();
    assert_eq!(ours, seed_rows, "the measurement table differs from the seed page");
    // Prefill: "8K context22.5K363 ms TTFT".
    let prefill: Vec<String> = serde_json::from_value(
        c.execute("return [...document.querySelectorAll('#prefill tbody tr')].map(r => r.innerText);", vec![])
            .await
            .unwrap(),
    )
    .unwrap();
    let seed_prefill: Vec<String> = seed
        .lines()
        .filter(|l| l.contains(" context") && l.ends_with("ms TTFT") && !l.starts_with('|'))
        .map(|l| squash(l.rsplit("length").next().unwrap_or(l)))
        .collect();
    assert_eq!(seed_prefill.len(), 7, "seven prefill rows in the seed page: {seed_prefill:?}");
    assert_eq!(prefill.iter().map(|p| squash(p)).collect::<Vec<_>>(), seed_prefill);
}

#[test]
fn results_json_beside_the_page_renders_the_seed_run() {
    scenario(|c| async move {
        let site = temp();
        publish(&[&fixture()], site.path());
        std::fs::remove_dir_all(site.path().join("runs")).unwrap();
        std::fs::copy(fixture(), site.path().join("results.json")).unwrap();
        let (_server, url) = serve(&[site.path()]);
        c.goto(&url).await.unwrap();
        assert_eq!(text(&c, "#run-title").await, SEED_LABEL);
        assert!(wait_text(&c, &heat("8K", 128), "6,342.6").await.contains("10,187 ms TTFT"));
        let over = wait_text(&c, &heat("251K", 32), "Over capacity").await;
        assert!(!over.contains("KV cache"), "the reason is hidden until hover or focus");
        // The reason shows on focus (keyboard) as well as on hover.
        let shown = c
            .execute(
                &format!(
                    "const td = document.querySelector({:?}); td.focus(); \
                     return [document.activeElement === td, getComputedStyle(td.querySelector('.hm-tip')).display, td.innerText];",
                    heat("251K", 32)
                ),
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(shown[0], json!(true), "an over-capacity cell takes focus");
        assert_ne!(shown[1], json!("none"), "its reason shows on focus");
        assert!(shown[2].as_str().unwrap().contains("KV cache"));
        let queued = wait_text(&c, &heat("64K", 8), "Requests queued").await;
        assert!(queued.contains("1,202.3") && queued.contains("811 ms TTFT"));
        check_seed_page(&c).await;
    });
}

#[test]
fn query_runs_are_repeatable_and_file_text_is_never_html() {
    scenario(|c| async move {
        let site = temp();
        publish(&[&fixture()], site.path());
        let evil = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
        variant(site.path(), "evil.json", |v| {
            v["run"]["label"] = json!(evil);
            v["engine"]["model"] = json!(evil);
            v["engine"]["launch_command"] = json!(format!("vllm serve {evil}"));
        });
        let (_server, url) = serve(&[site.path()]);
        let seed_in_site = "runs/h200-qwen3.5-122b-vllm.json";
        c.goto(&format!("{url}?run=evil.json&run={seed_in_site}")).await.unwrap();
        assert_eq!(text(&c, "#run-title").await, evil, "the label is shown as text");
        let model = text(&c, "section[data-card=Engine]").await;
        assert!(model.contains(evil), "the model is shown as text: {model}");
        assert!(text(&c, "#launch-command").await.contains(evil));
        let probe = c
            .execute(
                "return [typeof window.__pwned, document.querySelectorAll('img').length, \
                 document.querySelectorAll('main script').length];",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(probe, json!(["undefined", 0, 0]), "no script ran, no element was made from file text");
        // The second ?run= is a choice of the run picker.
        let options = until(&c, "two runs", "const s = document.querySelector('#run-select'); return s && s.options.length == 2 ? s.options.length : null;").await;
        assert_eq!(options, json!(2));
        c.find(Locator::Css("#run-select")).await.unwrap().select_by_value("1").await.unwrap();
        wait_text(&c, "#run-title", SEED_LABEL).await;
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
    });
}

#[test]
fn a_malformed_file_shows_the_loader_error() {
    scenario(|c| async move {
        let site = temp();
        publish(&[&fixture()], site.path());
        let bad = variant(site.path(), "bad.json", |v| v["decode"][3]["total_tps"] = json!("fast"));
        let expected = speedmatrix_schema::load_results(&std::fs::read(&bad).unwrap()).unwrap_err().to_string();
        assert!(expected.contains("decode[3].total_tps"), "{expected}");
        let (_server, url) = serve(&[site.path()]);
        c.goto(&format!("{url}?run=bad.json")).await.unwrap();
        let shown = text(&c, ".load-error").await;
        assert!(shown.contains("bad.json"), "{shown}");
        assert_eq!(text(&c, ".load-error .error-message").await, expected);
        c.goto(&format!("{url}?run=missing.json")).await.unwrap();
        wait_text(&c, ".load-error", "404").await;
        // A broken run index is reported, and results.json beside the page still opens.
        std::fs::write(site.path().join("runs/index.json"), b"{").unwrap();
        std::fs::copy(fixture(), site.path().join("results.json")).unwrap();
        c.goto(&url).await.unwrap();
        wait_text(&c, ".notice", "runs/index.json is not a run index").await;
        wait_text(&c, "#run-title", SEED_LABEL).await;
    });
}

#[test]
fn published_index_lists_runs_and_the_metric_switches() {
    scenario(|c| async move {
        let dir = temp();
        let other = variant(dir.path(), "second run.json", |v| {
            v["run"]["label"] = json!("second run");
            v["run"]["started_at"] = json!("2026-11-30T10:53:38Z");
        });
        // Results files given to `serve` are published in memory with an index.
        let (_server, url) = serve(&[&fixture(), &other]);
        // The front page of a site of two runs opens none until one is picked: the seed by URL.
        c.goto(&format!("{url}?show=runs/h200-qwen3.5-122b-vllm.json")).await.unwrap();
        wait_text(&c, "#run-title", SEED_LABEL).await;
        let options = text(&c, "#run-select").await;
        // The start time reads short in the picker (to the minute, UTC), never cut mid-number.
        assert!(options.contains("second run · 2026-11-30 10:53 UTC"), "{options}");
        // Switch the heatmap to TTFT.
        c.find(Locator::Css("#heatmap-metric")).await.unwrap().select_by_value("ttft_ms_p50").await.unwrap();
        let cell = wait_text(&c, &heat("8K", 128), "10,187 ms").await;
        assert!(!cell.contains("6,342.6"), "{cell}");
        wait_text(&c, "#decode .section-sub", "TTFT").await;
        let href = c.current_url().await.unwrap();
        assert!(href.as_str().contains("metric=ttft_ms_p50"), "the metric is in the URL: {href}");
        // A metric the seed lacks is offered but disabled.
        let disabled = c
            .execute("return document.querySelector('#heatmap-metric option[value=gpu_power_w]').disabled;", vec![])
            .await
            .unwrap();
        assert_eq!(disabled, json!(true));
        // The other run of the index.
        c.find(Locator::Css("#run-select")).await.unwrap().select_by_value("1").await.unwrap();
        wait_text(&c, "#run-title", "second run").await;
    });
}

#[test]
fn a_run_of_the_twin_says_simulated_on_its_report_and_in_the_picker() {
    scenario(|c| async move {
        let dir = temp();
        let twin = variant(dir.path(), "twin run.json", |v| {
            v["run"]["label"] = json!("twin run");
            v["engine"]["simulated"] = json!({"by": "speedmatrix twin", "profile": "h200-qwen3.5-122b"});
        });
        let (_server, url) = serve(&[&fixture(), &twin]);
        c.goto(&format!("{url}?show=runs/h200-qwen3.5-122b-vllm.json")).await.unwrap();
        wait_text(&c, "#run-title", SEED_LABEL).await;
        let banner = c.execute("return document.querySelectorAll('#simulated-banner').length;", vec![]).await.unwrap();
        assert_eq!(banner, json!(0), "the seed is a real server");
        let options = text(&c, "#run-select").await;
        assert!(options.contains("twin run · Simulated"), "{options}");
        assert!(!options.contains(&format!("{SEED_LABEL} · Simulated")), "{options}");
        c.find(Locator::Css("#run-select")).await.unwrap().select_by_value("1").await.unwrap();
        wait_text(&c, "#run-title", "twin run").await;
        let banner = wait_text(&c, "#simulated-banner", "Simulated").await;
        assert!(banner.contains("speedmatrix twin (profile h200-qwen3.5-122b), a model of a server"), "{banner}");
        let card = text(&c, "section.card[data-card=Engine]").await;
        assert!(card.contains("yes — speedmatrix twin, profile h200-qwen3.5-122b"), "{card}");
    });
}

#[test]
fn the_table_sorts_on_two_columns_and_filters() {
    scenario(|c| async move {
        let (_server, url) = serve(&[&fixture()]);
        c.goto(&url).await.unwrap();
        wait_text(&c, "#row-count", "55 of 55 rows").await;
        let header = |col: &str| format!("#measurements th[data-col={col}] button");
        // Requests at once descending (two clicks), then TTFT ascending as the second key.
        for _ in 0..2 {
            c.find(Locator::Css(&header("concurrency"))).await.unwrap().click().await.unwrap();
        }
        until(&c, "descending sort", "return document.querySelector('#measurements th[data-col=concurrency]').getAttribute('aria-sort') == 'descending';").await;
        c.execute(
            &format!(
                "document.querySelector({:?}).dispatchEvent(new MouseEvent('click', {{bubbles: true, shiftKey: true}})); return true;",
                header("ttft_ms_p50")
            ),
            vec![],
        )
        .await
        .unwrap();
        until(&c, "second key", "return document.querySelector('#measurements th[data-col=ttft_ms_p50]').getAttribute('aria-sort') == 'ascending';").await;
        let rows = table_rows(&c).await;
        let firsts: Vec<(String, String)> = rows.iter().take(6).map(|r| (r[2].clone(), r[6].clone())).collect();
        let want =
            [("128", "8,875 ms"), ("128", "10,004 ms"), ("128", "10,187 ms"), ("128", "—"), ("128", "—"), ("128", "—")];
        assert_eq!(firsts, want.map(|(a, b)| (a.to_string(), b.to_string())));
        assert_eq!((rows[6][2].as_str(), rows[6][6].as_str()), ("64", "4,657 ms"));
        // A plain click sorts by that column alone.
        c.find(Locator::Css(&header("total_tps"))).await.unwrap().click().await.unwrap();
        until(&c, "one key", "return document.querySelector('#measurements th[data-col=concurrency]').getAttribute('aria-sort') == 'none';").await;
        assert_eq!(
            table_rows(&c).await[0][4],
            "198.0",
            "smallest decode total tok/s first (prefill rows show 12K and up)"
        );
        // Filters.
        c.find(Locator::Css("#filter-phase")).await.unwrap().select_by_value("prefill").await.unwrap();
        wait_text(&c, "#row-count", "7 of 55 rows").await;
        assert!(table_rows(&c).await.iter().all(|r| r[0] == "Prefill"));
        c.find(Locator::Css("#filter-phase")).await.unwrap().select_by_value("").await.unwrap();
        c.find(Locator::Css("#filter-status")).await.unwrap().select_by_value("over_capacity").await.unwrap();
        wait_text(&c, "#row-count", "6 of 55 rows").await;
        c.find(Locator::Css("#filter-concurrency")).await.unwrap().select_by_value("128").await.unwrap();
        wait_text(&c, "#row-count", "3 of 55 rows").await;
        assert!(table_rows(&c).await.iter().all(|r| r[2] == "128" && r[3] == "Over capacity"));
        c.find(Locator::Css("#filter-context")).await.unwrap().select_by_value("65536").await.unwrap();
        wait_text(&c, "#row-count", "1 of 55 rows").await;
    });
}

#[test]
fn local_files_open_from_the_picker_and_by_drop() {
    scenario(|c| async move {
        // The viewer alone: nothing to fetch, a welcome and the file controls.
        let (_server, url) = serve(&[]);
        c.goto(&url).await.unwrap();
        wait_text(&c, ".welcome", "drop it anywhere").await;
        let input = c.find(Locator::Css("#file-input")).await.unwrap();
        input.send_keys(&fixture().canonicalize().unwrap().display().to_string()).await.unwrap();
        wait_text(&c, "#run-title", SEED_LABEL).await;
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
        // A drop: a broken file shows the loader's message; then a good one shows its report.
        let drop = |name: &str, content: &str| {
            format!(
                "const dt = new DataTransfer(); dt.items.add(new File([{content:?}], {name:?}, {{type: 'application/json'}})); \
                 document.body.dispatchEvent(new DragEvent('dragover', {{bubbles: true, cancelable: true, dataTransfer: dt}})); \
                 document.body.dispatchEvent(new DragEvent('drop', {{bubbles: true, cancelable: true, dataTransfer: dt}})); return true;"
            )
        };
        let broken = r#"{"schema": "speedmatrix-results", "schema_version": 1, "tool": "#;
        c.execute(&drop("broken.json", broken), vec![]).await.unwrap();
        let shown = wait_text(&c, ".load-error", "broken.json").await;
        let expected = speedmatrix_schema::load_results(broken.as_bytes()).unwrap_err().to_string();
        assert!(shown.contains(&expected), "{shown} lacks {expected}");
        let mut good: Value = serde_json::from_slice(&std::fs::read(fixture()).unwrap()).unwrap();
        good["run"]["label"] = json!("dropped run");
        c.execute(&drop("dropped.json", &good.to_string()), vec![]).await.unwrap();
        wait_text(&c, "#run-title", "dropped run").await;
        let options = text(&c, "#run-select").await;
        assert!(options.contains("broken.json") && options.contains("dropped run (dropped.json)"), "{options}");
        let overlay = c
            .execute("return getComputedStyle(document.querySelector('.drop-overlay')).display;", vec![])
            .await
            .unwrap();
        assert_eq!(overlay, json!("none"), "the drop overlay goes away after a drop");
    });
}

/// Not a check: with `SPEEDMATRIX_SCREENSHOTS=DIR` (scripts/screenshots.sh), pictures of the
/// seed report's sections, including a cell's reason on focus and the TTFT heatmap.
#[test]
fn screenshots_of_the_seed_report() {
    let Some(dir) = std::env::var_os("SPEEDMATRIX_SCREENSHOTS").map(PathBuf::from) else { return };
    scenario(|c| async move {
        std::fs::create_dir_all(&dir).unwrap();
        let (_server, url) = serve(&[&fixture()]);
        c.set_window_size(1400, 1000).await.unwrap();
        c.goto(&url).await.unwrap();
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
        let shot = |name: &'static str, css: &'static str| {
            let c = c.clone();
            let path = dir.join(format!("{name}.png"));
            async move {
                let png = c.find(Locator::Css(css)).await.unwrap().screenshot().await.unwrap();
                std::fs::write(&path, png).unwrap();
                println!("wrote {}", path.display());
            }
        };
        shot("seed-section-heatmap", "#decode").await;
        shot("seed-section-prefill", "#prefill").await;
        shot("seed-section-table", "#all").await;
        c.execute(&format!("document.querySelector({:?}).focus(); return true;", heat("64K", 8)), vec![])
            .await
            .unwrap();
        shot("seed-section-heatmap-reason", "#decode").await;
        c.find(Locator::Css("#heatmap-metric")).await.unwrap().select_by_value("ttft_ms_p50").await.unwrap();
        wait_text(&c, &heat("8K", 128), "10,187 ms").await;
        shot("seed-section-heatmap-ttft", "#decode").await;
        c.find(Locator::Css("#heatmap-metric")).await.unwrap().select_by_value("total_tps").await.unwrap();
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
        c.execute(
            "document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); return true;",
            vec![],
        )
        .await
        .unwrap();
        let page = |name: &'static str| {
            let c = c.clone();
            let path = dir.join(format!("{name}.png"));
            async move {
                std::fs::write(&path, c.screenshot().await.unwrap()).unwrap();
                println!("wrote {}", path.display());
            }
        };
        page("seed-light").await;
        // A chart with its hover readout, then every chart.
        canvas_pixels(&c, "pareto").await;
        c.find(Locator::Css("#chart-decode-total")).await.unwrap().send_keys("\u{E014}\u{E014}\u{E014}").await.unwrap();
        wait_text(&c, "#readout-decode-total", "context").await;
        shot("seed-charts", "#charts").await;
        c.find(Locator::Css("#theme-select")).await.unwrap().select_by_value("dark").await.unwrap();
        until(&c, "a dark chart", "const c = document.getElementById('chart-pareto'); return c.getContext('2d').getImageData(0, 0, 1, 1).data[0] == 0x17;").await;
        shot("seed-charts-dark", "#charts").await;
        shot("seed-section-heatmap-dark", "#decode").await;
        c.execute(
            "document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); return true;",
            vec![],
        )
        .await
        .unwrap();
        page("seed-dark").await;
        // Leave the profile's theme as it was.
        c.find(Locator::Css("#theme-select")).await.unwrap().select_by_value("").await.unwrap();
    });
}

#[test]
fn error_and_not_run_cells_are_marked_with_their_reason() {
    scenario(|c| async move {
        let dir = temp();
        let run = variant(dir.path(), "statuses.json", |v| {
            v["decode"][0]["status"] = json!("error");
            v["decode"][0]["reason"] = json!("stream 3: HTTP 500 <b>boom</b>");
            v["decode"][0]["total_tps"] = json!(null);
            v["decode"][1]["status"] = json!("not_run");
            v["decode"][1]["reason"] = json!("interrupted by Ctrl-C");
        });
        let (_server, url) = serve(&[&run]);
        c.goto(&url).await.unwrap();
        let error = wait_text(&c, &heat("8K", 1), "Error").await;
        assert!(!error.contains("237.1"), "no throughput is claimed for an error: {error}");
        wait_text(&c, &heat("8K", 2), "Not run").await;
        let shown = c
            .execute(
                &format!(
                    "const td = document.querySelector({:?}); td.focus(); const tip = td.querySelector('.hm-tip'); \
                     return [getComputedStyle(tip).display, tip.innerText, td.querySelectorAll('b').length, td.className];",
                    heat("8K", 1)
                ),
                vec![],
            )
            .await
            .unwrap();
        assert_ne!(shown[0], json!("none"));
        assert_eq!(shown[1], json!("Error: stream 3: HTTP 500 <b>boom</b>"), "the reason, as text");
        assert_eq!(shown[2], json!(0));
        assert!(shown[3].as_str().unwrap().contains("st-error"));
        let status_cell = c
            .execute(
                "return [...document.querySelectorAll('#measurements tbody tr')].map(r => r.cells[3]).find(td => td.innerText == 'Not run').title;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(status_cell, json!("interrupted by Ctrl-C"), "the table gives the reason on its status cell");
    });
}

#[test]
fn a_published_site_works_from_a_sub_path_and_copies_the_launch_command() {
    scenario(|c| async move {
        let root_dir = temp();
        publish(&[&fixture()], &root_dir.path().join("reports").join("h200"));
        let (_server, url) = serve(&[root_dir.path()]);
        c.goto(&format!("{url}reports/h200")).await.unwrap();
        wait_text(&c, "#run-title", SEED_LABEL).await;
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
        let here = c.current_url().await.unwrap();
        assert!(here.as_str().ends_with("/reports/h200/"), "{here}");
        c.find(Locator::Css("#copy-launch")).await.unwrap().click().await.unwrap();
        let label = until(
            &c,
            "the copy button to answer",
            "const b = document.querySelector('#copy-launch'); return b.innerText != 'Copy' ? b.innerText : null;",
        )
        .await;
        let label = label.as_str().unwrap();
        assert!(label == "Copied" || label.starts_with("Selected"), "{label}");
        if label.starts_with("Selected") {
            let selected = c.execute("return String(window.getSelection());", vec![]).await.unwrap();
            assert!(selected.as_str().unwrap().contains("--api-key <redacted>"));
        }
    });
}

/// The chart ids of the seed fixture, in page order (viewer/src/model/chart_spec.rs).
const CHARTS: [&str; 5] = ["prefill-tps", "prefill-ttft", "decode-total", "decode-ttft", "pareto"];

/// Per chart: its canvas' bitmap size, CSS width, devicePixelRatio, and how many pixels differ
/// from the canvas' top-left (background) pixel.
const CANVAS_PIXELS: &str =
    "const c = document.getElementById('chart-' + arguments[0]); if (!c || !c.width) return null; \
     const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0; \
     for (let i = 0; i < d.length; i += 4) { if (d[i] != d[0] || d[i+1] != d[1] || d[i+2] != d[2]) n++; } \
     return n ? [c.width, c.height, c.clientWidth, window.devicePixelRatio, n, [d[0], d[1], d[2]]] : null;";

async fn canvas_pixels(c: &Client, id: &str) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let v = c.execute(CANVAS_PIXELS, vec![json!(id)]).await.unwrap_or(Value::Null);
        if let Value::Array(a) = v {
            return a;
        }
        assert!(start.elapsed() < PATIENCE, "chart {id} never drew");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn every_chart_draws_with_a_readout_and_a_table_mirror() {
    scenario(|c| async move {
        let (_server, url) = serve(&[&fixture()]);
        c.goto(&url).await.unwrap();
        wait_text(&c, "#charts", "Pareto").await;
        let ids: Value =
            c.execute("return [...document.querySelectorAll('#charts canvas')].map(c => c.id);", vec![]).await.unwrap();
        assert_eq!(ids, json!(CHARTS.map(|id| format!("chart-{id}"))));
        let r = speedmatrix_schema::load_results(&std::fs::read(fixture()).unwrap()).unwrap();
        for id in CHARTS {
            let px = canvas_pixels(&c, id).await;
            let (w, h, css_w, dpr) =
                (px[0].as_f64().unwrap(), px[1].as_f64().unwrap(), px[2].as_f64().unwrap(), px[3].as_f64().unwrap());
            let drawn = px[4].as_f64().unwrap();
            // Sized in device pixels (crisp on HiDPI), with lines, marks and text on it.
            assert!((w - (css_w * dpr).round()).abs() <= 1.0, "{id}: bitmap {w} px for {css_w} CSS px at {dpr}x");
            assert!(drawn > w * h * 0.01, "{id}: only {drawn} non-background pixels of {}", w * h);
            assert_eq!(px[5], json!([255, 255, 255]), "{id}: the light theme's chart background");
            // The table mirror has one row per point.
            let rows = c
                .execute(&format!("return document.querySelectorAll('#table-{id} tbody tr').length;"), vec![])
                .await
                .unwrap();
            let want = match id {
                "prefill-tps" => r.prefill.iter().filter(|p| p.prompt_tps.is_some()).count(),
                "prefill-ttft" => r.prefill.iter().filter(|p| p.ttft_ms.is_some()).count(),
                "decode-total" => r.decode.iter().filter(|d| d.total_tps.is_some()).count(),
                _ => 0,
            };
            if want > 0 {
                assert_eq!(rows, json!(want), "{id}: table mirror rows");
            }
        }
        // The Pareto chart marks its frontier in the mirror's caption and on the canvas.
        wait_text(&c, "#fig-pareto", "Pareto frontier").await;
        // Keyboard readout: focus a chart, press the right arrow.
        let canvas = c.find(Locator::Css("#chart-decode-total")).await.unwrap();
        canvas.send_keys("\u{E014}").await.unwrap();
        let said = wait_text(&c, "#readout-decode-total", "context").await;
        assert!(said.contains("at once") && said.contains("tok/s") || said.contains("Valid"), "{said}");
        // Hover readout: sweep the mouse over the Pareto chart; near a point the readout names it.
        c.execute(
            "const c = document.getElementById('chart-pareto'); const r = c.getBoundingClientRect(); \
             for (let x = 0; x < r.width; x += 4) for (let y = 0; y < r.height; y += 8) \
               c.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.left + x, clientY: r.top + y})); \
             return true;",
            vec![],
        )
        .await
        .unwrap();
        let hovered = wait_text(&c, "#readout-pareto", "context").await;
        assert!(hovered.contains("tok/s"), "hover readout: {hovered}");
        // Heatmap cells are focusable and say their value and status.
        let label = c
            .execute(
                &format!(
                    "const e = document.querySelector({:?}); return [e.tabIndex, e.getAttribute('aria-label')];",
                    heat("8K", 128)
                ),
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(label, json!([0, "8K context, 128 at once: 6,342.6, Valid, 10,187 ms TTFT"]));
        let unfocusable = c
            .execute(
                "return [...document.querySelectorAll('#heatmap td')].filter(td => td.tabIndex !== 0).length;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(unfocusable, json!(0));
    });
}

/// Capture downloads: every Blob handed to URL.createObjectURL, and each download link's name
/// and href (the link is not followed).
const CAPTURE_DOWNLOADS: &str = "window.__blobs = []; window.__links = []; \
     const orig = URL.createObjectURL; URL.createObjectURL = b => { window.__blobs.push(b); return orig.call(URL, b); }; \
     HTMLAnchorElement.prototype.click = function () { window.__links.push([this.download, this.href]); }; return true;";

#[test]
fn csv_json_and_png_exports_match_the_cli_and_the_file() {
    scenario(|c| async move {
        let (_server, url) = serve(&[&fixture()]);
        c.goto(&url).await.unwrap();
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
        canvas_pixels(&c, "pareto").await;
        c.execute(CAPTURE_DOWNLOADS, vec![]).await.unwrap();
        let blob_text = |i: usize| {
            let c = c.clone();
            async move {
                c.execute_async(
                    &format!("const done = arguments[arguments.length - 1]; window.__blobs[{i}].text().then(done);"),
                    vec![],
                )
                .await
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
            }
        };
        // CSV: byte for byte what `speedmatrix show --format csv` prints.
        c.find(Locator::Css("#export-csv")).await.unwrap().click().await.unwrap();
        until(&c, "the CSV download", "return window.__blobs.length == 1;").await;
        let csv = blob_text(0).await;
        let cli = Command::new(support::bin())
            .args(["show", "--format", "csv"])
            .arg(fixture())
            .output()
            .expect("run speedmatrix show");
        assert!(cli.status.success());
        assert_eq!(csv, String::from_utf8(cli.stdout).unwrap(), "CSV export differs from show --format csv");
        // JSON: a valid results file with the same content as the one served.
        c.find(Locator::Css("#export-json")).await.unwrap().click().await.unwrap();
        until(&c, "the JSON download", "return window.__blobs.length == 2;").await;
        let exported = speedmatrix_schema::load_results(blob_text(1).await.as_bytes()).expect("the export loads");
        let original = speedmatrix_schema::load_results(&std::fs::read(fixture()).unwrap()).unwrap();
        assert_eq!(serde_json::to_value(&exported).unwrap(), serde_json::to_value(&original).unwrap());
        // PNG of a chart.
        c.find(Locator::Css("#png-pareto")).await.unwrap().click().await.unwrap();
        let links = until(&c, "three downloads", "return window.__links.length == 3 ? window.__links : null;").await;
        let names: Vec<&str> = links.as_array().unwrap().iter().map(|l| l[0].as_str().unwrap()).collect();
        let stem = "qwen3-5-122b-a10b-gptq-int4-on-h200-nvl-141gb-2";
        assert_eq!(names, [format!("{stem}.csv"), format!("{stem}.json"), format!("{stem}-pareto.png")]);
        let png = links[2][1].as_str().unwrap();
        assert!(png.starts_with("data:image/png;base64,") && png.len() > 10_000, "PNG data URL of {} chars", png.len());
    });
}

#[test]
fn a_permalink_restores_metric_sort_and_filters_and_back_forward_step_through_views() {
    scenario(|c| async move {
        let (_server, url) = serve(&[&fixture()]);
        let link = format!("{url}?metric=ttft_ms_p50&sort=-concurrency,ttft_ms_p50&phase=decode&status=over_capacity");
        c.goto(&link).await.unwrap();
        let cell = wait_text(&c, &heat("8K", 128), "10,187 ms").await;
        assert!(!cell.contains("6,342.6"), "{cell}");
        let value = |css: &'static str| {
            let c = c.clone();
            async move { c.execute(&format!("return document.querySelector({css:?}).value;"), vec![]).await.unwrap() }
        };
        assert_eq!(value("#heatmap-metric").await, json!("ttft_ms_p50"));
        wait_text(&c, "#row-count", "6 of 55 rows").await;
        assert_eq!(value("#filter-phase").await, json!("decode"));
        assert_eq!(value("#filter-status").await, json!("over_capacity"));
        let sort = "return ['concurrency', 'ttft_ms_p50'].map(k => document.querySelector('#measurements th[data-col=' + k + ']').getAttribute('aria-sort')).join(' ');";
        assert_eq!(c.execute(sort, vec![]).await.unwrap(), json!("descending ascending"));
        let rows = table_rows(&c).await;
        assert_eq!(rows[0][2], "128");
        assert!(rows.iter().all(|r| r[3] == "Over capacity"));
        // A change is a new history entry; back restores the link's view, forward the change.
        c.find(Locator::Css("#filter-status")).await.unwrap().select_by_value("").await.unwrap();
        wait_text(&c, "#row-count", "48 of 55 rows").await;
        let href = c.current_url().await.unwrap();
        assert!(!href.as_str().contains("status="), "{href}");
        c.back().await.unwrap();
        wait_text(&c, "#row-count", "6 of 55 rows").await;
        assert_eq!(value("#filter-status").await, json!("over_capacity"));
        c.forward().await.unwrap();
        wait_text(&c, "#row-count", "48 of 55 rows").await;
        // Made by hand and reloaded: the metric and the sort survive.
        c.find(Locator::Css("#heatmap-metric")).await.unwrap().select_by_value("total_tps").await.unwrap();
        c.find(Locator::Css("#measurements th[data-col=total_tps] button")).await.unwrap().click().await.unwrap();
        until(&c, "the sort in the URL", "return location.search.includes('sort=total_tps');").await;
        c.refresh().await.unwrap();
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
        until(&c, "sorted after reload", "const t = document.querySelector('#measurements th[data-col=total_tps]'); return t && t.getAttribute('aria-sort') == 'ascending';").await;
        assert_eq!(value("#filter-phase").await, json!("decode"));
    });
}

#[test]
fn the_theme_toggle_persists_across_a_reload() {
    scenario(|c| async move {
        let (_server, url) = serve(&[&fixture()]);
        c.goto(&url).await.unwrap();
        let theme = "return document.documentElement.getAttribute('data-theme');";
        until(&c, "a theme", "return document.documentElement.getAttribute('data-theme');").await;
        assert_eq!(c.execute(theme, vec![]).await.unwrap(), json!("light"), "headless Chromium prefers light");
        canvas_pixels(&c, "decode-total").await;
        c.find(Locator::Css("#theme-select")).await.unwrap().select_by_value("dark").await.unwrap();
        until(&c, "the dark theme", "return document.documentElement.getAttribute('data-theme') == 'dark';").await;
        let dark_bg = "return getComputedStyle(document.documentElement).backgroundColor;";
        until(&c, "a dark page", &format!("const b = (function () {{ {dark_bg} }})(); return b == 'rgb(15, 20, 26)';"))
            .await;
        // The charts redraw on the dark background.
        until(&c, "a dark chart", "const c = document.getElementById('chart-decode-total'); const d = c.getContext('2d').getImageData(0, 0, 1, 1).data; return d[0] == 0x17 && d[1] == 0x1c;").await;
        c.refresh().await.unwrap();
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
        until(&c, "dark after reload", "return document.documentElement.getAttribute('data-theme') == 'dark' && document.getElementById('theme-select').value == 'dark';").await;
        // Back to the system's choice.
        c.find(Locator::Css("#theme-select")).await.unwrap().select_by_value("").await.unwrap();
        until(&c, "light again", "return document.documentElement.getAttribute('data-theme') == 'light' && localStorage.getItem('speedmatrix-theme') === null;").await;
    });
}

#[test]
fn every_control_is_reachable_and_operable_by_keyboard() {
    scenario(|c| async move {
        let (_server, url) = serve(&[&fixture()]);
        c.goto(&url).await.unwrap();
        wait_text(&c, &heat("8K", 128), "6,342.6").await;
        canvas_pixels(&c, "pareto").await;
        // Tab from the first control through the whole page, noting what gets focus.
        c.execute("document.getElementById('theme-select').focus(); return true;", vec![]).await.unwrap();
        let describe = "const e = document.activeElement; \
             return e.id || (e.classList.contains('sort') ? 'sort:' + e.closest('th').dataset.col : '') || \
             (e.tagName == 'TD' ? 'cell:' + e.dataset.context + '/' + e.dataset.concurrency : '') || \
             (e.tagName == 'SUMMARY' ? 'summary:' + (e.closest('figure') ? e.closest('figure').id : e.innerText) : '') || \
             e.tagName + ':' + e.className;";
        // A real Tab key press (WebDriver actions), not an element's send_keys.
        let tab = KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value: '\u{E004}' })
            .then(KeyAction::Up { value: '\u{E004}' });
        let mut seen: Vec<String> = Vec::new();
        for _ in 0..250 {
            let now = c.execute(describe, vec![]).await.unwrap().as_str().unwrap_or_default().to_string();
            if seen.first() == Some(&now) && seen.len() > 1 {
                break;
            }
            seen.push(now);
            c.perform_actions(tab.clone()).await.unwrap();
        }
        let has = |what: &str| seen.iter().any(|s| s == what);
        for id in [
            "theme-select",
            "file-input",
            "export-csv",
            "export-json",
            "copy-launch",
            "heatmap-metric",
            "filter-phase",
            "filter-context",
            "filter-concurrency",
            "filter-status",
            "all-columns",
        ] {
            assert!(has(id), "{id} is not reachable by Tab; focus went: {seen:?}");
        }
        for id in CHARTS {
            assert!(has(&format!("chart-{id}")) && has(&format!("png-{id}")), "chart {id} controls; {seen:?}");
            assert!(has(&format!("summary:fig-{id}")), "chart {id} table mirror; {seen:?}");
        }
        let cells = seen.iter().filter(|s| s.starts_with("cell:")).count();
        assert_eq!(cells, 48, "every heatmap cell is a tab stop");
        // Sort headers are buttons inside th[data-col]: reached as such.
        let sorts = seen.iter().filter(|s| s.starts_with("sort:")).count();
        assert!(sorts >= 8, "sort buttons reached: {sorts}; {seen:?}");
        // Operable: Enter on a sort header sorts; a focused cell shows its reason.
        c.execute(
            "document.querySelector('#measurements th[data-col=concurrency] button').focus(); return true;",
            vec![],
        )
        .await
        .unwrap();
        c.active_element().await.unwrap().send_keys("\u{E007}").await.unwrap();
        until(&c, "sorted by keyboard", "return document.querySelector('#measurements th[data-col=concurrency]').getAttribute('aria-sort') == 'ascending';").await;
        c.execute(&format!("document.querySelector({:?}).focus(); return true;", heat("64K", 8)), vec![])
            .await
            .unwrap();
        let tip = c
            .execute(
                &format!(
                    "return getComputedStyle(document.querySelector({:?})).display;",
                    format!("{} .hm-tip", heat("64K", 8))
                ),
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(tip, json!("block"), "a focused cell shows its reason");
    });
}

/// chromedriver's `goog/cdp/execute`: one Chrome DevTools Protocol command.
#[derive(Debug)]
struct Cdp(Value);

impl fantoccini::wd::WebDriverCompatibleCommand for Cdp {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/goog/cdp/execute", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(self.0.to_string()))
    }
}

#[test]
fn charts_redraw_crisp_when_the_device_pixel_ratio_changes() {
    scenario(|c| async move {
        let (_server, url) = serve(&[&fixture()]);
        c.goto(&url).await.unwrap();
        let px = canvas_pixels(&c, "decode-total").await;
        assert_eq!(px[3], json!(1), "headless Chromium starts at devicePixelRatio 1");
        let (w1, css) = (px[0].as_f64().unwrap(), px[2].as_f64().unwrap());
        assert_eq!(w1, css);
        // A HiDPI screen (as when the window moves to one, or the page is zoomed).
        let metrics = json!({"cmd": "Emulation.setDeviceMetricsOverride",
            "params": {"width": 0, "height": 0, "deviceScaleFactor": 2, "mobile": false}});
        c.issue_cmd(Cdp(metrics)).await.unwrap();
        until(&c, "devicePixelRatio 2", "return window.devicePixelRatio == 2;").await;
        for id in CHARTS {
            let body = format!("const c = document.getElementById('chart-{id}'); return c.width == 2 * c.clientWidth && c.height == 2 * c.clientHeight;");
            until(&c, &format!("chart {id} redrawn at 2x"), &body).await;
            let px = canvas_pixels(&c, id).await;
            let (w, h, drawn) = (px[0].as_f64().unwrap(), px[1].as_f64().unwrap(), px[4].as_f64().unwrap());
            assert!(drawn > w * h * 0.01, "{id} at 2x: {drawn} drawn pixels of {}", w * h);
        }
        c.issue_cmd(Cdp(json!({"cmd": "Emulation.clearDeviceMetricsOverride", "params": {}}))).await.unwrap();
        until(&c, "back to 1x", "const c = document.getElementById('chart-pareto'); return window.devicePixelRatio == 1 && c.width == c.clientWidth;").await;
    });
}
