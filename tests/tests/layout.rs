//! No two files of the workspace import each other (issue 31): when A uses B's items and B uses
//! A's, the two are one module split in two files, or a type sits in the wrong one; the shared
//! part belongs in a module both can use.
//!
//! The scan maps every `.rs` file of the four crates to its module path (`lib.rs` is the crate
//! root, `a/mod.rs` and `a.rs` are `a`), reads the paths each file names (`use crate::a::{b,
//! c::d}`, `crate::a::f()`, `super::x`, `self::x`, a child module's `x::y`) with a small
//! tokenizer that skips comments and literals, resolves each to the deepest module that has a
//! file, and fails on every pair A → B, B → A. Paths into other crates are not read: crates
//! cannot depend on each other both ways.
//!
//! `cargo test -p speedmatrix-tests --test layout -- --nocapture` prints the pairs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The source folders scanned, from the workspace root.
const CRATES: [&str; 4] = ["collector/src", "shared/src", "twin/src", "viewer/src"];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

/// The identifiers, `::` and punctuation of Rust source; comments, strings, chars, lifetimes
/// and numbers are skipped.
fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let (ch, next) = (c[i], c.get(i + 1).copied());
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && next == Some('*') {
            i = skip_block_comment(&c, i);
        } else if ch == '"' {
            i = skip_string(&c, i + 1);
        } else if ch == '\'' {
            i = skip_char_or_lifetime(&c, i);
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            i = skip_word(&c, i);
            let word: String = c[start..i].iter().collect();
            match literal_after_prefix(&c, i, &word) {
                Some(end) => i = end,
                None if word == "r" && c.get(i) == Some(&'#') => {} // raw identifier: `#` then the word
                None => out.push(Tok::Ident(word)),
            }
        } else if ch.is_ascii_digit() {
            i = skip_word(&c, i);
        } else if ch == ':' && next == Some(':') {
            out.push(Tok::Sep);
            i += 2;
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

fn skip_word(c: &[char], mut i: usize) -> usize {
    while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
        i += 1;
    }
    i
}

/// After `/*` at `i` (nested comments included).
fn skip_block_comment(c: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// After the closing quote of a string whose body starts at `i`.
fn skip_string(c: &[char], mut i: usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// After a char literal (`'a'`, `'\''`, `'\u{1F600}'`) or a lifetime (`'a`) at `i`.
fn skip_char_or_lifetime(c: &[char], i: usize) -> usize {
    if c.get(i + 1) == Some(&'\\') {
        let mut j = i + 3;
        while j < c.len() && c[j] != '\'' {
            j += 1;
        }
        j + 1
    } else if c.get(i + 2) == Some(&'\'') {
        i + 3
    } else {
        skip_word(c, i + 1)
    }
}

/// The end of the literal that `word` (ending at `i`) prefixes: `b"…"`, `b'…'`, `r"…"`,
/// `r#"…"#`, `br#"…"#`, `c"…"`; None when `word` is an identifier.
fn literal_after_prefix(c: &[char], i: usize, word: &str) -> Option<usize> {
    if !matches!(word, "b" | "r" | "br" | "c" | "cr") {
        return None;
    }
    if word == "b" && c.get(i) == Some(&'\'') {
        return Some(skip_char_or_lifetime(c, i));
    }
    if !word.contains('r') {
        return (c.get(i) == Some(&'"')).then(|| skip_string(c, i + 1));
    }
    let hashes = c[i..].iter().take_while(|&&h| h == '#').count();
    if c.get(i + hashes) != Some(&'"') {
        return None;
    }
    let mut j = i + hashes + 1;
    while j < c.len() {
        if c[j] == '"' && c[j + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

/// The absolute module paths (segments from the crate root) a file at module path `here` names:
/// every `crate::…`, `super::…` and `self::…` path, and every `x::…` whose `x` is a child module
/// with a file (`is_module`), use groups expanded. Inside an inline `mod m { … }`, `super` and
/// `self` are relative to `m`.
fn named_paths(toks: &[Tok], here: &[String], is_module: &dyn Fn(&[String]) -> bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut scope = here.to_vec();
    // The brace depth at which each inline `mod … {` of `scope` opened.
    let mut opened: Vec<usize> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < toks.len() {
        let starts_path = i == 0 || !matches!(toks[i - 1], Tok::Sep | Tok::Punct('$'));
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if opened.last() == Some(&depth) {
                    opened.pop();
                    scope.pop();
                }
            }
            Tok::Ident(m) if m == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct('{'))) = (toks.get(i + 1), toks.get(i + 2)) {
                    if after_cfg_test(toks, i) {
                        i = block_end(toks, i + 2);
                        continue;
                    }
                    scope.push(name.clone());
                    opened.push(depth);
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(first) if starts_path && toks.get(i + 1) == Some(&Tok::Sep) => {
                if let Some(base) = path_start(first, &scope, is_module) {
                    i = path_tail(toks, i + 2, base, &mut out);
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether the item at `toks[i]` is under `#[cfg(test)]` (a `pub` before it included).
fn after_cfg_test(toks: &[Tok], i: usize) -> bool {
    let start = if i > 0 && toks[i - 1] == Tok::Ident("pub".into()) { i - 1 } else { i };
    let attr: Vec<Tok> = tokens("#[cfg(test)]");
    start >= attr.len() && toks[start - attr.len()..start] == attr[..]
}

/// The index after the `}` that closes the `{` at `toks[open]`.
fn block_end(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') if depth == 1 => return i + 1,
            Tok::Punct('}') => depth -= 1,
            _ => {}
        }
    }
    toks.len()
}

/// Where a path that begins with `first::` starts, or None when it is not into this crate.
fn path_start(first: &str, scope: &[String], is_module: &dyn Fn(&[String]) -> bool) -> Option<Vec<String>> {
    match first {
        "crate" => Some(Vec::new()),
        "self" => Some(scope.to_vec()),
        "super" => Some(scope[..scope.len().checked_sub(1)?].to_vec()),
        child => {
            let path = [scope, &[child.to_string()]].concat();
            is_module(&path).then_some(path)
        }
    }
}

/// Reads the rest of a path after `base::` from `toks[i]` (segments, `{…}` groups, `*`,
/// `as x`), pushes every full path onto `out` and returns the index after it.
fn path_tail(toks: &[Tok], mut i: usize, mut base: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s)) if s == "super" => {
                base.pop();
            }
            Some(Tok::Ident(s)) if s == "self" => {}
            Some(Tok::Ident(s)) => base.push(s.clone()),
            Some(Tok::Punct('{')) => {
                i += 1;
                while !matches!(toks.get(i), Some(Tok::Punct('}')) | None) {
                    let end = path_tail(toks, i, base.clone(), out);
                    i = if toks.get(end) == Some(&Tok::Punct(',')) { end + 1 } else { end.max(i + 1) };
                }
                return i + 1;
            }
            next => {
                out.push(base);
                return if next == Some(&Tok::Punct('*')) { i + 1 } else { i };
            }
        }
        i += 1;
        if toks.get(i) != Some(&Tok::Sep) {
            out.push(base);
            let renamed = matches!(toks.get(i), Some(Tok::Ident(a)) if a == "as");
            return if renamed { i + 2 } else { i };
        }
        i += 1;
    }
}

/// One `.rs` file: its path from the workspace root, its crate folder, module path and text.
struct Source {
    file: String,
    krate: String,
    module: Vec<String>,
    text: String,
}

/// The module path of `rel` (a path inside a crate's `src/`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if parts.last().is_some_and(|p| p == "mod") || (parts.len() == 1 && parts[0] == "lib") {
        parts.pop();
    }
    parts
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every file of the four crates; a `main.rs` beside a `lib.rs` is a crate of its own that
/// reaches the library by name only, so it is left out.
fn workspace_sources() -> Vec<Source> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut sources = Vec::new();
    for krate in CRATES {
        let src = root.join(krate);
        let mut files = Vec::new();
        rs_files(&src, &mut files);
        for path in files {
            let rel = path.strip_prefix(&src).unwrap();
            if rel == Path::new("main.rs") && src.join("lib.rs").exists() {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let file = format!("{krate}/{}", rel.display());
            assert!(!text.contains("#[path"), "{file}: `#[path]` modules are not followed by this scan");
            sources.push(Source { file, krate: krate.to_string(), module: module_of(rel), text });
        }
    }
    sources
}

/// Every pair of files that import each other, `A ↔ B` with what each names in the other, and
/// whether one of the two modules is inside the other (`import/mod.rs` and `import/vllm_bench.rs`).
fn mutual_pairs(sources: &[Source]) -> Vec<(bool, String)> {
    let files: BTreeMap<(&str, &[String]), &str> =
        sources.iter().map(|s| ((s.krate.as_str(), s.module.as_slice()), s.file.as_str())).collect();
    let module_of_file: BTreeMap<&str, &[String]> =
        sources.iter().map(|s| (s.file.as_str(), s.module.as_slice())).collect();
    // (from, to) → the paths `from` names in `to`.
    let mut edges: BTreeMap<(&str, &str), BTreeSet<String>> = BTreeMap::new();
    for s in sources {
        let is_module = |p: &[String]| files.contains_key(&(s.krate.as_str(), p));
        for path in named_paths(&tokens(&s.text), &s.module, &is_module) {
            let deepest = (0..=path.len()).rev().find_map(|n| files.get(&(s.krate.as_str(), &path[..n])));
            if let Some(&to) = deepest.filter(|&&to| to != s.file) {
                edges.entry((s.file.as_str(), to)).or_default().insert(format!("crate::{}", path.join("::")));
            }
        }
    }
    let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
    edges
        .iter()
        .filter(|((a, b), _)| a < b)
        .filter_map(|((a, b), ab)| {
            let ba = edges.get(&(*b, *a))?;
            let (ma, mb) = (module_of_file[a], module_of_file[b]);
            let nested = ma.starts_with(mb) || mb.starts_with(ma);
            Some((nested, format!("{a} ↔ {b}\n    {a} names {}\n    {b} names {}", names(ab), names(ba))))
        })
        .collect()
}

/// Two modules neither inside the other must not import each other. A module and the modules
/// inside it (`engine/mod.rs` and `engine/vllm.rs`, `lib.rs` and every file) are one unit: the
/// parent declares its children and picks among them, they use its items through `super::` —
/// Rust's own layout; those pairs are printed, not failed.
#[test]
fn no_two_files_import_each_other() {
    let sources = workspace_sources();
    assert!(sources.len() > 100, "found only {} files", sources.len());
    let (nested, separate): (Vec<_>, Vec<_>) = mutual_pairs(&sources).into_iter().partition(|(n, _)| *n);
    println!("{} pairs of a module and one inside it import each other (allowed):", nested.len());
    for (_, p) in &nested {
        println!("{p}");
    }
    let separate: Vec<String> = separate.into_iter().map(|(_, p)| p).collect();
    println!("{} pairs of separate modules import each other:\n{}", separate.len(), separate.join("\n"));
    assert!(
        separate.is_empty(),
        "{} pairs of files import each other (move what both need into a module both can use):\n{}",
        separate.len(),
        separate.join("\n")
    );
}

fn segs(path: &str) -> Vec<String> {
    path.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn paths_in(src: &str, here: &str, modules: &[&str]) -> Vec<String> {
    let is_module = |p: &[String]| modules.contains(&p.join("::").as_str());
    named_paths(&tokens(src), &segs(here), &is_module).iter().map(|p| p.join("::")).collect()
}

#[test]
fn scanner_skips_comments_strings_and_chars() {
    let src = r####"
        let s = "crate::a::x \" crate::b::x"; // crate::c::x
        /* crate::d /* nested */ crate::e */ let r = r##"crate::f "# crate::g"##;
        let q = ('x', '\'', b'"', br"crate::h", '\u{2192}'); fn f<'a>(x: &'a str) {}
        $crate::i::x(); crate::j::f();
    "####;
    assert_eq!(paths_in(src, "", &[]), ["j::f"]);
}

#[test]
fn scanner_expands_use_groups_and_relative_paths() {
    let src = "use crate::{a, b::{c, d as e}, f::*}; use super::{self, x}; self::y::z(); child::w(); other::v();";
    assert_eq!(
        paths_in(src, "m::n", &["m::n::child"]),
        ["a", "b::c", "b::d", "f", "m", "m::x", "m::n::y::z", "m::n::child::w"]
    );
    // Inside an inline module `super` is the file's own module; after it, the file's parent again.
    let src = "mod tests { use super::t; mod deep { use super::super::u; } } use super::v;";
    assert_eq!(paths_in(src, "m::n", &[]), ["m::n::t", "m::n::u", "m::v"]);
}

#[test]
fn module_paths_follow_file_names() {
    assert_eq!(module_of(Path::new("lib.rs")), Vec::<String>::new());
    assert_eq!(module_of(Path::new("import/mod.rs")), ["import"]);
    assert_eq!(module_of(Path::new("measuring/measure/tests.rs")), ["measuring", "measure", "tests"]);
}

#[test]
fn pairs_are_found_told_nested_or_not_and_tests_are_left_out() {
    let source = |file: &str, module: &str, text: &str| Source {
        file: file.to_string(),
        krate: "k/src".to_string(),
        module: segs(module),
        text: text.to_string(),
    };
    let sources = [
        source("lib.rs", "", "pub mod a; pub mod b; pub mod c; pub use c::g; pub fn root() {}"),
        source("a.rs", "a", "use crate::b::B; pub struct A;"),
        source("b.rs", "b", "pub struct B; fn f() -> crate::a::A { crate::c::g() }"),
        // Its tests' use of `b` does not make a pair with `b`.
        source("c.rs", "c", "pub fn g() { crate::root() } #[cfg(test)] mod tests { use crate::b::B; }"),
    ];
    let pairs = mutual_pairs(&sources);
    assert_eq!(pairs.len(), 2, "{pairs:?}");
    assert_eq!(pairs[0], (false, "a.rs ↔ b.rs\n    a.rs names crate::b::B\n    b.rs names crate::a::A".to_string()));
    assert_eq!(pairs[1], (true, "c.rs ↔ lib.rs\n    c.rs names crate::root\n    lib.rs names crate::c::g".to_string()));
}
