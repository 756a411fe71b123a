//! The "Trace replay" section of a run's page in real headless Chromium: `speedmatrix serve` on
//! a real twin run that replayed the 100-request Mooncake trace
//! (tests/fixtures/trace-twin.json, made by `run --trace tests/fixtures/traces/mooncake-100.jsonl`
//! at 1× against `speedmatrix simulate`: Valid, 100 requests, TTFT p50 529 ms). The trace row says what the file says (the
//! trace, its requests, status and a rate cell's figures), the trace is named with its digest,
//! and the timeline is drawn: offered and completed requests (ending at the file's counts), the
//! requests in flight, and one TTFT mark per request that had a first token. Harness as in
//! rates_browser.rs (skips without the tools, except under `CI=true`). The diff view's "Trace
//! replay" too: one replay against a changed copy, and against one that says it replayed another
//! slice.

use browser::*;
use serde_json::Value;
use speedmatrix_schema::{load_results, Results};
use support::browser;

const TRACE_FIXTURE: &str = "tests/fixtures/trace-twin.json";

fn trace_fixture() -> (std::path::PathBuf, Results) {
    let path = root().join(TRACE_FIXTURE);
    let r = load_results(&std::fs::read(&path).unwrap()).expect("a valid results file");
    (path, r)
}

/// The canvas `id` drawn (pixels of more than one colour): its `data-series` and how many
/// points it drew.
async fn drawn(c: &fantoccini::Client, id: &str) -> Value {
    until(
        c,
        &format!("the chart {id} drawn"),
        &format!(
            "const cv = document.querySelector('#chart-{id}'); if (!cv || !cv.width || !cv.dataset.points) return null; \
             const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data; \
             for (let i = 4; i < d.length; i += 4) if (d[i] != d[0] || d[i+1] != d[1] || d[i+2] != d[2]) \
               return [cv.dataset.series, cv.dataset.points.split(' ').length]; return null;"
        ),
    )
    .await
}

#[test]
fn the_trace_section_shows_the_row_its_trace_and_its_timeline() {
    let (path, r) = trace_fixture();
    assert_eq!(r.traces.len(), 1, "the fixture replayed one trace");
    let row = r.traces[0].clone();
    let c = row.cell.clone();
    let source = r.config.trace.clone().expect("the fixture records its trace");
    let finished = c.requests.iter().filter(|q| q.e2e_ms.is_some()).count();
    let with_ttft = c.requests.iter().filter(|q| q.ttft_ms.is_some()).count();
    scenario(|cl| async move {
        let (_server, url) = serve(&[&path]);
        cl.goto(&url).await.unwrap();
        wait_text(&cl, "#traces h2", "Trace replay").await;
        let rows =
            until(&cl, "the trace rows", "return document.querySelectorAll('#traces-table tbody tr').length || null;")
                .await;
        assert_eq!(rows, Value::from(1), "one row per replayed trace");
        let tr = "#traces-table tr[data-trace=\"0\"]";
        let name = text(&cl, &format!("{tr} th[data-col=trace]")).await;
        assert_eq!(name, format!("{} at 1×", source.file));
        assert_eq!(text(&cl, &format!("{tr} td[data-col=requests]")).await, row.requests.len().to_string());
        assert!(text(&cl, &format!("{tr} td[data-col=status]")).await.contains(c.status.label()));
        let achieved = format!("{:.2}", c.achieved_rps.expect("the replay's achieved rate"));
        assert_eq!(text(&cl, &format!("{tr} td[data-col=achieved_rps]")).await, achieved);
        let ttft_p50 =
            speedmatrix_schema::registry::metric("ttft_ms").unwrap().display(c.ttft_ms.unwrap().p50.unwrap());
        assert_eq!(text(&cl, &format!("{tr} td[data-col=ttft_ms_p50]")).await, ttft_p50);
        let said = text(&cl, "#trace-source").await;
        assert!(said.contains(&source.sha256) && said.contains("100 requests of the whole trace"), "{said}");

        // Offered and completed: two lines, ending at every request and at those that finished.
        assert_eq!(drawn(&cl, "trace-arrivals").await[0], Value::from("2"));
        let mirror = until(
            &cl,
            "the arrivals chart's table mirror",
            "const rows = [...document.querySelectorAll('#table-trace-arrivals tbody tr')].map(tr => \
               [...tr.cells].map(td => td.textContent)); \
             const last = name => rows.filter(r => r[0] === name).pop(); \
             return rows.length ? [last('Offered')[2], last('Completed')[2]] : null;",
        )
        .await;
        assert_eq!(
            mirror,
            serde_json::json!([format!("{} requests", row.requests.len()), format!("{finished} requests")])
        );
        // In flight: one line.
        assert_eq!(drawn(&cl, "trace-in-flight").await[0], Value::from("1"));
        // TTFT: one mark per request with a first token.
        assert_eq!(drawn(&cl, "trace-ttft").await, serde_json::json!(["1", with_ttft]));
        // The mirror sits in a closed <details>: its text content, not its (unrendered) innerText.
        let first = until(
            &cl,
            "the TTFT chart's table mirror",
            "const td = document.querySelector('#table-trace-ttft tbody tr td:nth-child(3)'); return td ? td.textContent : null;",
        )
        .await;
        let first = first.as_str().unwrap_or_default().to_string();
        let want = speedmatrix_schema::registry::metric("ttft_ms").unwrap().display(c.requests[0].ttft_ms.unwrap());
        assert_eq!(first, want, "the first request's TTFT from its scheduled instant");
    });
}

#[test]
fn a_trace_not_replayed_says_why_instead_of_a_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: Value = serde_json::from_slice(&std::fs::read(root().join(TRACE_FIXTURE)).unwrap()).unwrap();
    let cell = &mut v["traces"][0]["cell"];
    *cell = serde_json::json!({
        "context": cell["context"].clone(),
        "rate_rps": cell["rate_rps"].clone(),
        "arrival": cell["arrival"].clone(),
        "status": "not_run",
        "reason": "not measured: interrupted by Ctrl-C",
    });
    v["run"]["status"] = "interrupted".into();
    let path = dir.path().join("not-replayed.json");
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    scenario(|cl| async move {
        let (_server, url) = serve(&[&path]);
        cl.goto(&url).await.unwrap();
        wait_text(&cl, "#traces h2", "Trace replay").await;
        let said = text(&cl, ".trace-timeline[data-trace=\"0\"] .trace-no-timeline").await;
        assert_eq!(said, speedmatrix_schema::trace_timeline::NOT_MEASURED);
        assert!(text(&cl, "#traces-table td[data-col=status]").await.contains("Not run"));
        let charts =
            until(&cl, "no trace chart", "return String(document.querySelectorAll('[id^=chart-trace]').length);").await;
        assert_eq!(charts, Value::from("0"));
    });
}

/// The diff view's "Trace replay": the fixture against itself with TPOT p90 doubled is compared
/// (the row's TPOT p90 worse); against a copy that says it replayed another slice, the row is
/// not compared and the section says why.
#[test]
fn the_diff_view_compares_one_replay_and_refuses_another_slice() {
    let dir = tempfile::tempdir().unwrap();
    let fixture: Value = serde_json::from_slice(&std::fs::read(root().join(TRACE_FIXTURE)).unwrap()).unwrap();
    let write = |name: &str, edit: &dyn Fn(&mut Value)| {
        let mut v = fixture.clone();
        edit(&mut v);
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
        path
    };
    let a = write("a.json", &|_| {});
    let b = write("b.json", &|v| {
        v["run"]["id"] = "slower".into();
        // TPOT's upper tail doubled (p90, p99 and max, keeping the percentiles in order).
        let tpot = &mut v["traces"][0]["cell"]["tpot_ms"];
        for k in ["p90", "p99", "max"] {
            tpot[k] = (tpot[k].as_f64().unwrap() * 2.0).into();
        }
    });
    let c = write("c.json", &|v| {
        v["run"]["id"] = "sliced".into();
        v["config"]["trace"]["from_s"] = 2.0.into();
    });
    scenario(|cl| async move {
        let (_server, base) = serve(&[&a, &b, &c]);
        cl.goto(&format!("{base}?a=runs/a.json&b=runs/b.json")).await.unwrap();
        wait_text(&cl, "#diff-traces h2", "Trace replay").await;
        let tpot = "#trace-diff-table tr[data-trace=\"0\"] td[data-col=tpot_ms_p90]";
        let kind =
            until(&cl, "the TPOT p90 cell", &format!("return document.querySelector({tpot:?})?.dataset.kind || null;"))
                .await;
        assert_eq!(kind, Value::from("worse"));
        assert!(text(&cl, tpot).await.contains("+100.0 %"));
        let notes = text(&cl, "#trace-diff-notes").await;
        assert!(notes.contains("A replayed ") && !notes.contains("Not comparable"), "{notes}");

        cl.goto(&format!("{base}?a=runs/a.json&b=runs/c.json")).await.unwrap();
        let notes = wait_text(&cl, "#trace-diff-notes", "Not comparable").await;
        assert!(notes.contains("different slices: A replayed the whole trace and B 2 s to its end"), "{notes}");
        let ttft = "#trace-diff-table tr[data-trace=\"0\"] td[data-col=ttft_ms_p50]";
        let kind =
            until(&cl, "the TTFT p50 cell", &format!("return document.querySelector({ttft:?})?.dataset.kind || null;"))
                .await;
        assert_eq!(kind, Value::from("none"), "no verdict between different slices");
        assert!(text(&cl, ttft).await.contains(" → "), "both runs' figures side by side");
    });
}
