//! Benchmark (not a test): how late a decode window really closes after its deadline — the
//! real close instant (`window_end_ms`) minus the deadline (`window_start_ms` + the window) —
//! for the h200 8K × 128 cell (MTP, 10-s windows), over `RUNS` runs (default 10).
//!
//! The twin (`h200-qwen3.5-122b` profile) runs in this process; each run is the real collector
//! binary (`speedmatrix run`) against it. Prints every run's figure, then p50 and max
//! (nearest rank) and the load average (a busy machine delays timers).
//!
//! Run: `cargo bench -p speedmatrix-tests --bench window_close` (about 20 s per run).

use speedmatrix_schema::load_results;
use speedmatrix_twin::{self as twin, Profile, TwinConfig};
use std::process::Command;

fn main() {
    let exe = env!("CARGO_BIN_EXE_speedmatrix-under-test");
    let runs = std::env::var("RUNS").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(10);
    let dir = tempfile::tempdir().expect("a temp dir");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let handle = rt.block_on(twin::start(TwinConfig::new(Profile::h200_qwen()), "127.0.0.1:0")).expect("the twin");
    let url = handle.url();
    println!("h200 twin (MTP) 8K × 128, 10-s windows, {runs} runs: close instant − deadline");
    println!("| run | close − deadline (ms) | total tok/s |");
    println!("|---:|---:|---:|");
    let mut late = Vec::with_capacity(runs);
    for i in 1..=runs {
        let out = dir.path().join(format!("run-{i}.json"));
        let o = Command::new(exe)
            .args(["run", "--url", &url, "--contexts", "8k", "--concurrency", "128", "--prefill-contexts", "none"])
            .args(["--duration", "10s", "--quiet", "--no-gpu", "-o"])
            .arg(&out)
            .output()
            .expect("run the collector");
        assert!(o.status.success(), "run {i}: {}", String::from_utf8_lossy(&o.stderr));
        let r = load_results(&std::fs::read(&out).expect("the results file")).expect("a valid results file");
        let c = &r.decode[0];
        let (start, end) = (c.window_start_ms.expect("window start"), c.window_end_ms.expect("window end"));
        let ms = end - start - r.config.window_s.expect("the planned window") * 1000.0;
        println!("| {i} | {ms:.3} | {:.1} |", c.total_tps.unwrap_or(f64::NAN));
        late.push(ms);
    }
    rt.block_on(handle.shutdown());
    late.sort_by(f64::total_cmp);
    let p50 = speedmatrix_schema::stats::percentile_sorted(&late, 50.0).unwrap_or(f64::NAN);
    let max = late.last().copied().unwrap_or(f64::NAN);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("\nclose − deadline: p50 {p50:.3} ms, max {max:.3} ms over {runs} runs (load average {})", load.trim());
}
