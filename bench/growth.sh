#!/usr/bin/env bash
# Cost growth with concurrency: bench/http.sh at each connection count in LEVELS, each
# reporting the server CPU per authenticated `tools/call` as a multiple of the axum floor
# measured beside it at the same concurrency. The last line is the verdict: the largest of
# those multiples against the smallest, flat within 25 % (#49).
#
# usage: bench/growth.sh   env: LEVELS="1 32 256 1024" ROUNDS=3 DURATION=4s
#                               BENCH_BRIDGE=<binary> (as bench/http.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

levels=${LEVELS:-1 32 256 1024}
ulimit -n "$(( 4096 > $(ulimit -Hn) ? $(ulimit -Hn) : 4096 ))"
out=$(mktemp)
trap 'rm -f "$out" "$out.levels"' EXIT

for n in $levels; do
  echo "== $n connections" >&2
  CONNECTIONS=$n ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-4s} IDLE_CONNS=1 bench/http.sh | tee -a "$out" >&2
  x=$(sed -n 's/.*at \([0-9]*\) connections: CPU per request \([0-9.]*\)×.*/\2/p' "$out" | tail -1)
  [ -n "$x" ] || { echo "bench/http.sh gave no ratio at $n connections" >&2; exit 1; }
  echo "$n $x" >>"$out.levels"
done

echo
printf '%-12s %s\n' connections "CPU per call ÷ floor's"
awk '{ printf "%-12s %.2f×\n", $1, $2 }' "$out.levels"
awk '
  NR == 1 || $2 < lo { lo = $2 }
  NR == 1 || $2 > hi { hi = $2 }
  END {
    spread = hi / lo
    verdict = (spread <= 1.25) ? "PASS" : "FAIL"
    printf "growth: %s — the multiple of the floor spans %.2f×–%.2f× across the levels, %.0f %% (goal: flat within 25 %%)\n", verdict, lo, hi, (spread - 1) * 100
    exit verdict != "PASS"
  }' "$out.levels"
