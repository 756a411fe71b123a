//! The "Request rates" section of a run's page in real headless Chromium: `speedmatrix serve`
//! on a real twin run with open-loop rate cells (tests/fixtures/rates-twin.json: valid rates,
//! a saturated one and the rates after it not run). The table says what the file says (status
//! words and marks, the achieved rate, the reason on focus), the legend explains the statuses
//! present, the chart of TTFT against the achieved rate is drawn, and the rates CSV can be
//! downloaded. Harness as in viewer_browser.rs (skips without the tools, except under
//! `CI=true`).

mod support;

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
