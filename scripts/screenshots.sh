#!/usr/bin/env bash
# Screenshots of the seed fixture's report into docs/screenshots/ with headless Chromium
# (`speedmatrix serve` on 127.0.0.1): whole pages with `chromium --screenshot`, sections through
# WebDriver (tests/tests/viewer_browser.rs): sections, charts, the light and the dark theme. Uses the debug
# binary (built if needed) and its embedded dist/, or SPEEDMATRIX_DIST_DIR (a fresh viewer build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build -q -p speedmatrix
bin="${CARGO_TARGET_DIR:-$root/target}/debug/speedmatrix"
out="$root/docs/screenshots"
mkdir -p "$out"
tmp="$(mktemp -d)"
"$bin" serve tests/fixtures/h200-qwen3.5-122b-vllm.json --port 0 > "$tmp/serve.out" &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do grep -q listening "$tmp/serve.out" && break; sleep 0.1; done
url="$(sed -n 's/^listening on //p' "$tmp/serve.out")/"
shot() { # name width height url
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$tmp/profile-$1" \
    --screenshot="$out/$1.png" --window-size="$2,$3" --virtual-time-budget=5000 "$4" 2>/dev/null
  echo "wrote docs/screenshots/$1.png"
}
shot seed-report-top 1400 1000 "$url"
shot seed-report-full 1400 6200 "$url"
shot seed-report-narrow 760 2400 "$url"
# Sections (element screenshots through WebDriver; a reason shown on focus; the TTFT heatmap), the
# charts (light and dark) and the top of the page in each theme.
SPEEDMATRIX_SCREENSHOTS="$out" cargo test -q -p speedmatrix-tests --test viewer_browser screenshots_of_the_seed_report -- --nocapture | grep wrote
