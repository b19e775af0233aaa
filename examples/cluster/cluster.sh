# The cluster, for scripts to source (examples/cluster/run.sh, bench/cluster_load.sh), all on
# 127.0.0.1: a throwaway PostgreSQL (scripts/pg.sh), three bridge instances on Streamable
# HTTP sharing it and one identity (the dev key of one data dir), and HAProxy in front
# (round robin, health checks on /healthz, a stats socket).
#
#   cluster_up BIN PACE_MS [-c name=value ...]  start it; CUO runs sleep PACE_MS before each
#                                              workflow step; -c options go to PostgreSQL
#   cluster_down                               stop everything and delete the dir
#
# cluster_up is the two halves below, for a script that puts something between the store
# and the instances (bench/chaos.sh points one instance through a TCP proxy):
#   cluster_store_up BIN [-c name=value ...]   the dir, PostgreSQL, the migration, the role,
#                                              the dev key and token; sets cluster_app_url
#   cluster_instances_up BIN PACE_MS           the instances and HAProxy; instance i logs in
#                                              with inst_db_url[i] when set, else cluster_app_url
#
# Extra bridge flags go in the array CLUSTER_BRIDGE_FLAGS (e.g. the bench switches the
# per-tenant rate limit off). cluster_up sets: cluster_dir, lb_url, lb_sock (HAProxy's stats socket), token_file (a dev
# token of the local tenant), inst_url[1..3], inst_pid[1..3], lb_pid, and pg_* (scripts/pg.sh).

cluster_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$cluster_root/scripts/pg.sh"

cluster_dir=""
lb_url=""
lb_sock=""
lb_pid=""
token_file=""
cluster_app_url=""
inst_url=()
inst_pid=()
inst_db_url=()
CLUSTER_BRIDGE_FLAGS=("${CLUSTER_BRIDGE_FLAGS[@]}")
readonly CLUSTER_INSTANCES=3
readonly CLUSTER_TENANT=00000000-0000-4000-8000-000000000001

clog() { printf '[cluster] %s\n' "$*" >&2; }

# HAProxy from Debian's packages, installed when absent (as root, e.g. in CI).
need_haproxy() {
  command -v haproxy >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ]; then
    clog "HAProxy is not installed and this is not root: apt-get install haproxy"
    return 1
  fi
  clog "installing HAProxy (apt-get)"
  apt-get update -qq || return 1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null || return 1
}

# Waits (at most 30 s) for instance $1's "listening on ADDR" log line; prints ADDR.
listen_addr() {
  local log=$1 pid=$2 addr _
  for _ in $(seq 1 300); do
    addr=$(sed -n 's/.*listening on \([0-9.:]*\).*/\1/p' "$log" | head -n 1)
    [ -n "$addr" ] && { echo "$addr"; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  clog "instance did not start:"; tail -n 20 "$log" >&2
  return 1
}

cluster_up() {
  local bin=$1 pace=$2
  shift 2
  cluster_store_up "$bin" "$@" || return 1
  cluster_instances_up "$bin" "$pace"
}

cluster_store_up() {
  local bin=$1
  shift
  need_haproxy || return 1
  cluster_dir=$(mktemp -d /tmp/cyberos-cluster.XXXXXX) || return 1
  pg_start "$@" || return 1
  # The owner (the superuser here) migrates; the bridges log in as a NOINHERIT role that
  # holds nothing but plugin_host_app, so row-level security binds them.
  "$bin" migrate --database-url "$pg_url" >"$cluster_dir/migrate.log" 2>&1 \
    || { cat "$cluster_dir/migrate.log" >&2; return 1; }
  pg_psql -c "CREATE ROLE cyberos_bridge LOGIN NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS" \
    -c "GRANT plugin_host_app TO cyberos_bridge" || return 1
  cluster_app_url="postgres://cyberos_bridge@127.0.0.1:$pg_port/postgres"
  # One data dir for all three: its dev key (made here, before any instance starts) is
  # the identity every instance verifies tokens with.
  mkdir -m 700 "$cluster_dir/data"
  token_file=$cluster_dir/token
  (umask 077 && "$bin" --data-dir "$cluster_dir/data" dev-token --tenant "$CLUSTER_TENANT" >"$token_file") \
    || return 1
}

cluster_instances_up() {
  local bin=$1 pace=$2 i addr port
  for i in $(seq 1 $CLUSTER_INSTANCES); do
    (cd "$cluster_dir" && exec env RUST_LOG=info CYBEROS_LOG_FORMAT=text "$bin" --dev \
      --transport http --listen 127.0.0.1:0 --data-dir "$cluster_dir/data" \
      --database-url "${inst_db_url[i]:-$cluster_app_url}" --cuo-command "$bin cuo-runner --pace-ms $pace" "${CLUSTER_BRIDGE_FLAGS[@]}" \
      </dev/null >/dev/null 2>"$cluster_dir/b$i.log") &
    inst_pid[i]=$!
    disown "${inst_pid[i]}"
    addr=$(listen_addr "$cluster_dir/b$i.log" "${inst_pid[i]}") || return 1
    inst_url[i]="http://$addr"
  done
  port=$(free_port) || return 1
  lb_sock=$cluster_dir/haproxy.sock
  {
    printf 'global\n  maxconn 2000\n  stats socket %s mode 600 level admin\n' "$lb_sock"
    printf 'defaults\n  mode http\n  timeout connect 2s\n  timeout client 70s\n  timeout server 70s\n'
    # A request sent to an instance that refuses the connection is retried on another.
    printf '  retries 2\n  option redispatch 1\n'
    printf 'frontend mcp\n  bind 127.0.0.1:%s\n  default_backend bridges\n' "$port"
    printf 'backend bridges\n  balance roundrobin\n  option httpchk GET /healthz\n'
    printf '  http-check expect status 200\n  default-server inter 500ms fall 2 rise 1\n'
    printf '  http-response set-header X-Served-By %%[srv_name]\n'
    for i in $(seq 1 $CLUSTER_INSTANCES); do
      printf '  server b%s %s check\n' "$i" "${inst_url[i]#http://}"
    done
  } >"$cluster_dir/haproxy.cfg"
  haproxy -c -q -f "$cluster_dir/haproxy.cfg" || return 1
  haproxy -db -f "$cluster_dir/haproxy.cfg" </dev/null >"$cluster_dir/haproxy.log" 2>&1 &
  lb_pid=$!
  disown "$lb_pid"
  lb_url="http://127.0.0.1:$port"
  python3 "$cluster_root/examples/cluster/cluster.py" wait-up "$lb_sock" $CLUSTER_INSTANCES 20 \
    || { clog "HAProxy did not see $CLUSTER_INSTANCES instances up:"; cat "$cluster_dir/haproxy.log" >&2; return 1; }
  clog "PostgreSQL $(pg_psql -At -c 'SHOW server_version') on 127.0.0.1:$pg_port (bridges log in as cyberos_bridge)"
  for i in $(seq 1 $CLUSTER_INSTANCES); do clog "b$i: pid ${inst_pid[i]}, ${inst_url[i]}"; done
  clog "$(haproxy -v | head -n 1 | cut -d' ' -f1-3) on $lb_url (round robin, health checks on /healthz)"
}

# Shows the last lines of every log (for a failed run).
cluster_logs() {
  local f
  [ -n "$cluster_dir" ] && [ -d "$cluster_dir" ] || return 0
  for f in "$cluster_dir"/b*.log "$cluster_dir/haproxy.log"; do
    [ -f "$f" ] || continue
    printf -- '--- %s (last lines)\n' "$(basename "$f")" >&2
    tail -n 15 "$f" >&2
  done
}

# Stops a process we started: SIGTERM, then SIGKILL if it is still there after 15 s.
stop_pid() {
  local p=$1 _
  kill "$p" 2>/dev/null || return 0
  for _ in $(seq 1 150); do
    kill -0 "$p" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$p" 2>/dev/null || true
}

# Never fails (it runs from EXIT traps under `set -e`).
cluster_down() {
  local p
  for p in "${inst_pid[@]}" "$lb_pid"; do
    [ -z "$p" ] || stop_pid "$p"
  done
  inst_pid=()
  inst_db_url=()
  lb_pid=""
  pg_stop
  if [ -n "$cluster_dir" ]; then rm -rf "$cluster_dir"; fi
  cluster_dir=""
}
