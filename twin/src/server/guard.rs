//! A generation request's guard: when the response ends or is dropped (the client left), it
//! aborts the request in the engine, counts it in `/metrics` and writes its trace line. The
//! route ([`super::generate`]) makes it; the writer ([`super::stream`]) fills it in.

use super::engine_loop::EngineCmd;
use super::{AppState, Endpoint};
use crate::engine::SpecTally;
use crate::trace::RequestRecord;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The trace's speculative-decoding truth (speculative decoding on): a request's line carries
/// what the engine counted for it, every draft of `/metrics` in exactly one line. A finished
/// request's count is here before its last output reaches the writer; an aborted request's
/// line waits here until the engine has applied the abort (its last step may have drafted after
/// the client left), then the engine loop writes it ([`spec_ended`]).
#[derive(Debug, Default)]
pub(crate) struct SpecLines {
    /// Lines of aborted requests, by engine id, waiting for their count.
    waiting: HashMap<u64, RequestRecord>,
    /// Counts of requests that left the engine, by engine id, not yet in a line.
    ended: HashMap<u64, SpecTally>,
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

/// Aborts the engine request and writes the trace line when the response ends or is dropped
/// (client gone).
pub(super) struct Guard {
    state: Arc<AppState>,
    /// The request's trace line, filled in as it goes.
    pub(super) record: RequestRecord,
    /// The engine's id of the request, once submitted.
    pub(super) engine_id: Option<u64>,
    /// The engine delivered the last output.
    pub(super) finished: bool,
}

impl Guard {
    /// A guard for request `n`, arrived at `arrival_ms`, that has done nothing yet.
    pub(super) fn new(state: Arc<AppState>, ep: Endpoint, n: u64, id: String, arrival_ms: f64) -> Guard {
        let endpoint = match ep {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
        };
        let record = RequestRecord {
            request: n,
            id,
            endpoint,
            arrival_ms,
            status: 200,
            outcome: "complete",
            ..Default::default()
        };
        state.open_guards.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Guard { state, record, engine_id: None, finished: false }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let speculating = self.state.cfg.profile.spec_tokens > 0;
        let mut abort = None;
        if let Some(id) = self.engine_id {
            if !self.finished {
                abort = Some(id);
                if self.record.outcome == "complete" {
                    self.record.outcome = "disconnected";
                }
            }
        }
        if self.record.status == 200 {
            let reason = if self.finished && self.record.outcome == "complete" {
                self.record.finish_reason.unwrap_or("stop")
            } else {
                "abort"
            };
            if let Ok(mut m) = self.state.metrics.lock() {
                *m.success.entry(reason).or_insert(0) += 1;
            }
        }
        if let (true, Some(id)) = (speculating, self.engine_id) {
            let Ok(mut l) = self.state.spec_lines.lock() else { return };
            if let Some(tally) = l.ended.remove(&id) {
                self.record.spec = Some(tally);
            } else if let Some(id) = abort {
                // The engine loop writes the line once it has applied the abort.
                l.waiting.insert(id, std::mem::take(&mut self.record));
                drop(l);
                if self.state.engine_tx.send(EngineCmd::Abort(id)).is_err() {
                    flush_spec_lines(&self.state); // the engine has stopped
                }
                return;
            }
        }
        if let Some(id) = abort {
            let _ = self.state.engine_tx.send(EngineCmd::Abort(id));
        }
        self.state.trace.write(&self.record);
        self.state.open_guards.fetch_sub(1, Ordering::SeqCst);
    }
}
