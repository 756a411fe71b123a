//! Open-loop sending, shared by rate cells ([`crate::measuring::rate`]) and trace replays
//! ([`crate::measuring::trace`]): the [`Pacer`] delivers each scheduled instant when it comes
//! (a thread of its own), and [`InFlight`] sends the request due then — or holds it back while
//! `--max-in-flight` requests are open, keeping its scheduled instant — and collects what
//! ended. The figures of what was sent are [`crate::measuring::rate_figures`]'s.

use crate::measuring::client::{Clock, StreamCtl, StreamRecord};
use crate::measuring::rate_figures::Sent;
use crate::measuring::session::Session;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The schedule's instants, each delivered when it comes: a thread of its own sleeps to every
/// instant (run clock) and sends it; dropped or stopped, it ends at its next instant or within
/// 100 ms. (tokio's timer wakes on millisecond ticks; an OS sleep to the instant is about
/// 0.1 ms late.)
pub struct Pacer {
    /// The instants as they come, ms on the run clock.
    pub rx: tokio::sync::mpsc::UnboundedReceiver<f64>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Pacer {
    /// Deliver `start_ms` + each of `offsets_s` (s, ascending) at its instant.
    pub fn start(clock: Clock, start_ms: f64, offsets_s: impl IntoIterator<Item = f64> + Send + 'static) -> Pacer {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for offset_s in offsets_s {
                let at_ms = start_ms + offset_s * 1000.0;
                let at = clock.instant_at(at_ms);
                loop {
                    if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    let left = at.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(Duration::from_millis(100)));
                }
                if tx.send(at_ms).is_err() {
                    return;
                }
            }
        });
        Pacer { rx, stop }
    }

    /// Stop delivering.
    pub fn stop(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The serialized body of each request, by id.
pub trait Bodies {
    /// The body of request `id`.
    fn body(&self, id: usize) -> bytes::Bytes;
}

/// The requests of one open-loop measurement: open, held back, sent, ended.
pub struct InFlight<B: Bodies> {
    /// Requests open now.
    pub set: JoinSet<StreamRecord>,
    /// Requests due but held back by `--max-in-flight`: (id, scheduled instant).
    pub held: VecDeque<(usize, f64)>,
    /// The bodies.
    pub bodies: B,
    /// Every request sent (or, at the end, held back and never sent), in the order sent.
    pub sent: Vec<Sent>,
    /// Every request that ended.
    pub done: Vec<StreamRecord>,
    /// Cancels what is open (the drain's end).
    pub cancel: watch::Sender<bool>,
    /// `--max-in-flight` (`usize::MAX` without).
    pub limit: usize,
}

impl<B: Bodies> InFlight<B> {
    /// Nothing sent yet.
    pub fn new(bodies: B, max_in_flight: Option<u32>) -> InFlight<B> {
        let (cancel, _) = watch::channel(false);
        InFlight {
            set: JoinSet::new(),
            held: VecDeque::new(),
            bodies,
            sent: vec![],
            done: vec![],
            cancel,
            limit: max_in_flight.map_or(usize::MAX, |m| m as usize),
        }
    }

    /// Request `id` is due at `scheduled_ms`: sent now, or held back while the limit is open.
    pub fn due(&mut self, s: &Session, id: usize, scheduled_ms: f64) {
        if self.set.len() >= self.limit {
            self.held.push_back((id, scheduled_ms));
        } else {
            self.send(s, id, scheduled_ms, false);
        }
    }

    /// A request ended: kept, and the longest-held request sent in its slot.
    pub fn ended(&mut self, s: &Session, record: StreamRecord) {
        self.done.push(record);
        self.send_held(s);
    }

    /// A slot freed: send the longest-held request, if one waits.
    pub fn send_held(&mut self, s: &Session) {
        if let Some((id, scheduled)) = self.held.pop_front() {
            self.send(s, id, scheduled, true);
        }
    }

    /// Send request `id`, due at `scheduled_ms` (held back by `--max-in-flight` when `held`).
    fn send(&mut self, s: &Session, id: usize, scheduled_ms: f64, held: bool) {
        let ctl = StreamCtl {
            clock: s.clock,
            stall: s.spec.stall,
            cancel: self.cancel.subscribe(),
            id,
            events: None,
            live_tokens: None,
            keep_text: false,
            gate: None,
        };
        let (client, path, body) = (s.client.clone(), s.path, self.bodies.body(id));
        self.sent.push(Sent { id, scheduled_ms, held });
        self.set.spawn(async move { client.stream(path, &body, ctl).await });
    }

    /// The end: requests still held are recorded as never sent, what is open is cancelled and
    /// collected; the records in id order and every request as sent.
    pub async fn close(mut self) -> (Vec<StreamRecord>, Vec<Sent>) {
        let never: Vec<Sent> =
            self.held.drain(..).map(|(id, scheduled_ms)| Sent { id, scheduled_ms, held: true }).collect();
        self.sent.extend(never);
        let _ = self.cancel.send(true);
        while let Some(joined) = self.set.join_next().await {
            if let Ok(r) = joined {
                self.done.push(r);
            }
        }
        self.done.sort_by_key(|r| r.id);
        (self.done, self.sent)
    }
}
