//! A published site of four runs in real headless Chromium: the seed (a real vLLM on two
//! H200s), two runs of the twin with different flags (speculative decoding on and off, made by
//! the real collector against the twin: tests/fixtures/site/make.sh) and one import (vllm bench).
//! The front page's run table sorts and filters with both in the URL; two picks link the diff
//! view; three open the comparison, whose overlays draw three series each and whose per-GPU
//! Pareto chart draws three frontiers; setting the SLO in the page changes the capacity table
//! to what `speedmatrix_schema::slo::capacity` computes from the files. One file published
//! under two names is one row with both names, and the front page fetches no run; a run file
//! edited after publishing is flagged when opened. Every facet and the sort set in the page
//! make a permalink that a fresh browser opens to the same rows. The fleet view draws every
//! valid cell of the filtered runs with each GPU type's frontier (what
//! `speedmatrix_schema::fleet` computes from the site's cells table), follows the facets and
//! opens a clicked point's run at its cell; the filtered table downloads as CSV; picks are in
//! the URL; the diff and comparison views flag an edited file too.
//!
//! Needs `chromium` and `chromedriver` (scripts/setup.d/web.sh); without them each test prints
//! why it skips, except under `CI=true`.

use browser::*;
use fantoccini::{Client, Locator};
use serde_json::Value;
use speedmatrix_schema::registry;
use speedmatrix_schema::slo::{capacity, Slo};
use std::path::PathBuf;
use support::browser;
use support::cli::publish;

/// The four runs, as `runs/` names them after publishing.
const SEED: &str = "h200-qwen3.5-122b-vllm.json";
const MTP: &str = "twin-h200-mtp2.json";
const NO_SPEC: &str = "twin-h200-no-spec.json";
const IMPORT: &str = "import-vllm-bench.json";

fn sources() -> Vec<PathBuf> {
    let r = root();
    vec![
        fixture(),
        r.join("tests/fixtures/site").join(MTP),
        r.join("tests/fixtures/site").join(NO_SPEC),
        r.join("tests/fixtures/round1").join(IMPORT),
    ]
}

/// The run table's rows, as their files, in page order.
async fn row_files(c: &Client) -> Vec<String> {
    let v = c
        .execute("return [...document.querySelectorAll('#run-table tbody tr')].map(r => r.dataset.file);", vec![])
        .await
        .expect("read the run table");
    serde_json::from_value(v).expect("strings")
}

/// Poll until the run table lists exactly `want`, in that order.
async fn wait_rows(c: &Client, want: &[&str]) {
    let js = format!(
        "const f = [...document.querySelectorAll('#run-table tbody tr')].map(r => r.dataset.file); return JSON.stringify(f) === {:?};",
        serde_json::to_string(want).unwrap()
    );
    until(c, &format!("the run table to list {want:?}"), &js).await;
}

/// The capacity table: (run place, context, requests at once, goodput text) per row.
async fn capacity_rows(c: &Client) -> Vec<(String, String, String, String)> {
    let v = c
        .execute(
            "return [...document.querySelectorAll('#capacity tbody tr')].map(r => [r.dataset.run, r.dataset.context, r.cells[2].innerText.trim(), r.cells[5].innerText.trim()]);",
            vec![],
        )
        .await
        .expect("read the capacity table");
    let rows: Vec<[String; 4]> = serde_json::from_value(v).expect("rows");
    rows.into_iter().map(|[a, b, c, d]| (a, b, c, d)).collect()
}

/// What the capacity table must say for these runs at `slo`, computed from the files.
fn expected_capacity(runs: &[PathBuf], slo: &Slo) -> Vec<(String, String, String, String)> {
    let total = registry::column("total_tps").expect("total_tps");
    let mut out = Vec::new();
    for (i, path) in runs.iter().enumerate() {
        let r = speedmatrix_schema::load_results(&std::fs::read(path).unwrap()).unwrap();
        for c in capacity(&r, slo) {
            let (n, goodput) = match &c.best {
                Some(g) => (g.concurrency.to_string(), total.display(g.total_tps)),
                None => ("none".to_string(), "—".to_string()),
            };
            out.push((i.to_string(), c.context.label.clone(), n, goodput));
        }
    }
    out
}

async fn canvas_attr(c: &Client, id: &str, attr: &str) -> String {
    let js = format!("const e = document.querySelector('#chart-{id}'); return e && e.getAttribute('{attr}');");
    until(c, &format!("#chart-{id} drawn"), &js).await.as_str().unwrap_or_default().to_string()
}

#[test]
fn a_site_of_four_runs_sorts_filters_and_compares_three_at_your_slo() {
    scenario(|c| async move {
        let site = tempfile::tempdir().unwrap();
        let runs = sources();
        publish(&runs, site.path());
        let index: Value =
            serde_json::from_slice(&std::fs::read(site.path().join("runs/index.json")).unwrap()).unwrap();
        let (_server, base) = serve(&[site.path()]);
        c.goto(&base).await.unwrap();
        wait_rows(&c, &[SEED, MTP, NO_SPEC, IMPORT]).await;
        // The simulated column reads the results' simulated record.
        let sim = text(&c, "#run-table tr[data-file=\"twin-h200-mtp2.json\"] .col-simulated").await;
        assert_eq!(sim, "simulated");
        assert_eq!(text(&c, "#run-table tr[data-file=\"h200-qwen3.5-122b-vllm.json\"] .col-simulated").await, "no");

        // Sorting by peak total tok/s, ascending: the index's own figures in that order.
        let mut by_peak: Vec<(f64, String)> = index["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["headline"]["peak_total_tps"].as_f64().unwrap(), e["file"].as_str().unwrap().to_string()))
            .collect();
        by_peak.sort_by(|a, b| a.0.total_cmp(&b.0));
        let want: Vec<&str> = by_peak.iter().map(|(_, f)| f.as_str()).collect();
        c.find(Locator::Css("#sort-peak_tps")).await.unwrap().click().await.unwrap();
        wait_rows(&c, &want).await;
        assert_ne!(want, [SEED, MTP, NO_SPEC, IMPORT], "the sort changes the order");
        c.find(Locator::Css("#sort-peak_tps")).await.unwrap().click().await.unwrap();
        let down: Vec<&str> = want.iter().rev().copied().collect();
        wait_rows(&c, &down).await;
        assert!(c.current_url().await.unwrap().as_str().contains("order=-peak_tps"), "the sort is in the URL");

        // Filtering: simulated runs only, then real ones; the filter is in the URL.
        let simulated = c.find(Locator::Css("#index-simulated")).await.unwrap();
        simulated.select_by_value("yes").await.unwrap();
        let twins: Vec<&str> = down.iter().copied().filter(|f| f.starts_with("twin-")).collect();
        wait_rows(&c, &twins).await;
        assert!(c.current_url().await.unwrap().as_str().contains("simulated=yes"));
        simulated.select_by_value("no").await.unwrap();
        let real: Vec<&str> = down.iter().copied().filter(|f| !f.starts_with("twin-")).collect();
        wait_rows(&c, &real).await;
        simulated.select_by_value("").await.unwrap();
        wait_rows(&c, &down).await;
        // A reload keeps the sort from the URL.
        c.refresh().await.unwrap();
        wait_rows(&c, &down).await;
        assert_eq!(row_files(&c).await.len(), 4);

        // Two picks link the diff view; three the comparison.
        for f in [SEED, MTP] {
            let css = format!("#run-table tr[data-file=\"{f}\"] input.pick");
            c.find(Locator::Css(&css)).await.unwrap().click().await.unwrap();
        }
        let diff = until(
            &c,
            "the diff link",
            "const a = document.querySelector('#compare-picked'); return a && a.getAttribute('href');",
        )
        .await;
        assert_eq!(diff.as_str(), Some(format!("?a=runs/{SEED}&b=runs/{MTP}").as_str()));
        let css = format!("#run-table tr[data-file=\"{NO_SPEC}\"] input.pick");
        c.find(Locator::Css(&css)).await.unwrap().click().await.unwrap();
        let js = "const a = document.querySelector('#compare-picked'); return a && a.getAttribute('href').includes('compare=') && a.getAttribute('href');";
        let href = until(&c, "the compare link", js).await.as_str().unwrap().to_string();
        assert_eq!(href, format!("?compare=runs/{SEED}&compare=runs/{MTP}&compare=runs/{NO_SPEC}"));
        c.goto(&format!("{base}{href}")).await.unwrap();

        // The comparison: three series on each overlay, three frontiers per GPU.
        wait_text(&c, "#cmp-title", "3 runs compared").await;
        assert_eq!(canvas_attr(&c, "cmp-total", "data-series").await, "3");
        assert_eq!(canvas_attr(&c, "cmp-ttft", "data-series").await, "3");
        assert_eq!(canvas_attr(&c, "cmp-pareto", "data-series").await, "3");
        assert_eq!(canvas_attr(&c, "cmp-pareto", "data-frontiers").await, "3");
        let names = c
            .execute("return [...new Set([...document.querySelectorAll('#table-cmp-total tbody tr')].map(r => r.cells[0].textContent))];", vec![])
            .await
            .unwrap();
        assert_eq!(names.as_array().map(Vec::len), Some(3), "{names}");
        assert!(text(&c, "#cmp-runs").await.contains("twin h200 · MTP 2"));

        // The SLO typed into the page: the capacity table follows, as computed from the files.
        let picked: Vec<PathBuf> = vec![runs[0].clone(), runs[1].clone(), runs[2].clone()];
        let default = expected_capacity(&picked, &speedmatrix_schema::slo::DEFAULT_SLO);
        let until_rows = |want: Vec<(String, String, String, String)>| {
            let c = c.clone();
            async move {
                let start = std::time::Instant::now();
                loop {
                    let got = capacity_rows(&c).await;
                    if got == want {
                        return;
                    }
                    assert!(start.elapsed().as_secs() < 20, "capacity table {got:?}, want {want:?}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        };
        until_rows(default.clone()).await;
        let tight = Slo { ttft_ms: Some(1000.0), per_user_tps: Some(20.0) };
        let want = expected_capacity(&picked, &tight);
        assert_ne!(want, default, "a 1 s TTFT limit changes the capacity of these runs");
        c.execute(
            "const i = document.querySelector('#slo-ttft'); i.value = '1000'; i.dispatchEvent(new Event('change'));",
            vec![],
        )
        .await
        .unwrap();
        until_rows(want).await;
        assert!(c.current_url().await.unwrap().as_str().contains("ttft=1000"), "the SLO is in the URL");
        // The TTFT chart draws a capacity ring per run with a cell meeting the SLO.
        let rings: usize = canvas_attr(&c, "cmp-ttft", "data-markers").await.parse().unwrap();
        assert!((1..=3).contains(&rings), "{rings}");
    });
}

#[test]
fn one_file_under_two_names_is_one_row_and_a_file_edited_after_publishing_is_flagged() {
    scenario(|c| async move {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("seed copy.json");
        std::fs::copy(fixture(), &copy).unwrap();
        let site = dir.path().join("site");
        publish(&[fixture(), copy, root().join("tests/fixtures/site").join(MTP)], &site);
        let (_server, base) = serve(&[&site]);
        c.goto(&base).await.unwrap();
        // The copy is the seed's row, with both names.
        wait_rows(&c, &[SEED, MTP]).await;
        let seed_row = format!("#run-table tr[data-file=\"{SEED}\"]");
        let also = until(
            &c,
            "the seed row's other name",
            &format!("return document.querySelector('{seed_row}')?.dataset.also || null;"),
        )
        .await;
        assert_eq!(also.as_str(), Some("seed-copy.json"));
        assert!(text(&c, &format!("{seed_row} .col-label")).await.contains("also published as seed-copy.json"));
        assert_eq!(text(&c, "#runs summary").await, "Runs of this site (2, under 3 names)");
        // The front page fetched the index and no run file.
        let fetched = c
            .execute("return performance.getEntriesByType('resource').map(e => new URL(e.name).pathname).filter(p => p.includes('/runs/'));", vec![])
            .await
            .unwrap();
        assert_eq!(fetched, serde_json::json!(["/runs/index.json"]), "{fetched}");
        assert!(text(&c, "#pick-hint").await.contains("Open a run's report"));

        // The twin run edited after publishing: its report says so, with both digests.
        let path = site.join("runs").join(MTP);
        let published = speedmatrix_schema::site::sha256_hex(&std::fs::read(&path).unwrap());
        let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        v["run"]["label"] = "edited after publishing".into();
        let edited = serde_json::to_vec(&v).unwrap();
        std::fs::write(&path, &edited).unwrap();
        c.goto(&format!("{base}?show=runs/{MTP}")).await.unwrap();
        wait_text(&c, "#run-title", "edited after publishing").await;
        let warning = wait_text(&c, "#integrity-warning", "changed after it was published").await;
        let now = speedmatrix_schema::site::sha256_hex(&edited);
        assert!(warning.contains(&published[..12]) && warning.contains(&now[..12]), "{warning}");
        // Its row in the run table above (folded while a run is shown: textContent) says so
        // too, the seed's does not.
        let js = format!(
            "const e = document.querySelector('#run-table tr[data-file=\"{MTP}\"] .col-label .changed'); return e && e.textContent;"
        );
        let mark = until(&c, "the edited run's mark in the table", &js).await;
        assert_eq!(mark.as_str(), Some(" · changed after publishing"));
        let marks = c.execute("return document.querySelectorAll('#run-table .changed').length;", vec![]).await.unwrap();
        assert_eq!(marks, serde_json::json!(1));
        // The diff and the comparison check each file against the index too: the edited run
        // is flagged with both digests, the seed is not.
        c.goto(&format!("{base}?a=runs/{SEED}&b=runs/{MTP}")).await.unwrap();
        let flagged = wait_text(&c, ".notice.integrity[data-side=\"B\"]", "changed after it was published").await;
        assert!(flagged.contains(&published[..12]) && flagged.contains(&now[..12]), "{flagged}");
        wait_text(&c, "#main", "edited after publishing").await;
        let n = c.execute("return document.querySelectorAll('.notice.integrity').length;", vec![]).await.unwrap();
        assert_eq!(n, serde_json::json!(1), "only side B is flagged");
        c.goto(&format!("{base}?compare=runs/{MTP}&compare=runs/{SEED}")).await.unwrap();
        let flagged = wait_text(&c, ".notice.integrity[data-run=\"0\"]", "changed after it was published").await;
        assert!(flagged.contains(&now[..12]), "{flagged}");
        let n = c.execute("return document.querySelectorAll('.notice.integrity').length;", vec![]).await.unwrap();
        assert_eq!(n, serde_json::json!(1), "only the edited run is flagged");
        // The seed, unchanged, has no warning.
        c.goto(&format!("{base}?show=runs/{SEED}")).await.unwrap();
        wait_text(&c, "#run-title", "Qwen3.5").await;
        let n = c.execute("return document.querySelectorAll('#integrity-warning').length;", vec![]).await.unwrap();
        assert_eq!(n, serde_json::json!(0), "an unchanged file is not flagged");
    });
}

/// A run of the facet test: (file, GPU, count, engine, model, label, start date, simulated).
type Faceted = (&'static str, &'static str, u32, &'static str, &'static str, &'static str, &'static str, bool);

/// Eight copies of the seed with their headers varied for the facets.
const FACETED: [Faceted; 8] = [
    ("r0", "H200 NVL", 2, "vllm", "org/Qwen3-8B", "nightly 0", "2026-01-05", false),
    ("r1", "H100 SXM", 8, "sglang", "org/Qwen3-8B", "nightly 1", "2026-02-05", true),
    ("r2", "H100 SXM", 8, "vllm", "org/Llama-70B", "release 2", "2026-02-15", false),
    ("r3", "H100 SXM", 8, "vllm", "org/Qwen3-8B", "nightly 3", "2026-02-20", false),
    ("r4", "H100 SXM", 4, "vllm", "org/Qwen3-8B", "nightly 4", "2026-02-25", false),
    ("r5", "H100 SXM", 8, "vllm", "org/Qwen3-8B", "nightly 5", "2026-03-10", false),
    ("r6", "H100 SXM", 8, "vllm", "org/Qwen3-8B", "nightly 6", "2026-02-11", true),
    ("r7", "H100 SXM", 8, "vllm", "org/Qwen3-8B", "nightly 7", "2026-02-12", false),
];

#[test]
fn facets_and_sort_are_a_permalink_that_a_fresh_browser_opens_to_the_same_rows() {
    scenario(|c| async move {
        let dir = tempfile::tempdir().unwrap();
        let seed: Value = serde_json::from_slice(&std::fs::read(fixture()).unwrap()).unwrap();
        let files: Vec<PathBuf> = FACETED
            .iter()
            .map(|&(name, gpu, n, engine, model, label, date, simulated)| {
                let mut v = seed.clone();
                v["run"]["id"] = format!("facet-{name}").into();
                v["run"]["label"] = label.into();
                v["run"]["started_at"] = format!("{date}T10:00:00Z").into();
                v["hardware"]["gpus"] = (0..n).map(|_| serde_json::json!({"name": gpu})).collect();
                v["hardware"]["gpu_count"] = n.into();
                v["engine"]["name"] = engine.into();
                v["engine"]["model"] = model.into();
                // The engine version, quantization and speculative decoding facets: r3 runs a
                // newer vLLM, r7 FP8 weights without speculative decoding.
                if name == "r3" {
                    v["engine"]["version"] = "0.27.0".into();
                }
                if name == "r7" {
                    v["engine"]["quantization"] = "FP8".into();
                    v["engine"]["speculative_decoding"] = Value::Null;
                }
                if simulated {
                    v["engine"]["simulated"] =
                        serde_json::json!({"by": "speedmatrix twin", "profile": "h200-qwen3.5-122b"});
                }
                let path = dir.path().join(format!("{name}.json"));
                std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
                path
            })
            .collect();
        let site = dir.path().join("site");
        publish(&files, &site);
        let (_server, base) = serve(&[&site]);
        c.goto(&base).await.unwrap();
        let all: Vec<String> = FACETED.iter().map(|r| format!("{}.json", r.0)).collect();
        wait_rows(&c, &all.iter().map(String::as_str).collect::<Vec<_>>()).await;

        // Each facet set in the page: every one of them drops at least one run (r0 by GPU and
        // date, r1 by engine and simulated, r2 by model and label, r4 by GPU count, r5 by date,
        // r6 by simulated); newest first.
        for (id, value) in
            [("gpu", "H100 SXM"), ("gpus", "8"), ("engine", "vllm"), ("model", "Qwen3-8B"), ("simulated", "no")]
        {
            c.find(Locator::Css(&format!("#index-{id}"))).await.unwrap().select_by_value(value).await.unwrap();
        }
        c.find(Locator::Css("#index-label")).await.unwrap().send_keys("nightly").await.unwrap();
        for (id, value) in [("from", "2026-02-01"), ("to", "2026-02-28")] {
            c.execute(
                &format!("const i = document.querySelector('#index-{id}'); i.value = '{value}'; i.dispatchEvent(new Event('change'));"),
                vec![],
            )
            .await
            .unwrap();
        }
        c.find(Locator::Css("#sort-date")).await.unwrap().click().await.unwrap();
        c.find(Locator::Css("#sort-date")).await.unwrap().click().await.unwrap();
        wait_rows(&c, &["r3.json", "r7.json"]).await;
        let permalink = c.current_url().await.unwrap().to_string();
        for p in [
            "gpu=H100",
            "gpus=8",
            "engine=vllm",
            "model=Qwen3-8B",
            "simulated=no",
            "label=nightly",
            "from=2026-02-01",
            "to=2026-02-28",
            "order=-date",
        ] {
            assert!(permalink.contains(p), "{p} is not in {permalink}");
        }

        // The permalink in a fresh browser (its own profile): the same rows, the facets shown.
        let (driver, chromium) = support::browser::tools().expect("the tools the scenario runs with");
        let fresh = support::browser::browser(&driver, chromium.as_deref()).await;
        let f = fresh.client.clone();
        f.goto(&permalink).await.unwrap();
        wait_rows(&f, &["r3.json", "r7.json"]).await;
        let shown = f
            .execute(
                "return ['gpu','gpus','engine','model','simulated','label','from','to'].map(id => document.querySelector('#index-' + id).value);",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(
            shown,
            serde_json::json!(["H100 SXM", "8", "vllm", "Qwen3-8B", "no", "nightly", "2026-02-01", "2026-02-28"])
        );
        // The engine version, quantization and speculative decoding facets, each in the URL.
        for (id, value, want) in [
            ("version", "0.27.0", vec!["r3.json"]),
            ("version", "", vec!["r3.json", "r7.json"]),
            ("quant", "FP8", vec!["r7.json"]),
            ("quant", "", vec!["r3.json", "r7.json"]),
            ("spec", "none", vec!["r7.json"]),
            ("spec", "mtp, 2 speculative tokens", vec!["r3.json"]),
        ] {
            f.find(Locator::Css(&format!("#index-{id}"))).await.unwrap().select_by_value(value).await.unwrap();
            wait_rows(&f, &want).await;
        }
        let with_spec = f.current_url().await.unwrap().to_string();
        assert!(with_spec.contains("spec=mtp%2C+2+speculative+tokens"), "{with_spec}");
        f.find(Locator::Css("#index-quant")).await.unwrap().select_by_value("INT4").await.unwrap();
        f.find(Locator::Css("#index-version")).await.unwrap().select_by_value("0.27.0").await.unwrap();
        wait_rows(&f, &["r3.json"]).await;
        let permalink = f.current_url().await.unwrap().to_string();
        for p in ["version=0.27.0", "quant=INT4", "spec=mtp"] {
            assert!(permalink.contains(p), "{p} is not in {permalink}");
        }
        let _ = f.close().await;
        c.goto(&permalink).await.unwrap();
        wait_rows(&c, &["r3.json"]).await;
        let shown = c
            .execute(
                "return ['version','quant','spec'].map(id => document.querySelector('#index-' + id).value);",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(shown, serde_json::json!(["0.27.0", "INT4", "mtp, 2 speculative tokens"]));
    });
}

/// The fleet view's drawing: (points drawn, per GPU type (GPU, points, frontier links)).
async fn fleet_drawn(c: &Client) -> (usize, Vec<(String, usize, Vec<String>)>) {
    let js = "const s = document.querySelector('#fleet-chart'); if (!s) return null; \
              return [Number(s.dataset.points), [...s.querySelectorAll('.fleet-series')].map(g => \
              [g.dataset.gpu, Number(g.querySelector('.fleet-points').dataset.count), \
               [...g.querySelectorAll('.frontier-point')].map(p => p.dataset.href)])];";
    let v = until(c, "the fleet chart", js).await;
    serde_json::from_value(v).expect("the fleet's drawing")
}

/// What the fleet view must draw for the runs `keep` keeps, computed from the site's cells table.
fn fleet_expected(site: &std::path::Path, keep: &[&str]) -> (usize, Vec<(String, usize, Vec<String>)>) {
    let csv = std::fs::read_to_string(site.join("runs/cells.csv")).unwrap();
    let points = speedmatrix_schema::fleet::points_from_csv(&csv).unwrap();
    let f = speedmatrix_schema::fleet::fleet(&points, |file| keep.contains(&file));
    let series = f
        .series
        .iter()
        .map(|s| (s.gpu.clone(), s.points.len(), s.frontier.iter().map(|&i| s.points[i].href()).collect()))
        .collect();
    (f.point_count(), series)
}

#[test]
fn the_fleet_view_follows_the_facets_and_links_its_points_the_table_exports_as_csv_and_picks_are_a_link() {
    scenario(|c| async move {
        let site = tempfile::tempdir().unwrap();
        publish(&sources(), site.path());
        let (_server, base) = serve(&[site.path()]);

        // The fleet view of every run, opened by its permalink: every valid decode cell with a
        // per-GPU figure, grouped by GPU type, each type's frontier marked.
        c.goto(&format!("{base}?fleet=1")).await.unwrap();
        wait_rows(&c, &[SEED, MTP, NO_SPEC, IMPORT]).await;
        let want = fleet_expected(site.path(), &[SEED, MTP, NO_SPEC, IMPORT]);
        assert!(want.0 > 10 && !want.1.is_empty(), "{want:?}");
        let drawn = fleet_drawn(&c).await;
        assert_eq!(drawn, want);
        // Cells of runs without a GPU count (no per-GPU figure) are counted, not drawn.
        let csv_all = std::fs::read_to_string(site.path().join("runs/cells.csv")).unwrap();
        let all = speedmatrix_schema::fleet::points_from_csv(&csv_all).unwrap();
        let left_out = speedmatrix_schema::fleet::fleet(&all, |_| true).without_gpu_count;
        let shown =
            c.execute("return document.querySelector('#fleet-left-out')?.innerText || '';", vec![]).await.unwrap();
        let shown = shown.as_str().unwrap_or_default();
        if left_out > 0 {
            assert!(shown.starts_with(&format!("{left_out} valid cells are not drawn")), "{shown}");
        } else {
            assert_eq!(shown, "");
        }
        // The frontier table links each frontier point.
        let links = c
            .execute(
                "return [...document.querySelectorAll('#fleet-frontier a')].map(a => a.getAttribute('href'));",
                vec![],
            )
            .await
            .unwrap();
        let hrefs: Vec<String> = want.1.iter().flat_map(|s| s.2.clone()).collect();
        assert_eq!(links, serde_json::json!(hrefs));

        // It follows the run table's facets: the simulated runs only.
        c.find(Locator::Css("#index-simulated")).await.unwrap().select_by_value("yes").await.unwrap();
        wait_rows(&c, &[MTP, NO_SPEC]).await;
        let want = fleet_expected(site.path(), &[MTP, NO_SPEC]);
        let js = format!("return document.querySelector('#fleet-chart')?.dataset.points === '{}';", want.0);
        until(&c, "the fleet of the simulated runs", &js).await;
        assert_eq!(fleet_drawn(&c).await, want);

        // The filtered table as CSV: the rows shown, in their order, with the index's facts.
        c.find(Locator::Css("#index-csv")).await.unwrap().click().await.unwrap();
        let csv = c
            .execute(
                "const h = document.querySelector('#index-csv').getAttribute('href'); return h.startsWith('data:text/csv') ? decodeURIComponent(h.slice(h.indexOf(',') + 1)) : null;",
                vec![],
            )
            .await
            .unwrap();
        let index =
            speedmatrix_schema::site::load_index(&std::fs::read(site.path().join("runs/index.json")).unwrap()).unwrap();
        let filters = speedmatrix_schema::site_table::IndexFilters { simulated: Some(true), ..Default::default() };
        let rows = speedmatrix_schema::site_table::order(&index.runs, None, &filters);
        let expected = speedmatrix_schema::site_table::to_csv(&index.runs, &rows);
        assert_eq!(csv.as_str(), Some(expected.as_str()));
        assert_eq!(expected.lines().count(), 3, "a header and the two simulated runs");
        assert!(expected.lines().nth(1).unwrap().starts_with(MTP));
        assert_eq!(text(&c, "#index-csv").await, "Download these 2 rows as CSV");

        // A click on a point (here the first point of the first GPU type, not necessarily on the
        // frontier) opens its run at that cell.
        let (_, first) = &want;
        let csv_text = std::fs::read_to_string(site.path().join("runs/cells.csv")).unwrap();
        let points = speedmatrix_schema::fleet::points_from_csv(&csv_text).unwrap();
        let f = speedmatrix_schema::fleet::fleet(&points, |file| [MTP, NO_SPEC].contains(&file));
        let target = f.series[0].points[0].href();
        assert_eq!(f.series[0].gpu, first[0].0);
        c.execute(
            "const s = document.querySelector('#fleet-chart'); const d = s.querySelector('.fleet-points').getAttribute('d'); \
             const m = /^M([-0-9.]+) ([-0-9.]+)/.exec(d); const p = s.createSVGPoint(); p.x = Number(m[1]); p.y = Number(m[2]); \
             const q = p.matrixTransform(s.getScreenCTM()); \
             s.dispatchEvent(new MouseEvent('click', {clientX: q.x, clientY: q.y, bubbles: true}));",
            vec![],
        )
        .await
        .unwrap();
        let cell = target.rsplit("cell=").next().unwrap().to_string();
        let show = format!("runs/{}", f.series[0].points[0].run_file);
        let js = format!(
            "const p = new URLSearchParams(location.search); return p.get('show') === {show:?} && p.get('cell') === {cell:?} || null;"
        );
        until(&c, &format!("the point's run and cell ({target})"), &js).await;
        let panel =
            until(&c, "the cell's detail", "return document.querySelector('#cell-panel')?.dataset.cell || null;").await;
        assert_eq!(panel.as_str(), Some(cell.as_str()));

        // Picks are in the URL: a fresh load of it has the same runs picked, and the link to
        // compare them.
        c.goto(&base).await.unwrap();
        wait_rows(&c, &[SEED, MTP, NO_SPEC, IMPORT]).await;
        for file in [NO_SPEC, SEED, IMPORT] {
            c.find(Locator::Css(&format!("#run-table tr[data-file=\"{file}\"] input.pick")))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
        }
        let picked_url = c.current_url().await.unwrap().to_string();
        assert!(picked_url.contains(&format!("pick={NO_SPEC}&pick={SEED}&pick={IMPORT}")), "{picked_url}");
        c.goto("about:blank").await.unwrap();
        c.goto(&picked_url).await.unwrap();
        let js = "return [...document.querySelectorAll('#run-table input.pick')].filter(i => i.checked).length === 3 && document.querySelector('#compare-picked') ? document.querySelector('#compare-picked').getAttribute('href') : null;";
        let href = until(&c, "three picks from the URL", js).await;
        assert_eq!(
            href.as_str(),
            Some(format!("?compare=runs/{NO_SPEC}&compare=runs/{SEED}&compare=runs/{IMPORT}").as_str())
        );
    });
}
