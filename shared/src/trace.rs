//! Request traces to replay (`run --trace FILE.jsonl`; docs/METHODOLOGY.md, "Trace replay"):
//! the Mooncake format read line by line, the slice and speed turned into a schedule, and the
//! plan of each request's prompt from its prefix blocks. Pure: the collector reads the file
//! and builds the text.
//!
//! **The format** (kvcache-ai/Mooncake, FAST'25 trace release): one JSON object per line with
//! `timestamp` (ms from the trace's start), `input_length` and `output_length` (tokens) and
//! `hash_ids` (the prompt's blocks of [`BLOCK_TOKENS`] tokens, in order: equal ids are the same
//! block, so two requests whose lists start alike share that prefix). Other fields are ignored.

use serde_json::Value;

/// Tokens in one prefix block (Mooncake's block size).
pub const BLOCK_TOKENS: u64 = 512;

/// One request of a trace, as its line gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    /// Its line in the file, from 1.
    pub line: u64,
    /// `timestamp`: ms from the trace's start.
    pub timestamp_ms: f64,
    /// `input_length`: prompt tokens.
    pub input_length: u64,
    /// `output_length`: output tokens (the request's `max_tokens`).
    pub output_length: u64,
    /// `hash_ids`: its prefix blocks, in order.
    pub hash_ids: Vec<u64>,
}

/// A line that is not a request of the format: its number and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct TraceError {
    /// The line, from 1 (0: the file as a whole).
    pub line: u64,
    /// What is wrong, in words.
    pub why: String,
}

/// A trace file read: its requests in timestamp order.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// Every request, sorted by timestamp (stable: equal timestamps keep file order).
    pub entries: Vec<TraceEntry>,
    /// Lines in the file (blank lines included).
    pub lines: u64,
    /// The timestamps were not in file order (they are sorted; the run says so).
    pub sorted: bool,
}

/// Read a trace in the Mooncake format.
///
/// # Errors
/// The first line that is not a request (not JSON, no `timestamp`, a length that is not a
/// positive integer, `hash_ids` not a list of integers), or a file without any request.
pub fn parse(text: &str) -> Result<Parsed, TraceError> {
    let mut entries = vec![];
    let mut lines = 0u64;
    for (i, raw) in text.lines().enumerate() {
        lines += 1;
        let line = i as u64 + 1;
        if raw.trim().is_empty() {
            continue;
        }
        entries.push(entry(line, raw).map_err(|why| TraceError { line, why })?);
    }
    if entries.is_empty() {
        return Err(TraceError { line: 0, why: "no request in the file (one JSON object per line)".into() });
    }
    let sorted = entries.windows(2).any(|w| w[1].timestamp_ms < w[0].timestamp_ms);
    entries.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
    Ok(Parsed { entries, lines, sorted })
}

fn entry(line: u64, raw: &str) -> Result<TraceEntry, String> {
    let v: Value = serde_json::from_str(raw).map_err(|e| format!("not a JSON object ({e})"))?;
    let o = v.as_object().ok_or("not a JSON object")?;
    let timestamp_ms = match o.get("timestamp") {
        None => return Err("no \"timestamp\" (ms from the trace's start)".into()),
        Some(t) => t
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| format!("\"timestamp\" {t} is not a number of ms ≥ 0 from the trace's start"))?,
    };
    let count = |key: &str| -> Result<u64, String> {
        match o.get(key) {
            None => Err(format!("no \"{key}\" (tokens)")),
            Some(v) => v
                .as_u64()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("\"{key}\" {v} is not a whole number of tokens ≥ 1")),
        }
    };
    let input_length = count("input_length")?;
    let output_length = count("output_length")?;
    let hash_ids = match o.get("hash_ids") {
        None => return Err("no \"hash_ids\" (the prompt's blocks of 512 tokens; [] for none)".into()),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| id.as_u64().ok_or_else(|| format!("\"hash_ids\" holds {id}, not a whole number ≥ 0")))
            .collect::<Result<Vec<u64>, String>>()?,
        Some(v) => return Err(format!("\"hash_ids\" {v} is not a list of block ids")),
    };
    Ok(TraceEntry { line, timestamp_ms, input_length, output_length, hash_ids })
}

/// The slice `[from_s, to_s)` of trace time (s from the trace's start; either end open), in
/// order.
pub fn slice(entries: &[TraceEntry], from_s: Option<f64>, to_s: Option<f64>) -> Vec<TraceEntry> {
    let inside = |e: &&TraceEntry| {
        let t = e.timestamp_ms / 1000.0;
        from_s.is_none_or(|f| t >= f) && to_s.is_none_or(|u| t < u)
    };
    entries.iter().filter(inside).cloned().collect()
}

/// The replay's zero in trace time, s: `--trace-from`, else the trace's start (0).
pub fn zero_s(from_s: Option<f64>) -> f64 {
    from_s.unwrap_or(0.0)
}

/// The slice's length in trace time, s: from its zero to `--trace-to`, else to its last
/// request.
pub fn span_s(entries: &[TraceEntry], from_s: Option<f64>, to_s: Option<f64>) -> f64 {
    let last = entries.iter().map(|e| e.timestamp_ms / 1000.0).fold(zero_s(from_s), f64::max);
    to_s.unwrap_or(last) - zero_s(from_s)
}

/// Each request's instant in the replay, s from its zero: (timestamp − zero) ÷ speed.
pub fn offsets_s(entries: &[TraceEntry], from_s: Option<f64>, speed: f64) -> Vec<f64> {
    let zero = zero_s(from_s);
    entries.iter().map(|e| (e.timestamp_ms / 1000.0 - zero).max(0.0) / speed).collect()
}

/// How a request's prompt is made of blocks (docs/METHODOLOGY.md, "Trace replay").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptPlan {
    /// Whole blocks, in order: each id's text of [`BLOCK_TOKENS`] tokens.
    pub full: Vec<u64>,
    /// A last block the input length covers only in part: its id and the tokens taken from
    /// the start of its text.
    pub partial: Option<(u64, u64)>,
    /// Tokens after the blocks that are this request's own (unique) text.
    pub unique_tokens: u64,
    /// Ids beyond the input length (ignored).
    pub ignored: usize,
}

/// The prompt plan of a request: as many whole blocks as its input length holds (at most its
/// ids); what is left is the start of its next id's block when it has one (a partial last
/// block: equal ids there share those tokens), else unique text.
pub fn prompt_plan(e: &TraceEntry) -> PromptPlan {
    let whole = usize::try_from(e.input_length / BLOCK_TOKENS).unwrap_or(usize::MAX).min(e.hash_ids.len());
    let rest = e.input_length - whole as u64 * BLOCK_TOKENS;
    let full = e.hash_ids[..whole].to_vec();
    let (partial, unique_tokens) = match e.hash_ids.get(whole) {
        Some(&id) if rest > 0 => (Some((id, rest)), 0),
        _ => (None, rest),
    };
    let used = whole + usize::from(partial.is_some());
    PromptPlan { full, partial, unique_tokens, ignored: e.hash_ids.len() - used }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(ts: f64, input: u64, ids: &[u64]) -> TraceEntry {
        TraceEntry { line: 1, timestamp_ms: ts, input_length: input, output_length: 8, hash_ids: ids.to_vec() }
    }

    #[test]
    fn reads_the_mooncake_format_and_sorts_out_of_order_timestamps() {
        let text = "{\"timestamp\": 27482, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [46, 47]}\n\n\
                    {\"timestamp\": 100, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [], \"extra\": 1}\n";
        let p = parse(text).unwrap();
        assert_eq!(p.lines, 3);
        assert!(p.sorted, "the second line is earlier than the first");
        assert_eq!(p.entries[0].line, 3);
        assert_eq!(
            p.entries[1],
            TraceEntry {
                line: 1,
                timestamp_ms: 27482.0,
                input_length: 6955,
                output_length: 52,
                hash_ids: vec![46, 47]
            }
        );
    }

    #[test]
    fn a_bad_line_is_named_with_what_is_wrong() {
        let ok = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}";
        let cases = [
            ("{\"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}", "no \"timestamp\""),
            ("{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}", "≥ 0"),
            ("{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 1, \"hash_ids\": []}", "\"input_length\" 0"),
            ("{\"timestamp\": 1, \"input_length\": 5, \"hash_ids\": []}", "no \"output_length\""),
            (
                "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [\"a\"]}",
                "\"hash_ids\" holds",
            ),
            ("{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1}", "no \"hash_ids\""),
            ("[1, 2]", "not a JSON object"),
            ("{\"timestamp\": 1,", "not a JSON object"),
        ];
        for (bad, expected) in cases {
            let err = parse(&format!("{ok}\n{bad}\n")).unwrap_err();
            assert_eq!(err.line, 2, "{bad}");
            assert!(err.to_string().starts_with("line 2: ") && err.why.contains(expected), "{bad}: {err}");
        }
        assert_eq!(parse("\n\n").unwrap_err().line, 0);
    }

    #[test]
    fn a_slice_keeps_its_window_and_its_schedule_starts_at_the_slice() {
        let all: Vec<TraceEntry> = [0.0, 900.0, 1000.0, 2500.0, 4000.0].iter().map(|&t| e(t, 600, &[1, 2])).collect();
        let s = slice(&all, Some(1.0), Some(4.0));
        assert_eq!(s.iter().map(|x| x.timestamp_ms).collect::<Vec<_>>(), vec![1000.0, 2500.0]);
        assert_eq!(offsets_s(&s, Some(1.0), 2.0), vec![0.0, 0.75]);
        assert_eq!(span_s(&s, Some(1.0), Some(4.0)), 3.0);
        assert_eq!(span_s(&all, None, None), 4.0);
    }

    #[test]
    fn whole_blocks_then_a_partial_block_or_unique_text() {
        // 1,300 tokens, 3 ids: two whole blocks, then 276 tokens of the third id's block.
        let p = prompt_plan(&e(0.0, 1300, &[7, 8, 9]));
        assert_eq!(p, PromptPlan { full: vec![7, 8], partial: Some((9, 276)), unique_tokens: 0, ignored: 0 });
        // More input than blocks: the rest is the request's own text.
        let p = prompt_plan(&e(0.0, 1300, &[7]));
        assert_eq!(p, PromptPlan { full: vec![7], partial: None, unique_tokens: 788, ignored: 0 });
        // Exactly two blocks; a third id is beyond the input.
        let p = prompt_plan(&e(0.0, 1024, &[7, 8, 9]));
        assert_eq!(p, PromptPlan { full: vec![7, 8], partial: None, unique_tokens: 0, ignored: 1 });
        let p = prompt_plan(&e(0.0, 100, &[]));
        assert_eq!(p, PromptPlan { full: vec![], partial: None, unique_tokens: 100, ignored: 0 });
    }
}
