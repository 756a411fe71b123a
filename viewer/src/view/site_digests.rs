//! The SHA-256 digests the site's `runs/index.json` records, for the views that fetch run files
//! by URL (the diff of two, the comparison of many): each fetched file is checked against its
//! digest like the report page does, and flagged when it changed after publishing
//! ([`speedmatrix_schema::site::integrity`]).

use crate::view::browser::{self, Fetched};
use speedmatrix_schema::site::{integrity, load_index};

/// One run file of the site's index: its absolute URL, its name under `runs/`, its digest.
pub type Digest = (String, String, String);

/// Each run of the site's index with the digest recorded; empty when the page is no site (no
/// index, `file://`) or the index records no digests.
pub async fn index_digests() -> Vec<Digest> {
    let protocol = web_sys::window().and_then(|w| w.location().protocol().ok()).unwrap_or_default();
    if protocol == "file:" {
        return Vec::new();
    }
    let Fetched::Body(bytes) = browser::fetch_bytes("runs/index.json").await else { return Vec::new() };
    let Ok(index) = load_index(&bytes) else { return Vec::new() };
    index
        .runs
        .into_iter()
        .filter_map(|e| Some((browser::resolve(&e.file, "runs/index.json"), e.file, e.sha256?)))
        .collect()
}

/// Why the file fetched from `url` is not the one the site published (its digest differs from
/// the index's), when it is the site's and is not.
pub fn changed(digests: &[Digest], url: &str, bytes: &[u8]) -> Option<String> {
    let absolute = browser::resolve(url, "");
    let (_, file, digest) = digests.iter().find(|(u, _, _)| *u == absolute)?;
    integrity(Some(digest), bytes).warning(file)
}
