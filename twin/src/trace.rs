//! Ground truth: the twin's clock and its JSON Lines trace (`--trace FILE`).
//!
//! One line per request, written when the request ends (finished, failed or abandoned):
//!
//! ```json
//! {"request":3,"id":"chatcmpl-…","endpoint":"chat","stream":true,"arrival_ms":12.5,"engine_ms":12.9,
//!  "prompt_tokens":8200,"prompt_blocks":["9f3c…", …],"cached_tokens":8192,"max_tokens":64,"output_tokens":64,
//!  "status":200,"finish_reason":"length","outcome":"complete","faults":[],
//!  "chunks":[{"i":0,"planned_ms":13.1,"written_ms":13.2,"tokens":0,"kind":"role"}, …]}
//! ```
//!
//! All times are ms since the twin started, from one monotonic clock ([`Clock`]). `planned_ms`
//! is the end of the engine step that produced the chunk (the schedule); `written_ms` is when
//! the chunk's bytes were handed to the connection. Their difference is the twin's lag.
//! `kind` is `role`, `reasoning`, `content`, `finish` (a chunk that also carries
//! `finish_reason`), `usage`, `error`, `done` or `keepalive`. `prompt_blocks` holds a hash of
//! each whole block of [`BLOCK_TOKENS`] prompt tokens (the twin's tokens, chat template
//! included), each block hashed on its own: two prompts share block `i` exactly when their
//! `i`-th hashes are equal (how a trace replay's shared prefixes are checked).

use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The twin's monotonic clock (`std::time::Instant`): ms since start, times `scale` (1 = real
/// time; >1 runs the twin's schedule faster than real time, for tests).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
    scale: f64,
}

impl Clock {
    /// A clock starting now. A scale that is not a positive number means 1.
    pub fn start(scale: f64) -> Clock {
        Clock { origin: Instant::now(), scale: if scale.is_finite() && scale > 0.0 { scale } else { 1.0 } }
    }
    /// Twin time now (ms).
    pub fn now_ms(&self) -> f64 {
        self.origin.elapsed().as_secs_f64() * 1000.0 * self.scale
    }
    /// The real instant at which twin time reaches `ms`. A time too far ahead for `Instant` (or
    /// not a number) saturates to a day from now: the engine loop wakes at least that often.
    pub fn instant_at(&self, ms: f64) -> Instant {
        let far = || Instant::now() + std::time::Duration::from_secs(86_400);
        match std::time::Duration::try_from_secs_f64((ms / self.scale / 1000.0).max(0.0)) {
            Ok(d) => self.origin.checked_add(d).unwrap_or_else(far),
            Err(_) => far(),
        }
    }
}

/// One chunk written (or attempted) on a stream.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChunkRecord {
    /// Chunk number within the response, from 0.
    pub i: u32,
    /// Planned time (ms): end of the engine step that produced it, or when it was decided.
    pub planned_ms: f64,
    /// When its bytes were handed to the connection (ms).
    pub written_ms: f64,
    /// Output tokens it carries.
    pub tokens: u32,
    /// What it is (see the module docs).
    pub kind: &'static str,
}

/// One request's ground truth.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RequestRecord {
    /// Request number (order of arrival, from 1).
    pub request: u64,
    /// Response id (`chatcmpl-…`, `cmpl-…`).
    pub id: String,
    /// `chat` or `completions`.
    pub endpoint: &'static str,
    /// Whether the response was streamed.
    pub stream: bool,
    /// When the request arrived (ms): its body had been read.
    pub arrival_ms: f64,
    /// When it was handed to the engine (ms), after parsing and tokenizing; null when it never
    /// was (rejected). TTFT in the schedule's own terms is first token − this.
    pub engine_ms: Option<f64>,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// A hash of each whole block of [`BLOCK_TOKENS`] prompt tokens, in order (hex; each block
    /// on its own, not chained), from [`block_digests`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prompt_blocks: Vec<String>,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u32,
    /// Effective `max_tokens`.
    pub max_tokens: u32,
    /// Output tokens sent.
    pub output_tokens: u32,
    /// HTTP status.
    pub status: u16,
    /// `length`, `stop`, or null.
    pub finish_reason: Option<&'static str>,
    /// `complete`, `fault`, `rejected` or `disconnected`.
    pub outcome: &'static str,
    /// Faults that struck this request.
    pub faults: Vec<String>,
    /// Chunks in order (streams; a non-streamed answer has one `finish` chunk).
    pub chunks: Vec<ChunkRecord>,
    /// With speculative decoding on, for a request the engine ran: what speculation did for it
    /// there (drafts, draft tokens, accepted tokens, accepted per position), counted with
    /// `/metrics`'s counters, so every draft those count is in exactly one request's line.
    /// Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<crate::engine::SpecTally>,
}

/// Tokens in a block of `prompt_blocks` (Mooncake's block size).
pub const BLOCK_TOKENS: usize = 512;

/// A hash (FNV-1a over the token ids, hex) of each whole block of [`BLOCK_TOKENS`] tokens.
pub fn block_digests(tokens: &[u32]) -> Vec<String> {
    tokens
        .chunks_exact(BLOCK_TOKENS)
        .map(|block| {
            let h = block.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &t| {
                let mut h = h;
                for b in t.to_le_bytes() {
                    h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
                }
                h
            });
            format!("{h:016x}")
        })
        .collect()
}

/// Where trace lines go (shared; cheap to clone). Each request's line is written (flushed) as
/// the request ends, so the file can be read while the twin runs.
#[derive(Debug, Clone, Default)]
pub struct TraceSink {
    out: Option<Arc<Mutex<BufWriter<File>>>>,
}

impl TraceSink {
    /// A sink writing to `path` (created or truncated).
    pub fn create(path: &Path) -> std::io::Result<TraceSink> {
        let f = File::create(path)?;
        Ok(TraceSink { out: Some(Arc::new(Mutex::new(BufWriter::new(f)))) })
    }
    /// A sink that drops everything.
    pub fn none() -> TraceSink {
        TraceSink::default()
    }
    /// Append one request.
    pub fn write(&self, rec: &RequestRecord) {
        if let Some(out) = &self.out {
            if let Ok(line) = serde_json::to_string(rec) {
                if let Ok(mut w) = out.lock() {
                    let _ = w.write_all(line.as_bytes());
                    let _ = w.write_all(b"\n");
                    // One write per request: a reader (or a killed twin) sees whole lines.
                    let _ = w.flush();
                }
            }
        }
    }
    /// Flush buffered lines to the file.
    pub fn flush(&self) {
        if let Some(out) = &self.out {
            if let Ok(mut w) = out.lock() {
                let _ = w.flush();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any scale and any twin time give an instant: a tiny scale (`1e-300`) or a time far ahead
    /// used to panic in `Duration::from_secs_f64`.
    #[test]
    fn instants_saturate_never_panic() {
        for scale in [1e-300, 1e-3, 1.0, 1e3, 1e300, f64::MIN_POSITIVE, 0.0, -1.0, f64::NAN, f64::INFINITY] {
            let c = Clock::start(scale);
            for ms in [0.0, 1.0, 1e12, 1e300, f64::MAX, f64::INFINITY, f64::NAN, -5.0] {
                let at = c.instant_at(ms);
                assert!(at >= c.origin, "scale {scale}, ms {ms}");
            }
            assert!(c.now_ms().is_finite() || scale >= 1e300, "scale {scale}");
        }
    }

    #[test]
    fn block_digests_tell_equal_blocks_from_different_ones() {
        let a: Vec<u32> = (0..1300).collect();
        let mut b = a.clone();
        b[700] = 9; // inside the second block
        let (da, db) = (block_digests(&a), block_digests(&b));
        assert_eq!(da.len(), 2, "whole blocks only");
        assert_eq!(da[0], db[0]);
        assert_ne!(da[1], db[1]);
    }
}
