# Shell helpers the benches share (sourced by bench/http.sh, bench/conns.sh,
# bench/overload.sh). `hold` reads the caller's $tmp, $bridge_pid and $rss_idle.

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

# hold WHAT N TICKS CLIENT ARGS...: runs CLIENT (an idle_conns.py-like script that prints
# `held N` once it holds its N, then holds until stdin closes), waits up to TICKS × 50 ms
# for it, samples the bridge's RSS while all N are held and lets them go; reports the RSS
# and sets `each` (KiB each above $rss_idle); exits unless all N were held. With
# HOLD_CPU_S, also reports the bridge's CPU over that many seconds while they are held
# (the client must hold them that long).
hold() {
  local what=$1 n=$2 ticks=$3 out="$tmp/held.$RANDOM" pid held rss
  shift 3
  rm -f "$tmp/hold"; mkfifo "$tmp/hold"
  "$@" <"$tmp/hold" >"$out" &
  pid=$!
  exec 3>"$tmp/hold"
  for _ in $(seq 1 "$ticks"); do
    grep -q '^held' "$out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  held=$(awk '/^held/ { print $2 }' "$out")
  rss=$(rss_kib "$bridge_pid")
  local busy=
  if [ -n "${HOLD_CPU_S:-}" ] && [ "${held:-0}" -eq "$n" ]; then
    local t0 t1
    t0=$(cpu_ticks "$bridge_pid")
    sleep "$HOLD_CPU_S"
    t1=$(cpu_ticks "$bridge_pid")
    busy=$(awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v s="$HOLD_CPU_S" \
      'BEGIN { printf ", bridge CPU %.1f %% of a core while held", 100 * d / hz / s }')
  fi
  exec 3>&-
  wait "$pid" || { echo "opening $n $what failed" >&2; tail -5 "$tmp/bridge.log" >&2; exit 1; }
  [ "${held:-0}" -eq "$n" ] || { echo "held ${held:-0} of $n $what" >&2; exit 1; }
  each=$(awk -v r="$rss" -v i="$rss_idle" -v n="$n" 'BEGIN { printf "%.1f", (r - i) / n }')
  echo "$n $what: RSS ${rss} KiB, ${each} KiB each above idle${busy}"
}
