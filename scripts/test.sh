#!/usr/bin/env bash
# Run every test of speedmatrix — the full tier (README, "Tests"): formatting, lints, the Rust
# test suites (unit, schema, twin, end to end against the twin, a real vLLM and llama.cpp, the
# page in headless Chromium) and the wasm32 build of the schema crate and viewer. Plain
# `cargo test` is the quick tier: no external tools, a few minutes.
#
# The committed dist/ must match its sources (dist/SOURCE_HASH), and a fresh build of the viewer
# (scripts/build-viewer.sh, reproducible) must equal it byte for byte; the binary under test
# embeds dist/. Installs what it needs first (scripts/setup.sh, idempotent).
#
# What runs when, on a 2-core machine: the quick installs first; then three lines of work side by
# side — (1) the real servers' installs (vLLM on CPU: downloads; llama.cpp: a C++ build), (2) the
# web line: Chromium, wasm-bindgen-cli and wasm-opt, the fresh viewer build, the wasm32 build of
# the viewer with its lints, and its tests in Chromium, in a target folder of its own so that
# cargo's lock never makes the other lines wait, and (3) the native line: one build of every
# target, its lints, then every test suite in one nextest — the real servers' beside the rest —
# once Chromium and the servers are installed. The test suites must hold on a busy machine
# (README, "Tests"): the web line's compiling runs beside them on purpose.
#
# One build serves the lints and the tests: clippy-driver is the compiler of the workspace's
# own crates (RUSTC_WORKSPACE_WRAPPER, what `cargo clippy` itself does) in the build the tests
# run from, so the dependencies are compiled once, not once for `cargo clippy` (check mode) and
# again for the tests. Any warning of that build fails the lint step (`-D warnings` in effect),
# and the tests still run.
#
# Every step runs even when an earlier one failed, and every test suite runs even when another
# failed (`--no-fail-fast`), so one run reports all failures. It ends with a summary: each
# step's time, each suite's time, steps and test suites passed, failed and skipped (with why);
# the exit status is 1 when anything failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

logs="$(mktemp -d "${TMPDIR:-/tmp}/speedmatrix-test.XXXXXX")"
export SPEEDMATRIX_SKIPS="$logs/skips"
: >"$SPEEDMATRIX_SKIPS"
target="${CARGO_TARGET_DIR:-$root/target}"
# The full tier: every suite of tests/Cargo.toml is built (its `full` feature; README, "Tests").
FULL=(--features speedmatrix-tests/full)
passed=() failed=() skipped=() times=()
t_all=$SECONDS

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
  times+=("$(printf '%5d s  %s' $((SECONDS - t0)) "$name")")
}
skip() { skipped+=("$1: $2"); printf '\n== %s\n-- skipped: %s\n' "$1" "$2"; }
# A step of a background line: its output goes to $logs/bg/N.log, its outcome to N.status and
# N.time; the summary reads them (`collect_background`). The line goes on after a failure.
bg_step() {
  local name="$1"; shift
  local n t0=$SECONDS
  mkdir -p "$logs/bg"
  n="$(date +%s%N)"
  printf '%s\n' "$name" >"$logs/bg/$n.name"
  if "$@" >"$logs/bg/$n.log" 2>&1; then echo ok >"$logs/bg/$n.status"; else echo FAILED >"$logs/bg/$n.status"; fi
  echo $((SECONDS - t0)) >"$logs/bg/$n.time"
}
collect_background() {
  local f n name status t
  for f in "$logs"/bg/*.name; do
    [ -f "$f" ] || continue
    n="${f%.name}"; name="$(cat "$f")"; status="$(cat "$n.status" 2>/dev/null || echo FAILED)"; t="$(cat "$n.time" 2>/dev/null || echo 0)"
    printf '\n== %s (in the background)\n' "$name"
    tail -n 150 "$n.log"
    printf -- '-- %s: %s (%d s)\n' "$name" "$status" "$t"
    if [ "$status" = ok ]; then passed+=("$name"); else failed+=("$name"); fi
    times+=("$(printf '%5d s  %s (background)' "$t" "$name")")
  done
}
# wait_for FILE WHAT: wait until a background line wrote FILE (steps run in subshells, which
# cannot `wait` for this shell's children).
wait_for() {
  [ -f "$1" ] && return 0
  printf 'waiting for %s\n' "$2"
  while [ ! -f "$1" ]; do sleep 1; done
}

t0=$SECONDS
if ! SPEEDMATRIX_SETUP_SERVERS=0 SPEEDMATRIX_SETUP_WEB=0 "$root/scripts/setup.sh"; then
  echo "setup failed: nothing was tested" >&2
  exit 1
fi
times+=("$(printf '%5d s  %s' $((SECONDS - t0)) "setup: toolchain, crates, test runner")")

# ---- line 1: the real servers ---------------------------------------------------------------
# scripts/setup.sh installs both side by side (SPEEDMATRIX_SKIP_VLLM / _LLAMA are honoured).
servers_setup() { SPEEDMATRIX_SETUP_SERVERS=only "$root/scripts/setup.sh"; }
(bg_step "setup: a real vLLM on CPU and llama.cpp's llama-server" servers_setup; touch "$logs/servers.done") &

# ---- line 2: the web tools, the viewer, its wasm32 build and tests --------------------------
# shellcheck source=web-env.sh
. "$root/scripts/web-env.sh"
web_target="$target/web"
# The web line's two builds give way to the native line when the web target is warm: a commit
# that changes `shared` rebuilds the schema crate, the twin, the collector and every test binary
# (the critical path: the suites wait for it) and the viewer twice (release and wasm32 test
# builds, which nothing waits for until the end). At `nice 10` they take what the native build
# leaves idle (its serial stretches, then the suites, which wait on sleeping twins most of the
# time). On a cold target they keep their full share: there they are a long line of their own
# (the cold run's 28 min were measured so).
web_nice=()
if [ -d "$web_target/wasm32-unknown-unknown" ]; then web_nice=(nice -n 10); fi
# The fresh build equals the committed dist/ (the build is reproducible: build-viewer.sh).
fresh_viewer() {
  local fresh="$web_target/viewer-dist"
  rm -rf "$fresh"
  CARGO_TARGET_DIR="$web_target" "${web_nice[@]}" "$root/scripts/build-viewer.sh" "$fresh" || return 1
  if ! diff -r "$root/dist" "$fresh"; then
    echo "a fresh build of the viewer differs from the committed dist/ (above): rebuild it with scripts/build-viewer.sh and commit dist/" >&2
    return 1
  fi
  echo "the fresh build equals the committed dist/, file by file"
}
# One build for the viewer's lints (and the schema crate's, which it compiles) and its tests:
# clippy-driver as their compiler (see the top). Then its unit and component tests run in
# headless Chromium via wasm-bindgen-test-runner.
# The dependencies unoptimised here (the native build's are at opt-level 2, Cargo.toml): the
# viewer's tests take seconds either way, and a cold build of leptos & co. took 886 s of a cold
# run's 2,107 s at opt-level 2, beside the other lines.
web_cargo_test() {
  local pre=()  # the build (--no-run) gives way (web_nice); the tests in Chromium do not
  if [ "${1:-}" = --no-run ]; then pre=("${web_nice[@]}"); fi
  CARGO_TARGET_DIR="$web_target" RUSTC_WORKSPACE_WRAPPER="$(clippy_driver)" \
    "${pre[@]}" cargo test -p speedmatrix-viewer --target wasm32-unknown-unknown --locked \
    --config 'profile.dev.package."*".opt-level=0' "$@"
}
wasm_build() {
  web_cargo_test --no-run >"$logs/wasm-build.log" 2>&1
  local status=$?
  quiet_build_log "$logs/wasm-build.log"
  return $status
}
wasm_tests() { CHROMEDRIVER="$(command -v chromedriver)" web_cargo_test; }
clippy_driver() { rustup which clippy-driver 2>/dev/null || command -v clippy-driver; }
# The build log without cargo's progress lines.
quiet_build_log() { grep -vE '^ +(Compiling|Checking|Fresh|Blocking|Finished|Executable|Running)' "$1" | tail -n 40; }
# no_warnings LOG: the build in LOG printed no warning or error of its own (cargo replays the
# diagnostics of crates it did not rebuild, so a warm build is judged too).
no_warnings() {
  if grep -qE '^(warning|error)(\[|:)' "$1"; then
    grep -E -A12 '^(warning|error)(\[|:)' "$1" | head -n 80
    echo "lints: the build above printed warnings (clippy's and rustc's are errors here)" >&2
    return 1
  fi
  echo "lints: no warnings"
}
web_line() {
  bg_step "setup: Chromium and chromedriver" "$root/scripts/setup.d/web.sh" "$SPEEDMATRIX_CACHE_TOOLS" browser
  touch "$logs/browser.done"
  bg_step "setup: wasm-bindgen-cli and wasm-opt" "$root/scripts/setup.d/web.sh" "$SPEEDMATRIX_CACHE_TOOLS" wasm
  bg_step "viewer: a fresh build equals the committed dist/" fresh_viewer
  bg_step "wasm32 build of the viewer and the schema crate, clippy-driver as their compiler" wasm_build
  bg_step "clippy and rustc lints of the wasm32 build (warnings are errors)" no_warnings "$logs/wasm-build.log"
  bg_step "viewer unit and component tests (wasm32, headless Chromium via wasm-bindgen-test-runner)" wasm_tests
}
export SPEEDMATRIX_CACHE_TOOLS="${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/tools"
if [ "${SPEEDMATRIX_SKIP_WEB:-0}" = 1 ]; then
  skip "the viewer's build and tests" "SPEEDMATRIX_SKIP_WEB=1"
  touch "$logs/browser.done" "$logs/web.done"
else
  (web_line; touch "$logs/web.done") &
fi

# ---- line 3: the native build and the Rust test suites --------------------------------------
step "viewer: the committed dist/ matches its sources" "$root/scripts/check-dist.sh"
step "rustfmt" cargo fmt --all --check

# Lints ride on the build (see the top): clippy-driver compiles the workspace's crates.
export RUSTC_WORKSPACE_WRAPPER="${RUSTC_WORKSPACE_WRAPPER:-$(clippy_driver)}"
# The native build: every suite, the benches and the binaries, in the profile the tests run in.
native_build() {
  { cargo nextest run --workspace --exclude speedmatrix-viewer --locked "${FULL[@]}" --no-run \
    && cargo test --workspace --exclude speedmatrix-viewer --locked "${FULL[@]}" --no-run --benches --examples; } \
    >"$logs/native-build.log" 2>&1
  local status=$?
  quiet_build_log "$logs/native-build.log"
  return $status
}
step "native build of every target, clippy-driver as the workspace's compiler" native_build
step "clippy and rustc lints of the native build (warnings are errors)" no_warnings "$logs/native-build.log"

# The Rust suites run under cargo-nextest (scripts/setup.d/nextest.sh installs it): every test in
# its own process, side by side within the limits of .config/nextest.toml — the real vLLM's and
# llama.cpp's suites among them (one server at a time, started first: they are the run's longest
# chain), so they wait for the servers' installs (on a cold machine these end before the native
# build does) and for Chromium. Every suite holds on a machine this busy (README, "Tests";
# scripts/test-under-load.sh is the proof): a CPU vLLM beside the twin suites loads the machine
# more than two `yes` hogs.
nextest() {
  cargo nextest run --workspace --exclude speedmatrix-viewer --locked "${FULL[@]}" --no-fail-fast "$@"
}
all_suites() {
  wait_for "$logs/browser.done" "Chromium (installed in the background)"
  wait_for "$logs/servers.done" "the real servers (installed in the background)"
  local status=0
  nextest || status=1
  # nextest runs no doc-tests; cargo does (the crates have none today: this keeps it so).
  cargo test --workspace --exclude speedmatrix-viewer --locked --doc --quiet || status=1
  return $status
}
cargo_test() { all_suites 2>&1 | tee "$logs/cargo-test.log"; return "${PIPESTATUS[0]}"; }
step "Rust test suites (cargo nextest: every suite, the real servers' beside the rest)" cargo_test

wait_for "$logs/web.done" "the web line (the viewer's build and tests, in the background)"
wait_for "$logs/servers.done" "the real servers' installs"
collect_background

# ---- summary --------------------------------------------------------------------------------
printf '\n== summary\n'
printf 'steps, by wall time (%d s in all; the background lines ran beside the rest):\n' $((SECONDS - t_all))
printf '  %s\n' "${times[@]}"
# nextest prints "PASS [   1.234s] (n/N) BINARY-ID TEST" for every test (status-level = pass):
# each suite's time is the sum of its tests' times (they run side by side, so the suites'
# times add up to more than the wall time). A slow test's line comes again at the end: counted once.
suite_times() {
  cat "$logs"/cargo-test*.log 2>/dev/null \
    | sed -nE 's/^ *(PASS|FAIL|SLOW|TIMEOUT|SIGSEGV|SIGABRT|ABORT|LEAK[A-Z-]*) \[ *([0-9.]+)s\] (\( *[0-9]+\/ *[0-9]+\) )?([^ ]+) (.*)/\4 \2 \5/p' \
    | awk '!seen[$1 " " $3 " " $4 " " $5]++ {t[$1]+=$2; n[$1]++} END {for (b in t) printf "  %7.1f s  %3d tests  %s\n", t[b], n[b], b}' \
    | sort -rn
}
printf 'test suites, by the sum of their tests'"'"' times:\n'
suite_times
for f in "$logs"/cargo-test*.log; do
  [ -f "$f" ] || continue
  # nextest ends each run with "Summary [ …s] N tests run: …" and lists failures as "FAIL [ …s] …".
  grep -E '^ *Summary \[' "$f" | sed 's/^ */tests: /'
  grep -E '^ *(FAIL|TIMEOUT|SIGSEGV|SIGABRT|ABORT) \[' "$f" | sed 's/^ */  /' | sort -u
done
tests_skipped=()
while IFS= read -r line; do [ -n "$line" ] && tests_skipped+=("$line"); done <"$SPEEDMATRIX_SKIPS"
printf 'steps: %d passed, %d failed, %d skipped\n' "${#passed[@]}" "${#failed[@]}" "${#skipped[@]}"
for f in "${failed[@]}"; do printf '  FAILED  %s\n' "$f"; done
for s in "${skipped[@]}"; do printf '  SKIPPED %s\n' "$s"; done
printf 'tests that skipped (passed without running their checks): %d\n' "${#tests_skipped[@]}"
for s in "${tests_skipped[@]}"; do printf '  SKIPPED %s\n' "$s"; done
[ ${#failed[@]} -eq 0 ]
