//! The column list of the cells table as `docs/EXPORT.md` documents it (its "Columns" table:
//! name, type, unit, source, meaning) and the column-list version it states — what
//! `docs.rs` checks against the code and `export_pyarrow.rs` against the Parquet file.

use std::path::PathBuf;

/// One documented column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocColumn {
    /// The column's name.
    pub name: String,
    /// `STRING`, `DOUBLE`, `INT64` or `BOOLEAN`.
    pub kind: String,
    /// Its unit; empty for none.
    pub unit: String,
    /// Where its values come from.
    pub source: String,
    /// What it is.
    pub meaning: String,
}

/// The text of `docs/EXPORT.md`.
pub fn text() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/EXPORT.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the "Columns" table (`| `name` | TYPE | unit | source | meaning |`), in order.
pub fn columns() -> Vec<DocColumn> {
    let doc = text();
    let section = doc.split("\n## Columns\n").nth(1).expect("docs/EXPORT.md has a \"## Columns\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim().trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 5, "docs/EXPORT.md: a column row has 5 cells: {l}");
            DocColumn {
                name: cells[0].trim_matches('`').to_string(),
                kind: cells[1].to_string(),
                unit: cells[2].to_string(),
                source: cells[3].to_string(),
                meaning: cells[4].to_string(),
            }
        })
        .collect()
}

/// The version the doc states on its line `Column-list version: **N**`.
pub fn version() -> i64 {
    let doc = text();
    let line =
        doc.lines().find(|l| l.starts_with("Column-list version: **")).expect("a `Column-list version: **N**` line");
    line.trim_start_matches("Column-list version: **")
        .split("**")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("docs/EXPORT.md: no version number in {line:?}"))
}
