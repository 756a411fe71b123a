//! `run --resume FILE` alone continues a run: the plan, model and server URL come from FILE.
//! A real run against the twin (`speedmatrix simulate`, its own process on loopback) is
//! interrupted with SIGINT once its first decode cell is in the file, then resumed with only
//! `--resume FILE`; it completes every planned cell and keeps the one measured before. The run
//! has a `--kv-budget` of the user's (below the twin's own), which the resume keeps: the plan's
//! over-capacity cell stays over capacity and the header check does not see a changed budget.
//! Resumed once more, the complete file is said to be complete and left byte for byte.

use speedmatrix_schema::{load_results, CellStatus, Results, RunStatus};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::twin::twin;

fn read(path: &Path) -> Option<Results> {
    load_results(&std::fs::read(path).ok()?).ok()
}

#[test]
fn resume_with_only_the_file_completes_every_planned_cell() {
    let (_twin, url) = twin(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    // 16K × 4 needs 4 × (16,384 + 4,096) tokens: over a 60,000-token budget.
    let flags = [
        "--contexts",
        "8k,16k",
        "--concurrency",
        "1,4",
        "--prefill-contexts",
        "8k",
        "--duration",
        "2s",
        "--kv-budget",
        "60000",
    ];
    let run = Command::new(support::bin())
        .args(["run", "--url", &url, "-o", out.to_str().unwrap(), "--quiet"])
        .args(flags)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the run");
    // Wait for the first decode cell in the file, then Ctrl-C.
    let start = Instant::now();
    loop {
        let first = read(&out).is_some_and(|r| r.decode.first().is_some_and(|c| c.status != CellStatus::NotRun));
        if first {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no decode cell after a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = run.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let o = run.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{log}");
    let stopped = read(&out).expect("the interrupted file");
    assert_eq!(stopped.run.status, RunStatus::Interrupted);
    let left = stopped.decode.iter().filter(|c| c.status == CellStatus::NotRun).count();
    assert!(left >= 1 && left < stopped.decode.len(), "{left} of {} cells left", stopped.decode.len());
    assert_eq!(stopped.config.server_url.as_deref(), Some(url.as_str()), "the file records the server");

    // Resume with the file alone: no --url, no matrix flags.
    let o = Command::new(support::bin()).args(["run", "--resume", out.to_str().unwrap(), "--quiet"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(log.contains("from the file") && log.contains("--contexts") && log.contains("--url"), "{log}");
    let done = read(&out).expect("the resumed file");
    assert_eq!(done.run.status, RunStatus::Complete, "{log}");
    assert_eq!(
        (&done.config.contexts, &done.config.concurrency),
        (&stopped.config.contexts, &stopped.config.concurrency)
    );
    assert_eq!((done.config.window_s, done.config.max_tokens), (stopped.config.window_s, stopped.config.max_tokens));
    assert_eq!(done.decode.len(), 4, "2 contexts × 2 levels");
    for c in &done.decode {
        let over = (c.context.tokens, c.concurrency) == (16_384, 4);
        let ok = if over { c.status == CellStatus::OverCapacity } else { c.status.is_measured() };
        assert!(ok, "{} × {}: {:?} {:?}", c.context.label, c.concurrency, c.status, c.reason);
    }
    assert!(log.contains("--kv-budget"), "the budget is taken from the file: {log}");
    assert_eq!(
        (done.engine.kv_budget_tokens, done.engine.kv_budget_source),
        (Some(60_000), Some(speedmatrix_schema::KvBudgetSource::Flag))
    );
    assert_eq!(done.decode[0], stopped.decode[0], "the cell measured before the interruption is kept");
    assert_eq!(done.run.id, stopped.run.id);

    // Resumed again, complete: said so with its count and its path, and not rewritten.
    let bytes = std::fs::read(&out).unwrap();
    let o = Command::new(support::bin()).args(["run", "--resume", out.to_str().unwrap(), "--quiet"]).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{log}");
    let said = format!("{} is already complete: nothing is left to measure of its 5 rows and cells", out.display());
    assert!(log.contains(&said), "{log}");
    assert!(!log.contains("done in"), "nothing was measured: {log}");
    assert!(std::fs::read(&out).unwrap() == bytes, "the complete file is left byte for byte (finished_at too)");

    // An explicit flag the file's plan does not match is still refused by the resume check.
    let o = Command::new(support::bin())
        .args(["run", "--resume", out.to_str().unwrap(), "--duration", "3s", "--quiet"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{log}");
    assert!(log.contains(": --duration differs from the file's; repeat the run's flags ("), "{log}");
}
