#!/usr/bin/env bash
# Memory per connection of the release binary (`--dev --transport http` on 127.0.0.1):
# its idle RSS, then its RSS holding N idle keep-alive HTTP/1.1 connections (each has
# answered one authenticated ping; bench/idle_conns.py), for each N in COUNTS. The
# server closes a connection idle for 10 s, so each set is
# opened in large batches and sampled as soon as it is held.
#
# Then, on a fresh instance, its RSS holding N `tools/call` SSE streams that wait, for
# each N in STREAMS (bench/waiting_streams.py): each its own connection and session, a
# call of the write tool waiting for the client to answer its confirmation question,
# spread over 8 tenants x 16 subjects (the bridge's caps on open questions). The
# instance's in-flight cap is raised to hold them (--http-max-inflight). It also reports
# the bridge's CPU over 5 s while they wait (what waiting costs when nothing happens).
#
# The last two lines are the verdicts: KiB per idle connection at the largest COUNTS
# against 8 KiB, and KiB per waiting stream at the largest STREAMS against 24 KiB (#49).
#
# usage: bench/conns.sh   env: COUNTS="1000 5000 10000" STREAMS="500 1000 2000"
#                              BENCH_BRIDGE=<binary> (default: this tree's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. bench/lib.sh

counts=${COUNTS:-1000 5000 10000}
streams=${STREAMS:-500 1000 2000}
goal_kib=8
stream_goal_kib=24
tenant=00000000-0000-4000-8000-000000000001
largest=$(for n in $counts; do echo "$n"; done | sort -n | tail -1)
most=$(for n in $counts $streams; do echo "$n"; done | sort -n | tail -1)
# The server and the client each hold one descriptor per connection.
ulimit -n "$(( most + 1024 > $(ulimit -Hn) ? $(ulimit -Hn) : most + 1024 ))"

target=${CARGO_TARGET_DIR:-$root/target}
if [ -z "${BENCH_BRIDGE:-}" ]; then
  echo "== building the release binary" >&2
  cargo build --release --quiet --bin cyberos-mcp-bridge
fi
bridge=${BENCH_BRIDGE:-$target/release/cyberos-mcp-bridge}

tmp=$(mktemp -d)
bridge_pid=
cleanup() {
  [ -n "$bridge_pid" ] && kill "$bridge_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# start_bridge [extra flags...]: a fresh instance on a fresh data dir; sets bridge_pid, addr.
start_bridge() {
  rm -rf "$tmp/data"
  CYBEROS_HTTP_CALL_RATE=off "$bridge" --dev --transport http --listen 127.0.0.1:0 \
    --data-dir "$tmp/data" --skills-dir tests/fixtures/skills "$@" 2>"$tmp/bridge.log" &
  bridge_pid=$!
  addr=$(wait_addr "$tmp/bridge.log")
}
stop_bridge() { kill "$bridge_pid"; wait "$bridge_pid" 2>/dev/null || true; bridge_pid=; }

start_bridge
grep -o 'max_connections=[0-9]*' "$tmp/bridge.log" | head -1 >&2 || true
token=$("$bridge" --data-dir "$tmp/data" dev-token --tenant "$tenant")
# Warm: the first requests build what every later one shares (the verifier's cache,
# the allocator's arenas).
python3 bench/idle_conns.py "$addr" 100 "$token" 0 </dev/null >/dev/null
sleep 11
rss_idle=$(rss_kib "$bridge_pid")
echo "idle RSS ${rss_idle} KiB"

per=0
for n in $counts; do
  BATCH=1000 hold "idle keep-alive connections" "$n" 300 \
    python3 bench/idle_conns.py "$addr" "$n" "$token" 8
  per=$each
  # Let the server reap them before the next set.
  sleep 11
done
stop_bridge

# Waiting SSE streams, on a fresh instance.
start_bridge --http-max-inflight 4096
for t in $(seq 1 8); do
  for s in $(seq 1 16); do
    "$bridge" --data-dir "$tmp/data" dev-token --tenant "00000000-0000-4000-8000-00000000000$t" --sub "bench-$s"
  done
done >"$tmp/tokens"
python3 bench/waiting_streams.py "$addr" 16 "$tmp/tokens" 0 </dev/null >/dev/null
sleep 2
rss_idle=$(rss_kib "$bridge_pid")
echo "idle RSS ${rss_idle} KiB (fresh instance, after 16 warm-up streams)"
sper=0
slargest=0
for n in $streams; do
  HOLD_CPU_S=5 hold "waiting tools/call SSE streams" "$n" 1200 \
    python3 bench/waiting_streams.py "$addr" "$n" "$tmp/tokens" 60
  sper=$each
  slargest=$n
  # The closed streams' questions are withdrawn; let the instance settle.
  sleep 3
done

status=0
if awk -v p="$per" -v g="$goal_kib" 'BEGIN { exit !(p <= g) }'; then
  echo "conns: PASS — ${per} KiB per idle connection at ${largest} (goal ≤ ${goal_kib} KiB)"
else
  echo "conns: FAIL — ${per} KiB per idle connection at ${largest} (goal ≤ ${goal_kib} KiB)"
  status=1
fi
if awk -v p="$sper" -v g="$stream_goal_kib" 'BEGIN { exit !(p <= g) }'; then
  echo "streams: PASS — ${sper} KiB per waiting tools/call stream at ${slargest} (goal ≤ ${stream_goal_kib} KiB)"
else
  echo "streams: FAIL — ${sper} KiB per waiting tools/call stream at ${slargest} (goal ≤ ${stream_goal_kib} KiB)"
  status=1
fi
exit $status
