//! `speedmatrix import FILE… --from llm-inference-bench|vllm-bench -o RUN.json`: other tools'
//! result files → a results file. The mapping is pure ([`llm_inference_bench`],
//! [`vllm_bench`]: JSON in, `speedmatrix_schema::Results` out); this module reads the files and writes the run.
//!
//! What maps is carried with its unit converted (seconds → ms); every source field that does
//! not map is listed in `import.unmapped` with its value or why; figures the source lacks are
//! listed in `missing`. Nothing is invented: a figure the source does not give stays `null`.

pub mod llm_inference_bench;
pub mod vllm_bench;

use crate::cli::{ImportArgs, ImportFrom};
use crate::Error;
use serde_json::Value;
use speedmatrix_schema::{Distribution, UnmappedField};

/// A source file: its name (no directories) and its JSON.
#[derive(Debug, Clone)]
pub struct Source {
    /// File name, used in `import.files` and to prefix unmapped fields.
    pub name: String,
    /// The parsed JSON.
    pub json: Value,
}

/// Run `speedmatrix import`.
///
/// # Errors
/// [`Error::Input`] (exit 2) for an unreadable file, a file that is not JSON, or one that is
/// not in the `--from` format (named with the field that is missing).
pub fn run(args: &ImportArgs) -> Result<(), Error> {
    let mut sources = Vec::new();
    for path in &args.files {
        let bytes = std::fs::read(path).map_err(|e| Error::Input(format!("{}: cannot read: {e}", path.display())))?;
        let json: Value =
            serde_json::from_slice(&bytes).map_err(|e| Error::Input(format!("{}: not JSON: {e}", path.display())))?;
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        sources.push(Source { name, json });
    }
    let converted_by = format!("speedmatrix {}", env!("CARGO_PKG_VERSION"));
    let results = match args.from {
        ImportFrom::LlmInferenceBench => {
            let [one] = sources.as_slice() else {
                return Err(Error::Input(
                    "--from llm-inference-bench takes one benchmark_results.json (one run)".into(),
                ));
            };
            llm_inference_bench::convert(one, &converted_by)
        }
        ImportFrom::VllmBench => vllm_bench::convert(&sources, &converted_by),
    }
    .map_err(Error::Input)?;
    // The result must load like any results file (the same checks as `show`).
    let text = serde_json::to_string_pretty(&results).map_err(anyhow::Error::from)?;
    speedmatrix_schema::load_results(text.as_bytes())
        .map_err(|e| Error::Other(anyhow::anyhow!("the converted run does not validate (a bug): {e}")))?;
    crate::files::write_atomic(&args.out, &results).map_err(Error::Other)?;
    let unmapped = results.import.as_ref().map_or(0, |i| i.unmapped.len());
    eprintln!(
        "imported {} prefill rows and {} decode cells into {} ({unmapped} source fields not mapped: see import.unmapped)",
        results.prefill.len(),
        results.decode.len(),
        args.out.display()
    );
    Ok(())
}

/// A number that is present and meaningful: the source tools write 0 for "not measured".
pub(crate) fn pos(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite() && *x > 0.0)
}

/// Seconds → ms, rounded to µs.
pub(crate) fn s_to_ms(v: f64) -> f64 {
    round3(v * 1000.0)
}

pub(crate) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// A distribution from named fields (already in the target unit); `None` when all are absent.
pub(crate) fn dist(
    mean: Option<f64>,
    p50: Option<f64>,
    p90: Option<f64>,
    p99: Option<f64>,
    count: Option<u64>,
) -> Option<Distribution> {
    if mean.is_none() && p50.is_none() && p90.is_none() && p99.is_none() {
        return None;
    }
    Some(Distribution { mean, p50, p90, p99, min: None, max: None, count })
}

/// A short, one-line rendering of a value for `import.unmapped`.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Array(a) => format!("array of {} items", a.len()),
        Value::Object(o) if o.len() > 4 => format!("object with {} keys", o.len()),
        other => {
            let s = other.to_string();
            if s.chars().count() > 120 {
                format!("{}…", s.chars().take(120).collect::<String>())
            } else {
                s
            }
        }
    }
}

/// Every key of `obj` not in `mapped` (and not null/empty) as an unmapped field at `path`.
pub(crate) fn leftovers(prefix: &str, path: &str, obj: &Value, mapped: &[&str], out: &mut Vec<UnmappedField>) {
    let Some(map) = obj.as_object() else { return };
    for (k, v) in map {
        let empty = v.is_null()
            || v.as_str().is_some_and(str::is_empty)
            || v.as_array().is_some_and(Vec::is_empty)
            || v.as_object().is_some_and(serde_json::Map::is_empty);
        if mapped.contains(&k.as_str()) || empty {
            continue;
        }
        out.push(UnmappedField { field: format!("{prefix}{path}.{k}"), note: describe(v) });
    }
}
