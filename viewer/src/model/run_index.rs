//! What the site's front page shows, as plain data: the run table of `runs/index.json` — its
//! columns, sorting, filters (kept in the URL) and the link that compares the picked runs.
//! Pure and unit-tested (on wasm32 in headless Chromium by CI); `view::report_page::run_table` draws it. The figures come from the index
//! ([`speedmatrix_schema::site::Headline`]), written by `speedmatrix publish`.

use speedmatrix_schema::site::RunIndex;
// The table itself (columns, cells, facets, sort) is pure and shared: `speedmatrix_schema::site_table`.
pub use speedmatrix_schema::site_table::*;

/// Where comparing the picked runs (their URLs, in pick order) goes: the diff view for two
/// (`?a=…&b=…`), the comparison of many for three to [`crate::model::multi_run::MAX_RUNS`]
/// (`?compare=…&compare=…`); `None` for fewer than two or more than the most.
pub fn compare_href(urls: &[String]) -> Option<String> {
    let enc = speedmatrix_schema::site::encode_query_value;
    match urls.len() {
        2 => Some(format!("?a={}&b={}", enc(&urls[0]), enc(&urls[1]))),
        n if (3..=crate::model::multi_run::MAX_RUNS).contains(&n) => {
            Some(format!("?{}", urls.iter().map(|u| format!("compare={}", enc(u))).collect::<Vec<_>>().join("&")))
        }
        _ => None,
    }
}

/// The runs of a site's index as (label, `runs/FILE`): the label with its start time when
/// the index has one (the run picker and the diff view's side pickers).
pub fn index_runs(index: RunIndex) -> Vec<(String, String)> {
    index
        .runs
        .into_iter()
        .map(|r| {
            let label = picker_label(&r.label, r.started_at.as_deref(), r.simulated);
            (label, r.file)
        })
        .collect()
}

/// The run picker's label of an index entry: marked when the run is simulated.
pub fn picker_label(label: &str, started_at: Option<&str>, simulated: bool) -> String {
    let mut out = label.to_string();
    if let Some(s) = started_at {
        out.push_str(&format!(" · {}", crate::model::run_report::short_time(s)));
    }
    if simulated {
        out.push_str(" · Simulated");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::site::{entry_for, RunIndexEntry};
    // On wasm32 (how CI runs them: in headless Chromium) `#[test]` is wasm-bindgen-test's.
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn entries() -> Vec<RunIndexEntry> {
        let (seed, import, tiny) = (
            crate::model::multi_run::tests::seed(),
            crate::model::multi_run::tests::import(),
            crate::model::multi_run::tests::tiny(),
        );
        vec![entry_for(&seed, "seed.json"), entry_for(&import, "import.json"), entry_for(&tiny, "tiny.json")]
    }

    #[test]
    fn columns_say_what_the_index_knows() {
        let e = entries();
        let row = |i: usize| COLUMNS.iter().map(|(id, _)| cell_text(&e[i], id)).collect::<Vec<_>>();
        assert_eq!(
            row(0),
            [
                "Qwen3.5-122B-A10B-GPTQ-Int4 on H200 NVL 141GB ×2",
                "H200 NVL",
                "2",
                "vllm",
                "0.26.1rc1.dev638+g52be12cfa",
                "Qwen3.5-122B-A10B-GPTQ-Int4",
                "INT4",
                "mtp, 2 speculative tokens",
                "—",
                "no",
                "6,342.6",
                "3,171.3",
                "196 ms at 8K",
                "251K",
            ]
        );
        assert_eq!(cell_text(&e[2], "date"), "2026-12-01");
        assert_eq!(cell_text(&e[1], "peak_tps_per_gpu"), "—");
        assert!(cell_reason(&e[1], "peak_tps_per_gpu").unwrap().contains("no GPU count"));
        let mut old = e[0].clone();
        old.headline = None;
        assert_eq!(cell_text(&old, "peak_tps"), "—");
        assert!(cell_reason(&old, "peak_tps").unwrap().contains("publish the site again"));
    }

    #[test]
    fn sorting_and_filtering() {
        let e = entries();
        // Peaks: the seed 6,342.6, the tiny twin 1,662, the import 654 tok/s.
        assert_eq!(order(&e, Some(("peak_tps", false)), &IndexFilters::default()), [0, 2, 1]);
        assert_eq!(order(&e, Some(("peak_tps", true)), &IndexFilters::default()), [1, 2, 0]);
        // Missing figures sort last either way up.
        assert_eq!(order(&e, Some(("peak_tps_per_gpu", true)), &IndexFilters::default())[0], 0);
        assert_eq!(order(&e, Some(("label", true)), &IndexFilters::default()), [1, 0, 2]);
        let f = IndexFilters { q: "h200 int4".into(), ..IndexFilters::default() };
        assert_eq!(order(&e, None, &f), [0]);
        let f = IndexFilters { model: Some("tiny-twin".into()), ..IndexFilters::default() };
        assert_eq!(order(&e, None, &f), [2]);
        let f = IndexFilters { gpu: Some("H200 NVL".into()), simulated: Some(false), ..IndexFilters::default() };
        assert_eq!(order(&e, None, &f), [0]);
        assert_eq!(
            order(&e, None, &IndexFilters { simulated: Some(true), ..IndexFilters::default() }),
            Vec::<usize>::new()
        );
        let [gpus, engines, models, ..] = choices(&e);
        assert_eq!(gpus, ["H200 NVL"]);
        assert_eq!(engines, ["vllm"]);
        assert_eq!(models, ["Qwen3.5-122B-A10B-GPTQ-Int4", "qwen", "tiny-twin"], "the import names its model qwen");
        // Through the URL and back.
        let f = IndexFilters {
            q: "h200".into(),
            engine: Some("vllm".into()),
            simulated: Some(true),
            ..IndexFilters::default()
        };
        let params = f.params();
        let back = IndexFilters::from_query(|k| params.iter().find(|(p, _)| *p == k).and_then(|(_, v)| v.clone()));
        assert_eq!(back, f);
        assert_eq!(parse_order("-peak_tps"), Some(("peak_tps", false)));
        assert_eq!(parse_order("nope"), None);
        assert_eq!(order_param(Some(("date", true))).as_deref(), Some("date"));
    }

    #[test]
    fn a_file_published_twice_is_one_row_with_both_names() {
        let mut e = entries();
        let bytes = b"the seed's bytes";
        e[0].sha256 = Some(speedmatrix_schema::site::sha256_hex(bytes));
        e[1].sha256 = Some(speedmatrix_schema::site::sha256_hex(b"the import"));
        let mut copy = e[0].clone();
        copy.file = "seed-again.json".into();
        e.push(copy);
        assert_eq!(order(&e, None, &IndexFilters::default()), [0, 1, 2], "the copy is no row of its own");
        assert_eq!(order(&e, Some(("peak_tps", true)), &IndexFilters::default()), [1, 2, 0]);
        assert_eq!(other_names(&e), [vec!["seed-again.json".to_string()], vec![], vec![], vec![]]);
        assert_eq!(distinct_runs(&e), 3);
    }

    #[test]
    fn two_picks_open_the_diff_more_the_comparison() {
        let u = |n: usize| (0..n).map(|i| format!("runs/r {i}.json")).collect::<Vec<_>>();
        assert_eq!(compare_href(&u(1)), None);
        assert_eq!(compare_href(&u(2)).as_deref(), Some("?a=runs/r%200.json&b=runs/r%201.json"));
        assert_eq!(
            compare_href(&u(3)).as_deref(),
            Some("?compare=runs/r%200.json&compare=runs/r%201.json&compare=runs/r%202.json")
        );
        assert!(compare_href(&u(12)).is_some());
        assert_eq!(compare_href(&u(13)), None);
    }

    #[test]
    fn picker_marks_simulated_runs() {
        assert_eq!(picker_label("H200", Some("2026-01-01T00:00:00Z"), false), "H200 · 2026-01-01 00:00 UTC");
        assert_eq!(picker_label("twin", None, true), "twin · Simulated");
    }
}
