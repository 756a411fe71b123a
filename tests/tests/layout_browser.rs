//! The page at real sizes, in real headless Chromium: at 420, 1,024 and 1,400 px wide no element
//! of the report (the seed run, a twin run) or of the diff view (the two side by side) reaches
//! past the viewport's edge, so nothing is cut off or scrolls the whole page sideways. Wide
//! content (the decode matrix, the full table, a long launch command) scrolls inside its own
//! box instead. Harness as in viewer_browser.rs (chromedriver + fantoccini; skips without the
//! tools, except under `CI=true`).

mod support;

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
