#!/usr/bin/env bash
# Run every test of speedmatrix: formatting, lints, the Rust test suites (unit, schema, twin,
# end to end against the twin, a real vLLM and llama.cpp, the page in headless Chromium) and the
# wasm32 build of the schema crate and viewer. The committed dist/ must match its sources
# (dist/SOURCE_HASH); the viewer is rebuilt fresh with trunk (kept in the target dir, keyed by
# its sources and tools, so an unchanged viewer is not rebuilt) and the binary under test embeds
# that fresh build. Installs what it needs first (scripts/setup.sh, idempotent).
#
# Every step runs even when an earlier one failed, and every test suite runs even when another
# failed (`--no-fail-fast`), so one run reports all failures. It ends with a summary: steps and
# test suites passed, failed and skipped (with why); the exit status is 1 when anything failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

logs="$(mktemp -d "${TMPDIR:-/tmp}/speedmatrix-test.XXXXXX")"
export SPEEDMATRIX_SKIPS="$logs/skips"
: >"$SPEEDMATRIX_SKIPS"
passed=() failed=() skipped=()

# step NAME COMMAND…: run one step, print its time, record the outcome.
step() {
  local name="$1"; shift
  printf '\n== %s\n' "$name"
  local t0=$SECONDS
  if "$@"; then
    passed+=("$name"); printf -- '-- %s: ok (%d s)\n' "$name" $((SECONDS - t0))
  else
    failed+=("$name"); printf -- '-- %s: FAILED (%d s)\n' "$name" $((SECONDS - t0))
  fi
}
skip() { skipped+=("$1: $2"); printf '\n== %s\n-- skipped: %s\n' "$1" "$2"; }

if ! "$root/scripts/setup.sh"; then
  echo "setup failed: nothing was tested" >&2
  exit 1
fi

step "viewer: the committed dist/ matches its sources" "$root/scripts/check-dist.sh"

# shellcheck source=web-env.sh
. "$root/scripts/web-env.sh"
# What a fresh build of the viewer depends on: its sources (scripts/dist-hash.sh), the build
# script and the toolchain's and tools' versions.
viewer_build_key() {
  { "$root/scripts/dist-hash.sh"; sha256sum <"$root/scripts/build-viewer.sh"; rustc -V
    trunk --version; wasm-bindgen --version; wasm-opt --version; } | sha256sum | cut -d' ' -f1
}
fresh_viewer() {
  local fresh="${CARGO_TARGET_DIR:-$root/target}/viewer-dist" key
  key="$(viewer_build_key)" || return 1
  # A build cache keyed by content: a fresh build of these sources with these tools is kept.
  if [ -d "$fresh" ] && [ "$(cat "$fresh.key" 2>/dev/null)" = "$key" ]; then
    echo "viewer: fresh build of these sources and tools already in $fresh (key $key)"
    export SPEEDMATRIX_DIST_DIR="$fresh"
    return 0
  fi
  rm -rf "$fresh.new"
  "$root/scripts/build-viewer.sh" "$fresh.new" || return 1
  # Keep the previous folder when nothing changed, so cargo need not re-embed it.
  if diff -rq "$fresh.new" "$fresh" >/dev/null 2>&1; then rm -rf "$fresh.new"; else rm -rf "$fresh" && mv "$fresh.new" "$fresh"; fi
  printf '%s\n' "$key" >"$fresh.key"
  export SPEEDMATRIX_DIST_DIR="$fresh"
}
if command -v trunk >/dev/null 2>&1 && command -v wasm-bindgen >/dev/null 2>&1 && command -v wasm-opt >/dev/null 2>&1; then
  # Not through `step`: the export must reach this shell.
  printf '\n== viewer: fresh build with trunk (the tests embed it)\n'
  if fresh_viewer; then passed+=("viewer: fresh build"); else failed+=("viewer: fresh build"); fi
elif [ "${CI:-}" = true ]; then
  echo "trunk, wasm-bindgen or wasm-opt missing (scripts/setup.d/web.sh installs them)" >&2
  failed+=("viewer: fresh build (tools missing)")
else
  skip "viewer: fresh build" "trunk, wasm-bindgen or wasm-opt missing; testing the committed dist/"
fi

step "rustfmt" cargo fmt --all --check
# The viewer is a wasm32 product: it is linted, built and tested on wasm32 only (the steps
# below; its unit tests run in headless Chromium), never natively — a native build of Leptos
# is minutes of compiling for nothing.
step "clippy (warnings are errors)" cargo clippy --workspace --exclude speedmatrix-viewer --all-targets --locked -- -D warnings
step "wasm32 build and lints of the schema crate and the viewer (with its component tests)" \
  cargo clippy -p speedmatrix-schema -p speedmatrix-viewer --all-targets --target wasm32-unknown-unknown --locked -- -D warnings

# The Rust suites run under cargo-nextest (scripts/setup.d/nextest.sh installs it): every test in
# its own process, side by side within the limits of .config/nextest.toml. First the suites that
# start a real server on CPU (alone: such a server takes every core), then everything else.
alone='binary(vllm_cpu) | binary(llamacpp_cpu)'
nextest() {
  cargo nextest run --workspace --exclude speedmatrix-viewer --locked --no-fail-fast "$@"
}
rust_suites() {
  cargo nextest run --workspace --exclude speedmatrix-viewer --locked --no-run || return 1
  local status=0
  nextest -E "$alone" || status=1
  nextest -E "not ($alone)" || status=1
  # nextest runs no doc-tests; cargo does (the crates have none today: this keeps it so).
  cargo test --workspace --exclude speedmatrix-viewer --locked --doc --quiet || status=1
  return $status
}
cargo_test() { rust_suites 2>&1 | tee "$logs/cargo-test.log"; return "${PIPESTATUS[0]}"; }
step "Rust test suites (cargo nextest: the workspace, every suite)" cargo_test

wasm_tests() {
  CHROMEDRIVER="$(command -v chromedriver)" cargo test -p speedmatrix-viewer --target wasm32-unknown-unknown --locked
}
if command -v chromedriver >/dev/null 2>&1 && command -v wasm-bindgen-test-runner >/dev/null 2>&1; then
  step "viewer unit and component tests (wasm32, headless Chromium via wasm-bindgen-test-runner)" wasm_tests
elif [ "${CI:-}" = true ]; then
  echo "chromedriver or wasm-bindgen-test-runner missing (scripts/setup.d/web.sh installs them)" >&2
  failed+=("viewer component tests (tools missing)")
else
  skip "viewer component tests" "chromedriver or wasm-bindgen-test-runner missing"
fi

# ---- summary --------------------------------------------------------------------------------
printf '\n== summary\n'
if [ -f "$logs/cargo-test.log" ]; then
  # nextest ends each run with "Summary [ …s] N tests run: …" and lists failures as "FAIL [ …s] …".
  grep -E '^ *Summary \[' "$logs/cargo-test.log" | sed 's/^ */tests: /'
  grep -E '^ *(FAIL|TIMEOUT|SIGSEGV|SIGABRT|ABORT) \[' "$logs/cargo-test.log" | sed 's/^ */  /' | sort -u
fi
tests_skipped=()
while IFS= read -r line; do [ -n "$line" ] && tests_skipped+=("$line"); done <"$SPEEDMATRIX_SKIPS"
printf 'steps: %d passed, %d failed, %d skipped\n' "${#passed[@]}" "${#failed[@]}" "${#skipped[@]}"
for f in "${failed[@]}"; do printf '  FAILED  %s\n' "$f"; done
for s in "${skipped[@]}"; do printf '  SKIPPED %s\n' "$s"; done
printf 'tests that skipped (passed without running their checks): %d\n' "${#tests_skipped[@]}"
for s in "${tests_skipped[@]}"; do printf '  SKIPPED %s\n' "$s"; done
[ ${#failed[@]} -eq 0 ]
