//! Reading results files from disk or standard input (the I/O edge). Parsing, migration and
//! validation are `speedmatrix_schema::load_results`; this module only adds the file name.

use crate::Error;
use speedmatrix_schema::Results;
use std::io::Read;
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
