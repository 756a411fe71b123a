#!/usr/bin/env bash
# The Rust peer of the side_by_side and rate_lag benches: `vllm-bench` (vllm-project/vllm-bench,
# tokio + reqwest + mimalloc, a drop-in for `vllm bench serve`), built from its source at a
# pinned commit. Not part of scripts/setup.sh, scripts/test.sh or .ci/run: only these two benches
# use it, and its release build is minutes of CPU (≈ 400 crates: tokenizers, hf-hub, image …).
#
# Source, the first that holds the pinned commit:
#   1. $SPEEDMATRIX_VLLM_BENCH_SRC: a clone of vllm-project/vllm-bench (a work tree or a bare git
#      directory);
#   2. /work/.mirror/vllm-project+vllm-bench/repo (a bare snapshot on the dev machines, which
#      cannot reach GitHub);
#   3. a clone from https://github.com/vllm-project/vllm-bench (archived, read-only: the commit
#      below is its last standalone one; the crate now lives in vllm-project/vllm, rust/src/bench).
# None of them → a one-line error, exit 1.
#
# Build profile: the peer's own release profile is lto = true, codegen-units = 1 (its published
# binary). VLLM_BENCH_LTO / VLLM_BENCH_CODEGEN_UNITS override it (cargo's
# CARGO_PROFILE_RELEASE_LTO / _CODEGEN_UNITS), e.g. `VLLM_BENCH_LTO=thin VLLM_BENCH_CODEGEN_UNITS=16`
# to save build minutes; the profile used is written to $D/profile and the benches print it
# beside the peer's rows, since the peer's speed then is not its published build's.
#
# Installs into $1 (default ${SPEEDMATRIX_CACHE:-~/.cache/speedmatrix}/vllm-bench); skips
# everything already done for the same commit and profile. Afterwards: $D/bin/vllm-bench, $D/profile
# and the marker $D/vllm-bench.ok, where D=$1/<commit>.
set -euo pipefail
COMMIT=f3131823f167aa1e6f31a48be1ae15a18667a534
W="${1:-${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/vllm-bench}"
D="$W/$COMMIT"
LTO="${VLLM_BENCH_LTO:-true}"
CGU="${VLLM_BENCH_CODEGEN_UNITS:-1}"
PROFILE="release lto=$LTO codegen-units=$CGU"
mkdir -p "$D"
if [ -f "$D/vllm-bench.ok" ] && [ -x "$D/bin/vllm-bench" ] && [ "$(cat "$D/profile" 2>/dev/null)" = "$PROFILE" ]; then
  echo "setup: vllm-bench ${COMMIT:0:7} present ($D/bin/vllm-bench, $PROFILE)"; exit 0
fi
command -v cargo >/dev/null || { echo "setup: vllm-bench needs cargo (https://rustup.rs)" >&2; exit 1; }

# 1) source at the pinned commit, into $D/src
has_commit() { git -C "$1" cat-file -e "$COMMIT^{commit}" 2>/dev/null; }
if [ ! -f "$D/src/Cargo.toml" ]; then
  src=""
  for c in "${SPEEDMATRIX_VLLM_BENCH_SRC:-}" /work/.mirror/vllm-project+vllm-bench/repo; do
    if [ -n "$c" ] && [ -d "$c" ] && has_commit "$c"; then src="$c"; break; fi
  done
  if [ -z "$src" ]; then
    rm -rf "$D/clone"
    if timeout 300 git clone -q --bare https://github.com/vllm-project/vllm-bench "$D/clone" 2>/dev/null && has_commit "$D/clone"; then
      src="$D/clone"
    else
      rm -rf "$D/clone"
      echo "setup: vllm-bench source not found: set SPEEDMATRIX_VLLM_BENCH_SRC to a clone of github.com/vllm-project/vllm-bench that has commit $COMMIT (GitHub was not reachable)" >&2
      exit 1
    fi
  fi
  rm -rf "$D/src.part"; mkdir -p "$D/src.part"
  git -C "$src" archive "$COMMIT" | tar -x -C "$D/src.part"
  rm -rf "$D/src" "$D/clone"; mv "$D/src.part" "$D/src"
  echo "setup: vllm-bench source ${COMMIT:0:7} from $src"
fi

# 2) build (its own Cargo.lock, --locked; the default toolchain; none of speedmatrix's cargo
#    settings: no clippy wrapper, its own target folder)
started=$(date +%s)
echo "setup: building vllm-bench ${COMMIT:0:7} ($PROFILE; log: $D/build.log)"
(
  cd "$D/src"
  unset RUSTC_WORKSPACE_WRAPPER RUSTC_WRAPPER CARGO_INCREMENTAL RUSTUP_TOOLCHAIN
  CARGO_TARGET_DIR="$D/target" CARGO_PROFILE_RELEASE_LTO="$LTO" CARGO_PROFILE_RELEASE_CODEGEN_UNITS="$CGU" \
    cargo build --release --locked --bin vllm-bench
) >"$D/build.log" 2>&1 || { tail -n 30 "$D/build.log" >&2; echo "setup: vllm-bench build failed (log: $D/build.log)" >&2; exit 1; }
mkdir -p "$D/bin"; cp -f "$D/target/release/vllm-bench" "$D/bin/vllm-bench"
echo "$PROFILE" >"$D/profile"
# The object files are not needed once the binary is copied out.
rm -rf "$D/target"
touch "$D/vllm-bench.ok"
echo "setup: vllm-bench installed ($D/bin/vllm-bench, $PROFILE) in $(( $(date +%s) - started )) s"
