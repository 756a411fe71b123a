//! Multi-turn conversations (`run --turns N --think-time DUR`, docs/METHODOLOGY.md,
//! "Conversations") against the twin on loopback, checked against the twin's own truth log
//! (`simulate --trace`): one request line per turn with its arrival, its prompt tokens, the
//! prompt tokens its prefix cache served and the instant each chunk was written.
//!
//! - Every later turn sends the whole history: the twin served all of the previous turn's
//!   prompt from its cache (to its 16-token blocks) and prefilled only the new tokens (the
//!   answer sent back and the new message).
//! - Each turn's measured TTFT is the twin's truth (its first token's write − the request's
//!   arrival, twin clock) within 5 %. The twin runs at a twentieth of real time
//!   (`--time-scale 0.05`), so a turn's TTFT is seconds of wall time and the client's own
//!   delays (ms, even on a loaded machine) are a small part of it; the figures are printed.
//! - The per-turn hit rate (Prometheus, read around each turn: one session) is the twin's
//!   truth exactly.

use serde_json::Value;
use std::process::Command;
use support::twin::twin;

/// The twin's clock runs at this share of real time.
const TIME_SCALE: f64 = 0.05;

/// The twin's truth log's lines, in arrival order.
fn truth(path: &std::path::Path) -> Vec<Value> {
    let mut lines: Vec<Value> = std::fs::read_to_string(path)
        .expect("the twin's trace")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines.sort_by_key(|l| l["request"].as_u64().unwrap());
    lines
}

/// A truth line's TTFT, twin ms: its first token-carrying chunk's write − its arrival.
fn truth_ttft(line: &Value) -> f64 {
    let first =
        line["chunks"].as_array().unwrap().iter().find(|c| c["tokens"].as_u64().unwrap() > 0).expect("a token chunk");
    first["written_ms"].as_f64().unwrap() - line["arrival_ms"].as_f64().unwrap()
}

#[test]
fn each_turn_sends_the_history_prefills_only_the_new_tokens_and_times_as_the_twin() {
    let dir = tempfile::tempdir().unwrap();
    let truth_path = dir.path().join("twin.jsonl");
    let scale = TIME_SCALE.to_string();
    let (twin_process, url) = twin(&["--trace", truth_path.to_str().unwrap(), "--time-scale", &scale]);
    let out = dir.path().join("turns.json");
    let o = Command::new(support::bin())
        .args(["run", "--url", &url, "-o", out.to_str().unwrap(), "--force", "--quiet"])
        .args(["--contexts", "4k", "--concurrency", "1", "--prefill-contexts", "none", "--max-tokens", "16"])
        .args(["--turns", "5", "--think-time", "100ms"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(0), "{log}");
    drop(twin_process); // its shutdown writes every request's truth line
    let r: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(r.get("decode").is_none_or(|d| d.as_array().unwrap().is_empty()), "conversations replace decode cells");
    let c = &r["conversations"][0];
    assert_eq!(c["status"], "valid", "{c}");
    assert_eq!((c["sessions"].as_u64(), c["turns"].as_u64()), (Some(1), Some(5)));
    // 4 later turns × (16 + 64) tokens of room.
    assert_eq!(c["first_prompt_tokens"], 4096 - 4 * 80);
    let turns = c["per_turn"].as_array().unwrap();
    let lines = truth(&truth_path);
    assert_eq!((turns.len(), lines.len()), (5, 5), "one request per turn: {lines:?}");

    let first_ttft = turns[0]["ttft_ms"]["p50"].as_f64().unwrap();
    for (k, (t, line)) in turns.iter().zip(&lines).enumerate() {
        let n = |v: &Value| v.as_u64().unwrap();
        let (prompt, cached) = (n(&line["prompt_tokens"]), n(&line["cached_tokens"]));
        assert_eq!(t["prompt_tokens"], prompt, "turn {}: usage is the twin's count", k + 1);
        if k == 0 {
            assert_eq!(cached, 0, "turn 1 is a prompt of its own");
        } else {
            // The history — the previous turn's whole prompt — came from the cache, in whole
            // 16-token blocks (the previous prompt's last token, the template's closing line
            // break, is tokenized with the answer that follows it now, so the block holding it
            // differs); only the new tokens were prefilled.
            let previous = n(&lines[k - 1]["prompt_tokens"]);
            assert!(cached + 16 >= previous && cached < previous, "turn {}: {cached} cached of {previous}", k + 1);
            assert!(prompt - cached <= prompt - previous + 16, "turn {}: prefilled {}", k + 1, prompt - cached);
            // Prometheus read around the turn: the twin's truth exactly.
            assert_eq!(t["hit_rate_source"], "prometheus", "{t}");
            assert_eq!((n(&t["hit_tokens"]), n(&t["query_tokens"])), (cached, prompt), "turn {}", k + 1);
        }
        let measured = t["ttft_ms"]["p50"].as_f64().unwrap() * TIME_SCALE;
        let twin_ttft = truth_ttft(line);
        eprintln!(
            "turn {}: prompt {prompt}, cached {cached}; TTFT measured {measured:.2} twin ms, truth {twin_ttft:.2} twin ms",
            k + 1
        );
        assert!((measured - twin_ttft).abs() <= 0.05 * twin_ttft, "turn {}: {measured} vs {twin_ttft}", k + 1);
        let ratio = t["ttft_ratio"].as_f64().unwrap();
        let expected = t["ttft_ms"]["p50"].as_f64().unwrap() / first_ttft;
        assert!((ratio - expected).abs() < 0.01, "turn {}: ratio {ratio} vs {expected}", k + 1);
    }

    let shown = Command::new(support::bin()).args(["show"]).arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("Conversations — per turn") && text.contains("TTFT vs turn 1"), "{text}");
    assert!(text.contains("4K × 1") && text.contains("(Prometheus)"), "{text}");

    // A finished conversation run cannot be continued (its sessions' histories are not in the
    // file): refused by name, exit 2, the file as it was (not even its finished_at rewritten).
    let before = std::fs::read(&out).unwrap();
    let o = Command::new(support::bin()).args(["run", "--quiet", "--resume"]).arg(&out).output().unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{log}");
    assert!(log.contains("it is a conversation run (--turns), which is not resumed yet"), "{log}");
    assert_eq!(std::fs::read(&out).unwrap(), before, "the refused resume left the file unchanged");
}

#[test]
fn conversation_flags_that_do_not_combine_are_one_line_naming_them() {
    let cases: [(&[&str], &str); 6] = [
        (&["--turns", "3", "--rates", "1"], "--rates: does not combine with --turns: conversations run closed loop"),
        (&["--think-time", "2s"], "--think-time: applies to conversations only; give --turns N too"),
        (
            &["--turns", "3", "--endpoint", "completions"],
            "--endpoint completions: --turns sends the history as chat messages",
        ),
        (&["--turns", "3", "--think-time", "soon"], "--think-time"),
        (&["--turns", "1"], "--turns: `1` is not a number of turns: give 2 to 100 turns per session (turn 1 and at least one follow-up), e.g. --turns 5"),
        (&["--turns", "many"], "--turns: `many` is not a number of turns: give 2 to 100 turns per session"),
    ];
    for (flags, expected) in cases {
        let o = Command::new(support::bin())
            .args(["run", "--url", "http://127.0.0.1:9", "--dry-run"])
            .args(flags)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {log}");
        assert!(log.contains(expected), "{flags:?}: {log}");
        assert_eq!(log.trim().lines().count(), 1, "one line, no usage block: {flags:?}: {log}");
    }
    // A context too short for the later turns: named with what to change, before any request.
    let (_twin, url) = twin(&[]);
    let o = Command::new(support::bin())
        .args(["run", "--url", &url, "--dry-run", "--contexts", "1k", "--turns", "5", "--max-tokens", "256"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{log}");
    assert!(log.contains("--turns: context 1K: the 4 later turns need 1280 tokens"), "{log}");
}
