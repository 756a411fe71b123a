//! The docs a clone reads stay true to the code: docs/METHODOLOGY.md defines every metric of the
//! registry and every cell status, docs/ARCHITECTURE.md and METHODOLOGY.md name only files that
//! exist, and README links both.

use speedmatrix_schema::registry::{DERIVED, METRICS};
use speedmatrix_schema::CellStatus;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The first cells (`| `id` |`) of the table rows in `text`.
fn first_cells(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |").map(|(id, _)| id.to_string()))
        .collect()
}

#[test]
fn methodology_defines_every_metric_and_status() {
    let doc = read("docs/METHODOLOGY.md");
    let defined = first_cells(&doc);
    for m in METRICS.iter().chain(DERIVED) {
        assert!(defined.iter().any(|d| d == m.id), "docs/METHODOLOGY.md has no row for metric `{}`", m.id);
    }
    for s in CellStatus::ALL {
        assert!(defined.iter().any(|d| d == s.id()), "docs/METHODOLOGY.md has no row for status `{}`", s.id());
    }
    // No row for a metric the registry (measured or derived) does not have (a renamed or removed one).
    let known =
        |id: &str| METRICS.iter().chain(DERIVED).any(|m| m.id == id) || CellStatus::ALL.iter().any(|s| s.id() == id);
    for d in &defined {
        assert!(known(d), "docs/METHODOLOGY.md defines `{d}`, which is neither a registry metric nor a status");
    }
}

/// Backquoted repository paths in `text` (`collector/src/measuring/run.rs`, `tests/fixtures/`).
fn repo_paths(text: &str) -> Vec<String> {
    let tops = ["shared/", "twin/", "collector/", "viewer/", "tests/", "scripts/", "docs/", "dist/"];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| tops.iter().any(|t| s.starts_with(t)) && !s.contains(' ') && !s.contains('*'))
        .map(str::to_string)
        .collect()
}

#[test]
fn docs_name_files_that_exist() {
    for doc in ["docs/ARCHITECTURE.md", "docs/METHODOLOGY.md"] {
        let paths = repo_paths(&read(doc));
        assert!(paths.len() >= 5, "{doc}: {paths:?}");
        for p in paths {
            assert!(Path::new(&root().join(&p)).exists(), "{doc} names `{p}`, which does not exist");
        }
    }
}

#[test]
fn readme_links_both_docs() {
    let readme = read("README.md");
    for doc in ["docs/ARCHITECTURE.md", "docs/METHODOLOGY.md"] {
        assert!(readme.contains(&format!("]({doc}")), "README.md does not link {doc}");
    }
}
