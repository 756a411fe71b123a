//! The end-to-end tests' shared harness, declared by each test file as `mod support;`:
//!
//! - [`BIN`]: the `speedmatrix` binary under test;
//! - [`browser`]: `speedmatrix serve`, chromedriver + headless Chromium, DOM polling;
//! - [`cli`]: `speedmatrix diff` (its JSON, its verdicts) and `publish` as the tests call them;
//! - [`collect`]: `speedmatrix run` against a server URL and the results file it wrote;
//! - [`dom`]: the page a results file renders, as Chromium's `--dump-dom`;
//! - [`estimate`]: a run's printed wall-time estimates against its measured wall time;
//! - [`scripted`]: small scripted OpenAI-compatible servers for shapes the twin lacks;
//! - [`server`]: real servers (vLLM, llama.cpp) started, watched and killed;
//! - [`snap`]: settings and placeholders of the snapshot tests (insta);
//! - [`twin`]: the twin in its own process on loopback;
//! - [`skip`]: a test that cannot run here says why (and fails under `CI=true`).
//!
//! Each test file uses part of it, so unused items are expected.
#![allow(dead_code)]

pub mod browser;
pub mod cli;
pub mod collect;
pub mod dom;
pub mod estimate;
pub mod scripted;
pub mod server;
pub mod shape;
pub mod snap;
pub mod twin;

/// The binary under test. It is `collector/src/main.rs` built by this package as
/// `speedmatrix-under-test` (see `tests/Cargo.toml`): cargo hands a test the path of a binary of
/// its own package only.
pub const BIN: &str = env!("CARGO_BIN_EXE_speedmatrix-under-test");

/// A test that cannot run on this machine (a tool or file is missing): under `CI=true` that is
/// a failure; elsewhere it prints `SKIPPED: why` and, when `scripts/test.sh` set
/// `SPEEDMATRIX_SKIPS`, appends `test: why` to that file so the run's summary counts it.
pub fn skip(why: &str) {
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("SKIPPED: {why}");
    if let Some(path) = std::env::var_os("SPEEDMATRIX_SKIPS") {
        use std::io::Write;
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let bin = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .map(|s| s.rsplit_once('-').map_or(s.clone(), |(name, _hash)| name.to_string()))
            .unwrap_or_default();
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{bin}::{test}: {why}");
        }
    }
}
