#!/usr/bin/env bash
# The capacity of the cluster example (examples/cluster: three bridges on one throwaway
# PostgreSQL behind HAProxy, all on 127.0.0.1), measured in bounded phases with the store's
# own counters (pg_stat_statements with track=all, so the statements inside the SECURITY
# DEFINER functions count too; COMMITs there are the transactions), reset before each,
# and the tasks table's row counters (pg_stat_user_tables) at the end:
#
#   idle   IDLE_S with no load: what three idle instances cost the store
#   calls  SECONDS of tools/call cyberos.cuo.list_personas by wrk, CONCURRENCY connections
#   tasks  SECONDS of workflow tasks (create, then tasks/get every 100 ms until the end),
#          CONCURRENCY workers, each a tenant of its own (a tenant keeps at most 1000
#          tasks); CUO runs unpaced, so this is the bridge's own cost per task
#
# Each phase prints its rate, latency, CPU per component (bench/cluster_load.py) and the
# store's transactions and write statements (calls, rows). The per-tenant rate limit is
# off (--http-call-rate off) so the phases measure the cluster, not 429s.
#
# usage: bench/cluster_load.sh [BIN]   (default: build the release binary)
#        env: SECONDS_PER_PHASE=20 IDLE_S=20 CONCURRENCY=24
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
phase_s=${SECONDS_PER_PHASE:-20}
idle_s=${IDLE_S:-20}
conc=${CONCURRENCY:-24}

if [ $# -ge 1 ]; then
  bin=$(readlink -f "$1")
else
  (cd "$root" && cargo build --release --quiet)
  bin=$(readlink -f "${CARGO_TARGET_DIR:-$root/target}/release/cyberos-mcp-bridge")
fi

if ! command -v wrk >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || { echo "wrk is not installed and this is not root: install wrk" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi

CLUSTER_BRIDGE_FLAGS=(--http-call-rate off)
. "$root/examples/cluster/cluster.sh"
trap 'cluster_down' EXIT
trap 'exit 130' INT TERM
# Starts the cluster (CUO paced $1 ms) with pg_stat_statements; sets tokens (a file: one dev
# token a line, a tenant per worker) and pids (name=pid for cluster_load.py).
start_cluster() {
  cluster_up "$bin" "$1" -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all \
    || { cluster_logs; return 1; }
  pg_psql -c "CREATE EXTENSION pg_stat_statements" || return 1
  tokens=$cluster_dir/tokens
  local i
  for i in $(seq 1 "$conc"); do
    "$bin" --data-dir "$cluster_dir/data" dev-token --tenant "$(printf '00000000-0000-4000-8000-%012d' "$i")"
  done >"$tokens" || return 1
  pids="b1=${inst_pid[1]},b2=${inst_pid[2]},b3=${inst_pid[3]},haproxy=$lb_pid,postgres=$(head -n 1 "$pg_dir/data/postmaster.pid")"
}
start_cluster 0 || exit 1

reset_counters() {
  pg_psql -c "SELECT pg_stat_statements_reset(), pg_stat_reset()" >/dev/null
}

# The store's side of a phase of $1 seconds: transactions, and every statement that
# writes (calls, rows), the ones run inside the definer functions included.
store_report() {
  local secs=$1
  pg_psql -At -c "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query = 'COMMIT'" |
    awk -v s="$secs" '{ printf "  store: %d transactions, %.1f/s (%.2f/s per instance)\n", $1, $1 / s, $1 / s / 3 }'
  echo "  write statements (calls, rows):"
  pg_psql -At -F$'\t' -c "
    SELECT calls, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110)
      FROM pg_stat_statements
     WHERE query ~* '^\s*(INSERT|UPDATE|DELETE|SELECT plugin_host\.renew_leases)'
     ORDER BY calls DESC" | awk -F'\t' '{ printf "    %7d %7d  %s\n", $1, $2, $3 }'
}

echo "== $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== idle: ${idle_s} s, no requests"
reset_counters
sleep "$idle_s"
store_report "$idle_s"
echo "  every statement (calls):"
pg_psql -At -F$'\t' -c "
  SELECT calls, left(regexp_replace(query, '\s+', ' ', 'g'), 110) FROM pg_stat_statements
   ORDER BY calls DESC LIMIT 12" | awk -F'\t' '{ printf "    %7d  %s\n", $1, $2 }'

status=0
for mode in calls tasks; do
  echo "== $mode: ${phase_s} s, $conc workers through the balancer"
  reset_counters
  python3 "$here/cluster_load.py" "$mode" "$lb_url" "$tokens" "$phase_s" "$conc" "$pids" || status=1
  store_report "$phase_s"
done
# The table's own counters since the tasks phase began (an idle backend flushes them
# within 10 s), against the statements' rows above.
sleep 11
pg_psql -At -F' ' -c "SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables WHERE relname = 'tasks'" |
  awk '{ printf "plugin_host.tasks rows since the tasks phase: %d inserted, %d updated, %d deleted\n", $1, $2, $3 }'
python3 "$root/examples/cluster/cluster.py" stats "$lb_sock"

# Long runs: the same cluster with a paced CUO (three steps of LONG_PACE_MS each), one task
# per worker: progress and lease renewals per task.
long_pace=${LONG_PACE_MS:-7000}
echo "== long: $conc tasks of 3 steps x ${long_pace} ms, one per worker, polled every second"
cluster_down
start_cluster "$long_pace" || exit 1
reset_counters
python3 "$here/cluster_load.py" long "$lb_url" "$tokens" "$((3 * long_pace / 1000))" "$conc" "$pids" || status=1
store_report "$((3 * long_pace / 1000))"
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
