//! The binary's `diff` and `publish` as the tests call them: the diff's JSON and its verdicts,
//! a site published from run files.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `speedmatrix diff A B ARGS…`.
pub fn diff(a: &Path, b: &Path, args: &[&str]) -> Output {
    Command::new(super::bin()).arg("diff").arg(a).arg(b).args(args).output().expect("run speedmatrix diff")
}

/// `speedmatrix diff A B -f json --metric METRIC`, parsed (it must exit 0).
pub fn json_diff(a: &Path, b: &Path, metric: &str) -> Value {
    json_diff_with(a, b, metric, &[])
}

/// [`json_diff`] with more flags (`--threshold 1%`).
pub fn json_diff_with(a: &Path, b: &Path, metric: &str, args: &[&str]) -> Value {
    let o = diff(a, b, &[&["-f", "json", "--metric", metric][..], args].concat());
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The verdicts on `column` of the decode cells valid in both runs of a JSON diff.
pub fn verdicts(d: &Value, column: &str) -> Vec<String> {
    d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["phase"] == "decode" && r["status_a"] == "valid" && r["status_b"] == "valid")
        .map(|r| {
            let delta = r["deltas"].as_array().unwrap().iter().find(|x| x["column"] == column).unwrap();
            delta["verdict"].as_str().unwrap().to_string()
        })
        .collect()
}

/// `speedmatrix publish RUNS --out DIR` (it must succeed).
pub fn publish<P: AsRef<Path>>(runs: &[P], out: &Path) {
    let status = Command::new(super::bin())
        .arg("publish")
        .args(runs.iter().map(AsRef::as_ref))
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .status()
        .expect("run speedmatrix publish");
    assert!(status.success(), "publish failed");
}
