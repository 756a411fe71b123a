//! Reading results files from disk or standard input (the I/O edge). Parsing, migration and
//! validation are `speedmatrix_schema::load_results`; this module only adds the file name.

use crate::Error;
use speedmatrix_schema::Results;
use std::io::Read;
use std::path::Path;

/// Read and validate a results file; `-` reads standard input.
///
/// # Errors
/// [`Error::Input`] (exit code 2) with one line `FILE: problem` when the file cannot be read
/// or is not a valid results file.
pub fn read_results(path: &Path) -> Result<Results, Error> {
    let name = path.display();
    let bytes = if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| Error::Input(format!("cannot read standard input: {e}")))?;
        buf
    } else {
        std::fs::read(path).map_err(|e| Error::Input(format!("cannot read {name}: {e}")))?
    };
    speedmatrix_schema::load_results(&bytes).map_err(|e| Error::Input(format!("{name}: {e}")))
}
