//! The end-to-end tests' shared harness, built once as this package's library `support`
//! (`tests/Cargo.toml`, `[lib]`) and linked by every suite and bench, which name it as
//! `support::…` (each uses part of it, so unused items are expected). One module a job, and the suites that
//! use it:
//!
//! - [`bin`]: the `speedmatrix` binary under test — most suites;
//! - [`browser`]: `speedmatrix serve`, chromedriver + headless Chromium, DOM polling — the
//!   `*_browser.rs` suites;
//! - [`cli`]: `speedmatrix diff` (its JSON, its verdicts) and `publish` as the tests call them —
//!   `noise_twin`, `repeat_twin`, `site_browser`, `viewer_browser`;
//! - [`collect`]: `speedmatrix run --quiet -o OUT` against a server URL and the results file it
//!   wrote — `collector_twin`, `engines_twin`, `fault_matrix`, `live_browser`, [`shape`];
//! - [`dom`]: the page a results file renders, as Chromium's `--dump-dom` — `import_cli`,
//!   `llamacpp_cpu`, `server_shapes`;
//! - [`export_doc`]: the cells table's columns and version as `docs/EXPORT.md` documents them
//!   — `docs`, `export_pyarrow`;
//! - [`estimate`]: a run's printed wall-time estimates against its measured wall time —
//!   `demo_cli`, `estimate_twin`;
//! - [`scripted`]: small scripted OpenAI-compatible servers for shapes the twin lacks
//!   (`scripted/mod.rs`: the script and `start`; `scripted/routes.rs`: `/v1/models`, `/metrics`,
//!   `/tokenize`; `scripted/stream.rs`: the completion endpoints; `scripted/front.rs`: a
//!   proxy's stand-in in front of the server for connection shapes) — `server_shapes`,
//!   `fault_matrix`;
//! - [`server`]: real servers (vLLM, llama.cpp) started, watched and killed — `vllm_cpu`,
//!   `llamacpp_cpu`, [`browser`];
//! - [`shape`]: a server shape as a table row (scripted server, flags, the rule it guards, the
//!   verdict expected) and the runner that checks it and names every mismatch —
//!   `server_shapes`;
//! - [`snap`]: settings and placeholders of the snapshot tests (insta) — `diff_cli`,
//!   `dry_run_cli`, `import_cli`, `show_cli`, `twin_wire`;
//! - [`twin`]: the twin in its own process on loopback — `estimate_twin`, `noise_twin`,
//!   `repeat_twin`, `resume_twin`, `collector_faults`, `provenance`, `run_cli`, `cell_browser`,
//!   `live_browser`;
//! - [`skip`]: a test that cannot run here says why (and fails under `CI=true`) — the suites
//!   that need a real server, Chromium or the seed page.
//!
//! `tcp_relay.rs` here is no module but the `tcp-relay` binary (`tests/Cargo.toml`), a
//! tunnel's stand-in for `provenance`.
//!
//! To add a server shape: write its row in `server_shapes.rs` (a function in its `table` that
//! returns a [`shape::Shape`]; a new knob of the server goes into [`scripted::Script`] or
//! [`scripted::StreamScript`], off by default so that no other shape changes) and add the
//! row's name to the list in its `shapes!`, which gives the row a test of that name. A row
//! whose verdict depends on time says in its doc which pause would change it (see
//! `server_shapes.rs`, "Timing").
#![allow(dead_code)]

pub mod browser;
pub mod cli;
pub mod collect;
pub mod dom;
pub mod estimate;
pub mod export_doc;
pub mod scripted;
pub mod server;
pub mod shape;
pub mod snap;
pub mod twin;

/// The binary under test: `collector/src/main.rs` built by this package as
/// `speedmatrix-under-test` (see `tests/Cargo.toml`), beside the running test's own binary
/// (`target/<profile>/deps/<suite>-<hash>` → `target/<profile>/speedmatrix-under-test`). Cargo
/// names it to tests at compile time (`CARGO_BIN_EXE_*`) but not to this library, which every
/// suite links instead of compiling the harness again; nextest names it at run time too
/// (`NEXTEST_BIN_EXE_*`), which is taken first.
///
/// # Panics
/// When neither gives an existing file (the binary was not built: run the tests with cargo).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let named = ["NEXTEST_BIN_EXE_speedmatrix-under-test", "NEXTEST_BIN_EXE_speedmatrix_under_test"]
            .iter()
            .find_map(std::env::var_os)
            .map(std::path::PathBuf::from);
        let beside = std::env::current_exe()
            .ok()
            .and_then(|exe| Some(exe.parent()?.parent()?.join("speedmatrix-under-test")));
        let path = named.into_iter().chain(beside).find(|p| p.is_file());
        let path = path.unwrap_or_else(|| {
            panic!("speedmatrix-under-test not found beside the test binary: build it with `cargo test -p speedmatrix-tests`")
        });
        path.to_string_lossy().into_owned()
    })
}

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
