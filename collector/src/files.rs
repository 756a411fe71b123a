//! Results files on disk (the I/O edge): reading one (from a file or standard input, size-capped)
//! and writing one atomically. Parsing, migration and validation are
//! `speedmatrix_schema::load_results`; this module only adds the file name and the disk.

use crate::Error;
use speedmatrix_schema::Results;
use std::io::{Read, Write};
use std::path::Path;

/// Read and validate a results file; `-` reads standard input. At most
/// [`speedmatrix_schema::load::MAX_FILE_BYTES`] (+1 to detect more) are read, so a device or a
/// huge file cannot exhaust memory.
///
/// # Errors
/// [`Error::Input`] (exit code 2) with one line `FILE: problem` when the file cannot be read
/// or is not a valid results file.
pub fn read_results(path: &Path) -> Result<Results, Error> {
    let stdin = path == Path::new("-");
    let name = if stdin { "standard input".to_string() } else { path.display().to_string() };
    let limit = speedmatrix_schema::load::MAX_FILE_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    let read = if stdin {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut bytes))
    };
    read.map_err(|e| Error::Input(format!("{name}: cannot read: {e}")))?;
    speedmatrix_schema::load_results(&bytes).map_err(|e| Error::Input(format!("{name}: {e}")))
}

/// Writing is atomic (temp file in the same folder, fsync, rename), so a reader — or a crash —
/// never sees half a file.
/// Serialize `results` and replace `path` with it atomically.
///
/// # Errors
/// I/O errors creating, writing or renaming the temp file, with the path in the message.
pub fn write_atomic(path: &Path, results: &Results) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(results)?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "results.json".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    })
}
