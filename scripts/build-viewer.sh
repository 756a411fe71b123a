#!/usr/bin/env bash
# Build the viewer with trunk (viewer/Trunk.toml: offline, release, profile wasm-release) into
# dist/ — or into the folder given as $1 (CI builds a fresh copy beside the committed one) —
# and record the source hash in SOURCE_HASH. Needs scripts/setup.d/web.sh's tools.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=web-env.sh
. "$root/scripts/web-env.sh"
out="${1:-$root/dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
hash="$("$root/scripts/dist-hash.sh")"
cd "$root/viewer"
TRUNK_TOOLS_WASM_BINDGEN="$SPEEDMATRIX_WASM_BINDGEN_VERSION" trunk build --dist "$out"
printf '%s\n' "$hash" > "$out/SOURCE_HASH"
wasm="$(ls "$out"/*.wasm)"
echo "viewer built in $out: $(stat -c %s "$wasm") bytes wasm, $(gzip -9c "$wasm" | wc -c) gzip"
