#!/usr/bin/env bash
# The proof that no test needs an idle machine: every Rust test suite of the full tier (the real
# servers' included) N times in a row (default 3) while a CPU hog keeps every core busy — one
# `yes > /dev/null` per core, as a helper's compile or another CI run would. Prints each pass's
# result, wall time and the load average, and exits 1 if any pass had a failure.
#
# Run scripts/test.sh once first (it installs the tools and builds everything; this script
# builds only what changed since, with the same compiler settings).
# Usage: scripts/test-under-load.sh [N]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
n="${1:-3}"
case "$n" in ''|*[!0-9]*) echo "usage: scripts/test-under-load.sh [N] (N: how many passes, a whole number)" >&2; exit 2 ;; esac
# shellcheck source=web-env.sh
. "$root/scripts/web-env.sh"
# The same build as scripts/test.sh's (clippy-driver compiles the workspace), so nothing is rebuilt.
export RUSTC_WORKSPACE_WRAPPER="${RUSTC_WORKSPACE_WRAPPER:-$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)}"
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# As in CI: a test whose tool is missing fails instead of skipping; snapshots are not written.
export CI=true
logs="$(mktemp -d "${TMPDIR:-/tmp}/speedmatrix-load.XXXXXX")"

hogs=()
stop_hogs() { [ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null; hogs=(); }
trap stop_hogs EXIT INT TERM
cores="$(nproc)"
for _ in $(seq "$cores"); do yes >/dev/null & hogs+=($!); done
echo "hog: $cores × \`yes > /dev/null\` (PIDs ${hogs[*]}); load average: $(cut -d' ' -f1-3 /proc/loadavg)"

failures=0
for i in $(seq "$n"); do
  t0=$SECONDS
  cargo nextest run --workspace --exclude speedmatrix-viewer --locked --features speedmatrix-tests/full \
    --no-fail-fast >"$logs/pass-$i.log" 2>&1
  status=$?
  summary="$(grep -E '^ *Summary \[' "$logs/pass-$i.log" | sed 's/^ *//')"
  printf 'pass %d of %d: %s in %d s, load average %s — %s\n' "$i" "$n" \
    "$([ $status = 0 ] && echo ok || echo FAILED)" $((SECONDS - t0)) "$(cut -d' ' -f1-3 /proc/loadavg)" "$summary"
  grep -E '^ *(FAIL|TIMEOUT|SIGSEGV|SIGABRT|ABORT) \[' "$logs/pass-$i.log" | sed 's/^ */  /' | sort -u
  [ $status = 0 ] || failures=$((failures + 1))
done
stop_hogs
echo "under load: $((n - failures)) of $n passes without a failure (logs: $logs)"
[ $failures = 0 ]
