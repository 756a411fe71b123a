//! Properties of the token-count rule (`speedmatrix_schema::tokens::decide`) over any evidence:
//! no count below the lower bound is ever used, honest servers raise no disagreement, ITL per
//! token only where each chunk's count is known, and a cell is untrusted only when every count
//! the server reported was set aside.

use proptest::prelude::*;
use speedmatrix_schema::tokens::{decide, ChunkUsage, Counter, StreamCount, StreamTokens};
use speedmatrix_schema::TokenCountSource;

/// Any stream: counts in any relation to each other (usage stuck, own counts, too low, too high).
fn any_stream() -> impl Strategy<Value = StreamTokens> {
    (0u64..200, 0u64..=100, proptest::option::of((0u64..600, 0u64..=100)), proptest::option::of(0u64..600), 0u64..=100)
        .prop_map(|(chunks, text_pct, usage, final_usage, window_pct)| {
            let text_chunks = chunks * text_pct / 100;
            StreamTokens {
                chunks,
                text_chunks,
                chunk_usage: usage
                    .map(|(total, stall_pct)| ChunkUsage { total, stalls: text_chunks * stall_pct / 100 }),
                final_usage,
                window_chunks: chunks * window_pct / 100,
                window_usage: usage.map_or(0, |(t, _)| t * window_pct / 100),
            }
        })
}

fn any_counter() -> impl Strategy<Value = Counter> {
    (proptest::option::of(0u64..20_000), proptest::option::of(0.0f64..20_000.0))
        .prop_map(|(cell, window)| Counter { cell, window })
}

/// An honest stream of `tokens` in `chunks` chunks (`k` tokens a chunk, all with text),
/// finished or not, with usage on every chunk or in the final chunk only.
fn honest_stream(k: u64) -> impl Strategy<Value = (StreamTokens, u64)> {
    (1u64..200, any::<bool>(), any::<bool>()).prop_map(move |(chunks, per_chunk, finished)| {
        let tokens = chunks * k;
        let s = StreamTokens {
            chunks,
            text_chunks: chunks,
            chunk_usage: per_chunk.then_some(ChunkUsage { total: tokens, stalls: 0 }),
            final_usage: finished.then_some(tokens),
            window_chunks: chunks,
            window_usage: if per_chunk { tokens } else { 0 },
        };
        (s, tokens)
    })
}

proptest! {
    #[test]
    fn no_count_below_the_lower_bound_is_used(streams in proptest::collection::vec(any_stream(), 0..12), counter in any_counter()) {
        let d = decide(&streams, counter);
        prop_assert_eq!(d.streams.len(), streams.len());
        let with_chunks = || streams.iter().filter(|s| s.chunks > 0);
        match d.source {
            TokenCountSource::ContinuousUsage => {
                prop_assert!(with_chunks().all(|s| s.chunk_usage.is_some_and(|u| u.stalls == 0)), "{:?}", d);
            }
            TokenCountSource::FinalUsage => {
                prop_assert!(with_chunks().filter_map(|s| s.final_usage.map(|f| (f, s.text_chunks))).all(|(f, t)| f >= t), "{:?}", d);
            }
            TokenCountSource::ServerCounter => {
                let text: u64 = streams.iter().map(|s| s.text_chunks).sum();
                // Checked where the counter's growth over the whole cell is known.
                prop_assert!(counter.cell.is_none_or(|c| c + streams.len() as u64 >= text), "{:?}", d);
                prop_assert!(d.ratio > 0.0 && d.ratio.is_finite());
            }
            _ => {}
        }
        // Each stream's own count only from a source that holds.
        for (s, how) in streams.iter().zip(&d.streams) {
            if let StreamCount::Spread(t) = how {
                prop_assert!(*t >= s.text_chunks && Some(*t) == s.final_usage);
            }
        }
    }

    #[test]
    fn itl_per_token_only_where_each_chunk_is_known(streams in proptest::collection::vec(any_stream(), 0..12), counter in any_counter()) {
        let d = decide(&streams, counter);
        if d.per_chunk {
            for (s, how) in streams.iter().zip(&d.streams).filter(|(s, _)| s.chunks > 0) {
                let known = match how {
                    StreamCount::PerChunk => true,
                    StreamCount::Spread(t) => *t == s.chunks && s.chunks == s.text_chunks,
                    // One token a chunk is what a chunk-count cell claims (marked approximate).
                    StreamCount::Ratio => d.source == TokenCountSource::ChunkCount,
                };
                prop_assert!(known, "{:?} {:?} {:?}", d.source, s, how);
            }
        }
        prop_assert!(d.source != TokenCountSource::ServerCounter || !d.per_chunk || d.streams.iter().all(|c| *c == StreamCount::PerChunk));
    }

    #[test]
    fn untrusted_only_when_every_reported_count_was_set_aside(streams in proptest::collection::vec(any_stream(), 0..12), counter in any_counter()) {
        let d = decide(&streams, counter);
        if !d.trusted {
            prop_assert_eq!(d.source, TokenCountSource::ChunkCount);
            prop_assert!(d.check.disagreements.iter().any(|x| x.rejected));
            prop_assert!(d.note().is_some());
        }
        // Every disagreement names a source and says what was seen.
        prop_assert!(d.check.disagreements.iter().all(|x| !x.reason.is_empty()));
        prop_assert_eq!(d.check.text_chunks, streams.iter().map(|s| s.text_chunks).sum::<u64>());
    }

    #[test]
    fn honest_servers_raise_no_disagreement(
        streams in (1u64..4).prop_flat_map(|k| proptest::collection::vec(honest_stream(k), 1..12)),
        extra_pct in 0u64..=4,
        with_counter in any::<bool>(),
    ) {
        let truth: u64 = streams.iter().map(|(_, t)| t).sum();
        // The counter also counts the tokens made after the client stopped reading: a few percent.
        let cell = truth + truth * extra_pct / 100;
        let counter = if with_counter { Counter { cell: Some(cell), window: Some(cell as f64) } } else { Counter::default() };
        let evidence: Vec<StreamTokens> = streams.iter().map(|(s, _)| *s).collect();
        let d = decide(&evidence, counter);
        prop_assert!(d.check.disagreements.is_empty(), "{:?}", d.check);
        prop_assert!(d.trusted);
        let any_final = evidence.iter().any(|s| s.chunk_usage.is_none() && s.final_usage.is_some());
        let all_usage = evidence.iter().all(|s| s.chunk_usage.is_some());
        if all_usage {
            prop_assert_eq!(d.source, TokenCountSource::ContinuousUsage);
            prop_assert!(d.per_chunk);
        } else if any_final {
            prop_assert_eq!(d.source, TokenCountSource::FinalUsage);
        }
    }
}
