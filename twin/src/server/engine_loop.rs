//! The engine loop: the pure [`Engine`] model run in real time on its own OS thread.
//!
//! Steps run back to back while there is work. A step's outputs leave one after another, as
//! vLLM's API server hands them out: the i-th output of a step is planned at
//! `step end + i × output_ms_per_request` and is handed to its request's writer when the twin
//! clock reaches that time (while the next step already runs). Waiting is a channel receive
//! with a deadline, so commands (new requests, aborts) are applied as they come and deadlines
//! are met to within the OS timer's precision (tens of µs), not a 1 ms timer tick.
//!
//! This module owns the commands the handlers send ([`EngineCmd`]), what a request's writer
//! receives ([`Delivery`]), and the engine-side figures of `/metrics` (queue sizes, KV usage,
//! counters, and the TTFT, ITL and E2E histograms observed at planned times).

use super::metrics::Metrics;
use super::AppState;
use crate::engine::{Engine, Step, Submit};
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use tokio::sync::mpsc;

/// A step's output for one request, as the engine loop hands it to the request's writer.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    /// Output tokens in this step.
    pub(super) tokens: u32,
    /// When the output is planned to leave (twin ms).
    pub(super) planned_ms: f64,
    /// The request's first output (its prefill is done).
    pub(super) first: bool,
    /// The request's last output.
    pub(super) finished: bool,
    /// Prompt tokens served from the prefix cache.
    pub(super) cached: u32,
}

/// What the handlers tell the engine thread.
pub(crate) enum EngineCmd {
    /// A new request and where its outputs go.
    Submit(Submit, mpsc::UnboundedSender<Delivery>),
    /// The client is gone: drop the request.
    Abort(u64),
    /// Empty the prefix cache (`POST /reset_prefix_cache`).
    ResetPrefixCache,
    /// Stop the engine (twin shutdown); open streams are cut.
    Shutdown,
}

/// Why a wait ended.
enum Woke {
    /// The deadline came (a step ended or an output is due).
    Deadline,
    /// A command was applied.
    Command,
    /// Shutdown, or every handler is gone.
    Stop,
}

/// The loop's state between wake-ups.
struct EngineLoop {
    state: Arc<AppState>,
    engine: Engine,
    /// Time to hand out one request's output of a step (ms).
    per_output_ms: f64,
    senders: HashMap<u64, mpsc::UnboundedSender<Delivery>>,
    /// id → (arrival ms, last output ms).
    times: HashMap<u64, (f64, f64)>,
    /// Outputs planned but not yet handed to their writers, in planned order.
    pending: VecDeque<(u64, Delivery)>,
    /// The step running now.
    current: Option<Step>,
    /// End of the last step, when the next one follows it back to back.
    prev_end: Option<f64>,
}

/// Run the engine until shutdown (see the module docs).
pub(crate) fn engine_loop(state: Arc<AppState>, rx: Receiver<EngineCmd>) {
    let mut lp = EngineLoop::new(state);
    loop {
        lp.start_step();
        match lp.wait(&rx) {
            Woke::Stop => return,
            Woke::Command => continue,
            Woke::Deadline => {}
        }
        let now = lp.state.clock.now_ms();
        lp.finish_step(now);
        lp.deliver_due(now);
    }
}

/// Copy the engine's queue sizes, KV usage and counters into the metrics.
fn snapshot(engine: &Engine, m: &mut Metrics) {
    m.running = engine.num_running();
    m.waiting = engine.num_waiting();
    m.kv_usage = engine.kv_usage();
    m.counters = engine.counters.clone();
}

impl EngineLoop {
    fn new(state: Arc<AppState>) -> EngineLoop {
        let profile = &state.cfg.profile;
        EngineLoop {
            per_output_ms: profile.output_ms_per_request.max(0.0),
            engine: Engine::new(profile, state.cfg.seed),
            state,
            senders: HashMap::new(),
            times: HashMap::new(),
            pending: VecDeque::new(),
            current: None,
            prev_end: None,
        }
    }

    fn publish(&self) {
        snapshot(&self.engine, &mut self.state.metrics.lock().expect("metrics lock"));
    }

    /// Start the next step when none runs and there is work: right after the previous one, or
    /// now after an idle spell.
    fn start_step(&mut self) {
        if self.current.is_none() && !self.engine.is_idle() {
            let start = self.prev_end.unwrap_or_else(|| self.state.clock.now_ms());
            self.current = self.engine.step(start);
            super::spec_lines::spec_ended(&self.state, self.engine.take_ended());
            self.publish();
            if self.current.is_none() {
                self.prev_end = None;
            }
        }
    }

    /// The next deadline: the end of the running step, the next output due or the next request
    /// leaving the front end, whichever is first; none when there is nothing to do.
    fn next_wake(&self) -> Option<f64> {
        // A request in the front end wakes the loop when it reaches the waiting queue.
        let arrival = if self.current.is_none() { self.engine.next_arrival_ms() } else { None };
        [self.current.as_ref().map(|s| s.end_ms), self.pending.front().map(|(_, d)| d.planned_ms), arrival]
            .into_iter()
            .flatten()
            .reduce(f64::min)
    }

    /// Wait for the next deadline (forever when idle), applying a command if one comes first.
    fn wait(&mut self, rx: &Receiver<EngineCmd>) -> Woke {
        let Some(wake) = self.next_wake() else {
            self.prev_end = None;
            self.publish();
            return match rx.recv() {
                Ok(cmd) => self.apply(cmd),
                Err(_) => Woke::Stop,
            };
        };
        let deadline = self.state.clock.instant_at(wake);
        let now = std::time::Instant::now();
        if deadline <= now {
            return Woke::Deadline;
        }
        match rx.recv_timeout(deadline - now) {
            Ok(cmd) => self.apply(cmd),
            Err(RecvTimeoutError::Timeout) => Woke::Deadline,
            Err(RecvTimeoutError::Disconnected) => Woke::Stop,
        }
    }

    fn apply(&mut self, cmd: EngineCmd) -> Woke {
        match cmd {
            EngineCmd::Submit(s, tx) => {
                self.times.insert(s.id, (s.arrival_ms, s.arrival_ms));
                self.senders.insert(s.id, tx);
                self.engine.submit(s);
                Woke::Command
            }
            EngineCmd::Abort(id) => {
                self.engine.abort(id);
                super::spec_lines::spec_ended(&self.state, self.engine.take_ended());
                self.senders.remove(&id);
                self.times.remove(&id);
                Woke::Command
            }
            EngineCmd::ResetPrefixCache => {
                self.engine.reset_prefix_cache();
                Woke::Command
            }
            EngineCmd::Shutdown => Woke::Stop,
        }
    }

    /// When the running step has ended by `now`: plan its outputs one after another, observe
    /// TTFT, ITL and E2E at those planned times, and queue the outputs for delivery.
    fn finish_step(&mut self, now: f64) {
        if !self.current.as_ref().is_some_and(|s| s.end_ms <= now) {
            return;
        }
        let step = self.current.take().expect("checked");
        let t = step.end_ms;
        let mut m = self.state.metrics.lock().expect("metrics lock");
        for (i, o) in step.outputs.into_iter().enumerate() {
            let planned = t + i as f64 * self.per_output_ms;
            if let Some((arrival, last)) = self.times.get_mut(&o.id) {
                if o.first {
                    m.ttft.observe((planned - *arrival) / 1000.0);
                } else {
                    m.itl.observe((planned - *last) / 1000.0 / o.tokens.max(1) as f64);
                }
                *last = planned;
                if o.finished {
                    m.e2e.observe((planned - *arrival) / 1000.0);
                }
            }
            if o.finished {
                self.times.remove(&o.id);
            }
            let d = Delivery {
                tokens: o.tokens,
                planned_ms: planned,
                first: o.first,
                finished: o.finished,
                cached: o.cached_tokens,
            };
            self.pending.push_back((o.id, d));
        }
        snapshot(&self.engine, &mut m);
        drop(m);
        self.prev_end = Some(t);
    }

    /// Hand every output planned by `now` to its request's writer.
    fn deliver_due(&mut self, now: f64) {
        while self.pending.front().is_some_and(|(_, d)| d.planned_ms <= now) {
            let (id, d) = self.pending.pop_front().expect("checked");
            if d.finished {
                if let Some(tx) = self.senders.remove(&id) {
                    let _ = tx.send(d);
                }
            } else if let Some(tx) = self.senders.get(&id) {
                let _ = tx.send(d);
            }
        }
    }
}
