//! Which suites plain `cargo test` leaves out, said where its user reads it.
//!
//! The test suites come in two tiers (README, "Tests"). Plain `cargo test` is the quick tier: no
//! tool outside cargo, no network, a few minutes. The suites that need a real vLLM, llama.cpp or
//! Chromium, or that run the twin in real time for minutes, are the full tier: each has a
//! `[[test]]` entry in `tests/Cargo.toml` with `required-features = ["full"]` under a comment
//! `# full tier: WHY`, and `scripts/test.sh` (CI) builds them with `--features
//! speedmatrix-tests/full`.
//!
//! This binary has no test harness (`harness = false`), so what it prints is never captured:
//! without the feature it lists the suites left out and why; with it, that every suite is in.
//! It fails when `tests/Cargo.toml` names a full-tier suite that has no file, or one without a
//! reason. It answers cargo-nextest's `--list` as a one-test binary, so both runners take it.

use std::collections::BTreeMap;
use std::process::ExitCode;

/// The full-tier suites of `tests/Cargo.toml`: (reason, suite names), in file order of reasons.
fn full_tier(manifest: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut by_reason: BTreeMap<usize, (String, Vec<String>)> = BTreeMap::new();
    let mut reason: Option<(usize, String)> = None;
    let mut name: Option<String> = None;
    for (i, line) in manifest.lines().enumerate() {
        let line = line.trim();
        if let Some(why) = line.strip_prefix("# full tier:") {
            reason = Some((i, why.trim().to_string()));
        } else if line == "[[test]]" {
            name = None;
        } else if let Some(v) = line.strip_prefix("name = ") {
            name = Some(v.trim_matches('"').to_string());
        } else if line == "required-features = [\"full\"]" {
            let n = name.take().ok_or_else(|| format!("tests/Cargo.toml line {}: no name before it", i + 1))?;
            let (at, why) = reason.clone().ok_or_else(|| format!("{n}: no `# full tier: WHY` comment above it"))?;
            by_reason.entry(at).or_insert_with(|| (why, vec![])).1.push(n);
        }
    }
    Ok(by_reason.into_values().collect())
}

fn check() -> Result<String, String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).map_err(|e| format!("tests/Cargo.toml: {e}"))?;
    let tiers = full_tier(&manifest)?;
    let suites: Vec<&String> = tiers.iter().flat_map(|(_, s)| s).collect();
    let absent: Vec<&&String> = suites.iter().filter(|s| !dir.join(format!("tests/{s}.rs")).is_file()).collect();
    if !absent.is_empty() {
        return Err(format!("tests/Cargo.toml names full-tier suites without a file in tests/tests/: {absent:?}"));
    }
    if suites.is_empty() {
        return Err("tests/Cargo.toml names no full-tier suite: this check would prove nothing".into());
    }
    if cfg!(feature = "full") {
        return Ok(format!("full tier: all {} suites of the full tier are built and run", suites.len()));
    }
    let mut text = format!(
        "quick tier (plain `cargo test`): {} suites of the full tier were left out; scripts/test.sh runs them:\n",
        suites.len()
    );
    for (why, names) in &tiers {
        text.push_str(&format!("  {why}: {}\n", names.join(", ")));
    }
    Ok(text)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        // cargo-nextest lists a binary's tests first: one test, none ignored.
        if !args.iter().any(|a| a == "--ignored") {
            println!("full_tier_suites_are_listed: test");
        }
        return ExitCode::SUCCESS;
    }
    match check() {
        Ok(text) => {
            println!("\n{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tiers: {e}");
            ExitCode::FAILURE
        }
    }
}
