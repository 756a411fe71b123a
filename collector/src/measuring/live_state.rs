//! The run's live state, published off the measuring path: the results so far and the row or
//! cell being measured ([`speedmatrix_schema::progress::Live`]) in a `tokio::sync::watch`
//! channel. Publishing replaces the value and returns: it never awaits a reader, and a reader
//! (the live page's server, docs/ARCHITECTURE.md "The live path") only clones two `Arc`s under
//! the channel's lock, so no client of the page can hold up a measurement. The terminal bar is
//! drawn from the same state ([`speedmatrix_schema::progress::progress`]).

use speedmatrix_schema::progress::{progress, Current, Live, Progress};
use speedmatrix_schema::Results;
use std::sync::Arc;
use tokio::sync::watch;

/// One published state of the run.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Grows with every publication (the live page's ETag).
    pub version: u64,
    /// The results as last saved.
    pub results: Arc<Results>,
    /// The row or cell being measured and the warmed contexts.
    pub live: Arc<Live>,
    /// Whether the run is still being measured by this process (`false` once it has ended, and
    /// for a file followed from another process, which has no live state).
    pub measuring: bool,
}

/// A reader of the published state.
pub type Feed = watch::Receiver<Snapshot>;

/// The measuring side of the channel.
#[derive(Debug)]
pub struct Publisher {
    tx: watch::Sender<Snapshot>,
}

impl Publisher {
    /// A channel holding `results` with nothing measured yet, and its first reader.
    pub fn new(results: &Results) -> (Publisher, Feed) {
        let (tx, rx) = watch::channel(Snapshot {
            version: 0,
            results: Arc::new(results.clone()),
            live: Arc::new(Live::default()),
            measuring: true,
        });
        (Publisher { tx }, rx)
    }

    /// Another reader (the live server's).
    pub fn subscribe(&self) -> Feed {
        self.tx.subscribe()
    }

    /// The results as just saved (the clone is made before the channel's lock is taken). A
    /// save comes between rows and cells, so nothing is being measured at that moment: the row
    /// or cell just saved is no longer "current" (its window would be counted twice). Without
    /// a reader (no `--serve`) nothing is copied: a copy of a long run's results would double
    /// what the process holds. Readers subscribe before the first save.
    pub fn results(&self, r: &Results) {
        if self.tx.is_closed() {
            return;
        }
        let results = Arc::new(r.clone());
        self.tx.send_modify(|s| {
            s.version += 1;
            s.results = results;
            if s.live.current.is_some() {
                s.live = Arc::new(Live { current: None, warm: s.live.warm.clone() });
            }
        });
    }

    /// The row or cell being measured now (`None` between them) and the warmed contexts.
    pub fn current(&self, current: Option<Current>, warm: Vec<u64>) {
        let live = Arc::new(Live { current, warm });
        self.tx.send_modify(|s| {
            s.version += 1;
            s.live = live;
        });
    }

    /// The run is over (its final results were published): nothing is being measured.
    pub fn ended(&self) {
        self.tx.send_modify(|s| {
            s.version += 1;
            s.live = Arc::new(Live::default());
            s.measuring = false;
        });
    }

    /// Where the run stands now, for the terminal bar.
    pub fn progress(&self) -> Progress {
        let s = self.tx.borrow();
        progress(&s.results, Some(&s.live))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedmatrix_schema::progress::{Measuring, Phase};
    use speedmatrix_schema::ContextSize;

    fn results() -> Results {
        speedmatrix_schema::load_results(include_bytes!("../../../tests/fixtures/round1/twin-tiny.json")).unwrap()
    }

    #[test]
    fn every_publication_is_a_new_version_and_readers_see_the_latest() {
        let r = results();
        let (p, mut feed) = Publisher::new(&r);
        assert_eq!(feed.borrow_and_update().version, 0);
        let current = Current {
            measuring: Measuring::Prefill { context: ContextSize { label: "8K".into(), tokens: 8192 } },
            phase: Phase::Prefill,
            window_elapsed_s: None,
            live_tps: None,
            streams_running: Some(1),
        };
        p.current(Some(current.clone()), vec![8192]);
        assert!(feed.has_changed().unwrap());
        let s = feed.borrow_and_update().clone();
        assert_eq!((s.version, s.live.current.as_ref(), s.measuring), (1, Some(&current), true));
        // A save ends the row or cell: it is no longer current; the warmed contexts stay.
        p.results(&r);
        let s = feed.borrow_and_update().clone();
        assert_eq!((s.version, s.live.current.as_ref(), s.live.warm.as_slice()), (2, None, &[8192][..]));
        p.ended();
        assert_eq!(
            (feed.borrow().version, feed.borrow().live.current.is_none(), feed.borrow().measuring),
            (3, true, false)
        );
    }

    #[test]
    fn publishing_never_waits_for_a_reader_that_holds_nothing_or_is_gone() {
        let (p, feed) = Publisher::new(&results());
        // A reader that never reads again, then none at all: publishing goes on.
        let _slow = p.subscribe();
        drop(feed);
        for _ in 0..1000 {
            p.current(None, vec![8192]);
        }
        assert_eq!(p.tx.borrow().version, 1000);
    }

    #[test]
    fn without_a_reader_a_save_copies_nothing() {
        let empty = Results { decode: vec![], ..results() };
        let (p, feed) = Publisher::new(&empty);
        drop(feed);
        p.results(&results());
        // The channel still holds the first (empty) results: the saved ones were not copied.
        assert!(p.tx.borrow().results.decode.is_empty());
        assert_eq!(p.tx.borrow().version, 0);
        // A reader makes saves publish again.
        let _reader = p.subscribe();
        p.results(&results());
        assert!(!p.tx.borrow().results.decode.is_empty());
        assert_eq!(p.tx.borrow().version, 1);
    }
}
