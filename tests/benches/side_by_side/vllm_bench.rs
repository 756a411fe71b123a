//! The Rust peer `vllm-bench` (vllm-project/vllm-bench: tokio + reqwest + mimalloc, a drop-in
//! for `vllm bench serve` with the same flags and results file), as `setup-vllm-bench.sh` beside
//! this file builds it: where its binary is, the profile it was built with, and the tokenizer
//! its random dataset needs. Shared by the side_by_side and rate_lag benches.

use std::path::PathBuf;

/// The pinned commit (the archived repository's last standalone one), as in the setup script.
pub const COMMIT: &str = "f3131823f167aa1e6f31a48be1ae15a18667a534";

/// A built vllm-bench and what it needs to run offline.
pub struct VllmBench {
    pub bin: PathBuf,
    /// Its build profile (`release lto=… codegen-units=…`), or where the binary came from.
    pub profile: String,
    /// A folder with a `tokenizer.json` (SmolLM2's, from `scripts/setup.d/vllm-cpu.sh`): its
    /// random dataset draws token ids from a tokenizer and it cannot download one here.
    pub tokenizer: PathBuf,
}

fn cache() -> PathBuf {
    std::env::var_os("SPEEDMATRIX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/speedmatrix"))
}

/// The binary (`VLLM_BENCH=PATH`, else the setup script's), or why it cannot run.
pub fn locate() -> Result<VllmBench, String> {
    let tokenizer = cache().join("servers/model/smollm2-135m-hf");
    if !tokenizer.join("tokenizer.json").exists() {
        return Err(format!(
            "no tokenizer at {} (scripts/setup.d/vllm-cpu.sh installs it; vllm-bench's random dataset needs one)",
            tokenizer.display()
        ));
    }
    if let Some(bin) = std::env::var_os("VLLM_BENCH").map(PathBuf::from) {
        return match bin.is_file() {
            true => Ok(VllmBench { profile: format!("VLLM_BENCH={}", bin.display()), bin, tokenizer }),
            false => Err(format!("VLLM_BENCH={} is not a file", bin.display())),
        };
    }
    let dir = cache().join("vllm-bench").join(COMMIT);
    let bin = dir.join("bin/vllm-bench");
    if !dir.join("vllm-bench.ok").exists() || !bin.is_file() {
        return Err(format!(
            "not built ({} missing; tests/benches/side_by_side/setup-vllm-bench.sh builds it)",
            bin.display()
        ));
    }
    let profile = std::fs::read_to_string(dir.join("profile")).unwrap_or_default().trim().to_string();
    Ok(VllmBench { bin, profile, tokenizer })
}

impl VllmBench {
    /// One line for the bench's header: which build of the peer the rows measure.
    pub fn describe(&self) -> String {
        let published = if self.profile == "release lto=true codegen-units=1" {
            " (its published profile)"
        } else {
            " (not its published profile, lto=true codegen-units=1: its CPU figures are not its release binary's)"
        };
        format!("vllm-bench {} built {}{published}", &COMMIT[..7], self.profile)
    }
}
