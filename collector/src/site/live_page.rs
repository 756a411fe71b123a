//! The live page: the viewer served with a marker that makes it follow a run, and
//! `/live.json`, the run's state now — `{version, measuring, live, results}` — answered by
//! conditional polling: every answer carries an `ETag` (the state's version), and a request
//! whose `If-None-Match` names the current one gets `304 Not Modified` with no body. The page
//! asks at most once a second (docs/ARCHITECTURE.md, "The live path", says why polling rather
//! than server-sent events).
//!
//! - [`serve_run`] (`run --serve [PORT]`): the state the measuring code publishes
//!   ([`crate::measuring::live_state`]), served by a thread of its own with its own runtime, so
//!   nothing a client does (a reload, a second tab, a connection that never reads) can take
//!   time from the measuring task;
//! - [`serve_watch`] (`serve --watch RUN.json`): a results file another process writes, read
//!   again whenever its size, modification time or inode changes (the collector replaces it
//!   atomically; a save that does not load is skipped until the next change).

use crate::measuring::live_state::{Feed, Snapshot};
use crate::site::publish::{viewer_site, Site};
use crate::site::serve::{from_memory, stop_signal, uncached, ServeError};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use speedmatrix_schema::progress::Live;
use speedmatrix_schema::Results;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The element that tells the viewer to follow `live.json` (inserted into `index.html`).
pub const LIVE_MARKER: &str = r#"<meta name="speedmatrix-live" content="live.json">"#;

/// How often `serve --watch` looks at the file.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// How long `run --serve` keeps serving once the run has ended, so that open pages fetch its
/// final state (they ask once a second).
pub const LINGER: Duration = Duration::from_secs(3);

/// The viewer's site with [`LIVE_MARKER`] in its page.
///
/// # Errors
/// [`ServeError::Site`] when this binary carries no viewer.
pub fn live_site() -> Result<Site, ServeError> {
    let mut site = viewer_site()?;
    if let Some(index) = site.files.get_mut("index.html") {
        let text = String::from_utf8_lossy(index);
        let marked = match text.find("</head>") {
            Some(at) => format!("{}{LIVE_MARKER}{}", &text[..at], &text[at..]),
            None => format!("{LIVE_MARKER}{text}"),
        };
        *index = marked.into_bytes();
    }
    Ok(site)
}

/// `/live.json` as the page reads it.
#[derive(serde::Serialize)]
struct LiveDoc<'a> {
    version: u64,
    measuring: bool,
    live: &'a Live,
    results: &'a Results,
}

/// The latest state, serialized once per version however many clients ask.
struct Doc {
    feed: Feed,
    /// Tells this server's versions apart from another's (a page reloaded after a restart).
    boot: String,
    cache: Mutex<Option<(u64, bytes::Bytes)>>,
}

impl Doc {
    fn new(feed: Feed) -> Doc {
        let boot = time::OffsetDateTime::now_utc().unix_timestamp_nanos().rem_euclid(1 << 40);
        Doc { feed, boot: format!("{boot:x}"), cache: Mutex::new(None) }
    }

    fn body(&self, s: &Snapshot) -> Result<bytes::Bytes, serde_json::Error> {
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((v, b)) = cache.as_ref() {
            if *v == s.version {
                return Ok(b.clone());
            }
        }
        let doc = LiveDoc { version: s.version, measuring: s.measuring, live: &s.live, results: &s.results };
        let b = bytes::Bytes::from(serde_json::to_vec(&doc)?);
        *cache = Some((s.version, b.clone()));
        Ok(b)
    }
}

/// Whether an `If-None-Match` header names `etag` (or `*`).
fn matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*")
}

async fn live_json(State(doc): State<Arc<Doc>>, headers: HeaderMap) -> Response {
    // Two Arc clones under the channel's read lock; everything else after it is released.
    let snap = doc.feed.borrow().clone();
    let etag = format!("\"{}-{}\"", doc.boot, snap.version);
    let tag = HeaderValue::from_str(&etag).unwrap_or_else(|_| HeaderValue::from_static("\"0\""));
    if matches(&headers, &etag) {
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, tag)]).into_response();
    }
    match doc.body(&snap) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, HeaderValue::from_static("application/json")), (header::ETAG, tag)],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the run: {e}\n")).into_response(),
    }
}

/// The live page's HTTP service: `/live.json` from `feed`, everything else from `site`.
pub fn router(feed: Feed, site: Arc<Site>) -> axum::Router {
    let doc = Arc::new(Doc::new(feed));
    let app = axum::Router::new().route("/live.json", axum::routing::get(live_json)).with_state(doc).fallback(
        move |method: Method, req: Request| {
            let site = site.clone();
            async move { from_memory(&site, &method, req.uri().path()) }
        },
    );
    uncached(app)
}

/// The live page of `run --serve`, served by a thread of its own.
#[derive(Debug)]
pub struct RunServer {
    /// The port bound on 127.0.0.1.
    pub port: u16,
}

/// Bind 127.0.0.1:`port` (0: any free one), print the page's URL, and serve the live page of
/// the state `feed` follows from a thread with its own single-threaded runtime.
///
/// # Errors
/// [`ServeError::Listen`] when the port cannot be bound, [`ServeError::Site`] without a viewer,
/// [`ServeError::Runtime`] when the thread or its runtime cannot start.
pub fn serve_run(port: u16, feed: Feed) -> Result<RunServer, ServeError> {
    let site = Arc::new(live_site()?);
    let listen = |source| ServeError::Listen { port, source };
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).map_err(listen)?;
    listener.set_nonblocking(true).map_err(listen)?;
    let bound = listener.local_addr().map_err(listen)?.port();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ServeError::Runtime)?;
    let app = router(feed, site);
    std::thread::Builder::new()
        .name("speedmatrix-live".into())
        .spawn(move || {
            runtime.block_on(async move {
                if let Ok(l) = tokio::net::TcpListener::from_std(listener) {
                    let _ = axum::serve(l, app).await;
                }
            });
        })
        .map_err(ServeError::Runtime)?;
    say(&format!("live page: http://127.0.0.1:{bound}/ (follows this run while it measures)"));
    Ok(RunServer { port: bound })
}

/// A line on stderr that never panics (a closed stderr must not stop a run).
fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

impl RunServer {
    /// Keep serving for [`LINGER`] after the run ended (Ctrl-C ends it at once), so that open
    /// pages show the run's final state.
    pub async fn linger(self) {
        say(&format!(
            "live page: serving the final state {} s more at http://127.0.0.1:{}/",
            LINGER.as_secs(),
            self.port
        ));
        tokio::select! {
            _ = tokio::time::sleep(LINGER) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
}

/// What tells one save of a file from the next.
type Stamp = (Option<std::time::SystemTime>, u64, u64);

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(meta);
    #[cfg(not(unix))]
    let inode = 0;
    (meta.modified().ok(), meta.len(), inode)
}

/// `serve --watch RUN.json`: serve the live page of a results file another process writes,
/// until Ctrl-C or SIGTERM.
///
/// # Errors
/// [`ServeError::File`] when the file cannot be read or is not a valid results file now,
/// [`ServeError::Listen`] when the port cannot be bound.
pub fn serve_watch(path: &Path, port: u16) -> Result<(), ServeError> {
    let stamp0 = std::fs::metadata(path).ok().map(|m| stamp(&m));
    let (_, results) = crate::files::read_results_bytes(path)?;
    let (tx, feed) = watch::channel(Snapshot {
        version: 0,
        results: Arc::new(results),
        live: Arc::new(Live::default()),
        measuring: false,
    });
    let app = router(feed, Arc::new(live_site()?));
    let path = path.to_path_buf();
    crate::command::runtime().map_err(ServeError::Runtime)?.block_on(async move {
        let listen = |source| ServeError::Listen { port, source };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.map_err(listen)?;
        let bound = listener.local_addr().map_err(listen)?.port();
        crate::command::print_out(&format!("listening on http://127.0.0.1:{bound} (following {})\n", path.display()))?;
        tokio::spawn(follow(path, tx, stamp0));
        axum::serve(listener, app).with_graceful_shutdown(stop_signal()).await.map_err(ServeError::Stopped)
    })
}

/// Publish the file at `path` again whenever it changes and loads.
async fn follow(path: PathBuf, tx: watch::Sender<Snapshot>, mut last: Option<Stamp>) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Ok(meta) = tokio::fs::metadata(&path).await else { continue };
        let now = stamp(&meta);
        if last == Some(now) {
            continue;
        }
        let Ok(bytes) = tokio::fs::read(&path).await else { continue };
        // A save caught half-written (a writer that does not replace the file atomically) does
        // not load: it is read again at the next change.
        if let Ok(r) = speedmatrix_schema::load_results(&bytes) {
            let r = Arc::new(r);
            tx.send_modify(|s| {
                s.version += 1;
                s.results = r;
            });
            last = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_takes_lists_weak_tags_and_the_wildcard() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::IF_NONE_MATCH, HeaderValue::from_str(v).unwrap());
            m
        };
        assert!(matches(&h("\"a-3\""), "\"a-3\""));
        assert!(matches(&h("\"a-2\", W/\"a-3\""), "\"a-3\""));
        assert!(matches(&h("*"), "\"a-3\""));
        assert!(!matches(&h("\"a-2\""), "\"a-3\""));
        assert!(!matches(&HeaderMap::new(), "\"a-3\""));
    }
}
