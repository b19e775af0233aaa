#!/usr/bin/env bash
# The whole test suite, from a clean checkout: installs what the tests need, then runs
# formatting and lint checks, the Rust tests (unit, integration against the built binary,
# doc tests), the third-party client tests (the official Python MCP SDK) and the real
# hosts (Claude Code and the Codex CLI, headless).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { printf '\n== %s\n' "$*" >&2; }

# --- Python MCP SDK (pinned: a version that speaks 2025-11-25 and has the task client
# API) in a project-local venv -----------------------------------------------------------
venv="$root/.venv"
requirements="$root/tests/python/requirements.txt"
if ! "$venv/bin/pip" install --disable-pip-version-check --dry-run --no-deps \
    -r "$requirements" 2>/dev/null | grep -q '^Would install' &&
   "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
  : # the pinned SDK is already there
else
  log "installing the Python MCP SDK into .venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
fi

# --- PostgreSQL for the Postgres task-store tests ------------------------------------
# Unless DATABASE_URL is already set: a throwaway cluster in a temp dir, on a free port of
# 127.0.0.1 only (socket in the same dir, trust auth), stopped and deleted on exit.
# PostgreSQL is installed with apt-get only when initdb/pg_ctl cannot be found.
pg_dir=""
pg_bin=""
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
stop_postgres() {
  if [ -n "$pg_dir" ] && [ -d "$pg_dir" ]; then
    if [ -f "$pg_dir/data/postmaster.pid" ]; then
      as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$pg_dir"
  fi
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
trap 'stop_postgres' EXIT
trap 'exit 130' INT TERM
if [ -z "${DATABASE_URL:-}" ]; then
  if ! pg_bin=$(find_pg_bin); then
    log "installing PostgreSQL (apt-get)"
    if [ "$(id -u)" -ne 0 ]; then
      echo "PostgreSQL is not installed and this is not root: install it or set DATABASE_URL" >&2
      exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    pg_bin=$(find_pg_bin) || { echo "PostgreSQL installed but initdb/pg_ctl not found" >&2; exit 1; }
  fi
  log "starting a throwaway PostgreSQL ($pg_bin)"
  if [ "$(id -u)" -eq 0 ]; then
    # PostgreSQL refuses to run as root: the cluster belongs to the postgres user, in a
    # directory it can reach.
    id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    pg_dir=$(mktemp -d /tmp/cyberos-pg.XXXXXX)
    chmod 755 "$pg_dir"
    chown postgres: "$pg_dir"
  else
    pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/cyberos-pg.XXXXXX")
  fi
  as_postgres "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust --no-locale -E UTF8 >"$pg_dir/initdb.log" 2>&1 \
    || { cat "$pg_dir/initdb.log" >&2; exit 1; }
  pg_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_postgres "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
    -o "-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1" start >/dev/null \
    || { cat "$pg_dir/server.log" >&2; exit 1; }
  pg_isready=$pg_bin/pg_isready
  [ -x "$pg_isready" ] || pg_isready=pg_isready
  for _ in $(seq 1 60); do
    "$pg_isready" -q -h 127.0.0.1 -p "$pg_port" -U postgres && break
    sleep 0.5
  done
  "$pg_isready" -h 127.0.0.1 -p "$pg_port" -U postgres >&2 || { cat "$pg_dir/server.log" >&2; exit 1; }
  export DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/postgres"
fi

# --- systemd-analyze, which verifies the shipped unit (tests/e2e/deploy.rs) ----------
if ! command -v systemd-analyze >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  log "installing systemd for systemd-analyze (apt-get; nothing is started)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi

# --- Rust checks and tests ---------------------------------------------------------
log "cargo fmt --check"
cargo fmt --check
log "cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets -- -D warnings
log "cargo test"
cargo build --quiet
out=$(mktemp)
trap 'rm -f "$out"; stop_postgres' EXIT
status=0
cargo test --no-fail-fast 2>&1 | tee "$out" || status=$?
passed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i+1) ~ /^passed/) p += $i } END { print p + 0 }' "$out")
failed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i+1) ~ /^failed/) f += $i } END { print f + 0 }' "$out")

# --- Third-party clients: the official Python SDK over stdio and Streamable HTTP -----
# Each script starts the built binary itself; a failure shows its stderr and counts once.
run_client() {
  local script=$1 data
  data=$(mktemp -d)
  if "$venv/bin/python" "$script" "$bin" \
      "$root/tests/fixtures/skills" "$data" 2>"$data/stderr.log"; then
    passed=$((passed + 1))
  else
    cat "$data/stderr.log" >&2
    failed=$((failed + 1))
  fi
  rm -rf "$data"
}
bin="${CARGO_TARGET_DIR:-$root/target}/debug/cyberos-mcp-bridge"
log "official Python MCP SDK over stdio against the built binary"
run_client tests/python/sdk_stdio_client.py
log "official Python MCP SDK over Streamable HTTP against the built binary"
run_client tests/python/sdk_http_client.py

# --- Real MCP hosts: Claude Code and the Codex CLI from npm (pinned by
# tests/hosts/package-lock.json; ~17 s to download, cached in tests/hosts/.cache), run
# headless against the built binary with a scripted model stand-in on 127.0.0.1: two hosts
# x stdio and HTTP x four cases, each with its assertions (tests/hosts/expect.py).
log "real MCP hosts (Claude Code, Codex CLI) against the built binary"
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  log "installing Node.js and npm (apt-get)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
hosts_log=$(mktemp)
hosts_out=$(mktemp -d)
if tests/hosts/install.sh >&2; then
  tests/hosts/run.sh "$bin" --out "$hosts_out" | tee "$hosts_log" || true
  hp=$(sed -n 's/^hosts: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$hosts_log")
  hf=$(sed -n 's/^hosts: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$hosts_log")
  if [ -n "$hp" ]; then
    passed=$((passed + hp)); failed=$((failed + hf))
  else
    echo "the host tests ended without a verdict" >&2; failed=$((failed + 1))
  fi
else
  echo "the hosts could not be installed" >&2; failed=$((failed + 1))
fi
rm -rf "$hosts_log" "$hosts_out"

# --- The container image's build steps (the Dockerfile only runs this script; there is
# no container engine here): a stripped release binary that runs, staged as the image.
log "container image build steps (scripts/build-image.sh)"
image_out=$(mktemp -d)
if scripts/build-image.sh "$image_out/rootfs"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi
rm -rf "$image_out"

echo
echo "${passed} passed, ${failed} failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
