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

/// The site for these runs: the viewer, `runs/<name>.json` (the files' bytes, unchanged) and
/// `runs/index.json`.
///
/// # Errors
/// [`Error::Input`] when a run cannot be read or is invalid; [`Error::Other`] when this binary
/// carries no viewer.
pub fn build_site(runs: &[PathBuf]) -> Result<Site, Error> {
    let mut site = viewer_site()?;
    let mut names: Vec<String> = Vec::new();
    let mut entries = Vec::new();
    for path in runs {
        let (bytes, results) = read_run(path)?;
        let name = run_file_name(path, &names);
        entries.push(entry_for(&results, &name));
        site.files.insert(format!("runs/{name}"), bytes);
        names.push(name);
    }
    let mut index = serde_json::to_vec_pretty(&RunIndex::new(entries)).map_err(anyhow::Error::from)?;
    index.push(b'\n');
    site.files.insert("runs/index.json".into(), index);
    Ok(site)
}

/// The viewer alone (a page that opens local files).
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

/// Run `publish`.
///
/// # Errors
/// As [`build_site`] and [`write_site`].
pub fn run(args: &PublishArgs) -> Result<(), Error> {
    let site = build_site(&args.runs)?;
    write_site(&site, &args.out)?;
    let runs = args.runs.len();
    crate::print_out(&format!(
        "published {runs} run{} to {} ({} files); upload the folder as it is, or look at it with `speedmatrix serve {}`\n",
        if runs == 1 { "" } else { "s" },
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
}
