//! Prefix-share cells and warm prefill rows (`run --prefix-share`) end to end: the real binary
//! against the twin (`speedmatrix simulate --profile tiny`, a real server process on loopback,
//! vLLM-shaped: `POST /reset_prefix_cache`, `vllm:prefix_cache_*` counters, prefix caching by
//! 16-token blocks of the prompt's own tokens).
//!
//! - Caching on: every cell and warm row starts from a reset cache, and its measured hit rate
//!   (Prometheus) is the planned share within the block rounding; `show` prints both.
//! - Caching off (`--no-prefix-cache`): the cell's measured rate is 0 and its reason says it is
//!   90 points below the plan and why (the server reports prefix caching off).
//! - No reset endpoint (`--fault reset-404`, as vLLM without dev mode): the prompts are salted,
//!   the file says so, and the twin's own trace shows no warm-up found an earlier cell's prefix.
//! - Rate cells (`--rates` with `--prefix-share`): one open-loop cell per share, each from a
//!   reset cache, its measured hit rate (Prometheus) the twin's own count over the cell's
//!   requests (its trace) within a point, in the file, `show`, `diff` and `export`.
//!
//! No timing is asserted: hit rates are token counts, the same on a busy machine.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::twin::twin;

/// `run` against `url` with `args`; the results file's JSON, the exit code and stderr.
fn run(dir: &Path, url: &str, args: &[&str]) -> (Value, Option<i32>, String) {
    let out = dir.join("run.json");
    let o = Command::new(support::bin())
        .args(["run", "--url", url, "--quiet", "--force", "-o"])
        .arg(&out)
        .args(["--duration", "2s", "--max-tokens", "64"])
        .args(args)
        .output()
        .expect("run the collector");
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    let file = std::fs::read(&out).unwrap_or_else(|e| panic!("no results file ({e}): {stderr}"));
    (serde_json::from_slice(&file).unwrap(), o.status.code(), stderr)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The shared prefix's tokens in a request, as a share of its prompt, lie within one 16-token
/// block and the chat template's closing tokens (a few) below the planned share: that is what
/// a block cache can serve (2,048-token prompts: 16 tokens = 0.8 points).
fn near_plan(measured: f64, share: f64) -> bool {
    measured <= share + 0.005 && measured >= share - 0.02
}

#[test]
fn prefix_shares_hit_as_planned_from_a_reset_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (_twin, url) = twin(&["--profile", "tiny"]);
    let (r, code, stderr) = run(
        dir.path(),
        &url,
        &["--contexts", "2k", "--concurrency", "1,4", "--prefill-contexts", "2k", "--prefix-share", "0,50%,90%"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(r["config"]["prefix_shares"], serde_json::json!([0.0, 0.5, 0.9]));
    let cells = r["decode"].as_array().unwrap();
    let keys: Vec<(u64, f64)> =
        cells.iter().map(|c| (c["concurrency"].as_u64().unwrap(), f(&c["prefix_share"]))).collect();
    assert_eq!(keys, [(1, 0.0), (1, 0.5), (1, 0.9), (4, 0.0), (4, 0.5), (4, 0.9)]);
    for c in cells {
        let (share, pc) = (f(&c["prefix_share"]), &c["prefix_cache"]);
        // Measured: valid, or requests queued when a starved client's turnarounds between a
        // stream's end and its replacement read as a queue (seen once at load ≈ 10); the cache
        // figures below are the same either way.
        assert!(matches!(c["status"].as_str(), Some("valid" | "requests_queued")), "{c}");
        assert_eq!(pc["cache_start"], "reset", "{pc}");
        assert_eq!(pc["cache_start_detail"], "POST /reset_prefix_cache");
        assert_eq!(pc["hit_rate_source"], "prometheus", "{pc}");
        assert_eq!(f(&pc["planned_share"]), share);
        let m = f(&pc["measured_hit_rate"]);
        assert!(near_plan(m, share), "share {share}: measured {m} ({pc})");
        // More than the opening streams: replacements each brought a rest of their own.
        assert!(f(&pc["query_tokens"]) > 4.0 * 2048.0 - 1.0, "{pc}");
        assert!(!c["reason"].as_str().unwrap_or("").contains("prefix cache:"), "{}", c["reason"]);
    }
    // The cold row, then a warm row per share above 0.
    let rows = r["prefill"].as_array().unwrap();
    let shares: Vec<Value> = rows.iter().map(|p| p["prefix_share"].clone()).collect();
    assert_eq!(shares, [Value::Null, serde_json::json!(0.5), serde_json::json!(0.9)]);
    assert!(rows[0].get("prefix_cache").is_none());
    assert_eq!(rows[0]["cached_tokens"], 0, "the cold row stays cold: {}", rows[0]);
    for p in &rows[1..] {
        let (share, pc) = (f(&p["prefix_share"]), &p["prefix_cache"]);
        assert_eq!((&p["status"], &pc["cache_start"]), (&Value::from("valid"), &Value::from("reset")), "{p}");
        let m = f(&pc["measured_hit_rate"]);
        assert!(near_plan(m, share), "warm row {share}: measured {m} ({pc})");
        assert_eq!(f(&pc["query_tokens"]), f(&p["prompt_tokens"]), "one request measured: {pc}");
        assert!(p["reason"].is_null(), "a warm row is served from cache by design: {}", p["reason"]);
    }
    // `show` prints the share and the measured rate beside the plan.
    let o = Command::new(support::bin()).arg("show").arg(dir.path().join("run.json")).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("2K · prefix 90%"), "{text}");
    assert!(text.contains("hit (plan 90%, Prometheus)"), "{text}");
    assert!(text.contains("2K context, warm: prefix 50%"), "{text}");
    let o = Command::new(support::bin()).args(["show", "-f", "csv"]).arg(dir.path().join("run.json")).output().unwrap();
    let csv = String::from_utf8_lossy(&o.stdout);
    assert!(csv.lines().next().unwrap().ends_with(",prefix_share,prefix_cache_hit_rate,prefix_cache_hit_rate_source"));
    // `diff` matches rows and cells by context, concurrency and share: the file against itself
    // pairs all 3 prefill rows (cold, 50 %, 90 %) and all 6 cells, never a 90 % cell with a 0 %
    // one, and finds no change.
    let file = dir.path().join("run.json");
    let o = Command::new(support::bin()).arg("diff").arg(&file).arg(&file).args(["-f", "json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(d.get("prefix_share_rows_left_out").is_none(), "nothing is left out");
    let rows = d["rows"].as_array().unwrap();
    let keys: Vec<(String, Value)> =
        rows.iter().map(|r| (r["phase"].as_str().unwrap().to_string(), r["prefix_share"].clone())).collect();
    let count = |phase: &str, share: Value| keys.iter().filter(|k| k.0 == phase && k.1 == share).count();
    assert_eq!(rows.len(), 9, "{keys:?}");
    assert_eq!(count("prefill", Value::Null), 1, "{keys:?}");
    assert_eq!(count("prefill", serde_json::json!(0.9)), 1, "{keys:?}");
    assert_eq!(count("decode", Value::Null), 2, "share 0 pairs as a cold cell: {keys:?}");
    assert_eq!(count("decode", serde_json::json!(0.5)), 2, "{keys:?}");
    for r in rows {
        for x in r["deltas"].as_array().unwrap() {
            // A file against itself: no change anywhere ("not enough data" where the noise
            // rule needs repeats).
            assert!(!matches!(x["verdict"].as_str(), Some("better" | "worse" | "changed")), "{r}");
        }
    }
    let o = Command::new(support::bin()).arg("diff").arg(&file).arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("2K context, warm: prefix 90%"), "{text}");
    assert!(text.contains("2K · prefix 50%"), "a matrix row per share: {text}");
    assert!(!text.contains("Not compared"), "{text}");
    // `export` keys the rows by their share too: each decode cell and warm row carries its
    // planned share and the measured hit rate with its source; the cold prefill row neither.
    let cells = dir.path().join("cells.csv");
    let o = Command::new(support::bin()).arg("export").arg(&file).arg("-o").arg(&cells).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(&cells).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} column"));
    let (phase, share, hit, source) =
        (at("phase"), at("prefix_share"), at("prefix_cache_hit_rate"), at("prefix_cache_hit_rate_source"));
    let mut seen = Vec::new();
    for line in lines {
        // The key columns come before any free text (reason), so a plain split reads them.
        let f: Vec<&str> = line.split(',').collect();
        seen.push(format!("{} {}", f[phase], f[share]));
        if !f[share].is_empty() {
            let m: f64 = f[hit].parse().unwrap_or_else(|_| panic!("a hit rate beside share {}: {line}", f[share]));
            assert!(near_plan(m, f[share].parse().unwrap()), "{line}");
            assert_eq!(f[source], "prometheus", "{line}");
        }
    }
    let want = ["prefill ", "prefill 0.5", "prefill 0.9", "decode 0", "decode 0.5", "decode 0.9"];
    for w in want {
        assert!(seen.iter().any(|s| s == w), "{w} in {seen:?}");
    }
    // The page's heatmap shows one share's cells (the cold ones first) and offers the others.
    if let Some(dom) = support::dom::rendered_dom(&file) {
        assert!(dom.contains("Prefix share 0%: each request's prompt is 0% of the context"), "{dom}");
        assert!(dom.contains("The run measured 3 shares"), "{dom}");
    }
}

#[test]
fn with_prefix_caching_off_the_cell_says_the_plan_was_not_hit_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let (_twin, url) = twin(&["--profile", "tiny", "--no-prefix-cache"]);
    let (r, code, stderr) = run(
        dir.path(),
        &url,
        &["--contexts", "1k", "--concurrency", "2", "--prefill-contexts", "none", "--prefix-share", "90%"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let c = &r["decode"][0];
    let pc = &c["prefix_cache"];
    assert_eq!(f(&pc["measured_hit_rate"]), 0.0, "{pc}");
    assert_eq!(pc["hit_rate_source"], "prometheus");
    let reason = c["reason"].as_str().unwrap_or_else(|| panic!("a cell off its plan says why: {c}"));
    assert!(reason.contains("measured hit rate 0% is 90 points below the planned share 90%"), "{reason}");
    assert!(reason.contains("the server reports its prefix caching off"), "{reason}");
    assert!(stderr.contains("90 points below"), "the terminal says it too: {stderr}");
}

#[test]
fn without_a_reset_endpoint_the_prompts_are_salted_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let (twin, url) = twin(&["--profile", "tiny", "--fault", "reset-404", "--trace", trace.to_str().unwrap()]);
    let (r, code, stderr) = run(
        dir.path(),
        &url,
        &["--contexts", "1k", "--concurrency", "1,2", "--prefill-contexts", "1k", "--prefix-share", "50%"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let warm_row = &r["prefill"][1];
    let all: Vec<&Value> = r["decode"].as_array().unwrap().iter().chain([warm_row]).collect();
    assert_eq!(all.len(), 3);
    for x in all {
        let pc = &x["prefix_cache"];
        assert_eq!(pc["cache_start"], "salted", "{pc}");
        let why = pc["cache_start_detail"].as_str().unwrap();
        assert!(why.starts_with("POST /reset_prefix_cache failed") && why.contains("404"), "{why}");
        assert!(why.contains("VLLM_SERVER_DEV_MODE=1"), "{why}");
        let m = f(&pc["measured_hit_rate"]);
        assert!(near_plan(m, 0.5), "{pc}");
    }
    assert_eq!(stderr.matches("prefix cache: POST /reset_prefix_cache failed").count(), 1, "said once: {stderr}");
    // The twin's own record: every max_tokens-1 request (the cold row, the warm-ups) found
    // nothing cached — the two cells of one context and share did not share a prefix — except
    // the warm row's measured request, which found its own warm-up's.
    drop(twin);
    let lines: Vec<Value> =
        std::fs::read_to_string(&trace).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let single: Vec<u64> =
        lines.iter().filter(|l| l["max_tokens"] == 1).map(|l| l["cached_tokens"].as_u64().unwrap()).collect();
    assert_eq!(single.len(), 1 + 2 + 2, "cold row, warm row's warm-up and request, two cells' warm-ups: {single:?}");
    assert_eq!(single.iter().filter(|c| **c > 0).count(), 1, "{single:?}");
}

#[test]
fn bad_prefix_shares_are_refused_before_any_request() {
    // Port 9 (discard): nothing is asked of it, the flags are refused first (exit 2).
    for (args, says) in [
        (&["--prefix-share", "0.5"][..], "--prefix-share: `0.5` is no share: write percentages of the prompt, e.g. --prefix-share 0,50%,90%"),
        (&["--prefix-share", "100%"][..], "needs a unique rest"),
        // Out of range: the range and an example of valid values.
        (&["--prefix-share", "120%"][..], "`120%` is outside 0%…99%: each prompt needs a unique rest after its shared prefix; give shares from 0 to 99%, e.g. --prefix-share 0,50%,90%"),
        (&["--prefix-share", "lots%"][..], "`lots%` is no percentage: write shares from 0 to 99%, e.g. --prefix-share 0,50%,90%"),
        (
            &["--prefix-share", "50%", "--rates", "auto", "--slo", "ttft=2s"][..],
            "--rates auto and --trace do not take it yet",
        ),
    ] {
        let o = Command::new(support::bin())
            .args(["run", "--url", "http://127.0.0.1:9", "--dry-run"])
            .args(args)
            .output()
            .expect("run the collector");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// The twin's trace, in arrival order, cut into the cells of a run without prefill rows: each
/// prefix-share cell begins with its warm-up (the one `max_tokens: 1` request), and its
/// requests follow until the next one's.
fn cells_in_trace(trace: &Path) -> Vec<Vec<Value>> {
    let mut lines: Vec<Value> =
        std::fs::read_to_string(trace).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    lines.sort_by_key(|l| l["request"].as_u64().unwrap());
    let mut cells: Vec<Vec<Value>> = vec![];
    for l in lines {
        if l["max_tokens"] == 1 {
            cells.push(vec![]);
        } else {
            cells.last_mut().expect("a warm-up before the cell's first request").push(l);
        }
    }
    cells
}

#[test]
fn rate_cells_take_the_share_axis_and_measure_what_the_twin_counted() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let (twin, url) = twin(&["--profile", "tiny", "--trace", trace.to_str().unwrap()]);
    let (r, code, stderr) = run(
        dir.path(),
        &url,
        &[
            "--contexts",
            "1k",
            "--rates",
            "5",
            "--arrival",
            "constant",
            "--prefill-contexts",
            "none",
            "--prefix-share",
            "0,90%",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(r["config"]["prefix_shares"], serde_json::json!([0.0, 0.9]));
    assert!(r["decode"].as_array().unwrap().is_empty(), "--rates alone: rate cells only");
    let cells = r["rates"].as_array().unwrap();
    let keys: Vec<(f64, f64)> = cells.iter().map(|c| (f(&c["rate_rps"]), f(&c["prefix_share"]))).collect();
    assert_eq!(keys, [(5.0, 0.0), (5.0, 0.9)]);
    drop(twin);
    let truth = cells_in_trace(&trace);
    assert_eq!(truth.len(), 2, "one warm-up per cell");
    for (c, requests) in cells.iter().zip(&truth) {
        let (share, pc) = (f(&c["prefix_share"]), &c["prefix_cache"]);
        // Measured: valid, or saturated / client-limited when a starved client falls behind on
        // a loaded machine; the cache figures are token counts, the same either way.
        assert!(matches!(c["status"].as_str(), Some("valid" | "saturated" | "client_limited")), "{c}");
        assert_eq!(pc["cache_start"], "reset", "{pc}");
        assert_eq!(pc["cache_start_detail"], "POST /reset_prefix_cache");
        assert_eq!(pc["hit_rate_source"], "prometheus", "{pc}");
        assert_eq!(f(&pc["planned_share"]), share);
        let m = f(&pc["measured_hit_rate"]);
        assert!(near_plan(m, share), "share {share}: measured {m} ({pc})");
        // The twin's own count over the cell's requests that it ran (a first token sent): prompt
        // tokens it served from its cache ÷ prompt tokens. Every request of a cell has the same
        // prefix and a rest of the same length, so a request the drain cancelled before its
        // first token changes neither side's rate by more than rounding.
        let ran: Vec<&Value> = requests.iter().filter(|l| l["output_tokens"].as_u64().unwrap_or(0) > 0).collect();
        assert!(ran.len() >= 5, "a 2 s window at 5 req/s: {} requests ran", ran.len());
        let sum = |k: &str| ran.iter().map(|l| l[k].as_u64().unwrap()).sum::<u64>() as f64;
        let twin_rate = sum("cached_tokens") / sum("prompt_tokens");
        assert!((m - twin_rate).abs() <= 0.01, "share {share}: measured {m}, the twin counted {twin_rate} ({pc})");
        if share > 0.0 {
            // Every request found the prefix the warm-up left, from the cell's first on.
            assert!(ran.iter().all(|l| l["cached_tokens"].as_u64().unwrap() > 0), "{requests:?}");
        }
        assert!(!c["reason"].as_str().unwrap_or("").contains("prefix cache:"), "{}", c["reason"]);
    }
    // `show`'s rate table: a row per share, the hit rate beside the plan.
    let file = dir.path().join("run.json");
    let o = Command::new(support::bin()).arg("show").arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("1K · prefix 90%"), "{text}");
    assert!(text.contains("1K · prefix 0%"), "{text}");
    assert!(text.contains("Prefix cache"), "{text}");
    assert!(text.contains("hit (plan 90%, Prometheus)"), "{text}");
    let o = Command::new(support::bin()).args(["show", "--rates", "-f", "json"]).arg(&file).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["prefix_share"], 0.9);
    assert_eq!(rows[1]["prefix_cache_hit_rate"], cells[1]["prefix_cache"]["measured_hit_rate"]);
    assert_eq!(rows[1]["prefix_cache_hit_rate_source"], "prometheus");
    // `diff` pairs the cells by share as well: the file against itself, two rows, no change.
    let o = Command::new(support::bin()).arg("diff").arg(&file).arg(&file).args(["-f", "json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = d["rates"]["rows"].as_array().unwrap();
    let shares: Vec<f64> = rows.iter().map(|r| f(&r["prefix_share"])).collect();
    assert_eq!(shares, [0.0, 0.9], "{d}");
    assert!(rows.iter().all(|r| r["status_a"] == r["status_b"]), "{d}");
    let hit = rows[1]["deltas"].as_array().unwrap().iter().find(|x| x["column"] == "prefix_cache_hit_rate");
    assert_eq!(hit.map(|x| &x["verdict"]), Some(&Value::from("same")), "the hit rate by the threshold: {d}");
    let o = Command::new(support::bin()).arg("diff").arg(&file).arg(&file).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("1K · prefix 90%") && text.contains("Prefix-cache hit rate"), "{text}");
    // `export`: each rate row carries its share, the measured rate, its source and the reset.
    let out = dir.path().join("cells.csv");
    let o = Command::new(support::bin()).arg("export").arg(&file).arg("-o").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(&out).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} column"));
    let rate_rows: Vec<Vec<&str>> =
        lines.map(|l| l.split(',').collect::<Vec<&str>>()).filter(|f| f[at("phase")] == "rate").collect();
    assert_eq!(rate_rows.len(), 2);
    for (row, c) in rate_rows.iter().zip(cells) {
        assert_eq!(row[at("prefix_share")].parse::<f64>().unwrap(), f(&c["prefix_share"]));
        assert_eq!(
            row[at("prefix_cache_hit_rate")].parse::<f64>().unwrap(),
            f(&c["prefix_cache"]["measured_hit_rate"])
        );
        assert_eq!((row[at("prefix_cache_hit_rate_source")], row[at("prefix_cache_start")]), ("prometheus", "reset"));
    }
}

#[test]
fn a_rate_cell_whose_share_was_not_hit_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (_twin, url) = twin(&["--profile", "tiny", "--no-prefix-cache"]);
    let (r, code, stderr) = run(
        dir.path(),
        &url,
        &[
            "--contexts",
            "1k",
            "--rates",
            "2",
            "--arrival",
            "constant",
            "--prefill-contexts",
            "none",
            "--prefix-share",
            "90%",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let c = &r["rates"][0];
    let pc = &c["prefix_cache"];
    assert_eq!((f(&pc["planned_share"]), f(&pc["measured_hit_rate"])), (0.9, 0.0), "{pc}");
    let reason = c["reason"].as_str().unwrap_or_else(|| panic!("a rate cell off its plan says why: {c}"));
    assert!(reason.contains("measured hit rate 0% is 90 points below the planned share 90%"), "{reason}");
    assert!(reason.contains("the server reports its prefix caching off"), "{reason}");
    assert!(
        stderr.contains("warning: rate 1K · prefix 90% at 2 req/s: prefix cache:"),
        "the terminal says it: {stderr}"
    );
}
