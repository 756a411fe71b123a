//! `run --repeat N` end to end against the twin (`speedmatrix simulate --profile tiny
//! --no-prefix-cache`, a real server process on loopback per run) measured by the real binary: a
//! small matrix (16K context × 1 and 8 streams, 3-s windows), every cell measured 3 times.
//!
//! - Two runs with different twin `--seed`: the file holds 3 repeats per valid cell, measured
//!   interleaved (every cell's repeat k before any cell's repeat k + 1); total tok/s, TTFT p50
//!   and TPOT p50 have intervals between repeats; the diff calls no cell better or worse on any
//!   of the three by the margins of [`SAME`], and `--fail-on-regression 0` passes.
//! - A third run interrupted with SIGINT in its second pass, then resumed: another `--repeat`
//!   is refused; the resume (N from the file) measures only the missing repeats and keeps the
//!   ones measured before.
//! - A twin slowed by 10 % (`--time-scale 0.9`), also `--repeat 3`: worse on total tok/s and
//!   TPOT p50 in every cell.
//! - The dry run counts the repeats; `--repeat 0` is refused naming the flag.
//!
//! Immune to load by the matrix's shape: no stream ends inside a window (4,096 tokens at ~2–3 ms
//! each outlast 3 s), so no replacement's real-time start moves tok/s or TPOT; each cold 16K
//! prefill (no prefix cache) puts ~85 ms (one stream) to ~390 ms (eight) of the twin's schedule
//! into TTFT against the few ms a busy CPU adds ([`SAME`] gives the measurement). The four runs
//! go side by side (each against its own twin, under the same load at the same moments).

use speedmatrix_schema::{load_results, CellStatus, Results, RunStatus};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::cli::{diff, json_diff, json_diff_with, verdicts};
use support::twin::twin;

const MATRIX: [&str; 12] = [
    "--contexts",
    "16k",
    "--concurrency",
    "1,8",
    "--prefill-contexts",
    "none",
    "--duration",
    "3s",
    "--seed",
    "7",
    "--repeat",
    "3",
];

/// The twin of every run: tiny, every prefill cold.
const TWIN: [&str; 3] = ["--profile", "tiny", "--no-prefix-cache"];

/// The least change the same-server diff may call better or worse, per figure (`--threshold`):
/// above what load does between two runs of one server, far below the slower twin's 10 % on
/// tok/s and TPOT. Measured with this matrix, four runs side by side as here, under
/// `yes > /dev/null` ×2 on 2 cores beside other workers (load average 4.5–21.8), two
/// same-server pairs in each of 10 trials: worst |change| total tok/s 0.14 %, TPOT p50 0.16 %,
/// TTFT p50 4.8 % (the lone stream's ~85 ms TTFT moved by up to 4 ms) — margins 1 %, 1 %, 10 %;
/// the slower twin −9.9 % tok/s, +11.0 % TPOT, p ≤ 2e-5. (The old matrix, 1K prompts served from
/// the prefix cache and 256-token streams replaced inside the window, moved total tok/s by 1.3 %
/// and TTFT p50 — 1 to 30 ms — by up to 355 %.)
const SAME: [(&str, &str); 3] = [("total_tps", "1%"), ("ttft_ms_p50", "10%"), ("tpot_ms_p50", "1%")];

fn read(path: &Path) -> Option<Results> {
    load_results(&std::fs::read(path).ok()?).ok()
}

fn collector(url: &str, out: &Path) -> Command {
    let mut c = Command::new(support::bin());
    c.args(["run", "--url", url, "--quiet", "-o"]).arg(out).args(MATRIX);
    c
}

/// Measure the matrix against a fresh tiny twin started with `twin_args`; the results file.
fn measure(dir: &Path, name: &str, twin_args: &[&str]) -> PathBuf {
    let (_twin, url) = twin(&[&TWIN[..], twin_args].concat());
    let out = dir.join(format!("{name}.json"));
    let o = collector(&url, &out).output().expect("run the collector");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// The stderr of a run's `decode … (repeat k of 3)` lines.
fn repeat_lines(log: &str) -> Vec<String> {
    log.lines().filter(|l| l.starts_with("decode") && l.contains(" of 3)")).map(str::to_string).collect()
}

/// A run interrupted with SIGINT once a cell has two repeats in the file, then resumed with the
/// file alone: (the interrupted file, the resumed file, the resume's log).
fn interrupted_and_resumed(dir: &Path) -> (Results, Results, String) {
    let (_twin, url) = twin(&[&TWIN[..], &["--seed", "3"]].concat());
    let out = dir.join("resumed.json");
    let dry = collector(&url, &out).arg("--dry-run").output().unwrap();
    let plan = String::from_utf8_lossy(&dry.stderr).to_string();
    assert_eq!(dry.status.code(), Some(0), "{plan}");
    assert!(plan.contains("every decode cell measured 3 times, interleaved"), "{plan}");
    let run = collector(&url, &out).stderr(Stdio::piped()).spawn().expect("start the run");
    let start = Instant::now();
    while !read(&out).is_some_and(|r| r.decode.iter().any(|c| c.repeats.len() >= 2)) {
        assert!(start.elapsed() < Duration::from_secs(60), "no second repeat after a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(Command::new("kill").args(["-INT", &run.id().to_string()]).status().unwrap().success());
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", String::from_utf8_lossy(&o.stderr));
    let stopped = read(&out).expect("the interrupted file");
    // The plan's N is the file's: another one is refused, and nothing is measured.
    let o = Command::new(support::bin())
        .args(["run", "--resume"])
        .arg(&out)
        .args(["--repeat", "2", "--quiet"])
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{refused}");
    assert!(refused.contains("--repeat differs from the file's") && refused.contains("--repeat 3"), "{refused}");
    assert_eq!(read(&out).as_ref(), Some(&stopped));
    let o = Command::new(support::bin()).args(["run", "--resume"]).arg(&out).arg("--quiet").output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(0), "{log}");
    (stopped, read(&out).expect("the resumed file"), log)
}

/// Every valid cell has 3 repeats, numbered, with intervals between them; the passes are
/// interleaved (the file is one process's run, so its window times share a clock).
fn assert_three_interleaved_repeats(r: &Results) {
    assert_eq!(r.config.repeats, Some(3));
    let valid: Vec<_> = r.decode.iter().filter(|c| c.status == CellStatus::Valid).collect();
    assert_eq!(valid.len(), 2, "{:?}", r.decode.iter().map(|c| (&c.status, &c.reason)).collect::<Vec<_>>());
    for c in &valid {
        assert_eq!(c.repeats.iter().map(|x| x.repeat).collect::<Vec<_>>(), [1, 2, 3]);
        let iv = c.intervals.as_ref().unwrap();
        for i in [&iv.total_tps, &iv.ttft_ms_p50, &iv.tpot_ms_p50] {
            let i = i.as_ref().expect("an interval between repeats");
            assert_eq!((i.method, i.evidence), (speedmatrix_schema::IntervalMethod::BetweenRepeats, 3));
        }
        let rel = |i: &Option<speedmatrix_schema::Interval>| {
            i.map_or(f64::NAN, |i| (i.high - i.low) / 2.0 / i.estimate * 100.0)
        };
        println!(
            "{} × {}: total tok/s {:.1} ± {:.1} %, TTFT p50 ± {:.1} %, TPOT p50 ± {:.1} %",
            c.context.label,
            c.concurrency,
            c.total_tps.unwrap_or(f64::NAN),
            rel(&iv.total_tps),
            rel(&iv.ttft_ms_p50),
            rel(&iv.tpot_ms_p50)
        );
        let mean = c.repeats.iter().filter_map(|x| x.total_tps).sum::<f64>() / 3.0;
        assert!((c.total_tps.unwrap() - mean).abs() < 1e-6, "the headline is the mean over repeats");
        assert_eq!(c.repeat_spread.len(), 3);
        assert!(c.repeats.iter().all(|x| x.series.is_some() && x.requests.unwrap_or(0) >= u64::from(c.concurrency)));
    }
    for k in 0..2 {
        let last_of_pass = valid.iter().map(|c| c.repeats[k].window_start_ms.unwrap()).fold(0.0, f64::max);
        let first_of_next = valid.iter().map(|c| c.repeats[k + 1].window_start_ms.unwrap()).fold(f64::MAX, f64::min);
        assert!(last_of_pass < first_of_next, "pass {} ends before pass {} starts", k + 1, k + 2);
    }
}

/// Each decode cell's change of `column` with its interval and p-value (for a failure's log).
fn print_deltas(d: &serde_json::Value, column: &str) {
    for r in d["rows"].as_array().into_iter().flatten().filter(|r| r["phase"] == "decode") {
        let x = r["deltas"].as_array().and_then(|x| x.iter().find(|x| x["column"] == column));
        println!(
            "{} × {} {column}: {}",
            r["context"]["label"],
            r["concurrency"],
            x.map_or(String::new(), |x| x.to_string())
        );
    }
}

#[test]
fn repeats_give_intervals_that_hold_a_reseeded_twin_within_noise_and_resume_fills_the_missing() {
    let bad = Command::new(support::bin()).args(["run", "--repeat", "0", "--dry-run"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--repeat"), "{}", String::from_utf8_lossy(&bad.stderr));

    let dir = tempfile::tempdir().unwrap();
    let (a, again, slower, (stopped, resumed, log)) = std::thread::scope(|s| {
        let a = s.spawn(|| measure(dir.path(), "a", &["--seed", "1"]));
        let again = s.spawn(|| measure(dir.path(), "again", &["--seed", "2"]));
        let slower = s.spawn(|| measure(dir.path(), "slower", &["--seed", "4", "--time-scale", "0.9"]));
        let resumed = s.spawn(|| interrupted_and_resumed(dir.path()));
        (a.join().unwrap(), again.join().unwrap(), slower.join().unwrap(), resumed.join().unwrap())
    });

    let run = read(&a).unwrap();
    assert_three_interleaved_repeats(&run);
    let show = Command::new(support::bin()).arg("show").arg(&a).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("Repeats") && text.contains("3 per cell, interleaved"), "{text}");
    assert_three_interleaved_repeats(&read(&again).unwrap());

    // Same server, other seed: no cell better or worse by its figure's margin ([`SAME`]).
    // Between-repeats intervals cover what varies within a run; two runs of one server also
    // differ by what is fixed for a run (on a real server its boot, its thermal state; here the
    // load each twin met), which 3 interleaved repeats do not sample: at the default 0 %
    // threshold CI once saw 1K × 8 total tok/s −0.15 % "worse" (interval −0.23 … −0.07 %). The
    // margin is the equivalence this test claims, each above what load was measured to do.
    for (column, margin) in SAME {
        let d = json_diff_with(&a, &again, column, &["--threshold", margin]);
        print_deltas(&d, column);
        let v = verdicts(&d, column);
        assert_eq!(v, ["within_noise"; 2], "{column} at ± {margin}");
        let gate = diff(&a, &again, &["--fail-on-regression", "0", "--metric", column, "--threshold", margin]);
        assert_eq!(gate.status.code(), Some(0), "{column}: {}", String::from_utf8_lossy(&gate.stdout));
    }

    // The intervals are narrow enough to see a change: 10 % slower is worse in tok/s and TPOT
    // (at the default 0 % threshold, by the test alone; load moves neither by 0.2 %).
    for column in ["total_tps", "tpot_ms_p50"] {
        let v = verdicts(&json_diff(&a, &slower, column), column);
        assert_eq!(v, ["worse"; 2], "{column}");
    }

    // Interrupted in its second pass: the measured repeats are in the file, the rest said.
    assert_eq!(stopped.run.status, RunStatus::Interrupted);
    let missing: usize = stopped.decode.iter().map(|c| 3 - c.repeats.len()).sum();
    assert!((1..6).contains(&missing), "{missing} repeats missing");
    let partial = stopped.decode.iter().find(|c| c.repeats.len() == 1 || c.repeats.len() == 2);
    if let Some(c) = partial {
        assert!(c.reason.as_deref().is_some_and(|r| r.contains(" of 3 repeats measured")), "{:?}", c.reason);
    }
    // The resume measures the missing repeats only, and keeps the earlier ones as they were.
    assert_eq!(resumed.run.status, RunStatus::Complete, "{log}");
    assert_eq!(repeat_lines(&log).len(), missing, "{log}");
    for (before, after) in stopped.decode.iter().zip(&resumed.decode) {
        assert_eq!(after.repeats.len(), 3, "{:?}", after.reason);
        assert_eq!(&after.repeats[..before.repeats.len()], &before.repeats[..]);
        assert_eq!(after.reason, None);
    }
}
