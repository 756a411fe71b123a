//! `/metrics` scrapes off the measuring path: a [`Scraper`] task reads the server's Prometheus
//! text every [`EVERY`] (and at once when asked, at a window's open and close) and keeps each
//! reading with its time on the run clock. The streams and the window's deadline never wait for
//! a scrape; a slow `/metrics` only thins the samples.
//!
//! Every read has a short timeout ([`SCRAPE_TIMEOUT`] beside a window, [`HOLD_TIMEOUT`] for the
//! few readings the run waits for between measurements). One that fails — no answer in time,
//! an error status, a refused connection, text that is not Prometheus — marks the endpoint
//! failing in the run's [`Health`]: from then on nothing waits for it (the readings between
//! measurements are skipped, readiness does not wait for a queue gauge) and only the
//! [`Scraper`] tries it again, every [`RETRY`]; an answer clears it. What happened is written
//! once into the results file's `missing` ([`Health::missing`]).

use crate::measuring::client::{Client, Clock};
use crate::measuring::discovery::Metrics;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// How often `/metrics` is read during a cell (the methodology asks ≥ 1 Hz; queue evidence
/// needs two consecutive samples).
pub const EVERY: Duration = Duration::from_millis(500);

/// The longest a reading beside a window may take before it counts as unanswered.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest the run waits for a reading between measurements (before a cell's streams
/// open, around a prefill request, after a cell's last stream): an idle server's `/metrics`
/// answers in milliseconds.
pub const HOLD_TIMEOUT: Duration = Duration::from_secs(1);

/// How often a failing `/metrics` is tried again (by the [`Scraper`] only, never awaited).
pub const RETRY: Duration = Duration::from_secs(10);

/// How the `missing` entry of a failing `/metrics` starts ([`Health::missing`]).
pub const MISSING_PREFIX: &str = "/metrics failed ";

/// One reading of the server's metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Scrape {
    /// When the server's state was read, ms on the run clock: the midpoint of the request's
    /// send and the answer's arrival.
    pub t_ms: f64,
    /// What it said.
    pub metrics: Metrics,
}

/// Whether `/metrics` answers, shared by every reader of one run.
#[derive(Debug, Clone, Default)]
pub struct Health(Arc<Mutex<HealthState>>);

#[derive(Debug, Default)]
struct HealthState {
    /// Since when it fails (run clock, ms) and why, while it does.
    failing: Option<(f64, String)>,
    /// When it was last tried while failing.
    last_try: Option<Instant>,
    /// The first failure (run clock, ms, and why), kept for the file.
    first: Option<(f64, String)>,
    /// Failures and answers again, counted for the file.
    failures: u32,
    recoveries: u32,
    /// When it last answered again after failing, ms.
    recovered_ms: Option<f64>,
}

impl Health {
    /// Whether the run may wait (at most [`HOLD_TIMEOUT`]) for a reading now: only while the
    /// endpoint answers.
    pub fn answering(&self) -> bool {
        self.0.lock().map(|h| h.failing.is_none()).unwrap_or(false)
    }

    /// Whether the [`Scraper`] should read now: always while it answers, every [`RETRY`] while
    /// it fails.
    fn due(&self) -> bool {
        self.0.lock().map(|h| h.failing.is_none() || h.last_try.is_none_or(|t| t.elapsed() >= RETRY)).unwrap_or(false)
    }

    fn answered(&self, t_ms: f64) {
        if let Ok(mut h) = self.0.lock() {
            if h.failing.take().is_some() {
                h.recoveries += 1;
                h.recovered_ms = Some(t_ms);
            }
        }
    }

    fn failed(&self, t_ms: f64, why: String) {
        if let Ok(mut h) = self.0.lock() {
            h.last_try = Some(Instant::now());
            if h.failing.is_none() {
                h.failures += 1;
                h.first.get_or_insert((t_ms, why.clone()));
                h.failing = Some((t_ms, why));
            }
        }
    }

    /// What the results file's `missing` says about it (figure `server`), once anything
    /// failed: when and why it first failed, how it was retried, and whether it answered again.
    pub fn missing(&self) -> Option<speedmatrix_schema::MissingFigure> {
        let h = self.0.lock().ok()?;
        let (at, why) = h.first.as_ref()?;
        let state = match (&h.failing, h.recovered_ms) {
            (Some((since, _)), _) if h.failures > 1 => {
                format!("it failed {} times in all, the last time from {:.1} s on", h.failures, since / 1000.0)
            }
            (Some(_), _) => "it did not answer again".to_string(),
            (None, Some(back)) => {
                format!("it answered again at {:.1} s (after {} failure(s) in all)", back / 1000.0, h.failures)
            }
            (None, None) => String::new(),
        };
        Some(speedmatrix_schema::MissingFigure {
            figure: "server".into(),
            reason: format!(
                "{MISSING_PREFIX}{:.1} s into the run ({why}); the run did not wait for it and tried it again every {} s, so server figures (gauges, counters, the KV-cache usage, speculative acceptance) are null or thinned in the rows and cells measured while it failed; {state}",
                at / 1000.0,
                RETRY.as_secs()
            ),
        })
    }
}

/// Read `/metrics` once within `limit`; `Err(why)` when it fails or is not Prometheus text.
pub async fn read(client: &Client, clock: Clock, limit: Duration) -> Result<Scrape, String> {
    let sent = clock.now_ms();
    let text = client.get_text_within("/metrics", limit).await.map_err(|e| match e {
        crate::measuring::client::HttpError::Unreachable { message, .. } => message,
        other => other.to_string(),
    })?;
    let got = clock.now_ms();
    let metrics = Metrics::parse(&text).map_err(|e| format!("not Prometheus text: {e}"))?;
    Ok(Scrape { t_ms: (sent + got) / 2.0, metrics })
}

/// Read `/metrics` once and note the outcome in `health`; `None` when it failed (the cell then
/// has fewer samples, never a wrong one).
pub async fn scrape_once(client: &Client, clock: Clock, health: &Health, limit: Duration) -> Option<Scrape> {
    match read(client, clock, limit).await {
        Ok(s) => {
            health.answered(s.t_ms);
            Some(s)
        }
        Err(why) => {
            health.failed(clock.now_ms(), why);
            None
        }
    }
}

/// A reading the run waits for between measurements, at most [`HOLD_TIMEOUT`]; none at once
/// while the endpoint fails.
pub async fn hold_scrape(client: &Client, clock: Clock, health: &Health) -> Option<Scrape> {
    if !health.answering() {
        return None;
    }
    scrape_once(client, clock, health, HOLD_TIMEOUT).await
}

/// A scraping task of its own, for one decode cell.
pub struct Scraper {
    now: mpsc::UnboundedSender<()>,
    latest: watch::Receiver<Option<Scrape>>,
    all: Arc<Mutex<Vec<Scrape>>>,
    task: tokio::task::JoinHandle<()>,
    client: Client,
    clock: Clock,
    health: Health,
}

impl Scraper {
    /// Start reading `client`'s `/metrics` every [`EVERY`] (every [`RETRY`] while it fails),
    /// from now; `first` is a reading taken before (kept with the others).
    pub fn start(client: Client, clock: Clock, health: Health, first: Option<Scrape>) -> Scraper {
        let (now, mut asked) = mpsc::unbounded_channel::<()>();
        let (publish, latest) = watch::channel(first.clone());
        let all = Arc::new(Mutex::new(first.into_iter().collect::<Vec<_>>()));
        let (c, keep, h) = (client.clone(), all.clone(), health.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    a = asked.recv() => if a.is_none() { break },
                    _ = tick.tick() => {}
                }
                if !h.due() {
                    continue;
                }
                if let Some(s) = scrape_once(&c, clock, &h, SCRAPE_TIMEOUT).await {
                    if let Ok(mut v) = keep.lock() {
                        v.push(s.clone());
                    }
                    let _ = publish.send(Some(s));
                }
            }
        });
        Scraper { now, latest, all, task, client, clock, health }
    }

    /// Ask for a reading now (returns at once; the reading comes when the server answers).
    pub fn now(&self) {
        let _ = self.now.send(());
    }

    /// The newest reading, if any.
    pub fn latest(&self) -> Option<Scrape> {
        self.latest.borrow().clone()
    }

    /// Whether the endpoint answers (see [`Health`]).
    pub fn answering(&self) -> bool {
        self.health.answering()
    }

    /// Resolves when a new reading arrived (never, once the task ended).
    pub async fn changed(&mut self) {
        if self.latest.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Stop, take one last reading (after the cell's last stream ended: the counters' final
    /// values) and return every reading in time order. Waits at most [`HOLD_TIMEOUT`] for a
    /// reading in flight and [`HOLD_TIMEOUT`] for the last one; not at all while the endpoint
    /// fails.
    pub async fn finish(self) -> Vec<Scrape> {
        let Scraper { now, all, mut task, client, clock, health, .. } = self;
        drop(now);
        if !health.answering() || tokio::time::timeout(HOLD_TIMEOUT, &mut task).await.is_err() {
            task.abort();
        }
        let mut v = all.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default();
        v.extend(hold_scrape(&client, clock, &health).await);
        v.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
        quiet_end(&client, clock, &health, &mut v).await;
        v
    }
}

/// The longest [`quiet_end`] waits for an idle server.
pub const QUIET_LIMIT: Duration = Duration::from_secs(3);

/// Whether a reading shows requests running or waiting.
fn busy(m: &Metrics) -> bool {
    m.running.unwrap_or(0.0) + m.waiting.unwrap_or(0.0) > 0.0
}

/// On a server that counts speculative decoding, the cell's last reading is one taken once the
/// server is idle (at most [`QUIET_LIMIT`] after the cell's last stream ended, reading every
/// 50 ms): a cancelled request may still be decoding in the server until its abort arrives,
/// and its drafts count for the cell (`crate::measuring::spec_decode` takes the counters' growth
/// to the last reading). Readings are added to `v`; nothing is awaited on other servers.
async fn quiet_end(client: &Client, clock: Clock, health: &Health, v: &mut Vec<Scrape>) {
    let counts = |s: &Scrape| s.metrics.spec_drafts.is_some() && busy(&s.metrics);
    if !v.last().is_some_and(counts) {
        return;
    }
    let by = tokio::time::Instant::now() + QUIET_LIMIT;
    while tokio::time::Instant::now() < by {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let Some(s) = hold_scrape(client, clock, health).await else { return };
        let done = !busy(&s.metrics);
        v.push(s);
        if done {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_endpoint_is_noted_once_with_when_and_why_and_whether_it_came_back() {
        let h = Health::default();
        assert!(h.answering() && h.missing().is_none());
        h.failed(1500.0, "no answer within 2s".into());
        assert!(!h.answering());
        assert!(!h.due(), "tried again only after RETRY");
        let m = h.missing().unwrap();
        assert_eq!(m.figure, "server");
        assert!(m.reason.contains("1.5 s into the run (no answer within 2s)"), "{}", m.reason);
        assert!(m.reason.contains("it did not answer again"), "{}", m.reason);
        h.failed(9000.0, "again".into());
        h.answered(12_000.0);
        assert!(h.answering());
        let m = h.missing().unwrap();
        assert!(m.reason.contains("answered again at 12.0 s (after 1 failure(s)"), "{}", m.reason);
    }
}
