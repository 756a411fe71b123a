//! A trace replay's prefix cache (`run --trace`, docs/METHODOLOGY.md, "Trace replay", "Prefix
//! reuse") against the twin on loopback: the 100-request Mooncake fixture of `trace_twin`
//! replayed at 1× from a reset cache.
//!
//! - A cache that holds the whole trace (the h200 profile's KV budget): the measured hit rate
//!   (Prometheus) is the twin's own truth (its trace log's `cached_tokens` ÷ `prompt_tokens`,
//!   exactly) and within 2 points of the trace's ideal reuse, which is the fixture's (computed
//!   here from the file, independently of the collector's code).
//! - A small KV cache (`simulate --kv-tokens 8192`, under a tenth of the trace's distinct
//!   blocks): the measured rate is the twin's truth again, more than 10 points below the ideal,
//!   and the row's reason says the cache evicted.
//!
//! No timing is asserted: hit rates are token counts. How many blocks a busy machine lets the
//! twin reuse varies a little with the arrival order of requests that share a prefix and
//! arrive together (the later one finds nothing cached while the earlier one is in prefill);
//! the measured figures are printed.

use speedmatrix_schema::{load_results, CacheStart, HitRateSource, Results};
use std::collections::HashMap;
use std::process::Command;
use support::twin::twin;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/traces/mooncake-100.jsonl");

/// The fixture's ideal reuse, computed from the file alone: (reused tokens, prompt tokens,
/// distinct block tokens). Each request's blocks (whole ones of 512 tokens, then the tokens of
/// a partial last block) are reused while an earlier request sent as many of that id's tokens.
fn fixture_ideal() -> (u64, u64, u64) {
    let mut lines: Vec<serde_json::Value> =
        std::fs::read_to_string(FIXTURE).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    lines.sort_by(|a, b| a["timestamp"].as_f64().unwrap().total_cmp(&b["timestamp"].as_f64().unwrap()));
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let (mut reused, mut total) = (0, 0);
    for l in &lines {
        let input = l["input_length"].as_u64().unwrap();
        let ids: Vec<u64> = l["hash_ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let whole = ((input / 512) as usize).min(ids.len());
        let mut parts: Vec<(u64, u64)> = ids[..whole].iter().map(|i| (*i, 512)).collect();
        if input % 512 > 0 && whole < ids.len() {
            parts.push((ids[whole], input - whole as u64 * 512));
        }
        for &(id, t) in &parts {
            let s = seen.get(&id).copied().unwrap_or(0);
            reused += s.min(t);
            if s < t {
                break;
            }
        }
        for (id, t) in parts {
            let s = seen.entry(id).or_insert(0);
            *s = (*s).max(t);
        }
        total += input;
    }
    (reused, total, seen.values().sum())
}

/// The twin's truth over its trace log: (cached tokens, prompt tokens) summed.
fn twin_truth(path: &std::path::Path) -> (u64, u64) {
    std::fs::read_to_string(path)
        .expect("the twin's trace")
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .fold((0, 0), |(c, p), v| (c + v["cached_tokens"].as_u64().unwrap(), p + v["prompt_tokens"].as_u64().unwrap()))
}

/// Replay the fixture against a twin started with `twin_args`; the results, the log and the
/// twin's truth (cached, prompt tokens).
fn replay(twin_args: &[&str]) -> (Results, String, (u64, u64), String) {
    let dir = tempfile::tempdir().unwrap();
    let truth_path = dir.path().join("twin.jsonl");
    let mut args = vec!["--trace", truth_path.to_str().unwrap()];
    args.extend_from_slice(twin_args);
    let (twin_process, url) = twin(&args);
    let out = dir.path().join("trace.json");
    let o = Command::new(support::bin())
        .args(["run", "--url", &url, "-o", out.to_str().unwrap(), "--force", "--quiet", "--trace", FIXTURE])
        .output()
        .expect("run the collector");
    let log = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(0), "{log}");
    drop(twin_process); // its shutdown writes every request's truth line
    let shown = Command::new(support::bin()).args(["show"]).arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout).to_string();
    (load_results(&std::fs::read(&out).unwrap()).expect("a valid results file"), log, twin_truth(&truth_path), text)
}

#[test]
fn a_large_cache_hits_the_traces_ideal_reuse_and_a_small_one_says_it_evicted() {
    let (reused, total, distinct) = fixture_ideal();
    let ideal = ((reused as f64 / total as f64) * 10_000.0).round() / 10_000.0;
    assert!(ideal > 0.4, "the fixture reuses much of itself: {ideal}");

    let (r, log, (cached, prompt), text) = replay(&[]);
    let pc = r.traces[0].prefix_cache.as_ref().expect("the replay's prefix-cache figures");
    assert_eq!((pc.ideal_reuse, pc.ideal_reused_tokens, pc.trace_prompt_tokens), (ideal, reused, total));
    assert_eq!(pc.distinct_block_tokens, distinct);
    assert_eq!((pc.cache_start, pc.cache_start_detail.as_str()), (CacheStart::Reset, "POST /reset_prefix_cache"));
    assert_eq!(pc.hit_rate_source, Some(HitRateSource::Prometheus), "the twin gives no cached_tokens in usage");
    assert_eq!((pc.hit_tokens, pc.query_tokens), (Some(cached), Some(prompt)), "the counters are the twin's truth");
    let measured = pc.measured_hit_rate.unwrap();
    eprintln!("large cache: ideal reuse {ideal}, measured hit rate {measured} ({cached} of {prompt} tokens)");
    assert!((measured - ideal).abs() <= 0.02, "measured {measured} vs ideal {ideal}\n{log}");
    let reason = r.traces[0].cell.reason.clone().unwrap_or_default();
    assert!(!reason.contains("prefix cache:"), "{reason}");
    assert!(text.contains("Prefix cache: ideal reuse") && text.contains("(Prometheus)"), "{text}");
    assert!(text.contains("cache reset (POST /reset_prefix_cache)"), "{text}");

    // A KV cache of 8,192 tokens: the trace's distinct blocks (about 100,000 tokens) cannot stay.
    let (r, log, (cached, prompt), _) = replay(&["--max-model-len", "4096", "--kv-tokens", "8192"]);
    assert!(8192 < distinct);
    let row = &r.traces[0];
    let pc = row.prefix_cache.as_ref().unwrap();
    assert_eq!(pc.ideal_reuse, ideal, "the ideal is the trace's, whatever the server");
    assert_eq!((pc.hit_tokens, pc.query_tokens), (Some(cached), Some(prompt)), "the counters are the twin's truth");
    let measured = pc.measured_hit_rate.unwrap();
    eprintln!("small cache: measured hit rate {measured} ({cached} of {prompt} tokens); {:?}", row.cell.reason);
    assert!(measured < ideal - 0.10, "measured {measured} vs ideal {ideal}\n{log}");
    let reason = row.cell.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("below the trace's ideal reuse"), "{reason}");
    assert!(reason.contains("exceed the server's KV cache (8192 tokens)") && reason.contains("evicted"), "{reason}");
}

#[test]
fn without_a_reset_the_replay_is_salted_and_finds_nothing_of_an_earlier_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_twin, url) = twin(&["--fault", "reset-404"]);
    let run = |name: &str| {
        let out = dir.path().join(name);
        let o = Command::new(support::bin())
            .args(["run", "--url", &url, "-o", out.to_str().unwrap(), "--force", "--quiet", "--trace", FIXTURE])
            .args(["--trace-to", "4", "--trace-speed", "4"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        load_results(&std::fs::read(&out).unwrap()).unwrap()
    };
    let a = run("a.json");
    // The same slice again at the same twin: its prompts start with a salt of their own, so the
    // first replay's blocks, still cached, are no help.
    let b = run("b.json");
    for r in [&a, &b] {
        let pc = r.traces[0].prefix_cache.as_ref().unwrap();
        assert_eq!(pc.cache_start, CacheStart::Salted);
        assert!(pc.cache_start_detail.starts_with("POST /reset_prefix_cache failed"), "{}", pc.cache_start_detail);
        let measured = pc.measured_hit_rate.unwrap();
        eprintln!("salted: ideal {} measured {measured}", pc.ideal_reuse);
        assert!(measured <= pc.ideal_reuse + 0.02, "nothing of the other replay was reused: {pc:?}");
    }
}
