#!/usr/bin/env bash
# Fail when the committed dist/ was not built from the current sources: dist/SOURCE_HASH must
# equal scripts/dist-hash.sh. Rebuild with scripts/build-viewer.sh and commit dist/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want="$("$root/scripts/dist-hash.sh")"
have="$(head -n1 "$root/dist/SOURCE_HASH" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
  echo "dist/ is stale: dist/SOURCE_HASH is '${have:-missing}', the sources hash to '$want'." >&2
  echo "Rebuild it with scripts/build-viewer.sh and commit dist/." >&2
  exit 1
fi
echo "dist/ matches its sources ($want)"
