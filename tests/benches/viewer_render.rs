//! Viewer render time in real headless Chromium (BENCHMARKS.md, "Viewer"): `speedmatrix serve`
//! on 127.0.0.1 serves the embedded viewer (or `SPEEDMATRIX_DIST_DIR`) with one results file;
//! chromedriver opens it `RUNS` times (default 7), each a fresh navigation, and reads the
//! page's own `performance.mark`s (milliseconds since navigation start):
//! `speedmatrix-report` (the report is in the DOM, next animation frame) and the last
//! `speedmatrix-chart` (every chart drawn). Files: the seed fixture, and a generated run of
//! 1,000 decode cells (20 contexts × 50 concurrency levels, built from the seed's first valid
//! cell). Then a site of 12 runs (copies of the seed, 48 decode cells each, served as
//! results files with their index): its front page's run table (`speedmatrix-index`) and the
//! comparison of all 12 (`speedmatrix-compare`, then the last `speedmatrix-chart`).
//!
//! `cargo bench -p speedmatrix-tests --bench viewer_render` (needs chromium + chromedriver).

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

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(name)).find(|f| f.is_file()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

fn serve(files: &[PathBuf]) -> (Proc, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_speedmatrix-under-test"))
        .arg("serve")
        .args(files)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start speedmatrix serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("serve's first line");
    let url = line.trim().strip_prefix("listening on ").expect("listening on URL").to_string();
    (Proc(child), format!("{url}/"))
}

/// The seed fixture with `contexts` × `levels` valid decode cells.
fn generated(contexts: u64, levels: u32, out: &Path) -> PathBuf {
    let mut v: Value =
        serde_json::from_slice(&std::fs::read(root().join("tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap())
            .unwrap();
    let template = v["decode"].as_array().unwrap().iter().find(|c| c["status"] == "valid").unwrap().clone();
    let ctx: Vec<Value> = (1..=contexts).map(|k| json!({"label": format!("{k}K"), "tokens": k * 1024})).collect();
    let mut cells = Vec::new();
    for (i, c) in ctx.iter().enumerate() {
        for n in 1..=levels {
            let mut cell = template.clone();
            cell["context"] = c.clone();
            cell["concurrency"] = json!(n);
            cell["prompt_tokens"] = Value::Null;
            let scale = f64::from(n).sqrt() / (1.0 + i as f64 * 0.05);
            cell["total_tps"] = json!((template["total_tps"].as_f64().unwrap_or(100.0) * scale * 10.0).round() / 10.0);
            cells.push(cell);
        }
    }
    v["config"]["contexts"] = Value::Array(ctx);
    v["config"]["concurrency"] = json!((1..=levels).collect::<Vec<_>>());
    v["decode"] = Value::Array(cells);
    v["run"]["label"] = json!(format!("generated {} cells", contexts * u64::from(levels)));
    let path = out.join("generated.json");
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    path
}

/// Twelve copies of the seed (48 decode cells each), labelled run 1 … run 12.
fn twelve(out: &Path) -> Vec<PathBuf> {
    let seed: Value =
        serde_json::from_slice(&std::fs::read(root().join("tests/fixtures/h200-qwen3.5-122b-vllm.json")).unwrap())
            .unwrap();
    (1..=12)
        .map(|i| {
            let mut v = seed.clone();
            v["run"]["label"] = json!(format!("run {i}"));
            v["run"]["id"] = json!(format!("bench-run-{i}"));
            let path = out.join(format!("r{i:02}.json"));
            std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
            path
        })
        .collect()
}

/// The page's marks `first` (its first) and `last` (its last), ms since navigation start.
async fn marks(c: &Client, first: &str, last: &str) -> Option<(f64, f64)> {
    let v = c
        .execute(
            &format!(
                "const r = performance.getEntriesByName('{first}'); const ch = performance.getEntriesByName('{last}'); \
                 return r.length && ch.length ? [r[0].startTime, ch[ch.length - 1].startTime] : null;"
            ),
            vec![],
        )
        .await
        .ok()?;
    Some((v.get(0)?.as_f64()?, v.get(1)?.as_f64()?))
}

/// The p50 of the runs, by nearest rank like every percentile speedmatrix reports.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    speedmatrix_schema::stats::percentile_sorted(v, 50.0).unwrap_or(f64::NAN)
}

fn main() {
    let Some(driver) = std::env::var_os("CHROMEDRIVER").map(PathBuf::from).or_else(|| on_path("chromedriver")) else {
        eprintln!("viewer_render: chromedriver not found (scripts/setup.d/web.sh); nothing measured");
        return;
    };
    let runs: usize = std::env::var("RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(7);
    let tmp = tempfile::tempdir().unwrap();
    let site = twelve(tmp.path());
    let all12: String = (1..=12).map(|i| format!("compare=runs/r{i:02}.json")).collect::<Vec<_>>().join("&");
    // (name, files served, page path, first mark, last mark)
    let pages: [(&str, Vec<PathBuf>, String, &str, &str); 4] = [
        (
            "seed fixture (48 decode cells, 7 prefill rows)",
            vec![root().join("tests/fixtures/h200-qwen3.5-122b-vllm.json")],
            String::new(),
            "speedmatrix-report",
            "speedmatrix-chart",
        ),
        (
            "generated, 1,000 decode cells",
            vec![generated(20, 50, tmp.path())],
            String::new(),
            "speedmatrix-report",
            "speedmatrix-chart",
        ),
        ("site of 12 runs: the run table", site.clone(), String::new(), "speedmatrix-index", "speedmatrix-index"),
        ("comparison of 12 runs × 48 cells", site, format!("?{all12}"), "speedmatrix-compare", "speedmatrix-chart"),
    ];
    let port = free_port();
    let _driver = Proc(
        Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(15), "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut options = json!({"args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--window-size=1400,1000",
            format!("--user-data-dir={}", tmp.path().join("profile").display()),
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
        println!("load average: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
        for (name, files, page, first, last) in &pages {
            let (_server, base) = serve(files);
            let url = format!("{base}{page}");
            let (mut report, mut charts) = (Vec::new(), Vec::new());
            for i in 0..=runs {
                // A fresh navigation each time (about:blank in between).
                c.goto("about:blank").await.unwrap();
                c.goto(&url).await.unwrap();
                let t = Instant::now();
                let (r, ch) = loop {
                    if let Some(m) = marks(&c, first, last).await {
                        break m;
                    }
                    assert!(t.elapsed() < Duration::from_secs(30), "{name}: no render marks");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                if i == 0 {
                    println!("{name}: first load (cold cache): {first} {r:.0} ms, {last} {ch:.0} ms");
                    continue;
                }
                report.push(r);
                charts.push(ch);
            }
            let (rmin, cmin) = (report.iter().copied().fold(f64::MAX, f64::min), charts.iter().copied().fold(f64::MAX, f64::min));
            println!(
                "{name}: {runs} warm loads: {first} median {:.0} ms (min {rmin:.0}), {last} median {:.0} ms (min {cmin:.0})",
                median(&mut report),
                median(&mut charts)
            );
        }
        let _ = c.close().await;
    });
}
