//! A generation request's guard: when the response ends or is dropped (the client left), it
//! aborts the request in the engine, counts it in `/metrics` and writes its trace line. The
//! route ([`super::generate`]) makes it; the writer ([`super::stream`]) fills it in.

use super::engine_loop::EngineCmd;
use super::spec_lines::flush_spec_lines;
use super::{AppState, Endpoint};
use crate::trace::RequestRecord;
use std::sync::atomic::Ordering;
use std::sync::Arc;

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
