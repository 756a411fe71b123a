//! Speculative decoding over one cell, from the server's own counters (pure;
//! docs/METHODOLOGY.md, "Speculative decoding"): drafts, draft and accepted tokens, the
//! acceptance rate, the mean accepted length (vLLM's definition, 1 + accepted ÷ drafts) and the
//! acceptance by draft position.
//!
//! The counts are the counters' growth between two readings, never interpolated: the reading
//! before the cell's first request and the last reading after its last request ended
//! ([`crate::measuring::scrape::Scraper::finish`] waits, a bounded time, for a server that
//! counts speculation to be idle), so they are exactly what the server counted for the cell's
//! requests. Speculation does not change with the window (it depends on the text and the
//! model), so the whole cell is the larger sample. SGLang gives only a gauge of the accept
//! length: its mean over the window's readings, without counts.

use crate::measuring::scrape::Scrape;
use speedmatrix_schema::stats::round3;
use speedmatrix_schema::{MissingFigure, SpecDecodeFigures, SpecDecodeSource};

/// The figure `missing` names for a cell's speculative decoding.
pub const FIGURE: &str = "spec_decode";

/// A cell's speculative decoding: its figures (absent where the server counts none) and why
/// some are null.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    /// The figures for the cell's `spec_decode`.
    pub figures: Option<SpecDecodeFigures>,
    /// Why the acceptance figures are null, or why counts are missing.
    pub missing: Option<MissingFigure>,
}

/// The growth of a counter from reading `a` to reading `b`, a whole count (a counter that
/// went down — a server restarted — gives `None`).
fn grew(a: f64, b: f64) -> Option<u64> {
    (b >= a).then(|| (b - a).round() as u64)
}

/// The speculative decoding of a cell from its readings (in time order); `w0`, `w1` bound the
/// window for a gauge.
pub fn outcome(scrapes: &[Scrape], w0: f64, w1: f64) -> Outcome {
    let counted = |s: &&Scrape| {
        s.metrics.spec_drafts.is_some()
            && s.metrics.spec_draft_tokens.is_some()
            && s.metrics.spec_accepted_tokens.is_some()
    };
    if let (Some(a), Some(b)) = (scrapes.iter().find(counted), scrapes.iter().rev().find(counted)) {
        // A restart between two readings may leave the last reading above the first (the
        // counters began again from 0 and grew past it): every step is checked, not the ends.
        if restarted(scrapes) {
            return went_down();
        }
        return from_counters(&a.metrics, &b.metrics);
    }
    let gauge: Vec<f64> =
        scrapes.iter().filter(|s| s.t_ms >= w0 && s.t_ms <= w1).filter_map(|s| s.metrics.spec_accept_length).collect();
    if gauge.is_empty() {
        return Outcome::default();
    }
    let mean = gauge.iter().sum::<f64>() / gauge.len() as f64;
    Outcome {
        figures: Some(SpecDecodeFigures {
            source: SpecDecodeSource::PrometheusGauge,
            drafts: None,
            draft_tokens: None,
            accepted_tokens: None,
            acceptance_rate: None,
            mean_accepted_length: Some(round3(mean)),
            accepted_per_position: vec![],
            acceptance_by_position: vec![],
        }),
        missing: Some(MissingFigure {
            figure: FIGURE.into(),
            reason: format!(
                "drafts, draft and accepted tokens and the acceptance rate: the server gives only its accept-length gauge (the mean of {} reading(s) in the window), no counters",
                gauge.len()
            ),
        }),
    }
}

/// Whether any speculative-decoding counter read lower than its reading before (over every
/// reading of the cell, in time order).
fn restarted(scrapes: &[Scrape]) -> bool {
    let counters: [fn(&crate::measuring::discovery::Metrics) -> Option<f64>; 3] =
        [|m| m.spec_drafts, |m| m.spec_draft_tokens, |m| m.spec_accepted_tokens];
    counters.iter().any(|get| {
        let v: Vec<f64> = scrapes.iter().filter_map(|s| get(&s.metrics)).collect();
        v.windows(2).any(|w| w[1] < w[0])
    })
}

/// No figures: a counter went down during the cell (the server restarted), so no count of the
/// cell's speculation can be told — null with the reason, never a negative or partial count.
fn went_down() -> Outcome {
    Outcome {
        figures: None,
        missing: Some(MissingFigure {
            figure: FIGURE.into(),
            reason: "the server's speculative-decoding counters went down during the cell (a restart?): no counts"
                .into(),
        }),
    }
}

/// The figures from the counters of the first reading `a` and the last `b`.
fn from_counters(a: &crate::measuring::discovery::Metrics, b: &crate::measuring::discovery::Metrics) -> Outcome {
    let get = |f: fn(&crate::measuring::discovery::Metrics) -> Option<f64>| grew(f(a)?, f(b)?);
    let (Some(drafts), Some(draft_tokens), Some(accepted)) =
        (get(|m| m.spec_drafts), get(|m| m.spec_draft_tokens), get(|m| m.spec_accepted_tokens))
    else {
        return went_down();
    };
    let per_pos: Vec<u64> = match (a.spec_accepted_per_pos.len(), b.spec_accepted_per_pos.len()) {
        (0, _) | (_, 0) => vec![],
        (_, n) => (0..n)
            .map(|k| grew(a.spec_accepted_per_pos.get(k).copied().unwrap_or(0.0), b.spec_accepted_per_pos[k]))
            .collect::<Option<Vec<u64>>>()
            .unwrap_or_default(),
    };
    let some = drafts > 0 && draft_tokens > 0;
    let figures = SpecDecodeFigures {
        source: SpecDecodeSource::PrometheusCounters,
        drafts: Some(drafts),
        draft_tokens: Some(draft_tokens),
        accepted_tokens: Some(accepted),
        acceptance_rate: some.then(|| round3(accepted as f64 / draft_tokens as f64)),
        mean_accepted_length: some.then(|| round3(1.0 + accepted as f64 / drafts as f64)),
        acceptance_by_position: if some {
            per_pos.iter().map(|&n| round3(n as f64 / drafts as f64)).collect()
        } else {
            vec![]
        },
        accepted_per_position: per_pos,
    };
    let missing = (!some).then(|| MissingFigure {
        figure: FIGURE.into(),
        reason: "acceptance rate and mean accepted length: the server drafted nothing for this cell's requests (its speculative-decoding counters did not grow)".into(),
    });
    Outcome { figures: Some(figures), missing }
}

/// A source in words, for `show`.
pub fn source_words(s: SpecDecodeSource) -> &'static str {
    s.words()
}

/// A cell's speculation for one terminal line: ` · accept 62.5% · 2.87 tok/draft`, or empty.
pub fn line_part(f: Option<&SpecDecodeFigures>) -> String {
    let Some(f) = f else { return String::new() };
    let rate = f.acceptance_rate.map(|r| format!(" · accept {:.1}%", r * 100.0)).unwrap_or_default();
    let len = f.mean_accepted_length.map(|l| format!(" · {l:.2} tok/draft")).unwrap_or_default();
    match (rate.is_empty(), len.is_empty()) {
        (true, true) => " · nothing drafted".into(),
        _ => format!("{rate}{len}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::discovery::Metrics;

    fn at(t_ms: f64, drafts: f64, tokens: f64, accepted: f64, per_pos: &[f64]) -> Scrape {
        Scrape {
            t_ms,
            metrics: Metrics {
                spec_drafts: Some(drafts),
                spec_draft_tokens: Some(tokens),
                spec_accepted_tokens: Some(accepted),
                spec_accepted_per_pos: per_pos.to_vec(),
                ..Metrics::default()
            },
        }
    }

    #[test]
    fn counts_are_the_growth_from_the_first_reading_to_the_last() {
        // 100 drafts of 3 tokens; 150 accepted: 80 at position 0, 50 at 1, 20 at 2.
        let s = [
            at(0.0, 1000.0, 3000.0, 900.0, &[500.0, 300.0, 100.0]),
            at(500.0, 1040.0, 3120.0, 950.0, &[520.0, 320.0, 110.0]),
            at(1500.0, 1100.0, 3300.0, 1050.0, &[580.0, 350.0, 120.0]),
        ];
        let o = outcome(&s, 100.0, 1200.0);
        let f = o.figures.unwrap();
        assert_eq!(f.source, SpecDecodeSource::PrometheusCounters);
        assert_eq!((f.drafts, f.draft_tokens, f.accepted_tokens), (Some(100), Some(300), Some(150)));
        assert_eq!(f.acceptance_rate, Some(0.5));
        assert_eq!(f.mean_accepted_length, Some(2.5));
        assert_eq!(f.accepted_per_position, [80, 50, 20]);
        assert_eq!(f.acceptance_by_position, [0.8, 0.5, 0.2]);
        assert_eq!(o.missing, None);
        assert_eq!(line_part(Some(&f)), " · accept 50.0% · 2.50 tok/draft");
    }

    #[test]
    fn nothing_drafted_is_null_with_the_reason_never_zero() {
        let s = [at(0.0, 7.0, 21.0, 9.0, &[]), at(900.0, 7.0, 21.0, 9.0, &[])];
        let o = outcome(&s, 0.0, 900.0);
        let f = o.figures.unwrap();
        assert_eq!((f.drafts, f.acceptance_rate, f.mean_accepted_length), (Some(0), None, None));
        assert!(f.acceptance_by_position.is_empty());
        assert!(o.missing.unwrap().reason.contains("drafted nothing"));
    }

    #[test]
    fn no_counters_no_figures_and_a_gauge_gives_the_mean_length_only() {
        let plain = Scrape { t_ms: 0.0, metrics: Metrics { running: Some(1.0), ..Metrics::default() } };
        assert_eq!(outcome(std::slice::from_ref(&plain), 0.0, 1.0), Outcome::default());
        let g =
            |t_ms: f64, v: f64| Scrape { t_ms, metrics: Metrics { spec_accept_length: Some(v), ..Metrics::default() } };
        let o = outcome(&[g(0.0, 9.0), g(100.0, 2.0), g(200.0, 3.0), g(900.0, 9.0)], 50.0, 500.0);
        let f = o.figures.unwrap();
        assert_eq!((f.source, f.mean_accepted_length, f.drafts), (SpecDecodeSource::PrometheusGauge, Some(2.5), None));
        assert!(o.missing.unwrap().reason.contains("accept-length gauge"));
    }

    #[test]
    fn a_counter_that_went_down_gives_no_counts() {
        let o = outcome(&[at(0.0, 100.0, 300.0, 50.0, &[]), at(900.0, 3.0, 9.0, 1.0, &[])], 0.0, 900.0);
        assert_eq!(o.figures, None);
        assert!(o.missing.unwrap().reason.contains("went down"));
        // Restarted mid-cell and grown past the first reading by the end: the ends alone would
        // give 20 drafts, 60 tokens, 60 accepted (an acceptance of 100 %), all wrong.
        let s = [at(0.0, 100.0, 300.0, 50.0, &[]), at(400.0, 2.0, 6.0, 1.0, &[]), at(900.0, 120.0, 360.0, 110.0, &[])];
        let o = outcome(&s, 0.0, 900.0);
        assert_eq!(o.figures, None);
        assert!(o.missing.unwrap().reason.contains("went down"));
    }
}
