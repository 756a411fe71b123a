# Source this to put the viewer's tools (scripts/setup.d/web.sh) on PATH.
# shellcheck shell=bash
_speedmatrix_tools="${SPEEDMATRIX_CACHE:-$HOME/.cache/speedmatrix}/tools"
export PATH="$_speedmatrix_tools/bin:$_speedmatrix_tools/npm/node_modules/.bin:$PATH"
unset _speedmatrix_tools
