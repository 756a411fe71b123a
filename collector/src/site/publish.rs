//! `speedmatrix publish RUN.json… --out SITE/`: a static site ready to upload — the viewer
//! (the built `dist/`, embedded in this binary), each run under `runs/`, `runs/index.json`
//! listing them, and beside it every row of every run as one table, `runs/cells.csv` and
//! `runs/cells.parquet` (the table of `speedmatrix export`, docs/EXPORT.md). `serve` uses the
//! same site model in memory.

use crate::cli::PublishArgs;
use crate::command::{CommandError, Failure, OutputError};
use crate::export::parquet::to_parquet;
use crate::files::FileError;
use speedmatrix_schema::cells::RunOf;
use speedmatrix_schema::site::{duplicate_groups, entry_for_file, integrity, Integrity, RunIndex, RunIndexEntry};
use std::collections::{BTreeMap, BTreeSet};
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
    /// Every file of the site to write.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Files of the site already on disk as they should be (`runs/NAME` of a run a republish
    /// keeps unchanged): not rewritten, not stale.
    pub unchanged: BTreeSet<String>,
}

/// Why a site could not be built or written.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// This binary was built without a `dist/`.
    #[error("this speedmatrix was built without the viewer (dist/ was empty); rebuild it from a full checkout")]
    NoViewer,
    /// A run cannot be read or is no valid results file.
    #[error(transparent)]
    Run(#[from] FileError),
    /// The run index cannot be encoded.
    #[error("cannot encode runs/index.json")]
    Index(#[source] serde_json::Error),
    /// The cells table cannot be encoded as Parquet (a bug: the table is always encodable).
    #[error("cannot encode runs/cells.parquet")]
    Cells(#[source] parquet::errors::ParquetError),
    /// A folder of the site cannot be created.
    #[error("cannot create {}", .path.display())]
    CreateFolder {
        /// The folder.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A file of the site cannot be written.
    #[error("cannot write {}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The site's `runs/index.json` exists but cannot be read.
    #[error("cannot read {}", .path.display())]
    IndexRead {
        /// The index file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The site's `runs/index.json` is no run index this build reads.
    #[error("{}: {why}; fix it, or delete it to publish a new site there", .path.display())]
    IndexInvalid {
        /// The index file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A run the site lists, which stays, changed after it was published.
    #[error(
        "runs/{name} changed after it was published: the site's index records sha256 {published}, the file now has \
         {now}; to publish it as it is now, give it again (speedmatrix publish {}/runs/{name} --out {}), else restore \
         the published file or take it out with --remove {name}",
        .out.display(), .out.display()
    )]
    ChangedRun {
        /// Its file name under `runs/`.
        name: String,
        /// The site folder.
        out: PathBuf,
        /// The digest the index records.
        published: String,
        /// The file's digest now.
        now: String,
    },
    /// A run the site lists, which stays, cannot be read or is invalid.
    #[error(
        "runs/{name}, listed in the site's index, cannot be used; take it out with --remove {name} or fix the file"
    )]
    ListedRun {
        /// Its file name under `runs/`.
        name: String,
        /// Why it cannot be read.
        #[source]
        source: FileError,
    },
    /// `--remove` names no run of the site.
    #[error("--remove {what}: no run of the site has this run id or file name (its runs: {runs})")]
    UnknownRemove {
        /// The run id or file name given.
        what: String,
        /// The site's run files, or "none".
        runs: String,
    },
    /// No run given and none in the site.
    #[error("nothing to publish: give results files (speedmatrix publish RUN.json… --out {})", .out.display())]
    Nothing {
        /// The `--out` folder.
        out: PathBuf,
    },
    /// A file an earlier publish left that this one no longer has cannot be deleted.
    #[error("cannot delete the stale {}", .path.display())]
    DeleteStale {
        /// The stale file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The closing line cannot be printed.
    #[error(transparent)]
    Output(#[from] OutputError),
}

impl CommandError for SiteError {
    fn failure(&self) -> Failure {
        match self {
            SiteError::Run(e) => e.failure(),
            SiteError::Output(e) => e.failure(),
            SiteError::IndexRead { .. }
            | SiteError::IndexInvalid { .. }
            | SiteError::ListedRun { .. }
            | SiteError::ChangedRun { .. }
            | SiteError::UnknownRemove { .. }
            | SiteError::Nothing { .. } => Failure::BadInput,
            _ => Failure::Working,
        }
    }
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

/// A run of a site: its file name under `runs/`, its bytes (unchanged), what they hold and
/// its index entry.
#[derive(Debug, Clone)]
pub struct StoredRun {
    /// The file name under `runs/`, e.g. `h200-qwen.json`.
    pub name: String,
    /// The file's bytes, as given; `None` for a run already in the site, unchanged (not
    /// rewritten).
    pub bytes: Option<Vec<u8>>,
    /// The loaded run.
    pub results: speedmatrix_schema::Results,
    /// Its entry in `runs/index.json` (with the file's digest).
    pub entry: RunIndexEntry,
}

impl StoredRun {
    /// A run to write as `name`: its entry made from the bytes.
    pub fn new(name: String, bytes: Vec<u8>, results: speedmatrix_schema::Results) -> StoredRun {
        let entry = entry_for_file(&results, &name, &bytes);
        StoredRun { name, bytes: Some(bytes), results, entry }
    }
}

/// The site for these runs: the viewer, `runs/<name>.json` (the files' bytes, unchanged) and
/// `runs/index.json`.
///
/// # Errors
/// [`SiteError::Run`] (bad input) when a run cannot be read or is invalid; [`SiteError::NoViewer`] when this binary
/// carries no viewer.
pub fn build_site(runs: &[PathBuf]) -> Result<Site, SiteError> {
    let mut stored: Vec<StoredRun> = Vec::new();
    for path in runs {
        let (bytes, results) = crate::files::read_results_bytes(path)?;
        let taken: Vec<String> = stored.iter().map(|r| r.name.clone()).collect();
        stored.push(StoredRun::new(run_file_name(path, &taken), bytes, results));
    }
    site_of(&stored)
}

/// The site of these stored runs, in this order: the viewer, `runs/<name>` (those with bytes;
/// the others are [`Site::unchanged`]), `runs/index.json` and the cells table of the runs
/// beside it, `runs/cells.csv` and `runs/cells.parquet` — one file published under several
/// names ([`duplicate_groups`]) has its rows there once, under its first name.
///
/// # Errors
/// [`SiteError::NoViewer`] when this binary carries no viewer.
pub fn site_of(runs: &[StoredRun]) -> Result<Site, SiteError> {
    let mut site = viewer_site()?;
    let entries: Vec<RunIndexEntry> = runs.iter().map(|r| r.entry.clone()).collect();
    for r in runs {
        let path = format!("runs/{}", r.name);
        if let Some(bytes) = &r.bytes {
            site.files.insert(path, bytes.clone());
        } else {
            site.unchanged.insert(path);
        }
    }
    let firsts: Vec<usize> = duplicate_groups(&entries).iter().map(|g| g[0]).collect();
    let mut index = serde_json::to_vec_pretty(&RunIndex::new(entries)).map_err(SiteError::Index)?;
    index.push(b'\n');
    site.files.insert("runs/index.json".into(), index);
    let table: Vec<RunOf<'_>> =
        firsts.iter().map(|&i| RunOf { file: &runs[i].name, results: &runs[i].results }).collect();
    site.files.insert(CELLS_CSV.into(), speedmatrix_schema::cells::to_csv(&table).into_bytes());
    site.files.insert(CELLS_PARQUET.into(), to_parquet(&table).map_err(SiteError::Cells)?);
    Ok(site)
}

/// The cells table of a site, as CSV, beside its index.
pub const CELLS_CSV: &str = "runs/cells.csv";
/// The cells table of a site, as Parquet, beside its index.
pub const CELLS_PARQUET: &str = "runs/cells.parquet";

/// A run the existing site lists: its file name, its index entry (and whether this build wrote
/// it, so it can be kept as it is), and the file read from disk (or why it could not be).
#[derive(Debug)]
struct Listed {
    name: String,
    entry: RunIndexEntry,
    current: bool,
    file: Result<(Vec<u8>, speedmatrix_schema::Results), FileError>,
}

/// The runs the site under `out` lists in its `runs/index.json` (any index version this build
/// reads); none when there is no index. A listed file that is gone is left out with a warning.
///
/// # Errors
/// [`SiteError::IndexRead`] / [`SiteError::IndexInvalid`] when the index exists but cannot be
/// read or parsed.
fn listed_runs(out: &Path) -> Result<Vec<Listed>, SiteError> {
    let path = out.join("runs/index.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(SiteError::IndexRead { path, source }),
    };
    let index = speedmatrix_schema::site::load_index(&bytes)
        .map_err(|e| SiteError::IndexInvalid { path: path.clone(), why: e.to_string() })?;
    let current = index.schema_version == speedmatrix_schema::site::INDEX_SCHEMA_VERSION;
    let mut listed = Vec::new();
    for e in index.runs {
        let file_path = out.join("runs").join(&e.file);
        if !file_path.is_file() {
            eprintln!("warning: {} is listed in the index but missing; left out", file_path.display());
            continue;
        }
        let file = crate::files::read_results_bytes(&file_path);
        listed.push(Listed { name: e.file.clone(), entry: e, current, file });
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

/// A run the site lists that stays (before a given file may replace it).
struct Staying {
    name: String,
    entry: RunIndexEntry,
    current: bool,
    bytes: Vec<u8>,
    results: speedmatrix_schema::Results,
}

/// A listed run that is not replaced, kept as it is on disk: its entry is reused when this
/// build wrote it and the file still has its digest, else made again from the file.
///
/// # Errors
/// [`SiteError::ChangedRun`] when the file no longer has the digest the index records.
fn keep(s: Staying, out: &Path) -> Result<StoredRun, SiteError> {
    let reuse = match integrity(s.entry.sha256.as_deref(), &s.bytes) {
        Integrity::Same => s.current,
        Integrity::Unrecorded => false,
        Integrity::Changed { published, now } => {
            return Err(SiteError::ChangedRun { name: s.name, out: out.to_path_buf(), published, now })
        }
    };
    let entry = if reuse { s.entry } else { entry_for_file(&s.results, &s.name, &s.bytes) };
    Ok(StoredRun { name: s.name, bytes: None, results: s.results, entry })
}

/// The site's runs after a publish: the listed runs less those `remove` names (by run id or
/// file name), then each new run (path, bytes, run) added — replacing a listed run with the
/// same file name and run id, else under a name of its own. Listed runs that stay as they are
/// keep their file (not rewritten) and, when it is unchanged, their index entry.
///
/// # Errors
/// [`SiteError::UnknownRemove`] when a `--remove` matches no run; [`SiteError::ListedRun`] when a
/// listed run that stays cannot be read; [`SiteError::ChangedRun`] when one changed after it
/// was published.
fn merge(
    listed: Vec<Listed>,
    new: Vec<(PathBuf, Vec<u8>, speedmatrix_schema::Results)>,
    remove: &[String],
    out: &Path,
) -> Result<(Vec<StoredRun>, Changes), SiteError> {
    let mut changes = Changes::default();
    let matches = |l: &Listed, what: &str| {
        l.name == what || l.entry.id.as_deref() == Some(what) || l.file.as_ref().is_ok_and(|(_, r)| r.run.id == what)
    };
    if let Some(unknown) = remove.iter().find(|w| !listed.iter().any(|l| matches(l, w))) {
        let names: Vec<&str> = listed.iter().map(|l| l.name.as_str()).collect();
        let runs = if names.is_empty() { "none".to_string() } else { names.join(", ") };
        return Err(SiteError::UnknownRemove { what: unknown.clone(), runs });
    }
    let mut staying: Vec<Staying> = Vec::new();
    for l in listed {
        if remove.iter().any(|w| matches(&l, w)) {
            changes.removed += 1;
            continue;
        }
        let (bytes, results) = match l.file {
            Ok(file) => file,
            Err(source) => return Err(SiteError::ListedRun { name: l.name, source }),
        };
        staying.push(Staying { name: l.name, entry: l.entry, current: l.current, bytes, results });
    }
    // Which listed run each given file replaces, if any (one file each).
    let mut replacing: Vec<Option<(PathBuf, Vec<u8>, speedmatrix_schema::Results)>> =
        staying.iter().map(|_| None).collect();
    let mut added = Vec::new();
    for (path, bytes, results) in new {
        let wanted = run_file_name(&path, &[]);
        let same = staying.iter().position(|k| k.name == wanted && k.results.run.id == results.run.id);
        match same {
            Some(i) if replacing[i].is_none() => replacing[i] = Some((path, bytes, results)),
            _ => added.push((path, bytes, results)),
        }
    }
    let mut runs: Vec<StoredRun> = Vec::new();
    for (s, by) in staying.into_iter().zip(replacing) {
        match by {
            Some((_, bytes, results)) => {
                runs.push(StoredRun::new(s.name, bytes, results));
                changes.replaced += 1;
            }
            None => {
                runs.push(keep(s, out)?);
                changes.kept += 1;
            }
        }
    }
    for (path, bytes, results) in added {
        let taken: Vec<String> = runs.iter().map(|k| k.name.clone()).collect();
        runs.push(StoredRun::new(run_file_name(&path, &taken), bytes, results));
        changes.added += 1;
    }
    Ok((runs, changes))
}

/// The names under which one file is published again, as `COPY = FIRST` (empty when none).
pub fn duplicates_of(runs: &[StoredRun]) -> Vec<String> {
    let entries: Vec<RunIndexEntry> = runs.iter().map(|r| r.entry.clone()).collect();
    duplicate_groups(&entries)
        .into_iter()
        .filter(|g| g.len() > 1)
        .flat_map(|g| {
            let first = runs[g[0]].name.clone();
            g[1..].iter().map(move |&i| format!("{} = {first}", runs[i].name)).collect::<Vec<_>>()
        })
        .collect()
}

/// The viewer site alone (a page that opens local files).
///
/// # Errors
/// [`SiteError::NoViewer`] when this binary was built without a `dist/`.
pub fn viewer_site() -> Result<Site, SiteError> {
    if !viewer_files().iter().any(|(p, _)| *p == "index.html") {
        return Err(SiteError::NoViewer);
    }
    Ok(Site {
        files: viewer_files().iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect(),
        unchanged: BTreeSet::new(),
    })
}

/// Write the site's files under `out` (created if needed; files already there are replaced;
/// [`Site::unchanged`] ones are left as they are).
///
/// # Errors
/// [`SiteError::CreateFolder`] or [`SiteError::Write`] when a folder or file cannot be written.
pub fn write_site(site: &Site, out: &Path) -> Result<(), SiteError> {
    for (rel, bytes) in &site.files {
        let path = out.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| SiteError::CreateFolder { path: parent.to_path_buf(), source })?;
        }
        std::fs::write(&path, bytes).map_err(|source| SiteError::Write { path, source })?;
    }
    Ok(())
}

/// Whether a top-level file name is one of the viewer's built assets (scripts/build-viewer.sh names them
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
/// [`SiteError::DeleteStale`] when a stale file cannot be deleted.
pub fn remove_stale(site: &Site, out: &Path) -> Result<usize, SiteError> {
    let mut stale = Vec::new();
    let list = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| d.flatten().filter(|e| e.path().is_file()).map(|e| e.file_name().to_string_lossy().into_owned()))
            .map(Iterator::collect)
            .unwrap_or_default()
    };
    for name in list(&out.join("runs")) {
        let path = format!("runs/{name}");
        if name.ends_with(".json") && !site.files.contains_key(&path) && !site.unchanged.contains(&path) {
            stale.push(out.join("runs").join(name));
        }
    }
    for name in list(out) {
        if is_viewer_asset(&name) && !site.files.contains_key(&name) {
            stale.push(out.join(name));
        }
    }
    for path in &stale {
        std::fs::remove_file(path).map_err(|source| SiteError::DeleteStale { path: path.clone(), source })?;
    }
    Ok(stale.len())
}

/// Run `publish`: the runs the site already lists, less `--remove`, plus the given files; then
/// the viewer, the runs and a new index written, and stale files deleted.
///
/// # Errors
/// [`SiteError`] (bad input) for a bad run, a broken index, an unknown `--remove`, or nothing to
/// publish; otherwise as [`write_site`] and [`remove_stale`].
pub fn run(args: &PublishArgs) -> Result<(), SiteError> {
    let mut new = Vec::new();
    for path in &args.runs {
        let (bytes, results) = crate::files::read_results_bytes(path)?;
        new.push((path.clone(), bytes, results));
    }
    let listed = listed_runs(&args.out)?;
    if new.is_empty() && args.remove.is_empty() && listed.is_empty() {
        return Err(SiteError::Nothing { out: args.out.clone() });
    }
    let (runs, changes) = merge(listed, new, &args.remove, &args.out)?;
    let site = site_of(&runs)?;
    write_site(&site, &args.out)?;
    let stale = remove_stale(&site, &args.out)?;
    let n = runs.len();
    let Changes { added, kept, replaced, removed } = changes;
    let dups = duplicates_of(&runs);
    let dups = if dups.is_empty() {
        String::new()
    } else {
        format!("; the same file under two names, listed once: {}", dups.join(", "))
    };
    Ok(crate::command::print_out(&format!(
        "published {n} run{} to {} ({added} added, {replaced} replaced, {kept} kept, {removed} removed; {} files \
         written, {} kept as they were, {stale} stale removed{dups}); upload the folder as it is, or look at it with \
         `speedmatrix serve {}`\n",
        if n == 1 { "" } else { "s" },
        args.out.display(),
        site.files.len(),
        site.unchanged.len(),
        args.out.display()
    ))?)
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
