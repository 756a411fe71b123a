//! Speculative decoding explained per cell, end to end: the real binary against the twin
//! (`speedmatrix simulate --profile tiny --spec-decode ngram:3`, a real server process on
//! loopback exposing vLLM's `spec_decode_*` counters, the per-position one included, and
//! writing what each request drafted and had accepted into its trace).
//!
//! - Every decode and rate cell's drafts, draft tokens, accepted tokens and accepted tokens per
//!   position equal, exactly, the sums of the twin's trace over the cell's own requests (matched
//!   by response id), and its acceptance rate and mean accepted length follow from them.
//! - `--prompts FILE.jsonl` of repetitive text is accepted more than the built-in prose (the
//!   twin's ngram acceptance grows with repetition), and the file is named in the results.
//! - A server without speculation has no `spec_decode`; a launch command that sets it on a
//!   server that does not count it says so in `missing`. A bad `--prompts` file is refused
//!   (exit 2) naming the flag, the file and the line.
//!
//! No timing is asserted. The counts cannot flake on a busy machine: the collector takes the
//! counters' growth from the reading before a cell's first request to a reading after its last
//! ended with the server idle, and the twin counts a request's drafts in its trace line in the
//! same engine step as in `/metrics` (an aborted request's line waits for the engine's abort).
//! Decode cells ask for more tokens than any stream can reach in its window, so no stream is
//! replaced, and rate cells' short requests all finish in the drain.

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use support::twin::twin;

/// `run` against `url` with `args` into `dir/NAME.json`; the results, the exit code and stderr.
fn run(dir: &Path, name: &str, url: &str, args: &[&str]) -> (Value, Option<i32>, String) {
    let out = dir.join(format!("{name}.json"));
    let o = Command::new(support::bin())
        .args(["run", "--url", url, "--quiet", "--force", "-o"])
        .arg(&out)
        .args(["--duration", "2s", "--prefill-contexts", "none"])
        .args(args)
        .output()
        .expect("run the collector");
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    let file = std::fs::read(&out).unwrap_or_else(|e| panic!("no results file ({e}): {stderr}"));
    (serde_json::from_slice(&file).unwrap(), o.status.code(), stderr)
}

/// The twin's trace: each request's `spec` by response id.
fn truth(path: &Path) -> HashMap<String, Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|l| (l["id"].as_str().unwrap().to_string(), l["spec"].clone()))
        .collect()
}

/// Checks a cell's `spec_decode` against the sums of the truth over its requests; returns its
/// acceptance rate.
fn check_cell(cell: &Value, truth: &HashMap<String, Value>) -> f64 {
    let name = format!("{} × {} {}", cell["context"]["label"], cell["concurrency"], cell["rate_rps"]);
    let requests = cell["requests"].as_array().unwrap();
    assert!(!requests.is_empty(), "{name}");
    let (mut drafts, mut tokens, mut accepted, mut per_pos) = (0u64, 0u64, 0u64, [0u64; 3]);
    for q in requests {
        let id = q["response_id"].as_str().unwrap_or_else(|| panic!("{name}: a request without its id: {q}"));
        let t = truth.get(id).unwrap_or_else(|| panic!("{name}: {id} is not in the twin's trace"));
        let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{name}: {id} has no spec.{k}: {t}"));
        drafts += n("drafts");
        tokens += n("draft_tokens");
        accepted += n("accepted_tokens");
        for (k, p) in per_pos.iter_mut().enumerate() {
            *p += t["accepted_per_pos"][k].as_u64().unwrap();
        }
    }
    let s = &cell["spec_decode"];
    assert_eq!(s["source"], "prometheus_counters", "{name}: {s}");
    assert!(drafts > 0, "{name}: the twin drafted for the cell's requests");
    assert_eq!(s["drafts"], drafts, "{name}: {s}");
    assert_eq!(s["draft_tokens"], tokens, "{name}: {s}");
    assert_eq!(tokens, 3 * drafts, "ngram:3 drafts three tokens each");
    assert_eq!(s["accepted_tokens"], accepted, "{name}: {s}");
    assert_eq!(s["accepted_per_position"], serde_json::json!(per_pos), "{name}: {s}");
    assert_eq!(per_pos.iter().sum::<u64>(), accepted, "{name}");
    let round3 = |x: f64| (x * 1000.0).round() / 1000.0;
    let rate = round3(accepted as f64 / tokens as f64);
    assert_eq!(s["acceptance_rate"].as_f64(), Some(rate), "{name}: {s}");
    assert_eq!(s["mean_accepted_length"].as_f64(), Some(round3(1.0 + accepted as f64 / drafts as f64)), "{name}");
    let by_pos: Vec<f64> = per_pos.iter().map(|&p| round3(p as f64 / drafts as f64)).collect();
    assert_eq!(s["acceptance_by_position"], serde_json::json!(by_pos), "{name}: {s}");
    rate
}

#[test]
fn every_cells_drafts_and_acceptance_are_the_twins_truth_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let (twin_process, url) =
        twin(&["--profile", "tiny", "--spec-decode", "ngram:3", "--seed", "7", "--trace", trace.to_str().unwrap()]);
    // Decode cells: more tokens than a stream reaches (seen: at most ~1,400 tok/s a stream, a
    // step of ~2.4 ms yielding up to 4, for ~3 s), so no stream is replaced; rate cells: short
    // requests that all finish.
    let (r, code, stderr) =
        run(dir.path(), "run", &url, &["--contexts", "1k", "--concurrency", "1,4", "--max-tokens", "20000"]);
    assert_eq!(code, Some(0), "{stderr}");
    let (rates, code, stderr) =
        run(dir.path(), "rates", &url, &["--contexts", "1k", "--rates", "4", "--max-tokens", "48"]);
    assert_eq!(code, Some(0), "{stderr}");
    drop(twin_process);
    let truth = truth(&trace);
    let cells = r["decode"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert_eq!(c["status"], "valid", "{c}");
        let rate = check_cell(c, &truth);
        assert_eq!(c["spec_accept_rate"].as_f64(), Some(rate), "one acceptance rate per cell");
        assert_eq!(c["server"]["spec_mean_accepted_len"], c["spec_decode"]["mean_accepted_length"]);
    }
    let rate_cells = rates["rates"].as_array().unwrap();
    assert_eq!(rate_cells.len(), 1);
    assert!(
        rate_cells[0]["requests"].as_array().unwrap().iter().all(|q| q["finish_reason"] == "length"),
        "all finished"
    );
    check_cell(&rate_cells[0], &truth);
    // `show` carries it: the table and the matrix cell's acceptance.
    let o = Command::new(support::bin()).arg("show").arg(dir.path().join("run.json")).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("Speculative decoding — the server's counters over each cell's requests"), "{text}");
    assert!(text.contains("decode 1K × 4"), "{text}");
    assert!(text.contains("speedmatrix-prose-v1 (built in)"), "{text}");
    assert!(text.contains("accepted"), "the matrix cell says its acceptance: {text}");
}

#[test]
fn your_own_repetitive_prompts_are_accepted_more_and_named_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("chants.jsonl");
    let line = "the cat sat on the mat and the cat sat on the mat again ".repeat(20);
    std::fs::write(&file, format!("{{\"text\": \"{line}\"}}\n\n{{\"prompt\": \"{line}\"}}\n")).unwrap();
    let (_twin, url) = twin(&["--profile", "tiny", "--spec-decode", "ngram:3"]);
    let args = ["--contexts", "1k", "--concurrency", "2", "--max-tokens", "20000"];
    let (prose, code, stderr) = run(dir.path(), "prose", &url, &args);
    assert_eq!(code, Some(0), "{stderr}");
    let mut mine = args.to_vec();
    mine.extend(["--prompts", file.to_str().unwrap()]);
    let (own, code, stderr) = run(dir.path(), "own", &url, &mine);
    assert_eq!(code, Some(0), "{stderr}");
    let rate = |r: &Value| r["decode"][0]["spec_decode"]["acceptance_rate"].as_f64().unwrap();
    // The twin's ngram model: 10 % + 80 % of the repeated trigrams' share; the chant repeats
    // nearly all of its trigrams, the prose fewer (seen by hand: 74.6–76.6 % against 26.3–26.4 %
    // at 1K; each cell a sample of ~800–2,200 drafts, whose rate varies by about a point).
    assert!(rate(&own) > 0.6, "repetitive prompts: {}", rate(&own));
    assert!(rate(&prose) < rate(&own) - 0.3, "prose {} vs own {}", rate(&prose), rate(&own));
    let corpus = &own["config"]["prompt_corpus"];
    assert_eq!(corpus["name"], "chants.jsonl", "{corpus}");
    assert_eq!(corpus["origin"], "user_file", "{corpus}");
    let sha = corpus["sha256"].as_str().unwrap();
    assert!(sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()), "{sha}");
    assert_eq!(prose["config"]["prompt_corpus"]["name"], "speedmatrix-prose-v1");
    // The prompts were cut to the context by the server's tokenizer, as the prose is.
    let tokens = own["decode"][0]["prompt_tokens"].as_u64().unwrap();
    assert!((1000..=1024).contains(&tokens), "{tokens}");
    // A resumed run keeps its prompts: without the file again it is refused before any request.
    let o = Command::new(support::bin())
        .args(["run", "--quiet", "--resume"])
        .arg(dir.path().join("own.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--resume: the run's prompts came from --prompts chants.jsonl (sha256 "), "{stderr}");
}

#[test]
fn no_speculation_no_figures_and_uncounted_speculation_is_missing_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let (_twin, url) = twin(&["--profile", "tiny"]);
    let args = ["--contexts", "1k", "--concurrency", "1", "--max-tokens", "64"];
    let (r, code, stderr) = run(dir.path(), "plain", &url, &args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(r["decode"][0].get("spec_decode").is_none(), "{}", r["decode"][0]);
    assert!(r["decode"][0]["spec_accept_rate"].is_null());
    let lacks = |r: &Value| r["missing"].as_array().is_some_and(|v| v.iter().any(|m| m["figure"] == "spec_decode"));
    assert!(!lacks(&r), "a server that does not speculate lacks nothing: {}", r["missing"]);
    let mut told = args.to_vec();
    let cmd = r#"vllm serve m --speculative-config '{"method":"ngram","num_speculative_tokens":3}'"#;
    told.extend(["--launch-command", cmd]);
    let (r, code, stderr) = run(dir.path(), "told", &url, &told);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(r["decode"][0].get("spec_decode").is_none());
    let m = r["missing"].as_array().unwrap().iter().find(|m| m["figure"] == "spec_decode").expect("a missing entry");
    let why = m["reason"].as_str().unwrap();
    assert!(why.contains("ngram, 3 tokens") && why.contains("no speculative-decoding counters"), "{why}");
}

#[test]
fn a_bad_prompts_file_is_refused_naming_the_flag_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"text\": \"fine\"}\n{\"body\": \"no text\"}\n").unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n").unwrap();
    for (file, says) in [
        (&bad, "line 2: no \"text\" (or \"prompt\") field; its fields: body"),
        (&empty, "holds no prompt"),
        (&dir.path().join("absent.jsonl"), "cannot be read"),
    ] {
        // Port 9 (discard): nothing is asked of it, the file is refused first.
        let o = Command::new(support::bin())
            .args(["run", "--url", "http://127.0.0.1:9", "--dry-run", "--prompts"])
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        let want = format!("error: --prompts {}: {says}", file.display());
        assert!(stderr.contains(&want), "{stderr} (want {want})");
    }
}
