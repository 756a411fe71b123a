//! `speedmatrix import FILE… --from llm-inference-bench|vllm-bench -o RUN.json`: other tools'
//! result files → a results file. The mapping is pure ([`llm_inference_bench`], [`vllm_bench`]:
//! JSON in, `speedmatrix_schema::Results` built field by field out); this module reads the
//! files and writes the run.
//!
//! What maps is carried with its unit converted (seconds → ms); every source field that does
//! not map is listed in `import.unmapped` with its value or why; figures the source lacks are
//! listed in `missing`. Nothing is invented: a figure the source does not give stays `null`.

pub mod formats;
pub mod llm_inference_bench;
pub mod vllm_bench;

use crate::cli::{ImportArgs, ImportFrom};
use crate::command::{CommandError, Failure};
use crate::files::FileError;
use formats::{flag, what};
use serde_json::Value;
use speedmatrix_schema::{Distribution, LoadError, Results, UnmappedField};

/// A source file: its name (no directories) and its JSON.
#[derive(Debug, Clone)]
pub struct Source {
    /// File name, used in `import.files` and to prefix unmapped fields.
    pub name: String,
    /// The parsed JSON.
    pub json: Value,
}

/// Why files could not be imported. Each names the source file and, where one is to blame, its
/// field.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A source file cannot be read.
    #[error(transparent)]
    Read(FileError),
    /// A source file is not JSON.
    #[error("{name}: not JSON")]
    NotJson {
        /// The file.
        name: String,
        /// Where and why.
        #[source]
        source: serde_json::Error,
    },
    /// `--from llm-inference-bench` with more than one file.
    #[error("--from llm-inference-bench takes one benchmark_results.json (one run)")]
    OneFileOnly,
    /// A field the format always has is missing: the file is of another format.
    #[error("{name}: no {field} — is this {}? (--from {})", what(*.from), flag(*.from))]
    NotTheFormat {
        /// The file.
        name: String,
        /// The field, e.g. `.metadata`.
        field: String,
        /// The format asked for.
        from: ImportFrom,
    },
    /// A field has the wrong JSON type.
    #[error("{name}: {field} is not {expected}")]
    WrongType {
        /// The file.
        name: String,
        /// The field.
        field: String,
        /// What it should be, e.g. "a list".
        expected: &'static str,
    },
    /// A figure is negative.
    #[error("{name}: {field} is {value}; durations, throughputs and counts cannot be negative — the file is damaged")]
    Negative {
        /// The file.
        name: String,
        /// The field.
        field: String,
        /// Its value.
        value: f64,
    },
    /// Summary figures contradict each other (a median above a p99, a mean outside the range).
    #[error("{name}: {problem} — the file is inconsistent")]
    Inconsistent {
        /// The file.
        name: String,
        /// Which fields disagree, with their values.
        problem: String,
    },
    /// A `vllm bench serve` file run without `--max-concurrency`.
    #[error(
        "{name}: max_concurrency is null — the benchmark ran without --max-concurrency, so it has no matrix column"
    )]
    NoConcurrency {
        /// The file.
        name: String,
    },
    /// A `vllm bench serve` file without input lengths.
    #[error("{name}: neither input_lens nor total_input_tokens: no context for the row")]
    NoContext {
        /// The file.
        name: String,
    },
    /// Two `vllm bench serve` files for the same cell.
    #[error("{name}: a second file for {context} × {concurrency}; give one file per cell")]
    SecondFile {
        /// The second file.
        name: String,
        /// The cell's context label.
        context: String,
        /// The cell's concurrency.
        concurrency: u32,
    },
    /// A source figure converts to an impossible value (a window of more than a day, a
    /// percentile above the maximum …): the loader's check names the field of the run.
    #[error("{names}: {field}: {message} — the source's figures are out of range (a damaged file?)")]
    OutOfRange {
        /// The source files.
        names: String,
        /// The field of the converted run.
        field: String,
        /// What the loader says.
        message: String,
    },
    /// The converted run fails the loader's checks: a bug of the importer, not of the file.
    #[error("the converted run does not validate (a bug)")]
    Invalid(#[source] LoadError),
    /// The results file cannot be written.
    #[error(transparent)]
    Write(FileError),
}

impl CommandError for ImportError {
    fn failure(&self) -> Failure {
        match self {
            ImportError::Invalid(_) => Failure::Working,
            ImportError::Read(e) | ImportError::Write(e) => e.failure(),
            _ => Failure::BadInput,
        }
    }
}

/// Read one source file (size-capped) as JSON.
fn read_source(path: &std::path::Path) -> Result<Source, ImportError> {
    let bytes = crate::files::read_capped(path, "file speedmatrix imports").map_err(ImportError::Read)?;
    let json = serde_json::from_slice(&bytes)
        .map_err(|source| ImportError::NotJson { name: path.display().to_string(), source })?;
    let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok(Source { name, json })
}

/// Run `speedmatrix import`.
///
/// # Errors
/// [`ImportError`]: bad input (exit 2) for an unreadable file, a file that is not JSON, or one
/// that is not in the `--from` format (named with the field that is missing or wrong).
pub fn run(args: &ImportArgs) -> Result<(), ImportError> {
    let sources = args.files.iter().map(|p| read_source(p)).collect::<Result<Vec<_>, _>>()?;
    let converted_by = format!("speedmatrix {}", env!("CARGO_PKG_VERSION"));
    let results = match args.from {
        ImportFrom::LlmInferenceBench => {
            let [one] = sources.as_slice() else { return Err(ImportError::OneFileOnly) };
            llm_inference_bench::convert(one, &converted_by)?
        }
        ImportFrom::VllmBench => vllm_bench::convert(&sources, &converted_by)?,
    };
    let results = checked(results, &sources, &args.out)?;
    crate::files::write_atomic(&args.out, &results).map_err(ImportError::Write)?;
    let unmapped = results.import.as_ref().map_or(0, |i| i.unmapped.len());
    eprintln!(
        "imported {} prefill rows and {} decode cells into {} ({unmapped} source fields not mapped: see import.unmapped)",
        results.prefill.len(),
        results.decode.len(),
        args.out.display()
    );
    Ok(())
}

/// The run id of an import: `import-` and the first 16 hex digits of the SHA-256 of the format
/// and every source (name and JSON, in the order given). The same files give the same id; any
/// other files (even of the same name) another.
pub(crate) fn run_id(format: &str, sources: &[Source]) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(format.as_bytes());
    for s in sources {
        h.update(b"\0");
        h.update(s.name.as_bytes());
        h.update(b"\0");
        h.update(serde_json::to_vec(&s.json).unwrap_or_default());
    }
    let hex: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("import-{hex}")
}

/// The converted run, which must load like any results file `show` reads (every check, from
/// its bytes): an impossible value is the source's ([`ImportError::OutOfRange`], bad input);
/// a run of the wrong shape is the importer's bug ([`ImportError::Invalid`]).
pub(crate) fn checked(results: Results, sources: &[Source], out: &std::path::Path) -> Result<Results, ImportError> {
    let bytes = serde_json::to_vec(&results)
        .map_err(|source| ImportError::Write(FileError::Encode { path: out.to_path_buf(), source }))?;
    match speedmatrix_schema::load_results(&bytes) {
        Ok(_) => Ok(results),
        Err(LoadError::Invalid { path, message }) => Err(ImportError::OutOfRange {
            names: sources.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
            field: path,
            message,
        }),
        Err(e) => Err(ImportError::Invalid(e)),
    }
}

/// The largest source figure taken (seconds, ms, tok/s, tokens): far above any real one, and
/// small enough that unit conversions stay finite (`1e308` s in ms would be infinite, which
/// JSON cannot hold).
pub(crate) const MAX_FIGURE: f64 = 1e15;

/// A number that is present and meaningful: the source tools write 0 for "not measured"; a
/// figure above [`MAX_FIGURE`] is no measurement either.
pub(crate) fn pos(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite() && *x > 0.0 && *x <= MAX_FIGURE)
}

/// The number at `field` of `v` in the file `name`: `None` when absent or not a finite number;
/// [`ImportError::Negative`] when it is negative (durations, rates and counts are ≥ 0, and
/// dropping such a figure would hide a damaged file).
pub(crate) fn non_negative(name: &str, v: &Value, field: &str) -> Result<Option<f64>, ImportError> {
    match v.get(field).and_then(Value::as_f64) {
        Some(x) if x.is_sign_negative() => {
            Err(ImportError::Negative { name: name.to_string(), field: field.to_string(), value: x })
        }
        Some(x) if x > MAX_FIGURE => Err(ImportError::OutOfRange {
            names: name.to_string(),
            field: field.to_string(),
            message: format!("{x} is larger than any figure ({MAX_FIGURE:e} at most)"),
        }),
        x => Ok(x.filter(|x| x.is_finite())),
    }
}

/// Seconds → ms, rounded to µs.
pub(crate) fn s_to_ms(v: f64) -> f64 {
    speedmatrix_schema::stats::round3(v * 1000.0)
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
        other => crate::text::excerpt(&other.to_string(), 120),
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
