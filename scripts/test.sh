#!/usr/bin/env bash
# Run every test of speedmatrix: formatting, lints, the Rust test suites (unit, schema, twin,
# end to end against the twin, a real vLLM and llama.cpp, the page in headless Chromium) and the
# wasm32 build of the schema crate and viewer. The committed dist/ must match its sources
# (dist/SOURCE_HASH); the viewer is rebuilt fresh with trunk and the binary under test embeds
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
fresh_viewer() {
  local fresh="${CARGO_TARGET_DIR:-$root/target}/viewer-dist"
  rm -rf "$fresh.new"
  "$root/scripts/build-viewer.sh" "$fresh.new" || return 1
  # Keep the previous folder when nothing changed, so cargo need not re-embed it.
  if diff -rq "$fresh.new" "$fresh" >/dev/null 2>&1; then rm -rf "$fresh.new"; else rm -rf "$fresh" && mv "$fresh.new" "$fresh"; fi
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

cargo_test() {
  cargo test --workspace --exclude speedmatrix-viewer --locked --no-fail-fast 2>&1 | tee "$logs/cargo-test.log"
}
step "cargo test (workspace, every suite)" cargo_test

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
  # One suite per "Running …" (or "Doc-tests …") line, judged by the "test result:" that follows.
  awk '
    /^ *Running / { suite = $2 } /^ *Doc-tests / { suite = "doc-tests " $2 }
    /^test result: ok/ { ok++ } /^test result: FAILED/ { bad++; print "suite failed: " suite }
    END { printf "test suites: %d passed, %d failed\n", ok, bad }
  ' "$logs/cargo-test.log"
fi
tests_skipped=()
while IFS= read -r line; do [ -n "$line" ] && tests_skipped+=("$line"); done <"$SPEEDMATRIX_SKIPS"
printf 'steps: %d passed, %d failed, %d skipped\n' "${#passed[@]}" "${#failed[@]}" "${#skipped[@]}"
for f in "${failed[@]}"; do printf '  FAILED  %s\n' "$f"; done
for s in "${skipped[@]}"; do printf '  SKIPPED %s\n' "$s"; done
printf 'tests that skipped (passed without running their checks): %d\n' "${#tests_skipped[@]}"
for s in "${tests_skipped[@]}"; do printf '  SKIPPED %s\n' "$s"; done
[ ${#failed[@]} -eq 0 ]
