# Source this to put the viewer's tools (scripts/setup.d/web.sh) on PATH.
# shellcheck shell=bash
_speedmatrix_tools="${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/tools"
export PATH="$_speedmatrix_tools/bin:$_speedmatrix_tools/npm/node_modules/.bin:$PATH"
unset _speedmatrix_tools
# The one place the wasm-bindgen version comes from: Cargo.lock. web.sh installs that version of
# wasm-bindgen-cli, and build-viewer.sh runs that one.
SPEEDMATRIX_WASM_BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' \
  "$(dirname "${BASH_SOURCE[0]}")/../Cargo.lock")
export SPEEDMATRIX_WASM_BINDGEN_VERSION
