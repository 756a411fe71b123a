//! A published site's run index, `runs/index.json`: which results files the site holds, with
//! the few facts a run picker shows before loading one. `speedmatrix publish` writes it, the
//! viewer reads it.
//!
//! ```json
//! {"schema": "speedmatrix-run-index", "schema_version": 1,
//!  "runs": [{"file": "h200-qwen.json", "label": "…", "model": "…", "hardware": "…",
//!            "started_at": "2026-11-30T10:53:38Z"}]}
//! ```
//! A run that measured the twin has `"simulated": true` (absent otherwise).
//! `file` is relative to the index itself (the `runs/` folder), so a site works from any
//! sub-path.

use crate::model::Results;
use serde::{Deserialize, Serialize};

/// The value of the index's `schema` field.
pub const INDEX_SCHEMA_NAME: &str = "speedmatrix-run-index";
/// The index format version this build writes and reads.
pub const INDEX_SCHEMA_VERSION: u32 = 1;

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
    /// The run measured a simulation (the speedmatrix twin), not a real server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
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

/// The hardware of a run in a few words: `2 × H200 NVL`, `H200 NVL`, or the accelerator type.
pub fn hardware_summary(r: &Results) -> Option<String> {
    let h = &r.hardware;
    let count = h.gpu_count.or((!h.gpus.is_empty()).then_some(h.gpus.len() as u32));
    match (h.gpus.first(), count) {
        (Some(g), Some(n)) if n > 1 => Some(format!("{n} × {}", g.name)),
        (Some(g), _) => Some(g.name.clone()),
        (None, _) => h.accelerator_type.clone(),
    }
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
        simulated: r.engine.simulated.is_some(),
    }
}

/// Why a run index could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IndexError {
    /// Not JSON, or not shaped like an index.
    #[error("runs/index.json is not a run index: {0}")]
    Shape(String),
    /// A newer or foreign index.
    #[error("runs/index.json has schema {schema:?} version {version}; this viewer reads {INDEX_SCHEMA_NAME:?} version {INDEX_SCHEMA_VERSION}")]
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
    if index.schema != INDEX_SCHEMA_NAME || index.schema_version != INDEX_SCHEMA_VERSION {
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

    #[test]
    fn index_round_trips_and_rejects_escapes() {
        let idx = RunIndex::new(vec![RunIndexEntry {
            file: "a.json".into(),
            label: "A".into(),
            model: None,
            hardware: Some("2 × H200 NVL".into()),
            started_at: None,
            simulated: true,
        }]);
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
        i.schema_version = 2;
        assert!(matches!(load_index(&serde_json::to_vec(&i).unwrap()), Err(IndexError::Version { .. })));
    }
}
