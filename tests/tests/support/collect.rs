//! Running the collector binary in end-to-end tests: `speedmatrix run --quiet -o OUT ARGS…`
//! against a server URL, and reading the results file it wrote through the real loader.

use speedmatrix_schema::{load_results, Results};
use std::path::Path;

/// Run the collector binary with `args` against `url`, writing `out`; returns (exit code, stderr).
pub async fn collect(url: &str, out: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = tokio::process::Command::new(super::bin())
        .args(["run", "--url", url, "--quiet", "-o"])
        .arg(out)
        .args(args)
        .output()
        .await
        .expect("run the collector");
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The results file at `out`, which must load and validate.
pub fn read(out: &Path) -> Results {
    load_results(&std::fs::read(out).unwrap()).expect("the results file is valid")
}
