#!/usr/bin/env bash
# A cluster in one command, on 127.0.0.1 only: a throwaway PostgreSQL, three bridge
# instances on Streamable HTTP sharing it, HAProxy in front, and a scripted client
# (client.py) that creates tasks through the balancer, polls and cancels them through other
# instances, kills one instance mid-run, shows its tasks failed by the survivors, prints
# the per-instance request counts, and stops another with SIGTERM while a stream waits on it
# (the client resumes the stream through the balancer). Everything is stopped and deleted on exit; the exit
# status is non-zero when any expectation fails.
#
#   examples/cluster/run.sh [path/to/cyberos-mcp-bridge]   (default: build the debug binary)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

# Each workflow step (three in adr-quick-capture) waits this long, so runs last ~6 s.
PACE_MS=2000

if [ $# -ge 1 ]; then
  bin=$(readlink -f "$1")
else
  (cd "$root" && cargo build --quiet)
  bin="${CARGO_TARGET_DIR:-$root/target}/debug/cyberos-mcp-bridge"
  bin=$(readlink -f "$bin")
fi
[ -x "$bin" ] || { echo "no bridge binary at $bin" >&2; exit 2; }

. "$here/cluster.sh"
status=1
trap 'if [ "$status" -ne 0 ]; then cluster_logs; fi; cluster_down' EXIT
trap 'exit 130' INT TERM

cluster_up "$bin" "$PACE_MS" || exit 1
ids=$(IFS=,; echo "${inst_url[*]}")
pids=$(IFS=,; echo "${inst_pid[*]}")
status=0
python3 "$here/client.py" "$lb_url" "$token_file" "$lb_sock" "$ids" "$pids" || status=$?
exit "$status"
