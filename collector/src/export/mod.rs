//! `speedmatrix export RUN.json… -o cells.parquet|cells.csv`: every measured row of the given
//! runs (prefill rows, decode cells, rate cells, replayed traces) in one flat, typed table with
//! each run's header — the table `publish` writes beside a site's index as `runs/cells.csv` and
//! `runs/cells.parquet`. The columns are [`speedmatrix_schema::cells`]'s, documented in
//! `docs/EXPORT.md`; [`parquet`] writes the Parquet file.

pub mod parquet;

use crate::cli::{ExportArgs, ExportFormat};
use crate::command::{CommandError, Failure, OutputError};
use crate::files::FileError;
use speedmatrix_schema::cells::{self, RunOf};
use std::path::{Path, PathBuf};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A run cannot be read or is no valid results file.
    #[error(transparent)]
    Run(#[from] FileError),
    /// `--out` names no format and `--format` is not given.
    #[error(
        "--out {}: cannot tell the format from its extension; name it .parquet or .csv, or give --format parquet|csv",
        .0.display()
    )]
    UnknownFormat(PathBuf),
    /// The Parquet writer failed (a bug: the table is always encodable).
    #[error("cannot encode the cells table as Parquet")]
    Parquet(#[source] ::parquet::errors::ParquetError),
    /// The closing line cannot be printed.
    #[error(transparent)]
    Output(#[from] OutputError),
}

impl CommandError for ExportError {
    fn failure(&self) -> Failure {
        match self {
            ExportError::Run(e) => e.failure(),
            ExportError::Output(e) => e.failure(),
            ExportError::UnknownFormat(_) => Failure::BadInput,
            ExportError::Parquet(_) => Failure::Working,
        }
    }
}

/// The format to write: `--format`, else `--out`'s extension (`.parquet`, `.pq`, `.csv`).
///
/// # Errors
/// [`ExportError::UnknownFormat`] when neither says.
pub fn format_of(out: &Path, given: Option<ExportFormat>) -> Result<ExportFormat, ExportError> {
    if let Some(f) = given {
        return Ok(f);
    }
    let ext = out.extension().map(|e| e.to_string_lossy().to_ascii_lowercase());
    match ext.as_deref() {
        Some("parquet" | "pq") => Ok(ExportFormat::Parquet),
        Some("csv") => Ok(ExportFormat::Csv),
        _ => Err(ExportError::UnknownFormat(out.to_path_buf())),
    }
}

/// The cells table of `runs` in `format`, as bytes.
///
/// # Errors
/// [`ExportError::Parquet`] when the Parquet writer fails.
pub fn table_bytes(runs: &[RunOf<'_>], format: ExportFormat) -> Result<Vec<u8>, ExportError> {
    match format {
        ExportFormat::Csv => Ok(cells::to_csv(runs).into_bytes()),
        ExportFormat::Parquet => parquet::to_parquet(runs).map_err(ExportError::Parquet),
    }
}

/// The name a run has in the table: its file name, without folders.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Run `export`: read and check every run, then write the table to `--out` atomically.
///
/// # Errors
/// [`ExportError`]: a bad run or an unknown format (bad input), or the file cannot be written.
pub fn run(args: &ExportArgs) -> Result<(), ExportError> {
    let format = format_of(&args.out, args.format)?;
    crate::files::check_writable(&args.out)?;
    let mut loaded = Vec::new();
    for path in &args.runs {
        loaded.push((file_name(path), crate::files::read_results(path)?));
    }
    let runs: Vec<RunOf<'_>> = loaded.iter().map(|(file, results)| RunOf { file, results }).collect();
    let bytes = table_bytes(&runs, format)?;
    crate::files::write_bytes_atomic(&args.out, &bytes)?;
    let rows: usize = runs.iter().map(|r| cells::row_count(r.results)).sum();
    Ok(crate::command::print_out(&format!(
        "wrote {} ({rows} row{} from {} run{}, {} columns, cells version {})\n",
        args.out.display(),
        if rows == 1 { "" } else { "s" },
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        cells::columns().len(),
        cells::CELLS_VERSION,
    ))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_comes_from_the_flag_else_the_extension() {
        let f = |p: &str, g| format_of(Path::new(p), g).ok();
        assert_eq!(f("a/cells.parquet", None), Some(ExportFormat::Parquet));
        assert_eq!(f("cells.PQ", None), Some(ExportFormat::Parquet));
        assert_eq!(f("cells.csv", None), Some(ExportFormat::Csv));
        assert_eq!(f("cells.txt", Some(ExportFormat::Csv)), Some(ExportFormat::Csv));
        assert_eq!(f("cells.csv", Some(ExportFormat::Parquet)), Some(ExportFormat::Parquet));
        assert_eq!(f("cells", None), None);
        let e = format_of(Path::new("cells.txt"), None).unwrap_err();
        assert_eq!(e.failure(), Failure::BadInput);
        assert!(e.to_string().contains("--format parquet|csv"), "{e}");
    }
}
