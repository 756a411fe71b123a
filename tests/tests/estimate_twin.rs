//! The wall-time estimate of `speedmatrix run` against real measured runs: the h200 twin
//! (`speedmatrix simulate`, a real server process on loopback) measured by the real binary with
//! small plans. The estimate printed before measuring, and the corrected one printed once the
//! first prefill row or cell has measured the server, are within 25 % and 40 % of the run's
//! measured wall time (support/estimate.rs says why the corrected one gets more on a busy
//! machine); the closing line reports both. Timing-sensitive: .config/nextest.toml keeps it with
//! few others.
//! The demo's plan (prefill rows, then cells) is checked by `demo_cli` on the demo's own run.

use std::process::Command;
use std::time::Instant;
use support::estimate::check_estimates;
use support::twin::twin;

/// Run the plan `flags` against a fresh twin; returns the wall time, s, and stderr.
fn timed_run(flags: &[&str]) -> (f64, String) {
    let (_twin, url) = twin(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let start = Instant::now();
    let o = Command::new(support::bin())
        .args(["run", "--url", &url, "-o", out.to_str().unwrap(), "--quiet"])
        .args(flags)
        .output()
        .expect("run the collector");
    let wall = start.elapsed().as_secs_f64();
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{log}");
    (wall, log)
}

/// No prefill rows: each decode context needs its own warm-up, and the readiness of the first
/// cell corrects the estimate.
#[test]
fn a_plan_without_prefill_rows_is_estimated_within_a_quarter() {
    let (wall, log) =
        timed_run(&["--contexts", "8k,32k", "--concurrency", "1,16", "--prefill-contexts", "none", "--duration", "3s"]);
    check_estimates(&log, wall);
}
