#!/usr/bin/env bash
# A bounded fault-and-load run of the release binary on loopback (bench/fault_load.py):
# authorised calls from three tenants, unauthenticated floods, CUO children killed
# mid-run, and the store unavailable for 40 s; on SQLite, and on Postgres when
# DATABASE_URL names an admin connection (scripts/test.sh shows how to start a throwaway
# cluster). Prints one JSON report per store; exits 1 if a task is left running.
#
# usage: bench/fault_load.sh [fault_load.py options, e.g. --load-s 75 --outage-s 40]
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== building the release binary" >&2
cargo build --release --quiet --bin cyberos-mcp-bridge
target=${CARGO_TARGET_DIR:-target}
pg=()
if [ -n "${DATABASE_URL:-}" ]; then
  pg=(--postgres-admin "$DATABASE_URL")
else
  echo "== DATABASE_URL is not set: the Postgres part does not run" >&2
fi
exec python3 bench/fault_load.py "$target/release/cyberos-mcp-bridge" tests/fixtures/skills "${pg[@]}" "$@"
