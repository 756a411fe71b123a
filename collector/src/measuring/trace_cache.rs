//! A trace replay's prefix cache (docs/METHODOLOGY.md, "Trace replay", "Prefix reuse"): the
//! trace's ideal reuse ([`ideal_reuse`]) beside the hit rate the server's own counts measured
//! over the replay (the sources of [`crate::measuring::prefix::count`]), with why when the
//! measured rate is more than 10 points below the ideal, and why when no source gave one.

use crate::measuring::cache_start::Start;
use crate::measuring::client::StreamRecord;
use crate::measuring::prefix::{count, outcome};
use crate::measuring::scrape::Scrape;
use speedmatrix_schema::prefix::Evidence;
use speedmatrix_schema::trace::TraceEntry;
use speedmatrix_schema::trace_reuse::{ideal_reuse, reuse_note};
use speedmatrix_schema::{MissingFigure, TracePrefixCache};

/// The figure `missing` names when no source gives the replay's hit rate.
pub const HIT_RATE_FIGURE: &str = "prefix_cache.measured_hit_rate";

/// What the server told of a replay's prefix cache.
pub struct Served<'a> {
    /// Every request's record.
    pub records: &'a [StreamRecord],
    /// The replay's `/metrics` readings, first before the first request, last after the drain.
    pub scrapes: &'a [Scrape],
    /// Whether the server has a usable `/metrics`.
    pub has_metrics: bool,
    /// What may explain a low rate (prefix caching off, KV-cache usage, preemptions).
    pub evidence: Evidence,
    /// The server's KV cache, tokens (`plan_kv_budget`), when known.
    pub kv_budget_tokens: Option<u64>,
}

/// What a replay's prefix cache came to: its figures, the note when the measured rate is far
/// below the ideal (for the row's `reason`), and the missing figure when no source gave one.
pub struct Reuse {
    /// The figures for the file.
    pub figures: TracePrefixCache,
    /// The note ([`reuse_note`]).
    pub note: Option<String>,
    /// Why `measured_hit_rate` is null.
    pub missing: Option<MissingFigure>,
}

/// The prefix-cache figures of a replay of `entries` (schedule order) that began as `start`.
pub fn reuse(entries: &[TraceEntry], start: &Start, served: &Served) -> Reuse {
    let ideal = ideal_reuse(entries);
    let counted = count(served.records, served.scrapes);
    // The measured side as a prefix-share cell has it (sources, counts, missing reason); its
    // judgement against a plan is replaced by the one against the ideal.
    let o = outcome(ideal.share, start, counted, served.scrapes, served.has_metrics, &served.evidence);
    let measured = o.figures.measured_hit_rate;
    let note = measured.and_then(|m| reuse_note(&ideal, m, &served.evidence, served.kv_budget_tokens));
    let figures = TracePrefixCache {
        ideal_reuse: ideal.share,
        ideal_reused_tokens: ideal.reused_tokens,
        trace_prompt_tokens: ideal.prompt_tokens,
        distinct_block_tokens: ideal.distinct_block_tokens,
        cache_start: start.how,
        cache_start_detail: start.detail.clone(),
        measured_hit_rate: measured,
        hit_rate_source: o.figures.hit_rate_source,
        hit_tokens: o.figures.hit_tokens,
        query_tokens: o.figures.query_tokens,
    };
    let missing = o.missing.map(|m| MissingFigure { figure: HIT_RATE_FIGURE.into(), reason: m.reason });
    Reuse { figures, note, missing }
}

/// The salt of a replay whose cache could not be reset: text unique to this replay, before
/// every prompt (its run id, its place, the time it started), so no prompt cached by an
/// earlier run — or an earlier attempt of this one (`--resume`) — matches its first block.
pub fn salt(run_id: &str, index: usize) -> String {
    let started_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    format!("[run {run_id} · trace {index} · replay {started_ms}]\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::{CacheStart, HitRateSource};

    fn entry(input: u64, ids: &[u64]) -> TraceEntry {
        TraceEntry { line: 1, timestamp_ms: 0.0, input_length: input, output_length: 4, hash_ids: ids.to_vec() }
    }

    #[test]
    fn usage_gives_the_rate_and_a_low_one_says_why() {
        let entries = [entry(1024, &[1, 2]), entry(1024, &[1, 2])];
        let start = Start { how: CacheStart::Reset, detail: "POST /reset_prefix_cache".into() };
        let rec =
            |cached| StreamRecord { prompt_tokens: Some(1024), cached_tokens: Some(cached), ..Default::default() };
        let records = [rec(0), rec(1008)];
        let served = Served {
            records: &records,
            scrapes: &[],
            has_metrics: true,
            evidence: Evidence::default(),
            kv_budget_tokens: Some(512),
        };
        let r = reuse(&entries, &start, &served);
        assert_eq!(r.figures.ideal_reuse, 0.5);
        assert_eq!(r.figures.measured_hit_rate, Some(0.4922));
        assert_eq!(r.figures.hit_rate_source, Some(HitRateSource::Usage));
        assert_eq!((r.note, r.missing), (None, None), "within 10 points");
        let records = [rec(0), rec(0)];
        let r = reuse(&entries, &start, &Served { records: &records, ..served });
        let note = r.note.unwrap();
        assert!(note.contains("50 points below the trace's ideal reuse 50%") && note.contains("evicted"), "{note}");
    }

    #[test]
    fn no_source_is_null_with_the_reason() {
        let start = Start { how: CacheStart::Salted, detail: "no reset".into() };
        let served = Served {
            records: &[],
            scrapes: &[],
            has_metrics: false,
            evidence: Evidence::default(),
            kv_budget_tokens: None,
        };
        let r = reuse(&[entry(600, &[1])], &start, &served);
        assert_eq!(r.figures.measured_hit_rate, None);
        let m = r.missing.unwrap();
        assert_eq!(m.figure, HIT_RATE_FIGURE);
        assert!(m.reason.contains("no usable /metrics"), "{}", m.reason);
        assert!(salt("r1", 0).starts_with("[run r1 · trace 0 · replay "));
    }
}
