//! The "Request rates" section of a run's page in real headless Chromium: `speedmatrix serve`
//! on a real twin run with open-loop rate cells (tests/fixtures/rates-twin.json: valid rates,
//! a saturated one and the rates after it not run). The table says what the file says (status
//! words and marks, the achieved rate, the reason on focus), the legend explains the statuses
//! present, the chart of TTFT against the achieved rate is drawn, and the rates CSV can be
//! downloaded; the rate heatmap (its metric selector), the TPOT chart, the SLO and its rate per
//! context, the ≈ approximate mark; and the diff view's "Request rates" (status changes, one run
//! only, not enough data). Harness as in viewer_browser.rs (skips without the tools, except
//! under `CI=true`).

use browser::*;
use serde_json::Value;
use speedmatrix_schema::{load_results, CellStatus, Results};
use support::browser;

const RATES_FIXTURE: &str = "tests/fixtures/rates-twin.json";

fn rates_fixture() -> (std::path::PathBuf, Results) {
    let path = root().join(RATES_FIXTURE);
    let r = load_results(&std::fs::read(&path).unwrap()).expect("a valid results file");
    (path, r)
}

/// The CSS selector of the table row of `context` at `rate` ("0.5 req/s").
fn row(context: &str, rate: &str) -> String {
    format!("#rates-table tr[data-context={context:?}][data-rate={rate:?}]")
}

#[test]
fn the_rate_section_shows_the_files_rate_cells_their_statuses_and_the_knee_chart() {
    let (path, r) = rates_fixture();
    let valid =
        r.rates.iter().find(|c| c.status == CellStatus::Valid).cloned().expect("the fixture has a valid rate cell");
    let saturated = r.rates.iter().find(|c| c.status == CellStatus::Saturated).cloned().expect("a saturated rate cell");
    let skipped = r.rates.iter().find(|c| c.status == CellStatus::NotRun).cloned().expect("a rate not run");
    scenario(|c| async move {
        let (_server, url) = serve(&[&path]);
        c.goto(&url).await.unwrap();
        wait_text(&c, "#rates h2", "Request rates").await;
        let rows =
            until(&c, "the rate rows", "return document.querySelectorAll('#rates-table tbody tr').length || null;")
                .await;
        assert_eq!(rows, Value::from(r.rates.len()), "one row per rate cell");

        // A valid row: its achieved rate as the file has it, two decimals.
        let v = row(&valid.context.label, &valid.rate_label());
        let achieved = format!("{:.2}", valid.achieved_rps.unwrap());
        wait_text(&c, &format!("{v} td[data-col=achieved_rps]"), &achieved).await;
        assert_eq!(text(&c, &format!("{v} td[data-col=status]")).await.trim(), "Valid");

        // The saturated row: mark and word, and the file's reason in the tooltip on focus.
        let s = row(&saturated.context.label, &saturated.rate_label());
        let status = text(&c, &format!("{s} td[data-col=status]")).await;
        assert!(status.contains("▲") && status.contains("Saturated"), "{status:?}");
        let reason = saturated.reason.clone().expect("a saturated cell says why");
        let tip = until(
            &c,
            "the saturated cell's tooltip on focus",
            &format!(
                "const td = document.querySelector({:?}); td.focus(); const t = td.querySelector('.hm-tip'); \
                 return t && getComputedStyle(t).display === 'block' ? t.textContent : null;",
                format!("{s} td[data-col=status]")
            ),
        )
        .await;
        assert_eq!(tip.as_str().unwrap(), format!("Saturated: {reason}"));

        // The rate after it: not run, with no figures.
        let n = row(&skipped.context.label, &skipped.rate_label());
        assert!(text(&c, &format!("{n} td[data-col=status]")).await.contains("Not run"));
        assert_eq!(text(&c, &format!("{n} td[data-col=achieved_rps]")).await, "—");

        // The legend: saturated and not run present, client-limited dimmed (this run has none).
        let legend = text(&c, "#rates-legend li[data-status=saturated]").await;
        assert!(legend.contains("Saturated:") && legend.contains("did not keep up"), "{legend}");
        let dimmed = until(
            &c,
            "the legend's classes",
            "return [...document.querySelectorAll('#rates-legend li')].map(li => li.dataset.status + ':' + li.classList.contains('absent')).join(' ');",
        )
        .await;
        let has = |s: CellStatus| r.rates.iter().any(|c| c.status == s);
        let expect: Vec<String> =
            [CellStatus::Saturated, CellStatus::ClientLimited, CellStatus::Error, CellStatus::NotRun]
                .iter()
                .map(|s| format!("{}:{}", s.id(), !has(*s)))
                .collect();
        assert_eq!(dimmed.as_str().unwrap(), expect.join(" "));

        // The chart: drawn (pixels of more than one colour), two lines per context with a
        // measured point, one point per measured cell and percentile.
        let drawn = until(
            &c,
            "the rate chart drawn",
            "const cv = document.querySelector('#chart-rate-ttft'); if (!cv || !cv.width || !cv.dataset.points) return null; \
             const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data; \
             for (let i = 4; i < d.length; i += 4) if (d[i] != d[0] || d[i+1] != d[1] || d[i+2] != d[2]) \
               return [cv.dataset.series, cv.dataset.points.split(' ').length]; return null;",
        )
        .await;
        // Points: each measured cell's TTFT p50 and p90 where the file has them (a cell whose
        // requests mostly went unanswered has no median).
        let points: Vec<(u64, Option<f64>)> = r
            .rates
            .iter()
            .filter(|c| c.status.is_measured() && c.achieved_rps.is_some())
            .flat_map(|c| [c.ttft_ms.and_then(|d| d.p50), c.ttft_ms.and_then(|d| d.p90)].map(|y| (c.context.tokens, y)))
            .collect();
        let drawn_points = points.iter().filter(|(_, y)| y.is_some()).count();
        let mut contexts: Vec<u64> = points.iter().filter(|(_, y)| y.is_some()).map(|(t, _)| *t).collect();
        contexts.dedup();
        assert_eq!((drawn_points, contexts.len()), (10, 2), "the fixture as recorded");
        assert_eq!(drawn, serde_json::json!([(2 * contexts.len()).to_string(), drawn_points]));
        let mirror = until(
            &c,
            "the chart's table mirror",
            "return [...document.querySelectorAll('#table-rate-ttft tbody tr')].map(tr => tr.textContent).join('\\n');",
        )
        .await;
        let saturated_point = format!("{:.2} req/s", saturated.achieved_rps.unwrap());
        assert!(
            mirror.as_str().unwrap().lines().any(|l| l.contains(&saturated_point) && l.contains("Saturated")),
            "{mirror}"
        );

        // The rates CSV download is offered.
        assert_eq!(text(&c, "#export-rates-csv").await, "Request rates (CSV)");
    });
}

/// The fixture with an SLO (TTFT p90 ≤ 700 ms) and its goodput per cell as `run --slo` would
/// have written them, written to `dir/name`.
fn with_slo(dir: &std::path::Path, name: &str, edit: impl Fn(&mut Value)) -> std::path::PathBuf {
    let mut v: Value = serde_json::from_slice(&std::fs::read(root().join(RATES_FIXTURE)).unwrap()).unwrap();
    v["config"]["rate_slo"] = serde_json::json!({"ttft_ms": 700.0, "tpot_ms": null, "percentile": 90});
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    path
}

#[test]
fn the_rate_heatmap_the_tpot_chart_and_the_slo_rate_per_context() {
    let dir = tempfile::tempdir().unwrap();
    // The first rate cell's tokens counted from chunks: the ≈ mark in the table and heatmap.
    let path = with_slo(dir.path(), "slo.json", |v| v["rates"][0]["token_count_source"] = "chunk_count".into());
    scenario(|c| async move {
        let (_server, url) = serve(&[&path]);
        c.goto(&url).await.unwrap();
        wait_text(&c, "#rates h2", "Request rates").await;
        // The heatmap: a row per context, a column per rate; achieved rate by default.
        let shape = until(
            &c,
            "the rate heatmap",
            "const t = document.querySelector('#rate-heatmap'); if (!t) return null; \
             return [t.querySelectorAll('tbody tr').length, t.querySelectorAll('thead th').length - 1];",
        )
        .await;
        assert_eq!(shape, serde_json::json!([2, 4]), "8K and 32K × 0.5, 1, 8, 16 req/s");
        let cell = "#rate-heatmap td[data-context=\"8K\"][data-rate=\"1 req/s\"]";
        wait_text(&c, cell, "1.60 req/s").await;
        assert!(text(&c, "#rate-heatmap td[data-context=\"8K\"][data-rate=\"16 req/s\"]").await.contains("Not run"));
        // The metric selector: TTFT p90, a figure where less is better.
        c.execute(
            "const s = document.querySelector('#rate-heatmap-metric'); s.value = 'ttft_ms_p90'; \
             s.dispatchEvent(new Event('change', {bubbles: true}));",
            vec![],
        )
        .await
        .unwrap();
        wait_text(&c, cell, "639 ms").await;
        assert!(text(&c, "#rate-heatmap-legend").await.contains("darker is better"));
        // The approximate count is marked where the decode table marks it.
        let low = "#rates-table tr[data-context=\"8K\"][data-rate=\"0.5 req/s\"] td[data-col=status]";
        assert!(text(&c, low).await.contains("≈ approximate"), "{}", text(&c, low).await);
        // TPOT against the achieved rate: drawn, one line per context.
        let tpot = until(
            &c,
            "the TPOT chart drawn",
            "const cv = document.querySelector('#chart-rate-tpot'); return cv && cv.dataset.series ? cv.dataset.series : null;",
        )
        .await;
        assert_eq!(tpot, Value::from("2"));
        // The SLO, and the highest rate meeting it per context (judged from the cells: this
        // file has no --rates auto answer).
        let slo = text(&c, "#rates-slo").await;
        assert!(slo.contains("SLO: TTFT p90 ≤ 700 ms"), "{slo}");
        assert!(slo.contains("Highest rate meeting the SLO at 8K: 1 req/s (8 req/s did not)"), "{slo}");
        assert!(slo.contains("Highest rate meeting the SLO at 32K: none (0.5 req/s did not)"), "{slo}");
        assert!(text(&c, "#rates-table thead").await.contains("Goodput req/s"));
    });
}

#[test]
fn the_diff_view_compares_rate_cells() {
    let dir = tempfile::tempdir().unwrap();
    let a = with_slo(dir.path(), "a.json", |_| {});
    // B: 8K at 0.5 req/s with TTFT p90 1.5 ×, 32K at 1 req/s saturated, 32K at 0.5 req/s gone.
    let b = with_slo(dir.path(), "b.json", |v| {
        v["run"]["id"] = "candidate".into();
        let rates = v["rates"].as_array_mut().unwrap();
        for c in rates.iter_mut() {
            match (c["context"]["tokens"].as_u64(), c["rate_rps"].as_f64().map(|r| (r * 2.0) as u64)) {
                (Some(8192), Some(1)) => {
                    let p90 = c["ttft_ms"]["p90"].as_f64().unwrap();
                    c["ttft_ms"]["p90"] = (p90 * 1.5).into();
                }
                (Some(32768), Some(2)) => c["status"] = "saturated".into(),
                _ => {}
            }
        }
        rates.retain(|c| !(c["context"]["tokens"] == 32768 && c["rate_rps"] == 0.5));
    });
    scenario(|c| async move {
        let (_server, base) = serve(&[&a, &b]);
        c.goto(&format!("{base}?a=runs/a.json&b=runs/b.json")).await.unwrap();
        wait_text(&c, "#diff-rates h2", "Request rates").await;
        let rows = until(
            &c,
            "the rate diff rows",
            "return document.querySelectorAll('#rate-diff-table tbody tr').length || null;",
        )
        .await;
        assert_eq!(rows, Value::from(8), "every rate cell of either run");
        let row = |ctx: &str, rate: &str| format!("#rate-diff-table tr[data-context={ctx:?}][data-rate={rate:?}]");
        let changed = row("32K", "1 req/s");
        assert_eq!(text(&c, &format!("{changed} td[data-col=status]")).await, "Valid → Saturated");
        assert!(text(&c, &format!("{} td[data-col=status]", row("32K", "0.5 req/s"))).await.contains("only in A"));
        // TTFT p50 unchanged at 8K × 0.5, but its 5 s window holds too few requests for an
        // interval: not enough data, with the reason on hover.
        let ttft = format!("{} td[data-col=ttft_ms_p50]", row("8K", "0.5 req/s"));
        let kind =
            until(&c, "the TTFT cell", &format!("return document.querySelector({ttft:?})?.dataset.kind || null;"))
                .await;
        assert_eq!(kind, Value::from("no-data"));
        let notes = text(&c, "#rate-diff-notes").await;
        assert!(notes.contains("Status changed at 32K at 1 req/s: Valid → Saturated"), "{notes}");
        assert!(notes.contains("Rate cells only in A (1): 32K at 0.5 req/s"), "{notes}");
    });
}
