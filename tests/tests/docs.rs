//! The docs a clone reads stay true to the code: docs/METHODOLOGY.md defines every metric of the
//! registry and every cell status; docs/CLI.md has every flag of every command's `--help` in
//! that command's section; docs/ARCHITECTURE.md names every module of every crate's `src/`;
//! docs/EXPORT.md lists the cells table's columns as the code has them; the docs name only
//! files that exist; README links them.

use speedmatrix_schema::registry::{CONVERSATION, DERIVED, METRICS, PREFIX_CACHE, SPEC_DECODE};
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
    for m in METRICS.iter().chain(DERIVED).chain(PREFIX_CACHE).chain(CONVERSATION).chain(SPEC_DECODE) {
        assert!(defined.iter().any(|d| d == m.id), "docs/METHODOLOGY.md has no row for metric `{}`", m.id);
    }
    for s in CellStatus::ALL {
        assert!(defined.iter().any(|d| d == s.id()), "docs/METHODOLOGY.md has no row for status `{}`", s.id());
    }
    // No row for a metric the registry (measured or derived) does not have (a renamed or removed one).
    let known = |id: &str| {
        METRICS.iter().chain(DERIVED).chain(PREFIX_CACHE).chain(CONVERSATION).chain(SPEC_DECODE).any(|m| m.id == id)
            || CellStatus::ALL.iter().any(|s| s.id() == id)
    };
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
    for doc in ["docs/ARCHITECTURE.md", "docs/METHODOLOGY.md", "docs/CLI.md", "README.md"] {
        let paths = repo_paths(&read(doc));
        assert!(paths.len() >= 5, "{doc}: {paths:?}");
        for p in paths {
            assert!(Path::new(&root().join(&p)).exists(), "{doc} names `{p}`, which does not exist");
        }
    }
}

#[test]
fn readme_links_the_docs() {
    let readme = read("README.md");
    for doc in ["docs/ARCHITECTURE.md", "docs/METHODOLOGY.md", "docs/CLI.md", "docs/EXPORT.md", "BENCHMARKS.md"] {
        assert!(readme.contains(&format!("]({doc}")), "README.md does not link {doc}");
    }
}

/// The `--help` of `speedmatrix` with `args` (none: the top level).
fn help(args: &[&str]) -> String {
    let o =
        std::process::Command::new(support::bin()).args(args).arg("--help").output().expect("run speedmatrix --help");
    assert!(o.status.success(), "speedmatrix {} --help: {}", args.join(" "), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("help is UTF-8")
}

/// The commands the top-level help lists (its `Commands:` block), without clap's `help`.
fn commands(top: &str) -> Vec<String> {
    top.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command's line is indented by two; its wrapped description further.
        .filter(|l| l.starts_with("  ") && !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The flags a clap help defines: `-o`, `--out` from its option lines (`  -o, --out <OUT>`,
/// `      --url <URL>`), not the flags its descriptions mention (indented further).
fn flags(help: &str) -> Vec<String> {
    let is_flag = |w: &&str| {
        w.starts_with('-')
            && !w.trim_start_matches('-').is_empty()
            && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    let mut found = vec![];
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        if indent > 6 || !line.trim_start().starts_with('-') {
            continue;
        }
        let head = line.trim_start().split("  ").next().unwrap_or_default();
        found.extend(head.split([',', ' ', '=', '[', '<']).filter(is_flag).map(str::to_string));
    }
    found
}

/// The section of `doc` under the heading `## {title}`, up to the next `## ` heading.
fn section<'a>(doc: &'a str, title: &str) -> Option<&'a str> {
    let heading = format!("\n## {title}\n");
    let start = doc.find(&heading)? + heading.len();
    let rest = &doc[start..];
    Some(&rest[..rest.find("\n## ").unwrap_or(rest.len())])
}

/// Whether `text` names `flag` as a whole word (`-o` is not named by `--out`, nor `--url` by
/// `--url-base`).
fn names_flag(text: &str, flag: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-';
    text.match_indices(flag).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(part) && !text[i + flag.len()..].chars().next().is_some_and(part)
    })
}

/// Flags every command's help has; docs/CLI.md describes them once, in the top-level section.
const GLOBAL: [&str; 4] = ["-h", "--help", "-V", "--version"];

#[test]
fn cli_doc_has_every_flag_of_every_command() {
    let doc = read("docs/CLI.md");
    let top = help(&[]);
    let cmds = commands(&top);
    assert!(cmds.len() >= 10 && cmds.iter().any(|c| c == "run"), "commands of `speedmatrix --help`: {cmds:?}");
    let mut missing = vec![];
    for (title, cmd) in std::iter::once(("speedmatrix".to_string(), None))
        .chain(cmds.iter().map(|c| (format!("speedmatrix {c}"), Some(c.as_str()))))
    {
        let Some(text) = section(&doc, &title) else {
            missing.push(format!("no section `## {title}`"));
            continue;
        };
        let h = match cmd {
            None => top.clone(),
            Some(c) => help(&[c]),
        };
        let fl = flags(&h);
        assert!(cmd.is_none() || !fl.is_empty(), "no flags read from `{title} --help`:\n{h}");
        for f in fl.iter().filter(|f| cmd.is_none() || !GLOBAL.contains(&f.as_str())) {
            if !names_flag(text, f) {
                missing.push(format!("`{f}` of `{title} --help` is not in its section `## {title}`"));
            }
        }
    }
    assert!(missing.is_empty(), "docs/CLI.md lacks:\n{}", missing.join("\n"));
}

/// Every `.rs` file under `dir`, as a path relative to the repository root.
fn rust_files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(root().join(dir)).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let name = entry.expect("directory entry").file_name();
        let rel = dir.join(&name);
        if root().join(&rel).is_dir() {
            rust_files(&rel, out);
        } else if rel.extension().is_some_and(|e| e == "rs") {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn architecture_names_every_module() {
    let doc = read("docs/ARCHITECTURE.md");
    let mut files = vec![];
    for src in ["collector/src", "shared/src", "twin/src", "viewer/src"] {
        rust_files(Path::new(src), &mut files);
    }
    assert!(files.len() > 50, "{files:?}");
    files.sort();
    // A row of its own, with its job: a mention elsewhere in the text does not count.
    let rows: Vec<&str> =
        doc.lines().filter_map(|l| l.strip_prefix("| `")?.split_once("` |").map(|(p, _)| p)).collect();
    let missing: Vec<&String> = files.iter().filter(|f| !rows.contains(&f.as_str())).collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md does not name these modules (a row `| `PATH` | its job |` in its crate's table under \"The modules\"): {missing:?}"
    );
}

/// docs/EXPORT.md documents the cells table (`speedmatrix export`, a site's `runs/cells.*`)
/// column by column, in the code's order, with the code's type, unit and source, and states
/// the code's column-list version.
#[test]
fn export_doc_lists_the_cells_tables_columns() {
    use speedmatrix_schema::cells;
    let documented = support::export_doc::columns();
    let code = cells::columns();
    let names = |v: Vec<String>| v.join(", ");
    assert_eq!(
        names(documented.iter().map(|d| d.name.clone()).collect()),
        names(code.iter().map(|c| c.name.clone()).collect()),
        "docs/EXPORT.md's column names and order are not the code's (speedmatrix_schema::cells::columns)"
    );
    let mut wrong = vec![];
    for (d, c) in documented.iter().zip(&code) {
        let want = (c.kind.id(), c.unit, c.source);
        if (d.kind.as_str(), d.unit.as_str(), d.source.as_str()) != want {
            wrong.push(format!("`{}`: the doc says {:?}, the code {want:?}", d.name, (&d.kind, &d.unit, &d.source)));
        }
        if d.meaning.is_empty() {
            wrong.push(format!("`{}` has no meaning in the doc", d.name));
        }
    }
    assert!(wrong.is_empty(), "docs/EXPORT.md disagrees with the code (type, unit, source):\n{}", wrong.join("\n"));
    assert_eq!(
        support::export_doc::version(),
        cells::CELLS_VERSION,
        "docs/EXPORT.md states another column-list version"
    );
}
