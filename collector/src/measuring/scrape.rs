//! `/metrics` scrapes off the measuring path: a [`Scraper`] task reads the server's Prometheus
//! text every [`EVERY`] (and at once when asked, at a window's open and close) and keeps each
//! reading with its time on the run clock. The streams and the window's deadline never wait for
//! a scrape; a slow `/metrics` only thins the samples.

use crate::measuring::client::{Client, Clock};
use crate::measuring::discovery::Metrics;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How often `/metrics` is read during a cell (the methodology asks ≥ 1 Hz; queue evidence
/// needs two consecutive samples).
pub const EVERY: Duration = Duration::from_millis(500);

/// One reading of the server's metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Scrape {
    /// When the server's state was read, ms on the run clock: the midpoint of the request's
    /// send and the answer's arrival.
    pub t_ms: f64,
    /// What it said.
    pub metrics: Metrics,
}

/// Read `/metrics` once; `None` when it fails or is not Prometheus text (the cell then has
/// fewer samples, never a wrong one).
pub async fn scrape_once(client: &Client, clock: Clock) -> Option<Scrape> {
    let sent = clock.now_ms();
    let text = client.get_text("/metrics").await.ok()?;
    let got = clock.now_ms();
    let metrics = Metrics::parse(&text).ok()?;
    Some(Scrape { t_ms: (sent + got) / 2.0, metrics })
}

/// A scraping task of its own, for one decode cell.
pub struct Scraper {
    now: mpsc::UnboundedSender<()>,
    latest: watch::Receiver<Option<Scrape>>,
    all: Arc<Mutex<Vec<Scrape>>>,
    task: tokio::task::JoinHandle<()>,
    client: Client,
    clock: Clock,
}

impl Scraper {
    /// Start reading `client`'s `/metrics` every [`EVERY`], from now; `first` is a reading
    /// taken before (kept with the others).
    pub fn start(client: Client, clock: Clock, first: Option<Scrape>) -> Scraper {
        let (now, mut asked) = mpsc::unbounded_channel::<()>();
        let (publish, latest) = watch::channel(first.clone());
        let all = Arc::new(Mutex::new(first.into_iter().collect::<Vec<_>>()));
        let (c, keep) = (client.clone(), all.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    biased;
                    a = asked.recv() => if a.is_none() { break },
                    _ = tick.tick() => {}
                }
                if let Some(s) = scrape_once(&c, clock).await {
                    if let Ok(mut v) = keep.lock() {
                        v.push(s.clone());
                    }
                    let _ = publish.send(Some(s));
                }
            }
        });
        Scraper { now, latest, all, task, client, clock }
    }

    /// Ask for a reading now (returns at once; the reading comes when the server answers).
    pub fn now(&self) {
        let _ = self.now.send(());
    }

    /// The newest reading, if any.
    pub fn latest(&self) -> Option<Scrape> {
        self.latest.borrow().clone()
    }

    /// Resolves when a new reading arrived (never, once the task ended).
    pub async fn changed(&mut self) {
        if self.latest.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Stop, take one last reading (after the cell's last stream ended: the counters' final
    /// values) and return every reading in time order.
    pub async fn finish(self) -> Vec<Scrape> {
        let Scraper { now, all, task, client, clock, .. } = self;
        drop(now);
        let _ = task.await;
        let mut v = all.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default();
        v.extend(scrape_once(&client, clock).await);
        v.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
        v
    }
}
