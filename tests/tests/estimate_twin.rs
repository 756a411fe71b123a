//! The wall-time estimate of `speedmatrix run` against real measured runs: the h200 twin
//! (`speedmatrix simulate`, a real server process on loopback) measured by the real binary with
//! small plans. The estimate printed before measuring, and the corrected one printed once the
//! first prefill row or cell has measured the server, are each within 25 % of the run's measured
//! wall time; the closing line reports both. Timing-sensitive: run it under the heavy lock.

mod support;

use std::process::Command;
use std::time::Instant;
use support::twin::twin;

/// Seconds of a duration as the collector writes it: "45 s", "1 min 30 s", "27 min", "1 h 05 min".
fn seconds(text: &str) -> f64 {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut total = 0.0;
    for pair in words.chunks(2) {
        let n: f64 = pair[0].parse().unwrap_or_else(|_| panic!("a number in {text:?}"));
        total += n * match pair.get(1).copied() {
            Some("s") => 1.0,
            Some("min") => 60.0,
            Some("h") => 3600.0,
            other => panic!("unit {other:?} in {text:?}"),
        };
    }
    total
}

/// The duration after `≈ ` in the first line starting with `prefix`, up to " (" or the end.
fn estimate_in(log: &str, prefix: &str) -> Option<f64> {
    let line = log.lines().find(|l| l.starts_with(prefix))?;
    let after = line.split_once("≈ ")?.1;
    Some(seconds(after.split(" (").next()?.trim()))
}

/// Run the plan `flags` against a fresh twin; returns the wall time, s, and stderr.
fn timed_run(flags: &[&str]) -> (f64, String) {
    let (_twin, url) = twin(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let start = Instant::now();
    let o = Command::new(support::BIN)
        .args(["run", "--url", &url, "-o", out.to_str().unwrap(), "--quiet"])
        .args(flags)
        .output()
        .expect("run the collector");
    let wall = start.elapsed().as_secs_f64();
    let log = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{log}");
    (wall, log)
}

fn within(what: &str, estimate: f64, wall: f64, log: &str) {
    let off = (estimate - wall).abs() / wall;
    eprintln!("{what}: estimated {estimate:.0} s, measured {wall:.1} s ({:+.0} %)", 100.0 * (estimate - wall) / wall);
    assert!(off <= 0.25, "{what}: estimated {estimate} s, the run took {wall:.1} s ({:.0} % off)\n{log}", off * 100.0);
}

/// One run at a time: two runs at once would slow each other down.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check(flags: &[&str]) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (wall, log) = timed_run(flags);
    let first = estimate_in(&log, "plan: estimated wall time").unwrap_or_else(|| panic!("no estimate:\n{log}"));
    within("the plan's estimate", first, wall, &log);
    let corrected = estimate_in(&log, "estimate: wall time").unwrap_or_else(|| panic!("no corrected estimate:\n{log}"));
    within("the corrected estimate", corrected, wall, &log);
    let done = log.lines().find(|l| l.starts_with("done in ")).unwrap_or_else(|| panic!("no closing line:\n{log}"));
    assert!(done.contains(&format!("(estimated {})", log_duration(&log))), "{done}");
}

/// The plan's estimate as written ("52 s").
fn log_duration(log: &str) -> String {
    let line = log.lines().find(|l| l.starts_with("plan: estimated wall time")).unwrap_or_default();
    line.split_once("≈ ").map(|(_, a)| a.split(" (").next().unwrap_or_default().trim().to_string()).unwrap_or_default()
}

/// The demo's plan (prefill at 8K and 64K, 2 contexts × 1, 8, 32 streams, 5 s windows): the old
/// estimate said 2 minutes for this run of under a minute.
#[test]
fn the_demo_plan_is_estimated_within_a_quarter() {
    check(&["--contexts", "8k,64k", "--concurrency", "1,8,32", "--prefill-contexts", "8k,64k", "--duration", "5s"]);
}

/// No prefill rows: each decode context needs its own warm-up, and the readiness of the first
/// cell corrects the estimate.
#[test]
fn a_plan_without_prefill_rows_is_estimated_within_a_quarter() {
    check(&["--contexts", "8k,32k", "--concurrency", "1,16", "--prefill-contexts", "none", "--duration", "3s"]);
}
