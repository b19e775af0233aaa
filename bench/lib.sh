# Shell helpers the benches share (sourced by bench/http.sh, bench/conns.sh,
# bench/overload.sh).

# wait_addr LOG: waits up to 10 s for `listening on ADDR` in LOG; prints ADDR, or the log
# on stderr and fails.
wait_addr() {
  local log=$1
  for _ in $(seq 1 100); do
    if grep -q 'listening on ' "$log" 2>/dev/null; then
      grep -o 'listening on [^ ]*' "$log" | head -1 | awk '{print $3}'
      return 0
    fi
    sleep 0.1
  done
  cat "$log" >&2
  return 1
}

# cpu_ticks PID: the process's user + system CPU, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# rss_kib PID: the process's resident set, in KiB.
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
