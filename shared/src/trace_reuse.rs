//! A replayed trace's prefix reuse (docs/METHODOLOGY.md, "Trace replay", "Prefix reuse"): the
//! trace's **ideal reuse** — the share of its prompt tokens in blocks an earlier request of the
//! slice already sent — and the judgement of the hit rate the server measured beside it. Pure.

use crate::prefix::{below_reasons, share_label, unexplained, Evidence, TOLERANCE};
use crate::trace::{prompt_plan, TraceEntry, BLOCK_TOKENS};
use std::collections::HashMap;

/// What a slice of a trace could reuse with a cache that never forgets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdealReuse {
    /// Prompt tokens in blocks sent earlier in the slice, tokens.
    pub reused_tokens: u64,
    /// Prompt tokens of the slice (`input_length` summed), tokens.
    pub prompt_tokens: u64,
    /// `reused_tokens ÷ prompt_tokens`, fraction 0–1 rounded to 4 decimals.
    pub share: f64,
    /// Tokens of the distinct blocks the slice sends (each id once, at the most of it any
    /// request sends): what a cache must hold to reach the ideal, tokens.
    pub distinct_block_tokens: u64,
}

/// The ideal reuse of `entries` (in schedule order; the cache empty before the first): for
/// each request, its blocks in order — whole blocks of [`BLOCK_TOKENS`], then a partial last
/// block of the tokens it takes ([`prompt_plan`]) — are reused while an earlier request sent
/// the same id: all of the block's tokens when an earlier one sent at least as many of them,
/// else the tokens it did send, which ends the reuse (a prefix cache serves a prefix). Tokens
/// of a request's own text are never reused.
pub fn ideal_reuse(entries: &[TraceEntry]) -> IdealReuse {
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let (mut reused, mut prompt) = (0u64, 0u64);
    for e in entries {
        let plan = prompt_plan(e);
        let parts: Vec<(u64, u64)> = plan.full.iter().map(|id| (*id, BLOCK_TOKENS)).chain(plan.partial).collect();
        for &(id, tokens) in &parts {
            let earlier = seen.get(&id).copied().unwrap_or(0);
            reused += earlier.min(tokens);
            if earlier < tokens {
                break;
            }
        }
        for (id, tokens) in parts {
            let s = seen.entry(id).or_insert(0);
            *s = (*s).max(tokens);
        }
        prompt += e.input_length;
    }
    let share = match prompt {
        0 => 0.0,
        p => ((reused as f64 / p as f64) * 10_000.0).round() / 10_000.0,
    };
    IdealReuse { reused_tokens: reused, prompt_tokens: prompt, share, distinct_block_tokens: seen.values().sum() }
}

/// The note of a replay whose measured hit rate is more than [`TOLERANCE`] below the trace's
/// ideal reuse: how far, and what may explain it — the evidence of a prefix-share cell
/// ([`below_reasons`]), and a cache smaller than the trace's distinct blocks
/// (`kv_budget_tokens`, the server's KV cache). `None` within the tolerance or above.
pub fn reuse_note(ideal: &IdealReuse, measured: f64, e: &Evidence, kv_budget_tokens: Option<u64>) -> Option<String> {
    let gap = ideal.share - measured;
    if gap <= TOLERANCE + 1e-9 {
        return None;
    }
    let mut why = below_reasons(ideal.share, e);
    if let Some(kv) = kv_budget_tokens.filter(|kv| *kv < ideal.distinct_block_tokens) {
        why.push(format!(
            "the trace's distinct blocks ({} tokens) exceed the server's KV cache ({kv} tokens), so the cache evicted blocks before their reuse",
            ideal.distinct_block_tokens
        ));
    }
    if why.is_empty() {
        why.push(unexplained(e));
    }
    Some(format!(
        "prefix cache: measured hit rate {} is {:.0} points below the trace's ideal reuse {}: {}",
        share_label(measured),
        gap * 100.0,
        share_label(ideal.share),
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(input: u64, ids: &[u64]) -> TraceEntry {
        TraceEntry { line: 1, timestamp_ms: 0.0, input_length: input, output_length: 8, hash_ids: ids.to_vec() }
    }

    #[test]
    fn reuse_counts_blocks_sent_earlier_and_partial_blocks_by_their_tokens() {
        let trace = [
            e(1100, &[1, 2, 3]), // 512 + 512 + 76 of block 3: nothing earlier
            e(1300, &[1, 2, 3]), // 1024 + 76 of block 3's 276 (the earlier request sent 76): 1100
            e(1100, &[1, 2, 3]), // 1024 + 76 (block 3's 276 tokens sent earlier): 1100
            e(600, &[1, 9]),     // block 1 (512), then 88 of block 9, new: 512
            e(700, &[4]),        // block 4 (512) new, then 188 of its own text
            e(512, &[4, 5]),     // block 4 whole: 512
        ];
        let r = ideal_reuse(&trace);
        assert_eq!(r.reused_tokens, 1100 + 1100 + 512 + 512);
        assert_eq!(r.prompt_tokens, 1100 + 1300 + 1100 + 600 + 700 + 512);
        assert_eq!(r.share, ((3224.0 / 5312.0) * 10_000.0_f64).round() / 10_000.0);
        // Blocks 1, 2, 4 whole, 276 of 3, 88 of 9.
        assert_eq!(r.distinct_block_tokens, 3 * 512 + 276 + 88);
        assert_eq!(ideal_reuse(&[]).share, 0.0);
    }

    #[test]
    fn a_changed_block_ends_the_reuse() {
        // Chained ids would never repeat block 2 after a new block 7, but a prefix cache stops
        // at the first block it lacks all the same.
        let r = ideal_reuse(&[e(1536, &[1, 2, 3]), e(1536, &[1, 7, 3])]);
        assert_eq!(r.reused_tokens, 512);
    }

    #[test]
    fn a_low_rate_says_why() {
        let ideal = IdealReuse { reused_tokens: 600, prompt_tokens: 1000, share: 0.6, distinct_block_tokens: 50_000 };
        assert_eq!(reuse_note(&ideal, 0.55, &Evidence::default(), None), None);
        assert_eq!(reuse_note(&ideal, 0.7, &Evidence::default(), None), None, "above the ideal is no note");
        let n = reuse_note(&ideal, 0.2, &Evidence::default(), Some(16_384)).unwrap();
        assert!(n.contains("20% is 40 points below the trace's ideal reuse 60%"), "{n}");
        assert!(n.contains("distinct blocks (50000 tokens) exceed the server's KV cache (16384 tokens)"), "{n}");
        assert!(n.contains("evicted"), "{n}");
        let n = reuse_note(&ideal, 0.2, &Evidence::default(), Some(1 << 20)).unwrap();
        assert!(n.contains("may be off"), "a cache that holds the blocks: {n}");
        let off = Evidence { caching_on: Some(false), ..Evidence::default() };
        assert!(reuse_note(&ideal, 0.0, &off, None).unwrap().contains("prefix caching off"));
    }
}
