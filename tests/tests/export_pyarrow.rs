//! A site's `runs/cells.parquet` read back by a real Parquet reader: pyarrow (Apache Arrow's C++
//! implementation, from PyPI; `scripts/setup.d/pyarrow.sh` installs it into
//! `$SPEEDMATRIX_CACHE/tools/pyarrow-venv`). Where it is missing the test says SKIPPED — and
//! fails under `CI=true`.
//!
//! Checked against the results files (loaded here on their own) and `docs/EXPORT.md`:
//! - the row count: one row per prefill row, decode cell, rate cell and trace of every run;
//! - every column, in order, with the documented name and type — the Parquet physical and
//!   logical type and the Arrow type pyarrow reads it as (`STRING`: BYTE_ARRAY/String/string,
//!   `DOUBLE`: DOUBLE/double, `INT64`: INT64/int64, `BOOLEAN`: BOOLEAN/bool);
//! - the column-list version in the file's key-value metadata;
//! - figures of every row: total tok/s, TTFT, output tokens, rates, intervals, send lag, the
//!   simulated flag — nulls where the file has no figure, never 0.

use serde_json::Value;
use speedmatrix_schema::{load_results, Interval, IntervalMethod, Results, TraceRow};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Reads the file with pyarrow and prints what the test checks, as JSON.
const READ: &str = r#"
import json, sys
import pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1])
t = f.read()
columns = []
for i, field in enumerate(t.schema):
    c = f.schema.column(i)
    columns.append({"name": field.name, "arrow": str(field.type), "physical": c.physical_type,
                    "logical": str(c.logical_type)})
meta = {k.decode(): v.decode() for k, v in (f.metadata.metadata or {}).items()}
wanted = ["run_file", "phase", "status", "simulated", "concurrency", "rate_rps", "total_tps", "ttft_ms_p50",
          "output_tokens", "total_tps_ci_low", "send_lag_ms_p99", "gpu_count"]
print(json.dumps({"rows": t.num_rows, "metadata": meta, "columns": columns,
                  "data": {n: t.column(n).to_pylist() for n in wanted}}))
"#;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(rel)
}

fn python() -> Option<PathBuf> {
    let cache = std::env::var_os("SPEEDMATRIX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/speedmatrix"));
    let python = cache.join("tools/pyarrow-venv/bin/python");
    let ok = python.exists()
        && Command::new(&python).args(["-c", "import pyarrow.parquet"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        support::skip(&format!("pyarrow not installed in {} (run scripts/setup.sh)", python.display()));
        return None;
    }
    Some(python)
}

/// A fixture changed by `edit`, written into `dir` as `name`.
fn edited(dir: &Path, fixture_name: &str, name: &str, edit: impl FnOnce(&mut Results)) -> PathBuf {
    let mut r: Results = load_results(&std::fs::read(fixture(fixture_name)).unwrap()).unwrap();
    edit(&mut r);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(&r).unwrap()).unwrap();
    path
}

/// A run with a replayed trace: the rates fixture with its first rate cell also under `traces`
/// (a trace row holds a rate cell's figures; no committed fixture has one).
fn with_trace(dir: &Path) -> PathBuf {
    edited(dir, "rates-twin.json", "rates-with-trace.json", |r| {
        r.traces.push(TraceRow { cell: r.rates[0].clone(), requests: vec![], prefix_cache: None })
    })
}

/// A run with a confidence interval of total tok/s in its second decode cell (no committed
/// fixture has a window long enough for one).
fn with_interval(dir: &Path) -> PathBuf {
    edited(dir, "vllm-cpu-smollm2-135m.json", "cpu-with-interval.json", |r| {
        let interval = Interval {
            estimate: 100.0,
            low: 95.5,
            high: 104.5,
            level: 0.95,
            method: IntervalMethod::BatchMeans,
            evidence: 6,
            std_error: 1.7,
            df: Some(5.0),
        };
        r.decode[1].intervals.get_or_insert_with(Default::default).total_tps = Some(interval);
    })
}

/// (arrow, physical, logical) for a documented type.
fn reader_type(doc: &str) -> (&'static str, &'static str, &'static str) {
    match doc {
        "STRING" => ("string", "BYTE_ARRAY", "String"),
        "DOUBLE" => ("double", "DOUBLE", "None"),
        "INT64" => ("int64", "INT64", "None"),
        "BOOLEAN" => ("bool", "BOOLEAN", "None"),
        other => panic!("docs/EXPORT.md names the type {other}, which is none of STRING, DOUBLE, INT64, BOOLEAN"),
    }
}

/// What the test expects of one row, straight from a results file.
#[derive(Debug, PartialEq)]
struct Expected {
    run_file: String,
    phase: &'static str,
    status: String,
    concurrency: Option<u32>,
    rate_rps: Option<f64>,
    total_tps: Option<f64>,
    ttft_ms_p50: Option<f64>,
    output_tokens: Option<u64>,
    total_tps_ci_low: Option<f64>,
    send_lag_ms_p99: Option<f64>,
}

fn expected(file: &str, r: &Results) -> Vec<Expected> {
    let row = |phase, status: &str| Expected {
        run_file: file.to_string(),
        phase,
        status: status.to_string(),
        concurrency: None,
        rate_rps: None,
        total_tps: None,
        ttft_ms_p50: None,
        output_tokens: None,
        total_tps_ci_low: None,
        send_lag_ms_p99: None,
    };
    let mut out = vec![];
    for p in &r.prefill {
        out.push(Expected { concurrency: Some(1), ttft_ms_p50: p.ttft_ms, ..row("prefill", p.status.id()) });
    }
    for d in &r.decode {
        out.push(Expected {
            concurrency: Some(d.concurrency),
            total_tps: d.total_tps,
            ttft_ms_p50: d.ttft_ms.and_then(|t| t.p50),
            output_tokens: d.output_tokens,
            total_tps_ci_low: d.intervals.as_ref().and_then(|i| i.total_tps).map(|i| i.low),
            ..row("decode", d.status.id())
        });
    }
    let rate = |c: &speedmatrix_schema::RateCell, phase| Expected {
        rate_rps: Some(c.rate_rps),
        total_tps: c.total_tps,
        ttft_ms_p50: c.ttft_ms.and_then(|t| t.p50),
        output_tokens: c.output_tokens,
        send_lag_ms_p99: c.send_lag_ms.and_then(|t| t.p99),
        ..row(phase, c.status.id())
    };
    out.extend(r.rates.iter().map(|c| rate(c, "rate")));
    out.extend(r.traces.iter().map(|t| rate(&t.cell, "trace")));
    out
}

#[test]
fn pyarrow_reads_the_sites_cells_parquet_as_documented() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let runs = vec![
        fixture("h200-qwen3.5-122b-vllm.json"),
        with_interval(dir.path()),
        fixture("round1/import-llm-inference-bench.json"),
        with_trace(dir.path()),
    ];
    let site = dir.path().join("site");
    support::cli::publish(&runs, &site);
    let o = Command::new(&python).args(["-c", READ]).arg(site.join("runs/cells.parquet")).output().unwrap();
    assert!(o.status.success(), "pyarrow: {}", String::from_utf8_lossy(&o.stderr));
    let got: Value = serde_json::from_slice(&o.stdout).unwrap();

    // Every row, every column and its type, and the version.
    let loaded: Vec<(String, Results)> = runs
        .iter()
        .map(|p| {
            (p.file_name().unwrap().to_string_lossy().into_owned(), load_results(&std::fs::read(p).unwrap()).unwrap())
        })
        .collect();
    let want: Vec<Expected> = loaded.iter().flat_map(|(f, r)| expected(f, r)).collect();
    assert_eq!(got["rows"].as_u64(), Some(want.len() as u64));
    assert!(want.iter().any(|w| w.phase == "trace") && want.iter().any(|w| w.total_tps_ci_low.is_some()));
    let documented = support::export_doc::columns();
    let columns = got["columns"].as_array().unwrap();
    assert_eq!(columns.len(), documented.len(), "as many columns as docs/EXPORT.md lists");
    for (c, d) in columns.iter().zip(&documented) {
        let (arrow, physical, logical) = reader_type(&d.kind);
        assert_eq!(c["name"], d.name.as_str());
        assert_eq!((c["arrow"].as_str(), c["physical"].as_str()), (Some(arrow), Some(physical)), "{}", d.name);
        assert_eq!(c["logical"].as_str(), Some(logical), "{}", d.name);
    }
    let version = support::export_doc::version().to_string();
    assert_eq!(got["metadata"]["speedmatrix.cells_version"], version.as_str());

    // The figures, row by row, as the results files hold them.
    let data = &got["data"];
    let text = |n: &str, i: usize| data[n][i].as_str().map(str::to_string);
    let float = |n: &str, i: usize| data[n][i].as_f64();
    for (i, w) in want.iter().enumerate() {
        let read = Expected {
            run_file: text("run_file", i).unwrap_or_default(),
            phase: match text("phase", i).as_deref() {
                Some("prefill") => "prefill",
                Some("decode") => "decode",
                Some("rate") => "rate",
                Some("trace") => "trace",
                other => panic!("row {i}: phase {other:?}"),
            },
            status: text("status", i).unwrap_or_default(),
            concurrency: data["concurrency"][i].as_u64().map(|v| v as u32),
            rate_rps: float("rate_rps", i),
            total_tps: float("total_tps", i),
            ttft_ms_p50: float("ttft_ms_p50", i),
            output_tokens: data["output_tokens"][i].as_u64(),
            total_tps_ci_low: float("total_tps_ci_low", i),
            send_lag_ms_p99: float("send_lag_ms_p99", i),
        };
        assert_eq!(&read, w, "row {i}");
        let run = &loaded.iter().find(|(f, _)| *f == w.run_file).unwrap().1;
        assert_eq!(data["simulated"][i].as_bool(), Some(run.engine.simulated.is_some()), "row {i}");
        let gpus = speedmatrix_schema::derived::gpu_count(run).ok();
        assert_eq!(data["gpu_count"][i].as_u64(), gpus.map(u64::from), "row {i}: null without a GPU count");
    }
}
