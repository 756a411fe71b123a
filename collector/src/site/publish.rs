//! `speedmatrix publish RUN.json… --out SITE/`: a static site ready to upload — the viewer
//! (the built `dist/`, embedded in this binary), each run under `runs/`, and `runs/index.json`
//! listing them. `serve` uses the same site model in memory.

use crate::cli::PublishArgs;
use crate::Error;
use speedmatrix_schema::site::{entry_for, RunIndex};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The embedded viewer.
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/dist_files.rs"));
}

/// The built viewer this binary carries: (path inside `dist/`, bytes). Empty when it was built
/// without a `dist/`.
pub fn viewer_files() -> &'static [(&'static str, &'static [u8])] {
    embedded::DIST_FILES
}

/// A static site in memory: path (`index.html`, `runs/index.json`) → bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Site {
    /// Every file of the site.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Read a results file's bytes (at most the loader's size cap) and check that it loads.
///
/// # Errors
/// [`Error::Input`] with `FILE: problem` when the file cannot be read or is not a valid run.
pub fn read_run(path: &Path) -> Result<(Vec<u8>, speedmatrix_schema::Results), Error> {
    let name = path.display().to_string();
    let limit = speedmatrix_schema::load::MAX_FILE_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit).read_to_end(&mut bytes))
        .map_err(|e| Error::Input(format!("{name}: cannot read: {e}")))?;
    let results = speedmatrix_schema::load_results(&bytes).map_err(|e| Error::Input(format!("{name}: {e}")))?;
    Ok((bytes, results))
}

/// The file name a run gets under `runs/`: its own name with anything but letters, digits,
/// `.`, `_` and `-` replaced by `-`, ending in `.json`, made unique among `taken`.
pub fn run_file_name(path: &Path, taken: &[String]) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut base: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect();
    base = base.trim_matches(['.', '-']).to_string();
    if base.is_empty() || base == "index" {
        base = format!("run-{base}").trim_end_matches('-').to_string();
    }
    let mut name = format!("{base}.json");
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}.json");
        n += 1;
    }
    name
}

/// A run of a site: its file name under `runs/`, its bytes (unchanged) and what they hold.
#[derive(Debug, Clone)]
pub struct StoredRun {
    /// The file name under `runs/`, e.g. `h200-qwen.json`.
    pub name: String,
    /// The file's bytes, as given.
    pub bytes: Vec<u8>,
    /// The loaded run.
    pub results: speedmatrix_schema::Results,
}

/// The site for these runs: the viewer, `runs/<name>.json` (the files' bytes, unchanged) and
/// `runs/index.json`.
///
/// # Errors
/// [`Error::Input`] when a run cannot be read or is invalid; [`Error::Other`] when this binary
/// carries no viewer.
pub fn build_site(runs: &[PathBuf]) -> Result<Site, Error> {
    let mut stored: Vec<StoredRun> = Vec::new();
    for path in runs {
        let (bytes, results) = read_run(path)?;
        let taken: Vec<String> = stored.iter().map(|r| r.name.clone()).collect();
        stored.push(StoredRun { name: run_file_name(path, &taken), bytes, results });
    }
    site_of(&stored)
}

/// The site of these stored runs, in this order: the viewer, `runs/<name>` and `runs/index.json`.
///
/// # Errors
/// [`Error::Other`] when this binary carries no viewer.
pub fn site_of(runs: &[StoredRun]) -> Result<Site, Error> {
    let mut site = viewer_site()?;
    let entries = runs.iter().map(|r| entry_for(&r.results, &r.name)).collect();
    for r in runs {
        site.files.insert(format!("runs/{}", r.name), r.bytes.clone());
    }
    let mut index = serde_json::to_vec_pretty(&RunIndex::new(entries)).map_err(anyhow::Error::from)?;
    index.push(b'\n');
    site.files.insert("runs/index.json".into(), index);
    Ok(site)
}

/// A run the existing site lists: its file name, the id its index gives, and the file read
/// from disk (or why it could not be).
#[derive(Debug)]
struct Listed {
    name: String,
    index_id: Option<String>,
    file: Result<(Vec<u8>, speedmatrix_schema::Results), Error>,
}

/// The runs the site under `out` lists in its `runs/index.json` (any index version this build
/// reads); none when there is no index. A listed file that is gone is left out with a warning.
///
/// # Errors
/// [`Error::Input`] when the index exists but cannot be read or parsed.
fn listed_runs(out: &Path) -> Result<Vec<Listed>, Error> {
    let path = out.join("runs/index.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::Input(format!("{}: cannot read: {e}", path.display()))),
    };
    let index = speedmatrix_schema::site::load_index(&bytes).map_err(|e| {
        Error::Input(format!("{}: {e}; fix it, or delete it to publish a new site there", path.display()))
    })?;
    let mut listed = Vec::new();
    for e in index.runs {
        let file_path = out.join("runs").join(&e.file);
        if !file_path.is_file() {
            eprintln!("warning: {} is listed in the index but missing; left out", file_path.display());
            continue;
        }
        listed.push(Listed { name: e.file, index_id: e.id, file: read_run(&file_path) });
    }
    Ok(listed)
}

/// What a publish into an existing site did, for the summary line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Runs added.
    pub added: usize,
    /// Runs the site had that stay.
    pub kept: usize,
    /// Runs the site had that a given file replaced (same name and run id).
    pub replaced: usize,
    /// Runs taken out with `--remove`.
    pub removed: usize,
}

/// The site's runs after a publish: the listed runs less those `remove` names (by run id or
/// file name), then each new run (path, bytes, run) added — replacing a listed run with the
/// same file name and run id, else under a name of its own.
///
/// # Errors
/// [`Error::Input`] when a `--remove` matches no run, or a listed run that stays cannot be read.
fn merge(
    listed: Vec<Listed>,
    new: Vec<(PathBuf, Vec<u8>, speedmatrix_schema::Results)>,
    remove: &[String],
) -> Result<(Vec<StoredRun>, Changes), Error> {
    let mut changes = Changes::default();
    let matches = |l: &Listed, what: &str| {
        l.name == what || l.index_id.as_deref() == Some(what) || l.file.as_ref().is_ok_and(|(_, r)| r.run.id == what)
    };
    if let Some(unknown) = remove.iter().find(|w| !listed.iter().any(|l| matches(l, w))) {
        let names: Vec<&str> = listed.iter().map(|l| l.name.as_str()).collect();
        return Err(Error::Input(format!(
            "--remove {unknown}: no run of the site has this run id or file name (its runs: {})",
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        )));
    }
    let mut kept: Vec<StoredRun> = Vec::new();
    for l in listed {
        if remove.iter().any(|w| matches(&l, w)) {
            changes.removed += 1;
            continue;
        }
        let (bytes, results) =
            l.file.map_err(|e| Error::Input(format!("{e}; take it out with --remove {} or fix the file", l.name)))?;
        kept.push(StoredRun { name: l.name, bytes, results });
    }
    changes.kept = kept.len();
    let old = kept.len();
    for (path, bytes, results) in new {
        let wanted = run_file_name(&path, &[]);
        let same = kept[..old].iter().position(|k| k.name == wanted && k.results.run.id == results.run.id);
        if let Some(i) = same {
            kept[i] = StoredRun { name: wanted, bytes, results };
            changes.replaced += 1;
            changes.kept -= 1;
            continue;
        }
        let taken: Vec<String> = kept.iter().map(|k| k.name.clone()).collect();
        kept.push(StoredRun { name: run_file_name(&path, &taken), bytes, results });
        changes.added += 1;
    }
    Ok((kept, changes))
}

/// The viewer site alone (a page that opens local files).
///
/// # Errors
/// [`Error::Other`] when this binary was built without a `dist/`.
pub fn viewer_site() -> Result<Site, Error> {
    if !viewer_files().iter().any(|(p, _)| *p == "index.html") {
        return Err(Error::Other(anyhow::anyhow!(
            "this speedmatrix was built without the viewer (dist/ was empty); rebuild it from a full checkout"
        )));
    }
    Ok(Site { files: viewer_files().iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect() })
}

/// Write the site under `out` (created if needed; files already there are replaced).
///
/// # Errors
/// [`Error::Other`] when a folder or file cannot be written.
pub fn write_site(site: &Site, out: &Path) -> Result<(), Error> {
    for (rel, bytes) in &site.files {
        let path = out.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::Other(anyhow::anyhow!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::write(&path, bytes)
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// Whether a top-level file name is one of the viewer's built assets (trunk names them
/// `NAME-HASH.js`, `NAME-HASH_bg.wasm`, `NAME-HASH.css` with a 16-digit hex hash), so an
/// older build's copy may be deleted when the site is rewritten.
pub fn is_viewer_asset(name: &str) -> bool {
    let Some((stem, ext)) = name.rsplit_once('.') else { return false };
    if !matches!(ext, "js" | "wasm" | "css") {
        return false;
    }
    let stem = stem.strip_suffix("_bg").unwrap_or(stem);
    stem.rsplit_once('-')
        .is_some_and(|(base, hash)| !base.is_empty() && hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Delete what an earlier publish left under `out` that `site` no longer has: results files in
/// `runs/` (`*.json`) and viewer assets of another build at the top. Nothing else is touched
/// (the folder may hold other pages). Returns how many files were deleted.
///
/// # Errors
/// [`Error::Other`] when a stale file cannot be deleted.
pub fn remove_stale(site: &Site, out: &Path) -> Result<usize, Error> {
    let mut stale = Vec::new();
    let list = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| d.flatten().filter(|e| e.path().is_file()).map(|e| e.file_name().to_string_lossy().into_owned()))
            .map(Iterator::collect)
            .unwrap_or_default()
    };
    for name in list(&out.join("runs")) {
        if name.ends_with(".json") && !site.files.contains_key(&format!("runs/{name}")) {
            stale.push(out.join("runs").join(name));
        }
    }
    for name in list(out) {
        if is_viewer_asset(&name) && !site.files.contains_key(&name) {
            stale.push(out.join(name));
        }
    }
    for path in &stale {
        std::fs::remove_file(path)
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot delete the stale {}: {e}", path.display())))?;
    }
    Ok(stale.len())
}

/// Run `publish`: the runs the site already lists, less `--remove`, plus the given files; then
/// the viewer, the runs and a new index written, and stale files deleted.
///
/// # Errors
/// [`Error::Input`] for a bad run, a broken index, an unknown `--remove`, or nothing to
/// publish; otherwise as [`write_site`] and [`remove_stale`].
pub fn run(args: &PublishArgs) -> Result<(), Error> {
    let mut new = Vec::new();
    for path in &args.runs {
        let (bytes, results) = read_run(path)?;
        new.push((path.clone(), bytes, results));
    }
    let listed = listed_runs(&args.out)?;
    if new.is_empty() && args.remove.is_empty() && listed.is_empty() {
        return Err(Error::Input(format!(
            "nothing to publish: give results files (speedmatrix publish RUN.json… --out {})",
            args.out.display()
        )));
    }
    let (runs, changes) = merge(listed, new, &args.remove)?;
    let site = site_of(&runs)?;
    write_site(&site, &args.out)?;
    let stale = remove_stale(&site, &args.out)?;
    let n = runs.len();
    let Changes { added, kept, replaced, removed } = changes;
    crate::print_out(&format!(
        "published {n} run{} to {} ({added} added, {replaced} replaced, {kept} kept, {removed} removed; {} files, \
         {stale} stale removed); upload the folder as it is, or look at it with `speedmatrix serve {}`\n",
        if n == 1 { "" } else { "s" },
        args.out.display(),
        site.files.len(),
        args.out.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_are_plain_and_unique() {
        let mut taken = Vec::new();
        for (path, want) in [
            ("a/b/h200 qwen.json", "h200-qwen.json"),
            ("c/h200 qwen.json", "h200-qwen-2.json"),
            ("index.json", "run-index.json"),
            ("../..json", "run.json"),
            ("<script>.json", "script.json"),
        ] {
            let name = run_file_name(Path::new(path), &taken);
            assert_eq!(name, want, "{path}");
            assert!(speedmatrix_schema::site::is_plain_relative(&name));
            taken.push(name);
        }
    }

    #[test]
    fn viewer_assets_are_recognised_by_their_hashed_names() {
        for yes in [
            "speedmatrix-viewer-4bf27298efc07277.js",
            "speedmatrix-viewer-4bf27298efc07277_bg.wasm",
            "style-98c9b8c365f23b3a.css",
        ] {
            assert!(is_viewer_asset(yes), "{yes}");
        }
        for no in [
            "index.html",
            "style.css",
            "my-page-2024.css",
            "notes-4bf27298efc07277.txt",
            "-4bf27298efc07277.js",
            "results.json",
        ] {
            assert!(!is_viewer_asset(no), "{no}");
        }
    }
}
