//! The page at real sizes, in real headless Chromium: at 420, 1,024 and 1,400 px wide no element
//! of the report (the seed run, a twin run) or of the diff view (the two side by side) reaches
//! past the viewport's edge, so nothing is cut off or scrolls the whole page sideways. Wide
//! content (the decode matrix, the full table, a long launch command) scrolls inside its own
//! box instead. Harness as in viewer_browser.rs (chromedriver + fantoccini; skips without the
//! tools, except under `CI=true`).

use browser::*;
use fantoccini::Client;
use std::path::PathBuf;
use support::browser;

const WIDTHS: [u32; 3] = [420, 1024, 1400];

/// A twin run of the h200 profile (round 1's fixture: valid, error and not-run cells).
fn twin_run() -> PathBuf {
    browser::root().join("tests/fixtures/round1/twin-h200-faults.json")
}

/// Elements that reach past the viewport's left or right edge and are not inside a box that
/// scrolls or clips horizontally, as `tag#id.class left..right` (at most 12), plus the page's
/// scroll width against its client width.
const OVERFLOW: &str = r#"
const vw = document.documentElement.clientWidth;
const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
  (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\s+/).join('.') : '');
const contained = e => {
  for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX;
    if (o === 'auto' || o === 'scroll' || o === 'hidden' || o === 'clip') return true;
  }
  return false;
};
const bad = [];
for (const e of document.querySelectorAll('body *')) {
  const r = e.getBoundingClientRect();
  if (r.width === 0 || r.height === 0 || getComputedStyle(e).visibility === 'hidden') continue;
  if ((r.right > vw + 1 || r.left < -1) && !contained(e)) {
    bad.push(name(e) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }
}
return { vw, scroll: document.documentElement.scrollWidth, bad: bad.slice(0, 12) };
"#;

/// Resize the window so the viewport is about `width` px wide, let the page lay out again, and
/// return what overflows.
async fn overflow_at(c: &Client, width: u32) -> (u64, u64, Vec<String>) {
    c.set_window_size(width, 900).await.expect("resize the window");
    // Charts redraw on resize; give the page a moment to settle.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let v = c.execute(OVERFLOW, vec![]).await.expect("run the overflow check");
    let bad = v["bad"].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect());
    (v["vw"].as_u64().unwrap_or(0), v["scroll"].as_u64().unwrap_or(0), bad.unwrap_or_default())
}

async fn check_every_width(c: &Client, what: &str) {
    let mut problems = vec![];
    for w in WIDTHS {
        let (vw, scroll, bad) = overflow_at(c, w).await;
        if !bad.is_empty() || scroll > vw {
            problems.push(format!("{what} at {w} px (viewport {vw}, page scroll width {scroll}): {bad:?}"));
        }
    }
    assert!(problems.is_empty(), "elements past the viewport's edge:\n{}", problems.join("\n"));
}

#[test]
fn no_element_overflows_the_viewport_at_420_1024_and_1400_px() {
    scenario(|c| async move {
        let seed = fixture();
        let twin = twin_run();
        let (_server, base) = serve(&[&seed, &twin]);
        c.goto(&format!("{base}?run=runs/h200-qwen3.5-122b-vllm.json")).await.unwrap();
        wait_text(&c, "#run-title", "Qwen3.5").await;
        text(&c, "#heatmap").await;
        check_every_width(&c, "the seed report").await;

        c.goto(&format!("{base}?run=runs/twin-h200-faults.json")).await.unwrap();
        text(&c, "#heatmap").await;
        check_every_width(&c, "a twin run's report").await;

        c.goto(&format!("{base}?a=runs/h200-qwen3.5-122b-vllm.json&b=runs/twin-h200-faults.json")).await.unwrap();
        text(&c, "#diff-header").await;
        text(&c, "#delta-heatmap").await;
        check_every_width(&c, "the diff of the two").await;
    });
}

/// Per chart canvas: its id, the plot area and legend box it drew (`data-plot`, `data-legend`:
/// left top right bottom, CSS px), its points (`data-points`), its CSS size, its table
/// mirror's row count, how many pixels of the legend box are drawn (not background), and per
/// point whether any pixel within 3 px of it is drawn — a mark there, not a legend over it.
const CHART_GEOMETRY: &str = r#"
const nums = s => (s || '').split(' ').filter(Boolean).map(Number);
return [...document.querySelectorAll('canvas.chart-canvas')].map(c => {
  const dpr = c.width / c.clientWidth;
  const ctx = c.getContext('2d');
  const bg = ctx.getImageData(0, 0, 1, 1).data;
  const drawn = (x, y, w, h) => {
    const d = ctx.getImageData(Math.round(x * dpr), Math.round(y * dpr), Math.max(1, Math.round(w * dpr)), Math.max(1, Math.round(h * dpr))).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (Math.max(Math.abs(d[i] - bg[0]), Math.abs(d[i + 1] - bg[1]), Math.abs(d[i + 2] - bg[2])) > 40) n++;
    }
    return n;
  };
  const legend = nums(c.dataset.legend);
  const points = (c.dataset.points || '').split(' ').filter(Boolean).map(p => p.split(',').map(Number));
  const rows = document.querySelectorAll('#table-' + c.id.replace(/^chart-/, '') + ' tbody tr').length;
  return {
    id: c.id, plot: nums(c.dataset.plot), legend, points, rows, w: c.clientWidth, h: c.clientHeight,
    legend_drawn: legend.length == 4 ? drawn(legend[0], legend[1], legend[2] - legend[0], legend[3] - legend[1]) : 0,
    marks: points.map(([x, y]) => drawn(x - 3, y - 3, 7, 7) > 0),
  };
});
"#;

/// Half the side of the box a point's mark takes, CSS px (the largest mark, the queued
/// triangle, is 5 px from its centre; one more for its stroke).
const MARK: f64 = 6.0;

/// What is wrong with the charts' legends at this width: a legend box that overlaps the plot
/// area or a point's mark, a point without a visible mark, a legend that draws nothing.
async fn legend_problems(c: &Client, width: u32, what: &str) -> Vec<String> {
    c.set_window_size(width, 900).await.expect("resize the window");
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let charts = until(c, "charts with their geometry", CHART_GEOMETRY).await;
    let mut problems = vec![];
    let charts = charts.as_array().cloned().unwrap_or_default();
    assert!(charts.len() >= 4, "{what}: {} charts", charts.len());
    for ch in charts {
        let id = ch["id"].as_str().unwrap_or("?").to_string();
        let f = |v: &serde_json::Value| v.as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).collect::<Vec<f64>>());
        let (plot, legend) = (f(&ch["plot"]).unwrap_or_default(), f(&ch["legend"]).unwrap_or_default());
        let points: Vec<Vec<f64>> =
            ch["points"].as_array().map(|a| a.iter().filter_map(f).collect()).unwrap_or_default();
        let at = format!("{what} at {width} px, {id}");
        if plot.len() != 4 || legend.len() != 4 {
            problems.push(format!("{at}: no plot area or legend box recorded ({plot:?}, {legend:?})"));
            continue;
        }
        if points.len() as u64 != ch["rows"].as_u64().unwrap_or(0) {
            problems.push(format!("{at}: {} points drawn, {} rows in its table", points.len(), ch["rows"]));
        }
        let (w, h) = (ch["w"].as_f64().unwrap_or(0.0), ch["h"].as_f64().unwrap_or(0.0));
        if legend[0] < 0.0 || legend[1] < 0.0 || legend[2] > w + 0.5 || legend[3] > h + 0.5 {
            problems.push(format!("{at}: the legend {legend:?} reaches past the canvas ({w} × {h})"));
        }
        if ch["legend_drawn"].as_u64().unwrap_or(0) < 50 {
            problems.push(format!("{at}: the legend box {legend:?} is blank"));
        }
        let overlaps = |a: &[f64], b: &[f64]| a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
        if overlaps(&legend, &plot) {
            problems.push(format!("{at}: the legend {legend:?} lies over the plot area {plot:?}"));
        }
        let marks = ch["marks"].as_array().cloned().unwrap_or_default();
        for (i, p) in points.iter().enumerate() {
            let mark = [p[0] - MARK, p[1] - MARK, p[0] + MARK, p[1] + MARK];
            if overlaps(&legend, &mark) {
                problems.push(format!("{at}: the legend {legend:?} covers the point at {p:?}"));
            }
            if marks.get(i).and_then(|m| m.as_bool()) != Some(true) {
                problems.push(format!("{at}: nothing drawn at the point {p:?}"));
            }
        }
    }
    problems
}

#[test]
fn chart_legends_cover_no_data_point_at_420_1024_and_1400_px() {
    scenario(|c| async move {
        let seed = fixture();
        let twin = twin_run();
        let (_server, base) = serve(&[&seed, &twin]);
        let mut problems = vec![];
        c.goto(&format!("{base}?run=runs/h200-qwen3.5-122b-vllm.json")).await.unwrap();
        wait_text(&c, "#charts", "Time to first token vs simultaneous requests").await;
        // The TTFT chart of the seed run first: one line per context, many points near the top
        // left where a corner legend used to sit.
        for w in [1024, 420, 1400] {
            problems.extend(legend_problems(&c, w, "the seed report").await);
        }
        c.goto(&format!("{base}?a=runs/h200-qwen3.5-122b-vllm.json&b=runs/twin-h200-faults.json")).await.unwrap();
        wait_text(&c, "#diff-charts", "Time to first token").await;
        for w in WIDTHS {
            problems.extend(legend_problems(&c, w, "the diff of the two").await);
        }
        assert!(problems.is_empty(), "chart legends in the way:\n{}", problems.join("\n"));
    });
}
