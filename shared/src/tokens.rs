//! Which source a decode cell's output-token count uses, checked against every other piece of
//! evidence the cell has (`docs/METHODOLOGY.md`, "Where tokens are counted from"). Pure: the
//! collector summarises each stream ([`StreamTokens`]) and the server's counter, [`decide`]
//! says which source counts, whether each chunk's tokens are known (what ITL needs), whether
//! any source deserves trust, and what disagreed.
//!
//! The evidence and its slack:
//! - **text chunks** — a chunk with text (content, reasoning or a tool call) is at least one
//!   token, so their count is a lower bound no source may fall below (no slack: fewer is
//!   impossible);
//! - **per-chunk usage** — a running total: it grows on every text chunk (no slack: a text
//!   chunk on which it did not grow means it is not a running total, as with a server that
//!   writes each chunk's own count, or 1, sglang#7084);
//! - **final usage** — per finished request, at least that request's text chunks (no slack);
//! - **the server counter** — its growth over the whole cell counts every token the server
//!   made for the cell's requests, and also tokens made after the client stopped reading and
//!   any other client's: it may not fall below the text chunks by more than one chunk per
//!   request (the last step's tokens may not be counted yet), and a usage count that differs
//!   from it by more than [`COUNTER_SHARE`] (or [`COUNTER_TOKENS_PER_REQUEST`] per request) is
//!   noted, not set aside (the counter cannot tell this cell's tokens from another client's).
//!
//! The client's own text through the server's tokenizer is not evidence here yet: the
//! collector keeps no text.

use crate::model::{TokenCheck, TokenCountSource, TokenDisagreement};

/// A usage count and the server counter disagree when they differ by more than this share of
/// the larger...
pub const COUNTER_SHARE: f64 = 0.05;
/// ... and by more than this many tokens per request of the cell (tokens made after the client
/// cancelled a request at the window's close, the last step not yet counted).
pub const COUNTER_TOKENS_PER_REQUEST: u64 = 4;

/// What one stream (request) of a cell says about its output tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamTokens {
    /// Token-carrying chunks the client recorded.
    pub chunks: u64,
    /// Of them, those with text: at least one token each.
    pub text_chunks: u64,
    /// Usage on every token chunk: its growth and where it did not grow. `None` when some
    /// text chunk came without usage.
    pub chunk_usage: Option<ChunkUsage>,
    /// The `usage.completion_tokens` the stream ended with, when it finished normally.
    pub final_usage: Option<u64>,
    /// Chunks inside the window.
    pub window_chunks: u64,
    /// Tokens inside the window by per-chunk usage (0 without it).
    pub window_usage: u64,
}

/// Per-chunk usage of one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkUsage {
    /// How far the running total grew over the stream's chunks, tokens.
    pub total: u64,
    /// Text chunks on which it did not grow (a running total always does).
    pub stalls: u64,
}

/// How one stream's chunks get their tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StreamCount {
    /// Each chunk's own count (per-chunk usage, or one per chunk for [`TokenCountSource::ChunkCount`]).
    PerChunk,
    /// This many tokens spread evenly over the stream's chunks (its final usage).
    Spread(u64),
    /// [`TokenDecision::ratio`] tokens per chunk.
    Ratio,
}

/// What [`decide`] made of a cell's evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenDecision {
    /// The source of the cell's figures.
    pub source: TokenCountSource,
    /// `Some(true)` when chunk counts were reconciled with a real count, `Some(false)` when
    /// they could not be (one per chunk), `None` when every chunk carried its usage.
    pub reconciled: Option<bool>,
    /// Per stream, in the order given: how its chunks get their tokens.
    pub streams: Vec<StreamCount>,
    /// Tokens per chunk for [`StreamCount::Ratio`].
    pub ratio: f64,
    /// Every chunk's own token count is known (reported, or one per chunk where nothing is
    /// reported at all): ITL per token may be given; otherwise only its mean.
    pub per_chunk: bool,
    /// Some count deserves trust. `false` when the server reported counts, each contradicts the
    /// stream, and only the lower bound (text chunks) is left: the cell's figures are not valid.
    pub trusted: bool,
    /// The sources side by side and what disagreed, for the results file.
    pub check: TokenCheck,
}

impl TokenDecision {
    /// The disagreements in words for the cell's reason, or `None` when the sources agree.
    pub fn note(&self) -> Option<String> {
        let d = &self.check.disagreements;
        if d.is_empty() {
            return None;
        }
        let what: Vec<&str> = d.iter().map(|d| d.reason.as_str()).collect();
        Some(format!("token counts disagree: {}; counted from {}", what.join("; "), source_words(self.source)))
    }
}

/// A source in a few words.
pub fn source_words(s: TokenCountSource) -> &'static str {
    match s {
        TokenCountSource::ContinuousUsage => "per-chunk usage",
        TokenCountSource::FinalUsage => "each request's final usage",
        TokenCountSource::ServerCounter => "the server's token counter",
        TokenCountSource::ChunkCount => "text chunks (a lower bound)",
        TokenCountSource::Reported => "the source tool's count",
    }
}

/// What the server counter says about the cell: its growth over the whole cell (tokens, for
/// the check) and over the window (for scaling the window's chunks). Both `None` without a
/// counter that grows while requests stream.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counter {
    /// Growth over the whole cell (from before the first stream opened to after the last ended).
    pub cell: Option<u64>,
    /// Growth over the window, read between scrapes.
    pub window: Option<f64>,
}

/// Decide the cell's token source from its streams and the server counter (the one rule; see
/// the module doc for the evidence and its slack). In order: per-chunk usage (when every stream
/// has it and it never stalls), each request's final usage (when none is below its text
/// chunks), the server counter over the window (when not below the text chunks), else one
/// token per chunk — trusted only when no source the server gave was set aside.
pub fn decide(streams: &[StreamTokens], counter: Counter) -> TokenDecision {
    let mut check = sources(streams, counter.cell);
    let with_chunks = || streams.iter().filter(|s| s.chunks > 0);
    let stalls: u64 = with_chunks().filter_map(|s| s.chunk_usage).map(|u| u.stalls).sum();
    if stalls > 0 {
        let (text, bad, of) = stalled(streams);
        check.disagreements.push(rejected(
            TokenCountSource::ContinuousUsage,
            format!(
                "per-chunk usage did not grow on {stalls} of {text} text chunks ({bad} of {of} requests): not a running total"
            ),
        ));
    }
    let exact = |s: &StreamTokens| s.chunks == 0 || (stalls == 0 && s.chunk_usage.is_some());
    if streams.iter().all(exact) {
        let n = streams.len();
        return finish(check, streams, TokenCountSource::ContinuousUsage, None, vec![StreamCount::PerChunk; n], 1.0);
    }
    let final_ok = final_usage_holds(streams, &mut check);
    let finals: Vec<&StreamTokens> =
        streams.iter().filter(|s| !exact(s) && s.final_usage.is_some() && final_ok).collect();
    let (tokens, chunks): (u64, u64) =
        finals.iter().fold((0, 0), |(t, c), s| (t + s.final_usage.unwrap_or(0), c + s.chunks));
    let counts = |s: &StreamTokens| match (exact(s), s.final_usage.filter(|_| final_ok)) {
        (true, _) => StreamCount::PerChunk,
        (false, Some(t)) => StreamCount::Spread(t),
        (false, None) => StreamCount::Ratio,
    };
    if chunks > 0 {
        let c: Vec<StreamCount> = streams.iter().map(counts).collect();
        return finish(check, streams, TokenCountSource::FinalUsage, Some(true), c, tokens as f64 / chunks as f64);
    }
    let counter_ok = counter_holds(streams, counter.cell, &mut check);
    let window_chunks: u64 = streams.iter().filter(|s| !exact(s)).map(|s| s.window_chunks).sum();
    let exact_tokens: u64 = streams.iter().filter(|s| exact(s)).map(|s| s.window_usage).sum();
    let scaled = counter.window.filter(|_| counter_ok).map(|t| t - exact_tokens as f64);
    let c: Vec<StreamCount> =
        streams.iter().map(|s| if exact(s) { StreamCount::PerChunk } else { StreamCount::Ratio }).collect();
    match scaled.filter(|t| *t > 0.0 && window_chunks > 0) {
        Some(t) => finish(check, streams, TokenCountSource::ServerCounter, Some(true), c, t / window_chunks as f64),
        None => finish(check, streams, TokenCountSource::ChunkCount, Some(false), c, 1.0),
    }
}

/// Every source's count over the cell, no verdict yet.
fn sources(streams: &[StreamTokens], counter: Option<u64>) -> TokenCheck {
    let sum = |v: Vec<u64>| (!v.is_empty()).then(|| v.iter().sum());
    let usage: Vec<u64> =
        streams.iter().filter(|s| s.chunks > 0).filter_map(|s| s.chunk_usage).map(|u| u.total).collect();
    let finished: Vec<&StreamTokens> = streams.iter().filter(|s| s.chunks > 0 && s.final_usage.is_some()).collect();
    TokenCheck {
        text_chunks: streams.iter().map(|s| s.text_chunks).sum(),
        chunk_usage: sum(usage),
        final_usage: sum(finished.iter().filter_map(|s| s.final_usage).collect()),
        final_usage_text_chunks: sum(finished.iter().map(|s| s.text_chunks).collect()),
        server_counter: counter,
        disagreements: vec![],
    }
}

/// Text chunks of the streams with per-chunk usage, the streams on which it stalled, and those
/// streams.
fn stalled(streams: &[StreamTokens]) -> (u64, usize, usize) {
    let with: Vec<(&StreamTokens, ChunkUsage)> =
        streams.iter().filter(|s| s.chunks > 0).filter_map(|s| s.chunk_usage.map(|u| (s, u))).collect();
    let text = with.iter().map(|(s, _)| s.text_chunks).sum();
    (text, with.iter().filter(|(_, u)| u.stalls > 0).count(), with.len())
}

/// Whether every finished request's final usage covers its text chunks; a disagreement
/// otherwise.
fn final_usage_holds(streams: &[StreamTokens], check: &mut TokenCheck) -> bool {
    let finished: Vec<(u64, u64)> =
        streams.iter().filter(|s| s.chunks > 0).filter_map(|s| s.final_usage.map(|f| (f, s.text_chunks))).collect();
    let below: Vec<&(u64, u64)> = finished.iter().filter(|(f, t)| f < t).collect();
    let Some(&&(usage, text)) = below.iter().max_by_key(|(f, t)| t - f) else { return true };
    check.disagreements.push(rejected(
        TokenCountSource::FinalUsage,
        format!(
            "final usage below the text chunks in {} of {} finished requests (e.g. {usage} tokens for {text} chunks)",
            below.len(),
            finished.len()
        ),
    ));
    false
}

/// Whether the server counter over the cell covers the text chunks (less one per request); a
/// disagreement otherwise. `true` without its figure over the cell (nothing to check against).
fn counter_holds(streams: &[StreamTokens], counter: Option<u64>, check: &mut TokenCheck) -> bool {
    let Some(c) = counter else { return true };
    let text: u64 = streams.iter().map(|s| s.text_chunks).sum();
    if c + streams.len() as u64 >= text {
        return true;
    }
    check.disagreements.push(rejected(
        TokenCountSource::ServerCounter,
        format!("the server's token counter grew by {c} over the cell, below its {text} text chunks"),
    ));
    false
}

/// The usage count over the whole cell against the server counter: a note when they differ
/// beyond the slack (the counter also counts other clients' tokens, so it is not set aside).
fn counter_note(
    streams: &[StreamTokens],
    counts: &[StreamCount],
    source: TokenCountSource,
    ratio: f64,
    check: &mut TokenCheck,
) {
    let (Some(c), TokenCountSource::ContinuousUsage | TokenCountSource::FinalUsage) = (check.server_counter, source)
    else {
        return;
    };
    let counted: f64 = streams
        .iter()
        .zip(counts)
        .map(|(s, n)| match n {
            StreamCount::PerChunk => s.chunk_usage.map_or(0.0, |u| u.total as f64),
            StreamCount::Spread(t) => *t as f64,
            StreamCount::Ratio => s.chunks as f64 * ratio,
        })
        .sum();
    let per_request = (COUNTER_TOKENS_PER_REQUEST * streams.len() as u64) as f64;
    let slack = (COUNTER_SHARE * counted.max(c as f64)).max(per_request);
    if (counted - c as f64).abs() > slack {
        check.disagreements.push(TokenDisagreement {
            source: TokenCountSource::ServerCounter,
            rejected: false,
            reason: format!(
                "the server's token counter grew by {c} over the cell, {} counts {counted:.0}",
                source_words(source)
            ),
        });
    }
}

fn rejected(source: TokenCountSource, reason: String) -> TokenDisagreement {
    TokenDisagreement { source, rejected: true, reason }
}

/// The decision, with what it implies: whether each chunk's tokens are known, whether the count
/// deserves trust, the counter's note.
fn finish(
    mut check: TokenCheck,
    streams: &[StreamTokens],
    source: TokenCountSource,
    reconciled: Option<bool>,
    counts: Vec<StreamCount>,
    ratio: f64,
) -> TokenDecision {
    counter_note(streams, &counts, source, ratio, &mut check);
    let one_per_chunk = |s: &StreamTokens, c: &StreamCount| match c {
        StreamCount::PerChunk => true,
        StreamCount::Spread(t) => *t == s.chunks && s.chunks == s.text_chunks,
        StreamCount::Ratio => false,
    };
    let per_chunk = match source {
        TokenCountSource::ContinuousUsage => true,
        // Nothing reported at all: one per chunk is what the cell claims (marked approximate).
        TokenCountSource::ChunkCount => true,
        _ => streams.iter().zip(&counts).all(|(s, c)| s.chunks == 0 || one_per_chunk(s, c)),
    };
    let trusted = !(source == TokenCountSource::ChunkCount && check.disagreements.iter().any(|d| d.rejected));
    TokenDecision { source, reconciled, streams: counts, ratio, per_chunk, trusted, check }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `chunks` text chunks.
    fn s(chunks: u64, chunk_usage: Option<(u64, u64)>, final_usage: Option<u64>) -> StreamTokens {
        StreamTokens {
            chunks,
            text_chunks: chunks,
            chunk_usage: chunk_usage.map(|(total, stalls)| ChunkUsage { total, stalls }),
            final_usage,
            window_chunks: chunks,
            window_usage: chunk_usage.map_or(0, |u| u.0),
        }
    }

    /// One row: the streams, the counter over the cell and the window; the source, whether
    /// chunks are known, trusted, and the sources that disagreed (rejected or noted).
    struct Row {
        what: &'static str,
        streams: Vec<StreamTokens>,
        counter: Counter,
        source: TokenCountSource,
        per_chunk: bool,
        trusted: bool,
        disagreed: &'static [(TokenCountSource, bool)],
    }

    fn rows() -> Vec<Row> {
        use TokenCountSource::*;
        let counter = |cell: u64, window: f64| Counter { cell: Some(cell), window: Some(window) };
        vec![
            Row {
                what: "usage on every chunk, a running total (MTP: 64 chunks, 128 tokens)",
                streams: vec![s(64, Some((128, 0)), Some(128)), s(30, Some((60, 0)), None)],
                counter: counter(190, 150.0),
                source: ContinuousUsage,
                per_chunk: true,
                trusted: true,
                disagreed: &[],
            },
            Row {
                what: "usage stuck at 1 on every chunk (sglang#7084), with a counter",
                streams: vec![s(64, Some((1, 63)), Some(1)), s(30, Some((1, 29)), None)],
                counter: counter(94, 80.0),
                source: ServerCounter,
                per_chunk: false,
                trusted: true,
                disagreed: &[(ContinuousUsage, true), (FinalUsage, true)],
            },
            Row {
                what: "usage stuck at 1 on every chunk, no counter: only the lower bound is left",
                streams: vec![s(64, Some((1, 63)), Some(1))],
                counter: Counter::default(),
                source: ChunkCount,
                per_chunk: true,
                trusted: false,
                disagreed: &[(ContinuousUsage, true), (FinalUsage, true)],
            },
            Row {
                what: "usage stuck at 1 in the final usage only, with a counter",
                streams: vec![s(64, None, Some(1)), s(64, None, Some(1)), s(10, None, None)],
                counter: counter(138, 100.0),
                source: ServerCounter,
                per_chunk: false,
                trusted: true,
                disagreed: &[(FinalUsage, true)],
            },
            Row {
                what: "per-chunk usage holding each chunk's own count, a true final usage",
                streams: vec![s(64, Some((3, 62)), Some(128)), s(20, Some((3, 18)), None)],
                counter: Counter::default(),
                source: FinalUsage,
                per_chunk: false,
                trusted: true,
                disagreed: &[(ContinuousUsage, true)],
            },
            Row {
                what: "speculative chunks with final usage only",
                streams: vec![s(64, None, Some(128)), s(20, None, None)],
                counter: Counter::default(),
                source: FinalUsage,
                per_chunk: false,
                trusted: true,
                disagreed: &[],
            },
            Row {
                what: "final usage only, one token per chunk, every request finished",
                streams: vec![s(64, None, Some(64)), s(64, None, Some(64))],
                counter: counter(128, 100.0),
                source: FinalUsage,
                per_chunk: true,
                trusted: true,
                disagreed: &[],
            },
            Row {
                what: "no usage at all, a counter",
                streams: vec![s(50, None, None)],
                counter: counter(100, 100.0),
                source: ServerCounter,
                per_chunk: false,
                trusted: true,
                disagreed: &[],
            },
            Row {
                what: "no usage at all, a counter below the text chunks",
                streams: vec![s(50, None, None), s(50, None, None)],
                counter: counter(10, 10.0),
                source: ChunkCount,
                per_chunk: true,
                trusted: false,
                disagreed: &[(ServerCounter, true)],
            },
            Row {
                what: "no usage, no counter (llama.cpp without usage)",
                streams: vec![s(50, None, None)],
                counter: Counter::default(),
                source: ChunkCount,
                per_chunk: true,
                trusted: true,
                disagreed: &[],
            },
            Row {
                what: "usage on every chunk that counts chunks where the counter sees 3 tokens each",
                streams: vec![s(100, Some((100, 0)), Some(100)), s(100, Some((100, 0)), Some(100))],
                counter: counter(600, 600.0),
                source: ContinuousUsage,
                per_chunk: true,
                trusted: true,
                disagreed: &[(ServerCounter, false)],
            },
        ]
    }

    #[test]
    fn each_shape_gets_its_source_and_its_disagreements() {
        let mut off = vec![];
        for r in rows() {
            let d = decide(&r.streams, r.counter);
            let got: Vec<(TokenCountSource, bool)> =
                d.check.disagreements.iter().map(|x| (x.source, x.rejected)).collect();
            if (d.source, d.per_chunk, d.trusted, got.as_slice()) != (r.source, r.per_chunk, r.trusted, r.disagreed) {
                off.push(format!(
                    "{}: got {:?} per chunk {} trusted {} {:?}",
                    r.what, d.source, d.per_chunk, d.trusted, d.check
                ));
            }
        }
        assert!(off.is_empty(), "{}", off.join("\n"));
    }

    #[test]
    fn the_counts_follow_the_source() {
        // Final usage: finished streams spread their own, the others at the finished ones' rate.
        let d = decide(&[s(64, None, Some(128)), s(20, None, None)], Counter::default());
        assert_eq!(d.streams, [StreamCount::Spread(128), StreamCount::Ratio]);
        assert_eq!(d.ratio, 2.0);
        // The counter over the window, less the exact streams' tokens, over the other chunks.
        let streams = [s(10, None, None), s(10, Some((20, 0)), Some(20))];
        let d = decide(&streams, Counter { cell: Some(60), window: Some(50.0) });
        assert_eq!((d.source, d.ratio), (TokenCountSource::ServerCounter, 3.0));
        assert_eq!(d.streams, [StreamCount::Ratio, StreamCount::PerChunk]);
    }

    #[test]
    fn the_note_names_what_disagreed_and_the_source_used() {
        let d = decide(&[s(64, None, Some(1))], Counter { cell: Some(64), window: Some(60.0) });
        let note = d.note().unwrap();
        assert!(
            note.contains(
                "final usage below the text chunks in 1 of 1 finished requests (e.g. 1 tokens for 64 chunks)"
            ),
            "{note}"
        );
        assert!(note.ends_with("counted from the server's token counter"), "{note}");
        assert_eq!(decide(&[s(64, Some((64, 0)), Some(64))], Counter::default()).note(), None);
    }
}
