#!/usr/bin/env bash
# Chaos on the cluster example, with invariants (bench/chaos.py does the load, the faults
# and the checks; docs/chaos.md has a run's figures). On 127.0.0.1 only: a throwaway
# PostgreSQL, three bridges sharing it behind HAProxy (examples/cluster/cluster.sh), b1
# logging in through a TCP proxy that can cut it off (bench/tcp_cut.py), a skill whose
# entrypoint runs a child process, and dev tokens of two tenants. For SECONDS, clients of
# both tenants create, poll, wait for and resume tasks, make short calls and confirmed
# audit writes, while a random instance is SIGKILLed (and restarted) every 20-40 s,
# PostgreSQL is restarted (fast) twice, b1 is cut off PostgreSQL for 10 s and an
# instance's CUO children are killed every 8-15 s. At the end: every accepted task ended
# once, readers agree, one plugin.invoked row per completed workflow, every confirmed
# audit write stored once, resumed streams without a repeated step, no cross-tenant read,
# no process outliving its instance, RSS bounded, every error classed with a trace id.
# Everything is stopped and deleted on exit; exit 1 when an invariant fails.
#
#   bench/chaos.sh [--seconds N] [--seed S] [--release] [BIN]
#       N defaults to CHAOS_SECONDS or 300; BIN defaults to the debug (or, with --release,
#       the release) build, built first; CHAOS_RSS_LIMIT_MIB bounds each instance's RSS
#       (default 256); CHAOS_RECORDS=FILE keeps what the clients saw (JSON).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

seconds=${CHAOS_SECONDS:-300}
seed=""
profile=debug
bin=""
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --release) profile=release; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) bin=$(readlink -f "$1"); shift ;;
  esac
done
case $seconds in ''|*[!0-9]*) echo "--seconds takes a whole number of seconds" >&2; exit 2 ;; esac
if [ -z "$bin" ]; then
  if [ "$profile" = release ]; then
    (cd "$root" && cargo build --release --quiet --bin cyberos-mcp-bridge)
  else
    (cd "$root" && cargo build --quiet --bin cyberos-mcp-bridge)
  fi
  bin=$(readlink -f "${CARGO_TARGET_DIR:-$root/target}/$profile/cyberos-mcp-bridge")
else
  case $bin in */release/*) profile=release ;; */debug/*) profile=debug ;; *) profile=given ;; esac
fi
[ -x "$bin" ] || { echo "no bridge binary at $bin" >&2; exit 2; }

. "$root/examples/cluster/cluster.sh"
proxy_pid=""
pid_file=""
status=1
cleanup() {
  local p
  if [ "$status" -ne 0 ]; then cluster_logs; fi
  # The instances chaos.py restarted are not in inst_pid: it keeps their pids here.
  if [ -n "$pid_file" ] && [ -f "$pid_file" ]; then
    for p in $(cat "$pid_file"); do stop_pid "$p"; done
  fi
  [ -z "$proxy_pid" ] || stop_pid "$proxy_pid"
  cluster_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cluster_store_up "$bin" || exit 1

# A skill whose entrypoint runs a child of its own for a few seconds: what an instance's
# death must take along with its CUO child.
mkdir -p "$cluster_dir/skills/chaos-slow"
printf -- '---\nname: chaos-slow\ndescription: Waits a few seconds, then answers.\nentrypoint: run.sh\n---\nWait.\n' \
  >"$cluster_dir/skills/chaos-slow/SKILL.md"
printf '#!/bin/sh\ncat >/dev/null\nsleep 4\necho '"'"'{"slept": 4}'"'"'\n' >"$cluster_dir/skills/chaos-slow/run.sh"
chmod 755 "$cluster_dir/skills/chaos-slow/run.sh"
CLUSTER_BRIDGE_FLAGS+=(--skills-dir "$cluster_dir/skills")

# b1 reaches PostgreSQL through the cutting proxy.
proxy_port=$(free_port)
python3 "$here/tcp_cut.py" "$proxy_port" "$pg_port" 10 >"$cluster_dir/tcp_cut.log" 2>&1 &
proxy_pid=$!
for _ in $(seq 1 50); do
  grep -q '^tcp_cut: 127' "$cluster_dir/tcp_cut.log" 2>/dev/null && break
  sleep 0.1
done
grep -q '^tcp_cut: 127' "$cluster_dir/tcp_cut.log" || { cat "$cluster_dir/tcp_cut.log" >&2; exit 1; }
inst_db_url[1]="postgres://cyberos_bridge@127.0.0.1:$proxy_port/postgres"

cluster_instances_up "$bin" 1000 || exit 1
clog "b1 reaches PostgreSQL through bench/tcp_cut.py on 127.0.0.1:$proxy_port"

tokens=$cluster_dir/tokens
for t in 0000000a-0000-4000-8000-00000000000a 0000000b-0000-4000-8000-00000000000b; do
  printf '%s %s\n' "$t" "$("$bin" --data-dir "$cluster_dir/data" dev-token --tenant "$t" --ttl 2h)"
done >"$tokens"
pid_file=$cluster_dir/pids
instances=$(for i in 1 2 3; do printf '%s=%s,' "${inst_url[i]}" "${inst_pid[i]}"; done)

status=0
python3 "$here/chaos.py" --lb "$lb_url" --lb-sock "$lb_sock" --tokens "$tokens" \
  --instances "${instances%,}" --pid-file "$pid_file" --log-dir "$cluster_dir" \
  --sqlite "$cluster_dir/data/bridge.sqlite3" --pg-bin "$pg_bin" --pg-dir "$pg_dir" --pg-port "$pg_port" \
  --proxy-pid "$proxy_pid" --proxy-instance b1 --cut-s 10 --duration "$seconds" \
  --rss-limit-mib "${CHAOS_RSS_LIMIT_MIB:-256}" --build "$profile" ${seed:+--seed "$seed"} \
  ${CHAOS_RECORDS:+--records "$CHAOS_RECORDS"} || status=$?
exit "$status"
