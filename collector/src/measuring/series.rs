//! A decode window as a time series of one-second buckets (pure): output tokens and streams
//! decoding from what the client saw, the server's running / waiting gauges from the scrapes.
//! The cell's intervals ([`speedmatrix_schema::noise`]) are computed from it, and the page draws
//! it. Buckets follow the window's convention: bucket `i` holds what arrived in
//! `(start + i s, start + (i + 1) s]`; only whole buckets are kept.

use crate::measuring::client::CellStream;
use crate::measuring::scrape::Scrape;
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::WindowSeries;

/// Width of one bucket, ms.
pub const BUCKET_MS: f64 = 1000.0;

/// The series of the window `(w0, w1]` (ms on the run clock); `weights[i]` are the tokens of
/// each chunk of `streams[i]`. `None` for a window shorter than one bucket.
pub fn window_series(
    streams: &[CellStream],
    weights: &[Vec<f64>],
    scrapes: &[Scrape],
    w0: f64,
    w1: f64,
) -> Option<WindowSeries> {
    // A hair of tolerance: a 10 s window closed at 9,999.9999 ms is ten buckets.
    let n = ((w1 - w0) / BUCKET_MS + 1e-6).floor();
    // Also a NaN window (never in practice) gives no series.
    if n.is_nan() || n < 1.0 {
        return None;
    }
    let n = n as usize;
    let bucket_of = |t: f64| {
        let i = ((t - w0) / BUCKET_MS).ceil() as i64 - 1;
        (t > w0 && i >= 0 && (i as usize) < n).then_some(i as usize)
    };
    let mut tokens = vec![0.0; n];
    for (s, w) in streams.iter().zip(weights) {
        for (c, tok) in s.record.chunks.iter().zip(w) {
            if let Some(i) = bucket_of(c.t_ms) {
                tokens[i] += tok;
            }
        }
    }
    let decoding = (0..n).map(|i| round3(decoding_in(streams, w0 + i as f64 * BUCKET_MS))).collect();
    let gauge = |get: fn(&Scrape) -> Option<f64>, combine: fn(&[f64]) -> f64| -> Vec<Option<f64>> {
        let mut per: Vec<Vec<f64>> = vec![vec![]; n];
        for s in scrapes {
            if let (Some(i), Some(v)) = (bucket_of(s.t_ms), get(s)) {
                per[i].push(v);
            }
        }
        if per.iter().all(Vec::is_empty) {
            return vec![];
        }
        per.iter().map(|v| (!v.is_empty()).then(|| round3(combine(v)))).collect()
    };
    Some(WindowSeries {
        bucket_s: BUCKET_MS / 1000.0,
        output_tokens: tokens.into_iter().map(round3).collect(),
        streams_decoding: decoding,
        running: gauge(|s| s.metrics.running, |v| v.iter().sum::<f64>() / v.len() as f64),
        waiting: gauge(|s| s.metrics.waiting, |v| v.iter().copied().fold(f64::MIN, f64::max)),
    })
}

/// Time-weighted mean of streams decoding — from their first token to their end — in the
/// bucket `(from, from + 1 s]`.
fn decoding_in(streams: &[CellStream], from: f64) -> f64 {
    let to = from + BUCKET_MS;
    let covered: f64 = streams
        .iter()
        .filter_map(|s| {
            let first = s.record.chunks.first()?.t_ms;
            let end = s.record.ended_ms.unwrap_or(f64::INFINITY);
            Some((end.min(to) - first.max(from)).max(0.0))
        })
        .sum();
    covered / BUCKET_MS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::client::{Chunk, StreamRecord};
    use crate::measuring::discovery::Metrics;

    fn stream(chunks: &[(f64, u32)], ended: Option<f64>) -> CellStream {
        CellStream {
            record: StreamRecord {
                chunks: chunks.iter().map(|&(t_ms, tokens)| Chunk { t_ms, tokens }).collect(),
                continuous_usage: true,
                ended_ms: ended,
                ..StreamRecord::default()
            },
            opening: true,
        }
    }

    #[test]
    fn buckets_hold_what_arrived_in_them() {
        // Window (1000, 4500]: three whole buckets, the last half second left out.
        let a = stream(&[(900.0, 5), (1000.0, 1), (1000.5, 2), (2000.0, 3), (3999.0, 4), (4200.0, 9)], None);
        let b = stream(&[(2500.0, 10)], Some(3500.0));
        let weights = vec![vec![5.0, 1.0, 2.0, 3.0, 4.0, 9.0], vec![10.0]];
        let scrapes = vec![
            Scrape { t_ms: 1200.0, metrics: Metrics { running: Some(2.0), waiting: Some(0.0), ..Metrics::default() } },
            Scrape { t_ms: 1700.0, metrics: Metrics { running: Some(1.0), waiting: Some(3.0), ..Metrics::default() } },
            Scrape { t_ms: 3100.0, metrics: Metrics { running: Some(4.0), ..Metrics::default() } },
        ];
        let s = window_series(&[a, b], &weights, &scrapes, 1000.0, 4500.0).unwrap();
        assert_eq!(s.bucket_s, 1.0);
        // (1000, 2000]: 2 + 3 (1000.0 itself is the window's open, outside); (2000, 3000]: 10;
        // (3000, 4000]: 4.
        assert_eq!(s.output_tokens, vec![5.0, 10.0, 4.0]);
        // Stream a decodes from 900 ms on (1 in every bucket); b from 2500 to 3500 ms.
        assert_eq!(s.streams_decoding, vec![1.0, 1.5, 1.5]);
        assert_eq!(s.running, vec![Some(1.5), None, Some(4.0)]);
        assert_eq!(s.waiting, vec![Some(3.0), None, None]);
    }

    #[test]
    fn no_gauges_no_columns_and_short_windows_no_series() {
        let a = stream(&[(1500.0, 1)], None);
        let s = window_series(std::slice::from_ref(&a), &[vec![1.0]], &[], 1000.0, 3000.0).unwrap();
        assert_eq!(s.output_tokens, vec![1.0, 0.0]);
        assert!(s.running.is_empty() && s.waiting.is_empty());
        assert_eq!(window_series(&[a], &[vec![1.0]], &[], 1000.0, 1999.0), None);
    }
}
