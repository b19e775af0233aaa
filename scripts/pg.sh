# A throwaway PostgreSQL cluster, for scripts to source (scripts/test.sh, examples/cluster,
# bench/cluster_load.sh): a temp dir, a free port of 127.0.0.1 only (socket in the same dir,
# trust auth), stopped and deleted by pg_stop. PostgreSQL is installed with apt-get only
# when initdb/pg_ctl cannot be found (and this is root).
#
#   pg_start [-c name=value ...]   start it (extra server options, e.g. for a bench); sets
#                                  pg_dir, pg_bin, pg_port and pg_url (the superuser's URL)
#   pg_stop                        stop it and delete its dir (safe to call twice)
#   pg_psql [psql args ...]        psql as the superuser against it
#   free_port                      a free TCP port of 127.0.0.1

pg_dir=""
pg_bin=""
pg_port=""
pg_url=""

# PostgreSQL refuses to run as root: as root, the cluster belongs to the postgres user.
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

find_pg_bin() {
  local d
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    d=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
    if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then echo "$d"; return 0; fi
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then echo "$d"; return 0; fi
  done
  return 1
}

pg_stop() {
  if [ -n "$pg_dir" ] && [ -d "$pg_dir" ]; then
    if [ -f "$pg_dir/data/postmaster.pid" ]; then
      as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$pg_dir"
  fi
  pg_dir=""
}

pg_start() {
  local opts="" o
  while [ $# -gt 0 ]; do
    [ "$1" = "-c" ] && [ $# -ge 2 ] || { echo "pg_start: expected -c name=value" >&2; return 1; }
    opts="$opts -c $2"
    shift 2
  done
  if ! pg_bin=$(find_pg_bin); then
    if [ "$(id -u)" -ne 0 ]; then
      echo "PostgreSQL is not installed and this is not root: install it" >&2
      return 1
    fi
    echo "installing PostgreSQL (apt-get)" >&2
    apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null || return 1
    pg_bin=$(find_pg_bin) || { echo "PostgreSQL installed but initdb/pg_ctl not found" >&2; return 1; }
  fi
  if [ "$(id -u)" -eq 0 ]; then
    id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    pg_dir=$(mktemp -d /tmp/cyberos-pg.XXXXXX) || return 1
    chmod 755 "$pg_dir"
    chown postgres: "$pg_dir"
  else
    pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/cyberos-pg.XXXXXX") || return 1
  fi
  as_postgres "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust --no-locale -E UTF8 >"$pg_dir/initdb.log" 2>&1 \
    || { cat "$pg_dir/initdb.log" >&2; return 1; }
  pg_port=$(free_port) || return 1
  as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
    -o "-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1$opts" start >/dev/null \
    || { cat "$pg_dir/server.log" >&2; return 1; }
  local ready=$pg_bin/pg_isready
  [ -x "$ready" ] || ready=pg_isready
  for o in $(seq 1 60); do
    "$ready" -q -h 127.0.0.1 -p "$pg_port" -U postgres && break
    sleep 0.5
  done
  "$ready" -h 127.0.0.1 -p "$pg_port" -U postgres >&2 || { cat "$pg_dir/server.log" >&2; return 1; }
  pg_url="postgres://postgres@127.0.0.1:$pg_port/postgres"
}

pg_psql() {
  local psql=$pg_bin/psql
  [ -x "$psql" ] || psql=psql
  "$psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres "$@"
}
