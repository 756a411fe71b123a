#!/usr/bin/env bash
# Run every test of speedmatrix: formatting, lints, the Rust test suites (unit, schema, seed
# fixture, CLI end to end) and the wasm32 build of the schema crate and viewer.
# Installs what it needs first (scripts/setup.sh, idempotent).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

"$root/scripts/setup.sh"

step() { printf '\n== %s\n' "$*"; }

step "rustfmt"
cargo fmt --all --check

step "clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "wasm32 build of the schema crate and the viewer"
cargo check -p speedmatrix-schema -p speedmatrix-viewer --target wasm32-unknown-unknown --locked

step "cargo test (workspace)"
cargo test --workspace --locked
