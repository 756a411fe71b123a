//! Which runs the page can show and where each stands: found at boot (`?run=URL`, else the
//! site's `runs/index.json`, else a `results.json` beside the page), opened from local files,
//! fetched when first shown, validated by the schema crate's loader.

use crate::model::run_index::index_runs;
use crate::model::run_report;
use crate::view::browser::{self, Fetched};
use leptos::prelude::*;
use leptos::task::spawn_local;
use speedmatrix_schema::site::{integrity, load_index, RunIndexEntry};
use speedmatrix_schema::{load_results, Results};
use std::sync::Arc;

/// Where a run of the picker stands.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum EntryState {
    /// Known (from `?run=` or the index), not fetched yet.
    Pending,
    /// Being fetched.
    Loading,
    /// Loaded and valid.
    Loaded(Arc<Results>),
    /// Could not be fetched or is not a valid results file: the one-line reason.
    Failed(String),
}

/// One run the page can show.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    /// What the picker shows.
    pub(super) label: String,
    /// Where it came from: a URL as written, or a local file name.
    pub(super) source: String,
    /// The URL to fetch (`None` for local files).
    pub(super) url: Option<String>,
    /// Its state.
    pub(super) state: EntryState,
    /// The SHA-256 the site's index records for its file, when it came from one.
    pub(super) sha256: Option<String>,
    /// Why the fetched file is not the one the index was published from (its digest differs),
    /// when it is not.
    pub(super) changed: Option<String>,
}

/// The page's state (all `Copy` signal handles).
#[derive(Clone, Copy)]
pub(super) struct State {
    pub(super) entries: RwSignal<Vec<Entry>>,
    pub(super) selected: RwSignal<Option<usize>>,
    /// Problems that are not one run's: a broken index, an unreadable `results.json`.
    pub(super) notices: RwSignal<Vec<String>>,
    pub(super) booting: RwSignal<bool>,
    pub(super) dragging: RwSignal<bool>,
    /// The heatmap metric (a registry column id), kept in the URL as `?metric=`.
    pub(super) metric: RwSignal<String>,
    /// The site's run index, when the runs came from one (the run table); `entries` holds the
    /// same runs in the same order.
    pub(super) index: RwSignal<Vec<RunIndexEntry>>,
}

fn entry_state(bytes: &[u8]) -> EntryState {
    match load_results(bytes) {
        Ok(r) => EntryState::Loaded(Arc::new(r)),
        Err(e) => EntryState::Failed(e.to_string()),
    }
}

impl State {
    /// A state with no runs yet, booting, showing `metric` in the heatmap.
    pub(super) fn new(metric: String) -> State {
        State {
            entries: RwSignal::new(Vec::new()),
            selected: RwSignal::new(None),
            notices: RwSignal::new(Vec::new()),
            booting: RwSignal::new(true),
            dragging: RwSignal::new(false),
            metric: RwSignal::new(metric),
            index: RwSignal::new(Vec::new()),
        }
    }

    /// The run shown now.
    pub(super) fn current(self) -> Option<Entry> {
        let i = self.selected.get()?;
        self.entries.with(|e| e.get(i).cloned())
    }

    /// Show run `i` and record it in the URL (`?show=SOURCE`) as a new history entry.
    pub(super) fn pick(self, i: usize) {
        let source = self.entries.with_untracked(|e| e.get(i).map(|x| x.source.clone()));
        browser::push_query(&[("show", source)]);
        self.select(i);
    }

    /// Show the run the URL names (`?show=`), else the first — except on the front page of a
    /// site of two runs or more, which opens none (and fetches no run file) until one is picked.
    pub(super) fn select_from_url(self) {
        let want = browser::query("show");
        let i = self.entries.with_untracked(|e| e.iter().position(|x| Some(&x.source) == want.as_ref()));
        if i.is_none() && self.index.with_untracked(|ix| ix.len() > 1) {
            self.selected.set(None);
            return;
        }
        if self.entries.with_untracked(|e| !e.is_empty()) {
            self.select(i.unwrap_or(0));
        }
    }

    fn select(self, i: usize) {
        self.selected.set(Some(i));
        let pending =
            self.entries.with_untracked(|e| e.get(i).map(|x| (x.state == EntryState::Pending, x.url.clone())));
        let Some((true, Some(url))) = pending else { return };
        self.entries.update(|e| e[i].state = EntryState::Loading);
        let (digest, file) = self.entries.with_untracked(|e| {
            (e[i].sha256.clone(), self.index.with_untracked(|ix| ix.get(i).map(|x| x.file.clone())))
        });
        spawn_local(async move {
            let (state, changed) = match browser::fetch_bytes(&url).await {
                Fetched::Body(bytes) => {
                    let check = integrity(digest.as_deref(), &bytes);
                    (entry_state(&bytes), check.warning(file.as_deref().unwrap_or(&url)))
                }
                Fetched::NotFound => (EntryState::Failed("HTTP 404 Not Found".into()), None),
                Fetched::Failed(e) => (EntryState::Failed(e), None),
            };
            self.entries.update(|e| {
                e[i].changed = changed;
                if let EntryState::Loaded(r) = &state {
                    if e[i].label == e[i].source {
                        e[i].label = run_report::title(r);
                    }
                }
                e[i].state = state;
            });
        });
    }

    /// Add a run read from a local file and show it.
    fn add_local(self, name: String, bytes: Result<Vec<u8>, String>) {
        let state = match bytes {
            Ok(b) => entry_state(&b),
            Err(e) => EntryState::Failed(format!("cannot read the file: {e}")),
        };
        let label = match &state {
            EntryState::Loaded(r) => format!("{} ({name})", run_report::title(r)),
            _ => name.clone(),
        };
        let mut index = 0;
        self.entries.update(|e| {
            e.push(Entry { label, source: name, url: None, state, sha256: None, changed: None });
            index = e.len() - 1;
        });
        self.selected.set(Some(index));
    }

    /// Read local files (the file button, a drop) and show the last.
    pub(super) fn open_files(self, files: Option<web_sys::FileList>) {
        let Some(files) = files else { return };
        for i in 0..files.length() {
            if let Some(file) = files.get(i) {
                spawn_local(async move {
                    let bytes = browser::file_bytes(&file).await;
                    self.add_local(file.name(), bytes);
                });
            }
        }
    }

    fn notice(self, text: String) {
        self.notices.update(|n| n.push(text));
    }
}

/// Find the runs: `?run=URL` (repeatable), else `runs/index.json`, else `results.json`.
pub(super) async fn boot(state: State) {
    let runs = browser::query_all("run");
    let protocol = web_sys::window().and_then(|w| w.location().protocol().ok()).unwrap_or_default();
    let embedded = browser::embedded_runs();
    if !embedded.is_empty() {
        // A one-file report: its run is in the page.
        for (name, bytes) in embedded {
            state.add_local(name, Ok(bytes));
        }
    } else if !runs.is_empty() {
        let entries = runs
            .into_iter()
            .map(|u| Entry {
                label: u.clone(),
                source: u.clone(),
                url: Some(u),
                state: EntryState::Pending,
                sha256: None,
                changed: None,
            })
            .collect();
        state.entries.set(entries);
        state.select_from_url();
    } else if protocol != "file:" && !boot_from_index(state).await {
        match browser::fetch_bytes("results.json").await {
            Fetched::Body(bytes) => state.add_local("results.json".into(), Ok(bytes)),
            Fetched::NotFound => {}
            Fetched::Failed(e) => state.notice(format!("results.json: {e}")),
        }
    }
    state.booting.set(false);
}

/// The runs of the site's `runs/index.json`; false when it has none (absent, empty or
/// broken — the last two with a notice).
async fn boot_from_index(state: State) -> bool {
    match browser::fetch_bytes("runs/index.json").await {
        Fetched::Body(bytes) => match load_index(&bytes) {
            Ok(index) if !index.runs.is_empty() => {
                state.index.set(index.runs.clone());
                let digests: Vec<Option<String>> = index.runs.iter().map(|r| r.sha256.clone()).collect();
                let entries = index_runs(index)
                    .into_iter()
                    .zip(digests)
                    .map(|((label, file), sha256)| Entry {
                        label,
                        url: Some(browser::resolve(&file, "runs/index.json")),
                        source: format!("runs/{file}"),
                        state: EntryState::Pending,
                        sha256,
                        changed: None,
                    })
                    .collect();
                state.entries.set(entries);
                state.select_from_url();
                return true;
            }
            Ok(_) => state.notice("runs/index.json lists no runs".into()),
            Err(e) => state.notice(e.to_string()),
        },
        Fetched::NotFound => {}
        Fetched::Failed(e) => state.notice(format!("runs/index.json: {e}")),
    }
    false
}
