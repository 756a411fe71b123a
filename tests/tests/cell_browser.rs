//! A decode cell's detail panel in real headless Chromium (the `speedmatrix` binary serves the
//! embedded viewer on 127.0.0.1):
//!
//! - a run of the twin (`simulate --profile tiny`) measured by the real binary with `--repeat 2`
//!   (1K context × 1 and 4 streams, 3-s windows): a click on a valid cell opens its panel, whose
//!   window chart has one point per bucket of the cell's series in the file, whose repeats table
//!   has 2 rows and whose total tok/s interval reads as in the file; Enter on another focused
//!   cell opens that one, and the URL (`?cell=`) reopens it; the decode-total chart has an error
//!   bar per cell with an interval;
//! - the seed run (no samples): a click opens a panel that says its series and its intervals
//!   are unavailable, with no chart.
//!
//! Mildly timing-sensitive: it needs both twin cells valid (every stream running at once), as
//! `repeat_twin.rs` does; under heavy load a cell could come out queued, and the test then
//! fails on the status it reads.

use speedmatrix_schema::registry::column;
use speedmatrix_schema::{CellStatus, DecodeCell, Results};
use std::path::Path;
use std::process::Command;
use support::browser::*;
use support::twin::twin;

const MATRIX: [&str; 12] = [
    "--contexts",
    "1k",
    "--concurrency",
    "1,4",
    "--prefill-contexts",
    "none",
    "--duration",
    "3s",
    "--max-tokens",
    "256",
    "--repeat",
    "2",
];

/// Measure the matrix against a fresh tiny twin into `out`; the file's contents.
fn measure(out: &Path) -> Results {
    let (_twin, url) = twin(&["--profile", "tiny"]);
    let o = Command::new(support::bin())
        .args(["run", "--url", &url, "--quiet", "-o"])
        .arg(out)
        .args(MATRIX)
        .output()
        .expect("run the collector");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    speedmatrix_schema::load_results(&std::fs::read(out).unwrap()).expect("a valid results file")
}

/// The panel's title for cell `c`: "1K context · 4 at once".
fn title(c: &DecodeCell) -> String {
    format!("{} context · {} at once", c.context.label, c.concurrency)
}

fn heat(c: &DecodeCell) -> String {
    format!("#heatmap td[data-context=\"{}\"][data-concurrency=\"{}\"]", c.context.label, c.concurrency)
}

/// The number of points a canvas drew (its `data-points`), once drawn.
async fn drawn_points(c: &fantoccini::Client, canvas: &str) -> usize {
    let body = format!("const e = document.querySelector({canvas:?}); return e && e.getAttribute('data-points');");
    until(c, &format!("{canvas} drawn"), &body).await.as_str().unwrap_or_default().split_whitespace().count()
}

/// What the panel writes for the cell's total tok/s interval: "1,234.5 ± 1.2 %".
fn plus_minus(cell: &DecodeCell) -> String {
    let iv = cell.intervals.as_ref().and_then(|i| i.total_tps).expect("an interval between the 2 repeats");
    let col = column("total_tps").unwrap();
    let rel = (iv.high - iv.low) / 2.0 / iv.estimate.abs();
    format!("{} ± {}", col.display(iv.estimate), speedmatrix_schema::diff::percent(rel, false))
}

#[test]
fn a_cell_opens_its_window_repeats_and_intervals_and_the_seed_says_unavailable() {
    if tools().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("repeat2.json");
    let r = measure(&out);
    let valid: Vec<&DecodeCell> = r.decode.iter().filter(|c| c.status == CellStatus::Valid).collect();
    assert_eq!(valid.len(), 2, "{:?}", r.decode.iter().map(|c| (c.status, &c.reason)).collect::<Vec<_>>());
    let (first, second) = (valid[0], valid[1]);
    let buckets = first.series.as_ref().expect("a per-second series").output_tokens.len();
    assert!(buckets >= 2, "{buckets} buckets in a 3-s window");
    let with_interval = r.decode.iter().filter(|c| c.intervals.as_ref().is_some_and(|i| i.total_tps.is_some())).count();
    scenario(|c| async move {
        let (_server, url) = serve(&[&out]);
        c.goto(&url).await.unwrap();
        text(&c, &heat(first)).await;
        c.find(fantoccini::Locator::Css(&heat(first))).await.unwrap().click().await.unwrap();
        wait_text(&c, "#cell-panel-title", &title(first)).await;
        assert_eq!(drawn_points(&c, "#cell-panel #chart-cell-window").await, buckets, "one point per bucket");
        let rows = until(&c, "repeat rows", "return document.querySelectorAll('#cell-repeats tbody tr').length;").await;
        assert_eq!(rows.as_u64(), Some(2));
        let tps = wait_text(&c, "#cell-intervals li[data-figure=total_tps]", "between 2 repeats").await;
        assert!(tps.contains(&plus_minus(first)), "{tps} lacks {}", plus_minus(first));
        let bars = until(
            &c,
            "error bars",
            "return document.querySelector('#chart-decode-total').getAttribute('data-intervals');",
        )
        .await;
        assert_eq!(bars.as_str(), Some(with_interval.to_string().as_str()), "one error bar per interval");
        // Enter on another focused cell opens it; the URL keeps it.
        let enter = format!(
            "const e = document.querySelector({:?}); e.focus(); \
             e.dispatchEvent(new KeyboardEvent('keydown', {{key: 'Enter', bubbles: true}})); return true;",
            heat(second)
        );
        c.execute(&enter, vec![]).await.unwrap();
        wait_text(&c, "#cell-panel-title", &title(second)).await;
        let query =
            until(&c, "the cell in the URL", "return location.search.includes('cell=') && location.search;").await;
        assert!(
            query.as_str().unwrap().contains(&format!("cell={}x{}", second.context.tokens, second.concurrency)),
            "{query}"
        );
        c.goto(&format!("{url}{}", query.as_str().unwrap())).await.unwrap();
        wait_text(&c, "#cell-panel-title", &title(second)).await;

        // The seed: no samples, so unavailable, and no chart.
        let (_seed, seed_url) = serve(&[&fixture()]);
        c.goto(&seed_url).await.unwrap();
        let cell = "#heatmap td[data-context=\"8K\"][data-concurrency=\"128\"]";
        wait_text(&c, cell, "6,342.6").await;
        c.find(fantoccini::Locator::Css(cell)).await.unwrap().click().await.unwrap();
        wait_text(&c, "#cell-panel-title", "8K context · 128 at once").await;
        let series = text(&c, "#cell-series-missing").await;
        assert!(series.starts_with("Per-second series unavailable: this file has no per-second series"), "{series}");
        let noise = text(&c, "#cell-intervals-missing").await;
        assert!(noise.starts_with("Intervals unavailable: this file has no noise data"), "{noise}");
        let canvases =
            c.execute("return document.querySelectorAll('#cell-panel canvas').length;", vec![]).await.unwrap();
        assert_eq!(canvases.as_u64(), Some(0), "no chart points without a series");
    });
}
