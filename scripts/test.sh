#!/usr/bin/env bash
# The whole test suite, from a clean checkout: installs what the tests need, then runs
# formatting and lint checks, the Rust tests (unit, integration against the built binary,
# doc tests), the third-party client tests (the official Python MCP SDK), the real
# hosts (Claude Code, the Codex CLI and the Gemini CLI, headless), the MCP conformance
# suite and the approval page in headless Chromium.
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
# Unless DATABASE_URL is already set: a throwaway cluster (scripts/pg.sh: a temp dir, a
# free port of 127.0.0.1 only, trust auth), stopped and deleted on exit. PostgreSQL is
# installed with apt-get only when initdb/pg_ctl cannot be found.
. "$root/scripts/pg.sh"
trap 'pg_stop' EXIT
trap 'exit 130' INT TERM
if [ -z "${DATABASE_URL:-}" ]; then
  log "starting a throwaway PostgreSQL"
  pg_start || exit 1
  export DATABASE_URL=$pg_url
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
trap 'rm -f "$out"; pg_stop' EXIT
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

# --- The cluster example: its own throwaway PostgreSQL, three bridges on HTTP, HAProxy in
# front (installed with apt-get when absent), a client that kills an instance mid-run and
# stops another with SIGTERM while a stream waits on it
# (examples/cluster/README.md; ~40 s). One test: it fails when any expectation does.
log "cluster: three instances on one PostgreSQL behind HAProxy (examples/cluster/run.sh)"
if examples/cluster/run.sh "$bin"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

# --- Chaos on the same cluster for 60 s (bench/chaos.sh; docs/chaos.md): SIGKILLs and
# restarts, PostgreSQL restarted twice, a 10 s TCP cut between an instance and PostgreSQL,
# CUO children killed, under load from two tenants; ~80 s. One test: it fails when any
# invariant does (nothing lost, nothing duplicated, no leak, no orphan, every error classed).
log "chaos: the cluster under faults for 60 s, with invariants (bench/chaos.sh)"
if bench/chaos.sh --seconds 60 "$bin"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

# --- Real MCP hosts: Claude Code, the Codex CLI and the Gemini CLI from npm (pinned by
# tests/hosts/package-lock.json, cached in tests/hosts/.cache; the Gemini CLI needs
# Node.js 20 or later), run headless against the built binary with a scripted model
# stand-in on 127.0.0.1: three hosts x stdio and HTTP x four cases, plus the approval case
# for the host that cannot ask (Gemini), each with its assertions (tests/hosts/expect.py).
log "real MCP hosts (Claude Code, Codex CLI, Gemini CLI) against the built binary"
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

# --- The official MCP conformance suite's server scenarios that apply (pinned by
# tests/conformance/package-lock.json, with the Node.js 22 it needs; ~10 s to install, cached
# in tests/conformance/.cache). Each scenario counts once.
log "MCP conformance suite (tests/conformance/run.sh)"
conf_log=$(mktemp)
tests/conformance/run.sh "$bin" | tee "$conf_log" || true
conf_p=$(sed -n 's/^conformance: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$conf_log")
conf_f=$(sed -n 's/^conformance: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$conf_log")
if [ -n "$conf_p" ]; then
  passed=$((passed + conf_p)); failed=$((failed + conf_f))
else
  echo "the conformance suite ended without a verdict" >&2; failed=$((failed + 1))
fi
rm -f "$conf_log"

# --- The approval page in a real browser: headless Chromium (Debian's, installed with
# apt-get when absent) signs in at a real OpenID Provider (oidc-provider, in the test's
# Node.js process) and approves or denies on the bridge's page (tests/approval/README.md;
# pinned by tests/approval/package-lock.json, cached in tests/approval/.cache; 12-20 s).
# Each scenario counts once; an install that fails counts as a failure.
log "approval page in headless Chromium against oidc-provider (tests/approval/run.sh)"
appr_log=$(mktemp)
if tests/approval/install.sh >&2; then
  tests/approval/run.sh "$bin" | tee "$appr_log" || true
  ap=$(sed -n 's/^approval: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$appr_log")
  af=$(sed -n 's/^approval: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$appr_log")
  if [ -n "$ap" ]; then
    passed=$((passed + ap)); failed=$((failed + af))
  else
    echo "the approval browser test ended without a verdict" >&2; failed=$((failed + 1))
  fi
else
  echo "the approval browser test could not be installed" >&2; failed=$((failed + 1))
fi
rm -f "$appr_log"

# --- The container image's build steps (the Dockerfile only runs this script; there is
# no container engine here): a stripped release binary that runs, staged as the image.
log "container image build steps (scripts/build-image.sh)"
image_out=$(mktemp -d)
# The steps are the image's; the optimizer is not what they check, so the suite spares
# itself fat LTO's long single-unit link (the image itself builds with the release profile).
if CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    scripts/build-image.sh "$image_out/rootfs"; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi
rm -rf "$image_out"

echo
echo "${passed} passed, ${failed} failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
