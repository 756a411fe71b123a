//! A site of 1,000 runs (BENCHMARKS.md, "A site of 1,000 runs"). The generator makes `SITE_RUNS`
//! results files (default 1,000) from the fixtures — the seed, runs of the twin (speculative
//! decoding on and off, rate cells, a trace replay, a tiny profile), a real vLLM on CPU and an
//! import — each with its own run id and a GPU (6 models × 1, 2, 4 or 8), engine and version,
//! model, date (every 8 h from 2026-01-01), label and simulated or not, varied with the run's
//! number; then it measures, with the real binary:
//!
//! - `publish` of all of them into an empty folder;
//! - republishing one run into that site (the same file name and run id, a new label: a
//!   replace), and adding one new run;
//! - the front page in headless Chromium (`speedmatrix serve SITE`): the page's own
//!   `speedmatrix-index` mark (the run table in the DOM, ms since navigation start) on the
//!   first load of a fresh browser profile (cold) and the median of `RUNS` fresh navigations
//!   after it (warm, default 7), and which files the page fetched (the index, never a run);
//! - the fleet view of every run (`?fleet=1`) the same way in a fresh profile of its own: its
//!   `speedmatrix-fleet` mark (the chart of every valid cell in the DOM), the page fetching the
//!   index and the site's cells table (`runs/cells.csv`), never a run file.
//!
//! `cargo bench -p speedmatrix-tests --bench site_scale` (the Chromium part needs chromium +
//! chromedriver; without them it says so and measures publishing only). `SITE_DIR=DIR` keeps
//! the generated runs (`DIR/runs-in/`) and the site (`DIR/site/`) there to look at.

use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const BIN: &str = env!("CARGO_BIN_EXE_speedmatrix-under-test");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(name)).find(|f| f.is_file()))
}

/// The fixtures the runs are made from.
const TEMPLATES: [&str; 8] = [
    "tests/fixtures/h200-qwen3.5-122b-vllm.json",
    "tests/fixtures/site/twin-h200-mtp2.json",
    "tests/fixtures/site/twin-h200-no-spec.json",
    "tests/fixtures/vllm-cpu-smollm2-135m.json",
    "tests/fixtures/round1/twin-tiny.json",
    "tests/fixtures/round1/import-vllm-bench.json",
    "tests/fixtures/rates-twin.json",
    "tests/fixtures/trace-twin.json",
];
const GPUS: [(&str, u64); 6] = [
    ("H200 NVL", 141_000_000_000),
    ("H100 SXM5 80GB", 80_000_000_000),
    ("A100-SXM4-80GB", 80_000_000_000),
    ("L40S", 48_000_000_000),
    ("B200", 180_000_000_000),
    ("AMD Instinct MI300X", 192_000_000_000),
];
const ENGINES: [(&str, &[&str]); 4] = [
    ("vllm", &["0.26.1", "0.28.0", "0.32.0"]),
    ("sglang", &["0.5.2", "0.5.6"]),
    ("llamacpp", &["b6500", "b7012"]),
    ("openai", &["unknown"]),
];
const MODELS: [(&str, Option<&str>); 5] = [
    ("Qwen/Qwen3.5-122B-A10B-GPTQ-Int4", Some("INT4")),
    ("meta-llama/Llama-3.3-70B-Instruct", None),
    ("deepseek-ai/DeepSeek-V3", Some("FP8")),
    ("Qwen/Qwen3-8B", None),
    ("openai/gpt-oss-120b", Some("MXFP4")),
];

/// Run number `i`, made from a fixture: its header varied, its measurements as they are.
fn generated(i: usize, templates: &[Value]) -> Value {
    let mut v = templates[i % templates.len()].clone();
    let (gpu, memory) = GPUS[i % GPUS.len()];
    let count = [1u32, 2, 4, 8][(i / 7) % 4];
    let (engine, versions) = ENGINES[(i / 3) % ENGINES.len()];
    let (model, quant) = MODELS[(i / 11) % MODELS.len()];
    v["run"]["id"] = json!(format!("scale-{i:04}"));
    v["run"]["started_at"] = json!(date(i));
    v["run"]["label"] = json!(format!("nightly #{i} · {} on {count} × {gpu}", model.rsplit('/').next().unwrap()));
    v["hardware"]["gpus"] = json!((0..count).map(|_| json!({"name": gpu, "memory_bytes": memory})).collect::<Vec<_>>());
    v["hardware"]["gpu_count"] = json!(count);
    v["engine"]["name"] = json!(engine);
    v["engine"]["version"] = json!(versions[i % versions.len()]);
    v["engine"]["model"] = json!(model);
    v["engine"]["quantization"] = json!(quant);
    if i.is_multiple_of(3) {
        v["engine"]["simulated"] = json!({"by": "speedmatrix twin", "profile": "h200-qwen3.5-122b"});
    } else if let Some(e) = v["engine"].as_object_mut() {
        e.remove("simulated");
    }
    v
}

/// Run `i`'s start: every 8 h from 2026-01-01T00:00:00Z (then again from 2026-01-01 after
/// a year of runs).
fn date(i: usize) -> String {
    const DAYS: [usize; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let (mut day, hour) = ((i / 3) % 365, (i % 3) * 8);
    let mut month = 0;
    while day >= DAYS[month] {
        day -= DAYS[month];
        month += 1;
    }
    format!("2026-{:02}-{:02}T{hour:02}:00:00Z", month + 1, day + 1)
}

/// Write `n` generated runs under `dir`; their paths.
fn generate(n: usize, dir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let templates: Vec<Value> =
        TEMPLATES.iter().map(|t| serde_json::from_slice(&std::fs::read(root().join(t)).unwrap()).unwrap()).collect();
    (0..n)
        .map(|i| {
            let path = dir.join(format!("run-{i:04}.json"));
            std::fs::write(&path, serde_json::to_vec_pretty(&generated(i, &templates)).unwrap()).unwrap();
            path
        })
        .collect()
}

/// `speedmatrix publish ARGS… --out site`: its wall time and its summary line.
fn publish(args: &[PathBuf], site: &Path) -> (Duration, String) {
    let t = Instant::now();
    let out = Command::new(BIN).arg("publish").args(args).arg("--out").arg(site).output().expect("run publish");
    let took = t.elapsed();
    assert!(out.status.success(), "publish failed: {}", String::from_utf8_lossy(&out.stderr));
    (took, String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn serve(site: &Path) -> (Proc, String) {
    let mut child = Command::new(BIN)
        .arg("serve")
        .arg(site)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start speedmatrix serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("serve's first line");
    let url = line.trim().strip_prefix("listening on ").expect("listening on URL").to_string();
    (Proc(child), format!("{url}/"))
}

/// A page of the site the bench loads: the front page (its run table) or the fleet view.
struct Page {
    /// What it is, for the report.
    name: &'static str,
    /// The query the URL adds.
    query: &'static str,
    /// The performance mark the page sets when it is drawn.
    mark: &'static str,
    /// What must be in the DOM besides (a JS expression).
    ready: &'static str,
    /// The files under `runs/` it may fetch.
    fetches: &'static [&'static str],
}

const FRONT: Page = Page {
    name: "front page, run table",
    query: "",
    mark: "speedmatrix-index",
    ready: "document.querySelectorAll('#run-table tbody tr').length",
    fetches: &["/runs/index.json"],
};

const FLEET: Page = Page {
    name: "fleet view of every run (?fleet=1)",
    query: "?fleet=1",
    mark: "speedmatrix-fleet",
    ready: "document.querySelector('#fleet-chart')",
    fetches: &["/runs/index.json", "/runs/cells.csv"],
};

/// The page's mark (ms since navigation start), once the page has set it.
async fn page_mark(c: &Client, page: &Page) -> Option<f64> {
    let js = format!(
        "const m = performance.getEntriesByName('{}'); return m.length && {} ? m[0].startTime : null;",
        page.mark, page.ready
    );
    let v = c.execute(&js, vec![]).await.ok()?;
    v.as_f64()
}

/// The files under `runs/` the page fetched.
async fn fetched_runs(c: &Client) -> Vec<String> {
    let v = c
        .execute(
            "return performance.getEntriesByType('resource').map(e => new URL(e.name).pathname)\
             .filter(p => p.includes('/runs/'));",
            vec![],
        )
        .await
        .expect("resource timings");
    serde_json::from_value(v).unwrap_or_default()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    speedmatrix_schema::stats::percentile_sorted(v, 50.0).unwrap_or(f64::NAN)
}

async fn load_page(driver: &Path, site: &Path, profile: &Path, runs: usize, n: usize, page: &Page) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let _driver = Proc(
        Command::new(driver).arg(format!("--port={port}")).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap(),
    );
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(15), "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut options = json!({"args": [
        "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--window-size=1400,1000",
        format!("--user-data-dir={}", profile.display()),
    ]});
    if let Some(b) = std::env::var_os("CHROME").map(PathBuf::from).or_else(|| on_path("chromium")) {
        options["binary"] = json!(b.display().to_string());
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session");
    let (_server, base) = serve(site);
    let mut warm = Vec::new();
    for i in 0..=runs {
        c.goto("about:blank").await.unwrap();
        c.goto(&format!("{base}{}", page.query)).await.unwrap();
        let t = Instant::now();
        let mark = loop {
            if let Some(m) = page_mark(&c, page).await {
                break m;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "no {} mark", page.mark);
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let rows = c.execute("return document.querySelectorAll('#run-table tbody tr').length;", vec![]).await.unwrap();
        assert_eq!(rows.as_u64(), Some(n as u64), "every run is a row");
        let fetched = fetched_runs(&c).await;
        assert!(
            fetched.iter().all(|p| page.fetches.iter().any(|f| p.ends_with(f))),
            "the {} fetched a run: {fetched:?}",
            page.name
        );
        if i == 0 {
            println!(
                "{}, first load (fresh profile, cold cache): drawn at {mark:.0} ms; fetched {fetched:?}",
                page.name
            );
        } else {
            warm.push(mark);
        }
    }
    if page.mark == FLEET.mark {
        let points = c.execute("return document.querySelector('#fleet-chart').dataset.points;", vec![]).await.unwrap();
        println!("{}: {} points drawn", page.name, points.as_str().unwrap_or("?"));
    }
    let min = warm.iter().copied().fold(f64::MAX, f64::min);
    println!("{}, {runs} warm loads: drawn median {:.0} ms (min {min:.0})", page.name, median(&mut warm));
    let _ = c.close().await;
}

fn main() {
    let n: usize = std::env::var("SITE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let runs: usize = std::env::var("RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(7);
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("SITE_DIR").map(PathBuf::from).unwrap_or_else(|| tmp.path().to_path_buf());
    println!("load average: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    let t = Instant::now();
    let files = generate(n, &dir.join("runs-in"));
    let bytes: u64 = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum();
    println!("generated {n} runs ({:.1} MB) in {:.1} s", bytes as f64 / 1e6, t.elapsed().as_secs_f64());
    let site = dir.join("site");
    let _ = std::fs::remove_dir_all(&site);
    let (took, said) = publish(&files, &site);
    println!("publish of {n} runs into an empty folder: {:.2} s\n  {said}", took.as_secs_f64());
    let index = std::fs::metadata(site.join("runs/index.json")).unwrap().len();
    println!("runs/index.json: {:.2} MB", index as f64 / 1e6);

    // One run again, changed (same file name and run id): a replace.
    let templates: Vec<Value> =
        TEMPLATES.iter().map(|t| serde_json::from_slice(&std::fs::read(root().join(t)).unwrap()).unwrap()).collect();
    let again = dir.join("again");
    std::fs::create_dir_all(&again).unwrap();
    let k = n / 2;
    let mut v = generated(k, &templates);
    v["run"]["label"] = json!(format!("nightly #{k}, measured again"));
    let one = again.join(format!("run-{k:04}.json"));
    std::fs::write(&one, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let (took, said) = publish(std::slice::from_ref(&one), &site);
    assert!(said.contains("1 replaced"), "{said}");
    println!("republishing one run into the {n}-run site (a replace): {:.2} s\n  {said}", took.as_secs_f64());
    let mut v = generated(n, &templates);
    v["run"]["label"] = json!("a new run");
    let new = again.join("new-run.json");
    std::fs::write(&new, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let (took, said) = publish(std::slice::from_ref(&new), &site);
    assert!(said.contains("1 added"), "{said}");
    println!("adding one run to the {n}-run site: {:.2} s\n  {said}", took.as_secs_f64());

    let Some(driver) = std::env::var_os("CHROMEDRIVER").map(PathBuf::from).or_else(|| on_path("chromedriver")) else {
        eprintln!("site_scale: chromedriver not found (scripts/setup.d/web.sh); the front page is not measured");
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(load_page(&driver, &site, &tmp.path().join("profile"), runs, n + 1, &FRONT));
    // The fleet view in a fresh profile of its own, so its first load is cold too.
    rt.block_on(load_page(&driver, &site, &tmp.path().join("profile-fleet"), runs, n + 1, &FLEET));
}
