#!/usr/bin/env bash
# The whole test suite, from a clean checkout: installs what the tests need, then runs
# formatting and lint checks, the Rust tests (unit, integration against the built binary,
# doc tests) and the third-party client test (the official Python MCP SDK).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { printf '\n== %s\n' "$*" >&2; }

# --- Python MCP SDK (1.x speaks 2025-11-25) in a project-local venv -------------------
venv="$root/.venv"
if ! "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
  log "installing the Python MCP SDK into .venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'mcp>=1.20,<2'
fi

# --- Rust checks and tests ---------------------------------------------------------
log "cargo fmt --check"
cargo fmt --check
log "cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets -- -D warnings
log "cargo test"
cargo build --quiet
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
cargo test --no-fail-fast 2>&1 | tee "$out" || status=$?
passed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i+1) ~ /^passed/) p += $i } END { print p + 0 }' "$out")
failed=$(awk '/^test result:/ { for (i = 1; i < NF; i++) if ($(i+1) ~ /^failed/) f += $i } END { print f + 0 }' "$out")

# --- Third-party client over stdio ------------------------------------------------
log "official Python MCP SDK against the built binary"
data=$(mktemp -d)
if "$venv/bin/python" tests/python/sdk_stdio_client.py "$root/target/debug/cyberos-mcp-bridge" \
    "$root/tests/fixtures/skills" "$data" 2>"$data/stderr.log"; then
  passed=$((passed + 1))
else
  cat "$data/stderr.log" >&2
  failed=$((failed + 1))
fi
rm -rf "$data"

echo
echo "${passed} passed, ${failed} failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
