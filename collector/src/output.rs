//! Writing the results file: atomically (temp file in the same folder, fsync, rename), so a
//! reader — or a crash — never sees half a file (DESIGN §5).

use speedmatrix_schema::Results;
use std::io::Write;
use std::path::Path;

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
