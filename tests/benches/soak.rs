//! Benchmark (not a test): does a long run leak? The real collector binary (`speedmatrix run`)
//! against twins in this process, its resident memory (RSS, `/proc/PID/status`) and open file
//! descriptors (`/proc/PID/fd`) sampled every `SOAK_SAMPLE_S` seconds (default 10):
//!
//! 1. 1,024 streams for `SOAK_MINUTES` (default 20) on the tiny twin (1K context, 512 tokens per
//!    answer, so streams end and are replaced all the time), as a run of hours is measured: one
//!    cell repeated in 30-s windows (`--repeat`, the default window); `SOAK_ONE_WINDOW=1` makes it
//!    one window of `SOAK_MINUTES` instead, which measures the per-window bound below;
//! 2. then a full seed-shaped matrix (6 contexts × 8 concurrency levels, prefill rows) on the
//!    h200 twin with `SOAK_WINDOW` windows (default 2s).
//!
//! Prints each phase's samples, the RSS slope after warm-up (least squares over the samples
//! after the first minute, MB per minute), the fd range, the cell errors (there must be none)
//! and the results file's size per measured request sample (the file grows only by what is
//! measured). A window keeps every chunk time of its streams until it closes (the exact
//! percentiles are computed from them; docs/METHODOLOGY.md, "Memory"), so a single long window's
//! RSS grows with the tokens it streams, by design; each window releases them when it closes.
//!
//! Run: `cargo bench -p speedmatrix-tests --bench soak` (about 30 minutes; `SOAK_MINUTES=2` for a
//! quick check).

use speedmatrix_schema::{load_results, CellStatus};
use speedmatrix_twin::{self as twin, Profile, TwinConfig};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One sample of the collector process: seconds since its start, RSS (MB), open fds.
#[derive(Debug, Clone, Copy)]
struct Sample {
    t_s: f64,
    rss_mb: f64,
    fds: usize,
}

fn sample(pid: u32, t_s: f64) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some(Sample { t_s, rss_mb: kb / 1024.0, fds })
}

/// Sample `child` every `every` until it exits; its exit status and the samples.
fn watch(mut child: Child, every: Duration) -> (std::process::ExitStatus, Vec<Sample>) {
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut next = start;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the collector") {
            return (status, samples);
        }
        if Instant::now() >= next {
            if let Some(s) = sample(child.id(), start.elapsed().as_secs_f64()) {
                println!("  t {:>7.1} s · RSS {:>7.1} MB · {:>4} fds", s.t_s, s.rss_mb, s.fds);
                samples.push(s);
            }
            next += every;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Least-squares slope of RSS over time after `warmup_s`, MB per minute.
fn slope_mb_per_min(samples: &[Sample], warmup_s: f64) -> Option<f64> {
    let s: Vec<&Sample> = samples.iter().filter(|s| s.t_s >= warmup_s).collect();
    if s.len() < 3 {
        return None;
    }
    let n = s.len() as f64;
    let (mx, my) = (s.iter().map(|s| s.t_s).sum::<f64>() / n, s.iter().map(|s| s.rss_mb).sum::<f64>() / n);
    let sxy: f64 = s.iter().map(|s| (s.t_s - mx) * (s.rss_mb - my)).sum();
    let sxx: f64 = s.iter().map(|s| (s.t_s - mx).powi(2)).sum();
    Some(sxy / sxx * 60.0)
}

/// Print a phase's summary from its samples and results file.
fn report(name: &str, samples: &[Sample], out: &Path) {
    let r = load_results(&std::fs::read(out).expect("the results file")).expect("a valid results file");
    let errors = r.decode.iter().filter(|c| c.status == CellStatus::Error).count()
        + r.prefill.iter().filter(|p| p.status == CellStatus::Error).count();
    let measured = r.decode.iter().filter(|c| c.status.is_measured()).count();
    let requests: usize = r.decode.iter().map(|c| c.requests.len()).sum::<usize>()
        + r.prefill.iter().map(|p| p.requests.len()).sum::<usize>();
    let bytes = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
    let rss = |f: fn(f64, f64) -> f64| samples.iter().map(|s| s.rss_mb).fold(samples[0].rss_mb, f);
    let (fd_min, fd_max) =
        (samples.iter().map(|s| s.fds).min().unwrap_or(0), samples.iter().map(|s| s.fds).max().unwrap_or(0));
    println!(
        "{name}: {} samples · RSS {:.1}…{:.1} MB, slope after the first minute {} · fds {fd_min}…{fd_max} · \
         {measured} measured cells, {errors} error cells · file {bytes} bytes for {requests} request samples ({:.0} bytes each)",
        samples.len(),
        rss(f64::min),
        rss(f64::max),
        slope_mb_per_min(samples, 60.0).map_or("n/a".into(), |s| format!("{s:+.2} MB/min")),
        bytes as f64 / requests.max(1) as f64,
    );
}

fn collector(exe: &str, url: &str, out: &Path, args: &[&str]) -> Child {
    Command::new(exe)
        .args(["run", "--url", url, "--quiet", "--no-gpu", "-o"])
        .arg(out)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run the collector")
}

fn main() {
    let exe = env!("CARGO_BIN_EXE_speedmatrix-under-test");
    let minutes: u64 = env_or("SOAK_MINUTES", 20);
    let every = Duration::from_secs(env_or("SOAK_SAMPLE_S", 10));
    let window: String = env_or("SOAK_WINDOW", "2s".to_string());
    let dir = tempfile::tempdir().expect("a temp dir");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");

    let tiny = rt.block_on(twin::start(TwinConfig::new(Profile::tiny()), "127.0.0.1:0")).expect("the tiny twin");
    let one_window = std::env::var("SOAK_ONE_WINDOW").is_ok_and(|v| v == "1");
    let (duration, repeat) = if one_window { (format!("{minutes}m"), 1) } else { ("30s".to_string(), minutes * 2) };
    println!(
        "phase 1: 1,024 streams for {minutes} min on the tiny twin (1K context, 512-token answers), {repeat} window(s) of {duration}"
    );
    let out1 = dir.path().join("soak-1024.json");
    let phase1 = ["--contexts", "1k", "--concurrency", "1024", "--prefill-contexts", "none", "--max-tokens", "512"];
    let repeat = repeat.to_string();
    let child =
        collector(exe, &tiny.url(), &out1, &[&phase1[..], &["--duration", &duration, "--repeat", &repeat]].concat());
    let (status, samples1) = watch(child, every);
    assert!(status.success(), "phase 1: the collector exited {status}");
    rt.block_on(tiny.shutdown());

    let h200 = rt.block_on(twin::start(TwinConfig::new(Profile::h200_qwen()), "127.0.0.1:0")).expect("the h200 twin");
    println!("phase 2: the seed-shaped matrix on the h200 twin, {window} windows");
    let out2 = dir.path().join("soak-matrix.json");
    let child = collector(exe, &h200.url(), &out2, &["--duration", &window]);
    let (status, samples2) = watch(child, every);
    assert!(status.success(), "phase 2: the collector exited {status} (3 = error cells)");
    rt.block_on(h200.shutdown());

    println!();
    report("phase 1 (1,024 streams)", &samples1, &out1);
    report("phase 2 (seed matrix)", &samples2, &out2);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average {}", load.trim());
}
