//! The trace's speculative-decoding truth: with speculative decoding on, a request's trace line
//! carries what the engine counted for it ([`crate::engine::SpecTally`]), so every draft
//! `/metrics` counts is in exactly one line. The engine loop reports the requests that left the
//! engine ([`spec_ended`]); a guard ([`super::guard`]) takes a finished request's count, and
//! leaves an aborted request's line here until the engine has applied the abort.

use super::AppState;
use crate::engine::SpecTally;
use crate::trace::RequestRecord;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// The trace's speculative-decoding truth (speculative decoding on): a request's line carries
/// what the engine counted for it, every draft of `/metrics` in exactly one line. A finished
/// request's count is here before its last output reaches the writer; an aborted request's
/// line waits here until the engine has applied the abort (its last step may have drafted after
/// the client left), then the engine loop writes it ([`spec_ended`]).
#[derive(Debug, Default)]
pub(crate) struct SpecLines {
    /// Lines of aborted requests, by engine id, waiting for their count.
    pub(super) waiting: HashMap<u64, RequestRecord>,
    /// Counts of requests that left the engine, by engine id, not yet in a line.
    pub(super) ended: HashMap<u64, SpecTally>,
}

/// The engine loop's report of requests that left the engine: a waiting line is completed
/// and written, other counts are kept for their guard.
pub(crate) fn spec_ended(state: &AppState, ended: Vec<(u64, SpecTally)>) {
    if ended.is_empty() {
        return;
    }
    let ready: Vec<RequestRecord> = {
        let Ok(mut l) = state.spec_lines.lock() else { return };
        let mut ready = Vec::new();
        for (id, tally) in ended {
            match l.waiting.remove(&id) {
                Some(mut rec) => {
                    rec.spec = Some(tally);
                    ready.push(rec);
                }
                None => {
                    l.ended.insert(id, tally);
                }
            }
        }
        ready
    };
    for rec in ready {
        state.trace.write(&rec);
        state.open_guards.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Write every waiting line with the count the engine has for it (twin shutdown: the engine
/// has stopped).
pub(crate) fn flush_spec_lines(state: &AppState) {
    let lines: Vec<RequestRecord> = match state.spec_lines.lock() {
        Ok(mut l) => {
            let waiting: Vec<(u64, RequestRecord)> = l.waiting.drain().collect();
            waiting
                .into_iter()
                .map(|(id, mut rec)| {
                    rec.spec = l.ended.remove(&id);
                    rec
                })
                .collect()
        }
        Err(_) => return,
    };
    for rec in lines {
        state.trace.write(&rec);
        state.open_guards.fetch_sub(1, Ordering::SeqCst);
    }
}
