//! The run table of a site's front page, as plain data: its columns, the text and sort order
//! of each cell, the facets that filter it and the sort — each a URL parameter, so a filtered
//! view is a permalink — from `runs/index.json` alone ([`crate::site`]). The viewer draws it
//! (`viewer/src/model/run_index.rs`, `viewer/src/view/report_page/run_table.rs`).

use crate::registry;
use crate::site::{duplicate_groups, RunIndexEntry};
use std::cmp::Ordering;

/// The placeholder for what an entry does not know.
pub const DASH: &str = "—";

/// The table's columns: (id, header). `label` is the run's title, a link to its report.
pub const COLUMNS: [(&str, &str); 14] = [
    ("label", "Run"),
    ("gpu", "GPU"),
    ("gpu_count", "GPUs"),
    ("engine", "Engine"),
    ("engine_version", "Version"),
    ("model", "Model"),
    ("quantization", "Quantization"),
    ("speculative_decoding", "Speculative decoding"),
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
        "speculative_decoding" => e.speculative_decoding.clone(),
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
        return match (&a.started_at, &b.started_at) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
    }
    let (x, y) = (cell_text(a, id), cell_text(b, id));
    match (x == DASH, y == DASH) {
        (false, true) => Ordering::Less,
        (true, false) => Ordering::Greater,
        _ => x.to_lowercase().cmp(&y.to_lowercase()),
    }
}

/// The facets of the run table, each a URL parameter (so a filtered view is a permalink):
/// `q` (words in any column), `label` (text in the run's label), `gpu`, `engine`, `version`
/// (the engine's), `model`, `quant` (quantization) and `spec` (speculative decoding; [`NONE`]
/// for runs without) — exact values of those columns —, `gpus` (the GPU count), `simulated`
/// (`yes` / `no`), and
/// `from` / `to` (the start date, `YYYY-MM-DD`, both ends included; a run without a start time
/// is left out while either is set). Empty values mean "any".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexFilters {
    /// Words that must all appear in the row's text (case-blind).
    pub q: String,
    /// Text the run's label must contain (case-blind).
    pub label: String,
    /// The GPU column's value.
    pub gpu: Option<String>,
    /// The GPU count.
    pub gpu_count: Option<u32>,
    /// The engine.
    pub engine: Option<String>,
    /// The model (short name).
    pub model: Option<String>,
    /// The engine's version.
    pub engine_version: Option<String>,
    /// The quantization.
    pub quantization: Option<String>,
    /// The speculative decoding, or [`NONE`] for runs whose index entry records none.
    pub speculative: Option<String>,
    /// Simulated runs only (`Some(true)`) or real ones only (`Some(false)`).
    pub simulated: Option<bool>,
    /// The first start date kept, `YYYY-MM-DD`.
    pub from: Option<String>,
    /// The last start date kept, `YYYY-MM-DD`.
    pub to: Option<String>,
}

/// The URL parameters of the run table: the sort and the facets.
pub const INDEX_PARAMS: [&str; 13] =
    ["order", "q", "label", "gpu", "gpus", "engine", "version", "model", "quant", "spec", "simulated", "from", "to"];

/// The value of the `spec` facet that keeps the runs without speculative decoding (their index
/// entry records none: not used, or not known).
pub const NONE: &str = "none";

/// A `YYYY-MM-DD` date, else `None` (a mistyped date in a URL filters nothing).
fn day(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    (b.len() == 10 && b[4] == b'-' && b[7] == b'-' && digits(0..4) && digits(5..7) && digits(8..10))
        .then(|| v.to_string())
}

impl IndexFilters {
    /// Read the facets with `get` (a URL query lookup).
    pub fn from_query(get: impl Fn(&str) -> Option<String>) -> IndexFilters {
        let some = |k: &str| get(k).filter(|v| !v.is_empty());
        IndexFilters {
            q: get("q").unwrap_or_default(),
            label: get("label").unwrap_or_default(),
            gpu: some("gpu"),
            gpu_count: some("gpus").and_then(|v| v.parse().ok()),
            engine: some("engine"),
            engine_version: some("version"),
            model: some("model"),
            quantization: some("quant"),
            speculative: some("spec"),
            simulated: match get("simulated").as_deref() {
                Some("yes") => Some(true),
                Some("no") => Some(false),
                _ => None,
            },
            from: some("from").as_deref().and_then(day),
            to: some("to").as_deref().and_then(day),
        }
    }

    /// The facets as URL parameters (`None` removes one).
    pub fn params(&self) -> [(&'static str, Option<String>); 12] {
        let text = |t: &str| (!t.trim().is_empty()).then(|| t.to_string());
        [
            ("q", text(&self.q)),
            ("label", text(&self.label)),
            ("gpu", self.gpu.clone()),
            ("gpus", self.gpu_count.map(|n| n.to_string())),
            ("engine", self.engine.clone()),
            ("version", self.engine_version.clone()),
            ("model", self.model.clone()),
            ("quant", self.quantization.clone()),
            ("spec", self.speculative.clone()),
            ("simulated", self.simulated.map(|s| if s { "yes" } else { "no" }.to_string())),
            ("from", self.from.clone()),
            ("to", self.to.clone()),
        ]
    }

    /// Whether an entry passes every facet.
    pub fn keeps(&self, e: &RunIndexEntry) -> bool {
        let words = self.q.to_lowercase();
        let date = e.started_at.as_deref().and_then(|s| s.get(..10));
        let in_range = match (&self.from, &self.to) {
            (None, None) => true,
            (from, to) => {
                date.is_some_and(|d| from.as_deref().is_none_or(|f| d >= f) && to.as_deref().is_none_or(|t| d <= t))
            }
        };
        let label = self.label.trim().to_lowercase();
        in_range
            && (label.is_empty() || e.label.to_lowercase().contains(&label))
            && (words.trim().is_empty() || {
                let text = COLUMNS.iter().map(|(id, _)| cell_text(e, id)).collect::<Vec<_>>().join(" ");
                let raw = format!("{text} {} {}", e.model.as_deref().unwrap_or(""), e.file).to_lowercase();
                words.split_whitespace().all(|w| raw.contains(w))
            })
            && self.gpu.as_ref().is_none_or(|g| gpu(e).as_ref() == Some(g))
            && self.gpu_count.is_none_or(|n| e.gpu_count == Some(n))
            && self.engine.as_ref().is_none_or(|g| e.engine.as_ref() == Some(g))
            && self.model.as_ref().is_none_or(|m| short_model(e).as_ref() == Some(m))
            && self.engine_version.as_ref().is_none_or(|v| e.engine_version.as_ref() == Some(v))
            && self.quantization.as_ref().is_none_or(|q| e.quantization.as_ref() == Some(q))
            && self.speculative.as_ref().is_none_or(|s| speculative(e) == *s)
            && self.simulated.is_none_or(|s| e.simulated == s)
    }
}

/// The speculative decoding of an entry as the `spec` facet matches it ([`NONE`] when none).
fn speculative(e: &RunIndexEntry) -> String {
    e.speculative_decoding.clone().unwrap_or_else(|| NONE.to_string())
}

/// The values the GPU, engine, model, engine version, quantization and speculative decoding
/// facets offer, each sorted and without repeats (the last with [`NONE`] when a run has none).
pub fn choices(entries: &[RunIndexEntry]) -> [Vec<String>; 6] {
    let distinct = |f: &dyn Fn(&RunIndexEntry) -> Option<String>| {
        let mut v: Vec<String> = entries.iter().filter_map(f).collect();
        v.sort();
        v.dedup();
        v
    };
    [
        distinct(&gpu),
        distinct(&|e| e.engine.clone()),
        distinct(&short_model),
        distinct(&|e| e.engine_version.clone()),
        distinct(&|e| e.quantization.clone()),
        distinct(&|e| Some(speculative(e))),
    ]
}

/// The columns of the run table's CSV export ([`to_csv`]): the entry's facts as the index
/// records them (numbers unformatted, empty when unknown).
pub const CSV_COLUMNS: [&str; 20] = [
    "file",
    "label",
    "also_published_as",
    "gpu",
    "gpu_count",
    "engine",
    "engine_version",
    "model",
    "quantization",
    "speculative_decoding",
    "started_at",
    "simulated",
    "peak_total_tps",
    "peak_context",
    "peak_concurrency",
    "peak_total_tps_per_gpu",
    "ttft_ms_single",
    "ttft_context",
    "largest_context_tokens",
    "sha256",
];

/// The rows `rows` (indexes into `entries`, as [`order`] gives them) as CSV with the header
/// [`CSV_COLUMNS`]: what the filtered table shows, for a spreadsheet or a notebook.
pub fn to_csv(entries: &[RunIndexEntry], rows: &[usize]) -> String {
    let also = other_names(entries);
    let mut w = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    let num = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    // Writing into a Vec cannot fail, and every record has the header's length.
    let _ = w.write_record(CSV_COLUMNS);
    for &i in rows {
        let Some(e) = entries.get(i) else { continue };
        let h = e.headline.clone().unwrap_or_default();
        let record: [String; 20] = [
            e.file.clone(),
            e.label.clone(),
            also[i].join(" "),
            gpu(e).unwrap_or_default(),
            e.gpu_count.map(|n| n.to_string()).unwrap_or_default(),
            text(&e.engine),
            text(&e.engine_version),
            text(&e.model),
            text(&e.quantization),
            text(&e.speculative_decoding),
            text(&e.started_at),
            e.simulated.to_string(),
            num(h.peak_total_tps),
            text(&h.peak_context),
            h.peak_concurrency.map(|n| n.to_string()).unwrap_or_default(),
            num(h.peak_total_tps_per_gpu),
            num(h.ttft_ms_single),
            text(&h.ttft_context),
            h.largest_context.as_ref().map(|c| c.tokens.to_string()).unwrap_or_default(),
            text(&e.sha256),
        ];
        let _ = w.write_record(&record);
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// The GPU counts the GPU-count facet offers, ascending, without repeats.
pub fn gpu_counts(entries: &[RunIndexEntry]) -> Vec<u32> {
    let mut v: Vec<u32> = entries.iter().filter_map(|e| e.gpu_count).collect();
    v.sort_unstable();
    v.dedup();
    v
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::{entry_for, sha256_hex};

    /// Six entries: (file, label, GPU, count, engine, model, simulated, start).
    fn entries() -> Vec<RunIndexEntry> {
        let seed = crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap();
        let base = entry_for(&seed, "x.json");
        #[allow(clippy::type_complexity)]
        let rows: [(&str, &str, &str, u32, &str, &str, bool, Option<&str>); 6] = [
            ("a.json", "nightly A", "H200 NVL", 2, "vllm", "org/Qwen3-8B", false, Some("2026-01-01T08:00:00Z")),
            ("b.json", "nightly B", "H100", 8, "sglang", "org/Qwen3-8B", true, Some("2026-02-10T00:00:00Z")),
            ("c.json", "release C", "H200 NVL", 8, "vllm", "org/Llama-70B", false, Some("2026-03-31T23:59:59Z")),
            ("d.json", "Nightly D", "L40S", 1, "llamacpp", "org/Llama-70B", true, None),
            ("e.json", "release E", "H100", 2, "vllm", "org/Qwen3-8B", false, Some("2026-04-01T00:00:00Z")),
            ("f.json", "nightly F", "H200 NVL", 2, "vllm", "org/Qwen3-8B", true, Some("2026-02-28T12:00:00Z")),
        ];
        rows.iter()
            .map(|&(file, label, gpu, n, engine, model, simulated, started)| RunIndexEntry {
                file: file.into(),
                label: label.into(),
                gpu: Some(gpu.into()),
                gpu_count: Some(n),
                engine: Some(engine.into()),
                model: Some(model.into()),
                simulated,
                started_at: started.map(str::to_string),
                sha256: Some(sha256_hex(file.as_bytes())),
                engine_version: Some(if file < "c" { "0.26.1" } else { "0.27.0" }.into()),
                quantization: (file != "d.json").then(|| if file == "e.json" { "FP8" } else { "INT4" }.into()),
                speculative_decoding: matches!(file, "b.json" | "f.json").then(|| "mtp, 2 speculative tokens".into()),
                ..base.clone()
            })
            .collect()
    }

    fn kept(f: &IndexFilters) -> Vec<String> {
        let e = entries();
        order(&e, None, f).into_iter().map(|i| e[i].file.clone()).collect()
    }

    #[test]
    fn each_facet_keeps_what_it_says() {
        let f = |build: &dyn Fn(&mut IndexFilters)| {
            let mut f = IndexFilters::default();
            build(&mut f);
            kept(&f)
        };
        assert_eq!(kept(&IndexFilters::default()).len(), 6);
        assert_eq!(f(&|f| f.gpu = Some("H200 NVL".into())), ["a.json", "c.json", "f.json"]);
        assert_eq!(f(&|f| f.gpu_count = Some(8)), ["b.json", "c.json"]);
        assert_eq!(f(&|f| f.engine = Some("vllm".into())), ["a.json", "c.json", "e.json", "f.json"]);
        assert_eq!(f(&|f| f.model = Some("Llama-70B".into())), ["c.json", "d.json"]);
        assert_eq!(f(&|f| f.simulated = Some(true)), ["b.json", "d.json", "f.json"]);
        assert_eq!(f(&|f| f.label = "NIGHTLY".into()), ["a.json", "b.json", "d.json", "f.json"], "case-blind");
        assert_eq!(f(&|f| f.label = "  ".into()).len(), 6, "blank text filters nothing");
        // Dates: both ends included; a run without a start time is out while a range is set.
        assert_eq!(f(&|f| f.from = Some("2026-02-10".into())), ["b.json", "c.json", "e.json", "f.json"]);
        assert_eq!(f(&|f| f.to = Some("2026-03-31".into())), ["a.json", "b.json", "c.json", "f.json"]);
        let feb = f(&|f| {
            f.from = Some("2026-02-01".into());
            f.to = Some("2026-02-28".into());
        });
        assert_eq!(feb, ["b.json", "f.json"]);
        // Facets combine with AND.
        let all = f(&|f| {
            f.gpu = Some("H200 NVL".into());
            f.gpu_count = Some(2);
            f.simulated = Some(false);
            f.label = "nightly".into();
        });
        assert_eq!(all, ["a.json"]);
        assert_eq!(gpu_counts(&entries()), [1, 2, 8]);
        // The engine version, quantization and speculative decoding of the index entries.
        assert_eq!(f(&|f| f.engine_version = Some("0.26.1".into())), ["a.json", "b.json"]);
        assert_eq!(f(&|f| f.quantization = Some("INT4".into())), ["a.json", "b.json", "c.json", "f.json"]);
        assert_eq!(f(&|f| f.speculative = Some("mtp, 2 speculative tokens".into())), ["b.json", "f.json"]);
        assert_eq!(f(&|f| f.speculative = Some(NONE.into())), ["a.json", "c.json", "d.json", "e.json"]);
        let [_, _, _, versions, quants, specs] = choices(&entries());
        assert_eq!(versions, ["0.26.1", "0.27.0"]);
        assert_eq!(quants, ["FP8", "INT4"]);
        assert_eq!(specs, ["mtp, 2 speculative tokens", NONE]);
    }

    #[test]
    fn the_filtered_table_exports_as_csv() {
        let e = entries();
        let f = IndexFilters { gpu: Some("H200 NVL".into()), ..IndexFilters::default() };
        let rows = order(&e, parse_order("-date"), &f);
        let csv = to_csv(&e, &rows);
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), CSV_COLUMNS);
        let records: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        let col =
            |rec: &csv::StringRecord, name: &str| rec[CSV_COLUMNS.iter().position(|c| *c == name).unwrap()].to_string();
        // The rows the filter keeps, in the table's order: c (March), f (February), a (January).
        assert_eq!(records.iter().map(|x| col(x, "file")).collect::<Vec<_>>(), ["c.json", "f.json", "a.json"]);
        let c = &records[0];
        assert_eq!(col(c, "gpu"), "H200 NVL");
        assert_eq!(col(c, "gpu_count"), "8");
        assert_eq!(col(c, "model"), "org/Llama-70B");
        assert_eq!(col(c, "engine_version"), "0.27.0");
        assert_eq!(col(c, "started_at"), "2026-03-31T23:59:59Z");
        assert_eq!(col(c, "simulated"), "false");
        assert_eq!(col(c, "sha256"), sha256_hex(b"c.json"));
        assert_eq!(col(&records[1], "speculative_decoding"), "mtp, 2 speculative tokens");
        let peak = e[2].headline.as_ref().and_then(|h| h.peak_total_tps).unwrap();
        assert_eq!(col(c, "peak_total_tps").parse::<f64>().unwrap(), peak, "figures unformatted");
        assert_eq!(col(c, "speculative_decoding"), "", "unknown is empty");
    }

    #[test]
    fn facets_and_sort_survive_the_url() {
        let f = IndexFilters {
            q: "qwen".into(),
            label: "nightly".into(),
            gpu: Some("H100".into()),
            gpu_count: Some(8),
            engine: Some("sglang".into()),
            engine_version: Some("0.26.1".into()),
            model: Some("Qwen3-8B".into()),
            quantization: Some("INT4".into()),
            speculative: Some("mtp, 2 speculative tokens".into()),
            simulated: Some(true),
            from: Some("2026-02-01".into()),
            to: Some("2026-02-28".into()),
        };
        let params = f.params();
        let names: Vec<&str> = params.iter().map(|(k, _)| *k).collect();
        assert_eq!(names, INDEX_PARAMS[1..], "every facet has its parameter");
        let back = IndexFilters::from_query(|k| params.iter().find(|(p, _)| *p == k).and_then(|(_, v)| v.clone()));
        assert_eq!(back, f);
        assert_eq!(kept(&back), ["b.json"]);
        // Mistyped values in a URL filter nothing rather than everything.
        let bad = IndexFilters::from_query(|k| match k {
            "from" => Some("02/01/2026".into()),
            "gpus" => Some("eight".into()),
            _ => None,
        });
        assert_eq!(bad, IndexFilters::default());
        assert_eq!(parse_order("-date"), Some(("date", false)));
        let e = entries();
        let by_date: Vec<&str> =
            order(&e, parse_order("date"), &IndexFilters::default()).into_iter().map(|i| e[i].file.as_str()).collect();
        assert_eq!(by_date, ["a.json", "b.json", "f.json", "c.json", "e.json", "d.json"], "no date sorts last");
    }
}
