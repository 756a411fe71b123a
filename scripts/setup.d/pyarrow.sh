#!/usr/bin/env bash
# Install pyarrow from PyPI, the Parquet reader the export test reads a site's
# runs/cells.parquet back with (tests/tests/export_pyarrow.rs), idempotently: a virtual
# environment $1/pyarrow-venv (default $SPEEDMATRIX_CACHE/tools) holding the pinned pyarrow and
# nothing else (its wheels need no numpy): ~190 MB installed, 7 s the first time here. Present at
# the pinned version: skipped.
#
# Why pyarrow: the reference Parquet implementation of Apache Arrow (C++), the reader pandas and
# Polars users have; it reports both the Arrow type and the Parquet physical and logical type
# of every column, which the test checks against docs/EXPORT.md.
set -euo pipefail

tools="${1:-${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/tools}"
PYARROW_VERSION=26.0.1
venv="$tools/pyarrow-venv"
say() { printf 'setup(pyarrow): %s\n' "$*"; }

have="$("$venv/bin/python" -c 'import pyarrow; print(pyarrow.__version__)' 2>/dev/null || true)"
if [ "$have" = "$PYARROW_VERSION" ]; then
  say "pyarrow $PYARROW_VERSION present ($venv)"
  exit 0
fi
say "installing pyarrow $PYARROW_VERSION (a wheel from PyPI) into $venv"
mkdir -p "$tools"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --only-binary=:all: "pyarrow==$PYARROW_VERSION"
say "pyarrow $("$venv/bin/python" -c 'import pyarrow; print(pyarrow.__version__)') installed"
