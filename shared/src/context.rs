//! Context sizes: parsing `8k`/`max`, labels, and resolving `max` (`docs/METHODOLOGY.md`,
//! "Context sizes").
//!
//! `8k` = 8,192 tokens (K = 1,024); a plain number is tokens (`8000`); `max` depends on the
//! server: for decode, `max_model_len − max_tokens − 1,024` rounded down to a multiple of 1,024;
//! for prefill, the longest prompt the server accepts with `max_tokens: 1`.

use crate::model::ContextSize;

/// Tokens in one `K` of a context label.
pub const K: u64 = 1024;
/// Headroom kept below `max_model_len` for chat-template overhead when resolving decode `max`.
pub const MAX_HEADROOM_TOKENS: u64 = 1024;

/// A context size as asked for on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextArg {
    /// A fixed number of tokens.
    Tokens(u64),
    /// The largest the server allows (resolved at plan time).
    Max,
}

/// Errors from [`parse_context`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// Not `max`, a number or a number with `k`.
    #[error("'{0}' is not a context size; write tokens as 8192, 8k (= 8,192) or max")]
    Syntax(String),
    /// Zero tokens.
    #[error("context size '{0}' must be at least 1 token")]
    Zero(String),
}

/// Parse one context size: `8k`, `8K`, `8192`, `max`.
pub fn parse_context(s: &str) -> Result<ContextArg, ContextError> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("max") {
        return Ok(ContextArg::Max);
    }
    let (digits, mult) = match t.strip_suffix(['k', 'K']) {
        Some(d) => (d, K),
        None => (t, 1),
    };
    let n: u64 = digits.parse().map_err(|_| ContextError::Syntax(s.to_string()))?;
    let tokens = n.checked_mul(mult).ok_or_else(|| ContextError::Syntax(s.to_string()))?;
    if tokens == 0 {
        return Err(ContextError::Zero(s.to_string()));
    }
    Ok(ContextArg::Tokens(tokens))
}

/// The label of a token count: `8K` for multiples of 1,024, else the number (`8,000`).
pub fn label(tokens: u64) -> String {
    if tokens >= K && tokens.is_multiple_of(K) {
        format!("{}K", tokens / K)
    } else {
        crate::registry::format_number(tokens as f64, crate::registry::Style::Fixed(0))
    }
}

/// A [`ContextSize`] with its standard label.
pub fn size(tokens: u64) -> ContextSize {
    ContextSize { label: label(tokens), tokens }
}

/// The decode `max` context: `max_model_len − max_tokens − 1,024`, rounded down to a multiple of
/// 1,024 (the seed: 262,144 and 4,096 → 257,024, "251K"). Small servers, where that leaves less
/// than 1,024 tokens, round to a multiple of 128 instead; `None` when nothing fits.
pub fn decode_max(max_model_len: u64, max_tokens: u64) -> Option<u64> {
    let room = max_model_len.checked_sub(max_tokens)?.checked_sub(MAX_HEADROOM_TOKENS)?;
    let step = if room >= K { K } else { 128 };
    let rounded = room / step * step;
    (rounded > 0).then_some(rounded)
}

/// How far a prompt's real length may be from its context's target before its row or cell
/// says so (a share of the target).
pub const PROMPT_SLACK: f64 = 0.01;

/// The note a row or cell carries when its prompt's real length (`served`: the server's usage,
/// else its `/tokenize` count) is more than [`PROMPT_SLACK`] off `target`; when the prompt was
/// sized with `/tokenize` to `sized` tokens and the server's usage says otherwise, the note
/// names both. `None` when the length is unknown or close enough.
pub fn prompt_length_note(target: u64, served: Option<u64>, sized: Option<u64>) -> Option<String> {
    let served = served?;
    let off = (served as f64 - target as f64).abs() / (target.max(1) as f64);
    if off <= PROMPT_SLACK {
        return None;
    }
    let fmt = crate::registry::format_int;
    let disagree = sized
        .filter(|s| *s != served)
        .map(|s| format!(" (/tokenize counted {}: the server's tokenizer endpoint disagrees with its usage)", fmt(s)));
    Some(format!(
        "the prompt has {} tokens, {:.1} % off the target {}{}: the figures are for that length",
        fmt(served),
        off * 100.0,
        fmt(target),
        disagree.unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_people_write() {
        assert_eq!(parse_context("8k"), Ok(ContextArg::Tokens(8192)));
        assert_eq!(parse_context("128K"), Ok(ContextArg::Tokens(131_072)));
        assert_eq!(parse_context("8000"), Ok(ContextArg::Tokens(8000)));
        assert_eq!(parse_context("MAX"), Ok(ContextArg::Max));
        assert!(matches!(parse_context("8m"), Err(ContextError::Syntax(_))));
        assert!(matches!(parse_context("0k"), Err(ContextError::Zero(_))));
        assert!(matches!(parse_context("99999999999999999999k"), Err(ContextError::Syntax(_))));
    }

    #[test]
    fn seed_max_is_251k() {
        assert_eq!(decode_max(262_144, 4096), Some(257_024));
        assert_eq!(label(257_024), "251K");
        assert_eq!(label(8000), "8,000");
        assert_eq!(decode_max(4096, 4096), None);
        assert_eq!(decode_max(2048, 256), Some(768), "small servers round to 128");
    }

    #[test]
    fn a_prompt_off_its_target_is_noted_with_both_counts() {
        assert_eq!(prompt_length_note(1024, Some(1030), Some(1030)), None, "within 1 %");
        assert_eq!(prompt_length_note(1024, None, Some(1024)), None);
        let n = prompt_length_note(1024, Some(1324), Some(1024)).unwrap();
        assert!(
            n.starts_with("the prompt has 1,324 tokens, 29.3 % off the target 1,024 (/tokenize counted 1,024"),
            "{n}"
        );
        let n = prompt_length_note(8192, Some(7000), Some(7000)).unwrap();
        assert!(!n.contains("/tokenize"), "{n}");
    }
}
