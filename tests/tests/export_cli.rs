//! `speedmatrix export RUN.json… -o cells.csv|cells.parquet` and the cells table `publish` writes
//! beside a site's index (`runs/cells.csv`, `runs/cells.parquet`), run as a user runs them:
//!
//! - the CSV has the documented header and one line per prefill row, decode cell and rate cell
//!   of every run given, in order, and its figures are the results files' own (read back with
//!   the csv crate, compared with the files loaded on their own);
//! - `publish` writes the same table, byte for byte, as `export` of the same files, in both
//!   formats, and a republish with one more run rewrites it with that run's rows;
//! - a Parquet file is one (its magic bytes); reading it back with a real reader is
//!   `export_pyarrow.rs` (full tier: pyarrow from PyPI);
//! - bad input: an `--out` whose format cannot be told, an invalid run, no run — exit 2 with a
//!   line that says what to do.

use speedmatrix_schema::{load_results, Results};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FIXTURES: [&str; 5] = [
    "h200-qwen3.5-122b-vllm.json",
    "rates-twin.json",
    "vllm-cpu-smollm2-135m.json",
    "round1/import-vllm-bench.json",
    "round1/twin-interrupted.json",
];

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(rel)
}

fn load(path: &Path) -> Results {
    load_results(&std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn export(runs: &[PathBuf], args: &[&str]) -> Output {
    Command::new(support::bin()).arg("export").args(runs).args(args).output().expect("run speedmatrix export")
}

fn ok(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fixtures() -> Vec<PathBuf> {
    FIXTURES.iter().map(|f| fixture(f)).collect()
}

/// The rows a run gives: one per prefill row, decode cell, rate cell and trace.
fn rows_of(r: &Results) -> usize {
    r.prefill.len() + r.decode.len() + r.rates.len() + r.traces.len()
}

#[test]
fn csv_has_every_row_of_every_run_with_the_files_figures() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cells.csv");
    let said = ok(&export(&fixtures(), &["-o", out.to_str().unwrap()]));
    let runs: Vec<Results> = fixtures().iter().map(|p| load(p)).collect();
    let expected_rows: usize = runs.iter().map(rows_of).sum();
    assert!(said.contains(&format!("{expected_rows} rows from 5 runs")), "{said}");

    let mut reader = csv::Reader::from_path(&out).unwrap();
    let headers: Vec<String> = reader.headers().unwrap().iter().map(str::to_string).collect();
    let documented: Vec<String> = support::export_doc::columns().into_iter().map(|c| c.name).collect();
    assert_eq!(headers, documented, "the CSV's header is the documented column list");
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), expected_rows);
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let num = |s: &str| if s.is_empty() { None } else { Some(s.parse::<f64>().unwrap()) };

    // Each run's rows, in file order, carry its header and its own figures.
    let mut at = 0;
    for (path, r) in fixtures().iter().zip(&runs) {
        let name = path.file_name().unwrap().to_str().unwrap();
        let mine = &rows[at..at + rows_of(r)];
        at += rows_of(r);
        assert!(mine.iter().all(|x| &x[col("run_file")] == name && x[col("run_id")] == r.run.id), "{name}");
        assert!(mine.iter().all(|x| &x[col("cells_version")] == "1"));
        let simulated = if r.engine.simulated.is_some() { "true" } else { "false" };
        assert!(mine.iter().all(|x| &x[col("simulated")] == simulated), "{name}");
        for (x, p) in mine.iter().zip(&r.prefill) {
            assert_eq!(&x[col("phase")], "prefill");
            assert_eq!(num(&x[col("ttft_ms_p50")]), p.ttft_ms, "{name} prefill {}", p.context.label);
            assert_eq!(num(&x[col("prompt_tps")]), p.prompt_tps);
        }
        for (x, d) in mine[r.prefill.len()..].iter().zip(&r.decode) {
            let key = format!("{name} decode {} × {}", d.context.label, d.concurrency);
            assert_eq!(&x[col("phase")], "decode");
            assert_eq!(&x[col("status")], d.status.id(), "{key}");
            assert_eq!(x[col("concurrency")].parse::<u32>().ok(), Some(d.concurrency), "{key}");
            assert_eq!(num(&x[col("total_tps")]), d.total_tps, "{key}");
            assert_eq!(num(&x[col("ttft_ms_p90")]), d.ttft_ms.and_then(|t| t.p90), "{key}");
            assert_eq!(x[col("output_tokens")].parse::<u64>().ok(), d.output_tokens, "{key}");
            let low = d.intervals.as_ref().and_then(|i| i.total_tps).map(|i| i.low);
            assert_eq!(num(&x[col("total_tps_ci_low")]), low, "{key}");
        }
        for (x, c) in mine[r.prefill.len() + r.decode.len()..].iter().zip(&r.rates) {
            assert_eq!(&x[col("phase")], "rate");
            assert_eq!(num(&x[col("rate_rps")]), Some(c.rate_rps));
            assert_eq!(num(&x[col("achieved_rps")]), c.achieved_rps);
            assert_eq!(num(&x[col("e2e_ms_p99")]), c.e2e_ms.and_then(|t| t.p99));
            assert_eq!(&x[col("concurrency")], "", "a rate cell has no concurrency: null, not 0");
        }
    }
    let imported = rows.iter().find(|x| &x[col("run_file")] == "import-vllm-bench.json").unwrap();
    assert_eq!(&imported[col("imported_from")], "vllm-bench");
}

#[test]
fn publish_writes_the_same_table_beside_the_index_and_rewrites_it_on_republish() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let all = fixtures();
    support::cli::publish(&all[..4], &site);
    let csv = dir.path().join("four.csv");
    let parquet = dir.path().join("four.parquet");
    ok(&export(&all[..4], &["-o", csv.to_str().unwrap()]));
    ok(&export(&all[..4], &["-o", parquet.to_str().unwrap()]));
    let read = |p: PathBuf| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(read(site.join("runs/index.json")).starts_with(b"{"));
    assert_eq!(read(site.join("runs/cells.csv")), read(csv), "the site's CSV is export's of the same runs");
    let site_parquet = read(site.join("runs/cells.parquet"));
    assert_eq!(site_parquet, read(parquet), "the site's Parquet is export's of the same runs");
    assert!(site_parquet.starts_with(b"PAR1") && site_parquet.ends_with(b"PAR1"), "a Parquet file");

    // Republishing with a fifth run adds its rows to the site's table.
    support::cli::publish(&all[4..], &site);
    let rows = |bytes: Vec<u8>| csv::Reader::from_reader(bytes.as_slice()).records().count();
    let fifth = rows_of(&load(&all[4]));
    assert!(fifth > 0);
    let four: usize = all[..4].iter().map(|p| rows_of(&load(p))).sum();
    assert_eq!(rows(read(site.join("runs/cells.csv"))), four + fifth);
}

#[test]
fn formats_follow_the_flag_else_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let runs = vec![fixture("rates-twin.json")];
    let txt = dir.path().join("cells.txt");
    ok(&export(&runs, &["-o", txt.to_str().unwrap(), "--format", "csv"]));
    assert!(std::fs::read_to_string(&txt).unwrap().starts_with("cells_version,run_file,"));
    let pq = dir.path().join("cells.bin");
    ok(&export(&runs, &["-o", pq.to_str().unwrap(), "-f", "parquet"]));
    assert!(std::fs::read(&pq).unwrap().starts_with(b"PAR1"));
}

#[test]
fn bad_input_exits_2_and_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let runs = vec![fixture("rates-twin.json")];
    let unknown = dir.path().join("cells.txt");
    let o = export(&runs, &["-o", unknown.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cells.txt") && err.contains("--format parquet|csv"), "{err}");
    assert!(!unknown.exists(), "nothing written");

    let bad = dir.path().join("not-a-run.json");
    std::fs::write(&bad, br#"{"schema": "speedmatrix-results"}"#).unwrap();
    let out = dir.path().join("cells.csv");
    let o = export(&[runs[0].clone(), bad], &["-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not-a-run.json"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.exists(), "nothing written when a run is invalid");

    let o = export(&[], &["-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "no run given: clap's usage error");
}
