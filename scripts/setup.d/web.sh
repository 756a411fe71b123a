#!/usr/bin/env bash
# Install the viewer's build and browser-test tools, idempotently (anything present at the right
# version is skipped). Usage: web.sh [TOOLS_DIR] [all|browser|wasm] (default: all).
#   browser: chromium + chromium-driver (apt) for the browser tests and screenshots (~1 min)
#   wasm:    wasm-bindgen-cli, exactly the wasm-bindgen version of Cargo.lock (~4 min cold on
#            2 cores; also gives wasm-bindgen-test-runner), and wasm-opt from npm
#            binaryen@132.0.0 (never Debian's binaryen 108: it yields a blank page).
#            scripts/build-viewer.sh runs both itself: no bundler such as trunk is needed.
# Cargo-installed tools go to TOOLS_DIR (default $SPEEDMATRIX_CACHE/tools, i.e.
# ~/.cache/speedmatrix/tools): bin/ holds wasm-bindgen and wasm-bindgen-test-runner,
# npm/node_modules/.bin holds wasm-opt. scripts/web-env.sh puts both on PATH.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tools="${1:-${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/tools}"
part="${2:-all}"
BINARYEN_VERSION=132.0.0
# shellcheck source=../web-env.sh
. "$root/scripts/web-env.sh"
# shellcheck source=apt.sh
. "$root/scripts/setup.d/apt.sh"
WB_VERSION="$SPEEDMATRIX_WASM_BINDGEN_VERSION"
[ -n "$WB_VERSION" ] || { echo "web: no wasm-bindgen in Cargo.lock" >&2; exit 1; }
case "$part" in all|browser|wasm) ;; *) echo "web.sh: the part is all, browser or wasm (not '$part')" >&2; exit 2 ;; esac

mkdir -p "$tools"
export PATH="$tools/bin:$tools/npm/node_modules/.bin:$PATH"
say() { printf 'setup(web): %s\n' "$*"; }
version_of() { "$1" --version 2>/dev/null | awk '{print $2; exit}'; }

cargo_install() {
  # A private build folder, removed afterwards (the CI target cache is not the place for tools).
  local build
  build="$(mktemp -d)"
  # At opt-level 1: the tools' output does not depend on it, their run takes seconds either way,
  # and wasm-bindgen-cli's cold build at the release profile's opt-level 3 took 623 s beside
  # the other lines of a cold run.
  CARGO_TARGET_DIR="$build" CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install --root "$tools" "$@"
  rm -rf "$build"
}

browser() {
  if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    say "chromium and chromedriver present"
    return
  fi
  say "installing chromium and chromium-driver (apt)"
  # One apt-get at a time beside llama-server.sh's cmake install (apt.sh says why).
  apt_install chromium chromium-driver
  say "ok: $(chromium --version 2>/dev/null)"
}

wasm() {
  if [ "$(version_of wasm-bindgen)" = "$WB_VERSION" ]; then
    say "wasm-bindgen $WB_VERSION present"
  else
    # No --locked: the crate's own lockfile pins a dependency version the registry lacks.
    say "installing wasm-bindgen-cli $WB_VERSION (about 4 minutes on 2 cores)"
    cargo_install wasm-bindgen-cli --version "$WB_VERSION" --force
  fi
  if wasm-opt --version 2>/dev/null | grep -q "version ${BINARYEN_VERSION%%.*}"; then
    say "wasm-opt ${BINARYEN_VERSION%%.*} present"
  else
    command -v npm >/dev/null 2>&1 || { echo "setup(web): npm is needed for wasm-opt (apt-get install npm)" >&2; exit 1; }
    say "installing wasm-opt (npm binaryen@$BINARYEN_VERSION)"
    npm install --prefix "$tools/npm" --no-audit --no-fund --no-save "binaryen@$BINARYEN_VERSION" >/dev/null
  fi
  say "ok: wasm-bindgen $(version_of wasm-bindgen), $(wasm-opt --version)"
}

case "$part" in
  browser) browser ;;
  wasm) wasm ;;
  all) browser; wasm ;;
esac
