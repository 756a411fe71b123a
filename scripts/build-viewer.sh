#!/usr/bin/env bash
# Build the viewer into dist/ — or into the folder given as $1 (CI builds a fresh copy beside the
# committed one) — and record the source hash in SOURCE_HASH. Needs scripts/setup.d/web.sh's
# tools (wasm-bindgen-cli of Cargo.lock's version, wasm-opt of npm binaryen 132).
#
# The three steps a Leptos CSR page needs, without a bundler (trunk would cost ~10 min of
# compiling on a fresh machine and adds nothing the page uses):
#   1. cargo builds the `speedmatrix-viewer` binary for wasm32 in the workspace's
#      [profile.wasm-release] (opt-level z, lto, panic abort), offline;
#   2. wasm-bindgen writes the ES module and its _bg.wasm (`--target web`);
#   3. wasm-opt -Oz shrinks the wasm.
# Then each file is named by a hash of its content (a new build never hides behind a cached
# old one) and viewer/index.html's `<link data-viewer …>` lines are replaced by the tags that
# load them, with subresource integrity.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=web-env.sh
. "$root/scripts/web-env.sh"
out="${1:-$root/dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
hash="$("$root/scripts/dist-hash.sh")"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$root"
# Reproducible on any machine: the crates' sources are named relative to ~/.cargo in the wasm's
# panic locations, not by this machine's home folder (scripts/test.sh compares a fresh build
# with the committed dist/ byte for byte).
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="--remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo"
# And never with clippy-driver as the workspace's compiler (scripts/test.sh's lint builds set
# RUSTC_WORKSPACE_WRAPPER): it changes the wasm, and a dist/ built under it differed from CI's
# fresh build (stop 40).
unset RUSTC_WORKSPACE_WRAPPER
cargo build --locked --offline -p speedmatrix-viewer --bin speedmatrix-viewer \
  --target wasm32-unknown-unknown --profile wasm-release
wasm-bindgen --target web --no-typescript --out-dir "$work" --out-name speedmatrix-viewer \
  "$target/wasm32-unknown-unknown/wasm-release/speedmatrix-viewer.wasm"
wasm-opt -Oz "$work/speedmatrix-viewer_bg.wasm" -o "$work/speedmatrix-viewer_bg.opt.wasm"
mv "$work/speedmatrix-viewer_bg.opt.wasm" "$work/speedmatrix-viewer_bg.wasm"
cp viewer/style.css viewer/diff.css viewer/live.css "$work/"

# Names by content, index.html from viewer/index.html; the old build's files go.
find "$out" -mindepth 1 -maxdepth 1 ! -name SOURCE_HASH -exec rm -rf {} +
python3 - "$root/viewer/index.html" "$work" "$out" <<'PY'
import base64, hashlib, pathlib, re, sys
index, work, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
def key(data): return hashlib.sha256(data).hexdigest()[:16]
def sri(data): return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()
js, wasm = (work / "speedmatrix-viewer.js").read_bytes(), (work / "speedmatrix-viewer_bg.wasm").read_bytes()
# The module and its wasm share one name, keyed by both (the module names the wasm it loads).
stem = f"speedmatrix-viewer-{key(js + wasm)}"
(out / f"{stem}.js").write_bytes(js)
(out / f"{stem}_bg.wasm").write_bytes(wasm)
def css(m):
    name = m.group(1); data = (work / name).read_bytes()
    hashed = f"{name[:-4]}-{key(data)}.css"; (out / hashed).write_bytes(data)
    return f'<link rel="stylesheet" href="./{hashed}" integrity="{sri(data)}"/>'
def app(_):
    return ("<script type=\"module\">\n"
            f"import init, * as bindings from './{stem}.js';\n"
            f"const wasm = await init({{ module_or_path: './{stem}_bg.wasm' }});\n"
            "window.wasmBindings = bindings;\n"
            "</script>\n"
            f'    <link rel="modulepreload" href="./{stem}.js" crossorigin="anonymous" integrity="{sri(js)}">'
            f'<link rel="preload" href="./{stem}_bg.wasm" crossorigin="anonymous" integrity="{sri(wasm)}" as="fetch" type="application/wasm">')
html = index.read_text()
html, n_css = re.subn(r'<link data-viewer rel="css" href="([^"]+\.css)" />', css, html)
html, n_app = re.subn(r'<link data-viewer rel="app" />', app, html)
if n_css != 3 or n_app != 1:
    sys.exit(f"build-viewer: viewer/index.html must have 3 css links and 1 app link (found {n_css}, {n_app})")
(out / "index.html").write_text(html)
PY
printf '%s\n' "$hash" > "$out/SOURCE_HASH"
wasm="$(ls "$out"/*.wasm)"
echo "viewer built in $out: $(stat -c %s "$wasm") bytes wasm, $(gzip -9c "$wasm" | wc -c) gzip"
