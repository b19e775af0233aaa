#!/usr/bin/env bash
# Run every host scenario against a built bridge binary and print what the model got.
# usage: tests/hosts/run.sh PATH/TO/cyberos-mcp-bridge [--hosts claude,codex,gemini]
#        [--transports stdio,http] [--scenarios ...] [--timeout 60] [--out DIR]
# Builds nothing; install the hosts first with tests/hosts/install.sh.
# Each host run is bounded by --timeout (60 s); the whole run by 20 minutes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -lt 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 PATH/TO/cyberos-mcp-bridge [drive.py options]" >&2; exit 2
fi
for h in claude codex gemini; do
    if [ ! -x "$here/.cache/node_modules/.bin/$h" ]; then
        echo "hosts not installed ($h): run $here/install.sh first" >&2; exit 2
    fi
done
exec timeout 1200 python3 "$here/drive.py" "$@"
