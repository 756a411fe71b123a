//! From stream records to figures (pure: no I/O, no clock). `docs/METHODOLOGY.md` ("Decode
//! cells and the window", "Metrics") is the specification.
//!
//! A decode cell's window is `(w0, w1]` on the run clock. Only token chunks that arrived inside
//! it count towards total tok/s, TPOT and ITL; the TTFT of the streams that opened the cell is
//! reported apart from the TTFT of replacement streams started inside the window.

use crate::measuring::client::StreamRecord;
use speedmatrix_schema::stats::{self, round3};
use speedmatrix_schema::{Distribution, FinishReason, RequestSample};

/// A record plus whether its stream opened the cell (vs. replaced a finished one).
#[derive(Debug, Clone)]
pub struct CellStream {
    /// What the stream saw.
    pub record: StreamRecord,
    /// True for the N streams that opened the cell.
    pub opening: bool,
}

/// The client-side figures of one decode window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowFigures {
    /// Window length, s.
    pub window_s: f64,
    /// Output tokens that arrived inside the window (server usage deltas).
    pub output_tokens: u64,
    /// 1000 ÷ TPOT per stream, tok/s.
    pub per_request_tps: Option<Distribution>,
    /// TPOT per stream inside the window, ms.
    pub tpot_ms: Option<Distribution>,
    /// Per-token inter-token latency inside the window, ms.
    pub itl_ms: Option<Distribution>,
    /// Raw chunk gaps inside the window, ms.
    pub chunk_gap_ms: Option<Distribution>,
    /// TTFT of the opening streams, ms.
    pub ttft_ms: Option<Distribution>,
    /// TTFT of replacement streams, ms.
    pub ttft_in_window_ms: Option<Distribution>,
    /// Time to first content token of the opening streams, ms.
    pub ttft_content_ms: Option<Distribution>,
    /// Request sent → last token for streams that finished inside the window, ms.
    pub e2e_ms: Option<Distribution>,
    /// Streams that finished inside the window.
    pub completed_requests: u64,
    /// Time-weighted mean of streams in flight during the window (client view).
    pub avg_in_flight: f64,
    /// Most streams in flight at once during the window (client view).
    pub max_in_flight: u64,
    /// Time-weighted mean of streams decoding during the window: from their first token to
    /// their end (client view). Streams still waiting for a first token are queued somewhere;
    /// this is the queue evidence when the server has no `/metrics`.
    pub avg_decoding: f64,
    /// Whether every stream reported cumulative usage per chunk.
    pub continuous_usage: bool,
}

/// Compute a cell's figures over the window `(w0_ms, w1_ms]`.
pub fn window_figures(streams: &[CellStream], w0_ms: f64, w1_ms: f64) -> WindowFigures {
    let window_ms = (w1_ms - w0_ms).max(f64::MIN_POSITIVE);
    let inside = |t: f64| t > w0_ms && t <= w1_ms;
    let mut tokens = 0u64;
    let (mut tpots, mut rates, mut itls, mut gaps, mut e2es) = (vec![], vec![], vec![], vec![], vec![]);
    let mut completed = 0;
    for s in streams {
        let chunks = &s.record.chunks;
        let mut first_in: Option<usize> = None;
        for (i, c) in chunks.iter().enumerate() {
            if !inside(c.t_ms) {
                continue;
            }
            first_in.get_or_insert(i);
            tokens += u64::from(c.tokens);
            if i > 0 && c.tokens > 0 {
                let gap = c.t_ms - chunks[i - 1].t_ms;
                gaps.push(gap);
                let per_token = gap / f64::from(c.tokens);
                itls.extend(std::iter::repeat_n(per_token, c.tokens as usize));
            }
        }
        if let Some(f) = first_in {
            let last = chunks.iter().rposition(|c| inside(c.t_ms)).unwrap_or(f);
            let after_first: u64 = chunks[f + 1..=last].iter().map(|c| u64::from(c.tokens)).sum();
            if after_first > 0 {
                let tpot = (chunks[last].t_ms - chunks[f].t_ms) / after_first as f64;
                tpots.push(tpot);
                if tpot > 0.0 {
                    rates.push(1000.0 / tpot);
                }
            }
        }
        if s.record.finished() {
            if let Some(last) = chunks.last().filter(|c| inside(c.t_ms)) {
                completed += 1;
                e2es.push(last.t_ms - s.record.sent_ms);
            }
        }
    }
    let ttft = |opening: bool| -> Vec<f64> {
        streams.iter().filter(|s| s.opening == opening).filter_map(|s| s.record.ttft_ms()).collect()
    };
    let content: Vec<f64> = streams
        .iter()
        .filter(|s| s.opening)
        .filter_map(|s| s.record.first_content_ms.map(|t| t - s.record.sent_ms))
        .collect();
    let (avg, max) = in_flight(streams, w0_ms, w1_ms, |r| Some(r.sent_ms));
    let (avg_decoding, _) = in_flight(streams, w0_ms, w1_ms, |r| r.chunks.first().map(|c| c.t_ms));
    WindowFigures {
        window_s: window_ms / 1000.0,
        output_tokens: tokens,
        per_request_tps: distribution(&rates),
        tpot_ms: distribution(&tpots),
        itl_ms: distribution(&itls),
        chunk_gap_ms: distribution(&gaps),
        ttft_ms: distribution(&ttft(true)),
        ttft_in_window_ms: distribution(&ttft(false)),
        ttft_content_ms: distribution(&content),
        e2e_ms: distribution(&e2es),
        completed_requests: completed,
        avg_in_flight: avg,
        max_in_flight: max,
        avg_decoding,
        continuous_usage: streams.iter().all(|s| s.record.continuous_usage || s.record.chunks.is_empty()),
    }
}

/// Time-weighted mean and maximum of streams active during the window, a stream counting from
/// `from(record)` (its send, or its first token) to its end.
fn in_flight(streams: &[CellStream], w0: f64, w1: f64, from: impl Fn(&StreamRecord) -> Option<f64>) -> (f64, u64) {
    let mut edges: Vec<(f64, i64)> = Vec::with_capacity(streams.len() * 2);
    for s in streams {
        let Some(from) = from(&s.record) else { continue };
        let start = from.max(w0);
        let end = s.record.ended_ms.unwrap_or(f64::INFINITY).min(w1);
        if end > start {
            edges.push((start, 1));
            edges.push((end, -1));
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut level, mut max, mut area, mut prev) = (0i64, 0i64, 0.0, w0);
    for (t, d) in edges {
        area += level as f64 * (t - prev);
        prev = t;
        level += d;
        max = max.max(level);
    }
    (area / (w1 - w0).max(f64::MIN_POSITIVE), max.max(0) as u64)
}

/// One request's summary for the results file.
pub fn sample(s: &StreamRecord, opening: bool, w0_ms: Option<f64>, w1_ms: Option<f64>) -> RequestSample {
    let finish = if s.error.is_some() {
        Some(FinishReason::Error)
    } else if s.cancelled {
        Some(FinishReason::Cancelled)
    } else {
        s.finish_reason.as_deref().map(|r| match r {
            "length" => FinishReason::Length,
            "stop" => FinishReason::Stop,
            _ => FinishReason::Other,
        })
    };
    let out_tokens = s.completion_tokens.or_else(|| (!s.chunks.is_empty()).then(|| s.chunk_tokens()));
    let tpot = match (s.chunks.first(), s.chunks.last()) {
        (Some(f), Some(l)) => {
            let after: u64 = s.chunks[1..].iter().map(|c| u64::from(c.tokens)).sum();
            (after > 0).then(|| (l.t_ms - f.t_ms) / after as f64)
        }
        _ => None,
    };
    let window_tokens = match (w0_ms, w1_ms) {
        (Some(a), Some(b)) => {
            Some(s.chunks.iter().filter(|c| c.t_ms > a && c.t_ms <= b).map(|c| u64::from(c.tokens)).sum())
        }
        _ => None,
    };
    RequestSample {
        start_ms: round3(s.sent_ms),
        response_id: s.response_id.clone(),
        ttft_ms: s.ttft_ms().map(round3),
        ttft_content_ms: s.first_content_ms.map(|t| round3(t - s.sent_ms)),
        e2e_ms: if s.finished() { s.chunks.last().map(|c| round3(c.t_ms - s.sent_ms)) } else { None },
        prompt_tokens: s.prompt_tokens,
        output_tokens: out_tokens,
        window_output_tokens: window_tokens,
        tpot_ms: tpot.map(round3),
        chunks: Some(s.chunks.len() as u64),
        opening: Some(opening),
        finish_reason: finish,
        error: s.error.clone(),
        server_timings: s.server_timings.clone(),
    }
}

/// A distribution of ms (or tok/s) values, rounded to 3 decimals (µs for ms figures).
fn distribution(values: &[f64]) -> Option<Distribution> {
    stats::distribution(values).map(|d| Distribution {
        p50: d.p50.map(round3),
        p90: d.p90.map(round3),
        p99: d.p99.map(round3),
        mean: d.mean.map(round3),
        min: d.min.map(round3),
        max: d.max.map(round3),
        count: d.count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::Chunk;

    fn stream(sent: f64, chunks: &[(f64, u32)], finished: bool, opening: bool) -> CellStream {
        CellStream {
            record: StreamRecord {
                sent_ms: sent,
                chunks: chunks.iter().map(|&(t_ms, tokens)| Chunk { t_ms, tokens }).collect(),
                continuous_usage: true,
                done: finished,
                finish_reason: finished.then(|| "length".into()),
                cancelled: !finished,
                ended_ms: chunks.last().map(|c| c.0),
                ..StreamRecord::default()
            },
            opening,
        }
    }

    #[test]
    fn counts_only_tokens_inside_the_window() {
        // Chunks every 10 ms carrying 1, then 3 tokens (speculative decoding) alternately.
        let chunks: Vec<(f64, u32)> =
            (0..100).map(|i| (100.0 + 10.0 * i as f64, if i % 2 == 0 { 1 } else { 3 })).collect();
        let s = stream(0.0, &chunks, false, true);
        let f = window_figures(&[s], 300.0, 800.0);
        // Chunks at 310..=800 → 50 chunks, 25 of 1 token and 25 of 3 tokens.
        assert_eq!(f.output_tokens, 100);
        let total_tps = f.output_tokens as f64 / f.window_s;
        assert!((total_tps - 200.0).abs() < 1e-9, "{total_tps}");
        assert!((f.window_s - 0.5).abs() < 1e-12);
        // ITL per token: 10 ms for 1-token chunks, 3.33 ms for each of 3 tokens → median 3.33.
        let itl = f.itl_ms.unwrap();
        assert_eq!(itl.count, Some(100));
        assert!((itl.p50.unwrap() - 10.0 / 3.0).abs() < 1e-3);
        assert_eq!(f.chunk_gap_ms.unwrap().p50, Some(10.0));
        // TTFT is the opening stream's, from before the window.
        assert_eq!(f.ttft_ms.unwrap().p50, Some(100.0));
        assert!(f.ttft_in_window_ms.is_none());
        // TPOT: (800 − 310) ms over the 97 tokens after the first in-window chunk (which carried 3).
        let tpot = f.tpot_ms.unwrap().p50.unwrap();
        assert!((tpot - 490.0 / 97.0).abs() < 1e-3, "{tpot}");
    }

    #[test]
    fn replacement_streams_and_completions() {
        let a = stream(0.0, &[(50.0, 1), (60.0, 1), (70.0, 1)], true, true); // finished at 70
        let b = stream(70.0, &[(90.0, 1), (100.0, 1), (110.0, 1)], false, false); // replacement
        let f = window_figures(&[a, b], 55.0, 105.0);
        assert_eq!(f.completed_requests, 1);
        assert_eq!(f.e2e_ms.unwrap().p50, Some(70.0));
        assert_eq!(f.ttft_in_window_ms.unwrap().p50, Some(20.0));
        assert_eq!(f.ttft_ms.unwrap().count, Some(1));
        assert_eq!(f.output_tokens, 4);
        // In flight: a from 55 to 70, b from 70 to 105 → one stream all along.
        assert!((f.avg_in_flight - 1.0).abs() < 1e-9, "{}", f.avg_in_flight);
        assert_eq!(f.max_in_flight, 1);
    }

    #[test]
    fn a_request_with_zero_tokens_is_not_a_completion() {
        // Finished (finish_reason and [DONE]) but no token chunk: nothing to count.
        let empty = stream(0.0, &[], true, true);
        let f = window_figures(&[empty], 0.0, 100.0);
        assert_eq!((f.completed_requests, f.output_tokens), (0, 0));
        assert!(f.e2e_ms.is_none() && f.ttft_ms.is_none());
    }

    #[test]
    fn sample_summarises_a_request() {
        let s = stream(10.0, &[(20.0, 1), (30.0, 2), (40.0, 2)], true, true).record;
        let r = sample(&s, true, Some(25.0), Some(35.0));
        assert_eq!(r.ttft_ms, Some(10.0));
        assert_eq!(r.tpot_ms, Some(5.0));
        assert_eq!(r.window_output_tokens, Some(2));
        assert_eq!(r.output_tokens, Some(5));
        assert_eq!(r.finish_reason, Some(FinishReason::Length));
        assert_eq!(r.e2e_ms, Some(30.0));
    }
}
