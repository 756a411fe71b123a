//! Loading a results file: parse → check header → migrate → typed decode → validate.
//!
//! Every failure is a [`LoadError`] whose `Display` is one line naming the problem and its
//! place (a JSON path such as `decode[3].ttft_ms.p50`, or a line and column for broken JSON).
//! Nothing here panics on any input.

use crate::model::{Distribution, Results};
use crate::{SCHEMA_NAME, SCHEMA_VERSION};
use serde_json::Value;

/// Why a results file could not be loaded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The input is empty.
    #[error("the file is empty; expected a speedmatrix results JSON document")]
    Empty,
    /// The bytes are not JSON (includes truncated files and `NaN` literals).
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser expected, plus a hint.
        message: String,
    },
    /// JSON, but not a speedmatrix results document.
    #[error("not a speedmatrix results file: {0}")]
    NotResults(String),
    /// Written by a newer speedmatrix.
    #[error(
        "written by a newer speedmatrix (v{found}); upgrade speedmatrix (this build reads schema v1…v{supported})"
    )]
    Newer {
        /// The file's `schema_version`.
        found: u64,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A field has the wrong type, is missing or is unknown.
    #[error("at {path}: {message}")]
    Schema {
        /// JSON path of the offending value, e.g. `decode[3].ttft_ms.p50`.
        path: String,
        /// What was expected.
        message: String,
    },
    /// Well-typed but impossible (negative duration, p50 above max, bad timestamp, …).
    #[error("at {path}: {message}")]
    Invalid {
        /// JSON path of the offending value.
        path: String,
        /// What is wrong and what was expected.
        message: String,
    },
}

/// Parse, migrate and validate a results file from its bytes.
///
/// # Errors
/// [`LoadError`] for empty input, broken JSON, a foreign document, a newer schema version,
/// type/shape errors (with the JSON path) and impossible values (with the JSON path).
pub fn load_results(bytes: &[u8]) -> Result<Results, LoadError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(LoadError::Empty);
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| json_error(&e, bytes))?;
    let value = migrate(value)?;
    check_numbers(&value, &mut String::new())?;
    let results: Results = serde_path_to_error::deserialize(value)
        .map_err(|e| LoadError::Schema { path: display_path(&e.path().to_string()), message: e.inner().to_string() })?;
    validate(&results)?;
    Ok(results)
}

/// Read the header and bring an older document up to [`SCHEMA_VERSION`].
///
/// Only v1 exists today; when v2 comes, a `1 => v1_to_v2(value)` step goes into the loop.
pub fn migrate(mut value: Value) -> Result<Value, LoadError> {
    let obj = value
        .as_object()
        .ok_or_else(|| LoadError::NotResults(format!("the top level is {}, expected an object", kind(&value))))?;
    match obj.get("schema") {
        Some(Value::String(s)) if s == SCHEMA_NAME => {}
        Some(other) => {
            return Err(LoadError::NotResults(format!("\"schema\" is {other}, expected \"{SCHEMA_NAME}\"")));
        }
        None => return Err(LoadError::NotResults(format!("no \"schema\": \"{SCHEMA_NAME}\" field at the top level"))),
    }
    let version = match obj.get("schema_version") {
        Some(Value::Number(n)) => n.as_u64().filter(|v| *v >= 1).ok_or_else(|| LoadError::Schema {
            path: "schema_version".into(),
            message: format!("{n} is not a schema version (an integer ≥ 1)"),
        })?,
        Some(other) => {
            return Err(LoadError::Schema {
                path: "schema_version".into(),
                message: format!("expected an integer, found {}", kind(other)),
            })
        }
        None => return Err(LoadError::Schema { path: "schema_version".into(), message: "missing field".into() }),
    };
    if version > u64::from(SCHEMA_VERSION) {
        return Err(LoadError::Newer { found: version, supported: SCHEMA_VERSION });
    }
    let mut v = version;
    while v < u64::from(SCHEMA_VERSION) {
        // No version before 1 exists; future steps transform `value` here.
        v += 1;
        value["schema_version"] = Value::from(v);
    }
    Ok(value)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn json_error(e: &serde_json::Error, bytes: &[u8]) -> LoadError {
    let (line, column) = (e.line(), e.column());
    let mut message = e.to_string();
    // serde_json appends " at line L column C"; we say it once, in front.
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    if e.is_eof() {
        message.push_str(" (the file ends early: truncated or partly written?)");
    } else if let Some(word) = word_at(bytes, line, column) {
        if ["NaN", "Infinity", "-Infinity", "inf", "nan"].iter().any(|w| word.starts_with(w)) {
            message = format!("{word} is not a JSON number; a missing figure is written as null");
        }
    }
    LoadError::Json { line, column, message }
}

/// The token starting at (1-based) line/column, if it is short and printable.
fn word_at(bytes: &[u8], line: usize, column: usize) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let start = column.saturating_sub(1).min(l.len());
    // serde_json points at the last byte it read; back up to the start of the word.
    let begin = l[..start].rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).map_or(0, |i| i + 1);
    let word: String =
        l.get(begin..)?.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').take(16).collect();
    (!word.is_empty()).then_some(word)
}

/// serde_path_to_error writes `.` for the root; we say `(top level)`.
fn display_path(p: &str) -> String {
    if p.is_empty() || p == "." {
        "(top level)".into()
    } else {
        p.to_string()
    }
}

/// Every number in a results file is a duration, rate, count, size, fraction or setting that
/// cannot be negative. Checked on the raw tree so the error names the exact path.
fn check_numbers(v: &Value, path: &mut String) -> Result<(), LoadError> {
    match v {
        Value::Number(n) if n.as_f64().is_some_and(|f| f < 0.0) => Err(LoadError::Invalid {
            path: display_path(path),
            message: format!("{n} is negative; durations, rates, counts and sizes are ≥ 0"),
        }),
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let r = check_numbers(item, path);
            path.truncate(len);
            r
        }),
        Value::Object(map) => map.iter().try_for_each(|(k, item)| {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(k);
            let r = check_numbers(item, path);
            path.truncate(len);
            r
        }),
        _ => Ok(()),
    }
}

fn invalid(path: impl Into<String>, message: impl Into<String>) -> LoadError {
    LoadError::Invalid { path: path.into(), message: message.into() }
}

fn check_rfc3339(path: &str, s: &Option<String>) -> Result<(), LoadError> {
    if let Some(s) = s {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).map_err(|e| {
            invalid(path, format!("\"{s}\" is not an RFC 3339 time such as 2026-11-30T10:53:38Z ({e})"))
        })?;
    }
    Ok(())
}

fn check_distribution(path: &str, d: &Option<Distribution>) -> Result<(), LoadError> {
    let Some(d) = d else { return Ok(()) };
    let ordered = [("min", d.min), ("p50", d.p50), ("p90", d.p90), ("p99", d.p99), ("max", d.max)];
    let present: Vec<(&str, f64)> = ordered.iter().filter_map(|(n, v)| v.map(|v| (*n, v))).collect();
    for w in present.windows(2) {
        if w[0].1 > w[1].1 {
            return Err(invalid(
                path,
                format!(
                    "{} ({}) is above {} ({}); expected min ≤ p50 ≤ p90 ≤ p99 ≤ max",
                    w[0].0, w[0].1, w[1].0, w[1].1
                ),
            ));
        }
    }
    if let (Some(mean), Some(min), Some(max)) = (d.mean, d.min, d.max) {
        if mean < min || mean > max {
            return Err(invalid(path, format!("mean ({mean}) lies outside min…max ({min}…{max})")));
        }
    }
    Ok(())
}

fn check_fraction(path: &str, v: Option<f64>) -> Result<(), LoadError> {
    match v {
        Some(f) if f > 1.0 => Err(invalid(path, format!("{f} is above 1; fractions are 0–1"))),
        _ => Ok(()),
    }
}

fn needs_reason(status: crate::CellStatus) -> bool {
    matches!(status, crate::CellStatus::Error | crate::CellStatus::OverCapacity | crate::CellStatus::NotRun)
}

/// Semantic checks a typed decode cannot express.
///
/// # Errors
/// [`LoadError::Invalid`] with the JSON path of the first problem found.
pub fn validate(r: &Results) -> Result<(), LoadError> {
    check_rfc3339("run.started_at", &r.run.started_at)?;
    check_rfc3339("run.finished_at", &r.run.finished_at)?;
    if r.config.window_s <= 0.0 {
        return Err(invalid("config.window_s", "the measurement window must be longer than 0 s"));
    }
    if let Some(i) = r.config.concurrency.iter().position(|&c| c == 0) {
        return Err(invalid(format!("config.concurrency[{i}]"), "concurrency must be at least 1 stream"));
    }
    for (i, p) in r.prefill.iter().enumerate() {
        if needs_reason(p.status) && p.reason.is_none() {
            return Err(invalid(format!("prefill[{i}].reason"), format!("a {} row must say why", p.status.id())));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (i, c) in r.decode.iter().enumerate() {
        let at = |f: &str| format!("decode[{i}].{f}");
        if c.concurrency == 0 {
            return Err(invalid(at("concurrency"), "concurrency must be at least 1 stream"));
        }
        if !seen.insert((c.context.tokens, c.concurrency)) {
            return Err(invalid(
                format!("decode[{i}]"),
                format!(
                    "a second cell for context {} × concurrency {}; each cell appears once",
                    c.context.label, c.concurrency
                ),
            ));
        }
        if needs_reason(c.status) && c.reason.is_none() {
            return Err(invalid(at("reason"), format!("a {} cell must say why", c.status.id())));
        }
        for (name, d) in [
            ("per_request_tps", &c.per_request_tps),
            ("ttft_ms", &c.ttft_ms),
            ("ttft_in_window_ms", &c.ttft_in_window_ms),
            ("ttft_content_ms", &c.ttft_content_ms),
            ("tpot_ms", &c.tpot_ms),
            ("itl_ms", &c.itl_ms),
            ("chunk_gap_ms", &c.chunk_gap_ms),
            ("e2e_ms", &c.e2e_ms),
        ] {
            check_distribution(&at(name), d)?;
        }
        check_fraction(&at("spec_accept_rate"), c.spec_accept_rate)?;
        if let Some(s) = &c.server {
            check_fraction(&at("server.kv_cache_usage_avg"), s.kv_cache_usage_avg)?;
            check_fraction(&at("server.kv_cache_usage_max"), s.kv_cache_usage_max)?;
        }
        if c.window_s == Some(0.0) && c.status.is_measured() {
            return Err(invalid(at("window_s"), "a measured cell needs a window longer than 0 s"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_gets_a_hint() {
        let e = load_results(br#"{"schema": "speedmatrix-results", "x": NaN}"#).unwrap_err();
        assert!(e.to_string().contains("NaN is not a JSON number"), "{e}");
        assert!(e.to_string().starts_with("invalid JSON at line 1, column"), "{e}");
    }

    #[test]
    fn truncated_says_so() {
        let e = load_results(br#"{"schema": "speedmatrix-results", "schema_version": 1, "tool": {"#).unwrap_err();
        assert!(e.to_string().contains("ends early"), "{e}");
    }

    #[test]
    fn header_errors() {
        assert_eq!(load_results(b"  \n"), Err(LoadError::Empty));
        assert!(matches!(load_results(b"[1,2]"), Err(LoadError::NotResults(_))));
        assert!(matches!(load_results(br#"{"schema":"other"}"#), Err(LoadError::NotResults(_))));
        let e = load_results(br#"{"schema":"speedmatrix-results","schema_version":7}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "written by a newer speedmatrix (v7); upgrade speedmatrix (this build reads schema v1…v1)"
        );
        let e = load_results(br#"{"schema":"speedmatrix-results","schema_version":0}"#).unwrap_err();
        assert!(e.to_string().starts_with("at schema_version:"), "{e}");
        let e = load_results(br#"{"schema":"speedmatrix-results","schema_version":"1"}"#).unwrap_err();
        assert!(e.to_string().contains("expected an integer, found a string"), "{e}");
    }

    #[test]
    fn negative_numbers_are_named_by_path() {
        let e =
            load_results(br#"{"schema":"speedmatrix-results","schema_version":1,"decode":[{"ttft_ms":{"p50":-3}}]}"#)
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "at decode[0].ttft_ms.p50: -3 is negative; durations, rates, counts and sizes are ≥ 0"
        );
    }
}
