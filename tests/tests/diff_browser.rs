//! The diff view end to end in real headless Chromium: `speedmatrix serve` serves the seed
//! fixture (A) and a copy made here (B: some cells changed, one made over capacity, the 128K
//! context removed, a newer engine and two changed launch flags) with the embedded viewer on
//! 127.0.0.1; the page opened as `?a=…&b=…` must show the right deltas, colours and
//! one-run-only marks. Harness as in viewer_browser.rs (chromedriver + fantoccini; a test skips
//! without the tools, except under `CI=true`).

use browser::*;
use fantoccini::{Client, Locator};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::browser;

const CANDIDATE_LABEL: &str = "candidate: vLLM 0.27 + more memory";

/// The candidate run (see the module doc), written to `dir/candidate.json`.
fn candidate(dir: &Path) -> PathBuf {
    let mut b: Value = serde_json::from_slice(&std::fs::read(fixture()).unwrap()).unwrap();
    b["run"]["label"] = CANDIDATE_LABEL.into();
    b["run"]["id"] = "candidate-1".into();
    b["engine"]["version"] = "0.27.0".into();
    let cmd = b["engine"]["launch_command"].as_str().unwrap().to_string();
    b["engine"]["launch_command"] = format!(
        "{} --max-num-seqs 256",
        cmd.replace("--gpu-memory-utilization 0.862690", "--gpu-memory-utilization 0.9")
    )
    .into();
    let decode = b["decode"].as_array_mut().unwrap();
    for c in decode.iter_mut() {
        let key = (c["context"]["tokens"].as_u64().unwrap(), c["concurrency"].as_u64().unwrap());
        match key {
            (8192, 128) => c["total_tps"] = json!(6342.6 * 1.2),
            (8192, 1) => c["total_tps"] = json!(237.1 * 0.8),
            (65536, 64) => {
                let o = c.as_object_mut().unwrap();
                for f in ["total_tps", "per_request_tps", "ttft_ms", "itl_ms", "output_tokens", "completed_requests"] {
                    o.remove(f);
                }
                for f in ["avg_active_requests", "window_s", "token_count_source"] {
                    o.remove(f);
                }
                o.insert("status".into(), "over_capacity".into());
                o.insert("reason".into(), "needs 1,000,000 KV-cache tokens, the server holds 900,000; not run".into());
            }
            _ => {}
        }
    }
    let not_128k = |x: &Value| x["tokens"] != 131072 && x["context"]["tokens"] != 131072;
    for list in ["contexts", "prefill_contexts"] {
        b["config"][list].as_array_mut().unwrap().retain(not_128k);
    }
    for list in ["decode", "prefill"] {
        b[list].as_array_mut().unwrap().retain(not_128k);
    }
    let path = dir.join("candidate.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&b).unwrap()).unwrap();
    path
}

fn delta(context: &str, concurrency: u32) -> String {
    format!("#delta-heatmap td[data-context=\"{context}\"][data-concurrency=\"{concurrency}\"]")
}

/// (data-kind, text, computed background colour) of an element.
async fn cell(c: &Client, css: &str) -> (String, String, String) {
    let body = format!(
        "const e = document.querySelector({css:?}); if (!e) return null; \
         return [e.dataset.kind || '', e.innerText, getComputedStyle(e).backgroundColor];"
    );
    let v = until(c, css, &body).await;
    let s = |i: usize| v[i].as_str().unwrap_or_default().to_string();
    (s(0), s(1), s(2))
}

/// `rgb(r, g, b)` → (r, g, b).
fn rgb(s: &str) -> (u8, u8, u8) {
    let n: Vec<u8> = s
        .trim_start_matches("rgba(")
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .map(|x| x.trim().parse::<f64>().unwrap_or(0.0) as u8)
        .collect();
    (n[0], n[1], n[2])
}

async fn check_modified_pair(c: &Client) {
    wait_text(c, "#diff-title", CANDIDATE_LABEL).await;
    // Deltas, colours and marks of the delta heatmap.
    let (kind, txt, bg) = cell(c, &delta("8K", 128)).await;
    assert_eq!(kind, "better");
    assert!(txt.contains("+20.0 %") && txt.contains("6,342.6 → 7,611.1"), "{txt}");
    let (r, g, _) = rgb(&bg);
    assert!(g > r, "better is green: {bg}");
    let (kind, txt, bg) = cell(c, &delta("8K", 1)).await;
    assert_eq!(kind, "worse");
    assert!(txt.contains("-20.0 %") && txt.contains("237.1 → 189.7"), "{txt}");
    let (r, g, _) = rgb(&bg);
    assert!(r > g, "worse is red: {bg}");
    let (kind, txt, same_bg) = cell(c, &delta("8K", 2)).await;
    assert_eq!((kind.as_str(), txt.lines().next()), ("same", Some("= 0.0 %")));
    assert_eq!(same_bg, "rgb(241, 243, 245)", "neutral within the threshold");
    let (kind, txt, _) = cell(c, &delta("64K", 64)).await;
    assert_eq!(kind, "status");
    assert!(txt.contains("Valid → Over capacity"), "{txt}");
    let (kind, txt, _) = cell(c, &delta("64K", 128)).await;
    assert_eq!((kind.as_str(), txt.as_str()), ("none", "Over capacity"));
    for n in [1, 2, 4, 8, 16, 32, 64, 128] {
        let (kind, txt, _) = cell(c, &delta("128K", n)).await;
        assert_eq!(kind, "only-a", "128K × {n}");
        assert!(txt.contains("only in A"), "{txt}");
    }
    // Header differences and what was not compared.
    let header = text(c, "#diff-header").await;
    for needle in
        ["0.26.1rc1.dev638+g52be12cfa", "0.27.0", "--gpu-memory-utilization", "0.862690", "--max-num-seqs", "256"]
    {
        assert!(header.contains(needle), "header panel lacks {needle:?}: {header}");
    }
    let notes = text(c, "#diff-notes").await;
    assert!(notes.contains("Status changed at 64K × 64: Valid → Over capacity"), "{notes}");
    assert!(notes.contains("Only in A (9): prefill 128K, 128K × 1"), "{notes}");
    assert_eq!(text(c, "#diff-tally").await, "1 better · 1 worse · 33 same · 1 status changed");
    // Side by side on one colour scale: B's 8K × 128 is the largest of both runs, A's is not.
    let (_, b_text, b_bg) = cell(c, "#heatmap-b td[data-context=\"8K\"][data-concurrency=\"128\"]").await;
    let (_, a_text, a_bg) = cell(c, "#heatmap-a td[data-context=\"8K\"][data-concurrency=\"128\"]").await;
    assert!(b_text.contains("7,611.1") && a_text.contains("6,342.6"));
    assert_eq!(b_bg, "rgb(8, 69, 148)", "the darkest colour of the shared scale");
    assert_ne!(a_bg, b_bg);
    let (_, a128k, _) = cell(c, "#heatmap-a td[data-context=\"128K\"][data-concurrency=\"1\"]").await;
    let (_, b128k, _) = cell(c, "#heatmap-b td[data-context=\"128K\"][data-concurrency=\"1\"]").await;
    assert_ne!(a128k.lines().next(), Some("—"), "A has its 128K row");
    assert_eq!(b128k.lines().next(), Some("—"), "B has no 128K row");
    // Overlaid charts: every chart draws both runs (A solid, B dashed), and each chart's table
    // mirror lists A's and B's series.
    wait_text(c, "#diff-charts", "Pareto").await;
    let drawn = until(
        c,
        "five drawn charts",
        "const cs = [...document.querySelectorAll('#diff-charts canvas')]; if (cs.length != 5) return null; \
         const n = cs.map(c => { if (!c.width) return 0; const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; \
           let k = 0; for (let i = 0; i < d.length; i += 4) if (d[i] != d[0] || d[i+1] != d[1] || d[i+2] != d[2]) k++; return k / (c.width * c.height); }); \
         return n.every(x => x > 0.01) ? n : null;",
    )
    .await;
    assert_eq!(drawn.as_array().map(Vec::len), Some(5), "{drawn}");
    let mirror = c.execute("return document.getElementById('table-decode-total').textContent;", vec![]).await.unwrap();
    let mirror = mirror.as_str().unwrap_or_default();
    assert!(mirror.contains("A · 8K context") && mirror.contains("B · 8K context"), "{mirror}");
    assert!(mirror.contains("7,611.1") && mirror.contains("6,342.6"), "both runs' 8K × 128 in the mirror");
    assert!(mirror.contains("A · 128K context") && !mirror.contains("B · 128K context"), "B has no 128K line");
}

#[test]
fn diff_view_of_two_urls_shows_deltas_colours_and_one_run_only_marks() {
    scenario(|c| async move {
        let dir = tempfile::tempdir().unwrap();
        let b = candidate(dir.path());
        let (_server, base) = serve(&[&fixture(), &b]);
        c.goto(&format!("{base}?a=runs/h200-qwen3.5-122b-vllm.json&b=runs/candidate.json")).await.unwrap();
        check_modified_pair(&c).await;

        // The sortable table of every matched measurement: Δ % ascending puts the worst first.
        c.find(Locator::Css("#diff-this-metric")).await.unwrap().click().await.unwrap();
        wait_text(&c, "#diff-row-count", "35 of").await;
        c.find(Locator::Css("#diff-table th[data-col=\"delta_pct\"] button")).await.unwrap().click().await.unwrap();
        let first = "#diff-table tbody tr:first-child";
        let row = wait_text(&c, first, "-20.0 %").await;
        assert!(
            row.contains("237.1") && row.contains("189.7") && row.contains("-47.4") && row.contains("worse"),
            "{row}"
        );
        c.find(Locator::Css("#diff-table th[data-col=\"delta_pct\"] button")).await.unwrap().click().await.unwrap();
        let row = wait_text(&c, first, "+20.0 %").await;
        assert!(row.contains("+1,268.5") && row.contains("better"), "{row}");

        // Another metric: the URL keeps it; TTFT did not change where both measured.
        c.find(Locator::Css("#diff-metric")).await.unwrap().select_by_value("ttft_ms_p50").await.unwrap();
        let (kind, txt, _) = cell(&c, &delta("8K", 128)).await;
        assert_eq!(kind, "same", "{txt}");
        let url = c.current_url().await.unwrap();
        assert!(url.as_str().contains("metric=ttft_ms_p50") && url.as_str().contains("a=runs"), "{url}");

        // The pair and the view from the URL alone, with a threshold so wide nothing changed.
        c.goto(&format!("{base}?a=runs/h200-qwen3.5-122b-vllm.json&b=runs/candidate.json&threshold=25")).await.unwrap();
        wait_text(&c, "#diff-title", CANDIDATE_LABEL).await;
        let (kind, _, _) = cell(&c, &delta("8K", 128)).await;
        assert_eq!(kind, "same", "20 % is within a 25 % threshold");
        assert_eq!(cell(&c, &delta("64K", 64)).await.0, "status", "a status change is never noise");

        // Identical runs: no header differences, every matched cell the same.
        c.goto(&format!("{base}?a=runs/h200-qwen3.5-122b-vllm.json&b=runs/h200-qwen3.5-122b-vllm.json")).await.unwrap();
        wait_text(&c, "#diff-header", "None: same hardware").await;
        assert_eq!(text(&c, "#diff-tally").await, "42 same");
    });
}

#[test]
fn diff_view_of_two_local_files_and_of_the_index() {
    scenario(|c| async move {
        let dir = tempfile::tempdir().unwrap();
        let b = candidate(dir.path());
        let (_server, base) = serve(&[&fixture(), &b]);
        // Two local files through the pickers (read in the browser).
        c.goto(&format!("{base}?compare")).await.unwrap();
        wait_text(&c, "#side-a", "not picked yet").await;
        c.find(Locator::Css("#file-a"))
            .await
            .unwrap()
            .send_keys(&fixture().canonicalize().unwrap().display().to_string())
            .await
            .unwrap();
        wait_text(&c, "#side-a", "h200-qwen3.5-122b-vllm.json").await;
        c.find(Locator::Css("#file-b"))
            .await
            .unwrap()
            .send_keys(&b.canonicalize().unwrap().display().to_string())
            .await
            .unwrap();
        check_modified_pair(&c).await;
        // A and B from the site's index; the choice goes into the URL.
        c.goto(&format!("{base}?compare")).await.unwrap();
        until(
            &c,
            "the index in the picker",
            "return document.querySelectorAll('#pick-b option').length === 3 || null;",
        )
        .await;
        c.find(Locator::Css("#pick-a"))
            .await
            .unwrap()
            .select_by_value("runs/h200-qwen3.5-122b-vllm.json")
            .await
            .unwrap();
        c.find(Locator::Css("#pick-b")).await.unwrap().select_by_value("runs/candidate.json").await.unwrap();
        check_modified_pair(&c).await;
        let url = c.current_url().await.unwrap();
        assert!(
            url.as_str().contains("b=runs%2Fcandidate.json") || url.as_str().contains("b=runs/candidate.json"),
            "{url}"
        );
        // A broken side says why, in one line.
        c.goto(&format!("{base}?a=runs/nope.json&b=runs/candidate.json")).await.unwrap();
        wait_text(&c, "#side-a", "could not load runs/nope.json: HTTP 404").await;
        // The report links to the diff view.
        c.goto(&base).await.unwrap();
        text(&c, "#compare-link").await;
    });
}

/// Not a check: with `SPEEDMATRIX_SCREENSHOTS=DIR`, a picture of the diff view of the seed
/// against the candidate (docs/screenshots/diff-view.png).
#[test]
fn screenshot_of_the_diff_view() {
    let Some(out) = std::env::var_os("SPEEDMATRIX_SCREENSHOTS").map(PathBuf::from) else { return };
    scenario(|c| async move {
        std::fs::create_dir_all(&out).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let b = candidate(dir.path());
        let (_server, base) = serve(&[&fixture(), &b]);
        c.set_window_size(1400, 1000).await.unwrap();
        c.goto(&format!("{base}?a=runs/h200-qwen3.5-122b-vllm.json&b=runs/candidate.json")).await.unwrap();
        check_modified_pair(&c).await;
        for (name, css) in
            [("diff-view", "article.diff-report"), ("diff-section-delta", "#delta"), ("diff-charts", "#diff-charts")]
        {
            let png = c.find(Locator::Css(css)).await.unwrap().screenshot().await.unwrap();
            let path = out.join(format!("{name}.png"));
            std::fs::write(&path, png).unwrap();
            println!("wrote {}", path.display());
        }
    });
}

#[test]
fn the_diff_header_marks_a_simulated_run() {
    scenario(|c| async move {
        let dir = tempfile::tempdir().unwrap();
        let mut v: Value = serde_json::from_slice(&std::fs::read(fixture()).unwrap()).unwrap();
        v["run"]["label"] = "twin run".into();
        v["engine"]["simulated"] = serde_json::json!({"by": "speedmatrix twin", "profile": "h200-qwen3.5-122b"});
        let twin = dir.path().join("twin.json");
        std::fs::write(&twin, serde_json::to_vec(&v).unwrap()).unwrap();
        let (_server, base) = serve(&[&fixture(), &twin]);
        c.goto(&format!("{base}?a=runs/h200-qwen3.5-122b-vllm.json&b=runs/twin.json")).await.unwrap();
        wait_text(&c, "#diff-title", "twin run").await;
        let b = text(&c, "#diff-runs .run-b").await;
        assert!(b.contains("Simulated (speedmatrix twin, profile h200-qwen3.5-122b)"), "{b}");
        assert!(!text(&c, "#diff-runs .run-a").await.contains("Simulated"));
        let header = wait_text(&c, "#diff-header", "Simulated").await;
        assert!(header.contains("yes — speedmatrix twin, profile h200-qwen3.5-122b"), "{header}");
    });
}

/// `v` with noise data: every measured decode cell gets a total tok/s interval whose standard
/// error is `se` of the figure (batch means, 9 df).
fn with_noise(mut v: Value, se: f64) -> Value {
    for c in v["decode"].as_array_mut().unwrap() {
        let Some(tps) = c["total_tps"].as_f64() else { continue };
        let half = 2.262_157 * se * tps;
        c["intervals"] = json!({
            "total_tps": {
                "estimate": tps, "low": tps - half, "high": tps + half, "level": 0.95,
                "method": "batch_means", "evidence": 10, "std_error": se * tps, "df": 9.0
            }
        });
    }
    v
}

#[test]
fn with_noise_data_the_delta_heatmap_shows_intervals_and_greys_within_noise() {
    scenario(|c| async move {
        let dir = tempfile::tempdir().unwrap();
        let seed: Value = serde_json::from_slice(&std::fs::read(fixture()).unwrap()).unwrap();
        let a = with_noise(seed.clone(), 0.01);
        let mut b = a.clone();
        b["run"]["label"] = "noisy candidate".into();
        for cell in b["decode"].as_array_mut().unwrap() {
            if (cell["context"]["tokens"].as_u64(), cell["concurrency"].as_u64()) == (Some(8192), Some(128)) {
                let v = cell["total_tps"].as_f64().unwrap() * 1.2;
                cell["total_tps"] = json!(v);
                cell["intervals"]["total_tps"]["estimate"] = json!(v);
                cell["intervals"]["total_tps"]["low"] = json!(v * 0.97);
                cell["intervals"]["total_tps"]["high"] = json!(v * 1.03);
                cell["intervals"]["total_tps"]["std_error"] = json!(0.01 * v);
            }
        }
        let (pa, pb) = (dir.path().join("a.json"), dir.path().join("b.json"));
        std::fs::write(&pa, serde_json::to_vec(&a).unwrap()).unwrap();
        std::fs::write(&pb, serde_json::to_vec(&b).unwrap()).unwrap();
        let (_server, base) = serve(&[&pa, &pb, &fixture()]);
        c.goto(&format!("{base}?a=runs/a.json&b=runs/b.json")).await.unwrap();
        wait_text(&c, "#diff-title", "noisy candidate").await;
        let (kind, txt, _) = cell(&c, &delta("8K", 128)).await;
        assert_eq!(kind, "better");
        assert!(txt.contains("+20.0 % ± 3.3 %"), "{txt}");
        // Unchanged cells: within noise, greyed, their ± shown.
        let (kind, txt, bg) = cell(&c, &delta("8K", 2)).await;
        assert_eq!(kind, "noise", "{txt}");
        assert!(txt.contains("0.0 % ± 3.0 %"), "{txt}");
        assert_eq!(bg, "rgb(241, 243, 245)");
        let grey = c
            .execute(&format!("return getComputedStyle(document.querySelector({:?})).color;", delta("8K", 2)), vec![])
            .await
            .unwrap();
        assert_eq!(grey.as_str(), Some("rgb(154, 161, 171)"), "within noise is greyed");
        assert!(text(&c, "#delta-rule").await.contains("± is the 95 % interval of B − A"));
        assert!(text(&c, "#delta-legend").await.contains("within noise"));
        assert!(text(&c, "#diff-tally").await.contains("1 better"), "{}", text(&c, "#diff-tally").await);
        // The seed has no samples: no noise data, no ±.
        c.goto(&format!("{base}?a=runs/h200-qwen3.5-122b-vllm.json&b=runs/b.json")).await.unwrap();
        wait_text(&c, "#diff-title", "noisy candidate").await;
        let rule = wait_text(&c, "#delta-rule", "no noise data").await;
        assert!(!rule.contains('±'), "{rule}");
        let (kind, txt, _) = cell(&c, &delta("8K", 128)).await;
        assert_eq!(kind, "better", "{txt}");
        assert!(!txt.contains('±'), "{txt}");
    });
}
