//! A published site's run index, `runs/index.json`: which results files the site holds, with
//! the facts the front page's run table shows before loading any run — GPU and count, engine
//! and version, model, quantization, date, label, whether the server was simulated, and the
//! headline figures ([`Headline`]). `speedmatrix publish` writes it, the viewer reads it.
//!
//! ```json
//! {"schema": "speedmatrix-run-index", "schema_version": 2,
//!  "runs": [{"file": "h200-qwen.json", "id": "…", "label": "…", "model": "…",
//!            "hardware": "2 × H200 NVL", "gpu": "H200 NVL", "gpu_count": 2, "engine": "vllm",
//!            "engine_version": "0.26.1", "quantization": "INT4",
//!            "started_at": "2026-11-30T10:53:38Z",
//!            "headline": {"peak_total_tps": 6342.6, "peak_context": "8K", "peak_concurrency": 128,
//!                         "peak_total_tps_per_gpu": 3171.3, "ttft_ms_single": 196.0,
//!                         "ttft_context": "8K", "largest_context": {"label": "251K", "tokens": 257024}}}]}
//! ```
//! A run that measured the twin has `"simulated": true` (absent otherwise). Since version 3
//! every entry carries `"sha256"`, the hex SHA-256 of its file's bytes as published: two
//! entries with one digest are one file published under two names ([`duplicate_groups`]: the
//! run table shows them once, with both names), and a file whose bytes no longer match its
//! digest changed after publishing ([`integrity`]: the page flags it when it fetches the file,
//! and `publish` refuses to republish the site until it is resolved).
//! Since version 4 an entry of a run with speculative decoding carries it
//! (`"speculative_decoding": "mtp, 2 speculative tokens"`, the results' `engine` record), for
//! the run table's facet.
//! `file` is relative to the index itself (the `runs/` folder), so a site works from any
//! sub-path. Version 1 indexes (file, label, model, hardware, started_at only) still load, with
//! no headline; version 1 and 2 ones with no digests; before version 4 with no speculative decoding. `publish` rewrites them as
//! version 4 (its entries made again from the files).

use crate::derived::{gpu_count, per_gpu};
use crate::model::{CellStatus, ContextSize, MissingFigure, Results};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The value of the index's `schema` field.
pub const INDEX_SCHEMA_NAME: &str = "speedmatrix-run-index";
/// The index format version this build writes (and the newest it reads; it reads 1 as well).
pub const INDEX_SCHEMA_VERSION: u32 = 4;
/// The oldest index version this build reads.
pub const OLDEST_INDEX_VERSION: u32 = 1;

/// `runs/index.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunIndex {
    /// Always [`INDEX_SCHEMA_NAME`].
    pub schema: String,
    /// Always [`INDEX_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The runs, in the order the site lists them.
    pub runs: Vec<RunIndexEntry>,
}

/// One run of the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunIndexEntry {
    /// The results file, relative to the index (e.g. `h200-qwen.json`).
    pub file: String,
    /// The run's label, else a title made of model and hardware.
    pub label: String,
    /// The model measured, when known.
    #[serde(default)]
    pub model: Option<String>,
    /// The hardware, e.g. "2 × H200 NVL", when known.
    #[serde(default)]
    pub hardware: Option<String>,
    /// When the run started (RFC 3339), when known.
    #[serde(default)]
    pub started_at: Option<String>,
    /// The run's id (`run.id`); absent in version 1 indexes.
    #[serde(default)]
    pub id: Option<String>,
    /// The GPU model, e.g. "H200 NVL", when the inventory names it.
    #[serde(default)]
    pub gpu: Option<String>,
    /// GPUs serving the model, when the hardware card says.
    #[serde(default)]
    pub gpu_count: Option<u32>,
    /// The engine: `vllm`, `sglang`, `llamacpp`, `openai`.
    #[serde(default)]
    pub engine: Option<String>,
    /// The engine's version, when known.
    #[serde(default)]
    pub engine_version: Option<String>,
    /// Weight quantization, when known.
    #[serde(default)]
    pub quantization: Option<String>,
    /// Speculative decoding as the engine ran it (e.g. `mtp, 2 speculative tokens`), when the
    /// run used it; absent in indexes before version 4 and for runs without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_decoding: Option<String>,
    /// The run measured a simulation (the speedmatrix twin), not a real server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
    /// The headline figures; absent in version 1 indexes.
    #[serde(default)]
    pub headline: Option<Headline>,
    /// The SHA-256 of the file's bytes when it was published, 64 lowercase hex digits; absent
    /// in version 1 and 2 indexes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// A run's figures at a glance, for the run table (all from valid decode cells).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Headline {
    /// The highest total tok/s of a valid decode cell.
    #[serde(default)]
    pub peak_total_tps: Option<f64>,
    /// The context label of that cell.
    #[serde(default)]
    pub peak_context: Option<String>,
    /// The concurrency of that cell.
    #[serde(default)]
    pub peak_concurrency: Option<u32>,
    /// The peak per GPU (the hardware card's GPU count).
    #[serde(default)]
    pub peak_total_tps_per_gpu: Option<f64>,
    /// Median TTFT of the one-stream cell at the smallest decode context, ms.
    #[serde(default)]
    pub ttft_ms_single: Option<f64>,
    /// The context label of that cell.
    #[serde(default)]
    pub ttft_context: Option<String>,
    /// The largest context with a measured decode cell (valid or requests queued).
    #[serde(default)]
    pub largest_context: Option<ContextSize>,
    /// Figures above that are null, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingFigure>,
}

impl RunIndex {
    /// An index of these entries.
    pub fn new(runs: Vec<RunIndexEntry>) -> Self {
        RunIndex { schema: INDEX_SCHEMA_NAME.into(), schema_version: INDEX_SCHEMA_VERSION, runs }
    }
}

/// The model of a run as people name it: the loaded model, else the served name.
pub fn model_name(r: &Results) -> Option<String> {
    r.engine.model.clone().or_else(|| r.engine.served_model_name.clone())
}

/// The hardware of a run in a few words: `2 × H200 NVL`, `H200 NVL`, `2 GPUs` (a count
/// without an inventory, from `run --gpu-count`), or the accelerator type.
pub fn hardware_summary(r: &Results) -> Option<String> {
    let h = &r.hardware;
    match (h.gpus.first(), gpu_count(r).ok()) {
        (Some(g), Some(n)) if n > 1 => Some(format!("{n} × {}", g.name)),
        (Some(g), _) => Some(g.name.clone()),
        (None, Some(1)) => Some("1 GPU".into()),
        (None, Some(n)) => Some(format!("{n} GPUs")),
        (None, None) => h.accelerator_type.clone(),
    }
}

/// The headline figures of a run (see [`Headline`]); each null one is in `missing` with why.
pub fn headline(r: &Results) -> Headline {
    let mut h = Headline::default();
    let valid = || r.decode.iter().filter(|c| c.status == CellStatus::Valid);
    let peak = valid()
        .filter(|c| c.total_tps.is_some_and(f64::is_finite))
        .max_by(|a, b| a.total_tps.unwrap_or(0.0).total_cmp(&b.total_tps.unwrap_or(0.0)));
    let mut gaps = Vec::new();
    match peak {
        Some(c) => {
            let v = c.total_tps.unwrap_or(0.0);
            h.peak_total_tps = Some(v);
            h.peak_context = Some(c.context.label.clone());
            h.peak_concurrency = Some(c.concurrency);
            match gpu_count(r) {
                Ok(n) => h.peak_total_tps_per_gpu = Some(per_gpu(v, n)),
                Err(e) => gaps.push(h_missing("peak_total_tps_per_gpu", e)),
            }
        }
        None => {
            gaps.push(h_missing("peak_total_tps", "no valid decode cell".into()));
            gaps.push(h_missing("peak_total_tps_per_gpu", "no valid decode cell".into()));
        }
    }
    let smallest = r.decode.iter().map(|c| c.context.tokens).min();
    let single = r.decode.iter().find(|c| Some(c.context.tokens) == smallest && c.concurrency == 1);
    match single {
        Some(c) if c.status == CellStatus::Valid && c.ttft_ms.as_ref().and_then(|d| d.p50).is_some() => {
            h.ttft_ms_single = c.ttft_ms.as_ref().and_then(|d| d.p50);
            h.ttft_context = Some(c.context.label.clone());
        }
        Some(c) if c.status != CellStatus::Valid => gaps.push(h_missing(
            "ttft_ms_single",
            format!("the {} × 1 cell is {}", c.context.label, c.status.label().to_lowercase()),
        )),
        Some(c) => {
            gaps.push(h_missing("ttft_ms_single", format!("the {} × 1 cell has no median TTFT", c.context.label)))
        }
        None => gaps.push(h_missing("ttft_ms_single", "no one-stream cell at the smallest context".into())),
    }
    h.largest_context =
        r.decode.iter().filter(|c| c.status.is_measured()).max_by_key(|c| c.context.tokens).map(|c| c.context.clone());
    if h.largest_context.is_none() {
        gaps.push(h_missing("largest_context", "no measured decode cell".into()));
    }
    h.missing = gaps;
    h
}

fn h_missing(figure: &str, reason: String) -> MissingFigure {
    MissingFigure { figure: figure.into(), reason }
}

/// A one-line title for a run: its label, else "model on hardware", else the run id.
pub fn run_title(r: &Results) -> String {
    if let Some(label) = r.run.label.as_ref().filter(|l| !l.trim().is_empty()) {
        return label.clone();
    }
    let model = model_name(r).map(|m| m.rsplit('/').next().unwrap_or(&m).to_string());
    match (model, hardware_summary(r)) {
        (Some(m), Some(h)) => format!("{m} on {h}"),
        (Some(m), None) => m,
        (None, Some(h)) => format!("run {} on {h}", r.run.id),
        (None, None) => format!("run {}", r.run.id),
    }
}

/// The index entry of a run stored as `file`.
pub fn entry_for(r: &Results, file: &str) -> RunIndexEntry {
    RunIndexEntry {
        file: file.to_string(),
        label: run_title(r),
        model: model_name(r),
        hardware: hardware_summary(r),
        started_at: r.run.started_at.clone(),
        id: Some(r.run.id.clone()),
        gpu: r.hardware.gpus.first().map(|g| g.name.clone()),
        gpu_count: gpu_count(r).ok(),
        engine: r.engine.name.clone(),
        engine_version: r.engine.version.clone(),
        quantization: r.engine.quantization.clone(),
        speculative_decoding: r.engine.speculative_decoding.clone(),
        simulated: r.engine.simulated.is_some(),
        headline: Some(headline(r)),
        sha256: None,
    }
}

/// The index entry of a run stored as `file` with these bytes: [`entry_for`] with the
/// file's digest.
pub fn entry_for_file(r: &Results, file: &str, bytes: &[u8]) -> RunIndexEntry {
    RunIndexEntry { sha256: Some(sha256_hex(bytes)), ..entry_for(r, file) }
}

/// Percent-encode a value for a site URL's query (`?show=runs/a%20b.json`): everything but
/// letters, digits and `-._~/`.
pub fn encode_query_value(s: &str) -> String {
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

/// The SHA-256 of `bytes` as 64 lowercase hex digits (the index's `sha256`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a run's file is still the one its index entry was published from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// The index records no digest (written before version 3): nothing to compare.
    Unrecorded,
    /// The bytes have the digest the index records.
    Same,
    /// The bytes changed after publishing.
    Changed {
        /// The digest the index records.
        published: String,
        /// The digest of the bytes now.
        now: String,
    },
}

impl Integrity {
    /// The one-line warning a changed file gets (`None` otherwise): both digests, shortened.
    pub fn warning(&self, file: &str) -> Option<String> {
        let Integrity::Changed { published, now } = self else { return None };
        let short = |d: &str| d.get(..12).unwrap_or(d).to_string();
        Some(format!(
            "runs/{file} changed after it was published: the site's index records sha256 {}…, the file now has {}… — \
             the run table's figures are the published file's, this page shows the file as it is now",
            short(published),
            short(now)
        ))
    }
}

/// Compare a run file's bytes with the digest its index entry records (any case of hex).
pub fn integrity(recorded: Option<&str>, bytes: &[u8]) -> Integrity {
    let Some(published) = recorded else { return Integrity::Unrecorded };
    let now = sha256_hex(bytes);
    if published.eq_ignore_ascii_case(&now) {
        Integrity::Same
    } else {
        Integrity::Changed { published: published.to_ascii_lowercase(), now }
    }
}

/// The entries grouped by content: each group the indexes of entries with one digest, in
/// index order, the groups in the order of their first entry. An entry without a digest is a
/// group of its own. A group of two or more is one file published under several names.
pub fn duplicate_groups(entries: &[RunIndexEntry]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut by_digest: HashMap<String, usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        match e.sha256.as_ref().map(|d| d.to_ascii_lowercase()) {
            Some(d) => match by_digest.get(&d) {
                Some(&g) => groups[g].push(i),
                None => {
                    by_digest.insert(d, groups.len());
                    groups.push(vec![i]);
                }
            },
            None => groups.push(vec![i]),
        }
    }
    groups
}

/// Why a run index could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IndexError {
    /// Not JSON, or not shaped like an index.
    #[error("runs/index.json is not a run index: {0}")]
    Shape(String),
    /// A newer or foreign index.
    #[error("runs/index.json has schema {schema:?} version {version}; this build reads {INDEX_SCHEMA_NAME:?} versions {OLDEST_INDEX_VERSION}–{INDEX_SCHEMA_VERSION} (a newer one needs a newer speedmatrix)")]
    Version {
        /// The `schema` found.
        schema: String,
        /// The `schema_version` found.
        version: u32,
    },
    /// An entry whose file would leave the site (`..`, an absolute path or a URL).
    #[error("runs/index.json: run {0:?} is not a file name inside the runs folder")]
    UnsafePath(String),
}

/// Parse and check `runs/index.json`.
///
/// # Errors
/// [`IndexError`] when the bytes are not an index of this version, or an entry's `file` is not
/// a plain relative path inside the runs folder.
pub fn load_index(bytes: &[u8]) -> Result<RunIndex, IndexError> {
    let index: RunIndex = serde_json::from_slice(bytes).map_err(|e| IndexError::Shape(e.to_string()))?;
    let known = OLDEST_INDEX_VERSION..=INDEX_SCHEMA_VERSION;
    if index.schema != INDEX_SCHEMA_NAME || !known.contains(&index.schema_version) {
        return Err(IndexError::Version { schema: index.schema, version: index.schema_version });
    }
    if let Some(bad) = index.runs.iter().find(|e| !is_plain_relative(&e.file)) {
        return Err(IndexError::UnsafePath(bad.file.clone()));
    }
    Ok(index)
}

/// A relative path made of ordinary segments: no scheme, no leading `/`, no `..`, no `\`.
pub fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains(['\\', ':', '?', '#'])
        && path.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> RunIndexEntry {
        RunIndexEntry {
            file: "a.json".into(),
            label: "A".into(),
            model: None,
            hardware: Some("2 × H200 NVL".into()),
            started_at: None,
            id: Some("run-a".into()),
            gpu: Some("H200 NVL".into()),
            gpu_count: Some(2),
            engine: Some("vllm".into()),
            engine_version: None,
            quantization: None,
            speculative_decoding: None,
            simulated: true,
            headline: Some(Headline { peak_total_tps: Some(1.0), ..Headline::default() }),
            sha256: Some(sha256_hex(b"a")),
        }
    }

    #[test]
    fn index_round_trips_and_rejects_escapes() {
        let idx = RunIndex::new(vec![entry()]);
        let bytes = serde_json::to_vec(&idx).unwrap();
        assert_eq!(load_index(&bytes).unwrap(), idx);
        // An index written before `simulated` existed reads as real runs.
        let old = br#"{"schema":"speedmatrix-run-index","schema_version":1,"runs":[{"file":"a.json","label":"A"}]}"#;
        assert!(!load_index(old).unwrap().runs[0].simulated);
        for bad in ["../x.json", "/etc/passwd", "https://evil/x.json", "a//b.json", "a\\b.json", ""] {
            let mut i = idx.clone();
            i.runs[0].file = bad.into();
            assert!(load_index(&serde_json::to_vec(&i).unwrap()).is_err(), "{bad} accepted");
        }
        assert!(matches!(load_index(b"[]"), Err(IndexError::Shape(_))));
        let mut i = idx.clone();
        i.schema_version = INDEX_SCHEMA_VERSION + 1;
        let err = load_index(&serde_json::to_vec(&i).unwrap()).unwrap_err();
        assert!(matches!(err, IndexError::Version { .. }), "{err}");
        assert!(err.to_string().contains("versions 1–4"), "{err}");
        // A version 2 index (no digests) still loads.
        let v2 = br#"{"schema":"speedmatrix-run-index","schema_version":2,"runs":[{"file":"a.json","label":"A"}]}"#;
        assert_eq!(load_index(v2).unwrap().runs[0].sha256, None);
    }

    #[test]
    fn digests_flag_changed_files() {
        // The SHA-256 test vector of FIPS 180-2 ("abc").
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex(b"abc"), abc);
        assert_eq!(integrity(Some(abc), b"abc"), Integrity::Same);
        assert_eq!(integrity(Some(&abc.to_uppercase()), b"abc"), Integrity::Same, "hex in any case");
        assert_eq!(integrity(None, b"abc"), Integrity::Unrecorded);
        assert_eq!(Integrity::Unrecorded.warning("a.json"), None);
        let changed = integrity(Some(abc), b"abd");
        let Integrity::Changed { published, now } = &changed else { panic!("{changed:?}") };
        assert_eq!((published.as_str(), now.as_str()), (abc, sha256_hex(b"abd").as_str()));
        let w = changed.warning("a.json").unwrap();
        assert!(w.starts_with("runs/a.json changed after it was published"), "{w}");
        assert!(w.contains("ba7816bf8f01…") && w.contains(&format!("{}…", &now[..12])), "{w}");
        let r = seed();
        let bytes = include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json");
        let e = entry_for_file(&r, "seed.json", bytes);
        assert_eq!(integrity(e.sha256.as_deref(), bytes), Integrity::Same);
        assert_eq!(e, RunIndexEntry { sha256: e.sha256.clone(), ..entry_for(&r, "seed.json") });
    }

    #[test]
    fn one_file_under_two_names_is_one_group() {
        let with = |file: &str, digest: Option<&str>| RunIndexEntry {
            file: file.into(),
            sha256: digest.map(|d| sha256_hex(d.as_bytes())),
            ..entry()
        };
        let e = [
            with("a.json", Some("A")),
            with("b.json", Some("B")),
            with("a-copy.json", Some("A")),
            with("old-1.json", None),
            with("old-2.json", None),
            with("a-again.json", Some("A")),
        ];
        assert_eq!(duplicate_groups(&e), [vec![0, 2, 5], vec![1], vec![3], vec![4]]);
        let mut upper = e.clone();
        upper[2].sha256 = upper[2].sha256.as_ref().map(|d| d.to_uppercase());
        assert_eq!(duplicate_groups(&upper), duplicate_groups(&e));
        assert_eq!(duplicate_groups(&[]), Vec::<Vec<usize>>::new());
    }

    #[test]
    fn a_version_1_index_still_loads_without_headline_figures() {
        let old = br#"{"schema":"speedmatrix-run-index","schema_version":1,
            "runs":[{"file":"a.json","label":"A","model":"m","hardware":"H200","started_at":"2026-11-30T10:53:38Z"}]}"#;
        let idx = load_index(old).unwrap();
        assert_eq!(idx.schema_version, 1);
        let e = &idx.runs[0];
        assert_eq!((e.file.as_str(), e.hardware.as_deref()), ("a.json", Some("H200")));
        assert_eq!((e.headline.clone(), e.id.clone(), e.simulated), (None, None, false));
    }

    fn seed() -> Results {
        crate::load_results(include_bytes!("../../tests/fixtures/h200-qwen3.5-122b-vllm.json")).expect("the seed loads")
    }

    #[test]
    fn the_seed_headline() {
        let r = seed();
        let e = entry_for(&r, "seed.json");
        assert_eq!((e.gpu.as_deref(), e.gpu_count, e.engine.as_deref()), (Some("H200 NVL"), Some(2), Some("vllm")));
        assert_eq!(e.engine_version.as_deref(), Some("0.26.1rc1.dev638+g52be12cfa"));
        assert_eq!(e.quantization.as_deref(), Some("INT4"));
        let h = e.headline.unwrap();
        assert_eq!(
            (h.peak_total_tps, h.peak_context.as_deref(), h.peak_concurrency),
            (Some(6342.6), Some("8K"), Some(128))
        );
        assert_eq!(h.peak_total_tps_per_gpu, Some(3171.3));
        assert_eq!((h.ttft_ms_single, h.ttft_context.as_deref()), (Some(196.0), Some("8K")));
        assert_eq!(h.largest_context.map(|c| c.label), Some("251K".into()), "decode, not the 256K prefill row");
        assert!(h.missing.is_empty(), "{:?}", h.missing);
    }

    #[test]
    fn headline_gaps_say_why() {
        let mut r = seed();
        r.hardware.gpus.clear();
        r.hardware.gpu_count = None;
        r.hardware.accelerator_type = None;
        for c in r.decode.iter_mut().filter(|c| c.context.tokens == 8192 && c.concurrency == 1) {
            c.status = CellStatus::Error;
        }
        let h = headline(&r);
        assert_eq!(h.peak_total_tps, Some(6342.6));
        assert_eq!(h.peak_total_tps_per_gpu, None);
        assert_eq!(h.ttft_ms_single, None);
        let why: Vec<(&str, &str)> = h.missing.iter().map(|m| (m.figure.as_str(), m.reason.as_str())).collect();
        assert!(why.contains(&("ttft_ms_single", "the 8K × 1 cell is error")), "{why:?}");
        assert!(why.iter().any(|(f, r)| *f == "peak_total_tps_per_gpu" && r.contains("no GPU count")), "{why:?}");
        assert_eq!(hardware_summary(&r), None);
        r.hardware.gpu_count = Some(2);
        assert_eq!(hardware_summary(&r).as_deref(), Some("2 GPUs"), "a count from --gpu-count, no inventory");
        r.decode.clear();
        let h = headline(&r);
        let figures: Vec<&str> = h.missing.iter().map(|m| m.figure.as_str()).collect();
        assert_eq!(figures, ["peak_total_tps", "peak_total_tps_per_gpu", "ttft_ms_single", "largest_context"]);
    }
}
