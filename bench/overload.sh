#!/usr/bin/env bash
# Overload of the release binary (`--dev --transport http` on 127.0.0.1, pinned to one
# CPU) under an open-loop load from oha (a fixed arrival rate, latency corrected for
# coordinated omission; installed from crates.io into target/bench-tools when absent),
# with the official Rust SDK's Streamable HTTP server (bench/sdk_peer: rmcp, stateless,
# no auth, the same listing as its one tool's result) measured the same way in the same
# run. The call is an authenticated `tools/call cyberos.skill.list_skills`; the
# per-tenant rate is switched off, so what refuses is the instance's own load shedding.
#
# For each server: its peak goodput (closed loop, CONNECTIONS connections), its p99 at a
# quarter of that rate (the unloaded p99), then RATES (multiples of the peak) for
# DURATION each with CONNECTIONS connections: goodput (200s per second) against the peak,
# the p99 of admitted calls against the unloaded p99, how many were refused (429/503) and
# the p99 of the refusals, and what got no answer at all. The last line is the verdict
# on the bridge against #49's goals: goodput ≥ 90 % of the peak, refusals in under 5 ms,
# admitted p99 ≤ 3x the unloaded p99, at every rate.
#
# Two bridges are measured: `bridge`, bound by its own CPU (the call is served from the
# skill folders), and `upstream`, bound by a memory service that serves UPSTREAM_CAP
# requests at once in UPSTREAM_DELAY seconds each (bench/slow_memory.py, on the load's
# CPU), called through `cyberos.memory.read_audit` with `--memory-max-inflight` set to
# that capacity. The verdict names each.
#
# usage: bench/overload.sh   env: RATES="2 4" DURATION=8s CONNECTIONS=256
#                                 UPSTREAM_DELAY=0.05 UPSTREAM_CAP=32
#                                 BENCH_BRIDGE=<binary> (default: this tree's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. bench/lib.sh

rates=${RATES:-2 4}
duration=${DURATION:-8s}
connections=${CONNECTIONS:-256}
upstream_delay=${UPSTREAM_DELAY:-0.05}
upstream_cap=${UPSTREAM_CAP:-32}
tenant=00000000-0000-4000-8000-000000000001
target=${CARGO_TARGET_DIR:-$root/target}
ulimit -n "$(( 8192 > $(ulimit -Hn) ? $(ulimit -Hn) : 8192 ))"
[ "$(nproc)" -ge 2 ] || { echo "needs two CPUs: one for the server, one for the load" >&2; exit 1; }

oha=$(command -v oha || true)
if [ -z "$oha" ]; then
  oha="$target/bench-tools/bin/oha"
  if [ ! -x "$oha" ]; then
    echo "== installing oha from crates.io into $target/bench-tools" >&2
    cargo install --quiet --locked --root "$target/bench-tools" oha --version 1.16.0
  fi
fi
echo "== building the release binary and the SDK peer" >&2
if [ -z "${BENCH_BRIDGE:-}" ]; then
  cargo build --release --quiet --bin cyberos-mcp-bridge
fi
bridge=${BENCH_BRIDGE:-$target/release/cyberos-mcp-bridge}
CARGO_TARGET_DIR="$target/sdk-peer" cargo build --release --quiet \
  --manifest-path bench/sdk_peer/Cargo.toml
peer="$target/sdk-peer/release/sdk-peer"

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

call='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cyberos.skill.list_skills","arguments":{}}}'
peer_call='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_skills","arguments":{}}}'

CYBEROS_HTTP_CALL_RATE=off taskset -c 0 "$bridge" --dev --transport http --listen 127.0.0.1:0 \
  --data-dir "$tmp/data" --skills-dir "$root/tests/fixtures/skills" 2>"$tmp/bridge.log" &
pids+=($!)
bridge_addr=$(wait_addr "$tmp/bridge.log")
token=$("$bridge" --data-dir "$tmp/data" dev-token --tenant "$tenant")
curl -sS -X POST "http://$bridge_addr/mcp" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' -H "authorization: Bearer $token" \
  -d "$call" >"$tmp/answer.json"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["result"]["content"][0]["text"], end="")' \
  "$tmp/answer.json" >"$tmp/listing.txt"
taskset -c 0 "$peer" 127.0.0.1:0 "$tmp/listing.txt" 2>"$tmp/peer.log" &
pids+=($!)
peer_addr=$(wait_addr "$tmp/peer.log")
out=$(curl -sS -X POST "http://$peer_addr/mcp" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-11-25' -d "$peer_call")
case "$out" in *'"result"'*) ;; *) echo "the SDK peer did not answer a result: $out" >&2; exit 1 ;; esac

# The same binary with its memory calls bound by a slow service.
taskset -c 1 python3 bench/slow_memory.py "$upstream_delay" "$upstream_cap" >"$tmp/memory.log" 2>&1 &
pids+=($!)
memory_addr=$(wait_addr "$tmp/memory.log")
CYBEROS_HTTP_CALL_RATE=off taskset -c 0 "$bridge" --dev --transport http --listen 127.0.0.1:0 \
  --data-dir "$tmp/data2" --memory-url "http://$memory_addr" \
  --memory-max-inflight "$upstream_cap" 2>"$tmp/upstream.log" &
pids+=($!)
upstream_addr=$(wait_addr "$tmp/upstream.log")
upstream_token=$("$bridge" --data-dir "$tmp/data2" dev-token --tenant "$tenant")
upstream_call='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cyberos.memory.read_audit","arguments":{}}}'
out=$(curl -sS -X POST "http://$upstream_addr/mcp" -H 'content-type: application/json' \
  -H 'accept: application/json, text/event-stream' -H "authorization: Bearer $upstream_token" \
  -d "$upstream_call")
case "$out" in *'"isError":true'*|*'"error":'*|'') echo "read_audit did not answer a result: $out" >&2; exit 1 ;; esac

# load NAME ADDR BODY AUTH QPS → CSV of oha's answered requests in $tmp/NAME.csv
load() {
  local name=$1 addr=$2 body=$3 auth=$4 qps=$5
  local args=(--no-tui -z "$duration" -c "$connections" -m POST -d "$body"
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream'
    -H 'mcp-protocol-version: 2025-11-25' --output-format csv -o "$tmp/$name.csv")
  [ -n "$auth" ] && args+=(-H "authorization: Bearer $auth")
  [ "$qps" != closed ] && args+=(-q "$qps" --latency-correction)
  taskset -c 1 "$oha" "${args[@]}" "http://$addr/mcp" >/dev/null 2>"$tmp/$name.err" || {
    cat "$tmp/$name.err" >&2; return 1; }
}
secs=$(echo "$duration" | sed 's/s$//')

# summarise NAME → "answered ok refused other ok_rps ok_p99_ms refused_p99_ms"
summarise() {
  python3 - "$tmp/$1.csv" "$secs" <<'PY'
import csv, sys
ok, refused, other = [], [], 0
with open(sys.argv[1]) as f:
    for row in csv.DictReader(f):
        status, took = int(row["status"]), float(row["request-duration"])
        if status == 200:
            ok.append(took)
        elif status in (429, 503):
            refused.append(took)
        else:
            other += 1
def p99(xs):
    xs = sorted(xs)
    return xs[max(0, int(len(xs) * 0.99) - 1)] * 1000 if xs else 0.0
n = len(ok) + len(refused) + other
print(n, len(ok), len(refused), other, round(len(ok) / float(sys.argv[2])),
      "%.2f" % p99(ok), "%.2f" % p99(refused))
PY
}

results=$tmp/results
: >"$results"
for server in bridge peer upstream; do
  case $server in
    bridge) addr=$bridge_addr body=$call auth=$token ;;
    peer) addr=$peer_addr body=$peer_call auth= ;;
    upstream) addr=$upstream_addr body=$upstream_call auth=$upstream_token ;;
  esac
  echo "== $server: peak (closed loop, $connections connections, $duration)" >&2
  load "$server-warm" "$addr" "$body" "$auth" closed
  load "$server-peak" "$addr" "$body" "$auth" closed
  read -r _ _ _ _ peak _ _ < <(summarise "$server-peak")
  [ "${peak:-0}" -gt 0 ] || { echo "$server: no goodput at all" >&2; exit 1; }
  quarter=$(( peak / 4 ))
  echo "== $server: unloaded p99 at $quarter/s" >&2
  load "$server-unloaded" "$addr" "$body" "$auth" "$quarter"
  read -r _ _ _ _ _ p99_0 _ < <(summarise "$server-unloaded")
  echo "$server peak $peak $p99_0" >>"$results"
  for m in $rates; do
    qps=$(( peak * m ))
    echo "== $server: ${m}x the peak, $qps/s offered" >&2
    load "$server-x$m" "$addr" "$body" "$auth" "$qps"
    read -r answered ok refused other ok_rps ok_p99 ref_p99 < <(summarise "$server-x$m")
    offered=$(( qps * secs ))
    echo "$server x$m $qps $offered $answered $ok $refused $other $ok_rps $ok_p99 $ref_p99" >>"$results"
  done
done

awk '
  $2 == "peak" { peak[$1] = $3; p0[$1] = $4; next }
  {
    s = $1; rows[++n] = $0
  }
  END {
    printf "%-7s %-5s %9s %9s %9s %9s %9s %9s %10s %10s %10s\n", "server", "load", "offered/s", "answered", "ok", "refused", "no answer", "goodput", "ok p99 ms", "÷unloaded", "refused p99"
    for (s in peak) printf "%-7s %-5s peak %d/s (closed loop), unloaded p99 %.2f ms\n", s, "", peak[s], p0[s]
    verdict = "PASS"
    for (i = 1; i <= n; i++) {
      split(rows[i], f, " ")
      s = f[1]; good = f[9] / peak[s]; ratio = (p0[s] > 0) ? f[10] / p0[s] : 0
      printf "%-7s %-5s %9d %9d %9d %9d %9d %8.0f%% %10.2f %9.1f× %10.2f\n", s, f[2], f[3], f[5], f[6], f[7], f[4] - f[5], good * 100, f[10], ratio, f[11]
      if (s != "peer") {
        judged[s] = 1
        if (good < 0.9) { why[s] = why[s] sprintf(" goodput %.0f%% at %s;", good * 100, f[2]) }
        if (f[7] > 0 && f[11] >= 5) { why[s] = why[s] sprintf(" refusals p99 %.1f ms at %s;", f[11], f[2]) }
        if (ratio > 3) { why[s] = why[s] sprintf(" admitted p99 %.1f× unloaded at %s;", ratio, f[2]) }
      }
    }
    line = ""
    for (s in judged) {
      if (why[s] != "") verdict = "FAIL"
      line = line sprintf(" %s (%s):%s", s, (s == "bridge" ? "CPU-bound" : "upstream-bound"), (why[s] == "" ? " all met;" : why[s]))
    }
    printf "overload: %s —%s goals: goodput ≥ 90 %% of the peak, refusals < 5 ms, admitted p99 ≤ 3× unloaded\n", verdict, line
    exit verdict != "PASS"
  }' "$results"
