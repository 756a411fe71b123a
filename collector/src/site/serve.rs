//! `speedmatrix serve [SITE/ | RUN.json…] [--port N|0]`: serve a published site folder, or
//! results files with the embedded viewer (built in memory, as `publish` would write it), or
//! with no argument the viewer alone, on 127.0.0.1 only. Prints `listening on
//! http://127.0.0.1:PORT` once the port is bound (port 0 lets the system pick).

use crate::cli::ServeArgs;
use crate::site::publish::{build_site, viewer_site, Site};
use crate::Error;
use axum::body::Body;
use axum::http::{header, HeaderValue, Method, Request, Response, StatusCode};
use std::path::PathBuf;
use std::sync::Arc;

/// What the server answers from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A folder on disk (a published site).
    Folder(PathBuf),
    /// A site in memory.
    Memory(Arc<Site>),
}

/// Decide what to serve from the command line.
///
/// # Errors
/// [`Error::Input`] when a path is missing, a folder is mixed with files, or a run is invalid.
pub fn source(paths: &[PathBuf]) -> Result<Source, Error> {
    match paths {
        [] => Ok(Source::Memory(Arc::new(viewer_site()?))),
        [one] if one.is_dir() => {
            let root = one.canonicalize().map_err(|e| Error::Input(format!("{}: cannot open: {e}", one.display())))?;
            Ok(Source::Folder(root))
        }
        many => {
            if let Some(dir) = many.iter().find(|p| p.is_dir()) {
                return Err(Error::Input(format!(
                    "{}: a site folder is served on its own; give either one folder or results files",
                    dir.display()
                )));
            }
            Ok(Source::Memory(Arc::new(build_site(many)?)))
        }
    }
}

/// The Content-Type of a file name.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("txt") | None => "text/plain; charset=utf-8",
        Some(_) => "application/octet-stream",
    }
}

/// `%41` → `A`; `None` for a malformed escape or text that is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The site path a request path names (`/` → `index.html`, `/runs/` → `runs/index.html`);
/// `None` when it tries to leave the site (`..`, `\`, NUL) or is malformed.
pub fn site_path(uri_path: &str) -> Option<String> {
    let decoded = percent_decode(uri_path)?;
    let trimmed = decoded.trim_start_matches('/');
    let mut parts = Vec::new();
    for seg in trimmed.split('/') {
        match seg {
            "" | "." => {}
            ".." => return None,
            s if s.contains(['\\', '\0']) => return None,
            s => parts.push(s),
        }
    }
    let mut path = parts.join("/");
    if path.is_empty() || decoded.ends_with('/') {
        if !path.is_empty() {
            path.push('/');
        }
        path.push_str("index.html");
    }
    Some(path)
}

fn respond(status: StatusCode, ctype: &str, body: Vec<u8>, head: bool) -> Response<Body> {
    let len = body.len();
    let mut resp = Response::new(if head { Body::empty() } else { Body::from(body) });
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_str(ctype).unwrap_or(HeaderValue::from_static("text/plain")));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    resp
}

fn not_found(head: bool) -> Response<Body> {
    respond(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", b"not found\n".to_vec(), head)
}

/// Answer one request (its method and URL path) from `source`.
pub async fn answer(source: &Source, method: &Method, uri_path: &str) -> Response<Body> {
    let head = method == Method::HEAD;
    if method != Method::GET && !head {
        let mut r = respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", b"GET only\n".to_vec(), false);
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let Some(path) = site_path(uri_path) else { return not_found(head) };
    match source {
        Source::Memory(site) => match site.files.get(&path) {
            Some(bytes) => respond(StatusCode::OK, content_type(&path), bytes.clone(), head),
            None if site.files.contains_key(&format!("{path}/index.html")) => redirect(uri_path),
            None => not_found(head),
        },
        Source::Folder(root) => {
            let file = root.join(&path);
            if file.is_dir() {
                return redirect(uri_path);
            }
            // Symbolic links must not lead out of the site.
            match file.canonicalize() {
                Ok(real) if real.starts_with(root) => match tokio::fs::read(&real).await {
                    Ok(bytes) => respond(StatusCode::OK, content_type(&path), bytes, head),
                    Err(_) => not_found(head),
                },
                _ => not_found(head),
            }
        }
    }
}

/// A folder asked for without its `/`: relative links need it.
fn redirect(uri_path: &str) -> Response<Body> {
    let mut r = respond(StatusCode::MOVED_PERMANENTLY, "text/plain; charset=utf-8", Vec::new(), true);
    if let Ok(v) = HeaderValue::from_str(&format!("{uri_path}/")) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// Run `serve` until Ctrl-C.
///
/// # Errors
/// [`Error::Input`] for bad paths or runs; [`Error::Other`] when the port cannot be bound.
pub fn run(args: &ServeArgs) -> Result<(), Error> {
    let source = source(&args.paths)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
            .await
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot listen on 127.0.0.1:{}: {e}", args.port)))?;
        let port = listener.local_addr().map_err(anyhow::Error::from)?.port();
        crate::print_out(&format!("listening on http://127.0.0.1:{port}\n"))?;
        let source = Arc::new(source);
        let app = axum::Router::new().fallback(move |req: Request<Body>| {
            let source = source.clone();
            let (method, path) = (req.method().clone(), req.uri().path().to_string());
            async move { answer(&source, &method, &path).await }
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(|e| Error::Other(anyhow::anyhow!("server stopped: {e}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_site() {
        assert_eq!(site_path("/").as_deref(), Some("index.html"));
        assert_eq!(site_path("/runs/index.json").as_deref(), Some("runs/index.json"));
        assert_eq!(site_path("/sub/").as_deref(), Some("sub/index.html"));
        assert_eq!(site_path("/a%20b.json").as_deref(), Some("a b.json"));
        assert_eq!(site_path("/../etc/passwd"), None);
        assert_eq!(site_path("/%2e%2e/etc/passwd"), None);
        assert_eq!(site_path("/a\\..\\b"), None);
        assert_eq!(site_path("/%zz"), None);
        assert_eq!(content_type("x.wasm"), "application/wasm");
        assert_eq!(content_type("runs/index.json"), "application/json");
    }
}
