#!/usr/bin/env bash
# The capacity of the cluster example (examples/cluster: three bridges on one throwaway
# PostgreSQL behind HAProxy, all on 127.0.0.1), measured in bounded phases with the store's
# own counters (pg_stat_statements with track=all, so the statements inside the SECURITY
# DEFINER functions count too; pg_stat_database; pg_stat_user_tables), reset before each:
#
#   idle   IDLE_S with no load: what three idle instances cost the store
#   calls  SECONDS of tools/call cyberos.cuo.list_personas, CONCURRENCY workers
#   tasks  SECONDS of workflow tasks (create, then tasks/get every 100 ms until the end),
#          CONCURRENCY workers; CUO runs unpaced, so this is the bridge's own cost per task
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

CLUSTER_BRIDGE_FLAGS=(--http-call-rate off)
. "$root/examples/cluster/cluster.sh"
trap 'cluster_down' EXIT
trap 'exit 130' INT TERM
cluster_up "$bin" 0 -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all \
  || { cluster_logs; exit 1; }
pg_psql -c "CREATE EXTENSION pg_stat_statements"
pids="b1=${inst_pid[1]},b2=${inst_pid[2]},b3=${inst_pid[3]},haproxy=$lb_pid,postgres=$(head -n 1 "$pg_dir/data/postmaster.pid")"

reset_counters() {
  pg_psql -c "SELECT pg_stat_statements_reset(), pg_stat_reset()" >/dev/null
}

# The store's side of a phase of $1 seconds: transactions, and every statement that
# writes (calls, rows), the ones run inside the definer functions included.
store_report() {
  local secs=$1
  sleep 1.5  # backends flush their table counters when idle (PostgreSQL 15: within 1 s)
  pg_psql -At -F' ' -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'" |
    awk -v s="$secs" '{ printf "  store: %d transactions committed, %.1f/s (%.2f/s per instance)\n", $1, $1 / s, $1 / s / 3 }'
  pg_psql -At -F' ' -c "SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables WHERE relname = 'tasks'" |
    awk '{ printf "  plugin_host.tasks rows: %d inserted, %d updated, %d deleted\n", $1, $2, $3 }'
  echo "  write statements (calls, rows):"
  pg_psql -At -F$'\t' -c "
    SELECT calls, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 110)
      FROM pg_stat_statements
     WHERE query ~* '^\s*(INSERT|UPDATE|DELETE|SELECT plugin_host\.(renew_leases|sweep))'
     ORDER BY calls DESC" | awk -F'\t' '{ printf "    %7d %7d  %s\n", $1, $2, $3 }'
}

echo "== idle: ${idle_s} s, no requests"
reset_counters
sleep "$idle_s"
store_report "$idle_s"

status=0
for mode in calls tasks; do
  echo "== $mode: ${phase_s} s, $conc workers through the balancer"
  reset_counters
  python3 "$here/cluster_load.py" "$mode" "$lb_url" "$token_file" "$phase_s" "$conc" "$pids" || status=1
  store_report "$phase_s"
done
python3 "$root/examples/cluster/cluster.py" stats "$lb_sock"
exit "$status"
