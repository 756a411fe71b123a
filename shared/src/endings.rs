//! How the requests of a row or cell ended, against what they asked (docs/METHODOLOGY.md,
//! "How requests end"), pure: which finish reasons are completed requests, when requests the
//! server cut short make a cell an error or a note, and when their output lengths say the
//! server does not honour `max_tokens` (ending before it with `length`, or running past it).
//! The collector gathers each request the server ended ([`Ended`]) and calls [`verdict`]; the
//! over-capacity rule takes the longest measured output ([`longest_past`]) when it exceeds the
//! plan's.

use crate::registry::format_int;
use crate::stats::percentile_sorted;

/// Finish reasons of a request that stopped by itself: OpenAI's `stop` and the equivalents
/// other engines send (TGI's `eos_token` and `stop_sequence`, Anthropic-style `end_turn`).
pub const STOPPED: &[&str] = &["stop", "eos", "eos_token", "stop_sequence", "end_turn"];

/// Finish reasons of a request that reached its limit: OpenAI's `length` and the equivalents
/// (`max_tokens`, `model_length`).
pub const AT_LIMIT: &[&str] = &["length", "max_tokens", "model_length"];

/// Whether `finish_reason` ends a completed request ([`STOPPED`] or [`AT_LIMIT`]); any other
/// (`abort`, `error`, `content_filter`, …) is a request the server cut short.
pub fn completes(finish_reason: &str) -> bool {
    STOPPED.contains(&finish_reason) || AT_LIMIT.contains(&finish_reason)
}

/// One request the server ended (its stream closed with `data: [DONE]`, no error, not
/// cancelled by the collector).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended<'a> {
    /// Its `finish_reason`; `None` when the server sent none.
    pub finish_reason: Option<&'a str>,
    /// Its output tokens (server usage, else counted chunks).
    pub tokens: u64,
}

/// What the endings of a row's or cell's requests say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Why the row or cell is an error: most requests the server ended were cut short.
    pub error: Option<String>,
    /// Notes for its reason (status unchanged): a few cut short, lengths against `max_tokens`.
    pub notes: Vec<String>,
}

/// The median of `values` (nearest rank), as a whole number of tokens.
fn median(values: &[u64]) -> u64 {
    let mut sorted: Vec<f64> = values.iter().map(|v| *v as f64).collect();
    sorted.sort_by(f64::total_cmp);
    percentile_sorted(&sorted, 50.0).map_or(0, |m| m as u64)
}

/// `finish_reason "abort" ×3, none sent ×1`: the reasons of the requests cut short, in the
/// order of their counts (most first), then of their names.
fn reasons(cut: &[Ended<'_>]) -> String {
    let mut counts: Vec<(String, usize)> = vec![];
    for e in cut {
        let name = e.finish_reason.map_or("none sent".to_string(), |r| format!("\"{r}\""));
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, k)) => *k += 1,
            None => counts.push((name, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let parts: Vec<String> = counts.iter().map(|(n, k)| format!("{n} ×{k}")).collect();
    format!("finish_reason {}", parts.join(", "))
}

/// The verdict on the requests the server ended, each having asked `max_tokens`:
/// - **cut short** — a finish reason that is not a completion ([`completes`]) or none at all:
///   counted apart from the completed requests; when they are more than half of those ended,
///   the row or cell is an error naming them, else a note does;
/// - **`length` before `max_tokens`** — a completed request at its limit with fewer tokens:
///   the server imposes a limit of its own, a note with the count and the median length (as
///   the collector's note on early `stop`s);
/// - **past `max_tokens`** — any request with more tokens than it asked: the server ignores
///   `max_tokens`, a note with the count and the median length.
pub fn verdict(ended: &[Ended<'_>], max_tokens: u32) -> Verdict {
    let mut v = Verdict::default();
    let n = ended.len();
    let limit = u64::from(max_tokens);
    let cut: Vec<Ended<'_>> = ended.iter().copied().filter(|e| !e.finish_reason.is_some_and(completes)).collect();
    if !cut.is_empty() {
        let lengths: Vec<u64> = cut.iter().map(|e| e.tokens).collect();
        let what = format!(
            "{} of {n} requests the server ended were cut short ({}) after {} tokens (median) of max_tokens {}",
            cut.len(),
            reasons(&cut),
            format_int(median(&lengths)),
            format_int(limit)
        );
        if cut.len() * 2 > n {
            v.error =
                Some(format!("{what}: they are not completed requests, so there is no sustained decode to measure"));
        } else {
            v.notes.push(format!("{what}: counted apart, not as completed requests"));
        }
    }
    let short: Vec<u64> = ended
        .iter()
        .filter(|e| e.finish_reason.is_some_and(|r| AT_LIMIT.contains(&r)) && e.tokens < limit)
        .map(|e| e.tokens)
        .collect();
    if !short.is_empty() {
        let completed = n - cut.len();
        v.notes.push(format!(
            "{} of {completed} completed requests ended with finish_reason \"length\" before max_tokens ({}), after {} tokens (median): the server does not honour max_tokens, so part of the window went to new requests' prefill and these figures are not sustained decode at this output length",
            short.len(),
            format_int(limit),
            format_int(median(&short))
        ));
    }
    let past: Vec<u64> = ended.iter().filter(|e| e.tokens > limit).map(|e| e.tokens).collect();
    if !past.is_empty() {
        v.notes.push(format!(
            "{} of {n} requests ran past max_tokens ({}) to {} tokens (median): the server does not honour max_tokens; the over-capacity rule counts the longest measured output from here on",
            past.len(),
            format_int(limit),
            format_int(median(&past))
        ));
    }
    v
}

/// The longest output among `ended` when it is longer than `max_tokens` asked: what the
/// over-capacity rule counts per stream instead of `max_tokens` once a server ran past it.
pub fn longest_past(ended: &[Ended<'_>], max_tokens: u32) -> Option<u64> {
    ended.iter().map(|e| e.tokens).max().filter(|t| *t > u64::from(max_tokens))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(not(target_arch = "wasm32"))]
    use proptest::prelude::*;

    fn ended(reason: Option<&str>, tokens: u64, k: usize) -> Vec<Ended<'_>> {
        vec![Ended { finish_reason: reason, tokens }; k]
    }

    #[test]
    fn requests_that_ran_to_their_limit_say_nothing() {
        assert_eq!(verdict(&ended(Some("length"), 128, 24), 128), Verdict::default());
        assert_eq!(verdict(&[], 128), Verdict::default());
        assert!(["stop", "length", "eos_token", "max_tokens"].into_iter().all(completes));
        assert!(!["abort", "error", "content_filter", ""].into_iter().any(completes));
    }

    #[test]
    fn aborted_requests_are_an_error_when_they_dominate_and_a_note_when_few() {
        let all = verdict(&ended(Some("abort"), 30, 24), 128);
        let why = all.error.expect("an error");
        assert!(
            why.starts_with("24 of 24 requests the server ended were cut short (finish_reason \"abort\" ×24) after 30 tokens (median) of max_tokens 128"),
            "{why}"
        );
        let mut few = ended(Some("length"), 128, 20);
        few.extend(ended(Some("error"), 30, 3));
        few.extend(ended(None, 12, 1));
        let v = verdict(&few, 128);
        assert_eq!(v.error, None);
        assert_eq!(v.notes.len(), 1, "{v:?}");
        assert!(v.notes[0].contains("4 of 24 requests") && v.notes[0].contains("\"error\" ×3, none sent ×1"), "{v:?}");
        assert!(v.notes[0].ends_with("counted apart, not as completed requests"), "{v:?}");
    }

    #[test]
    fn output_lengths_against_max_tokens_are_noted_both_ways() {
        let short = verdict(&ended(Some("length"), 16, 10), 128);
        assert_eq!(short.error, None);
        assert!(short.notes[0].starts_with("10 of 10 completed requests ended with finish_reason \"length\" before max_tokens (128), after 16 tokens (median)"), "{short:?}");
        let past = verdict(&ended(Some("length"), 300, 4), 128);
        assert!(
            past.notes[0].starts_with("4 of 4 requests ran past max_tokens (128) to 300 tokens (median)"),
            "{past:?}"
        );
        let probe = verdict(&ended(Some("length"), 300, 1), 1);
        assert!(probe.notes[0].contains("ran past max_tokens (1) to 300 tokens"), "{probe:?}");
        assert_eq!(longest_past(&ended(Some("length"), 300, 1), 128), Some(300));
        assert_eq!(longest_past(&ended(Some("length"), 128, 1), 128), None);
    }

    #[cfg(not(target_arch = "wasm32"))]
    proptest! {
        /// Whatever the endings: an error exactly when more than half were cut short, every
        /// note and error names its counts, and requests that ran to their limit add nothing.
        #[test]
        fn the_verdict_follows_its_counts(
            endings in proptest::collection::vec((0usize..5, 0u64..400), 0..40),
            max_tokens in 1u32..300,
        ) {
            const NAMES: [Option<&str>; 5] = [Some("stop"), Some("length"), Some("abort"), Some("error"), None];
            let ended: Vec<Ended<'_>> =
                endings.iter().map(|(r, t)| Ended { finish_reason: NAMES[*r], tokens: *t }).collect();
            let v = verdict(&ended, max_tokens);
            let cut = ended.iter().filter(|e| !e.finish_reason.is_some_and(completes)).count();
            prop_assert_eq!(v.error.is_some(), cut * 2 > ended.len());
            if let Some(e) = &v.error {
                let count = format!("{cut} of {} requests", ended.len());
                prop_assert!(e.starts_with(&count));
            }
            let at_limit = ended.iter().all(|e| e.finish_reason == Some("length") && e.tokens == u64::from(max_tokens));
            if at_limit {
                prop_assert_eq!(v, Verdict::default());
            }
        }
    }
}
