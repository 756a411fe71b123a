//! The collector's own faults, each against the twin in its own process on loopback: the
//! collector killed with SIGKILL (the file on disk is always a whole one, and `--resume`
//! continues it); a save that fails mid-run — a full disk, stood in for by a file-size limit
//! (`ulimit -f`, with SIGXFSZ ignored so the write fails with EFBIG as on a full disk) — stops
//! the run naming the file, and the last good file survives; a results file edited by hand and
//! then resumed is refused, naming what is wrong (a value of the wrong type, by its place; a
//! header that no longer matches the server, by its field and the flag that accepts it).
//!
//! These run the collector in real time: run them under the machine-wide lock.

use speedmatrix_schema::{load_results, CellStatus, Results, RunStatus};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::twin::twin;

const PLAN: [&str; 8] = ["--contexts", "8k", "--concurrency", "1,4", "--prefill-contexts", "none", "--duration", "2s"];

fn read(path: &Path) -> Option<Results> {
    load_results(&std::fs::read(path).ok()?).ok()
}

/// Wait until the file at `path` holds a measured first decode cell.
fn first_cell_landed(path: &Path) {
    let start = Instant::now();
    while !read(path).is_some_and(|r| r.decode.first().is_some_and(|c| c.status.is_measured())) {
        assert!(start.elapsed() < Duration::from_secs(60), "no decode cell after a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigkill_leaves_a_whole_file_that_resume_completes_and_a_hand_edited_one_is_refused() {
    let (_twin, url) = twin(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let run = Command::new(support::bin())
        .args(["run", "--url", &url, "-o", out.to_str().unwrap(), "--quiet"])
        .args(PLAN)
        .stderr(Stdio::null())
        .spawn()
        .expect("start the run");
    first_cell_landed(&out);
    let pid = run.id().to_string();
    assert!(Command::new("kill").args(["-KILL", &pid]).status().unwrap().success());
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), None, "killed by a signal");
    let killed = read(&out).expect("after SIGKILL the file is a whole, valid results file");
    assert_eq!(killed.run.status, RunStatus::Running, "nothing could write the end: the file says it was running");
    assert!(killed.decode[0].status.is_measured() && killed.decode[0].total_tps.is_some());

    // Edited by hand: a value of the wrong type is refused with its place; so is another plan.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    v["decode"][0]["total_tps"] = "fast".into();
    let bad = dir.path().join("edited.json");
    std::fs::write(&bad, serde_json::to_vec(&v).unwrap()).unwrap();
    let o = Command::new(support::bin()).args(["run", "--resume", bad.to_str().unwrap(), "--quiet"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{log}");
    assert!(log.contains("edited.json") && log.contains("decode[0].total_tps"), "{log}");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    v["engine"]["version"] = "0.19.0".into();
    let other = dir.path().join("other-server.json");
    std::fs::write(&other, serde_json::to_vec(&v).unwrap()).unwrap();
    let o =
        Command::new(support::bin()).args(["run", "--resume", other.to_str().unwrap(), "--quiet"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{log}");
    assert!(log.contains("0.19.0") && log.contains("--accept-change engine-version"), "the field and its flag: {log}");
    assert_eq!(std::fs::read(&other).unwrap(), serde_json::to_vec(&v).unwrap(), "a refused resume writes nothing");

    // The killed run resumes and completes, keeping the cell measured before.
    let o = Command::new(support::bin()).args(["run", "--resume", out.to_str().unwrap(), "--quiet"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{log}");
    let done = read(&out).unwrap();
    assert_eq!(done.run.status, RunStatus::Complete);
    assert_eq!(done.decode[0], killed.decode[0]);
    assert!(
        done.decode.iter().all(|c| c.status.is_measured()),
        "{:?}",
        done.decode.iter().map(|c| c.status).collect::<Vec<_>>()
    );
}

#[test]
fn a_save_that_fails_stops_the_run_naming_the_file_and_keeps_the_last_good_one() {
    let (_twin, url) = twin(&[]);
    let dir = tempfile::tempdir().unwrap();
    // The same plan measured once without a limit: the file's size after its first cell and
    // when complete. A file-size limit halfway between lets the plan-only save and the first
    // cell's through and fails the last, as a disk filling up would. (Halfway, not just under
    // the complete size: two runs' files differ by tens of bytes, a cell adds kilobytes.)
    let probe = dir.path().join("probe.json");
    let run = Command::new(support::bin())
        .args(["run", "--url", &url, "-o", probe.to_str().unwrap(), "--quiet"])
        .args(PLAN)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    first_cell_landed(&probe);
    let first = std::fs::metadata(&probe).unwrap().len();
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let full = std::fs::metadata(&probe).unwrap().len();
    std::fs::remove_file(&probe).unwrap();
    let limit_kib = (first + full) / 2 / 1024;
    assert!(
        limit_kib * 1024 > first + 512 && limit_kib * 1024 + 512 < full,
        "a limit of {limit_kib} KiB must leave room on both sides of the first cell's save ({first} B) and the last ({full} B)"
    );
    let out = dir.path().join("run.json");
    let script = format!(
        "trap '' XFSZ; ulimit -f {limit_kib}; exec \"$0\" run --url {url} -o {} --quiet {}",
        out.display(),
        PLAN.join(" ")
    );
    let o = Command::new("bash").args(["-c", &script, support::bin()]).output().expect("run bash");
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "a failed save is a failure while working: {log}");
    assert!(log.contains(&format!("cannot write {}", out.display())), "the error names the file: {log}");
    let kept = read(&out).expect("the last good file survives whole");
    assert!(kept.decode[0].status.is_measured(), "the cell measured before the failed save is kept");
    assert!(kept.decode[0].total_tps.is_some());
    assert_eq!(kept.decode[1].status, CellStatus::NotRun, "the cell whose save failed is not in the file");
    let stray: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(stray.len(), 1, "no temporary file left behind: {stray:?}");
}
