//! What the site's front page shows, as plain data: the run table of `runs/index.json` — its
//! columns, sorting, filters (kept in the URL) and the link that compares the picked runs.
//! Pure and unit-tested (on wasm32 in headless Chromium by CI); `view::report_page::run_table` draws it. The figures come from the index
//! ([`speedmatrix_schema::site::Headline`]), written by `speedmatrix publish`.

use speedmatrix_schema::registry;
use speedmatrix_schema::site::{duplicate_groups, RunIndex, RunIndexEntry};
use std::cmp::Ordering;

/// The placeholder for what an entry does not know.
pub const DASH: &str = "—";

/// The table's columns: (id, header). `label` is the run's title, a link to its report.
pub const COLUMNS: [(&str, &str); 13] = [
    ("label", "Run"),
    ("gpu", "GPU"),
    ("gpu_count", "GPUs"),
    ("engine", "Engine"),
    ("engine_version", "Version"),
    ("model", "Model"),
    ("quantization", "Quantization"),
    ("date", "Date"),
    ("simulated", "Simulated"),
    ("peak_tps", "Peak total tok/s"),
    ("peak_tps_per_gpu", "Peak tok/s per GPU"),
    ("ttft_single", "TTFT, 1 stream, smallest context"),
    ("largest_context", "Largest context"),
];

/// Whether column `id` holds numbers (right-aligned, sorted as numbers).
pub fn numeric(id: &str) -> bool {
    matches!(id, "gpu_count" | "peak_tps" | "peak_tps_per_gpu" | "ttft_single" | "largest_context")
}

/// The GPU of an entry: the inventory's model, else the hardware summary (`2 GPUs`).
fn gpu(e: &RunIndexEntry) -> Option<String> {
    e.gpu.clone().or_else(|| e.hardware.clone())
}

/// The model as people name it: the last part of the path (`Qwen3.5-122B-A10B-GPTQ-Int4`).
fn short_model(e: &RunIndexEntry) -> Option<String> {
    e.model.as_ref().map(|m| m.rsplit('/').next().unwrap_or(m).to_string())
}

/// The number column `id` sorts by, when the entry has it.
fn number(e: &RunIndexEntry, id: &str) -> Option<f64> {
    let h = e.headline.as_ref();
    match id {
        "gpu_count" => e.gpu_count.map(f64::from),
        "peak_tps" => h?.peak_total_tps,
        "peak_tps_per_gpu" => h?.peak_total_tps_per_gpu,
        "ttft_single" => h?.ttft_ms_single,
        "largest_context" => h?.largest_context.as_ref().map(|c| c.tokens as f64),
        _ => None,
    }
}

/// The text of column `id` of an entry (`—` when unknown).
pub fn cell_text(e: &RunIndexEntry, id: &str) -> String {
    let metric = |m: &str, v: Option<f64>| match (registry::metric(m).or(registry::derived(m)), v) {
        (Some(m), Some(v)) => m.display(v),
        _ => DASH.to_string(),
    };
    let h = e.headline.as_ref();
    let text = match id {
        "label" => Some(e.label.clone()),
        "gpu" => gpu(e),
        "gpu_count" => e.gpu_count.map(|n| n.to_string()),
        "engine" => e.engine.clone(),
        "engine_version" => e.engine_version.clone(),
        "model" => short_model(e),
        "quantization" => e.quantization.clone(),
        "date" => e.started_at.as_ref().map(|s| s.get(..10).unwrap_or(s).to_string()),
        "simulated" => Some(if e.simulated { "simulated" } else { "no" }.to_string()),
        "peak_tps" => return metric("total_tps", number(e, id)),
        "peak_tps_per_gpu" => return metric("total_tps_per_gpu", number(e, id)),
        "ttft_single" => h.and_then(|h| {
            let v = metric("ttft_ms", h.ttft_ms_single);
            h.ttft_ms_single.map(|_| format!("{v} at {}", h.ttft_context.as_deref().unwrap_or("?")))
        }),
        "largest_context" => h.and_then(|h| h.largest_context.as_ref().map(|c| c.label.clone())),
        _ => None,
    };
    text.unwrap_or_else(|| DASH.to_string())
}

/// Why column `id` of an entry is empty, for its tooltip (the index's `missing`, or an index
/// written before the figures existed).
pub fn cell_reason(e: &RunIndexEntry, id: &str) -> Option<String> {
    let figure = match id {
        "peak_tps" => "peak_total_tps",
        "peak_tps_per_gpu" => "peak_total_tps_per_gpu",
        "ttft_single" => "ttft_ms_single",
        "largest_context" => "largest_context",
        _ => return None,
    };
    match &e.headline {
        None => Some("the index was written by an older speedmatrix: publish the site again for its figures".into()),
        Some(h) => h.missing.iter().find(|m| m.figure == figure).map(|m| m.reason.clone()),
    }
}

/// Order two entries by column `id`: numbers as numbers, text case-blind; missing last.
pub fn compare(a: &RunIndexEntry, b: &RunIndexEntry, id: &str) -> Ordering {
    if numeric(id) {
        return match (number(a, id), number(b, id)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
    }
    if id == "date" {
        return a.started_at.cmp(&b.started_at);
    }
    let (x, y) = (cell_text(a, id), cell_text(b, id));
    match (x == DASH, y == DASH) {
        (false, true) => Ordering::Less,
        (true, false) => Ordering::Greater,
        _ => x.to_lowercase().cmp(&y.to_lowercase()),
    }
}

/// The filters of the run table, each a URL parameter: `q` (words in any column), `gpu`,
/// `engine`, `model` (exact values of those columns), `simulated` (`yes` / `no`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexFilters {
    /// Words that must all appear in the row's text (case-blind).
    pub q: String,
    /// The GPU column's value.
    pub gpu: Option<String>,
    /// The engine.
    pub engine: Option<String>,
    /// The model (short name).
    pub model: Option<String>,
    /// Simulated runs only (`Some(true)`) or real ones only (`Some(false)`).
    pub simulated: Option<bool>,
}

/// The URL parameters of the run table: the sort and the filters.
pub const INDEX_PARAMS: [&str; 6] = ["order", "q", "gpu", "engine", "model", "simulated"];

impl IndexFilters {
    /// Read the filters with `get` (a URL query lookup).
    pub fn from_query(get: impl Fn(&str) -> Option<String>) -> IndexFilters {
        let some = |k: &str| get(k).filter(|v| !v.is_empty());
        IndexFilters {
            q: get("q").unwrap_or_default(),
            gpu: some("gpu"),
            engine: some("engine"),
            model: some("model"),
            simulated: match get("simulated").as_deref() {
                Some("yes") => Some(true),
                Some("no") => Some(false),
                _ => None,
            },
        }
    }

    /// The filters as URL parameters (`None` removes one).
    pub fn params(&self) -> [(&'static str, Option<String>); 5] {
        [
            ("q", (!self.q.trim().is_empty()).then(|| self.q.clone())),
            ("gpu", self.gpu.clone()),
            ("engine", self.engine.clone()),
            ("model", self.model.clone()),
            ("simulated", self.simulated.map(|s| if s { "yes" } else { "no" }.to_string())),
        ]
    }

    /// Whether an entry passes every filter.
    pub fn keeps(&self, e: &RunIndexEntry) -> bool {
        let words = self.q.to_lowercase();
        let text = COLUMNS.iter().map(|(id, _)| cell_text(e, id)).collect::<Vec<_>>().join(" ").to_lowercase();
        let raw = format!("{text} {} {}", e.model.as_deref().unwrap_or(""), e.file).to_lowercase();
        words.split_whitespace().all(|w| raw.contains(w))
            && self.gpu.as_ref().is_none_or(|g| gpu(e).as_ref() == Some(g))
            && self.engine.as_ref().is_none_or(|g| e.engine.as_ref() == Some(g))
            && self.model.as_ref().is_none_or(|m| short_model(e).as_ref() == Some(m))
            && self.simulated.is_none_or(|s| e.simulated == s)
    }
}

/// The values the GPU, engine and model filters offer, each sorted and without repeats.
pub fn choices(entries: &[RunIndexEntry]) -> [Vec<String>; 3] {
    let distinct = |f: &dyn Fn(&RunIndexEntry) -> Option<String>| {
        let mut v: Vec<String> = entries.iter().filter_map(f).collect();
        v.sort();
        v.dedup();
        v
    };
    [distinct(&gpu), distinct(&|e| e.engine.clone()), distinct(&short_model)]
}

/// The rows to show, as indexes into `entries`: one per file (an entry whose file is the
/// same as an earlier one's — one digest, [`duplicate_groups`] — is that row's other name,
/// [`other_names`]), those the filters keep, sorted by `sort` (column id, ascending) with ties
/// in index order.
pub fn order(entries: &[RunIndexEntry], sort: Option<(&str, bool)>, filters: &IndexFilters) -> Vec<usize> {
    let mut idx: Vec<usize> =
        duplicate_groups(entries).into_iter().map(|g| g[0]).filter(|&i| filters.keeps(&entries[i])).collect();
    if let Some((id, asc)) = sort {
        idx.sort_by(|&a, &b| {
            let o = compare(&entries[a], &entries[b], id);
            if asc {
                o
            } else {
                o.reverse()
            }
        });
    }
    idx
}

/// For each entry, the other names its file is published under (empty for most; for the first
/// entry of a file published twice, the later entries' files).
pub fn other_names(entries: &[RunIndexEntry]) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); entries.len()];
    for g in duplicate_groups(entries) {
        out[g[0]] = g[1..].iter().map(|&i| entries[i].file.clone()).collect();
    }
    out
}

/// How many rows the table has before filtering: one per distinct file.
pub fn distinct_runs(entries: &[RunIndexEntry]) -> usize {
    duplicate_groups(entries).len()
}

/// `order=-peak_tps` → (`peak_tps`, descending); unknown columns are ignored.
pub fn parse_order(v: &str) -> Option<(&'static str, bool)> {
    let (id, asc) = v.strip_prefix('-').map_or((v, true), |rest| (rest, false));
    COLUMNS.iter().find(|(c, _)| *c == id).map(|(c, _)| (*c, asc))
}

/// The `order` parameter of a sort.
pub fn order_param(sort: Option<(&str, bool)>) -> Option<String> {
    sort.map(|(id, asc)| if asc { id.to_string() } else { format!("-{id}") })
}

/// Where comparing the picked runs (their URLs, in pick order) goes: the diff view for two
/// (`?a=…&b=…`), the comparison of many for three to [`crate::model::multi_run::MAX_RUNS`]
/// (`?compare=…&compare=…`); `None` for fewer than two or more than the most.
pub fn compare_href(urls: &[String]) -> Option<String> {
    let enc = js_free_encode;
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

/// Percent-encode a URL for a query value: everything but letters, digits and `-._~/`.
fn js_free_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::site::entry_for;
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
        let [gpus, engines, models] = choices(&e);
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
