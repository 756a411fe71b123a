#!/usr/bin/env bash
# Run every test of speedmatrix: formatting, lints, the Rust test suites (unit, schema, seed
# fixture, CLI end to end, the viewer in headless Chromium) and the wasm32 build of the schema
# crate and viewer. The committed dist/ must match its sources (dist/SOURCE_HASH); the viewer is
# rebuilt fresh with trunk and the binary under test embeds that fresh build.
# Installs what it needs first (scripts/setup.sh, idempotent).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

"$root/scripts/setup.sh"

step() { printf '\n== %s\n' "$*"; }

step "viewer: the committed dist/ matches its sources"
"$root/scripts/check-dist.sh"

step "viewer: fresh build with trunk (the tests embed it)"
# shellcheck source=web-env.sh
. "$root/scripts/web-env.sh"
if command -v trunk >/dev/null 2>&1 && command -v wasm-bindgen >/dev/null 2>&1 && command -v wasm-opt >/dev/null 2>&1; then
  fresh="${CARGO_TARGET_DIR:-$root/target}/viewer-dist"
  rm -rf "$fresh.new"
  "$root/scripts/build-viewer.sh" "$fresh.new"
  # Keep the previous folder when nothing changed, so cargo need not re-embed it.
  if diff -rq "$fresh.new" "$fresh" >/dev/null 2>&1; then rm -rf "$fresh.new"; else rm -rf "$fresh" && mv "$fresh.new" "$fresh"; fi
  export SPEEDMATRIX_DIST_DIR="$fresh"
elif [ "${CI:-}" = true ]; then
  echo "trunk, wasm-bindgen or wasm-opt missing (scripts/setup.d/web.sh installs them)" >&2
  exit 1
else
  echo "skipped: trunk, wasm-bindgen or wasm-opt missing; testing the committed dist/"
fi

step "rustfmt"
cargo fmt --all --check

step "clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "wasm32 build and lints of the schema crate and the viewer (with its component tests)"
cargo clippy -p speedmatrix-schema -p speedmatrix-viewer --all-targets --target wasm32-unknown-unknown --locked -- -D warnings

step "cargo test (workspace)"
cargo test --workspace --locked

step "viewer component tests (wasm32, headless Chromium via wasm-bindgen-test-runner)"
if command -v chromedriver >/dev/null 2>&1 && command -v wasm-bindgen-test-runner >/dev/null 2>&1; then
  CHROMEDRIVER="$(command -v chromedriver)" cargo test -p speedmatrix-viewer --target wasm32-unknown-unknown --locked
elif [ "${CI:-}" = true ]; then
  echo "chromedriver or wasm-bindgen-test-runner missing (scripts/setup.d/web.sh installs them)" >&2
  exit 1
else
  echo "skipped: chromedriver or wasm-bindgen-test-runner missing"
fi
