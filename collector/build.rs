//! Embed the built viewer in the `speedmatrix` binary: every file of the workspace's `dist/`
//! (or of `$SPEEDMATRIX_DIST_DIR`, which CI points at a fresh build by scripts/build-viewer.sh) becomes an
//! `include_bytes!` entry of `DIST_FILES`, so `publish` and `serve` need no wasm toolchain.
//! `dist/SOURCE_HASH` (build metadata) is left out.

use std::path::{Path, PathBuf};

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            walk(root, &path, out);
        } else if let Ok(rel) = path.strip_prefix(root) {
            let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
            if rel != "SOURCE_HASH" {
                out.push((rel, path.canonicalize().unwrap_or(path)));
            }
        }
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=SPEEDMATRIX_DIST_DIR");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let dist = match std::env::var_os("SPEEDMATRIX_DIST_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => manifest.join("..").join("dist"),
    };
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut files = Vec::new();
    walk(&dist, &dist, &mut files);
    files.sort();
    let mut code = String::from("/// The built viewer: (path inside `dist/`, bytes), sorted by path.\n");
    code.push_str("pub static DIST_FILES: &[(&str, &[u8])] = &[\n");
    for (rel, abs) in &files {
        code.push_str(&format!("    ({rel:?}, include_bytes!({:?})),\n", abs.display().to_string()));
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("dist_files.rs");
    std::fs::write(out, code).expect("write dist_files.rs");
}
