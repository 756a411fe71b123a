//! `speedmatrix serve [SITE/ | RUN.json…] [--port N|0]`: serve a published site folder, or
//! results files with the embedded viewer (built in memory, as `publish` would write it), or
//! with no argument the viewer alone, on 127.0.0.1 only. Prints `listening on
//! http://127.0.0.1:PORT` once the port is bound (port 0 lets the system pick).
//!
//! A folder is served by tower-http's static file service (`ServeDir`: percent-decoding, `..`
//! refused, `index.html` for a folder's `/`, a redirect for a folder without it, HEAD, 405 for
//! other methods), behind one guard of ours: a symbolic link must not lead out of the site. A
//! site in memory is answered by [`from_memory`]: its file names are plain (`publish` makes them
//! so), so a request path is looked up as it is, and anything else is not found.

use crate::cli::ServeArgs;
use crate::command::{CommandError, Failure, OutputError};
use crate::site::publish::{build_site, viewer_site, Site, SiteError};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

/// What the server answers from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A folder on disk (a published site), canonical.
    Folder(PathBuf),
    /// A site in memory.
    Memory(Arc<Site>),
}

/// Why `serve` could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A folder given together with results files.
    #[error("{}: a site folder is served on its own; give either one folder or results files", .path.display())]
    Mixed {
        /// The folder.
        path: PathBuf,
    },
    /// The folder cannot be opened.
    #[error("{}: cannot open", .path.display())]
    Open {
        /// The folder.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A run cannot be published in memory (unreadable or invalid), or there is no viewer.
    #[error(transparent)]
    Site(#[from] SiteError),
    /// The port cannot be bound.
    #[error("cannot listen on 127.0.0.1:{port}")]
    Listen {
        /// `--port`.
        port: u16,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The server stopped on an I/O error.
    #[error("the server stopped")]
    Stopped(#[source] std::io::Error),
    /// The async runtime cannot start.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The `listening on` line cannot be written.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// `--watch`: the results file cannot be read or is not a valid one.
    #[error(transparent)]
    File(#[from] crate::files::FileError),
}

impl CommandError for ServeError {
    fn failure(&self) -> Failure {
        match self {
            ServeError::Mixed { .. } | ServeError::Open { .. } => Failure::BadInput,
            ServeError::Site(e) => e.failure(),
            ServeError::Output(e) => e.failure(),
            ServeError::File(e) => e.failure(),
            ServeError::Listen { .. } | ServeError::Stopped(_) | ServeError::Runtime(_) => Failure::Working,
        }
    }
}

/// Decide what to serve from the command line.
///
/// # Errors
/// [`ServeError`] when a folder cannot be opened or is mixed with files, or a run is invalid.
pub fn source(paths: &[PathBuf]) -> Result<Source, ServeError> {
    match paths {
        [] => Ok(Source::Memory(Arc::new(viewer_site()?))),
        [one] if one.is_dir() => {
            let root = one.canonicalize().map_err(|source| ServeError::Open { path: one.clone(), source })?;
            Ok(Source::Folder(root))
        }
        many => {
            if let Some(dir) = many.iter().find(|p| p.is_dir()) {
                return Err(ServeError::Mixed { path: dir.clone() });
            }
            Ok(Source::Memory(Arc::new(build_site(many)?)))
        }
    }
}

/// The HTTP service for `source`: every answer uncached (a rerun or a republish shows at once)
/// and never content-sniffed.
pub fn router(source: Source) -> axum::Router {
    let app = match source {
        Source::Folder(root) => {
            let root = Arc::new(root);
            axum::Router::new()
                .fallback_service(ServeDir::new(root.as_path()))
                .layer(axum::middleware::from_fn_with_state(root, inside_site))
        }
        Source::Memory(site) => axum::Router::new().fallback(move |method: Method, req: Request| {
            let site = site.clone();
            async move { from_memory(&site, &method, req.uri().path()) }
        }),
    };
    uncached(app)
}

/// Every answer of `app` uncached (`no-cache`: revalidated each time) and never content-sniffed.
pub(crate) fn uncached(app: axum::Router) -> axum::Router {
    app.layer(SetResponseHeaderLayer::overriding(header::CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        .layer(SetResponseHeaderLayer::overriding(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
}

/// Symbolic links must not lead out of the site: a request whose file resolves outside the
/// folder is not found, whatever `ServeDir` would make of it. (Paths that do not decode or name
/// no file go on to `ServeDir`, which refuses or does not find them.)
async fn inside_site(State(root): State<Arc<PathBuf>>, req: Request, next: Next) -> Response {
    let named = percent_encoding::percent_decode_str(req.uri().path()).decode_utf8().ok();
    let outside = named.and_then(|p| root.join(p.trim_start_matches('/')).canonicalize().ok()).is_some_and(|real| {
        let root: &Path = &root;
        !real.starts_with(root)
    });
    if outside {
        return not_found();
    }
    next.run(req).await
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

/// Answer a request from a site in memory: `/` and `DIR/` are their `index.html`; GET and HEAD
/// only.
pub fn from_memory(site: &Site, method: &Method, uri_path: &str) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "GET, HEAD")], "GET only\n").into_response();
    }
    let path = uri_path.trim_start_matches('/');
    let file = if path.is_empty() || path.ends_with('/') { format!("{path}index.html") } else { path.to_string() };
    match site.files.get(&file) {
        Some(bytes) => {
            // The same guess as ServeDir's, so a site reads alike from memory and from a folder.
            let mime = mime_guess::from_path(&file).first_raw().unwrap_or("application/octet-stream");
            let body = if method == Method::HEAD { Body::empty() } else { Body::from(bytes.clone()) };
            let mut resp = (StatusCode::OK, [(header::CONTENT_TYPE, mime)], body).into_response();
            resp.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
            resp
        }
        None => not_found(),
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (`kill`, `timeout`, `docker stop`, a service
/// manager); where a handler cannot be installed, on the other one alone.
pub(crate) async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Run `serve` until Ctrl-C or SIGTERM, then stop cleanly (exit code 0). `serve --watch` is
/// [`crate::site::live_page::serve_watch`]'s.
///
/// # Errors
/// [`ServeError`]: bad input for bad paths or runs; a failure while working when the port
/// cannot be bound.
pub fn run(args: &ServeArgs) -> Result<(), ServeError> {
    let app = router(source(&args.paths)?);
    crate::command::runtime().map_err(ServeError::Runtime)?.block_on(async move {
        let listen = |source| ServeError::Listen { port: args.port, source };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await.map_err(listen)?;
        let port = listener.local_addr().map_err(listen)?.port();
        crate::command::print_out(&format!("listening on http://127.0.0.1:{port}\n"))?;
        axum::serve(listener, app).with_graceful_shutdown(stop_signal()).await.map_err(ServeError::Stopped)
    })
}
