#!/usr/bin/env bash
# Print the hash of the sources the viewer in dist/ is built from: every file under viewer/ and
# shared/ that git tracks, and Cargo.lock — paths and working-tree contents. Untracked scratch
# files do not count (add a new source file to git before rebuilding dist/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
git ls-files -- viewer shared Cargo.lock | LC_ALL=C sort -u | while IFS= read -r f; do
  [ -f "$f" ] || continue
  printf '%s %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$f"
done | sha256sum | cut -d' ' -f1
