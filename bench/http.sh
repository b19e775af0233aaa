#!/usr/bin/env bash
# HTTP load test of the release binary (`--dev --transport http` on 127.0.0.1) with wrk,
# read against a floor measured in the same run: examples/http_floor.rs, an axum server
# that only parses each JSON-RPC body and answers a fixed result.
#
# Scenarios (each: a short warm-up, then DURATION with CONNECTIONS keep-alive
# connections): authenticated `tools/list` and authenticated `tools/call
# cyberos.skill.list_skills` on the fixture skills, each just after the floor given the
# same body (`floor:list`, `floor:call`), which it is read against. Every bridge request verifies its
# bearer token (stateless). The per-tenant tools/call rate limit is switched off
# (CYBEROS_HTTP_CALL_RATE=off) so the scenario measures the call path, not 429s; logging
# stays at the default (info: one line per tool call, to a file).
#
# Reports requests/s, p50/p99 latency, server CPU per request (utime+stime from
# /proc/PID/stat before/after) and the ratio of each to the floor; before the load, the
# bridge's idle RSS and its RSS holding IDLE_CONNS idle keep-alive connections (each has
# answered one authenticated ping; bench/idle_conns.py). The scenarios run ROUNDS times,
# interleaved, and each figure is the median of its rounds: on a shared VM the floor
# itself drifts by a third within minutes, and a floor and a call measured side by side
# drift together. The last line is the verdict: the CPU per authenticated tools/call
# against the floor's per request for the same body (the median of the rounds' ratios).
#
# usage: bench/http.sh   env: DURATION=6s ROUNDS=3 CONNECTIONS=32 THREADS=<nproc/2> IDLE_CONNS=1000
#                              BENCH_BRIDGE=<binary> (another build under the same harness,
#                              e.g. an older commit's release binary; default: this tree's)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. bench/lib.sh

duration=${DURATION:-6s}
rounds=${ROUNDS:-3}
connections=${CONNECTIONS:-32}
threads=${THREADS:-$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))}
idle_conns=${IDLE_CONNS:-1000}
tenant=00000000-0000-4000-8000-000000000001

if ! command -v wrk >/dev/null 2>&1; then
  echo "== installing wrk (apt-get)" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "wrk is not installed and this is not root: install wrk first" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

echo "== building release binaries" >&2
cargo build --release --quiet --bin cyberos-mcp-bridge --example http_floor
target=${CARGO_TARGET_DIR:-$root/target}
bridge=${BENCH_BRIDGE:-$target/release/cyberos-mcp-bridge}
floor="$target/release/examples/http_floor"

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

hz=$(getconf CLK_TCK)

cat >"$tmp/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
local token = os.getenv("BENCH_TOKEN")
if token and token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d\n",
    summary.requests, summary.duration,
    e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
LUA

"$floor" 127.0.0.1:0 2>"$tmp/floor.log" &
floor_pid=$!
pids+=("$floor_pid")
floor_addr=$(wait_addr "$tmp/floor.log")

CYBEROS_HTTP_CALL_RATE=off CYBEROS_LOG_FORMAT=text RUST_LOG=info "$bridge" --dev --transport http --listen 127.0.0.1:0 \
  --data-dir "$tmp/data" --skills-dir "$root/tests/fixtures/skills" 2>"$tmp/bridge.log" &
bridge_pid=$!
pids+=("$bridge_pid")
bridge_addr=$(wait_addr "$tmp/bridge.log")
token=$("$bridge" --data-dir "$tmp/data" dev-token --tenant "$tenant")

list='{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
call='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cyberos.skill.list_skills","arguments":{}}}'

# Sanity: each scenario answers 200 with a result before it is measured.
check() {
  local addr=$1 token=$2 body=$3
  local out
  out=$(curl -sS -X POST "http://$addr/mcp" -H 'content-type: application/json' \
    -H "authorization: Bearer $token" -d "$body")
  case "$out" in *'"result"'*) ;; *) echo "not a result from $addr: $out" >&2; exit 1 ;; esac
}
check "$floor_addr" "" "$list"
check "$bridge_addr" "$token" "$list"
check "$bridge_addr" "$token" "$call"

# RSS idle, then holding $idle_conns idle keep-alive connections (the server closes idle
# ones after 10 s, so they are held 8 s at most).
rss_idle=$(rss_kib "$bridge_pid")
echo "bridge RSS: idle ${rss_idle} KiB"
hold "idle keep-alive connections" "$idle_conns" 300 \
  python3 bench/idle_conns.py "$bridge_addr" "$idle_conns" "$token" 8

# run NAME PID ADDR TOKEN BODY → "name rps p50_us p99_us cpu_us_per_req errors"
run() {
  local name=$1 pid=$2 addr=$3 tok=$4 body=$5
  BENCH_BODY=$body BENCH_TOKEN=$tok wrk -t "$threads" -c "$connections" -d 2s \
    -s "$tmp/post.lua" "http://$addr/mcp" >/dev/null
  local before after out
  before=$(cpu_ticks "$pid")
  out=$(BENCH_BODY=$body BENCH_TOKEN=$tok wrk -t "$threads" -c "$connections" -d "$duration" \
    -s "$tmp/post.lua" "http://$addr/mcp")
  after=$(cpu_ticks "$pid")
  echo "$out" | awk -v name="$name" -v ticks=$((after - before)) -v hz="$hz" '
    /^RESULT/ {
      req = $2; secs = $3 / 1e6
      printf "%s %.0f %d %d %.1f %d\n", name, req / secs, $6, $7, ticks / hz * 1e6 / req, $4 + $5
    }'
}

echo "== $rounds rounds of wrk -t $threads -c $connections -d $duration (plus 2 s warm-up each) on $(nproc) CPUs" >&2
results=$(
  for round in $(seq 1 "$rounds"); do
    run floor:list "$floor_pid" "$floor_addr" "" "$list" | sed "s/^/$round /"
    run tools/list "$bridge_pid" "$bridge_addr" "$token" "$list" | sed "s/^/$round /"
    run floor:call "$floor_pid" "$floor_addr" "" "$call" | sed "s/^/$round /"
    run tools/call:list_skills "$bridge_pid" "$bridge_addr" "$token" "$call" | sed "s/^/$round /"
  done
)

# Per scenario: the median of its rounds (rps, p50, p99, CPU, errors summed); the ratios
# are each round's against that round's floor parsing the same body (the floor run just
# before it), then their median.
echo "$results" | awk -v conns="$connections" -v rounds="$rounds" '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  {
    r = $1; name = $2
    if (!(name in seen)) { seen[name] = 1; order[++k] = name }
    rps[name] = rps[name] " " $3; p50[name] = p50[name] " " $4; p99[name] = p99[name] " " $5
    cpu[name] = cpu[name] " " $6; errs[name] += $7
    if (name ~ /^floor/) { frps = $3; fcpu = $6; if (name == "floor:list") lcpu[r] = $6 }
    else { xrps[name] = xrps[name] " " (frps / $3); xcpu[name] = xcpu[name] " " ($6 / fcpu) }
    if (name == "tools/call:list_skills") {
      percall = percall sprintf(" %.2f×", $6 / fcpu)
      bylist = bylist " " ($6 / lcpu[r])
    }
  }
  END {
    printf "%-24s %10s %9s %9s %12s %8s %10s %10s\n", "scenario (median)", "req/s", "p50 µs", "p99 µs", "CPU µs/req", "errors", "÷floor rps", "×floor CPU"
    for (i = 1; i <= k; i++) {
      n = order[i]
      floor = (n ~ /^floor/)
      fr = floor ? 1 : median(xrps[n]); fc = floor ? 1 : median(xcpu[n])
      printf "%-24s %10d %9d %9d %12.1f %8d %10.2f %10.2f\n", n, median(rps[n]), median(p50[n]), median(p99[n]), median(cpu[n]), errs[n], fr, fc
    }
    n = "tools/call:list_skills"
    printf "\n(against the floor parsing the tools/list body instead: %.2f×)\n", median(bylist)
    printf "ratio to the axum floor, authenticated tools/call list_skills at %d connections: CPU per request %.2f× (median of %d rounds:%s; goal ≤ 2×); req/s %.2f× the floor'"'"'s\n", conns, median(xcpu[n]), rounds, percall, 1 / median(xrps[n])
  }'
