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

/// The largest results file accepted, bytes (a 30-minute matrix with every per-request sample is
/// a few MB; this guards against reading a device or a mistaken multi-GB file).
pub const MAX_FILE_BYTES: usize = 256 * 1024 * 1024;

/// Parse, migrate and validate a results file from its bytes.
///
/// Three passes, none of which builds a generic JSON tree for a current-version file:
/// 1. a scan that reads the header and rejects negative numbers and duplicate keys, with the
///    JSON path;
/// 2. the typed decode (paths on every type error);
/// 3. [`validate`]: what types cannot say (ordering, references to the plan, timestamps).
///
/// # Errors
/// [`LoadError`] for empty or oversized input, broken JSON, a foreign document, a newer schema
/// version, type/shape errors and impossible values (the last two with the JSON path).
pub fn load_results(bytes: &[u8]) -> Result<Results, LoadError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(LoadError::NotResults(format!(
            "{} MB is larger than any results file ({} MB at most)",
            bytes.len() / 1_000_000,
            MAX_FILE_BYTES / 1_000_000
        )));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(LoadError::Empty);
    }
    if let Some(hint) = encoding_hint(bytes) {
        return Err(LoadError::Json { line: 1, column: 1, message: hint.into() });
    }
    let header = scan(bytes)?;
    let version = check_header(&header)?;
    let results: Results = if version == u64::from(SCHEMA_VERSION) {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        serde_path_to_error::deserialize(&mut de).map_err(|e| LoadError::Schema {
            path: display_path(&e.path().to_string()),
            message: strip_position(&e.inner().to_string()),
        })?
    } else {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| json_error(&e, bytes))?;
        serde_path_to_error::deserialize(migrate(value)?).map_err(|e| LoadError::Schema {
            path: display_path(&e.path().to_string()),
            message: e.inner().to_string(),
        })?
    };
    validate(&results)?;
    Ok(results)
}

/// A byte-order mark or UTF-16 text is a common reason for "invalid JSON at column 1".
fn encoding_hint(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0xEF, 0xBB, 0xBF, ..] => Some("the file starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM"),
        [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..] => Some("the file is UTF-16; results files are UTF-8 JSON"),
        _ => None,
    }
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// The top-level `schema` and `schema_version` values, as found by [`scan`].
#[derive(Debug, Default)]
struct Header {
    is_object: bool,
    schema: Option<Value>,
    schema_version: Option<Value>,
}

/// Pass 1: walk the document without building it, checking every number (≥ 0, not `-0`) and
/// every object (no duplicate keys), and capture the header.
fn scan(bytes: &[u8]) -> Result<Header, LoadError> {
    use serde::de::DeserializeSeed;
    let mut path = String::new();
    let mut found = None;
    let mut header = Header::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Scan { path: &mut path, found: &mut found, header: Some(&mut header) };
    let result = seed.deserialize(&mut de).and_then(|()| de.end());
    match (found, result) {
        (Some(e), _) => Err(e),
        (None, Err(e)) => Err(json_error(&e, bytes)),
        (None, Ok(())) => Ok(header),
    }
}

struct Scan<'a> {
    path: &'a mut String,
    found: &'a mut Option<LoadError>,
    header: Option<&'a mut Header>,
}

impl Scan<'_> {
    fn fail<E: serde::de::Error>(self, message: String) -> E {
        *self.found = Some(LoadError::Invalid { path: display_path(self.path), message });
        E::custom("invalid")
    }

    fn child(&mut self) -> Scan<'_> {
        Scan { path: self.path, found: self.found, header: None }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Scan<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

const NEGATIVE: &str = "is negative; durations, rates, counts and sizes are ≥ 0";

impl<'de> serde::de::Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        if v < 0 {
            return Err(self.fail(format!("{v} {NEGATIVE}")));
        }
        Ok(())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        if v.is_sign_negative() {
            return Err(self.fail(format!("{v:?} {NEGATIVE}")));
        }
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let len = self.path.len();
            self.path.push_str(&format!("[{i}]"));
            let more = seq.next_element_seed(self.child())?;
            self.path.truncate(len);
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        if let Some(h) = self.header.as_deref_mut() {
            h.is_object = true;
        }
        while let Some(key) = map.next_key::<String>()? {
            let len = self.path.len();
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(&key);
            if !seen.insert(key.clone()) {
                return Err(self.fail(format!("the key \"{key}\" appears twice in one object")));
            }
            match (self.header.as_deref_mut(), key.as_str()) {
                (Some(h), "schema") => h.schema = Some(map.next_value()?),
                (Some(h), "schema_version") => h.schema_version = Some(map.next_value()?),
                _ => map.next_value_seed(self.child())?,
            }
            self.path.truncate(len);
        }
        Ok(())
    }
}

/// Check the header found by [`scan`] and return the schema version.
fn check_header(h: &Header) -> Result<u64, LoadError> {
    if !h.is_object {
        return Err(LoadError::NotResults("the top level is not a JSON object".into()));
    }
    match &h.schema {
        Some(Value::String(s)) if s == SCHEMA_NAME => {}
        Some(other) => return Err(LoadError::NotResults(format!("\"schema\" is {other}, expected \"{SCHEMA_NAME}\""))),
        None => return Err(LoadError::NotResults(format!("no \"schema\": \"{SCHEMA_NAME}\" field at the top level"))),
    }
    let version = match &h.schema_version {
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
    Ok(version)
}

/// Bring a document of an older schema version up to [`SCHEMA_VERSION`], one version step at a
/// time; each step is a function of its own.
///
/// # Errors
/// [`LoadError::Schema`] when `schema_version` is missing or 0, or a step finds a shape it
/// cannot bring forward.
pub fn migrate(mut value: Value) -> Result<Value, LoadError> {
    let mut v = value.get("schema_version").and_then(Value::as_u64).unwrap_or(0);
    if v == 0 {
        return Err(LoadError::Schema { path: "schema_version".into(), message: "not a schema version".into() });
    }
    while v < u64::from(SCHEMA_VERSION) {
        value = match v {
            1 => v1_to_v2(value)?,
            2 => v2_to_v3(value),
            3 => v3_to_v4(value),
            _ => value,
        };
        v += 1;
        value["schema_version"] = Value::from(v);
    }
    Ok(value)
}

/// Schema v2 → v3: v3 adds repeats (`config.repeats`, `decode[].repeats`,
/// `decode[].repeat_spread`), all optional; a v2 file measured each cell once, which v3 writes
/// the same way (no repeats: N = 1), so nothing changes but the version. The version moves so
/// that a build that predates repeats refuses a file with them as newer ("upgrade speedmatrix")
/// instead of as a malformed file.
fn v2_to_v3(value: Value) -> Value {
    value
}

/// Schema v3 → v4: v4 adds open-loop rate cells (`rates`, `config.rates`, the statuses
/// `saturated` and `client_limited`, `requests[].send_lag_ms`), traces (with their prefix reuse,
/// `traces[].prefix_cache`), prefix-share cells and warm prefill rows (`config.prefix_shares`,
/// `prefix_share`, `prefix_cache`) and conversations (`conversations`), all optional; a v3 file has
/// none and means the same in v4. The version moves for the reason of [`v2_to_v3`].
fn v3_to_v4(value: Value) -> Value {
    value
}

/// Schema v1 (round-1 builds, the seed fixture, round-1 imports) → v2. Fields v2 added are
/// optional and absent from a v1 file, where they mean "not recorded" (null). What v1 held keeps
/// its meaning; where a v1 value was not the figure it claimed to be, it becomes null and
/// `missing` says why:
/// - `tool.version: "unknown"` (imports) → null;
/// - an import of `vllm bench serve`: the engine it hard-coded (`vllm`), the `max_tokens` it
///   took from the longest output and the window it took from the benchmark's duration → null;
///   an llm-inference-bench import's `max_tokens: 0` (absent in the source) → null;
/// - imports: an ITL or chunk-gap `count` (it held requests, the schema says tokens or chunks)
///   → null;
/// - a measured run's `avg_active_requests` where the server had no running gauge (v1 wrote the
///   client's in-flight count, queued streams included; v2 means streams being served) → null;
/// - `decode[].server.note` (never written by a speedmatrix build) moves to `missing`, and the
///   run-level `telemetry` (never written either) is dropped.
fn v1_to_v2(mut value: Value) -> Result<Value, LoadError> {
    let mut missing: Vec<(String, String)> = Vec::new();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("telemetry");
    }
    if value.pointer("/tool/version").and_then(Value::as_str) == Some("unknown") {
        value["tool"]["version"] = Value::Null;
        missing.push(("tool.version".into(), "the source does not say (an earlier import wrote \"unknown\")".into()));
    }
    let format = value.pointer("/import/format").and_then(Value::as_str).map(str::to_string);
    v1_import_inventions(&mut value, format.as_deref(), &mut missing);
    let measured_here = format.is_none() && value.pointer("/tool/name").and_then(Value::as_str) == Some("speedmatrix");
    let mut client_count = 0;
    if let Some(cells) = value.get_mut("decode").and_then(Value::as_array_mut) {
        for (i, cell) in cells.iter_mut().enumerate() {
            if let Some(server) = cell.get_mut("server").and_then(Value::as_object_mut) {
                if let Some(Value::String(note)) = server.remove("note") {
                    missing.push((format!("decode[{i}].server"), note));
                }
            }
            if format.is_some() {
                for d in ["itl_ms", "chunk_gap_ms"] {
                    if let Some(count) = cell.get_mut(d).and_then(Value::as_object_mut).and_then(|o| o.get_mut("count"))
                    {
                        *count = Value::Null;
                    }
                }
            }
            let gauge = cell.pointer("/server/running_avg").is_some_and(|v| !v.is_null());
            if measured_here && !gauge && cell.get("avg_active_requests").is_some_and(|v| !v.is_null()) {
                cell["avg_active_requests"] = Value::Null;
                client_count += 1;
            }
        }
    }
    if client_count > 0 {
        missing.push((
            "avg_active_requests".into(),
            format!(
                "{client_count} cell(s) of this schema-v1 file held the client's count of streams in flight (queued ones \
                 included) where the server had no running gauge; the figure now means streams being served"
            ),
        ));
    }
    if !missing.is_empty() {
        let list = value.as_object_mut().map(|o| o.entry("missing").or_insert_with(|| Value::Array(vec![])));
        if let Some(Value::Array(list)) = list {
            list.extend(
                missing.into_iter().map(|(figure, reason)| serde_json::json!({"figure": figure, "reason": reason})),
            );
        }
    }
    Ok(value)
}

/// What round-1 imports invented (see [`v1_to_v2`]) → null, each with its reason in `missing`.
fn v1_import_inventions(value: &mut Value, format: Option<&str>, missing: &mut Vec<(String, String)>) {
    match format {
        Some("vllm-bench") => {
            if value.pointer("/engine/name").and_then(Value::as_str) == Some("vllm") {
                value["engine"]["name"] = Value::Null;
                missing.push((
                    "engine.name".into(),
                    "vllm bench serve does not record the server's engine (an earlier import wrote \"vllm\")".into(),
                ));
            }
            if value.pointer("/config/max_tokens").is_some_and(|v| !v.is_null()) {
                value["config"]["max_tokens"] = Value::Null;
                missing.push((
                    "config.max_tokens".into(),
                    "vllm bench serve files do not record max_tokens (an earlier import wrote the longest output seen)"
                        .into(),
                ));
            }
            if value.pointer("/config/window_s").is_some() {
                // The benchmark's duration, not a window (`missing` already lists `window`).
                value["config"]["window_s"] = Value::Null;
            }
        }
        Some("llm-inference-bench") if value.pointer("/config/max_tokens").and_then(Value::as_u64) == Some(0) => {
            value["config"]["max_tokens"] = Value::Null;
            missing.push(("config.max_tokens".into(), "not in the source's metadata".into()));
        }
        _ => {}
    }
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
    if d.count == Some(0) && [d.p50, d.p90, d.p99, d.mean, d.min, d.max].iter().any(Option::is_some) {
        return Err(invalid(path, "count is 0 but the distribution has values"));
    }
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

fn check_contexts(path: &str, list: &[crate::ContextSize]) -> Result<(), LoadError> {
    let mut seen = std::collections::HashSet::new();
    for (i, c) in list.iter().enumerate() {
        if !seen.insert(c.tokens) {
            return Err(invalid(
                format!("{path}[{i}]"),
                format!("context {} ({} tokens) is listed twice", c.label, c.tokens),
            ));
        }
    }
    Ok(())
}

/// The planned context a row refers to, or an error naming the row.
fn planned<'a>(
    at: String,
    ctx: &crate::ContextSize,
    plan: &'a [crate::ContextSize],
    list: &str,
) -> Result<&'a crate::ContextSize, LoadError> {
    let p = plan
        .iter()
        .find(|p| p.tokens == ctx.tokens)
        .ok_or_else(|| invalid(&at, format!("context {} ({} tokens) is not in {list}", ctx.label, ctx.tokens)))?;
    if p.label != ctx.label {
        return Err(invalid(
            at,
            format!("label \"{}\" differs from {list}'s \"{}\" for {} tokens", ctx.label, p.label, p.tokens),
        ));
    }
    Ok(p)
}

/// Longest window accepted, s (one day).
const MAX_WINDOW_S: f64 = 86_400.0;

/// Semantic checks a typed decode cannot express.
///
/// # Errors
/// [`LoadError::Invalid`] with the JSON path of the first problem found.
pub fn validate(r: &Results) -> Result<(), LoadError> {
    validate_header(r)?;
    validate_prefill(r)?;
    let mut seen = std::collections::HashSet::new();
    for (i, cell) in r.decode.iter().enumerate() {
        validate_cell(r, i, cell, &mut seen)?;
    }
    validate_conversations(r)?;
    let c = &r.config;
    // A conversation run (`--turns`) plans conversation cells in the decode cells' places.
    let decode_planned = r.conversations.is_empty();
    for ctx in c.contexts.iter().filter(|_| decode_planned) {
        for share in planned_shares(c) {
            if let Some(&n) = c.concurrency.iter().find(|&&n| !seen.contains(&(ctx.tokens, n, key(share)))) {
                return Err(invalid(
                    "decode",
                    format!(
                        "the planned cell {} × {n}{} is missing; every planned cell appears",
                        ctx.label,
                        crate::prefix::name_suffix(share)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Every conversation cell is one of the plan's (its context and sessions in `config`), with at
/// most one figure set per planned turn, numbered in order from 1.
fn validate_conversations(r: &Results) -> Result<(), LoadError> {
    let c = &r.config;
    for (i, cell) in r.conversations.iter().enumerate() {
        let at = |field: &str| format!("conversations[{i}].{field}");
        if !c.contexts.iter().any(|x| x.tokens == cell.context.tokens) {
            return Err(invalid(at("context"), format!("{} is not in config.contexts", cell.context.label)));
        }
        if !c.concurrency.contains(&cell.sessions) {
            return Err(invalid(at("sessions"), format!("{} is not in config.concurrency", cell.sessions)));
        }
        if cell.turns == 0 || cell.per_turn.len() > cell.turns as usize {
            return Err(invalid(
                at("per_turn"),
                format!("{} turns recorded of {} planned", cell.per_turn.len(), cell.turns),
            ));
        }
        if let Some((k, t)) = cell.per_turn.iter().enumerate().find(|(k, t)| t.turn as usize != k + 1) {
            return Err(invalid(
                at(&format!("per_turn[{k}].turn")),
                format!("{} where turn {} belongs", t.turn, k + 1),
            ));
        }
    }
    Ok(())
}

/// The shares every decode cell of the plan is measured at: each of `config.prefix_shares`, or
/// none (one cell per context and concurrency).
fn planned_shares(c: &crate::Config) -> Vec<Option<f64>> {
    match c.prefix_shares.is_empty() {
        true => vec![None],
        false => c.prefix_shares.iter().map(|s| Some(*s)).collect(),
    }
}

/// A row's or cell's `prefix_share` is one of the plan's (`at`: its path); a cold prefill row
/// (`cold_ok`) may have none.
fn check_share(at: String, share: Option<f64>, c: &crate::Config, cold_ok: bool) -> Result<(), LoadError> {
    match share {
        Some(s) if !c.prefix_shares.iter().any(|p| key(Some(*p)) == key(Some(s))) => {
            Err(invalid(at, format!("{s} is not in config.prefix_shares")))
        }
        None if !cold_ok && !c.prefix_shares.is_empty() => {
            Err(invalid(at, "missing: the plan measures every cell at a prefix share (config.prefix_shares)"))
        }
        _ => Ok(()),
    }
}

use crate::prefix::key;

/// The run's times, the plan (window, concurrency levels, contexts) and the GPU count.
fn validate_header(r: &Results) -> Result<(), LoadError> {
    use time::format_description::well_known::Rfc3339;
    check_rfc3339("run.started_at", &r.run.started_at)?;
    check_rfc3339("run.finished_at", &r.run.finished_at)?;
    if let (Some(a), Some(b)) = (&r.run.started_at, &r.run.finished_at) {
        let (a, b) = (time::OffsetDateTime::parse(a, &Rfc3339), time::OffsetDateTime::parse(b, &Rfc3339));
        if let (Ok(a), Ok(b)) = (a, b) {
            if b < a {
                return Err(invalid("run.finished_at", "the run finished before it started"));
            }
        }
    }
    let c = &r.config;
    if let Some(w) = c.window_s.filter(|w| !(0.001..=MAX_WINDOW_S).contains(w)) {
        return Err(invalid("config.window_s", format!("{w} s is not a measurement window (1 ms … 1 day)")));
    }
    if let Some(i) = c.concurrency.iter().position(|&n| n == 0) {
        return Err(invalid(format!("config.concurrency[{i}]"), "concurrency must be at least 1 stream"));
    }
    let mut levels = std::collections::HashSet::new();
    if let Some(i) = c.concurrency.iter().position(|n| !levels.insert(*n)) {
        return Err(invalid(
            format!("config.concurrency[{i}]"),
            format!("concurrency {} is listed twice", c.concurrency[i]),
        ));
    }
    if c.repeats == Some(0) {
        return Err(invalid("config.repeats", "a cell is measured at least once (1 or more)"));
    }
    check_contexts("config.contexts", &c.contexts)?;
    check_contexts("config.prefill_contexts", &c.prefill_contexts)?;
    for (i, s) in c.prefix_shares.iter().enumerate() {
        check_fraction(&format!("config.prefix_shares[{i}]"), Some(*s))?;
        if i > 0 && key(Some(*s)) <= key(Some(c.prefix_shares[i - 1])) {
            return Err(invalid(format!("config.prefix_shares[{i}]"), "shares are listed once each, ascending"));
        }
    }
    let h = &r.hardware;
    if let Some(n) = h.gpu_count {
        if !h.gpus.is_empty() && n as usize != h.gpus.len() {
            return Err(invalid("hardware.gpu_count", format!("{n} GPUs, but hardware.gpus lists {}", h.gpus.len())));
        }
    }
    Ok(())
}

/// Every prefill row belongs to the plan, once, says why when it was not measured, and every
/// planned row appears.
fn validate_prefill(r: &Results) -> Result<(), LoadError> {
    let c = &r.config;
    let mut rows = std::collections::HashSet::new();
    for (i, p) in r.prefill.iter().enumerate() {
        planned(format!("prefill[{i}].context"), &p.context, &c.prefill_contexts, "config.prefill_contexts")?;
        check_share(format!("prefill[{i}].prefix_share"), p.prefix_share, c, true)?;
        if !rows.insert((p.context.tokens, key(p.prefix_share))) {
            return Err(invalid(
                format!("prefill[{i}]"),
                format!(
                    "a second prefill row for context {}{}",
                    p.context.label,
                    crate::prefix::name_suffix(p.prefix_share)
                ),
            ));
        }
        if let Some(pc) = &p.prefix_cache {
            check_fraction(&format!("prefill[{i}].prefix_cache.measured_hit_rate"), pc.measured_hit_rate)?;
        }
        if needs_reason(p.status) && p.reason.is_none() {
            return Err(invalid(format!("prefill[{i}].reason"), format!("a {} row must say why", p.status.id())));
        }
    }
    if let Some(missing) = c.prefill_contexts.iter().find(|p| !rows.contains(&(p.tokens, None))) {
        return Err(invalid(
            "prefill",
            format!("the planned prefill row {} is missing; every planned row appears", missing.label),
        ));
    }
    Ok(())
}

/// A confidence interval: its level a fraction, its bounds around its estimate.
fn check_interval(path: &str, v: Option<&crate::Interval>) -> Result<(), LoadError> {
    let Some(v) = v else { return Ok(()) };
    check_fraction(&format!("{path}.level"), Some(v.level))?;
    if !(v.low <= v.estimate && v.estimate <= v.high) {
        return Err(invalid(path, format!("low {} ≤ estimate {} ≤ high {} does not hold", v.low, v.estimate, v.high)));
    }
    Ok(())
}

/// One decode cell (`decode[i]`): in the plan, once (`seen` holds the cells before it), says
/// why when not valid, distributions ordered, fractions ≤ 1, utilization ≤ 100 %, a real window.
fn validate_cell(
    r: &Results,
    i: usize,
    cell: &crate::DecodeCell,
    seen: &mut std::collections::HashSet<(u64, u32, Option<u32>)>,
) -> Result<(), LoadError> {
    let c = &r.config;
    let at = |f: &str| format!("decode[{i}].{f}");
    planned(at("context"), &cell.context, &c.contexts, "config.contexts")?;
    if !c.concurrency.contains(&cell.concurrency) {
        return Err(invalid(at("concurrency"), format!("{} is not in config.concurrency", cell.concurrency)));
    }
    check_share(at("prefix_share"), cell.prefix_share, c, false)?;
    if !seen.insert((cell.context.tokens, cell.concurrency, key(cell.prefix_share))) {
        return Err(invalid(
            format!("decode[{i}]"),
            format!(
                "a second cell for context {} × concurrency {}{}; each cell appears once",
                cell.context.label,
                cell.concurrency,
                crate::prefix::name_suffix(cell.prefix_share)
            ),
        ));
    }
    if let Some(pc) = &cell.prefix_cache {
        check_fraction(&at("prefix_cache.measured_hit_rate"), pc.measured_hit_rate)?;
    }
    if needs_reason(cell.status) && cell.reason.is_none() {
        return Err(invalid(at("reason"), format!("a {} cell must say why", cell.status.id())));
    }
    for (name, d) in [
        ("per_request_tps", &cell.per_request_tps),
        ("ttft_ms", &cell.ttft_ms),
        ("ttft_in_window_ms", &cell.ttft_in_window_ms),
        ("ttft_content_ms", &cell.ttft_content_ms),
        ("tpot_ms", &cell.tpot_ms),
        ("itl_ms", &cell.itl_ms),
        ("chunk_gap_ms", &cell.chunk_gap_ms),
        ("e2e_ms", &cell.e2e_ms),
    ] {
        check_distribution(&at(name), d)?;
    }
    check_fraction(&at("spec_accept_rate"), cell.spec_accept_rate)?;
    if let Some(s) = &cell.server {
        check_fraction(&at("server.kv_cache_usage_avg"), s.kv_cache_usage_avg)?;
        check_fraction(&at("server.kv_cache_usage_max"), s.kv_cache_usage_max)?;
    }
    if let Some(iv) = &cell.intervals {
        for (name, v) in
            [("total_tps", &iv.total_tps), ("ttft_ms_p50", &iv.ttft_ms_p50), ("tpot_ms_p50", &iv.tpot_ms_p50)]
        {
            check_interval(&at(&format!("intervals.{name}")), v.as_ref())?;
        }
    }
    if let Some(u) = cell.gpu.as_ref().and_then(|g| g.utilization_pct).filter(|u| *u > 100.0) {
        return Err(invalid(at("gpu.utilization_pct"), format!("{u} is above 100 %")));
    }
    if let Some(w) = cell.window_s {
        if w > MAX_WINDOW_S || (w == 0.0 && cell.status.is_measured()) {
            return Err(invalid(
                at("window_s"),
                format!("{w} s is not a measurement window (more than 0, at most a day)"),
            ));
        }
    }
    check_repeats(r, i, cell)
}

/// A cell's repeats: numbered 1, 2, … in order, no more than the plan's (`config.repeats`), a
/// reason where a repeat's status needs one.
fn check_repeats(r: &Results, i: usize, cell: &crate::DecodeCell) -> Result<(), LoadError> {
    let planned = crate::repeats::planned(r) as usize;
    if cell.repeats.len() > planned {
        return Err(invalid(
            format!("decode[{i}].repeats"),
            format!("{} repeats, but config.repeats plans {planned}", cell.repeats.len()),
        ));
    }
    for (k, rep) in cell.repeats.iter().enumerate() {
        let at = format!("decode[{i}].repeats[{k}]");
        if rep.repeat as usize != k + 1 {
            return Err(invalid(format!("{at}.repeat"), format!("{} where repeat {} belongs", rep.repeat, k + 1)));
        }
        if needs_reason(rep.status) && rep.reason.is_none() {
            return Err(invalid(format!("{at}.reason"), format!("a {} repeat must say why", rep.status.id())));
        }
        check_distribution(&format!("{at}.ttft_ms"), &rep.ttft_ms)?;
        check_distribution(&format!("{at}.tpot_ms"), &rep.tpot_ms)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tiny twin's round-1 file brought to this version, with a plan of `n` repeats.
    fn with_repeats(n: u32) -> Results {
        let mut r = load_results(include_bytes!("../../tests/fixtures/round1/twin-tiny.json")).unwrap();
        r.config.repeats = Some(n);
        r
    }

    #[test]
    fn prefix_share_cells_are_keyed_by_share_and_belong_to_the_plan() {
        let mut r = with_repeats(1);
        r.config.repeats = None;
        r.config.prefix_shares = vec![0.0, 0.5];
        // Each cell at both shares; the cold prefill rows stay, one warm row is added.
        let cells = std::mem::take(&mut r.decode);
        for share in [0.0, 0.5] {
            r.decode.extend(cells.iter().cloned().map(|c| crate::DecodeCell { prefix_share: Some(share), ..c }));
        }
        let warm = crate::PrefillRow { prefix_share: Some(0.5), ..r.prefill[0].clone() };
        r.prefill.push(warm.clone());
        validate(&r).unwrap();
        let mut twice = r.clone();
        twice.prefill.push(warm);
        let e = validate(&twice).unwrap_err().to_string();
        assert!(e.contains("a second prefill row for context") && e.contains("· prefix 50%"), "{e}");
        let mut off = r.clone();
        off.decode[0].prefix_share = Some(0.9);
        let e = validate(&off).unwrap_err().to_string();
        assert!(e.contains("decode[0].prefix_share: 0.9 is not in config.prefix_shares"), "{e}");
        let mut none = r.clone();
        none.decode[0].prefix_share = None;
        assert!(validate(&none).unwrap_err().to_string().contains("decode[0].prefix_share: missing"));
        let mut gone = r.clone();
        gone.decode.pop();
        let e = validate(&gone).unwrap_err().to_string();
        assert!(e.contains("· prefix 50% is missing"), "{e}");
    }

    #[test]
    fn a_v2_file_is_a_v4_file_of_one_repeat_and_no_rate_cells() {
        let mut v: Value =
            serde_json::from_slice(include_bytes!("../../tests/fixtures/round1/twin-tiny.json")).unwrap();
        v = migrate(v).unwrap();
        assert_eq!(v["schema_version"], 4);
        let mut v2 = v.clone();
        v2["schema_version"] = 2.into();
        let r = load_results(&serde_json::to_vec(&v2).unwrap()).unwrap();
        assert_eq!(r.schema_version, 4);
        assert!(r.rates.is_empty() && r.config.rates.is_empty());
        let mut v3 = v.clone();
        v3["schema_version"] = 3.into();
        assert_eq!(load_results(&serde_json::to_vec(&v3).unwrap()).unwrap(), r, "a v3 file means the same in v4");
        assert_eq!(crate::repeats::planned(&r), 1);
        assert!(r.decode.iter().all(|c| c.repeats.is_empty()));
    }

    #[test]
    fn repeats_are_numbered_within_the_plan() {
        let mut r = with_repeats(2);
        let i = r.decode.iter().position(|c| c.status == crate::CellStatus::Valid).unwrap();
        let rec = crate::repeats::record(&r.decode[i], 1);
        r.decode[i].repeats = vec![rec.clone(), crate::CellRepeat { repeat: 2, ..rec.clone() }];
        assert!(validate(&r).is_ok());
        r.decode[i].repeats[1].repeat = 3;
        let e = validate(&r).unwrap_err().to_string();
        assert!(e.contains(&format!("decode[{i}].repeats[1].repeat")) && e.contains("3 where repeat 2 belongs"), "{e}");
        r.decode[i].repeats.push(rec);
        let e = validate(&r).unwrap_err().to_string();
        assert!(e.contains("3 repeats, but config.repeats plans 2"), "{e}");
        r.config.repeats = Some(0);
        assert!(validate(&r).unwrap_err().to_string().contains("config.repeats"));
    }

    #[test]
    fn conversations_take_the_decode_cells_places_and_keep_to_the_plan() {
        let v: Value = serde_json::from_slice(include_bytes!("../../tests/fixtures/round1/twin-tiny.json")).unwrap();
        let mut r: Results = serde_json::from_value(migrate(v).unwrap()).unwrap();
        let (ctx, n) = (r.config.contexts[0].clone(), r.config.concurrency[0]);
        r.decode.clear();
        assert!(validate(&r).unwrap_err().to_string().contains("is missing; every planned cell appears"));
        let cell = crate::ConversationCell::planned(ctx, n, (3, 0.0), (900, 64, 16));
        r.conversations.push(cell.clone());
        validate(&r).unwrap();
        r.conversations[0].sessions = 9999;
        let e = validate(&r).unwrap_err().to_string();
        assert!(e.contains("conversations[0].sessions") && e.contains("9999 is not in config.concurrency"), "{e}");
        r.conversations[0] = cell;
        let t = crate::conversation::turn_figures(2, &[], None, None);
        r.conversations[0].per_turn.push(t);
        let e = validate(&r).unwrap_err().to_string();
        assert!(e.contains("per_turn[0].turn") && e.contains("2 where turn 1 belongs"), "{e}");
    }

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
            "written by a newer speedmatrix (v7); upgrade speedmatrix (this build reads schema v1…v4)"
        );
        let e = load_results(br#"{"schema":"speedmatrix-results","schema_version":0}"#).unwrap_err();
        assert!(e.to_string().starts_with("at schema_version:"), "{e}");
        let e = load_results(b"\xEF\xBB\xBF{}").unwrap_err();
        assert!(e.to_string().contains("byte-order mark"), "{e}");
        let e = load_results(br#"{"schema":"speedmatrix-results","schema":"x"}"#).unwrap_err();
        assert_eq!(e.to_string(), "at schema: the key \"schema\" appears twice in one object");
        let e = load_results(br#"{"schema":"speedmatrix-results","schema_version":"1"}"#).unwrap_err();
        assert!(e.to_string().contains("expected an integer, found a string"), "{e}");
    }

    #[test]
    fn minus_zero_is_negative_too() {
        let e = load_results(br#"{"schema":"speedmatrix-results","schema_version":1,"x":[{"y":-0.0}]}"#).unwrap_err();
        assert_eq!(e.to_string(), "at x[0].y: -0.0 is negative; durations, rates, counts and sizes are ≥ 0");
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
