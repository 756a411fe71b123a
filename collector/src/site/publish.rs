//! `speedmatrix publish RUN.json… --out SITE/`: a static site ready to upload — the viewer
//! (the built `dist/`, embedded in this binary), each run under `runs/`, and `runs/index.json`
//! listing them. `serve` uses the same site model in memory.

use crate::cli::PublishArgs;
use crate::files::FileError;
use crate::{CommandError, Failure, OutputError};
use speedmatrix_schema::site::{entry_for, RunIndex};
use std::collections::BTreeMap;
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
    /// The closing line cannot be printed.
    #[error(transparent)]
    Output(#[from] OutputError),
}

impl CommandError for SiteError {
    fn failure(&self) -> Failure {
        match self {
            SiteError::Run(e) => e.failure(),
            SiteError::Output(e) => e.failure(),
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

/// The site for these runs: the viewer, `runs/<name>.json` (the files' bytes, unchanged) and
/// `runs/index.json`.
///
/// # Errors
/// [`SiteError::Run`] (bad input) when a run cannot be read or is invalid;
/// [`SiteError::NoViewer`] when this binary carries no viewer.
pub fn build_site(runs: &[PathBuf]) -> Result<Site, SiteError> {
    let mut site = viewer_site()?;
    let mut names: Vec<String> = Vec::new();
    let mut entries = Vec::new();
    for path in runs {
        let (bytes, results) = crate::files::read_results_bytes(path)?;
        let name = run_file_name(path, &names);
        entries.push(entry_for(&results, &name));
        site.files.insert(format!("runs/{name}"), bytes);
        names.push(name);
    }
    let mut index = serde_json::to_vec_pretty(&RunIndex::new(entries)).map_err(SiteError::Index)?;
    index.push(b'\n');
    site.files.insert("runs/index.json".into(), index);
    Ok(site)
}

/// The viewer alone (a page that opens local files).
///
/// # Errors
/// [`SiteError::NoViewer`] when this binary was built without a `dist/`.
pub fn viewer_site() -> Result<Site, SiteError> {
    if !viewer_files().iter().any(|(p, _)| *p == "index.html") {
        return Err(SiteError::NoViewer);
    }
    Ok(Site { files: viewer_files().iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect() })
}

/// Write the site under `out` (created if needed; files already there are replaced).
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

/// Run `publish`.
///
/// # Errors
/// As [`build_site`] and [`write_site`].
pub fn run(args: &PublishArgs) -> Result<(), SiteError> {
    let site = build_site(&args.runs)?;
    write_site(&site, &args.out)?;
    let runs = args.runs.len();
    Ok(crate::print_out(&format!(
        "published {runs} run{} to {} ({} files); upload the folder as it is, or look at it with `speedmatrix serve {}`\n",
        if runs == 1 { "" } else { "s" },
        args.out.display(),
        site.files.len(),
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
}
