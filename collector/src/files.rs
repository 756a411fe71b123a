//! Files on disk (the I/O edge): every user file is read here, size-capped (results files from a
//! path or standard input, other tools' result files for `import`), and results files are
//! written here, atomically. Parsing, migration and validation are
//! `speedmatrix_schema::load_results`; this module adds the file name and the disk.

use crate::command::{CommandError, Failure};
use speedmatrix_schema::load::MAX_FILE_BYTES;
use speedmatrix_schema::{LoadError, Results};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Why a file could not be read or written. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file (or standard input) could not be read.
    #[error("{name}: cannot read")]
    Read {
        /// The file as the user named it, or "standard input".
        name: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than any file of its kind (a device, a mistaken multi-GB file).
    #[error("{name}: larger than any {what} ({} MB at most)", MAX_FILE_BYTES / 1_000_000)]
    TooLarge {
        /// The file.
        name: String,
        /// What it should be, e.g. "results file".
        what: &'static str,
    },
    /// The file is not a valid results file.
    #[error("{name}")]
    Invalid {
        /// The file.
        name: String,
        /// What is wrong and where.
        #[source]
        source: LoadError,
    },
    /// Another tool's result file where a results file belongs: the `import` command that
    /// converts it.
    #[error("{hint}")]
    OtherTool {
        /// The message, with the command.
        hint: String,
    },
    /// A file (a results file, a report) could not be written.
    #[error("cannot write {}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A results file could not be encoded as JSON.
    #[error("cannot encode {} as JSON", .path.display())]
    Encode {
        /// The file.
        path: PathBuf,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },
}

impl CommandError for FileError {
    fn failure(&self) -> Failure {
        match self {
            FileError::Read { .. }
            | FileError::TooLarge { .. }
            | FileError::Invalid { .. }
            | FileError::OtherTool { .. } => Failure::BadInput,
            FileError::Write { .. } | FileError::Encode { .. } => Failure::Working,
        }
    }
}

/// How a path reads in messages: `-` is standard input.
fn display_name(path: &Path) -> String {
    if path == Path::new("-") {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}

/// The bytes of a user file (`what` it should be, e.g. "results file"); `-` reads standard
/// input. At most [`MAX_FILE_BYTES`] are accepted, so a device or a mistaken multi-GB file
/// cannot exhaust memory.
///
/// # Errors
/// [`FileError::Read`] when it cannot be read, [`FileError::TooLarge`] above the cap.
pub fn read_capped(path: &Path, what: &'static str) -> Result<Vec<u8>, FileError> {
    let name = display_name(path);
    let limit = MAX_FILE_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    let read = if path == Path::new("-") {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut bytes))
    };
    read.map_err(|source| FileError::Read { name: name.clone(), source })?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge { name, what });
    }
    Ok(bytes)
}

/// Read and validate a results file; `-` reads standard input. Returns the file's bytes too
/// (`publish` copies them unchanged).
///
/// # Errors
/// As [`read_capped`]; [`FileError::Invalid`] when it is not a valid results file.
pub fn read_results_bytes(path: &Path) -> Result<(Vec<u8>, Results), FileError> {
    let bytes = read_capped(path, "results file")?;
    let results = speedmatrix_schema::load_results(&bytes).map_err(|source| {
        let name = display_name(path);
        match (&source, foreign_format(&bytes)) {
            (LoadError::NotResults(_), Some(from)) => {
                FileError::OtherTool { hint: crate::import::formats::import_hint(&name, from) }
            }
            _ => FileError::Invalid { name, source },
        }
    })?;
    Ok((bytes, results))
}

/// Which other tool's result file `bytes` is, if it is one `import` reads.
fn foreign_format(bytes: &[u8]) -> Option<crate::cli::ImportFrom> {
    serde_json::from_slice(bytes).ok().as_ref().and_then(crate::import::formats::detect)
}

/// Read and validate a results file; `-` reads standard input.
///
/// # Errors
/// As [`read_results_bytes`].
pub fn read_results(path: &Path) -> Result<Results, FileError> {
    read_results_bytes(path).map(|(_, results)| results)
}

/// Serialize `results` and replace `path` with it atomically (temp file in the same folder,
/// fsync, rename), so a reader — or a crash — never sees half a file. The JSON is streamed into
/// the temp file, not built in memory first: a run's file can hold tens of MB of request
/// samples, and a buffer of that size would stay in the process's memory after every save.
///
/// # Errors
/// [`FileError::Write`] when the temp file cannot be created, written or renamed;
/// [`FileError::Encode`] when `results` cannot be serialized.
pub fn write_atomic(path: &Path, results: &Results) -> Result<(), FileError> {
    let mut encode_error = None;
    replace_atomically(path, |f| {
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer_pretty(&mut w, results).map_err(|e| {
            if e.is_io() {
                std::io::Error::from(e)
            } else {
                encode_error = Some(e);
                std::io::Error::other("not serializable")
            }
        })?;
        w.write_all(b"\n")?;
        w.flush()
    })
    .map_err(|e| match encode_error.take() {
        Some(source) => FileError::Encode { path: path.to_path_buf(), source },
        None => e,
    })
}

/// Replace `path` with `bytes` atomically (temp file in the same folder, fsync, rename).
///
/// # Errors
/// [`FileError::Write`] when the temp file cannot be created, written or renamed.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    replace_atomically(path, |f| f.write_all(bytes))
}

/// Replace `path` with what `fill` writes into a temp file in the same folder (then fsync,
/// rename); the temp file is removed when anything fails.
fn replace_atomically(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), FileError> {
    let tmp = temp_beside(path);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        fill(&mut f)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        FileError::Write { path: path.to_path_buf(), source }
    })
}

/// The temp file [`write_bytes_atomic`] writes before it renames it over `path`: in the same
/// folder, named after the file and this process.
fn temp_beside(path: &Path) -> PathBuf {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "results.json".into());
    dir.join(format!(".{name}.{}.tmp", std::process::id()))
}

/// Whether [`write_bytes_atomic`] could write `path` now: its temp file is created in the
/// folder and removed again (`path` itself is not touched). A command checks this before it
/// starts work that ends in the file.
///
/// # Errors
/// [`FileError::Write`], the error writing would give (a folder that does not exist, no
/// permission, a read-only file system).
pub fn check_writable(path: &Path) -> Result<(), FileError> {
    let tmp = temp_beside(path);
    std::fs::File::create(&tmp).map_err(|source| FileError::Write { path: path.to_path_buf(), source })?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}
